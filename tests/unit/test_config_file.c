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
    unlink(g_path);
    rmdir(g_dir);
    printf("test_config_file: ok\n");
    return 0;
}
