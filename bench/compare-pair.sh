#!/bin/bash
# Compare `gdrprov bench pair` with perftest's `ib_write_bw` server/client between the same two hosts,
# same message sizes, same duration, same WRITEs in flight and per completion, the tools alternating
# (the order flips every round); the best round of each tool per size makes the ratio.
#
# usage: compare-pair.sh GDRPROV_BIN DEVICE LISTENER_ADDR [DURATION_SECS] [SIZES]
#   Host A (the listener / ib_write_bw server) is reached with $RUN_A, host B (the client) with $RUN_B:
#   command prefixes that run one shell command line there, e.g. RUN_A="ssh root@hostA". Both default to
#   "sh -c" (this host). LISTENER_ADDR: host A's address on the RDMA link.
#   SIZES: space-separated byte counts (default "65536 1048576 8388608")
# env:   ROUNDS=N (default 3), TOKEN=/path/of/the/secret on both hosts (default /root/pair.token),
#        MEMORY=host|cuda-dmabuf|cuda-peermem (both gdrprov ends; default host), PERFTEST_EXTRA,
#        RESULTS=DIR (default: bench/results beside this script) for the table,
#        BUILD=WORDS (how gdrprov was built, for the table's header; default "unknown build"),
#        NOTE=WORDS (a first line for the table, e.g. where it ran)
# Load: before every run the 1-minute load average of this machine (/proc/loadavg; where the hosts are
# VM guests, the machine that runs them) is recorded beside the figure (value@load); the table also
# gives each tool's median, so that a best-of-N that a quiet moment made is seen as such.
# exit:  0 when gdrprov >= ib_write_bw at every size, 1 otherwise, 2 on a usage or run error.
set -u
GDRPROV=${1:?usage: $0 GDRPROV_BIN DEVICE LISTENER_ADDR [DURATION_SECS] [SIZES]}
DEV=${2:?usage: $0 GDRPROV_BIN DEVICE LISTENER_ADDR [DURATION_SECS] [SIZES]}
ADDR=${3:?usage: $0 GDRPROV_BIN DEVICE LISTENER_ADDR [DURATION_SECS] [SIZES]}
DUR=${4:-5}
SIZES=${5:-65536 1048576 8388608}
ROUNDS=${ROUNDS:-3}
TOKEN=${TOKEN:-/root/pair.token}
MEMORY=${MEMORY:-host}
RUN_A=${RUN_A:-sh -c}
RUN_B=${RUN_B:-sh -c}
RESULTS=${RESULTS:-$(cd "$(dirname "$0")" && pwd)/results}
GPORT=18516
PPORT=18515
a() { $RUN_A "$*"; }
b() { $RUN_B "$*"; }
die() { echo "compare-pair: $*" >&2; exit 2; }
a "command -v ib_write_bw >/dev/null && test -x $GDRPROV && test -r $TOKEN" || die "host A lacks ib_write_bw, $GDRPROV or $TOKEN"
b "command -v ib_write_bw >/dev/null && test -x $GDRPROV && test -r $TOKEN" || die "host B lacks ib_write_bw, $GDRPROV or $TOKEN"
lim=$((DUR * 4 + 60))

wait_port() { a "for i in \$(seq 120); do ss -ltn | grep -q ':$1 ' && exit 0; sleep 0.25; done; exit 1"; }

declare -A INF PERCQ GIDA GIDB
why() { # the tails of both ends' output, on stderr
  { echo "--- listener (host A):"; a "tail -5 /tmp/cp-listener.out"; echo "--- client (host B):"; b "tail -5 /tmp/cp-client.err"; } >&2
}
gdrprov_once() { # SIZE -> average Gb/s; records WRITEs in flight/per completion and each end's GID index
  local s=$1 j
  a "nohup timeout $lim $GDRPROV bench pair --listen --device $DEV --memory $MEMORY --token-file $TOKEN --port $GPORT --timeout $lim > /tmp/cp-listener.out 2>&1 < /dev/null &" || return 1
  wait_port $GPORT || return 1
  j=$(b "timeout $lim $GDRPROV --format json bench pair $ADDR --port $GPORT --device $DEV --memory $MEMORY --token-file $TOKEN --size $s --duration $DUR --timeout $lim 2>/tmp/cp-client.err") || { why; return 1; }
  a "for i in \$(seq 40); do ss -ltn | grep -q ':$GPORT ' || exit 0; sleep 0.25; done; exit 0"
  printf '%s' "$j" | python3 -c '
import json, sys
r = json.load(sys.stdin)
x = r["results"][0]
if not r["data_check"]["passed"]:
    sys.exit("data check failed: %s" % r["data_check"])
print("%.4f %d %d %s %s" % (x["average_gbps"], x["writes_in_flight"], x["writes_per_completion"],
      r["listener"]["port"]["gid_index"], r["client"]["port"]["gid_index"]))
open("/tmp/cp-timing.txt", "w").write(r.get("timing", ""))'
}

