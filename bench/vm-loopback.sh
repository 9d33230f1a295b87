#!/bin/bash
# Boot a Debian guest of the VM testbed (tests/vm), add a soft-RoCE device, and run gdrprov bench in it:
# the probe, a loopback in host memory with the data check, the error paths, and the comparison with
# ib_write_bw. Prints everything; exit status of the comparison.
#
# usage: bench/vm-loopback.sh [GDRPROV_BIN] [DURATION_SECS]
# env:   VM_LIB (default tests/vm/lib.sh of this checkout), VM_RUN_DIR (default a temp dir)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
BIN=$(readlink -f "${1:-$repo/target/release/gdrprov}")
DUR=${2:-5}
VM_LIB=${VM_LIB:-$repo/tests/vm/lib.sh}
[ -f "$VM_LIB" ] || { echo "no VM testbed library at $VM_LIB (set VM_LIB)" >&2; exit 2; }
export VM_RUN_DIR=${VM_RUN_DIR:-$(mktemp -d /tmp/gdrprov-bench-vm.XXXXXX)}
# shellcheck source=/dev/null
source "$VM_LIB"
vm_trap
vm_start bench
g=bench
vm_copy_in $g "$BIN" /usr/local/bin/gdrprov
vm_copy_in $g "$here/compare-ib-write-bw.sh" /usr/local/bin/compare-ib-write-bw.sh
vm_ssh $g 'chmod +x /usr/local/bin/gdrprov /usr/local/bin/compare-ib-write-bw.sh'
run() { echo; echo "guest\$ $*"; vm_ssh $g "$*" || echo "[exit $?]"; }
run 'uname -r; grep PRETTY /etc/os-release; dpkg -l perftest rdma-core | tail -2; nproc'
run 'gdrprov bench probe'
nic=$(vm_nic $g)
vm_rxe $g "$nic" rxe0
run 'rdma link show; ibv_devinfo -d rxe0 | grep -E "state|link_layer|active_mtu"; cat /sys/class/infiniband/rxe0/ports/1/rate; ulimit -l'
run 'gdrprov bench probe'
run "gdrprov bench loopback --device rxe0 --size 64K,1M,8M --duration $DUR"
run 'gdrprov --format json bench loopback --size 1M --iters 200 --qps 2'
run 'gdrprov bench loopback --memory cuda-dmabuf --duration 1'
run 'gdrprov bench loopback --device rxe0:2'
run 'gdrprov bench loopback --device mlx5_0'
run 'gdrprov bench loopback --min-gbps 1000 --size 64K --duration 1'
echo; echo "guest\$ compare-ib-write-bw.sh /usr/local/bin/gdrprov rxe0 $DUR"
set +e
vm_ssh $g "ROUNDS=${ROUNDS:-1} compare-ib-write-bw.sh /usr/local/bin/gdrprov rxe0 $DUR"
rc=$?
vm_poweroff $g >/dev/null 2>&1
exit $rc
