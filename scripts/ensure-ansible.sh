#!/usr/bin/env bash
# ansible-core from PyPI into target/ansible-venv (a venv under target/, not committed), for
# tests/it/ansible.rs, tests/it/examples.rs and the testbed's 20-slurm-sweep (its Ansible sweep from the
# host). Fast when already there. scripts/test.sh runs it; .ci/run runs it before the testbed starts (the
# testbed runs beside the tests, so it cannot wait for test.sh to make it). Without network it says so
# and exits 0: the tests then say they were skipped, and 20-slurm-sweep fails naming this script.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/ansible-venv
[ -x "$venv/bin/ansible-playbook" ] && exit 0
mkdir -p target
{ python3 -m venv "$venv" && "$venv/bin/pip" install -q 'ansible-core>=2.16,<2.18'; } ||
  echo "scripts/ensure-ansible.sh: could not install ansible-core into $venv; the Ansible tests will be skipped" >&2
