#!/bin/sh
# mmdebstrap --customize-hook: runs after all packages are installed. $1 is the rootfs.
# Environment from build-image.sh: VM_ROOT_UUID, VM_PUBKEY (path of the ssh public key).
set -eu
root=$1
here=$(dirname "$0")

echo gdrprov-vm > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tgdrprov-vm\n' > "$root/etc/hosts"
printf 'UUID=%s\t/\text4\terrors=remount-ro\t0\t1\n' "$VM_ROOT_UUID" > "$root/etc/fstab"
# A fixed machine id: every overlay of the image is a normal (not a first) boot.
echo 4a0c7f1e9b2d4e6f8a1b3c5d7e9f0a2b > "$root/etc/machine-id"

# ssh: root with the testbed's key only.
install -d -m 700 "$root/root/.ssh"
install -m 600 "$VM_PUBKEY" "$root/root/.ssh/authorized_keys"
chroot "$root" passwd -d root >/dev/null   # console login on ttyS0 for debugging

# Network: DHCP on the first (user-mode) NIC. Scenarios add .network files for other NICs.
cat > "$root/etc/systemd/network/99-dhcp.network" <<'NET'
[Match]
Name=en*
[Network]
DHCP=ipv4
LinkLocalAddressing=no
IPv6AcceptRA=no
NET
chroot "$root" systemctl enable systemd-networkd.service >/dev/null 2>&1
chroot "$root" systemctl mask systemd-networkd-wait-online.service apt-daily.timer \
  apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer >/dev/null 2>&1

# GRUB: Debian's defaults (GRUB_DEFAULT=0, empty GRUB_CMDLINE_LINUX, recovery entries, submenu), except
# no menu wait and a serial console so the boot can be followed in the log.
sed -i \
  -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=0/' \
  -e 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0,115200n8"/' \
  "$root/etc/default/grub"
cat >> "$root/etc/default/grub" <<'GRUB'
GRUB_TERMINAL="serial console"
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB

# The one-shot init that installs GRUB into the MBR on the first boot (see build-image.sh).
install -m 755 "$here/install-grub-init.sh" "$root/usr/local/sbin/gdrprov-vm-install-grub"
