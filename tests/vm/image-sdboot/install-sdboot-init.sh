#!/bin/sh
# Runs as init (PID 1) on the systemd-boot image's only direct-kernel boot (OVMF with -kernel/-initrd):
# does what Debian's systemd-boot postinst does on a host with a mounted ESP (bootctl install, then
# kernel-install add for the kernel), sets loader.conf's timeout to 0 (no `default` line: systemd-boot's own
# ordering picks the default entry), generates ssh host keys, then powers off. udevd runs meanwhile (bootctl
# checks the ESP's partition through udev/blkid). After the remount-ro only shell builtins run.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys 2>/dev/null
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t efivarfs efivarfs /sys/firmware/efi/efivars
mount -o remount,rw /
rc=0
/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add
udevadm settle --timeout=120
mount /boot/efi || rc=1
bootctl install --make-machine-id-directory=auto || rc=2
printf 'timeout 0\n' > /boot/efi/loader/loader.conf || rc=3
for k in /boot/vmlinuz-*; do
  [ -f "$k" ] || continue
  kernel-install add "${k#/boot/vmlinuz-}" "$k" || rc=4
done
ssh-keygen -A || rc=5
echo "--- ESP:"; find /boot/efi -type f | sort
for e in /boot/efi/loader/entries/*.conf; do echo "--- $e:"; cat "$e"; done
echo "--- bootctl list:"; SYSTEMD_PAGER='' bootctl list --no-pager 2>&1
echo "--- EFI boot variables:"
# shellcheck disable=SC2010 # efivarfs names are plain ASCII (NAME-GUID); a listing for the build log
ls /sys/firmware/efi/efivars | grep -E '^(Boot[0-9A-F]{4}|BootOrder)-' | sort
udevadm control --exit
umount /boot/efi || rc=6
sync
mount -o remount,ro / || rc=7
echo "GDRPROV-VM-INSTALL-SDBOOT rc=$rc" > /dev/ttyS0
echo o > /proc/sysrq-trigger
while :; do :; done
