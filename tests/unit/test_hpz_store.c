/*
 * test_hpz_store.c — the hpZ store on its own: reserve/commit/rollback,
 * replacement on commit, pins that outlive an invalidate, budgets per
 * device and per tenant checked before any allocation, tenant isolation,
 * drop_job with a call in flight, and a failing allocator leaking nothing.
 */
#include <string.h>

#include "hpz_store.h"
#include "test.h"
#include "zpp.h"

static int g_job_a, g_job_b; /* their addresses are the job identities */

static struct hpz_spec spec(uint32_t tenant, const void *job, const char *key, uint64_t slice,
                            int nslots)
{
    struct hpz_spec s = {.tenant = tenant,
                         .job = job,
                         .job_id = "job",
                         .key = key,
                         .count = slice * 2,
                         .dtype = ZK_FP32,
                         .slice = slice,
                         .nslots = nslots};
    return s;
}

static uint64_t used(struct hpz_store *st)
{
    uint64_t b;
    hpz_store_stats(st, &b, NULL, NULL, NULL);
    return b;
}

static uint64_t live(struct hpz_store *st)
{
    uint64_t n;
    hpz_store_stats(st, NULL, &n, NULL, NULL);
    return n;
}

static void test_reserve_commit_lookup_replaces_on_commit(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    struct hpz_entry *e1, *e2, *got;
    char msg[256];
    struct hpz_spec s = spec(1, &g_job_a, "layer0", 50, 2);
    ASSERT(st);
    ASSERT_EQ(hpz_store_reserve(st, &s, &e1, msg, sizeof msg), 0);
    ASSERT_EQ(used(st), 400);
    ASSERT_EQ(hpz_store_lookup(st, 1, &g_job_a, "layer0", &got), ZPP_ENOENT); /* pending */
    ASSERT_EQ(hpz_store_commit(st, e1), 0);
    ASSERT_EQ(live(st), 1);
    memset(hpz_entry_buf(e1, 1), 0xAB, 200);
    ASSERT(hpz_entry_buf(e1, 2) == NULL);

    /* A re-store is invisible until its commit, then replaces the old one. */
    ASSERT_EQ(hpz_store_reserve(st, &s, &e2, msg, sizeof msg), 0);
    ASSERT_EQ(used(st), 800);
    ASSERT_EQ(hpz_store_lookup(st, 1, &g_job_a, "layer0", &got), 0);
    ASSERT(got == e1);
    hpz_store_unpin(st, got);
    ASSERT_EQ(hpz_store_commit(st, e2), 0);
    ASSERT_EQ(used(st), 400);
    ASSERT_EQ(live(st), 1);
    ASSERT_EQ(hpz_store_lookup(st, 1, &g_job_a, "layer0", &got), 0);
    ASSERT(got == e2);
    ASSERT_EQ(hpz_entry_count(got), 100);
    ASSERT_EQ(hpz_entry_dtype(got), ZK_FP32);
    ASSERT_EQ(hpz_entry_slice(got), 50);
    hpz_store_unpin(st, got);

    /* Another tenant or job does not see it; misses are counted. */
    ASSERT_EQ(hpz_store_lookup(st, 2, &g_job_a, "layer0", &got), ZPP_ENOENT);
    ASSERT_EQ(hpz_store_lookup(st, 1, &g_job_b, "layer0", &got), ZPP_ENOENT);
    uint64_t hits, misses;
    hpz_store_stats(st, NULL, NULL, &hits, &misses);
    ASSERT_EQ(hits, 2);
    ASSERT_EQ(misses, 3);

    /* A rollback frees a pending entry and leaves the live one. */
    ASSERT_EQ(hpz_store_reserve(st, &s, &e1, msg, sizeof msg), 0);
    hpz_store_rollback(st, e1);
    ASSERT_EQ(used(st), 400);
    ASSERT_EQ(hpz_store_job_bytes(st, &g_job_a), 400);
    ASSERT_EQ(hpz_store_job_bytes(st, &g_job_b), 0);
    hpz_store_free(st);
    hpz_store_free(NULL);
}

