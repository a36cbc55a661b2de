/*
 * zpp_kernels_cuda.h — the launch contract of the CUDA kernels (quant.cu,
 * qgz.cu, sum.cu, copy.cu, qdq.cu). Each arithmetic function is the `_cuda` twin
 * of the `_ref` function of the same name in zpp_kernels.h: same
 * arguments, same arithmetic, the same bytes out (tests/gpu/ compares them
 * byte for byte); the gather (zk_copy_ptrs_cuda) gives memcpy's bytes. The
 * daemon's cuda backend calls the kernels through this header alone.
 *
 * Launch contract
 * ---------------
 * - Every function enqueues its work on `stream` and returns at once: 0
 *   (cudaSuccess) or a cudaError_t value as int (cudaErrorInvalidValue for
 *   bad parameters, checked before anything is launched; otherwise the
 *   launch's own error from cudaGetLastError). n == 0 launches nothing.
 * - Quantized chunk pointers (`out`, `in`) and `in_stride` must be
 *   ZK_ALIGN (16-byte) aligned; zk_chunk_bytes() is a multiple of ZK_ALIGN,
 *   so chunks laid back to back from a cudaMalloc base all are.
 * - Element pointers (`x`, `y`) need only the alignment of their dtype.
 *   Where they (and every chunk of an element range) are 16-byte aligned the
 *   kernels move 16 bytes per load/store; elsewhere they fall back to
 *   element accesses (correct, slower). qgZ slices start at s * shard
 *   elements: a shard whose byte size is a multiple of 16 keeps step 0 on
 *   the fast path.
 * - Poisoned (non-finite) blocks are counted into *d_poisoned with
 *   atomicAdd when d_poisoned (a device pointer) is not NULL; the caller
 *   zeroes it and reads it back when it needs the count.
 * - Inputs and outputs must not overlap. All sizes and offsets are 64-bit.
 *
 * Work decomposition (for readers of the .cu files; docs/kernels.md has
 * more): accesses are 16 bytes (ZK_CUDA_VEC_BYTES). The quantizing kernels
 * give each block of B elements a team of threads, each with 64 bytes of
 * input (16 fp32 or 32 fp16/bf16 elements; 16 codes per chunk in the fused
 * reduction) and reduce the block's absmax through warp shuffles, shared
 * memory or a shared atomicMax depending on the team's shape. The decoding
 * kernels are flat. One pass over memory each. On sm_90, dequantize into
 * fp32 from int4 with at least 8 MiB of codes runs in rounds, one launch
 * each, whose CTAs read a slab of codes into shared memory before they
 * write (DRAM serves reads, then writes faster than the two interleaved).
 */
#ifndef ZPP_KERNELS_CUDA_H
#define ZPP_KERNELS_CUDA_H

#include <cuda_runtime_api.h>

#include "zpp_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZK_CUDA_VEC_BYTES 16u /* bytes of elements per vector access */

/* zk_quantize_ref on the device. */
int zk_quantize_cuda(const void *x, int dtype, uint64_t n, uint64_t n_valid, int bits,
                     uint32_t block, uint8_t *out, unsigned long long *d_poisoned,
                     cudaStream_t stream);

/* zk_dequantize_ref on the device. */
int zk_dequantize_cuda(const uint8_t *in, uint64_t n, uint64_t n_out, int bits, uint32_t block,
                       void *y, int dtype, cudaStream_t stream);

/* zk_qgz_reorder_quantize_ref on the device (all S stages, one launch). */
int zk_qgz_reorder_quantize_cuda(const void *x, int dtype, const struct zk_qgz_geom *g,
                                 uint8_t *out, unsigned long long *d_poisoned, cudaStream_t stream);

/* zk_qgz_reorder_quantize_stage_ref on the device (stage `stage` only). */
int zk_qgz_reorder_quantize_stage_cuda(const void *x, int dtype, const struct zk_qgz_geom *g,
                                       int stage, uint8_t *out, unsigned long long *d_poisoned,
                                       cudaStream_t stream);

/* zk_reduce_requant_ref on the device: k >= 1 chunks of `piece` elements at
 * in + j * in_stride, decoded, summed in fp32 (j ascending), requantized. */
int zk_reduce_requant_cuda(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, int bits,
                           uint32_t block, uint8_t *out, unsigned long long *d_poisoned,
                           cudaStream_t stream);

/* zk_reduce_out_ref on the device. */
int zk_reduce_out_cuda(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, int bits,
                       uint32_t block, uint64_t count, int op, float divisor, void *y,
                       int out_dtype, cudaStream_t stream);

/* zk_sum_ref on the device (the exact reduce-scatter's reduction). */
int zk_sum_cuda(const void *x, uint64_t stride_elems, int k, uint64_t count, int dtype, int op,
                float divisor, void *y, int out_dtype, cudaStream_t stream);

