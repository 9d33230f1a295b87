#!/usr/bin/env bash
# The slurm flavor's recipe: the GRUB image of image/ plus Debian's Slurm (slurmctld, slurmd, the client,
# 22.05), munge and python3. build-image.sh --flavor slurm runs this as `image-slurm/build.sh WORK SOURCES`
# and caches the result as slurm-bookworm-KEY, KEY = sha256 of image/* then image-slurm/* (the GRUB image's
# own key covers image/* only: adding this flavor changed nothing there, and the other scenarios' image
# stays as small as it was). How: a copy of image/ whose package list gets image-slurm/packages appended
# and whose customize hook runs image-slurm/customize-hook.sh after its own, run as it is. Same disk
# layout, boot loader, ssh key handling and boot-speed settings as the GRUB flavor.
set -euo pipefail
work=$1 sources=$2
here=$(cd "$(dirname "$0")" && pwd)
VM_DIR=$(dirname "$here")
recipe=$work/.recipe
rm -rf "$recipe"
mkdir -p "$recipe/image"
cp -a "$VM_DIR/image/." "$recipe/image/"
ln -s "$VM_DIR/lib.sh" "$recipe/lib.sh"
grep -v '^#' "$here/packages" >> "$recipe/image/packages"
cp "$here/customize-hook.sh" "$recipe/image/customize-hook-slurm.sh"
# shellcheck disable=SC2016
printf '\nsh "$here/customize-hook-slurm.sh" "$root"\n' >> "$recipe/image/customize-hook.sh"
"$recipe/image/build.sh" "$work" "$sources"
rm -rf "$recipe"
