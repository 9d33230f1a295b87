#!/usr/bin/env bash
# Scenario: power cuts: right after apply and rollback return (issue 16), and at an instant drawn over the run of apply (update-grub + update-initramfs; on systemd-boot the ESP entry and initrd): the guest boots wholly the old or the new line, nothing torn, the next command names the interrupted generation, recovery = an uninterrupted run
# Flavor: sdboot
# A few cuts of the campaign tests/vm/powercut/campaign.sh (tests/vm/powercut/README.md; the full campaign,
# with rollback and commit cut too, runs outside CI). Per flavor: apply, then a vm_powercut right after it
# returned (the new line boots), rollback, a vm_powercut right after it returned (the old line boots); this
# was scenario 11. Then each cut: the command in the background, a vm_powercut at an instant drawn (seeded,
# printed) over its measured duration, the checks, the recovery (gdrprov recover, then apply) and a
# vm_reboot into what the recovery left.
# Its boots (one a line, for run.sh, which starts the scenarios with the most boots first):
#   grub: a fresh boot, then vm_powercut after apply returned,
#   grub: vm_powercut after rollback returned,
#   grub: vm_powercut at the drawn instant,
#   grub: vm_reboot after the recovery;
#   sdboot: a fresh boot, then vm_powercut after apply returned,
#   sdboot: vm_powercut after rollback returned,
#   sdboot: vm_powercut at the drawn instant,
#   sdboot: vm_reboot after the recovery.
# GDRPROV_PC_RUNS="FLAVOR CUTS SEED COMMANDS; ..." replaces the runs below (SEED "-": this run's seed);
# GDRPROV_PC_SEED fixes the seed (default: drawn from the clock, printed).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
seed=${GDRPROV_PC_SEED:-$(( $(date +%s) % 100000 ))}
runs=${GDRPROV_PC_RUNS:-"grub 1 - apply; sdboot 1 - apply"}
info "seed $seed; runs: $runs"
rc=0
IFS=';' read -ra list <<<"$runs"
for r in "${list[@]}"; do
  read -r flavor cuts s cmds <<<"$r"
  [ "$s" = - ] && s=$seed
  bash "$(dirname "$0")/../powercut/campaign.sh" "$flavor" "$cuts" "$s" "$cmds" || rc=1
done
[ $rc = 0 ] || fail "a power-cut campaign failed (its lines above)"
ok "every power-cut run passed"
