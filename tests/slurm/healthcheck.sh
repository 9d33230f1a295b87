#!/bin/bash
# Real Slurm on this machine (Debian's slurm-wlm and munge): slurmctld and
# slurmd on one node (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none)
# run the shipped HealthCheckProgram (examples/slurm/gdrprov-healthcheck.sh)
# every HealthCheckInterval, and the sweep's scontrol actions.
#
#   bash tests/slurm/healthcheck.sh [GDRPROV]    (default target/debug/gdrprov)
#
# Shows, against the real daemons:
#  1. srun runs;
#  2. verify failing (a file the profile wants is missing from the checked
#     root) drains the node within one interval, with the failed check in the
#     reason;
#  3. after `gdrprov apply` the next run resumes it;
#  4. the sweep's drain (`fleet sweep report --slurm-script`) drains with
#     "gdrprov: rail ... with N partners", the health check leaves that drain
#     alone, and a later sweep that clears the node resumes it;
#  5. the cap: a sweep that would drain more than the cap drains nothing;
#  6. gdrprov-sweep-submit.sh: a node the sweep drained is put in a
#     maintenance reservation (MAINT,IGNORE_JOBS,FLEX), resumed, and the
#     job it submits runs in the reservation on that node with the node's
#     earlier reason in GDRPROV_PROBATION.
# Skips (exit 0, "SKIP: ...") where slurmctld, slurmd or munged is absent
# (scripts/ensure-packages.sh slurm installs them) or when not root.
# shellcheck disable=SC2016 # wait_for predicates are single-quoted on purpose: eval runs them on every poll
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "${1:-$repo/target/debug/gdrprov}")
for t in slurmctld slurmd munged scontrol srun sinfo; do
  command -v "$t" >/dev/null || { echo "SKIP: no $t (bash scripts/ensure-packages.sh slurm)"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: slurmd needs root"; exit 0; }
[ -x "$bin" ] || { echo "no $bin: cargo build first" >&2; exit 1; }

interval=${INTERVAL:-5}
tmp=$(mktemp -d /tmp/gdrprov-slurm.XXXXXX)
chmod 755 "$tmp"
node=$(hostname -s)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "--- slurmd log" >&2; tail -20 "$tmp/slurmd.log" >&2 || true; exit 1; }
now() { date +%s.%N; }

# munge with its own key and socket.
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge.key"
munged --foreground --force --key-file="$tmp/munge.key" --socket="$tmp/munge.sock" \
  --pid-file="$tmp/munged.pid" --log-file="$tmp/munged.log" --seed-file="$tmp/munge.seed" 2>>"$tmp/munged.err" &
pids+=($!)

mkdir -p "$tmp/state" "$tmp/spool" "$tmp/root"
cat > "$tmp/slurm.conf" <<CONF
ClusterName=gdrprovtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ReturnToService=2
HealthCheckProgram=$tmp/healthcheck
HealthCheckInterval=$interval
HealthCheckNodeState=ANY
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$tmp/slurm.conf

# The profile: one file it manages, checked in an image root ($tmp/root), so
# that verify fails until `gdrprov apply` writes it and passes after.
cat > "$tmp/hc.yaml" <<'YAML'
files:
  - path: /etc/gdrprov-healthcheck-test.conf
    content: "healthy\n"
YAML
cat > "$tmp/healthcheck.conf" <<CONF
PROFILE=$tmp/hc.yaml
GDRPROV=$bin
VERIFY_ARGS="--root $tmp/root"
CONF
# slurmd gives the program no environment: a wrapper says where things are.
cat > "$tmp/healthcheck" <<SH
#!/bin/bash
export SLURM_CONF=$tmp/slurm.conf GDRPROV_HEALTHCHECK_CONF=$tmp/healthcheck.conf
echo "\$(date +%s.%N)" >> $tmp/healthcheck.runs
exec $repo/examples/slurm/gdrprov-healthcheck.sh
SH
chmod +x "$tmp/healthcheck"

slurmctld -D -i -f "$tmp/slurm.conf" 2>>"$tmp/slurmctld.err" &
pids+=($!)
sleep 1
slurmd -D -N "$node" -f "$tmp/slurm.conf" 2>>"$tmp/slurmd.err" &
pids+=($!)

state() { scontrol show node "$node" -o | tr ' ' '\n' | sed -n 's/^State=//p'; }
reason() { scontrol show node "$node" -o | sed -n 's/.* Reason=\(.*\)$/\1/p'; }
wait_for() { # PREDICATE SECONDS (single-quoted: eval runs it again on every poll)
  local end=$(( $(date +%s) + $2 ))
  while [ "$(date +%s)" -lt "$end" ]; do eval "$1" && return 0; sleep 0.2; done
  return 1
}

