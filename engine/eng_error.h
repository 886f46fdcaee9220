/*
 * eng_error.h - the one error vocabulary of the storage engine.
 *
 * Every engine function returns int: 0 on success, a negative errno (-ENOENT,
 * -ENOSPC, ...) when a system call failed, or one of the ENG_E* domain codes
 * below when the engine itself refuses something.  Domain codes live far below
 * any errno value so the two never collide, and eng_strerror() names both.
 *
 * Many calls also take an optional eng_errdetail that receives a human
 * sentence and, where it helps the caller, the offending key or numeric bounds
 * (for example the log start offset and high watermark of an out-of-range
 * read).  The detail is only written when the call fails.
 */
#ifndef ENG_ERROR_H
#define ENG_ERROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    ENG_OK = 0,
    ENG_EBASE = -10000,
    ENG_EINVAL = ENG_EBASE,  /* malformed argument from the caller */
    ENG_ECORRUPT,            /* bytes that do not parse as a record batch */
    ENG_ECRC,                /* a batch whose CRC-32C does not match */
    ENG_ETOOLARGE,           /* batch above max.message.bytes or segment.bytes */
    ENG_ENOTOPIC,            /* unknown topic */
    ENG_ENOPARTITION,        /* unknown partition */
    ENG_ETOPICEXISTS,        /* create of a topic that exists */
    ENG_ETOPICNAME,          /* topic name outside [A-Za-z0-9._-]{1,249} */
    ENG_ECONFIG,             /* unknown config key or bad value */
    ENG_EOFFSET,             /* offset outside [log start, high watermark] */
    ENG_EEXPECTED,           /* expected_offset did not match log end */
    ENG_ETIMESTAMP,          /* record timestamp outside the topic's limits */
    ENG_ENULLKEY,            /* null key on a compacted topic */
    ENG_ENOTFOUND,           /* record or segment not found */
    ENG_EOFFLINE,            /* the log dir went offline after an I/O error */
    ENG_ESHUTDOWN,           /* the engine is stopping */
    ENG_EBUSY,               /* the partition is busy (e.g. being cleaned) */
    ENG_ENOTCOMPACT,         /* compaction asked of a non-compacted topic */
    ENG_ENOTREADY,           /* still loading */
    ENG_ELIMIT,              /* a configured limit (e.g. waiters) is reached */
    ENG_EUNSUPPORTED,        /* a well-formed batch this server cannot take (transactional) */
    ENG_ESEQUENCE,           /* an idempotent producer's batch out of sequence */
    ENG_EPRODUCER_FENCED,    /* an idempotent producer's epoch below the one seen last */
    ENG_EINVRECORD,          /* a client's batch, its CRC intact, that breaks a rule of the
                              * format (Kafka's InvalidRecordException) */
    ENG_EEND
};

/* Context for a failure; every field is optional and zero when unused. */
typedef struct eng_errdetail {
    char message[256];  /* one human sentence, no trailing newline */
    char key[128];      /* offending config key or field, "" if none */
    int64_t lo, hi;     /* bounds for range errors (e.g. [log start, hw)); for a
                         * null key or a timestamp refused, the batch's index and
                         * the record's offset delta */
    int has_bounds;
} eng_errdetail;

/* Whether rc is a resource running out (a full disk or quota, no
 * descriptor or memory map left: ENOSPC, EDQUOT, EMFILE, ENFILE, ENOMEM)
 * rather than the storage failing.  Where it comes from an open, a create,
 * an mmap or a write that is cut off again, nothing is left half done and
 * the operation can simply be refused and tried later: only a real I/O
 * failure (EIO, any failed fsync, even one that says ENOSPC) takes the log
 * dir offline. */
bool eng_error_out_of_resources(int rc);

/* Returns a static string naming err (an ENG_E* code or a negative errno). */
const char *eng_strerror(int err);

/* Fills d (if not NULL) with a formatted message and returns err, so a
 * failure site can write `return eng_fail(d, ENG_EINVAL, "...", ...)`. */
int eng_fail(eng_errdetail *d, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records the offending key in d (if not NULL). */
void eng_errdetail_key(eng_errdetail *d, const char *key);

/* Records range bounds in d (if not NULL). */
void eng_errdetail_bounds(eng_errdetail *d, int64_t lo, int64_t hi);

#endif
