#!/usr/bin/env bash
# Scenario (issue 25): gdrprov installed from its package, and the re-check when the kernel-module world
# changes. A site profile requires the NVIDIA open kernel module driver (>= 515, flavor open), as
# rdma-dmabuf does, and blocks nvidia_peermem; it is applied, so the re-check has a profile to check.
# Stand-in "driver" packages built here drop a module file nvidia.ko under /lib/modules/VER/updates and
# run depmod in their postinst, as driver packages do. Their nvidia.ko is the guest's dummy.ko whose
# .modinfo says license "Dual MIT/GPL" (open) or "NVIDIA" (proprietary) and a driver version: what
# gdrprov's driver probe reads with `modinfo nvidia` when no driver is loaded. So:
# 1. the package installed: dpkg knows the /lib/modules trigger, gdrprov-recheck.path is active;
# 2. installing the open-driver package fires the trigger: the re-check runs, the driver requirement is
#    met now, /run/gdrprov/ready replaces failed and the metrics say gdrprov_ready 1;
# 3. upgrading it to the proprietary build (the swap that breaks dma-buf) fires it again: the requirement
#    fails, /run/gdrprov/failed names it, gdrprov_ready 0, the unit failed (exit 3) - and the package's
#    install still succeeded (dpkg exit 0, status installed): a failing verify never fails it;
# 4. a DKMS-style build (a module copied in and depmod run, no package manager involved): the path unit
#    on the running kernel's modules.dep.bin re-checks, ready again.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov recheck
[ -n "${GDRPROV_DEB:-}" ] || skip "no gdrprov package (GDRPROV_DEB; run.sh builds one unless GDRPROV_VM_PACKAGE=0)"

g=pkgtrig
work=$VM_RUN_DIR/16-package-trigger
mkdir -p "$work"
PROM=/var/lib/prometheus/node-exporter/gdrprov.prom

