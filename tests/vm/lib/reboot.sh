# shellcheck shell=bash
# The VM testbed's reboots and power (sourced by ../lib.sh): a real OS reboot, power cuts, restarts that
# wait for a new boot id (and say why a guest is not back), poweroff and kill.

# vm_reboot NAME: reboot the guest for real (`systemctl reboot`: the OS shuts down and resets the machine;
# qemu, run with -no-reboot, then exits and the same machine is started again on the same disk: firmware,
# GRUB with its environment block, kernel) and wait until ssh answers with a new boot id. The shutdown and
# the boot have VM_BOOT_TIMEOUT seconds each (one budget for both let a slow shutdown on a loaded host eat
# the boot's time); the log says how long each took.
vm_reboot() {
  local name=$1 old t0 d pid down; t0=$(date +%s); d=$(vm_gdir "$name")
  old=$(vm_boot_id "$name") || vm_die "guest $name: no boot id before reboot"
  pid=$(cat "$d/pid") || vm_die "guest $name: no qemu pid"
  vm_ssh "$name" 'systemctl reboot --no-block' >/dev/null 2>&1 || true
  vm_mux_stop "$name"
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$(vm_since "$t0")" -ge "$VM_BOOT_TIMEOUT" ]; then
      vm_tail_serial "$name"; vm_die "guest $name: did not reset $VM_BOOT_TIMEOUT s after reboot"
    fi
  done
  down=$(vm_since "$t0")
  rm -f "$d/pid"
  vm_restart "$name" "$old" "the reboot"
  vm_log "guest $name: rebooted in $(vm_since "$t0") s (shutdown $down s)"
  vm_mux_start "$name"
}

