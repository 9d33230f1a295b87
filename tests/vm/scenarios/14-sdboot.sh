#!/usr/bin/env bash
# Seconds: 700
# Scenario: systemd-boot (UEFI): apply -> /etc/kernel/cmdline + entry -> power cut -> /proc/cmdline; boot.entry + boot once
# falls back; an uncommitted trial falls back; the first-boot unit commits a trial; rollback byte for byte;
# update-initramfs's initrd reaches the ESP through gdrprov, not kernel-install (power cut right after)
# Flavor: sdboot
# A real UEFI guest (OVMF) with Debian's systemd-boot 252 and kernel-install: gdrprov edits
# /etc/kernel/cmdline and the kernel's type #1 entry on the FAT ESP (/boot/efi), writes extra and trial
# entries that systemd-boot itself must not take for the default (checked with `bootctl list`, systemd's
# own view), and boots them once through `bootctl set-oneshot` (LoaderEntryOneShot, in the guest's own EFI
# variable store, which survives qemu restarts). Which entry ran is read from LoaderEntrySelected.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply -- --trial
require_gdrprov boot
require_gdrprov commit
require_gdrprov rollback

g=sdboot
# What the guest flushed must survive a killed qemu (the power cuts below), as on a real disk.
# shellcheck disable=SC2034 # read by lib's vm_qemu
VM_DISK_CACHE=writeback
VM_FLAVOR=sdboot vm_fresh $g
E=/boot/efi/loader/entries
mid=$(vm_ssh $g cat /etc/machine-id)
ver=$(vm_ssh $g uname -r)
kid="$mid-$ver"
# The files gdrprov edits, as they were: rollback must give them back byte for byte.
sums0=$(vm_ssh $g "sha256sum /etc/kernel/cmdline $E/$kid.conf")

selected() { vm_efivar $g LoaderEntrySelected || echo none; }
cmdline() { vm_ssh $g cat /proc/cmdline; }
# systemd's own idea of the default entry (not gdrprov's); a pending one-shot entry counts as the default.
sd_default() {
  vm_ssh $g "SYSTEMD_PAGER= bootctl list --no-pager" |
    awk '$1 == "title:" { d = /\(default\)/ } $1 == "id:" && d { print $2 }'
}
# check_default WHY: systemd-boot's default is still the kernel's entry.
check_default() {
  local d; d=$(sd_default)
  [ "$d" = "$kid.conf" ] || fail "$1: bootctl list says the default is '$d', not $kid.conf"
  ok "$1: systemd-boot's default is still $kid.conf"
}

vm_ssh $g "printf 'name: sd-base\nboot:\n  iommu: passthrough\n' > /root/base.yaml
  printf 'name: sd-gds\nboot:\n  iommu: \"off\"\n  entry: gds\n' > /root/gds.yaml
  printf 'name: sd-trial2\nboot:\n  iommu: passthrough\n  cmdline:\n    present: [gdrprov_trial=2]\n' > /root/trial2.yaml
  printf 'name: sd-trial1\nboot:\n  iommu: passthrough\n  cmdline:\n    present: [gdrprov_trial=1]\nverify: { first-boot: true, loopback: false }\nvars: { first-boot-profiles: /root/trial1.yaml }\n' > /root/trial1.yaml"

list=$(vm_ssh $g "gdrprov boot list --format json")
assert_contains "$list" '"loader": "systemd-boot (/boot/efi)"' "boot list sees systemd-boot with the ESP at /boot/efi"
[ "$(selected)" = "$kid.conf" ] || fail "LoaderEntrySelected is '$(selected)', not $kid.conf"

# 1. The default: /etc/kernel/cmdline and the entry's options on the FAT ESP; the power goes right after
# apply returns (issue 16's promise on this boot loader: what systemd-boot reads is on disk before Done).
out=$(vm_ssh $g "gdrprov apply /root/base.yaml --yes" 2>&1)
vm_powercut $g "$EPOCHREALTIME"
printf '%s\n' "$out" | sed 's/^/    apply| /'
printf '%s' "$out" | grep -q '^Done' || fail "apply did not report Done"
info "apply says: $(printf '%s' "$out" | grep '^Boot files' || echo 'nothing about boot files on disk')"
assert_contains "$(vm_ssh $g cat /etc/kernel/cmdline)" "iommu=pt" "/etc/kernel/cmdline has iommu=pt"
assert_contains "$(vm_ssh $g "grep '^options' $E/$kid.conf")" "iommu=pt" "the kernel's entry has iommu=pt"
c1=$(cmdline); info "boot 1 (after a power cut): $c1"
assert_contains " $c1 " " iommu=pt " "power cut right after apply: /proc/cmdline has iommu=pt"
[ "$(selected)" = "$kid.conf" ] || fail "boot 1 ran $(selected), not $kid.conf"
rc=0; vm_ssh $g "gdrprov plan /root/base.yaml --detailed-exitcode" >/dev/null || rc=$?
[ "$rc" = 0 ] || fail "a second plan is not empty (exit $rc)"
ok "a second plan has nothing to do"

