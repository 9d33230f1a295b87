# shellcheck shell=bash
# Helpers for the gdrprov VM testbed: start Debian guests from throwaway overlays of the cached image, drive
# them over ssh on a loopback port, reboot them for real, and always power them off.
#
# Source this file; it needs bash. Guests live under $VM_RUN_DIR/guests/NAME/ (pid, port, overlay, serial
# log). Every guest is killed when the process that started it exits (trap), and run.sh kills whatever is
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

# --- host dependencies -----------------------------------------------------------------------------------

# Install, with apt, what the testbed needs on the host (Debian packages only). Idempotent and quiet when
# everything is there. qemu-system-x86 and qemu-utils must come from the same release (a newer qemu-utils
# from backports Breaks the older qemu-system-common), so qemu-utils is pinned to qemu-system-x86's
# candidate version when qemu-system-x86 has to be installed.
vm_install_host_deps() {
  local need=() cmd pkg
  for cmd in mmdebstrap:mmdebstrap qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils sfdisk:fdisk \
             mkfs.ext4:e2fsprogs ssh:openssh-client ssh-keygen:openssh-client eatmydata:eatmydata \
             flock:util-linux sha256sum:coreutils python3:python3 mkfs.vfat:dosfstools mcopy:mtools; do
    command -v "${cmd%%:*}" >/dev/null 2>&1 || need+=("${cmd#*:}")
  done
  vm_ovmf_files >/dev/null || need+=(ovmf)   # the sdboot flavor's firmware
  [ -d /usr/share/mmdebstrap/hooks/eatmydata ] || need+=(mmdebstrap)
  [ ${#need[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || vm_die "missing host packages (${need[*]}); install them as root: apt-get install ${need[*]}"
  vm_log "installing host packages: ${need[*]}"
  local apt=(apt-get -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends)
  export DEBIAN_FRONTEND=noninteractive
  apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null || vm_die "apt-get update failed"
  local pkgs=() extra=()
  for pkg in "${need[@]}"; do
    case " ${pkgs[*]} " in *" $pkg "*) ;; *) pkgs+=("$pkg") ;; esac
  done
  if [[ " ${pkgs[*]} " == *" qemu-system-x86 "* ]]; then
    local v
    v=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/ {print $2}')
    pkgs=("${pkgs[@]/qemu-utils/}")
    [ -n "$v" ] && [ "$v" != "(none)" ] && extra=(--allow-downgrades "qemu-utils=$v")
  fi
  # A second try covers a dpkg run that another process disturbed.
  "${apt[@]}" install ${pkgs[@]} "${extra[@]}" >/dev/null ||
    "${apt[@]}" install ${pkgs[@]} "${extra[@]}" >/dev/null || vm_die "apt-get install ${pkgs[*]} failed"
}

# --- image -----------------------------------------------------------------------------------------------

# vm_recipe_key [FLAVOR]: sha256 of every file that decides what the image contains: image/* in name order
# (grub), then image-sdboot/* in name order (sdboot, whose recipe builds on image/).
vm_recipe_key() {
  case ${1:-grub} in
    grub) (cd "$VM_DIR/image" && cat $(LC_ALL=C ls) | sha256sum | cut -c1-16) ;;
    sdboot|slurm|uki) { (cd "$VM_DIR/image" && cat $(LC_ALL=C ls)); (cd "$VM_DIR/image-$1" && cat $(LC_ALL=C ls)); } |
              sha256sum | cut -c1-16 ;;
    *) vm_die "unknown image flavor '$1' (grub, sdboot, uki, slurm)" ;;
  esac
}

