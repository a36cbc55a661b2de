/*
 * sha256.h — SHA-256 (FIPS 180-4) for the content keys of shared hpZ
 * replicas (docs/hpz-sharing.md): the daemon hashes what it stores before
 * it publishes it, and the tests compute the keys they expect with the
 * same code.
 *
 * Through OpenSSL's libcrypto (EVP), which zppd already loads for gRPC: its
 * SHA-256 uses the CPU's SHA instructions where there are some (x86 SHA-NI,
 * the ARMv8 SHA2 extension): 1.81 GB/s on one core of the build machine
 * against 0.32 GB/s for plain C (bench/sha256_bench.c), and a publish
 * hashes the whole tensor.
 *
 * A context is fed any number of updates and finished (or aborted) once.
 * Contexts on different threads are independent.
 */
#ifndef ZPPD_SHA256_H
#define ZPPD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32
#define SHA256_HEX_LEN 64 /* hex digits, without the NUL */

struct sha256_ctx {
    void *md;   /* libcrypto's EVP_MD_CTX; NULL before init, after final */
    int failed; /* an update failed: final reports it */
};

/* Starts a hash. 0, or -1 when libcrypto could not (out of memory); the
 * context needs no sha256_abort then. */
int sha256_init(struct sha256_ctx *c);

/* Adds len bytes at data (data may be NULL when len is 0). */
void sha256_update(struct sha256_ctx *c, const void *data, size_t len);

/* Writes the digest to out and releases the context: 0, or -1 when the
 * hash failed (out is then unset). */
int sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN]);

/* Releases a context that will not be finished. */
void sha256_abort(struct sha256_ctx *c);

/* One-shot digest of len bytes: 0 or -1, as sha256_final. */
int sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_LEN]);

/* Writes the digest as 64 lowercase hex digits and a NUL (65 bytes). */
void sha256_hex(const uint8_t digest[SHA256_DIGEST_LEN], char out[SHA256_HEX_LEN + 1]);

#endif