static void test_invalidate_while_pinned_frees_at_unpin(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    struct hpz_entry *e, *got;
    char msg[256];
    struct hpz_spec s = spec(1, &g_job_a, "k", 8, 4);
    ASSERT_EQ(hpz_store_reserve(st, &s, &e, msg, sizeof msg), 0);
    ASSERT_EQ(hpz_store_commit(st, e), 0);
    ASSERT_EQ(hpz_store_lookup(st, 1, &g_job_a, "k", &got), 0);
    ASSERT_EQ(hpz_store_invalidate(st, 1, &g_job_a, "k"), 1);
    ASSERT_EQ(hpz_store_invalidate(st, 1, &g_job_a, "k"), 0); /* idempotent */
    ASSERT_EQ(live(st), 0);
    ASSERT_EQ(used(st), 128); /* still pinned by the gather in flight */
    memset(hpz_entry_buf(got, 3), 1, 32);
    hpz_store_unpin(st, got);
    ASSERT_EQ(used(st), 0);

    /* invalidate-all of a job leaves other jobs alone. */
    struct hpz_spec s2 = spec(1, &g_job_a, "k2", 8, 4), s3 = spec(1, &g_job_b, "k", 8, 4);
    ASSERT_EQ(hpz_store_reserve(st, &s, &e, msg, sizeof msg), 0);
    ASSERT_EQ(hpz_store_commit(st, e), 0);
    ASSERT_EQ(hpz_store_reserve(st, &s2, &e, msg, sizeof msg), 0);
    ASSERT_EQ(hpz_store_commit(st, e), 0);
    ASSERT_EQ(hpz_store_reserve(st, &s3, &e, msg, sizeof msg), 0);
    ASSERT_EQ(hpz_store_commit(st, e), 0);
    ASSERT_EQ(hpz_store_invalidate(st, 2, &g_job_a, NULL), 0); /* wrong tenant */
    ASSERT_EQ(hpz_store_invalidate(st, 1, &g_job_a, NULL), 2);
    ASSERT_EQ(live(st), 1);
    ASSERT_EQ(hpz_store_lookup(st, 1, &g_job_b, "k", &got), 0);
    hpz_store_unpin(st, got);
    hpz_store_free(st);
}

static void test_budget_exceeded_allocates_nothing(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 1000, 0);
    struct hpz_entry *e = NULL;
    char msg[256];
    struct hpz_spec big = spec(1, &g_job_a, "big", 300, 2); /* 1200 per device */
    ASSERT_EQ(hpz_store_reserve(st, &big, &e, msg, sizeof msg), ZPP_ELIMIT);
    ASSERT_CONTAINS(msg, "budget");
    ASSERT_CONTAINS(msg, "big");
    ASSERT(e == NULL);
    ASSERT_EQ(used(st), 0);

    /* Per device: two devices with 800 each fit, a third 800 on device 0
     * does not; devices given explicitly. */
    int devs[2] = {0, 1};
    struct hpz_spec s = spec(1, &g_job_a, "a", 200, 2);
    s.devices = devs;
    ASSERT_EQ(hpz_store_reserve(st, &s, &e, msg, sizeof msg), 0);
    ASSERT_EQ(hpz_store_commit(st, e), 0);
    ASSERT_EQ(hpz_store_device_bytes(st, 0), 800);
    int dev0[1] = {0};
    struct hpz_spec s1 = spec(1, &g_job_a, "b", 200, 1);
    s1.devices = dev0;
    ASSERT_EQ(hpz_store_reserve(st, &s1, &e, msg, sizeof msg), ZPP_ELIMIT);
    ASSERT_CONTAINS(msg, "device 0");
    ASSERT_CONTAINS(msg, "(store_budget)"); /* the config key to raise */
    int dev2[1] = {2};
    s1.devices = dev2;
    ASSERT_EQ(hpz_store_reserve(st, &s1, &e, msg, sizeof msg), 0);
    hpz_store_rollback(st, e);

    /* Per tenant, after a SIGHUP-style change. */
    hpz_store_set_budget(st, 0, 1000);
    struct hpz_spec t1 = spec(1, &g_job_a, "c", 100, 1); /* 400 more: 2000 > 1000 */
    ASSERT_EQ(hpz_store_reserve(st, &t1, &e, msg, sizeof msg), ZPP_ELIMIT);
    ASSERT_CONTAINS(msg, "tenant 1");
    ASSERT_CONTAINS(msg, "(store_budget_per_tenant)");
    struct hpz_spec t2 = spec(2, &g_job_b, "c", 100, 1);
    ASSERT_EQ(hpz_store_reserve(st, &t2, &e, msg, sizeof msg), 0);
    ASSERT_EQ(hpz_store_commit(st, e), 0);
    ASSERT_EQ(hpz_store_tenant_bytes(st, 2), 400);
    ASSERT_EQ(used(st), 2000);

    /* Bad specs. */
    struct hpz_spec bad = spec(1, &g_job_a, "", 10, 1);
    ASSERT_EQ(hpz_store_reserve(st, &bad, &e, msg, sizeof msg), ZPP_EINVAL);
    bad = spec(1, &g_job_a, "x", 10, 1);
    bad.dtype = 9;
    ASSERT_EQ(hpz_store_reserve(st, &bad, &e, msg, sizeof msg), ZPP_EINVAL);
    hpz_store_free(st);
}

