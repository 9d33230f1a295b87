#!/usr/bin/env bash
# Scenario: trial boot: apply --trial + reboot + commit makes it the default; an uncommitted trial falls back
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply -- --trial
require_gdrprov commit

g=trial
vm_fresh $g
vm_ssh $g "printf 'boot:\n  cmdline:\n    present: [gdrprov_trial=1]\n' > /root/trial1.yaml
           printf 'boot:\n  cmdline:\n    present: [gdrprov_trial=2]\n' > /root/trial2.yaml"
c0=$(vm_ssh $g cat /proc/cmdline)

# 1. trial, reboot (trial entry), commit: the trial becomes the default. (The boot that proves it is the
#    last one below: an uncommitted trial falls back to exactly this default. Three reboots, not four.)
vm_ssh $g "gdrprov apply /root/trial1.yaml --trial --yes" | sed 's/^/    trial1| /'
vm_reboot $g
c=$(vm_ssh $g cat /proc/cmdline)
assert_contains " $c " " gdrprov_trial=1 " "the boot after apply --trial runs the trial command line"
vm_ssh $g "gdrprov commit" | sed 's/^/    commit| /'
cfg=$(vm_ssh $g "grep -E '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg | head -1")
assert_contains "$cfg" "gdrprov_trial=1" "after commit the default entry in grub.cfg has the trial's argument"

# 2. a trial that is not committed: booted once, then the boot after it falls back to the committed
#    default (trial=1).
vm_ssh $g "gdrprov apply /root/trial2.yaml --trial --yes" | sed 's/^/    trial2| /'
vm_reboot $g
c=$(vm_ssh $g cat /proc/cmdline)
assert_contains " $c " " gdrprov_trial=2 " "the second trial boots once"
vm_reboot $g
c=$(vm_ssh $g cat /proc/cmdline)
info "after the uncommitted trial: $c"
assert_not_contains " $c " " gdrprov_trial=2 " "an uncommitted trial is not booted again"
assert_contains " $c " " gdrprov_trial=1 " "the boot falls back to the committed default (commit took effect)"
vm_poweroff $g