# 2. An extra entry (boot.entry gds, iommu=off): not the default; `boot once` boots it once.
vm_ssh $g "gdrprov apply /root/base.yaml /root/gds.yaml --yes" | sed 's/^/    apply| /'
vm_ssh $g "grep '^options' $E/$mid-gdrprov-gds.conf" | grep -q ' iommu=off' || fail "no iommu=off in $E/$mid-gdrprov-gds.conf"
ok "$mid-gdrprov-gds.conf has iommu=off"
check_default "with the gds entry"
vm_ssh $g "gdrprov boot once gds" | sed 's/^/    once| /'
[ "$(vm_efivar $g LoaderEntryOneShot)" = "$mid-gdrprov-gds.conf" ] || fail "LoaderEntryOneShot is not the gds entry"
vm_reboot $g
c2=$(cmdline); info "boot 2 (once): $c2"
assert_contains " $c2 " " iommu=off " "the one-shot boot has iommu=off"
[ "$(selected)" = "$mid-gdrprov-gds.conf" ] || fail "boot 2 ran $(selected)"
ok "boot 2 ran $mid-gdrprov-gds.conf"
vm_reboot $g
c3=$(cmdline); info "boot 3: $c3"
assert_contains " $c3 " " iommu=pt " "the boot after the one-shot is the default again"
[ "$(selected)" = "$kid.conf" ] || fail "boot 3 ran $(selected), not $kid.conf"

# 3. A trial that is not committed: it boots once, then the default again; verify says so; commit refuses.
vm_ssh $g "gdrprov apply /root/trial2.yaml --trial --yes" | sed 's/^/    trial| /'
assert_not_contains "$(vm_ssh $g cat /etc/kernel/cmdline)" "gdrprov_trial" "a trial leaves /etc/kernel/cmdline alone"
[ "$(vm_efivar $g LoaderEntryOneShot)" = "$mid-gdrprov-trial.conf" ] || fail "LoaderEntryOneShot is not the trial entry"
vm_powercut $g "$EPOCHREALTIME"
c4=$(cmdline); info "boot 4 (trial, after a power cut): $c4"
assert_contains " $c4 " " gdrprov_trial=2 " "the trial boot has the trial's argument"
assert_contains " $c4 " " gdrprov.trial=1 " "the trial boot has the trial marker"
[ "$(selected)" = "$mid-gdrprov-trial.conf" ] || fail "boot 4 ran $(selected)"
# (bootctl's "default" is the one-shot entry while one is set: checked once it is used.)
check_default "with the trial entry, its one-shot boot used"
out=$(vm_ssh $g "gdrprov verify /root/trial2.yaml --no-loopback" || true)
assert_contains "$out" "started from the trial entry" "verify sees the trial running"
vm_reboot $g
c5=$(cmdline); info "boot 5 (no commit): $c5"
assert_not_contains " $c5 " " gdrprov_trial=2 " "without a commit the next boot is the default"
[ "$(selected)" = "$kid.conf" ] || fail "boot 5 ran $(selected), not $kid.conf"
rc=0; out=$(vm_ssh $g "gdrprov verify /root/trial2.yaml --no-loopback") || rc=$?
assert_contains "$out" "systemd-boot used its one-shot boot" "verify says the trial did not boot"
[ "$rc" = 3 ] || fail "verify after the fallen-back trial: exit $rc, not 3"
rc=0; vm_ssh $g "gdrprov commit" >/dev/null 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "commit accepted a trial that is not running"
ok "commit refuses a trial that is not running (exit $rc)"

