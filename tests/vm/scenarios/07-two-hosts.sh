#!/usr/bin/env bash
# Seconds: 1
# Scenario: two guests joined by a loopback socket NIC run ib_write_bw between their rxe devices
# Two overlays of one image; the second NIC of each is a qemu socket netdev (listen/connect on 127.0.0.1),
# a private link between the two guests that nothing else can reach. rdma_rxe on that NIC in both, then
# ib_write_bw server in one guest and client in the other (RoCE v2 over the link). kernel 6.1 rxe is not
# network-namespace aware, so two guests, not two namespaces.
# A baseline since 17-pair (two guests on the same kind of link, rxe in each, perftest's ib_write_bw and
# ib_write_bw -b between them beside gdrprov's pair): skipped once gdrprov has `bench pair`, saving two boots.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
baseline_covered_by 17-pair bench
vm_trap

# Boot both at once: the second connects to the first's listening socket.
vm_launch hostA -netdev "socket,id=p0,listen=127.0.0.1:@PORT2@" -device "virtio-net-pci,netdev=p0,mac=52:54:00:00:99:01,romfile="
link=$(cat "$(vm_gdir hostA)/port2")
vm_launch hostB -netdev "socket,id=p0,connect=127.0.0.1:$link" -device "virtio-net-pci,netdev=p0,mac=52:54:00:00:99:02,romfile="
vm_wait_up hostA
vm_wait_up hostB
ok "two guests up, linked through 127.0.0.1:$link"

# The link's addresses exist only inside the two guests (the socket NIC reaches nothing else).
declare -A addr=([hostA]=10.99.0.1 [hostB]=10.99.0.2) mac=([hostA]=52:54:00:00:99:01 [hostB]=52:54:00:00:99:02)
declare -A nic gidx
for h in hostA hostB; do
  vm_ssh $h "cat > /etc/systemd/network/10-peer.network <<EOT
[Match]
MACAddress=${mac[$h]}
[Network]
Address=${addr[$h]}/24
LinkLocalAddressing=no
IPv6AcceptRA=no
EOT
networkctl reload && for i in \$(seq 60); do ip -o -4 addr | grep -q ' ${addr[$h]}/' && exit 0; sleep 0.5; done; exit 1" >/dev/null ||
    fail "$h: no address ${addr[$h]} on the link NIC"
  nic[$h]=$(vm_ssh $h "ip -o -4 addr | awk '\$4 == \"${addr[$h]}/24\" {print \$2}'")
  vm_rxe $h "${nic[$h]}" rxe0
  gidx[$h]=$(vm_rxe_gid_index $h rxe0 "${addr[$h]}")
  ok "$h: rxe0 on ${nic[$h]} (${addr[$h]}) PORT_ACTIVE, RoCE v2 GID index ${gidx[$h]}"
done
# IP first (the image has no ping: a TCP connect to the peer's sshd).
vm_ssh hostB "timeout 20 bash -c 'exec 3<>/dev/tcp/${addr[hostA]}/22'" >/dev/null || fail "no IP between the guests over the socket link"
ok "hostB reaches hostA's sshd over the link"

[ "${gidx[hostA]}" = "${gidx[hostB]}" ] || info "GID indexes differ (${gidx[hostA]} vs ${gidx[hostB]}); using each side's own"
gbps=$(vm_ib_write_bw hostA hostB rxe0 "${gidx[hostB]}" 65536 "${addr[hostA]}" "-n 200")
info "ib_write_bw hostB -> hostA, 64 KiB, RoCE v2 over the socket link: $gbps Gb/s"
awk -v b="$gbps" 'BEGIN { exit !(b > 0) }' || fail "ib_write_bw between the guests reported no bandwidth"
ok "ib_write_bw between two guests reported $gbps Gb/s"

vm_poweroff hostA &
vm_poweroff hostB
wait
