/*
 * test_store_hostile.c — the job and hpZ-store lifecycle under hostile and
 * buggy client sequences, checked for right answers while it runs and for
 * exact accounting afterwards. Needs root (half the workers drop to uid
 * 65534); exits 77 otherwise.
 *
 * Six worker processes (three of uid 0, three of uid 65534, which may read
 * uid 0's replicas while `hpz_share = 0:65534` holds) each run jobs of 2
 * ranks, one after another, driving both ranks over two connections. In
 * each job a seeded random sequence of: publishes of four tensors shared by
 * every job (so two jobs publish the same bytes at once, and publishes race
 * with reads, detaches and evictions), reads and detaches of them,
 * invalidate-all with and without ZPP_FLAG_KEEP_SHARED, plain and qwZ
 * all-gathers keeping hpZ keys, hpZ gathers and invalidates of those keys,
 * five calls pipelined, calls whose content keys differ across the ranks,
 * an output deregistered while its call waits, rank 1 leaving and a new
 * connection rejoining in its place; and a job's end: both ranks leave, or
 * rank 1 leaves (Goodbye) or dies (no Goodbye) with or without a call
 * pending on rank 0, or leaves for good so that rank 0's next call fails
 * after rejoin_timeout_ms. Meanwhile a reloader rewrites the budgets,
 * store_max_entries_per_tenant and the share rule and sends SIGHUP every
 * 150 ms. The store's budgets are a few entries wide, so reserves evict
 * idle replicas and fail with ZPP_ELIMIT all along.
 *
 * While it runs: every call ends the same way on both ranks, with one of
 * the codes its situation allows; a read that succeeds returns the
 * published tensor bit for bit; an hpZ gather of a key returns what that
 * job's last successful all-gather kept under it, bit for bit, or
 * ZPP_ENOENT if it kept nothing (never another job's or tenant's bytes).
 * Afterwards, with every job ended: the daemon has no job, what it holds
 * is exactly its idle replicas (status store_bytes and store entries are
 * their sum and count; none is attached or pinned; each tenant's bytes are
 * its replicas'), a new job still publishes and reads, and the daemon
 * stops cleanly (the ASan build checks its memory).
 */
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "pair.h"
#include "tests/test.h"

/* The daemon's SHA-256, compiled in: the test computes the content keys. */
#include "daemon/sha256.c"

/* Workers return early on a failed check, connections still open. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define COUNT 1000u
#define ONE_COPY (2u * (COUNT / 2) * 4u) /* a replica: 2 slots of 500 fp32 */
#define NKEYS 4                          /* shared tensors */
#define NSLOTS 4                         /* hpZ keys per job */
#define WORKERS 6
#define ROUNDS 10
#define OTHER_UID 65534

static zh_daemon g_d;
static char g_key[NKEYS][80];

static float tensor(unsigned i, float base)
{
    return base + (float)i * 0.125f;
}

static uint32_t g_rng;
static uint32_t rnd(uint32_t n)
{
    g_rng = g_rng * 1103515245u + 12345u;
    return (g_rng >> 16) % n;
}

/* Fails the worker with a message (its exit code is 1). */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);                                     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* One call on both ranks; both must end the same way: that code, else -100. */
static int call2(zh_pair *p, int op, uint32_t flags, const char *ck, const char *hk)
{
    uint64_t req[2];
    for (int r = 0; r < 2; r++) {
        zpp_coll c;
        zpp_coll_init(&c, (zpp_op_t)op, ZPP_FP32, p->count);
        c.input = (zpp_bufref){p->in_id[r], 0};
        c.output = (zpp_bufref){p->out_id[r], 0};
        c.flags = flags;
        c.content_key = ck;
        c.hpz_key = hk;
        ASSERT_EQ(zpp_submit(p->c[r], &c, &req[r]), 0);
    }
    int rc0 = zpp_wait(p->c[0], req[0], NULL), rc1 = zpp_wait(p->c[1], req[1], NULL);
    if (rc0 != rc1) {
        fprintf(stderr, "ranks disagree: %s (%s) / %s\n", zpp_err_name(rc0),
                zpp_last_error(p->c[0]), zpp_err_name(rc1));
        return -100;
    }
    return rc0;
}

