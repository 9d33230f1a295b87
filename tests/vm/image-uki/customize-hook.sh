#!/bin/sh
# mmdebstrap --customize-hook of the uki flavor: runs after image/customize-hook.sh (the GRUB recipe's hook:
# hostname, fixed machine id, ssh key, boot-speed tweaks). $1 is the rootfs.
# Environment from image/build.sh (flavor uki): VM_ROOT_UUID, VM_ESP_ID (the FAT volume id, 8 hex digits).
set -eu
root=$1
here=$(dirname "$0")

# What the GRUB hook left that has no place here: the /etc/default/grub it edited (an empty file build.sh
# gave it) and its GRUB installer.
rm -f "$root/etc/default/grub" "$root/usr/local/sbin/gdrprov-vm-install-grub"

# The ESP at /boot/efi, as Debian's installer mounts it (fsck pass 0: the guest has no fsck.vfat).
esp_uuid=$(echo "$VM_ESP_ID" | sed 's/^\(....\)\(....\)$/\1-\2/')
mkdir -p "$root/boot/efi"
printf 'UUID=%s\t/boot/efi\tvfat\tumask=0077\t0\t0\n' "$esp_uuid" >> "$root/etc/fstab"

# kernel-install builds a UKI (ukify, Debian's 55-initrd.install hands it /boot/initrd.img-VER) into
# $ESP/EFI/Linux, with this command line (the other flavors' console and mitigations=off).
mkdir -p "$root/etc/kernel"
printf 'layout=uki\n' > "$root/etc/kernel/install.conf"
printf 'root=UUID=%s ro mitigations=off console=ttyS0,115200n8\n' "$VM_ROOT_UUID" > "$root/etc/kernel/cmdline"

# The one-shot init that installs systemd-boot and the UKI on the first boot (see build.sh).
install -m 755 "$here/install-uki-init.sh" "$root/usr/local/sbin/gdrprov-vm-install-uki"
