/*
 * fuzz_startup.c - a data dir's startup on arbitrary files: the topic
 * metadata, the three offset checkpoints, the clean-shutdown marker, and
 * each partition's segments, indexes, leftovers of interrupted swaps and
 * deletes, producer snapshots, and side files, all of which the server
 * reads back from disk.
 *
 * Input framing: a sequence of files, each
 *
 *     kind (1 byte)  length (2 bytes, big-endian)  content (length bytes)
 *
 * where kind (modulo the table below) picks the file's name and a length
 * past the input's end takes what is left.  A later file of the same kind
 * replaces an earlier one.  Names are fixed so the fuzzer spends its time on
 * contents: topic "t" with partitions t-0 (segments based at 0 and 5) and
 * t-1, topic "u" with u-0.
 *
 * Each run, in a scratch data dir (on /dev/shm when it exists) emptied
 * before the run, the files are written and a manager is opened on the dir
 * with the log cleaner (no threads, runs on demand only) and no background
 * jobs.  Opening may refuse the dir (metadata that does not parse is meant to
 * stop the start); it must not crash, hang or leak.  When it opens: every
 * partition reads from its log start offset towards its high watermark in
 * whole batches (each header decodes and fits what was returned), every
 * read moving forward (an empty one to the high watermark), until the end
 * or a read that answers ENG_ECORRUPT; its segments have increasing bases
 * and add up to its size, the last ending at the log end offset; a compacted partition is cleaned once on demand
 * and audited again; then the manager is closed cleanly and opened again,
 * which must need no recovery, truncate nothing and find the same
 * partitions with the same log start and end offsets.
 * Metadata naming more than MAX_PARTITIONS partitions but no more than a
 * topic may have is skipped: the server would load it, slowly (a directory
 * and files per partition), and the fuzzer would report a timeout rather
 * than a bug; larger counts still run, since they must be refused.
 * FUZZ_STARTUP_VERBOSE=1 prints the engine's log lines.
 *
 * Reads are not held to valid CRCs or increasing offsets, nor segments to
 * offsets below the next segment's base, unlike in fuzz_recovery: as in
 * Kafka, a segment below the recovery point, or any segment after a clean
 * shutdown whose indexes pass their check, is trusted without being read,
 * so a byte changed on disk is served as it is (a Kafka consumer finds it
 * by the CRC) or refused by the read as corrupt.
 */
#include "eng_batch.h"
#include "eng_cleaner.h"
#include "eng_config.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "eng_partition.h"
#include "svc_meta.h"
#include "fuzz_support.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const names[] = {
    "meta/t.json",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
    ".kafka_cleanshutdown",
    "t-0/00000000000000000000.log",
    "t-0/00000000000000000000.index",
    "t-0/00000000000000000000.timeindex",
    "t-0/00000000000000000005.log",
    "t-0/00000000000000000005.index",
    "t-0/00000000000000000005.timeindex",
    "t-0/00000000000000000005.log.swap",
    "t-0/00000000000000000000.log.deleted",
    "t-0/leader-epoch-checkpoint",
    "t-0/partition.metadata",
    "t-1/00000000000000000000.log",
    "meta/u.json",
    "u-0/00000000000000000000.log",
    "u-0/00000000000000000000.index",
    "u-0/00000000000000000000.timeindex",
    /* Producer snapshots: one a segment names, one at no segment (a clean
     * stop's), one past any log end (a truncation's); read at startup. */
    "t-0/00000000000000000005.snapshot",
    "t-0/00000000000000000007.snapshot",
    "t-0/00000000000000099999.snapshot",
};
#define NNAMES (sizeof names / sizeof names[0])
#define MAX_PARTITIONS 8

static char root[256];     /* scratch dir, created once */
static char data_dir[300]; /* <root>/data, recreated on every run */
static bool verbose;

static void quiet_sink(eng_log_level level, const char *line, void *ctx)
{
    (void)ctx;
    if (verbose)
        fprintf(stderr, "[%d] %s\n", (int)level, line);
}