static int outputs_equal(const zh_pair *p, const float *want)
{
    for (int r = 0; r < 2; r++)
        if (memcmp(zpp_shm_ptr(p->out[r]), want, COUNT * sizeof(float)) != 0)
            return 0;
    return 1;
}

static void poison(zh_pair *p)
{
    for (int r = 0; r < 2; r++)
        memset(zpp_shm_ptr(p->out[r]), 0x77, COUNT * sizeof(float));
}

/* Rank 1 leaves (Goodbye) and a new connection rejoins in its place. */
static int rejoin1(zh_pair *p, const char *job)
{
    zpp_close(p->c[1]);
    p->c[1] = NULL;
    ASSERT_EQ(zpp_connect(g_d.socket, &p->c[1]), 0);
    zpp_job_desc jd = {.job_id = job,
                       .rank = 1,
                       .world_size = 2,
                       .local_rank = 1,
                       .node_count = 1,
                       .gpu_uuid = "host"};
    int rc = zpp_hello(p->c[1], &jd, NULL);
    CHECK(rc == 0, "%s: rejoin: %s", job, zpp_last_error(p->c[1]));
    ASSERT_EQ(zpp_register_shm(p->c[1], p->in[1], 0, COUNT / 2 * 4, &p->in_id[1]), 0);
    ASSERT_EQ(zpp_register_shm(p->c[1], p->out[1], 0, COUNT * 4, &p->out_id[1]), 0);
    return 0;
}

/* Five calls submitted on each rank before any wait: publish k, read k,
 * detach k, keep hk, gather hk. */
static int pipelined(zh_pair *p, const char *job, int k, const char *hk, int *kept, float *saved)
{
    uint64_t req[2][5];
    zh_pair_fill(p, tensor, (float)(k + 1));
    for (int r = 0; r < 2; r++) {
        zpp_coll c[5];
        zpp_coll_init(&c[0], ZPP_OP_ALLGATHER, ZPP_FP32, COUNT);
        c[0].flags = ZPP_FLAG_PUBLISH;
        c[0].content_key = g_key[k];
        zpp_coll_init(&c[1], ZPP_OP_HPZ_GATHER, ZPP_FP32, COUNT);
        c[1].content_key = g_key[k];
        zpp_coll_init(&c[2], ZPP_OP_HPZ_INVALIDATE, ZPP_FP32, COUNT);
        c[2].content_key = g_key[k];
        zpp_coll_init(&c[3], ZPP_OP_ALLGATHER, ZPP_FP32, COUNT);
        c[3].hpz_key = hk;
        zpp_coll_init(&c[4], ZPP_OP_HPZ_GATHER, ZPP_FP32, COUNT);
        c[4].hpz_key = hk;
        for (int q = 0; q < 5; q++) {
            c[q].input = (zpp_bufref){p->in_id[r], 0};
            c[q].output = (zpp_bufref){p->out_id[r], 0};
            ASSERT_EQ(zpp_submit(p->c[r], &c[q], &req[r][q]), 0);
        }
    }
    int rc[2][5];
    for (int r = 0; r < 2; r++)
        for (int q = 0; q < 5; q++)
            rc[r][q] = zpp_wait(p->c[r], req[r][q], NULL);
    for (int q = 0; q < 5; q++)
        CHECK(rc[0][q] == rc[1][q], "%s: pipelined call %d: ranks disagree", job, q);
    CHECK(rc[0][0] == 0 || rc[0][0] == ZPP_ELIMIT, "%s: pipelined publish: %s", job,
          zpp_err_name(rc[0][0]));
    CHECK(rc[0][3] == 0 || rc[0][3] == ZPP_ELIMIT, "%s: pipelined keep: %s", job,
          zpp_err_name(rc[0][3]));
    CHECK(rc[0][4] == (rc[0][3] == 0 ? 0
                       : *kept       ? 0
                                     : ZPP_ENOENT),
          "%s: pipelined gather of %s: %s", job, hk, zpp_err_name(rc[0][4]));
    if (rc[0][3] == 0) { /* the gather read what the all-gather kept */
        CHECK(zh_pair_holds(p, tensor, (float)(k + 1)), "%s: pipelined gather: wrong bytes", job);
        memcpy(saved, zpp_shm_ptr(p->out[0]), COUNT * sizeof(float));
        *kept = 1;
    } else if (*kept) { /* the key's earlier bytes */
        CHECK(outputs_equal(p, saved), "%s: pipelined gather: not the earlier bytes", job);
    }
    return 0;
}

