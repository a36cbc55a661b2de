/*
 * test_dqs_plan.c — the plan of quant.cu's dequantize rounds
 * (kernels/zk_dqs_plan.h), checked without a GPU: for many chunk sizes,
 * block sizes, both bit widths, shared-memory sizes and SM counts, the
 * rounds' slabs cover every output element exactly once, in order; every
 * bulk copy is a positive multiple of 16 bytes from a 16-aligned offset
 * inside the chunk (payload or scales, each padded to 16); a slab's codes
 * and scales do not overlap and fit in the CTA's shared memory; the codes
 * and scales copied are all the slab decodes; no round has more CTAs than
 * SMs, and none of its CTAs is empty.
 */
#include <stdint.h>
#include <stdio.h>

#include "test.h"
#include "zk_dqs_plan.h"
#include "zpp_kernels.h"

static uint64_t g_rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return g_rs;
}

static long g_slabs;

/* Every round of the plan for n_out of n elements; returns the rounds. */
static int check_plan(int bits, int lgb, uint64_t n, uint64_t n_out, uint64_t smem, int sms)
{
    const uint32_t block = 1u << lgb;
    const uint64_t pay = zk_payload_bytes(n, bits);
    const uint64_t scale_bytes = zk_chunk_bytes(n, bits, block) - pay;
    const uint64_t slab_max = zk_dqs_slab_max(bits, lgb, smem);
    const uint64_t gran = zk_dqs_gran(lgb);
    if (slab_max == 0) {
        /* not even one step fits: the launcher keeps the flat kernel */
        ASSERT_GT(gran * (uint64_t)bits / 8 + (gran >> lgb) * 4 + 16, smem);
        return 0;
    }
    ASSERT_EQ(slab_max % gran, 0);
    uint64_t next = 0; /* the first element not yet covered */
    int rounds = 0;
    for (uint64_t base = 0; base < n_out; base += slab_max * (uint64_t)sms, rounds++) {
        ASSERT_EQ(base, next);
        ASSERT_EQ(base % gran, 0);
        unsigned ctas = 0;
        const uint64_t slab = zk_dqs_round_slab(n_out, base, slab_max, sms, lgb, &ctas);
        ASSERT_GT(slab, 0);
        ASSERT_LE(slab, slab_max);
        ASSERT_EQ(slab % gran, 0);
        ASSERT_GE(ctas, 1);
        ASSERT_LE(ctas, (unsigned)sms);
        for (unsigned c = 0; c < ctas; c++) {
            struct zk_dqs_cta p;
            ASSERT(zk_dqs_cta_part(n_out, pay, bits, lgb, base, slab, c, &p));
            ASSERT_EQ(p.e_lo, next);
            ASSERT_GT(p.e_hi, p.e_lo);
            ASSERT_LE(p.e_hi - p.e_lo, slab);
            next = p.e_hi;
            /* codes: 16-aligned, a positive multiple of 16, inside the
             * payload, and every byte the slab decodes */
            ASSERT_EQ(p.c_lo % ZK_ALIGN, 0);
            ASSERT_GT(p.c_bytes, 0);
            ASSERT_EQ(p.c_bytes % ZK_ALIGN, 0);
            ASSERT_LE(p.c_lo + p.c_bytes, pay);
            ASSERT_GE(p.c_bytes, ((p.e_hi - p.e_lo) * (uint64_t)bits + 7) / 8);
            ASSERT_EQ(p.c_lo, p.e_lo * (uint64_t)bits / 8);
            /* scales: the same, inside the padded scale array, covering
             * the slab's first to last block */
            ASSERT_EQ(p.b_lo, p.e_lo >> lgb);
            ASSERT_EQ(p.b_lo * 4 % ZK_ALIGN, 0);
            ASSERT_GT(p.s_bytes, 0);
            ASSERT_EQ(p.s_bytes % ZK_ALIGN, 0);
            ASSERT_LE(p.b_lo * 4 + p.s_bytes, scale_bytes);
            ASSERT_GE(p.s_bytes / 4, ((p.e_hi - 1) >> lgb) + 1 - p.b_lo);
            /* shared memory: codes at 0, scales at s_off, apart, inside */
            ASSERT_EQ(p.s_off % ZK_ALIGN, 0);
            ASSERT_GE(p.s_off, p.c_bytes);
            ASSERT_LE(p.s_off + p.s_bytes, smem);
            g_slabs++;
        }
        /* the CTA after the round's last has nothing, or the round's
         * slab would have left elements over */
        struct zk_dqs_cta p;
        if (zk_dqs_cta_part(n_out, pay, bits, lgb, base, slab, ctas, &p))
            ASSERT_GE(p.e_lo, base + slab_max * (uint64_t)sms);
    }
    ASSERT_EQ(next, n_out);
    return rounds;
}

int main(void)
{
    static const uint64_t smems[] = {200u << 10, 8192, 4096, 1024, 300};
    static const int sms_list[] = {132, 114, 3, 1};
    int multi = 0;
    /* the chunk sizes gpu_compare and kernel_bench use, and their edges */
    static const uint64_t fixed[] = {1,       255,        256,       257,         4097,
                                     1u << 20, (1u << 26) + 33, (3u << 24) + 7, 1ull << 28,
                                     (1ull << 28) + 1};
    for (int bw = 0; bw < 2; bw++)
        for (int lgb = 5; lgb <= 13; lgb++)
            for (size_t m = 0; m < sizeof smems / sizeof smems[0]; m++)
                for (size_t k = 0; k < sizeof sms_list / sizeof sms_list[0]; k++) {
                    for (size_t f = 0; f < sizeof fixed / sizeof fixed[0]; f++)
                        multi += check_plan(bw ? 4 : 8, lgb, fixed[f], fixed[f], smems[m],
                                            sms_list[k]) > 1;
                    for (int t = 0; t < 40; t++) {
                        /* n_out up to n, and n up to 2^27 */
                        const uint64_t n = 1 + rnd() % (1ull << (1 + rnd() % 27));
                        const uint64_t n_out = rnd() % 3 ? n : 1 + rnd() % n;
                        multi += check_plan(bw ? 4 : 8, lgb, n, n_out, smems[m], sms_list[k]) > 1;
                    }
                }
    /* the default shared memory holds a slab of 200 KiB less its scales */
    ASSERT_EQ(zk_dqs_slab_max(4, 8, 200u << 10), 387ull * 1024);
    ASSERT_EQ(zk_dqs_slab_max(4, 13, 300), 0);
    ASSERT_GT(multi, 100); /* many plans took several rounds */
    printf("test_dqs_plan: %ld slabs checked, %d plans of several rounds\n", g_slabs, multi);
    return 0;
}
