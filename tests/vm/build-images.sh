#!/usr/bin/env bash
# Build (or reuse) every image the testbed's scenarios use, one after the other, and say how long each took:
# the GRUB image, the flavors the scenarios name (slurm, sdboot, uki) and the arm64 root.
#
#   tests/vm/build-images.sh           build what the cache lacks (GDRPROV_VM_CACHE, as build-image.sh)
#
# .ci/run starts it in the background before the compiler's work: from nothing, on two cores, the images take
# 15-18 minutes one after the other (apt downloads, dpkg, a first boot of the UEFI images, arm64 under
# qemu-user), most of it not the compiler's kind of work, so it overlaps. run.sh then finds each in the cache;
# a build still running holds its lock (build-image.sh), and run.sh's own call waits for
# it, so nothing is built twice. Exit status: 0 when every image is there.
set -uo pipefail
VM_DIR=$(cd "$(dirname "$0")" && pwd)
rc=0
build() {
  local what=$1 t out; shift
  t=$(date +%s)
  if out=$("$@" 2>&1); then
    echo "build-images.sh: $what: $(printf '%s\n' "$out" | tail -n 1) ($(( $(date +%s) - t )) s)"
  else
    printf '%s\n' "$out" | tail -n 20
    echo "build-images.sh: $what failed ($(( $(date +%s) - t )) s)"
    rc=1
  fi
}
# In the order the longest scenarios need them (run.sh starts those first): 19 and most use the GRUB image,
# 20 the Slurm one, 14 systemd-boot, 18 the UKI, 15 the arm64 root.
build "image grub" "$VM_DIR/build-image.sh"
for flavor in slurm sdboot uki; do build "image $flavor" "$VM_DIR/build-image.sh" --flavor "$flavor"; done
build "arm64 root" "$VM_DIR/build-image.sh" --flavor arm64
exit $rc
