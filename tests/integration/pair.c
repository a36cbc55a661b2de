/* pair.c — see pair.h. */
#include "pair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test.h"

int zh_pair_open(zh_pair *p, const char *socket, const char *job, unsigned count)
{
    memset(p, 0, sizeof *p);
    p->count = count;
    size_t shard = count / 2 * sizeof(float), full = count * sizeof(float);
    for (int r = 0; r < 2; r++) {
        ASSERT_EQ(zpp_connect(socket, &p->c[r]), 0);
        zpp_job_desc jd = {.job_id = job,
                           .rank = (uint32_t)r,
                           .world_size = 2,
                           .local_rank = (uint32_t)r,
                           .node_count = 1,
                           .gpu_uuid = "host"};
        int rc = zpp_hello(p->c[r], &jd, NULL);
        if (rc) {
            fprintf(stderr, "%s rank %d: hello: %s: %s\n", job, r, zpp_err_name(rc),
                    zpp_last_error(p->c[r]));
            return rc;
        }
        ASSERT_EQ(zpp_shm_create(shard, &p->in[r]), 0);
        ASSERT_EQ(zpp_shm_create(full, &p->out[r]), 0);
        ASSERT_EQ(zpp_register_shm(p->c[r], p->in[r], 0, shard, &p->in_id[r]), 0);
        ASSERT_EQ(zpp_register_shm(p->c[r], p->out[r], 0, full, &p->out_id[r]), 0);
    }
    return 0;
}

void zh_pair_close(zh_pair *p)
{
    for (int r = 0; r < 2; r++) {
        if (p->c[r])
            zpp_close(p->c[r]);
        zpp_shm_destroy(p->in[r]);
        zpp_shm_destroy(p->out[r]);
    }
}

void zh_pair_fill(zh_pair *p, zh_tensor_fn t, float base)
{
    unsigned shard = p->count / 2;
    for (int r = 0; r < 2; r++) {
        float *x = zpp_shm_ptr(p->in[r]);
        for (unsigned i = 0; i < shard; i++)
            x[i] = t((unsigned)r * shard + i, base);
        memset(zpp_shm_ptr(p->out[r]), 0x5A, p->count * sizeof(float));
    }
}

void zh_pair_submit(zh_pair *p, int op, uint32_t flags, const char *content_key, uint64_t req[2])
{
    for (int r = 0; r < 2; r++) {
        zpp_coll call;
        zpp_coll_init(&call, (zpp_op_t)op, ZPP_FP32, p->count);
        call.input = (zpp_bufref){p->in_id[r], 0};
        call.output = (zpp_bufref){p->out_id[r], 0};
        call.flags = flags;
        call.content_key = content_key;
        ASSERT_EQ(zpp_submit(p->c[r], &call, &req[r]), 0);
    }
}

int zh_pair_wait(zh_pair *p, const uint64_t req[2], const char *what)
{
    int rc[2];
    for (int r = 0; r < 2; r++)
        rc[r] = zpp_wait(p->c[r], req[r], NULL);
    printf("%s -> %s%s%s\n", what, zpp_err_name(rc[0]), rc[0] ? ": " : "",
           rc[0] ? zpp_last_error(p->c[0]) : "");
    ASSERT_EQ(rc[0], rc[1]);
    return rc[0];
}

int zh_pair_call(zh_pair *p, int op, uint32_t flags, const char *content_key, const char *what)
{
    uint64_t req[2];
    zh_pair_submit(p, op, flags, content_key, req);
    return zh_pair_wait(p, req, what);
}

int zh_pair_holds(const zh_pair *p, zh_tensor_fn t, float base)
{
    for (int r = 0; r < 2; r++) {
        const float *y = zpp_shm_ptr(p->out[r]);
        for (unsigned i = 0; i < p->count; i++) {
            float want = t(i, base);
            if (memcmp(&y[i], &want, sizeof want) != 0) {
                fprintf(stderr, "rank %d element %u: %g, expected %g\n", r, i, (double)y[i],
                        (double)want);
                return 0;
            }
        }
    }
    return 1;
}

unsigned long long zh_store_bytes(const char *socket)
{
    zpp_conn *adm;
    static char js[65536];
    ASSERT_EQ(zpp_connect(socket, &adm), 0);
    ASSERT_EQ(zpp_admin_status_json(adm, js, sizeof js), 0);
    zpp_close(adm);
    const char *p = strstr(js, "\"store_bytes\":");
    ASSERT(p);
    return strtoull(p + strlen("\"store_bytes\":"), NULL, 10);
}

int zh_expect(int rc, int want, const char *what)
{
    if (rc != want) {
        fprintf(stderr, "%s: got %s, expected %s\n", what, zpp_err_name(rc), zpp_err_name(want));
        return 1;
    }
    return 0;
}
