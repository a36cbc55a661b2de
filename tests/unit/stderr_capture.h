/*
 * stderr_capture.h — the unit tests that read the daemon's log lines:
 * stderr into a temporary file between capture_begin and capture_end.
 */
#ifndef ZPP_TEST_STDERR_CAPTURE_H
#define ZPP_TEST_STDERR_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

static int g_saved_fd = -1;
static FILE *g_tmp;

static void capture_begin(void)
{
    fflush(stderr);
    g_tmp = tmpfile();
    ASSERT(g_tmp != NULL);
    g_saved_fd = dup(2);
    ASSERT(g_saved_fd >= 0);
    ASSERT(dup2(fileno(g_tmp), 2) == 2);
}

/* Restores stderr; returns what was written meanwhile (malloc'd). */
static char *capture_end(void)
{
    fflush(stderr);
    dup2(g_saved_fd, 2);
    close(g_saved_fd);
    long n = ftell(g_tmp);
    ASSERT(n >= 0);
    char *buf = malloc((size_t)n + 1);
    ASSERT(buf != NULL);
    rewind(g_tmp);
    ASSERT_EQ(fread(buf, 1, (size_t)n, g_tmp), (size_t)n);
    buf[n] = 0;
    fclose(g_tmp);
    return buf;
}

#endif
