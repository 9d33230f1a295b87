#!/bin/sh
# mmdebstrap --customize-hook: runs after all packages are installed. $1 is the rootfs.
# Environment from build-image.sh: VM_ROOT_UUID, VM_PUBKEY (path of the ssh public key).
set -eu
root=$1
here=$(dirname "$0")

echo gdrprov-vm > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tgdrprov-vm\n' > "$root/etc/hosts"
# fsck pass 0: a throwaway overlay needs no boot-time check (5-6 s of every TCG boot).
printf 'UUID=%s\t/\text4\terrors=remount-ro\t0\t0\n' "$VM_ROOT_UUID" > "$root/etc/fstab"
# A fixed machine id: every overlay of the image is a normal (not a first) boot.
echo 4a0c7f1e9b2d4e6f8a1b3c5d7e9f0a2b > "$root/etc/machine-id"

# ssh: root with the testbed's key only.
install -d -m 700 "$root/root/.ssh"
install -m 600 "$VM_PUBKEY" "$root/root/.ssh/authorized_keys"
chroot "$root" passwd -d root >/dev/null   # console login on ttyS0 for debugging
# No PAM for sshd: pam_systemd would make every new connection wait for logind and start a user manager
# (7-9 s per connection under TCG, and the reboot waits poll with new connections). Keys only, no session.
printf 'UsePAM no\n' > "$root/etc/ssh/sshd_config.d/gdrprov-vm.conf"

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
# Boot speed under TCG (every boot costs CPU on a 2-core host): no wait-online, no timers, no e2scrub, no
# modprobe@ units and debug mounts that nothing here uses.
chroot "$root" systemctl mask systemd-networkd-wait-online.service apt-daily.timer \
  apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer \
  modprobe@drm.service modprobe@efi_pstore.service modprobe@fuse.service modprobe@loop.service \
  modprobe@dm_mod.service sys-kernel-debug.mount sys-kernel-tracing.mount dev-hugepages.mount >/dev/null 2>&1
# ...and, measured with systemd-analyze blame under TCG, units a test guest does without: logind (6 s; sshd
# runs without PAM, so no session needs it), the persistent journal's flush (the journal stays in /run),
# utmp, machine-id commit, random seed, static nodes, configfs/mqueue mounts.
chroot "$root" systemctl mask systemd-logind.service systemd-journal-flush.service \
  systemd-update-utmp.service systemd-update-utmp-runlevel.service systemd-machine-id-commit.service \
  systemd-random-seed.service kmod-static-nodes.service modprobe@configfs.service sys-kernel-config.mount \
  dev-mqueue.mount systemd-network-generator.service >/dev/null 2>&1
mkdir -p "$root/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' > "$root/etc/systemd/journald.conf.d/gdrprov-vm.conf"
# sshd does not wait for network.target (networkd's start is 8 s of the boot's critical chain): it listens
# on 0.0.0.0 and answers as soon as DHCP has given the NIC its address.
sed -e '/^After=/s/ *network\.target//' -e '/^Wants=/d' "$root/lib/systemd/system/ssh.service" \
  > "$root/etc/systemd/system/ssh.service"
# ...and no autoloading of drivers for emulated hardware that the tests never touch (blacklist only stops
# alias autoloading: an explicit modprobe still works). pcspkr and dummy stay loadable: dummy is the
# stand-in for nvidia_peermem in the module tests (loadable, never autoloaded, not built in).
cat > "$root/etc/modprobe.d/gdrprov-vm-boot-speed.conf" <<'MOD'
# gdrprov testbed: skip drivers of emulated hardware the tests do not use (boot speed under TCG).
blacklist kvm
blacklist kvm_intel
blacklist kvm_amd
blacklist intel_powerclamp
blacklist ccp
blacklist cfg80211
blacklist iTCO_wdt
blacklist intel_pmc_bxt
blacklist sr_mod
blacklist sg
blacklist ahci
blacklist lpc_ich
blacklist i2c_i801
blacklist serio_raw
blacklist psmouse
blacklist evdev
blacklist crc32_pclmul
blacklist crct10dif_pclmul
blacklist ghash_clmulni_intel
blacklist sha1_ssse3
blacklist sha256_ssse3
blacklist sha512_ssse3
blacklist aesni_intel
blacklist qemu_fw_cfg
MOD

# GRUB: Debian's defaults (GRUB_DEFAULT=0, empty GRUB_CMDLINE_LINUX, recovery entries, submenu), except
# no menu wait, a serial console so the boot can be followed in the log, and mitigations=off: under TCG the
# CPU model looks Meltdown-affected, and page-table isolation (a TLB flush at every syscall, which TCG
# emulates at great cost) made every fork/exec slow. Measured here: boot 32 s -> 18 s (systemd-analyze),
# and update-grub/apply inside a guest far faster. A throwaway test guest has no secrets to guard.
sed -i \
  -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=0/' \
  -e 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT="mitigations=off console=ttyS0,115200n8"/' \
  "$root/etc/default/grub"
cat >> "$root/etc/default/grub" <<'GRUB'
GRUB_TERMINAL="serial console"
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB

# initramfs-tools: no fsck hook. gdrprov runs Debian's update-initramfs in the guest when a profile blocks a
# module that the initramfs holds (19, 14); there the fsck hook, which finds nothing to do in this chroot (the
# image's own initramfs has no fsck: "fsck not present, so skipping root file system" at every boot), resolves
# the root device and copies fsck, logsave, e2fsck and their libraries: 208 of a rebuild's 1319 processes
# under TCG (measured: 1111 without it), and a root fsck in the initramfs at every later boot. fstab's pass 0
# already says that no boot checks this throwaway root. Diverted out of hooks/ (still on disk, dpkg knows), so a rebuild in the
# guest makes the image's own initramfs again: the same modules (initramfs-modules), the same scripts.
mkdir -p "$root/usr/share/initramfs-tools/hooks-off"
chroot "$root" dpkg-divert --quiet --local --rename \
  --divert /usr/share/initramfs-tools/hooks-off/fsck --add /usr/share/initramfs-tools/hooks/fsck

# The one-shot init that installs GRUB into the MBR on the first boot (see build-image.sh).
install -m 755 "$here/install-grub-init.sh" "$root/usr/local/sbin/gdrprov-vm-install-grub"
