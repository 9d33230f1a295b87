#!/usr/bin/env bash
# Seconds: 200
# Scenario: gds-iommu-off as an extra boot entry: `gdrprov boot once` boots it with iommu=off, the next boot
# is back on the default
# The entry comes from a profile that extends gds-iommu-off with `boot: { entry: gdrprov-gds }` (as the
# built-in profile's comment says); the default entry's command line stays as it was.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov boot
require_gdrprov apply

g=gdsonce
vm_fresh $g
vm_ssh $g "printf 'name: gds-entry\nextends: gds-iommu-off\nboot:\n  entry: gdrprov-gds\n' > /root/gds.yaml"
c0=$(vm_ssh $g cat /proc/cmdline)
vm_ssh $g "gdrprov apply /root/gds.yaml --yes" | sed 's/^/    apply| /'
list=$(vm_ssh $g "gdrprov boot list")
printf '%s\n' "$list" | sed 's/^/    list| /'
assert_contains "$list" "gdrprov-gds" "boot list shows the gdrprov-gds entry"

vm_ssh $g "gdrprov boot once gdrprov-gds" | sed 's/^/    once| /'
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
