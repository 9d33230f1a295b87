#!/usr/bin/env bash
# Scenario: rollback after a reboot restores the original files and, on the next boot, the original cmdline
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply
require_gdrprov rollback

g=rollback
vm_fresh $g
vm_ssh $g "printf 'boot:\n  cmdline:\n    present: [gdrprov_test=1]\n' > /root/test.yaml"
c0=$(vm_ssh $g cat /proc/cmdline)
f0=$(vm_ssh $g "sha256sum /etc/default/grub")

vm_ssh $g "gdrprov apply /root/test.yaml --yes" | sed 's/^/    apply| /'
vm_reboot $g
c1=$(vm_ssh $g cat /proc/cmdline)
assert_contains " $c1 " " gdrprov_test=1 " "applied argument is in /proc/cmdline"

vm_ssh $g "gdrprov rollback --yes" | sed 's/^/    rollback| /'
[ "$(vm_ssh $g "sha256sum /etc/default/grub")" = "$f0" ] || fail "/etc/default/grub differs from the original after rollback"
ok "/etc/default/grub is byte for byte the original"
vm_reboot $g
c2=$(vm_ssh $g cat /proc/cmdline)
info "after rollback + reboot: $c2"
[ "$c2" = "$c0" ] || fail "/proc/cmdline after rollback: '$c2', original: '$c0'"
ok "the boot after rollback has the original /proc/cmdline"
vm_poweroff $g
