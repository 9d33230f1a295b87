#!/usr/bin/env bash
# Seconds: 247
# Scenario: nvidia_peermem on a host with openibd: a profile with `modules.present: [nvidia_peermem]` makes
# gdrprov-peermem.service (After= and PartOf=openibd.service, modprobe / modprobe -r) and an openibd drop-in
# that Wants= it, instead of modules-load.d; `systemctl restart openibd` then succeeds (the module is unloaded
# before openibd stops and loaded again after it starts), also across a reboot; a second apply changes
# nothing; rollback removes both files
#
# Stand-ins, both built in the guest by this scenario:
# - nvidia_peermem: the real module needs an NVIDIA GPU and driver. The stand-in is the guest kernel's own
#   dummy.ko renamed (struct module's name, .modinfo's name=) with its signature cut off, so it really loads
#   (unsigned: the kernel is tainted E, but a module whose signature no longer matches would be refused).
#   It does not hold ib_core as the real one does, which is why the stand-in openibd checks for it.
# - openibd: a oneshot unit whose script loads the RDMA stack (rdma_rxe; ib_core comes with it) on start and,
#   like MLNX_OFED/DOCA-OFED's, fails on stop while nvidia_peermem is loaded. Each start and stop appends
#   "start|stop peermem=loaded|absent UPTIME" to /var/log/openibd-standin.log.
# Against gdrprov before the change (an openibd drop-in with ExecStartPost=-/sbin/modprobe, nothing that
# unloads the module) it fails in step 4: there is no gdrprov-peermem.service.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov apply
require_gdrprov plan -- --detailed-exitcode
require_gdrprov rollback
require_gdrprov verify -- --no-loopback

g=openibd
UNIT=/etc/systemd/system/gdrprov-peermem.service
DROPIN=/etc/systemd/system/openibd.service.d/gdrprov-peermem.conf
LOADCONF=/etc/modules-load.d/gdrprov.conf
PROFILE=/root/openibd.yaml
LOG=/var/log/openibd-standin.log
work=$VM_RUN_DIR/13-openibd
mkdir -p "$work"

# --- helpers (kept in this file) -------------------------------------------------------------------------


# decompress FILE: FILE without its .xz/.zst/.gz suffix, decompressed on the host (kmod loads a plain .ko
# whatever the kernel's own modules use).
decompress() {
  local f=$1
  case $f in
    *.ko) echo "$f" ;;
    *.ko.xz) python3 -c 'import lzma,sys; open(sys.argv[2],"wb").write(lzma.open(sys.argv[1]).read())' "$f" "${f%.xz}"; echo "${f%.xz}" ;;
    *.ko.gz) python3 -c 'import gzip,sys; open(sys.argv[2],"wb").write(gzip.open(sys.argv[1]).read())' "$f" "${f%.gz}"; echo "${f%.gz}" ;;
    *.ko.zst)
      if command -v zstd >/dev/null; then zstd -q -d -f -o "${f%.zst}" "$f"
      else python3 -c 'import zstandard,sys; open(sys.argv[2],"wb").write(zstandard.ZstdDecompressor().stream_reader(open(sys.argv[1],"rb")).read())' "$f" "${f%.zst}" ||
        fail "$f is zstd-compressed and the host has neither zstd nor python3-zstandard"; fi
      echo "${f%.zst}" ;;
    *) fail "unexpected module file name $f" ;;
  esac
}

loaded() { vm_ssh $g "test -d /sys/module/nvidia_peermem" >/dev/null 2>&1; }
standin_log() { vm_ssh $g "cat $LOG 2>/dev/null || true"; }
# mono UNIT PROPERTY: a systemd timestamp of UNIT in microseconds since boot (CLOCK_MONOTONIC).
mono() { vm_ssh $g "systemctl show $1 -p $2 --value"; }
# settle: until systemd has no job queued (a restart of openibd returns before the start of
# gdrprov-peermem that PartOf/Wants queued after it has run).
# shellcheck disable=SC2016 # the guest's shell expands it
settle() { vm_ssh $g 'for i in $(seq 120); do systemctl list-jobs --no-legend 2>/dev/null | grep -q . || exit 0; sleep 0.5; done; systemctl list-jobs; exit 1' >/dev/null ||
  fail "systemd jobs still queued after 60 s"; }
