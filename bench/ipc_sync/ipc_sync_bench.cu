/*
 * ipc_sync_bench — what it costs to order GPU work between two processes on
 * one GPU, the hop every zppd call makes twice (client -> daemon ->
 * client). Not part of zppd: a measurement that decides how zppd orders a
 * client's stream against its own (docs/cuda.md, "Stream order").
 *
 * Two processes (fork): a "client" and a "daemon", each with its own CUDA
 * context on device 0, talking over a socketpair. Per iteration the client
 * launches a tiny kernel, signals "ready", sends a byte; the daemon makes
 * its stream wait for ready, launches a tiny kernel, signals "done", answers;
 * the client makes its stream wait for done and launches a tiny kernel.
 *
 *   mode event : interprocess events (cuEventRecord / cuStreamWaitEvent)
 *   mode memop : 32-bit flags in daemon-owned VMM memory shared by fd
 *                (cuStreamWriteValue32 / cuStreamWaitValue32)
 *   mode host  : no GPU-side wait; each side synchronises its stream on the
 *                CPU before it sends (the CPU-wait baseline)
 *   mode inproc: one process, two streams, local events (the floor)
 *   mode sock  : the socket round trip alone, no CUDA at all
 *
 * -s: every receive polls (MSG_DONTWAIT in a loop) instead of sleeping in
 * recv, on both sides: how much of a hop is waking the receiver up.
 *
 * For each mode: "lat" = client syncs its stream at the end of every
 * iteration (a blocking call); "tput" = no client sync until the end (a
 * pipelined training loop). Printed: microseconds per iteration, p50/p90
 * for lat, mean for tput.
 *
 * kill test (-k): the client queues a 2 s spin kernel, records ready and
 * is SIGKILLed; the daemon's stream waits on ready. Prints whether the
 * daemon's queued work completes (a) by itself, (b) after the daemon
 * records the dead client's event itself, (c) with a flag the daemon writes
 * itself (memop mode).
 *
 *   ipc_sync_bench [-n iters] [-k] [-s]
 */
#include <cuda.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        CUresult r_ = (x);                                                                         \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *s_ = "?";                                                                  \
            cuGetErrorString(r_, &s_);                                                             \
            fprintf(stderr, "[%d] %s:%d %s: %s\n", (int)getpid(), __FILE__, __LINE__, #x, s_);   \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

#define K 16 /* events / flags in the pool */

__global__ void tiny(int *p) { p[threadIdx.x] += 1; }
__global__ void spin(long long ns)
{
    long long t0 = clock64();
    while (clock64() - t0 < ns)
        ;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void xsend(int s, const void *b, size_t n)
{
    if (send(s, b, n, MSG_NOSIGNAL) != (ssize_t)n) {
        perror("send");
        exit(3);
    }
}
/* -s: receive by polling (MSG_DONTWAIT in a loop) instead of sleeping in
 * recv: what a receiver saves when it never has to be woken up. */
static int g_spin;

static int xrecv(int s, void *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(s, (char *)b + got, n - got, g_spin ? MSG_DONTWAIT : 0);
        if (r < 0 && g_spin && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}
static void send_fd(int s, int fd)
{
    char c = 'f';
    struct iovec io = {&c, 1};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = u.b;
    m.msg_controllen = sizeof u.b;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof fd);
    if (sendmsg(s, &m, 0) != 1) {
        perror("sendmsg");
        exit(3);
    }
}
static int recv_fd(int s)
{
    char c;
    struct iovec io = {&c, 1};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr m = {};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = u.b;
    m.msg_controllen = sizeof u.b;
    if (recvmsg(s, &m, 0) != 1)
        return -1;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    int fd = -1;
    if (h && h->cmsg_type == SCM_RIGHTS)
        memcpy(&fd, CMSG_DATA(h), sizeof fd);
    return fd;
}

static CUcontext ctx_make(void)
{
    CUdevice d;
    CUcontext c;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&c, d));
    CK(cuCtxSetCurrent(c));
    return c;
}

