#!/bin/bash
# `gdrprov bench pair` on the GPU device machine (one GPU, no RDMA NIC): how far the GPU path goes.
#   bench/device-pair.sh [GDRPROV]
# Each end opens the GPU first (no RDMA device needed), allocates GPU memory and, for cuda-dmabuf,
# exports it as a dma-buf; then it needs an RDMA port, and there the missing NIC stops it with its
# error. Where the kernel has rdma_rxe, a soft-RoCE device stands in and a real pair runs on this host
# (listener and client over rxe0): host memory passes; GPU memory then stops at the registration
# (rxe has no dma-buf MRs; cuda-peermem needs nvidia_peermem), with the error naming it at both ends.
B=${1:-.devbin/gdrprov}
run() { echo; echo "\$ $*"; "$@"; echo "[exit $?]"; }
export GDRPROV_PAIR_TOKEN=device-pair-secret-0123456789
echo "== host"; date -u; uname -r
run nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv
head -1 /proc/driver/nvidia/version
echo; echo "\$ ls /sys/class/infiniband"; ls /sys/class/infiniband 2>&1
echo; echo "== both ends without an RDMA device: GPU allocation and dma-buf export, then the missing NIC"
run "$B" bench pair --listen 127.0.0.1 --memory cuda-dmabuf --timeout 20
run "$B" bench pair --listen 127.0.0.1 --memory cuda-peermem --timeout 20
run "$B" bench pair 127.0.0.1 --memory cuda-dmabuf --timeout 20
run "$B" --format json bench pair --listen 127.0.0.1 --memory cuda-dmabuf --timeout 20
run "$B" bench pair --listen 127.0.0.1 --memory cuda-dmabuf --gpu 7 --timeout 20
run "$B" bench pair --listen 127.0.0.1 --memory host --timeout 20
echo; echo "== a client with no listener: named, within the limit"
run "$B" bench pair 127.0.0.1 --port 9 --timeout 10
echo; echo "== soft-RoCE on this machine, if the kernel has rdma_rxe"
if modprobe rdma_rxe 2>&1; then
  NIC=$(ip -o -4 route show to default 2>/dev/null | awk '{print $5; exit}'); [ -n "$NIC" ] || NIC=$(ip -o -4 addr show scope global | awk '{print $2; exit}')
  rdma link add rxe0 type rxe netdev "$NIC" 2>&1; sleep 2
  for mem in host cuda-dmabuf cuda-peermem; do
    echo; echo "\$ gdrprov bench pair --listen --memory $mem & gdrprov bench pair ADDR --memory $mem"
    "$B" bench pair --listen --device rxe0 --memory "$mem" --timeout 60 > /tmp/dp-l.out 2>&1 &
    l=$!; sleep 2
    addr=$(sed -n 's/^listening on \([^ ]*\) .*/\1/p' /tmp/dp-l.out)
    "$B" bench pair "$addr" --device rxe0 --memory "$mem" --size 64K,1M --duration 2 --timeout 60; echo "[client exit $?]"
    wait "$l"; echo "[listener exit $?]"; sed 's/^/    listener| /' /tmp/dp-l.out
  done
  rdma link delete rxe0 2>/dev/null
else echo "no rdma_rxe module: the pair itself cannot run here"; fi
