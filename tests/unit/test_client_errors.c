/*
 * test_client_errors.c — the error and algorithm name tables generated from
 * zpp.h's X-macros: every code has a distinct name and a message, the codes
 * run contiguously to ZPP_ERRNO_MAX, unknown values are named as such.
 */
#include "test.h"
#include "zpp.h"

static void test_every_code_has_a_distinct_name_and_message(void)
{
    int n = 0;
#define XX(name, val, msg)                                                                         \
    ASSERT_STR_EQ(zpp_err_name(val), #name);                                                       \
    ASSERT_STR_EQ(zpp_strerror(val), msg);                                                         \
    n++;
    ZPP_ERRNO_MAP(XX)
#undef XX
    ASSERT_EQ(n, -ZPP_ERRNO_MAX);
    for (int a = ZPP_ERRNO_MAX; a < 0; a++) {
        ASSERT(strcmp(zpp_err_name(a), "UNKNOWN") != 0);
        for (int b = a + 1; b < 0; b++)
            ASSERT(strcmp(zpp_err_name(a), zpp_err_name(b)) != 0);
    }
}

static void test_unknown_codes_are_named_unknown(void)
{
    ASSERT_STR_EQ(zpp_err_name(ZPP_ERRNO_MAX - 1), "UNKNOWN");
    ASSERT_STR_EQ(zpp_strerror(ZPP_ERRNO_MAX - 1), "unknown error");
    ASSERT_STR_EQ(zpp_err_name(5), "UNKNOWN");
    ASSERT_STR_EQ(zpp_err_name(0), "OK");
    ASSERT_STR_EQ(zpp_strerror(0), "success");
}

static void test_algo_names(void)
{
    ASSERT_STR_EQ(zpp_algo_name(ZPP_ALGO_QWZ), "qwz");
    ASSERT_STR_EQ(zpp_algo_name(ZPP_ALGO_QGZ_HIER), "qgz_hier");
    ASSERT_STR_EQ(zpp_algo_name(ZPP_ALGO_RS_EXACT), "rs_exact");
    ASSERT_STR_EQ(zpp_algo_name(ZPP_ALGO_NONE), "none");
    ASSERT_STR_EQ(zpp_algo_name(0), "unknown");
    ASSERT_STR_EQ(zpp_algo_name(99), "unknown");
}

int main(void)
{
    test_every_code_has_a_distinct_name_and_message();
    test_unknown_codes_are_named_unknown();
    test_algo_names();
    return 0;
}
