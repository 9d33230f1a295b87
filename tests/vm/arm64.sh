# shellcheck shell=bash
# The arm64 guest of the VM testbed (source after lib.sh): a Debian bookworm arm64 guest on qemu's `virt`
# machine under TCG, UEFI firmware (AAVMF) and real GRUB (arm64-efi) on a GPT disk with an ESP.

VM_ARM64_ROOT_UUID=3c6f1a9e-7d42-4b8e-a5c1-9e2d4f6b8a10
VM_ARM64_ESP_UUID=6A0B-1C2D
VM_ARM64_FW_CODE=${GDRPROV_VM_ARM64_FW_CODE:-/usr/share/AAVMF/AAVMF_CODE.fd}
VM_ARM64_FW_VARS=${GDRPROV_VM_ARM64_FW_VARS:-/usr/share/AAVMF/AAVMF_VARS.fd}
# -cpu max with pauth-impdef: qemu's own pointer-authentication algorithm instead of QARMA, which TCG
# computes at great cost on every function return of the guest kernel.
VM_ARM64_CPU=${GDRPROV_VM_ARM64_CPU:-max,pauth-impdef=on}
# The virt machine; iommu=smmuv3 puts the PCI devices behind a real (emulated) SMMUv3.
VM_ARM64_MACHINE=${GDRPROV_VM_ARM64_MACHINE:-virt,iommu=smmuv3}
VM_ARM64_DISK_SIZE=${GDRPROV_VM_ARM64_DISK_SIZE:-4G}
VM_ARM64_ESP_MIB=256

# The arm64 root's cache directory: arm64-bookworm-KEY, KEY = sha256 of image/* then image-arm64/* (lib's
# vm_recipe_key: the one recipe, image/build.sh, builds every flavor).
vm_arm64_image_dir() { vm_image_dir arm64; }

# The host packages of the arm64 guest (Debian's): qemu-system-arm (qemu-system-aarch64), qemu-efi-aarch64
# (AAVMF), qemu-user-static + binfmt-support + arch-test (mmdebstrap runs the arm64 maintainer scripts
# through binfmt_misc), dosfstools + mtools (the ESP). qemu-system-arm is pinned to the installed
# qemu-system-x86's version (both need the same qemu-system-common).
vm_arm64_install_host_deps() {
  local need=() cmd
  for cmd in qemu-system-aarch64:qemu-system-arm qemu-aarch64-static:qemu-user-static update-binfmts:binfmt-support \
             arch-test:arch-test mkfs.vfat:dosfstools mcopy:mtools sfdisk:fdisk mkfs.ext4:e2fsprogs \
             mmdebstrap:mmdebstrap; do
    command -v "${cmd%%:*}" >/dev/null 2>&1 || need+=("${cmd#*:}")
  done
  [ -f "$VM_ARM64_FW_CODE" ] || need+=(qemu-efi-aarch64)
  if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || vm_die "missing host packages (${need[*]}); install them as root: apt-get install ${need[*]}"
    vm_log "installing host packages for the arm64 guest: ${need[*]}"
    local v pkgs=()
    v=$(dpkg-query -W -f '${Version}' qemu-system-x86 2>/dev/null) || v=
    for cmd in "${need[@]}"; do
      case "$cmd" in qemu-system-arm|qemu-user-static) [ -n "$v" ] && cmd="$cmd=$v" ;; esac
      pkgs+=("$cmd")
    done
    export DEBIAN_FRONTEND=noninteractive
    apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null || vm_die "apt-get update failed"
    apt-get -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends install "${pkgs[@]}" >/dev/null ||
      vm_die "apt-get install ${pkgs[*]} failed"
  fi
  # arm64 programs run through binfmt_misc (in a container it may not be mounted yet).
  if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
      vm_die "cannot mount binfmt_misc (needed to build an arm64 root)"
    update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || vm_die "qemu-aarch64 is not registered with binfmt_misc"
  fi
}

