/*
 * eng_logger.c - forwards engine log lines to the installed sink.
 *
 * The sink pointer is set once at startup, before any engine thread runs, so
 * plain loads suffice; the level check happens before formatting so disabled
 * debug lines cost one comparison.
 */
#include "eng_logger.h"

#include <stdarg.h>
#include <stdio.h>

static eng_log_sink g_sink;
static void *g_ctx;
static eng_log_level g_min = ENG_LOG_INFO;

void eng_logger_set_sink(eng_log_sink sink, void *ctx, eng_log_level min_level)
{
    g_sink = sink;
    g_ctx = ctx;
    g_min = min_level;
}

void eng_logf(eng_log_level level, const char *fmt, ...)
{
    if (!g_sink || level < g_min)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    g_sink(level, line, g_ctx);
}
