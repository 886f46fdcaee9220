/*
 * fuzz_recovery.c - segment recovery and partition loading on arbitrary bytes.
 *
 * The input is the whole content of a segment's .log file.  The segment's
 * base offset is the first 8 bytes read as a big-endian baseOffset (what the
 * first batch of a real segment carries, and so what Kafka names the file
 * after) when that is >= 0, else 0.  Each run, in a scratch partition
 * directory created once (on /dev/shm when it exists) and emptied after the
 * run:
 *
 *   1. the input is written as <base>.log, opened inactive and recovered
 *      with an index entry for nearly every batch (index.interval.bytes 0).
 *      Invariants: recovery succeeds; the kept size is <= the input size and
 *      is exactly what is left on disk, byte for byte the input's prefix; that
 *      prefix is a whole number of batches that eng_batch_validate accepts,
 *      with offsets increasing, inside the segment, as many as reported; the
 *      next offset and max timestamp agree with those batches; both rebuilt
 *      indexes pass eng_index_check, every offset-index entry points at a
 *      batch start and names that batch's last offset, and the last
 *      time-index entry is the max timestamp; a second recovery of the result
 *      truncates nothing and finds the same batches.
 *   2. the recovered files are loaded as a partition after a clean shutdown:
 *      the indexes recovery wrote must pass the loader's check (no segment is
 *      recovered again) and the log end offset is the recovered next offset.
 *   3. the original input is written again, without indexes, and loaded as a
 *      partition after an unclean shutdown (eng_partition_open with
 *      clean_shutdown=false, which first tries the segment active): it must
 *      truncate exactly as step 1 did and end at the same offset.  The whole
 *      log is then read back through eng_partition_read, timestamp lookups
 *      and the batch listing run over it (every batch listed valid), a new
 *      batch is appended at the end, and the partition is closed.
 *
 * Each input runs twice when its batches' CRCs are wrong: as it is, and
 * with every whole batch's CRC recomputed, so that mutations reach the
 * checks behind the CRC.
 *
 * Every handle is closed and every file removed before the next input, so
 * millions of runs leak neither descriptors nor disk.
 */
#include "eng_batch.h"
#include "eng_config.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_index.h"
#include "eng_partition.h"
#include "eng_segment.h"
#include "fuzz_support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];          /* the scratch directory, created once */
static char partdir[PATH_MAX];  /* <root>/fuzz-0 */
static eng_config defaults_cfg; /* Kafka's topic defaults */

static void remove_root(void)
{
    if (root[0])
        eng_fs_remove_tree(root);
}

static void setup_once(void)
{
    if (root[0])
        return;
    fuzz_make_root(root, sizeof root, "recovery");
    snprintf(partdir, sizeof partdir, "%s/fuzz-0", root);
    CHECK(eng_fs_mkdir(partdir) == 0);
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    defaults_cfg = d.cfg;
    atexit(remove_root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setup_once();
    return 0;
}

/* Removes every file of the partition directory (it holds no subdirectory). */
static void empty_dir(void)
{
    DIR *d = opendir(partdir);
    CHECK(d != NULL);
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            eng_fs_join(path, sizeof path, partdir, e->d_name) == 0)
            unlink(path);
    closedir(d);
}

static void write_log(int64_t base, const uint8_t *data, size_t size)
{
    char path[PATH_MAX];
    CHECK(eng_fs_segment_path(path, sizeof path, partdir, base, ".log") == 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        CHECK(w > 0);
        done += (size_t)w;
    }
    close(fd);
}

/* The batches of a valid prefix, found by walking it again independently. */
typedef struct walk {
    uint64_t *pos;       /* start of each batch */
    int64_t *last;       /* last offset of each batch */
    size_t n;
    int64_t next_offset; /* base when empty */
    int64_t max_ts;      /* -1 when no batch carries a timestamp >= 0 */
    int64_t off_of_max;
} walk;

