#!/usr/bin/env bash
# Power cuts at any instant of `gdrprov apply`, `rollback` and `commit` on one real guest (issue 29).
#
#   campaign.sh FLAVOR CUTS SEED [COMMANDS]
#     FLAVOR    grub (BIOS, GRUB, update-grub) or sdboot (UEFI, systemd-boot, entries on the FAT ESP)
#     CUTS      the number of power cuts
#     SEED      seeds the instants (the same seed gives the same instants for the same measured durations)
#     COMMANDS  comma-separated, of apply,rollback,commit (default: all three)
#
# Runs under tests/vm/run.sh (scenario 19-power-cut-any-instant calls it; it needs run.sh's VM_RUN_DIR,
# GDRPROV_BIN and GDRPROV_DEB). The full campaign, outside CI: see tests/vm/powercut/README.md.
#
# The profile adds a kernel argument and blocks a module that is in the initramfs, so every apply, rollback
# and commit rewrites what the boot loader reads (update-grub, or /etc/kernel/cmdline and the ESP entry) and
# rebuilds the initramfs (update-initramfs; on systemd-boot gdrprov then copies the new initrd to the ESP).
#
# First each command runs once uncut, timed from the host exactly as the cuts are; that also records the
# reference states (before, after apply, during a trial) and command lines. Then each cut: the command starts
# in the background (over ssh, its progress streamed to the host), and qemu is SIGKILLed at an instant drawn
# (seeded) over that command's measured duration: the cuts of one command are spread over its run in equal
# strata, one instant drawn uniformly in each. After the cut the same machine boots, and is checked:
#   - it boots (within GDRPROV_PC_BOOT_LIMIT s), and /proc/cmdline is wholly the old or wholly the new line;
#   - the command line and the initramfs it booted belong to the same side (issue 37): the profile sets an
#     option of virtio_blk, the root disk's driver, which only the initramfs loads; its value in
#     /sys/module/virtio_blk/parameters is the witness of which initramfs's modprobe.d was booted;
#   - every boot file and initramfs is wholly one of the reference states (lsinitramfs lists it in full);
#   - the next gdrprov command names the generation the cut interrupted (when the journal has one);
#   - the recovery (pc_recover) brings the host to the state of an uninterrupted run: the same files, the
#     plan empty after apply/commit, and the next boot runs the new line (the old one after a rollback).
# One line per cut (its instant and outcome) goes to stdout as "  info: cut ..." and to GDRPROV_PC_RESULTS.
# Exit status 0 when every cut booted, nothing was torn and every recovery worked.
set -uo pipefail
PC_DIR=$(cd "$(dirname "$0")" && pwd)
. "$PC_DIR/../lib.sh"
vm_trap
# One command here may rebuild the initramfs twice (recover, then the rest of the command): past lib.sh's
# 600 s ssh limit on a loaded 2-core host under TCG (seen: a recover cut off at 600 s, exit 124, load 10).
# shellcheck disable=SC2034 # read by lib's vm_ssh
VM_SSH_TIMEOUT=${GDRPROV_VM_SSH_TIMEOUT:-1800}