/* One job's hostile life. Returns 0, or 1 after a message. */
static int one_job(const char *job, int w, int round, float *saved[NSLOTS])
{
    zh_pair p;
    if (zh_pair_open(&p, g_d.socket, job, COUNT))
        return 1;
    int kept[NSLOTS] = {0};
    int nops = 3 + (int)rnd(12), ended = 0;
    for (int op = 0; op < nops && !ended; op++) {
        int k = (int)rnd(NKEYS), i = (int)rnd(NSLOTS), rc;
        char hk[8];
        snprintf(hk, sizeof hk, "l%d", i);
        switch (rnd(16)) {
        case 0:
        case 1: /* publish tensor k */
            zh_pair_fill(&p, tensor, (float)(k + 1));
            rc = call2(&p, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, g_key[k], NULL);
            CHECK(rc == 0 || rc == ZPP_ELIMIT, "%s: publish %d: %s %s", job, k, zpp_err_name(rc),
                  zpp_last_error(p.c[0]));
            CHECK(rc || zh_pair_holds(&p, tensor, (float)(k + 1)), "%s: publish: output", job);
            break;
        case 2:
        case 3: /* read it (ENOENT once evicted, EPERM across tenants) */
            poison(&p);
            rc = call2(&p, ZPP_OP_HPZ_GATHER, 0, g_key[k], NULL);
            CHECK(rc == 0 || rc == ZPP_ENOENT || rc == ZPP_EPERM, "%s: read %d: %s %s", job, k,
                  zpp_err_name(rc), zpp_last_error(p.c[0]));
            CHECK(rc || zh_pair_holds(&p, tensor, (float)(k + 1)), "%s: read %d: wrong bytes", job,
                  k);
            break;
        case 4: /* detach */
            rc = call2(&p, ZPP_OP_HPZ_INVALIDATE, 0, g_key[k], NULL);
            CHECK(rc == 0, "%s: detach: %s", job, zpp_err_name(rc));
            break;
        case 5: /* invalidate-all, keeping the replicas attached or not */
            rc = call2(&p, ZPP_OP_HPZ_INVALIDATE,
                       ZPP_FLAG_INVALIDATE_ALL | (rnd(2) ? ZPP_FLAG_KEEP_SHARED : 0), NULL, NULL);
            CHECK(rc == 0, "%s: invalidate-all: %s", job, zpp_err_name(rc));
            memset(kept, 0, sizeof kept);
            break;
        case 6: /* keep hk: a plain or a qwZ all-gather */
            zh_pair_fill(&p, tensor, (float)(100 * w + 10 * round + i));
            rc = call2(&p, rnd(2) ? ZPP_OP_QWZ_ALLGATHER : ZPP_OP_ALLGATHER, 0, NULL, hk);
            CHECK(rc == 0 || rc == ZPP_ELIMIT, "%s: keep %s: %s %s", job, hk, zpp_err_name(rc),
                  zpp_last_error(p.c[0]));
            if (rc == 0) {
                memcpy(saved[i], zpp_shm_ptr(p.out[0]), COUNT * sizeof(float));
                kept[i] = 1;
            }
            break;
        case 7: /* gather hk */
            poison(&p);
            rc = call2(&p, ZPP_OP_HPZ_GATHER, 0, NULL, hk);
            CHECK(rc == (kept[i] ? 0 : ZPP_ENOENT), "%s: gather %s: %s %s", job, hk,
                  zpp_err_name(rc), zpp_last_error(p.c[0]));
            CHECK(rc || outputs_equal(&p, saved[i]), "%s: gather %s: wrong bytes", job, hk);
            break;
        case 8: /* invalidate hk */
            rc = call2(&p, ZPP_OP_HPZ_INVALIDATE, 0, NULL, hk);
            CHECK(rc == 0, "%s: invalidate %s: %s", job, hk, zpp_err_name(rc));
            kept[i] = 0;
            break;
        case 9:
            if (rejoin1(&p, job))
                return 1;
            break;
        case 10: { /* rank 0 waits in a call, rank 1 leaves: the job aborts */
            uint64_t rq;
            zpp_coll c;
            int gather = (int)rnd(2);
            zpp_coll_init(&c, gather ? ZPP_OP_HPZ_GATHER : ZPP_OP_BARRIER, ZPP_FP32, COUNT);
            c.output = (zpp_bufref){p.out_id[0], 0};
            c.content_key = gather ? g_key[k] : NULL;
            ASSERT_EQ(zpp_submit(p.c[0], &c, &rq), 0);
            usleep(rnd(3) * 1000);
            zpp_close(p.c[1]);
            p.c[1] = NULL;
            rc = zpp_wait(p.c[0], rq, NULL);
            CHECK(rc == ZPP_EABORTED, "%s: abort: %s", job, zpp_err_name(rc));
            ended = 1;
            break;
        }
        case 11: { /* rank 1 leaves for good: rank 0's next call fails */
            zpp_close(p.c[1]);
            p.c[1] = NULL;
            zpp_coll c;
            zpp_coll_init(&c, ZPP_OP_BARRIER, ZPP_FP32, COUNT);
            rc = zpp_collective(p.c[0], &c, NULL);
            CHECK(rc == ZPP_EABORTED, "%s: left for good: %s", job, zpp_err_name(rc));
            ended = 1;
            break;
        }
        case 12: { /* rank 1 dies (no Goodbye), a gather pending on rank 0 or not */
            uint64_t rq = 0;
            int pend = (int)rnd(2);
            zpp_coll c;
            if (pend) {
                zpp_coll_init(&c, ZPP_OP_HPZ_GATHER, ZPP_FP32, COUNT);
                c.output = (zpp_bufref){p.out_id[0], 0};
                c.hpz_key = hk;
                ASSERT_EQ(zpp_submit(p.c[0], &c, &rq), 0);
            }
            shutdown(zpp_fd(p.c[1]), SHUT_RDWR);
            zpp_coll_init(&c, ZPP_OP_BARRIER, ZPP_FP32, COUNT);
            rc = pend ? zpp_wait(p.c[0], rq, NULL) : zpp_collective(p.c[0], &c, NULL);
            CHECK(rc == ZPP_EABORTED, "%s: death: %s", job, zpp_err_name(rc));
            ended = 1;
            break;
        }
        case 13:
            if (pipelined(&p, job, k, hk, &kept[i], saved[i]))
                return 1;
            break;
        case 14: { /* the ranks name different content keys */
            uint64_t req[2];
            for (int r = 0; r < 2; r++) {
                zpp_coll c;
                zpp_coll_init(&c, ZPP_OP_HPZ_GATHER, ZPP_FP32, COUNT);
                c.output = (zpp_bufref){p.out_id[r], 0};
                c.content_key = g_key[(k + r) % NKEYS];
                ASSERT_EQ(zpp_submit(p.c[r], &c, &req[r]), 0);
            }
            for (int r = 0; r < 2; r++) {
                rc = zpp_wait(p.c[r], req[r], NULL);
                CHECK(rc == ZPP_EMISMATCH, "%s: mismatch: %s", job, zpp_err_name(rc));
            }
            break;
        }
        case 15: { /* rank 0's output deregistered while its call waits */
            uint64_t rq[2];
            zh_pair_fill(&p, tensor, 5.0f);
            for (int r = 0; r < 2; r++) {
                zpp_coll c;
                zpp_coll_init(&c, ZPP_OP_ALLGATHER, ZPP_FP32, COUNT);
                c.input = (zpp_bufref){p.in_id[r], 0};
                c.output = (zpp_bufref){p.out_id[r], 0};
                c.hpz_key = hk;
                ASSERT_EQ(zpp_submit(p.c[r], &c, &rq[r]), 0);
                if (r == 0)
                    ASSERT_EQ(zpp_deregister(p.c[0], p.out_id[0]), 0);
            }
            int r0 = zpp_wait(p.c[0], rq[0], NULL), r1 = zpp_wait(p.c[1], rq[1], NULL);
            CHECK(r0 == r1 && (r0 == 0 || r0 == ZPP_ELIMIT), "%s: deregistered: %s %s", job,
                  zpp_err_name(r0), zpp_err_name(r1));
            if (r0 == 0) {
                CHECK(zh_pair_holds(&p, tensor, 5.0f), "%s: deregistered: wrong bytes", job);
                memcpy(saved[i], zpp_shm_ptr(p.out[0]), COUNT * sizeof(float));
                kept[i] = 1;
            }
            ASSERT_EQ(zpp_register_shm(p.c[0], p.out[0], 0, COUNT * 4, &p.out_id[0]), 0);
            break;
        }
        }
    }
    zh_pair_close(&p);
    return 0;
}

