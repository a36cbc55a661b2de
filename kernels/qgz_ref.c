/*
 * qgz_ref.c — the plain-C reference of the qgZ kernels: the geometry of one
 * call, step 0 (reorder the W slices into the stage-major, position order of
 * Algorithm 2 and quantize them), step 2 (decode k chunks, sum in fp32,
 * requantize) and step 4 (decode k chunks, sum, optionally divide, write the
 * caller's output). The arithmetic of record for the CUDA kernels in qgz.cu;
 * see zpp_kernels.h for the layout.
 */
#include <string.h>

#include "zk_arith.h"
#include "zk_ref_internal.h"
#include "zpp_kernels.h"

int zk_qgz_geom_init(struct zk_qgz_geom *g, uint64_t n, int nodes, int local, int stages, int bits,
                     uint32_t block)
{
    if (!g || nodes < 1 || local < 1 || stages < 1 || !zk_params_ok(bits, block))
        return -1;
    uint64_t w = (uint64_t)nodes * (uint64_t)local;
    uint64_t shard = (n + w - 1) / w;
    uint64_t piece = (shard + (uint64_t)stages - 1) / (uint64_t)stages;
    piece = (piece + block - 1) / block * block;
    g->n = n;
    g->nodes = nodes;
    g->local = local;
    g->stages = stages;
    g->bits = bits;
    g->block = block;
    g->shard = shard;
    g->piece = piece;
    g->piece_bytes = zk_chunk_bytes(piece, bits, block);
    return 0;
}

/* zk_qgz_slice_at in 64 bits: W = N * G need not fit an int. */
static uint64_t slice_at64(const struct zk_qgz_geom *g, uint64_t p)
{
    uint64_t nodes = (uint64_t)g->nodes;
    return p % nodes * (uint64_t)g->local + p / nodes;
}

/* Elements of sub-chunk `stage` of slice s that exist in the gradient. */
static uint64_t piece_valid(const struct zk_qgz_geom *g, uint64_t s, int stage)
{
    uint64_t start = s * g->shard;
    if (start >= g->n)
        return 0;
    uint64_t in_slice = g->n - start < g->shard ? g->n - start : g->shard;
    uint64_t off = (uint64_t)stage * g->piece;
    if (off >= in_slice)
        return 0;
    return in_slice - off < g->piece ? in_slice - off : g->piece;
}

uint64_t zk_qgz_reorder_quantize_stage_ref(const void *x, int dtype, const struct zk_qgz_geom *g,
                                           int stage, uint8_t *out)
{
    uint64_t w = (uint64_t)g->nodes * (uint64_t)g->local;
    size_t es = zk_dtype_size(dtype);
    uint64_t poisoned = 0;
    if (g->piece == 0) /* n == 0: pieces of 0 bytes, nothing to read or write */
        return 0;
    for (uint64_t p = 0; p < w; p++) {
        uint64_t s = slice_at64(g, p);
        uint64_t valid = piece_valid(g, s, stage);
        const uint8_t *src = (const uint8_t *)x;
        if (valid > 0)
            src += (s * g->shard + (uint64_t)stage * g->piece) * es;
        poisoned += zk_quantize_ref(src, dtype, g->piece, valid, g->bits, g->block,
                                    out + p * g->piece_bytes);
    }
    return poisoned;
}

uint64_t zk_qgz_reorder_quantize_ref(const void *x, int dtype, const struct zk_qgz_geom *g,
                                     uint8_t *out)
{
    uint64_t w = (uint64_t)g->nodes * (uint64_t)g->local, poisoned = 0;
    if (g->piece == 0) /* n == 0: nothing to read or write (x, out may be NULL) */
        return 0;
    for (int k = 0; k < g->stages; k++)
        poisoned += zk_qgz_reorder_quantize_stage_ref(x, dtype, g, k,
                                                      out + (uint64_t)k * w * g->piece_bytes);
    return poisoned;
}

/* acc[0..len) = sum over j of the codes times scales of elements [first,
 * first+len) of the k chunks, in order j = 0..k-1, starting from +0, each
 * step one fused multiply-add (zk_accum_f). */
static void sum_block(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, int bits,
                      uint32_t block, uint64_t first, uint64_t len, float *acc)
{
    uint64_t pay = zk_payload_bytes(piece, bits);
    for (uint64_t i = 0; i < len; i++)
        acc[i] = 0.0f;
    for (int j = 0; j < k; j++) {
        const uint8_t *c = in + (uint64_t)j * in_stride;
        zk_ref_accum(c, c + pay, bits, block, first, len, acc);
    }
}

#if ZK_B4
/* ZK_B4 (zk_arith.h): the int4 reduce+requantize sum of elements [first,
 * first+len) (one block) over the biased codes, the bias taken off at the
 * end; zk_reduce_out_ref keeps sum_block. */
static void sum_block_b4(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece,
                         uint32_t block, uint64_t first, uint64_t len, float *acc)
{
    uint64_t pay = zk_payload_bytes(piece, 4);
    struct zk_b4_bias bias = {0.0f};
    for (uint64_t i = 0; i < len; i++)
        acc[i] = 0.0f;
    for (int j = 0; j < k; j++) {
        const uint8_t *c = in + (uint64_t)j * in_stride;
        float s;
        memcpy(&s, c + pay + first / block * sizeof s, sizeof s);
        for (uint64_t i = 0; i < len; i++) {
            uint64_t e = first + i;
            int u = zk_nibble(c[e / 2], (int)(e & 1)) + 8;
            acc[i] = zk_b4_step(acc[i], u, s, (int)(e % 8));
        }
        zk_b4_bias_add(&bias, s);
    }
    for (uint64_t i = 0; i < len; i++)
        acc[i] = zk_b4_unbias(acc[i], &bias, (int)((first + i) % 8));
}
#endif

uint64_t zk_reduce_requant_ref(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece,
                               int bits, uint32_t block, uint8_t *out)
{
    float acc[ZK_BLOCK_MAX];
    uint64_t poisoned = 0, pay = zk_payload_bytes(piece, bits);
    if (piece == 0) /* an empty chunk: nothing to read or write */
        return 0;
    memset(out, 0, zk_chunk_bytes(piece, bits, block));
    for (uint64_t first = 0, b = 0; first < piece; first += block, b++) {
        uint64_t len = piece - first < block ? piece - first : block;
#if ZK_B4
        if (bits == 4)
            sum_block_b4(in, in_stride, k, piece, block, first, len, acc);
        else
            sum_block(in, in_stride, k, piece, bits, block, first, len, acc);
#else
        sum_block(in, in_stride, k, piece, bits, block, first, len, acc);
#endif
        float s;
        poisoned += (uint64_t)zk_ref_quant_block(acc, (uint32_t)len, bits, out, first, &s);
        memcpy(out + pay + b * sizeof s, &s, sizeof s);
    }
    return poisoned;
}

void zk_reduce_out_ref(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece, int bits,
                       uint32_t block, uint64_t count, int op, float divisor, void *y,
                       int out_dtype)
{
    float acc[ZK_BLOCK_MAX];
    if (count > piece)
        count = piece;
    for (uint64_t first = 0; first < count; first += block) {
        uint64_t len = count - first < block ? count - first : block;
        sum_block(in, in_stride, k, piece, bits, block, first, len, acc);
        for (uint64_t i = 0; i < len; i++) {
            float v = op == ZK_MEAN ? zk_fdiv(acc[i], divisor) : acc[i];
            zk_narrow(v, y, out_dtype, first + i);
        }
    }
}