flavor=${1:?usage: campaign.sh FLAVOR CUTS SEED [COMMANDS]} cuts=${2:?CUTS} seed=${3:?SEED} commands=${4:-apply,rollback,commit}
case $flavor in grub|sdboot) ;; *) fail "unknown flavor '$flavor' (grub, sdboot)" ;; esac
case $cuts in ''|*[!0-9]*) fail "CUTS must be a number, not '$cuts'" ;; esac
case $seed in ''|*[!0-9]*) fail "SEED must be a number, not '$seed'" ;; esac
for c in ${commands//,/ }; do case $c in apply|rollback|commit) ;; *) fail "unknown command '$c' (apply, rollback, commit)" ;; esac; done
[ -n "${VM_RUN_DIR:-}" ] || fail "run me through tests/vm/run.sh (see tests/vm/powercut/README.md)"
BOOT_LIMIT=${GDRPROV_PC_BOOT_LIMIT:-420}
RESULTS=${GDRPROV_PC_RESULTS:-$VM_RUN_DIR/powercut-$flavor.txt}
require_gdrprov apply -- --trial
require_gdrprov rollback
require_gdrprov commit
has_recover=0; gdrprov_has recover && has_recover=1

g=pc-$flavor
W=$VM_RUN_DIR/powercut-$flavor; mkdir -p "$W"
# shellcheck disable=SC2034 # read by lib's vm_qemu
VM_DISK_CACHE=writeback   # what the guest flushed survives the killed qemu, as on a real disk
export VM_FLAVOR=$flavor
P=/root/pc.yaml
# The initramfs's witness (issue 37): virtio_blk (the root disk's driver, loaded from the initramfs before the
# root is mounted, never unloaded) takes num_request_queues from the modprobe.d inside the initramfs that was
# booted: MARK with gdrprov's options file in it, 0 (the default) without.
MARK=4
# Rollback runs without --force on both flavors. On systemd-boot, update-initramfs's Debian hook
# (/etc/initramfs/post-update.d/systemd-boot) runs `kernel-install add`, which writes the loader entry again
# from /etc/kernel/cmdline after gdrprov's own edit of it; rollback once refused that entry as "changed after
# gdrprov wrote them" (found by this campaign's first uncut run; the journal now keeps what the run left,
# apply::refresh_after_copies). GDRPROV_PC_RB_FORCE=1 puts --force back (for a gdrprov from before the fix).
RB_FORCE=; [ "${GDRPROV_PC_RB_FORCE:-0}" = 1 ] && RB_FORCE=" --force"

say() { echo "  info: $*"; echo "$*" >> "$RESULTS"; }
# Seconds since T0 (an $EPOCHREALTIME), to the hundredth.
elapsed() { local us=$(( ${EPOCHREALTIME//[.,]/} - ${1//[.,]/} )); printf '%d.%02d' $((us / 1000000)) $(( us % 1000000 / 10000 )); }

# setup: a fresh guest with gdrprov, the helper scripts and the profile.
setup() {
  vm_fresh "$g"
  vm_copy_in "$g" "$PC_DIR/guest-run.sh" /root/pc-run.sh
  vm_copy_in "$g" "$PC_DIR/guest-state.sh" /root/pc-state.sh
  vm_copy_in "$g" "$PC_DIR/guest-watch.sh" /root/pc-watch.sh
  # virtio_blk's option is the initramfs's witness (see marker): num_request_queues above the guest's 2
  # vCPUs is truncated to them, so it changes nothing but its own value.
  vm_ssh "$g" "printf 'name: powercut\nboot:\n  cmdline:\n    present: [gdrprov_pc=1]\nmodules:\n  absent: [virtio_scsi]\n  options:\n    virtio_blk: num_request_queues=$MARK\n' > $P" >/dev/null
  # On the disk before any cut: ext4 writes a new file's data late, and a cut soon after left the profile
  # and the helper scripts empty (seen: a cut 21 s after a fresh guest's setup).
  vm_ssh "$g" sync
}

# power_on LIMIT: vm_power_on, and once more (up to twice) when the kernel panicked before it read the disk
# in its early timer check ("IO-APIC + timer doesn't work", seen under TCG on the overloaded host): nothing
# of the disk is involved there. Sets RETRIES (what happened, for the cut's line). Fails when no try booted.
power_on() {
  local try d m; d=$(vm_gdir "$g"); RETRIES=
  for try in 1 2 3; do
    m=$(stat -c %s "$d/serial.log")
    vm_power_on "$g" "$1" && return 0
    tail -c +"$((m + 1))" "$d/serial.log" | grep -q "IO-APIC + timer doesn't work" || return 1
    RETRIES+="boot $try: kernel panic in the early timer check (IO-APIC + timer; host load), the disk unread; "
    vm_kill_qemu
  done
  return 1
}
# vm_kill_qemu: stop this guest's qemu (a panicked kernel that did not reset), keeping its disk.
vm_kill_qemu() {
  local d pid; d=$(vm_gdir "$g")
  pid=$(cat "$d/pid" 2>/dev/null) || return 0
  kill -9 "$pid" 2>/dev/null; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$d/pid"; vm_mux_stop "$g"
}

# state FILE: the guest's boot state (guest-state.sh) into FILE.
state() { vm_ssh "$g" /root/pc-state.sh > "$1" 2>/dev/null; }
# cmdline: /proc/cmdline, the initrd systemd-boot names in it (initrd=) without the suffix of a copy gdrprov
# held the entry on while it rebuilt the initramfs: the line is the same, only the file it loads differs.
cmdline() { vm_ssh "$g" cat /proc/cmdline | sed 's/\.gdrprov-held\( \|$\)/\1/'; }
# marker: the booted initramfs's witness, virtio_blk's num_request_queues.
marker() { vm_ssh "$g" cat /sys/module/virtio_blk/parameters/num_request_queues 2>/dev/null || echo none; }
# side LINE MARK: which side a boot is on: "new" (the apply's: gdrprov_pc=1 on the line) or "old", for the
# command line and for the initramfs.
side() { case " $1 " in *" gdrprov_pc=1 "*) printf 'cmdline=new' ;; *) printf 'cmdline=old' ;; esac
         case $2 in "$MARK") printf ' initramfs=new' ;; 0) printf ' initramfs=old' ;; *) printf ' initramfs=UNKNOWN(%s)' "$2" ;; esac; }

