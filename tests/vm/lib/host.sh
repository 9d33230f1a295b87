# shellcheck shell=bash
# The VM testbed's host side (sourced by ../lib.sh): the host packages it installs, the image cache
# (each flavor's recipe key and directory, OVMF firmware) and the accelerator.

# --- host dependencies -----------------------------------------------------------------------------------

# Install, with apt, what the testbed needs on the host (Debian packages only). Idempotent and quiet when
# everything is there. qemu-system-x86 and qemu-utils must come from the same release (a newer qemu-utils
# from backports Breaks the older qemu-system-common), so qemu-utils is pinned to qemu-system-x86's
# candidate version when qemu-system-x86 has to be installed.
vm_install_host_deps() {
  local need=() cmd pkg
  for cmd in mmdebstrap:mmdebstrap qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils sfdisk:fdisk \
             mkfs.ext4:e2fsprogs ssh:openssh-client ssh-keygen:openssh-client eatmydata:eatmydata \
             flock:util-linux sha256sum:coreutils python3:python3 mkfs.vfat:dosfstools mcopy:mtools \
             prometheus:prometheus promtool:prometheus; do
    command -v "${cmd%%:*}" >/dev/null 2>&1 || need+=("${cmd#*:}")
  done
  vm_ovmf_files >/dev/null || need+=(ovmf)   # the sdboot flavor's firmware
  [ -d /usr/share/mmdebstrap/hooks/eatmydata ] || need+=(mmdebstrap)
  [ ${#need[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || vm_die "missing host packages (${need[*]}); install them as root: apt-get install ${need[*]}"
  vm_log "installing host packages: ${need[*]}"
  local apt=(apt-get -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends)
  export DEBIAN_FRONTEND=noninteractive
  apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null || vm_die "apt-get update failed"
  local pkgs=() extra=()
  for pkg in "${need[@]}"; do
    case " ${pkgs[*]} " in *" $pkg "*) ;; *) pkgs+=("$pkg") ;; esac
  done
  if [[ " ${pkgs[*]} " == *" qemu-system-x86 "* ]]; then
    local v
    v=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/ {print $2}')
    pkgs=("${pkgs[@]/qemu-utils/}")
    [ -n "$v" ] && [ "$v" != "(none)" ] && extra=(--allow-downgrades "qemu-utils=$v")
  fi
  # A second try covers a dpkg run that another process disturbed. pkgs unquoted on purpose: the element
  # emptied above (qemu-utils) must vanish, not become an empty argument.
  # shellcheck disable=SC2068
  "${apt[@]}" install ${pkgs[@]} "${extra[@]}" >/dev/null ||
    "${apt[@]}" install ${pkgs[@]} "${extra[@]}" >/dev/null || vm_die "apt-get install ${pkgs[*]} failed"
}

# vm_host_deb PKG: the path of a .deb of Debian package PKG, the version the host's apt would install (its
# candidate; the guest images come from the same apt sources), for a scenario to install in a guest with
# dpkg (the guests have no network). From apt's cache when it holds that file (a Docker-based host empties
# it after every install), else fetched once with `apt-get download` into $VM_CACHE/debs/ and kept there,
# like the images. The guest must already have what the package depends on (dpkg -i says what is missing).
vm_host_deb() {
  local pkg=$1 v f dir=$VM_CACHE/debs
  v=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
  { [ -n "$v" ] && [ "$v" != "(none)" ]; } || vm_die "apt on this host has no candidate for $pkg (apt-get update?)"
  v=${v//:/%3a}   # apt's file names write an epoch's colon as %3a
  for f in /var/cache/apt/archives/"${pkg}_${v}"_*.deb "$dir/${pkg}_${v}"_*.deb; do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  mkdir -p "$dir/tmp.$$"
  (cd "$dir/tmp.$$" && apt-get -q download "$pkg" >&2) ||
    { rm -rf "$dir/tmp.$$"; vm_die "apt-get download $pkg failed (the host needs its apt sources reachable once; the file is then kept in $dir)"; }
  for f in "$dir/tmp.$$/${pkg}_${v}"_*.deb; do
    [ -f "$f" ] && mv "$f" "$dir/" && rm -rf "$dir/tmp.$$" && { echo "$dir/$(basename "$f")"; return 0; }
  done
  rm -rf "$dir/tmp.$$"; vm_die "apt-get download $pkg gave no ${pkg}_${v}_*.deb"
}

# --- image -----------------------------------------------------------------------------------------------

# vm_recipe_key [FLAVOR]: sha256 of every file that decides what the image contains: image/* in name order
# (grub: the one recipe, image/build.sh, and the GRUB flavor's files), then image-FLAVOR/* in name order
# (every other flavor: its package list or additions, hooks and installer).
# shellcheck disable=SC2046,SC2002 # the recipe files' names, split on purpose (none has a space), cat joins them
vm_recipe_key() {
  case ${1:-grub} in
    grub) (cd "$VM_DIR/image" && cat $(LC_ALL=C ls) | sha256sum | cut -c1-16) ;;
    sdboot|slurm|uki|arm64) { (cd "$VM_DIR/image" && cat $(LC_ALL=C ls)); (cd "$VM_DIR/image-$1" && cat $(LC_ALL=C ls)); } |
              sha256sum | cut -c1-16 ;;
    *) vm_die "unknown image flavor '$1' (grub, sdboot, uki, slurm, arm64)" ;;
  esac
}

