#!/usr/bin/env bash
# Measures CI as docs/ci.md's budget means it: `.ci/run` on a clean clone, CI=true, no stdin, with an EMPTY
# cache (a new CARGO_HOME without cargo-deb, cargo-generate-rpm or cargo-fuzz, a new GDRPROV_VM_CACHE, no
# target/), in a cpuacct cgroup of its own so that its CPU-seconds (qemu, the image builds, cargo installs)
# are counted. Run as root on the 2-core machine, with nothing else running.
#   bash scripts/ci-measure.sh [WORKDIR]     (default /var/tmp/gdrprov-ci-measure; removed and made anew)
# Writes WORKDIR/run.log (.ci/run's output), WORKDIR/cpu.log ("EPOCH CPU-NANOSECONDS" every 30 s) and
# WORKDIR/result.txt ("rc=N wall=S cpu_s=S").
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/var/tmp/gdrprov-ci-measure}
cg=/sys/fs/cgroup/cpuacct/gdrprov-ci-measure
if ! { mkdir -p "$cg" && echo $$ > "$cg/cgroup.procs"; }; then
  echo "ci-measure: no cpuacct cgroup at $cg (cgroup v1, as root)"; exit 2
fi
rm -rf "$work"; mkdir -p "$work/cargo-home" "$work/vm-cache" "$work/bin"
# The toolchain's own binaries on PATH, not ~/.cargo/bin's installed tools.
for t in cargo cargo-clippy cargo-fmt clippy-driver rustc rustdoc rustfmt rustup; do
  p=$(command -v "$t") && ln -s "$p" "$work/bin/$t"
done
git clone -q "$repo" "$work/gdrprov" || exit 2
cd "$work/gdrprov" || exit 2
( while :; do echo "$(date +%s) $(cat "$cg/cpuacct.usage")"; sleep 30; done ) > "$work/cpu.log" &
sampler=$!
t0=$(date +%s); u0=$(cat "$cg/cpuacct.usage")
CI=true CARGO_HOME=$work/cargo-home RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup} \
  PATH=$work/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  GDRPROV_VM_CACHE=$work/vm-cache bash .ci/run </dev/null > "$work/run.log" 2>&1
rc=$?
kill "$sampler"
echo "rc=$rc wall=$(( $(date +%s) - t0 )) cpu_s=$(( ($(cat "$cg/cpuacct.usage") - u0) / 1000000000 ))" | tee "$work/result.txt"
