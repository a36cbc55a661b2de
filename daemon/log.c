/*
 * log.c — see log.h. zlog formats the pairs itself, one conversion at a
 * time, so that it knows which bytes are values: each %s (and %c) value is
 * escaped as log.h says, and a client's string (job id, hpZ key, a failure
 * message that names one) can forge neither a field nor a line. Numbers go
 * through snprintf as printf would print them.
 */
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>

/* The pairs once formatted and escaped, and the message escaped; longer
 * ones are cut (a quoted value cut short still gets its closing quote). */
#define KV_MAX 2048
#define MSG_MAX 1024
/* The JSON strings: the text above escaped once more. */
#define JSON_KV_MAX (2 * KV_MAX)
#define JSON_MSG_MAX (2 * MSG_MAX)
/* One number's text (%f of a huge double is cut). */
#define NUM_MAX 128

static int g_level = ZLOG_INFO; /* set once at start and on SIGHUP (loop thread) */
static int g_json;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char hex[] = "0123456789abcdef";

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

/* ---- an output buffer that cuts cleanly ----------------------------------- */

/* Text being built in p[cap]: two bytes always stay free, for the NUL and
 * for the closing quote of a value that was cut. Once something does not
 * fit nothing more is written, so an escape is never split and nothing
 * follows a gap. */
struct out {
    char *p;
    size_t cap, len;
    int full;
    int quoted; /* the text so far ends inside a quoted value */
};

static void out_init(struct out *o, char *p, size_t cap)
{
    *o = (struct out){.p = p, .cap = cap};
}

static void put(struct out *o, const char *s, size_t n)
{
    if (o->full)
        return;
    if (n > o->cap - 2 - o->len) {
        o->full = 1;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void put_ctl(struct out *o, unsigned char ch)
{
    char e[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
    put(o, e, sizeof e);
}

/* Ends the text: closes a quoted value that was cut, adds the NUL. */
static const char *out_end(struct out *o)
{
    if (o->full && o->quoted)
        o->p[o->len++] = '"';
    o->p[o->len] = 0;
    return o->p;
}

/* ---- values ---------------------------------------------------------------- */

/* Appends v[0..n) as the inside of a quoted value: \" \\ and \u00XX for
 * control bytes; other bytes as they are. */
static void put_escaped(struct out *o, const char *v, size_t n)
{
    for (size_t i = 0; i < n && !o->full; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            put(o, e, 2);
        } else if (ch < 0x20 || ch == 0x7f) {
            put_ctl(o, ch);
        } else {
            put(o, v + i, 1);
        }
    }
}

/* Whether v[0..n) can stand bare after key= (logfmt ends it at a space;
 * a quote or backslash would start or escape something). */
static int bare_ok(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch <= 0x20 || ch == 0x7f || ch == '"' || ch == '\\')
            return 0;
    }
    return 1;
}

static void put_spaces(struct out *o, size_t n)
{
    for (; n > 0 && !o->full; n--)
        put(o, " ", 1);
}

/* Appends one string value: escaped inside the format's quotes; bare if
 * it can be, else quoted here. width pads it with spaces as printf does. */
static void put_value(struct out *o, const char *v, size_t n, int width, int left)
{
    size_t pad = width > 0 && (size_t)width > n ? (size_t)width - n : 0;
    int quote = !o->quoted && (pad || !bare_ok(v, n));
    if (quote) {
        put(o, "\"", 1);
        if (o->full)
            return;
        o->quoted = 1;
    }
    if (!left)
        put_spaces(o, pad);
    put_escaped(o, v, n);
    if (left)
        put_spaces(o, pad);
    if (quote) {
        put(o, "\"", 1);
        if (!o->full)
            o->quoted = 0;
    }
}

/* ---- the pairs ---------------------------------------------------------- */

enum len_mod { LM_NONE, LM_HH, LM_H, LM_L, LM_LL, LM_Z, LM_J, LM_T, LM_LD };

/* The specs are rebuilt from the parsed parts; the numbers are printed by
 * snprintf with a format that is not a literal. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

/* Formats fmt's pairs into o: literal text as it is (a quote in it opens
 * or closes a quoted value), numbers as printf prints them, %s/%c/%m
 * through put_value. A conversion zlog does not know (or %ls) ends the
 * pairs there. */
