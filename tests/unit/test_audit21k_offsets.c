/*
 * test_audit21k_offsets.c — 64-bit sizes and offsets in the reference
 * kernels (kernels/quant_ref.c, qgz_ref.c): chunks, strides and gradients
 * past 4 GiB and past 2^32 elements, without the memory. Each buffer is a
 * MAP_NORESERVE mapping of which only the pages the call reads or writes
 * are touched, so a narrowed size or offset reads the wrong bytes (or
 * another page) and fails. Skipped (77) when the mappings are refused.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "test.h"
#include "zpp_kernels.h"

const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1";
}

#define G32 ((uint64_t)1 << 32)

static uint8_t *big(uint64_t bytes)
{
    void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
static void unbig(uint8_t *p, uint64_t bytes)
{
    munmap(p, (size_t)bytes);
}

static void put_f32(uint8_t *p, float v)
{
    memcpy(p, &v, 4);
}

/* A chunk of n > 2^32 int8 elements: its scales lie past 4 GiB. */
static int test_dequantize_scales_past_4g(void)
{
    uint64_t n = G32 + 64, cb = zk_chunk_bytes(n, 8, 32), pay = zk_payload_bytes(n, 8);
    uint8_t *c = big(cb);
    if (!c)
        return 0;
    ASSERT(pay > G32);
    for (int i = 0; i < 64; i++)
        c[i] = (uint8_t)(int8_t)(i - 32);
    put_f32(c + pay, 0.5f);
    put_f32(c + pay + 4, 0.25f);
    float y[64];
    zk_dequantize_ref(c, n, 64, 8, 32, y, ZK_FP32);
    for (int i = 0; i < 64; i++)
        ASSERT(y[i] == (float)(i - 32) * (i < 32 ? 0.5f : 0.25f));
    unbig(c, cb);
    return 1;
}

/* reduce -> output over two pieces of 2^32 + 64 elements: chunk 1 starts
 * past 4 GiB and each chunk's scales past 4 GiB of it. */
static int test_reduce_out_piece_past_4g(void)
{
    uint64_t piece = G32 + 64, cb = zk_chunk_bytes(piece, 4, 64), pay = zk_payload_bytes(piece, 4);
    uint8_t *in = big(2 * cb);
    if (!in)
        return 0;
    for (int j = 0; j < 2; j++) {
        uint8_t *c = in + (uint64_t)j * cb;
        for (int i = 0; i < 32; i++) /* elements 0..63: codes j+1 (low) and -1 (high) */
            c[i] = (uint8_t)((j + 1) | 0xF0);
        put_f32(c + pay, j ? 4.0f : 2.0f);
    }
    float y[64];
    zk_reduce_out_ref(in, cb, 2, piece, 4, 64, 64, ZK_MEAN, 2.0f, y, ZK_FP32);
    for (int i = 0; i < 64; i++)
        ASSERT(y[i] == (i % 2 ? (-2.0f - 4.0f) / 2.0f : (2.0f + 8.0f) / 2.0f));
    unbig(in, 2 * cb);
    return 1;
}

/* reduce + requantize with chunks 8 GiB apart. */
static int test_reduce_requant_stride_past_4g(void)
{
    uint64_t piece = 64, cb = zk_chunk_bytes(piece, 8, 32), stride = 2 * G32 + 16;
    uint8_t *in = big(stride + cb);
    if (!in)
        return 0;
    uint8_t near[2 * 96], a[96], b[96];
    ASSERT(cb <= 96);
    float x[64];
    for (int j = 0; j < 2; j++) {
        for (int i = 0; i < 64; i++)
            x[i] = (float)((i * 7 + j * 3) % 19) - 9.0f;
        zk_quantize_ref(x, ZK_FP32, piece, piece, 8, 32, in + (uint64_t)j * stride);
        zk_quantize_ref(x, ZK_FP32, piece, piece, 8, 32, near + (uint64_t)j * cb);
    }
    ASSERT_EQ(zk_reduce_requant_ref(in, stride, 2, piece, 8, 32, a), 0);
    ASSERT_EQ(zk_reduce_requant_ref(near, cb, 2, piece, 8, 32, b), 0);
    ASSERT_EQ(memcmp(a, b, cb), 0);
    unbig(in, stride + cb);
    return 1;
}

