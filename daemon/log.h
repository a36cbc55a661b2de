/*
 * log.h — zppd's structured logs: one logfmt (or JSON) line per event on
 * stderr, which journald and kubectl logs both keep as they are.
 *
 *   ts=2026-11-22T17:30:00.123Z level=info mod=job msg="job formed" job=j1
 *
 * zlog's format string carries the message and its key=value pairs; the
 * module name and level come first. Loop thread and workers may log (one
 * fprintf per line, which stdio keeps whole).
 */
#ifndef ZPPD_LOG_H
#define ZPPD_LOG_H

#include <stdarg.h>

enum zlog_level { ZLOG_ERROR = 0, ZLOG_WARN = 1, ZLOG_INFO = 2, ZLOG_DEBUG = 3 };

/* Sets the lowest level printed and the format (0 text, 1 json). */
void zlog_setup(int level, int json);
int zlog_enabled(int level);
/* Parses "error|warn|info|debug"; returns the level or -1. */
int zlog_parse_level(const char *s);
const char *zlog_level_name(int level);

/* Logs `msg` (a plain message) followed by the formatted key=value pairs
 * (fmt may be NULL). */
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

#endif