# The image of each flavor's recipe (the GRUB one computed once; run.sh exports both to the scenarios).
VM_IMAGE_DIR=${VM_IMAGE_DIR:-$VM_CACHE/bookworm-$(vm_recipe_key)}
# The GRUB image as lib.sh found it (a scenario may point VM_IMAGE_DIR at a disk of its own: arm64.sh).
# shellcheck disable=SC2034 # read by snapshot.sh's vm_snapshot_usable
VM_GRUB_IMAGE_DIR=$VM_IMAGE_DIR
# vm_image_dir [FLAVOR]: the cache directory of FLAVOR's image (default: $VM_FLAVOR, else grub).
vm_image_dir() {
  case ${1:-${VM_FLAVOR:-grub}} in
    grub) echo "$VM_IMAGE_DIR" ;;
    sdboot) echo "${VM_IMAGE_DIR_SDBOOT:-$VM_CACHE/sdboot-bookworm-$(vm_recipe_key sdboot)}" ;;
    uki) echo "${VM_IMAGE_DIR_UKI:-$VM_CACHE/uki-trixie-$(vm_recipe_key uki)}" ;;
    slurm) echo "${VM_IMAGE_DIR_SLURM:-$VM_CACHE/slurm-bookworm-$(vm_recipe_key slurm)}" ;;
    arm64) echo "${VM_ARM64_IMAGE_DIR:-$VM_CACHE/arm64-bookworm-$(vm_recipe_key arm64)}" ;;
    *) vm_die "unknown image flavor '$1' (grub, sdboot, uki, slurm, arm64)" ;;
  esac
}

# The host's OVMF firmware (Debian package ovmf): "CODE VARS", the 4 MiB build when there is one (bookworm's
# default), else the 2 MiB one. The sdboot image keeps copies of both: its VARS is the store after install.
vm_ovmf_files() {
  local c v
  for c in /usr/share/OVMF/OVMF_CODE_4M.fd /usr/share/OVMF/OVMF_CODE.fd; do
    v=${c/CODE/VARS}
    [ -f "$c" ] && [ -f "$v" ] && { echo "$c $v"; return 0; }
  done
  return 1
}

# vm_uefi_flavor FLAVOR: the flavor boots OVMF (sdboot, uki) with its own copy of the variable store.
vm_uefi_flavor() { case $1 in sdboot|uki) return 0 ;; *) return 1 ;; esac; }

# --- accelerator -----------------------------------------------------------------------------------------

# KVM only where it is real: here /dev/kvm is kvm_pvm, far slower than TCG for an ordinary guest kernel.
# The TCG CPU: `max` without the AVX family, vendor Intel so the Intel IOMMU arguments apply. QEMU 7.2's TCG
# emulates AVX/AVX2/FMA through helper calls, and with `max` the guest's glibc picks its AVX2 string and
# memory functions (and the kernel its AVX code): every process pays for them. Without them glibc takes its
# SSE4 paths, which TCG translates to host vector code, while the rest of `max` (RDTSCP, XSAVE, BMI and the
# others the guests always had) stays as it was. Measured three guests side by side under
# one load (docs/ci.md): update-initramfs -u 173 and 163 s against 183 and 199 s with `max`, gzip of 64 MiB
# 36-42 against 44 s. A plain x86-64-v2 model (GDRPROV_VM_CPU=qemu64,vendor=GenuineIntel,+ssse3,+sse4.1,
# +sse4.2,+popcnt,+cx16) was as fast (161 and 163 s), but it drops more than AVX (RDTSCP, XSAVE, BMI), and
# at load 15 a fresh guest of 21-pair-rails hit soft lockups with it at its first boot.
VM_TCG_CPU=max,vendor=GenuineIntel,-avx,-avx2,-fma,-f16c,-avx-vnni
vm_accel_args() {
  if [ "${GDRPROV_VM_ACCEL:-auto}" = kvm ] ||
     { [ "${GDRPROV_VM_ACCEL:-auto}" = auto ] && [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] &&
       grep -qE '\b(vmx|svm)\b' /proc/cpuinfo; }; then
    echo "-accel kvm -cpu host"
  else
    echo "-accel tcg,thread=multi,tb-size=512 -cpu ${GDRPROV_VM_CPU:-$VM_TCG_CPU}"
  fi
}
