#!/usr/bin/env bash
# The project's test command: installs the system tools the tests drive for
# real (bash, util-linux's setpriv, GRUB's grub-script-check, kmod, packer,
# systemd-analyze; ansible-core from PyPI into target/ansible-venv), then runs
# every unit and integration test.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v setpriv >/dev/null || need+=(util-linux)
command -v grub-script-check >/dev/null || need+=(grub-common)
command -v modprobe >/dev/null || need+=(kmod)
command -v packer >/dev/null || need+=(packer)
command -v systemd-analyze >/dev/null || need+=(systemd)
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "scripts/test.sh: missing ${need[*]}: install them (apt-get install ${need[*]}) or run as root" >&2
    exit 1
  fi
fi
# ansible-core for tests/ansible.rs (a venv under target/, not committed);
# fast when already there. Without network the test says it was skipped.
venv=target/ansible-venv
if [ ! -x "$venv/bin/ansible-playbook" ]; then
  mkdir -p target
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q 'ansible-core>=2.16,<2.18'; } ||
    echo "scripts/test.sh: could not install ansible-core; tests/ansible.rs will be skipped" >&2
fi
cargo test --all-targets 2>&1
