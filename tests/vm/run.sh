#!/usr/bin/env bash
# gdrprov real-host VM testbed: build (or reuse) the Debian guest image, build gdrprov, run the scenarios in
# tests/vm/scenarios/ against real guests that really reboot, and print one line per scenario and a total.
#
#   tests/vm/run.sh                 all scenarios
#   tests/vm/run.sh 07 base-grub    only scenarios whose file name contains one of the words
#   tests/vm/run.sh --list          list the scenarios
#
# Environment:
#   GDRPROV_BIN=PATH        use this gdrprov binary instead of building one
#   GDRPROV_DEB=PATH        install this .deb in the guests (default: one made from the binary)
#   GDRPROV_VM_CARGO_PROFILE=release|dev   the cargo profile to build (default release)
#   GDRPROV_VM_LOGS=DIR     where logs go (default: target/vm-logs/<date-time>)
#   GDRPROV_VM_CACHE=DIR    image cache (default: ~/.cache/gdrprov-vm)
#   GDRPROV_VM_SCENARIO_TIMEOUT=S   per-scenario limit (default 1800)
#   GDRPROV_VM_ACCEL=auto|tcg|kvm    (default auto: KVM only where it is real, TCG otherwise)
#   GDRPROV_VM_JOBS=N       scenarios at once (default 2)
#   GDRPROV_VM_JOBS_FILE=F  read the number of scenarios at once from F before each start, and every 5 s
#                           while waiting (.ci/run: one lane beside its cargo stages, two after them)
#
# Exit status: 0 when no scenario failed. The last line is "N passed, N failed" (", N skipped" when any).
set -uo pipefail
VM_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$VM_DIR/../.." && pwd)
export VM_DIR
# shellcheck source=lib.sh
. "$VM_DIR/lib.sh"

if [ "${1:-}" = --list ]; then
  for f in "$VM_DIR"/scenarios/[0-9]*.sh; do
    printf '%-28s %s\n' "$(basename "$f" .sh)" "$(sed -n 's/^# Scenario: //p' "$f" | head -1)"
  done
  exit 0
fi

