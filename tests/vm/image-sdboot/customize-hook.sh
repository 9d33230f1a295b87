#!/bin/sh
# mmdebstrap --customize-hook of the systemd-boot flavor: runs after image/customize-hook.sh (the GRUB
# recipe's hook: hostname, fixed machine id, ssh key, boot-speed tweaks). $1 is the rootfs.
# Environment from image/build.sh (flavor sdboot): VM_ROOT_UUID, VM_ESP_ID (the FAT volume id, 8 hex digits).
set -eu
root=$1
here=$(dirname "$0")

# What the GRUB hook left that has no place on a systemd-boot host: the /etc/default/grub it edited (an
# empty file build.sh gave it) and its GRUB installer.
rm -f "$root/etc/default/grub" "$root/usr/local/sbin/gdrprov-vm-install-grub"
rmdir "$root/etc/default" 2>/dev/null || true

# The ESP at /boot/efi (as Debian's installer mounts it). fsck pass 0 like the root: a throwaway overlay
# needs no boot-time check, and the guest has no fsck.vfat.
esp_uuid=$(echo "$VM_ESP_ID" | sed 's/^\(....\)\(....\)$/\1-\2/')
mkdir -p "$root/boot/efi"
printf 'UUID=%s\t/boot/efi\tvfat\tumask=0077\t0\t0\n' "$esp_uuid" >> "$root/etc/fstab"

# The kernel command line kernel-install writes into the entries (the GRUB image's
# GRUB_CMDLINE_LINUX_DEFAULT, see image/customize-hook.sh, after root= and ro).
mkdir -p "$root/etc/kernel"
printf 'root=UUID=%s ro mitigations=off console=ttyS0,115200n8\n' "$VM_ROOT_UUID" > "$root/etc/kernel/cmdline"

# The one-shot init that installs systemd-boot on the first boot (see build.sh).
install -m 755 "$here/install-sdboot-init.sh" "$root/usr/local/sbin/gdrprov-vm-install-sdboot"