# vm_powercut NAME [SINCE]: a power cut: SIGKILL the guest's qemu at once (no shutdown, no sync: what the
# guest's kernel had not written to its disk is lost), then start the same machine again on the same disk and
# wait until ssh answers with a new boot id. SINCE ($EPOCHREALTIME taken when the last guest command returned)
# makes the log say how many ms after it the power went. Use with VM_DISK_CACHE=writeback (see vm_qemu).
vm_powercut() {
  local name=$1 since=${2:-} d pid t0 ms
  d=$(vm_gdir "$name")
  read -r pid < "$d/pid" || vm_die "guest $name: no qemu pid"
  kill -9 "$pid" 2>/dev/null || vm_die "guest $name: qemu $pid was not running at the power cut"
  [ -n "$since" ] && ms=$(( (${EPOCHREALTIME//[.,]/} - ${since//[.,]/}) / 1000 ))
  t0=$(date +%s)
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  vm_log "guest $name: power cut (qemu $pid killed${ms:+ $ms ms after the last command returned})"
  vm_mux_stop "$name"
  rm -f "$d/pid"
  vm_restart "$name" "" "the power cut"
  vm_log "guest $name: rebooted in $(vm_since "$t0") s"
  vm_mux_start "$name"
}

# vm_restart NAME OLD WHAT: start the stopped machine again on its disk and wait up to VM_BOOT_TIMEOUT s
# for ssh to answer with a boot id other than OLD (any, when OLD is empty); WHAT ("the reboot") names the
# event in messages. On a timeout it says why as far as the host can see (vm_why_not_back), then dies.
vm_restart() {
  local name=$1 old=$2 what=$3 d t1 m new login_at='' args=()
  d=$(vm_gdir "$name"); t1=$(date +%s)
  m=$(stat -c %s "$d/serial.log" 2>/dev/null || echo 0)
  [ -s "$d/args" ] && mapfile -t args < "$d/args"
  vm_qemu "$name" "$(cat "$d/port")" "$(cat "$d/port2")" "${args[@]}" ||
    { cat "$d/qemu.err" >&2; vm_die "guest $name: qemu did not start again after $what"; }
  while :; do
    vm_guest_alive "$name" || { vm_tail_serial "$name"; vm_die "guest $name died while booting after $what"; }
    new=$(vm_ssh_try "$name" "$t1" 20 cat /proc/sys/kernel/random/boot_id) || new=
    [ -n "$new" ] && [ "$new" != "$old" ] && return 0
    [ -z "$login_at" ] && tail -c +"$((m + 1))" "$d/serial.log" 2>/dev/null | grep -aq ' login: ' && login_at=$(date +%s)
    if vm_panicked "$name" "$m"; then
      vm_tail_serial "$name"
      vm_die "guest $name: its kernel panicked while booting after $what (console above; whole log $d/serial.log)"
    fi
    if [ "$(vm_since "$t1")" -ge "$VM_BOOT_TIMEOUT" ]; then
      vm_why_not_back "$name" "$m" "$login_at" "$new"
      vm_die "guest $name: not back $VM_BOOT_TIMEOUT s after qemu started again ($what)"
    fi
    sleep 1
  done
}

# vm_why_not_back NAME M LOGIN_AT NEW: what the host can see of a guest that does not answer after a restart:
# the end of its console and the lines since the restart (serial log offset M) that tell of a stuck boot,
# when its login prompt came (LOGIN_AT, epoch s, empty if never), whether its ssh port takes connections,
# the boot id it gave (NEW, when the old one), ssh's own account of one more try.
vm_why_not_back() {
  local name=$1 m=$2 login_at=$3 new=$4 d port; d=$(vm_gdir "$name"); port=$(cat "$d/port")
  vm_tail_serial "$name"
  vm_log "guest $name: console lines since the restart that tell of a stuck boot:"
  tail -c +"$((m + 1))" "$d/serial.log" 2>/dev/null |
    grep -aiE 'job is running|timed out|emergency|panic|failed|dependency|dhcp|networkd' | head -n 30 | sed 's/^/    boot| /' >&2
  if [ -n "$login_at" ]; then vm_log "guest $name: its console showed the login prompt $(vm_since "$login_at") s ago"
  else vm_log "guest $name: no login prompt on its console since the restart"; fi
  [ -n "$new" ] && vm_log "guest $name: ssh answered with the boot id of before the restart ($new)"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then vm_log "guest $name: 127.0.0.1:$port takes connections (qemu's forward)"
  else vm_log "guest $name: nothing takes connections on 127.0.0.1:$port"; fi
  vm_log "guest $name: the last poll's ssh said: $(tr '\n' ' ' < "$d/ssh-try.err" 2>/dev/null)"
  vm_log "guest $name: one more try, ssh -v (up to 120 s):"
  # shellcheck disable=SC2046
  timeout 120 ssh -v -o ControlPath=none -o ConnectTimeout=110 $(vm_ssh_opts "$name") root@127.0.0.1 true \
    </dev/null 2>&1 | grep -v '^debug1: Reading configuration' | tail -n 25 | sed 's/^/    ssh| /' >&2 || true
}

# vm_poweroff NAME: the scenario's end: stop the guest and discard its overlay. No clean shutdown: nothing
# reads the overlay afterwards (it is deleted here) and no scenario asserts on its shutdown, while a shutdown
# under TCG cost a lane 4-11 s per guest, and 65 s where Slurm's units held three guests up (20-slurm-sweep,
# the 2026-11-29 CI measure). Reboots and power cuts inside a scenario stay real (vm_reboot, vm_powercut).
# Keeps the guest's logs.
vm_poweroff() {
  local t0; t0=$(date +%s)
  vm_kill "$1"
  vm_log "guest $1: off ($(vm_since "$t0") s)"
}

# vm_kill NAME: stop the guest now (no clean shutdown): for traps.
vm_kill() {
  local d pid; d=$(vm_gdir "$1")
  pid=$(cat "$d/pid" 2>/dev/null) || return 0
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "gdrprov-vm-$(basename "$d") "; then
    kill "$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5; do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  vm_mux_stop "$1"
  rm -f "$d/pid" "$d/overlay.qcow2"
}

# --- power cuts at any instant (tests/vm/powercut/campaign.sh) -------------------------------------------

# vm_cut_power NAME: a power cut now: SIGKILL the guest's qemu (no shutdown, no sync) and wait until it is
# gone. The machine stays off until vm_power_on.
vm_cut_power() {
  local name=$1 d pid; d=$(vm_gdir "$name")
  read -r pid < "$d/pid" || vm_die "guest $name: no qemu pid"
  kill -9 "$pid" 2>/dev/null || vm_die "guest $name: qemu $pid was not running at the power cut"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$d/pid"
  vm_mux_stop "$name"
}

# vm_power_on NAME LIMIT: start the same machine again on its disk (after vm_cut_power) and wait up to LIMIT
# seconds for ssh. Returns 1, leaving the machine running for a look at its serial log, when it does not come
# up in time, its kernel panics (the serial log since the start says so) or qemu ends (a firmware that gives
# up); the caller decides. Logs "rebooted in N s" as vm_reboot does.
vm_power_on() {
  local name=$1 limit=$2 d t0 m args=(); d=$(vm_gdir "$name"); t0=$(date +%s)
  m=$(stat -c %s "$d/serial.log" 2>/dev/null || echo 0)
  [ -s "$d/args" ] && mapfile -t args < "$d/args"
  vm_qemu "$name" "$(cat "$d/port")" "$(cat "$d/port2")" "${args[@]}" ||
    { cat "$d/qemu.err" >&2; vm_die "guest $name: qemu did not start again after the power cut"; }
  while :; do
    vm_guest_alive "$name" || { vm_log "guest $name: qemu ended while booting after the power cut"; return 1; }
    if tail -c +"$((m + 1))" "$d/serial.log" 2>/dev/null | grep -aq 'Kernel panic - not syncing'; then
      vm_log "guest $name: kernel panic while booting after the power cut"; return 1
    fi
    vm_ssh_try "$name" "$t0" 20 true && break
    if [ "$(vm_since "$t0")" -ge "$limit" ]; then
      vm_why_not_back "$name" "$m" "" ""; vm_log "guest $name: no ssh $limit s after the power cut"; return 1
    fi
    sleep 1
  done
  vm_log "guest $name: rebooted in $(vm_since "$t0") s"
  vm_mux_start "$name"
}
