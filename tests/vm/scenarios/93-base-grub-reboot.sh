#!/usr/bin/env bash
# Seconds: 1
# Scenario: baseline: grub-reboot ENTRY boots a custom menuentry once, the boot after is the default again
# GRUB_DEFAULT=saved, a menuentry with --id, grub-reboot, two real reboots. The base of 02 (boot once) and
# 03 (trial boot).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
baseline_covered_by 02-gds-boot-once boot

g=grubonce
vm_fresh $g
# shellcheck disable=SC2016 # the guest's shell expands it
vm_ssh $g 'set -e
  k=$(ls /boot/vmlinuz-* | sort -V | tail -1); i=/boot/initrd.img-${k#/boot/vmlinuz-}
  uuid=$(findmnt -no UUID /)
  cat > /etc/grub.d/45_gdrprov_test <<EOT
#!/bin/sh
exec tail -n +3 \$0
menuentry "gdrprov test entry" --id gdrprov-test {
	insmod part_msdos
	insmod ext2
	search --no-floppy --fs-uuid --set=root $uuid
	linux $k root=UUID=$uuid ro mitigations=off console=ttyS0,115200n8 gdrprov_entry=once
	initrd $i
}
EOT
  chmod +x /etc/grub.d/45_gdrprov_test
  sed -i "s/^GRUB_DEFAULT=.*/GRUB_DEFAULT=saved/" /etc/default/grub
  update-grub 2>&1
  grub-reboot gdrprov-test
  grub-editenv list' >/dev/null
env=$(vm_ssh $g grub-editenv list)
assert_contains "$env" "next_entry=gdrprov-test" "grub-reboot set next_entry"

vm_reboot $g
c1=$(vm_ssh $g cat /proc/cmdline)
info "boot 1: $c1"
assert_contains "$c1" "gdrprov_entry=once" "the first boot after grub-reboot used the custom entry"
env=$(vm_ssh $g grub-editenv list)
assert_not_contains "$env" "next_entry=gdrprov-test" "GRUB cleared next_entry"

vm_reboot $g
c2=$(vm_ssh $g cat /proc/cmdline)
info "boot 2: $c2"
assert_not_contains "$c2" "gdrprov_entry=once" "the next boot is the default entry again"
vm_poweroff $g
