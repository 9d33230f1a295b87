# shellcheck shell=bash
# The VM testbed's ssh to guests (sourced by ../lib.sh): options, the multiplexed master, polls while a
# guest boots, commands and copies in and out.

# ssh options for guest NAME (ssh takes the first value of an option: put overrides before these). Commands go through one multiplexed connection per boot (an ssh handshake
# under TCG costs about a second); without a master they connect directly.
vm_ssh_opts() {
  local d; d=$(vm_gdir "$1")
  echo "-F /dev/null -i $(cat "$d/image" 2>/dev/null || vm_image_dir)/id_ed25519 -p $(cat "$d/port") -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=10 -o ServerAliveInterval=10 -o ServerAliveCountMax=6 -o ControlMaster=no -o ControlPath=${TMPDIR:-/tmp}/gdrprov-vm-%C"
}

# The master connection: started in the background with its stdio closed (a master spawned by an ordinary
# command keeps that command's stderr open, which hangs $(...)). Stopped before a reboot.
vm_mux_start() {
  # shellcheck disable=SC2046
  timeout 60 ssh -o ControlMaster=yes -o ControlPersist=yes $(vm_ssh_opts "$1") -f -N root@127.0.0.1 \
    </dev/null >/dev/null 2>&1 || vm_log "guest $1: no ssh master connection (commands connect directly)"
}
vm_mux_stop() {
  # shellcheck disable=SC2046
  timeout 10 ssh $(vm_ssh_opts "$1") -O exit root@127.0.0.1 </dev/null >/dev/null 2>&1 || true
}

# The connect timeout of a poll for ssh (ssh applies it to the TCP connection and to the handshake), from
# the seconds waited so far: short at first (an attempt that starts while the guest has no address yet only
# ends at its timeout, so a long one adds its length to every boot), longer later, so that an sshd slow to
# answer on a loaded host is still reached. vm_poll_limit: the least time a whole try gets, growing alike
# (a fixed one never lets through a guest whose handshake has become slower than it).
vm_poll_timeout() { local s=$1; if [ "$s" -lt 120 ]; then echo 3; elif [ "$s" -lt 300 ]; then echo 15; else echo 40; fi; }
vm_poll_limit() { local s=$1; if [ "$s" -lt 120 ]; then echo 20; elif [ "$s" -lt 300 ]; then echo 40; else echo 90; fi; }

# vm_ssh_try NAME T0 LIMIT CMD: one poll: CMD over a new ssh connection (not the master), its connect
# timeout from the seconds since T0, the whole try bounded by LIMIT seconds or vm_poll_limit's, whichever is
# longer; CMD's output and exit status. ssh's complaint of the last try is kept (GUEST_DIR/ssh-try.err) for
# vm_why_not_back.
vm_ssh_try() {
  local name=$1 t0=$2 limit=$3 s; shift 3
  s=$(vm_since "$t0"); [ "$(vm_poll_limit "$s")" -gt "$limit" ] && limit=$(vm_poll_limit "$s")
  # shellcheck disable=SC2046
  timeout "$limit" ssh -o ControlPath=none -o ConnectTimeout="$(vm_poll_timeout "$s")" $(vm_ssh_opts "$name") root@127.0.0.1 "$@" </dev/null 2>"$(vm_gdir "$name")/ssh-try.err"
}

