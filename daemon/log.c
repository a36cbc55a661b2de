/*
 * log.c — see log.h. Message text is quoted and escaped so a client's
 * string (job id, hpZ key) cannot forge a log line.
 */
#include "log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

static int g_level = ZLOG_INFO; /* set once at start and on SIGHUP (loop thread) */
static int g_json;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void zlog_setup(int level, int json)
{
    g_level = level;
    g_json = json;
}

int zlog_enabled(int level)
{
    return level <= g_level;
}

int zlog_parse_level(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

const char *zlog_level_name(int level)
{
    return level >= 0 && level < 4 ? level_names[level] : "?";
}

/* Copies s into out, escaping control bytes, and quotes and backslashes
 * too with quotes set. */
static void escape(char *out, size_t cap, const char *s, int quotes)
{
    size_t o = 0;
    for (; *s && o + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (quotes && (ch == '"' || ch == '\\')) {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o] = 0;
}

void zlog(int level, const char *mod, const char *msg, const char *fmt, ...)
{
    if (!zlog_enabled(level))
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[40];
    snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000));
    char kv[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(kv, sizeof kv, fmt, ap);
        va_end(ap);
    }
    char emsg[1024];
    escape(emsg, sizeof emsg, msg ? msg : "", 1);
    /* The pairs keep their own quoting in text; a newline in a value (a
     * client's string) must not start a line of its own. */
    char ekv[2048];
    escape(ekv, sizeof ekv, kv, g_json);
    if (g_json) {
        fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"mod\":\"%s\",\"msg\":\"%s\",\"kv\":\"%s\"}\n",
                ts, level_names[level], mod, emsg, ekv);
    } else {
        fprintf(stderr, "ts=%s level=%s mod=%s msg=\"%s\"%s%s\n", ts, level_names[level], mod, emsg,
                ekv[0] ? " " : "", ekv);
    }
}
