/*
 * zk_dqs_plan.h — where the rounds of quant.cu's dqs_kernel (dequantize in
 * rounds of reads, then writes) put their elements and bytes. Plain C, so
 * that tests/unit/test_dqs_plan.c checks on any machine what the device
 * relies on: every element in exactly one slab, every slab's codes and
 * scales 16-aligned, inside the chunk and inside the CTA's shared memory.
 */
#ifndef ZK_DQS_PLAN_H
#define ZK_DQS_PLAN_H

#include <stdint.h>

#include "zpp_kernels.h"

#ifdef __CUDACC__
#define ZK_DQS_HD __host__ __device__
#else
#define ZK_DQS_HD
#endif

/* Elements per slab step: 4 blocks and at least 256 elements, so that a
 * slab's first code byte and first scale both sit on 16 bytes. */
static inline uint64_t zk_dqs_gran(int lgb)
{
    const uint64_t block = 1ull << lgb;
    return 4 * block > 256 ? 4 * block : 256;
}

/* The most elements one CTA's slab may hold: its codes and its scales (+16
 * for their rounding) fit in smem bytes. 0 when not even one step fits. */
static inline uint64_t zk_dqs_slab_max(int bits, int lgb, uint64_t smem)
{
    const uint64_t gran = zk_dqs_gran(lgb);
    const uint64_t g_bytes = gran * (uint64_t)bits / 8 + (gran >> lgb) * 4;
    return smem > 16 ? (smem - 16) / g_bytes * gran : 0;
}

/* The round that starts at element base of n_out (< n_out) on sms CTAs of
 * at most slab_max elements: its slab (a multiple of the step) and CTA
 * count. The round's elements spread evenly; the next round starts at
 * base + slab_max * sms. */
static inline uint64_t zk_dqs_round_slab(uint64_t n_out, uint64_t base, uint64_t slab_max,
                                         int sms, int lgb, unsigned *ctas)
{
    const uint64_t per_round = slab_max * (uint64_t)sms, gran = zk_dqs_gran(lgb);
    const uint64_t rem = n_out - base < per_round ? n_out - base : per_round;
    const uint64_t slab = ((rem + (uint64_t)sms - 1) / (uint64_t)sms + gran - 1) / gran * gran;
    *ctas = (unsigned)((rem + slab - 1) / slab);
    return slab;
}

/* One CTA's part: elements [e_lo, e_hi), and the bytes its bulk copies
 * read: c_bytes of codes at chunk offset c_lo (into shared offset 0) and
 * s_bytes of scales from block b_lo (into shared offset s_off). */
struct zk_dqs_cta {
    uint64_t e_lo, e_hi, c_lo, c_bytes, b_lo, s_bytes, s_off;
};

/* CTA cta of the round at e_base with slabs of slab_e elements, for a chunk
 * of pay_bytes of payload. Returns 0 when the CTA has no elements. */
static inline ZK_DQS_HD int zk_dqs_cta_part(uint64_t n_out, uint64_t pay_bytes, int bits, int lgb,
                                            uint64_t e_base, uint64_t slab_e, uint64_t cta,
                                            struct zk_dqs_cta *p)
{
    p->e_lo = e_base + cta * slab_e;
    if (p->e_lo >= n_out)
        return 0;
    p->e_hi = p->e_lo + slab_e < n_out ? p->e_lo + slab_e : n_out;
    p->c_lo = p->e_lo * (uint64_t)bits / 8;
    p->b_lo = p->e_lo >> lgb;
    /* the payload and the scales are each padded to 16 bytes */
    p->c_bytes = (((p->e_hi - p->e_lo) * (uint64_t)bits + 7) / 8 + 15) & ~(uint64_t)15;
    if (p->c_lo + p->c_bytes > pay_bytes)
        p->c_bytes = pay_bytes - p->c_lo;
    p->s_bytes = ((((p->e_hi - 1) >> lgb) + 1 - p->b_lo) * 4 + 15) & ~(uint64_t)15;
    p->s_off = slab_e * (uint64_t)bits / 8;
    return 1;
}

#endif
