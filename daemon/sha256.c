/*
 * sha256.c — see sha256.h: a thin wrapper over libcrypto's EVP digests.
 * The SHA-256 method is fetched once, so a hash on a worker thread pays
 * for no lookup in OpenSSL's provider tables.
 */
#include "sha256.h"

#include <openssl/evp.h>
#include <pthread.h>

static const EVP_MD *g_md;
static pthread_once_t g_md_once = PTHREAD_ONCE_INIT;

static void md_fetch(void)
{
    /* Kept for the life of the process. The built-in method is the
     * fallback should the default provider not answer the fetch. */
    g_md = EVP_MD_fetch(NULL, "SHA2-256", NULL);
    if (!g_md)
        g_md = EVP_sha256();
}

int sha256_init(struct sha256_ctx *c)
{
    pthread_once(&g_md_once, md_fetch);
    c->failed = 0;
    c->md = EVP_MD_CTX_new();
    if (c->md && EVP_DigestInit_ex(c->md, g_md, NULL) == 1)
        return 0;
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
    c->failed = 1;
    return -1;
}

void sha256_update(struct sha256_ctx *c, const void *data, size_t len)
{
    if (!c->md || !len)
        return;
    if (EVP_DigestUpdate(c->md, data, len) != 1)
        c->failed = 1;
}

int sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN])
{
    unsigned int n = 0;
    int ok =
        c->md && !c->failed && EVP_DigestFinal_ex(c->md, out, &n) == 1 && n == SHA256_DIGEST_LEN;
    sha256_abort(c);
    return ok ? 0 : -1;
}

void sha256_abort(struct sha256_ctx *c)
{
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
}

int sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_LEN])
{
    struct sha256_ctx c;
    if (sha256_init(&c) != 0)
        return -1;
    sha256_update(&c, data, len);
    return sha256_final(&c, out);
}

void sha256_hex(const uint8_t digest[SHA256_DIGEST_LEN], char out[SHA256_HEX_LEN + 1])
{
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_DIGEST_LEN; i++) {
        out[2 * i] = hx[digest[i] >> 4];
        out[2 * i + 1] = hx[digest[i] & 15];
    }
    out[SHA256_HEX_LEN] = '\0';
}
