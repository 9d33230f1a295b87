#!/usr/bin/env bash
# Seconds: 1000
# Scenario: issue 28's acceptance on real Slurm (Debian's slurm-wlm 22.05 and munge): three guests on one
# qemu multicast segment, soft-RoCE in each, node1 with slurmctld; the pair sweep submitted with sbatch
# runs its pairs (gdrprov bench pair, listener first); node3's link rate-limited with tc is drained with
# the reason and node1, node2 are not; once fixed, the next sweep (gdrprov-sweep-submit.sh: the drained
# node reserved, resumed, tested) keeps it in service; the HealthCheckProgram drains node2 when a module
# the profile blocks is loaded, within one interval, and resumes it after `gdrprov apply`; then the same
# sweep through the Ansible example from the host, over ssh, finds node3 again.
# Flavor: slurm
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov fleet sweep report -- --probation
REPO=$(cd "$VM_DIR/../.." && pwd)
playbook=$(command -v ansible-playbook || echo "$REPO/target/ansible-venv/bin/ansible-playbook")
[ -x "$playbook" ] || fail "no ansible-playbook (scripts/ensure-ansible.sh installs ansible-core into target/ansible-venv)"

# Three small guests (1 vCPU, 1.5 GiB: what was measured to work) on one multicast segment of their own.
# shellcheck disable=SC2034 # read by lib's vm_launch and vm_qemu
VM_FLAVOR=slurm VM_MEM=${GDRPROV_VM_SLURM_MEM:-1536} VM_SMP=1
group=230.0.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1)) mport=$((20000 + RANDOM % 40000))
nodes=(node1 node2 node3)
declare -A addr=([node1]=10.99.0.1 [node2]=10.99.0.2 [node3]=10.99.0.3) mac=([node1]=52:54:00:00:99:01 [node2]=52:54:00:00:99:02 [node3]=52:54:00:00:99:03)
for n in "${nodes[@]}"; do
  vm_launch "$n" -netdev "socket,id=r,mcast=$group:$mport,localaddr=127.0.0.1" -device "virtio-net-pci,netdev=r,mac=${mac[$n]},romfile="
done
t0=$(date +%s)
# cpu_mark STEP: the three guests' qemu CPU-seconds (user+system, from /proc) spent since the last mark,
# and the wall seconds: where this scenario's CPU goes, step by step, in its log.
declare -A cpu_last=()
cpu_at=$t0 tck=$(getconf CLK_TCK)
cpu_mark() {
  local n pid f line="" total=0 c
  for n in "${nodes[@]}"; do
    if ! pid=$(cat "$(vm_gdir "$n")/pid" 2>/dev/null) || ! read -ra f < "/proc/$pid/stat" 2>/dev/null; then continue; fi
    c=$(( (f[13] + f[14]) / tck )); line+=" $n $(( c - ${cpu_last[$n]:-0} ))"; total=$(( total + c - ${cpu_last[$n]:-0} ))
    cpu_last[$n]=$c
  done
  info "cpu: $1: ${total} qemu CPU-s in $(vm_since "$cpu_at") s (${line# }; load $(cut -d' ' -f1-3 /proc/loadavg))"
  cpu_at=$(date +%s)
}
for n in "${nodes[@]}"; do vm_wait_up "$n"; done
# The three at once (each guest has its own vCPU).
pids=()
for n in "${nodes[@]}"; do vm_install_gdrprov "$n" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || fail "installing gdrprov failed"; done
info "three guests up (segment $group:$mport) and gdrprov installed in $(vm_since "$t0") s"
cpu_mark "boot and install"

