#!/bin/bash
# Compare `gdrprov bench loopback` with perftest's `ib_write_bw` (server and client on the same RDMA
# device, talking over 127.0.0.1) at the same message sizes and duration, in one run, and print the
# ratio per size. Runs where the RDMA device is (e.g. inside the soft-RoCE VM guest); needs perftest.
#
# usage: compare-ib-write-bw.sh GDRPROV_BIN DEVICE [DURATION_SECS] [SIZES]
#   SIZES: space-separated byte counts (default "65536 1048576 8388608")
# env:   MEMORY=host|cuda-dmabuf|cuda-peermem (gdrprov side; default host), ROUNDS=N (default 1: with more,
#        the tools alternate, each tool's best round makes the ratio, and the medians are printed beside it),
#        PERFTEST_EXTRA (more ib_write_bw options, e.g. "--use_cuda_dmabuf ...")
# exit:  0 when gdrprov >= ib_write_bw at every size, 1 otherwise, 2 on a usage or run error.
set -u
GDRPROV=${1:?usage: $0 GDRPROV_BIN DEVICE [DURATION_SECS] [SIZES]}
DEV=${2:?usage: $0 GDRPROV_BIN DEVICE [DURATION_SECS] [SIZES]}
DUR=${3:-5}
SIZES=${4:-65536 1048576 8388608}
MEMORY=${MEMORY:-host}
ROUNDS=${ROUNDS:-1}
PORT=${PERFTEST_PORT:-18515}
command -v ib_write_bw >/dev/null || { echo "ib_write_bw not found (install perftest)" >&2; exit 2; }
[ -x "$GDRPROV" ] || { echo "$GDRPROV is not executable" >&2; exit 2; }
LOG=$(mktemp -d /tmp/compare-bw.XXXXXX)

# One short gdrprov run per size (2 WRITEs) says, in its JSON, the GID index it chooses (both tools then
# use the same one) and what ib_write_bw gets at that size: the same WRITEs in flight (-t; gdrprov's
# default 128, capped at 32 MiB in flight, at least 2) and the same WRITEs per signaled completion (-Q).
# With its own defaults ib_write_bw at 1 MiB queues 128 MiB, which a software device under TCG does not
# drain inside a few seconds' window (it then reports nothing), and it signals every 100th WRITE (or every
# tx-depth-th): in -D mode it counts completions x cq_mod inside its window, so at 8 MiB one completion
# was 32 MiB, a step of ~0.09 Gb/s in a 3-s window on rxe.
json_field() { printf '%s\n' "$1" | sed -n "s/^ *\"$2\": \([0-9]*\).*/\1/p" | head -n1; }
declare -A IN_FLIGHT PER_CQE
GID=
for s in $SIZES; do
  j=$("$GDRPROV" --format json bench loopback --device "$DEV" --memory "$MEMORY" --size "$s" --iters 2 2>/dev/null)
  [ -n "$GID" ] || GID=$(json_field "$j" gid_index)
  IN_FLIGHT[$s]=$(json_field "$j" writes_in_flight)
  PER_CQE[$s]=$(json_field "$j" writes_per_completion)
  if [ -z "${IN_FLIGHT[$s]}" ] || [ -z "${PER_CQE[$s]}" ]; then
    echo "gdrprov did not report its WRITEs in flight at size $s:" >&2
    "$GDRPROV" bench loopback --device "$DEV" --memory "$MEMORY" --size "$s" --iters 2 >&2
    exit 2
  fi
done
GIDOPT=(); [ -n "$GID" ] && GIDOPT=(-x "$GID")

perftest_once() { # SIZE -> average Gb/s of ib_write_bw (client side)
  local s=$1 out lim=$((DUR * 4 + 60)) t=${IN_FLIGHT[$1]} q=${PER_CQE[$1]}
  # Bounded: perftest 4.5's server can wait forever when its client measured nothing.
  # PERFTEST_EXTRA is a list of options: split on purpose.
  # shellcheck disable=SC2086
  timeout "$lim" ib_write_bw -d "$DEV" "${GIDOPT[@]}" -s "$s" -t "$t" -Q "$q" -D "$DUR" -F -p "$PORT" ${PERFTEST_EXTRA:-} \
    >"$LOG/srv-$s.txt" 2>&1 &
  local srv=$!
  sleep 1
  # shellcheck disable=SC2086 # PERFTEST_EXTRA: options, split on purpose
  out=$(timeout "$lim" ib_write_bw -d "$DEV" "${GIDOPT[@]}" -s "$s" -t "$t" -Q "$q" -D "$DUR" -F -p "$PORT" ${PERFTEST_EXTRA:-} 127.0.0.1 2>&1)
  wait "$srv" 2>/dev/null
  printf '%s\n' "$out" >"$LOG/cli-$s.txt"
  # Its MB/s (2^20 bytes, two decimals) is finer than its --report_gbits (two decimals of 0.2 Gb/s on rxe):
  # converted here to gdrprov's unit, 10^9 bits.
  printf '%s\n' "$out" | awk -v s="$s" '$1 == s && NF >= 5 { printf "%.4f\n", $4 * 1048576 * 8 / 1e9; exit }'
}

