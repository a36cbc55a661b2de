/*
 * test_hpz_store_stress.c — random sequences of store operations across
 * tenants and jobs (private keys, publishes, reads, invalidates, detaches,
 * jobs ending with calls in flight, budget changes), checked after every
 * step against the store's promises: the byte counters add up, a pinned or
 * attached replica is never evicted (its buffers stay valid), no reserve
 * leaves a tenant over its budget, and when every call has ended and
 * every job is dropped nothing but idle replicas is left. Meant to run
 * under ZPP_SANITIZE (leaks, use after free, double free).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpz_store.h"
#include "test.h"
#include "zpp.h"

#define NJOBS 6
#define NCALLS 16
#define NTEN 3

static int g_job[NJOBS];
static char g_keys[4][HPZ_CONTENT_KEY_LEN + 1];

enum ck { CK_NONE, CK_PRIV_PENDING, CK_PUB_PENDING, CK_PIN, CK_READ };
struct callrec {
    enum ck kind;
    struct hpz_entry *e;
    int job;
    uint64_t stamp; /* first bytes of slot 0 when pinned */
};

static uint32_t rng_state = 12345;
static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 16) % n;
}

static uint32_t tenant_of(int job)
{
    return 1000u + (uint32_t)(job % NTEN);
}

static struct hpz_spec mk(int job, int shared, int k, uint64_t slice)
{
    static const char *priv[] = {"w0", "w1", "w2", "w3"};
    struct hpz_spec s = {.tenant = tenant_of(job),
                         .job = &g_job[job],
                         .job_id = "j",
                         .key = shared ? g_keys[k] : priv[k],
                         .count = slice * 2,
                         .dtype = ZK_FP32,
                         .slice = slice,
                         .nslots = 2,
                         .shared = shared,
                         .local = shared ? 2 : 0,
                         .rank0 = 0};
    return s;
}

static void check_counters(struct hpz_store *st)
{
    uint64_t used, d = 0;
    hpz_store_stats(st, &used, NULL, NULL, NULL);
    for (int i = 0; i < HPZ_MAX_DEVICES; i++)
        d += hpz_store_device_bytes(st, i);
    ASSERT_EQ(used, d);
    uint64_t t = 0;
    for (uint32_t i = 0; i < NTEN; i++)
        t += hpz_store_tenant_bytes(st, 1000u + i);
    ASSERT_EQ(used, t);
}

static void test_random_operations(void)
{
    for (int i = 0; i < 4; i++)
        snprintf(g_keys[i], sizeof g_keys[i], "sha256:%064d", i);
    for (int round = 0; round < 200; round++) {
        uint64_t tb = 64u * (1 + rnd(8)), db = 64u * (1 + rnd(12));
        struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, db, tb);
        const uint32_t rules[][2] = {{1000u, 1001u}, {1001u, 1002u}};
        hpz_store_set_share(st, rules, rnd(3));
        struct callrec calls[NCALLS];
        memset(calls, 0, sizeof calls);
        char msg[256];
        for (int step = 0; step < 400; step++) {
            int c = (int)rnd(NCALLS), job = (int)rnd(NJOBS), k = (int)rnd(4);
            uint64_t slice = 4u * (1 + rnd(3));
            struct callrec *cr = &calls[c];
            if (cr->kind != CK_NONE) { /* end the call in flight */
                if (cr->kind == CK_PIN || cr->kind == CK_READ) {
                    uint64_t now;
                    memcpy(&now, hpz_entry_buf(cr->e, 0), sizeof now);
                    ASSERT_EQ(now, cr->stamp); /* still the bytes it pinned */
                    hpz_store_unpin(st, cr->e);
                } else if (rnd(4) == 0) {
                    hpz_store_rollback(st, cr->e);
                } else {
                    memset(hpz_entry_buf(cr->e, 0), 0x5a, 8);
                    hpz_store_commit(st, cr->e);
                }
                cr->kind = CK_NONE;
                cr->e = NULL;
            } else {
                struct hpz_entry *e = NULL;
                int busy = 0;
                for (int i = 0; i < NCALLS; i++)
                    busy |= calls[i].kind != CK_NONE && calls[i].job == job;
                uint32_t op = rnd(busy ? 7 : 8);
                if (op == 0 || op == 1) {
                    struct hpz_spec sp = mk(job, op == 1, k, slice);
                    int rc = hpz_store_reserve(st, &sp, &e, msg, sizeof msg);
                    if (rc == 0) {
                        ASSERT(hpz_store_tenant_bytes(st, sp.tenant) <= tb);
                        *cr = (struct callrec){op ? CK_PUB_PENDING : CK_PRIV_PENDING, e, job, 0};
                    } else {
                        ASSERT(rc == ZPP_ELIMIT);
                    }
                } else if (op == 2) {
                    if (hpz_store_lookup(st, tenant_of(job), &g_job[job], mk(0, 0, k, 4).key,
                                         &e) == 0) {
                        *cr = (struct callrec){CK_PIN, e, job, 0};
                        memcpy(&cr->stamp, hpz_entry_buf(e, 0), 8);
                    }
                } else if (op == 3 || op == 4) {
                    struct hpz_spec sp = mk(job, 1, k, slice);
                    if (hpz_store_find_shared(st, &sp, op == 3, &e, msg, sizeof msg) == 0) {
                        *cr = (struct callrec){CK_READ, e, job, 0};
                        memcpy(&cr->stamp, hpz_entry_buf(e, 0), 8);
                        if (op == 4 && rnd(2))
                            hpz_store_attach(st, e, &g_job[job]);
                    }
                } else if (op == 5) {
                    hpz_store_invalidate(st, tenant_of(job), &g_job[job],
                                         rnd(2) ? mk(0, 0, k, 4).key : NULL);
                } else if (op == 6) {
                    hpz_store_detach(st, &g_job[job], rnd(2) ? g_keys[k] : NULL);
                } else {
                    hpz_store_drop_job(st, &g_job[job]); /* no call of it in flight */
                }
            }
            check_counters(st);
        }
        for (int i = 0; i < NCALLS; i++) {
            if (calls[i].kind == CK_PIN || calls[i].kind == CK_READ)
                hpz_store_unpin(st, calls[i].e);
            else if (calls[i].kind != CK_NONE)
                hpz_store_commit(st, calls[i].e);
        }
        for (int j = 0; j < NJOBS; j++)
            hpz_store_drop_job(st, &g_job[j]);
        /* Only idle replicas are left. */
        struct hpz_share_stats ss;
        hpz_store_share_stats(st, &ss);
        uint64_t used, live;
        hpz_store_stats(st, &used, &live, NULL, NULL);
        ASSERT_EQ(ss.attachments, 0);
        ASSERT_EQ(ss.idle, ss.replicas);
        ASSERT_EQ(live, ss.replicas);
        ASSERT_EQ(used, ss.bytes);
        check_counters(st);
        hpz_store_free(st);
    }
}

int main(void)
{
    test_random_operations();
    printf("test_hpz_store_stress: ok\n");
    return 0;
}
