#!/usr/bin/env bash
# Seconds: 127
# Scenario: the readiness checks of issue 19 on a running host: rdma-ports on a real soft-RoCE port (ACTIVE,
# RoCE v2 GID with the guest's IPv4), kernel-log read from the live ring buffer (/dev/kmsg) and failing on an
# Xid 79 line written into it, the GPU checks skipped with their reasons (no GPU, no libcuda, no NVML); doctor
# reports the same kernel-log error. Issue 48: the RoCE port's MTU (1500-byte netdev: rxe runs 1024) and GID
# (NCCL_IB_GID_INDEX on a link-local GID) named by verify and doctor, then fixed; `verify --in-job` in real
# job contexts: a unit with LimitMEMLOCK=64K and no CAP_IPC_LOCK, a mount namespace that hides
# /dev/infiniband, an NCCL_IB_HCA naming an absent HCA, each named with its fix, and ready when all is given.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov bench copy

g=health
vm_fresh $g
nic=$(vm_nic $g)
vm_rxe $g "$nic" rxe0
ip=$(vm_ssh $g "ip -o -4 addr show dev $nic | awk '{print \$4}' | cut -d/ -f1")
gidx=$(vm_rxe_gid_index $g rxe0 "$ip")

verify_json() { vm_ssh $g "gdrprov --format json verify rdma-dmabuf --no-loopback" || true; }
field() { # field JSON CHECK KEY
  printf '%s' "$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)
c = [c for c in r["checks"] if c["name"] == sys.argv[1]][0]
print(c[sys.argv[2]])' "$2" "$3"
}

j=$(verify_json)
printf '%s\n' "$j" > "$VM_RUN_DIR/12-verify-before.json"
[ "$(field "$j" rdma-ports status)" = pass ] || fail "rdma-ports: $(field "$j" rdma-ports detail)"
d=$(field "$j" rdma-ports detail)
printf '%s' "$d" | grep -q "rxe0:1 ACTIVE Ethernet (RoCE)" || fail "rdma-ports detail: $d"
printf '%s' "$d" | grep -q "GID $gidx ::ffff:$ip" || fail "rdma-ports names no GID $gidx ::ffff:$ip: $d"
ok "rdma-ports: $d"
d=$(field "$j" kernel-log detail)
printf '%s' "$d" | grep -q '^/dev/kmsg (' || fail "kernel-log did not read /dev/kmsg: $d"
[ "$(field "$j" kernel-log status)" = pass ] || fail "kernel-log before the Xid: $d"
ok "kernel-log from the live ring buffer: $d"
for c in copy-bandwidth gpu-health pcie-links gpu-nic-affinity; do
  [ "$(field "$j" $c status)" = skip ] || fail "$c is not skipped without a GPU: $(field "$j" $c detail)"
  info "$c skipped: $(field "$j" $c detail)"
done
printf '%s' "$(field "$j" gpu-health detail)" | grep -q 'libnvidia-ml.so.1' || fail "gpu-health does not name libnvidia-ml.so.1"

# bench copy without libcuda: an error naming it, no panic.
rc=0; out=$(vm_ssh $g "gdrprov bench copy" 2>&1) || rc=$?
{ [ "$rc" != 0 ] && [ "$rc" != 101 ]; } || fail "bench copy without libcuda: exit $rc: $out"
printf '%s' "$out" | grep -q libcuda || fail "bench copy does not name libcuda: $out"
ok "bench copy without libcuda: exit $rc, $(printf '%s' "$out" | head -1)"

# A line as the NVIDIA driver prints it, written into the kernel ring buffer at KERN_ERR.
vm_ssh $g "echo '<3>NVRM: Xid (PCI:0000:00:05): 79, pid=4242, name=health-test, GPU has fallen off the bus.' > /dev/kmsg"
j=$(verify_json)
printf '%s\n' "$j" > "$VM_RUN_DIR/12-verify-after.json"
d=$(field "$j" kernel-log detail)
[ "$(field "$j" kernel-log status)" = fail ] || fail "kernel-log does not fail after Xid 79: $d"
printf '%s' "$d" | grep -q 'fatal Xid error(s) (79)' || fail "kernel-log detail: $d"
[ "$(printf '%s' "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ready"])')" = False ] || fail "verify is ready with a fatal Xid"
ok "kernel-log after the Xid: $d"
vm_ssh $g "gdrprov --format prometheus verify rdma-dmabuf --no-loopback" > "$VM_RUN_DIR/12-metrics.txt" || true
grep -q 'gdrprov_check_ok{check="kernel-log",.*} 0' "$VM_RUN_DIR/12-metrics.txt" || fail "metrics: no kernel-log 0"
ok "metrics: gdrprov_check_ok{check=\"kernel-log\"} 0"
rc=0; vm_ssh $g "gdrprov --format json doctor" > "$VM_RUN_DIR/12-doctor.json" || rc=$?
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
f = [f for f in r["findings"] if f["id"] == "kernel-log"]
sys.exit(0 if f and f[0]["severity"] == "error" else 1)' "$VM_RUN_DIR/12-doctor.json" || fail "doctor has no kernel-log error (exit $rc)"
ok "doctor: kernel-log error finding (exit $rc)"

# Issue 48: the RoCE fabric on the real rxe port. The user-mode NIC has MTU 1500, so rxe runs 1024; and
# NCCL_IB_GID_INDEX names the port's link-local GID. One verify and one doctor name both; then fixed, both pass.
ll=$(vm_ssh $g "cd /sys/class/infiniband/rxe0/ports/1 && for i in \$(seq 0 15); do case \$(cat gids/\$i 2>/dev/null) in fe80:*) echo \$i; exit 0;; esac; done; exit 1") ||
  fail "rxe0 has no link-local GID"