wait_for '[ -n "$(scontrol ping 2>/dev/null | grep -i UP)" ]' 30 || fail "slurmctld did not come up"
# The first health check runs at slurmd's start: the file is missing, so it drains.
wait_for 'state | grep -q DRAIN' $((interval * 3)) || fail "not drained: state $(state)"
echo "PASS: verify fails -> drained: $(reason)"
reason | grep -q '^gdrprov: verify failed (exit 3): configuration: 1 difference(s)' || fail "reason: $(reason)"

# Timing: one verify without the loopback.
t0=$(now); "$bin" verify "$tmp/hc.yaml" --root "$tmp/root" --no-loopback --format json >/dev/null || true; t1=$(now)
echo "verify --no-loopback took $(echo "$t1 - $t0" | bc) s"
# The health check itself, run by hand.
t0=$(now); "$tmp/healthcheck"; t1=$(now)
hc=$(echo "$t1 - $t0" | bc)
echo "the health check took $hc s"
# "Within one interval": the next run starts within the interval and then takes its own time (seconds under
# load: a fixed 2 s of slack failed once on a loaded machine), plus 2 s for slurmctld and these polls.
slack=$(echo "$hc * 2 + 2" | bc)

"$bin" apply "$tmp/hc.yaml" --root "$tmp/root" -y >/dev/null
applied=$(now)
wait_for '! state | grep -q DRAIN' $((interval * 2 + ${slack%.*} + 1)) || fail "not resumed after apply: $(state) $(reason)"
back=$(now)
echo "PASS: resumed $(echo "$back - $applied" | bc) s after apply (interval $interval s): $(state)"
[ "$(echo "$back - $applied <= $interval + $slack" | bc)" = 1 ] || fail "resume took longer than one interval (+$slack s)"

# Fail again: the next run drains within one interval.
rm "$tmp/root/etc/gdrprov-healthcheck-test.conf"
broke=$(now)
wait_for 'state | grep -q DRAIN' $((interval * 2 + ${slack%.*} + 1)) || fail "not drained again"
drained=$(now)
echo "PASS: drained $(echo "$drained - $broke" | bc) s after verify began failing (interval $interval s)"
[ "$(echo "$drained - $broke <= $interval + $slack" | bc)" = 1 ] || fail "drain took longer than one interval (+$slack s)"
"$bin" apply "$tmp/hc.yaml" --root "$tmp/root" -y >/dev/null
wait_for '! state | grep -q DRAIN' $((interval * 2 + 2)) || fail "not resumed"

# srun runs.
out=$(timeout 30 srun -N1 hostname) || fail "srun failed"
[ "$out" = "$(hostname)" ] || fail "srun printed $out"
echo "PASS: srun -N1 hostname: $out"

# The sweep: this node slow on rail mlx5_2 with three partners that are fine
# with each other (pair results as `bench pair --format json` writes them).
pair() { # DIR LISTENER CLIENT RAIL GBPS
  mkdir -p "$1"
  printf '{"role":"client","client":{"port":{"device":"%s","mtu":4096}},"listener":{"port":{"device":"%s","mtu":4096}},"line_rate_gbps":100,"results":[{"bytes":8388608,"average_gbps":%s,"line_rate_fraction":%s,"data_check":{"passed":true}}],"data_check":{"passed":true}}\n' \
    "$4" "$4" "$5" "$(awk "BEGIN { printf \"%.4f\", $5 / 100 }")" > "$1/$2+$3+$4.json"
}
sweep() { # DIR SLOW_GBPS
  local d=$1 p q
  local peers=(p1 p2 p3 p4 p5 p6)
  for rail in mlx5_0 mlx5_2; do
    for p in p1 p2 p3; do
      g=97; [ "$rail" = mlx5_2 ] && g=$2
      pair "$d/round-1" "$node" "$p" "$rail" "$g"
    done
    for p in "${peers[@]}"; do for q in "${peers[@]}"; do
      if [[ "$p" < "$q" ]]; then pair "$d/round-2" "$p" "$q" "$rail" 96; fi
    done; done
  done
}
sweep "$tmp/sweep1" 41
sinfo -h -N -t drain,draining -o '%N|%E' > "$tmp/drained1"
"$bin" fleet sweep report "$tmp/sweep1" --drained "$tmp/drained1" --max-drain 1 --slurm-script "$tmp/actions1.sh" > "$tmp/report1.txt"
grep -q "bad rail $node: rail mlx5_2 0.41 of line rate with 3 partners -> drain" "$tmp/report1.txt" || { cat "$tmp/report1.txt"; fail "report"; }
sh "$tmp/actions1.sh"
[ "$(reason | sed 's/ \[.*//')" = "gdrprov: rail mlx5_2 0.41 of line rate with 3 partners" ] || fail "sweep reason: $(reason)"
echo "PASS: the sweep drained it: $(reason)"
# The health check passes now, and must leave the sweep's drain alone.
sleep $((interval + 2))
state | grep -q DRAIN || fail "the health check resumed the sweep's drain"
echo "PASS: the health check left the sweep's drain alone"
# A later sweep that clears it resumes it.
sweep "$tmp/sweep2" 96
sinfo -h -N -t drain,draining -o '%N|%E' > "$tmp/drained2"
"$bin" fleet sweep report "$tmp/sweep2" --drained "$tmp/drained2" --slurm-script "$tmp/actions2.sh" > "$tmp/report2.txt"
grep -q "scontrol update NodeName=$node State=RESUME" "$tmp/actions2.sh" || { cat "$tmp/drained2" "$tmp/report2.txt"; fail "no resume"; }
sh "$tmp/actions2.sh"
wait_for '! state | grep -q DRAIN' 5 || fail "not resumed by the sweep"
echo "PASS: a later sweep that clears it resumed it: $(state)"

