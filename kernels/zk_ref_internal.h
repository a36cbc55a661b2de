/*
 * zk_ref_internal.h — helpers shared by the reference kernels quant_ref.c and
 * qgz_ref.c. Not part of the public contract (zpp_kernels.h).
 */
#ifndef ZK_REF_INTERNAL_H
#define ZK_REF_INTERNAL_H

#include <stdint.h>

/* Quantizes one block of len <= ZK_BLOCK_MAX fp32 values v (padding already
 * zero) whose first element is element `first` (a multiple of
 * ZK_BLOCK_ALIGN) of the chunk with payload at `payload`; writes the codes
 * and *scale. Returns 1 if the block is poisoned, else 0. */
int zk_ref_quant_block(const float *v, uint32_t len, int bits, uint8_t *payload, uint64_t first,
                       float *scale);

/* Decodes elements [first, first + len) of a chunk (payload at `payload`,
 * scales at `scales`) laid out with block size `block`, into v (fp32). */
void zk_ref_decode(const uint8_t *payload, const uint8_t *scales, int bits, uint32_t block,
                   uint64_t first, uint64_t len, float *v);

/* acc[i] = zk_accum_f(acc[i], q, s) for the code q and scale s of element
 * first + i of a chunk (as zk_ref_decode), i < len. */
void zk_ref_accum(const uint8_t *payload, const uint8_t *scales, int bits, uint32_t block,
                  uint64_t first, uint64_t len, float *acc);

#endif
