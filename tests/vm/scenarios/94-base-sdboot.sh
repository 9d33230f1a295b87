#!/usr/bin/env bash
# Seconds: 1
# Scenario: baseline: UEFI + systemd-boot: entry options + reboot -> /proc/cmdline; bootctl set-oneshot boots a copied entry once
# Flavor: sdboot
# Proves the sdboot flavor by hand, without gdrprov: OVMF boots systemd-boot, which boots the entry that
# kernel-install wrote (LoaderEntrySelected names it); an option added to the entry reaches /proc/cmdline
# after a real reboot; a copy of the entry with iommu=off, a sort-key that sorts after the original's and a
# file name that systemd-boot orders before it (ids compare as versions, descending: with equal sort-keys
# the copy would be the default) boots once after `bootctl set-oneshot` (LoaderEntryOneShot in the guest's
# own EFI variable store, which survives the qemu restart), and the boot after it is the original again.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
baseline_covered_by 14-sdboot apply boot

g=sdboot
VM_FLAVOR=sdboot vm_fresh $g
entries=/boot/efi/loader/entries

c0=$(vm_ssh $g cat /proc/cmdline)
info "/proc/cmdline: $c0"
assert_contains "$c0" "initrd=" "the kernel was started by systemd-boot from an entry (initrd= in /proc/cmdline)"
assert_not_contains " $c0 " " iommu=pt " "fresh guest has no iommu=pt"
mid=$(vm_ssh $g cat /etc/machine-id)
ver=$(vm_ssh $g uname -r)
id="$mid-$ver.conf"
vm_ssh $g "test -f $entries/$id" || fail "no entry $entries/$id (entries: $(vm_ssh $g ls $entries))"
ok "kernel-install's entry is $id"
sk=$(vm_ssh $g "sed -n 's/^sort-key[[:space:]]*//p' $entries/$id")
info "entry $id: sort-key '$sk', $(vm_ssh $g ls $entries | wc -l) entry file(s)"
[ -n "$sk" ] || fail "the entry has no sort-key (the test of sort-key ordering below needs one)"
loader=$(vm_ssh $g cat /boot/efi/loader/loader.conf)
info "loader.conf: $(printf '%s' "$loader" | paste -sd';' -)"
if printf '%s\n' "$loader" | grep -qE '^[[:space:]]*default'; then fail "loader.conf has a default line"; fi
ok "loader.conf has no default line (systemd-boot's own order picks the default)"
sel=$(vm_efivar $g LoaderEntrySelected) || fail "no LoaderEntrySelected EFI variable"
[ "$sel" = "$id" ] || fail "LoaderEntrySelected is '$sel', not $id"
ok "LoaderEntrySelected names $id"

# 1. An argument in /etc/kernel/cmdline and in the entry's options line; a real reboot.
vm_ssh $g "set -e; sed -i 's/\$/ iommu=pt/' /etc/kernel/cmdline
  sed -i '/^options[[:space:]]/s/\$/ iommu=pt/' $entries/$id; grep -c '^options.* iommu=pt\$' $entries/$id" >/dev/null ||
  fail "could not add iommu=pt to the entry"
vm_reboot $g
c1=$(vm_ssh $g cat /proc/cmdline)
info "boot 1: $c1"
assert_contains " $c1 " " iommu=pt " "/proc/cmdline has iommu=pt after the reboot"
sel=$(vm_efivar $g LoaderEntrySelected) || fail "no LoaderEntrySelected EFI variable"
[ "$sel" = "$id" ] || fail "boot 1: LoaderEntrySelected is '$sel', not $id"
ok "boot 1: LoaderEntrySelected names $id"