vm_ssh $g "echo NCCL_IB_GID_INDEX=$ll > /etc/nccl.conf"
j=$(verify_json)
printf '%s\n' "$j" > "$VM_RUN_DIR/12-verify-roce.json"
d=$(field "$j" roce-mtu detail)
[ "$(field "$j" roce-mtu status)" = warn ] || fail "roce-mtu on a 1500-byte netdev: $d"
# verify runs no command: the active MTU is the kernel's from the netdev's; doctor asks ibv_devinfo.
printf '%s' "$d" | grep -q "rxe0:1 active MTU (from the network device's) 1024 of 4096, network device $nic MTU 1500" ||
  fail "roce-mtu detail: $d"
ok "roce-mtu names the 1500-byte netdev: $d"
d=$(field "$j" roce-gid detail)
[ "$(field "$j" roce-gid status)" = fail ] || fail "roce-gid with the link-local GID $ll: $d"
printf '%s' "$d" | grep -q "routable: $gidx ::ffff:$ip" || fail "roce-gid does not name the routable GID $gidx: $d"
ok "roce-gid: NCCL_IB_GID_INDEX=$ll (link-local) fails: $d"
vm_ssh $g "gdrprov --format json doctor" > "$VM_RUN_DIR/12-doctor-roce.json" || true
finding() { python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print([f["severity"] + " " + f["evidence"] for f in r["findings"] if f["id"] == sys.argv[2]][0])' "$VM_RUN_DIR/12-doctor-roce.json" "$1"; }
e=$(finding roce-mtu) || fail "doctor has no roce-mtu finding"
case $e in "warn rxe0:1 active MTU 1024 of 4096, network device $nic MTU 1500"*) ;; *) fail "doctor roce-mtu: $e";; esac
ok "doctor roce-mtu, the port's active MTU from ibv_devinfo: $e"
e=$(finding roce-gid) || fail "doctor has no roce-gid finding"
case $e in "error NCCL_IB_GID_INDEX=$ll (/etc/nccl.conf)"*) ;; *) fail "doctor roce-gid: $e";; esac
ok "doctor roce-gid: $e"
vm_ssh $g "ip link set dev $nic mtu 9000 && echo NCCL_IB_GID_INDEX=$gidx > /etc/nccl.conf"
j=$(verify_json)
vm_ssh $g "ip link set dev $nic mtu 1500 && rm -f /etc/nccl.conf"
[ "$(field "$j" roce-mtu status)" = pass ] || fail "roce-mtu at MTU 9000: $(field "$j" roce-mtu detail)"
[ "$(field "$j" roce-gid status)" = pass ] || fail "roce-gid with GID $gidx: $(field "$j" roce-gid detail)"
ok "at MTU 9000 with NCCL_IB_GID_INDEX=$gidx: $(field "$j" roce-mtu detail); $(field "$j" roce-gid detail)"

# verify --in-job, in real job contexts. check_of OUT NAME: the status of the in-job check NAME.
injob() { vm_ssh $g "$1" || true; }
check_of() { printf '%s' "$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print([c["status"] + " " + c["detail"] for c in r["checks"] if c["name"] == sys.argv[1]][0])' "$2"; }
j=$(injob "gdrprov --format json verify --in-job")
printf '%s\n' "$j" > "$VM_RUN_DIR/12-in-job.json"
for c in job-memlock job-rdma-devices job-rdma-provider; do
  case $(check_of "$j" $c) in pass*) ;; *) fail "in-job $c over ssh: $(check_of "$j" $c)";; esac
done
ok "in-job over ssh: $(check_of "$j" job-rdma-devices); $(check_of "$j" job-rdma-provider)"
j=$(injob "systemd-run --quiet --wait --pipe -p LimitMEMLOCK=64K -p CapabilityBoundingSet=~CAP_IPC_LOCK gdrprov --format json verify --in-job")
printf '%s\n' "$j" > "$VM_RUN_DIR/12-in-job-memlock.json"
r=$(check_of "$j" job-memlock)
case $r in "fail the job's locked-memory limit is 64 KiB"*) ;; *) fail "in-job under LimitMEMLOCK=64K: $r";; esac
ok "in-job in a unit with LimitMEMLOCK=64K and no CAP_IPC_LOCK: $r"
j=$(injob "unshare -m sh -c 'mount -t tmpfs none /dev/infiniband && gdrprov --format json verify --in-job'")
printf '%s\n' "$j" > "$VM_RUN_DIR/12-in-job-nodev.json"
r=$(check_of "$j" job-rdma-devices)
case $r in "fail the job cannot open rxe0 (its /dev/infiniband/uverbs"*) ;; *) fail "in-job without /dev/infiniband: $r";; esac
ok "in-job in a mount namespace without /dev/infiniband: $r"
j=$(injob "NCCL_IB_HCA=mlx5_0,rxe0:1 gdrprov --format json verify --in-job")
r=$(check_of "$j" job-nccl-hca)
case $r in "fail NCCL_IB_HCA=mlx5_0,rxe0:1 (environment): mlx5_0: no such RDMA device"*) ;; *) fail "in-job NCCL_IB_HCA: $r";; esac
ok "in-job with NCCL_IB_HCA naming an absent HCA: $r"
rc=0; vm_ssh $g "NCCL_IB_HCA=rxe0 gdrprov verify --in-job" > "$VM_RUN_DIR/12-in-job-ready.txt" || rc=$?
[ "$rc" = 0 ] || fail "verify --in-job with everything given: exit $rc: $(cat "$VM_RUN_DIR/12-in-job-ready.txt")"
ok "verify --in-job with everything given: ready (exit 0)"