t_run=$(date +%s)
export VM_RUN_DIR=${GDRPROV_VM_LOGS:-$REPO/target/vm-logs/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$VM_RUN_DIR/guests"
VM_RUN_DIR=$(cd "$VM_RUN_DIR" && pwd)
VM_TRAP_SCOPE=all   # not exported: a scenario's own trap kills only the guests it started
vm_trap             # whatever happens, every guest of this run is killed on exit

summary=()
note() { summary+=("$1"); echo "$1"; }

# The scenarios asked for.
scenarios=()
for f in "$VM_DIR"/scenarios/[0-9]*.sh; do
  if [ $# -eq 0 ]; then scenarios+=("$f"); continue; fi
  for w in "$@"; do
    case "$(basename "$f")" in *"$w"*) scenarios+=("$f"); break ;; esac
  done
done
[ ${#scenarios[@]} -gt 0 ] || { echo "no scenario matches: $*"; echo "0 passed, 1 failed"; exit 1; }

# 1. Image (cached by recipe hash): the GRUB one, always (the shared guest and most scenarios). The UEFI +
# systemd-boot one comes after gdrprov (2b).
t=$(date +%s)
"$VM_DIR/build-image.sh" >"$VM_RUN_DIR/build-image.out" 2>&1 || {
  cat "$VM_RUN_DIR/build-image.out"; echo "image build failed"; echo "0 passed, 1 failed"; exit 1; }
note "image: $(tail -1 "$VM_RUN_DIR/build-image.out") ($(vm_since "$t") s)"
export VM_IMAGE_DIR

# 2. gdrprov, built fresh (release) unless GDRPROV_BIN names one.
t=$(date +%s)
if [ -z "${GDRPROV_BIN:-}" ]; then
  profile=${GDRPROV_VM_CARGO_PROFILE:-release}
  if ! (cd "$REPO" && cargo build --profile "$profile" --quiet) >"$VM_RUN_DIR/cargo-build.out" 2>&1; then
    cat "$VM_RUN_DIR/cargo-build.out"; echo "cargo build --profile $profile failed"; echo "0 passed, 1 failed"; exit 1
  fi
  GDRPROV_VM_BUILD="cargo build --profile $profile"
  [ "$profile" = dev ] && profile=debug
  GDRPROV_BIN=$REPO/target/$profile/gdrprov
fi
# How the binary was built, for the benchmark tables (17's bench/compare-pair.sh).
export GDRPROV_VM_BUILD=${GDRPROV_VM_BUILD:-"given as GDRPROV_BIN=$GDRPROV_BIN"}
[ -x "$GDRPROV_BIN" ] || { echo "no gdrprov binary at $GDRPROV_BIN"; echo "0 passed, 1 failed"; exit 1; }
# A stripped copy travels into the guests (a debug build is ~90 MB, ~15 MB stripped).
if command -v strip >/dev/null && strip -o "$VM_RUN_DIR/gdrprov" "$GDRPROV_BIN" 2>/dev/null; then
  GDRPROV_BIN=$VM_RUN_DIR/gdrprov
fi
export GDRPROV_BIN
note "gdrprov: $GDRPROV_BIN ($(vm_since "$t") s)"
# The guests install gdrprov as a package (issue 25): a .deb of that binary (scripts/package.sh --deb-only),
# unless GDRPROV_DEB names one; GDRPROV_VM_PACKAGE=0 copies the bare binary instead, as before.
if [ "${GDRPROV_VM_PACKAGE:-1}" = 1 ] && [ -z "${GDRPROV_DEB:-}" ]; then
  t=$(date +%s)
  if out=$(cd "$REPO" && bash scripts/package.sh --binary "$GDRPROV_BIN" --deb-only --fast --deb-dir "$VM_RUN_DIR" 2>&1); then
    GDRPROV_DEB=$(printf '%s\n' "$out" | sed -n 's/^package.sh: //p' | tail -n 1)
    note "gdrprov package: $GDRPROV_DEB ($(vm_since "$t") s)"
  else
    printf '%s\n' "$out"; echo "scripts/package.sh failed"; echo "0 passed, 1 failed"; exit 1
  fi
fi
export GDRPROV_DEB

# 2b. The other images (sdboot, uki, slurm, the arm64 root), only those a selected scenario needs: it names
# the flavor in its `# Flavor:` line (or VM_FLAVOR=...), and is not a baseline whose guard (its
# baseline_covered_by line, evaluated here with this gdrprov) will skip it. They are built (or found in the
# cache, or waited for while .ci/run's build-images.sh holds their lock) one after the other in the
# background, the flavor of the longest scenario first, while the GRUB scenarios run; a scenario starts
# once its own image is there (image-FLAVOR.ready / .failed in the run dir).
flavor_of() {   # flavor_of FILE: the image a scenario waits for (grub, sdboot, uki, slurm, arm64)
  local fl guard
  fl=$(sed -n 's/^# Flavor: *\([a-z0-9]*\).*/\1/p' "$1" | head -n 1)
  [ -n "$fl" ] || fl=$(grep -oE 'VM_FLAVOR=(sdboot|uki|slurm)' "$1" | head -n 1 | cut -d= -f2)
  [ -n "$fl" ] || { echo grub; return; }
  guard=$(grep -m1 '^baseline_covered_by ' "$1")
  if [ -n "$guard" ]; then ( eval "$guard" ) >/dev/null 2>&1; [ $? -eq 77 ] && { echo grub; return; }; fi
  echo "$fl"
}
: > "$VM_RUN_DIR/image-grub.ready"
declare -A wants=()   # flavor -> the first scenario (longest first) that needs it
for f in "${scenarios[@]}"; do
  fl=$(flavor_of "$f"); [ "$fl" = grub ] || [ -n "${wants[$fl]:-}" ] || wants[$fl]=$(basename "$f" .sh)
done
builds=()
for fl in slurm sdboot uki arm64; do [ -n "${wants[$fl]:-}" ] && builds+=("$fl"); done
if [ ${#builds[@]} -gt 0 ]; then
  (
    for fl in "${builds[@]}"; do
      t=$(date +%s)
      if "$VM_DIR/build-image.sh" --flavor "$fl" >"$VM_RUN_DIR/build-image-$fl.out" 2>&1; then
        echo "image ($fl, for ${wants[$fl]}): $(tail -1 "$VM_RUN_DIR/build-image-$fl.out") ($(vm_since "$t") s)" > "$VM_RUN_DIR/image-$fl.ready"
      else
        echo "$fl image build failed ($(vm_since "$t") s): $VM_RUN_DIR/build-image-$fl.out" > "$VM_RUN_DIR/image-$fl.failed"
      fi
    done
  ) &
  note "images building in the background: ${builds[*]}"
fi

# 2d. Booted snapshots (lib/snapshot.sh): when two or more selected scenarios start a plain GRUB guest (no
# `# Flavor:` line, no guest of other hardware through vm_launch), the first of them boots the image once
# and saves it; every plain GRUB guest of the run then starts from that saved machine instead of a first boot.
# GDRPROV_VM_SNAPSHOT=0: every guest boots fresh.
if [ "${GDRPROV_VM_SNAPSHOT:-1}" = 1 ]; then
  n=0
  for f in "${scenarios[@]}"; do grep -qE '^# Flavor: *(sdboot|uki|slurm|arm64)|^vm_launch ' "$f" || n=$((n + 1)); done
  [ "$n" -ge 2 ] && export VM_SNAPSHOTS=1
fi

# 3. Scenarios.
# Scenarios run in $JOBS lanes at once (each scenario boots its own guests, on their own ports and
# overlays). Scenarios that use the one shared guest form a single job that runs them in order. Jobs
# start longest first, so that no long one starts last and runs on alone: a job's cost is the sum of its
# scenarios' `# Seconds: N` lines (their run time in a CI lane, beside another lane), or, without one,
# 100 s for each boot (1 + its reboots and power cuts + its second guests). On two cores a guest boots in
# ~65 s beside another instead of ~40 s alone (measured before mitigations=off: ~80 s vs ~50 s, and two
# lanes gave ~1.2x the throughput of one).
JOBS=${GDRPROV_VM_JOBS:-2}
case $JOBS in ''|*[!0-9]*|0) echo "GDRPROV_VM_JOBS must be a positive number, not '$JOBS'"; echo "0 passed, 1 failed"; exit 1 ;; esac
cost() {
  local f=$1 s
  s=$(sed -n 's/^# Seconds: *\([0-9][0-9]*\).*/\1/p' "$f" | head -n 1)
  [ -n "$s" ] || s=$(( 100 * (1 + $(grep -cE 'vm_(reboot|powercut) ' "$f") + $(grep -c '^vm_launch ' "$f")) ))
  echo "$s"
}
shared=() jobs=()
for f in "${scenarios[@]}"; do
  # Jobs hold scenario names (no spaces), not paths: the checkout's path may have spaces.
  if grep -q 'vm_shared' "$f"; then shared+=("$(basename "$f" .sh)"); else jobs+=("$(cost "$f") $(basename "$f" .sh)"); fi
done
if [ ${#shared[@]} -gt 0 ]; then
  c=0; for n in "${shared[@]}"; do c=$((c + $(cost "$VM_DIR/scenarios/$n.sh"))); done
  jobs+=("$c ${shared[*]}")
fi
mapfile -t jobs < <(printf '%s\n' "${jobs[@]}" | sort -s -k1,1nr | cut -d' ' -f2-)

# run_scenario NAME: run scenarios/NAME.sh, write its status line to $VM_RUN_DIR/NAME.status.
run_scenario() {
  local name=$1 f log t rc secs status why
  f="$VM_DIR/scenarios/$name.sh"; log="$VM_RUN_DIR/$name.log"; t=$(date +%s)
  VM_GUEST_NS=$name timeout "${GDRPROV_VM_SCENARIO_TIMEOUT:-1800}" bash "$f" >"$log" 2>&1
  rc=$?; secs=$(vm_since "$t")
  case $rc in
    0) status=PASS; why= ;;
    77) status=SKIP; why=" ($(sed -n 's/^SKIP: //p' "$log" | tail -1))" ;;
    124) status=FAIL; why=" (timed out)" ;;
    *) status=FAIL; why=" (exit $rc)" ;;
  esac
  printf '%-4s %-28s %4d s%s\n' "$status" "$name" "$secs" "$why" > "$VM_RUN_DIR/$name.status"
}

# report NAME: print a finished scenario's ok/info lines (and the log's tail when it failed), count it.
passed=0 failed=0 skipped=0
report() {
  local name=$1 log line
  log="$VM_RUN_DIR/$name.log"
  line=$(cat "$VM_RUN_DIR/$name.status" 2>/dev/null) || line=$(printf '%-4s %-28s    ? s (no status: the job died)' FAIL "$name")
  echo "=== $name"
  grep -E '^  (ok|info): ' "$log" 2>/dev/null | sed 's/^/   /'
  case $line in
    PASS*) passed=$((passed + 1)) ;;
    SKIP*) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)); echo "   --- last lines of $log:"; tail -n 30 "$log" 2>/dev/null | sed 's/^/   | /' ;;
  esac
  note "$line"
}

