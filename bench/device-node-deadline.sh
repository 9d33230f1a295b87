#!/bin/bash
# After device-node.sh: the NCCL deadline on 2 real GPUs with a MOCK libnccl whose ncclCommInitAll never returns.
G=$GDRPROV
echo "== 2 GPUs, MOCK libnccl hanging in init: bench nccl --init-timeout 5"
time LD_LIBRARY_PATH=$MOCK "$G" bench nccl --init-timeout 5; echo rc=$?
echo "== verify with the MOCK libnccl (default 60 s init deadline)"
time LD_LIBRARY_PATH=$MOCK "$G" verify profiles/gds-iommu-off.yaml --no-loopback --format json > "$OUT/verify-mock.json"; echo rc=$?
python3 -c "import json;d=json.load(open('$OUT/verify-mock.json'));[print(c['name'],c['status'],c.get('evidence','')[:400]) for c in d['checks'] if c['name'] in ('nccl-allreduce',)]"
echo "children left: $(pgrep -f 'nccl --child' | wc -l)"
echo "== bench copy --no-numa-pin --concurrent"; $G bench copy --concurrent --no-numa-pin; uptime
