#!/bin/bash
# Compares `gdrprov bench copy` with bench/copy-reference.c (CUDA driver API,
# same method) on the same GPU in one run. Builds the reference with cc
# against the driver's libcuda.so.1 and the CUDA headers it finds.
#   bench/compare-copy.sh GDRPROV [GPU] [RUNS] [ROUNDS]
# The tools alternate ROUNDS times; each tool's best counts. Prints a table
# and a JSON line; exit 0 when gdrprov reaches >= 0.98 of the reference
# both ways, 1 when not, 2 when something could not run.
set -u
B=${1:?usage: compare-copy.sh GDRPROV [GPU] [RUNS] [ROUNDS]}
GPU=${2:-0}
RUNS=${3:-10}
ROUNDS=${4:-3}
SIZE_MIB=256
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
die() { echo "compare-copy: $*" >&2; exit 2; }
[ -x "$B" ] || die "$B is not an executable gdrprov"
command -v cc >/dev/null || die "no C compiler (cc); install gcc"

INC=""
for d in ${CUDA_INC:-} /usr/local/cuda/include /usr/local/cuda-*/include /usr/include; do
  [ -f "$d/cuda.h" ] && { INC=$d; break; }
done
[ -n "$INC" ] || die "no cuda.h (looked in /usr/local/cuda/include, /usr/local/cuda-*/include, /usr/include; set CUDA_INC)"
LIB=$(ldconfig -p | awk '/libcuda\.so\.1 .*x86-64|libcuda\.so\.1 .*AArch64/ {print $NF; exit}')
[ -n "$LIB" ] || LIB=$(ldconfig -p | awk '/libcuda\.so\.1/ {print $NF; exit}')
[ -n "$LIB" ] || die "no libcuda.so.1 in ldconfig -p (is the NVIDIA driver installed?)"
echo "cuda.h: $INC/cuda.h ($(grep -m1 '#define CUDA_VERSION' "$INC/cuda.h" | awk '{print $3}'))  libcuda: $LIB"
cc -O2 -Wall -I"$INC" "$HERE/copy-reference.c" -o "$WORK/copy-reference" \
   -L"$(dirname "$LIB")" -l:libcuda.so.1 -Wl,-rpath,"$(dirname "$LIB")" \
   || die "building copy-reference.c failed"

num() { grep -o "\"$1\": *[0-9.]*" | head -1 | sed 's/.*: *//'; }
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a+0 > b+0) ? a : b }'; }
G_H=0 G_D=0 R_H=0 R_D=0 LINK=""
for round in $(seq 1 "$ROUNDS"); do
  g=$("$B" --format json bench copy --gpu "$GPU" --runs "$RUNS" --size "${SIZE_MIB}M")
  rc=$?
  [ $rc -le 1 ] || die "gdrprov bench copy failed (exit $rc)"
  r=$("$WORK/copy-reference" "$GPU" "$SIZE_MIB" "$RUNS") || die "copy-reference failed"
  gh=$(echo "$g" | num h2d_gbs); gd=$(echo "$g" | num d2h_gbs)
  rh=$(echo "$r" | num h2d_gbs); rd=$(echo "$r" | num d2h_gbs)
  echo "round $round: gdrprov H2D $gh D2H $gd GB/s | reference H2D $rh D2H $rd GB/s"
  G_H=$(max "$G_H" "$gh"); G_D=$(max "$G_D" "$gd"); R_H=$(max "$R_H" "$rh"); R_D=$(max "$R_D" "$rd")
  LINK=$(echo "$g" | grep -o '"speed_under_load": *"[^"]*"' | head -1 | sed 's/.*: *//')
done
RATIO_H=$(awk -v a="$G_H" -v b="$R_H" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }')
RATIO_D=$(awk -v a="$G_D" -v b="$R_D" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }')
echo
echo "| direction | gdrprov GB/s | reference GB/s | ratio |"
echo "|---|---|---|---|"
echo "| H2D | $G_H | $R_H | $RATIO_H |"
echo "| D2H | $G_D | $R_D | $RATIO_D |"
echo "{\"gpu\": $GPU, \"bytes\": $((SIZE_MIB << 20)), \"runs\": $RUNS, \"rounds\": $ROUNDS, \"link_speed_under_load\": ${LINK:-null}, \"gdrprov\": {\"h2d_gbs\": $G_H, \"d2h_gbs\": $G_D}, \"reference\": {\"h2d_gbs\": $R_H, \"d2h_gbs\": $R_D}, \"ratio\": {\"h2d\": $RATIO_H, \"d2h\": $RATIO_D}}"
awk -v a="$RATIO_H" -v b="$RATIO_D" 'BEGIN { exit !(a >= 0.98 && b >= 0.98) }'
