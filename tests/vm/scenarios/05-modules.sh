#!/usr/bin/env bash
# Scenario: modules: a present module (rdma_rxe) is loaded after reboot; an absent one (dummy, the stand-in
# for nvidia_peermem) is unloaded now and cannot be loaded, by alias or by explicit modprobe, after reboot
# dummy stands in for nvidia_peermem: a loadable module of the bookworm kernel (=m, not built in) that
# nothing autoloads. (floppy probes for a controller q35 lacks; pcspkr is autoloaded by udev on x86.)
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply
require_gdrprov plan -- --detailed-exitcode

g=modules
vm_fresh $g
vm_ssh $g "modprobe dummy && printf 'modules:\n  present: [rdma_rxe]\n  absent: [dummy]\n' > /root/modules.yaml"
lsm=$(vm_ssh $g "lsmod | awk '{print \$1}'")
assert_contains "$lsm" "dummy" "dummy is loaded before apply"

vm_ssh $g "gdrprov apply /root/modules.yaml --yes" | sed 's/^/    apply| /'
lsm=$(vm_ssh $g "lsmod | awk '{print \$1}'")
assert_contains "$lsm" "rdma_rxe" "rdma_rxe loaded by apply"
assert_not_contains "$lsm" "dummy" "dummy unloaded by apply"

vm_reboot $g
lsm=$(vm_ssh $g "lsmod | awk '{print \$1}'")
assert_contains "$lsm" "rdma_rxe" "rdma_rxe loaded at boot"
assert_not_contains "$lsm" "dummy" "dummy not loaded at boot"
rc=0; vm_ssh $g "modprobe dummy" >/dev/null 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "modprobe dummy succeeded after apply"
lsm=$(vm_ssh $g "lsmod | awk '{print \$1}'")
assert_not_contains "$lsm" "dummy" "explicit modprobe dummy fails and loads nothing"
rc=0; vm_ssh $g "gdrprov plan /root/modules.yaml --detailed-exitcode" >/dev/null || rc=$?
[ "$rc" = 0 ] || fail "plan after apply + reboot: exit $rc, want 0"
ok "plan after reboot: nothing to change"
vm_poweroff $g