static int worker(int w, void *arg)
{
    (void)arg;
    if (w % 2 && (setgroups(0, NULL) != 0 || setgid(OTHER_UID) != 0 || setuid(OTHER_UID) != 0)) {
        perror("dropping privileges");
        return 1;
    }
    g_rng = 777u + (uint32_t)w * 31u;
    float *saved[NSLOTS];
    for (int i = 0; i < NSLOTS; i++)
        ASSERT((saved[i] = malloc(COUNT * sizeof(float))) != NULL);
    int rc = 0;
    for (int round = 0; round < ROUNDS && !rc; round++) {
        char job[32];
        snprintf(job, sizeof job, "w%dr%d", w, round);
        rc = one_job(job, w, round, saved);
    }
    for (int i = 0; i < NSLOTS; i++)
        free(saved[i]);
    return rc;
}

/* Rewrites the limits and the share rule, and reloads, every 150 ms. */
static pid_t start_reloader(void)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid)
        return pid;
    for (int n = 0;; n++) {
        FILE *f = fopen(g_d.conf, "a");
        if (!f)
            _exit(1);
        if (n % 2)
            fprintf(f, "hpz_share = \nstore_budget = 8K\nstore_budget_per_tenant = 12K\n"
                       "store_max_entries_per_tenant = 3\n");
        else
            fprintf(f,
                    "hpz_share = 0:%d\nstore_budget = 16K\nstore_budget_per_tenant = 24K\n"
                    "store_max_entries_per_tenant = 5\n",
                    OTHER_UID);
        fclose(f);
        kill(g_d.pid, SIGHUP);
        usleep(150 * 1000);
    }
}

