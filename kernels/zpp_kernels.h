/*
 * zpp_kernels.h — the arithmetic contract shared by the plain-C reference
 * kernels (*_ref.c, used by the host backend and the tests) and the CUDA
 * kernels (*.cu, used by the cuda backend). Both paths implement exactly the
 * functions below and must produce the same bytes for the same inputs.
 *
 * Number formats
 * --------------
 * Inputs and outputs are fp32, fp16 (IEEE binary16) or bf16, read as they are
 * (bf16 is never converted through fp16). Every element is first widened to
 * fp32 exactly; all arithmetic is fp32 with round-to-nearest-even (the CUDA
 * side uses __fmul_rn/__fadd_rn/__fdiv_rn, the C side is compiled with
 * -ffp-contract=off), with no fused multiply-add except one, written out on
 * both sides: the fused reductions (zk_reduce_requant_ref,
 * zk_reduce_out_ref) add each code times its scale to the fp32 sum as one
 * fused multiply-add, acc = fma(q, scale, acc) (__fmaf_rn / fmaf), which
 * rounds once where a multiply then an add would round twice. The int4
 * reduce+requantize alone sums the biased codes u = q + 8 instead (ZK_B4,
 * zk_arith.h; since session 31): acc = fma(u, scale, acc) and t = t + scale,
 * chunk by chunk from +0, then sum = fma(t, -8, acc). Narrowing fp32 -> fp16/bf16 is
 * round-to-nearest-even, overflow to Inf, fp16 subnormals kept.
 *
 * Block quantization
 * ------------------
 * A tensor of n elements is cut into blocks of B elements (B a multiple of
 * ZK_BLOCK_ALIGN, 32..ZK_BLOCK_MAX); the last block may be shorter. Per
 * block, with qmax = 127 (8 bits) or 7 (4 bits):
 *   absmax = max |x|                      (over the block's real elements)
 *   scale  = absmax / qmax                (fp32 division, stored as fp32)
 *   pre    = absmax < ZK_TINY ? ZK_PRESCALE : 1      (exact power of two;
 *            keeps qmax/absmax finite for tiny and subnormal blocks)
 *   inv    = qmax / (absmax * pre)
 *   q      = clamp(rne((x * pre) * inv), -qmax, qmax)
 * An all-zero block has absmax 0: scale 0, inv 0, every code 0, decodes to 0.
 * Decoding: x' = q * scale (fp32), then narrowed to the output dtype.
 *
 * Non-finite inputs (defined behaviour, identical on both paths): a block
 * that holds any NaN or +/-Inf is "poisoned": its scale is written as the
 * canonical quiet NaN (bits ZK_NAN_BITS), all its codes are 0, and it
 * decodes to the canonical NaN of the output dtype in every element
 * (fp32 0x7FC00000, fp16 0x7E00, bf16 0x7FC0). Quantizers return the number
 * of poisoned blocks so the daemon can report it on the reply. A result is
 * never a silently wrong finite number.
 *
 * Codes: int8 two's complement, one per byte. int4: two per byte, element
 * 2k in the low nibble, 2k+1 in the high nibble, two's complement nibbles;
 * an odd trailing element leaves the high nibble 0.
 *
 * A quantized "chunk" of n elements is laid out payload then scales:
 *   [ payload: zk_payload_bytes(n, bits) bytes, padded to ZK_ALIGN     ]
 *   [ scales : zk_num_blocks(n, B) fp32, padded to ZK_ALIGN            ]
 * zk_chunk_bytes() gives the total, a multiple of ZK_ALIGN, so chunks laid
 * back to back (qwZ gathers, qgZ stage buffers) all start ZK_ALIGN-aligned;
 * one NCCL call moves both. Every padding byte (payload and scales) is
 * written as 0 by both paths, so whole chunks compare byte for byte.
 *
 * qgZ geometry (paper section 3.3, eq. 2, Algorithm 2 with S stages)
 * ------------------------------------------------------------------
 * W = N nodes x G GPUs, rank r = node*G + local. A gradient of n elements is
 * cut into W slices of `shard` = ceil(n / W) elements; slice s is the final
 * shard of rank s. Each slice is cut into S sub-chunks of `piece` elements
 * (piece = ceil(shard / S) rounded up to a multiple of B; elements past the
 * slice or past n read as 0). For stage k the reordered, quantized buffer
 * holds W pieces, and position p = i*N + nd holds sub-chunk k of slice
 * nd*G + i (so local GPU i receives, in the intra-node all-to-all, exactly
 * the N slices owned by GPUs of local index i). Pieces are quantized chunks
 * of `piece` elements; the whole buffer is stage-major:
 *   offset(k, p) = (k * W + p) * zk_chunk_bytes(piece, bits, B).
 *
 * Sizes and offsets are 64-bit everywhere. Quantized chunk pointers and
 * chunk strides passed to the CUDA kernels must be ZK_ALIGN-aligned
 * (cudaMalloc and chunk offsets are); element pointers need only their
 * dtype's alignment (zpp_kernels_cuda.h, "Launch contract").
 */
