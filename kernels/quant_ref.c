/*
 * quant_ref.c — the plain-C reference of block quantization: quantize,
 * dequantize, the exact element conversions (widen/narrow) and the exact
 * k-way sum used by the unquantized reduce-scatter. This is the arithmetic of
 * record (see zpp_kernels.h); the CUDA kernels in quant.cu must give the
 * same bytes. The per-element arithmetic itself lives in zk_arith.h, shared
 * with the CUDA side. Built with -ffp-contract=off.
 */
#include <string.h>

#include "zk_arith.h"
#include "zk_ref_internal.h"
#include "zpp_kernels.h"

#define ZK_NIBBLE_MASK 0x0Fu
#define ZK_NIBBLE_BITS 4

float zk_widen(const void *x, int dtype, uint64_t i)
{
    if (dtype == ZK_FP32) {
        float f;
        memcpy(&f, (const uint8_t *)x + i * sizeof f, sizeof f);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)x + i * sizeof h, sizeof h);
    return dtype == ZK_FP16 ? zk_f16_to_f32(h) : zk_bf16_to_f32(h);
}

void zk_narrow(float v, void *y, int dtype, uint64_t i)
{
    if (dtype == ZK_FP32) {
        float c = zk_canon_f32(v);
        memcpy((uint8_t *)y + i * sizeof c, &c, sizeof c);
        return;
    }
    uint16_t h = dtype == ZK_FP16 ? zk_f32_to_f16(v) : zk_f32_to_bf16(v);
    memcpy((uint8_t *)y + i * sizeof h, &h, sizeof h);
}

/* The parameters of the block v[0 .. len): from the largest absolute bit
 * pattern (NaN and Inf above every finite value). */
static struct zk_bparams ref_params(const float *v, uint32_t len, int qmax)
{
    uint32_t maxbits = 0;
    for (uint32_t i = 0; i < len; i++) {
        uint32_t a = zk_f2u(v[i]) & ZK_F32_ABS_MASK;
        maxbits = a > maxbits ? a : maxbits;
    }
    return zk_block_params(maxbits, qmax);
}

int zk_ref_quant_block(const float *v, uint32_t len, int bits, uint8_t *payload, uint64_t first,
                       float *scale)
{
    int qmax = zk_qmax(bits);
    struct zk_bparams p = ref_params(v, len, qmax);
    *scale = p.scale;
    if (p.poisoned) {
        /* codes are 0: the caller's chunk was zeroed */
        if (bits == 8)
            memset(payload + first, 0, len);
        else
            memset(payload + first / 2, 0, (len + 1) / 2);
        return 1;
    }
    if (bits == 8) {
        for (uint32_t i = 0; i < len; i++)
            payload[first + i] = (uint8_t)(int8_t)zk_encode(v[i], &p, qmax);
    } else {
        for (uint32_t i = 0; i < len; i += 2) {
            unsigned lo = (unsigned)zk_encode(v[i], &p, qmax) & ZK_NIBBLE_MASK;
            unsigned hi =
                i + 1 < len ? (unsigned)zk_encode(v[i + 1], &p, qmax) & ZK_NIBBLE_MASK : 0;
            payload[(first + i) / 2] = (uint8_t)(lo | hi << ZK_NIBBLE_BITS);
        }
    }
    return 0;
}

/* Code and scale of element e of a chunk laid out with block size block. */
static int ref_code(const uint8_t *payload, const uint8_t *scales, int bits, uint32_t block,
                    uint64_t e, float *s)
{
    memcpy(s, scales + (e / block) * sizeof *s, sizeof *s);
    return bits == 8 ? (int)(int8_t)payload[e] : zk_nibble(payload[e / 2], (int)(e & 1));
}

void zk_ref_decode(const uint8_t *payload, const uint8_t *scales, int bits, uint32_t block,
                   uint64_t first, uint64_t len, float *v)
{
    for (uint64_t i = 0; i < len; i++) {
        float s;
        int q = ref_code(payload, scales, bits, block, first + i, &s);
        v[i] = zk_decode(q, s);
    }
}

