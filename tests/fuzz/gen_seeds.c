/*
 * gen_seeds.c — writes the seed corpus of fuzz_frame: one valid frame of
 * each request and reply kind, a stream of several frames, and a few bare
 * bodies. Generated at test time (ctest fixture) so no binary is committed
 * and the seeds follow zpp.proto as it changes.
 *
 * usage: fuzz_seeds SEED_DIR [WORK_DIR]   (both are created if missing)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frame.h"
#include "zpp.h"

static const char *dir;
static int count;

static void put(const uint8_t *buf, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/seed-%02d.bin", dir, count++);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
        exit(1);
    }
}

static void put_request(Zpp__Request *req, uint8_t **stream, size_t *slen)
{
    uint8_t *buf;
    size_t len;
    req->version = ZPP__PROTOCOL_VERSION__PROTOCOL_VERSION;
    req->req_id = (uint64_t)count + 1;
    if (zpp_request_pack(req, ZPP_FRAME_DEFAULT_MAX, &buf, &len) != 0)
        exit(1);
    put(buf, len);
    put(buf + ZPP_FRAME_HDR, len - ZPP_FRAME_HDR); /* bare body */
    uint8_t *s = realloc(*stream, *slen + len);
    if (!s)
        exit(1);
    memcpy(s + *slen, buf, len);
    *stream = s;
    *slen += len;
    free(buf);
}

static void put_reply(Zpp__Reply *rep)
{
    uint8_t *buf;
    size_t len;
    if (zpp_reply_pack(rep, ZPP_FRAME_DEFAULT_MAX, &buf, &len) != 0)
        exit(1);
    put(buf, len);
    free(buf);
}

static void requests(void)
{
    uint8_t *stream = NULL;
    size_t slen = 0;
    Zpp__Request req = ZPP__REQUEST__INIT;

    Zpp__Hello h = ZPP__HELLO__INIT;
    h.job_id = (char *)"job-seed";
    h.rank = 3;
    h.world_size = 4;
    h.local_rank = 1;
    h.node_count = 2;
    h.gpu_uuid = (char *)"host";
    h.leader_addr = (char *)"10.0.0.1:7070";
    h.tenant_label = (char *)"team-a";
    h.pid = 4242;
    req.body_case = ZPP__REQUEST__BODY_HELLO;
    req.hello = &h;
    put_request(&req, &stream, &slen);
    /* a GPU rank's Hello with its ready events and done flags (the
     * validation of session 29's fields: counts, sizes, widths) */
    uint8_t ev[4][64] = {{7}, {8}, {9}, {10}};
    ProtobufCBinaryData evs[4];
    for (int i = 0; i < 4; i++)
        evs[i] = (ProtobufCBinaryData){sizeof ev[i], ev[i]};
    Zpp__Hello g = h;
    g.gpu_uuid = (char *)"GPU-5e1f0c2a-0000-0000-0000-000000000000";
    g.n_ready_events = 4;
    g.ready_events = evs;
    g.flags_nfds = 2;
    g.flags_size = 4096;
    g.nslots = 4;
    g.flag_bits = 32;
    g.says_goodbye = 1;
    req.hello = &g;
    put_request(&req, &stream, &slen);
    req.hello = &h;
    h.role = ZPP__ROLE__ROLE_ADMIN;
    put_request(&req, &stream, &slen);

    Zpp__RegisterBuffer rb = ZPP__REGISTER_BUFFER__INIT;
    uint8_t handle[64] = {1, 2, 3};
    rb.offset = 4096;
    rb.length = 1 << 20;
    rb.nfds = 1;
    rb.gpu_uuid = (char *)"host";
    req.body_case = ZPP__REQUEST__BODY_REGISTER_BUFFER;
    req.register_buffer = &rb;
    put_request(&req, &stream, &slen);
    rb.nfds = 0;
    rb.ipc_handle.len = sizeof(handle);
    rb.ipc_handle.data = handle;
    rb.gpu_uuid = (char *)"GPU-5e1f0c2a-0000-0000-0000-000000000000";
    put_request(&req, &stream, &slen);

    Zpp__DeregisterBuffer db = ZPP__DEREGISTER_BUFFER__INIT;
    db.buffer_id = 9;
    req.body_case = ZPP__REQUEST__BODY_DEREGISTER_BUFFER;
    req.deregister_buffer = &db;
    put_request(&req, &stream, &slen);

    Zpp__BufRef in = ZPP__BUF_REF__INIT, out = ZPP__BUF_REF__INIT;
    in.buffer_id = 1;
    out.buffer_id = 2;
    out.offset = 256;
    for (int op = ZPP__OP__QWZ_ALLGATHER; op <= ZPP__OP__BARRIER; op++) {
        Zpp__Collective co = ZPP__COLLECTIVE__INIT;
        co.seq = (uint64_t)op;
        co.op = (Zpp__Op)op;
        co.dtype = ZPP__DTYPE__BF16;
        co.count = 1000003;
        co.bits = op == ZPP__OP__QGZ_REDUCE_SCATTER ? 4 : 8;
        co.block = 256;
        co.stages = 2;
        co.hpz_key = (char *)(op <= ZPP__OP__HPZ_INVALIDATE ? "layer.0.weight" : "");
        co.reduce = ZPP__REDUCE_OP__MEAN;
        co.out_dtype = op == ZPP__OP__QGZ_REDUCE_SCATTER ? ZPP__DTYPE__FP32 : 0;
        co.input = &in;
        co.output = &out;
        co.timeout_ms = 1000;
        req.body_case = ZPP__REQUEST__BODY_COLLECTIVE;
        req.collective = &co;
        put_request(&req, &stream, &slen);
        if (op == ZPP__OP__ALLGATHER) {
            /* a stream-ordered call: its event slot and flag value */
            co.event_slot = 3;
            co.flag_value = 0xFFFFFFF0u;
            put_request(&req, &stream, &slen);
        }
    }

    Zpp__StatusQuery sq = ZPP__STATUS_QUERY__INIT;
    req.body_case = ZPP__REQUEST__BODY_STATUS;
    req.status = &sq;
    put_request(&req, &stream, &slen);
    Zpp__JobsQuery jq = ZPP__JOBS_QUERY__INIT;
    req.body_case = ZPP__REQUEST__BODY_JOBS;
    req.jobs = &jq;
    put_request(&req, &stream, &slen);
    Zpp__CheckRequest ck = ZPP__CHECK_REQUEST__INIT;
    req.body_case = ZPP__REQUEST__BODY_CHECK;
    req.check = &ck;
    put_request(&req, &stream, &slen);

    put(stream, slen); /* every request back to back */
    free(stream);
}

