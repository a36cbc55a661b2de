/*
 * test_publish_worker.c — a publish's content key is checked off the event
 * loop on a device backend (docs/hpz-sharing.md, "Verification cost"): the
 * bytes are read back and hashed on a worker thread while the daemon serves
 * every other job, and the call ends only after the check.
 *
 * The daemon runs the host backend as a device backend runs
 * (ZPPD_TEST_HOST_ENQUEUE=1: coll_run on the loop thread, the gathered
 * bytes read back through to_host), and its to_host waits until a gate
 * file exists (ZPPD_TEST_TO_HOST_GATE). Every job has 2 ranks on one node,
 * both driven from this process over two connections.
 *  - Job "base" publishes a tensor; its check waits at the gate.
 *  - Meanwhile job "busy" runs 20 all-gathers, each answered, and base's
 *    publish is still unanswered after them (zpp_test: ZPP_EBUSY). When the
 *    check ran on the loop thread, busy's first call waited for the gate.
 *  - Job "gone" publishes another tensor and loses a rank while its check
 *    waits: once the gate opens, its publish ends in an error and keeps
 *    nothing.
 *  - Gate open: base's publish succeeds; store_bytes is one copy; busy
 *    reads the replica by its key, bit for bit; publishes the same bytes
 *    (accepted, no second copy), different bytes under the key
 *    (ZPP_EEXIST) and the tensor under a wrong key (ZPP_EMISMATCH).
 *  - The daemon is alive and stops cleanly.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "pair.h"
#include "tests/test.h"

/* The daemon's SHA-256, compiled into this test: the key a client computes
 * must be the one the daemon checks. */
#include "daemon/sha256.c"

#define COUNT 1000u
#define SHARD (COUNT / 2)
#define ONE_COPY (2u * SHARD * 4u) /* 2 slots of 500 fp32 */
#define BUSY_CALLS 20

static zh_daemon g_d;

static float tensor(unsigned i, float base)
{
    return base + (float)i * 0.25f;
}

static void key_of(float base, char *key, size_t len)
{
    float t[COUNT];
    for (unsigned i = 0; i < COUNT; i++)
        t[i] = tensor(i, base);
    uint8_t d[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN + 1];
    sha256(t, sizeof t, d);
    sha256_hex(d, hex);
    snprintf(key, len, "sha256:%s", hex);
}

static int expect_bytes(unsigned long long got, unsigned long long want, const char *what)
{
    if (got != want) {
        fprintf(stderr, "%s: %llu, expected %llu\n", what, got, want);
        return 1;
    }
    return 0;
}