# modinfo_module SRC DST LICENSE VERSION: SRC (an uncompressed ELF64 module) with its .modinfo rewritten:
# name=nvidia, the license and version given, vermagic kept, the rest dropped (the section keeps its size).
modinfo_module() {
  python3 - "$@" <<'PY'
import struct, sys
src, dst, lic, ver = sys.argv[1:5]
d = bytearray(open(src, 'rb').read())
if d[:4] != b'\x7fELF' or d[4] != 2: sys.exit('not an ELF64 module')
shoff, = struct.unpack_from('<Q', d, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
hdr = [struct.unpack_from('<IIQQQQ', d, shoff + i * shentsize) for i in range(shnum)]
stro = hdr[shstrndx][4]
for nm, _t, _f, _a, off, size in hdr:
    if bytes(d[stro + nm:d.index(b'\0', stro + nm)]) == b'.modinfo':
        old = [s for s in bytes(d[off:off + size]).split(b'\0') if s]
        keep = [s for s in old if s.startswith((b'vermagic=', b'depends=', b'intree=', b'retpoline='))]
        strs = [b'license=' + lic.encode(), b'version=' + ver.encode(), b'name=nvidia'] + keep
        blob = b'\0'.join(strs) + b'\0'
        if len(blob) > size: sys.exit('.modinfo too small')
        d[off:off + size] = blob.ljust(size, b'\0')
        open(dst, 'wb').write(d)
        sys.exit(0)
sys.exit('no .modinfo')
PY
}

# driver_deb VERSION LICENSE DRIVER_VERSION: a stand-in driver package dropping updates/nvidia.ko.
driver_deb() {
  local v=$1 lic=$2 dv=$3 d=$work/deb-$1
  rm -rf "$d"; mkdir -p "$d/DEBIAN" "$d/lib/modules/$kver/updates"
  modinfo_module "$ko" "$d/lib/modules/$kver/updates/nvidia.ko" "$lic" "$dv"
  printf 'Package: nvidia-kmod-standin\nVersion: %s\nArchitecture: all\nMaintainer: gdrprov tests <t@t.example>\nDescription: stand-in NVIDIA kernel module (%s %s)\n' \
    "$v" "$lic" "$dv" >"$d/DEBIAN/control"
  printf '#!/bin/sh\nset -e\n[ "$1" = configure ] && depmod -a %s\nexit 0\n' "$kver" >"$d/DEBIAN/postinst"
  chmod 755 "$d/DEBIAN/postinst"
  dpkg-deb -b --root-owner-group "$d" "$work/nvidia-kmod-standin_$v.deb" >/dev/null
  echo "$work/nvidia-kmod-standin_$v.deb"
}

# recheck_done SINCE_US: wait until gdrprov-recheck.service has finished a run that began after SINCE_US
# (CLOCK_MONOTONIC µs), i.e. is inactive or failed with a later ExecMainStartTimestamp.
recheck_done() {
  local since=$1 st t
  for _ in $(seq 90); do
    st=$(vm_ssh $g "systemctl show gdrprov-recheck.service -p ActiveState --value")
    t=$(vm_ssh $g "systemctl show gdrprov-recheck.service -p ExecMainStartTimestampMonotonic --value")
    if [ "${t:-0}" -gt "$since" ] && { [ "$st" = inactive ] || [ "$st" = failed ]; }; then
      return 0
    fi
    sleep 2
  done
  fail "gdrprov-recheck.service did not run after $since µs (state $st)"
}
now_us() { vm_ssh $g "awk '{printf \"%d\", \$1 * 1000000}' /proc/uptime"; }
journal() { vm_ssh $g "journalctl -b --no-pager -o cat -u gdrprov-recheck | tail -n ${1:-6}" | sed 's/^/    journal| /'; }
marker() { vm_ssh $g "if test -e /run/gdrprov/ready; then cat /run/gdrprov/ready; else echo FAILED; cat /run/gdrprov/failed; fi"; }
ready_metric() { vm_ssh $g "grep '^gdrprov_ready' $PROM" | awk '{print $NF}'; }

# --- 1. the package ---------------------------------------------------------------------------------------
vm_fresh $g
kver=$(vm_ssh $g "uname -r")
[ "$(vm_ssh $g "dpkg-query -W -f '\${Status}' gdrprov")" = "install ok installed" ] || fail "gdrprov is not installed"
vm_ssh $g "grep -q '^/lib/modules gdrprov/noawait' /var/lib/dpkg/triggers/File" || fail "dpkg has no /lib/modules trigger for gdrprov"
[ "$(vm_ssh $g "systemctl is-active gdrprov-recheck.path")" = active ] || fail "gdrprov-recheck.path is not active"
# (The image's dpkg excludes /usr/share/man and /usr/share/doc: scripts/package-test-root.sh checks those.)
vm_ssh $g "test -f /usr/share/bash-completion/completions/gdrprov" || fail "bash completion missing"
ok "package installed: /usr/bin/gdrprov, completions, /lib/modules trigger, gdrprov-recheck.path active"

src=$(vm_ssh $g "modinfo -n dummy")
vm_copy_out $g "$src" "$work"
ko=$work/$(basename "$src")
case $ko in *.ko) ;; *) fail "guest module $src is compressed; this scenario expects bookworm's plain .ko" ;; esac

vm_ssh_in $g "mkdir -p /etc/gdrprov /var/lib/prometheus/node-exporter && cat > /etc/gdrprov/site.yaml" <<'YAML'
name: site
requires:
  nvidia-driver:
    version: ">= 515"
    flavor: open
modules:
  absent: [nvidia_peermem]
vars:
  gdrprov-textfile: /var/lib/prometheus/node-exporter/gdrprov.prom
YAML
vm_ssh $g "gdrprov apply /etc/gdrprov/site.yaml --yes --force" >/dev/null || fail "apply of the site profile failed"
t0=$(now_us)
vm_ssh $g "systemctl start gdrprov-recheck.service" >/dev/null 2>&1 || true
recheck_done "$t0"
m=$(marker)
assert_contains "$m" "FAILED" "before any driver: the re-check says not ready"
assert_contains "$m" "nvidia-driver" "  ... naming the driver requirement"
[ "$(ready_metric)" = 0 ] || fail "metrics: gdrprov_ready is not 0 before the driver"
ok "metrics: gdrprov_ready 0 in $PROM (the profile's vars.gdrprov-textfile)"

