/*
 * test_hpz_store_entry_cap.c — store_max_entries_per_tenant and the idle
 * shared replicas it counts.
 *
 * 1. A tenant's jobs publish as many replicas as its entry cap allows, then
 *    end: the replicas stay, idle (a cache). The tenant's next job stores a
 *    private key: the least recently used idle replica makes room, as it
 *    does for a byte budget. Before the fix the reserve was refused with
 *    ZPP_ELIMIT, and so was every later one of that tenant for as long as
 *    the daemon ran: with the byte budgets not short nothing else ever
 *    evicts an idle replica, so the tenant's cap stayed full for good.
 * 2. A reserve the entry cap refuses evicts nothing: not even another
 *    tenant's idle replica on a device the reserve would have needed room
 *    on. Before the fix the device budget's eviction ran first and the
 *    cap refused the reserve afterwards, so that replica was lost for a
 *    call that failed anyway.
 * 3. A job at its tenant's cap stores one of its keys again: the call keeps
 *    as many entries as before (the new entry replaces the old one at its
 *    commit), so the cap lets it through (docs/configuration.md: "a call
 *    that would keep one more fails"). Before the fix it was refused, so a
 *    job at the cap could never refresh a key without invalidating it
 *    first. A new key is still refused.
 */
#include <stdio.h>
#include <string.h>

#include "hpz_store.h"
#include "test.h"
#include "zpp.h"

static int g_job_a, g_job_b, g_job_c;

static void content_key(char out[HPZ_CONTENT_KEY_LEN + 1], int k)
{
    snprintf(out, HPZ_CONTENT_KEY_LEN + 1, "sha256:%064x", k);
}

static struct hpz_spec spec(uint32_t tenant, const void *job, const char *key, int shared,
                            const int *devices)
{
    struct hpz_spec s = {.tenant = tenant,
                         .job = job,
                         .job_id = "cap",
                         .key = key,
                         .count = 2048,
                         .dtype = ZK_FP32,
                         .slice = 1024,
                         .nslots = 2,
                         .devices = devices,
                         .shared = shared,
                         .local = shared ? 2 : 0,
                         .rank0 = 0};
    return s;
}

/* Reserves and commits; returns the reserve's code. */
static int store(struct hpz_store *st, const struct hpz_spec *sp, char *msg, size_t len)
{
    struct hpz_entry *e = NULL;
    int rc = hpz_store_reserve(st, sp, &e, msg, len);
    if (rc == 0)
        ASSERT_EQ(hpz_store_commit(st, e), 0);
    return rc;
}

static int find(struct hpz_store *st, uint32_t tenant, const char *key)
{
    struct hpz_spec sp = spec(tenant, &g_job_c, key, 1, NULL);
    struct hpz_entry *e = NULL;
    char msg[256];
    int rc = hpz_store_find_shared(st, &sp, 0, &e, msg, sizeof msg);
    if (rc == 0)
        hpz_store_unpin(st, e);
    return rc;
}

static void test_idle_replicas_make_room_under_the_entry_cap(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    ASSERT(st);
    hpz_store_set_max_entries(st, 3);
    char keys[3][HPZ_CONTENT_KEY_LEN + 1], msg[256] = "";
    for (int k = 0; k < 3; k++) {
        content_key(keys[k], k + 1);
        struct hpz_spec sp = spec(1000, &g_job_a, keys[k], 1, NULL);
        ASSERT_EQ(store(st, &sp, msg, sizeof msg), 0);
    }
    hpz_store_drop_job(st, &g_job_a); /* job A ends: three idle replicas */
    struct hpz_share_stats sh;
    hpz_store_share_stats(st, &sh);
    ASSERT_EQ(sh.idle, 3);
    ASSERT_EQ(hpz_store_tenant_entries(st, 1000), 3);

    /* job B of the same tenant keeps a private key */
    struct hpz_spec sp = spec(1000, &g_job_b, "w0", 0, NULL);
    int rc = store(st, &sp, msg, sizeof msg);
    printf("a private key with 3 idle replicas under a cap of 3: %s %s\n", zpp_err_name(rc), msg);
    ASSERT_EQ(rc, 0);
    hpz_store_share_stats(st, &sh);
    ASSERT_EQ(sh.evicted, 1);
    ASSERT_EQ(sh.replicas, 2);
    ASSERT_EQ(find(st, 1000, keys[0]), ZPP_ENOENT); /* the least recently used */
    ASSERT_EQ(find(st, 1000, keys[1]), 0);
    ASSERT_EQ(find(st, 1000, keys[2]), 0);
    ASSERT_EQ(hpz_store_tenant_entries(st, 1000), 3);
    uint64_t bytes = 0;
    hpz_store_stats(st, &bytes, NULL, NULL, NULL);
    ASSERT_EQ(bytes, 3u * 2u * 1024u * 4u);
    ASSERT_EQ(hpz_store_tenant_bytes(st, 1000), bytes);
    ASSERT_EQ(hpz_store_device_bytes(st, 0) + hpz_store_device_bytes(st, 1), bytes);

    /* an attached replica is never evicted for the cap: job C reads
     * both replicas, and B's second key then has nothing to evict */
    for (int k = 1; k < 3; k++) {
        struct hpz_spec rd = spec(1000, &g_job_c, keys[k], 1, NULL);
        struct hpz_entry *e = NULL;
        ASSERT_EQ(hpz_store_find_shared(st, &rd, 1, &e, msg, sizeof msg), 0);
        hpz_store_unpin(st, e);
    }
    sp.key = "w1";
    rc = store(st, &sp, msg, sizeof msg);
    printf("with every replica attached: %s %s\n", zpp_err_name(rc), msg);
    ASSERT_EQ(rc, ZPP_ELIMIT);
    ASSERT_CONTAINS(msg, "store_max_entries_per_tenant");
    hpz_store_share_stats(st, &sh);
    ASSERT_EQ(sh.evicted, 1);
    ASSERT_EQ(sh.replicas, 2);

    /* every job ends: only idle replicas are left, then none */
    hpz_store_drop_job(st, &g_job_b);
    hpz_store_drop_job(st, &g_job_c);
    hpz_store_stats(st, &bytes, NULL, NULL, NULL);
    ASSERT_EQ(bytes, 2u * 2u * 1024u * 4u);
    hpz_store_share_stats(st, &sh);
    ASSERT_EQ(sh.idle, 2);
    hpz_store_free(st);
}

