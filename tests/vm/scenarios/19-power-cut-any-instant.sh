#!/usr/bin/env bash
# Scenario: power cut at any instant of apply (update-grub + update-initramfs), rollback and commit, on the GRUB and the systemd-boot guest: the guest boots wholly the old or the new line, nothing torn, the next command names the interrupted generation, recovery = an uninterrupted run
# Flavor: sdboot
# A few cuts of the campaign tests/vm/powercut/campaign.sh (see tests/vm/powercut/README.md for the full one,
# which runs outside CI): each cut is a vm_powercut at an instant drawn (seeded, printed) over the measured
# duration of the command, then checks, the recovery and a vm_reboot into what the recovery left.
# GDRPROV_PC_RUNS="FLAVOR CUTS SEED COMMANDS; ..." replaces the runs below (SEED "-": this run's seed);
# GDRPROV_PC_SEED fixes the seed (default: drawn from the clock, printed).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
seed=${GDRPROV_PC_SEED:-$(( $(date +%s) % 100000 ))}
runs=${GDRPROV_PC_RUNS:-"grub 2 - apply,rollback; sdboot 1 - apply"}
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
