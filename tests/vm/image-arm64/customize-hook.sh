#!/bin/sh
# mmdebstrap --customize-hook of the arm64 guest: runs after all packages are installed. $1 is the rootfs.
# Environment from build.sh: VM_ROOT_UUID, VM_ESP_UUID (vfat volume id, XXXX-XXXX), VM_PUBKEY.
# Host tools (systemctl --root) except the one update-initramfs at the end (qemu-user, in the chroot).
set -eu
root=$1
here=$(dirname "$0")

echo gdrprov-vm-arm64 > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tgdrprov-vm-arm64\n' > "$root/etc/hosts"
# The ESP at /boot/efi as on a Debian UEFI install; fsck pass 0 (throwaway disks).
printf 'UUID=%s\t/\text4\terrors=remount-ro\t0\t0\nUUID=%s\t/boot/efi\tvfat\tumask=0077\t0\t0\n' \
  "$VM_ROOT_UUID" "$VM_ESP_UUID" > "$root/etc/fstab"
mkdir -p "$root/boot/efi"
echo 5b1d8e2f0c3e4f7a9b2c4d6e8f0a1b3c > "$root/etc/machine-id"

install -d -m 700 "$root/root/.ssh"
install -m 600 "$VM_PUBKEY" "$root/root/.ssh/authorized_keys"
sed -i 's/^root:[^:]*:/root::/' "$root/etc/shadow"   # console login for debugging
printf 'UsePAM no\n' > "$root/etc/ssh/sshd_config.d/gdrprov-vm.conf"

cat > "$root/etc/systemd/network/99-dhcp.network" <<'NET'
[Match]
Name=en*
[Network]
DHCP=ipv4
LinkLocalAddressing=no
IPv6AcceptRA=no
NET
systemctl --root="$root" enable systemd-networkd.service >/dev/null 2>&1
# Boot speed under TCG: the same units as the x86 guest (image/customize-hook.sh).
systemctl --root="$root" mask systemd-networkd-wait-online.service apt-daily.timer \
  apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer \
  modprobe@drm.service modprobe@efi_pstore.service modprobe@fuse.service modprobe@loop.service \
  modprobe@dm_mod.service sys-kernel-debug.mount sys-kernel-tracing.mount dev-hugepages.mount \
  systemd-logind.service systemd-journal-flush.service \
  systemd-update-utmp.service systemd-update-utmp-runlevel.service systemd-machine-id-commit.service \
  systemd-random-seed.service kmod-static-nodes.service modprobe@configfs.service sys-kernel-config.mount \
  dev-mqueue.mount systemd-network-generator.service >/dev/null 2>&1
mkdir -p "$root/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' > "$root/etc/systemd/journald.conf.d/gdrprov-vm.conf"
sed -e '/^After=/s/ *network\.target//' -e '/^Wants=/d' "$root/lib/systemd/system/ssh.service" \
  > "$root/etc/systemd/system/ssh.service"

# GRUB: Debian's defaults except no menu wait and the PL011 serial console of the virt machine.
sed -i \
  -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=0/' \
  -e 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT="console=ttyAMA0,115200n8"/' \
  "$root/etc/default/grub"

# The one-shot init of the install boot (build.sh / arm64.sh).
install -m 755 "$here/install-grub-init.sh" "$root/usr/local/sbin/gdrprov-vm-install-grub"

# The initramfs, once (build.sh's INITRD=No kept the kernel's postinst and the trigger from making it): all
# packages are in, so nothing changes it after this.
chroot "$root" update-initramfs -c -k all
ls "$root"/boot/initrd.img-* >/dev/null
