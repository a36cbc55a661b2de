/*
 * test_log.c — daemon/log.c: a line of zppd's log reads back the way it
 * was meant, whatever bytes a client put in its values. Each line zlog
 * writes is captured (stderr is a temporary file meanwhile) and parsed back
 * as logfmt (text) or as a JSON object whose "kv" string is logfmt; a value
 * holding quotes, backslashes, `key=value` text or control bytes must come
 * back whole, as the value of its own key, on one line. Ordinary values
 * print as printf would print them. The rate limit (zlog_limit) lets the
 * first lines of a window through and then says how many it left out.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "test.h"

#include "stderr_capture.h"

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ---- reading a line back ---------------------------------------------------- */

#define MAX_PAIRS 32
#define VAL_MAX 8192

struct pairs {
    int n;
    char key[MAX_PAIRS][64];
    char val[MAX_PAIRS][VAL_MAX];
};

/* Appends code point cp as UTF-8. */
static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
}

/* Reads the escape after a backslash at *p (\" \\ \uXXXX, and in JSON \n
 * \t \r too) into out; returns bytes written or -1. */
static int unescape_one(const char **p, char *out)
{
    char c = *(*p)++;
    switch (c) {
    case '"':
    case '\\':
    case '/':
        out[0] = c;
        return 1;
    case 'n':
        out[0] = '\n';
        return 1;
    case 't':
        out[0] = '\t';
        return 1;
    case 'r':
        out[0] = '\r';
        return 1;
    case 'u': {
        unsigned cp = 0;
        for (int i = 0; i < 4; i++) {
            char h = *(*p)++;
            cp <<= 4;
            if (h >= '0' && h <= '9')
                cp |= (unsigned)(h - '0');
            else if (h >= 'a' && h <= 'f')
                cp |= (unsigned)(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
                cp |= (unsigned)(h - 'A' + 10);
            else
                return -1;
        }
        return (int)put_utf8(out, cp);
    }
    default:
        return -1;
    }
}

/* Parses one logfmt text (no newline in it): key=value pairs separated by
 * one space; a value is bare (up to the next space) or quoted with \" \\
 * \uXXXX escapes. Returns 0, or -1 when the text is not that. */
static int parse_logfmt(const char *s, struct pairs *out)
{
    memset(out, 0, sizeof *out);
    const char *p = s;
    while (*p) {
        if (out->n == MAX_PAIRS)
            return -1;
        const char *eq = strchr(p, '=');
        if (!eq || eq == p || (size_t)(eq - p) >= sizeof out->key[0])
            return -1;
        for (const char *k = p; k < eq; k++)
            if (*k == ' ' || *k == '"')
                return -1;
        memcpy(out->key[out->n], p, (size_t)(eq - p));
        p = eq + 1;
        char *v = out->val[out->n];
        size_t o = 0;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p)
                    return -1; /* unterminated */
                if (*p == '"') {
                    p++;
                    break;
                }
                if (o + 4 >= VAL_MAX)
                    return -1;
                if (*p == '\\') {
                    p++;
                    int n = unescape_one(&p, v + o);
                    if (n < 0)
                        return -1;
                    o += (size_t)n;
                } else {
                    if ((unsigned char)*p < 0x20 || *p == 0x7f)
                        return -1;
                    v[o++] = *p++;
                }
            }
        } else {
            while (*p && *p != ' ') {
                if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 || o + 1 >= VAL_MAX)
                    return -1;
                v[o++] = *p++;
            }
        }
        v[o] = 0;
        out->n++;
        if (*p == ' ')
            p++;
        else if (*p)
            return -1;
    }
    return 0;
}

/* The value of key k; fails the test when k is not there exactly once. */
static const char *get(const struct pairs *ps, const char *k)
{
    const char *v = NULL;
    int seen = 0;
    for (int i = 0; i < ps->n; i++) {
        if (!strcmp(ps->key[i], k)) {
            v = ps->val[i];
            seen++;
        }
    }
    if (seen != 1) {
        fprintf(stderr, "key %s appears %d times\n", k, seen);
        exit(1);
    }
    return v;
}

/* Parses a text line (with its newline): the one line zlog wrote. */
static void parse_text_line(const char *line, struct pairs *ps)
{
    size_t n = strlen(line);
    ASSERT(n > 0 && line[n - 1] == '\n');
    ASSERT_EQ(count_lines(line), 1);
    ASSERT(!strchr(line, '\r'));
    char *copy = strndup(line, n - 1);
    ASSERT(copy != NULL);
    if (parse_logfmt(copy, ps) != 0) {
        fprintf(stderr, "not logfmt: %s\n", copy);
        exit(1);
    }
    free(copy);
}

