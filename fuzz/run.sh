#!/usr/bin/env bash
# Runs each cargo-fuzz target for SECONDS (default 20: the CI smoke run).
#   bash fuzz/run.sh [SECONDS] [TARGET...]
#   bash fuzz/run.sh --install-only   # install cargo-fuzz when missing, nothing else (CI, early)
#   bash fuzz/run.sh --build-only     # install it when missing and build every target, run none (CI, in
#                                     # the background beside the tests, which mostly wait)
# Targets live in two places, each its own cargo-fuzz workspace: fuzz/ (the
# gdrprov crate's: profile, versions) and crates/gdrprov-boot/fuzz/ (the
# boot-configuration crate's: grub_edit, cmdline, uki). Targets default to every
# one of both. Inputs found are kept in PLACE/corpus/TARGET (seeded from
# PLACE/seeds/TARGET); a crash or a timeout fails the script and leaves the
# input in PLACE/artifacts/TARGET.
# cargo-fuzz needs a nightly compiler: the nightly toolchain when rustup has
# one, otherwise the stable one with RUSTC_BOOTSTRAP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
places=(fuzz crates/gdrprov-boot/fuzz)
install_only=0 build_only=0
[ "${1:-}" = --install-only ] && { install_only=1; shift; }
[ "${1:-}" = --build-only ] && { build_only=1; shift; }
secs="${1:-20}"
shift || true
# Every target as PLACE/NAME.
all=()
for place in "${places[@]}"; do
  for f in "$place"/fuzz_targets/*.rs; do all+=("$place/$(basename "$f" .rs)"); done
done
if (($#)); then
  targets=()
  for name in "$@"; do
    found=""
    for t in "${all[@]}"; do [[ "${t##*/}" == "$name" ]] && found="$t"; done
    if [[ -z "$found" ]]; then
      echo "fuzz/run.sh: no fuzz target $name (there are: ${all[*]##*/})" >&2
      exit 2
    fi
    targets+=("$found")
  done
else
  targets=("${all[@]}")
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz/run.sh: installing cargo-fuzz" >&2
  # unoptimized: compiles faster, and it only drives cargo; the target directory scripts/package.sh's
  # installs use, for the dependencies they share
  CARGO_PROFILE_DEV_DEBUG=false cargo install cargo-fuzz --locked --debug --target-dir target/cargo-install >&2
fi
((install_only)) && exit 0
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi
# FUZZ_BUILD=dev builds the targets without optimizations (the CI smoke run: cargo-fuzz's release build, one
# codegen unit, took 17 minutes of a 2-core CI machine for the gdrprov crate alone; a 20 s smoke run does not
# need the speed). Default release, for the long runs.
case ${FUZZ_BUILD:-release} in
  release) mode=() ;;
  dev) mode=(--dev) ;;
  *) echo "fuzz/run.sh: FUZZ_BUILD must be release or dev, not '${FUZZ_BUILD}'" >&2; exit 2 ;;
esac
# One target directory for both workspaces (the repository's, ignored): the boot crate and the
# dependencies both share are built with the sanitizer once, not once per workspace.
tdir=(--target-dir "$PWD/target/fuzz")
if ((build_only)); then
  # Every target of each workspace in one cargo call (cargo links them side by side).
  for place in "${places[@]}"; do
    (cd "$place/.." && "${fuzz[@]}" build "${mode[@]}" "${tdir[@]}" -a >&2)   # -a: as the runs below
  done
  echo "fuzz/run.sh: every target built (${#all[@]})"
  exit 0
fi
for pt in "${targets[@]}"; do
  place="${pt%/*}"
  t="${pt##*/}"
  mkdir -p "$place/corpus/$t"
  # cargo-fuzz finds the fuzz directory from the crate it runs in.
  (cd "$place/.." && "${fuzz[@]}" build "${mode[@]}" "${tdir[@]}" -a "$t" >&2)
  echo "== fuzz $place/$t for ${secs}s"
  # -timeout: one input taking over 10 s is a failure (alias bombs, deep
  # nesting); -rss_limit_mb: so is using over 2 GiB.
  log="$(mktemp)"
  rc=0
  (cd "$place/.." && "${fuzz[@]}" run "${mode[@]}" "${tdir[@]}" -a "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1) >"$log" 2>&1 || rc=$?
  grep -E '^(stat::|Done |INFO: seed corpus|SUMMARY|==[0-9]+== ?ERROR)|panicked' "$log" || true
  if ((rc != 0)); then
    tail -40 "$log" >&2
    echo "fuzz/run.sh: $t failed (exit $rc); the input is in $place/artifacts/$t" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
done
echo "fuzz/run.sh: ${#targets[@]} target(s), ${secs}s each, no crash"
echo "fuzz: ${#targets[@]} passed, 0 failed"
