#!/bin/bash
# Issue 47 on the lent GPU machine: `gdrprov bench gds` on the host as it is (cuFile refuses every
# file: no udev database), then with a udev record for the disk written BY THIS SCRIPT under
# /run/udev/data (as a container gets it from the host; gdrprov never writes one), beside KvikIO
# (PyPI wheels kvikio-cu13 + libkvikio-cu13, unpacked, no pip) through cuFile
# (KVIKIO_COMPAT_MODE=OFF) and through its own POSIX path (ON): 1 GiB and 4 GiB, cold and warm,
# 3 alternating rounds. Snapshots before and after for the fixtures.
# Both tools read the SAME file per size (gdrprov through `bench gds --file`), made once before
# the rounds; the order of the two alternates per round (odd: gdrprov first; even: KvikIO first).
# With TRACE=path/to/cuda-trace.so (bench/cuda-trace.c) it also logs the CUDA driver calls
# libcufile makes, to find the per-GPU P2PDMA question cuFile asks.
# Usage on the device, from the repository root: GDRPROV=devbin/g2/gdrprov WHEELS=devbin/g2/wheels \
#   [TRACE=devbin/g2/cuda-trace.so] OUT=dir bash bench/device-gds.sh [quick]
R_OUT="$OUT"; OUT=/tmp/gds-out; rm -rf "$OUT"; mkdir -p "$OUT"   # one tarball comes back (the device returns few files)
trap 'tar -C /tmp -czf "$R_OUT/results.tgz" gds-out; cp "$OUT/log.txt" "$R_OUT/"' EXIT
trap "exit 143" TERM
exec > >(tee "$OUT/log.txt") 2>&1
G=$(realpath "$GDRPROV"); D=/var/tmp/gdrprov-gds; mkdir -p "$D"
KV="$(dirname "$(realpath "$0")")/gds-kvikio.py"
# cuFile at DEBUG, its log kept: a copy of cufile.json with logging.level raised.
python3 -c "import re,sys; t=open('/etc/cufile.json').read(); open(sys.argv[1],'w').write(re.sub(r'(\"level\"\s*:\s*)\"[A-Z]+\"', r'\1\"DEBUG\"', t, count=1))" /tmp/cufile-debug.json
debug_run() { (cd /tmp && rm -f cufile.log && CUFILE_ENV_PATH_JSON=/tmp/cufile-debug.json "$@"; echo "rc=$?"; cp cufile.log "$OUT/cufile-$TAG.log" 2>/dev/null); }
snap() { $G inventory --snapshot "/tmp/$1" > /dev/null; echo "snapshot rc=$?"; tar -C /tmp -czf "$OUT/$1.tgz" "$1"; }
[ -e /run/udev/.gdrprov-test-made ] && rm -rf /run/udev   # a warm machine from an earlier run
echo "== machine"; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv; uptime; nproc; python3 --version
ldconfig -p | grep -i cufile; ls -la /etc/cufile.json; readlink -f /etc/cufile.json; ls -d /run/udev 2>&1
grep -E ' / ' /proc/self/mountinfo; grep -E '^(nvidia|nvme)' /proc/modules | cut -d' ' -f1; ls /sys/class/nvme 2>&1
grep -E 'P2PDMA' "/boot/config-$(uname -r)" 2>&1; grep -c p2pdma_pgmap_ops /proc/kallsyms
grep -i registry /proc/driver/nvidia/params
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "== A: as it is"
snap snap-asis
$G bench gds --dir "$D" --size 64M; echo "bench gds rc=$?"
$G doctor gds-iommu-off; echo "doctor gds-iommu-off rc=$?"
$G verify gds-iommu-off --no-loopback; echo "verify rc=$?"
TAG=asis debug_run "$G" bench gds --dir "$D" --size 64M
$G bench gds --dir "$D" --size 64M --format json > "$OUT/asis-bench.json"; echo "rc=$?"
$G doctor gds-iommu-off --format json > "$OUT/asis-doctor.json"
echo "== B: the udev record for the disk, written by this script"
DEV=$(grep -E ' / / ' /proc/self/mountinfo | tail -1 | awk '{print $3}')
FST=$(findmnt -no FSTYPE /)
[ -d /run/udev ] || { mkdir -p /run/udev/data; touch /run/udev/.gdrprov-test-made; }; mkdir -p /run/udev/data; printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$FST" > "/run/udev/data/b$DEV"
echo "wrote /run/udev/data/b$DEV ($FST)"
snap snap-udev
$G bench gds --dir "$D" --size 64M; R=$?; echo "bench gds rc=$R"
$G doctor gds-iommu-off; echo "doctor gds-iommu-off rc=$?"
$G verify gds-iommu-off --no-loopback; echo "verify rc=$?"
TAG=udev debug_run "$G" bench gds --dir "$D" --size 64M
$G verify gds-iommu-off --no-loopback --format json > "$OUT/udev-verify.json"; echo "verify rc=$?"
echo "== the CUDA P2PDMA fact, per GPU"
$G inventory | grep -iE 'p2pdma|gpudirect|GPU ' | head -20
$G inventory --format json > "$OUT/inventory-udev.json"; echo "inventory rc=$?"
if [ -n "$TRACE" ]; then
  echo "== cuda-trace: the CUDA driver calls libcufile makes"
  CF=$(ldconfig -p | awk '/libcufile.so.0|libcufile.so /{print $NF; exit}'); echo "libcufile: $CF"
  readelf -d "$CF" | grep NEEDED; nm -D --undefined-only "$CF" | grep -E ' cu[A-Z]' | head -40
  TS=$(realpath "$TRACE")
  (cd /tmp && rm -f cufile.log && LD_PRELOAD="$TS" CUFILE_ENV_PATH_JSON=/tmp/cufile-debug.json CUFILE_LOGGING_LEVEL=TRACE \
     "$G" bench gds --dir "$D" --size 64M > "$OUT/trace-bench.txt" 2> "$OUT/cuda-trace.txt"; echo "traced rc=$?";
   cp cufile.log "$OUT/cufile-trace.log" 2>/dev/null)
  grep -vE 'dlsym\(cu(Mem(cpy|set|Alloc|Free)|Stream|Event|Ctx)' "$OUT/cuda-trace.txt" | grep -E ' = [1-9]|GetExportTable|DeviceGetAttribute\(attr=1[2-9][0-9]|HandleForAddress|Pointer' | head -60
  grep -nE 'P2PDMA|p2pdma|p2p device' "$OUT/cufile-trace.log" | head -30
