#!/usr/bin/env bash
# The systemd-boot flavor's recipe: build-image.sh --flavor sdboot runs this as `image-sdboot/build.sh WORK
# SOURCES` and caches the result under a key that is the sha256 of image/* and image-sdboot/* (the GRUB
# recipe in image/ is reused: its package list, setup hook and customize hook; the GRUB image's own key covers
# image/* only, so adding this flavor changed nothing there). On success WORK holds disk.raw (GPT: a 256 MiB
# FAT32 ESP, one ext4 root), OVMF_CODE.fd and OVMF_VARS.fd (the firmware and its variable store as they are
# after `bootctl install`: guests boot a writable copy of the store), id_ed25519[.pub] and build.log.
#
# The guest is a UEFI machine (OVMF) with systemd-boot 252 from bookworm, installed the way Debian's
# systemd-boot package installs itself: `bootctl install --make-machine-id-directory=auto`, then
# `kernel-install add VER /boot/vmlinuz-VER`, which writes the entry
# /boot/efi/loader/entries/MACHINEID-VER.conf from /etc/kernel/cmdline. That runs on the image's only
# direct-kernel boot (OVMF with -kernel/-initrd and init=install-sdboot-init.sh, with udevd started by that
# script), because bootctl needs the firmware's EFI variables and a real block device for the ESP; every later
# boot goes OVMF -> systemd-boot -> kernel.
set -euo pipefail
work=$1 sources=$2
here=$(cd "$(dirname "$0")" && pwd)
VM_DIR=$(dirname "$here")
grub_recipe=$VM_DIR/image
# shellcheck source=../lib.sh
. "$VM_DIR/lib.sh"

ROOT_UUID=8a1e0c5d-2b7f-4c39-9d64-3e5f1a2b7c91
ESP_ID=4A0C7F1E              # the FAT volume id: UUID=4A0C-7F1E in fstab
DISK_SIZE=4G
ESP_MIB=256
log="$work/build.log"
qpid=
trap '[ -n "$qpid" ] && kill "$qpid" 2>/dev/null; true' EXIT

ovmf_code= ovmf_vars=
read -r ovmf_code ovmf_vars < <(vm_ovmf_files) || vm_die "no OVMF firmware on this host (Debian package ovmf)"
cp "$ovmf_code" "$work/OVMF_CODE.fd"
cp "$ovmf_vars" "$work/OVMF_VARS.fd"

ssh-keygen -q -t ed25519 -N '' -C gdrprov-vm -f "$work/id_ed25519"

# 1. Root filesystem: the GRUB recipe's packages with grub-pc replaced by systemd-boot, its setup hook and its
# customize hook (given an empty /etc/default/grub to edit, removed again with the GRUB installer script by
# this flavor's hook). --skip=cleanup/reproducible keeps the fixed /etc/machine-id that the customize hook
# writes (mmdebstrap's cleanup would empty it, and the machine id names the boot entry).
t=$(date +%s)
pkgs=$(grep -v '^#' "$grub_recipe/packages" | sed 's/^grub-pc$/systemd-boot/' | paste -sd, -)
case ",$pkgs," in *,systemd-boot,*) ;; *) vm_die "image/packages has no grub-pc line to replace with systemd-boot" ;; esac
mmdebstrap --mode=root --variant=minbase --include="$pkgs" \
  --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --skip=cleanup/reproducible \
  --setup-hook="sh '$grub_recipe/setup-hook.sh' \"\$1\"" \
  --customize-hook='mkdir -p "$1/etc/default" && : > "$1/etc/default/grub"' \
  --customize-hook="VM_ROOT_UUID=$ROOT_UUID VM_PUBKEY='$work/id_ed25519.pub' sh '$grub_recipe/customize-hook.sh' \"\$1\"" \
  --customize-hook="VM_ROOT_UUID=$ROOT_UUID VM_ESP_ID=$ESP_ID sh '$here/customize-hook.sh' \"\$1\"" \
  bookworm "$work/rootfs" "$sources" >"$log" 2>&1 || { tail -30 "$log" >&2; vm_die "mmdebstrap failed"; }
vm_log "rootfs: $(vm_since "$t") s, $(du -sm "$work/rootfs" | cut -f1) MB"