# The cluster's files: one munge key, one slurm.conf, the health check and its settings, the nodes' profile
# (no module `dummy`: it stands in for nvidia_peermem on a dma-buf host).
interval=${GDRPROV_VM_HC_INTERVAL:-20}
cfg=$VM_RUN_DIR/20-cluster; rm -rf "$cfg"; mkdir -p "$cfg"
dd if=/dev/urandom of="$cfg/munge.key" bs=1024 count=1 status=none
cat > "$cfg/slurm.conf" <<EOF
ClusterName=gdrprovvm
SlurmctldHost=node1(${addr[node1]})
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
StateSaveLocation=/var/spool/gdrprov-slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurmctld.log
SlurmdLogFile=/var/log/slurmd.log
SlurmdTimeout=300
MessageTimeout=60
HealthCheckProgram=/usr/local/sbin/gdrprov-healthcheck
HealthCheckInterval=$interval
HealthCheckNodeState=ANY
NodeName=node[1-3] CPUs=1 RealMemory=1000 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
printf 'modules:\n  absent: [dummy]\n' > "$cfg/node.yaml"
printf 'PROFILE=/etc/gdrprov/node.yaml\nGDRPROV=/usr/local/bin/gdrprov\nTIMEOUT=60\n' > "$cfg/healthcheck.conf"
# The health check runs every $interval s on every node from slurmd's start to the end, but only step 3
# asserts what it does. Its verify costs 6 s and more of a guest's one vCPU under TCG (several at once
# when they overran the interval): measured, most of node2's and node3's CPU through the sweeps. Outside
# step 3 every node's verify passes (the profile is applied; nothing the profile checks changes), so
# there the program runs with GDRPROV=/bin/true: the same path through it as a passing verify (read
# the node's state; resume only a drain of its own, "gdrprov: verify", which there is none of; so the
# sweep's drain of node3 is left alone as before) for the cost of its few processes.
printf 'PROFILE=/etc/gdrprov/node.yaml\nGDRPROV=/bin/true\nTIMEOUT=60\n' > "$cfg/healthcheck-idle.conf"
hosts=$(for n in "${nodes[@]}"; do printf '%s %s\\n' "${addr[$n]}" "$n"; done)
setup() {
  local n=$1
  vm_copy_in "$n" "$cfg/munge.key" /etc/munge/munge.key
  vm_copy_in "$n" "$cfg/slurm.conf" /etc/slurm/slurm.conf
  vm_copy_in "$n" "$cfg/healthcheck-idle.conf" /etc/default/gdrprov-healthcheck
  vm_copy_in "$n" "$REPO/examples/slurm/gdrprov-healthcheck.sh" /usr/local/sbin/gdrprov-healthcheck
  vm_copy_in "$n" "$cfg/node.yaml" /etc/gdrprov/node.yaml
  vm_ssh "$n" "set -e
    hostname $n; echo $n > /etc/hostname; printf '127.0.0.1 localhost\n$hosts' > /etc/hosts
    chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; chmod 755 /usr/local/sbin/gdrprov-healthcheck
    mkdir -p /var/spool/gdrprov-slurmctld /var/spool/slurmd
    cat > /etc/systemd/network/10-segment.network <<EOT
[Match]
MACAddress=${mac[$n]}
[Network]
Address=${addr[$n]}/24
LinkLocalAddressing=no
IPv6AcceptRA=no
EOT
    networkctl reload
    for i in \$(seq 60); do ip -o -4 addr | grep -q ' ${addr[$n]}/' && break; sleep 0.5; done
    ip -o -4 addr | grep -q ' ${addr[$n]}/'
    gdrprov apply /etc/gdrprov/node.yaml --yes >/root/apply.log 2>&1" >/dev/null || fail "$n: set-up failed"
  local nic; nic=$(vm_ssh "$n" "ip -o -4 addr | awk '\$4 == \"${addr[$n]}/24\" {print \$2}'")
  vm_rxe "$n" "$nic" rxe0
}
pids=()
for n in "${nodes[@]}"; do setup "$n" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || fail "a guest's set-up failed (its ssh.log has it)"; done
declare -A nic
for n in "${nodes[@]}"; do nic[$n]=$(vm_ssh "$n" "ip -o -4 addr | awk '\$4 == \"${addr[$n]}/24\" {print \$2}'"); done
# (no ping in the image: a TCP connect to the others' sshd over the segment)
vm_ssh node1 "timeout 10 bash -c '</dev/tcp/node2/22' && timeout 10 bash -c '</dev/tcp/node3/22'" || fail "node1 does not reach node2 and node3 on the segment"
ok "one segment, rxe0 on it in each guest (${addr[node1]}, ${addr[node2]}, ${addr[node3]}); the profile applied"

