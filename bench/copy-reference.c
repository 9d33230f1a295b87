/* Reference for `gdrprov bench copy`: GPU <-> host copy bandwidth with the
 * CUDA driver API, the same method as gdrprov (pinned host memory from
 * cuMemHostAlloc, device memory from cuMemAlloc, cuMemcpyHtoDAsync /
 * cuMemcpyDtoHAsync on one non-blocking stream timed with events, a warm-up
 * each way, best of RUNS). Prints one JSON line.
 *
 *   cc -O2 -I/usr/local/cuda/include copy-reference.c -o copy-reference -L<dir of libcuda.so.1> -l:libcuda.so.1
 *   ./copy-reference [GPU] [SIZE_MIB] [RUNS]
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                             \
    do {                                                                     \
        CUresult r_ = (call);                                                \
        if (r_ != CUDA_SUCCESS) {                                            \
            const char *n_ = "?";                                            \
            cuGetErrorName(r_, &n_);                                         \
            fprintf(stderr, "copy-reference: %s failed: %s (%d)\n", #call, \
                    n_, (int)r_);                                            \
            exit(2);                                                         \
        }                                                                    \
    } while (0)

static double timed(int h2d, CUdeviceptr dev, void *host, size_t size,
                    CUstream s, CUevent a, CUevent b) {
    float ms = 0;
    CK(cuEventRecord(a, s));
    if (h2d)
        CK(cuMemcpyHtoDAsync(dev, host, size, s));
    else
        CK(cuMemcpyDtoHAsync(host, dev, size, s));
    CK(cuEventRecord(b, s));
    CK(cuEventSynchronize(b));
    CK(cuEventElapsedTime(&ms, a, b));
    return (double)size / (ms * 1e-3) / 1e9;
}

int main(int argc, char **argv) {
    int ordinal = argc > 1 ? atoi(argv[1]) : 0;
    size_t size = (size_t)(argc > 2 ? atol(argv[2]) : 256) << 20;
    int runs = argc > 3 ? atoi(argv[3]) : 10;
    CUdevice d;
    CUcontext ctx;
    char name[256] = "";
    CK(cuInit(0));
    CK(cuDeviceGet(&d, ordinal));
    CK(cuDeviceGetName(name, sizeof name, d));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    void *host = NULL;
    CUdeviceptr dev;
    CUstream s;
    CUevent a, b;
    CK(cuMemHostAlloc(&host, size, 0));
    memset(host, 0x5a, size);
    CK(cuMemAlloc(&dev, size));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&a, 0));
    CK(cuEventCreate(&b, 0));
    timed(1, dev, host, size, s, a, b);
    timed(0, dev, host, size, s, a, b);
    double h2d = 0, d2h = 0;
    for (int i = 0; i < runs; i++) {
        double v = timed(1, dev, host, size, s, a, b);
        if (v > h2d) h2d = v;
    }
    for (int i = 0; i < runs; i++) {
        double v = timed(0, dev, host, size, s, a, b);
        if (v > d2h) d2h = v;
    }
    printf("{\"gpu\": %d, \"name\": \"%s\", \"bytes\": %zu, \"runs\": %d, "
           "\"h2d_gbs\": %.3f, \"d2h_gbs\": %.3f}\n",
           ordinal, name, size, runs, h2d, d2h);
    cuEventDestroy(a);
    cuEventDestroy(b);
    cuStreamDestroy(s);
    cuMemFree(dev);
    cuMemFreeHost(host);
    cuDevicePrimaryCtxRelease(d);
    return 0;
}