kernel=$(ls "$work"/rootfs/boot/vmlinuz-* | sort -V | tail -1)
initrd=$(ls "$work"/rootfs/boot/initrd.img-* | sort -V | tail -1)
cp "$kernel" "$work/vmlinuz"; cp "$initrd" "$work/initrd.img"
vm_log "kernel $(basename "$kernel"), initramfs $(du -h "$initrd" | cut -f1)"

# 2. Disk: GPT, the ESP at 1 MiB (built as a file with mkfs.vfat, checked with mtools, dd'd to its offset),
# the ext4 root after it written straight from the rootfs (no loop devices).
t=$(date +%s)
truncate -s "$DISK_SIZE" "$work/disk.raw"
esp_start=2048 esp_sectors=$(( ESP_MIB * 2048 ))
root_start=$(( esp_start + esp_sectors ))
printf 'label: gpt\nstart=%d, size=%d, type=U, name="EFI System"\nstart=%d, type=L, name=root\n' \
  "$esp_start" "$esp_sectors" "$root_start" | sfdisk -q "$work/disk.raw" >>"$log" 2>&1 ||
  { tail -20 "$log" >&2; vm_die "sfdisk failed"; }
root_sectors=$(sfdisk -d "$work/disk.raw" | sed -n "s/.*start= *$root_start, size= *\([0-9]*\),.*/\1/p")
[ -n "$root_sectors" ] || vm_die "no root partition at sector $root_start in: $(sfdisk -d "$work/disk.raw")"
rm -f "$work/esp.img"
mkfs.vfat -F 32 -n ESP -i "$ESP_ID" -C "$work/esp.img" $(( ESP_MIB * 1024 )) >>"$log" 2>&1 || vm_die "mkfs.vfat failed"
mdir -i "$work/esp.img" :: >>"$log" 2>&1 || vm_die "the ESP image does not read back with mtools"
dd if="$work/esp.img" of="$work/disk.raw" bs=512 seek="$esp_start" conv=notrunc,sparse status=none
rm -f "$work/esp.img"
mkfs.ext4 -q -F -U "$ROOT_UUID" -L gdrprov-root -E offset=$(( root_start * 512 )) -d "$work/rootfs" "$work/disk.raw" \
  "$(( root_sectors / 2 ))k" >>"$log" 2>&1 || { tail -20 "$log" >&2; vm_die "mkfs.ext4 failed"; }
rm -rf "$work/rootfs"
vm_log "disk: $(vm_since "$t") s"

# 3. One direct-kernel boot under OVMF (on the image's own variable store) whose init installs systemd-boot
# into the ESP and its boot entry into the EFI variables, writes the loader entry, then powers off.
t=$(date +%s)
# shellcheck disable=SC2046
qemu-system-x86_64 -name gdrprov-vm-build -machine q35 $(vm_accel_args) -smp "$VM_SMP" -m "$VM_MEM" \
  -drive "if=pflash,format=raw,unit=0,readonly=on,file=$work/OVMF_CODE.fd" \
  -drive "if=pflash,format=raw,unit=1,file=$work/OVMF_VARS.fd" \
  -drive "file=$work/disk.raw,if=virtio,format=raw,cache=unsafe" -nic none \
  -kernel "$work/vmlinuz" -initrd "$work/initrd.img" \
  -append "root=UUID=$ROOT_UUID ro mitigations=off console=ttyS0,115200n8 init=/usr/local/sbin/gdrprov-vm-install-sdboot panic=-1" \
  -display none -vga none -monitor none -serial "file:$work/install-sdboot.log" -no-reboot &
qpid=$!
if ! timeout 600 tail --pid="$qpid" -f /dev/null; then
  kill "$qpid" 2>/dev/null; vm_die "systemd-boot install boot did not finish in 600 s (see $work/install-sdboot.log)"
fi
qpid=
cat "$work/install-sdboot.log" >>"$log"
grep -q 'GDRPROV-VM-INSTALL-SDBOOT rc=0' "$work/install-sdboot.log" ||
  { tail -40 "$work/install-sdboot.log" >&2; vm_die "systemd-boot install failed"; }
mdir -i "$work/disk.raw@@$(( esp_start * 512 ))" -/ ::/loader >>"$log" 2>&1 || vm_die "no /loader on the ESP after the install"
vm_log "systemd-boot installed: $(vm_since "$t") s"

rm -f "$work/vmlinuz" "$work/initrd.img" "$work/install-sdboot.log"
