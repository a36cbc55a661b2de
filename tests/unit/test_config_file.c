/*
 * test_config_file.c — daemon/config.c's cfg_load on files that are not
 * clean `key = value` lines: a bad line is reported (counted) and ignored,
 * and never costs the line after it; a file that cannot be read is an
 * error, not an empty configuration.
 *  - a NUL byte inside a line: that line is bad, the next one still applies;
 *  - an overlong line: bad, the next one still applies;
 *  - no newline at the end of the file: the last line applies;
 *  - the path is a directory: cfg_load fails (the daemon would otherwise
 *    run on the defaults, and --check-config report no problem);
 *  - a file that never ends (/dev/zero): refused after 1 MiB.
 * And the values a line must not set, and the checks between keys
 * (cfg_check):
 *  - default_block not a multiple of 32 (every quantized call that took the
 *    default would then fail), an empty socket (an abstract address no
 *    client reaches): bad lines;
 *  - peer_heartbeat_ms at or above peer_timeout_ms, and a peer_advertise
 *    that is not HOST:PORT (the leader would refuse every Join): refused;
 *  - join_timeout_ms is taken at start only (the peer service keeps its
 *    first value): a reload reports it among the static changes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "test.h"

static char g_dir[] = "/tmp/zpp-cfg-XXXXXX";
static char g_path[256];

static void write_file(const void *bytes, size_t len)
{
    FILE *f = fopen(g_path, "wb");
    ASSERT(f);
    ASSERT_EQ(fwrite(bytes, 1, len, f), len);
    ASSERT_EQ(fclose(f), 0);
}

static int load(struct zpp_config *c, int *nbad)
{
    char why[256] = "";
    cfg_defaults(c);
    *nbad = -1;
    int rc = cfg_load(c, g_path, nbad, why, sizeof why);
    if (rc)
        printf("cfg_load: %s\n", why);
    return rc;
}

static void nul_byte(void)
{
    static const char text[] = "max_jobs = 7\0junk\nmax_connections = 9\nmax_world_size = 11\n";
    write_file(text, sizeof text - 1);
    struct zpp_config c;
    int nbad;
    ASSERT_EQ(load(&c, &nbad), 0);
    ASSERT_EQ(nbad, 1);
    ASSERT_EQ(c.max_jobs, 256); /* the line with the NUL: ignored */
    ASSERT_EQ(c.max_connections, 9);
    ASSERT_EQ(c.max_world_size, 11);
}

static void overlong_line(void)
{
    char text[4096];
    size_t n = (size_t)snprintf(text, sizeof text, "socket_group = ");
    memset(text + n, 'g', 2000);
    n += 2000;
    n += (size_t)snprintf(text + n, sizeof text - n, "\nmax_connections = 9\n");
    write_file(text, n);
    struct zpp_config c;
    int nbad;
    ASSERT_EQ(load(&c, &nbad), 0);
    ASSERT_EQ(nbad, 1);
    ASSERT_STR_EQ(c.socket_group, "");
    ASSERT_EQ(c.max_connections, 9);
}

static void no_newline_at_eof(void)
{
    static const char text[] = "max_connections = 9\nmax_jobs = 5";
    write_file(text, sizeof text - 1);
    struct zpp_config c;
    int nbad;
    ASSERT_EQ(load(&c, &nbad), 0);
    ASSERT_EQ(nbad, 0);
    ASSERT_EQ(c.max_connections, 9);
    ASSERT_EQ(c.max_jobs, 5);
}

static void directory(void)
{
    struct zpp_config c;
    char why[256] = "";
    int nbad = 0;
    cfg_defaults(&c);
    ASSERT_EQ(cfg_load(&c, g_dir, &nbad, why, sizeof why), -1);
    ASSERT_CONTAINS(why, g_dir);
    printf("directory: %s\n", why);
}

/* A file that never ends (here /dev/zero) is refused after 1 MiB, not read
 * forever on the loop thread. */
