/* Which CUDA driver calls does libcufile make, and what do they answer? (issue 47: "the CUDA
 * driver's answer on P2PDMA support for each GPU, as cuFile asks it").
 *
 * An LD_PRELOAD shim: it logs to stderr every libcuda symbol looked up through dlsym or
 * cuGetProcAddress, and wraps the calls that could carry a P2PDMA question (device and pointer
 * attributes, dma-buf handles, export tables), logging their arguments and results.
 * Build: gcc -O2 -shared -fPIC -o cuda-trace.so bench/cuda-trace.c -ldl
 * Use:   LD_PRELOAD=$PWD/cuda-trace.so gdrprov bench gds --dir D --size 64M 2> trace.txt
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

static void *(*real_dlsym)(void *, const char *);
static void *cuda;

static void init(void) {
    if (!real_dlsym) {
        real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!real_dlsym)
            real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    if (!cuda)
        cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
}

static void *real(const char *name) {
    init();
    return cuda ? real_dlsym(cuda, name) : NULL;
}

#define LOG(...) fprintf(stderr, "cuda-trace: " __VA_ARGS__)

CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    static CUresult (*f)(int *, int, CUdevice);
    if (!f) f = real("cuDeviceGetAttribute");
    CUresult r = f(pi, attrib, dev);
    LOG("cuDeviceGetAttribute(attr=%d, dev=%d) = %d value=%d\n", attrib, dev, r, r == 0 ? *pi : -1);
    return r;
}

CUresult cuPointerGetAttribute(void *data, int attrib, CUdeviceptr ptr) {
    static CUresult (*f)(void *, int, CUdeviceptr);
    if (!f) f = real("cuPointerGetAttribute");
    CUresult r = f(data, attrib, ptr);
    LOG("cuPointerGetAttribute(attr=%d, ptr=0x%llx) = %d\n", attrib, ptr, r);
    return r;
}

CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr ptr) {
    static CUresult (*f)(unsigned, int *, void **, CUdeviceptr);
    if (!f) f = real("cuPointerGetAttributes");
    CUresult r = f(n, attrs, data, ptr);
    LOG("cuPointerGetAttributes(n=%u, first=%d, ptr=0x%llx) = %d\n", n, n ? attrs[0] : -1, ptr, r);
    return r;
}

CUresult cuMemGetHandleForAddressRange(void *h, CUdeviceptr p, size_t n, int type, unsigned long long fl) {
    static CUresult (*f)(void *, CUdeviceptr, size_t, int, unsigned long long);
    if (!f) f = real("cuMemGetHandleForAddressRange");
    CUresult r = f(h, p, n, type, fl);
    LOG("cuMemGetHandleForAddressRange(ptr=0x%llx, size=%zu, type=%d, flags=0x%llx) = %d\n", p, n, type, fl, r);
    return r;
}

CUresult cuGetExportTable(const void **t, const unsigned char *id) {
    static CUresult (*f)(const void **, const unsigned char *);
    if (!f) f = real("cuGetExportTable");
    CUresult r = f(t, id);
    LOG("cuGetExportTable(uuid=");
    for (int i = 0; i < 16; i++) fprintf(stderr, "%02x", id[i]);
    fprintf(stderr, ") = %d\n", r);
    return r;
}

static void *wrapper(const char *name) {
    if (!strcmp(name, "cuDeviceGetAttribute")) return (void *)cuDeviceGetAttribute;
    if (!strcmp(name, "cuPointerGetAttribute")) return (void *)cuPointerGetAttribute;
    if (!strcmp(name, "cuPointerGetAttributes")) return (void *)cuPointerGetAttributes;
    if (!strcmp(name, "cuMemGetHandleForAddressRange")) return (void *)cuMemGetHandleForAddressRange;
    if (!strcmp(name, "cuGetExportTable")) return (void *)cuGetExportTable;
    return NULL;
}

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long fl, int *st) {
    static CUresult (*f)(const char *, void **, int, unsigned long long, int *);
    if (!f) f = real("cuGetProcAddress_v2");
    CUresult r = f(sym, pfn, ver, fl, st);
    LOG("cuGetProcAddress_v2(%s, ver=%d) = %d\n", sym, ver, r);
    void *w = r == 0 ? wrapper(sym) : NULL;
    if (w) *pfn = w;
    return r;
}

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long fl) {
    static CUresult (*f)(const char *, void **, int, unsigned long long);
    if (!f) f = real("cuGetProcAddress");
    CUresult r = f(sym, pfn, ver, fl);
    LOG("cuGetProcAddress(%s, ver=%d) = %d\n", sym, ver, r);
    void *w = r == 0 ? wrapper(sym) : NULL;
    if (w) *pfn = w;
    return r;
}

void *dlsym(void *handle, const char *name) {
    init();
    void *p = real_dlsym(handle, name);
    if (name && name[0] == 'c' && name[1] == 'u' && name[2] != 'F') {
        LOG("dlsym(%s) = %p\n", name, p);
        void *w = p ? wrapper(name) : NULL;
        if (w) return w;
        if (!strcmp(name, "cuGetProcAddress_v2") && p) return (void *)cuGetProcAddress_v2;
        if (!strcmp(name, "cuGetProcAddress") && p) return (void *)cuGetProcAddress;
    }
    return p;
}