vm_ssh node1 "systemctl start munge slurmctld" >/dev/null || fail "node1: munge or slurmctld did not start"
for n in "${nodes[@]}"; do vm_ssh "$n" "systemctl start munge slurmd" >/dev/null || fail "$n: munge or slurmd did not start"; done
vm_ssh node1 "for i in \$(seq 120); do [ \"\$(sinfo -h -N -t idle -o %N | sort -u | wc -l)\" = 3 ] && exit 0; sleep 1; done; sinfo -N; exit 1" >/dev/null ||
  fail "the three nodes did not come up idle: $(vm_ssh node1 'sinfo -N -o "%N %T %E"')"
out=$(vm_ssh node1 "srun -N3 hostname | sort | paste -sd' '")
[ "$out" = "node1 node2 node3" ] || fail "srun -N3 hostname: '$out'"
ok "Slurm: slurmctld on node1, slurmd on all three, srun -N3 hostname ran on $out"
cpu_mark "segment, profile, Slurm up"

# The sweep's settings: rxe0, host memory, short runs; the absolute cut in Gb/s (three nodes: the bad one
# is in two of the three pairs, so the median is its own; rxe has no line rate worth the name). The
# relative cut is 0.1 of the median, not 0.93: soft-RoCE under TCG beside another scenario measured one
# good pair at 0.5 of the median (a CI run's sweep 2: a suspect with no fresh partner among three nodes,
# so node3 stayed drained), while the throttled node is ~300x below it.
min_gbps=${GDRPROV_VM_SWEEP_MIN_GBPS:-0.004}
pair_args="--memory host --size 64K --duration 1 --tx-depth 8 --timeout 120"
thresholds="--min-gbps $min_gbps --floor 0 --relative 0.1"
vm_copy_in node1 "$REPO/examples/slurm/gdrprov-sweep.sbatch" /root/gdrprov-sweep.sbatch
vm_copy_in node1 "$REPO/examples/slurm/gdrprov-sweep-submit.sh" /root/gdrprov-sweep-submit.sh
vm_ssh node1 "chmod 755 /root/gdrprov-sweep.sbatch /root/gdrprov-sweep-submit.sh" >/dev/null
sweep_env="GDRPROV=/usr/local/bin/gdrprov PROFILE=/etc/gdrprov/node.yaml RAILS=rxe0 PAIR_ARGS='$pair_args' THRESHOLDS='$thresholds'"

