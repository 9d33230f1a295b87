#!/usr/bin/env bash
# The distributions' own linters on the packages: lintian (the .deb) and
# rpmlint (the .rpm). Exit 1 when either reports an error; warnings are
# printed (docs/packages.md lists those that remain and why).
#   bash scripts/package-lint.sh target/debian/X.deb target/generate-rpm/X.rpm
set -uo pipefail
cd "$(dirname "$0")/.." || exit
deb=${1:?the .deb} rpm=${2:?the .rpm}
status=0
out=$(lintian --tag-display-limit 0 "$deb" 2>&1)
echo "lintian $(basename "$deb"):"
if [ -n "$out" ]; then printf '%s\n' "$out" | sed 's/^/  /'; else echo "  clean"; fi
if grep -q '^E: ' <<<"$out"; then
  echo "package-lint: lintian reports errors" >&2
  status=1
fi
# rpmlint's own config: packaging/rpm/rpmlint.toml (filters, with reasons).
out=$(rpmlint -c packaging/rpm/rpmlint.toml "$rpm" 2>&1)
rc=$?
echo "rpmlint $(basename "$rpm"):"
printf '%s\n' "$out" | sed 's/^/  /'
if grep -Eq ': E: |[1-9][0-9]* errors' <<<"$out" || [ "$rc" -ge 64 ]; then
  echo "package-lint: rpmlint reports errors" >&2
  status=1
fi
exit $status