# vm_arm64_extract DIR: unpack the cached arm64 root into DIR (a fresh copy per run, for gdrprov to change).
vm_arm64_extract() {
  local dir=$1 img; img=$(vm_arm64_image_dir)
  [ -f "$img/rootfs.tar" ] || vm_die "no arm64 root at $img/rootfs.tar (run tests/vm/build-image.sh --flavor arm64)"
  rm -rf "$dir"; mkdir -p "$dir"
  tar -C "$dir" --numeric-owner --xattrs --acls -xpf "$img/rootfs.tar" || vm_die "unpacking $img/rootfs.tar failed"
}

# vm_arm64_disk ROOTFS DISK: a GPT disk with a FAT32 ESP (empty; GRUB goes in at the install boot) and an
# ext4 root written from the directory ROOTFS (mkfs.ext4 -d at the partition's offset: no loop devices).
vm_arm64_disk() {
  local rootfs=$1 disk=$2 esp_start=2048 esp_sectors root_start
  esp_sectors=$(( VM_ARM64_ESP_MIB * 2048 ))
  root_start=$(( esp_start + esp_sectors ))
  rm -f "$disk" "$disk.esp"
  truncate -s "$VM_ARM64_DISK_SIZE" "$disk"
  printf 'label: gpt\nstart=%d, size=%d, type=U, name=esp\nstart=%d, type=L, name=root\n' \
    "$esp_start" "$esp_sectors" "$root_start" | sfdisk -q "$disk" >/dev/null || vm_die "sfdisk on $disk failed"
  truncate -s "${VM_ARM64_ESP_MIB}M" "$disk.esp"
  mkfs.vfat -F 32 -n ESP -i "${VM_ARM64_ESP_UUID//-/}" "$disk.esp" >/dev/null || vm_die "mkfs.vfat failed"
  dd if="$disk.esp" of="$disk" bs=1M seek=1 conv=notrunc,sparse status=none || vm_die "dd of the ESP failed"
  rm -f "$disk.esp"
  local size_k   # the root partition's size as sfdisk laid it out (aligned, before GPT's backup)
  size_k=$(sfdisk -d "$disk" | awk -F'[=,]' -v s="$root_start" '$2+0 == s { print int($4 / 2) }')
  [ -n "$size_k" ] || vm_die "no root partition at sector $root_start on $disk"
  mkfs.ext4 -q -F -U "$VM_ARM64_ROOT_UUID" -L gdrprov-root -E offset=$(( root_start * 512 )) -d "$rootfs" \
    "$disk" "${size_k}k" || vm_die "mkfs.ext4 on $disk failed"
}

# vm_arm64_firmware_args VARS: AAVMF's code read-only, and VARS (a per-machine copy of the variable store,
# made on first use) writable, both as pflash.
vm_arm64_firmware_args() {
  [ -f "$1" ] || cp "$VM_ARM64_FW_VARS" "$1"
  echo "-drive if=pflash,format=raw,readonly=on,file=$VM_ARM64_FW_CODE -drive if=pflash,format=raw,file=$1"
}

# vm_arm64_install ROOTFS DISK LOG: the disk's one direct-kernel boot (the kernel and initramfs of ROOTFS):
# its init mounts the ESP, runs grub-install --removable and update-grub (grub.cfg from the root's
# /etc/default/grub, as changed by gdrprov), then powers off.
vm_arm64_install() {
  local rootfs=$1 disk=$2 log=$3 kernel initrd qpid t0; t0=$(date +%s)
  # shellcheck disable=SC2012 # Debian's kernel and initramfs names, newest version last
  kernel=$(ls "$rootfs"/boot/vmlinuz-* | sort -V | tail -1)
  # shellcheck disable=SC2012
  initrd=$(ls "$rootfs"/boot/initrd.img-* | sort -V | tail -1)
  # shellcheck disable=SC2046
  qemu-system-aarch64 -name gdrprov-vm-arm64-install -M "${VM_ARM64_MACHINE%%,*}" \
    -accel tcg,thread=multi,tb-size=512 -cpu "$VM_ARM64_CPU" -smp "$VM_SMP" -m "$VM_MEM" \
    -drive "file=$disk,if=virtio,format=raw,cache=unsafe" -nic none \
    -kernel "$kernel" -initrd "$initrd" \
    -append "root=UUID=$VM_ARM64_ROOT_UUID ro console=ttyAMA0,115200n8 init=/usr/local/sbin/gdrprov-vm-install-grub panic=-1" \
    -display none -monitor none -serial "file:$log" -no-reboot &
  qpid=$!
  if ! timeout 900 tail --pid="$qpid" -f /dev/null; then
    kill "$qpid" 2>/dev/null; vm_die "arm64 GRUB install boot did not finish in 900 s (see $log)"
  fi
  grep -q 'GDRPROV-VM-INSTALL-GRUB rc=0' "$log" || { tail -30 "$log" >&2; vm_die "arm64 GRUB install failed (see $log)"; }
  vm_log "arm64 GRUB installed: $(vm_since "$t0") s"
}

