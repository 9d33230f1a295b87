# shellcheck shell=bash
# The VM testbed's booted snapshots (sourced by ../lib.sh): the first boot of a pristine image tests nothing
# of gdrprov, so run.sh lets a run boot each flavor's image once, save the running machine (RAM and devices,
# qemu's migration stream) with its disk overlay frozen as a backing file, and start every later guest of
# that flavor from it: a new qcow2 overlay on top of the frozen one and `-incoming "exec:cat STATE"`.
#
# A restored guest is the machine that booted, as it was when saved: same devices, same kernel and units
# running, same disk contents; only the host side differs (its ssh forward's port, its overlay, its serial
# log). Its clock is set from the host's once ssh answers (the saved clock is stale). Its reboots and power
# cuts are real: qemu exits (or is killed) and vm_restart/vm_power_on start it again on its own overlay
# without -incoming, through firmware, boot loader and kernel, as every guest is.
#
# Used only for guests started with no extra qemu arguments (07/17/21's socket NICs and 20's segment have
# other hardware) and with the run's VM_MEM/VM_SMP; enabled by run.sh (VM_SNAPSHOTS=1, GDRPROV_VM_SNAPSHOT=0
# turns it off) when two or more selected scenarios can use one. Made by the first guest that needs it,
# under a lock (the other lane waits for it); if it cannot be made, guests boot fresh as before.

# vm_qmp SOCKET JSON...: send each QMP command to qemu's QMP socket; print each reply (one JSON line).
vm_qmp() {
  python3 - "$@" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(120)
s.connect(sys.argv[1])
f = s.makefile("rw")
def reply():
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            return m
reply()
f.write('{"execute": "qmp_capabilities"}\n'); f.flush(); reply()
for c in sys.argv[2:]:
    f.write(c + "\n"); f.flush(); print(json.dumps(reply()))
PY
}

# vm_snapshot_dir FLAVOR: where the run keeps FLAVOR's snapshot (frozen overlay disk.qcow2, state, ready).
vm_snapshot_dir() { echo "$VM_RUN_DIR/snapshots/$1-m$VM_MEM-s$VM_SMP"; }

# vm_snapshot_ready FLAVOR: make FLAVOR's snapshot unless the run has it (under a lock); fails when it could
# not be made (the caller boots fresh). The snapshot guest is "snap-FLAVOR" (its serial and ssh logs stay).
vm_snapshot_ready() {
  local flavor=$1 s; s=$(vm_snapshot_dir "$flavor")
  mkdir -p "$s" || return 1
  [ -e "$s/ready" ] && return 0
  local rc=0
  (
    exec 8>"$s/lock"; flock -w $(( VM_BOOT_TIMEOUT + 300 )) 8 || exit 2
    [ -e "$s/ready" ] && exit 0
    [ -e "$s/failed" ] && exit 2
    vm_snapshot_make "$flavor" "$s"
  ) || rc=$?
  [ "$rc" = 0 ] && return 0
  # 2: another lane holds the lock too long, or failed to make it: leave its guest alone.
  [ "$rc" = 2 ] || { vm_kill "snap-$flavor"; : > "$s/failed"; }
  vm_log "no $flavor snapshot (see $(vm_gdir "snap-$flavor")): this guest boots fresh"
  return 1
}

# vm_snapshot_make FLAVOR DIR: boot FLAVOR's image, wait for ssh, sync, save the machine into DIR/state
# (a live migration to a file: the guest runs until the switch-over, so a restored guest starts running),
# end qemu, keep its overlay as DIR/disk.qcow2 (read-only). Runs in a subshell: vm_die ends only it.
vm_snapshot_make() {
  local flavor=$1 s=$2 name="snap-$1" t0 qmp r d
  t0=$(date +%s); d=$(vm_gdir "$name")
  qmp=${TMPDIR:-/tmp}/gdrprov-vm-qmp-$$-$RANDOM.sock
  VM_FLAVOR=$flavor vm_launch "$name" -qmp "unix:$qmp,server=on,wait=off"
  vm_wait_ssh "$name" "$VM_BOOT_TIMEOUT"
  # gdrprov installed once, here, rather than in each restored guest (the copy and `dpkg -i` with its
  # maintainer scripts took 15-20 s of TCG per guest): a restored guest is the machine as vm_install_gdrprov
  # leaves it, the package installed and its path unit running; vm_install_gdrprov skips it (installed).
  vm_install_gdrprov "$name"
  vm_install_id > "$s/installed" || return 1
  vm_ssh "$name" sync >/dev/null || return 1
  vm_log "guest $name: up in $(vm_since "$t0") s, saving it"
  vm_qmp "$qmp" "{\"execute\": \"migrate\", \"arguments\": {\"uri\": \"exec:cat > '$s/state'\"}}" >/dev/null || return 1
  for _ in $(seq 600); do
    r=$(vm_qmp "$qmp" '{"execute": "query-migrate"}') || return 1
    case $r in *'"completed"'*) break ;; *'"failed"'*|*'"cancelled"'*) vm_log "snapshot: $r"; return 1 ;; esac
    sleep 0.5
  done
  case $r in *'"completed"'*) ;; *) vm_log "snapshot: not saved in 300 s: $r"; return 1 ;; esac
  vm_qmp "$qmp" '{"execute": "quit"}' >/dev/null
  for _ in $(seq 60); do vm_guest_alive "$name" || break; sleep 0.5; done
  vm_guest_alive "$name" && return 1
  rm -f "$qmp" "$d/pid"
  mv "$d/overlay.qcow2" "$s/disk.qcow2" && chmod 444 "$s/disk.qcow2" "$s/state" || return 1
  cp "$d/image" "$s/image"
  : > "$s/ready"
  vm_log "snapshot $flavor: booted and saved in $(vm_since "$t0") s ($(du -m "$s/state" | cut -f1) MB of state)"
}

# vm_snapshot_usable FLAVOR NARGS: whether a guest of FLAVOR started with NARGS extra qemu args may start
# from the run's snapshot (making it if needed).
vm_snapshot_usable() {
  [ "${VM_SNAPSHOTS:-0}" = 1 ] && [ "$2" -eq 0 ] && [ -n "${VM_RUN_DIR:-}" ] || return 1
  case $1 in grub) ;; *) return 1 ;; esac
  # Only a guest of the GRUB image itself, never one on a disk of the scenario's own (arm64.sh's).
  [ "$(vm_image_dir grub)" = "$VM_GRUB_IMAGE_DIR" ] || return 1
  vm_snapshot_ready "$1"
}

# vm_set_clock NAME: the guest's clock from the host's (a restored guest's clock is that of the save).
vm_set_clock() { vm_ssh "$1" "date -u -s @$(date +%s) >/dev/null" || vm_die "guest $1: could not set its clock"; }
