#!/usr/bin/env bash
# Scenario: gds-iommu-off as an extra boot entry: `gdrprov boot once` boots it with iommu=off, the next boot
# is back on the default
# Contract assumed (adjust when the feature lands): `gdrprov apply gds-iommu-off --yes` adds a boot entry
# that `gdrprov boot list` names gds-iommu-off, and leaves the default entry's command line alone.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov boot
require_gdrprov apply

g=gdsonce
vm_fresh $g
vm_ssh $g "gdrprov apply gds-iommu-off --yes" | sed 's/^/    apply| /'
list=$(vm_ssh $g "gdrprov boot list")
printf '%s\n' "$list" | sed 's/^/    list| /'
assert_contains "$list" "gds-iommu-off" "boot list shows the gds-iommu-off entry"
c0=$(vm_ssh $g cat /proc/cmdline)

vm_ssh $g "gdrprov boot once gds-iommu-off" | sed 's/^/    once| /'
vm_reboot $g
c1=$(vm_ssh $g cat /proc/cmdline)
info "boot once: $c1"
assert_contains " $c1 " " iommu=off " "the one-time boot has iommu=off"

vm_reboot $g
c2=$(vm_ssh $g cat /proc/cmdline)
info "next boot: $c2"
assert_not_contains " $c2 " " iommu=off " "the boot after is the default again"
[ "$c2" = "$c0" ] || fail "default command line changed: '$c0' -> '$c2'"
ok "default entry unchanged"
vm_poweroff $g
