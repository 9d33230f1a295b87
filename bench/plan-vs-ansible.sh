#!/bin/sh
# Side by side, in one run, on the same example root: `gdrprov plan` and the
# equivalent Ansible `--check --diff` run (bench/plan-vs-ansible/playbook.yml:
# the same files, the same commands). Prints both times (mean and median wall
# time, CPU time) and the ratios.
#
#   bench/plan-vs-ansible.sh [GDRPROV]
#
# GDRPROV defaults to target/release/gdrprov (built if missing). Ansible is
# the ansible-core that scripts/test.sh installs in target/ansible-venv
# (ANSIBLE_PLAYBOOK=... for another). hyperfine is used when installed
# (apt-get install hyperfine), else a plain loop. RUNS=N: Ansible runs (10).
# BASELINE=GDRPROV: also time that binary's plan in the same run. The load
# average before and after is printed with the figures: Ansible slows more
# than gdrprov on a loaded machine, so a ratio means little without it.
set -eu
cd "$(dirname "$0")/.."
gdrprov=${1:-target/release/gdrprov}
playbook=${ANSIBLE_PLAYBOOK:-target/ansible-venv/bin/ansible-playbook}
runs=${RUNS:-10}
example=examples/hosts/ubuntu-22.04-h100

if [ ! -x "$gdrprov" ]; then
  cargo build --release --bin gdrprov >&2
fi
if [ ! -x "$playbook" ]; then
  echo "plan-vs-ansible.sh: no $playbook; run scripts/test.sh once (it installs ansible-core)" >&2
  exit 2
fi

# Both read the same copy of the root; check mode changes nothing in it.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -a "$example" "$work/root"
root=$work/root
ANSIBLE_PYTHON_INTERPRETER="$(cd "$(dirname "$playbook")" && pwd)/python3"
export ANSIBLE_PYTHON_INTERPRETER
export ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false
export ANSIBLE_NOCOLOR=1

plan_cmd="$gdrprov plan rdma-dmabuf --root $root"
ansible_cmd="$playbook -i localhost, --check --diff -e bench_root=$root bench/plan-vs-ansible/playbook.yml"

# Both must work (and agree that there is something to change) before timing.
$plan_cmd >"$work/plan.out" || { cat "$work/plan.out"; exit 1; }
$ansible_cmd >"$work/ansible.out" || { cat "$work/ansible.out"; exit 1; }
grep -q '^Plan: 5 change' "$work/plan.out"
grep -q 'changed=3' "$work/ansible.out"
before=$(cd "$root" && find . -type f -exec sha256sum {} + | sort | sha256sum)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

if command -v hyperfine >/dev/null; then
  # BASELINE=OTHER_GDRPROV adds a third command: that binary's plan (an
  # earlier build), timed in the same run.
  hyperfine -N --warmup 3 --min-runs "$runs" --export-json "$work/h.json" \
    -n "gdrprov plan" "$plan_cmd" -n "ansible-playbook --check --diff" "$ansible_cmd" \
    ${BASELINE:+-n "baseline plan" "$BASELINE plan rdma-dmabuf --root $root"} >&2
  times=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print(" ".join("%s %s %s" % (x["mean"], x["median"], x["user"] + x["system"]) for x in r))' "$work/h.json")
else
  loop() { # N CMD...: mean seconds per run
    n=$1; shift
    t0=$(date +%s%N); i=0
    while [ $i -lt "$n" ]; do "$@" >/dev/null; i=$((i + 1)); done
    echo "$t0 $(date +%s%N) $n" | awk '{ print ($2 - $1) / 1e9 / $3 }'
  }
  # shellcheck disable=SC2086 # the commands are word lists, split on purpose
  p=$(loop 200 $plan_cmd)
  # shellcheck disable=SC2086 # as above
  a=$(loop "$runs" $ansible_cmd)
  times="$p $p 0 $a $a 0" # a loop gives wall-clock means only
fi

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
after=$(cd "$root" && find . -type f -exec sha256sum {} + | sort | sha256sum)
[ "$before" = "$after" ] || { echo "plan-vs-ansible.sh: the root changed" >&2; exit 1; }

# CPU time (user + system, children included) depends little on what else
# the machine runs; wall time does.
echo "$times" | awk '{
  printf "%-32s %10s %10s %10s\n", "", "mean", "median", "CPU"
  printf "%-32s %7.2f ms %7.2f ms %7.2f ms\n", "gdrprov plan", $1 * 1000, $2 * 1000, $3 * 1000
  printf "%-32s %7.0f ms %7.0f ms %7.0f ms\n", "ansible-playbook --check --diff", $4 * 1000, $5 * 1000, $6 * 1000
  printf "%-32s %9.0fx %9.0fx %9s\n", "ratio", $4 / $1, $5 / $2, ($3 > 0 ? sprintf("%.0fx", $6 / $3) : "-")
  if (NF >= 9) {
    printf "%-32s %7.2f ms %7.2f ms %7.2f ms\n", "baseline plan", $7 * 1000, $8 * 1000, $9 * 1000
    printf "%-32s %9.0fx %9.0fx %9.0fx\n", "ratio, baseline", $4 / $7, $5 / $8, $6 / $9
  }
}'
echo "load average (1, 5, 15 min): $load_before before, $load_after after; $(nproc) CPU(s)"
