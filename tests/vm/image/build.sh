#!/usr/bin/env bash
# The testbed's one image recipe, with flavors: build-image.sh --flavor FLAVOR runs this as
# `image/build.sh FLAVOR WORK SOURCES` and caches the result under a key that is the sha256 of image/* (this
# file, the GRUB flavor's package list, hooks and installer), then, for every flavor but grub, image-FLAVOR/*
# (that flavor's package list or additions, hooks and installer). WORK is an empty directory; SOURCES is the
# host's apt sources file for bookworm. Every flavor: mmdebstrap --variant=minbase (arm64: essential; eatmydata, no recommends,
# no docs/man/locales) with the flavor's packages and hooks, root's ssh key pair made here
# (id_ed25519[.pub]), build.log. Then, by flavor:
#
#   grub    bookworm, image/packages; disk.raw: an MBR with one bootable ext4 partition at 1 MiB, then one
#           direct-kernel boot (SeaBIOS) whose init (image/install-grub-init.sh) installs GRUB into the MBR
#           and writes grub.cfg.
#   slurm   the grub flavor with image-slurm/packages added to the package list and image-slurm's customize
#           hook after image/'s: Debian's Slurm 22.05, munge and python3. Same disk, boot loader and key.
#   sdboot  bookworm, image/packages with grub-pc replaced by systemd-boot; image/'s setup and customize
#           hooks (the latter given an empty /etc/default/grub to edit), then image-sdboot's hook. disk.raw:
#           GPT, a 256 MiB FAT32 ESP (made as a file with mkfs.vfat, checked with mtools, dd'd to its
#           offset), an ext4 root after it; one direct-kernel boot under OVMF on the image's own variable
#           store (OVMF_CODE.fd, OVMF_VARS.fd kept beside disk.raw) whose init (install-sdboot-init.sh) does
#           what Debian's systemd-boot package does: `bootctl install`, then `kernel-install add`, which
#           writes /boot/efi/loader/entries/MACHINEID-VER.conf from /etc/kernel/cmdline.
#   uki     Debian 13 (trixie: the host's sources with the suite renamed, same mirrors), image-uki/packages
#           (systemd-boot 257, ukify); hooks as sdboot with image-uki's; same disk layout and firmware; the
#           install boot's kernel-install (layout=uki) builds $ESP/EFI/Linux/MACHINEID-VER.efi.
#   arm64   bookworm arm64 through qemu-user (binfmt_misc), image-arm64/'s packages and hooks; rootfs.tar
#           only: arm64.sh makes the disk per run from it (after gdrprov has changed the root, as an image
#           pipeline does) and installs GRUB in its first boot.
# sdboot and uki keep the fixed /etc/machine-id of image/customize-hook.sh (--skip=cleanup/reproducible:
# mmdebstrap's cleanup would empty it, and the machine id names the boot entry or the UKI).
set -euo pipefail
flavor=$1 work=$2 sources=$3
here=$(cd "$(dirname "$0")" && pwd)
VM_DIR=$(dirname "$here")
# shellcheck source=../lib.sh
. "$VM_DIR/lib.sh"

log="$work/build.log"
qpid=
trap '[ -n "$qpid" ] && kill "$qpid" 2>/dev/null; true' EXIT

