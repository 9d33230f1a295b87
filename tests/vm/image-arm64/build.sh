#!/usr/bin/env bash
# The arm64 guest's recipe: build-image-arm64.sh runs this as `image-arm64/build.sh WORK SOURCES` and caches
# the result under a key that is the sha256 of image-arm64/*. WORK is an empty directory; on success it holds
# rootfs.tar (a Debian bookworm arm64 root, built with qemu-user through binfmt_misc), id_ed25519[.pub]
# (root's ssh key) and build.log. The disk is not cached: arm64.sh makes it per run from rootfs.tar (after
# gdrprov has changed the root, as an image build does) and installs GRUB in a first boot.
set -euo pipefail
work=$1 sources=$2
here=$(cd "$(dirname "$0")" && pwd)
VM_DIR=$(dirname "$here")
# shellcheck source=../lib.sh
. "$VM_DIR/lib.sh"
# shellcheck source=../arm64.sh
. "$VM_DIR/arm64.sh"

log="$work/build.log"
ssh-keygen -q -t ed25519 -N '' -C gdrprov-vm-arm64 -f "$work/id_ed25519"

t=$(date +%s)
pkgs=$(grep -v '^#' "$here/packages" | paste -sd, -)
mmdebstrap --mode=root --variant=minbase --architectures=arm64 --include="$pkgs" \
  --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --setup-hook="sh '$here/setup-hook.sh' \"\$1\"" \
  --customize-hook="VM_ROOT_UUID=$VM_ARM64_ROOT_UUID VM_ESP_UUID=$VM_ARM64_ESP_UUID VM_PUBKEY='$work/id_ed25519.pub' sh '$here/customize-hook.sh' \"\$1\"" \
  bookworm "$work/rootfs" "$sources" >"$log" 2>&1 || { tail -30 "$log" >&2; vm_die "mmdebstrap (arm64) failed"; }
vm_log "arm64 rootfs: $(vm_since "$t") s, $(du -sm "$work/rootfs" | cut -f1) MB"
tar -C "$work/rootfs" --numeric-owner --xattrs --acls -cf "$work/rootfs.tar" . ||
  vm_die "tar of the arm64 rootfs failed"
rm -rf "$work/rootfs"
