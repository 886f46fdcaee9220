/*
 * svc_log.c - stderr log sink.  A line is formatted whole and written with
 * one fputs so lines from different threads never interleave.
 */
#include "svc_log.h"

#include <stdio.h>
#include <strings.h>
#include <time.h>

static const char *const names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

int svc_log_parse_level(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

static void sink(eng_log_level level, const char *line, void *ctx)
{
    (void)ctx;
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char buf[1200];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s\n", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
             names[level], line);
    fputs(buf, stderr);
}

void svc_log_install(eng_log_level min_level)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    eng_logger_set_sink(sink, NULL, min_level);
}
