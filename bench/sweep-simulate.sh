#!/usr/bin/env bash
# The pair sweep at scale, by simulation (docs/benchmarks.md, "Fleet sweep"):
# the goal (4096 nodes x 8 rails, 41 bad nodes, 164 bad rails, noise
# 0.05) over several seeds, then grids over noise, how slow a bad rail is and
# how dense the faults are, to find where the method stops working.
#   bash bench/sweep-simulate.sh [GDRPROV]     (default: target/release/gdrprov)
# Prints one line per run: the parameters, rounds, found/injected, missed,
# wrongly drained, false verdicts, undecided, and planner+classifier seconds.
set -euo pipefail
bin=${1:-target/release/gdrprov}
[ -x "$bin" ] || { echo "no $bin: cargo build --release (or pass the binary)" >&2; exit 1; }
command -v jq >/dev/null || { echo "needs jq" >&2; exit 1; }

row() {
  "$bin" fleet sweep simulate --format json "$@" | jq -r \
    '[.model.nodes, .model.rails, .model.bad_nodes, .model.bad_rails, .model.noise, .model.slow, .model.seed,
      .rounds, "\(.found)/\(.injected)", .missed, .wrongly_drained, .false_verdicts, .undecided,
      (.planner_classifier_seconds * 1000 | round / 1000)] | @tsv'
}
header() { printf 'nodes\trails\tbad_nodes\tbad_rails\tnoise\tslow\tseed\trounds\tfound\tmissed\twrongly_drained\tfalse\tundecided\tseconds\n'; }

echo "# the goal"; header
for seed in 1 2 3 4 5; do row --seed "$seed"; done
echo "# noise (slow 0.6)"; header
for noise in 0.01 0.02 0.05 0.08 0.10 0.12 0.15 0.20; do row --noise "$noise"; done
echo "# how slow a bad rail must be (noise 0.05, then 0.01)"; header
for slow in 0.6 0.7 0.75 0.8 0.85 0.9; do row --slow "$slow"; done
for slow in 0.85 0.9 0.93 0.95; do row --slow "$slow" --noise 0.01; done
echo "# fault density (noise 0.05)"; header
for pct in 1 2 5 10 20 30; do
  n=$((4096 * pct / 100)); row --bad-nodes "$n" --bad-rails $((n * 4))
done