static void format_pairs(struct out *o, const char *fmt, va_list ap, int saved_errno)
{
    const char *f = fmt;
    while (*f && !o->full) {
        if (*f != '%') {
            unsigned char ch = (unsigned char)*f++;
            if (ch < 0x20 || ch == 0x7f) {
                put_ctl(o, ch);
                continue;
            }
            put(o, (const char *)&ch, 1);
            if (ch == '"' && !o->full)
                o->quoted = !o->quoted;
            continue;
        }
        f++;
        if (*f == '%') {
            put(o, "%", 1);
            f++;
            continue;
        }
        char spec[40] = "%";
        size_t sl = 1;
        int left = 0, width = -1, prec = -1;
        for (; *f && strchr("-+ #0", *f); f++) {
            if (*f == '-')
                left = 1;
            else if (sl < 8)
                spec[sl++] = *f;
        }
        if (*f == '*') {
            width = va_arg(ap, int);
            f++;
            if (width < 0) {
                left = 1;
                width = width == INT_MIN ? INT_MAX : -width;
            }
            if (width > 99999)
                width = 99999;
        } else if (*f >= '0' && *f <= '9') {
            for (width = 0; *f >= '0' && *f <= '9'; f++)
                if (width < 99999)
                    width = width * 10 + (*f - '0');
        }
        if (*f == '.') {
            f++;
            prec = 0;
            if (*f == '*') {
                prec = va_arg(ap, int);
                f++;
                if (prec < 0)
                    prec = -1; /* as printf: as if none were given */
                else if (prec > 99999)
                    prec = 99999;
            } else {
                for (; *f >= '0' && *f <= '9'; f++)
                    if (prec < 99999)
                        prec = prec * 10 + (*f - '0');
            }
        }
        enum len_mod lm = LM_NONE;
        const char *lm_text = "";
        if (f[0] == 'h' && f[1] == 'h')
            lm = LM_HH, lm_text = "hh", f += 2;
        else if (f[0] == 'h')
            lm = LM_H, lm_text = "h", f++;
        else if (f[0] == 'l' && f[1] == 'l')
            lm = LM_LL, lm_text = "ll", f += 2;
        else if (f[0] == 'l')
            lm = LM_L, lm_text = "l", f++;
        else if (f[0] == 'z')
            lm = LM_Z, lm_text = "z", f++;
        else if (f[0] == 'j')
            lm = LM_J, lm_text = "j", f++;
        else if (f[0] == 't')
            lm = LM_T, lm_text = "t", f++;
        else if (f[0] == 'L')
            lm = LM_LD, lm_text = "L", f++;
        char conv = *f;
        if (!conv)
            return;
        f++;

        if (conv == 's' || conv == 'm') {
            if (lm == LM_L)
                return; /* wide strings: not for logs */
            const char *v = conv == 'm' ? strerror(saved_errno) : va_arg(ap, const char *);
            if (!v)
                v = "(null)";
            size_t n = prec >= 0 ? strnlen(v, (size_t)prec) : strlen(v);
            put_value(o, v, n, width, left);
            continue;
        }
        if (conv == 'c') {
            char ch = (char)va_arg(ap, int);
            put_value(o, &ch, 1, width, left);
            continue;
        }
        if (conv == 'n') {
            (void)va_arg(ap, void *); /* writes nothing back */
            continue;
        }
        if (left)
            spec[sl++] = '-';
        if (width >= 0)
            sl += (size_t)snprintf(spec + sl, sizeof spec - sl, "%d", width);
        if (prec >= 0)
            sl += (size_t)snprintf(spec + sl, sizeof spec - sl, ".%d", prec);
        snprintf(spec + sl, sizeof spec - sl, "%s%c", lm_text, conv);

        char num[NUM_MAX];
        int k = -1;
        switch (conv) {
        case 'd':
        case 'i':
            switch (lm) {
            case LM_L:
                k = snprintf(num, sizeof num, spec, va_arg(ap, long));
                break;
            case LM_LL:
                k = snprintf(num, sizeof num, spec, va_arg(ap, long long));
                break;
            case LM_Z:
                k = snprintf(num, sizeof num, spec, va_arg(ap, ssize_t));
                break;
            case LM_J:
                k = snprintf(num, sizeof num, spec, va_arg(ap, intmax_t));
                break;
            case LM_T:
                k = snprintf(num, sizeof num, spec, va_arg(ap, ptrdiff_t));
                break;
            default:
                k = snprintf(num, sizeof num, spec, va_arg(ap, int));
                break;
            }
            break;
        case 'u':
        case 'o':
        case 'x':
        case 'X':
            switch (lm) {
            case LM_L:
                k = snprintf(num, sizeof num, spec, va_arg(ap, unsigned long));
                break;
            case LM_LL:
                k = snprintf(num, sizeof num, spec, va_arg(ap, unsigned long long));
                break;
            case LM_Z:
                k = snprintf(num, sizeof num, spec, va_arg(ap, size_t));
                break;
            case LM_J:
                k = snprintf(num, sizeof num, spec, va_arg(ap, uintmax_t));
                break;
            case LM_T:
                k = snprintf(num, sizeof num, spec, va_arg(ap, ptrdiff_t));
                break;
            default:
                k = snprintf(num, sizeof num, spec, va_arg(ap, unsigned));
                break;
            }
            break;
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G':
        case 'a':
        case 'A':
            if (lm == LM_LD)
                k = snprintf(num, sizeof num, spec, va_arg(ap, long double));
            else
                k = snprintf(num, sizeof num, spec, va_arg(ap, double));
            break;
        case 'p':
            k = snprintf(num, sizeof num, spec, va_arg(ap, void *));
            break;
        default:
            return; /* unknown: its argument's type is too */
        }
        if (k > 0)
            put(o, num, (size_t)k < sizeof num ? (size_t)k : sizeof num - 1);
    }
}