# sweep N SUBMIT [SCRIPT]: submit a sweep from node1 (SUBMIT: sbatch with the batch SCRIPT, or the submit
# script), wait for the job to end (COMPLETED), copy its report out, print the job's output.
sweep() {
  local k=$1 how=$2 script=${3:-} out id state t
  t=$(date +%s)
  out=$(vm_ssh node1 "cd /root && export $sweep_env SWEEP_DIR=/root/sweep$k && $how -N3 --time=20 --output=/root/sweep$k.out $script") ||
    fail "sweep $k: submission failed: $out"
  printf '%s\n' "$out" | sed 's/^/    submit| /'
  id=$(printf '%s\n' "$out" | sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p')
  [ -n "$id" ] || fail "sweep $k: no job id in: $out"
  # (one scontrol every 2 s, its state cut out by the shell: each process in a TCG guest costs ~80 ms of
  # the vCPU that node1's pair runs and the batch script itself need; grep and cut every second were 4 of them)
  state=$(vm_ssh node1 "for i in \$(seq 300); do s=\$(scontrol show job $id -o); s=\${s#*JobState=}; s=\${s%% *}
      case \$s in PENDING|RUNNING|COMPLETING|CONFIGURING) sleep 2 ;; *) echo \$s; exit 0 ;; esac
      [ \$i != 60 ] || [ \$s != PENDING ] || { squeue -j $id -o '%i %T %R' >&2; }
    done; scontrol show job $id >&2; exit 1") || fail "sweep $k: job $id did not end"
  vm_ssh node1 "cat /root/sweep$k.out" | sed "s/^/    sweep$k| /"
  [ "$state" = COMPLETED ] || fail "sweep $k: job $id ended $state"
  # The job's end is not its nodes' end: each goes through COMPLETING (its slurmd reports the job gone),
  # and a node drained while in the job is DRAINING until then. A look right after the job ended saw those
  # (on a faster host than the one this was written on); wait, a minute at most, for the nodes to settle.
  vm_ssh node1 "for i in \$(seq 120); do [[ \$(sinfo -h -N -o %T) =~ completing|draining|allocated|mixed ]] || exit 0; sleep 0.5; done
    sinfo -N -o '%N %T %E' >&2; exit 1" || fail "sweep $k: the nodes did not settle within a minute of job $id's end"
  vm_ssh node1 "cat /root/sweep$k/report.json" > "$VM_RUN_DIR/20-sweep$k-report.json" || fail "sweep $k: no report"
  info "sweep $k: job $id completed in $(vm_since "$t") s"
  # its logs and results, with their times (each pair's listener and client), for the record
  rm -rf "$VM_RUN_DIR/20-sweep$k"; mkdir -p "$VM_RUN_DIR/20-sweep$k"
  vm_ssh node1 "tar -C /root/sweep$k -cf - logs results" | tar -C "$VM_RUN_DIR/20-sweep$k" -xf - || true
}
jq_() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
node_state() { vm_ssh node1 "sinfo -h -N -n $1 -o '%T|%E' | head -1"; }

# Each step in a subshell: a failing step is named at the end, and the steps after it still run
# (one run of this scenario is long under TCG; it should say all it can).
failed=()
# why K: the first FAIL line of step K's output (the summary at the end names it: CI keeps only the tail).
why() { grep -m1 '^FAIL: ' "$VM_RUN_DIR/20-step$1.out" | sed 's/^FAIL: //' | cut -c1-400; }
# 1. node3's link rate-limited (its egress: node3 is the client of both its pairs, sending the data). Not
# the 20 Mbit/s that once looked slow: soft-RoCE between 1-vCPU TCG guests on a loaded host ran at 0.012 to
# 0.035 Gb/s (12-35 Mbit/s), so 20 Mbit/s did not bite; 1 Mbit/s (0.001 Gb/s, or a run that fails) is far
# below both, and the cut of 0.004 Gb/s sits between.
(
vm_ssh node3 "tc qdisc add dev ${nic[node3]} root tbf rate 1mbit burst 32kbit latency 400ms" >/dev/null || fail "tc on node3"
sweep 1 sbatch /root/gdrprov-sweep.sbatch
r=$VM_RUN_DIR/20-sweep1-report.json
info "sweep 1 verdicts: $(jq_ "$r" '"; ".join(v["summary"] for v in r["verdicts"])')"
runs=$(vm_ssh node1 "find /root/sweep1/results -name '*.json' | wc -l")
[ "$runs" -ge 3 ] || fail "sweep 1 ran $runs pairs, fewer than the three of quick mode on three nodes"
vm_ssh node1 "grep -h 'listening on' /root/sweep1/logs/*.listener.err | head -1" | sed 's/^/    listener| /'
[ "$(jq_ "$r" '[v["node"] for v in r["verdicts"] if v["kind"] in ("bad-node", "bad-rail")]')" = "['node3']" ] ||
  fail "sweep 1 did not find node3 alone: $(jq_ "$r" 'r["verdicts"]')"
s3=$(node_state node3)
# (its runs measured a rate below the cut, or failed: the rate limit can break soft-RoCE's retries)
case $s3 in drained\|gdrprov:*rxe0*below\ --min-gbps*with\ 2\ partners*|drained\|gdrprov:*rxe0\ every\ run\ failed\ with\ 2\ partners*) ok "node3 drained by the sweep: ${s3#*|}" ;;
  *) fail "node3 is not drained with the sweep's reason: '$s3'" ;; esac