gdrprov_once() { # SIZE -> average Gb/s of gdrprov bench loopback
  local s=$1
  timeout $((DUR * 4 + 120)) "$GDRPROV" bench loopback --device "$DEV" --memory "$MEMORY" "${GIDOPT[@]/-x/--gid-index}" --size "$s" \
    --duration "$DUR" >"$LOG/gdr-$s.txt" 2>&1
  awk -v s="$s" '$1 == s && NF >= 5 { print $4; exit }' "$LOG/gdr-$s.txt"
}

max() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { print (a + 0 > b + 0) ? a : b }'; }
# median of the numbers given (empty when none)
median() { printf '%s\n' "$@" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v g="$1" -v p="$2" 'BEGIN { if (p + 0 > 0) printf "%.2fx", g / p; else print "n/a" }'; }

echo "device $DEV, memory $MEMORY (gdrprov), GID index ${GID:-default}, ${DUR} s per size, $ROUNDS round(s), tools alternating; logs in $LOG"
for s in $SIZES; do echo "  $s B: ${IN_FLIGHT[$s]} WRITEs in flight, a completion every ${PER_CQE[$s]} (ib_write_bw -t ${IN_FLIGHT[$s]} -Q ${PER_CQE[$s]})"; done
if [ "$ROUNDS" -gt 1 ]; then
  printf '%-10s | %-15s | %-18s | %-6s | %s\n' "size" "gdrprov Gb/s" "ib_write_bw Gb/s" "ratio" "median ratio (gdrprov / ib_write_bw Gb/s)"
  printf '%s\n' "-----------+-----------------+--------------------+--------+------------------------------------------"
else
  printf '%-10s | %-15s | %-18s | %s\n' "size" "gdrprov Gb/s" "ib_write_bw Gb/s" "ratio"
  printf '%s\n' "-----------+-----------------+--------------------+-------"
fi
status=0
for s in $SIZES; do
  gs=(); ps=()
  for r in $(seq "$ROUNDS"); do
    # Alternate which tool goes first, so neither always runs on a freshly idle device.
    if [ $((r % 2)) = 1 ]; then ps+=("$(perftest_once "$s")"); gs+=("$(gdrprov_once "$s")")
    else gs+=("$(gdrprov_once "$s")"); ps+=("$(perftest_once "$s")"); fi
  done
  g=; p=
  for v in "${gs[@]}"; do g=$(max "$g" "$v"); done
  for v in "${ps[@]}"; do [ -n "$v" ] && p=$(max "$p" "$v"); done
  if awk -v x="${g:-0}" 'BEGIN { exit !(x + 0 <= 0) }'; then
    echo "gdrprov failed at size $s:" >&2; cat "$LOG/gdr-$s.txt" >&2; status=2; continue
  fi
  if [ -z "$p" ]; then
    echo "ib_write_bw failed at size $s:" >&2; cat "$LOG/cli-$s.txt" "$LOG/srv-$s.txt" >&2; status=2; continue
  fi
  if awk -v x="$p" 'BEGIN { exit !(x + 0 <= 0) }'; then
    # perftest ran but completed no message inside its measuring window (slow software device).
    printf '%-10s | %-15s | %-18s | %s\n' "$s" "$g" "$p" "n/a (ib_write_bw completed nothing in ${DUR} s)"
    continue
  fi
  r=$(ratio "$g" "$p")
  if [ "$ROUNDS" -gt 1 ]; then
    gm=$(median "${gs[@]}"); pm=$(median "${ps[@]}")
    printf '%-10s | %-15s | %-18s | %-6s | %s (%s / %s)\n' "$s" "$g" "$p" "$r" "$(ratio "$gm" "$pm")" "$gm" "$pm"
  else
    printf '%-10s | %-15s | %-18s | %s\n' "$s" "$g" "$p" "$r"
  fi
  awk -v r="${r%x}" 'BEGIN { exit !(r + 0 < 1.0) }' && [ $status = 0 ] && status=1
done
grep -h '^data check' "$LOG"/gdr-*.txt | sort | uniq -c
exit $status
