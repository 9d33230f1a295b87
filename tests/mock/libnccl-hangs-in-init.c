/* MOCK libnccl.so.2 whose ncclCommInitAll never returns: on a real GPU machine it makes
 * gdrprov's NCCL child hang exactly where a broken fabric or a lost peer makes NCCL hang, so
 * that `bench nccl --init-timeout` and verify's nccl-allreduce are shown to report it and exit.
 * It exports every symbol gdrprov checks for (gdrprov_rdma::cuda::nccl::SYMBOLS).
 * Build: cc -shared -fPIC -o DIR/libnccl.so.2 tests/mock/libnccl-hangs-in-init.c && ln -s
 * libnccl.so.2 DIR/libnccl.so; run: LD_LIBRARY_PATH=DIR gdrprov bench nccl --init-timeout 5 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int ncclGetVersion(int *v) { *v = 22803; return 0; }

int ncclCommInitAll(void **comms, int n, const int *devs) {
    const char *f = getenv("NCCL_DEBUG_FILE");
    FILE *log = f ? fopen(f, "a") : NULL;
    if (log) {
        fprintf(log, "mock NCCL INFO ncclCommInitAll over %d GPUs: the MOCK never returns\n", n);
        fclose(log);
    }
    (void)comms; (void)devs;
    for (;;) pause();
}

int ncclCommDestroy(void *c) { (void)c; return 0; }
int ncclAllReduce(const void *s, void *r, size_t n, int t, int o, void *c, void *st) {
    (void)s; (void)r; (void)n; (void)t; (void)o; (void)c; (void)st; return 5;
}
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }
const char *ncclGetErrorString(int r) { (void)r; return "mock"; }
