#!/usr/bin/env bash
# Scenario: loopback on rxe0: gdrprov bench loopback --memory host passes its data check; gdrprov/ib_write_bw
# ratio per message size; the NIC dma-buf probe reports "unsupported" on rxe
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov bench loopback

g=$(vm_shared)
nic=$(vm_nic $g)
vm_rxe $g "$nic" rxe0
ip=$(vm_ssh $g "ip -o -4 addr show dev $nic | awk '{print \$4}' | cut -d/ -f1")
gidx=$(vm_rxe_gid_index $g rxe0 "$ip")

# The data check and the figure from gdrprov itself.
rc=0; out=$(vm_ssh $g "gdrprov bench loopback --memory host --device rxe0" 2>&1) || rc=$?
printf '%s\n' "$out" | sed 's/^/    bench| /'
[ "$rc" = 0 ] || fail "gdrprov bench loopback --memory host --device rxe0: exit $rc"
ok "gdrprov bench loopback --memory host passed (data check included)"

# Per size: gdrprov's Gb/s against ib_write_bw's on the same device, printed as a ratio.
# Contract assumed: --size BYTES selects the message size and the text output has one "<number> Gb/s".
if gdrprov_has bench loopback -- --size; then
  for size in 4096 65536 1048576; do
    ref=$(vm_ib_write_bw $g $g rxe0 "$gidx" "$size" 127.0.0.1 "-D 4")
    mine=$(vm_ssh $g "gdrprov bench loopback --memory host --device rxe0 --size $size" 2>&1 |
           grep -oiE '[0-9]+(\.[0-9]+)? *Gb/s' | head -1 | grep -oE '^[0-9.]+') || fail "no Gb/s figure from gdrprov bench for size $size"
    ratio=$(awk -v a="$mine" -v b="$ref" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
    info "size $size: gdrprov $mine Gb/s, ib_write_bw $ref Gb/s, ratio $ratio"
  done
else
  info "gdrprov bench loopback has no --size yet: ratio per size not measured"
fi

# rxe has no dma-buf MRs: gdrprov's NIC probe must say so.
if gdrprov_has inventory; then
  inv=$(vm_ssh $g "gdrprov inventory" 2>&1 || true)
  line=$(printf '%s\n' "$inv" | grep -iE 'dma-?buf' | head -3)
  info "inventory: $line"
  printf '%s' "$line" | grep -qi 'unsupported' || fail "inventory does not report dma-buf as unsupported on rxe0"
  ok "NIC dma-buf probe: unsupported on rxe0"
else
  info "gdrprov inventory not implemented yet: dma-buf probe not checked"
fi
