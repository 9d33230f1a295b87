#!/usr/bin/env bash
# Scenario: power cut right after apply, and right after rollback: the next boot runs what gdrprov reported
# (issue 16). apply rdma-dmabuf, qemu SIGKILLed as soon as the command returns, boot: the new arguments are in
# /proc/cmdline; rollback, power cut again, boot: the original command line. One guest, two power cuts.
# GRUB reads ext4 without replaying its journal: a grub.cfg only committed to the journal is not what it
# boots. Both halves are checked even when the first fails, so one run shows each.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply
require_gdrprov rollback

# What the guest flushed must survive the killed qemu, as it survives a power cut on a real disk.
VM_DISK_CACHE=writeback
g=powercut
vm_fresh $g
vendor=$(vm_ssh $g "awk -F': ' '/^vendor_id/ {print \$2; exit}' /proc/cpuinfo")
want="iommu=pt"
[ "$vendor" = GenuineIntel ] && want="iommu=pt intel_iommu=on"
c0=$(vm_ssh $g cat /proc/cmdline)
info "guest CPU $vendor: expecting $want; original /proc/cmdline: $c0"
bad=()

# No GPU in the guest: --force turns the profile's requirements into warnings (01 checks the refusal).
out=$(vm_ssh $g "gdrprov apply rdma-dmabuf --force --yes" 2>&1)
vm_powercut $g "$EPOCHREALTIME"
printf '%s\n' "$out" | sed 's/^/    apply| /'
printf '%s' "$out" | grep -q '^Done' || fail "apply did not report Done"
info "apply says: $(printf '%s' "$out" | grep '^Boot files' || echo 'nothing about boot files on disk')"
c1=$(vm_ssh $g cat /proc/cmdline)
info "after apply + power cut: $c1"
for a in $want; do
  case " $c1 " in
    *" $a "*) ok "power cut right after apply: /proc/cmdline has $a" ;;
    *) bad+=("power cut right after apply: /proc/cmdline lacks $a") ;;
  esac
done
[ ${#bad[@]} -eq 0 ] || info "grub.cfg now (journal replayed by Linux): $(vm_ssh $g "grep -cw 'iommu=pt' /boot/grub/grub.cfg || true") line(s) with iommu=pt"

out=$(vm_ssh $g "gdrprov rollback --yes" 2>&1)
vm_powercut $g "$EPOCHREALTIME"
printf '%s\n' "$out" | sed 's/^/    rollback| /'
printf '%s' "$out" | grep -q '^Done' || fail "rollback did not report Done"
c2=$(vm_ssh $g cat /proc/cmdline)
info "after rollback + power cut: $c2"
if [ "$c2" = "$c0" ]; then
  ok "power cut right after rollback: the original /proc/cmdline"
else
  bad+=("power cut right after rollback: /proc/cmdline '$c2', original '$c0'")
fi

[ ${#bad[@]} -eq 0 ] || fail "$(printf '%s; ' "${bad[@]}")"
vm_poweroff $g
