#!/usr/bin/env bash
# The project's test command: installs what the build needs (cmake, libclang)
# and the system tools the tests drive for real (util-linux's setpriv, GRUB's
# grub-script-check, kmod, packer, systemd-analyze, pciutils' setpci, strace;
# Slurm's daemons and munge for tests/slurm/healthcheck.sh, which said SKIP on a
# fresh machine without them; ansible-core from PyPI into target/ansible-venv),
# then runs every unit and integration test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-packages.sh build test slurm
bash scripts/ensure-ansible.sh   # ansible-core into target/ansible-venv
# Six tests at once, not one per core: most of the integration tests wait (on the binary's child
# processes, a lock, a deadline, a real Prometheus or ansible-playbook) rather than compute, so two at a
# time left the cores idle (the suite took 706 s of wall time for about 230 s of CPU in CI, docs/ci.md).
# RUST_TEST_THREADS set in the environment wins.
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-6}
cargo test --workspace --all-targets 2>&1
