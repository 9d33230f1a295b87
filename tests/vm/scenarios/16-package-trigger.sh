#!/usr/bin/env bash
# Seconds: 233
# Scenario (issue 25): gdrprov installed from its package, and the re-check when the kernel-module world
# changes. The story of NCCL issue 1676: a driver upgrade drops the peer-memory module a host loads at every
# boot. A stand-in driver package (nvidia-kmod-standin) ships the module nv_standin in
# /lib/modules/VER/updates (the guest's dummy.ko renamed, as in 13-openibd: it really loads) and runs depmod
# in its postinst, as driver packages do; a site profile loads it now and at every boot. Then:
# 1. the package installed: dpkg knows the /lib/modules trigger, gdrprov-recheck.path is active;
# 2. the driver package, then the profile applied: the re-check says ready, gdrprov_ready 1;
# 3. the driver upgrade (version 2 no longer ships the module) fires the trigger: the running kernel's
#    module index lacks the module the profile loads at boot, so the next boot would come up without it:
#    /run/gdrprov/failed says so, gdrprov_ready 0, the unit failed (exit 3), and the upgrade itself
#    succeeded (dpkg exit 0, status installed): a failing re-check never fails the transaction;
# 4. a DKMS-style build (the module copied into updates/dkms and depmod run, no package manager): the path
#    unit on the running kernel's modules.dep.bin re-checks: ready again, gdrprov_ready 1.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov recheck
[ -n "${GDRPROV_DEB:-}" ] || skip "no gdrprov package (GDRPROV_DEB; run.sh builds one unless GDRPROV_VM_PACKAGE=0)"

g=pkgtrig
work=$VM_RUN_DIR/16-package-trigger
mkdir -p "$work"
PROM=/var/lib/prometheus/node-exporter/gdrprov.prom