fi
echo "== KvikIO unpacked"
PY=/tmp/pyk; mkdir -p $PY; for w in "$WHEELS"/*.whl; do python3 -m zipfile -e "$w" $PY; done
export PYTHONPATH=$PY
python3 -c "import kvikio; print('kvikio', kvikio.__version__)"
python3 -c "import numpy as np,sys; (np.arange(8<<20,dtype=np.uint64)).tofile(sys.argv[1])" "$D/kv-quick"
KVIKIO_COMPAT_MODE=OFF python3 "$KV" "$D/kv-quick" 1 cufile-quick; echo "kvikio quick rc=$?"
rm -f "$D/kv-quick"
{ [ "$1" = quick ] || [ "$R" != 0 ]; } && exit 0
echo "== rounds (gdrprov: $($G --version 2>/dev/null | head -1))"; uptime
for S in 1G 4G; do
  F="$D/kv-$S"
  python3 -c "import numpy as np,sys; n=int(sys.argv[2])//8; (np.arange(n,dtype=np.uint64)*0x9e3779b97f4a7c15).tofile(sys.argv[1])" "$F" $(( ${S%G} << 30 ))
  sync
  for r in 1 2 3; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    g() { $G bench gds --dir "$D" --file "$F" --rounds 1 --format json > "$OUT/gdrprov-$S-$r.json"; echo "gdrprov $S round $r rc=$?"; }
    k() { KVIKIO_COMPAT_MODE=OFF KVIKIO_NTHREADS=8 python3 "$KV" "$F" 1 cufile >> "$OUT/kvikio.jsonl"; echo "kvikio cufile rc=$?"; }
    if [ $((r % 2)) = 1 ]; then g; k; else k; g; fi
    KVIKIO_COMPAT_MODE=ON KVIKIO_NTHREADS=8 python3 "$KV" "$F" 1 posix >> "$OUT/kvikio.jsonl"; echo "kvikio posix rc=$?"
    uptime
  done
  rm -f "$F"
done
$G bench gds --dir "$D" --size 1G --rounds 1; echo "text rc=$?"
uptime
cat "$OUT/kvikio.jsonl"