# 2. A copy: iommu=off instead of iommu=pt, and a name that systemd-boot orders before the original's (ids
# compare as versions, descending: a leading 9 beats the machine id's leading 4; a name of letters would
# sort after it). With the original's sort-key the copy would be the default, which bootctl (same order as
# the loader) must confirm, or the sort-key check of boot 3 proves nothing; then a sort-key that sorts after
# the original's makes the original the default again. bootctl set-oneshot; reboot.
copy=9-gdrprov-test-once.conf
csk=zz-gdrprov-test
[ "$(printf '%s\n' "$sk" "$csk" | LC_ALL=C sort | head -1)" = "$sk" ] || fail "sort-key $csk does not sort after $sk"
bootctl_default() {
  vm_ssh $g "SYSTEMD_PAGER= bootctl list --no-pager" | awk '$1 == "title:" { d = /\(default\)/ } $1 == "id:" && d { print $2 }'
}
vm_ssh $g "set -e; cd $entries
  sed -e 's/^title .*/title      gdrprov test entry/' \
      -e '/^options[[:space:]]/s/ iommu=pt/ iommu=off/' -e '/^options[[:space:]]/s/\$/ gdrprov_entry=once/' $id > $copy.tmp
  mv $copy.tmp $copy; cat $copy" >/dev/null || fail "could not write $entries/$copy"
default=$(bootctl_default)
[ "$default" = "$copy" ] || fail "with the original's sort-key '$sk', bootctl's default is '$default', not the copy $copy"
ok "with the original's sort-key, bootctl's default is the copy $copy (its id sorts first)"
vm_ssh $g "sed -i 's/^sort-key .*/sort-key   $csk/' $entries/$copy && grep -c '^sort-key   $csk\$' $entries/$copy" >/dev/null ||
  fail "could not set the copy's sort-key"
default=$(bootctl_default)
[ "$default" = "$id" ] || fail "with the copy's sort-key $csk, bootctl's default is '$default', not $id"
ok "with the copy's sort-key $csk (after '$sk'), bootctl's default is $id again"
vm_ssh $g "bootctl set-oneshot $copy" >/dev/null || fail "bootctl set-oneshot $copy failed"
os=$(vm_efivar $g LoaderEntryOneShot) || fail "no LoaderEntryOneShot EFI variable after bootctl set-oneshot"
[ "$os" = "$copy" ] || fail "LoaderEntryOneShot is '$os', not $copy"
ok "bootctl set-oneshot wrote LoaderEntryOneShot=$copy"
vm_reboot $g
c2=$(vm_ssh $g cat /proc/cmdline)
info "boot 2: $c2"
assert_contains " $c2 " " iommu=off " "the boot after set-oneshot has iommu=off"
assert_contains " $c2 " " gdrprov_entry=once " "the boot after set-oneshot used the copied entry"
assert_not_contains " $c2 " " iommu=pt " "the boot after set-oneshot has no iommu=pt"
sel=$(vm_efivar $g LoaderEntrySelected) || fail "no LoaderEntrySelected EFI variable"
[ "$sel" = "$copy" ] || fail "boot 2: LoaderEntrySelected is '$sel', not $copy"
ok "boot 2: LoaderEntrySelected names $copy"
if os=$(vm_efivar $g LoaderEntryOneShot); then fail "LoaderEntryOneShot is still set ('$os') after the one-shot boot"; fi
ok "systemd-boot removed LoaderEntryOneShot"

# 3. The boot after: the default, i.e. the original (its sort-key sorts first, although the copy's name
# would win among equal sort-keys).
vm_reboot $g
c3=$(vm_ssh $g cat /proc/cmdline)
info "boot 3: $c3"
assert_contains " $c3 " " iommu=pt " "the next boot is the default entry again (iommu=pt)"
assert_not_contains " $c3 " " iommu=off " "the next boot has no iommu=off"
sel=$(vm_efivar $g LoaderEntrySelected) || fail "no LoaderEntrySelected EFI variable"
[ "$sel" = "$id" ] || fail "boot 3: LoaderEntrySelected is '$sel', not $id (the copy with the later sort-key became the default?)"
ok "boot 3: LoaderEntrySelected names $id: the copy, with a later sort-key, did not become the default"
vm_poweroff $g