# The image of each flavor's recipe (the GRUB one computed once; run.sh exports both to the scenarios).
VM_IMAGE_DIR=${VM_IMAGE_DIR:-$VM_CACHE/bookworm-$(vm_recipe_key)}
# vm_image_dir [FLAVOR]: the cache directory of FLAVOR's image (default: $VM_FLAVOR, else grub).
vm_image_dir() {
  case ${1:-${VM_FLAVOR:-grub}} in
    grub) echo "$VM_IMAGE_DIR" ;;
    sdboot) echo "${VM_IMAGE_DIR_SDBOOT:-$VM_CACHE/sdboot-bookworm-$(vm_recipe_key sdboot)}" ;;
    uki) echo "${VM_IMAGE_DIR_UKI:-$VM_CACHE/uki-trixie-$(vm_recipe_key uki)}" ;;
    slurm) echo "${VM_IMAGE_DIR_SLURM:-$VM_CACHE/slurm-bookworm-$(vm_recipe_key slurm)}" ;;
    *) vm_die "unknown image flavor '$1' (grub, sdboot, uki, slurm)" ;;
  esac
}

# The host's OVMF firmware (Debian package ovmf): "CODE VARS", the 4 MiB build when there is one (bookworm's
# default), else the 2 MiB one. The sdboot image keeps copies of both: its VARS is the store after install.
vm_ovmf_files() {
  local c v
  for c in /usr/share/OVMF/OVMF_CODE_4M.fd /usr/share/OVMF/OVMF_CODE.fd; do
    v=${c/CODE/VARS}
    [ -f "$c" ] && [ -f "$v" ] && { echo "$c $v"; return 0; }
  done
  return 1
}

# vm_uefi_flavor FLAVOR: the flavor boots OVMF (sdboot, uki) with its own copy of the variable store.
vm_uefi_flavor() { case $1 in sdboot|uki) return 0 ;; *) return 1 ;; esac; }

# --- accelerator -----------------------------------------------------------------------------------------

# KVM only where it is real: here /dev/kvm is kvm_pvm, far slower than TCG for an ordinary guest kernel.
vm_accel_args() {
  if [ "${GDRPROV_VM_ACCEL:-auto}" = kvm ] ||
     { [ "${GDRPROV_VM_ACCEL:-auto}" = auto ] && [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] &&
       grep -qE '\b(vmx|svm)\b' /proc/cpuinfo; }; then
    echo "-accel kvm -cpu host"
  else
    echo "-accel tcg,thread=multi,tb-size=512 -cpu ${GDRPROV_VM_CPU:-max,vendor=GenuineIntel}"
  fi
}

# --- guests ----------------------------------------------------------------------------------------------

vm_gdir() { echo "$VM_RUN_DIR/guests/$1"; }

