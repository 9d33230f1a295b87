#!/bin/sh
# mmdebstrap --setup-hook: runs before any package is installed. $1 is the rootfs.
set -eu
root=$1
here=$(dirname "$0")
mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/usr/share/initramfs-tools/modules.d"
echo 'MODULES=list' > "$root/etc/initramfs-tools/conf.d/gdrprov-vm.conf"
grep -v '^#' "$here/initramfs-modules" > "$root/usr/share/initramfs-tools/modules.d/gdrprov-vm"
