#!/usr/bin/env bash
# The image recipe: build-image.sh runs this as `image/build.sh WORK SOURCES` and caches the result under a
# key that is the sha256 of image/* (this file, the package list, the hooks). WORK is an empty directory;
# on success it holds disk.raw (GRUB in the MBR, one ext4 partition), id_ed25519[.pub] (root's ssh key)
# and build.log. SOURCES is the host's apt sources file for bookworm.
set -euo pipefail
work=$1 sources=$2
here=$(cd "$(dirname "$0")" && pwd)
VM_DIR=$(dirname "$here")
# shellcheck source=../lib.sh
. "$VM_DIR/lib.sh"

ROOT_UUID=8a1e0c5d-2b7f-4c39-9d64-3e5f1a2b7c90
DISK_SIZE=4G
log="$work/build.log"
qpid=
trap '[ -n "$qpid" ] && kill "$qpid" 2>/dev/null; true' EXIT

ssh-keygen -q -t ed25519 -N '' -C gdrprov-vm -f "$work/id_ed25519"

# 1. Root filesystem.
t=$(date +%s)
pkgs=$(grep -v '^#' "$here/packages" | paste -sd, -)
mmdebstrap --mode=root --variant=minbase --include="$pkgs" \
  --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --setup-hook="sh '$here/setup-hook.sh' \"\$1\"" \
  --customize-hook="VM_ROOT_UUID=$ROOT_UUID VM_PUBKEY='$work/id_ed25519.pub' sh '$here/customize-hook.sh' \"\$1\"" \
  bookworm "$work/rootfs" "$sources" >"$log" 2>&1 || { tail -30 "$log" >&2; vm_die "mmdebstrap failed"; }
vm_log "rootfs: $(vm_since "$t") s, $(du -sm "$work/rootfs" | cut -f1) MB"

kernel=$(ls "$work"/rootfs/boot/vmlinuz-* | sort -V | tail -1)
initrd=$(ls "$work"/rootfs/boot/initrd.img-* | sort -V | tail -1)
cp "$kernel" "$work/vmlinuz"; cp "$initrd" "$work/initrd.img"
vm_log "kernel $(basename "$kernel"), initramfs $(du -h "$initrd" | cut -f1)"

# 2. Disk: one bootable partition at 1 MiB, ext4 written straight from the rootfs (no loop devices).
t=$(date +%s)
truncate -s "$DISK_SIZE" "$work/disk.raw"
echo 'start=2048, type=83, bootable' | sfdisk -q "$work/disk.raw" >>"$log" 2>&1
size_k=$(( $(stat -c %s "$work/disk.raw") / 1024 - 1024 ))
mkfs.ext4 -q -F -U "$ROOT_UUID" -L gdrprov-root -E offset=1048576 -d "$work/rootfs" "$work/disk.raw" "${size_k}k" >>"$log" 2>&1 ||
  { tail -20 "$log" >&2; vm_die "mkfs.ext4 failed"; }
rm -rf "$work/rootfs"
vm_log "disk: $(vm_since "$t") s"

# 3. One direct-kernel boot whose init installs GRUB into the MBR and writes grub.cfg, then powers off.
t=$(date +%s)
# shellcheck disable=SC2046
qemu-system-x86_64 -name gdrprov-vm-build -machine q35 $(vm_accel_args) -smp "$VM_SMP" -m "$VM_MEM" \
  -drive "file=$work/disk.raw,if=virtio,format=raw,cache=unsafe" -nic none \
  -kernel "$work/vmlinuz" -initrd "$work/initrd.img" \
  -append "root=UUID=$ROOT_UUID ro mitigations=off console=ttyS0,115200n8 init=/usr/local/sbin/gdrprov-vm-install-grub panic=-1" \
  -display none -vga none -monitor none -serial "file:$work/install-grub.log" -no-reboot &
qpid=$!
if ! timeout 600 tail --pid="$qpid" -f /dev/null; then
  kill "$qpid" 2>/dev/null; vm_die "GRUB install boot did not finish in 600 s (see $work/install-grub.log)"
fi
qpid=
cat "$work/install-grub.log" >>"$log"
grep -q 'GDRPROV-VM-INSTALL-GRUB rc=0' "$work/install-grub.log" ||
  { tail -30 "$work/install-grub.log" >&2; vm_die "GRUB install failed"; }
vm_log "GRUB installed: $(vm_since "$t") s"

rm -f "$work/vmlinuz" "$work/initrd.img" "$work/install-grub.log"