for n in node1 node2; do
  s=$(node_state $n); [ "${s%%|*}" = idle ] || fail "$n is '$s', not idle"
done
ok "node1 and node2 (good) not drained: idle"

) 2>&1 | tee "$VM_RUN_DIR/20-step1.out" || failed+=("1 (sweep drains node3: $(why 1))")
cpu_mark "step 1 (sweep 1: node3 drained)"

# 2. Fixed; the next sweep (through the submit script: node3 reserved, resumed, tested) keeps it in service.
(
vm_ssh node3 "tc qdisc del dev ${nic[node3]} root" >/dev/null
sweep 2 /root/gdrprov-sweep-submit.sh
r=$VM_RUN_DIR/20-sweep2-report.json
info "sweep 2 verdicts: $(jq_ "$r" '"; ".join(v["summary"] for v in r["verdicts"]) or "none"')"
[ "$(jq_ "$r" '[a["node"] for a in r["slurm"]["resume"]]')" = "['node3']" ] || fail "sweep 2 did not clear node3: $(jq_ "$r" 'r["slurm"]')"
[ "$(jq_ "$r" 'len(r["slurm"]["drain"])')" = 0 ] || fail "sweep 2 drained: $(jq_ "$r" 'r["slurm"]["drain"]')"
for n in "${nodes[@]}"; do
  s=$(node_state "$n"); [ "${s%%|*}" = idle ] || fail "after sweep 2, $n is '$s', not idle"
done
# (the batch script ends the reservation with EndTime=now; slurmctld lets it go on its next pass)
vm_ssh node1 "for i in \$(seq 60); do scontrol show reservation | grep -q State=ACTIVE || exit 0; sleep 0.5; done; exit 1" ||
  fail "the sweep's reservation is still active 30 s after the sweep: $(vm_ssh node1 'scontrol show reservation')"
ok "node3 fixed: the next sweep tested it (reserved, resumed, in the job) and it is back in service; the reservation has ended"

) 2>&1 | tee "$VM_RUN_DIR/20-step2.out" || failed+=("2 (the next sweep resumes node3: $(why 2))")
cpu_mark "step 2 (sweep 2: node3 resumed)"

# hc_conf real|idle: the health check's settings on the three nodes (read by each run at its start).
hc_conf() {
  local conf=$cfg/healthcheck.conf n p pids=()
  [ "$1" = real ] || conf=$cfg/healthcheck-idle.conf
  for n in "${nodes[@]}"; do vm_copy_in "$n" "$conf" /etc/default/gdrprov-healthcheck & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || fail "the health check's settings ($1) not copied in"; done
}

# 3. The health check: a module the profile blocks loaded by hand (insmod, past modprobe.d) on node2.
(
hc_conf real
# shellcheck disable=SC2016 # the guest's shell expands it
vm_ssh node2 'insmod $(modinfo -n dummy)' >/dev/null || fail "node2: insmod dummy"
t=$(date +%s)
vm_ssh node1 "for i in \$(seq $((interval * 3))); do [[ \$(sinfo -h -N -n node2 -o %T) = *drain* ]] && exit 0; sleep 1; done; exit 1" >/dev/null ||
  fail "node2 not drained within $((interval * 3)) s of loading dummy: $(node_state node2)"
dt=$(vm_since "$t"); s=$(node_state node2)
case $s in *\|gdrprov:\ verify*modules*) ;; *) fail "node2's drain reason: '$s'" ;; esac
[ "$dt" -le $((interval + 15)) ] || fail "node2 drained after $dt s, more than one interval ($interval s) and 15 s"
ok "the health check drained node2 $dt s after dummy was loaded (interval $interval s): ${s#*|}"
vm_ssh node2 "gdrprov apply /etc/gdrprov/node.yaml --yes" | sed 's/^/    apply| /'
t=$(date +%s)
vm_ssh node1 "for i in \$(seq $((interval * 3))); do [[ \$(sinfo -h -N -n node2 -o %T) = *drain* ]] || exit 0; sleep 1; done; exit 1" >/dev/null ||
  fail "node2 not resumed within $((interval * 3)) s of gdrprov apply: $(node_state node2)"
