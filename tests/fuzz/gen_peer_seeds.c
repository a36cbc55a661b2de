/*
 * gen_peer_seeds.c — writes the seed corpus of fuzz_peer: one valid packed
 * message of each zpp.peer type (proto/peer.proto), a few at their field
 * limits (docs/peers.md), and an empty one. Generated at test time (ctest
 * fixture) so no binary is committed and the seeds follow peer.proto.
 *
 * usage: fuzz_peer_seeds SEED_DIR [WORK_DIR]   (both are created if missing)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "peer.pb-c.h"

#define SEED_NCCL_ID_BYTES 128
#define SEED_NODES 4

static const char *dir;
static int count;

static void put_bytes(const uint8_t *buf, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/peer-%02d.bin", dir, count++);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(buf, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "fuzz_peer_seeds: cannot write %s\n", path);
        exit(1);
    }
}

static void put(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf || protobuf_c_message_pack(m, buf) != n) {
        fprintf(stderr, "fuzz_peer_seeds: cannot pack a %s\n", m->descriptor->name);
        exit(1);
    }
    put_bytes(buf, n);
    free(buf);
}

static void mkdir_p(const char *d)
{
    if (mkdir(d, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz_peer_seeds: cannot create %s: %s\n", d, strerror(errno));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_peer_seeds SEED_DIR [WORK_DIR]\n");
        return 2;
    }
    dir = argv[1];
    mkdir_p(dir);
    if (argc > 2)
        mkdir_p(argv[2]);

    Zpp__Peer__Tenant t = ZPP__PEER__TENANT__INIT;
    t.uid = 1000;
    t.label = (char *)"team-a";

    Zpp__Peer__JoinRequest jr = ZPP__PEER__JOIN_REQUEST__INIT;
    jr.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    jr.job_id = (char *)"job-seed";
    jr.tenant = &t;
    jr.node_rank = 1;
    jr.node_count = SEED_NODES;
    jr.ranks_per_node = 8;
    jr.world_size = 8 * SEED_NODES;
    jr.topology = (char *)"8xH100 nvlink";
    jr.address = (char *)"10.0.0.2:7399";
    put(&jr.base);

    uint8_t ids[3][SEED_NCCL_ID_BYTES];
    ProtobufCBinaryData nccl[3];
    for (int i = 0; i < 3; i++) {
        memset(ids[i], 0x40 + i, sizeof(ids[i]));
        nccl[i].len = sizeof(ids[i]);
        nccl[i].data = ids[i];
    }
    Zpp__Peer__Member mem[SEED_NODES];
    Zpp__Peer__Member *mp[SEED_NODES];
    char addr[SEED_NODES][32];
    for (int i = 0; i < SEED_NODES; i++) {
        Zpp__Peer__Member m0 = ZPP__PEER__MEMBER__INIT;
        mem[i] = m0;
        mem[i].node_rank = (uint32_t)i;
        snprintf(addr[i], sizeof(addr[i]), "10.0.0.%d:7399", i + 1);
        mem[i].address = addr[i];
        mp[i] = &mem[i];
    }
    Zpp__Peer__JoinReply jy = ZPP__PEER__JOIN_REPLY__INIT;
    jy.n_nccl_ids = 3;
    jy.nccl_ids = nccl;
    jy.n_members = SEED_NODES;
    jy.members = mp;
    put(&jy.base);
    Zpp__Peer__JoinReply jn = ZPP__PEER__JOIN_REPLY__INIT;
    jn.code = -22;
    jn.message = (char *)"node_count 0: 1 to 4096";
    put(&jn.base);

    Zpp__Peer__HeartbeatRequest hr = ZPP__PEER__HEARTBEAT_REQUEST__INIT;
    hr.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    hr.job_id = (char *)"job-seed";
    hr.tenant = &t;
    hr.node_rank = 4095;
    put(&hr.base);
    Zpp__Peer__HeartbeatReply hy = ZPP__PEER__HEARTBEAT_REPLY__INIT;
    hy.state = ZPP__PEER__JOB_STATE__JOB_STATE_RUNNING;
    put(&hy.base);
    hy.state = ZPP__PEER__JOB_STATE__JOB_STATE_ENDED; /* the largest state */
    put(&hy.base);

    char reason[513];
    memset(reason, 'r', 512);
    reason[512] = '\0';
    Zpp__Peer__AbortRequest ar = ZPP__PEER__ABORT_REQUEST__INIT;
    ar.version = ZPP__PEER__PEER_VERSION__PEER_VERSION;
    ar.job_id = (char *)"job-seed";
    ar.tenant = &t;
    ar.reason = reason;
    ar.from_node = 2;
    put(&ar.base);
    Zpp__Peer__AbortReply ay = ZPP__PEER__ABORT_REPLY__INIT;
    ay.code = -35;
    ay.message = (char *)"job job-seed: not known here";
    put(&ay.base);
    put_bytes(NULL, 0); /* every field at its default */
    printf("fuzz_peer_seeds: %d seeds in %s\n", count, dir);
    return 0;
}
