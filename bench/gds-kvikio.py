"""KvikIO reads FILE into GPU memory: the anchor for `gdrprov bench gds` (issue 47).

Usage: python3 bench/gds-kvikio.py FILE ROUNDS LABEL  (KVIKIO_COMPAT_MODE=OFF: through cuFile;
ON: KvikIO's own POSIX path). The GPU buffer is cuMemAlloc'd through ctypes and handed to KvikIO
by __cuda_array_interface__ (no CuPy: its wheel is 70 MB). Cold: the page cache is dropped
(/proc/sys/vm/drop_caches) before the read; warm: read again at once. The first read is checked
against the file's bytes (numpy). Prints one JSON line per read.
"""
import ctypes, json, os, sys, time
import numpy as np
import kvikio

cu = ctypes.CDLL("libcuda.so.1")
def ck(r, what):
    if r != 0:
        raise SystemExit(f"{what} failed: CUDA error {r}")
ck(cu.cuInit(0), "cuInit")
dev = ctypes.c_int(); ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

class DevBuf:
    def __init__(self, n):
        self.ptr = ctypes.c_uint64(); self.n = n
        ck(cu.cuMemAlloc_v2(ctypes.byref(self.ptr), ctypes.c_size_t(n)), "cuMemAlloc")
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (self.ptr.value, False), "version": 3, "strides": None}
    def host(self):
        a = np.empty(self.n, dtype=np.uint8)
        ck(cu.cuMemcpyDtoH_v2(a.ctypes.data_as(ctypes.c_void_p), self.ptr, ctypes.c_size_t(self.n)), "DtoH")
        return a

path, rounds, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
size = os.path.getsize(path)
buf = DevBuf(size)
def drop():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
for r in range(rounds):
    for temp in ("cold", "warm"):
        if temp == "cold":
            drop()
        with kvikio.CuFile(path, "r") as f:
            t = time.perf_counter(); n = f.read(buf); dt = time.perf_counter() - t
        ok = None
        if r == 0 and temp == "cold":
            ok = bool(np.array_equal(buf.host(), np.fromfile(path, dtype=np.uint8)))
        print(json.dumps({"tool": "kvikio", "label": label, "compat_mode": os.environ.get("KVIKIO_COMPAT_MODE"),
                          "bytes": size, "read": n, "temp": temp, "round": r + 1, "secs": dt, "gbs": size / dt / 1e9, "data_ok": ok}), flush=True)
