#!/usr/bin/env bash
# Build (or reuse) the testbed's Debian bookworm disk image: real GRUB in the MBR, kmod, rdma-core, perftest.
#
#   tests/vm/build-image.sh            build if the cached image for this recipe is missing; print its dir
#   tests/vm/build-image.sh --force    rebuild even if cached
#
# Cache: ${GDRPROV_VM_CACHE:-$HOME/.cache/gdrprov-vm}/bookworm-KEY/, KEY = sha256 of this script and of
# tests/vm/image/* (the recipe). It holds disk.raw (sparse, read-only; guests boot overlays of it), the ssh
# key pair for root, and build.log. Older keys are removed after a successful build.
#
# Packages come from the host's own apt sources (/etc/apt/sources.list.d/debian.sources, else
# /etc/apt/sources.list), so no mirror host is named here. Needs root (mmdebstrap --mode=root, apt).
set -euo pipefail
VM_DIR=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$VM_DIR/lib.sh"

force=0
[ "${1:-}" = --force ] && force=1

ROOT_UUID=8a1e0c5d-2b7f-4c39-9d64-3e5f1a2b7c90
DISK_SIZE=4G

out=$(vm_image_dir)
if [ "$force" = 0 ] && [ -f "$out/disk.raw" ]; then
  echo "$out"; exit 0
fi

vm_install_host_deps
mkdir -p "$VM_CACHE"
exec 9>"$VM_CACHE/.build.lock"
flock -w 1800 9 || vm_die "another image build holds $VM_CACHE/.build.lock"
if [ "$force" = 0 ] && [ -f "$out/disk.raw" ]; then echo "$out"; exit 0; fi   # built while we waited

sources=
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [ -s "$f" ] && grep -q 'bookworm' "$f" && { sources=$f; break; }
done
[ -n "$sources" ] || vm_die "no apt sources for Debian bookworm on this host (looked at /etc/apt/sources.list.d/debian.sources, /etc/apt/sources.list)"

t_all=$(date +%s)
work="$VM_CACHE/.build-$$"
rm -rf "$work"; mkdir -p "$work"
cleanup_build() {
  [ -n "${qpid:-}" ] && kill "$qpid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup_build EXIT
log="$work/build.log"
vm_log "building image $(basename "$out") (log: $out/build.log)"

ssh-keygen -q -t ed25519 -N '' -C gdrprov-vm -f "$work/id_ed25519"

# 1. Root filesystem.
t=$(date +%s)
pkgs=$(grep -v '^#' "$VM_DIR/image/packages" | paste -sd, -)
mmdebstrap --mode=root --variant=minbase --include="$pkgs" \
  --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --setup-hook="sh '$VM_DIR/image/setup-hook.sh' \"\$1\"" \
  --customize-hook="VM_ROOT_UUID=$ROOT_UUID VM_PUBKEY='$work/id_ed25519.pub' sh '$VM_DIR/image/customize-hook.sh' \"\$1\"" \
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
  -append "root=UUID=$ROOT_UUID ro console=ttyS0,115200n8 init=/usr/local/sbin/gdrprov-vm-install-grub panic=-1" \
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

chmod 444 "$work/disk.raw"
mv "$log" "$work/build.log.tmp"
rm -f "$work/vmlinuz" "$work/initrd.img" "$work/install-grub.log"
mv "$work/build.log.tmp" "$work/build.log"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
# Drop images of older recipes.
for old in "$VM_CACHE"/bookworm-*; do
  [ "$old" = "$out" ] || rm -rf "$old"
done
vm_log "image ready in $(vm_since "$t_all") s: $out ($(du -h "$out/disk.raw" | cut -f1) used)"
echo "$out"
