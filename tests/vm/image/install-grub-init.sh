#!/bin/sh
# Runs as init (PID 1) on the image's only direct-kernel boot: installs GRUB into the MBR of /dev/vda,
# writes grub.cfg, generates ssh host keys, then powers off. After the remount-ro only shell builtins
# run (an external command after it corrupted a directory once).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys 2>/dev/null
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -o remount,rw /
rc=0
echo "grub-pc grub-pc/install_devices multiselect /dev/vda" | debconf-set-selections || rc=1
grub-install --target=i386-pc /dev/vda || rc=2
update-grub || rc=3
ssh-keygen -A || rc=4
# (the script stays: deleting it while the shell reads it would keep / busy for the remount below)
sync
mount -o remount,ro / || rc=5
echo "GDRPROV-VM-INSTALL-GRUB rc=$rc" > /dev/ttyS0
echo o > /proc/sysrq-trigger
while :; do :; done
