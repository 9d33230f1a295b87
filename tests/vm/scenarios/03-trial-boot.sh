#!/usr/bin/env bash
# Seconds: 400
# Scenario: trial boot: apply --trial + reboot: the first-boot unit verifies and commits (ready, default entry
# has the args); an uncommitted trial and a trial whose kernel panics fall back, and verify says it did not
# boot; a plan unloading rdma_rxe names rxe0
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply -- --trial
require_gdrprov commit

g=trial
vm_fresh $g
# trial1: verified and committed by the first-boot unit. trial2: no unit, never committed. bad: a kernel
# that cannot start (rdinit= names no file: the kernel mounts root itself, has no virtio_blk built in and
# panics; panic=1 resets the machine), verified on the boot GRUB falls back to.
vm_ssh $g "printf 'boot:\n  cmdline:\n    present: [gdrprov_trial=1]\nverify: { first-boot: true, loopback: false }\nvars: { first-boot-profiles: /root/trial1.yaml }\n' > /root/trial1.yaml
           printf 'boot:\n  cmdline:\n    present: [gdrprov_trial=2]\n' > /root/trial2.yaml
           printf 'boot:\n  cmdline:\n    present: [gdrprov_trial=3, rdinit=/nonexistent, panic=1]\nverify: { first-boot: true, loopback: false }\nvars: { first-boot-profiles: /root/bad.yaml }\n' > /root/bad.yaml"

# unit_result NAME: wait until gdrprov-verify.service has finished this boot; echo active or failed.
unit_result() {
  # shellcheck disable=SC2016 # the guest's shell expands it
  vm_ssh "$1" 'for i in $(seq 600); do
      s=$(systemctl show -p ActiveState --value gdrprov-verify.service)
      case $s in active|failed) echo $s; exit 0 ;; esac; sleep 1
    done; systemctl status gdrprov-verify.service; exit 1' || fail "gdrprov-verify.service did not finish"
}

# reboot_through_panic NAME: reboot into a kernel that panics: the reset ends qemu (-no-reboot), which is
# started again on the same disk; GRUB has used its one-shot next_entry and boots the default.
reboot_through_panic() {
  local name=$1 d pid t0 mark args=(); d=$(vm_gdir "$name"); t0=$(date +%s)
  [ -s "$d/args" ] && mapfile -t args < "$d/args"
  pid=$(cat "$d/pid")
  vm_ssh "$name" 'systemctl reboot --no-block' >/dev/null 2>&1 || true
  vm_mux_stop "$name"
  while kill -0 "$pid" 2>/dev/null; do sleep 1; [ "$(vm_since "$t0")" -lt "$VM_BOOT_TIMEOUT" ] || fail "no reset after reboot"; done
  mark=$(stat -c %s "$d/serial.log")
  vm_qemu "$name" "$(cat "$d/port")" "$(cat "$d/port2")" "${args[@]}" || fail "qemu did not start again"
  pid=$(cat "$d/pid")
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1; [ "$(vm_since "$t0")" -lt "$VM_BOOT_TIMEOUT" ] || { vm_tail_serial "$name"; fail "the trial kernel did not panic"; }
  done
  tail -c +"$((mark + 1))" "$d/serial.log" | grep -q 'Kernel panic' || { vm_tail_serial "$name"; fail "qemu ended without a kernel panic"; }
  info "the trial kernel panicked $(vm_since "$t0") s after the reboot: $(tail -c +"$((mark + 1))" "$d/serial.log" | grep -m1 -a 'Kernel panic' | tr -d '\r')"
  vm_qemu "$name" "$(cat "$d/port")" "$(cat "$d/port2")" "${args[@]}" || fail "qemu did not start again"
  vm_wait_ssh "$name" "$VM_BOOT_TIMEOUT"
  vm_log "guest $name: through a kernel panic: rebooted in $(vm_since "$t0") s"
  vm_mux_start "$name"
}