static void replies(void)
{
    Zpp__Reply rep = ZPP__REPLY__INIT;
    rep.req_id = 1;

    Zpp__Limits lim = ZPP__LIMITS__INIT;
    lim.max_frame = ZPP_FRAME_DEFAULT_MAX;
    lim.max_buffers = 64;
    Zpp__HelloReply hr = ZPP__HELLO_REPLY__INIT;
    hr.session_id = 5;
    hr.daemon_version = (char *)"0.1.0";
    hr.backend = (char *)"host";
    hr.limits = &lim;
    rep.body_case = ZPP__REPLY__BODY_HELLO;
    rep.hello = &hr;
    put_reply(&rep);
    hr.backend = (char *)"cuda";
    hr.flag_sync = 1; /* a session on the client's done flags */
    put_reply(&rep);

    Zpp__CollectiveReply cr = ZPP__COLLECTIVE_REPLY__INIT;
    cr.algo = ZPP__ALGO__ALGO_QGZ_HIER;
    cr.logical_bytes = 1 << 20;
    cr.bytes_inter = 1 << 18;
    rep.body_case = ZPP__REPLY__BODY_COLLECTIVE;
    rep.collective = &cr;
    put_reply(&rep);

    rep.code = ZPP_EMISMATCH;
    rep.message = (char *)"call 4: rank 2 differs in count";
    rep.body_case = ZPP__REPLY__BODY__NOT_SET;
    put_reply(&rep);
    rep.code = 0;
    rep.message = (char *)"";

    Zpp__StatusReply st = ZPP__STATUS_REPLY__INIT;
    st.daemon_version = (char *)"0.1.0";
    st.backend = (char *)"host";
    st.sessions = 3;
    rep.body_case = ZPP__REPLY__BODY_STATUS;
    rep.status = &st;
    put_reply(&rep);

    uint32_t joined[] = {0, 1, 2, 3}, missing[] = {2};
    Zpp__CallRecord cr1 = ZPP__CALL_RECORD__INIT;
    cr1.seq = 4;
    cr1.op = ZPP__OP__QWZ_ALLGATHER;
    cr1.state = (char *)"pending";
    cr1.message = (char *)"waiting for \"rank\" 2\n";
    Zpp__CallRecord *recs[] = {&cr1, &cr1};
    Zpp__JobInfo j = ZPP__JOB_INFO__INIT;
    j.job_id = (char *)"job-\xc3\xa9";
    j.world_size = 4;
    j.nodes = 2;
    j.n_joined_ranks = 4;
    j.joined_ranks = joined;
    j.state = (char *)"running";
    j.oldest_pending_seq = 4;
    j.n_missing_ranks = 1;
    j.missing_ranks = missing;
    j.n_recent = 2;
    j.recent = recs;
    Zpp__JobInfo *jobs[] = {&j};
    Zpp__JobsReply jr = ZPP__JOBS_REPLY__INIT;
    jr.n_jobs = 1;
    jr.jobs = jobs;
    rep.body_case = ZPP__REPLY__BODY_JOBS;
    rep.jobs = &jr;
    put_reply(&rep);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_seeds SEED_DIR [WORK_DIR]\n");
        return 2;
    }
    for (int i = 1; i < argc && i < 3; i++)
        if (mkdir(argv[i], 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "fuzz_seeds: cannot create %s\n", argv[i]);
            return 1;
        }
    dir = argv[1];
    requests();
    replies();
    static const uint8_t empty_frame[4] = {0};
    put(empty_frame, sizeof(empty_frame));
    printf("fuzz_seeds: %d seeds in %s\n", count, dir);
    return 0;
}