/* zk_sum_ref on the device, input c at x[c] (1 <= k <= ZK_SUM_MAX_PTRS):
 * the same bytes as zk_sum_cuda over those inputs laid out at a stride.
 * The inputs may lie in other GPUs' memory that this device can read
 * (peer access): the one-node reduce-scatter reads each member's block
 * where it lies. Any alignment: each input is read with 16-byte loads
 * where its own alignment allows. y must not overlap any input (a wider
 * output type would overwrite input bytes other threads still read). */
#define ZK_SUM_MAX_PTRS 16
int zk_sum_ptrs_cuda(const void *const *x, int k, uint64_t count, int dtype, int op, float divisor,
                     void *y, int out_dtype, cudaStream_t stream);

/* ---- kernels that fence the GPUs of a group themselves ------------------
 *
 * A kernel that reads other GPUs' memory must start after those GPUs'
 * earlier work (their inputs are written) and their owners must not reuse
 * that memory until it has finished reading. Events recorded and waited on
 * between the streams say so at the price of two host calls per stream
 * and peer, before and after. A zk_xsync makes the kernels of the n
 * members (one per GPU, the same call) say it to each other instead,
 * through flags in the members' memory:
 *
 *   entering   every CTA marks "member me has arrived at gen" in every
 *              member's block, then waits until all n members have;
 *   leaving    the last CTA of the kernel to finish marks "member me is
 *              done with gen" in every block, then waits until all n are.
 *
 * A member's kernel thus ends only after every member has stopped reading
 * anything of it. The caller's rules: one flag block per member (device
 * memory of its GPU, zeroed once, ZK_XSYNC_WORDS words, readable and
 * writable by every member's GPU); every member launches its kernel with
 * the same gen, one greater (mod 2^32) than the group's previous one (the
 * first after the zeroing is 1: the abort look's words start at 0); one
 * xsync kernel at a time per flag block (one stream); members on distinct
 * GPUs, or few enough CTAs that all members' kernels are resident at once.
 * The waits give up when *abort (host memory mapped for the device) is
 * nonzero, or after timeout_ns, then setting *err to 1; the output is then
 * undefined and the caller must treat the group as failed. Once every
 * member has arrived, one CTA of each kernel looks at *abort again and,
 * when it is up, no CTA reads any member's memory. */
#define ZK_XSYNC_MAX ZK_SUM_MAX_PTRS
#define ZK_XSYNC_WORDS (2 * ZK_XSYNC_MAX + 3) /* arrived[], done[], a CTA counter, the abort look */
struct zk_xsync {
    uint32_t *flags[ZK_XSYNC_MAX]; /* member m's flag block; flags[me] is ours */
    int n, me;
    uint32_t gen;
    const volatile uint32_t *abort;
    uint32_t *err;
    uint64_t timeout_ns;
};

/* zk_sum_ptrs_cuda, fenced by xs when xs is not NULL (xs->n == k: input c
 * is member c's). */
int zk_sum_ptrs_sync_cuda(const void *const *x, int k, uint64_t count, int dtype, int op,
                          float divisor, void *y, int out_dtype, const struct zk_xsync *xs,
                          cudaStream_t stream);

/* Copies k <= ZK_XSYNC_MAX byte ranges, src[i] to dst[i] (bytes[i] each,
 * any alignment; 16-byte accesses where both ends allow), in one kernel,
 * fenced by xs when xs is not NULL. The bytes of memcpy. Ranges must not
 * overlap. */
int zk_copy_ptrs_cuda(void *const *dst, const void *const *src, const uint64_t *bytes, int k,
                      const struct zk_xsync *xs, cudaStream_t stream);

/* zk_qdq_ref on the device for k <= ZK_XSYNC_MAX ranges in one kernel:
 * y[i] gets zk_qdq_ref(x[i], dtype, n[i], bits, block) (the same dtype in
 * and out; element pointers with their dtype's alignment), fenced by xs
 * when xs is not NULL. The poisoned blocks of range `mine` (none when mine
 * is out of range) are added to d_poisoned[0] (device memory); with
 * h_poisoned (host memory mapped for the device; fenced launches only)
 * the kernel's last CTA then copies d_poisoned[0] there when it differs
 * from d_poisoned[1], the value it copied last (kept there; start it at
 * 0 with *h_poisoned), so the host sees the count without a copy of its
 * own. Ranges must not overlap. */
int zk_qdq_ptrs_cuda(const void *const *x, const uint64_t *n, void *const *y, int k, int dtype,
                     int bits, uint32_t block, int mine, unsigned long long *d_poisoned,
                     unsigned long long *h_poisoned, const struct zk_xsync *xs,
                     cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