# The cap: the same slow sweep with the default cap (10% of 7 nodes: 1) and
# two bad nodes would drain 2: nothing is drained, and the report says why.
sweep "$tmp/sweep3" 41
for rail in mlx5_0 mlx5_2; do for p in p1 p2 p3; do pair "$tmp/sweep3/round-3" x9 "$p" "$rail" 30; done; done
"$bin" fleet sweep report "$tmp/sweep3" --slurm-script "$tmp/actions3.sh" --format json > "$tmp/report3.json"
jq -e '.slurm.drain == [] and (.slurm.held | length) == 2 and (.slurm.held_because | test("more than the cap of 1"))' "$tmp/report3.json" >/dev/null || { jq .slurm "$tmp/report3.json"; fail "cap"; }
sh "$tmp/actions3.sh"
state | grep -q DRAIN && fail "drained over the cap"
echo "PASS: over the cap nothing is drained: $(jq -r .slurm.held_because "$tmp/report3.json")"
# The submit script: the sweep's drain comes back into a reservation for the next sweep's job.
scontrol update NodeName="$node" State=DRAIN Reason="gdrprov: rail mlx5_2 0.41 of line rate with 3 partners"
cat > "$tmp/probe.sbatch" <<'SH'
#!/bin/bash
{ echo "reservation=$SLURM_JOB_RESERVATION"; echo "resv_env=$GDRPROV_RESERVATION"; echo "probation=$GDRPROV_PROBATION"; } > "$PROBE_OUT"
scontrol update ReservationName="$GDRPROV_RESERVATION" EndTime=now > "$PROBE_OUT.upd" 2>&1
SH
out=$(PROBE_OUT=$tmp/probe.out SBATCH_SCRIPT=$tmp/probe.sbatch bash "$repo/examples/slurm/gdrprov-sweep-submit.sh" -N1 --output="$tmp/probe.log") ||
  fail "gdrprov-sweep-submit.sh: $out"
wait_for '[ -s "$tmp/probe.out" ]' 60 || { cat "$tmp/probe.log" 2>/dev/null; squeue; fail "the job submitted into the reservation did not run: $out"; }
grep -q "^reservation=gdrprov-sweep-" "$tmp/probe.out" || fail "the job did not run in the reservation: $(cat "$tmp/probe.out")"
grep -qx "probation=$node|gdrprov: rail mlx5_2 0.41 of line rate with 3 partners" "$tmp/probe.out" || fail "probation: $(cat "$tmp/probe.out")"
# Ended by the job as the sweep's runner ends it (a reservation in use cannot be deleted): gone or inactive.
wait_for '! scontrol show reservation | grep -q "State=ACTIVE"' 10 || { cat "$tmp/probe.out.upd"; scontrol show reservation; fail "reservation left active"; }
echo "PASS: gdrprov-sweep-submit.sh resumed the sweep's drain into a reservation and its job ran there: $(paste -sd' ' "$tmp/probe.out")"
echo "health check runs: $(wc -l < "$tmp/healthcheck.runs")"
echo "ALL PASSED"