#ifndef ZPP_KERNELS_H
#define ZPP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum zk_dtype { ZK_FP32 = 1, ZK_FP16 = 2, ZK_BF16 = 3 };
enum zk_reduce { ZK_SUM = 0, ZK_MEAN = 1 };

#define ZK_ALIGN 16u          /* bytes: payload padding and pointer alignment */
#define ZK_BLOCK_ALIGN 32u    /* block sizes are multiples of this */
#define ZK_BLOCK_MAX 8192u    /* largest block size a kernel accepts */
#define ZK_NAN_BITS 0x7FC00000u
#define ZK_TINY 0x1p-60f      /* below this absmax, prescale before inverting */
#define ZK_PRESCALE 0x1p64f

static inline size_t zk_dtype_size(int dtype)
{
    return dtype == ZK_FP32 ? 4 : (dtype == ZK_FP16 || dtype == ZK_BF16) ? 2 : 0;
}
static inline int zk_qmax(int bits)
{
    return bits == 8 ? 127 : 7;
}
static inline uint64_t zk_num_blocks(uint64_t n, uint32_t block)
{
    return (n + block - 1) / block;
}
static inline uint64_t zk_payload_bytes(uint64_t n, int bits)
{
    uint64_t b = bits == 8 ? n : (n + 1) / 2;
    return (b + ZK_ALIGN - 1) / ZK_ALIGN * ZK_ALIGN;
}
static inline uint64_t zk_scales_bytes(uint64_t n, uint32_t block)
{
    return (4 * zk_num_blocks(n, block) + ZK_ALIGN - 1) / ZK_ALIGN * ZK_ALIGN;
}
static inline uint64_t zk_chunk_bytes(uint64_t n, int bits, uint32_t block)
{
    return zk_payload_bytes(n, bits) + zk_scales_bytes(n, block);
}
/* 1 when (bits, block) is accepted by every kernel. */
static inline int zk_params_ok(int bits, uint32_t block)
{
    return (bits == 8 || bits == 4) && block >= ZK_BLOCK_ALIGN && block <= ZK_BLOCK_MAX &&
           block % ZK_BLOCK_ALIGN == 0;
}

/* qgZ geometry for one call; see the top of this file. */
struct zk_qgz_geom {
    uint64_t n;     /* elements of the full gradient */
    int nodes;      /* N */
    int local;      /* G, GPUs per node */
    int stages;     /* S >= 1 */
    int bits;       /* 8 or 4 */
    uint32_t block; /* B */
    uint64_t shard; /* ceil(n / W): output elements per rank */
    uint64_t piece; /* elements per (slice, stage) piece, multiple of B */
    uint64_t piece_bytes; /* zk_chunk_bytes(piece, bits, block) */
};
/* Fills g from n, nodes, local, stages, bits, block. Returns 0, or -1 if a
 * parameter is out of range (nodes/local/stages < 1, bad bits/block). */