# driver_deb VERSION WITH_MODULE: the stand-in driver package; with WITH_MODULE=yes it ships
# updates/nv_standin.ko (and its options: no dummy0 interface), else only a README (the upgrade that
# dropped it). Its postinst runs depmod, as driver packages do.
driver_deb() {
  local v=$1 d=$work/deb-$1
  rm -rf "$d"; mkdir -p "$d/DEBIAN" "$d/usr/share/doc/nvidia-kmod-standin"
  echo "stand-in driver $v" >"$d/usr/share/doc/nvidia-kmod-standin/README"
  if [ "$2" = yes ]; then
    mkdir -p "$d/lib/modules/$kver/updates" "$d/etc/modprobe.d"
    cp "$work/nv_standin.ko" "$d/lib/modules/$kver/updates/nv_standin.ko"
    echo 'options nv_standin numdummies=0' >"$d/etc/modprobe.d/nv_standin.conf"
  fi
  printf 'Package: nvidia-kmod-standin\nVersion: %s\nArchitecture: all\nMaintainer: gdrprov tests <t@t.example>\nDescription: stand-in driver package\n' \
    "$v" >"$d/DEBIAN/control"
  # shellcheck disable=SC2016 # the postinst's shell expands it
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
# idle: until no re-check runs (a trigger's run ends before the next step starts its own).
# shellcheck disable=SC2016 # the guest's shell expands it
idle() { vm_ssh $g 'for i in $(seq 120); do [ "$(systemctl show -p ActiveState --value gdrprov-recheck.service)" = activating ] || exit 0; sleep 1; done; exit 1' ||
  fail "gdrprov-recheck.service still running after 120 s"; }
now_us() { vm_ssh $g "awk '{printf \"%d\", \$1 * 1000000}' /proc/uptime"; }
journal() { vm_ssh $g "journalctl -b --no-pager -o cat -u gdrprov-recheck | tail -n ${1:-6}" | sed 's/^/    journal| /'; }
marker() { vm_ssh $g "if test -e /run/gdrprov/ready; then echo READY; cat /run/gdrprov/ready; else echo FAILED; cat /run/gdrprov/failed; fi"; }
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
patch_module "$ko" "$work/nv_standin.ko" dummy nv_standin >/dev/null || fail "patching dummy.ko into nv_standin failed"

# --- 2. the driver package, then the profile: ready ----------------------------------------------------------
v1=$(driver_deb 1.0-1 yes)
vm_copy_in $g "$v1" /root/v1.deb
out=$(vm_ssh $g "dpkg -i /root/v1.deb 2>&1") || fail "dpkg -i of the driver package failed: $out"
assert_contains "$out" "Processing triggers for gdrprov" "a package with a module under /lib/modules/$kver/updates fires gdrprov's trigger"
vm_ssh_in $g "mkdir -p /etc/gdrprov /var/lib/prometheus/node-exporter && cat > /etc/gdrprov/site.yaml" <<'YAML'
name: site
modules:
  present: [nv_standin]
vars:
  gdrprov-textfile: /var/lib/prometheus/node-exporter/gdrprov.prom
YAML
vm_ssh $g "gdrprov apply /etc/gdrprov/site.yaml --yes" >/dev/null || fail "apply of the site profile failed"
vm_ssh $g "test -d /sys/module/nv_standin" || fail "apply did not load nv_standin"
idle
t0=$(now_us)
vm_ssh $g "systemctl start gdrprov-recheck.service" >/dev/null 2>&1 || true
recheck_done "$t0"
m=$(marker)
assert_contains "$m" "READY" "the profile applied, module loaded: the re-check writes /run/gdrprov/ready"
[ "$(ready_metric)" = 1 ] || fail "metrics: gdrprov_ready is not 1"
ok "metrics: gdrprov_ready 1 in $PROM (the profile's vars.gdrprov-textfile)"

# --- 3. the upgrade that drops the module: not ready, and the upgrade still succeeds ---------------------
v2=$(driver_deb 2.0-1 no)
vm_copy_in $g "$v2" /root/v2.deb
idle
t0=$(now_us)
rc=0; out=$(vm_ssh $g "dpkg -i /root/v2.deb 2>&1") || rc=$?
printf '%s\n' "$out" | sed 's/^/    dpkg| /'
[ "$rc" = 0 ] || fail "dpkg -i of the upgrade exited $rc: a failing re-check must not fail it"
assert_contains "$out" "Processing triggers for gdrprov" "removing a module from /lib/modules fires the trigger"
recheck_done "$t0"
journal 4
[ "$(vm_ssh $g "dpkg-query -W -f '\${Status} \${Version}' nvidia-kmod-standin")" = "install ok installed 2.0-1" ] ||
  fail "the upgrade is not installed"
ok "dpkg -i exit 0, the upgrade installed, although its trigger's re-check found the host not ready"
m=$(marker)
printf '%s\n' "$m" | sed 's/^/    marker| /'
assert_contains "$m" "FAILED" "after the upgrade: /run/gdrprov/failed"
assert_contains "$m" "nv_standin" "  ... naming the module the next boot would lack"
[ "$(ready_metric)" = 0 ] || fail "metrics: gdrprov_ready is not 0 after the upgrade"
[ "$(vm_ssh $g "systemctl show gdrprov-recheck.service -p Result --value")" = exit-code ] ||
  fail "gdrprov-recheck.service did not fail (exit 3) on a host that is not ready"
ok "metrics: gdrprov_ready 1 -> 0; gdrprov-recheck.service failed (systemctl --failed shows it)"

# --- 4. a DKMS-style build, no package manager: the path unit re-checks ------------------------------------
idle
vm_copy_in $g "$work/nv_standin.ko" "/lib/modules/$kver/updates/dkms/nv_standin.ko"
t0=$(now_us)
vm_ssh $g "depmod -a $kver"
recheck_done "$t0"
journal 2
m=$(marker)
assert_contains "$m" "READY" "a module built outside the package manager (DKMS-style) + depmod: the path unit re-checked, ready"
[ "$(ready_metric)" = 1 ] || fail "metrics: gdrprov_ready is not 1 after the DKMS-style build"
ok "metrics: gdrprov_ready 0 -> 1 after the DKMS-style build"
vm_poweroff $g