static void walk_prefix(const uint8_t *data, uint64_t len, int64_t base, walk *w)
{
    size_t cap = len / ENG_BATCH_OVERHEAD + 1;
    w->pos = malloc(cap * sizeof *w->pos);
    w->last = malloc(cap * sizeof *w->last);
    CHECK(w->pos && w->last);
    w->n = 0;
    w->next_offset = base;
    w->max_ts = -1;
    w->off_of_max = -1;
    uint64_t at = 0;
    while (at < len) {
        eng_batch_header h, v;
        CHECK(eng_batch_header_decode(data + at, len - at, &h) == 0);
        CHECK(eng_batch_size(&h) <= len - at);
        CHECK(eng_batch_validate(data + at, eng_batch_size(&h), &v) == 0);
        CHECK(h.base_offset >= w->next_offset);
        CHECK(eng_batch_last_offset(&h) >= h.base_offset);
        CHECK(eng_batch_last_offset(&h) - base <= INT32_MAX);
        CHECK(w->n < cap);
        w->pos[w->n] = at;
        w->last[w->n] = eng_batch_last_offset(&h);
        w->n++;
        w->next_offset = eng_batch_last_offset(&h) + 1;
        if (h.max_timestamp > w->max_ts) {
            w->max_ts = h.max_timestamp;
            w->off_of_max = eng_batch_last_offset(&h);
        }
        at += eng_batch_size(&h);
    }
    CHECK(at == len);
}

static void walk_free(walk *w)
{
    free(w->pos);
    free(w->last);
}

/* The file on disk is exactly data[0, len). */
static void check_file(const eng_segment *s, const uint8_t *data, uint64_t len)
{
    struct stat st;
    CHECK(fstat(eng_segment_log_fd(s), &st) == 0);
    CHECK((uint64_t)st.st_size == len);
    uint8_t *buf = malloc(len ? len : 1);
    CHECK(buf);
    size_t got = 0;
    CHECK(eng_segment_pread(s, buf, len, 0, &got) == 0 && got == len);
    CHECK(memcmp(buf, data, len) == 0);
    free(buf);
}

static void check_indexes(eng_segment *s, const walk *w, uint64_t len)
{
    eng_index *oi = eng_segment_offset_index(s), *ti = eng_segment_time_index(s);
    CHECK(oi && ti);
    CHECK(eng_index_check(oi, len) == 0);
    CHECK(eng_index_check(ti, len ? len : 1) == 0);
    size_t k = 0;
    for (uint32_t i = 0; i < eng_index_entries(oi); i++) {
        int64_t off;
        uint32_t pos;
        eng_offset_index_entry(oi, i, &off, &pos);
        while (k < w->n && w->pos[k] < pos)
            k++;
        CHECK(k < w->n && w->pos[k] == pos && w->last[k] == off);
    }
    uint32_t nt = eng_index_entries(ti);
    for (uint32_t i = 0; i < nt; i++) {
        int64_t ts, off;
        eng_time_index_entry(ti, i, &ts, &off);
        CHECK(ts <= w->max_ts && off >= eng_segment_base(s) && off < w->next_offset);
    }
    if (w->max_ts >= 0) {
        int64_t ts, off;
        eng_time_index_last(ti, &ts, &off);
        CHECK(ts == w->max_ts && off == w->off_of_max);
    } else {
        CHECK(nt == 0);
    }
}

typedef struct scan_ctx {
    const walk *w;
    size_t i;
} scan_ctx;

static int visit_scan(const eng_batch_pos *b, void *ctx)
{
    scan_ctx *c = ctx;
    CHECK(c->i < c->w->n && b->position == c->w->pos[c->i] &&
          eng_batch_last_offset(&b->header) == c->w->last[c->i]);
    c->i++;
    return 0;
}