# vm_arm64_qemu NAME PORT PORT2 [QEMU ARGS...]: lib.sh's vm_qemu for the arm64 guest (same files, same
# options where they apply): the virt machine, AAVMF with the guest's own variable store, the disk through
# firmware and GRUB. A scenario that sources arm64.sh gets it as vm_qemu, so vm_launch, vm_reboot and
# vm_powercut of lib.sh drive arm64 guests unchanged.
# shellcheck disable=SC2034 # port2: vm_qemu's signature (the caller's extra args carry the second port)
vm_arm64_qemu() {
  local name=$1 port=$2 port2=$3; shift 3
  local d; d=$(vm_gdir "$name")
  vm_mark_boot "$d"
  # shellcheck disable=SC2046
  qemu-system-aarch64 -name "gdrprov-vm-$(basename "$d")" -M "$VM_ARM64_MACHINE" \
    -accel tcg,thread=multi,tb-size=512 -cpu "$VM_ARM64_CPU" \
    -smp "$VM_SMP" -m "$VM_MEM" -no-reboot $(vm_arm64_firmware_args "$d/efivars.fd") \
    -drive "file=$d/overlay.qcow2,if=virtio,format=qcow2,cache=${VM_DISK_CACHE:-unsafe},discard=unmap" \
    -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" \
    -device "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56,romfile=" \
    "$@" \
    -display none -monitor none -parallel none \
    -chardev "file,id=ser0,path=$d/serial.log,append=on" -serial chardev:ser0 \
    -pidfile "$d/pid" -daemonize 2>"$d/qemu.err"
}

# vm_arm64_use DIR: make lib.sh's guest functions start arm64 guests from DIR/disk.raw with the cached
# ssh key (DIR is the scenario's own: the per-run disk lives there).
vm_arm64_use() {
  local dir=$1 img; img=$(vm_arm64_image_dir)
  ln -sf "$img/id_ed25519" "$dir/id_ed25519"
  # shellcheck disable=SC2034 # read by lib's vm_image_dir
  VM_IMAGE_DIR=$dir
  # Never the run's booted GRUB snapshot: it is an x86 machine on the x86 image's disk (the arm64 guest, of
  # "grub" flavor to lib.sh, was once started on it and gave no ssh in 600 s: CI's 15-arm64-grub failure).
  # shellcheck disable=SC2034 # read by lib's vm_snapshot_usable
  VM_SNAPSHOTS=0
  # shellcheck disable=SC2317 # called by lib's vm_launch, vm_reboot and vm_powercut
  vm_qemu() { vm_arm64_qemu "$@"; }
}

# vm_arm64_prepare SCENARIO...: for run.sh: when one of the scenario files says `# Flavor: arm64`, build (or
# reuse) the arm64 root before the scenarios start (so no scenario's time limit pays for it) and echo a
# summary line; else do nothing, so runs without an arm64 scenario never pay for it.
vm_arm64_prepare() {
  grep -qs '^# Flavor: arm64' "$@" || return 0
  local t; t=$(date +%s)
  "$VM_DIR/build-image.sh" --flavor arm64 >"$VM_RUN_DIR/build-image-arm64.out" 2>&1 ||
    { cat "$VM_RUN_DIR/build-image-arm64.out" >&2; return 1; }
  echo "arm64 root: $(tail -1 "$VM_RUN_DIR/build-image-arm64.out") ($(vm_since "$t") s)"
}
