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

/* Device memory in use on every device (cuMemGetInfo), measured in a
 * fresh child process; used[i] in bytes. Returns the device count or -1. */
int cut_probe_used(uint64_t *used, int max);

#endif
