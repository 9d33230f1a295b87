#!/usr/bin/env bash
# Scenario: mtu: a profile sets the MTU of the guest's NIC through a systemd .link file matched by MAC;
# apply sets it now with `ip link`, and after a reboot udev applies the .link file (whatever configures the
# network: ifupdown in the Debian image). verify reads /sys/class/net/IF/mtu back.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply
require_gdrprov plan -- --detailed-exitcode

g=mtu
vm_fresh $g
# The guest's NIC (virtio_net, the one with an IPv4 address).
ifc=$(vm_nic $g)
[ -n "$ifc" ] || fail "no NIC with an IPv4 address in the guest"
mac=$(vm_ssh $g "cat /sys/class/net/$ifc/address")
before=$(vm_ssh $g "cat /sys/class/net/$ifc/mtu")
info "guest NIC $ifc ($mac) has MTU $before"
want=1400
[ "$before" != "$want" ] || want=1450
vm_ssh $g "printf 'network:\n  mtu:\n    devices: { name: $ifc }\n    value: $want\n' > /root/mtu.yaml"

vm_ssh $g "gdrprov apply /root/mtu.yaml --yes" | sed 's/^/    apply| /'
link=$(vm_ssh $g "cat /etc/systemd/network/10-gdrprov-$ifc.link")
assert_contains "$link" "MACAddress=$mac" ".link file matches the NIC by MAC"
assert_contains "$link" "MTUBytes=$want" ".link file carries the MTU"
now=$(vm_ssh $g "cat /sys/class/net/$ifc/mtu")
[ "$now" = "$want" ] || fail "MTU after apply: $now, want $want (ip link set)"
ok "apply set the MTU now: $now"

# Prove the reboot, not the earlier `ip link`, sets it: put the running MTU back first.
vm_ssh $g "ip link set dev $ifc mtu $before"
vm_reboot $g
now=$(vm_ssh $g "cat /sys/class/net/$ifc/mtu")
[ "$now" = "$want" ] || fail "MTU after reboot: $now, want $want (.link file not applied)"
ok "after the reboot $ifc has MTU $now from the .link file"
name=$(vm_ssh $g "ls /sys/class/net | grep -x '$ifc' || true")
[ "$name" = "$ifc" ] || fail "interface name changed after the reboot: the .link file lost the naming policy"
ok "interface name $ifc kept"
rc=0; vm_ssh $g "gdrprov plan /root/mtu.yaml --detailed-exitcode" >/dev/null || rc=$?
[ "$rc" = 0 ] || fail "plan after apply + reboot: exit $rc, want 0"
ok "plan after reboot: nothing to change"
out=$(vm_ssh $g "gdrprov verify /root/mtu.yaml --no-loopback" || true)
assert_contains "$out" "PASS  mtu" "verify's mtu check passes"
vm_poweroff $g
