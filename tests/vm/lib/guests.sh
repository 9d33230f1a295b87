# shellcheck shell=bash
# The VM testbed's guests (sourced by ../lib.sh): start them from throwaway overlays, the shared guest,
# gdrprov installed in them, the exit trap that kills them, and facts scenarios read from them.

# --- guests ----------------------------------------------------------------------------------------------

# A scenario run by run.sh has VM_GUEST_NS (its name): its guests' directories are NS-NAME, so that two
# scenarios in two lanes may both call theirs hostA. The run's shared guest and booted snapshots are the
# run's, not a scenario's.
vm_gdir() {
  case $1 in
    shared|snap-*) echo "$VM_RUN_DIR/guests/$1" ;;
    *) echo "$VM_RUN_DIR/guests/${VM_GUEST_NS:+$VM_GUEST_NS-}$1" ;;
  esac
}

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
# as it survives a power cut on real disks. VM_INCOMING (vm_launch only): a migration stream to start from
# (a restored snapshot); the restarts of vm_reboot and vm_powercut never have it.
vm_qemu() {
  local name=$1 port=$2 port2=$3; shift 3
  local d fw=(); d=$(vm_gdir "$name")
  vm_mark_boot "$d"
  if vm_uefi_flavor "$(cat "$d/flavor" 2>/dev/null)"; then
    fw=(-drive "if=pflash,format=raw,unit=0,readonly=on,file=$(cat "$d/image")/OVMF_CODE.fd"
        -drive "if=pflash,format=raw,unit=1,file=$d/OVMF_VARS.fd")
  fi
  # shellcheck disable=SC2046
  qemu-system-x86_64 -name "gdrprov-vm-$(basename "$d")" -machine q35 $(vm_accel_args) "${fw[@]}" \
    -smp "$VM_SMP" -m "$VM_MEM" -no-reboot \
    -drive "file=$d/overlay.qcow2,if=virtio,format=qcow2,cache=${VM_DISK_CACHE:-unsafe},discard=unmap" \
    -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" \
    -device "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56,romfile=" \
    "$@" ${VM_INCOMING:+-incoming "$VM_INCOMING"} \
    -display none -vga none -monitor none -parallel none \
    -chardev "file,id=ser0,path=$d/serial.log,append=on" -serial chardev:ser0 \
    -pidfile "$d/pid" -daemonize 2>"$d/qemu.err"
}

