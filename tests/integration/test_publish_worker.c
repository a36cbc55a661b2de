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
#include "tests/test.h"

/* The daemon's SHA-256, compiled into this test: the key a client computes
 * must be the one the daemon checks. */
#include "daemon/sha256.c"

#define COUNT 1000u
#define SHARD (COUNT / 2)
#define ONE_COPY (2u * SHARD * 4u) /* 2 slots of 500 fp32 */
#define BUSY_CALLS 20

static zh_daemon g_d;

struct pair {
    zpp_conn *c[2];
    zpp_shm *in[2], *out[2];
    uint64_t in_id[2], out_id[2];
};

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

static void pair_open(struct pair *p, const char *job)
{
    memset(p, 0, sizeof *p);
    for (int r = 0; r < 2; r++) {
        ASSERT_EQ(zpp_connect(g_d.socket, &p->c[r]), 0);
        zpp_job_desc jd = {.job_id = job,
                           .rank = (uint32_t)r,
                           .world_size = 2,
                           .local_rank = (uint32_t)r,
                           .node_count = 1,
                           .gpu_uuid = "host"};
        ASSERT_EQ(zpp_hello(p->c[r], &jd, NULL), 0);
        ASSERT_EQ(zpp_shm_create(SHARD * 4, &p->in[r]), 0);
        ASSERT_EQ(zpp_shm_create(COUNT * 4, &p->out[r]), 0);
        ASSERT_EQ(zpp_register_shm(p->c[r], p->in[r], 0, SHARD * 4, &p->in_id[r]), 0);
        ASSERT_EQ(zpp_register_shm(p->c[r], p->out[r], 0, COUNT * 4, &p->out_id[r]), 0);
    }
}

static void pair_close(struct pair *p)
{
    for (int r = 0; r < 2; r++) {
        if (p->c[r])
            zpp_close(p->c[r]);
        zpp_shm_destroy(p->in[r]);
        zpp_shm_destroy(p->out[r]);
    }
}

static void pair_fill(struct pair *p, float base)
{
    for (int r = 0; r < 2; r++) {
        float *x = zpp_shm_ptr(p->in[r]);
        for (unsigned i = 0; i < SHARD; i++)
            x[i] = tensor((unsigned)r * SHARD + i, base);
        memset(zpp_shm_ptr(p->out[r]), 0x5A, COUNT * 4);
    }
}

static void pair_submit(struct pair *p, int op, uint32_t flags, const char *key, uint64_t req[2])
{
    for (int r = 0; r < 2; r++) {
        zpp_coll call;
        zpp_coll_init(&call, (zpp_op_t)op, ZPP_FP32, COUNT);
        call.input = (zpp_bufref){p->in_id[r], 0};
        call.output = (zpp_bufref){p->out_id[r], 0};
        call.flags = flags;
        call.content_key = key;
        ASSERT_EQ(zpp_submit(p->c[r], &call, &req[r]), 0);
    }
}

static int pair_wait(struct pair *p, const uint64_t req[2], const char *what)
{
    int rc[2];
    for (int r = 0; r < 2; r++)
        rc[r] = zpp_wait(p->c[r], req[r], NULL);
    printf("%s -> %s%s%s\n", what, zpp_err_name(rc[0]), rc[0] ? ": " : "",
           rc[0] ? zpp_last_error(p->c[0]) : "");
    ASSERT_EQ(rc[0], rc[1]);
    return rc[0];
}

static int pair_call(struct pair *p, int op, uint32_t flags, const char *key, const char *what)
{
    uint64_t req[2];
    pair_submit(p, op, flags, key, req);
    return pair_wait(p, req, what);
}

static int pair_holds(struct pair *p, float base)
{
    for (int r = 0; r < 2; r++) {
        const float *y = zpp_shm_ptr(p->out[r]);
        for (unsigned i = 0; i < COUNT; i++)
            if (memcmp(&y[i], &(float){tensor(i, base)}, 4) != 0) {
                fprintf(stderr, "rank %d element %u: %g, expected %g\n", r, i, (double)y[i],
                        (double)tensor(i, base));
                return 0;
            }
    }
    return 1;
}

