#!/usr/bin/env bash
# Build (or reuse) the arm64 guest's root: Debian bookworm arm64 (linux-image-arm64, grub-efi-arm64, systemd,
# openssh), built on this x86 host by mmdebstrap through qemu-user (binfmt_misc).
#
#   tests/vm/build-image-arm64.sh            build if the cached root for this recipe is missing; print its dir
#   tests/vm/build-image-arm64.sh --force    rebuild even if cached
#
# Cache: ${GDRPROV_VM_CACHE:-$HOME/.cache/gdrprov-vm}/arm64-bookworm-KEY/, KEY = sha256 of
# tests/vm/image-arm64/*. It holds rootfs.tar, root's ssh key pair and build.log. Only the root is cached:
# the disk (GPT, ESP, ext4) is made per run from it after gdrprov has changed the root, and GRUB is installed
# by the disk's first boot (arm64.sh), as an image pipeline does. Roots of other recipes go after 3 days unused.
set -euo pipefail
VM_DIR=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$VM_DIR/lib.sh"
# shellcheck source=arm64.sh
. "$VM_DIR/arm64.sh"

force=0
[ "${1:-}" = --force ] && force=1

out=$(vm_arm64_image_dir)
if [ "$force" = 0 ] && [ -f "$out/rootfs.tar" ]; then
  touch "$out"; echo "$out"; exit 0
fi

vm_arm64_install_host_deps
mkdir -p "$VM_CACHE"
exec 9>"$VM_CACHE/.build-arm64.lock"
flock -w 1800 9 || vm_die "another arm64 build holds $VM_CACHE/.build-arm64.lock"
if [ "$force" = 0 ] && [ -f "$out/rootfs.tar" ]; then touch "$out"; echo "$out"; exit 0; fi

sources=
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [ -s "$f" ] && grep -q 'bookworm' "$f" && { sources=$f; break; }
done
[ -n "$sources" ] || vm_die "no apt sources for Debian bookworm on this host"

t_all=$(date +%s)
work="$VM_CACHE/.build-arm64-$$"
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
vm_log "building the arm64 root $(basename "$out") (log: $out/build.log)"
"$VM_DIR/image-arm64/build.sh" "$work" "$sources" ||
  { cp "$work/build.log" "$VM_CACHE/failed-build-arm64.log" 2>/dev/null; vm_die "arm64 build failed (log: $VM_CACHE/failed-build-arm64.log)"; }
chmod 444 "$work/rootfs.tar"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
find "$VM_CACHE" -maxdepth 1 -name 'arm64-bookworm-*' -type d ! -path "$out" -mtime +3 -exec rm -rf {} + 2>/dev/null || true
vm_log "arm64 root ready in $(vm_since "$t_all") s: $out ($(du -h "$out/rootfs.tar" | cut -f1))"
echo "$out"