# vm_wait_ssh NAME TIMEOUT: until `ssh true` works. A kernel panic on the console of this boot (the serial
# log from GUEST_DIR/serial.start, which vm_qemu writes; 0 when absent) ends the wait at once (a panicked
# guest never answers: waiting out TIMEOUT only hid the cause for 10 minutes). With VM_PANIC_RETURN=1 a panic
# returns 3 and TIMEOUT passing returns 4 (the caller decides); without, both end the run naming the cause.
vm_wait_ssh() {
  local name=$1 limit=$2 t0 from; t0=$(date +%s)
  from=$(cat "$(vm_gdir "$name")/serial.start" 2>/dev/null || echo 0)
  while :; do
    vm_guest_alive "$name" || { vm_tail_serial "$name"; vm_die "guest $name died while booting"; }
    vm_ssh_try "$name" "$t0" 30 true && return 0
    if vm_panicked "$name" "$from"; then
      vm_tail_serial "$name"
      [ "${VM_PANIC_RETURN:-0}" = 1 ] && return 3
      vm_die "guest $name: its kernel panicked while booting (console above; whole log $(vm_gdir "$name")/serial.log)"
    fi
    if [ "$(vm_since "$t0")" -ge "$limit" ]; then
      vm_tail_serial "$name"
      [ "${VM_PANIC_RETURN:-0}" = 1 ] && return 4
      vm_die "guest $name: no ssh after $limit s"
    fi
    sleep 1
  done
}

# vm_panicked NAME FROM: whether the guest's console since byte FROM of its serial log shows a kernel panic.
vm_panicked() {
  tail -c +"$(( $2 + 1 ))" "$(vm_gdir "$1")/serial.log" 2>/dev/null | grep -aq 'Kernel panic - not syncing'
}

vm_tail_serial() {
  vm_log "last lines of $(vm_gdir "$1")/serial.log:"
  # awk, not sed: a last line without a newline (a console cut mid-line) still ends with one
  tail -n 25 "$(vm_gdir "$1")/serial.log" 2>/dev/null | awk '{ print "    serial| " $0 }' >&2
}

# vm_ssh NAME CMD...: run CMD (a shell command line) in the guest as root; its output is also appended to
# the guest's ssh.log. Returns CMD's exit status. Bounded by $VM_SSH_TIMEOUT.
vm_ssh() {
  local name=$1; shift
  local d; d=$(vm_gdir "$name")
  printf '\n### %s $ %s\n' "$(date +%H:%M:%S)" "$*" >> "$d/ssh.log"
  local rc=0
  # shellcheck disable=SC2046
  timeout "$VM_SSH_TIMEOUT" ssh $(vm_ssh_opts "$name") root@127.0.0.1 "$*" </dev/null \
    > >(tee -a "$d/ssh.log") 2> >(tee -a "$d/ssh.log" >&2) || rc=$?
  printf '### rc=%s\n' "$rc" >> "$d/ssh.log"
  return "$rc"
}

# vm_ssh_in NAME CMD...: like vm_ssh, with this process's stdin fed to CMD (e.g. a file written in the guest).
vm_ssh_in() {
  local name=$1; shift
  local d; d=$(vm_gdir "$name")
  printf '\n### %s $ %s  (stdin)\n' "$(date +%H:%M:%S)" "$*" >> "$d/ssh.log"
  # shellcheck disable=SC2046
  timeout "$VM_SSH_TIMEOUT" ssh $(vm_ssh_opts "$name") root@127.0.0.1 "$*" 2>>"$d/ssh.log"
}

# vm_copy_in NAME FILE DEST: copy a host file into the guest (over ssh; no scp/sftp needed in the guest).
vm_copy_in() {
  local name=$1 src=$2 dest=$3 mode
  mode=$(stat -c %a "$src")
  vm_ssh_in "$name" "mkdir -p \"\$(dirname '$dest')\" && cat > '$dest.tmp' && chmod $mode '$dest.tmp' && mv '$dest.tmp' '$dest'" < "$src" ||
    vm_die "copy of $src into $name:$dest failed"
}

# vm_copy_out NAME SRC DESTDIR: copy a guest file or directory tree out (tar over ssh).
vm_copy_out() {
  local name=$1 src=$2 dest=$3
  mkdir -p "$dest"
  # shellcheck disable=SC2046
  timeout "$VM_SSH_TIMEOUT" ssh $(vm_ssh_opts "$name") root@127.0.0.1 "tar -C \"\$(dirname '$src')\" -cf - \"\$(basename '$src')\"" </dev/null |
    tar -C "$dest" -xf - || vm_die "copy of $name:$src out failed"
}

vm_boot_id() { vm_ssh "$1" cat /proc/sys/kernel/random/boot_id 2>/dev/null; }
