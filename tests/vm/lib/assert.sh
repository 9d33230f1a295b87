# shellcheck shell=bash
# The VM testbed's scenario verdicts (sourced by ../lib.sh): gdrprov feature probes and skips, and the
# ok/info/fail lines and assertions.

# --- gdrprov feature probes (scenarios skip, never fake a pass, while a feature is missing) --------------

# gdrprov_has SUBCOMMAND... [-- WORD]: the host binary has that subcommand (its --help works and names it),
# and, after --, its help mentions WORD (an option such as --trial).
gdrprov_has() {
  local words=() want=
  while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then want=$2; break; fi
    words+=("$1"); shift
  done
  [ -x "${GDRPROV_BIN:-}" ] || return 1
  local help
  # Matched in the shell, not through `printf | grep -q` pipes (under pipefail a pipe is one more way
  # to fail; scenario 13 once failed this check in 1 s in a loaded CI run and passed on its own).
  help=$("$GDRPROV_BIN" "${words[@]}" --help 2>/dev/null) || help=$("$GDRPROV_BIN" "${words[@]}" --help 2>&1) || return 1
  [[ ${help,,} == *usage* ]] || return 1
  [[ $help == *"${words[${#words[@]}-1]}"* ]] || return 1
  [ -z "$want" ] || [[ $help == *"$want"* ]]
}

# baseline_covered_by SCENARIO SUBCOMMAND...: a baseline scenario (the same steps by hand, without gdrprov)
# skips once gdrprov has every SUBCOMMAND, because SCENARIO then covers it through gdrprov; with
# GDRPROV_VM_BASELINES=1 it runs anyway (to tell a testbed problem from a gdrprov one).
baseline_covered_by() {
  local by=$1 sub; shift
  [ "${GDRPROV_VM_BASELINES:-0}" = 1 ] && return 0
  for sub in "$@"; do gdrprov_has "$sub" || return 0; done
  skip "baseline covered by $by (GDRPROV_VM_BASELINES=1 runs it anyway)"
}

# skip REASON: end the scenario as skipped (exit 77).
skip() { echo "SKIP: $*"; exit 77; }

# require_gdrprov SUBCOMMAND... [-- WORD]: skip unless gdrprov_has says yes.
require_gdrprov() {
  local what=${*/#-- /}; what=${what// -- / }
  # Every scenario's command exists now: a missing one is a failure, never a silent skip.
  gdrprov_has "$@" || fail "gdrprov $what is missing from $GDRPROV_BIN (or its --help failed)"
}

# --- assertions ------------------------------------------------------------------------------------------

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "  ok: $*"; }
info() { echo "  info: $*"; }

# assert_contains HAYSTACK NEEDLE WHAT
assert_contains() { case "$1" in *"$2"*) ok "$3" ;; *) fail "$3: '$2' not in: $1" ;; esac; }
assert_not_contains() { case "$1" in *"$2"*) fail "$3: '$2' unexpectedly in: $1" ;; *) ok "$3" ;; esac; }
