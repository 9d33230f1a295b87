#!/usr/bin/env bash
# Build (or reuse) the testbed's Debian bookworm disk image: real GRUB in the MBR (or, flavor sdboot, UEFI with
# systemd-boot), kmod, rdma-core, perftest.
#
#   tests/vm/build-image.sh            build if the cached image for this recipe is missing; print its dir
#   tests/vm/build-image.sh --force    rebuild even if cached
#   tests/vm/build-image.sh --flavor sdboot [--force]   the UEFI + systemd-boot image (GDRPROV_VM_FLAVOR=sdboot
#                                      does the same; default flavor: grub)
#   tests/vm/build-image.sh --flavor uki   Debian 13 (trixie), systemd-boot 257 booting a UKI
#                                      (cache uki-trixie-KEY/, KEY = sha256 of image/* and image-uki/*)
#   tests/vm/build-image.sh --flavor slurm [--force]    the GRUB image plus Slurm, munge and python3
#
# Cache: ${GDRPROV_VM_CACHE:-$HOME/.cache/gdrprov-vm}/bookworm-KEY/, KEY = sha256 of tests/vm/image/*
# (the recipe: image/build.sh, the package list, the hooks). It holds disk.raw (sparse, read-only; guests boot overlays of it), the ssh
# key pair for root, and build.log. Images of other recipes are removed after 3 days unused.
# The sdboot flavor: sdboot-bookworm-KEY/, KEY = sha256 of image/* and image-sdboot/* (image-sdboot/build.sh
# reuses image/'s packages and hooks); it also holds OVMF_CODE.fd and OVMF_VARS.fd (the EFI variable store
# after the install; each guest boots a writable copy of it).
#
# Packages come from the host's own apt sources (/etc/apt/sources.list.d/debian.sources, else
# /etc/apt/sources.list), so no mirror host is named here. Needs root (mmdebstrap --mode=root, apt).
set -euo pipefail
VM_DIR=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$VM_DIR/lib.sh"

force=0 flavor=${GDRPROV_VM_FLAVOR:-grub}
while [ $# -gt 0 ]; do
  case $1 in
    --force) force=1 ;;
    --flavor) flavor=${2:-}; shift ;;
    --flavor=*) flavor=${1#--flavor=} ;;
    *) vm_die "usage: build-image.sh [--force] [--flavor grub|sdboot|uki|slurm]" ;;
  esac
  shift
done
case $flavor in
  grub) recipe=$VM_DIR/image/build.sh prefix=bookworm- ;;
  sdboot) recipe=$VM_DIR/image-sdboot/build.sh prefix=sdboot-bookworm- ;;
  uki) recipe=$VM_DIR/image-uki/build.sh prefix=uki-trixie- ;;
  slurm) recipe=$VM_DIR/image-slurm/build.sh prefix=slurm-bookworm- ;;
  *) vm_die "unknown flavor '$flavor' (grub, sdboot, uki, slurm)" ;;
esac

out=$(vm_image_dir "$flavor")
if [ "$force" = 0 ] && [ -f "$out/disk.raw" ]; then
  touch "$out"; echo "$out"; exit 0
fi

vm_install_host_deps
mkdir -p "$VM_CACHE"
exec 9>"$VM_CACHE/.build.lock"
flock -w 1800 9 || vm_die "another image build holds $VM_CACHE/.build.lock"
if [ "$force" = 0 ] && [ -f "$out/disk.raw" ]; then touch "$out"; echo "$out"; exit 0; fi   # built while we waited

sources=
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [ -s "$f" ] && grep -q 'bookworm' "$f" && { sources=$f; break; }
done
[ -n "$sources" ] || vm_die "no apt sources for Debian bookworm on this host (looked at /etc/apt/sources.list.d/debian.sources, /etc/apt/sources.list)"

t_all=$(date +%s)
work="$VM_CACHE/.build-$$"
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
vm_log "building image $(basename "$out") (log: $out/build.log)"

"$recipe" "$work" "$sources" ||
  { cp "$work/build.log" "$VM_CACHE/failed-build.log" 2>/dev/null; vm_die "image build failed (log: $VM_CACHE/failed-build.log)"; }

chmod 444 "$work/disk.raw"
vm_uefi_flavor "$flavor" && chmod 444 "$work/OVMF_CODE.fd" "$work/OVMF_VARS.fd"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
# Drop images of other recipes unused for 3 days (run.sh touches the image it uses). Not at once: two
# checkouts with different recipes on one machine would otherwise delete each other's image on every build.
find "$VM_CACHE" -maxdepth 1 -name "$prefix*" -type d ! -path "$out" -mtime +3 -exec rm -rf {} + 2>/dev/null || true
vm_log "image ready in $(vm_since "$t_all") s: $out ($(du -h "$out/disk.raw" | cut -f1) used)"
echo "$out"