/* Parses a JSON line of string members only into ps (no nesting). */
static void parse_json_line(const char *line, struct pairs *ps)
{
    memset(ps, 0, sizeof *ps);
    ASSERT_EQ(count_lines(line), 1);
    const char *p = line;
    ASSERT(*p++ == '{');
    for (;;) {
        ASSERT(ps->n < MAX_PAIRS);
        char *dst[2] = {ps->key[ps->n], ps->val[ps->n]};
        size_t cap[2] = {sizeof ps->key[0], VAL_MAX};
        for (int part = 0; part < 2; part++) {
            ASSERT(*p++ == '"');
            size_t o = 0;
            while (*p != '"') {
                ASSERT(*p && (unsigned char)*p >= 0x20 && *p != 0x7f);
                ASSERT(o + 4 < cap[part]);
                if (*p == '\\') {
                    p++;
                    int n = unescape_one(&p, dst[part] + o);
                    ASSERT(n > 0);
                    o += (size_t)n;
                } else {
                    dst[part][o++] = *p++;
                }
            }
            p++;
            dst[part][o] = 0;
            if (part == 0)
                ASSERT(*p++ == ':');
        }
        ps->n++;
        if (*p == ',') {
            p++;
            continue;
        }
        ASSERT(*p++ == '}');
        ASSERT(*p++ == '\n');
        ASSERT(*p == 0);
        return;
    }
}

/* ---- the tests -------------------------------------------------------------- */

#define FORGE "k\" level=error mod=auth msg=\"forged"

static void test_a_quote_in_a_quoted_value_cannot_add_a_field(void)
{
    zlog_setup(ZLOG_INFO, 0);
    capture_begin();
    zlog(ZLOG_INFO, "job", "call failed", "job=%s seq=%d code=%d why=\"hpZ key '%s' not found\"",
         "j1", 7, -5, FORGE);
    char *line = capture_end();
    static struct pairs ps;
    parse_text_line(line, &ps);
    ASSERT_EQ(ps.n, 8);
    ASSERT_STR_EQ(get(&ps, "level"), "info");
    ASSERT_STR_EQ(get(&ps, "mod"), "job");
    ASSERT_STR_EQ(get(&ps, "msg"), "call failed");
    ASSERT_STR_EQ(get(&ps, "job"), "j1");
    ASSERT_STR_EQ(get(&ps, "why"), "hpZ key '" FORGE "' not found");
    free(line);
}

static void test_a_backslash_cannot_unescape_the_closing_quote(void)
{
    zlog_setup(ZLOG_INFO, 0);
    capture_begin();
    zlog(ZLOG_WARN, "job", "job aborted", "job=%s reason=\"%s\" uid=%u", "j2",
         "ends in a backslash\\", 1000u);
    char *line = capture_end();
    static struct pairs ps;
    parse_text_line(line, &ps);
    ASSERT_EQ(ps.n, 7);
    ASSERT_STR_EQ(get(&ps, "reason"), "ends in a backslash\\");
    ASSERT_STR_EQ(get(&ps, "uid"), "1000");
    free(line);
}

static void test_a_bare_value_with_a_space_or_quote_is_quoted(void)
{
    zlog_setup(ZLOG_INFO, 0);
    capture_begin();
    zlog(ZLOG_INFO, "cluster", "node joined", "job=%s node=%u addr=%s", "x level=error", 3u,
         "\"h:1");
    char *line = capture_end();
    static struct pairs ps;
    parse_text_line(line, &ps);
    ASSERT_EQ(ps.n, 7);
    ASSERT_STR_EQ(get(&ps, "level"), "info");
    ASSERT_STR_EQ(get(&ps, "job"), "x level=error");
    ASSERT_STR_EQ(get(&ps, "node"), "3");
    ASSERT_STR_EQ(get(&ps, "addr"), "\"h:1");
    free(line);
}

#define CTL                                                                                        \
    "a\nb\rc\td\x01"                                                                               \
    "e\x7f"                                                                                        \
    "f\x1b[31m"

static void test_control_bytes_stay_on_one_line(void)
{
    zlog_setup(ZLOG_INFO, 0);
    capture_begin();
    zlog(ZLOG_INFO, "job", "a message\nwith a newline", "why=\"%s\" job=%s", CTL, CTL);
    char *line = capture_end();
    static struct pairs ps;
    parse_text_line(line, &ps); /* one line, no CR */
    ASSERT(!strchr(line, '\t') && !strchr(line, '\x01') && !strchr(line, '\x7f') &&
           !strchr(line, '\x1b'));
    ASSERT_STR_EQ(get(&ps, "msg"), "a message\nwith a newline");
    ASSERT_STR_EQ(get(&ps, "why"), CTL);
    ASSERT_STR_EQ(get(&ps, "job"), CTL);
    ASSERT_CONTAINS(line, "why=\"a\\u000ab\\u000dc\\u0009d\\u0001e\\u007ff\\u001b[31m\"");
    free(line);
}

