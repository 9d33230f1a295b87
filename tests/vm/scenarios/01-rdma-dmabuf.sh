#!/usr/bin/env bash
# Seconds: 250
# Scenario: rdma-dmabuf: plan shows the diff; apply; update-grub ran; reboot; IOMMU args in /proc/cmdline;
# nvidia_peermem blocked; a second apply changes nothing; verify says there is no GPU; then rollback after
# that reboot restores every file byte for byte and the next boot has the original /proc/cmdline
# (the issue's scenarios 1 and 4 on one guest: each boot costs about a minute of the testbed's 2 cores).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov plan -- --detailed-exitcode
require_gdrprov apply
require_gdrprov verify
require_gdrprov rollback

g=dmabuf
vm_fresh $g
vendor=$(vm_ssh $g "awk -F': ' '/^vendor_id/ {print \$2; exit}' /proc/cpuinfo")
want="iommu=pt"
[ "$vendor" = GenuineIntel ] && want="iommu=pt intel_iommu=on"
info "guest CPU $vendor: expecting $want"

# The guest has no NVIDIA driver and no GPU: the profile's hard requirements fail. plan must say so and
# change nothing; --force turns them into warnings, and the rest of the scenario runs with it.
sum0=$(vm_ssh $g "sha256sum /etc/default/grub /boot/grub/grub.cfg")
c0=$(vm_ssh $g cat /proc/cmdline)
orig=$(vm_ssh $g "sha256sum /etc/default/grub; ls /etc/modprobe.d; ls /etc/nccl.conf 2>&1 || true")
rc=0; out=$(vm_ssh $g "gdrprov plan rdma-dmabuf --detailed-exitcode" 2>&1) || rc=$?
force=
if [ "$rc" = 1 ]; then
  printf '%s\n' "$out" | sed 's/^/    plan| /'
  printf '%s' "$out" | grep -qi 'requirement' || fail "plan failed, and not on requirements"
  printf '%s' "$out" | grep -qiE 'nvidia-driver|gpu' || fail "the refusal does not name the missing driver/GPU"
  ok "plan without a GPU refuses on requirements, naming the driver/GPU (exit 1)"
  force=--force
fi

# plan: the diff, exit 2 (changes pending), nothing written.
rc=0; out=$(vm_ssh $g "gdrprov plan rdma-dmabuf $force --detailed-exitcode" 2>&1) || rc=$?
printf '%s\n' "$out" | sed 's/^/    plan| /'
[ "$rc" = 2 ] || fail "plan $force --detailed-exitcode: exit $rc, want 2 (changes pending)"
assert_contains "$out" "GRUB_CMDLINE_LINUX" "plan shows the GRUB_CMDLINE_LINUX change"
assert_contains "$out" "iommu=pt" "plan names iommu=pt"
[ "$(vm_ssh $g "sha256sum /etc/default/grub /boot/grub/grub.cfg")" = "$sum0" ] || fail "plan changed files"
ok "plan changed nothing"
rc=0; json=$(vm_ssh $g "gdrprov plan rdma-dmabuf $force --format json") || rc=$?
[ "$rc" = 0 ] || fail "plan --format json: exit $rc"
printf '%s' "$json" | python3 -c 'import json,sys; json.load(sys.stdin)' || fail "plan --format json is not JSON"
ok "plan --format json parses"

# apply: /etc/default/grub and grub.cfg change (update-grub ran), the block file exists.
vm_ssh $g "gdrprov apply rdma-dmabuf $force --yes" | sed 's/^/    apply| /'
cfg=$(vm_ssh $g "grep -E '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg | head -1")
for a in $want; do assert_contains "$cfg" "$a" "grub.cfg has $a (update-grub ran)"; done
mp=$(vm_ssh $g "modprobe -c | grep -E '^(install|blacklist) (nvidia_peermem|nv_peer_mem)' | sort" || true)
assert_contains "$mp" "install nvidia_peermem" "modprobe.d has an install rule for nvidia_peermem"
assert_contains "$mp" "blacklist nvidia_peermem" "modprobe.d blacklists nvidia_peermem"

vm_reboot $g
cmd=$(vm_ssh $g cat /proc/cmdline)
info "/proc/cmdline: $cmd"
for a in $want; do assert_contains " $cmd " " $a " "/proc/cmdline has $a after the reboot"; done
dom=$(vm_ssh $g "dmesg | grep -i 'default domain type'" || true)
assert_contains "$dom" "Passthrough" "kernel reports IOMMU default domain type Passthrough"
# nvidia_peermem is not in this guest: the rule is checked with modprobe's dry run, the real block on a
# stand-in module in 05-modules-mtu.
dry=$(vm_ssh $g "modprobe -n -v nvidia_peermem 2>&1" || true)
assert_contains "$dry" "/bin/false" "modprobe nvidia_peermem would run the install rule, not load it"

# Idempotent: a second plan has nothing to do, a second apply changes no file.
sum1=$(vm_ssh $g "sha256sum /etc/default/grub /boot/grub/grub.cfg; ls -l --time-style=+%s /etc/modprobe.d")
rc=0; vm_ssh $g "gdrprov plan rdma-dmabuf $force --detailed-exitcode" >/dev/null || rc=$?
[ "$rc" = 0 ] || fail "second plan: exit $rc, want 0 (nothing to change)"
ok "second plan: nothing to change"
vm_ssh $g "gdrprov apply rdma-dmabuf $force --yes" | sed 's/^/    apply2| /'
[ "$(vm_ssh $g "sha256sum /etc/default/grub /boot/grub/grub.cfg; ls -l --time-style=+%s /etc/modprobe.d")" = "$sum1" ] ||
  fail "second apply changed files"
ok "second apply changed nothing"

# verify: reports what it can; no GPU here, and it says so.
rc=0; out=$(vm_ssh $g "gdrprov verify rdma-dmabuf" 2>&1) || rc=$?
printf '%s\n' "$out" | sed 's/^/    verify| /'
[ "$rc" = 3 ] || fail "verify exit $rc, want 3 (not ready: there is no GPU)"
ok "verify exits 3 (not ready)"
printf '%s' "$out" | grep -iE 'pass' | grep -qiE 'command line|iommu' || fail "verify does not report the kernel command line check as passed"
printf '%s' "$out" | grep -qiE '(no|not found|missing|without).*(gpu|nvidia)|(gpu|nvidia).*(not found|missing|absent|none)' ||
  fail "verify does not say that there is no GPU"
ok "verify passes the command line check and says there is no NVIDIA driver/GPU"

# Rollback after the reboot: the files as they were, and the next boot has the original command line.
vm_ssh $g "gdrprov rollback --yes" | sed 's/^/    rollback| /'
[ "$(vm_ssh $g "sha256sum /etc/default/grub; ls /etc/modprobe.d; ls /etc/nccl.conf 2>&1 || true")" = "$orig" ] ||
  fail "rollback: /etc/default/grub or the set of modprobe.d files / nccl.conf differs from the original"
ok "rollback: /etc/default/grub byte for byte the original, gdrprov's files gone"
vm_reboot $g
c2=$(vm_ssh $g cat /proc/cmdline)
info "after rollback + reboot: $c2"
[ "$c2" = "$c0" ] || fail "/proc/cmdline after rollback: '$c2', original: '$c0'"
ok "the boot after rollback has the original /proc/cmdline"
vm_poweroff $g