static void test_drop_job_with_call_in_flight(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    struct hpz_entry *live_e, *pending, *pinned;
    char msg[256];
    struct hpz_spec s = spec(1, &g_job_a, "k", 16, 2), s2 = spec(1, &g_job_a, "k2", 16, 2);
    ASSERT_EQ(hpz_store_reserve(st, &s, &live_e, msg, sizeof msg), 0);
    ASSERT_EQ(hpz_store_commit(st, live_e), 0);
    ASSERT_EQ(hpz_store_lookup(st, 1, &g_job_a, "k", &pinned), 0);
    ASSERT_EQ(hpz_store_reserve(st, &s2, &pending, msg, sizeof msg), 0);
    hpz_store_drop_job(st, &g_job_a);
    ASSERT_EQ(live(st), 0);
    ASSERT_EQ(hpz_store_commit(st, pending), ZPP_EABORTED);
    ASSERT_EQ(hpz_store_lookup(st, 1, &g_job_a, "k2", &live_e), ZPP_ENOENT);
    ASSERT_EQ(used(st), 128);
    hpz_store_unpin(st, pinned);
    ASSERT_EQ(used(st), 0);
    hpz_store_free(st);
}

static int g_allocs_left;
static int failing_alloc(void *backend, int device, size_t bytes, void **out)
{
    if (g_allocs_left-- <= 0)
        return ZPP_ENOMEM;
    return be_host_ops.store_alloc(backend, device, bytes, out);
}

static void test_failing_allocator_leaks_nothing(void)
{
    struct be_ops ops = be_host_ops;
    ops.store_alloc = failing_alloc;
    struct hpz_store *st = hpz_store_new(&ops, NULL, 0, 0);
    struct hpz_entry *e = NULL;
    char msg[256];
    struct hpz_spec s = spec(1, &g_job_a, "k", 16, 4);
    g_allocs_left = 2;
    ASSERT_EQ(hpz_store_reserve(st, &s, &e, msg, sizeof msg), ZPP_ENOMEM);
    ASSERT_EQ(used(st), 0);
    ASSERT_EQ(hpz_store_job_bytes(st, &g_job_a), 0);
    hpz_store_free(st);
}

int main(void)
{
    test_reserve_commit_lookup_replaces_on_commit();
    test_invalidate_while_pinned_frees_at_unpin();
    test_budget_exceeded_allocates_nothing();
    test_drop_job_with_call_in_flight();
    test_failing_allocator_leaks_nothing();
    printf("test_hpz_store: ok\n");
    return 0;
}