journal() { vm_ssh $g "journalctl -b -o short-monotonic --no-pager -u openibd -u gdrprov-peermem | tail -n ${1:-12}" | sed 's/^/    journal| /'; }
# assert_before A_US B_US WHAT: A <= B, both non-zero.
assert_before() {
  { [ "${1:-0}" -gt 0 ] && [ "${2:-0}" -gt 0 ]; } || fail "$3: a timestamp is missing ($1, $2)"
  [ "$1" -le "$2" ] || fail "$3: $1 > $2 (µs since boot)"
  ok "$3 ($(( $1 / 1000 )) ms <= $(( $2 / 1000 )) ms since boot)"
}
# The ordering of the last restart (or boot): gdrprov-peermem stopped before openibd's stop began, and
# started after openibd's start had finished.
check_order() {
  local what=$1 p_start o_up
  if [ "$what" = restart ]; then
    assert_before "$(mono gdrprov-peermem InactiveEnterTimestampMonotonic)" "$(mono openibd ActiveExitTimestampMonotonic)" \
      "restart: gdrprov-peermem stopped (module unloaded) before openibd began to stop"
  fi
  o_up=$(mono openibd ActiveEnterTimestampMonotonic)
  p_start=$(mono gdrprov-peermem InactiveExitTimestampMonotonic)
  assert_before "$o_up" "$p_start" "$what: gdrprov-peermem started (module loaded) after openibd's start finished"
}

# --- 1. the guest and the stand-in nvidia_peermem --------------------------------------------------------

vm_fresh $g
kver=$(vm_ssh $g "uname -r")
info "guest kernel $kver, $(vm_ssh $g 'systemctl --version | head -1')"
src=$(vm_ssh $g "modinfo -n dummy") || fail "no dummy module in the guest"
info "stand-in source: $src"
vm_copy_out $g "$src" "$work"
ko=$(decompress "$work/$(basename "$src")")
out=$(patch_module "$ko" "$work/nvidia_peermem.ko" dummy nvidia_peermem 2>&1) ||
  fail "patching $(basename "$ko") into nvidia_peermem failed: $out"
printf '%s\n' "$out" | sed 's/^/    patch| /'
vm_copy_in $g "$work/nvidia_peermem.ko" "/lib/modules/$kver/updates/nvidia_peermem.ko"
# numdummies=0: the stand-in (dummy's code) makes no dummy0 interface.
vm_ssh $g "echo 'options nvidia_peermem numdummies=0' > /etc/modprobe.d/nvidia_peermem-standin.conf && depmod -a"
[ "$(vm_ssh $g "modinfo -n nvidia_peermem")" = "/lib/modules/$kver/updates/nvidia_peermem.ko" ] ||
  fail "modinfo does not find the stand-in nvidia_peermem"
vm_ssh $g "modprobe nvidia_peermem" || fail "modprobe nvidia_peermem (the stand-in) failed"
loaded || fail "modprobe nvidia_peermem: no /sys/module/nvidia_peermem"
info "kernel taint after loading it: $(vm_ssh $g 'cat /proc/sys/kernel/tainted'); $(vm_ssh $g "dmesg | grep -m1 'nvidia_peermem:' || true")"
vm_ssh $g "modprobe -r nvidia_peermem" || fail "modprobe -r nvidia_peermem failed"
! loaded || fail "modprobe -r nvidia_peermem: /sys/module/nvidia_peermem is still there"
ok "stand-in nvidia_peermem ($(basename "$src") renamed, unsigned) loads and unloads for real"

# --- 2. the stand-in openibd -----------------------------------------------------------------------------

vm_ssh_in $g "mkdir -p /usr/local/sbin && cat > /usr/local/sbin/openibd && chmod 755 /usr/local/sbin/openibd" <<'EOF' || fail "writing the openibd stand-in"
#!/bin/sh
# Stand-in for MLNX_OFED/DOCA-OFED's openibd (gdrprov VM scenario 13): start loads the RDMA stack; stop
# unloads it and, like the real one, fails while nvidia_peermem is loaded (the real module holds ib_core).
# systemd runs a restart's start even after its stop failed, so start fails too after a failed stop (the old
# stack is still loaded; the real openibd cannot load its modules over it), once.
log=/var/log/openibd-standin.log
failed=/run/openibd-standin.stop-failed
peermem() { if [ -d /sys/module/nvidia_peermem ]; then echo loaded; else echo absent; fi; }
note() { echo "$1 peermem=$(peermem) $(cut -d' ' -f1 /proc/uptime)" >> "$log"; }
case "$1" in
  start)
    note start
    if [ -e "$failed" ]; then
      rm -f "$failed"
      echo "openibd: ERROR: the last stop failed (nvidia_peermem held ib_core); the RDMA stack was not reloaded" >&2
      exit 1
    fi
    modprobe rdma_rxe ;;
  stop)
    note stop
    if [ -d /sys/module/nvidia_peermem ]; then
      touch "$failed"
      echo "openibd: ERROR: module nvidia_peermem is loaded and holds ib_core; unload it first" >&2
      exit 1
    fi
    modprobe -r rdma_rxe
    modprobe -r ib_uverbs ib_core 2>/dev/null || true ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