int zk_qgz_geom_init(struct zk_qgz_geom *g, uint64_t n, int nodes, int local, int stages, int bits,
                     uint32_t block);
/* Position p in [0, W) of stage k holds sub-chunk k of this slice. */
static inline int zk_qgz_slice_at(const struct zk_qgz_geom *g, int p)
{
    int i = p / g->nodes, nd = p % g->nodes;
    return nd * g->local + i;
}

/* ---- plain-C reference kernels (kernels/quant_ref.c, qgz_ref.c) -------- */

/* Quantizes a chunk of n elements (layout above) into out. Only the first
 * n_valid <= n elements of x are read; the rest count as 0 (padding).
 * Returns the number of poisoned (non-finite) blocks. */
uint64_t zk_quantize_ref(const void *x, int dtype, uint64_t n, uint64_t n_valid, int bits,
                         uint32_t block, uint8_t *out);

/* Decodes the first n_out <= n elements of the chunk at in (a chunk laid out
 * for n elements) into y (dtype). */
void zk_dequantize_ref(const uint8_t *in, uint64_t n, uint64_t n_out, int bits, uint32_t block,
                       void *y, int dtype);

/* Quantize then dequantize in one pass, no chunk in between: y (n_valid
 * elements of dtype, the same dtype as x) gets the bytes of
 * zk_dequantize_ref(chunk, n, n_valid, ...) of chunk =
 * zk_quantize_ref(x, dtype, n, n_valid, ...) for any n >= n_valid (the
 * padding elements are 0 and change no block's absmax). What a one-node
 * qwZ's output is when every GPU reads the others' inputs (the small
 * fenced qwZ, docs/cuda.md). Returns the number of poisoned blocks, as
 * zk_quantize_ref does. */
uint64_t zk_qdq_ref(const void *x, int dtype, uint64_t n_valid, int bits, uint32_t block, void *y);

/* qgZ step 0: reads the full gradient x (g->n elements of dtype) and writes
 * the reordered, quantized pieces of all S stages into out
 * (S * W * g->piece_bytes bytes). Returns poisoned blocks. */
uint64_t zk_qgz_reorder_quantize_ref(const void *x, int dtype, const struct zk_qgz_geom *g,
                                     uint8_t *out);
/* Same for one stage only: writes W pieces (W * piece_bytes) for stage k. */
uint64_t zk_qgz_reorder_quantize_stage_ref(const void *x, int dtype, const struct zk_qgz_geom *g,
                                           int stage, uint8_t *out);

/* qgZ step 2: k quantized chunks of `piece` elements each, the j-th at
 * in + j * in_stride, are summed in fp32 in order j = 0..k-1 from +0
 * (per element acc = fma(q_j, scale_j, acc): above), and the sum
 * requantized into one chunk at out. Returns poisoned blocks. */
uint64_t zk_reduce_requant_ref(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece,
                               int bits, uint32_t block, uint8_t *out);

/* qgZ step 4: k quantized chunks (as above) are summed in fp32 as above
 * (j = 0..k-1, one fused multiply-add per code); for ZK_MEAN the sum is divided by `divisor` (fp32
 * division); the first `count` elements (count <= piece) are written to y
 * in out_dtype (ZK_FP32 or ZK_BF16; ZK_FP16 also accepted). */
void zk_reduce_out_ref(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, int bits,
                       uint32_t block, uint64_t count, int op, float divisor, void *y,
                       int out_dtype);

/* Plain (exact) reduction used by the unquantized reduce-scatter: y[i] =
 * narrow(sum_j widen(x_j[i])) over k inputs x_j = x + j * stride_elems,
 * fp32 accumulation in order, ZK_MEAN divides by divisor. */
void zk_sum_ref(const void *x, uint64_t stride_elems, int k, uint64_t count, int dtype, int op,
                float divisor, void *y, int out_dtype);

/* Element conversions used by both paths (exposed for tests). */
float zk_widen(const void *x, int dtype, uint64_t i);
void zk_narrow(float v, void *y, int dtype, uint64_t i);

#ifdef __cplusplus
}
#endif
#endif
