/*
 * cu_testlib.c — see cu_testlib.h.
 */
#include "cu_testlib.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double cut_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int cut_ctx(int ordinal, CUcontext *out)
{
    CUdevice d;
    CUcontext c;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&d, ordinal) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS)
        return -1;
    if (out)
        *out = c;
    return 0;
}

int cut_vmm_alloc(struct cut_vmm *v, int device, size_t bytes)
{
    CUmemAllocationProp p;
    size_t gran = 0;
    memset(v, 0, sizeof *v);
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
        return -1;
    size_t chunk = CUT_PT_CHUNK;
    if (bytes / 16 + 1 > chunk)
        chunk = bytes / 16 + 1;
    chunk = (chunk + gran - 1) / gran * gran;
    size_t n = (bytes + chunk - 1) / chunk;
    if (n == 0)
        n = 1;
    if (n > 64)
        return -1;
    v->chunk = chunk;
    v->size = n * chunk;
    if (cuMemAddressReserve(&v->ptr, v->size, 0, 0, 0) != CUDA_SUCCESS)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (cuMemCreate(&v->h[i], chunk, &p, 0) != CUDA_SUCCESS ||
            cuMemMap(v->ptr + i * chunk, chunk, 0, v->h[i], 0) != CUDA_SUCCESS)
            return -1;
        v->n = (int)i + 1;
    }
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = device;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cuMemSetAccess(v->ptr, v->size, &a, 1) != CUDA_SUCCESS)
        return -1;
    return 0;
}

void cut_vmm_free(struct cut_vmm *v)
{
    if (!v->ptr)
        return;
    for (int i = 0; i < v->n; i++) {
        cuMemUnmap(v->ptr + (size_t)i * v->chunk, v->chunk);
        cuMemRelease(v->h[i]);
    }
    cuMemAddressFree(v->ptr, v->size);
    memset(v, 0, sizeof *v);
}

/* splitmix64 */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

float cut_value(uint64_t seed, uint32_t rank, uint64_t i)
{
    uint64_t h = mix(seed * 0x100000001b3ull ^ ((uint64_t)rank << 48) ^ i);
    /* sum of 4 uniforms of 16 bits, centred and scaled: ~N(0,1) */
    float s = 0;
    for (int k = 0; k < 4; k++)
        s += (float)((h >> (16 * k)) & 0xffff) / 65536.0f;
    return (s - 2.0f) * 1.7320508f;
}

static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t r = 0x7fff + ((u >> 16) & 1);
    return (uint16_t)((u + r) >> 16);
}

static float bf2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f2h(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

static float h2f(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

size_t cut_esize(int dtype)
{
    return dtype == 1 ? 4 : 2;
}

void cut_fill(void *dst, int dtype, uint64_t seed, uint32_t rank, uint64_t first, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        float v = cut_value(seed, rank, first + i);
        if (dtype == 1)
            ((float *)dst)[i] = v;
        else if (dtype == 2)
            ((uint16_t *)dst)[i] = f2h(v);
        else
            ((uint16_t *)dst)[i] = f2bf(v);
    }
}

float cut_to_float(const void *p, int dtype, uint64_t i)
{
    if (dtype == 1)
        return ((const float *)p)[i];
    if (dtype == 2)
        return h2f(((const uint16_t *)p)[i]);
    return bf2f(((const uint16_t *)p)[i]);
}

/* kill_rank >= 0: SIGKILLed by the parent after kill_after_ms, its status
 * not counted; dying_rank >= 0: must end by SIGKILL (its own). */
static int spawn(int world, cut_child_fn fn, void *arg, int kill_rank, int kill_after_ms,
                 int dying_rank)
{
    pid_t pids[64] = {0};
    int failed = 0;
    if (world < 1 || world > 64)
        return world;
    for (int r = 0; r < world; r++) {
        fflush(stdout);
        fflush(stderr);
        pid_t p = fork();
        if (p == 0)
            _exit(fn(r, arg) ? 1 : 0);
        pids[r] = p;
    }
    if (kill_rank >= 0 && kill_rank < world) {
        usleep((useconds_t)kill_after_ms * 1000u);
        kill(pids[kill_rank], SIGKILL);
    }
    for (int r = 0; r < world; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        if (r == kill_rank)
            continue;
        int ok = r == dying_rank ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL
                                 : WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok) {
            fprintf(stderr, "rank %d failed (status 0x%x%s)\n", r, st,
                    r == dying_rank ? ", expected its own SIGKILL" : "");
            failed++;
        }
    }
    return failed;
}