/* Daemon-owned VMM memory (2 MiB granule) exportable as a POSIX fd. */
static CUdeviceptr vmm_alloc(size_t *sz, int *fd_out, CUmemGenericAllocationHandle *hout)
{
    CUmemAllocationProp p = {};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g;
    CK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    *sz = g;
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, g, &p, 0));
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, g, 0, 0, 0));
    CK(cuMemMap(va, g, 0, h, 0));
    CUmemAccessDesc a = {};
    a.location = p.location;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(va, g, &a, 1));
    if (fd_out)
        CK(cuMemExportToShareableHandle(fd_out, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    *hout = h;
    return va;
}
static CUdeviceptr vmm_import(int fd, size_t sz)
{
    CUmemGenericAllocationHandle h;
    CK(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, sz, 0, 0, 0));
    CK(cuMemMap(va, sz, 0, h, 0));
    CUmemAccessDesc a = {};
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = 0;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(va, sz, &a, 1));
    return va;
}


/* The protocol's pieces, each used by both sides. */
static void events_export(int s, CUevent *ev, int n)
{
    for (int i = 0; i < n; i++) {
        CUipcEventHandle h;
        CK(cuEventCreate(&ev[i], CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
        CK(cuIpcGetEventHandle(&h, ev[i]));
        xsend(s, &h, sizeof h);
    }
}
static void events_import(int s, CUevent *ev, int n)
{
    for (int i = 0; i < n; i++) {
        CUipcEventHandle h;
        if (xrecv(s, &h, sizeof h))
            exit(4);
        CK(cuIpcOpenEventHandle(&ev[i], h));
    }
}
/* Daemon side: zeroed flag memory, sent as a descriptor and its size. */
static CUdeviceptr flags_export(int s)
{
    size_t sz;
    int fd;
    CUmemGenericAllocationHandle h;
    CUdeviceptr flags = vmm_alloc(&sz, &fd, &h);
    CK(cuMemsetD32(flags, 0, sz / 4));
    CK(cuCtxSynchronize());
    send_fd(s, fd);
    close(fd);
    uint64_t z = sz;
    xsend(s, &z, sizeof z);
    return flags;
}
static CUdeviceptr flags_import(int s)
{
    int fd = recv_fd(s);
    uint64_t sz;
    if (fd < 0 || xrecv(s, &sz, sizeof sz))
        exit(4);
    CUdeviceptr flags = vmm_import(fd, sz);
    close(fd);
    return flags;
}

enum { M_EVENT, M_MEMOP, M_HOST, M_SOCK };
static const char *mname[] = {"event", "memop", "host", "sock"};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- the daemon side ---------------------------------------------------- */
static void daemon_side(int s, int mode, int iters)
{
    if (mode == M_SOCK) { /* the socket round trip alone: no CUDA */
        for (int i = 1; i <= iters; i++) {
            int it;
            if (xrecv(s, &it, sizeof it))
                break;
            xsend(s, &it, sizeof it);
        }
        return;
    }
    ctx_make();
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    int *buf;
    CK(cuMemAlloc((CUdeviceptr *)&buf, 4096));
    CUevent ready[K], done[K];
    CUdeviceptr flags = 0;
    if (mode == M_EVENT) {
        events_export(s, done, K);
        events_import(s, ready, K);
    } else if (mode == M_MEMOP) {
        flags = flags_export(s);
    }
    for (int i = 1; i <= iters; i++) {
        int it;
        if (xrecv(s, &it, sizeof it))
            break;
        int k = i % K;
        if (mode == M_EVENT)
            CK(cuStreamWaitEvent(st, ready[k], 0));
        else if (mode == M_MEMOP)
            CK(cuStreamWaitValue32(st, flags + 0, (cuuint32_t)i, CU_STREAM_WAIT_VALUE_GEQ));
        tiny<<<1, 32, 0, st>>>(buf);
        if (mode == M_EVENT)
            CK(cuEventRecord(done[k], st));
        else if (mode == M_MEMOP)
            CK(cuStreamWriteValue32(st, flags + 64, (cuuint32_t)i, 0));
        else
            CK(cuStreamSynchronize(st));
        xsend(s, &it, sizeof it);
    }
    CK(cuStreamSynchronize(st));
}

/* ---- the client side ---------------------------------------------------- */
/* out = p50, p90 of t[1..iters] and the mean iteration of total; frees t. */
static void stats(double *t, int iters, double total, double *out)
{
    qsort(t + 1, (size_t)iters, sizeof *t, cmp_d);
    out[0] = t[1 + iters / 2];
    out[1] = t[1 + iters * 9 / 10];
    out[2] = total / iters;
    free(t);
}

static void client_side(int s, int mode, int iters, int lat, double *out)
{
    if (mode == M_SOCK) {
        double *t = (double *)calloc((size_t)iters + 1, sizeof *t);
        double t0 = now_us();
        for (int i = 1; i <= iters; i++) {
            double a = now_us();
            int it;
            xsend(s, &i, sizeof i);
            if (xrecv(s, &it, sizeof it))
                exit(4);
            t[i] = now_us() - a;
        }
        stats(t, iters, now_us() - t0, out);
        return;
    }
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    int *buf;
    CK(cuMemAlloc((CUdeviceptr *)&buf, 4096));
    CUevent ready[K], done[K];
    CUdeviceptr flags = 0;
    if (mode == M_EVENT) {
        events_import(s, done, K);
        events_export(s, ready, K);
    } else if (mode == M_MEMOP) {
        flags = flags_import(s);
    }
    double *t = (double *)calloc((size_t)iters + 1, sizeof *t);
    double t0 = now_us();
    for (int i = 1; i <= iters; i++) {
        double a = now_us();
        int k = i % K;
        tiny<<<1, 32, 0, st>>>(buf);
        if (mode == M_EVENT)
            CK(cuEventRecord(ready[k], st));
        else if (mode == M_MEMOP)
            CK(cuStreamWriteValue32(st, flags + 0, (cuuint32_t)i, 0));
        else
            CK(cuStreamSynchronize(st));
        xsend(s, &i, sizeof i);
        int it;
        if (xrecv(s, &it, sizeof it))
            exit(4);
        if (mode == M_EVENT)
            CK(cuStreamWaitEvent(st, done[k], 0));
        else if (mode == M_MEMOP)
            CK(cuStreamWaitValue32(st, flags + 64, (cuuint32_t)i, CU_STREAM_WAIT_VALUE_GEQ));
        tiny<<<1, 32, 0, st>>>(buf);
        if (lat)
            CK(cuStreamSynchronize(st));
        t[i] = now_us() - a;
    }
    CK(cuStreamSynchronize(st));
    stats(t, iters, now_us() - t0, out);
}

static void run_pair(int mode, int iters, int lat)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
        perror("socketpair");
        exit(3);
    }
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        close(sv[0]);
        daemon_side(sv[1], mode, iters);
        _exit(0);
    }
    close(sv[1]);
    if (mode != M_SOCK)
        ctx_make();
    double r[3];
    client_side(sv[0], mode, iters, lat, r);
    close(sv[0]);
    int stt;
    waitpid(p, &stt, 0);
    if (lat)
        printf("%-7s lat   p50 %8.1f us  p90 %8.1f us  mean %8.1f us\n", mname[mode], r[0], r[1],
               r[2]);
    else
        printf("%-7s tput  %8.1f us per iteration (host-side p50 %6.1f us)\n", mname[mode], r[2],
               r[0]);
    fflush(stdout);
}

