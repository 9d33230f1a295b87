#!/usr/bin/env bash
# Scenario: loopback on rxe0: gdrprov bench loopback --memory host passes its data check; gdrprov/ib_write_bw
# ratio per message size; the NIC dma-buf probe reports "unsupported" on rxe
# Same device, same sizes, same iteration counts for both tools (counts, not durations: a 1 MiB write under
# TCG on a busy host can outlast a whole duration window).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov bench loopback -- --iters
require_gdrprov bench probe

g=$(vm_shared)
nic=$(vm_nic $g)
vm_rxe $g "$nic" rxe0
ip=$(vm_ssh $g "ip -o -4 addr show dev $nic | awk '{print \$4}' | cut -d/ -f1")
gidx=$(vm_rxe_gid_index $g rxe0 "$ip")

# The NIC dma-buf probe: rxe implements no dma-buf MRs.
out=$(vm_ssh $g "gdrprov bench probe --device rxe0" 2>&1) || true
printf '%s\n' "$out" | sed 's/^/    probe| /'
printf '%s' "$out" | grep -qiE 'unsupported|not supported' || fail "bench probe does not report dma-buf as unsupported on rxe0"
json=$(vm_ssh $g "gdrprov --format json bench probe --device rxe0" 2>/dev/null) || true
printf '%s' "$json" | python3 -c '
import json, sys
found = []
def walk(x):
    if isinstance(x, dict): [walk(v) for v in x.values()]
    elif isinstance(x, list): [walk(v) for v in x]
    elif isinstance(x, str) and x.lower() == "unsupported": found.append(x)
walk(json.load(sys.stdin))
sys.exit(0 if found else 1)' || fail "bench probe --format json has no \"unsupported\" for rxe0: $json"
ok "NIC dma-buf probe: unsupported on rxe0 (text and JSON)"

# Per size: gdrprov (with its data check) against ib_write_bw on the same device.
printf '    %-9s %-8s %-12s %-14s %s\n' size iters gdrprov ib_write_bw ratio
for run in 4096:500 65536:200 1048576:20; do
  size=${run%:*} iters=${run#*:}
  rc=0
  json=$(vm_ssh $g "gdrprov --format json bench loopback --memory host --device rxe0 --size $size --iters $iters --min-gbps 0.0001") || rc=$?
  printf '%s\n' "$json" > "$VM_RUN_DIR/06-bench-$size.json"
  [ "$rc" = 0 ] || { printf '%s\n' "$json" | tail -20; fail "gdrprov bench loopback --size $size: exit $rc"; }
  read -r check mine < <(printf '%s' "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["data_check"]["passed"], r["results"][0]["average_gbps"])') || fail "bench JSON for size $size unreadable"
  [ "$check" = True ] || fail "gdrprov bench data check failed at size $size"
  ref=$(vm_ib_write_bw $g $g rxe0 "$gidx" "$size" 127.0.0.1 "-n $iters")
  ratio=$(awk -v a="$mine" -v b="$ref" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
  printf '    %-9s %-8s %-12s %-14s %s\n' "$size" "$iters" "$mine" "$ref" "$ratio"
  info "size $size: gdrprov $mine Gb/s (data check passed), ib_write_bw $ref Gb/s, ratio $ratio"
done
ok "gdrprov bench loopback --memory host on rxe0: data check passed at 4 KiB, 64 KiB and 1 MiB"