void zk_ref_accum(const uint8_t *payload, const uint8_t *scales, int bits, uint32_t block,
                  uint64_t first, uint64_t len, float *acc)
{
    for (uint64_t i = 0; i < len; i++) {
        float s;
        int q = ref_code(payload, scales, bits, block, first + i, &s);
        acc[i] = zk_accum_f(acc[i], (float)q, s);
    }
}

uint64_t zk_quantize_ref(const void *x, int dtype, uint64_t n, uint64_t n_valid, int bits,
                         uint32_t block, uint8_t *out)
{
    float v[ZK_BLOCK_MAX];
    uint64_t poisoned = 0, nb = zk_num_blocks(n, block), pay = zk_payload_bytes(n, bits);
    if (n == 0) /* an empty chunk: nothing to read or write (x, out may be NULL) */
        return 0;
    if (n_valid > n)
        n_valid = n;
    memset(out, 0, zk_chunk_bytes(n, bits, block));
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t first = b * block;
        uint32_t len = (uint32_t)(n - first < block ? n - first : block);
        for (uint32_t i = 0; i < len; i++)
            v[i] = first + i < n_valid ? zk_widen(x, dtype, first + i) : 0.0f;
        float s;
        poisoned += (uint64_t)zk_ref_quant_block(v, len, bits, out, first, &s);
        memcpy(out + pay + b * sizeof s, &s, sizeof s);
    }
    return poisoned;
}

void zk_dequantize_ref(const uint8_t *in, uint64_t n, uint64_t n_out, int bits, uint32_t block,
                       void *y, int dtype)
{
    float v[ZK_BLOCK_MAX];
    if (n_out > n)
        n_out = n;
    if (n_out == 0) /* nothing to read or write (in, y may be NULL) */
        return;
    const uint8_t *scales = in + zk_payload_bytes(n, bits);
    for (uint64_t first = 0; first < n_out; first += block) {
        uint64_t len = n_out - first < block ? n_out - first : block;
        zk_ref_decode(in, scales, bits, block, first, len, v);
        for (uint64_t i = 0; i < len; i++)
            zk_narrow(v[i], y, dtype, first + i);
    }
}

uint64_t zk_qdq_ref(const void *x, int dtype, uint64_t n_valid, int bits, uint32_t block, void *y)
{
    float v[ZK_BLOCK_MAX];
    int qmax = zk_qmax(bits);
    uint64_t poisoned = 0;
    for (uint64_t first = 0; first < n_valid; first += block) {
        uint32_t len = (uint32_t)(n_valid - first < block ? n_valid - first : block);
        for (uint32_t i = 0; i < len; i++)
            v[i] = zk_widen(x, dtype, first + i);
        struct zk_bparams p = ref_params(v, len, qmax);
        poisoned += (uint64_t)p.poisoned;
        for (uint32_t i = 0; i < len; i++) {
            int q = p.poisoned ? 0 : zk_encode(v[i], &p, qmax); /* a poisoned block's codes */
            zk_narrow(zk_decode(q, p.scale), y, dtype, first + i);
        }
    }
    return poisoned;
}

void zk_sum_ref(const void *x, uint64_t stride_elems, int k, uint64_t count, int dtype, int op,
                float divisor, void *y, int out_dtype)
{
    size_t es = zk_dtype_size(dtype);
    for (uint64_t i = 0; i < count; i++) {
        float acc = 0.0f;
        for (int j = 0; j < k; j++)
            acc = zk_fadd(acc,
                          zk_widen((const uint8_t *)x + (uint64_t)j * stride_elems * es, dtype, i));
        if (op == ZK_MEAN)
            acc = zk_fdiv(acc, divisor);
        zk_narrow(acc, y, out_dtype, i);
    }
}
