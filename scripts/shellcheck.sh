#!/usr/bin/env bash
# Runs shellcheck over the project's shell: the VM testbed (tests/vm: its scripts, the sourced lib.sh and lib/,
# arm64.sh, the image recipe and hooks, the scenarios, the power-cut campaign), the Slurm, sweep and device tests,
# scripts/, CI (.ci/run), the benchmarks, the examples users copy (Slurm scripts, the host trees' stand-in tools),
# the fuzz runner, and the packaging's maintainer scripts, hooks and rpm scriptlets. A file counts when its name ends in .sh or its first
# line is a sh/bash #! line; a .sh file with neither a #! line nor a `# shellcheck shell=` directive (the rpm
# scriptlets, which rpm runs with /bin/sh) is checked as sh. Settings in .shellcheckrc (sourced files are
# followed from each script's own directory).
#   bash scripts/shellcheck.sh       exit 0 when shellcheck finds nothing
# Where a word split or a single-quoted $ is meant, the line says so in a `# shellcheck disable=SCxxxx`
# directive with its reason, rather than being "fixed" into different behaviour.
set -euo pipefail
cd "$(dirname "$0")/.." || exit
command -v shellcheck >/dev/null ||
  { echo "shellcheck.sh: no shellcheck; run: bash scripts/ensure-packages.sh test" >&2; exit 2; }
files=() bare=()
dirs=(tests/vm tests/slurm tests/sweep tests/device scripts .ci packaging bench examples fuzz/run.sh)
while IFS= read -r f; do
  [ -f "$f" ] || continue
  first=''; IFS= read -r first < "$f" || true
  case $f in
    *.sh) if [[ $first == '#!'* ]] || grep -q '^# shellcheck shell=' "$f"; then files+=("$f"); else bare+=("$f"); fi ;;
    *) case $first in '#!'*/sh|'#!'*/bash|'#!'*' sh'|'#!'*' bash'|'#!'*/sh' '*|'#!'*/bash' '*) files+=("$f") ;; esac ;;
  esac
done < <(git ls-files "${dirs[@]}" 2>/dev/null || find "${dirs[@]}" -type f | sort)
[ ${#files[@]} -gt 0 ] || { echo "shellcheck.sh: no shell scripts found" >&2; exit 2; }
echo "shellcheck.sh: $(shellcheck --version | sed -n 's/^version: //p'), $(( ${#files[@]} + ${#bare[@]} )) scripts"
shellcheck "${files[@]}"
[ ${#bare[@]} -eq 0 ] || shellcheck --shell=sh "${bare[@]}"
echo "shellcheck.sh: clean"
