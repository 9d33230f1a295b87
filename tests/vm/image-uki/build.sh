#!/usr/bin/env bash
# The uki flavor's recipe: build-image.sh --flavor uki runs this as `image-uki/build.sh WORK SOURCES` and
# caches the result under a key that is the sha256 of image/* and image-uki/* (the GRUB recipe's setup hook,
# initramfs module list and customize hook are reused). On success WORK holds disk.raw (GPT: a 256 MiB FAT32
# ESP, one ext4 root), OVMF_CODE.fd and OVMF_VARS.fd (the firmware and its variable store after `bootctl
# install`), id_ed25519[.pub] and build.log.
#
# The guest is Debian 13 (trixie), UEFI (OVMF), systemd-boot 257, and a unified kernel image: kernel-install
# with /etc/kernel/install.conf `layout=uki` builds $ESP/EFI/Linux/MACHINEID-VER.efi with ukify from
# /boot/vmlinuz-VER (where Debian keeps the kernel: there is no /usr/lib/modules/VER/vmlinuz), the initramfs
# and /etc/kernel/cmdline. No type #1 entry. As in the sdboot flavor, bootctl and kernel-install run on the
# image's only direct-kernel boot (init=install-uki-init.sh); every later boot is OVMF -> systemd-boot -> UKI.
#
# SOURCES is the host's bookworm apt sources file: the same mirrors serve trixie, so the trixie sources are
# that file with the suite names changed (no mirror is named here).
set -euo pipefail
work=$1 sources=$2
here=$(cd "$(dirname "$0")" && pwd)
VM_DIR=$(dirname "$here")
grub_recipe=$VM_DIR/image
# shellcheck source=../lib.sh
. "$VM_DIR/lib.sh"

ROOT_UUID=3c9d2e71-5a4b-4f08-b1c6-7d2e9f0a4b13
ESP_ID=5B1D8E2F              # the FAT volume id: UUID=5B1D-8E2F in fstab
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

sed 's/bookworm/trixie/g' "$sources" > "$work/trixie.sources"
grep -q trixie "$work/trixie.sources" || vm_die "no suite to turn into trixie in $sources"

# 1. Root filesystem. --skip=cleanup/reproducible keeps the fixed /etc/machine-id (it names the UKI).
t=$(date +%s)
pkgs=$(grep -v '^#' "$here/packages" | paste -sd, -)
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
  trixie "$work/rootfs" "$work/trixie.sources" >"$log" 2>&1 || { tail -30 "$log" >&2; vm_die "mmdebstrap failed"; }
vm_log "rootfs: $(vm_since "$t") s, $(du -sm "$work/rootfs" | cut -f1) MB"

kernel=$(ls "$work"/rootfs/boot/vmlinuz-* | sort -V | tail -1)
initrd=$(ls "$work"/rootfs/boot/initrd.img-* | sort -V | tail -1)
cp "$kernel" "$work/vmlinuz"; cp "$initrd" "$work/initrd.img"
vm_log "kernel $(basename "$kernel"), initramfs $(du -h "$initrd" | cut -f1)"

# 2. Disk: GPT, the ESP at 1 MiB (a file made with mkfs.vfat, dd'd to its offset), the ext4 root after it.
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
dd if="$work/esp.img" of="$work/disk.raw" bs=512 seek="$esp_start" conv=notrunc,sparse status=none
rm -f "$work/esp.img"
mkfs.ext4 -q -F -U "$ROOT_UUID" -L gdrprov-root -E offset=$(( root_start * 512 )) -d "$work/rootfs" "$work/disk.raw" \
  "$(( root_sectors / 2 ))k" >>"$log" 2>&1 || { tail -20 "$log" >&2; vm_die "mkfs.ext4 failed"; }
rm -rf "$work/rootfs"
vm_log "disk: $(vm_since "$t") s"

# 3. One direct-kernel boot under OVMF whose init installs systemd-boot and builds the UKI, then powers off.
t=$(date +%s)
# shellcheck disable=SC2046
qemu-system-x86_64 -name gdrprov-vm-build -machine q35 $(vm_accel_args) -smp "$VM_SMP" -m "$VM_MEM" \
  -drive "if=pflash,format=raw,unit=0,readonly=on,file=$work/OVMF_CODE.fd" \
  -drive "if=pflash,format=raw,unit=1,file=$work/OVMF_VARS.fd" \
  -drive "file=$work/disk.raw,if=virtio,format=raw,cache=unsafe" -nic none \
  -kernel "$work/vmlinuz" -initrd "$work/initrd.img" \
  -append "root=UUID=$ROOT_UUID ro mitigations=off console=ttyS0,115200n8 init=/usr/local/sbin/gdrprov-vm-install-uki panic=-1" \
  -display none -vga none -monitor none -serial "file:$work/install-uki.log" -no-reboot &
qpid=$!
if ! timeout 600 tail --pid="$qpid" -f /dev/null; then
  kill "$qpid" 2>/dev/null; vm_die "UKI install boot did not finish in 600 s (see $work/install-uki.log)"
fi
qpid=
cat "$work/install-uki.log" >>"$log"
grep -q 'GDRPROV-VM-INSTALL-UKI rc=0' "$work/install-uki.log" ||
  { tail -40 "$work/install-uki.log" >&2; vm_die "systemd-boot/UKI install failed"; }
mdir -i "$work/disk.raw@@$(( esp_start * 512 ))" -/ ::/EFI/Linux >>"$log" 2>&1 || vm_die "no /EFI/Linux on the ESP after the install"
vm_log "systemd-boot and the UKI installed: $(vm_since "$t") s"

rm -f "$work/vmlinuz" "$work/initrd.img" "$work/install-uki.log" "$work/trixie.sources"
