/*
 * test_mismatch.c — call k must agree on every rank. For each field of the
 * Collective that must agree (op, dtype, count, bits, block, stages,
 * hpz_key, reduce, out_dtype, flags), rank 3 of a 2x2 job submits call k
 * differing in that one field: every rank gets ZPP_EMISMATCH with a
 * message that names rank 3 and the field, and call k+1 (an exact
 * all-gather, checked) then succeeds on every rank. Also: rank 2 passes an
 * output buffer too small for the call: every rank's call fails with a
 * message naming rank 2, and the job goes on.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tests/test.h"

/* Rank children return straight after a failed check, connections and
 * shared memory still open: LeakSanitizer in the test's own processes would
 * report that, not a bug. The daemon (a separate program) keeps its own
 * leak checking. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define COUNT 1000u
#define BIG 16384u
#define BAD_RANK 3

static zh_daemon g_d;

static const char *const g_fields[] = {"op",     "dtype",  "count",     "bits",  "block",
                                       "stages", "hpz_key", "reduce", "out_dtype", "flags"};
#define NFIELDS (sizeof g_fields / sizeof g_fields[0])

static void base_call(zpp_coll *call, uint64_t in_id, uint64_t out_id)
{
    zpp_coll_init(call, ZPP_OP_QGZ_REDUCE_SCATTER, ZPP_BF16, COUNT);
    call->bits = 4;
    call->input = (zpp_bufref){in_id, 0};
    call->output = (zpp_bufref){out_id, 0};
}

static void alter(zpp_coll *call, const char *field)
{
    if (!strcmp(field, "op"))
        call->op = ZPP_OP_REDUCE_SCATTER;
    else if (!strcmp(field, "dtype"))
        call->dtype = ZPP_FP32;
    else if (!strcmp(field, "count"))
        call->count = COUNT + 24;
    else if (!strcmp(field, "bits"))
        call->bits = 8;
    else if (!strcmp(field, "block"))
        call->block = 512;
    else if (!strcmp(field, "stages"))
        call->stages = 3;
    else if (!strcmp(field, "hpz_key"))
        call->hpz_key = "rank3-key";
    else if (!strcmp(field, "reduce"))
        call->reduce = ZPP_MEAN;
    else if (!strcmp(field, "out_dtype"))
        call->out_dtype = ZPP_FP32;
    else if (!strcmp(field, "flags"))
        call->flags = ZPP_FLAG_FORCE_QUANT;
}

static int check_next_call_ok(zpp_conn *c, int rank, uint64_t in_id, uint64_t out_id,
                              float *in, const float *out, const char *after)
{
    for (int i = 0; i < 250; i++)
        in[i] = (float)(rank * 250 + i);
    zpp_result res;
    int rc = zpp_allgather(c, (zpp_bufref){in_id, 0}, (zpp_bufref){out_id, 0}, COUNT, ZPP_FP32,
                           &res);
    if (rc != 0) {
        fprintf(stderr, "rank %d: the call after %s failed: %s: %s\n", rank, after,
                zpp_err_name(rc), zpp_last_error(c));
        return 1;
    }
    for (int i = 0; i < (int)COUNT; i++) {
        if (out[i] != (float)i) {
            fprintf(stderr, "rank %d: all-gather after %s: element %d is %g\n", rank, after, i,
                    out[i]);
            return 1;
        }
    }
    return 0;
}

static int rank_main(int rank, void *arg)
{
    (void)arg;
    zpp_conn *c;
    if (zh_connect_join(&g_d, "mismatch", (uint32_t)rank, 4, 2, &c) != 0)
        return 1;
    zpp_shm *in_shm, *out_shm, *small_shm;
    uint64_t in_id, out_id, small_id;
    ASSERT_EQ(zpp_shm_create(BIG * 4, &in_shm), 0);
    ASSERT_EQ(zpp_shm_create(BIG * 4, &out_shm), 0);
    ASSERT_EQ(zpp_shm_create(4096, &small_shm), 0);
    ASSERT_EQ(zpp_register_shm(c, in_shm, 0, BIG * 4, &in_id), 0);
    ASSERT_EQ(zpp_register_shm(c, out_shm, 0, BIG * 4, &out_id), 0);
    ASSERT_EQ(zpp_register_shm(c, small_shm, 0, 64, &small_id), 0); /* 64 bytes */
    float *in = zpp_shm_ptr(in_shm);
    const float *out = zpp_shm_ptr(out_shm);
    int failures = 0;

    for (size_t f = 0; f < NFIELDS; f++) {
        zpp_coll call;
        base_call(&call, in_id, out_id);
        if (rank == BAD_RANK)
            alter(&call, g_fields[f]);
        zpp_result res;
        int rc = zpp_collective(c, &call, &res);
        const char *msg = zpp_last_error(c);
        char rank_s[32], field_s[32];
        snprintf(rank_s, sizeof rank_s, "rank %d", BAD_RANK);
        snprintf(field_s, sizeof field_s, " %s=", g_fields[f]);
        if (rc != ZPP_EMISMATCH || !strstr(msg, rank_s) || !strstr(msg, field_s)) {
            fprintf(stderr, "rank %d: field %s: got %s (%s); expected ZPP_EMISMATCH naming %s "
                            "and the field\n",
                    rank, g_fields[f], zpp_err_name(rc), rc ? msg : "", rank_s);
            failures++;
        }
        if (check_next_call_ok(c, rank, in_id, out_id, in, out, g_fields[f]))
            return 1;
    }

    /* Rank 2's output buffer is too small for its shard. */
    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_REDUCE_SCATTER, ZPP_FP32, 4 * COUNT);
    call.input = (zpp_bufref){in_id, 0};
    call.output = (zpp_bufref){rank == 2 ? small_id : out_id, 0};
    zpp_result res;
    int rc = zpp_collective(c, &call, &res);
    const char *msg = zpp_last_error(c);
    if (rc == 0 || !strstr(msg, "rank 2")) {
        fprintf(stderr, "rank %d: small output buffer on rank 2: got %s (%s)\n", rank,
                zpp_err_name(rc), rc ? msg : "");
        failures++;
    } else if (rc != ZPP_ERANGE) {
        fprintf(stderr, "rank %d: small output buffer: %s, docs/protocol.md says ZPP_ERANGE\n",
                rank, zpp_err_name(rc));
        failures++;
    }
    if (check_next_call_ok(c, rank, in_id, out_id, in, out, "a small buffer"))
        return 1;
    zpp_close(c);
    return failures ? 1 : 0;
}

int main(void)
{
    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    int rc = zh_run_ranks(4, rank_main, NULL, 60000, NULL);
    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    ASSERT_EQ(rc, 0);
    printf("test_mismatch: ok\n");
    return 0;
}
