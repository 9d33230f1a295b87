# shellcheck shell=bash
# Helpers for the gdrprov VM testbed: start Debian guests from throwaway overlays of the cached image, drive
# them over ssh on a loopback port, reboot them for real, and always power them off.
#
# Source this file; it needs bash. Guests live under $VM_RUN_DIR/guests/NAME/ (pid, port, overlay, serial
# log), NAME prefixed with the scenario's name (VM_GUEST_NS) when run.sh runs it. Every guest is killed when the process that started it exits (trap), and run.sh kills whatever is
# left under its run dir.
#
# Networking: user-mode NIC with restrict=on (the guest reaches nothing outside), an ssh forward bound to
# 127.0.0.1 only, and for two-guest tests a socket NIC between guests on 127.0.0.1. No other traffic.
#
# Flavors: a guest is of the image flavor named by VM_FLAVOR when it is started (vm_launch, vm_start,
# vm_fresh), and stays of it across vm_reboot and vm_powercut:
#   grub    (default) BIOS (SeaBIOS), GRUB in the MBR, one ext4 partition; recipe image/, cache bookworm-KEY/
#   sdboot  UEFI (OVMF), systemd-boot 252 in a GPT ESP at /boot/efi, ext4 root; recipe image-sdboot/ (on top
#           of image/), cache sdboot-bookworm-KEY/. Each guest gets its own writable copy of the image's
#           OVMF_VARS.fd (GUEST_DIR/OVMF_VARS.fd), so EFI variables written in the guest (bootctl
#           set-oneshot's LoaderEntryOneShot, boot entries) persist across its reboots and power cuts.
#   slurm   the GRUB image plus Debian's Slurm 22.05 (slurmctld, slurmd, client), munge and python3; recipe
#           image-slurm/ (on top of image/), cache slurm-bookworm-KEY/. Boots as grub does (scenario 20).
#   e.g.  VM_FLAVOR=sdboot vm_fresh NAME     (or `VM_FLAVOR=sdboot` once at the top of a scenario)
# run.sh builds the sdboot image only when a selected scenario names the flavor (a `# Flavor: sdboot` header
# line, or VM_FLAVOR=sdboot in its code). vm_efivar NAME VAR reads a systemd-boot EFI variable in a guest.
#   uki     Debian 13 (trixie), UEFI (OVMF), systemd-boot 257 booting a unified kernel image that
#           kernel-install builds with ukify (layout=uki), no type #1 entry; recipe image-uki/ (reuses
#           image/'s hooks), cache uki-trixie-KEY/; OVMF variables as for sdboot. `# Flavor: uki`.

VM_DIR=${VM_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
VM_CACHE=${GDRPROV_VM_CACHE:-$HOME/.cache/gdrprov-vm}
VM_MEM=${GDRPROV_VM_MEM:-2048}
VM_SMP=${GDRPROV_VM_SMP:-2}
# Timeouts (seconds). TCG on a busy 2-core machine is slow: generous, but bounded.
VM_BOOT_TIMEOUT=${GDRPROV_VM_BOOT_TIMEOUT:-600}
VM_SSH_TIMEOUT=${GDRPROV_VM_SSH_TIMEOUT:-600}

vm_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
vm_die() { vm_log "ERROR: $*"; exit 1; }

# Elapsed seconds since $1 (an epoch in seconds).
vm_since() { echo $(( $(date +%s) - $1 )); }

# The helpers, one file a job (each under 300 lines), sourced in this order: what the image recipe key needs
# (host.sh) comes before VM_IMAGE_DIR is computed there.
#   lib/host.sh     host packages, image cache and flavor directories, OVMF, accelerator
#   lib/guests.sh   start guests (vm_launch, vm_start, vm_fresh, vm_shared), gdrprov in them, the exit trap,
#                   guest facts (vm_efivar, vm_nic, vm_rxe, vm_ib_write_bw)
#   lib/snapshot.sh booted snapshots: a flavor's image booted once a run, its guests restored from it
#   lib/ssh.sh      vm_ssh, vm_ssh_in, vm_copy_in/out, polls while a guest boots
#   lib/reboot.sh   vm_reboot, vm_powercut, vm_cut_power/vm_power_on, vm_poweroff, vm_kill
#   lib/assert.sh   gdrprov_has, require_gdrprov, baseline_covered_by, skip; ok, info, fail, assert_*
#   lib/modules.sh  patch_module (stand-in kernel modules)
VM_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib
# shellcheck source=lib/host.sh
. "$VM_LIB_DIR/host.sh"
# shellcheck source=lib/guests.sh
. "$VM_LIB_DIR/guests.sh"
# shellcheck source=lib/snapshot.sh
. "$VM_LIB_DIR/snapshot.sh"
# shellcheck source=lib/ssh.sh
. "$VM_LIB_DIR/ssh.sh"
# shellcheck source=lib/reboot.sh
. "$VM_LIB_DIR/reboot.sh"
# shellcheck source=lib/assert.sh
. "$VM_LIB_DIR/assert.sh"
# shellcheck source=lib/modules.sh
. "$VM_LIB_DIR/modules.sh"