# The flavor: its suite, packages, hooks, disk layout (mbr, gpt, or none: a root tarball) and installer.
suite=bookworm suite_sources=$sources arch=() skip=() key_comment=gdrprov-vm variant=minbase
layout=gpt ROOT_UUID='' ESP_ID='' installer='' install_what='' install_check=''
packages=$(grep -v '^#' "$here/packages" | paste -sd, -)
hooks=(--setup-hook="sh '$here/setup-hook.sh' \"\$1\"")
grub_hook() {   # image/customize-hook.sh (hostname, machine id, ssh key, boot speed, GRUB's defaults)
  if [ "$layout" = gpt ]; then   # an empty /etc/default/grub for it to edit (image-FLAVOR's hook removes it)
    # shellcheck disable=SC2016 # $1 is expanded by mmdebstrap's shell
    hooks+=(--customize-hook='mkdir -p "$1/etc/default" && : > "$1/etc/default/grub"')
  fi
  hooks+=(--customize-hook="VM_ROOT_UUID=$ROOT_UUID VM_PUBKEY='$work/id_ed25519.pub' sh '$here/customize-hook.sh' \"\$1\"")
}
case $flavor in
  grub|slurm)
    layout=mbr ROOT_UUID=8a1e0c5d-2b7f-4c39-9d64-3e5f1a2b7c90
    installer=grub install_what=GRUB
    grub_hook
    if [ "$flavor" = slurm ]; then
      packages=$(grep -hv '^#' "$here/packages" "$VM_DIR/image-slurm/packages" | paste -sd, -)
      hooks+=(--customize-hook="sh '$VM_DIR/image-slurm/customize-hook.sh' \"\$1\"")
    fi
    ;;
  sdboot)
    ROOT_UUID=8a1e0c5d-2b7f-4c39-9d64-3e5f1a2b7c91 ESP_ID=4A0C7F1E   # the FAT volume id: UUID=4A0C-7F1E
    installer=sdboot install_what=systemd-boot install_check=/loader
    packages=$(grep -v '^#' "$here/packages" | sed 's/^grub-pc$/systemd-boot/' | paste -sd, -)
    case ",$packages," in *,systemd-boot,*) ;; *) vm_die "image/packages has no grub-pc line to replace with systemd-boot" ;; esac
    ;;
  uki)
    ROOT_UUID=3c9d2e71-5a4b-4f08-b1c6-7d2e9f0a4b13 ESP_ID=5B1D8E2F   # UUID=5B1D-8E2F
    installer=uki install_what="systemd-boot and the UKI" install_check=/EFI/Linux
    suite=trixie suite_sources=$work/trixie.sources
    sed 's/bookworm/trixie/g' "$sources" > "$suite_sources"
    grep -q trixie "$suite_sources" || vm_die "no suite to turn into trixie in $sources"
    packages=$(grep -v '^#' "$VM_DIR/image-uki/packages" | paste -sd, -)
    ;;
  arm64)
    # shellcheck source=../arm64.sh
    . "$VM_DIR/arm64.sh"
    # merged-usr hook: /usr merged by symlinks and usr-is-merged, as debootstrap does, instead of the
    # usrmerge package, which pulls perl (8 packages) and converts the root with it under qemu-user.
    # variant essential: Essential:yes and image-arm64/packages with their dependencies, without minbase's
    # other Priority:required packages (apt, gpgv, debian-archive-keyring, tzdata...: ~10 packages, a third of
    # a minute of emulated maintainer scripts, none used by the guest; mmdebstrap drives the host's apt).
    layout=none arch=(--architectures=arm64 --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
    key_comment=gdrprov-vm-arm64 variant=essential
    # INITRD=No (the environment reaches the maintainer scripts): the kernel's postinst makes no initramfs,
    # so initramfs-tools' trigger has none to update either; image-arm64's customize hook makes it once, at
    # the end (it was made twice: the kernel's postinst, then the trigger).
    export INITRD=No
    packages=$(grep -v '^#' "$VM_DIR/image-arm64/packages" | paste -sd, -)
    hooks=(--setup-hook="sh '$VM_DIR/image-arm64/setup-hook.sh' \"\$1\""
      --customize-hook="VM_ROOT_UUID=$VM_ARM64_ROOT_UUID VM_ESP_UUID=$VM_ARM64_ESP_UUID VM_PUBKEY='$work/id_ed25519.pub' sh '$VM_DIR/image-arm64/customize-hook.sh' \"\$1\"")
    ;;
  *) vm_die "unknown image flavor '$flavor' (grub, slurm, sdboot, uki, arm64)" ;;
esac
if [ "$flavor" = sdboot ] || [ "$flavor" = uki ]; then
  skip=(--skip=cleanup/reproducible)
  grub_hook
  hooks+=(--customize-hook="VM_ROOT_UUID=$ROOT_UUID VM_ESP_ID=$ESP_ID sh '$VM_DIR/image-$flavor/customize-hook.sh' \"\$1\"")
  ovmf_code='' ovmf_vars=''
  read -r ovmf_code ovmf_vars < <(vm_ovmf_files) || vm_die "no OVMF firmware on this host (Debian package ovmf)"
  cp "$ovmf_code" "$work/OVMF_CODE.fd"
  cp "$ovmf_vars" "$work/OVMF_VARS.fd"
fi

ssh-keygen -q -t ed25519 -N '' -C "$key_comment" -f "$work/id_ed25519"

# 1. Root filesystem.
t=$(date +%s)
mmdebstrap --mode=root --variant="$variant" "${arch[@]}" --include="$packages" \
  --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  "${skip[@]}" "${hooks[@]}" \
  "$suite" "$work/rootfs" "$suite_sources" >"$log" 2>&1 || { tail -30 "$log" >&2; vm_die "mmdebstrap ($flavor) failed"; }
vm_log "$flavor rootfs: $(vm_since "$t") s, $(du -sm "$work/rootfs" | cut -f1) MB"

if [ "$layout" = none ]; then   # arm64: the root as a tarball
  tar -C "$work/rootfs" --numeric-owner --xattrs --acls -cf "$work/rootfs.tar" . ||
    vm_die "tar of the $flavor rootfs failed"
  rm -rf "$work/rootfs"
  exit 0
fi