#pragma GCC diagnostic pop

/* ---- JSON -------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (2-4 bytes), or 0. s is
 * NUL-terminated, so a cut sequence fails at the NUL. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t n;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* overlong */
        hi = c == 0xed ? 0x9f : 0xbf; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

/* s as the inside of a JSON string: \" \\ \u00XX, and \ufffd for a byte
 * that does not start valid UTF-8 (a strict reader would refuse the line). */
static const char *json_str(char *buf, size_t cap, const char *s)
{
    struct out o;
    out_init(&o, buf, cap);
    const unsigned char *p = (const unsigned char *)s;
    while (*p && !o.full) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p++};
            put(&o, e, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            put_ctl(&o, *p++);
        } else if (*p < 0x80) {
            put(&o, (const char *)p++, 1);
        } else {
            size_t n = utf8_len(p);
            if (n)
                put(&o, (const char *)p, n);
            else
                put(&o, "\\ufffd", 6);
            p += n ? n : 1;
        }
    }
    return out_end(&o);
}

/* ---- zlog -------------------------------------------------------------------- */

void zlog(int level, const char *mod, const char *msg, const char *fmt, ...)
{
    if (!zlog_enabled(level))
        return;
    int saved_errno = errno; /* for %m, and the caller's */
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[40];
    snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000));
    char kv[KV_MAX];
    struct out ko;
    out_init(&ko, kv, sizeof kv);
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        format_pairs(&ko, fmt, ap, saved_errno);
        va_end(ap);
    }
    out_end(&ko);
    if (!msg)
        msg = "";
    if (g_json) {
        char jmsg[JSON_MSG_MAX], jkv[JSON_KV_MAX];
        fprintf(stderr,
                "{\"ts\":\"%s\",\"level\":\"%s\",\"mod\":\"%s\",\"msg\":\"%s\",\"kv\":\"%s\"}\n",
                ts, level_names[level], mod, json_str(jmsg, sizeof jmsg, msg),
                json_str(jkv, sizeof jkv, kv));
    } else {
        char emsg[MSG_MAX];
        struct out mo;
        out_init(&mo, emsg, sizeof emsg);
        put_escaped(&mo, msg, strlen(msg));
        fprintf(stderr, "ts=%s level=%s mod=%s msg=\"%s\"%s%s\n", ts, level_names[level], mod,
                out_end(&mo), kv[0] ? " " : "", kv);
    }
    errno = saved_errno;
}

/* ---- rate limits -------------------------------------------------------------- */

static void limit_summary(struct zlog_limit *l)
{
    zlog(l->level, l->mod, "log lines left out (rate limit)",
         "what=\"%s\" suppressed=%" PRIu64 " burst=%u window_ms=%u", l->what, l->dropped, l->burst,
         l->window_ms);
    l->dropped = 0;
}

int zlog_limit_pass(struct zlog_limit *l, uint64_t now_ms)
{
    if (now_ms < l->start_ms || now_ms - l->start_ms >= l->window_ms) {
        if (l->dropped)
            limit_summary(l);
        l->start_ms = now_ms;
        l->used = 0;
    }
    if (l->used < l->burst) {
        l->used++;
        return 1;
    }
    l->dropped++;
    return 0;
}

void zlog_limit_flush(struct zlog_limit *l, uint64_t now_ms)
{
    if (l->dropped && (now_ms < l->start_ms || now_ms - l->start_ms >= l->window_ms))
        limit_summary(l);
}
