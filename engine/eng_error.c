/*
 * eng_error.c - names for engine error codes and the errdetail helpers.
 */
#include "eng_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const domain_names[] = {
    [ENG_EINVAL - ENG_EBASE] = "invalid argument",
    [ENG_ECORRUPT - ENG_EBASE] = "corrupt record batch",
    [ENG_ECRC - ENG_EBASE] = "record batch CRC mismatch",
    [ENG_ETOOLARGE - ENG_EBASE] = "record batch too large",
    [ENG_ENOTOPIC - ENG_EBASE] = "unknown topic",
    [ENG_ENOPARTITION - ENG_EBASE] = "unknown partition",
    [ENG_ETOPICEXISTS - ENG_EBASE] = "topic already exists",
    [ENG_ETOPICNAME - ENG_EBASE] = "invalid topic name",
    [ENG_ECONFIG - ENG_EBASE] = "invalid config",
    [ENG_EOFFSET - ENG_EBASE] = "offset out of range",
    [ENG_EEXPECTED - ENG_EBASE] = "expected offset mismatch",
    [ENG_ETIMESTAMP - ENG_EBASE] = "invalid timestamp",
    [ENG_ENULLKEY - ENG_EBASE] = "null key on a compacted topic",
    [ENG_ENOTFOUND - ENG_EBASE] = "not found",
    [ENG_EOFFLINE - ENG_EBASE] = "log dir offline",
    [ENG_ESHUTDOWN - ENG_EBASE] = "engine shutting down",
    [ENG_EBUSY - ENG_EBASE] = "busy",
    [ENG_ENOTCOMPACT - ENG_EBASE] = "topic is not compacted",
    [ENG_ENOTREADY - ENG_EBASE] = "not ready",
    [ENG_ELIMIT - ENG_EBASE] = "limit reached",
    [ENG_EUNSUPPORTED - ENG_EBASE] = "unsupported record batch",
    [ENG_ESEQUENCE - ENG_EBASE] = "out of order sequence number",
    [ENG_EPRODUCER_FENCED - ENG_EBASE] = "invalid producer epoch",
    [ENG_EINVRECORD - ENG_EBASE] = "invalid record batch",
};

const char *eng_strerror(int err)
{
    if (err == 0)
        return "success";
    if (err >= ENG_EBASE && err < ENG_EEND) {
        const char *s = domain_names[err - ENG_EBASE];
        return s ? s : "unknown engine error";
    }
    if (err < 0 && err > -4096)
        return strerror(-err);
    return "unknown error";
}

bool eng_error_out_of_resources(int rc)
{
    return rc == -ENOSPC || rc == -EDQUOT || rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM;
}

int eng_fail(eng_errdetail *d, int err, const char *fmt, ...)
{
    if (d) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
    }
    return err;
}

void eng_errdetail_key(eng_errdetail *d, const char *key)
{
    if (d)
        snprintf(d->key, sizeof d->key, "%s", key ? key : "");
}

void eng_errdetail_bounds(eng_errdetail *d, int64_t lo, int64_t hi)
{
    if (d) {
        d->lo = lo;
        d->hi = hi;
        d->has_bounds = 1;
    }
}
