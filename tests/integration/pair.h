/*
 * pair.h — a job of 2 ranks on one node, both driven from the test's own
 * process over two connections, for the tests of shared hpZ replicas
 * (test_hpz_share, test_publish_worker): each rank has an fp32 input of
 * count / 2 elements and an output of count in shared memory, registered
 * whole. A failed setup step asserts (tests/test.h).
 */
#ifndef ZPP_TEST_PAIR_H
#define ZPP_TEST_PAIR_H

#include <stdint.h>

#include "zpp.h"

typedef struct {
    zpp_conn *c[2]; /* NULL once closed by the test (a rank that left) */
    zpp_shm *in[2], *out[2];
    uint64_t in_id[2], out_id[2];
    unsigned count;
} zh_pair;

/* Element i of a test tensor starting at base. */
typedef float (*zh_tensor_fn)(unsigned i, float base);

/* Joins job `job` (ranks 0 and 1 of 2, one node, gpu "host") on socket and
 * registers the buffers. 0, or Hello's error (printed). */
int zh_pair_open(zh_pair *p, const char *socket, const char *job, unsigned count);
void zh_pair_close(zh_pair *p);

/* Both ranks' inputs: their shards of the tensor t(., base); outputs
 * poisoned. */
void zh_pair_fill(zh_pair *p, zh_tensor_fn t, float base);

/* Submits op (fp32, count) on both ranks; req gets the request ids. */
void zh_pair_submit(zh_pair *p, int op, uint32_t flags, const char *content_key, uint64_t req[2]);

/* Waits for both; prints what with rank 0's outcome; asserts both agree.
 * Returns rank 0's code. */
int zh_pair_wait(zh_pair *p, const uint64_t req[2], const char *what);

/* zh_pair_submit, then zh_pair_wait. */
int zh_pair_call(zh_pair *p, int op, uint32_t flags, const char *content_key, const char *what);

/* 1 if both outputs hold the tensor t(., base), bit for bit (else prints
 * the first difference). */
int zh_pair_holds(const zh_pair *p, zh_tensor_fn t, float base);

/* The daemon's status "store_bytes". */
unsigned long long zh_store_bytes(const char *socket);

/* 0 if rc == want, else 1 after printing what. */
int zh_expect(int rc, int want, const char *what);

#endif
