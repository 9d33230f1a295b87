#!/bin/bash
# Issue 46: what the PCIe-path facts read, taken on the GPU device machine, read only (nothing is written to
# config space). Copies, for every PCI device, the sysfs attributes the probes read (config space, the resource
# table, resizable-BAR files; never the resourceN BAR files themselves), the NVIDIA driver's parameters and the
# module options that set them, and nvidia-smi's BAR1 figures to check them against.
#   bash tests/device/pcie-capture.sh OUTDIR [GDRPROV]     (run on the device machine, as root)
set -u
OUT=${1:?OUTDIR}
B=${2:-}
T="$OUT/tree"
mkdir -p "$T"
for d in /sys/bus/pci/devices/*; do
  a=$(basename "$d")
  real=$(readlink -f "$d")
  mkdir -p "$T$real"
  for f in config resource class vendor device subsystem_vendor subsystem_device numa_node \
           current_link_speed current_link_width max_link_speed max_link_width resource*_resize; do
    [ -f "$d/$f" ] || continue
    if [ "$f" = config ]; then dd if="$d/config" of="$T$real/config" bs=4096 count=1 status=none
    else cat "$d/$f" > "$T$real/$f" 2>/dev/null; fi
  done
  if [ -e "$d/driver" ]; then echo "$a driver $(basename "$(readlink -f "$d/driver")")"; fi
  echo "$a config $(stat -c %s "$T$real/config" 2>/dev/null) bytes"
done > "$OUT/pci-list.txt"
mkdir -p "$T/proc/driver/nvidia" "$T/sys/module/nvidia"
cp /proc/driver/nvidia/params /proc/driver/nvidia/version "$T/proc/driver/nvidia/" 2>/dev/null
cp -r /sys/module/nvidia/parameters "$T/sys/module/nvidia/" 2>/dev/null
cp /proc/cmdline "$T/proc/" 2>/dev/null
mkdir -p "$T/etc"; cp -r /etc/modprobe.d "$T/etc/" 2>/dev/null
{ echo "== modprobe -c (nvidia)"; modprobe -c 2>/dev/null | grep -i nvidia
  echo "== nvidia-smi -q -d MEMORY"; nvidia-smi -q -d MEMORY
  echo "== nvidia-smi -q (PCI and BAR1)"; nvidia-smi -q | grep -i -A4 -E "^ *(PCI|BAR1 Memory Usage)$"
  echo "== lspci -vvv"; lspci -vvv 2>&1 | head -400
  echo "== resource tables"; for d in /sys/bus/pci/devices/*; do echo "-- $d"; cat "$d/resource"; done
} > "$OUT/tools.txt" 2>&1
if [ -n "$B" ]; then
  { echo "\$ gdrprov inventory"; "$B" inventory; echo "[exit $?]"
    rm -rf /tmp/snap; "$B" inventory --snapshot /tmp/snap; echo "[snapshot exit $?]"
    echo "\$ gdrprov inventory --root /tmp/snap"; "$B" inventory --root /tmp/snap; echo "[exit $?]"
    "$B" --format json inventory > "$OUT/inventory.json"; "$B" --format json inventory --root /tmp/snap > "$OUT/inventory-snap.json"
    cmp <(grep -v '"root"' "$OUT/inventory.json") <(grep -v '"root"' "$OUT/inventory-snap.json") && echo "snapshot replays the same inventory"
    for p in rdma-dmabuf legacy-peermem; do echo "\$ gdrprov verify $p"; "$B" verify "$p" --no-loopback; echo "[exit $?]"; done
    echo "\$ gdrprov verify rdma-dmabuf --root /tmp/snap"; "$B" verify rdma-dmabuf --no-loopback --root /tmp/snap; echo "[exit $?]"
    echo "\$ gdrprov doctor rdma-dmabuf"; "$B" doctor rdma-dmabuf; echo "[exit $?]"
    tar -C /tmp -czf "$OUT/snap.tgz" snap
  } > "$OUT/gdrprov.txt" 2>&1
fi
tar -C "$OUT" -czf "$OUT/tree.tgz" tree && rm -rf "$T"
ls -la "$OUT"
