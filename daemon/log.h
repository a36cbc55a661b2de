/*
 * log.h — zppd's structured logs: one logfmt (or JSON) line per event on
 * stderr, which journald and kubectl logs both keep as they are.
 *
 *   ts=2026-11-22T17:30:00.123Z level=info mod=job msg="job formed" job=j1
 *
 * zlog's format string carries the message and its key=value pairs; the
 * module name and level come first. Loop thread and workers may log (one
 * fprintf per line, which stdio keeps whole).
 *
 * A value can be a client's string (job id, hpZ key, a failure message
 * naming one), so zlog escapes every %s (and %c) value as it formats the
 * pairs, and the pairs' format string says where the values are:
 *   - a value inside quotes (why=\"%s\") gets \" and \\ for quotes and
 *     backslashes, \u00XX for control bytes (0x00-0x1f, 0x7f);
 *   - a bare value (job=%s) stays as it is unless it holds a space, a quote,
 *     a backslash or a control byte: then zlog quotes and escapes it.
 * An ordinary string is printed unchanged. The message is always quoted
 * and escaped the same way. In JSON the pairs are the "kv" string, so a
 * reader unescapes the JSON string, then reads the pairs as above; JSON
 * strings also get \ufffd for a byte that is not UTF-8.
 */
#ifndef ZPPD_LOG_H
#define ZPPD_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum zlog_level { ZLOG_ERROR = 0, ZLOG_WARN = 1, ZLOG_INFO = 2, ZLOG_DEBUG = 3 };

/* Sets the lowest level printed and the format (0 text, 1 json). */
void zlog_setup(int level, int json);
int zlog_enabled(int level);
/* Parses "error|warn|info|debug"; returns the level or -1. */
int zlog_parse_level(const char *s);
const char *zlog_level_name(int level);

/* Logs `msg` (a plain message) followed by the formatted key=value pairs
 * (fmt may be NULL). fmt takes printf's conversions except %n and %ls; a
 * %s or %c value is escaped as the top of this file says. */
void zlog(int level, const char *mod, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define ZLOG_E(mod, msg, ...) zlog(ZLOG_ERROR, mod, msg, __VA_ARGS__)
#define ZLOG_W(mod, msg, ...) zlog(ZLOG_WARN, mod, msg, __VA_ARGS__)
#define ZLOG_I(mod, msg, ...) zlog(ZLOG_INFO, mod, msg, __VA_ARGS__)
#define ZLOG_D(mod, msg, ...)                                                                      \
    do {                                                                                           \
        if (zlog_enabled(ZLOG_DEBUG))                                                              \
            zlog(ZLOG_DEBUG, mod, msg, __VA_ARGS__);                                               \
    } while (0)

/* A cap on a line that a client can cause at will (a failed call, say): at
 * most `burst` such lines in each window of `window_ms`; the rest are left
 * out and counted, and one summary line (at `level`, module `mod`, naming
 * `what` and the count) follows once the window is over: from the next
 * zlog_limit_pass, or from zlog_limit_flush on a timer. The first lines of
 * a burst are always logged. Set it up with ZLOG_LIMIT_INIT; one thread
 * uses it (the loop thread, for the daemon's). */
struct zlog_limit {
    int level;
    const char *mod, *what;
    uint32_t burst, window_ms;
    uint64_t start_ms; /* the current window's */
    uint32_t used;     /* lines logged in it */
    uint64_t dropped;  /* lines left out since the last summary */
};
#define ZLOG_LIMIT_INIT(level, mod, what, burst, window_ms)                                        \
    {                                                                                              \
        (level), (mod), (what), (burst), (window_ms), 0, 0, 0                                      \
    }

/* Returns 1 when the caller may log its line now, 0 when the line is to be
 * left out (it is counted). now_ms: any monotonic clock in milliseconds.
 * Logs the summary of the last window first when one is due. */
int zlog_limit_pass(struct zlog_limit *l, uint64_t now_ms);
/* Logs the summary line if lines were left out and their window is over;
 * for a periodic timer, so that the count shows when the flood stops. */
void zlog_limit_flush(struct zlog_limit *l, uint64_t now_ms);

#endif