static unsigned long long store_bytes(void)
{
    zpp_conn *adm;
    static char js[65536];
    ASSERT_EQ(zpp_connect(g_d.socket, &adm), 0);
    ASSERT_EQ(zpp_admin_status_json(adm, js, sizeof js), 0);
    zpp_close(adm);
    const char *p = strstr(js, "\"store_bytes\":");
    ASSERT(p);
    return strtoull(p + strlen("\"store_bytes\":"), NULL, 10);
}

static int expect_bytes(unsigned long long got, unsigned long long want, const char *what)
{
    if (got != want) {
        fprintf(stderr, "%s: %llu, expected %llu\n", what, got, want);
        return 1;
    }
    return 0;
}

static int expect(int rc, int want, const char *what)
{
    if (rc != want) {
        fprintf(stderr, "%s: got %s, expected %s\n", what, zpp_err_name(rc), zpp_err_name(want));
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
    struct pair base, busy, gone;
    pair_open(&base, "base");
    pair_open(&busy, "busy");
    pair_open(&gone, "gone");

    /* base's publish: its key check waits at the gate. */
    uint64_t req_base[2], req_gone[2];
    pair_fill(&base, 1.0f);
    pair_submit(&base, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, key, req_base);

    /* busy is served meanwhile. */
    for (int i = 0; i < BUSY_CALLS; i++) {
        pair_fill(&busy, 10.0f + (float)i);
        char what[64];
        snprintf(what, sizeof what, "busy: all-gather %d", i);
        fails += expect(pair_call(&busy, ZPP_OP_ALLGATHER, 0, NULL, what), 0, what);
        fails += !pair_holds(&busy, 10.0f + (float)i);
    }
    for (int r = 0; r < 2; r++)
        fails += expect(zpp_test(base.c[r], req_base[r], NULL), ZPP_EBUSY,
                        "base's publish while its key check waits");

    /* gone publishes, then loses rank 1 while its check waits. */
    pair_fill(&gone, 3.0f);
    pair_submit(&gone, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, key_gone, req_gone);
    for (int r = 0; r < 2; r++)
        fails += expect(zpp_test(gone.c[r], req_gone[r], NULL), ZPP_EBUSY,
                        "gone's publish while its key check waits");
    zpp_close(gone.c[1]);
    gone.c[1] = NULL;
    /* the daemon still serves: busy's call is answered */
    pair_fill(&busy, 5.0f);
    fails += expect(pair_call(&busy, ZPP_OP_ALLGATHER, 0, NULL, "busy: after gone's rank left"), 0,
                    "busy after gone's rank left");

    /* The gate opens. */
    FILE *f = fopen(gate, "w");
    ASSERT(f != NULL);
    fclose(f);
    fails += expect(pair_wait(&base, req_base, "base: publish"), 0, "base publishes");
    fails += !pair_holds(&base, 1.0f);
    int rc = zpp_wait(gone.c[0], req_gone[0], NULL);
    printf("gone: publish, a rank gone -> %s: %s\n", zpp_err_name(rc), zpp_last_error(gone.c[0]));
    if (rc == 0) {
        fprintf(stderr, "gone's publish succeeded after its job lost a rank\n");
        fails++;
    }
    fails += expect_bytes(store_bytes(), ONE_COPY, "store bytes: base's replica alone");

    /* The replica, read and published again from another job. */
    fails += expect(pair_call(&busy, ZPP_OP_HPZ_GATHER, 0, key, "busy: hpZ gather by key"), 0,
                    "busy reads the replica");
    fails += !pair_holds(&busy, 1.0f);
    pair_fill(&busy, 1.0f);
    fails += expect(pair_call(&busy, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, key, "busy: same bytes"),
                    0, "the same bytes published again");
    fails += expect_bytes(store_bytes(), ONE_COPY, "one copy for two jobs");
    pair_fill(&busy, 2.0f);
    fails += expect(pair_call(&busy, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, key, "busy: other bytes"),
                    ZPP_EEXIST, "different bytes under a used key");
    pair_fill(&busy, 1.0f);
    fails += expect(pair_call(&busy, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, wrong, "busy: wrong key"),
                    ZPP_EMISMATCH, "a key that is not the hash");
    fails += expect_bytes(store_bytes(), ONE_COPY, "one copy at the end");

    pair_close(&base);
    pair_close(&busy);
    pair_close(&gone);
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
