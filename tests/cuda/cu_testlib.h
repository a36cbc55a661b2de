/*
 * cu_testlib.h — helpers shared by the GPU integration test
 * (tests/cuda/test_cuda_coll.c) and zpp-bench (bench/zpp_bench.c): VMM
 * allocations exported the way PyTorch's expandable segments are, the
 * deterministic inputs, bf16/fp16 conversions, one process per GPU.
 *
 * Nothing here touches CUDA before fork: children initialise the driver.
 */
#ifndef CU_TESTLIB_H
#define CU_TESTLIB_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#define CUT_PT_CHUNK (20u << 20) /* PyTorch expandable segments' physical chunk */

/* A device buffer of cuMemCreate chunks (POSIX-fd handle type) mapped back
 * to back, like PyTorch's expandable segments: chunk = max(20 MiB, size/16
 * rounded up to the granularity), so a registration carries <= 16 fds. */
struct cut_vmm {
    CUdeviceptr ptr;
    size_t size, chunk;
    int n;
    CUmemGenericAllocationHandle h[64];
};
int cut_vmm_alloc(struct cut_vmm *v, int device, size_t bytes);
void cut_vmm_free(struct cut_vmm *v);

/* Makes device `ordinal`'s primary context current; 0 or -1. */
int cut_ctx(int ordinal, CUcontext *out);

/* Deterministic inputs: element i of rank r's tensor for case `seed`:
 * approximately N(0,1) (sum of uniforms), as float. */
float cut_value(uint64_t seed, uint32_t rank, uint64_t i);

/* Writes n values of dtype (1 fp32, 2 fp16, 3 bf16) from cut_value. */
void cut_fill(void *dst, int dtype, uint64_t seed, uint32_t rank, uint64_t first, uint64_t n);

float cut_to_float(const void *p, int dtype, uint64_t i);
size_t cut_esize(int dtype);

/* Wall clock in microseconds (monotonic). */
double cut_now_us(void);

/* Runs fn(rank, arg) in `world` child processes; returns the number of
 * children that failed (non-zero exit or signal). kill_rank >= 0: that
 * child gets SIGKILL kill_after_ms after the start. */
typedef int (*cut_child_fn)(int rank, void *arg);
int cut_spawn(int world, cut_child_fn fn, void *arg, int kill_rank, int kill_after_ms);
/* The same, where child dying_rank is to SIGKILL itself: it failed unless
 * it ended by SIGKILL. */
int cut_spawn_dying(int world, cut_child_fn fn, void *arg, int dying_rank);

/* Device memory in use on every device (cuMemGetInfo), measured in a
 * fresh child process; used[i] in bytes. Returns the device count or -1. */
int cut_probe_used(uint64_t *used, int max);

/* ---- jobs across daemons (one daemon per simulated node) --------------- */

/* The socket of node `node`: tmpl with every "{node}" replaced by the
 * node's number (a template without it names the same socket for every
 * node). 0, or -1 when the result does not fit in len. */
int cut_node_socket(const char *tmpl, int node, char *out, size_t len);

/* The GPU ordinal (in this process's CUDA_VISIBLE_DEVICES) of `rank`:
 * element `rank` of map, a comma-separated list ("0,1,0,1"), or, with no
 * map, rank % the number of visible devices (2 x 1 on two GPUs: ranks 0,1
 * on GPUs 0,1; 2 x 2 on two GPUs: ranks 0,1,2,3 on GPUs 0,1,0,1). Calls
 * cuInit. Returns the ordinal, or -1 (map too short, bad number, no
 * device). */
int cut_rank_device(const char *map, int rank);

/* A 64-bit hash of n bytes (equal bytes, equal hash), for comparing
 * results across processes without moving them. */
uint64_t cut_hash(const void *p, size_t n);

/* A meeting point of the rank processes (a counter in shared memory, made
 * before fork; cut_meet_free after the children ended). Across daemons a
 * rank that leaves its job aborts it on every node, and NCCL traffic of
 * the last call still on the wire is cut: ranks finish their GPU work,
 * meet, and only then disconnect. */
struct cut_meet;
struct cut_meet *cut_meet_new(void);
void cut_meet_free(struct cut_meet *m);
/* Counts this rank in and waits until `world` ranks have called it
 * `round` times in all (round 1, 2, ...). 0, or -1 after timeout_ms. */
int cut_meet(struct cut_meet *m, int world, int round, int timeout_ms);

/* Prints every NCCL_* variable of the environment, sorted, one per line
 * after `prefix`; "(none)" when there is none. */
void cut_print_nccl_env(const char *prefix);

#endif
