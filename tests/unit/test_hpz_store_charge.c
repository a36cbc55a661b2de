/*
 * test_hpz_store_charge.c — the hpZ store charges what the backend's
 * allocation really takes (be_ops.store_size), not the slice's bytes. The
 * cuda backend maps a whole VMM granule (2 MiB on Hopper) per slot; before
 * session 22 a count-1 all-gather under a new key was charged 4 bytes for
 * those 2 MiB, so a tenant could fill every GPU of the node under a 1 GiB
 * budget (an audit). Here a backend table wraps the host backend with the
 * cuda backend's rounding: under an 8 MiB budget four such keys fit, the
 * fifth is refused with ZPP_ELIMIT, and the store's accounting matches the
 * memory mapped. And store_max_entries_per_tenant caps a tenant's entries.
 */
#include <string.h>

#include "coll_rig.h"
#include "hpz_store.h"
#include "zpp.h"

#define GRAN (2u << 20)

static uint64_t g_real; /* what the wrapped backend maps, as the cuda one does */
static struct be_ops g_ops;

static size_t gran_size(void *backend, int device, size_t bytes)
{
    (void)backend;
    (void)device;
    size_t size = (bytes + GRAN - 1) / GRAN * GRAN;
    return size ? size : GRAN;
}

static int gran_alloc(void *backend, int device, size_t bytes, void **out)
{
    g_real += gran_size(backend, device, bytes);
    return be_host_ops.store_alloc(backend, device, bytes, out);
}

int main(void)
{
    g_ops = be_host_ops;
    g_ops.store_alloc = gran_alloc;
    g_ops.store_size = gran_size;
    struct hpz_store *st = hpz_store_new(&g_ops, NULL, 8u << 20, 0);
    ASSERT(st);
    struct rig g;
    memset(&g, 0, sizeof g);
    g.t = topo_of(1, 1);
    struct coll_args a = {.op = ZPP_OP_ALLGATHER,
                          .dtype = ZK_FP32,
                          .out_dtype = ZK_FP32,
                          .bits = 8,
                          .reduce = ZPP_SUM,
                          .block = COLL_DEFAULT_BLOCK,
                          .stages = 1,
                          .count = 1};
    rig_alloc_fill(&g, &a, 0);
    int kept = 0, rc = 0;
    char msg[256] = "";
    for (int k = 0; k < 16; k++) {
        snprintf(a.hpz_key, sizeof a.hpz_key, "tiny-%d", k);
        rc = rig_call(&g, &a, st, "charge", NULL, msg);
        if (rc)
            break;
        kept++;
    }
    printf("%d count-1 keys kept under an 8 MiB budget, then %s: %s\n", kept, zpp_err_name(rc),
           msg);
    ASSERT_EQ(kept, 4);
    ASSERT_EQ(rc, ZPP_ELIMIT);
    ASSERT_CONTAINS(msg, "store_budget");
    ASSERT_EQ(hpz_store_device_bytes(st, 0), (uint64_t)8u << 20);
    ASSERT_EQ(g_real, (uint64_t)8u << 20);
    hpz_store_free(st);

    /* store_max_entries_per_tenant: every store operation walks the
     * entries, so one tenant's many tiny keys slowed every other tenant's
     * calls (100 000 of them: 4 ms a call, an audit); the cap bounds them. */
    st = hpz_store_new(&be_host_ops, NULL, 1u << 30, 0);
    ASSERT(st);
    hpz_store_set_max_entries(st, 5);
    kept = 0;
    for (int k = 0; k < 16; k++) {
        snprintf(a.hpz_key, sizeof a.hpz_key, "many-%d", k);
        rc = rig_call(&g, &a, st, "entries", NULL, msg);
        if (rc)
            break;
        kept++;
    }
    printf("%d keys kept under store_max_entries_per_tenant = 5, then %s: %s\n", kept,
           zpp_err_name(rc), msg);
    ASSERT_EQ(kept, 5);
    ASSERT_EQ(rc, ZPP_ELIMIT);
    ASSERT_CONTAINS(msg, "store_max_entries_per_tenant");
    rig_free(&g);
    hpz_store_free(st);
    printf("test_hpz_store_charge: ok\n");
    return 0;
}
