#!/bin/sh
# mmdebstrap --setup-hook: runs before any package is installed. $1 is the rootfs.
set -eu
root=$1
here=$(dirname "$0")
mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/usr/share/initramfs-tools/modules.d"
echo 'MODULES=list' > "$root/etc/initramfs-tools/conf.d/gdrprov-vm.conf"
grep -v '^#' "$here/initramfs-modules" > "$root/usr/share/initramfs-tools/modules.d/gdrprov-vm"
# sshd's host keys made here by the host's ssh-keygen: openssh-server's postinst makes only the missing ones,
# so no RSA key is generated under qemu-user (its keygen and the fingerprints are 6 emulated processes).
mkdir -p "$root/etc/ssh"
ssh-keygen -A -f "$root" >/dev/null
