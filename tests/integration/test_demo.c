/*
 * test_demo.c — the demo job (zpp-demo) runs one ZeRO++ training step
 * against a real daemon and succeeds: 4 ranks as 2 virtual nodes x 2, every
 * result checked against exact arithmetic inside the demo (it exits non-zero
 * otherwise), the table printed with the three collectives, hpZ moving no
 * bytes across nodes, and the daemon stopping cleanly afterwards. A second
 * run uses three virtual nodes of one rank each (no intra-node step).
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tests/test.h"

#define DEMO_TIMEOUT_MS 240000

static void run_demo(const char *ranks, const char *nodes, const char *layers, const char *hidden)
{
    zh_daemon d;
    ASSERT_EQ(zh_daemon_start(NULL, &d), 0);

    char *argv[] = {ZPP_DEMO_BIN,   "-s",       d.socket,       "--ranks",
                    (char *)ranks,  "--nodes",  (char *)nodes,  "--layers",
                    (char *)layers, "--hidden", (char *)hidden, NULL};
    static char out[65536];
    int code = zh_run_capture(argv, DEMO_TIMEOUT_MS, out, sizeof out);
    printf("%s", out);
    if (code != 0) {
        fprintf(stderr, "zpp-demo exited with code %d\n", code);
        zh_daemon_dump_log(&d);
        zh_daemon_kill(&d);
        exit(1);
    }
    ASSERT_CONTAINS(out, "qwZ all-gather");
    ASSERT_CONTAINS(out, "hpZ gather");
    ASSERT_CONTAINS(out, "qgZ reduce-scatter");
    ASSERT_CONTAINS(out, "hpZ == qwZ bit for bit: yes");
    ASSERT_CONTAINS(out, "demo: PASS");
    ASSERT(zh_daemon_alive(&d));
    ASSERT_EQ(zh_daemon_stop(&d), 0);
}

int main(void)
{
    run_demo("4", "2", "3", "300");
    run_demo("3", "3", "2", "129");
    printf("test_demo: ok\n");
    return 0;
}