# 4. A trial with the first-boot unit: it verifies the trial boot and commits it.
vm_ssh $g "gdrprov apply /root/trial1.yaml --trial --yes" | sed 's/^/    trial| /'
vm_reboot $g
# shellcheck disable=SC2016 # the guest's shell expands it
r=$(vm_ssh $g 'for i in $(seq 600); do s=$(systemctl show -p ActiveState --value gdrprov-verify.service)
    case $s in active|failed) echo $s; exit 0 ;; esac; sleep 1; done; exit 1') || fail "gdrprov-verify.service did not finish"
vm_ssh $g "journalctl -b -o cat -u gdrprov-verify.service | tail -n 20" | sed 's/^/    unit| /' || true
[ "$r" = active ] || fail "gdrprov-verify.service $r in the trial boot"
ok "gdrprov-verify.service verified and committed the trial boot"
vm_ssh $g "! grep -q '\"trial\"' /var/lib/gdrprov/state.json" || fail "the trial is still pending after the unit ran"
assert_contains "$(vm_ssh $g cat /etc/kernel/cmdline)" "gdrprov_trial=1" "after the commit /etc/kernel/cmdline has the trial's argument"
assert_contains "$(vm_ssh $g "grep '^options' $E/$kid.conf")" "gdrprov_trial=1" "after the commit the kernel's entry has it"
vm_ssh $g "test ! -e $E/$mid-gdrprov-trial.conf" || fail "the trial entry is still there after the commit"
ok "the commit removed the trial entry"
vm_reboot $g
c6=$(cmdline); info "boot 6: $c6"
assert_contains " $c6 " " gdrprov_trial=1 " "the default boot has the committed argument"
assert_not_contains " $c6 " " gdrprov.trial=1 " "and no trial marker"
[ "$(selected)" = "$kid.conf" ] || fail "boot 6 ran $(selected), not $kid.conf"

# 5. Rollback of every apply: the ESP entry and /etc/kernel/cmdline byte for byte as before.
vm_ssh $g "gdrprov rollback --generation 1 --yes" | sed 's/^/    rollback| /'
sums1=$(vm_ssh $g "sha256sum /etc/kernel/cmdline $E/$kid.conf")
[ "$sums1" = "$sums0" ] || fail "after rollback: $sums1 (before: $sums0)"
ok "rollback restored /etc/kernel/cmdline and $kid.conf byte for byte"
left=$(vm_ssh $g "ls $E")
assert_not_contains "$left" "gdrprov" "no gdrprov entry is left on the ESP"

# 6. A module in the initramfs: update-initramfs runs, and Debian's hook would have kernel-install copy the
# kernel and the new initrd onto the FAT ESP by unlink + rewrite, unsynced (a power cut there left the
# kernel unreadable: docs/reliability.md). gdrprov bypasses kernel-install and puts the initrd there itself,
# whole; the kernel's file on the ESP is never rewritten (the same modification time: kernel-install's
# `install` would give it a new one; vfat's inode numbers change across boots). The power goes right after.
K=/boot/efi/$mid/$ver
linux0=$(vm_ssh $g "stat -c %Y $K/linux; sha256sum < $K/linux")
vm_ssh $g "printf 'name: sd-initrd\nmodules:\n  absent: [virtio_scsi]\n' > /root/initrd.yaml"
out=$(vm_ssh $g "gdrprov apply /root/initrd.yaml --yes" 2>&1)
vm_powercut $g "$EPOCHREALTIME"
printf '%s\n' "$out" | sed 's/^/    apply| /'
assert_contains "$out" "KERNEL_INSTALL_BYPASS=1 update-initramfs -u -k $ver" "update-initramfs ran with kernel-install bypassed"
[ "$(vm_ssh $g "stat -c %Y $K/linux; sha256sum < $K/linux")" = "$linux0" ] || fail "the kernel on the ESP was rewritten"
ok "the kernel on the ESP was not rewritten"
esp=$(vm_ssh $g "sha256sum < $K/initrd.img-$ver") boot=$(vm_ssh $g "sha256sum < /boot/initrd.img-$ver")
[ "$esp" = "$boot" ] || fail "after a power cut right after apply the ESP's initrd is not the new one"
vm_ssh $g "lsinitramfs $K/initrd.img-$ver" | grep -q 'etc/modprobe.d/gdrprov-blacklist.conf' ||
  fail "the ESP's initrd has no gdrprov-blacklist.conf"
ok "after a power cut right after apply the ESP's initrd is /boot's new one, with the block list"
vm_ssh $g "ls -a $K" | grep -q 'gdrprov-' && fail "a temporary file is left in $K"
vm_poweroff $g