# 1. trial, reboot into the trial entry: the first-boot unit's verify passes and its ExecStartPost commits.
vm_ssh $g "gdrprov apply /root/trial1.yaml --trial --yes" | sed 's/^/    trial1| /'
vm_reboot $g
c=$(vm_ssh $g cat /proc/cmdline)
assert_contains " $c " " gdrprov_trial=1 " "the boot after apply --trial runs the trial command line"
r=$(unit_result $g)
vm_ssh $g "journalctl -b -o cat -u gdrprov-verify.service | tail -n 30" | sed 's/^/    unit| /' || true
[ "$r" = active ] || fail "gdrprov-verify.service $r in the trial boot: $(vm_ssh $g 'cat /run/gdrprov/failed 2>/dev/null')"
ok "gdrprov-verify.service succeeded in the trial boot (verify, then commit)"
vm_ssh $g "test -f /run/gdrprov/ready && ! test -e /run/gdrprov/failed" || fail "no /run/gdrprov/ready after the trial boot"
ok "/run/gdrprov/ready: $(vm_ssh $g 'head -1 /run/gdrprov/ready')"
vm_ssh $g "! grep -q '\"trial\"' /var/lib/gdrprov/state.json" || fail "the trial is still pending after the unit ran (no commit)"
cfg=$(vm_ssh $g "grep -E '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg | head -1")
assert_contains "$cfg" "gdrprov_trial=1" "after the commit the default entry in grub.cfg has the trial's argument"
assert_not_contains "$cfg" "gdrprov.trial" "the default entry has no trial marker"

# 2. a trial that is not committed boots once.
vm_ssh $g "gdrprov apply /root/trial2.yaml --trial --yes" | sed 's/^/    trial2| /'
vm_reboot $g
c=$(vm_ssh $g cat /proc/cmdline)
assert_contains " $c " " gdrprov_trial=2 " "the second trial boots once"

# 3. a trial whose kernel panics: GRUB falls back to the committed default (trial=1), not to trial2.
vm_ssh $g "gdrprov apply /root/bad.yaml --trial --yes" | sed 's/^/    bad| /'
reboot_through_panic $g
c=$(vm_ssh $g cat /proc/cmdline)
info "after the failed trial: $c"
assert_not_contains " $c " " gdrprov_trial=2 " "the uncommitted trial is not booted again"
assert_not_contains " $c " "rdinit=" "the failed trial is not booted again"
assert_contains " $c " " gdrprov_trial=1 " "the boot falls back to the committed default (the commit lasts)"
r=$(unit_result $g)
[ "$r" = failed ] || fail "gdrprov-verify.service $r after the failed trial"
why=$(vm_ssh $g "cat /run/gdrprov/failed")
printf '%s\n' "$why" | sed 's/^/    failed| /'
assert_contains "$why" "FAIL trial: the trial entry gdrprov-trial did not boot" "/run/gdrprov/failed says the trial did not boot"
assert_not_contains "$why" "the next boot (only) uses" "/run/gdrprov/failed does not say the next boot uses the trial"
rc=0; out=$(vm_ssh $g "gdrprov verify /root/bad.yaml") || rc=$?
assert_contains "$out" "did not boot" "verify says the trial did not boot"
[ "$rc" = 3 ] || fail "verify after the failed trial: exit $rc, not 3 (not ready)"
rc=0; vm_ssh $g "gdrprov commit" >/dev/null 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "commit accepted a trial that did not boot"
ok "commit refuses the trial that did not boot (exit $rc)"

# 4. No reboot: a plan that unloads rdma_rxe says that this deletes its device rxe0.
vm_rxe $g "$(vm_nic $g)" rxe0
out=$(vm_ssh $g "printf 'modules: { absent: [rdma_rxe] }\n' > /root/unload.yaml; gdrprov plan /root/unload.yaml")
assert_contains "$out" "Unload rdma_rxe now (it must be absent); this removes its RDMA device(s) rxe0" \
  "the plan to unload rdma_rxe says that it removes rxe0"
vm_poweroff $g
