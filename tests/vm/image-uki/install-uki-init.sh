#!/bin/sh
# Runs as init (PID 1) on the uki image's only direct-kernel boot (OVMF with -kernel/-initrd): installs
# systemd-boot into the ESP and its boot entry into the EFI variables (bootctl install), then builds the UKI
# the way Debian 13 does for a kernel (`kernel-install add VER /boot/vmlinuz-VER`, layout=uki: ukify writes
# $ESP/EFI/Linux/MACHINEID-VER.efi, a type #2 entry), sets loader.conf's timeout to 0, generates ssh host
# keys and powers off. udevd runs meanwhile (bootctl checks the ESP's partition through udev/blkid). After
# the remount-ro only shell builtins run.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys 2>/dev/null
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t efivarfs efivarfs /sys/firmware/efi/efivars
mount -o remount,rw /
rc=0
/usr/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add
udevadm settle --timeout=120
mount /boot/efi || rc=1
bootctl install || rc=2
printf 'timeout 0\n' > /boot/efi/loader/loader.conf || rc=3
for k in /boot/vmlinuz-*; do
  [ -f "$k" ] || continue
  kernel-install add "${k#/boot/vmlinuz-}" "$k" || rc=4
done
ls /boot/efi/EFI/Linux/*.efi >/dev/null 2>&1 || rc=8
ssh-keygen -A || rc=5
echo "--- ESP:"; find /boot/efi -type f | sort
echo "--- bootctl list:"; SYSTEMD_PAGER='' bootctl list --no-pager 2>&1
echo "--- EFI boot variables:"
# shellcheck disable=SC2010 # efivarfs names are plain ASCII (NAME-GUID); a listing for the build log
ls /sys/firmware/efi/efivars | grep -E '^(Boot[0-9A-F]{4}|BootOrder)-' | sort
udevadm control --exit
umount /boot/efi || rc=6
sync
mount -o remount,ro / || rc=7
echo "GDRPROV-VM-INSTALL-UKI rc=$rc" > /dev/ttyS0
echo o > /proc/sysrq-trigger
while :; do :; done
