#!/bin/bash
# The Ansible sweep (examples/ansible/sweep.yml) end to end with real
# ansible-playbook, on eight inventory hosts that are this machine
# (ansible_connection=local) and answer as a model fleet through the
# stand-in gdrprov of tests/slurm/stubs (n03 slow on every rail, n06 slow on
# mlx5_1); plans and reports with the real gdrprov.
#   bash tests/sweep/ansible.sh [GDRPROV] [ANSIBLE_PLAYBOOK]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "${1:-$repo/target/debug/gdrprov}")
playbook=${2:-$(command -v ansible-playbook || echo "$repo/target/ansible-venv/bin/ansible-playbook")}
[ -x "$playbook" ] || { echo "SKIP: no ansible-playbook"; exit 0; }
tmp=$(mktemp -d /tmp/gdrprov-ansible-sweep.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
py=$(dirname "$playbook")/python3; [ -x "$py" ] || py=$(command -v python3)
{
  echo "[gpu_nodes]"
  for i in 01 02 03 04 05 06 07 08; do echo "n$i ansible_connection=local ansible_python_interpreter=$py"; done
} > "$tmp/inventory.ini"
mkdir -p "$tmp/listening"
cat > "$tmp/vars.json" <<JSON
{"gdrprov_bin": "$repo/tests/slurm/stubs/gdrprov", "gdrprov_local": "$bin", "sweep_dir": "$tmp/sweep",
 "sweep_rails": "mlx5_0,mlx5_1", "sweep_token_file": "$tmp/token", "sweep_log_dir": "$tmp",
 "sweep_node_env": {"FAKE_BAD_NODES": "n03", "FAKE_BAD_RAILS": "n06:mlx5_1", "FAKE_REAL": "$bin", "FAKE_LISTEN_DIR": "$tmp/listening"}}
JSON
ANSIBLE_STDOUT_CALLBACK=default ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_FORKS=8 \
  "$playbook" -i "$tmp/inventory.ini" "$repo/examples/ansible/sweep.yml" -e "@$tmp/vars.json" > "$tmp/out.txt" 2>&1 \
  || { tail -40 "$tmp/out.txt"; echo "FAIL: ansible-playbook"; exit 1; }
fail() { echo "FAIL: $*" >&2; tail -30 "$tmp/out.txt" >&2; exit 1; }
r=$tmp/sweep/report.json
jq -e '[.verdicts[] | select(.kind == "bad-node") | .node] == ["n03"]' "$r" >/dev/null || fail "n03: $(jq -c '.verdicts' "$r")"
jq -e '[.verdicts[] | select(.kind == "bad-rail") | [.node, .rails[0]]] == [["n06", "mlx5_1"]]' "$r" >/dev/null || fail "n06"
jq -e '[.slurm.drain[].node] == ["n03", "n06"] or .slurm.held == ["n03", "n06"]' "$r" >/dev/null || fail "slurm"
[ "$(find "$tmp/sweep/verify" -mindepth 1 -maxdepth 1 | wc -l)" = 8 ] || fail "verify of every host"
! grep -rq '"runner"' "$tmp/sweep/results" || fail "a pair failed in the runner (its listener not waited for?)"
echo "PASS: $(jq .rounds "$r") rounds, $(find "$tmp/sweep/results" -name '*.json' | wc -l) pair runs; $(jq -r '[.verdicts[].summary] | join("; ")' "$r")"