# A job waits for the image of its scenarios' flavor (2b): the lanes take, longest first, the jobs whose
# image is there, so the GRUB scenarios run while the other images build. A ticker (sleep) wakes the loop
# while a build is still going.
declare -A job_flavor=()
for i in "${!jobs[@]}"; do
  fl=grub
  # shellcheck disable=SC2086
  for n in ${jobs[$i]}; do fl=$(flavor_of "$VM_DIR/scenarios/$n.sh"); [ "$fl" = grub ] || break; done
  job_flavor[$i]=$fl
done
announced=" "
announce() {   # note each background image build once, when it is done
  local fl st
  for fl in "${builds[@]}"; do
    case $announced in *" $fl "*) continue ;; esac
    for st in ready failed; do
      [ -e "$VM_RUN_DIR/image-$fl.$st" ] && { note "$(cat "$VM_RUN_DIR/image-$fl.$st")"; announced+="$fl "; }
    done
  done
}
echo "scenarios: ${#scenarios[@]} in ${#jobs[@]} job(s), $JOBS at a time"
declare -A running=()   # pid -> the job's scenario names
# lanes: $JOBS, or what GDRPROV_VM_JOBS_FILE says now (a positive number; anything else keeps $JOBS);
# read again at every turn of the loop (the ticker turns it every 5 s while jobs wait to start).
lanes() {
  local n=
  [ -n "${GDRPROV_VM_JOBS_FILE:-}" ] && read -r n < "$GDRPROV_VM_JOBS_FILE" 2>/dev/null
  case $n in ''|*[!0-9]*|0) echo "$JOBS" ;; *) echo "$n" ;; esac
}
pending=("${!jobs[@]}") tick=
while [ ${#pending[@]} -gt 0 ] || [ ${#running[@]} -gt 0 ]; do
  announce
  rest=()
  for i in "${pending[@]}"; do
    fl=${job_flavor[$i]}
    if [ -e "$VM_RUN_DIR/image-$fl.failed" ]; then
      # shellcheck disable=SC2086
      for n in ${jobs[$i]}; do
        printf '%-4s %-28s %4d s%s\n' FAIL "$n" 0 " (no $fl image: $VM_RUN_DIR/build-image-$fl.out)" > "$VM_RUN_DIR/$n.status"
        report "$n"
      done
    elif [ ${#running[@]} -lt "$(lanes)" ] && [ -e "$VM_RUN_DIR/image-$fl.ready" ]; then
      # shellcheck disable=SC2086
      ( for n in ${jobs[$i]}; do run_scenario "$n"; done ) &
      running[$!]=${jobs[$i]}
    else
      rest+=("$i")
    fi
  done
  pending=("${rest[@]}")
  if [ ${#pending[@]} -gt 0 ] && [ -z "$tick" ]; then sleep 5 & tick=$!; fi
  [ ${#running[@]} -gt 0 ] || [ -n "$tick" ] || break
  done_pid=
  wait -n -p done_pid "${!running[@]}" ${tick:+"$tick"}
  [ -n "$done_pid" ] || continue
  if [ "$done_pid" = "$tick" ]; then tick=; continue; fi
  # shellcheck disable=SC2086
  for n in ${running[$done_pid]}; do report "$n"; done
  unset "running[$done_pid]"
done
[ -z "$tick" ] || kill "$tick" 2>/dev/null
wait   # the background image builds, if a scenario that needed one failed before it was done
announce

# 4. The shared guest (if any scenario used it) is powered off cleanly; the trap kills anything left.
[ -e "$(vm_gdir shared)/pid" ] && vm_poweroff shared 2>>"$VM_RUN_DIR/run.log"
rm -rf "$VM_RUN_DIR/snapshots"   # the saved machines (~200 MB each); their guests' logs stay

echo
echo "=== summary (logs: $VM_RUN_DIR)"
printf '%s\n' "${summary[@]}"
# Boot figures from the scenario logs (lib.sh logs every boot and reboot with its duration).
boots=$(cat "$VM_RUN_DIR"/*.log 2>/dev/null | sed -n 's/.*: up in \([0-9]*\) s$/\1/p')
restores=$(cat "$VM_RUN_DIR"/*.log 2>/dev/null | sed -n 's/.*: restored in \([0-9]*\) s$/\1/p')
reboots=$(cat "$VM_RUN_DIR"/*.log 2>/dev/null | sed -n 's/.*: rebooted in \([0-9]*\) s\( (.*)\)\{0,1\}$/\1/p')
# shellcheck disable=SC2086 # $1 is a list of numbers, one a word
figures() { [ -n "$1" ] && printf '%s\n' $1 | awk '{ s += $1; if (NR == 1 || $1 < lo) lo = $1; if ($1 > hi) hi = $1 } END { printf "%d, %d-%d s (mean %.0f s)", NR, lo, hi, s / NR }'; }
[ -n "$boots" ] && echo "guest boots to ssh: $(figures "$boots")"
[ -n "$restores" ] && echo "guests restored from a booted snapshot to ssh: $(figures "$restores")"
[ -n "$reboots" ] && echo "reboots to ssh: $(figures "$reboots")"
echo "total: $(vm_since "$t_run") s"
line="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ "$failed" -eq 0 ]
