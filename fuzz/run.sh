#!/usr/bin/env bash
# Runs each cargo-fuzz target for SECONDS (default 20: the CI smoke run).
#   bash fuzz/run.sh [SECONDS] [TARGET...]
# Targets default to every one in fuzz/fuzz_targets. Inputs found are kept in
# fuzz/corpus/TARGET (seeded from fuzz/seeds/TARGET); a crash or a timeout
# fails the script and leaves the input in fuzz/artifacts/TARGET.
# cargo-fuzz needs a nightly compiler: the nightly toolchain when rustup has
# one, otherwise the stable one with RUSTC_BOOTSTRAP=1.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-20}"
shift || true
if (($#)); then
  targets=("$@")
else
  targets=()
  for f in fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz/run.sh: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked >&2
fi
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  "${fuzz[@]}" build -a "$t" >&2
  echo "== fuzz $t for ${secs}s"
  # -timeout: one input taking over 10 s is a failure (alias bombs, deep
  # nesting); -rss_limit_mb: so is using over 2 GiB.
  log="$(mktemp)"
  rc=0
  "${fuzz[@]}" run -a "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 >"$log" 2>&1 || rc=$?
  grep -E '^(stat::|Done |INFO: seed corpus|SUMMARY|==[0-9]+== ?ERROR)|panicked' "$log" || true
  if ((rc != 0)); then
    tail -40 "$log" >&2
    echo "fuzz/run.sh: $t failed (exit $rc); the input is in fuzz/artifacts/$t" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
done
echo "fuzz/run.sh: ${#targets[@]} target(s), ${secs}s each, no crash"
echo "fuzz: ${#targets[@]} passed, 0 failed"