/* What an ordinary line looked like before values were escaped: as printf
 * prints it, with the same format. */
static void test_ordinary_values_print_as_printf_prints_them(void)
{
    zlog_setup(ZLOG_INFO, 0);
    static const char fmt[] = "job=%s uid=%u world=%u seq=%" PRIu64 " bytes=%zu mode=%04o "
                              "hex=%02x f=%.3f ll=%lld neg=%d w=%*d|%-4d| p=%.*s c=%c pct=%% "
                              "why=\"%s\" abc=%.3s";
    const char *id = "train-7=a/b@c:d+e.f_g";
    capture_begin();
    zlog(ZLOG_INFO, "main", "zppd ready", fmt, id, 1000u, 4u, (uint64_t)UINT64_MAX, (size_t)4096,
         0660u, 0xabu, 3.14159, -5ll, -42, 6, 17, 3, 4, "truncated", 'Z',
         "rank 3 (pid 5120) left: connection closed", "abcdef");
    char *line = capture_end();
    char want[1024];
    snprintf(want, sizeof want, fmt, id, 1000u, 4u, (uint64_t)UINT64_MAX, (size_t)4096, 0660u,
             0xabu, 3.14159, -5ll, -42, 6, 17, 3, 4, "truncated", 'Z',
             "rank 3 (pid 5120) left: connection closed", "abcdef");
    const char *rest = strstr(line, " level=");
    ASSERT(rest != NULL);
    char expect[1200];
    snprintf(expect, sizeof expect, " level=info mod=main msg=\"zppd ready\" %s\n", want);
    ASSERT_STR_EQ(rest, expect);
    ASSERT(!strncmp(line, "ts=", 3));
    free(line);

    /* no pairs at all */
    capture_begin();
    zlog(ZLOG_ERROR, "main", "cannot create the hpZ store", NULL);
    line = capture_end();
    rest = strstr(line, " level=");
    ASSERT(rest != NULL);
    ASSERT_STR_EQ(rest, " level=error mod=main msg=\"cannot create the hpZ store\"\n");
    free(line);
}

static void test_a_value_cut_short_keeps_its_closing_quote(void)
{
    zlog_setup(ZLOG_INFO, 0);
    static char big[6000];
    memset(big, 'q', sizeof big - 1);
    big[100] = '"';
    big[200] = ' ';
    const char *fmts[] = {"job=%s why=\"%s\"", "job=%s why=%s"};
    for (int i = 0; i < 2; i++) {
        capture_begin();
        zlog(ZLOG_INFO, "job", "call failed", fmts[i], "j", big);
        char *line = capture_end();
        static struct pairs ps;
        parse_text_line(line, &ps);
        ASSERT_EQ(ps.n, 6);
        const char *why = get(&ps, "why");
        ASSERT_GT(strlen(why), 1000);
        ASSERT_LT(strlen(why), sizeof big - 1);
        ASSERT(!strncmp(why, big, strlen(why))); /* a prefix of it */
        free(line);
    }
}

static void test_json_lines_parse_and_their_pairs_read_back(void)
{
    zlog_setup(ZLOG_INFO, 1);
    capture_begin();
    zlog(ZLOG_INFO, "job", "call \"failed\"\n", "job=%s why=\"%s\" key=%s", "x y", FORGE,
         "caf\xc3\xa9\xff\n");
    char *line = capture_end();
    zlog_setup(ZLOG_INFO, 0);
    static struct pairs js, kv;
    parse_json_line(line, &js);
    ASSERT_EQ(js.n, 5);
    ASSERT_STR_EQ(get(&js, "level"), "info");
    ASSERT_STR_EQ(get(&js, "mod"), "job");
    ASSERT_STR_EQ(get(&js, "msg"), "call \"failed\"\n");
    ASSERT_EQ(parse_logfmt(get(&js, "kv"), &kv), 0);
    ASSERT_EQ(kv.n, 3);
    ASSERT_STR_EQ(get(&kv, "job"), "x y");
    ASSERT_STR_EQ(get(&kv, "why"), FORGE);
    /* a byte that is not UTF-8 reads as U+FFFD; é stays */
    ASSERT_STR_EQ(get(&kv, "key"), "caf\xc3\xa9\xef\xbf\xbd\n");
    free(line);
}