static void test_a_reserve_the_cap_refuses_evicts_nothing(void)
{
    const uint64_t slot = 1024u * 4u;
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, slot, 0);
    ASSERT(st);
    hpz_store_set_max_entries(st, 1);
    char key[HPZ_CONTENT_KEY_LEN + 1], msg[256] = "";
    content_key(key, 7);
    /* tenant 2000's replica fills devices 0 and 1, then goes idle */
    struct hpz_spec pub = spec(2000, &g_job_a, key, 1, NULL);
    ASSERT_EQ(store(st, &pub, msg, sizeof msg), 0);
    hpz_store_drop_job(st, &g_job_a);
    /* tenant 1000 is at its cap with a live private key on devices 2, 3 */
    static const int far[2] = {2, 3};
    struct hpz_spec mine = spec(1000, &g_job_b, "w0", 0, far);
    ASSERT_EQ(store(st, &mine, msg, sizeof msg), 0);
    /* its next key, on devices 0 and 1: the device budget alone would
     * evict tenant 2000's replica, the cap refuses it anyway */
    struct hpz_spec next = spec(1000, &g_job_b, "w1", 0, NULL);
    int rc = store(st, &next, msg, sizeof msg);
    printf("a reserve over the entry cap: %s %s\n", zpp_err_name(rc), msg);
    ASSERT_EQ(rc, ZPP_ELIMIT); /* (the message names the first check that fails) */
    struct hpz_share_stats sh;
    hpz_store_share_stats(st, &sh);
    ASSERT_EQ(sh.evicted, 0);
    ASSERT_EQ(sh.replicas, 1);
    ASSERT_EQ(find(st, 2000, key), 0);
    ASSERT_EQ(hpz_store_device_bytes(st, 0), slot);
    ASSERT_EQ(hpz_store_device_bytes(st, 1), slot);
    ASSERT_EQ(hpz_store_tenant_bytes(st, 2000), 2u * slot);
    hpz_store_drop_job(st, &g_job_b);
    ASSERT_EQ(hpz_store_tenant_bytes(st, 1000), 0);
    hpz_store_free(st);
}

static void test_a_key_stored_again_at_the_cap(void)
{
    struct hpz_store *st = hpz_store_new(&be_host_ops, NULL, 0, 0);
    ASSERT(st);
    hpz_store_set_max_entries(st, 2);
    char msg[256] = "";
    struct hpz_spec sp = spec(1000, &g_job_b, "w0", 0, NULL);
    ASSERT_EQ(store(st, &sp, msg, sizeof msg), 0);
    sp.key = "w1";
    ASSERT_EQ(store(st, &sp, msg, sizeof msg), 0);
    sp.key = "w0";
    int rc = store(st, &sp, msg, sizeof msg);
    printf("w0 stored again at a cap of 2: %s %s\n", zpp_err_name(rc), msg);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(hpz_store_tenant_entries(st, 1000), 2);
    uint64_t bytes = 0, entries = 0;
    hpz_store_stats(st, &bytes, &entries, NULL, NULL);
    ASSERT_EQ(entries, 2);
    ASSERT_EQ(bytes, 2u * 2u * 1024u * 4u);
    /* the same key of another job is another entry */
    struct hpz_spec other = spec(1000, &g_job_c, "w0", 0, NULL);
    ASSERT_EQ(store(st, &other, msg, sizeof msg), ZPP_ELIMIT);
    sp.key = "w2";
    ASSERT_EQ(store(st, &sp, msg, sizeof msg), ZPP_ELIMIT);
    ASSERT_CONTAINS(msg, "store_max_entries_per_tenant");
    hpz_store_drop_job(st, &g_job_b);
    hpz_store_stats(st, &bytes, &entries, NULL, NULL);
    ASSERT_EQ(bytes, 0);
    ASSERT_EQ(entries, 0);
    hpz_store_free(st);
}

int main(void)
{
    test_idle_replicas_make_room_under_the_entry_cap();
    test_a_reserve_the_cap_refuses_evicts_nothing();
    test_a_key_stored_again_at_the_cap();
    printf("test_hpz_store_entry_cap: ok\n");
    return 0;
}
