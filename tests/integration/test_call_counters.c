/*
 * test_call_counters.c — calls that end without running are counted: a
 * barrier ended by its job's abort (a rank left while it waited) adds one
 * to `zppctl status`'s failed calls and to zppd_calls_total's "aborted"
 * outcome; a submission refused at once (here past the job's sequence
 * window) adds one "error". Before session 22 only call_fail counted, so
 * neither showed anywhere (an audit).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "zpp.h"

static char out[1 << 20];

int main(void)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start("rejoin_timeout_ms = 100\n", &d), 0);
    zpp_conn *r0, *r1;
    ASSERT_EQ(zh_connect_join(&d, "cnt", 0, 2, 1, &r0), 0);
    ASSERT_EQ(zh_connect_join(&d, "cnt", 1, 2, 1, &r1), 0);
    /* one refused at once: seq far past the window */
    zpp_coll bar;
    zpp_coll_init(&bar, ZPP_OP_BARRIER, 0, 0);
    bar.seq = 1u << 20;
    ASSERT_EQ(zpp_collective(r0, &bar, NULL), ZPP_EINVAL);
    ASSERT_CONTAINS(zpp_last_error(r0), "window");
    /* one ended by the abort: rank 1 leaves while rank 0 waits */
    zpp_coll_init(&bar, ZPP_OP_BARRIER, 0, 0);
    bar.seq = 1; /* libzpp's numbering went on from the explicit one */
    uint64_t req;
    ASSERT_EQ(zpp_submit(r0, &bar, &req), 0);
    usleep(50 * 1000);
    zpp_close(r1);
    int rc = zpp_wait(r0, req, NULL);
    printf("barrier after rank 1 left: %s: %s\n", zpp_err_name(rc), zpp_last_error(r0));
    ASSERT_EQ(rc, ZPP_EABORTED);
    zpp_close(r0);
    ASSERT_EQ(zh_zppctl(&d, out, sizeof out, "--json", "status", NULL), 0);
    ASSERT_CONTAINS(out, "\"calls_failed\":2,");
    ASSERT_EQ(zh_zppctl(&d, out, sizeof out, "metrics", NULL, NULL), 0);
    ASSERT_CONTAINS(out, "zppd_calls_total{tenant=\"");
    ASSERT_CONTAINS(out, "op=\"barrier\",outcome=\"aborted\"} 1\n");
    ASSERT_CONTAINS(out, "op=\"barrier\",outcome=\"error\"} 1\n");
    ASSERT_EQ(zh_daemon_stop(&d), 0);
    printf("test_call_counters: ok\n");
    return 0;
}
