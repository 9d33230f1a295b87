#!/usr/bin/env bash
# Seconds: 77
# Scenario: the readiness checks of issue 19 on a running host: rdma-ports on a real soft-RoCE port (ACTIVE,
# RoCE v2 GID with the guest's IPv4), kernel-log read from the live ring buffer (/dev/kmsg) and failing on an
# Xid 79 line written into it, the GPU checks skipped with their reasons (no GPU, no libcuda, no NVML); doctor
# reports the same kernel-log error
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
