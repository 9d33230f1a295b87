#!/bin/sh
# The slurm flavor's addition to image/customize-hook.sh (run after it, same $1): Slurm and munge are not
# started at boot (a guest of this flavor boots as the GRUB one does; scenario 20 writes the munge key and
# slurm.conf, then starts them). The key munge's postinst made is removed: every cluster gets its own.
set -eu
root=$1
chroot "$root" systemctl disable munge.service slurmd.service slurmctld.service >/dev/null 2>&1 || true
rm -f "$root/etc/munge/munge.key"
