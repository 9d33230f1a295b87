#!/usr/bin/env bash
# Seconds: 168
# Scenario: modules and MTU after one reboot: a present module (rdma_rxe) is loaded; an absent one (dummy,
# the stand-in for nvidia_peermem) is unloaded now and cannot be loaded, by alias or by explicit modprobe;
# the NIC's MTU comes from gdrprov's systemd .link file
# dummy stands in for nvidia_peermem: a loadable module of the bookworm kernel (=m, not built in) that
# nothing autoloads. (floppy probes for a controller q35 lacks; pcspkr is autoloaded by udev on x86.)
# The MTU: a .link file matched by MAC; apply sets it now with `ip link`, and after the reboot udev applies
# the .link file. verify reads /sys/class/net/IF/mtu back. One guest and one reboot for both (each boot
# costs about a minute of the testbed's 2 cores).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply
require_gdrprov plan -- --detailed-exitcode

g=modules
vm_fresh $g
# The guest's NIC (virtio_net, the one with an IPv4 address).
ifc=$(vm_nic $g)
[ -n "$ifc" ] || fail "no NIC with an IPv4 address in the guest"
mac=$(vm_ssh $g "cat /sys/class/net/$ifc/address")
before=$(vm_ssh $g "cat /sys/class/net/$ifc/mtu")
info "guest NIC $ifc ($mac) has MTU $before"
want=1400
[ "$before" != "$want" ] || want=1450
vm_ssh $g "modprobe dummy && printf 'modules:\n  present: [rdma_rxe]\n  absent: [dummy]\nnetwork:\n  mtu:\n    devices: { name: $ifc }\n    value: $want\n' > /root/host.yaml"
lsm=$(vm_ssh $g "lsmod | awk '{print \$1}'")
assert_contains "$lsm" "dummy" "dummy is loaded before apply"

vm_ssh $g "gdrprov apply /root/host.yaml --yes" | sed 's/^/    apply| /'
lsm=$(vm_ssh $g "lsmod | awk '{print \$1}'")
assert_contains "$lsm" "rdma_rxe" "rdma_rxe loaded by apply"
assert_not_contains "$lsm" "dummy" "dummy unloaded by apply"
link=$(vm_ssh $g "cat /etc/systemd/network/10-gdrprov-$ifc.link")
assert_contains "$link" "MACAddress=$mac" ".link file matches the NIC by MAC"
assert_contains "$link" "MTUBytes=$want" ".link file carries the MTU"
now=$(vm_ssh $g "cat /sys/class/net/$ifc/mtu")
[ "$now" = "$want" ] || fail "MTU after apply: $now, want $want (ip link set)"
ok "apply set the MTU now: $now"

# Prove the reboot, not the earlier `ip link`, sets the MTU: put the running MTU back first.
vm_ssh $g "ip link set dev $ifc mtu $before"
vm_reboot $g
lsm=$(vm_ssh $g "lsmod | awk '{print \$1}'")
assert_contains "$lsm" "rdma_rxe" "rdma_rxe loaded at boot"
assert_not_contains "$lsm" "dummy" "dummy not loaded at boot"
rc=0; vm_ssh $g "modprobe dummy" >/dev/null 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "modprobe dummy succeeded after apply"
lsm=$(vm_ssh $g "lsmod | awk '{print \$1}'")
assert_not_contains "$lsm" "dummy" "explicit modprobe dummy fails and loads nothing"
now=$(vm_ssh $g "cat /sys/class/net/$ifc/mtu")
[ "$now" = "$want" ] || fail "MTU after reboot: $now, want $want (.link file not applied)"
ok "after the reboot $ifc has MTU $now from the .link file"
name=$(vm_ssh $g "ls /sys/class/net | grep -x '$ifc' || true")
[ "$name" = "$ifc" ] || fail "interface name changed after the reboot: the .link file lost the naming policy"
ok "interface name $ifc kept"
rc=0; vm_ssh $g "gdrprov plan /root/host.yaml --detailed-exitcode" >/dev/null || rc=$?
[ "$rc" = 0 ] || fail "plan after apply + reboot: exit $rc, want 0"
ok "plan after reboot: nothing to change"
out=$(vm_ssh $g "gdrprov verify /root/host.yaml --no-loopback" || true)
assert_contains "$out" "PASS  mtu" "verify's mtu check passes"
vm_poweroff $g