static void run_inproc(int iters)
{
    ctx_make();
    CUstream a, b;
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    int *buf;
    CK(cuMemAlloc((CUdeviceptr *)&buf, 4096));
    CUevent e1, e2;
    CK(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    for (int lat = 1; lat >= 0; lat--) {
        double *t = (double *)calloc((size_t)iters + 1, sizeof *t);
        double t0 = now_us();
        for (int i = 1; i <= iters; i++) {
            double s = now_us();
            tiny<<<1, 32, 0, a>>>(buf);
            CK(cuEventRecord(e1, a));
            CK(cuStreamWaitEvent(b, e1, 0));
            tiny<<<1, 32, 0, b>>>(buf + 64);
            CK(cuEventRecord(e2, b));
            CK(cuStreamWaitEvent(a, e2, 0));
            tiny<<<1, 32, 0, a>>>(buf);
            if (lat)
                CK(cuStreamSynchronize(a));
            t[i] = now_us() - s;
        }
        CK(cuStreamSynchronize(a));
        double total = now_us() - t0;
        qsort(t + 1, (size_t)iters, sizeof *t, cmp_d);
        if (lat)
            printf("%-7s lat   p50 %8.1f us  p90 %8.1f us  mean %8.1f us\n", "inproc",
                   t[1 + iters / 2], t[1 + iters * 9 / 10], total / iters);
        else
            printf("%-7s tput  %8.1f us per iteration\n", "inproc", total / iters);
        free(t);
    }
    fflush(stdout);
}

/* ---- kill test ------------------------------------------------------------ */
static int wait_done(CUstream st, double secs)
{
    double end = now_us() + secs * 1e6;
    while (now_us() < end) {
        CUresult r = cuStreamQuery(st);
        if (r == CUDA_SUCCESS)
            return 1;
        if (r != CUDA_ERROR_NOT_READY) {
            const char *s = "?";
            cuGetErrorString(r, &s);
            printf("  stream query: %s\n", s);
            return -1;
        }
        usleep(1000);
    }
    return 0;
}

static void kill_test(int mode)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        exit(3);
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) { /* the client that dies */
        close(sv[0]);
        int s = sv[1];
        ctx_make();
        CUstream st;
        CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
        CUevent ev;
        CUdeviceptr flags = 0;
        if (mode == M_EVENT)
            events_export(s, &ev, 1);
        else
            flags = flags_import(s);
        spin<<<1, 1, 0, st>>>(4000000000LL); /* ~2 s at 2 GHz */
        if (mode == M_EVENT)
            CK(cuEventRecord(ev, st));
        else
            CK(cuStreamWriteValue32(st, flags, 1, 0));
        int one = 1;
        xsend(s, &one, sizeof one);
        pause();
        _exit(0);
    }
    close(sv[1]);
    int s = sv[0];
    ctx_make();
    CUstream st, side;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    int *buf;
    CK(cuMemAlloc((CUdeviceptr *)&buf, 4096));
    CUevent ev = NULL;
    CUdeviceptr flags = 0;
    if (mode == M_EVENT)
        events_import(s, &ev, 1);
    else
        flags = flags_export(s);
    int one;
    if (xrecv(s, &one, sizeof one))
        exit(4);
    if (mode == M_EVENT)
        CK(cuStreamWaitEvent(st, ev, 0));
    else
        CK(cuStreamWaitValue32(st, flags, 1, CU_STREAM_WAIT_VALUE_GEQ));
    tiny<<<1, 32, 0, st>>>(buf);
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    double t0 = now_us();
    int r = wait_done(st, 6.0);
    printf("kill/%s: daemon stream after the client's SIGKILL: %s (%.0f ms)\n", mname[mode],
           r > 0 ? "completed by itself" : r < 0 ? "error" : "still waiting after 6 s",
           (now_us() - t0) / 1e3);
    if (r == 0) {
        if (mode == M_EVENT)
            CK(cuEventRecord(ev, side));
        else
            CK(cuStreamWriteValue32(side, flags, 1, 0));
        t0 = now_us();
        r = wait_done(st, 6.0);
        printf("kill/%s: after the daemon %s itself: %s (%.0f ms)\n", mname[mode],
               mode == M_EVENT ? "records the dead client's event" : "writes the flag",
               r > 0 ? "completed" : r < 0 ? "error" : "still waiting after 6 s",
               (now_us() - t0) / 1e3);
    }
    fflush(stdout);
    _exit(0); /* a stuck stream must not hang exit */
}