EOF
vm_ssh_in $g "cat > /etc/systemd/system/openibd.service" <<'EOF' || fail "writing openibd.service"
[Unit]
Description=openibd stand-in (gdrprov VM scenario 13)

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/openibd start
ExecStop=/usr/local/sbin/openibd stop

[Install]
WantedBy=multi-user.target
EOF
vm_ssh $g "systemctl daemon-reload && systemctl enable --now openibd.service" >/dev/null 2>&1 || fail "starting the openibd stand-in"
vm_ssh $g "systemctl is-active openibd && test -d /sys/module/ib_core" >/dev/null || fail "openibd stand-in: not active or no ib_core"
ok "stand-in openibd active, ib_core loaded (rdma_rxe)"

# --- 3. negative control: with nvidia_peermem loaded, openibd cannot restart -----------------------------

vm_ssh $g "modprobe nvidia_peermem"
rc=0; vm_ssh $g "systemctl restart openibd" >/dev/null 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "negative control: systemctl restart openibd succeeded with nvidia_peermem loaded"
assert_contains "$(standin_log | tail -2 | head -1)" "stop peermem=loaded" "negative control: openibd's stop ran with nvidia_peermem loaded"
ok "negative control: systemctl restart openibd fails (exit $rc) while nvidia_peermem is loaded"
vm_ssh $g "modprobe -r nvidia_peermem && systemctl restart openibd && systemctl is-active openibd" >/dev/null ||
  fail "openibd does not restart after nvidia_peermem is unloaded by hand"
ok "with nvidia_peermem unloaded by hand, openibd restarts"

# --- 4. plan and apply -----------------------------------------------------------------------------------

vm_ssh $g "printf 'name: openibd-peermem\nmodules: { present: [nvidia_peermem] }\n' > $PROFILE"
rc=0; plan=$(vm_ssh $g "gdrprov plan $PROFILE --detailed-exitcode --color never") || rc=$?
printf '%s\n' "$plan" | sed 's/^/    plan| /'
[ "$rc" = 2 ] || fail "plan --detailed-exitcode: exit $rc, want 2 (changes pending)"
vm_ssh $g "test ! -e $UNIT && test ! -e $DROPIN" || fail "plan wrote files"
! loaded || fail "plan loaded nvidia_peermem"
ok "plan: changes pending (exit 2), nothing written or loaded"

rc=0; vm_ssh $g "gdrprov --format json apply $PROFILE --yes" > "$work/apply1.json" || rc=$?
[ "$rc" = 0 ] || { cat "$work/apply1.json"; fail "apply: exit $rc"; }
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
for c in r.get("changes", []): print("    apply| %s: %s" % (c.get("kind"), c.get("path") or " ".join(c.get("command", {}).get("argv", []))))
for c in r["outcome"]["commands_run"]: print("    apply| ran: " + " ".join(c["argv"]))' "$work/apply1.json"
dropin=$(vm_ssh $g "cat $DROPIN 2>&1" || true)
printf '%s\n' "$dropin" | sed 's/^/    drop-in| /'
unit=$(vm_ssh $g "cat $UNIT" 2>&1) || fail "apply wrote no $UNIT (openibd drop-in: $(printf '%s' "$dropin" | grep -v '^#' | tr '\n' ' '))"
printf '%s\n' "$unit" | sed 's/^/    unit| /'
for l in '[Unit]' 'After=openibd.service' 'PartOf=openibd.service' '[Service]' 'Type=oneshot' 'RemainAfterExit=yes' \
         'ExecStart=/sbin/modprobe nvidia_peermem' 'ExecStop=/sbin/modprobe -r nvidia_peermem'; do
  printf '%s\n' "$unit" | grep -qxF -- "$l" || fail "$UNIT has no line '$l'"