static void remove_root(void)
{
    if (root[0])
        eng_fs_remove_tree(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    verbose = getenv("FUZZ_STARTUP_VERBOSE") != NULL;
    eng_logger_set_sink(quiet_sink, NULL, ENG_LOG_DEBUG);
    fuzz_make_root(root, sizeof root, "startup");
    snprintf(data_dir, sizeof data_dir, "%s/data", root);
    atexit(remove_root);
    return 0;
}

static void write_file(const char *rel, const uint8_t *data, size_t len)
{
    char path[PATH_MAX], dir[PATH_MAX];
    CHECK(eng_fs_join(path, sizeof path, data_dir, rel) == 0);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    CHECK(eng_fs_mkdir(dir) == 0 || eng_fs_exists(dir));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        CHECK(w > 0);
        done += (size_t)w;
    }
    CHECK(close(fd) == 0);
}

static eng_manager *manager_open(eng_cleaner_opts *co, eng_manager_opts *mo, int *rc_out)
{
    eng_cleaner_opts_default(co);
    co->threads = 0; /* on-demand runs only */
    co->dedupe_buffer_bytes = 1 << 20;
    *mo = (eng_manager_opts){.log_dir = data_dir, .codec = svc_meta_codec(), .cleaner = co};
    eng_jobs_opts_default(&mo->jobs);
    eng_config_defaults_init(&mo->defaults);
    eng_errdetail err = {0};
    eng_manager *m = NULL;
    int rc = eng_manager_open(mo, &m, &err);
    if (!rc && (rc = eng_manager_start_cleaner(m))) {
        eng_manager_close(m);
        m = NULL;
    }
    *rc_out = rc;
    return rc ? NULL : m;
}

static void audit_partition(eng_partition *p, part_state *out)
{
    eng_partition_info in;
    eng_partition_info_get(p, &in);
    CHECK(in.log_start_offset <= in.high_watermark && in.high_watermark <= in.log_end_offset);
    eng_segment_info *si;
    size_t n;
    CHECK(eng_partition_segments(p, &si, &n) == 0);
    CHECK(n == in.segment_count && n > 0);
    uint64_t size = 0;
    /* Bases only: a trusted segment's batches are what is on disk, so its
     * next offset may reach past the next segment's base (see the header). */
    for (size_t i = 0; i < n; i++) {
        CHECK(i == 0 || si[i].base_offset > si[i - 1].base_offset);
        size += si[i].size_bytes;
    }
    CHECK(size == in.size_bytes);
    CHECK(si[n - 1].next_offset == in.log_end_offset);
    free(si);
    int64_t at = in.log_start_offset;
    while (at < in.high_watermark) {
        eng_fetch f;
        eng_errdetail d = {0};
        int rc = eng_partition_read(p, at, 65536, &f, &d);
        if (rc == ENG_ECORRUPT)
            break;
        if (rc) {
            fprintf(stderr, "fuzz_startup: %s-%d: read at %lld of [%lld, %lld): %s: %s\n",
                    eng_partition_topic(p), eng_partition_id(p), (long long)at,
                    (long long)in.log_start_offset, (long long)in.high_watermark,
                    eng_strerror(rc), d.message);
            abort();
        }
        /* Every read moves on; one that finds no batch below the high
         * watermark (segments cut to nothing by recovery leave such a gap)
         * moves to it. */
        if (f.next_offset <= at || (f.len == 0 && f.next_offset != in.high_watermark)) {
            fprintf(stderr, "fuzz_startup: %s-%d: read at %lld of [%lld, %lld) answered %zu bytes "
                    "and next offset %lld\n", eng_partition_topic(p), eng_partition_id(p),
                    (long long)at, (long long)in.log_start_offset, (long long)in.high_watermark,
                    f.len, (long long)f.next_offset);
            abort();
        }
        for (size_t pos = 0; pos < f.len;) {
            eng_batch_header h;
            CHECK(eng_batch_header_decode(f.data + pos, f.len - pos, &h) == 0);
            CHECK(eng_batch_size(&h) <= f.len - pos);
            pos += eng_batch_size(&h);
        }
        at = f.next_offset;
        eng_fetch_free(&f);
    }
    snprintf(out->topic, sizeof out->topic, "%s", eng_partition_topic(p));
    out->id = eng_partition_id(p);
    out->lso = in.log_start_offset;
    out->leo = in.log_end_offset;
}

