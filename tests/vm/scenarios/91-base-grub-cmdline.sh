#!/usr/bin/env bash
# Seconds: 1
# Scenario: baseline: GRUB_CMDLINE_LINUX edited by hand + update-grub + real reboot -> /proc/cmdline has it
# Proves the testbed: the guest boots through real GRUB, update-grub works, and a reboot picks the new
# command line up. This is what 01-rdma-dmabuf does through gdrprov.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
baseline_covered_by 01-rdma-dmabuf plan apply verify

g=cmdline
vm_fresh $g
before=$(vm_ssh $g cat /proc/cmdline)
assert_not_contains "$before" "iommu=pt" "fresh guest has no iommu=pt"

args="gdrprov_test=1 iommu=pt intel_iommu=on"
vm_ssh $g "sed -i 's/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX=\"$args\"/' /etc/default/grub && update-grub" >/dev/null 2>&1
cfg=$(vm_ssh $g "grep -E '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg | head -1")
assert_contains "$cfg" "$args" "update-grub wrote the arguments into grub.cfg"

vm_reboot $g
after=$(vm_ssh $g cat /proc/cmdline)
info "/proc/cmdline: $after"
for a in $args; do assert_contains " $after " " $a " "/proc/cmdline has $a after the reboot"; done
dom=$(vm_ssh $g "dmesg | grep -i 'default domain type'" || true)
info "kernel: ${dom#*] }"
assert_contains "$dom" "Passthrough" "kernel reports IOMMU default domain type Passthrough (iommu=pt)"
vm_poweroff $g