done
ok "$UNIT: After= and PartOf=openibd.service, oneshot, modprobe / modprobe -r nvidia_peermem"
{ printf '%s\n' "$dropin" | grep -qxF '[Unit]' && printf '%s\n' "$dropin" | grep -qxF 'Wants=gdrprov-peermem.service'; } ||
  fail "$DROPIN has no [Unit] Wants=gdrprov-peermem.service"
assert_not_contains "$dropin" "ExecStartPost" "the openibd drop-in loads nothing itself (no ExecStartPost)"
ok "$DROPIN: Wants=gdrprov-peermem.service"
lc=$(vm_ssh $g "cat $LOADCONF 2>/dev/null || true")
printf '%s\n' "$lc" | grep -v '^#' | grep -qw nvidia_peermem && fail "$LOADCONF lists nvidia_peermem: $lc"
ok "nvidia_peermem is not in $LOADCONF ($(vm_ssh $g "test -e $LOADCONF && echo present || echo absent"))"
python3 -c '
import json, sys
ran = [" ".join(c["argv"]) for c in json.load(open(sys.argv[1]))["outcome"]["commands_run"]]
ok = any("daemon-reload" in c for c in ran) and any(" start " in " %s " % c and "gdrprov-peermem.service" in c for c in ran)
bare = [c for c in ran if c.split()[-1:] == ["nvidia_peermem"] and "modprobe" in c and "-r" not in c.split()]
sys.exit(0 if ok and not bare else "commands run: %s" % ran)' "$work/apply1.json" ||
  fail "apply did not run daemon-reload and systemctl start gdrprov-peermem.service (or ran a bare modprobe)"
ok "apply ran systemctl daemon-reload and systemctl start gdrprov-peermem.service, no bare modprobe"
assert_contains "$(vm_ssh $g "systemctl show openibd -p Wants")" "gdrprov-peermem.service" "openibd Wants= gdrprov-peermem.service"
[ "$(vm_ssh $g "systemctl is-active gdrprov-peermem.service" || true)" = active ] || fail "gdrprov-peermem.service is not active after apply"
loaded || fail "nvidia_peermem is not loaded after apply"
ok "after apply: gdrprov-peermem.service active, nvidia_peermem loaded"
assert_contains "$plan" "gdrprov-peermem.service" "the plan named gdrprov-peermem.service"

# --- 5. openibd restarts, and nvidia_peermem comes back after it ----------------------------------------

n0=$(standin_log | wc -l)
rc=0; vm_ssh $g "systemctl restart openibd" || rc=$?
[ "$rc" = 0 ] || { journal 20; fail "systemctl restart openibd: exit $rc with gdrprov-peermem in place"; }
ok "systemctl restart openibd succeeds"
settle
new=$(standin_log | tail -n +"$((n0 + 1))")
printf '%s\n' "$new" | sed 's/^/    openibd-standin.log| /'
journal 10
[ "$(printf '%s\n' "$new" | awk '{print $1, $2}' | tr '\n' ' ')" = "stop peermem=absent start peermem=absent " ] ||
  fail "restart: want one stop and one start, both with nvidia_peermem absent; the log says: $new"
ok "openibd's stop ran with nvidia_peermem already unloaded, its start before it was loaded again"
[ "$(vm_ssh $g "systemctl is-active openibd gdrprov-peermem" | tr '\n' ' ')" = "active active " ] ||
  fail "after the restart: openibd / gdrprov-peermem not both active"
loaded || fail "nvidia_peermem is not loaded again after the restart"
ok "after the restart: openibd and gdrprov-peermem active, nvidia_peermem loaded"
check_order restart

# --- 6. a second apply changes nothing -------------------------------------------------------------------

sum1=$(vm_ssh $g "sha256sum $UNIT $DROPIN; stat -c '%n %Y' $UNIT $DROPIN; ls /etc/modules-load.d")
rc=0; vm_ssh $g "gdrprov plan $PROFILE --detailed-exitcode" >/dev/null || rc=$?
[ "$rc" = 0 ] || fail "second plan: exit $rc, want 0 (nothing to change)"
ok "second plan: nothing to change (exit 0)"
rc=0; vm_ssh $g "gdrprov --format json apply $PROFILE --yes" > "$work/apply2.json" || rc=$?
[ "$rc" = 0 ] || { cat "$work/apply2.json"; fail "second apply: exit $rc"; }
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["changed"] is False and r["outcome"]["generation"] is None and not r["outcome"]["commands_run"] else
         "changed=%s generation=%s commands_run=%s" % (r["changed"], r["outcome"]["generation"], r["outcome"]["commands_run"]))' "$work/apply2.json" ||
  fail "second apply was not a no-op"