kernel=$(find "$work/rootfs/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -1)
initrd=$(find "$work/rootfs/boot" -maxdepth 1 -name 'initrd.img-*' | sort -V | tail -1)
cp "$kernel" "$work/vmlinuz"; cp "$initrd" "$work/initrd.img"
vm_log "kernel $(basename "$kernel"), initramfs $(du -h "$initrd" | cut -f1)"

# 2. Disk, written without loop devices: mbr, one bootable partition at 1 MiB; gpt, the ESP at 1 MiB (a
# file made with mkfs.vfat, checked with mtools, dd'd to its offset) and the root after it. The ext4 root
# is written straight from the rootfs (mkfs.ext4 -d at the partition's offset).
t=$(date +%s)
truncate -s 4G "$work/disk.raw"
esp_start=2048 esp_mib=256
if [ "$layout" = mbr ]; then
  root_start=2048
  echo 'start=2048, type=83, bootable' | sfdisk -q "$work/disk.raw" >>"$log" 2>&1
  root_k=$(( $(stat -c %s "$work/disk.raw") / 1024 - 1024 ))
else
  esp_sectors=$(( esp_mib * 2048 ))
  root_start=$(( esp_start + esp_sectors ))
  printf 'label: gpt\nstart=%d, size=%d, type=U, name="EFI System"\nstart=%d, type=L, name=root\n' \
    "$esp_start" "$esp_sectors" "$root_start" | sfdisk -q "$work/disk.raw" >>"$log" 2>&1 ||
    { tail -20 "$log" >&2; vm_die "sfdisk failed"; }
  root_sectors=$(sfdisk -d "$work/disk.raw" | sed -n "s/.*start= *$root_start, size= *\([0-9]*\),.*/\1/p")
  [ -n "$root_sectors" ] || vm_die "no root partition at sector $root_start in: $(sfdisk -d "$work/disk.raw")"
  root_k=$(( root_sectors / 2 ))
  rm -f "$work/esp.img"
  mkfs.vfat -F 32 -n ESP -i "$ESP_ID" -C "$work/esp.img" $(( esp_mib * 1024 )) >>"$log" 2>&1 || vm_die "mkfs.vfat failed"
  mdir -i "$work/esp.img" :: >>"$log" 2>&1 || vm_die "the ESP image does not read back with mtools"
  dd if="$work/esp.img" of="$work/disk.raw" bs=512 seek="$esp_start" conv=notrunc,sparse status=none
  rm -f "$work/esp.img"
fi
mkfs.ext4 -q -F -U "$ROOT_UUID" -L gdrprov-root -E offset=$(( root_start * 512 )) -d "$work/rootfs" "$work/disk.raw" \
  "${root_k}k" >>"$log" 2>&1 || { tail -20 "$log" >&2; vm_die "mkfs.ext4 failed"; }
rm -rf "$work/rootfs"
vm_log "disk: $(vm_since "$t") s"

# 3. The image's one direct-kernel boot, whose init (/usr/local/sbin/gdrprov-vm-install-INSTALLER, put there
# by a customize hook) installs the boot loader, then powers off: SeaBIOS for the MBR, OVMF for the ESP.
t=$(date +%s)
fw=()
if [ "$layout" = gpt ]; then
  fw=(-drive "if=pflash,format=raw,unit=0,readonly=on,file=$work/OVMF_CODE.fd"
      -drive "if=pflash,format=raw,unit=1,file=$work/OVMF_VARS.fd")
fi
console=$work/install-$installer.log marker=GDRPROV-VM-INSTALL-${installer^^}
# shellcheck disable=SC2046 # vm_accel_args prints several arguments
qemu-system-x86_64 -name gdrprov-vm-build -machine q35 $(vm_accel_args) -smp "$VM_SMP" -m "$VM_MEM" \
  "${fw[@]}" -drive "file=$work/disk.raw,if=virtio,format=raw,cache=unsafe" -nic none \
  -kernel "$work/vmlinuz" -initrd "$work/initrd.img" \
  -append "root=UUID=$ROOT_UUID ro mitigations=off console=ttyS0,115200n8 init=/usr/local/sbin/gdrprov-vm-install-$installer panic=-1" \
  -display none -vga none -monitor none -serial "file:$console" -no-reboot &
qpid=$!
if ! timeout 600 tail --pid="$qpid" -f /dev/null; then
  kill "$qpid" 2>/dev/null; vm_die "$install_what install boot did not finish in 600 s (see $console)"
fi
qpid=
cat "$console" >>"$log"
grep -q "$marker rc=0" "$console" || { tail -40 "$console" >&2; vm_die "$install_what install failed"; }
if [ -n "$install_check" ]; then
  mdir -i "$work/disk.raw@@$(( esp_start * 512 ))" -/ "::$install_check" >>"$log" 2>&1 ||
    vm_die "no $install_check on the ESP after the install"
fi
vm_log "$install_what installed: $(vm_since "$t") s"

rm -f "$work/vmlinuz" "$work/initrd.img" "$console" "$work/trixie.sources"