# A free TCP port on 127.0.0.1 (qemu still fails to bind if someone takes it first: callers retry).
vm_free_port() {
  local p
  for _ in $(seq 50); do
    p=$(( 20000 + RANDOM % 40000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

# vm_qemu NAME PORT PORT2 [QEMU ARGS...]: start qemu for guest NAME on its existing overlay (daemonized).
# -no-reboot: when the guest reboots, qemu exits and vm_reboot starts the same machine again (a power
# cycle after a real OS reboot). Measured here: a warm reset under TCG takes ~29 s from GRUB to the kernel
# (SeaBIOS disk reads after a reset), a fresh qemu ~12 s; what the guest does is the same either way.
# The serial log is appended to, so it keeps every boot of the guest. A guest of the sdboot flavor (the
# guest dir's flavor file) boots OVMF from pflash: the image's read-only OVMF_CODE.fd and the guest's own
# writable OVMF_VARS.fd.
# The disk cache is qemu's `unsafe` (guest flushes ignored: fast, and a clean reboot loses nothing); a
# power-cut scenario sets VM_DISK_CACHE=writeback so that what the guest flushed survives a killed qemu,
# as it survives a power cut on real disks.
vm_qemu() {
  local name=$1 port=$2 port2=$3; shift 3
  local d fw=(); d=$(vm_gdir "$name")
  if vm_uefi_flavor "$(cat "$d/flavor" 2>/dev/null)"; then
    fw=(-drive "if=pflash,format=raw,unit=0,readonly=on,file=$(cat "$d/image")/OVMF_CODE.fd"
        -drive "if=pflash,format=raw,unit=1,file=$d/OVMF_VARS.fd")
  fi
  # shellcheck disable=SC2046
  qemu-system-x86_64 -name "gdrprov-vm-$name" -machine q35 $(vm_accel_args) "${fw[@]}" \
    -smp "$VM_SMP" -m "$VM_MEM" -no-reboot \
    -drive "file=$d/overlay.qcow2,if=virtio,format=qcow2,cache=${VM_DISK_CACHE:-unsafe},discard=unmap" \
    -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" \
    -device "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56,romfile=" \
    "$@" \
    -display none -vga none -monitor none -parallel none \
    -chardev "file,id=ser0,path=$d/serial.log,append=on" -serial chardev:ser0 \
    -pidfile "$d/pid" -daemonize 2>"$d/qemu.err"
}

# vm_launch NAME [QEMU ARGS...]: start qemu for guest NAME on a fresh overlay of the image; do not wait.
# In the extra qemu args, @PORT2@ stands for a second free loopback port (saved in the guest's port2 file),
# e.g. for `-netdev socket,listen=127.0.0.1:@PORT2@`, and @PORT3@ for a third (port3 file: a second private
# link, as 21-pair-rails has). A port someone else took in between is retried.
# The args are saved (args, one per line) for the restarts of vm_reboot.
# The guest is of the flavor $VM_FLAVOR (grub when unset; see the top of this file), saved with its image
# dir in the guest dir (flavor, image) for the restarts and for ssh (each image has its own key).
vm_launch() {
  local name=$1; shift
  local d; d=$(vm_gdir "$name")
  local flavor=${VM_FLAVOR:-grub} idir img
  idir=$(vm_image_dir "$flavor"); img=$idir/disk.raw
  [ -f "$img" ] || vm_die "no $flavor image at $img (run tests/vm/build-image.sh --flavor $flavor)"
  [ -e "$d/pid" ] && vm_guest_alive "$name" && vm_die "guest $name is already running"
  rm -rf "$d"; mkdir -p "$d"
  echo "${VM_OWNER:-$$}" > "$d/owner"
  date +%s > "$d/started"
  echo "$flavor" > "$d/flavor"; echo "$idir" > "$d/image"
  if vm_uefi_flavor "$flavor"; then
    install -m 644 "$idir/OVMF_VARS.fd" "$d/OVMF_VARS.fd" || vm_die "no OVMF_VARS.fd in $idir"
  fi
  qemu-img create -q -f qcow2 -b "$img" -F raw "$d/overlay.qcow2" || vm_die "qemu-img create failed"
  local port port2 port3 try a args
  for try in 1 2 3 4 5; do
    port=$(vm_free_port) || vm_die "no free loopback port"
    port2=$(vm_free_port) || vm_die "no free loopback port"
    port3=$(vm_free_port) || vm_die "no free loopback port"
    args=()
    for a in "$@"; do a=${a//@PORT2@/$port2}; args+=("${a//@PORT3@/$port3}"); done
    if vm_qemu "$name" "$port" "$port2" "${args[@]}"; then
      echo "$port" > "$d/port"; echo "$port2" > "$d/port2"; echo "$port3" > "$d/port3"
      if [ ${#args[@]} -gt 0 ]; then printf '%s\n' "${args[@]}" > "$d/args"; else : > "$d/args"; fi
      break
    fi
    grep -qiE 'forward|bind|address already in use|listen' "$d/qemu.err" ||
      { cat "$d/qemu.err" >&2; vm_die "qemu failed to start guest $name"; }
    vm_log "a port was busy for $name ($(head -c 200 "$d/qemu.err")), retrying"
  done
  [ -f "$d/port" ] || vm_die "could not start guest $name"
  vm_log "guest $name ($flavor): qemu pid $(cat "$d/pid"), ssh 127.0.0.1:$port"
}

# vm_wait_up NAME: wait for ssh after vm_launch, then open the multiplexed ssh connection.
vm_wait_up() {
  vm_wait_ssh "$1" "$VM_BOOT_TIMEOUT"
  vm_log "guest $1: up in $(vm_since "$(cat "$(vm_gdir "$1")/started")") s"
  vm_mux_start "$1"
}

# vm_start NAME [QEMU ARGS...]: vm_launch, then vm_wait_up.
vm_start() {
  vm_launch "$@"
  vm_wait_up "$1"
}

vm_guest_alive() {
  local pid; pid=$(cat "$(vm_gdir "$1")/pid" 2>/dev/null) || return 1
  kill -0 "$pid" 2>/dev/null
}

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

# vm_wait_ssh NAME TIMEOUT: until `ssh true` works.
vm_wait_ssh() {
  local name=$1 limit=$2 t0; t0=$(date +%s)
  while :; do
    vm_guest_alive "$name" || { vm_tail_serial "$name"; vm_die "guest $name died while booting"; }
    vm_ssh_try "$name" "$t0" 30 true && return 0
    if [ "$(vm_since "$t0")" -ge "$limit" ]; then
      vm_tail_serial "$name"; vm_die "guest $name: no ssh after $limit s"
    fi
    sleep 1
  done
}

vm_tail_serial() {
  vm_log "last lines of $(vm_gdir "$1")/serial.log:"
  tail -n 25 "$(vm_gdir "$1")/serial.log" 2>/dev/null | sed 's/^/    serial| /' >&2
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
  local name=$1 old=$2 what=$3 d t1 m new login_at= args=()
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

# vm_poweroff NAME: clean poweroff, then kill if it has not stopped after 60 s. Keeps the guest's logs.
vm_poweroff() {
  local name=$1 d pid t0; d=$(vm_gdir "$name"); t0=$(date +%s)
  pid=$(cat "$d/pid" 2>/dev/null) || return 0
  if kill -0 "$pid" 2>/dev/null; then
    # shellcheck disable=SC2046
    timeout 20 ssh $(vm_ssh_opts "$name") root@127.0.0.1 'systemctl poweroff --no-block' </dev/null >/dev/null 2>&1 || true
    vm_mux_stop "$name"
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$pid" 2>/dev/null; then
      vm_log "guest $name: did not power off, killing qemu $pid"
      kill "$pid" 2>/dev/null || true; sleep 2; kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$d/pid" "$d/overlay.qcow2"
  vm_log "guest $name: off ($(vm_since "$t0") s)"
}

# vm_kill NAME: stop the guest now (no clean shutdown): for traps.
vm_kill() {
  local d pid; d=$(vm_gdir "$1")
  pid=$(cat "$d/pid" 2>/dev/null) || return 0
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "gdrprov-vm-$1 "; then
    kill "$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5; do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  vm_mux_stop "$1"
  rm -f "$d/pid" "$d/overlay.qcow2"
}

# Kill the guests this process started (owner = this process), or all of them with "all".
vm_cleanup() {
  set +e   # in the exit trap: one guest that is already gone must not stop the others' cleanup
  local which=${1:-mine} g name
  [ -n "${VM_RUN_DIR:-}" ] && [ -d "$VM_RUN_DIR/guests" ] || return 0
  for g in "$VM_RUN_DIR"/guests/*/; do
    name=$(basename "$g")
    [ -e "$g/pid" ] || continue
    if [ "$which" = all ] || [ "$(cat "$g/owner" 2>/dev/null)" = "$$" ]; then
      vm_kill "$name"
    fi
  done
}

# Install the exit trap: every guest started by this process is killed when it exits, whatever the reason.
vm_trap() {
  trap 'vm_cleanup ${VM_TRAP_SCOPE:-mine}' EXIT
  trap 'exit 130' INT TERM HUP
}

# --- shared guest ----------------------------------------------------------------------------------------

# vm_shared: make sure the guest "shared" runs (one booted guest reused by scenarios that leave no lasting
# state behind); owned by run.sh, which powers it off at the end. Echo its name.
vm_shared() {
  if ! { vm_guest_alive shared && vm_ssh shared true >/dev/null 2>&1; }; then
    vm_kill shared
    VM_FLAVOR=grub VM_OWNER=run vm_start shared >&2   # always the GRUB flavor
    vm_ssh shared 'mkdir -p /root/gdrprov-bin' >/dev/null
    vm_install_gdrprov shared
  fi
  echo shared
}

# vm_fresh NAME: a fresh guest owned by the calling scenario, with gdrprov installed.
vm_fresh() {
  vm_start "$1"
  vm_install_gdrprov "$1"
  return 0
}

# vm_install_gdrprov NAME: the package (GDRPROV_DEB, built by run.sh) installed with dpkg, as an operator
# would; /usr/local/bin/gdrprov links to /usr/bin/gdrprov, the path the scenarios and the first-boot unit's
# default (vars.gdrprov-bin) use. Without a package: the bare binary copied to /usr/local/bin.
vm_install_gdrprov() {
  if [ -n "${GDRPROV_DEB:-}" ]; then
    vm_copy_in "$1" "$GDRPROV_DEB" /root/gdrprov.deb
    vm_ssh "$1" 'dpkg -i /root/gdrprov.deb >/root/gdrprov-install.log 2>&1 && ln -sf /usr/bin/gdrprov /usr/local/bin/gdrprov' ||
      vm_die "dpkg -i gdrprov.deb in $1 failed: $(vm_ssh "$1" 'tail -5 /root/gdrprov-install.log' 2>&1)"
  elif [ -n "${GDRPROV_BIN:-}" ]; then
    vm_copy_in "$1" "$GDRPROV_BIN" /usr/local/bin/gdrprov
  fi
  return 0
}

# --- guest facts used by scenarios -----------------------------------------------------------------------

# vm_efivar NAME VAR [GUID]: the EFI variable VAR of the guest as text (a UEFI guest: the sdboot flavor),
# by default of systemd-boot's vendor GUID (LoaderEntrySelected, LoaderEntryOneShot, LoaderEntryDefault,
# LoaderEntries, ...). The efivarfs file is a 4-byte attribute word, then the value: systemd-boot's strings
# are UTF-16LE, NUL-terminated, and lists (LoaderEntries) NUL-separated; printed one string per line, as
# ASCII (a code unit above 127 as '?': entry ids are ASCII). Fails (status 1, no output) when the variable
# is not set. The guest has no python: od and awk (efivarfs files cannot seek: `tail -c +5` fails there
# with "Illegal seek", so od reads it all and awk skips the header's two 16-bit words).
vm_efivar() {
  local name=$1 var=$2 guid=${3:-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f}
  vm_ssh "$name" "f=/sys/firmware/efi/efivars/$var-$guid; [ -e \$f ] || exit 1
    u=\$(od -An -v -tu2 \$f) || exit 1
    echo \$u | awk '{ for (i = 3; i <= NF; i++) printf \"%c\", (\$i == 0 ? 10 : (\$i < 128 ? \$i : 63)) }' | sed '/^\$/d'"
}

# The guest's first NIC with a global IPv4 address (the user-mode NIC; there is no default route).
vm_nic() { vm_ssh "$1" "ip -o -4 addr show scope global | awk '{print \$2; exit}'"; }

# vm_rxe NAME NETDEV [RXEDEV]: load rdma_rxe and add a soft-RoCE device on NETDEV; wait for PORT_ACTIVE.
vm_rxe() {
  local name=$1 nic=$2 dev=${3:-rxe0}
  vm_ssh "$name" "modprobe rdma_rxe && { rdma link show $dev/1 >/dev/null 2>&1 || rdma link add $dev type rxe netdev $nic; } &&
    for i in \$(seq 30); do ibv_devinfo -d $dev | grep -q PORT_ACTIVE && exit 0; sleep 1; done; ibv_devinfo -d $dev; exit 1" >/dev/null ||
    vm_die "guest $name: $dev on $nic is not PORT_ACTIVE"
}

# vm_rxe_gid_index NAME DEV IPV4: the GID table index of DEV port 1 that holds RoCE v2 ::ffff:IPV4.
vm_rxe_gid_index() {
  local name=$1 dev=$2 ip=$3 hex
  hex=$(printf '%02x%02x:%02x%02x' $(echo "$ip" | tr . ' '))
  vm_ssh "$name" "cd /sys/class/infiniband/$dev/ports/1 && for i in \$(seq 0 15); do
      g=\$(cat gids/\$i 2>/dev/null) || continue
      t=\$(cat gid_attrs/types/\$i 2>/dev/null)
      [ \"\$g\" = '0000:0000:0000:0000:0000:ffff:$hex' ] && [ \"\$t\" = 'RoCE v2' ] && { echo \$i; exit 0; }
    done; exit 1" || vm_die "guest $name: no RoCE v2 GID for $ip on $dev"
}

# vm_ib_write_bw SERVER CLIENT DEV GIDX SIZE SERVER_ADDR [EXTRA OPTS]: run Debian's perftest ib_write_bw
# (server in guest SERVER, client in guest CLIENT, which may be the same guest for a loopback) and echo the
# average bandwidth in Gb/s. Full outputs go to the guests' ssh.log.
vm_ib_write_bw() {
  local srv=$1 cli=$2 dev=$3 gidx=$4 size=$5 addr=$6 extra=${7:-}
  local port=$(( 18515 + RANDOM % 1000 ))
  # -u 20: a 4 s QP timeout (default 67 ms): a TCG guest starved of CPU acks late, and RC gives up after
  # 7 retries with status 9 (retry exceeded).
  local opts="-d $dev -x $gidx -s $size -F --report_gbits -u 20 -p $port $extra"
  vm_ssh "$srv" "nohup ib_write_bw $opts </dev/null >/tmp/ib_write_bw-server-$port.log 2>&1 &
    for i in \$(seq 60); do ss -ltn | grep -q ':$port ' && exit 0; sleep 0.5; done; exit 1" >/dev/null ||
    vm_die "ib_write_bw server in $srv did not listen on port $port"
  local out
  out=$(vm_ssh "$cli" "timeout 120 ib_write_bw $opts $addr") || {
    vm_ssh "$srv" "cat /tmp/ib_write_bw-server-$port.log; pkill -f '[i]b_write_bw.*-p $port' || true" >&2
    vm_die "ib_write_bw client in $cli failed"; }
  vm_ssh "$srv" "for i in \$(seq 20); do pgrep -f '[i]b_write_bw.*-p $port' >/dev/null || exit 0; sleep 0.5; done; pkill -f '[i]b_write_bw.*-p $port'; exit 0" >/dev/null || true
  printf '%s\n' "$out" | awk -v s="$size" '$1 == s { print $4; found = 1 } END { exit !found }' ||
    vm_die "no result line for size $size in ib_write_bw output"
}

# --- gdrprov feature probes (scenarios skip, never fake a pass, while a feature is missing) --------------

# gdrprov_has SUBCOMMAND... [-- WORD]: the host binary has that subcommand (its --help works and names it),
# and, after --, its help mentions WORD (an option such as --trial).
gdrprov_has() {
  local words=() want=
  while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then want=$2; break; fi
    words+=("$1"); shift
  done
  [ -x "${GDRPROV_BIN:-}" ] || return 1
  local help
  # Matched in the shell, not through `printf | grep -q` pipes (under pipefail a pipe is one more way
  # to fail; scenario 13 once failed this check in 1 s in a loaded CI run and passed on its own).
  help=$("$GDRPROV_BIN" "${words[@]}" --help 2>/dev/null) || help=$("$GDRPROV_BIN" "${words[@]}" --help 2>&1) || return 1
  [[ ${help,,} == *usage* ]] || return 1
  [[ $help == *"${words[${#words[@]}-1]}"* ]] || return 1
  [ -z "$want" ] || [[ $help == *"$want"* ]]
}

# baseline_covered_by SCENARIO SUBCOMMAND...: a baseline scenario (the same steps by hand, without gdrprov)
# skips once gdrprov has every SUBCOMMAND, because SCENARIO then covers it through gdrprov; with
# GDRPROV_VM_BASELINES=1 it runs anyway (to tell a testbed problem from a gdrprov one).
baseline_covered_by() {
  local by=$1 sub; shift
  [ "${GDRPROV_VM_BASELINES:-0}" = 1 ] && return 0
  for sub in "$@"; do gdrprov_has "$sub" || return 0; done
  skip "baseline covered by $by (GDRPROV_VM_BASELINES=1 runs it anyway)"
}

# skip REASON: end the scenario as skipped (exit 77).
skip() { echo "SKIP: $*"; exit 77; }

# require_gdrprov SUBCOMMAND... [-- WORD]: skip unless gdrprov_has says yes.
require_gdrprov() {
  local what=${*/#-- /}; what=${what// -- / }
  # Every scenario's command exists now: a missing one is a failure, never a silent skip.
  gdrprov_has "$@" || fail "gdrprov $what is missing from $GDRPROV_BIN (or its --help failed)"
}

# --- stand-in kernel modules (scenarios 13 and 16) ---------------------------------------------------

# patch_module SRC DST OLD NEW: a copy of module SRC (uncompressed ELF64) that loads as NEW: the name in
# struct module (section .gnu.linkonce.this_module; char name[MODULE_NAME_LEN = 56] after `state` and
# `list`), name= in .modinfo (OLD's alias= and description= strings dropped: NEW must not take over OLD's
# aliases, and they make room for the longer name; the section keeps its size, padded with NULs), and the
# appended signature cut off (... signature | struct module_signature, 12 bytes ending in the big-endian
# sig_len | "~Module signature appended~\n"): a signature that no longer matches is refused, none only taints.
patch_module() {
  python3 - "$@" <<'PY'
import struct, sys
src, dst, old, new = sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode()
d = bytearray(open(src, 'rb').read())
def die(m): sys.exit('patch_module: ' + m)
magic = b'~Module signature appended~\n'
if d.endswith(magic):
    sig_len, = struct.unpack_from('>I', d, len(d) - len(magic) - 4)
    cut = len(d) - len(magic) - 12 - sig_len
    if cut <= 0: die('bad signature length %d' % sig_len)
    del d[cut:]
    print('signature: %d bytes, cut off' % sig_len)
else:
    print('signature: none')
if d[:4] != b'\x7fELF' or d[4] != 2 or d[5] != 1: die('not a little-endian ELF64 file')
shoff, = struct.unpack_from('<Q', d, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
hdr = [struct.unpack_from('<IIQQQQ', d, shoff + i * shentsize) for i in range(shnum)]
stro = hdr[shstrndx][4]
sec = {}
for nm, _t, _f, _a, off, size in hdr:
    sec[bytes(d[stro + nm:d.index(b'\0', stro + nm)]).decode()] = (off, size)
for s in ('.gnu.linkonce.this_module', '.modinfo'):
    if s not in sec: die('no section ' + s)
off, size = sec['.gnu.linkonce.this_module']
at = d.find(old + b'\0', off, off + size)
if at < 0: die('no "%s\\0" in .gnu.linkonce.this_module' % old.decode())
if len(new) + 1 > 56 or at + 56 > off + size: die('%s does not fit struct module name[56]' % new.decode())
d[at:at + 56] = (new + b'\0').ljust(56, b'\0')
print('struct module name: at offset %d of .gnu.linkonce.this_module' % (at - off))
off, size = sec['.modinfo']
strs = [s for s in bytes(d[off:off + size]).split(b'\0') if s]
if b'name=' + old not in strs: die('no name=%s in .modinfo' % old.decode())
strs = [b'name=' + new if s == b'name=' + old else s for s in strs
        if not s.startswith((b'alias=', b'description='))]
blob = b'\0'.join(strs) + b'\0'
if len(blob) > size: die('.modinfo does not fit (%d > %d bytes)' % (len(blob), size))
d[off:off + size] = blob.ljust(size, b'\0')
print('modinfo: ' + ' '.join(s.decode() for s in strs))
open(dst, 'wb').write(d)
PY
}

# --- assertions ------------------------------------------------------------------------------------------

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "  ok: $*"; }
info() { echo "  info: $*"; }

# assert_contains HAYSTACK NEEDLE WHAT
assert_contains() { case "$1" in *"$2"*) ok "$3" ;; *) fail "$3: '$2' not in: $1" ;; esac; }
assert_not_contains() { case "$1" in *"$2"*) fail "$3: '$2' unexpectedly in: $1" ;; *) ok "$3" ;; esac; }

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
