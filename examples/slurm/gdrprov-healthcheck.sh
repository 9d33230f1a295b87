#!/bin/bash
# Slurm HealthCheckProgram: drain this node when `gdrprov verify` fails,
# resume it when verify passes again. slurm.conf:
#
#   HealthCheckProgram=/usr/local/sbin/gdrprov-healthcheck
#   HealthCheckInterval=60
#   HealthCheckNodeState=ANY
#
# slurmd runs it as root with an empty environment and no arguments, so it
# reads its settings from /etc/default/gdrprov-healthcheck (or the file
# named by GDRPROV_HEALTHCHECK_CONF):
#
#   PROFILE="rdma-dmabuf"          # the profile(s) the node must meet
#   GDRPROV=/usr/bin/gdrprov
#   VERIFY_ARGS=""                 # more verify options (e.g. --root for tests)
#   TIMEOUT=20                     # seconds before verify counts as failed
#
# verify runs without the loopback (--no-loopback): well under a second.
# The drain's reason starts with "gdrprov: verify" and says which checks
# failed; only a drain with that prefix is resumed here, so a drain by a
# person, by another health check or by the pair sweep ("gdrprov: rail ...")
# is never undone by this script. Exit 0 always (a failing health check
# program is only logged by slurmd); what it did goes to syslog (logger).
set -u
conf=${GDRPROV_HEALTHCHECK_CONF:-/etc/default/gdrprov-healthcheck}
PROFILE=rdma-dmabuf
GDRPROV=$(command -v gdrprov || echo /usr/bin/gdrprov)
VERIFY_ARGS=""
TIMEOUT=20
SCONTROL=${SCONTROL:-scontrol}
# shellcheck disable=SC1090
[ -r "$conf" ] && . "$conf"
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

node=${SLURMD_NODENAME:-$(hostname -s)}
say() { logger -t gdrprov-healthcheck -- "$*" 2>/dev/null; echo "gdrprov-healthcheck: $*" >&2; }

# shellcheck disable=SC2086
json=$(timeout "$TIMEOUT" "$GDRPROV" verify $PROFILE --no-loopback --format json $VERIFY_ARGS 2>/dev/null)
rc=$?

# The failed checks' names and details, without jq: one "name: detail" each.
failed() {
  python3 -c '
import json, sys
try:
    d = json.loads(sys.stdin.read())
except Exception:
    print("no verify report"); sys.exit()
if "error" in d:
    print(d["error"].get("message", "error")); sys.exit()
print("; ".join(c["name"] + ": " + c["detail"] for c in d.get("checks", []) if c.get("status") == "fail")[:160])
' 2>/dev/null <<<"$1" || echo "verify exited $rc"
}

state=$("$SCONTROL" show node "$node" -o 2>/dev/null)
reason=$(sed -n 's/.* Reason=\(.*\)$/\1/p' <<<"$state" | sed 's/ \[[^]]*\]$//')
drained=0
grep -Eq 'State=[A-Z+]*DRAIN' <<<"$state" && drained=1

if [ "$rc" -eq 0 ]; then
  if [ "$drained" = 1 ] && [[ "$reason" == "gdrprov: verify"* ]]; then
    "$SCONTROL" update NodeName="$node" State=RESUME && say "$node resumed: verify passes"
  fi
  exit 0
fi

why="gdrprov: verify failed (exit $rc): $(failed "$json")"
why=${why//\"/}
if [ "$drained" = 1 ] && [[ "$reason" != "gdrprov: verify"* ]]; then
  say "$node: $why (already drained: $reason)"
  exit 0
fi
"$SCONTROL" update NodeName="$node" State=DRAIN Reason="$why" && say "$node drained: $why"
exit 0