# history_json: `gdrprov history --format json` (empty on failure).
history_json() { vm_ssh "$g" "gdrprov history --format json" 2>/dev/null || true; }
# in_progress JSON: the generations in progress, space-separated. first_in_effect JSON: the oldest apply in
# effect (complete, not rolled back), or nothing.
in_progress() { gens "$1" 'print(" ".join(str(x["generation"]) for x in h if x.get("result") in ("in-progress", "failed")))'; }
first_in_effect() { gens "$1" 'a = [x["generation"] for x in h if x.get("kind") == "apply" and x.get("result") == "complete"]
print(min(a) if a else "")'; }
# gens JSON CODE: CODE run with h = the list of generations of `history --format json` (nothing when unreadable).
gens() { python3 -c 'import json, sys
def find(d):
    if isinstance(d, dict):
        if isinstance(d.get("generations"), list): return d["generations"]
        for v in d.values():
            r = find(v)
            if r is not None: return r
    return None
try: h = find(json.loads(sys.argv[1]))
except Exception: h = None
if h is None: sys.exit(0)
exec(sys.argv[2])' "$1" "$2"; }

# the_command CMD: the guest command line of CMD (apply, rollback, commit, trial).
the_command() {
  case $1 in
    apply) echo "gdrprov apply $P --yes" ;;
    trial) echo "gdrprov apply $P --trial --yes" ;;
    commit) echo "gdrprov commit" ;;
    rollback) local first; first=$(first_in_effect "$(history_json)")
              if [ -n "$first" ]; then echo "gdrprov rollback --generation $first --yes$RB_FORCE"; else echo "gdrprov rollback --yes$RB_FORCE"; fi ;;
  esac
}

# start CMDLINE OUT: start CMDLINE in the guest, in the background, its progress streamed to OUT, each line
# stamped with the seconds since the start. Sets T0 (the start, $EPOCHREALTIME) and BG (the host's ssh job).
start() {
  local cmd=$1 out=$2
  T0=$EPOCHREALTIME
  { vm_ssh "$g" "/root/pc-run.sh $cmd" 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$(elapsed "$T0")" "$l"; done > "$out"; } &
  BG=$!
}

# timed CMD NAME: run CMD uncut as a cut would run it; echo its duration in seconds; fail unless it succeeded.
timed() {
  local cmd out; cmd=$(the_command "$1"); out=$W/measure-$2.out
  start "$cmd" "$out"; wait "$BG"
  local d; d=$(elapsed "$T0")
  grep -q ' RC 0$' "$out" || { sed 's/^/    | /' "$out" >&2; fail "$cmd failed (measuring)"; }
  sed -n 's/^[0-9.]* O /    '"$2"'| /p' "$out" >&2
  # Where its time goes: the first instant each process of interest was seen.
  info "$cmd: $d s; seen: $(awk '$2 == "T" { for (i = 3; i <= NF; i++) if (!($i in s)) { s[$i] = $1; o = o " " $i "@" $1 } } END { print o }' "$out")" >&2
  echo "$d"
}

# label FILE REFS...: for each key of the state in FILE, which reference states (NAME:FILE) it matches:
# "KEY=NAME|NAME", or "KEY=OTHER" when none (torn, or something no uninterrupted run leaves).
label() {
  local f=$1; shift
  python3 - "$f" "$@" <<'PY'
import sys
def load(p):
    d = {}
    for l in open(p):
        if '=' in l:
            k, v = l.rstrip('\n').split('=', 1); d[k] = v
    return d
cur = load(sys.argv[1])
refs = [(a.split(':', 1)[0], load(a.split(':', 1)[1])) for a in sys.argv[2:]]
keys = sorted(set(cur) | {k for _, r in refs for k in r})
out = []
for k in keys:
    v = cur.get(k, 'absent')
    m = [n for n, r in refs if r.get(k, 'absent') == v]
    if len(m) == len(refs):
        continue   # the same in every reference: not what the commands change
    if v.split('/')[1:2] not in ([], ['rc0']):
        m = []     # lsinitramfs failed: torn whatever the listing
    out.append('%s=%s' % (k, '|'.join(m) if m else 'OTHER(%s)' % v))
print(' '.join(out))
PY
}

# diff_state FILE REF: the keys of FILE that differ from REF ("" when none).
diff_state() { label "$1" "want:$2" | tr ' ' '\n' | grep -v '=want$' | tr '\n' ' ' | sed 's/ $//'; }

# pc_recover CMD: after a cut of CMD, the recovery: the next gdrprov command, which must name the interrupted
# generation, then what brings the host to the state of an uninterrupted CMD. With `gdrprov recover`: `plan`
# is the next command, then `recover --yes`, then the rest of CMD (apply again; the rollback if an apply is
# still in effect; commit, whose trial no longer runs, as the apply of its profile). Without it (before issue
# 29's recover): the command itself again (apply and rollback recover an interrupted run first), and commit
# as the apply of its profile. Sets NEXT_OUT (the next command's output) and REC_OUT; returns the last status.
pc_recover() {
  local cmd=$1 rc=0 first
  if [ $has_recover = 1 ]; then
    NEXT_OUT=$(vm_ssh "$g" "gdrprov plan $P" 2>&1) || true
    REC_OUT=$(vm_ssh "$g" "gdrprov recover --yes" 2>&1) || rc=$?
    [ $rc = 0 ] || return $rc
  else
    NEXT_OUT=; REC_OUT=
  fi
  local more=
  case $cmd in
    apply|commit) more="gdrprov apply $P --yes" ;;
    rollback) first=$(first_in_effect "$(history_json)")
              [ -z "$first" ] || more="gdrprov rollback --generation $first --yes$RB_FORCE" ;;
  esac
  if [ -n "$more" ]; then
    local o; o=$(vm_ssh "$g" "$more" 2>&1) || rc=$?
    REC_OUT="$REC_OUT${REC_OUT:+$'\n'}$o"
    [ $has_recover = 1 ] || NEXT_OUT=$o
  fi
  return $rc
}

