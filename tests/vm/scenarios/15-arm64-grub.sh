#!/usr/bin/env bash
# Seconds: 193
# Scenario: arm64 image build: apply --root (arch from the root) writes iommu.passthrough=1; the virt+SMMUv3 guest boots it via AAVMF+GRUB: Passthrough
# Flavor: arm64
# As an image pipeline does it: the cached arm64 root (build-image.sh --flavor arm64) is unpacked fresh, the host's
# (x86) gdrprov applies `boot: { iommu: passthrough }` to it with --root and no --arch (the architecture must
# come from the root itself), then the disk is made from it, its first boot installs GRUB and runs
# update-grub, and the guest boots through firmware and GRUB on qemu's virt machine with an SMMUv3.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
# shellcheck source=../arm64.sh
. "$(dirname "$0")/../arm64.sh"
require_gdrprov apply -- --no-exec

g=arm64
work="${TMPDIR:-/tmp}/gdrprov-vm-arm64-$$"
vm_trap
trap 'vm_cleanup; rm -rf "$work" "$(vm_gdir $g)/efivars.fd"' EXIT

img=$("$VM_DIR/build-image.sh" --flavor arm64) || fail "arm64 root build failed"
t=$(date +%s)
vm_arm64_extract "$work/rootfs"
root="$work/rootfs"
info "arm64 root unpacked from $img in $(vm_since "$t") s"
before=$(grep '^GRUB_CMDLINE_LINUX=' "$root/etc/default/grub")

cat > "$work/grace.yaml" <<'YAML'
name: grace-iommu
boot:
  iommu: passthrough
YAML

# plan: the architecture comes from the root (its binaries / dpkg), not from this x86 host.
plan=$("$GDRPROV_BIN" plan "$work/grace.yaml" --root "$root" --format json 2>"$work/plan.err") ||
  fail "plan --root failed: $(cat "$work/plan.err")"
printf '%s\n' "$plan" > "$VM_RUN_DIR/15-arm64-plan.json"
plan=$(printf '%s' "$plan" | python3 -c 'import json, sys
d = json.load(sys.stdin)
print("; ".join([c["description"] for c in d["changes"]] + d["reboot_reasons"] + d["warnings"]))') ||
  fail "plan --format json is not the plan's JSON (see $VM_RUN_DIR/15-arm64-plan.json)"
assert_contains "$plan" "add iommu.passthrough=1" "plan --root (arm64 root, no --arch) adds iommu.passthrough=1"
assert_not_contains "$plan" "iommu=pt" "plan adds no iommu=pt (x86-only)"
assert_not_contains "$plan" "intel_iommu" "plan adds no intel_iommu (x86-only)"

# --no-exec: the root's update-grub cannot run from here (in a chroot grub-probe finds no device for /, and the
# root's programs are arm64); gdrprov lists it as pending, and the disk's first boot runs it.
out=$("$GDRPROV_BIN" apply "$work/grace.yaml" --root "$root" --yes --no-exec 2>&1) || fail "apply --root failed: $out"
printf '%s\n' "$out" > "$VM_RUN_DIR/15-arm64-apply.txt"
assert_contains "$out" "update-grub" "apply --no-exec lists update-grub as pending (run by the install boot)"
line=$(grep '^GRUB_CMDLINE_LINUX=' "$root/etc/default/grub")
info "/etc/default/grub: $before -> $line"
assert_contains "$line" "iommu.passthrough=1" "apply --root wrote iommu.passthrough=1 into /etc/default/grub"
assert_not_contains "$line" "iommu=pt" "no iommu=pt in /etc/default/grub"

# The disk from the changed root; its first boot installs GRUB and runs update-grub (grub.cfg from it).
t=$(date +%s)
vm_arm64_disk "$root" "$work/disk.raw"
info "disk (GPT: ESP + ext4 from the root) in $(vm_since "$t") s"
vm_arm64_install "$root" "$work/disk.raw" "$VM_RUN_DIR/15-arm64-install.log"
rm -rf "$root"
vm_arm64_use "$work"

vm_start $g
arch=$(vm_ssh $g uname -m)
[ "$arch" = aarch64 ] || fail "guest is $arch, not aarch64"
ok "guest runs arm64 (uname -m: aarch64)"
efi=$(vm_ssh $g 'ls /boot/efi/EFI/BOOT/; test -d /sys/firmware/efi && echo uefi' 2>&1 || true)
assert_contains "$efi" "BOOTAA64.EFI" "GRUB is the firmware's removable-path loader on the ESP"
assert_contains "$efi" "uefi" "booted through UEFI (AAVMF)"
cfg=$(vm_ssh $g "grep -E '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg | head -1")
assert_contains "$cfg" "iommu.passthrough=1" "update-grub put iommu.passthrough=1 into grub.cfg's default entry"
cmdline=$(vm_ssh $g cat /proc/cmdline)
info "/proc/cmdline: $cmdline"
assert_contains " $cmdline " " iommu.passthrough=1 " "/proc/cmdline has iommu.passthrough=1"
assert_not_contains "$cmdline" "iommu=pt" "/proc/cmdline has no iommu=pt"
dom=$(vm_ssh $g "dmesg | grep -i 'default domain type'" || true)
info "kernel: ${dom#*] }"
assert_contains "$dom" "Passthrough" "kernel reports IOMMU default domain type Passthrough"
smmu=$(vm_ssh $g "ls /sys/class/iommu/; for t in /sys/kernel/iommu_groups/*/type; do cat \$t; done | sort | uniq -c" || true)
# shellcheck disable=SC2086,SC2116 # the lines joined into one (split and echoed on purpose)
info "iommus and group types: $(echo $smmu)"
assert_contains "$smmu" "smmu" "the guest has an SMMUv3 (/sys/class/iommu)"
assert_contains "$smmu" "identity" "its IOMMU groups are identity-mapped (passthrough)"
assert_not_contains "$smmu" "DMA" "no IOMMU group translates DMA"
vm_poweroff $g
