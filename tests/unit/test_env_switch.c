/*
 * test_env_switch.c — the measuring switches read from zppd's environment
 * (be_env_switch, be_env_uint in backend_host.c): unset gives the default,
 * a number in range is taken, anything else (a sign, a suffix, past the
 * maximum, past 64 bits) is ignored for the default.
 */
#include <stdlib.h>

#include "daemon/backend.h"
#include "test.h"

int main(void)
{
    const char *n = "ZPP_TEST_ENV_SWITCH";
    unsetenv(n);
    ASSERT_EQ(be_env_uint(n, 7, 100), 7);
    ASSERT_EQ(be_env_switch(n, 1), 1);
    static const struct {
        const char *v;
        uint64_t want;
    } cases[] = {{"0", 0},   {"42", 42},  {"100", 100}, {"101", 7},  {"-1", 7},
                 {"12x", 7}, {"", 7},     {" 5", 7},    {"99999999999999999999", 7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(n, cases[i].v, 1);
        ASSERT_EQ(be_env_uint(n, 7, 100), cases[i].want);
    }
    setenv(n, "off", 1);
    ASSERT_EQ(be_env_switch(n, 1), 0);
    setenv(n, "yes", 1);
    ASSERT_EQ(be_env_switch(n, 0), 1);
    return 0;
}