: > "$RESULTS"
t_all=$(date +%s)
say "power-cut campaign: flavor $flavor, $cuts cuts, seed $seed, commands $commands; recovery: $([ $has_recover = 1 ] && echo 'gdrprov recover' || echo 'the command again (no recover yet)'); gdrprov $("$GDRPROV_BIN" --version 2>/dev/null | head -1)"

# --- 1. measure: each command uncut, the reference states --------------------------------------------------
want() { [[ ,$commands, == *",$1,"* ]]; }
if [ -n "${GDRPROV_PC_REUSE:-}" ]; then
  # The measurement of an earlier run of the same gdrprov and image (its powercut-FLAVOR directory): its
  # durations, command lines and reference states. This guest starts from the image, whose initramfs is not
  # the reference one (see below): an uncut apply first, so the cuts start from the apply in effect.
  for f in base applied trial committed measured.env measure-apply.out measure-rollback.out measure-commit.out; do
    [ -f "$GDRPROV_PC_REUSE/$f" ] && cp "$GDRPROV_PC_REUSE/$f" "$W/$f"
  done
  [ -f "$W/measured.env" ] || fail "no measured.env in $GDRPROV_PC_REUSE"
  # shellcheck source=/dev/null # written by the run it reuses
  . "$W/measured.env"
  setup
  [ "$(cmdline)" = "$c0" ] || fail "this guest's /proc/cmdline is not the measured old line: $(cmdline)"
  vm_ssh "$g" "$(the_command apply)" >/dev/null || fail "the first, uncut apply failed"
  st=B
  say "measurement reused from $GDRPROV_PC_REUSE"
else
setup
state "$W/base"; c0=$(cmdline)
m0=$(marker); [ "$m0" = 0 ] || fail "the image's boot has virtio_blk num_request_queues=$m0, not 0: the initramfs witness cannot tell the sides" 
# The boots after these two are power cuts right after the command returned (issue 16; this was scenario
# 11): what apply and rollback reported must be on the disk, the boot files checkpointed where the boot
# loader reads them, and the next boot runs the new line (after rollback the old one).
D_apply=$(timed apply apply) || exit 1
state "$W/applied"
vm_powercut "$g" "$EPOCHREALTIME"
c1=$(cmdline)
m1=$(marker); [ "$m1" = "$MARK" ] || fail "after apply the boot has virtio_blk num_request_queues=$m1, not $MARK: the initramfs witness cannot tell the sides"
case " $c1 " in *" gdrprov_pc=1 "*) ok "a power cut right after apply returned: the next boot has gdrprov_pc=1" ;;
  *) fail "a power cut right after apply returned: /proc/cmdline lacks gdrprov_pc=1: $c1" ;; esac
