#!/bin/bash
# The Slurm batch script (examples/slurm/gdrprov-sweep.sbatch) end to end
# against stand-ins for srun, sinfo, scontrol and the nodes' `bench pair` and
# `verify` (tests/slurm/stubs; the real ones are in tests/slurm/healthcheck.sh):
# 12 nodes on 2 rails, n03 slow on every rail, n07 slow on mlx5_1, n10 slow
# with an MTU cause in its verify. The sweep plans, runs its rounds, retests,
# reports, drains n03 and n07 with their reasons, marks n10 fixable by
# `gdrprov apply`, and resumes n12, drained by an earlier sweep. The stand-in
# listeners bind half a second late and refuse a client before that: the
# runner waits for each to say "listening on". The secret reaches the nodes
# in the environment. The srun stand-in forwards long lines in 1024-byte
# pieces interleaved between nodes, as Slurm's I/O does (a verify report torn
# that way failed a sweep on the VM testbed's Slurm). Then the same through
# gdrprov-sweep-submit.sh: n12
# (the sweep's drain) is reserved, resumed and submitted into the
# reservation, found fine and left in service, the reservation ended at
# the end; n11 (a person's drain) is not touched.
#   bash tests/slurm/sweep-runner.sh [GDRPROV]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "${1:-$repo/target/debug/gdrprov}")
tmp=$(mktemp -d /tmp/gdrprov-sweep-runner.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
export PATH="$repo/tests/slurm/stubs:$PATH" FAKE_REAL=$bin GDRPROV=$repo/tests/slurm/stubs/gdrprov
export SLURM_JOB_NODELIST='n[01-12]' SLURM_JOB_ID=77 FAKE_NODES=n01,n02,n03,n04,n05,n06,n07,n08,n09,n10,n11,n12
export FAKE_BAD_NODES=n03 FAKE_BAD_RAILS=n07:mlx5_1 FAKE_FIXABLE=n10
export FAKE_DRAINED=$'n12|gdrprov: rail mlx5_0 0.50 of line rate with 3 partners\nn11|bad DIMM\n'
export FAKE_SCONTROL_LOG=$tmp/scontrol.log SWEEP_DIR=$tmp/sweep RAILS=mlx5_0,mlx5_1 MAX_DRAIN=3
export FAKE_LISTEN_DIR=$tmp/listening LISTEN_TIMEOUT=10
mkdir -p "$FAKE_LISTEN_DIR"
: > "$FAKE_SCONTROL_LOG"
bash "$repo/examples/slurm/gdrprov-sweep.sbatch" > "$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; exit 1; }
fail() { echo "FAIL: $*" >&2; cat "$tmp/out.txt" "$FAKE_SCONTROL_LOG" >&2; exit 1; }
grep -Eq "scontrol update NodeName=n03 State=DRAIN Reason=gdrprov: every rail low, 0.55 of line rate with [23] partners" "$FAKE_SCONTROL_LOG" || fail "n03"
grep -Eq "scontrol update NodeName=n07 State=DRAIN Reason=gdrprov: rail mlx5_1 0.55 of line rate with [23] partners" "$FAKE_SCONTROL_LOG" || fail "n07"
grep -q "scontrol update NodeName=n12 State=RESUME" "$FAKE_SCONTROL_LOG" || fail "n12 not resumed"
! grep -q "NodeName=n10 \|NodeName=n11 " "$FAKE_SCONTROL_LOG" || fail "n10 (fixable) or n11 (a person's drain) touched"
[ "$(wc -l < "$FAKE_SCONTROL_LOG")" = 3 ] || fail "more actions than expected"
jq -e '[.verdicts[] | select(.node == "n10")][0] | .action == "fix" and .fix.command == "gdrprov apply rdma-dmabuf"' "$SWEEP_DIR/report.json" >/dev/null || fail "n10 fixable"
grep -q "fixable: mtu: mlx5_0 MTU 1024" "$SWEEP_DIR/report.txt" || fail "fix in the text"
[ "$(find "$SWEEP_DIR/verify" -mindepth 1 -maxdepth 1 | wc -l)" = 12 ] || fail "verify of every node"
! grep -rq '"kind": "runner"' "$SWEEP_DIR/results" || fail "a pair failed in the runner: $(grep -rl '"kind": "runner"' "$SWEEP_DIR/results" | head -3)"
rounds=$(jq .rounds "$SWEEP_DIR/report.json")
echo "PASS: $rounds rounds, $(find "$SWEEP_DIR/results" -name '*.json' | wc -l) pair runs; actions:"
cat "$FAKE_SCONTROL_LOG"

# Through the submit script: the sweep's own drain (n12) comes back on probation.
: > "$FAKE_SCONTROL_LOG"
export SWEEP_DIR=$tmp/sweep2 SBATCH=$repo/tests/slurm/stubs/sbatch
bash "$repo/examples/slurm/gdrprov-sweep-submit.sh" -N 12 > "$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; exit 1; }
log=$(cat "$FAKE_SCONTROL_LOG")
grep -Eq "^scontrol create reservation ReservationName=(gdrprov-sweep-[0-9-]+) Nodes=n12 StartTime=now Duration=UNLIMITED Users=$(id -un) Flags=MAINT,IGNORE_JOBS,FLEX$" <<<"$log" || fail "no reservation of n12"
resv=$(sed -n 's/^scontrol create reservation ReservationName=\([^ ]*\) .*/\1/p' <<<"$log")
[ "$(sed -n 2p <<<"$log")" = "scontrol update NodeName=n12 State=RESUME" ] || fail "n12 not resumed after the reservation"
[ "$(sed -n 3p <<<"$log")" = "sbatch --reservation=$resv -N 12 $repo/examples/slurm/gdrprov-sweep.sbatch" ] || fail "sbatch: $(sed -n 3p <<<"$log")"
[ "$(tail -1 <<<"$log")" = "scontrol update ReservationName=$resv EndTime=now" ] || fail "the reservation is not ended at the end"
[ "$(grep -c 'NodeName=n12' <<<"$log")" = 1 ] || fail "n12, cleared on probation, was acted on again"
! grep -q "NodeName=n11 " <<<"$log" || fail "n11 (a person's drain) touched"
jq -e '[.slurm.resume[] | select(.node == "n12")][0].argv == []' "$SWEEP_DIR/report.json" >/dev/null || fail "n12 kept in service"
echo "PASS: through gdrprov-sweep-submit.sh: $(paste -sd';' <<<"$log")"
