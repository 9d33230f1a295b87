#!/usr/bin/env bash
# Seconds: 566
# Scenario: Debian 13 + systemd-boot 257 + a UKI: apply rdma-dmabuf -> reboot -> /proc/cmdline; plan empty; rollback ->
# reboot -> the original line and the UKI byte for byte
# Flavor: uki
# Issue 29, case 6: a real Debian 13 UEFI guest that boots a unified kernel image through systemd-boot 257
# (/etc/kernel/install.conf layout=uki, the UKI in $ESP/EFI/Linux, no type #1 entry, the kernel at
# /boot/vmlinuz-VER only). gdrprov must see systemd-boot and the UKI as systemd's own `bootctl list` does, edit
# /etc/kernel/cmdline, rebuild the UKI from /boot/vmlinuz-VER with kernel-install, and roll back to a
# byte-identical UKI. One boot, two reboots.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply
require_gdrprov rollback
require_gdrprov boot

g=uki
VM_FLAVOR=uki vm_fresh $g
mid=$(vm_ssh $g cat /etc/machine-id)
ver=$(vm_ssh $g uname -r)
uid=$mid-$ver.efi
U=/boot/efi/EFI/Linux/$uid
vm_ssh $g "test -f $U && test -f /boot/vmlinuz-$ver && test ! -e /usr/lib/modules/$ver/vmlinuz && test -z \"\$(ls /boot/efi/loader/entries 2>/dev/null)\"" ||
  fail "the guest is not the UKI shape: $(vm_ssh $g "ls -R /boot/efi; ls /boot /usr/lib/modules/$ver")"
ok "the guest runs $(vm_ssh $g 'bootctl --version | head -1'), boots $U, keeps its kernel at /boot/vmlinuz-$ver only"
cmdline() { vm_ssh $g cat /proc/cmdline; }
selected() { vm_efivar $g LoaderEntrySelected || echo none; }
# systemd's own view: the id of the entry `bootctl list` marks (default) or (selected).
sd_marked() {
  vm_ssh $g "SYSTEMD_PAGER= bootctl list --no-pager" |
    awk -v m="($1)" '$1 == "title:" { d = index($0, m) > 0 } $1 == "id:" && d { print $2 }'
}
sums0=$(vm_ssh $g "sha256sum $U /etc/kernel/cmdline")
c0=$(cmdline); info "boot 0: $c0"
[ "$(selected)" = "$uid" ] || fail "LoaderEntrySelected is '$(selected)', not $uid"

# 1. gdrprov sees what systemd sees: the UKI is a type #2 entry, the default and the running one.
{ [ "$(sd_marked default)" = "$uid" ] && [ "$(sd_marked selected)" = "$uid" ]; } ||
  fail "bootctl list: default '$(sd_marked default)', selected '$(sd_marked selected)', not $uid"
list=$(vm_ssh $g "gdrprov boot list")
printf '%s\n' "$list" | sed 's/^/    boot list| /'
[ "$(printf '%s\n' "$list" | head -1)" = "$uid  [default, running]" ] ||
  fail "gdrprov boot list does not show $uid as default and running, as bootctl list does"
ok "boot list: $uid is the default and runs, as bootctl list says"
inv=$(vm_ssh $g "gdrprov inventory")
assert_contains "$inv" "Boot: systemd-boot (ESP /boot/efi, 0 entries, 1 unified kernel image), running $uid (LoaderEntrySelected)" \
  "inventory names systemd-boot, the UKI and the running entry"
assert_not_contains "$(vm_ssh $g "gdrprov inventory --format json")" '"kind": "unknown"' "inventory's JSON has no unknown boot kind"

# 2. apply: /etc/kernel/cmdline, then kernel-install rebuilds the UKI from /boot/vmlinuz-VER.
t=$(date +%s)
out=$(vm_ssh $g "gdrprov apply rdma-dmabuf --force --yes" 2>&1) || { printf '%s\n' "$out"; fail "apply failed"; }
printf '%s\n' "$out" | sed 's/^/    apply| /'
printf '%s' "$out" | grep -q '^Done' || fail "apply did not report Done"
info "apply took $(vm_since "$t") s"
printf '%s\n' "$out" | grep -q "kernel-install.* add .*/boot/vmlinuz-$ver" ||
  fail "apply did not run kernel-install add with /boot/vmlinuz-$ver"
ok "apply rebuilt the UKI with kernel-install from /boot/vmlinuz-$ver"
assert_contains "$(vm_ssh $g cat /etc/kernel/cmdline)" "iommu=pt intel_iommu=on" "/etc/kernel/cmdline has the arguments"
[ "$(vm_ssh $g "sha256sum $U")" != "$(printf '%s\n' "$sums0" | head -1)" ] || fail "the UKI did not change"
vm_reboot $g
c1=$(cmdline); info "boot 1: $c1"
assert_contains " $c1 " " iommu=pt " "/proc/cmdline has iommu=pt"
assert_contains " $c1 " " intel_iommu=on " "/proc/cmdline has intel_iommu=on"
[ "$(selected)" = "$uid" ] || fail "boot 1 ran $(selected), not $uid"
rc=0; vm_ssh $g "gdrprov plan rdma-dmabuf --force --detailed-exitcode" >/dev/null || rc=$?
[ "$rc" = 0 ] || fail "a second plan is not empty (exit $rc)"
ok "a second plan has nothing to do"

# 3. rollback: /etc/kernel/cmdline and the UKI byte for byte; the next boot runs the original line.
vm_ssh $g "gdrprov rollback --yes" | sed 's/^/    rollback| /'
sums1=$(vm_ssh $g "sha256sum $U /etc/kernel/cmdline")
[ "$sums1" = "$sums0" ] || fail "after rollback: $sums1 (before: $sums0)"
ok "rollback gave back the UKI and /etc/kernel/cmdline byte for byte (sha256)"
vm_reboot $g
c2=$(cmdline); info "boot 2: $c2"
[ "$c2" = "$c0" ] || fail "after rollback /proc/cmdline is '$c2', not '$c0'"
ok "the boot after rollback runs the original command line"
vm_poweroff $g
