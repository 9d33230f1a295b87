#!/bin/bash
# Submit the pair sweep (gdrprov-sweep.sbatch) so that it also tests the
# nodes an earlier sweep drained. Slurm allocates no drained node to any
# job, so without this a node drained by a sweep never meets a partner
# again and no later sweep can find it fixed. This script, run by a Slurm
# administrator (root or an operator) on a host with the Slurm client:
#
#  1. finds the nodes drained by a sweep: reason "gdrprov: ..." but not the
#     health check's "gdrprov: verify ..." (a person's or another tool's
#     drain is never touched);
#  2. puts them in a maintenance reservation that only this user may use
#     (Flags=MAINT,IGNORE_JOBS,FLEX: no other job can land on them once
#     they are resumed; FLEX lets the sweep use nodes outside it too);
#  3. resumes them (idle now, but held by the reservation);
#  4. submits the sweep into the reservation, with the nodes and their old
#     reasons in GDRPROV_PROBATION and the reservation's name in
#     GDRPROV_RESERVATION.
#
# The sweep keeps in service each such node it clears, drains again any
# other (with its new reason, else the old one), and ends the reservation
# when it ends (EndTime=now: one in use cannot be deleted). Should the job never run (cancelled while
# pending), the reservation has no end: the nodes stay out of production
# until the next sweep or `scontrol delete ReservationName=NAME`.
#
#   examples/slurm/gdrprov-sweep-submit.sh [SBATCH OPTIONS...]
#   examples/slurm/gdrprov-sweep-submit.sh -N 64 --export=ALL,RAILS=mlx5_0,mlx5_1
#
# Settings (environment): SBATCH_SCRIPT (default: gdrprov-sweep.sbatch next
# to this script), SCONTROL, SINFO, SBATCH (tests replace them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script=${SBATCH_SCRIPT:-$here/gdrprov-sweep.sbatch}
SCONTROL=${SCONTROL:-scontrol}
SINFO=${SINFO:-sinfo}
SBATCH=${SBATCH:-sbatch}
user=$(id -un)

# 1. The sweep's own drains: NODE|REASON.
probation=$("$SINFO" -h -N -t drain,draining -o '%N|%E' |
  awk -F'|' '$2 ~ /^gdrprov: / && $2 !~ /^gdrprov: verify/' | sort -u)
if [ -z "$probation" ]; then
  exec "$SBATCH" "$@" "$script"
fi
nodes=$(cut -d'|' -f1 <<< "$probation" | paste -sd, -)
resv=gdrprov-sweep-$(date +%Y%m%d%H%M%S)-$$

# 2. Held for this user before they come back.
"$SCONTROL" create reservation ReservationName="$resv" Nodes="$nodes" StartTime=now \
  Duration=UNLIMITED Users="$user" Flags=MAINT,IGNORE_JOBS,FLEX
# 3. Back from drain, into the reservation.
"$SCONTROL" update NodeName="$nodes" State=RESUME
echo "gdrprov-sweep-submit: $nodes (drained by a sweep) resumed into reservation $resv for this sweep"
# 4. The sweep, into the reservation (sbatch passes this environment on).
export GDRPROV_PROBATION=$probation GDRPROV_RESERVATION=$resv
exec "$SBATCH" --reservation="$resv" "$@" "$script"