int main(int argc, char **argv)
{
    int iters = 2000, kill_mode = 0, opt;
    while ((opt = getopt(argc, argv, "n:ks")) != -1) {
        if (opt == 'n')
            iters = atoi(optarg);
        else if (opt == 'k')
            kill_mode = 1;
        else if (opt == 's')
            g_spin = 1;
    }
    if (kill_mode) {
        for (int m = M_EVENT; m <= M_MEMOP; m++) {
            fflush(stdout);
            pid_t p = fork();
            if (p == 0)
                kill_test(m);
            int st;
            waitpid(p, &st, 0);
        }
        return 0;
    }
    printf("ipc_sync_bench: %d iterations, client -> daemon -> client, tiny kernels%s\n", iters,
           g_spin ? ", receives by polling (-s)" : "");
    /* Each run in a fresh child: a process must not touch CUDA before fork. */
    for (int m = M_EVENT; m <= M_SOCK; m++)
        for (int lat = 1; lat >= (m == M_SOCK ? 1 : 0); lat--) {
            fflush(stdout);
            pid_t c = fork();
            if (c == 0) {
                run_pair(m, iters, lat);
                _exit(0);
            }
            waitpid(c, NULL, 0);
        }
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        run_inproc(iters);
        _exit(0);
    }
    waitpid(p, NULL, 0);
    return 0;
}
