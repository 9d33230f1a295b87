#!/bin/bash
# The readiness checks of issue 19 on the GPU device machine, in one run:
#   bench/device-health.sh [GDRPROV]
# bench copy (text and JSON), the comparison with the CUDA driver-API
# reference (bench/compare-copy.sh), NVML's view (gdrprov verify's gpu-health
# beside nvidia-smi's own ECC/row-remapping/retired-pages report), inventory's
# PCIe links and the whole verify.
B=${1:-.devbin/gdrprov}
HERE=$(cd "$(dirname "$0")" && pwd)
run() { echo; echo "\$ $*"; "$@"; echo "[exit $?]"; }
echo "== host"; date -u; uname -r
run nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.max,pcie.link.gen.current,pcie.link.width.max,pcie.link.width.current,persistence_mode --format=csv
echo; echo "== PCIe links (inventory)"
"$B" inventory | sed -n '/^PCIe links:/,/^[A-Z]/p'
echo; echo "== bench copy"
run "$B" bench copy
run "$B" --format json bench copy --runs 5
echo; echo "== gdrprov against the CUDA driver-API reference, same GPU, alternating"
run bash "$HERE/compare-copy.sh" "$B" 0 10 3
echo; echo "== NVML: gdrprov's gpu-health beside nvidia-smi"
run nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT
echo; echo "== verify (the profile's configuration checks fail on an unconfigured host; the readiness checks are what this run is for)"
run "$B" verify rdma-dmabuf --no-loopback
run "$B" --format json verify rdma-dmabuf --no-loopback
run "$B" --format prometheus verify rdma-dmabuf --no-loopback
run "$B" doctor
