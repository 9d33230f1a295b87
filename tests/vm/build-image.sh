#!/usr/bin/env bash
# Build (or reuse) one of the testbed's images, by flavor; the recipe is image/build.sh (one recipe with
# flavors), this script keeps the cache.
#
#   tests/vm/build-image.sh            the GRUB image (Debian bookworm, BIOS, GRUB in the MBR, kmod, rdma-core,
#                                      perftest): build if the cached image of this recipe is missing; print its dir
#   tests/vm/build-image.sh --force    rebuild even if cached
#   tests/vm/build-image.sh --flavor sdboot [--force]   UEFI + systemd-boot 252 (GDRPROV_VM_FLAVOR=sdboot
#                                      does the same; default flavor: grub)
#   tests/vm/build-image.sh --flavor uki   Debian 13 (trixie), systemd-boot 257 booting a UKI
#   tests/vm/build-image.sh --flavor slurm [--force]    the GRUB image plus Slurm, munge and python3
#   tests/vm/build-image.sh --flavor arm64 [--force]    the arm64 guest's root (rootfs.tar; arm64.sh makes
#                                      its disk per run)
#
# Cache: ${GDRPROV_VM_CACHE:-$HOME/.cache/gdrprov-vm}/PREFIX-KEY/ (PREFIX bookworm, slurm-bookworm,
# sdboot-bookworm, uki-trixie, arm64-bookworm), KEY = sha256 of tests/vm/image/* (the recipe image/build.sh,
# the GRUB flavor's package list, hooks and installer), then, for every flavor but grub, of image-FLAVOR/*
# (lib/host.sh: vm_recipe_key). It holds disk.raw (sparse, read-only; guests boot overlays of it) or, arm64,
# rootfs.tar; the ssh key pair for root; build.log; sdboot and uki also OVMF_CODE.fd and OVMF_VARS.fd (the EFI
# variable store after the install; each guest boots a writable copy of it). Images of other recipes of the
# same flavor are removed after 3 days unused.
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
    *) vm_die "usage: build-image.sh [--force] [--flavor grub|sdboot|uki|slurm|arm64]" ;;
  esac
  shift
done
# The flavor's cache prefix, its artifact, and its lock (the arm64 root has its own: it needs other host tools).
artifact=disk.raw lock=.build.lock tag=
case $flavor in
  grub) prefix=bookworm- ;;
  sdboot) prefix=sdboot-bookworm- ;;
  uki) prefix=uki-trixie- ;;
  slurm) prefix=slurm-bookworm- ;;
  arm64) prefix=arm64-bookworm- artifact=rootfs.tar lock=.build-arm64.lock tag=-arm64
    # shellcheck source=arm64.sh
    . "$VM_DIR/arm64.sh" ;;
  *) vm_die "unknown flavor '$flavor' (grub, sdboot, uki, slurm, arm64)" ;;
esac

out=$(vm_image_dir "$flavor")
if [ "$force" = 0 ] && [ -f "$out/$artifact" ]; then
  touch "$out"; echo "$out"; exit 0
fi

if [ "$flavor" = arm64 ]; then vm_arm64_install_host_deps; else vm_install_host_deps; fi
mkdir -p "$VM_CACHE"
exec 9>"$VM_CACHE/$lock"
flock -w 1800 9 || vm_die "another image build holds $VM_CACHE/$lock"
if [ "$force" = 0 ] && [ -f "$out/$artifact" ]; then touch "$out"; echo "$out"; exit 0; fi   # built while we waited

sources=
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [ -s "$f" ] && grep -q 'bookworm' "$f" && { sources=$f; break; }
done
[ -n "$sources" ] || vm_die "no apt sources for Debian bookworm on this host (looked at /etc/apt/sources.list.d/debian.sources, /etc/apt/sources.list)"

t_all=$(date +%s)
work="$VM_CACHE/.build$tag-$$"
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
vm_log "building image $(basename "$out") (log: $out/build.log)"

"$VM_DIR/image/build.sh" "$flavor" "$work" "$sources" ||
  { cp "$work/build.log" "$VM_CACHE/failed-build$tag.log" 2>/dev/null; vm_die "image build failed (log: $VM_CACHE/failed-build$tag.log)"; }

chmod 444 "$work/$artifact"
if vm_uefi_flavor "$flavor"; then chmod 444 "$work/OVMF_CODE.fd" "$work/OVMF_VARS.fd"; fi
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
# Drop images of other recipes unused for 3 days (run.sh touches the image it uses). Not at once: two
# checkouts with different recipes on one machine would otherwise delete each other's image on every build.
find "$VM_CACHE" -maxdepth 1 -name "$prefix*" -type d ! -path "$out" -mtime +3 -exec rm -rf {} + 2>/dev/null || true
vm_log "image ready in $(vm_since "$t_all") s: $out ($(du -h "$out/$artifact" | cut -f1) used)"
echo "$out"