state "$W/applied-cut"
d=$(diff_state "$W/applied-cut" "$W/applied"); [ -z "$d" ] || fail "a power cut right after apply returned lost: $d"
rc=0; vm_ssh "$g" "gdrprov plan $P --detailed-exitcode" >/dev/null || rc=$?
[ $rc = 0 ] || fail "a second plan after apply is not empty (exit $rc)"
D_rollback=$(timed rollback rollback) || exit 1
state "$W/rolled"
# Every file as before; the initramfs is rebuilt, not restored, and the image's own (built in a chroot at
# image build time) lists other entries than one built on the running guest: from here on, the reference
# for "nothing applied" is what this uninterrupted rollback left.
d=$(diff_state "$W/rolled" "$W/base" | tr ' ' '\n' | grep -v '^initrd' | tr '\n' ' ' | sed 's/ $//')
[ -z "$d" ] || fail "an uninterrupted rollback did not restore the first state: $d"
d=$(diff_state "$W/rolled" "$W/base"); [ -z "$d" ] || info "the initramfs rebuilt by rollback differs from the image's: $d"
cp "$W/rolled" "$W/base"
vm_powercut "$g" "$EPOCHREALTIME"
[ "$(cmdline)" = "$c0" ] || fail "a power cut right after rollback returned: /proc/cmdline is not the old line: $(cmdline)"
ok "a power cut right after rollback returned: the next boot runs the old line"
state "$W/rolled-cut"
d=$(diff_state "$W/rolled-cut" "$W/base"); [ -z "$d" ] || fail "a power cut right after rollback returned lost: $d"
want() { [[ ,$commands, == *",$1,"* ]]; }
st=A   # nothing applied
D_commit=-; ct=
if want commit; then
  vm_ssh "$g" "$(the_command trial)" | sed 's/^/    trial| /'
  state "$W/trial"
  vm_reboot "$g"; ct=$(cmdline)
  case " $ct " in *" gdrprov_pc=1 "*) ;; *) fail "the trial boot's /proc/cmdline lacks gdrprov_pc=1: $ct" ;; esac
  D_commit=$(timed commit commit) || exit 1
  state "$W/committed"
  d=$(diff_state "$W/committed" "$W/applied"); [ -z "$d" ] || info "commit's files differ from apply's: $d (the committed state is the reference after commit)"
  st=B   # the trial and its commit in effect
fi
{ declare -p D_apply D_rollback D_commit c0 c1 ct st MARK; } > "$W/measured.env"
fi
say "measured (uncut, from the host): apply $D_apply s, rollback $D_rollback s, commit $D_commit s"
say "old line: $c0"
say "new line: $c1"
[ -z "$ct" ] || say "trial line: $ct"