perftest_once() { # SIZE -> average Gb/s of ib_write_bw (client side), same depth and completions as gdrprov
  local s=$1
  local out o="-d $DEV -s $s -t ${INF[$1]} -Q ${PERCQ[$1]} -D $DUR -F -p $PPORT -u 20 ${PERFTEST_EXTRA:-}"
  a "nohup timeout $lim ib_write_bw $o -x ${GIDA[$1]} > /tmp/cp-ibsrv.out 2>&1 < /dev/null &" || return 1
  wait_port $PPORT || return 1
  out=$(b "timeout $lim ib_write_bw $o -x ${GIDB[$1]} $ADDR 2>&1") || return 1
  a "for i in \$(seq 40); do ss -ltn | grep -q ':$PPORT ' || exit 0; sleep 0.25; done; exit 0"
  # MB/s (2^20 bytes) converted to gdrprov's unit, 10^9 bits.
  printf '%s\n' "$out" | awk -v s="$s" '$1 == s && NF >= 5 { printf "%.4f\n", $4 * 1048576 * 8 / 1e9; f=1; exit } END { exit !f }'
}

load() { cut -d' ' -f1 /proc/loadavg; }
median() { tr ' ' '\n' | sed '/^$/d; s/@.*//' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A BEST_G BEST_P ALL_G ALL_P
for s in $SIZES; do
  # A first gdrprov run says the depth and GID indexes ib_write_bw then gets.
  read -r _ inf q ga gb < <(gdrprov_once "$s") || die "gdrprov pair failed at size $s (host A: /tmp/cp-listener.out)"
  INF[$s]=$inf PERCQ[$s]=$q GIDA[$s]=$ga GIDB[$s]=$gb
  BEST_G[$s]=0 BEST_P[$s]=0 ALL_G[$s]="" ALL_P[$s]=""
  for r in $(seq "$ROUNDS"); do
    for tool in $( [ $((r % 2)) = 1 ] && echo "g p" || echo "p g"); do
      l=$(load)
      if [ "$tool" = g ]; then
        read -r v _ < <(gdrprov_once "$s") || die "gdrprov pair failed at size $s round $r"
        ALL_G[$s]+=" $v@$l"
        awk -v a="$v" -v b="${BEST_G[$s]}" 'BEGIN { exit !(a > b) }' && BEST_G[$s]=$v
      else
        v=$(perftest_once "$s") || die "ib_write_bw failed at size $s round $r (host A: /tmp/cp-ibsrv.out)"
        ALL_P[$s]+=" $v@$l"
        awk -v a="$v" -v b="${BEST_P[$s]}" 'BEGIN { exit !(a > b) }' && BEST_P[$s]=$v
      fi
    done
  done
done

mkdir -p "$RESULTS"
out="$RESULTS/pair-vs-ib_write_bw-$(date +%Y%m%d-%H%M%S).txt"
rc=0
for s in $SIZES; do
  awk -v p="${BEST_P[$s]}" 'BEGIN { exit !(p <= 0) }' && rc=2        # a tool measured nothing
  [ "$rc" = 2 ] || awk -v a="${BEST_G[$s]}" -v b="${BEST_P[$s]}" 'BEGIN { exit !(a < b) }' && [ "$rc" = 0 ] && rc=1
done
{
  [ -z "${NOTE:-}" ] || echo "# $NOTE"
  echo "# gdrprov bench pair vs ib_write_bw, $DEV, listener $ADDR, ${DUR} s per run, best of $ROUNDS (alternating), memory $MEMORY, gdrprov ${BUILD:-unknown build}"
  echo "# this machine: $(nproc) CPUs, load before the table $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min); each round's figure is value@1-min-load"
  echo "# gdrprov timing: $(cat /tmp/cp-timing.txt 2>/dev/null)"
  echo "# ib_write_bw timing: perftest -D: iterations completed between duration/4 s (whole seconds) and duration - duration/4 s, at the client"
  echo "# bytes  | gdrprov Gb/s | ib_write_bw Gb/s | ratio  | median ratio | in flight / per completion | gdrprov rounds | ib_write_bw rounds"
  for s in $SIZES; do
    ratio=$(awk -v a="${BEST_G[$s]}" -v b="${BEST_P[$s]}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "n/a (ib_write_bw measured nothing: raise DURATION)" }')
    mg=$(echo "${ALL_G[$s]}" | median); mp=$(echo "${ALL_P[$s]}" | median)
    mratio=$(awk -v a="$mg" -v b="$mp" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "n/a" }')
    printf '%-8s | %-12s | %-16s | %-6s | %-12s | %s / %s | %s | %s\n' "$s" "${BEST_G[$s]}" "${BEST_P[$s]}" "$ratio" \
      "$mratio" "${INF[$s]}" "${PERCQ[$s]}" "${ALL_G[$s]# }" "${ALL_P[$s]# }"
  done
  echo "# exit $rc (0: gdrprov >= ib_write_bw at every size; 1: not; 2: a tool measured nothing)"
} | tee "$out"
echo "written: $out"
exit $rc