static void test_lines_below_the_level_are_not_written(void)
{
    zlog_setup(ZLOG_WARN, 0);
    capture_begin();
    zlog(ZLOG_INFO, "job", "quiet", "job=%s", "j");
    ZLOG_D("job", "quiet", "job=%s", "j");
    ZLOG_W("job", "loud", "job=%s", "j");
    char *out = capture_end();
    zlog_setup(ZLOG_INFO, 0);
    ASSERT_EQ(count_lines(out), 1);
    ASSERT_CONTAINS(out, "msg=\"loud\"");
    free(out);
}

/* ---- the rate limit ---------------------------------------------------------- */

static void test_the_rate_limit_passes_a_burst_then_counts(void)
{
    zlog_setup(ZLOG_INFO, 0);
    struct zlog_limit l = ZLOG_LIMIT_INIT(ZLOG_INFO, "job", "call failed", 3, 1000);
    capture_begin();
    int passed = 0;
    for (int i = 0; i < 50; i++)
        passed += zlog_limit_pass(&l, 5000 + (uint64_t)i); /* all in one window */
    zlog_limit_flush(&l, 5999);                            /* the window is not over */
    char *out = capture_end();
    ASSERT_EQ(passed, 3);
    ASSERT_EQ(count_lines(out), 0);
    free(out);

    /* once the window is over, a tick says how many were left out, once */
    capture_begin();
    zlog_limit_flush(&l, 6000);
    zlog_limit_flush(&l, 6100);
    out = capture_end();
    ASSERT_EQ(count_lines(out), 1);
    static struct pairs ps;
    parse_text_line(out, &ps);
    ASSERT_STR_EQ(get(&ps, "level"), "info");
    ASSERT_STR_EQ(get(&ps, "mod"), "job");
    ASSERT_STR_EQ(get(&ps, "what"), "call failed");
    ASSERT_STR_EQ(get(&ps, "suppressed"), "47");
    free(out);

    /* the next window passes its first lines again */
    capture_begin();
    ASSERT_EQ(zlog_limit_pass(&l, 6200), 1);
    out = capture_end();
    ASSERT_EQ(count_lines(out), 0);
    free(out);
}

static void test_the_summary_comes_before_the_next_windows_lines(void)
{
    zlog_setup(ZLOG_INFO, 0);
    struct zlog_limit l = ZLOG_LIMIT_INIT(ZLOG_WARN, "server", "protocol error", 2, 1000);
    capture_begin();
    for (int i = 0; i < 10; i++)
        if (zlog_limit_pass(&l, 100))
            zlog(ZLOG_WARN, "server", "protocol error", "n=%d", i);
    for (int i = 10; i < 12; i++)
        if (zlog_limit_pass(&l, 1100)) /* no flush in between */
            zlog(ZLOG_WARN, "server", "protocol error", "n=%d", i);
    char *out = capture_end();
    ASSERT_EQ(count_lines(out), 5);
    const char *first = strstr(out, "n=0\n"), *second = strstr(out, "n=1\n");
    const char *sum = strstr(out, "suppressed=8 ");
    const char *next = strstr(out, "n=10\n"), *next2 = strstr(out, "n=11\n");
    ASSERT(first && second && sum && next && next2);
    ASSERT(first < second && second < sum && sum < next && next < next2);
    ASSERT_CONTAINS(out, "level=warn mod=server");
    free(out);
}

static void test_a_clock_that_goes_back_starts_a_new_window(void)
{
    struct zlog_limit l = ZLOG_LIMIT_INIT(ZLOG_DEBUG, "job", "x", 1, 1000);
    zlog_setup(ZLOG_INFO, 0);
    ASSERT_EQ(zlog_limit_pass(&l, 50000), 1);
    ASSERT_EQ(zlog_limit_pass(&l, 50001), 0);
    ASSERT_EQ(zlog_limit_pass(&l, 10), 1); /* not stuck until 51000 */
}

int main(void)
{
    test_a_quote_in_a_quoted_value_cannot_add_a_field();
    test_a_backslash_cannot_unescape_the_closing_quote();
    test_a_bare_value_with_a_space_or_quote_is_quoted();
    test_control_bytes_stay_on_one_line();
    test_ordinary_values_print_as_printf_prints_them();
    test_a_value_cut_short_keeps_its_closing_quote();
    test_json_lines_parse_and_their_pairs_read_back();
    test_lines_below_the_level_are_not_written();
    test_the_rate_limit_passes_a_burst_then_counts();
    test_the_summary_comes_before_the_next_windows_lines();
    test_a_clock_that_goes_back_starts_a_new_window();
    printf("test_log: ok\n");
    return 0;
}
