/*
 * test_sha256.c — SHA-256 against the FIPS 180-2 / NIST CAVS examples
 * (empty, "abc", the 448- and 896-bit messages, one million 'a'), lengths
 * around the padding boundary (55, 56, 63, 64, 119, 120 bytes), incremental
 * updates split at every point giving the one-shot digest, 8 MiB fed in the
 * daemon's way (4 MiB pieces) against Python's hashlib, an aborted context,
 * and hashes on four threads at once.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "test.h"

static void check(const void *data, size_t len, const char *want)
{
    uint8_t d[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN + 1];
    ASSERT_EQ(sha256(data, len, d), 0);
    sha256_hex(d, hex);
    ASSERT_STR_EQ(hex, want);
}

static void test_fips_vectors(void)
{
    check("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check(NULL, 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check(m448, strlen(m448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 =
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
        "klmnopqrlmnopqrsmnopqrstnopqrstu";
    check(m896, strlen(m896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

    /* One million 'a', fed in uneven pieces. */
    static char a[1000000];
    memset(a, 'a', sizeof a);
    struct sha256_ctx c;
    uint8_t d[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN + 1];
    ASSERT_EQ(sha256_init(&c), 0);
    for (size_t off = 0, step = 1; off < sizeof a; off += step, step = step * 3 % 1009 + 1)
        sha256_update(&c, a + off, off + step <= sizeof a ? step : sizeof a - off);
    ASSERT_EQ(sha256_final(&c, d), 0);
    sha256_hex(d, hex);
    ASSERT_STR_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_padding_boundaries(void)
{
    static const struct {
        size_t n;
        const char *hex;
    } v[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
    };
    char a[128];
    memset(a, 'a', sizeof a);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        check(a, v[i].n, v[i].hex);
}

static void test_split_updates_match_one_shot(void)
{
    uint8_t msg[1024];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)i;
    check(msg, sizeof msg, "785b0751fc2c53dc14a4ce3d800e69ef9ce1009eb327ccf458afe09c242c26c9");
    for (size_t len = 0; len <= 200; len++) {
        uint8_t want[SHA256_DIGEST_LEN];
        ASSERT_EQ(sha256(msg, len, want), 0);
        for (size_t cut = 0; cut <= len; cut++) {
            struct sha256_ctx c;
            uint8_t got[SHA256_DIGEST_LEN];
            ASSERT_EQ(sha256_init(&c), 0);
            sha256_update(&c, msg, cut);
            sha256_update(&c, msg + cut, len - cut);
            ASSERT_EQ(sha256_final(&c, got), 0);
            ASSERT(memcmp(got, want, sizeof want) == 0);
        }
    }
}

/* 8 MiB of (i * 131 + 7) mod 256; the digest from Python's hashlib. */
#define BIG (8u << 20)
static const char BIG_HEX[] = "7144b2543c07eb5ad3e8088598e3bf70351f913b4fefd095037261ced0c3b582";

static uint8_t *big_message(void)
{
    uint8_t *b = malloc(BIG);
    ASSERT(b != NULL);
    for (size_t i = 0; i < BIG; i++)
        b[i] = (uint8_t)(i * 131 + 7);
    return b;
}

static void test_big_in_pieces(void)
{
    uint8_t *b = big_message(), d[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN + 1];
    struct sha256_ctx c;
    ASSERT_EQ(sha256_init(&c), 0);
    for (size_t off = 0; off < BIG; off += 4u << 20) /* coll.c's staging pieces */
        sha256_update(&c, b + off, 4u << 20);
    ASSERT_EQ(sha256_final(&c, d), 0);
    sha256_hex(d, hex);
    ASSERT_STR_EQ(hex, BIG_HEX);
    /* a context abandoned half-way: released, and the next hash is right */
    ASSERT_EQ(sha256_init(&c), 0);
    sha256_update(&c, b, 1000);
    sha256_abort(&c);
    ASSERT(c.md == NULL);
    sha256_abort(&c); /* twice is harmless */
    check(b, BIG, BIG_HEX);
    free(b);
}

static void *hash_thread(void *arg)
{
    const uint8_t *b = arg;
    for (int i = 0; i < 4; i++)
        check(b, BIG, BIG_HEX);
    return NULL;
}

/* The daemon hashes on libuv's worker threads, several publishes at once. */
static void test_threads(void)
{
    uint8_t *b = big_message();
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(pthread_create(&t[i], NULL, hash_thread, b), 0);
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(pthread_join(t[i], NULL), 0);
    free(b);
}

int main(void)
{
    test_fips_vectors();
    test_padding_boundaries();
    test_split_updates_match_one_shot();
    test_big_in_pieces();
    test_threads();
    printf("test_sha256: ok\n");
    return 0;
}