# vm_mark_boot GUEST_DIR: where this boot's console begins in the serial log (serial.start, read by
# vm_wait_ssh): every start of qemu calls it, so a panic of an earlier boot (03's trial kernel panics on
# purpose) is never taken for this one's.
vm_mark_boot() { stat -c %s "$1/serial.log" > "$1/serial.start" 2>/dev/null || echo 0 > "$1/serial.start"; }

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
  echo "$flavor" > "$d/flavor"; echo "$idir" > "$d/image"
  if vm_uefi_flavor "$flavor"; then
    install -m 644 "$idir/OVMF_VARS.fd" "$d/OVMF_VARS.fd" || vm_die "no OVMF_VARS.fd in $idir"
  fi
  # From the run's booted snapshot of the flavor where it can (lib/snapshot.sh), else a fresh boot.
  local snap='' incoming=''
  if vm_snapshot_usable "$flavor" $#; then
    snap=$(vm_snapshot_dir "$flavor"); echo "$snap" > "$d/restored"
    incoming="exec:cat '$snap/state'"
    qemu-img create -q -f qcow2 -b "$snap/disk.qcow2" -F qcow2 "$d/overlay.qcow2" || vm_die "qemu-img create failed"
  else
    qemu-img create -q -f qcow2 -b "$img" -F raw "$d/overlay.qcow2" || vm_die "qemu-img create failed"
  fi
  date +%s > "$d/started"   # after the snapshot was made or waited for: "up in"/"restored in" count from here
  local port port2 port3 a args
  for _ in 1 2 3 4 5; do
    port=$(vm_free_port) || vm_die "no free loopback port"
    port2=$(vm_free_port) || vm_die "no free loopback port"
    port3=$(vm_free_port) || vm_die "no free loopback port"
    args=()
    for a in "$@"; do a=${a//@PORT2@/$port2}; args+=("${a//@PORT3@/$port3}"); done
    if VM_INCOMING=$incoming vm_qemu "$name" "$port" "$port2" "${args[@]}"; then
      echo "$port" > "$d/port"; echo "$port2" > "$d/port2"; echo "$port3" > "$d/port3"
      if [ ${#args[@]} -gt 0 ]; then printf '%s\n' "${args[@]}" > "$d/args"; else : > "$d/args"; fi
      break
    fi
    grep -qiE 'forward|bind|address already in use|listen' "$d/qemu.err" ||
      { cat "$d/qemu.err" >&2; vm_die "qemu failed to start guest $name"; }
    vm_log "a port was busy for $name ($(head -c 200 "$d/qemu.err")), retrying"
  done
  [ -f "$d/port" ] || vm_die "could not start guest $name"
  vm_log "guest $name ($flavor${snap:+, from the booted snapshot}): qemu pid $(cat "$d/pid"), ssh 127.0.0.1:$port"
}

# vm_wait_up NAME: wait for ssh after vm_launch, then open the multiplexed ssh connection.
# A guest started from a snapshot logs "restored in N s" (run.sh's summary counts those apart from boots)
# and gets the host's time.
# A guest started fresh (not from a snapshot) and alone (no extra qemu args: no link to another guest that
# a restart would cut) whose first boot panics or does not answer within VM_BOOT_TIMEOUT is started once
# more from a new overlay of the same disk, and the log says so with the console's last lines. Seen in CI on
# a loaded host: the trixie kernel of 18 panicked in sched_clock_idle_wakeup_event before any gdrprov code
# had run in it. What the disk holds boots again unchanged, so a fault that gdrprov's changes cause happens
# again and fails; a panic or silence after a reboot or power cut (vm_restart) fails at once.
vm_wait_up() {
  local d rc=0; d=$(vm_gdir "$1")
  if [ -e "$d/restored" ] || [ -s "$d/args" ]; then
    vm_wait_ssh "$1" "$VM_BOOT_TIMEOUT"
  else
    VM_PANIC_RETURN=1 vm_wait_ssh "$1" "$VM_BOOT_TIMEOUT" || rc=$?
    if [ "$rc" = 3 ] || [ "$rc" = 4 ]; then
      vm_log "guest $1: its first boot $([ "$rc" = 3 ] && echo "panicked" || echo "gave no ssh in $VM_BOOT_TIMEOUT s") (console above); starting it again from the same disk, once"
      vm_relaunch_fresh "$1"
      vm_wait_ssh "$1" "$VM_BOOT_TIMEOUT"
    elif [ "$rc" != 0 ]; then
      vm_die "guest $1: no ssh (status $rc)"
    fi
  fi
  if [ -e "$d/restored" ]; then
    vm_log "guest $1: restored in $(vm_since "$(cat "$d/started")") s"
    vm_mux_start "$1"
    vm_set_clock "$1"
  else
    vm_log "guest $1: up in $(vm_since "$(cat "$d/started")") s"
    vm_mux_start "$1"
  fi
}

# vm_relaunch_fresh NAME: stop guest NAME (launched fresh, not restored) and start it again as vm_launch did:
# a new overlay of the same image, the image's EFI variables, the same ports and qemu args. The serial log
# is kept (vm_qemu marks where the new boot's console begins).
vm_relaunch_fresh() {
  local name=$1 d pid='' args=(); d=$(vm_gdir "$name")
  if pid=$(cat "$d/pid" 2>/dev/null); then
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$d/pid" "$d/overlay.qcow2" "$d/efivars.fd"
  local idir; idir=$(cat "$d/image")
  qemu-img create -q -f qcow2 -b "$idir/disk.raw" -F raw "$d/overlay.qcow2" || vm_die "qemu-img create failed"
  if vm_uefi_flavor "$(cat "$d/flavor")"; then install -m 644 "$idir/OVMF_VARS.fd" "$d/OVMF_VARS.fd"; fi
  [ -s "$d/args" ] && mapfile -t args < "$d/args"
  vm_qemu "$name" "$(cat "$d/port")" "$(cat "$d/port2")" "${args[@]}" ||
    { cat "$d/qemu.err" >&2; vm_die "guest $name: qemu did not start again"; }
  date +%s > "$d/started"
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

# Kill the guests this process started (owner = this process), or all of them with "all".
vm_cleanup() {
  set +e   # in the exit trap: one guest that is already gone must not stop the others' cleanup
  local which=${1:-mine} g name
  [ -n "${VM_RUN_DIR:-}" ] && [ -d "$VM_RUN_DIR/guests" ] || return 0
  for g in "$VM_RUN_DIR"/guests/*/; do
    name=$(basename "$g")
    [ -e "$g/pid" ] || continue
    if [ "$which" = all ] || [ "$(cat "$g/owner" 2>/dev/null)" = "$$" ]; then
      VM_GUEST_NS='' vm_kill "$name"   # NAME is the directory's own name, its namespace included
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
  local d; d=$(vm_gdir "$1")
  # A guest restored from a snapshot that has this very package or binary installed (lib/snapshot.sh).
  if [ -e "$d/restored" ] && [ "$(cat "$(cat "$d/restored")/installed" 2>/dev/null)" = "$(vm_install_id)" ]; then
    return 0
  fi
  if [ -n "${GDRPROV_DEB:-}" ]; then
    vm_copy_in "$1" "$GDRPROV_DEB" /root/gdrprov.deb
    vm_ssh "$1" 'dpkg -i /root/gdrprov.deb >/root/gdrprov-install.log 2>&1 && ln -sf /usr/bin/gdrprov /usr/local/bin/gdrprov' ||
      vm_die "dpkg -i gdrprov.deb in $1 failed: $(vm_ssh "$1" 'tail -5 /root/gdrprov-install.log' 2>&1)"
  elif [ -n "${GDRPROV_BIN:-}" ]; then
    vm_copy_in "$1" "$GDRPROV_BIN" /usr/local/bin/gdrprov
  fi
  return 0
}

# vm_install_id: what vm_install_gdrprov installs, as a checksum (the package, else the bare binary; "none"
# when neither is set).
vm_install_id() {
  local f=${GDRPROV_DEB:-${GDRPROV_BIN:-}}
  [ -n "$f" ] || { echo none; return 0; }
  echo "${GDRPROV_DEB:+deb }$(sha256sum < "$f" | cut -d' ' -f1)"
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
  # shellcheck disable=SC2046,SC2183 # the address's four numbers, split on purpose
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