static unsigned long long json_u64(const char *from, const char *field)
{
    char want[64];
    snprintf(want, sizeof want, "\"%s\":", field);
    const char *p = strstr(from, want);
    ASSERT(p);
    return strtoull(p + strlen(want), NULL, 10);
}

static char g_json[1 << 20];

/* Every job has ended: the store holds its idle replicas and nothing else. */
static void check_store_at_rest(void)
{
    char *argv[] = {ZPPCTL_BIN, "-s", g_d.socket, "store", "--json", NULL};
    ASSERT_EQ(zh_run_capture(argv, 15000, g_json, sizeof g_json), 0);
    printf("$ zppctl store --json\n%s\n", g_json);
    ASSERT(strstr(g_json, "\"jobs\":[]"));
    const char *reps = strstr(g_json, "\"replicas\":[");
    ASSERT(reps);
    unsigned long long n = 0, sum = 0, own[2] = {0, 0};
    for (const char *r = strstr(reps, "{\"content_key\""); r;
         r = strstr(r + 1, "{\"content_key\"")) {
        unsigned long long b = json_u64(r, "bytes"), owner = json_u64(r, "owner_uid");
        ASSERT_EQ(b, ONE_COPY);
        ASSERT_EQ(json_u64(r, "attached_jobs"), 0);
        ASSERT_EQ(json_u64(r, "pins"), 0);
        ASSERT(owner == 0 || owner == OTHER_UID);
        own[owner != 0] += b;
        sum += b;
        n++;
    }
    printf("%llu idle replicas, %llu bytes (uid 0: %llu, uid %d: %llu)\n", n, sum, own[0],
           OTHER_UID, own[1]);
    ASSERT_EQ(json_u64(g_json, "bytes"), sum);
    ASSERT_EQ(json_u64(g_json, "entries"), n);
    ASSERT_EQ(zh_store_bytes(g_d.socket), sum);
    const char *ten = strstr(g_json, "\"tenants\":[{\"uid\":0,");
    ASSERT(ten);
    ASSERT_EQ(json_u64(ten, "bytes"), own[0]);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("test_store_hostile: needs root (setuid): skipped\n");
        return TEST_SKIP;
    }
    struct group *gr = getgrgid(OTHER_UID);
    if (!gr) {
        printf("test_store_hostile: no group with gid %d: skipped\n", OTHER_UID);
        return TEST_SKIP;
    }
    for (int k = 0; k < NKEYS; k++) {
        static float t[COUNT];
        for (unsigned i = 0; i < COUNT; i++)
            t[i] = tensor(i, (float)(k + 1));
        uint8_t d[SHA256_DIGEST_LEN];
        char hex[SHA256_HEX_LEN + 1];
        sha256(t, sizeof t, d);
        sha256_hex(d, hex);
        snprintf(g_key[k], sizeof g_key[k], "sha256:%s", hex);
    }
    char conf[512];
    snprintf(conf, sizeof conf,
             "socket_mode = 0660\nsocket_group = %s\nhpz_share = 0:%d\nstore_budget = 16K\n"
             "store_budget_per_tenant = 24K\nstore_max_entries_per_tenant = 5\n"
             "rejoin_timeout_ms = 300\ncall_timeout_ms = 20000\n",
             gr->gr_name, OTHER_UID);
    ASSERT_EQ(zh_daemon_start(conf, &g_d), 0);
    ASSERT_EQ(chmod(g_d.dir, 0711), 0);
    pid_t reloader = start_reloader();
    int rc = zh_run_ranks(WORKERS, worker, NULL, 300000, NULL);
    kill(reloader, SIGKILL);
    waitpid(reloader, NULL, 0);
    ASSERT_EQ(rc, 0);
    ASSERT(zh_daemon_alive(&g_d));

    /* The last jobs' sessions close on the daemon's next loop turns. */
    int64_t deadline = zh_now_ms() + 5000;
    char js[65536];
    for (;;) {
        zpp_conn *adm;
        ASSERT_EQ(zpp_connect(g_d.socket, &adm), 0);
        ASSERT_EQ(zpp_admin_status_json(adm, js, sizeof js), 0);
        zpp_close(adm);
        if (strstr(js, "\"jobs\":0") || zh_now_ms() > deadline)
            break;
        usleep(20 * 1000);
    }
    check_store_at_rest();

    /* Other jobs keep working: a new one publishes and reads. */
    zh_pair p;
    ASSERT_EQ(zh_pair_open(&p, g_d.socket, "after", COUNT), 0);
    zh_pair_fill(&p, tensor, 1.0f);
    ASSERT_EQ(zh_pair_call(&p, ZPP_OP_ALLGATHER, ZPP_FLAG_PUBLISH, g_key[0], "after: publish"), 0);
    poison(&p);
    ASSERT_EQ(zh_pair_call(&p, ZPP_OP_HPZ_GATHER, 0, g_key[0], "after: read"), 0);
    ASSERT(zh_pair_holds(&p, tensor, 1.0f));
    zh_pair_close(&p);

    ASSERT(zh_daemon_alive(&g_d));
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_store_hostile: ok\n");
    return 0;
}
