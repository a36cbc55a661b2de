/*
 * test_store_lifecycle.c — the hpZ store across the lives of several jobs
 * of one tenant on a real daemon (host backend), each job 2 ranks on one
 * node driven from this process over two connections (pair.h).
 *
 * 1. store_max_entries_per_tenant = 2. Job "pub" publishes two frozen
 *    tensors (two shared replicas) and ends: the replicas stay, idle.
 *    Job "train" of the same tenant then keeps an hpZ key with an
 *    all-gather: the least recently used idle replica makes room, as it
 *    would for a byte budget, and an hpZ gather of the key returns the
 *    tensor. Before the fix the all-gather failed with ZPP_ELIMIT ("holds 2
 *    entries"), and so did every later one of the tenant's for as long as
 *    the daemon ran: nothing evicts an idle replica while the byte budgets
 *    have room. The other replica stays readable.
 * At the end every job has ended: the store holds the idle replica alone
 * (zppctl status's store_bytes), and the daemon stops cleanly.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "pair.h"
#include "tests/test.h"

/* The daemon's SHA-256, compiled in: the test computes the content keys. */
#include "daemon/sha256.c"

/* Connections are left open on a failed check. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define COUNT 1000u
#define ONE_COPY (2u * (COUNT / 2) * 4u) /* 2 slots of 500 fp32 */

static zh_daemon g_d;

static float tensor(unsigned i, float base)
{
    return base + (float)i * 0.25f;
}

static void key_of(float base, char out[80])
{
    static float t[COUNT];
    for (unsigned i = 0; i < COUNT; i++)
        t[i] = tensor(i, base);
    uint8_t d[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN + 1];
    sha256(t, sizeof t, d);
    sha256_hex(d, hex);
    snprintf(out, 80, "sha256:%s", hex);
}

/* op on both ranks with an hpZ key; rank 0's code (both must agree). */
static int pair_keyed(zh_pair *p, int op, const char *hpz_key, const char *what)
{
    uint64_t req[2];
    for (int r = 0; r < 2; r++) {
        zpp_coll call;
        zpp_coll_init(&call, (zpp_op_t)op, ZPP_FP32, p->count);
        call.input = (zpp_bufref){p->in_id[r], 0};
        call.output = (zpp_bufref){p->out_id[r], 0};
        call.hpz_key = hpz_key;
        ASSERT_EQ(zpp_submit(p->c[r], &call, &req[r]), 0);
    }
    return zh_pair_wait(p, req, what);
}

static void test_idle_replicas_give_way_to_the_entry_cap(void)
{
    char k1[80], k2[80];
    key_of(1.0f, k1);
    key_of(2.0f, k2);
    zh_pair pub;
    ASSERT_EQ(zh_pair_open(&pub, g_d.socket, "pub", COUNT), 0);
    zh_pair_fill(&pub, tensor, 1.0f);
    ASSERT_EQ(zh_pair_call(&pub, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, k1, "pub: publish 1"), 0);
    zh_pair_fill(&pub, tensor, 2.0f);
    ASSERT_EQ(zh_pair_call(&pub, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, k2, "pub: publish 2"), 0);
    zh_pair_close(&pub); /* the job ends; its two replicas stay, idle */
    usleep(200 * 1000);
    ASSERT_EQ(zh_store_bytes(g_d.socket), 2u * ONE_COPY);

    zh_pair train;
    ASSERT_EQ(zh_pair_open(&train, g_d.socket, "train", COUNT), 0);
    zh_pair_fill(&train, tensor, 3.0f);
    int rc = pair_keyed(&train, ZPP_OP_ALLGATHER, "layer0", "train: all-gather keeping layer0");
    ASSERT_EQ(rc, 0);
    zh_pair_fill(&train, tensor, 9.0f); /* outputs poisoned again */
    ASSERT_EQ(pair_keyed(&train, ZPP_OP_HPZ_GATHER, "layer0", "train: hpZ gather of layer0"), 0);
    ASSERT(zh_pair_holds(&train, tensor, 3.0f));
    /* the replica used last (k2) stayed; k1 made room */
    ASSERT_EQ(zh_pair_call(&train, ZPP_OP_HPZ_GATHER, 0, k2, "train: read k2"), 0);
    ASSERT(zh_pair_holds(&train, tensor, 2.0f));
    ASSERT_EQ(zh_pair_call(&train, ZPP_OP_HPZ_GATHER, 0, k1, "train: read k1"), ZPP_ENOENT);
    ASSERT_EQ(zh_store_bytes(g_d.socket), 2u * ONE_COPY); /* layer0 and k2 */
    zh_pair_close(&train);
    usleep(200 * 1000);
    ASSERT_EQ(zh_store_bytes(g_d.socket), ONE_COPY); /* k2, idle */
}

int main(void)
{
    ASSERT_EQ(zh_daemon_start("store_max_entries_per_tenant = 2\n", &g_d), 0);
    test_idle_replicas_give_way_to_the_entry_cap();
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_store_lifecycle: ok\n");
    return 0;
}