/* qgZ step 0 of a bf16 gradient of 2^33 + 1000 elements over W = 2 in
 * 2^23 stages: slice 1's pieces lie past 16 GiB; the last stage's pieces
 * are part valid (the rest reads as 0). */
static int test_qgz_stage_past_4g_elements(void)
{
    struct zk_qgz_geom g;
    uint64_t n = 2 * G32 + 1000, xb = n * 2;
    ASSERT_EQ(zk_qgz_geom_init(&g, n, 1, 2, 1 << 23, 4, 32), 0);
    ASSERT_EQ(g.shard, G32 + 500);
    ASSERT_EQ(g.piece, 544);
    uint8_t *x = big(xb);
    if (!x)
        return 0;
    const int stages[2] = {7895000, 7895161}; /* whole; 212 valid elements */
    uint8_t out[2 * 512], want[512];
    ASSERT(2 * g.piece_bytes <= sizeof out);
    uint16_t loc[544];
    for (int t = 0; t < 2; t++) {
        int k = stages[t];
        for (uint64_t s = 0; s < 2; s++) {
            uint64_t first = s * g.shard + (uint64_t)k * g.piece;
            uint64_t valid = g.shard - (uint64_t)k * g.piece;
            valid = valid < g.piece ? valid : g.piece;
            ASSERT_EQ(valid, t ? 212 : 544);
            for (uint64_t i = 0; i < valid; i++) {
                float v =
                    (float)((int)((i * 5 + s * 11 + (uint64_t)t) % 23) - 11) * (s ? 8.0f : 1.0f);
                zk_narrow(v, x, ZK_BF16, first + i);
                zk_narrow(v, loc, ZK_BF16, i);
            }
        }
        ASSERT_EQ(zk_qgz_reorder_quantize_stage_ref(x, ZK_BF16, &g, k, out), 0);
        for (int p = 0; p < 2; p++) { /* N = 1: position p holds slice p */
            uint64_t s = (uint64_t)zk_qgz_slice_at(&g, p);
            uint64_t first = s * g.shard + (uint64_t)k * g.piece;
            uint64_t valid = t ? 212 : 544;
            memcpy(loc, x + first * 2, valid * 2);
            zk_quantize_ref(loc, ZK_BF16, g.piece, valid, 4, 32, want);
            ASSERT_EQ(memcmp(out + (uint64_t)p * g.piece_bytes, want, g.piece_bytes), 0);
        }
    }
    unbig(x, xb);
    return 1;
}

/* The exact sum with inputs 2^32 + 16 elements apart. */
static int test_sum_stride_past_4g(void)
{
    uint64_t stride = G32 + 16, bytes = (stride + 16) * 2;
    uint8_t *x = big(bytes);
    if (!x)
        return 0;
    for (uint64_t i = 0; i < 16; i++) {
        zk_narrow((float)i, x, ZK_FP16, i);
        zk_narrow(1000.0f * (float)(i + 1), x, ZK_FP16, stride + i);
    }
    uint16_t y[16];
    zk_sum_ref(x, stride, 2, 16, ZK_FP16, ZK_SUM, 1.0f, y, ZK_BF16);
    for (uint64_t i = 0; i < 16; i++) {
        uint16_t w;
        zk_narrow((float)i + 1000.0f * (float)(i + 1), &w, ZK_BF16, 0);
        ASSERT_EQ(y[i], w);
    }
    unbig(x, bytes);
    return 1;
}

int main(void)
{
    int ran = 0;
    ran += test_dequantize_scales_past_4g();
    ran += test_reduce_out_piece_past_4g();
    ran += test_reduce_requant_stride_past_4g();
    ran += test_qgz_stage_past_4g_elements();
    ran += test_sum_stride_past_4g();
    if (ran == 0) {
        printf("test_audit21k_offsets: no large mapping available, skipped\n");
        return TEST_SKIP;
    }
    printf("test_audit21k_offsets: ok (%d of 5 ran)\n", ran);
    return 0;
}
