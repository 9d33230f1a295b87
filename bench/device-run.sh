#!/bin/bash
# gdrprov bench evidence on the device machine (GPU, no RDMA NIC).
B=${1:-.devbin/gdrprov}
run() { echo; echo "\$ $*"; "$@"; echo "[exit $?]"; }
echo "== host facts"; date -u; uname -r; grep PRETTY /etc/os-release
run nvidia-smi
run cat /proc/driver/nvidia/version
run modinfo -F license nvidia
echo; echo "\$ ldconfig -p | grep -E 'libibverbs|libcuda.so'"; ldconfig -p | grep -E 'libibverbs|libcuda.so'
echo; echo "\$ ls /sys/class/infiniband"; ls /sys/class/infiniband 2>&1
echo; echo "\$ lsmod | grep -E 'nvidia|ib_|rdma|mlx'"; lsmod 2>/dev/null | grep -E 'nvidia|ib_|rdma|mlx'
echo; echo "\$ ldd $B"; ldd "$B"
echo; echo "== gdrprov bench, no RDMA device"
run $B bench probe
run $B bench loopback --memory cuda-dmabuf
run $B bench loopback --memory cuda-dmabuf --export-only
run $B --format json bench loopback --memory cuda-dmabuf --export-only --size 64K
run $B bench loopback
run $B bench loopback --memory cuda-peermem
run $B bench loopback --memory host
run $B bench loopback --memory cuda-dmabuf --gpu 7
echo; echo "== soft-RoCE on this machine, if the kernel has rdma_rxe"
if modprobe rdma_rxe 2>&1; then
  NIC=$(ip -o -4 route show to default 2>/dev/null | awk '{print $5; exit}'); [ -n "$NIC" ] || NIC=$(ip -o -4 addr show scope global | awk '{print $2; exit}')
  echo "netdev: $NIC"; command -v rdma && rdma link add rxe0 type rxe netdev "$NIC" 2>&1; ls /sys/class/infiniband
  run $B bench probe
  run $B bench loopback --memory host --size 64K,1M,8M --duration 3
  run $B --format json bench loopback --memory host --size 1M --iters 2000
  run $B bench loopback --memory cuda-dmabuf --size 1M --duration 1
  run $B bench loopback --memory cuda-peermem --size 1M --duration 1
  run $B bench loopback --memory host --qps 4 --size 1M --duration 2
  rdma link delete rxe0 2>/dev/null
else echo "no rdma_rxe module"; fi