int cut_spawn(int world, cut_child_fn fn, void *arg, int kill_rank, int kill_after_ms)
{
    return spawn(world, fn, arg, kill_rank, kill_after_ms, -1);
}

int cut_spawn_dying(int world, cut_child_fn fn, void *arg, int dying_rank)
{
    return spawn(world, fn, arg, -1, 0, dying_rank);
}

int cut_probe_used(uint64_t *used, int max)
{
    uint64_t *shared = mmap(NULL, sizeof(uint64_t) * 65, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return -1;
    memset(shared, 0, sizeof(uint64_t) * 65);
    pid_t p = fork();
    if (p == 0) {
        int n = 0;
        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS)
            _exit(1);
        for (int i = 0; i < n && i < 64; i++) {
            size_t fr = 0, tot = 0;
            CUdevice d;
            CUcontext c;
            cuDeviceGet(&d, i);
            cuDevicePrimaryCtxRetain(&c, d);
            cuCtxSetCurrent(c);
            cuMemGetInfo(&fr, &tot);
            shared[1 + i] = tot - fr;
        }
        shared[0] = (uint64_t)n;
        _exit(0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    int n = (int)shared[0];
    for (int i = 0; i < n && i < max; i++)
        used[i] = shared[1 + i];
    munmap(shared, sizeof(uint64_t) * 65);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? n : -1;
}

int cut_node_socket(const char *tmpl, int node, char *out, size_t len)
{
    static const char tag[] = "{node}";
    size_t o = 0;
    if (!tmpl || !out || len == 0)
        return -1;
    for (const char *p = tmpl; *p;) {
        char num[16];
        const char *piece = p;
        size_t n = 1;
        if (!strncmp(p, tag, sizeof tag - 1)) {
            snprintf(num, sizeof num, "%d", node);
            piece = num;
            n = strlen(num);
            p += sizeof tag - 1;
        } else {
            p++;
        }
        if (o + n >= len)
            return -1;
        memcpy(out + o, piece, n);
        o += n;
    }
    out[o] = 0;
    return 0;
}

int cut_rank_device(const char *map, int rank)
{
    int n = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 1 || rank < 0)
        return -1;
    if (!map || !*map)
        return rank % n;
    const char *p = map;
    for (int i = 0; i < rank; i++) {
        p = strchr(p, ',');
        if (!p)
            return -1;
        p++;
    }
    char *end;
    long d = strtol(p, &end, 10);
    if (end == p || (*end && *end != ',') || d < 0 || d >= n)
        return -1;
    return (int)d;
}

uint64_t cut_hash(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0x6a09e667f3bcc909ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    memcpy(&tail, b + i, n - i);
    return mix(h ^ tail);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

extern char **environ;

void cut_print_nccl_env(const char *prefix)
{
    const char *v[256];
    int n = 0;
    for (char **e = environ; *e && n < 256; e++)
        if (!strncmp(*e, "NCCL_", 5))
            v[n++] = *e;
    qsort(v, (size_t)n, sizeof v[0], cmp_str);
    for (int i = 0; i < n; i++)
        printf("%s%s\n", prefix, v[i]);
    if (n == 0)
        printf("%s(none)\n", prefix);
}

struct cut_meet {
    int count;
};

struct cut_meet *cut_meet_new(void)
{
    struct cut_meet *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    m->count = 0;
    return m;
}

void cut_meet_free(struct cut_meet *m)
{
    if (m)
        munmap(m, sizeof *m);
}

int cut_meet(struct cut_meet *m, int world, int round, int timeout_ms)
{
    if (!m)
        return -1;
    __atomic_add_fetch(&m->count, 1, __ATOMIC_SEQ_CST);
    double end = cut_now_us() + timeout_ms * 1e3;
    while (__atomic_load_n(&m->count, __ATOMIC_SEQ_CST) < world * round) {
        if (cut_now_us() > end)
            return -1;
        usleep(2000);
    }
    return 0;
}
