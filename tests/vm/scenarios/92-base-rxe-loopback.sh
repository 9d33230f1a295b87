#!/usr/bin/env bash
# Seconds: 1
# Scenario: baseline: rdma_rxe on the guest NIC is PORT_ACTIVE and ib_write_bw loopback reports a bandwidth
# Soft-RoCE in the shared guest: modprobe rdma_rxe, rdma link add rxe0, then Debian's perftest ib_write_bw
# with server and client in the same guest. The base of 06-loopback (gdrprov bench against ib_write_bw).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
baseline_covered_by 06-loopback bench

g=$(vm_shared)
nic=$(vm_nic "$g")
[ -n "$nic" ] || fail "no NIC with an IPv4 address in the guest"
vm_rxe "$g" "$nic" rxe0
ok "rxe0 on $nic is PORT_ACTIVE"
ip=$(vm_ssh "$g" "ip -o -4 addr show dev $nic | awk '{print \$4}' | cut -d/ -f1")
gidx=$(vm_rxe_gid_index "$g" rxe0 "$ip")
ok "RoCE v2 GID ::ffff:$ip at index $gidx"

# Iteration counts rather than durations: a 1 MiB write under TCG on a busy host can take longer than a
# whole -D window. About 2, 13 and 21 MB per size.
for run in 4096:500 65536:200 1048576:20; do
  size=${run%:*}
  gbps=$(vm_ib_write_bw "$g" "$g" rxe0 "$gidx" "$size" 127.0.0.1 "-n ${run#*:}")
  info "ib_write_bw loopback rxe0 size $size: $gbps Gb/s"
  awk -v b="$gbps" 'BEGIN { exit !(b > 0) }' || fail "ib_write_bw reported no bandwidth for size $size"
done
ok "ib_write_bw loopback reported a bandwidth for 4 KiB, 64 KiB and 1 MiB"