/* Audits every partition (cleaning the compacted ones first when clean is
 * set); *out (malloc'd, sorted) receives their offsets. */
static size_t audit_all(eng_manager *m, bool clean, part_state **out)
{
    eng_partition **all;
    size_t n;
    CHECK(eng_manager_all_partitions(m, &all, &n) == 0);
    part_state *st = calloc(n ? n : 1, sizeof *st);
    CHECK(st);
    for (size_t i = 0; i < n; i++) {
        if (clean && strcmp(eng_partition_topic(all[i]), "u") == 0) {
            eng_clean_stats cs;
            (void)eng_cleaner_clean_now(eng_manager_cleaner(m), all[i], false, &cs);
        }
        audit_partition(all[i], &st[i]);
    }
    eng_partitions_release(all, n);
    qsort(st, n, sizeof *st, cmp_part);
    *out = st;
    return n;
}

/* False for topic metadata the harness refuses to load (see the header). */
static bool affordable(const char *name, const uint8_t *data, size_t len)
{
    if (strncmp(name, "meta/", 5))
        return true;
    json_t *doc = json_loadb((const char *)data, len, 0, NULL);
    json_t *parts = json_object_get(doc, "partitions");
    bool ok = !json_is_integer(parts) || json_integer_value(parts) <= MAX_PARTITIONS ||
              json_integer_value(parts) > ENG_TOPIC_PARTITIONS_MAX;
    json_decref(doc);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t pos = 0; pos + 3 <= size;) {
        size_t len = (size_t)data[pos + 1] << 8 | data[pos + 2];
        if (len > size - pos - 3)
            len = size - pos - 3;
        if (!affordable(names[data[pos] % NNAMES], data + pos + 3, len))
            return 0;
        pos += 3 + len;
    }
    eng_fs_remove_tree(data_dir);
    CHECK(eng_fs_mkdir(data_dir) == 0);
    for (size_t pos = 0; pos + 3 <= size;) {
        const char *name = names[data[pos] % NNAMES];
        size_t len = (size_t)data[pos + 1] << 8 | data[pos + 2];
        pos += 3;
        if (len > size - pos)
            len = size - pos;
        write_file(name, data + pos, len);
        pos += len;
    }

    eng_cleaner_opts co;
    eng_manager_opts mo;
    int rc;
    eng_manager *m = manager_open(&co, &mo, &rc);
    if (!m) {
        CHECK(rc != 0);
        return 0; /* refusing a dir is an answer; crashing is not */
    }
    part_state *before, *after;
    size_t nb = audit_all(m, false, &before);
    free(before);
    nb = audit_all(m, true, &before);
    CHECK(eng_manager_close(m));

    m = manager_open(&co, &mo, &rc);
    if (!m) {
        fprintf(stderr, "fuzz_startup: a clean restart failed: %s\n", eng_strerror(rc));
        abort();
    }
    eng_startup_report r;
    eng_manager_startup_report(m, &r);
    CHECK(r.clean_shutdown);
    CHECK(r.bytes_truncated == 0 && r.segments_recovered == 0);
    size_t na = audit_all(m, false, &after);
    CHECK(na == nb);
    for (size_t i = 0; i < na; i++) {
        if (strcmp(before[i].topic, after[i].topic) || before[i].id != after[i].id ||
            before[i].lso != after[i].lso || before[i].leo != after[i].leo) {
            fprintf(stderr, "fuzz_startup: after a clean restart %s-%d has [%lld, %lld), "
                    "before it %s-%d had [%lld, %lld)\n", after[i].topic, after[i].id,
                    (long long)after[i].lso, (long long)after[i].leo, before[i].topic,
                    before[i].id, (long long)before[i].lso, (long long)before[i].leo);
            abort();
        }
    }
    free(before);
    free(after);
    CHECK(eng_manager_close(m));
    return 0;
}
