#!/bin/bash
# Compare `gdrprov bench loopback` with perftest's `ib_write_bw` (server and client on the same RDMA
# device, talking over 127.0.0.1) at the same message sizes and duration, in one run, and print the
# ratio per size. Runs where the RDMA device is (e.g. inside the soft-RoCE VM guest); needs perftest.
#
# usage: compare-ib-write-bw.sh GDRPROV_BIN DEVICE [DURATION_SECS] [SIZES]
#   SIZES: space-separated byte counts (default "65536 1048576 8388608")
# env:   MEMORY=host|cuda-dmabuf|cuda-peermem (gdrprov side; default host), ROUNDS=N (default 1: with more,
#        each tool's best round counts), PERFTEST_EXTRA (more ib_write_bw options, e.g. "--use_cuda_dmabuf ...")
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

# The GID index gdrprov chooses, so both tools use the same one.
GID=$("$GDRPROV" --format json bench loopback --device "$DEV" --memory "$MEMORY" --size 4096 --iters 10 2>/dev/null |
  sed -n 's/^ *"gid_index": \([0-9]*\).*/\1/p' | head -n1)
GIDOPT=(); [ -n "$GID" ] && GIDOPT=(-x "$GID")

# The same number of WRITEs in flight for both tools: gdrprov's default (128, capped at 32 MiB in flight,
# at least 2). ib_write_bw's default 128 at 1 MiB queues 128 MiB, which a software device under TCG does
# not drain inside a few seconds' window: it then reports nothing at all.
depth() { local d=$((33554432 / $1)); [ $d -gt 128 ] && d=128; [ $d -lt 2 ] && d=2; echo $d; }

perftest_once() { # SIZE -> average Gb/s of ib_write_bw (client side)
  local s=$1 out lim=$((DUR * 4 + 60)) t; t=$(depth "$s")
  # Bounded: perftest 4.5's server can wait forever when its client measured nothing.
  timeout "$lim" ib_write_bw -d "$DEV" "${GIDOPT[@]}" -s "$s" -t "$t" -D "$DUR" -F --report_gbits -p "$PORT" ${PERFTEST_EXTRA:-} \
    >"$LOG/srv-$s.txt" 2>&1 &
  local srv=$!
  sleep 1
  out=$(timeout "$lim" ib_write_bw -d "$DEV" "${GIDOPT[@]}" -s "$s" -t "$t" -D "$DUR" -F --report_gbits -p "$PORT" ${PERFTEST_EXTRA:-} 127.0.0.1 2>&1)
  wait "$srv" 2>/dev/null
  printf '%s\n' "$out" >"$LOG/cli-$s.txt"
  printf '%s\n' "$out" | awk -v s="$s" '$1 == s && NF >= 5 { print $4; exit }'
}

gdrprov_once() { # SIZE -> average Gb/s of gdrprov bench loopback
  local s=$1
  timeout $((DUR * 4 + 120)) "$GDRPROV" bench loopback --device "$DEV" --memory "$MEMORY" "${GIDOPT[@]/-x/--gid-index}" --size "$s" \
    --tx-depth "$(depth "$s")" --duration "$DUR" >"$LOG/gdr-$s.txt" 2>&1
  awk -v s="$s" '$1 == s && NF >= 5 { print $4; exit }' "$LOG/gdr-$s.txt"
}

max() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { print (a + 0 > b + 0) ? a : b }'; }

echo "device $DEV, memory $MEMORY (gdrprov), GID index ${GID:-default}, ${DUR} s per size, $ROUNDS round(s); logs in $LOG"
printf '%-10s | %-15s | %-18s | %s\n' "size" "gdrprov Gb/s" "ib_write_bw Gb/s" "ratio"
printf '%s\n' "-----------+-----------------+--------------------+-------"
status=0
for s in $SIZES; do
  g=; p=
  for _ in $(seq "$ROUNDS"); do
    p=$(max "$p" "$(perftest_once "$s")")
    g=$(max "$g" "$(gdrprov_once "$s")")
  done
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
  r=$(awk -v g="$g" -v p="$p" 'BEGIN { printf "%.2f", g / p }')
  printf '%-10s | %-15s | %-18s | %sx\n' "$s" "$g" "$p" "$r"
  awk -v r="$r" 'BEGIN { exit !(r + 0 < 1.0) }' && [ $status = 0 ] && status=1
done
grep -h '^data check' "$LOG"/gdr-*.txt | sort | uniq -c
exit $status