/* Step 1; returns the recovered size and next offset. */
static void recover_segment(const uint8_t *data, size_t size, int64_t base, uint64_t *valid,
                            int64_t *next)
{
    eng_segment_opts o = {.index_max_bytes = 1u << 20, .index_interval = 0};
    eng_segment *s = NULL;
    CHECK(eng_segment_open(partdir, base, &o, false, &s) == 0);
    eng_recover_stats st;
    CHECK(eng_segment_recover(s, &st) == 0);
    CHECK(st.valid_bytes <= size);
    CHECK(st.valid_bytes + st.truncated_bytes == size);
    CHECK((st.truncated_bytes == 0) == (st.stop_reason == NULL));
    CHECK(eng_segment_size(s) == st.valid_bytes);
    check_file(s, data, st.valid_bytes);

    walk w;
    walk_prefix(data, st.valid_bytes, base, &w);
    CHECK(w.n == st.batches);
    CHECK(st.next_offset == w.next_offset);
    CHECK(eng_segment_next_offset(s) == w.next_offset);
    CHECK(eng_segment_max_timestamp(s) == w.max_ts);
    CHECK(eng_segment_offset_of_max_timestamp(s) == w.off_of_max);
    check_indexes(s, &w, st.valid_bytes);

    /* Recovering what recovery kept changes nothing. */
    eng_recover_stats again;
    CHECK(eng_segment_recover(s, &again) == 0);
    CHECK(again.truncated_bytes == 0 && again.stop_reason == NULL);
    CHECK(again.valid_bytes == st.valid_bytes && again.batches == st.batches);
    CHECK(again.next_offset == st.next_offset);
    check_indexes(s, &w, st.valid_bytes);

    /* A scan of the kept bytes visits the same batches. */
    scan_ctx sc = {.w = &w};
    CHECK(eng_segment_scan(s, st.valid_bytes, visit_scan, &sc) == 0);
    CHECK(sc.i == w.n);
    walk_free(&w);
    eng_segment_unref(s);
    *valid = st.valid_bytes;
    *next = st.next_offset;
}

static eng_partition *open_partition(bool clean, eng_load_stats *ls)
{
    eng_partition_params pp = {.topic = "fuzz", .id = 0, .dir = partdir, .config = defaults_cfg,
                               .clean_shutdown = clean, .recovery_point = 0,
                               .log_start_offset = -1};
    eng_partition *p = NULL;
    int rc = eng_partition_open(&pp, &p, ls);
    if (rc) {
        fprintf(stderr, "fuzz_recovery: eng_partition_open(clean=%d): %s\n", clean,
                eng_strerror(rc));
        abort();
    }
    return p;
}

/* Reads the whole log back: whole valid batches, in order, up to the HW. */
static void read_all(eng_partition *p)
{
    int64_t hw = eng_partition_high_watermark(p);
    int64_t at = eng_partition_log_start_offset(p);
    while (at < hw) {
        eng_fetch f;
        eng_errdetail d = {0};
        CHECK(eng_partition_read(p, at, 4096, &f, &d) == 0);
        CHECK(f.len > 0);
        size_t pos = 0;
        while (pos < f.len) {
            eng_batch_header h, v;
            CHECK(eng_batch_header_decode(f.data + pos, f.len - pos, &h) == 0);
            CHECK(eng_batch_size(&h) <= f.len - pos);
            CHECK(eng_batch_validate(f.data + pos, eng_batch_size(&h), &v) == 0);
            pos += eng_batch_size(&h);
        }
        CHECK(f.next_offset > at);
        at = f.next_offset;
        eng_fetch_free(&f);
    }
    CHECK(at == hw);
}

/* Timestamp lookups and the batch listing over the recovered segment: they
 * must answer (found or not), never fail. */
