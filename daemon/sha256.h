/*
 * sha256.h — SHA-256 (FIPS 180-4) in plain C, for the content keys of
 * shared hpZ replicas (docs/hpz-sharing.md). Small and dependency-free:
 * the daemon hashes what it stores before it publishes it, and the tests
 * compute the keys they expect with the same code.
 *
 * A context is fed any number of updates and finished once. No allocation,
 * no global state: contexts on different threads are independent.
 */
#ifndef ZPPD_SHA256_H
#define ZPPD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32
#define SHA256_HEX_LEN 64 /* hex digits, without the NUL */

struct sha256_ctx {
    uint32_t h[8];
    uint64_t len; /* bytes hashed so far */
    uint8_t buf[64];
    size_t nbuf;
};

/* Starts a hash. */
void sha256_init(struct sha256_ctx *c);

/* Adds len bytes at data (data may be NULL when len is 0). */
void sha256_update(struct sha256_ctx *c, const void *data, size_t len);

/* Writes the digest to out; the context must be initialised again before
 * it is used again. */
void sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN]);

/* One-shot digest of len bytes. */
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_LEN]);

/* Writes the digest as 64 lowercase hex digits and a NUL (65 bytes). */
void sha256_hex(const uint8_t digest[SHA256_DIGEST_LEN], char out[SHA256_HEX_LEN + 1]);

#endif