[ "$(vm_ssh $g "sha256sum $UNIT $DROPIN; stat -c '%n %Y' $UNIT $DROPIN; ls /etc/modules-load.d")" = "$sum1" ] ||
  fail "second apply changed files"
ok "second apply: changed false, no generation, no command, files untouched"

# --- 7. reboot: openibd starts first, then gdrprov-peermem loads the module ------------------------------

n0=$(standin_log | wc -l)
vm_reboot $g
vm_ssh $g "timeout 300 systemctl is-system-running --wait" >/dev/null 2>&1 || true
settle
new=$(standin_log | tail -n +"$((n0 + 1))")
printf '%s\n' "$new" | sed 's/^/    openibd-standin.log| /'
journal 6
assert_contains "$(printf '%s\n' "$new" | head -1)" "stop peermem=absent" "shutdown: openibd stopped after nvidia_peermem was unloaded"
last=$(printf '%s\n' "$new" | tail -1)
assert_contains "$last" "start peermem=absent" "boot: nothing loaded nvidia_peermem before openibd's start"
[ "$(vm_ssh $g "systemctl is-active openibd gdrprov-peermem" | tr '\n' ' ')" = "active active " ] ||
  fail "after the reboot: openibd / gdrprov-peermem not both active"
loaded || fail "nvidia_peermem is not loaded after the reboot"
ok "after the reboot: openibd and gdrprov-peermem active, nvidia_peermem loaded"
check_order boot
rc=0; vm_ssh $g "gdrprov plan $PROFILE --detailed-exitcode" >/dev/null || rc=$?
[ "$rc" = 0 ] || fail "plan after the reboot: exit $rc, want 0"
ok "plan after the reboot: nothing to change"
vm_ssh $g "gdrprov --format json verify $PROFILE --no-loopback" > "$work/verify.json" || true
m=$(python3 -c '
import json, sys
c = [c for c in json.load(open(sys.argv[1]))["checks"] if c["name"] == "modules"][0]
print(c["status"], c["detail"])' "$work/verify.json") || fail "verify: no modules check in $(cat "$work/verify.json")"
case $m in pass*nvidia_peermem*) ok "verify: modules $m" ;; *) fail "verify's modules check: $m" ;; esac

# --- 8. rollback ------------------------------------------------------------------------------------------

out=$(vm_ssh $g "gdrprov rollback --yes" 2>&1) || fail "rollback failed: $out"
printf '%s\n' "$out" | sed 's/^/    rollback| /'
vm_ssh $g "test ! -e $UNIT && test ! -e $DROPIN" || fail "rollback left $UNIT or $DROPIN"
ok "rollback removed $UNIT and $DROPIN"
vm_ssh $g "systemctl daemon-reload"
assert_not_contains "$(vm_ssh $g "systemctl show openibd -p Wants")" "gdrprov-peermem" "openibd no longer Wants= gdrprov-peermem"
info "after rollback: nvidia_peermem $(loaded && echo loaded || echo unloaded), gdrprov-peermem $(vm_ssh $g 'systemctl is-active gdrprov-peermem' || true)"
# Left loaded with its unit gone, nothing would unload nvidia_peermem before openibd stops: the restart
# would fail as before the apply.
rc=0; vm_ssh $g "systemctl restart openibd" || rc=$?
[ "$rc" = 0 ] || { standin_log | tail -2 | sed 's/^/    openibd-standin.log| /'
  fail "systemctl restart openibd after rollback: exit $rc (rollback left nvidia_peermem loaded with nothing to unload it first)"; }
settle
! loaded || fail "nvidia_peermem loaded again after rollback and an openibd restart"
[ "$(vm_ssh $g "systemctl is-active gdrprov-peermem" || true)" != active ] || fail "gdrprov-peermem still active after rollback"
ok "after rollback and an openibd restart: nvidia_peermem not loaded, gdrprov-peermem not active"
vm_poweroff $g