static void endless(void)
{
    struct zpp_config c;
    char why[256] = "";
    int nbad = 0;
    cfg_defaults(&c);
    ASSERT_EQ(cfg_load(&c, "/dev/zero", &nbad, why, sizeof why), -1);
    ASSERT_CONTAINS(why, "longer than");
    printf("endless: %s\n", why);
}

static void bad_values(void)
{
    static const char text[] = "default_block = 100\nsocket =\ndefault_block = 96\n";
    write_file(text, sizeof text - 1);
    struct zpp_config c;
    int nbad;
    ASSERT_EQ(load(&c, &nbad), 0);
    ASSERT_EQ(nbad, 2);
    ASSERT_EQ(c.default_block, 96);
    ASSERT_STR_EQ(c.socket, "/run/zppd/zppd.sock");
    char why[256] = "";
    ASSERT_EQ(cfg_set(&c, "default_block", "8100", why, sizeof why), -1);
    ASSERT_CONTAINS(why, "multiple of 32");
    ASSERT_EQ(cfg_set(&c, "default_block", "8192", why, sizeof why), 0);
    ASSERT_EQ(cfg_set(&c, "socket", "", why, sizeof why), -1);
    ASSERT_CONTAINS(why, "empty");
}

static void between_keys(void)
{
    struct zpp_config c;
    char why[256] = "";
    cfg_defaults(&c);
    ASSERT_EQ(cfg_check(&c, why, sizeof why), 0);
    c.peer_heartbeat_ms = 5000; /* = peer_timeout_ms */
    ASSERT_EQ(cfg_check(&c, why, sizeof why), -1);
    ASSERT_CONTAINS(why, "peer_heartbeat_ms");
    c.peer_heartbeat_ms = 4999;
    ASSERT_EQ(cfg_check(&c, why, sizeof why), 0);
    c.peer_listen[0] = 0; /* no peer service: the timers are not used */
    c.peer_heartbeat_ms = 10000;
    ASSERT_EQ(cfg_check(&c, why, sizeof why), 0);
    cfg_defaults(&c);
    static const char *bad[] = {"node a:7399", "node-a", "node-a:", ":7399", "node-a:0",
                                "node-a:65536", "node-a:73x9", "node-a:123456", "n\tode:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(c.peer_advertise, sizeof c.peer_advertise, "%s", bad[i]);
        ASSERT_EQ(cfg_check(&c, why, sizeof why), -1);
        ASSERT_CONTAINS(why, "peer_advertise");
    }
    static const char *good[] = {"node-a:7399", "10.0.0.7:1", "[fd00::7]:65535"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(c.peer_advertise, sizeof c.peer_advertise, "%s", good[i]);
        ASSERT_EQ(cfg_check(&c, why, sizeof why), 0);
    }
}

static void join_timeout_static(void)
{
    struct zpp_config a, b;
    char why[256] = "", out[256];
    cfg_defaults(&a);
    cfg_defaults(&b);
    ASSERT_EQ(cfg_set(&b, "join_timeout_ms", "120000", why, sizeof why), 0);
    ASSERT_EQ(cfg_static_changes(&a, &b, out, sizeof out), 1);
    ASSERT_STR_EQ(out, "join_timeout_ms");
    cfg_apply_reloadable(&a, &b);
    ASSERT_EQ(a.join_timeout_ms, 60000);
}

int main(void)
{
    zlog_setup(ZLOG_ERROR, 0); /* the ignored lines' warnings are expected */
    ASSERT(mkdtemp(g_dir));
    snprintf(g_path, sizeof g_path, "%s/zppd.conf", g_dir);
    nul_byte();
    overlong_line();
    no_newline_at_eof();
    directory();
    endless();
    bad_values();
    between_keys();
    join_timeout_static();
    unlink(g_path);
    rmdir(g_dir);
    printf("test_config_file: ok\n");
    return 0;
}
