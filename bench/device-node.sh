#!/bin/bash
# The whole GPU node on a lent multi-GPU machine (issue 35): inventory snapshot, bench copy --concurrent,
# bench p2p, bench nccl (and with NCCL_P2P_DISABLE=1), verify, one GPU and none, then nvbandwidth in the
# same run. Usage on the device: GDRPROV=path/to/gdrprov NVBW=path/to/nvbandwidth-on-device.sh OUT=dir \
#   bash bench/device-node.sh   (NVBW: ../shared/peers/nvbandwidth-on-device.sh, copied beside .peer/).
exec > >(tee "$OUT/log.txt") 2>&1
G="$GDRPROV"
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv; uptime
echo "== inventory"; "$G" inventory --snapshot /tmp/snap3; echo rc=$?; tar czf "$OUT"/snap.tgz -C /tmp snap3
"$G" inventory > "$OUT"/inventory.txt 2>&1; echo rc=$?; tail -8 "$OUT"/inventory.txt
echo "== concurrent"; "$G" bench copy --concurrent --format json > "$OUT"/concurrent.json; echo rc=$?; "$G" bench copy --concurrent; echo rc=$?
echo "== p2p"; "$G" bench p2p --format json > "$OUT"/p2p.json; echo rc=$?; "$G" bench p2p; echo rc=$?
echo "== nccl"; "$G" bench nccl --format json > "$OUT"/nccl.json; echo rc=$?; "$G" bench nccl; echo rc=$?
echo "== nccl P2P disabled"; NCCL_P2P_DISABLE=1 "$G" bench nccl --size 64M,256M; echo rc=$?
echo "== verify"; time "$G" verify profiles/gds-iommu-off.yaml --no-loopback --format json > "$OUT"/verify.json; echo rc=$?
python3 -c "import json;d=json.load(open('$OUT/verify.json'));h=d.get('health',{});print('node_seconds',h.get('node_seconds'));[print(c['name'],c['status'],c.get('evidence','')[:700]) for c in d['checks'] if c['name'] in ('copy-bandwidth','nvlink','gpu-fabric','gpu-p2p','nccl-allreduce')]"
echo "== verify P2P disabled for NCCL"; NCCL_P2P_DISABLE=1 "$G" verify profiles/gds-iommu-off.yaml --no-loopback --format json > /tmp/vp.json; python3 -c "import json;d=json.load(open('/tmp/vp.json'));[print(c['name'],c['status'],c.get('evidence','')[:400]) for c in d['checks'] if c['name'] in ('nccl-allreduce',)]"
echo "== doctor"; "$G" doctor profiles/gds-iommu-off.yaml 2>&1 | grep -i -B1 -A3 "nvlink\|p2p\|fabric\|nccl" | head -30
echo "== one GPU"; CUDA_VISIBLE_DEVICES=0 "$G" bench nccl; echo rc=$?; CUDA_VISIBLE_DEVICES=0 "$G" verify profiles/gds-iommu-off.yaml --no-loopback --format json > /tmp/v1.json; python3 -c "import json;d=json.load(open('/tmp/v1.json'));[print(c['name'],c['status'],c.get('evidence','')[:300]) for c in d['checks'] if c['name'] in ('copy-bandwidth','gpu-p2p','nccl-allreduce','nvlink')]"
echo "== no GPU"; CUDA_VISIBLE_DEVICES="" "$G" bench nccl; echo rc=$?
echo "== nvbandwidth"; time bash "$NVBW" > "$OUT"/nvbw.txt 2>&1; grep -A6 "Running\|SUM" "$OUT"/nvbw.txt | grep -v "^$" | head -80; uptime