# --- 2. an open driver package: the trigger fires, ready ---------------------------------------------------
open1=$(driver_deb 580.95.05-1 "Dual MIT/GPL" 580.95.05)
vm_copy_in $g "$open1" /root/open.deb
t0=$(now_us)
out=$(vm_ssh $g "dpkg -i /root/open.deb 2>&1") || fail "dpkg -i of the open driver package failed: $out"
printf '%s\n' "$out" | sed 's/^/    dpkg| /'
assert_contains "$out" "Processing triggers for gdrprov" "installing a module under /lib/modules/$kver/updates fires gdrprov's trigger"
recheck_done "$t0"
journal 3
m=$(marker)
assert_contains "$m" "ready site" "the re-check after the open driver: /run/gdrprov/ready"
vm_ssh $g "test ! -e /run/gdrprov/failed" || fail "/run/gdrprov/failed is still there"
[ "$(ready_metric)" = 1 ] || fail "metrics: gdrprov_ready is not 1 after the open driver"
ok "metrics: gdrprov_ready 0 -> 1 (modinfo nvidia: open, 580.95.05 meets the requirement)"

# --- 3. the swap to the proprietary build: not ready, and the install still succeeds ----------------------
prop=$(driver_deb 580.95.05-2 NVIDIA 535.216.03)
vm_copy_in $g "$prop" /root/prop.deb
t0=$(now_us)
rc=0; out=$(vm_ssh $g "dpkg -i /root/prop.deb 2>&1") || rc=$?
printf '%s\n' "$out" | sed 's/^/    dpkg| /'
[ "$rc" = 0 ] || fail "dpkg -i of the proprietary package exited $rc: a failing re-check must not fail it"
recheck_done "$t0"
journal 4
[ "$(vm_ssh $g "dpkg-query -W -f '\${Status} \${Version}' nvidia-kmod-standin")" = "install ok installed 580.95.05-2" ] ||
  fail "the stand-in package is not installed"
ok "dpkg -i exit 0, package installed, although its trigger's verify failed"
m=$(marker)
assert_contains "$m" "FAILED" "the re-check after the proprietary swap: /run/gdrprov/failed"
assert_contains "$m" "open" "  ... saying the profile needs the open kernel modules"
[ "$(ready_metric)" = 0 ] || fail "metrics: gdrprov_ready is not 0 after the swap"
[ "$(vm_ssh $g "systemctl show gdrprov-recheck.service -p Result --value")" = exit-code ] ||
  fail "gdrprov-recheck.service did not fail (exit 3) on a host that is not ready"
ok "metrics: gdrprov_ready 1 -> 0; gdrprov-recheck.service failed (systemctl --failed shows it)"

# --- 4. a DKMS-style build, no package manager: the path unit re-checks ------------------------------------
vm_ssh $g "dpkg -r nvidia-kmod-standin" >/dev/null || fail "dpkg -r of the stand-in failed"
sleep 3
modinfo_module "$ko" "$work/nvidia-dkms.ko" "Dual MIT/GPL" 580.95.05
vm_copy_in $g "$work/nvidia-dkms.ko" "/lib/modules/$kver/updates/dkms/nvidia.ko"
t0=$(now_us)
vm_ssh $g "depmod -a $kver"
recheck_done "$t0"
journal 2
m=$(marker)
assert_contains "$m" "ready site" "a module built outside the package manager (DKMS-style) + depmod: the path unit re-checked, ready"
[ "$(ready_metric)" = 1 ] || fail "metrics: gdrprov_ready is not 1 after the DKMS-style build"
ok "metrics: gdrprov_ready 0 -> 1 after the DKMS-style build"
vm_poweroff $g
