#!/usr/bin/env bash
# Build gdrprov and show the whole flow on an example host root, without root
# privileges and without touching this machine: plan, apply to a scratch copy
# (--no-exec: update-grub and friends are listed as pending, not run),
# a second apply that changes nothing, and a rollback.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-packages.sh build
# The first release build compiles ~130 crates: 11 minutes on a busy 2-core
# machine (seconds once built). cargo shows its progress.
echo "== cargo build --release (the first build takes about 10 minutes on 2 cores)"
cargo build --release
G=target/release/gdrprov
echo "== gdrprov plan rdma-dmabuf --root examples/hosts/ubuntu-22.04-h100"
"$G" plan rdma-dmabuf --root examples/hosts/ubuntu-22.04-h100
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -a examples/hosts/ubuntu-22.04-h100 "$scratch/root"
echo; echo "== apply to a scratch copy"
"$G" apply rdma-dmabuf --yes --no-exec --root "$scratch/root"
echo; echo "== apply again: nothing to change"
"$G" apply rdma-dmabuf --yes --no-exec --root "$scratch/root"
echo; echo "== rollback"
"$G" rollback --yes --no-exec --root "$scratch/root"
"$G" history --root "$scratch/root"