dt=$(vm_since "$t")
[ "$dt" -le $((interval + 15)) ] || fail "node2 resumed after $dt s, more than one interval and 15 s"
ok "after gdrprov apply (dummy unloaded) the health check resumed node2 in $dt s: $(node_state node2)"

) 2>&1 | tee "$VM_RUN_DIR/20-step3.out" || failed+=("3 (health check: $(why 3))")
hc_conf idle
cpu_mark "step 3 (health check)"

# 4. The same sweep through the Ansible example, from the host over ssh, node3 slow again.
(
vm_ssh node3 "tc qdisc add dev ${nic[node3]} root tbf rate 1mbit burst 32kbit latency 400ms" >/dev/null || fail "tc on node3"
ans=$VM_RUN_DIR/20-ansible; rm -rf "$ans"; mkdir -p "$ans"
{
  echo "[gpu_nodes]"
  for n in "${nodes[@]}"; do echo "$n ansible_host=127.0.0.1 ansible_port=$(cat "$(vm_gdir "$n")/port") sweep_addr=${addr[$n]}"; done
  echo "[gpu_nodes:vars]"
  echo "ansible_user=root"
  echo "ansible_ssh_private_key_file=$(cat "$(vm_gdir node1)/image")/id_ed25519"
  echo "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'"
  echo "ansible_python_interpreter=/usr/bin/python3"
} > "$ans/inventory.ini"
cat > "$ans/vars.json" <<JSON
{"gdrprov_bin": "/usr/local/bin/gdrprov", "gdrprov_local": "$GDRPROV_BIN", "sweep_dir": "$ans/sweep",
 "sweep_profile": "/etc/gdrprov/node.yaml", "sweep_rails": "rxe0", "sweep_pair_args": "$pair_args",
 "sweep_thresholds": "$thresholds"}
JSON
t=$(date +%s)
rc=0
ANSIBLE_LOG_PATH=$ans/ansible.log ANSIBLE_STDOUT_CALLBACK=default ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_PIPELINING=1 ANSIBLE_FORKS=3 ANSIBLE_HOST_KEY_CHECKING=false \
  timeout 900 "$playbook" -i "$ans/inventory.ini" "$REPO/examples/ansible/sweep.yml" -e "@$ans/vars.json" > "$ans/out.txt" 2>&1 || rc=$?
grep -E '^(PLAY RECAP|node|localhost)' "$ans/out.txt" | tail -5 | sed 's/^/    ansible| /'
[ "$rc" = 0 ] || { tail -40 "$ans/out.txt"; fail "ansible-playbook sweep.yml: exit $rc"; }
r=$ans/sweep/report.json
info "ansible sweep ($(vm_since "$t") s): $(jq_ "$r" '"; ".join(v["summary"] for v in r["verdicts"])')"
[ "$(jq_ "$r" '[v["node"] for v in r["verdicts"] if v["kind"] in ("bad-node", "bad-rail")]')" = "['node3']" ] ||
  fail "the Ansible sweep did not find node3 alone: $(jq_ "$r" 'r["verdicts"]')"
[ "$(jq_ "$r" '[a["node"] for a in r["slurm"]["drain"]]')" = "['node3']" ] || fail "the Ansible sweep's report would not drain node3"
ok "the Ansible sweep (sweep.yml from the host over ssh) found node3: $(jq_ "$r" '[v["summary"] for v in r["verdicts"]][0]')"
vm_ssh node3 "tc qdisc del dev ${nic[node3]} root" >/dev/null || true
) 2>&1 | tee "$VM_RUN_DIR/20-step4.out" || failed+=("4 (Ansible sweep: $(why 4))")
cpu_mark "step 4 (Ansible sweep)"

for n in "${nodes[@]}"; do vm_poweroff "$n" & done
wait
[ ${#failed[@]} = 0 ] || fail "steps failed: ${failed[*]}"
