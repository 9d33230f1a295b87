#!/bin/bash
# Issue 47, the per-GPU P2PDMA facts on the lent GPU machine: the kernel's view (the GPU's
# p2pmem/ in sysfs, which `inventory` says per GPU and doctor's gds-p2pmem reads) and cuFile's
# own answer (`bench gds` has cuFile log at DEBUG into a private directory and reads its
# per-GPU PCIP2PDMACapable and pci_p2pdma_supported_cuda). So that cuFile opens the test file,
# the disk's udev record is written BY THIS SCRIPT under /run/udev/data (as bench/device-gds.sh
# does, as a container gets it from the host; gdrprov never writes one).
# Usage on the device, from the repository root: GDRPROV=devbin/g3/gdrprov OUT=dir bash bench/device-gds-p2pdma.sh
exec > >(tee "$OUT/log.txt") 2>&1
G=$(realpath "$GDRPROV"); D=/var/tmp/gdrprov-gds; mkdir -p "$D"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -e /run/udev/.gdrprov-test-made ] && rm -rf /run/udev   # a warm machine from an earlier run
echo "== machine"; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv; uname -r; uptime
ldconfig -p | grep -i cufile; grep -i registry /proc/driver/nvidia/params
grep -E 'P2PDMA' "/boot/config-$(uname -r)" 2>&1
echo "== the kernel's view: p2pmem/ of each NVIDIA PCI function"
for d in /sys/bus/pci/devices/*; do
  [ "$(cat "$d/vendor")" = 0x10de ] || continue
  echo "$d: $(ls -d "$d/p2pmem" 2>&1)"; for f in size available published; do [ -e "$d/p2pmem/$f" ] && echo "  $f $(cat "$d/p2pmem/$f")"; done
done
echo "== inventory"
$G inventory | grep -A1 -E '^  [0-9a-f]{4}:'; $G inventory --format json > "$OUT/inventory.json"; echo "inventory rc=$?"
echo "== bench gds as it is (cuFile refuses the file: no udev record)"
$G bench gds --dir "$D" --size 64M; echo "bench gds rc=$?"
echo "== the udev record for the disk, written by this script"
DEV=$(grep -E ' / / ' /proc/self/mountinfo | tail -1 | awk '{print $3}')
FST=$(findmnt -no FSTYPE /)
[ -d /run/udev ] || { mkdir -p /run/udev/data; touch /run/udev/.gdrprov-test-made; }; mkdir -p /run/udev/data
printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$FST" > "/run/udev/data/b$DEV"; echo "wrote /run/udev/data/b$DEV ($FST)"
$G bench gds --dir "$D" --size 64M; echo "bench gds rc=$?"
$G bench gds --dir "$D" --size 64M --format json > "$OUT/bench-gds.json"; echo "bench gds json rc=$?"
ls -la "$D"   # cuFile's private log directory is gone
$G doctor gds-iommu-off; echo "doctor rc=$?"
$G doctor gds-iommu-off --format json > "$OUT/doctor.json"
$G verify gds-iommu-off --no-loopback; echo "verify rc=$?"
[ -e /run/udev/.gdrprov-test-made ] && rm -rf /run/udev
uptime
