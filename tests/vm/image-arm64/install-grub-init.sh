#!/bin/sh
# Runs as init (PID 1) on the arm64 disk's only direct-kernel boot (AAVMF firmware, -kernel/-initrd):
# mounts the ESP, installs GRUB for arm64-efi at the removable path EFI/BOOT/BOOTAA64.EFI (no NVRAM entry
# needed), writes grub.cfg from /etc/default/grub (update-grub), then powers off. After the remount-ro only
# shell builtins run (an external command after it corrupted a directory once).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys 2>/dev/null
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -o remount,rw /
rc=0
mount /boot/efi || rc=1
grub-install --target=arm64-efi --efi-directory=/boot/efi --removable --no-nvram || rc=2
update-grub || rc=3
sync
umount /boot/efi || rc=4
mount -o remount,ro / || rc=5
echo "GDRPROV-VM-INSTALL-GRUB rc=$rc" > /dev/ttyAMA0
echo o > /proc/sysrq-trigger
while :; do :; done
