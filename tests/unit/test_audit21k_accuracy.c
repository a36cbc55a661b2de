/*
 * test_audit21k_accuracy.c — tools/zpp-accuracy.c's argument: a malformed
 * or out-of-range element count is refused with a usage message (exit 2)
 * instead of being read as a huge or truncated number ("-1" was 2^64 - 1:
 * an n * 4 byte allocation that wraps, or that ASan aborts on; "10x" was
 * 10); a small count prints the table. The tool is compiled into this test
 * with its main renamed.
 */
#include <stdint.h>
#include <stdio.h>

#include "test.h"

#define main zpp_accuracy_main
#include "tools/zpp-accuracy.c"
#undef main

static int run(const char *arg)
{
    char name[] = "zpp-accuracy";
    char buf[64];
    snprintf(buf, sizeof buf, "%s", arg);
    char *argv[] = {name, buf, NULL};
    fflush(stdout);
    return zpp_accuracy_main(2, argv);
}

int main(void)
{
    const char *bad[] = {"-1",
                         "10x",
                         "abc",
                         "",
                         "0",
                         " 5",
                         "+5",
                         "18446744073709551615",
                         "18446744073709551616",
                         "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run(bad[i]);
        if (rc != 2) {
            fprintf(stderr, "zpp-accuracy '%s': exit %d, want 2\n", bad[i], rc);
            return 1;
        }
    }
    char name[] = "zpp-accuracy", a1[] = "64", a2[] = "64";
    char *two[] = {name, a1, a2, NULL};
    ASSERT_EQ(zpp_accuracy_main(3, two), 2);
    ASSERT_EQ(run("100"), 0);
    ASSERT_EQ(run("1"), 0);
    printf("test_audit21k_accuracy: ok\n");
    return 0;
}
