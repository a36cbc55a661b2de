/*
 * test_log_forge.c — a client's string cannot forge a line of zppd's log
 * (text format, the default). An hpZ key is any bytes up to 256; a gather
 * of a key that is not stored fails, and the daemon logs the failure with
 * the key inside its key=value part. A key holding a newline and a made-up
 * log line must stay on the daemon's own line: the log must not contain a
 * line that starts with the forged text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tests/test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define COUNT 256u
#define FORGED "ts=2026-01-01T00:00:00.000Z level=error mod=main msg=\"forged by a client\""

int main(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);
    zpp_conn *c = NULL;
    zpp_shm *in = NULL, *out = NULL;
    uint64_t in_id = 0, out_id = 0;
    ASSERT_EQ(zh_connect_join(&d, "forge", 0, 1, 1, &c), 0);
    ASSERT_EQ(zpp_shm_create(COUNT * 4, &in), 0);
    ASSERT_EQ(zpp_shm_create(COUNT * 4, &out), 0);
    ASSERT_EQ(zpp_register_shm(c, in, 0, COUNT * 4, &in_id), 0);
    ASSERT_EQ(zpp_register_shm(c, out, 0, COUNT * 4, &out_id), 0);

    zpp_coll call;
    zpp_coll_init(&call, ZPP_OP_HPZ_GATHER, ZPP_FP32, COUNT);
    call.hpz_key = "k\n" FORGED "\r\n" FORGED;
    call.input = (zpp_bufref){in_id, 0};
    call.output = (zpp_bufref){out_id, 0};
    uint64_t req = 0;
    ASSERT_EQ(zpp_submit(c, &call, &req), 0);
    int rc = zpp_wait(c, req, NULL);
    printf("gather of the forged key: %s: %s\n", zpp_err_name(rc), zpp_last_error(c));
    ASSERT_NE(rc, 0);

    /* The failure is logged before the reply is sent. */
    char *log = zh_daemon_read_log(&d);
    ASSERT(log);
    ASSERT_CONTAINS(log, "forged by a client"); /* the key is logged... */
    ASSERT(!strstr(log, "\n" FORGED));          /* ...but on no line of its own */
    ASSERT(!strstr(log, "\r" FORGED));
    free(log);

    zpp_close(c);
    zpp_shm_destroy(in);
    zpp_shm_destroy(out);
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("test_log_forge: ok\n");
    return 0;
}