static void lookups(eng_partition *p, uint64_t valid)
{
    int64_t off = -1, ts = -1;
    int rc = eng_partition_max_timestamp(p, &off, &ts);
    CHECK(rc == 0 || rc == ENG_ENOTFOUND);
    int64_t probes[] = {0, ts, ts > 0 ? ts - 1 : 0, INT64_MAX};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        rc = eng_partition_offset_for_timestamp(p, probes[i], &off, &ts);
        CHECK(rc == 0 || rc == ENG_ENOTFOUND);
    }
    eng_batch_dump *d = NULL;
    size_t n = 0, total = 0;
    int64_t damaged_at;
    /* The one segment's base is the log start offset here. */
    rc = eng_partition_dump_batches(p, eng_partition_log_start_offset(p), 0, 1000, &d, &n, &total,
                                    &damaged_at);
    CHECK(rc == 0 && damaged_at == -1);
    uint64_t bytes = 0;
    for (size_t i = 0; i < total && i < n; i++) {
        CHECK(d[i].valid && d[i].position == bytes);
        bytes += eng_batch_size(&d[i].header);
    }
    CHECK(total > n || bytes == valid);
    free(d);
}

/* Appends one small record; the log end offset moves by one. */
static void append_one(eng_partition *p)
{
    int64_t leo = eng_partition_log_end_offset(p);
    uint8_t buf[256];
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    eng_record_spec r = {.timestamp = eng_now_ms(), .key = (const uint8_t *)"k", .key_len = 1,
                         .value = (const uint8_t *)"v", .value_len = 1};
    size_t len = eng_batch_encode(buf, sizeof buf, &bp, &r, 1);
    CHECK(len > 0);
    eng_append_opts o = {.expected_offset = -1};
    eng_append_result res;
    eng_errdetail d = {0};
    int rc = eng_partition_append(p, buf, len, &o, &res, &d);
    if (leo == INT64_MAX) {
        CHECK(rc == ENG_EOFFSET); /* no offset is left to give */
        return;
    }
    if (rc) {
        fprintf(stderr, "fuzz_recovery: append at %lld failed: %s (%s)\n", (long long)leo,
                eng_strerror(rc), d.message);
        abort();
    }
    CHECK(res.base_offset == leo && res.last_offset == leo);
    CHECK(eng_partition_log_end_offset(p) == leo + 1);
}

static void run_input(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup_once();
    run_input(data, size);
    /* A mutated batch almost never keeps its CRC-32C, so recovery would stop
     * at the CRC check of the first changed batch and nothing past it
     * (offset order, record framing, decompression, timestamps) would see
     * the mutation: the same bytes with every CRC right run again. */
    uint8_t *fixed = malloc(size ? size : 1);
    CHECK(fixed);
    memcpy(fixed, data, size);
    if (fuzz_fix_crcs(fixed, size))
        run_input(fixed, size);
    free(fixed);
    return 0;
}

static void run_input(const uint8_t *data, size_t size)
{
    int64_t base = size >= 8 ? (int64_t)eng_be64(data) : 0;
    if (base < 0)
        base = 0;

    /* 1. recovery of the bare segment */
    write_log(base, data, size);
    uint64_t valid;
    int64_t next;
    recover_segment(data, size, base, &valid, &next);

    /* 2. clean load over what recovery wrote: its indexes are trusted */
    eng_load_stats ls;
    eng_partition *p = open_partition(true, &ls);
    CHECK(ls.segments == 1 && ls.segments_recovered == 0);
    CHECK(eng_partition_log_end_offset(p) == next);
    eng_partition_close(p);
    eng_partition_unref(p);
    empty_dir();

    /* 3. unclean load of the original bytes */
    write_log(base, data, size);
    p = open_partition(false, &ls);
    CHECK(ls.segments == 1 && ls.segments_recovered == 1);
    CHECK(ls.bytes_truncated == size - valid);
    CHECK(eng_partition_log_end_offset(p) == next);
    CHECK(eng_partition_high_watermark(p) == next);
    eng_partition_info in;
    eng_partition_info_get(p, &in);
    CHECK(in.size_bytes == valid && in.segment_count == 1);
    read_all(p);
    lookups(p, valid);
    append_one(p);
    eng_partition_close(p);
    eng_partition_unref(p);
    empty_dir();
}
