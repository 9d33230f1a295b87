#!/usr/bin/env bash
# Seconds: 238
# Scenario: a real Packer build (examples/packer/gdrprov.json, null builder over SSH) bakes a profile with the
# first-boot unit into the guest, installing gdrprov from its package (GDRPROV_DEB); after the reboot the
# unit has run and left /run/gdrprov/ready.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov verify -- --marker-dir
command -v packer >/dev/null || skip "packer is not installed on the host (apt-get install packer)"
[ -n "${GDRPROV_DEB:-}" ] || skip "no gdrprov package (GDRPROV_DEB; run.sh builds one unless GDRPROV_VM_PACKAGE=0)"

g=packer
vm_fresh $g
vm_ssh $g "dpkg -P gdrprov >/dev/null; rm -f /usr/local/bin/gdrprov; ! test -e /usr/bin/gdrprov"   # packer installs it
work=$(mktemp -d); trap 'rm -rf "$work"; vm_cleanup mine' EXIT
# rdma-dmabuf's boot and modules without its requirements (the testbed has no GPU, driver or RDMA
# device) and without the loopback; the rest is checked for real.
cat > "$work/site.yaml" <<'YAML'
name: vm-site
boot:
  iommu: passthrough
modules:
  absent: [nvidia_peermem, nv_peer_mem]
verify:
  first-boot: true
  loopback: false
vars:
  first-boot-profiles: /etc/gdrprov/site.yaml
  gdrprov-bin: /usr/bin/gdrprov
  gdrprov-textfile: /run/gdrprov/gdrprov.prom
YAML
d=$(vm_gdir $g)
# The template as docs/fleets.md runs it: from the checkout's top directory, the binary uploaded
# (gdrprov_binary); validate only (the build below installs the package instead).
bin=$(realpath "$GDRPROV_BIN")
( cd "$(dirname "$0")/../../.." && CHECKPOINT_DISABLE=1 packer validate \
    -var "gdrprov_binary=$bin" -var ssh_host=BUILDER -var ssh_password=unused \
    examples/packer/gdrprov.json ) || fail "packer validate of the documented invocation failed"
ok "packer validate runs as docs/fleets.md shows it"
( cd "$(dirname "$0")/../../../examples/packer" &&
  CHECKPOINT_DISABLE=1 PACKER_CACHE_DIR="$work/cache" timeout 1200 packer build -color=false \
    -var "gdrprov_package=$GDRPROV_DEB" -var "profile_file=$work/site.yaml" \
    -var ssh_host=127.0.0.1 -var "ssh_port=$(cat "$d/port")" -var ssh_username=root \
    -var "ssh_private_key_file=$(vm_image_dir)/id_ed25519" -var ssh_file_transfer_method=sftp \
    -var sudo= -var cpu_vendor=intel gdrprov.json ) > "$work/packer.log" 2>&1 ||
  { sed 's/^/    packer| /' "$work/packer.log"; fail "packer build failed"; }
grep -E 'Done: generation|Build .* finished' "$work/packer.log" | sed 's/^/    packer| /'
ok "packer build ran gdrprov apply --no-reboot in the guest"
unit=$(vm_ssh $g "cat /etc/systemd/system/gdrprov-verify.service")
assert_contains "$unit" "ExecStart=/usr/bin/gdrprov verify --marker-dir /run/gdrprov" "the unit is installed"
[ "$(vm_ssh $g "dpkg-query -W -f '\${Status}' gdrprov")" = "install ok installed" ] || fail "packer did not install the package"
ok "packer installed the gdrprov package"
lsmod_before=$(vm_ssh $g "lsmod | wc -l")
info "modules loaded after the build: $lsmod_before lines of lsmod (the build loads or unloads none)"

vm_reboot $g
c=$(vm_ssh $g cat /proc/cmdline)
assert_contains " $c " " iommu=pt " "the image boots with the baked command line"
# The oneshot runs after boot; give it time under TCG.
for _ in $(seq 60); do
  vm_ssh $g "test -e /run/gdrprov/ready || test -e /run/gdrprov/failed" && break
  sleep 5
done
st=$(vm_ssh $g "systemctl show -p ActiveState -p Result gdrprov-verify.service")
# shellcheck disable=SC2086,SC2116 # the lines joined into one (split and echoed on purpose)
info "gdrprov-verify.service: $(echo $st)"
marker=$(vm_ssh $g "cat /run/gdrprov/ready 2>/dev/null || { echo FAILED; cat /run/gdrprov/failed; }")
printf '%s\n' "$marker" | sed 's/^/    marker| /'
assert_contains "$marker" "ready vm-site" "the first-boot unit verified the host and wrote /run/gdrprov/ready"
prom=$(vm_ssh $g "cat /run/gdrprov/gdrprov.prom")
assert_contains "$prom" 'gdrprov_check_ok{check="reboot"' "the unit wrote the Prometheus textfile"
vm_poweroff $g