# --- 2. the cuts: which command each one interrupts, and when ------------------------------------------------
# From A (nothing applied) the next cut is an apply or a commit (alternating, of those asked); from B a rollback.
seq_=() s=$st nextab=0 ab=()
want apply && ab+=(apply); want commit && ab+=(commit)
while [ ${#seq_[@]} -lt "$cuts" ]; do
  if [ $s = B ]; then
    if want rollback; then seq_+=(rollback); fi; s=A
  else
    if [ ${#ab[@]} -gt 0 ]; then seq_+=("${ab[$((nextab % ${#ab[@]}))]}"); nextab=$((nextab + 1)); fi; s=B
  fi
done
# GDRPROV_PC_SPAN=LO-HI: the instants only within fractions LO..HI of each command's run (e.g. 0.8-1.0: the
# end of apply and rollback, where systemd-boot's initrd and entry are written to the ESP); default 0-1.
span=${GDRPROV_PC_SPAN:-0-1}; span_lo=${span%-*}; span_hi=${span#*-}
[[ $span_lo =~ ^[01](\.[0-9]+)?$ && $span_hi =~ ^[01](\.[0-9]+)?$ ]] || fail "GDRPROV_PC_SPAN must be LO-HI, fractions of 0..1, not '$span'"
[ "$span" = 0-1 ] || say "instants within $span of each command's measured run (GDRPROV_PC_SPAN)"
# GDRPROV_PC_AT=PROCESS (e.g. kernel-install): each cut of a command that ran PROCESS when measured is anchored
# on it, not on the start: the instant is drawn over the window in which PROCESS was seen (first to last sight
# in the measured run, plus one look), counted from the moment this run's stream first shows PROCESS. A cut
# timed from the start misses a window of a few seconds near the end of a 500 s command whenever the host's
# load differs from the measurement's (two such cuts landed after the command had returned); anchored, it
# lands in it. Commands that did not run PROCESS keep the drawn instants over their whole run.
AT=${GDRPROV_PC_AT:-}
[[ -z $AT || $AT =~ ^[A-Za-z0-9_.-]+$ ]] || fail "GDRPROV_PC_AT must be a process name, not '$AT'"
# window CMD: the seconds over which AT was seen in CMD's measured run ("" when it was not seen).
window() {
  [ -n "$AT" ] && [ -f "$W/measure-$1.out" ] || return 0
  awk -v p="$AT" '$2 == "T" { for (i = 3; i <= NF; i++) if ($i == p) { if (f == "") f = $1; l = $1 } }
    END { if (f != "") printf "%.2f", l - f + 0.5 }' "$W/measure-$1.out"
}
if [ -n "$AT" ]; then
  for c in apply rollback commit; do
    want "$c" || continue
    w=$(window "$c"); say "$c: $AT seen over ${w:-no} s of its measured run$([ -n "$w" ] && echo ': its cuts are anchored on it')"
  done
fi
# GDRPROV_PC_ON=EVENT[,EVENT...]: the cuts of apply and rollback come on an event in the guest instead
# of at a drawn instant, the events taken in turn: `esp-tmp` (gdrprov's temporary copy of the new initrd has
# appeared in the kernel's directory on the ESP: the copy is being written), `esp-renamed` (it has been
# renamed over the initrd the entry loads: the instant after, before gdrprov's syncs are done). A watcher in
# the guest (guest-watch.sh, shell builtins only, no process per look) spins until the event and writes it
# to the kernel log, which the serial console carries to the host; the host cuts when it reads it. Where
# gdrprov spends ~0.5 s after update-initramfs, a drawn instant almost never lands (and each look of the
# progress stream takes 0.5 s). Commit rebuilds no initramfs: its cuts stay timed.
# `gen-staged` (any flavor): gdrprov is making the generation (generations/.N.new exists: backups and journal
# being written, the root not yet changed).
ON=${GDRPROV_PC_ON:-}
IFS=, read -ra on_events <<<"$ON"
for e in "${on_events[@]}"; do
  case $e in
    esp-tmp|esp-renamed) [ "$flavor" = sdboot ] || fail "GDRPROV_PC_ON: $e is for the sdboot flavor (the ESP)" ;;
    gen-staged) ;;
    *) fail "GDRPROV_PC_ON: unknown event '$e' (esp-tmp, esp-renamed, gen-staged)" ;;
  esac
done
[ -z "$ON" ] || [ -z "$AT" ] || fail "GDRPROV_PC_ON and GDRPROV_PC_AT time cuts in two ways: set one"
[ -z "$ON" ] || say "apply and rollback cut on guest events, in turn: $ON (GDRPROV_PC_ON)"
RANDOM=$seed
declare -A n=() k=() order=()
for c in "${seq_[@]}"; do n[$c]=$(( ${n[$c]:-0} + 1 )); done
# Each command's strata in a seeded random order (a Fisher-Yates shuffle), so the instants do not simply grow.
for c in "${!n[@]}"; do
  # shellcheck disable=SC2207 # numbers, split on purpose
  a=($(seq 0 $(( n[$c] - 1 ))))
  for ((i = ${#a[@]} - 1; i > 0; i--)); do j=$((RANDOM % (i + 1))); t=${a[i]}; a[i]=${a[j]}; a[j]=$t; done
  order[$c]="${a[*]}"; k[$c]=0
done
delays=()
for c in "${seq_[@]}"; do
  read -ra a <<<"${order[$c]}"; s=${a[${k[$c]}]}; k[$c]=$(( k[$c] + 1 ))
  dur=$(eval echo "\$D_$c") lo=$span_lo hi=$span_hi
  w=$(window "$c"); [ -z "$w" ] || { dur=$w lo=0 hi=1; }
  u=$RANDOM   # drawn here: a $RANDOM inside $(...) is a subshell's, reseeded, and the seed would not hold
  delays+=("$(awk -v d="$dur" -v s="$s" -v n="${n[$c]}" -v u="$u" -v lo="$lo" -v hi="$hi" \
    'BEGIN { printf "%.2f", d * (lo + (hi - lo) * (s + u / 32768) / n) }')")
done
# The event of each cut ("" for a timed one): apply's and rollback's cuts take GDRPROV_PC_ON's events in turn.
events=() ne=0
for c in "${seq_[@]}"; do
  if [ ${#on_events[@]} -gt 0 ] && [ "$c" != commit ]; then
    events+=("${on_events[$((ne % ${#on_events[@]}))]}"); ne=$((ne + 1))
  else events+=(""); fi
done
plan_=$(for i in "${!seq_[@]}"; do
  if [ -n "${events[$i]}" ]; then printf '%s@%s ' "${seq_[$i]}" "${events[$i]}"
  else printf '%s@%s%s ' "${seq_[$i]}" "${delays[$i]}" "$([ -n "$(window "${seq_[$i]}")" ] && echo "+$AT")"; fi
done)
say "cuts (command@seconds after its start, +PROCESS: after PROCESS was first seen, @EVENT: on that guest event): $plan_"

unbootable=0 torn=0 unrecovered=0 unnamed=0 interrupted=0 mixed=0
# to STATE: bring the guest, uncut, from st to STATE (A: nothing applied; B: an apply in effect).
to() {
  [ "$st" = "$1" ] && return 0
  if [ "$1" = A ]; then vm_ssh "$g" "$(the_command rollback)" >/dev/null || fail "an uncut rollback failed"
  else vm_ssh "$g" "$(the_command apply)" >/dev/null || fail "an uncut apply failed"; fi
  st=$1
}

for i in "${!seq_[@]}"; do
  c=${seq_[$i]} delay=${delays[$i]} nr=$((i + 1)) tc=$(date +%s)
  out=$W/cut-$nr-$c.out
  case $c in
    apply) to A; old=base; new=applied; oldline=$c0; newline=$c1; oldmark=0; newmark=$MARK ;;
    rollback) to B; old=applied; new=base; oldline=$c1; newline=$c0; oldmark=$MARK; newmark=0 ;;
    commit) to A; vm_ssh "$g" "$(the_command trial)" >/dev/null || fail "apply --trial failed"
            vm_reboot "$g"; [ "$(cmdline)" = "$ct" ] || fail "the trial did not boot: $(cmdline)"
            old=trial; new=committed; oldline=$c0; newline=$c1; oldmark=$MARK; newmark=$MARK ;;
  esac
  cmd=$(the_command "$c") ev=${events[$i]}
  mark=$(stat -c %s "$(vm_gdir "$g")/serial.log")
  lim=$(awk -v d="$(eval echo "\$D_$c")" 'BEGIN { printf "%d", 2 * d + 60 }')
  # An event cut waits longer: the guest's watcher spins on one of its two vCPUs, and on a loaded host an
  # apply measured at 46 s had not reached its ESP copy after 151 s (two cuts came early, "NOT SEEN").
  [ -z "$ev" ] || lim=$(awk -v d="$(eval echo "\$D_$c")" 'BEGIN { printf "%d", 6 * d + 300 }')
  if [ -n "$ev" ]; then
    vm_ssh "$g" "setsid /root/pc-watch.sh ${ev#esp-} $lim </dev/null >/dev/null 2>&1 &" ||
      fail "could not start the guest's watcher"
  fi
  start "$cmd" "$out"
  base=0 anchor=
  if [ -n "$ev" ]; then
    # Until the serial console shows the event (or the command ends, or the wait, lim, has passed).
    until tail -c +"$((mark + 1))" "$(vm_gdir "$g")/serial.log" | grep -q "gdrprov-pc-event: ${ev#esp-}"; do
      kill -0 "$BG" 2>/dev/null || break
      [ "${EPOCHSECONDS}" -lt "$(( ${T0%[.,]*} + lim ))" ] || break
      sleep 0.02
    done
    delay=0 anchor=" (on $ev$(tail -c +"$((mark + 1))" "$(vm_gdir "$g")/serial.log" | grep -q "gdrprov-pc-event: ${ev#esp-}" || echo ': NOT SEEN'))"
  elif [ -n "$(window "$c")" ]; then
    # Until the stream shows AT (or the command ends, or twice its measured run has passed).
    until awk -v p="$AT" '$2 == "T" { for (i = 3; i <= NF; i++) if ($i == p) f = 1 } $2 == "RC" { f = 1 } END { exit !f }' "$out"; do
      kill -0 "$BG" 2>/dev/null || break
      [ "${EPOCHSECONDS}" -lt "$(( ${T0%[.,]*} + lim ))" ] || break
      sleep 0.1
    done
    base=$(elapsed "$T0"); anchor=" ($AT first seen at $base s)"
  fi
  left=$(awk -v d="$delay" -v b="$base" -v e="$(elapsed "$T0")" 'BEGIN { r = b + d - e; printf "%.3f", (r > 0 ? r : 0) }')
  sleep "$left"
  at=$(elapsed "$T0")
  vm_cut_power "$g"
  wait "$BG" 2>/dev/null
  seen=$(awk '$2 == "T" { $1 = $2 = ""; s = $0 } END { gsub(/^ +| +$/, "", s); print s }' "$out")
  finished=$(grep -q ' RC ' "$out" && echo "it had returned" || echo "while: ${seen:-starting}")
  line="cut $nr/$cuts: $c ($cmd) cut at $at s of $(eval echo "\$D_$c") s$anchor ($finished)"
  if ! power_on "$BOOT_LIMIT"; then
    unbootable=$((unbootable + 1))
    say "$line: ${RETRIES}UNBOOTABLE; serial log since the cut:"
    tail -c +"$((mark + 1))" "$(vm_gdir "$g")/serial.log" | tr -d '\r' | tail -n 30 | sed 's/^/      | /' | tee -a "$RESULTS"
    cp "$(vm_gdir "$g")/serial.log" "$W/cut-$nr-serial.log"
    # A fresh guest; the image's initramfs is not the reference one: an uncut apply first (as with REUSE).
    vm_kill "$g"; setup; vm_ssh "$g" "$(the_command apply)" >/dev/null || fail "the uncut apply on a fresh guest failed"; st=B
    continue
  fi
  line+="${RETRIES:+; $RETRIES}"
  bad=()
  now=$(cmdline)
  if [ "$now" = "$oldline" ]; then booted="the old line"
  elif [ "$now" = "$newline" ]; then booted="the new line"
  else booted="a TORN line ($now)"; bad+=(torn); fi
  # The same side (issue 37): the line and the initramfs's witness are the old pair or the new pair.
  mk=$(marker) held=$(vm_ssh "$g" cat /proc/cmdline | grep -o '[^ ]*\.gdrprov-held' || true)
  pair="$(side "$now" "$mk")"
  if [ "$pair" = "$(side "$oldline" "$oldmark")" ] || [ "$pair" = "$(side "$newline" "$newmark")" ]; then
    sameside="same side ($pair)"
  else sameside="MIXED ($pair)"; bad+=(mixed); fi
  [ -z "$held" ] || sameside+=", initrd loaded from gdrprov's held copy"
  state "$W/cut-$nr-state"
  files=$(label "$W/cut-$nr-state" "old:$W/$old" "new:$W/$new")
  [[ $files == *OTHER* ]] && bad+=(torn)
  h=$(history_json); ip=$(in_progress "$h")
  [ -n "$h" ] || bad+=(history-unreadable)
  tr0=$(date +%s)
  rc=0; pc_recover "$c" || rc=$?
  printf '%s\n' "--- next command:" "$NEXT_OUT" "--- recovery (rc $rc):" "$REC_OUT" >> "$out"
  named=
  if [ -n "$ip" ]; then
    interrupted=$((interrupted + 1))
    for gen in $ip; do
      if [[ $NEXT_OUT =~ [Gg]eneration\ ${gen}[^0-9] ]] && [[ $NEXT_OUT == *interrupted* ]]; then named+=" $gen"
      else bad+=(not-named); unnamed=$((unnamed + 1)); fi
    done
    # shellcheck disable=SC2086 # the generation numbers, one a word
    journal="generation$(printf ' %s' $ip) in progress, named by the next command:${named:- NO}"
  else
    journal="no generation in progress"
  fi
  rec="recovery exit $rc in $(vm_since "$tr0") s"
  [ $rc = 0 ] || bad+=(recovery-failed)
  final=$new; [ "$c" = apply ] && final=applied
  state "$W/cut-$nr-after"
  d=$(diff_state "$W/cut-$nr-after" "$W/$final")
  [ -z "$d" ] || { bad+=(state-differs); rec+=", files differ from an uninterrupted $c: $d"; }
  prc=0; vm_ssh "$g" "gdrprov plan $P --detailed-exitcode" >/dev/null 2>&1 || prc=$?
  if [ "$c" = rollback ]; then [ $prc = 2 ] || bad+=(plan); rec+=", plan exit $prc"
  else [ $prc = 0 ] || bad+=(plan); rec+=", plan $([ $prc = 0 ] && echo empty || echo "exit $prc")"; fi
  vm_reboot "$g"
  nb=$(cmdline) nm=$(marker)
  if [ "$nb" = "$newline" ]; then rec+=", next boot: the $([ "$c" = rollback ] && echo old || echo new) line"
  else bad+=(next-boot); rec+=", next boot: WRONG ($nb)"; fi
  [ "$nm" = "$newmark" ] || { bad+=(next-boot); rec+=", its initramfs WRONG (virtio_blk num_request_queues=$nm)"; }
  st=$([ "$c" = rollback ] && echo A || echo B)
  for b in "${bad[@]}"; do
    case $b in torn) torn=$((torn + 1)) ;; mixed) mixed=$((mixed + 1)) ;; recovery-failed|state-differs|plan|next-boot) unrecovered=$((unrecovered + 1)) ;; esac
  done
  verdict=$([ ${#bad[@]} = 0 ] && echo ok || echo "FAIL (${bad[*]})")
  say "$line: booted $booted; $sameside; files: $files; $journal; $rec; $(vm_since "$tc") s: $verdict"
done

vm_poweroff "$g"
say "summary: flavor $flavor, $cuts cuts ($(for c in "${!n[@]}"; do printf '%s %s, ' "${n[$c]}" "$c"; done | sed 's/, $//'); $interrupted left a generation in progress): $((cuts - unbootable - mixed)) same side, $mixed mixed, $unbootable unbootable, $torn torn, $unrecovered not recovered, $unnamed interrupted generations not named; $(vm_since "$t_all") s"
[ $((unbootable + torn + mixed + unrecovered + unnamed)) = 0 ] || fail "$unbootable unbootable, $mixed mixed, $torn torn, $unrecovered not recovered, $unnamed not named"
ok "$cuts power cuts on $flavor: every one booted wholly the old or the new line with its own initramfs, nothing torn, every recovery complete"