int main(void)
{
    char gate[ZH_PATH_MAX + 8], key[80], key_gone[80], wrong[80];
    /* Both set before the daemon starts, which inherits them. */
    ASSERT_EQ(setenv("ZPPD_TEST_HOST_ENQUEUE", "1", 1), 0);
    char tmpl[] = "/tmp/zpp-gate-XXXXXX";
    ASSERT(mkdtemp(tmpl) != NULL);
    snprintf(gate, sizeof gate, "%s/open", tmpl);
    ASSERT_EQ(setenv("ZPPD_TEST_TO_HOST_GATE", gate, 1), 0);
    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    key_of(1.0f, key, sizeof key);
    key_of(3.0f, key_gone, sizeof key_gone);
    snprintf(wrong, sizeof wrong, "%s", key);
    wrong[7] = wrong[7] == '0' ? '1' : '0';

    int fails = 0;
    zh_pair base, busy, gone;
    ASSERT_EQ(zh_pair_open(&base, g_d.socket, "base", COUNT), 0);
    ASSERT_EQ(zh_pair_open(&busy, g_d.socket, "busy", COUNT), 0);
    ASSERT_EQ(zh_pair_open(&gone, g_d.socket, "gone", COUNT), 0);

    /* base's publish: its key check waits at the gate. */
    uint64_t req_base[2], req_gone[2];
    zh_pair_fill(&base, tensor, 1.0f);
    zh_pair_submit(&base, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, key, req_base);

    /* busy is served meanwhile. */
    for (int i = 0; i < BUSY_CALLS; i++) {
        zh_pair_fill(&busy, tensor, 10.0f + (float)i);
        char what[64];
        snprintf(what, sizeof what, "busy: all-gather %d", i);
        fails += zh_expect(zh_pair_call(&busy, ZPP_OP_ALLGATHER, 0, NULL, what), 0, what);
        fails += !zh_pair_holds(&busy, tensor, 10.0f + (float)i);
    }
    for (int r = 0; r < 2; r++)
        fails += zh_expect(zpp_test(base.c[r], req_base[r], NULL), ZPP_EBUSY,
                           "base's publish while its key check waits");

    /* gone publishes, then loses rank 1 while its check waits. */
    zh_pair_fill(&gone, tensor, 3.0f);
    zh_pair_submit(&gone, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, key_gone, req_gone);
    for (int r = 0; r < 2; r++)
        fails += zh_expect(zpp_test(gone.c[r], req_gone[r], NULL), ZPP_EBUSY,
                           "gone's publish while its key check waits");
    zpp_close(gone.c[1]);
    gone.c[1] = NULL;
    /* the daemon still serves: busy's call is answered */
    zh_pair_fill(&busy, tensor, 5.0f);
    fails +=
        zh_expect(zh_pair_call(&busy, ZPP_OP_ALLGATHER, 0, NULL, "busy: after gone's rank left"), 0,
                  "busy after gone's rank left");

    /* The gate opens. */
    FILE *f = fopen(gate, "w");
    ASSERT(f != NULL);
    fclose(f);
    fails += zh_expect(zh_pair_wait(&base, req_base, "base: publish"), 0, "base publishes");
    fails += !zh_pair_holds(&base, tensor, 1.0f);
    int rc = zpp_wait(gone.c[0], req_gone[0], NULL);
    printf("gone: publish, a rank gone -> %s: %s\n", zpp_err_name(rc), zpp_last_error(gone.c[0]));
    if (rc == 0) {
        fprintf(stderr, "gone's publish succeeded after its job lost a rank\n");
        fails++;
    }
    fails +=
        expect_bytes(zh_store_bytes(g_d.socket), ONE_COPY, "store bytes: base's replica alone");

    /* The replica, read and published again from another job. */
    fails += zh_expect(zh_pair_call(&busy, ZPP_OP_HPZ_GATHER, 0, key, "busy: hpZ gather by key"), 0,
                       "busy reads the replica");
    fails += !zh_pair_holds(&busy, tensor, 1.0f);
    zh_pair_fill(&busy, tensor, 1.0f);
    fails +=
        zh_expect(zh_pair_call(&busy, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, key, "busy: same bytes"),
                  0, "the same bytes published again");
    fails += expect_bytes(zh_store_bytes(g_d.socket), ONE_COPY, "one copy for two jobs");
    zh_pair_fill(&busy, tensor, 2.0f);
    fails +=
        zh_expect(zh_pair_call(&busy, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, key, "busy: other bytes"),
                  ZPP_EEXIST, "different bytes under a used key");
    zh_pair_fill(&busy, tensor, 1.0f);
    fails +=
        zh_expect(zh_pair_call(&busy, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, wrong, "busy: wrong key"),
                  ZPP_EMISMATCH, "a key that is not the hash");
    fails += expect_bytes(zh_store_bytes(g_d.socket), ONE_COPY, "one copy at the end");

    zh_pair_close(&base);
    zh_pair_close(&busy);
    zh_pair_close(&gone);
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    unlink(gate);
    rmdir(tmpl);
    if (fails) {
        fprintf(stderr, "test_publish_worker: %d failures\n", fails);
        return 1;
    }
    printf("test_publish_worker: ok\n");
    return 0;
}
