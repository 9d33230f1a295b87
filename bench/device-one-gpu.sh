#!/bin/bash
# What the single-GPU lent machine can show of issue 35's NUMA pinning and NCCL deadline: bench copy
# with and without binding the copy's thread to the GPU's NUMA node, beside nvbandwidth's
# host_to_device / device_to_host CE tests in the same run; verify skipping the multi-GPU checks with
# the reason; and the NCCL child's deadline on a real GPU (a MOCK libnccl whose ncclCommInitAll never
# returns, built from tests/mock/libnccl-hangs-in-init.c, and the real NCCL refusing one GPU twice).
# Usage on the device, from the repository root: GDRPROV=devbin/gdrprov MOCK=devbin/mock \
#   NVBW_DIR=devbin OUT=dir bash bench/device-one-gpu.sh
# (NVBW_DIR holds nvbandwidth-on-device.sh and its .peer/, see ../shared/peers/nvbandwidth-on-device.sh.)
exec > >(tee "$OUT/log.txt") 2>&1
G="$GDRPROV"
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv; uptime; nproc
BUS=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr '[:upper:]' '[:lower:]' | sed 's/^0000//')
echo "GPU $BUS numa_node=$(cat /sys/bus/pci/devices/"$BUS"/numa_node) local_cpulist=$(cat /sys/bus/pci/devices/"$BUS"/local_cpulist)"
lscpu | grep -i numa
echo "== bench copy, pinned / unpinned, alternating"
for i in 1 2; do
  $G bench copy --format json > "$OUT/copy-pinned-$i.json"; echo "rc=$?"
  $G bench copy --no-numa-pin --format json > "$OUT/copy-unpinned-$i.json"; echo "rc=$?"
done
$G bench copy; echo "rc=$?"
$G bench copy --no-numa-pin; echo "rc=$?"
echo "== restricted to CPU 1 by taskset (the choice keeps to the allowed CPUs)"
taskset -c 1 "$G" bench copy --runs 3; echo "rc=$?"
echo "== bench copy --concurrent (one GPU: nvbandwidth's method, alone)"
$G bench copy --concurrent --format json > "$OUT/concurrent.json"; echo "rc=$?"; $G bench copy --concurrent; echo "rc=$?"
$G bench copy --concurrent --no-numa-pin; echo "rc=$?"
echo "== verify (one GPU: the multi-GPU checks say why they skip)"
time $G verify profiles/gds-iommu-off.yaml --no-loopback --format json > "$OUT/verify.json"; echo "rc=$?"
python3 -c "import json;d=json.load(open('$OUT/verify.json'));[print(c['name'],c['status'],c.get('evidence','')[:500]) for c in d['checks'] if c['name'] in ('copy-bandwidth','nvlink','gpu-fabric','gpu-p2p','nccl-allreduce')]"
echo "== bench nccl, one GPU"; $G bench nccl; echo "rc=$?"
echo "== NCCL child, real NCCL, GPU 0 twice (NCCL refuses: the child's error comes back)"
time $G bench nccl --gpu 0,0 --size 8M; echo "rc=$?"
echo "== NCCL child, MOCK libnccl that hangs in ncclCommInitAll, --init-timeout 5"
time LD_LIBRARY_PATH="$MOCK" $G bench nccl --gpu 0,0 --size 8M --init-timeout 5; echo "rc=$?"
LD_LIBRARY_PATH="$MOCK" $G bench nccl --gpu 0,0 --size 8M --init-timeout 5 --format json > "$OUT/nccl-hang.json"; echo "rc=$?"
sleep 1; echo "children left: $(pgrep -f 'nccl --child' | wc -l)"
echo "== nvbandwidth host_to_device / device_to_host CE, same run"
uptime
(cd "$NVBW_DIR" && time bash nvbandwidth-on-device.sh -t host_to_device_memcpy_ce device_to_host_memcpy_ce) > "$OUT/nvbw.txt" 2>&1
grep -B2 -A4 "memcpy CE" "$OUT/nvbw.txt" | head -40; tail -3 "$OUT/nvbw.txt"
echo "== bench copy again after nvbandwidth"
$G bench copy; $G bench copy --no-numa-pin
uptime
