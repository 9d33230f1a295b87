#!/bin/bash
# The Slurm batch script (examples/slurm/gdrprov-sweep.sbatch) end to end
# against stand-ins for srun, sinfo, scontrol and the nodes' `bench pair` and
# `verify` (tests/slurm/stubs; the real ones are in tests/slurm/healthcheck.sh):
# 12 nodes on 2 rails, n03 slow on every rail, n07 slow on mlx5_1, n10 slow
# with an MTU cause in its verify. The sweep plans, runs its rounds, retests,
# reports, drains n03 and n07 with their reasons, marks n10 fixable by
# `gdrprov apply`, and resumes n12, drained by an earlier sweep.
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
export FAKE_SCONTROL_LOG=$tmp/scontrol.log SWEEP_DIR=$tmp/sweep RAILS=mlx5_0,mlx5_1 LISTEN_WAIT=0 MAX_DRAIN=3
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
[ "$(ls "$SWEEP_DIR"/verify | wc -l)" = 12 ] || fail "verify of every node"
rounds=$(jq .rounds "$SWEEP_DIR/report.json")
echo "PASS: $rounds rounds, $(find "$SWEEP_DIR/results" -name '*.json' | wc -l) pair runs; actions:"
cat "$FAKE_SCONTROL_LOG"
