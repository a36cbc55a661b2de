/*
 * test_metrics_text.c — the Prometheus text that `zppctl metrics` (and GET
 * /metrics) serves keeps every metric family in one group, as the text
 * format requires ("All lines for a given metric must be provided as one
 * single group, with the optional HELP and TYPE lines first"): with two
 * jobs alive, each family's samples follow its own HELP/TYPE lines, and no
 * family appears twice. Parsers that build families line by line (e.g. the
 * Python client's) otherwise split a family or lose its type.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tests/test.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

#define MAX_FAMILIES 256

static zh_daemon g_d;
static char g_out[1 << 18];

/* 1 if sample name s belongs to family f of type type. */
static int in_family(const char *s, size_t slen, const char *f, const char *type)
{
    size_t flen = strlen(f);
    if (slen == flen && !strncmp(s, f, flen))
        return 1;
    if (strcmp(type, "histogram") || slen <= flen || strncmp(s, f, flen))
        return 0;
    const char *suf = s + flen;
    size_t sl = slen - flen;
    return (sl == 7 && !strncmp(suf, "_bucket", 7)) || (sl == 4 && !strncmp(suf, "_sum", 4)) ||
           (sl == 6 && !strncmp(suf, "_count", 6));
}

/* Checks the grouping rule on text; returns the number of samples. */
static int check_groups(char *text)
{
    static char fam[MAX_FAMILIES][128], typ[MAX_FAMILIES][16];
    int nf = 0, samples = 0;
    char cur[128] = "", cur_type[16] = "";
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128], type[16];
        if (sscanf(line, "# TYPE %127s %15s", name, type) == 2) {
            for (int i = 0; i < nf; i++)
                if (!strcmp(fam[i], name)) {
                    fprintf(stderr, "family %s has a second TYPE line\n", name);
                    ASSERT(0);
                }
            ASSERT_LT(nf, MAX_FAMILIES);
            snprintf(fam[nf], sizeof fam[nf], "%s", name);
            snprintf(typ[nf++], sizeof typ[0], "%s", type);
            snprintf(cur, sizeof cur, "%s", name);
            snprintf(cur_type, sizeof cur_type, "%s", type);
            continue;
        }
        if (line[0] == '#')
            continue;
        size_t slen = strcspn(line, "{ ");
        if (!in_family(line, slen, cur, cur_type)) {
            fprintf(stderr, "sample outside its family's group (the group open is %s): %s\n", cur,
                    line);
            ASSERT(0);
        }
        samples++;
    }
    return samples;
}

int main(void)
{
    ASSERT_EQ(zh_daemon_start(NULL, &g_d), 0);
    zpp_conn *a = NULL, *b = NULL;
    ASSERT_EQ(zh_connect_join(&g_d, "met-a", 0, 1, 1, &a), 0);
    ASSERT_EQ(zh_connect_join(&g_d, "met-b", 0, 1, 1, &b), 0);

    char *argv[] = {ZPPCTL_BIN, "-s", g_d.socket, "metrics", NULL};
    ASSERT_EQ(zh_run_capture(argv, 15000, g_out, sizeof g_out), 0);
    ASSERT_CONTAINS(g_out, "zppd_jobs{tenant=");
    ASSERT_CONTAINS(g_out, "job_id=\"met-a\"");
    ASSERT_CONTAINS(g_out, "job_id=\"met-b\"");
    int n = check_groups(g_out);
    printf("test_metrics_text: %d samples, every family in one group\n", n);

    zpp_close(a);
    zpp_close(b);
    ASSERT_EQ(zh_daemon_stop(&g_d), 0);
    printf("test_metrics_text: ok\n");
    return 0;
}
