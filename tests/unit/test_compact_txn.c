/*
 * test_compact_txn.c - compaction of logs holding transactions (as Kafka
 * writes them; kafka-format.md §5, §16.2 steps 1 and 3):
 *
 *   - the control record type of Kafka's control_commit_marker vector, and
 *     no type for a key shorter than 4 bytes or with a negative version (as
 *     Kafka's ControlRecordType.parse refuses them);
 *   - a marker is never data of an aborted transaction itself;
 *   - eng_clean_filter_batch drops an aborted batch whatever the map says,
 *     or keeps its 61-byte header when it is the last of its group;
 *   - a log with commit and abort markers from several producers: the data
 *     of aborted transactions neither supersedes committed values (they
 *     stay) nor survives; a producer's COMMIT before its later ABORT only
 *     commits what came before it; an ABORT in the active segment still
 *     counts; data with no marker yet (an open transaction) is treated as
 *     committed; markers stay; a second clean and a reload with full
 *     recovery change nothing;
 *   - the last batch of an idempotent producer stays, as a header, when
 *     newer values supersede its records, so a rebuild of producer state
 *     from the log (no snapshot left) still finds its last sequence, also
 *     when the batch was appended and rolled as the round began.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_compact_txn.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "support.h"

#include <dirent.h>
#include <unistd.h>

typedef cu_fixture fixture;

/* A transactional data batch of one record for producer pid. */
static uint8_t *txn_data(int64_t pid, const char *k, const char *v, size_t *len)
{
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.attributes = ENG_ATTR_TRANSACTIONAL;
    bp.producer_id = pid;
    bp.producer_epoch = 0;
    bp.base_sequence = 0;
    cu_kv kv = {k, v, 0};
    return cu_encode(&kv, 1, CU_T0, &bp, len);
}

/* A transaction marker (type 0 ABORT, 1 COMMIT) for producer pid. */
static uint8_t *marker(int64_t pid, int type, size_t *len)
{
    uint8_t key[4] = {0, 0, 0, (uint8_t)type};
    uint8_t value[6] = {0, 0, 0, 0, 0, 7}; /* version 0, coordinatorEpoch 7 */
    eng_record_spec spec = {.timestamp = CU_T0, .key = key, .key_len = 4,
                            .value = value, .value_len = 6};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.attributes = ENG_ATTR_TRANSACTIONAL | ENG_ATTR_CONTROL;
    bp.producer_id = pid;
    bp.producer_epoch = 0;
    size_t cap = eng_batch_encoded_size(&spec, 1);
    uint8_t *b = malloc(cap);
    assert_non_null(b);
    *len = eng_batch_encode(b, cap, &bp, &spec, 1);
    assert_int_equal(*len, cap);
    return b;
}

static int64_t append_raw(eng_partition *p, uint8_t *b, size_t len)
{
    eng_append_opts o = {.expected_offset = -1};
    eng_append_result res;
    eng_errdetail err = {0};
    int rc = eng_partition_append(p, b, len, &o, &res, &err);
    free(b);
    if (rc)
        fail_msg("append: %s (%s)", eng_strerror(rc), err.message);
    return res.base_offset;
}

#define DATA(pid, k, v) (b = txn_data(pid, k, v, &len), append_raw(p, b, len))
#define MARK(pid, type) (b = marker(pid, type, &len), append_raw(p, b, len))
#define PLAIN(k, v) cu_append(p, &(cu_kv){k, v, 0}, 1, CU_T0)

/* "off:key=value" of every data record, markers as "off:ABORT"/"off:COMMIT". */
static void expect_log(eng_partition *p, const char *want)
{
    cu_recs rs;
    cu_read_ok(p, &rs);
    char got[1024];
    size_t n = 0;
    got[0] = 0;
    for (size_t i = 0; i < rs.n; i++) {
        const cu_rec *r = &rs.v[i];
        if (r->key && !r->key[0]) /* a control key starts with version 0 */
            n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld:%s", i ? " " : "",
                                  (long long)r->off, r->key[3] ? "COMMIT" : "ABORT");
        else
            n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld:%s=%s", i ? " " : "",
                                  (long long)r->off, r->key, r->val ? r->val : "null");
    }
    cu_recs_free(&rs);
    assert_string_equal(got, want);
}

static void test_control_type(void **state)
{
    (void)state;
    uint8_t *v;
    size_t len;
    assert_int_equal(ts_vector("control_commit_marker", &v, &len), 0);
    eng_batch_header h;
    assert_int_equal(eng_batch_validate(v, len, &h), 0);
    assert_int_equal(eng__control_type(&h, v + ENG_BATCH_OVERHEAD, len - ENG_BATCH_OVERHEAD), 1);
    free(v);
    uint8_t *b = marker(5, 0, &len);
    assert_int_equal(eng_batch_validate(b, len, &h), 0);
    assert_int_equal(eng__control_type(&h, b + ENG_BATCH_OVERHEAD, len - ENG_BATCH_OVERHEAD), 0);
    free(b);
}

/* A control batch for producer pid whose one record has the given key. */
static uint8_t *control_with_key(int64_t pid, const uint8_t *key, size_t key_len, size_t *len)
{
    eng_record_spec spec = {.timestamp = CU_T0, .key = key, .key_len = key_len,
                            .value = (const uint8_t *)"\0\0\0\0\0\7", .value_len = 6};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.attributes = ENG_ATTR_TRANSACTIONAL | ENG_ATTR_CONTROL;
    bp.producer_id = pid;
    bp.producer_epoch = 0;
    size_t cap = eng_batch_encoded_size(&spec, 1);
    uint8_t *b = malloc(cap);
    assert_non_null(b);
    *len = eng_batch_encode(b, cap, &bp, &spec, 1);
    return b;
}

static void test_control_type_refuses_malformed_keys(void **state)
{
    (void)state;
    static const struct {
        uint8_t key[4];
        size_t len;
        int want;
    } cases[] = {
        {{0, 0, 0, 1}, 4, 1},          /* COMMIT */
        {{0, 1, 0, 0}, 4, 0},          /* a newer version is read the same way */
        {{0xff, 0xff, 0, 1}, 4, -1},   /* version -1 */
        {{0x80, 0, 0, 0}, 4, -1},      /* version -32768 */
        {{0, 0, 0}, 3, -1},            /* no room for the type */
        {{0, 0}, 2, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        uint8_t *b = control_with_key(9, cases[i].key, cases[i].len, &len);
        eng_batch_header h;
        assert_int_equal(eng_batch_validate(b, len, &h), 0);
        int got = eng__control_type(&h, b + ENG_BATCH_OVERHEAD, len - ENG_BATCH_OVERHEAD);
        if (got != cases[i].want)
            fail_msg("case %zu: control type %d, want %d", i, got, cases[i].want);
        free(b);
    }
}

/* A producer's ABORT at 5 aborts its data before it; its markers before
 * that (a COMMIT at 3) are not data, and are never "aborted". */
static void test_markers_are_never_aborted(void **state)
{
    (void)state;
    eng__txn_marker v[] = {{.producer_id = 1, .offset = 3, .abort = false},
                           {.producer_id = 1, .offset = 5, .abort = true}};
    eng__txn_markers t = {.v = v, .n = 2, .cap = 2, .any_abort = true};
    size_t len;
    uint8_t *b = txn_data(1, "a", "x", &len);
    eng_batch_header h;
    assert_int_equal(eng_batch_validate(b, len, &h), 0);
    free(b);
    h.base_offset = 4;
    assert_true(eng__txn_aborted(&t, &h));
    h.base_offset = 2; /* committed at 3 */
    assert_false(eng__txn_aborted(&t, &h));
    h.producer_id = 2; /* another producer's */
    h.base_offset = 4;
    assert_false(eng__txn_aborted(&t, &h));
    b = marker(1, 1, &len);
    assert_int_equal(eng_batch_validate(b, len, &h), 0);
    free(b);
    h.base_offset = 3;
    assert_false(eng__txn_aborted(&t, &h));
}

static void test_filter_aborted(void **state)
{
    fixture *f = *state;
    size_t len;
    uint8_t *b = txn_data(1, "a", "x", &len);
    eng_batch_header h;
    assert_int_equal(eng_batch_validate(b, len, &h), 0);
    eng_offset_map_put(f->map, (const uint8_t *)"a", 1, 0);
    eng_buf scratch = {0}, out = {0};
    eng_clean_action act;
    eng_clean_counts c = {0};
    assert_int_equal(eng_clean_filter_batch(b, &h, f->map, CU_T0, 1000, false, true, &scratch,
                                            &out, &act, &c),
                     0);
    assert_int_equal(act, ENG_CLEAN_DROP);
    assert_int_equal(c.removed, 1);
    assert_int_equal(eng_clean_filter_batch(b, &h, f->map, CU_T0, 1000, true, true, &scratch,
                                            &out, &act, &c),
                     0);
    assert_int_equal(act, ENG_CLEAN_REWRITE);
    eng_batch_header oh;
    assert_int_equal(eng_batch_validate(out.data, out.len, &oh), 0);
    assert_int_equal(out.len, ENG_BATCH_OVERHEAD);
    assert_int_equal(oh.record_count, 0);
    assert_int_equal(oh.producer_id, 1);
    assert_int_equal(oh.attributes, ENG_ATTR_TRANSACTIONAL);
    /* The same batch, not aborted, is kept as it is. */
    assert_int_equal(eng_clean_filter_batch(b, &h, f->map, CU_T0, 1000, false, false, &scratch,
                                            &out, &act, &c),
                     0);
    assert_int_equal(act, ENG_CLEAN_COPY);
    free(b);
    eng_buf_free(&scratch);
    eng_buf_free(&out);
}

static void test_aborted_transactions(void **state)
{
    fixture *f = *state;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    uint8_t *b;
    size_t len;
    assert_int_equal(DATA(1, "a", "c1"), 0);
    assert_int_equal(DATA(2, "a", "x2"), 1);  /* aborted at 4 */
    assert_int_equal(DATA(1, "b", "c1b"), 2);
    assert_int_equal(MARK(1, 1), 3);          /* commits 0 and 2 */
    assert_int_equal(MARK(2, 0), 4);
    assert_int_equal(DATA(1, "b", "x1"), 5);  /* aborted at 7: the COMMIT at 3 was before it */
    assert_int_equal(PLAIN("c", "p"), 6);
    assert_int_equal(MARK(1, 0), 7);
    assert_int_equal(DATA(3, "d", "open"), 8); /* no marker: open */
    assert_int_equal(cu_roll(p), 9);
    assert_int_equal(PLAIN("e", "e1"), 9);
    assert_int_equal(DATA(4, "e", "x4"), 10); /* aborted by a marker in the active segment */
    assert_int_equal(cu_roll(p), 11);
    assert_int_equal(MARK(4, 0), 11);

    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + 60000, false, &st), 0);
    assert_int_equal(st.end_offset, 11);
    assert_int_equal(st.records_removed, 3);
    const char *want = "0:a=c1 2:b=c1b 3:COMMIT 4:ABORT 6:c=p 7:ABORT 8:d=open 9:e=e1 11:ABORT";
    expect_log(p, want);
    /* The aborted batch at 10 ended its group: a header keeps the offset. */
    eng_batch_dump *d;
    size_t n, total;
    assert_int_equal(eng_partition_dump_batches(p, 0, 0, 100, &d, &n, &total, NULL), 0);
    assert_true(n >= 1);
    assert_int_equal(d[n - 1].header.base_offset, 10);
    assert_int_equal(d[n - 1].header.record_count, 0);
    free(d);

    /* Later data for the same keys supersedes as usual; the aborted values
     * stay gone and the committed ones are not brought back. */
    assert_int_equal(PLAIN("a", "a2"), 12);
    assert_int_equal(cu_roll(p), 13);
    assert_int_equal(cu_clean(p, f->map, st.end_offset, CU_T0 + 60000, false, &st), 0);
    want = "2:b=c1b 3:COMMIT 4:ABORT 6:c=p 7:ABORT 8:d=open 9:e=e1 11:ABORT 12:a=a2";
    expect_log(p, want);
    eng_partition_close(p);
    eng_partition_unref(p);
    p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    expect_log(p, want);
    assert_int_equal(eng_partition_log_end_offset(p), 13);
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* Appends one record of producer 5 at sequence seq; returns its offset. */
static int64_t idem(eng_partition *p, const char *k, int32_t seq, int64_t ts)
{
    cu_kv kv = {k, "idempotent", 0};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.producer_id = 5;
    bp.producer_epoch = 0;
    bp.base_sequence = seq;
    size_t len;
    uint8_t *b = cu_encode(&kv, 1, ts, &bp, &len);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
    eng_append_result res;
    eng_errdetail err = {0};
    int rc = eng_partition_append(p, b, len, &o, &res, &err);
    free(b);
    if (rc)
        fail_msg("append: %s (%s)", eng_strerror(rc), err.message);
    return res.base_offset;
}

static void remove_snapshots(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 9 && !strcmp(e->d_name + n - 9, ".snapshot")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            assert_int_equal(unlink(path), 0);
        }
    }
    closedir(d);
}

static void test_producer_last_batch_kept(void **state)
{
    fixture *f = *state;
    int64_t now = eng_now_ms(); /* producers older than a day expire at load */
    eng_partition *p = cu_open(f->dir, &f->cfg, NULL, true, 0, NULL);
    assert_int_equal(idem(p, "a", 0, now), 0);
    assert_int_equal(idem(p, "b", 1, now), 1);
    cu_kv newer[] = {{"a", "plain", 0}, {"b", "plain", 0}};
    assert_int_equal(cu_append(p, newer, 2, now), 2);
    assert_int_equal(cu_roll(p), 4);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, now, false, &st), 0);
    assert_int_equal(st.records_removed, 2);
    /* Offset 0 went; offset 1, the producer's last batch, is a header. */
    eng_batch_dump *d;
    size_t n, total;
    int64_t damaged_at;
    assert_int_equal(eng_partition_dump_batches(p, 0, 0, 4, &d, &n, &total, &damaged_at), 0);
    assert_int_equal(n, 2);
    assert_int_equal(d[0].header.base_offset, 1);
    assert_int_equal(d[0].header.record_count, 0);
    assert_int_equal(d[0].header.producer_id, 5);
    assert_int_equal(d[0].header.base_sequence, 1);
    assert_true(d[0].valid);
    free(d);
    eng_partition_unref(p); /* a crash: no snapshot at the log end */

    remove_snapshots(f->dir);
    p = cu_open(f->dir, &f->cfg, NULL, false, 0, NULL);
    eng_producer_entry *e;
    assert_int_equal(eng_partition_producers(p, &e, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(e[0].producer_id, 5);
    assert_int_equal(e[0].batches[e[0].nbatches - 1].last_seq, 1);
    assert_int_equal(e[0].batches[e[0].nbatches - 1].last_offset, 1);
    free(e);
    assert_int_equal(idem(p, "c", 2, now), 4); /* in sequence after the header */
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* Appended and rolled by the hook of test_producer_batch_at_round_start. */
static void append_during_round(void *ctx)
{
    eng_partition *p = ctx;
    int64_t now = eng_now_ms();
    assert_int_equal(idem(p, "b", 1, now), 1);
    cu_kv newer = {"b", "plain", 0};
    assert_int_equal(cu_append(p, &newer, 1, now), 2);
    assert_int_equal(cu_roll(p), 3);
    eng_fault_hook(NULL, NULL, NULL);
}

/* A producer's batch appended and rolled out of the active segment as a
 * round begins is cleanable in that round; the round's list of the
 * producers' last batches must already hold it, or its records go whole
 * (superseded by a newer value) and the log keeps only the producer's
 * batch before it: a rebuild of its state from the log then refuses its
 * next sequence. */
static void test_producer_batch_at_round_start(void **state)
{
    fixture *f = *state;
    int64_t now = eng_now_ms();
    eng_partition *p = cu_open(f->dir, &f->cfg, NULL, true, 0, NULL);
    assert_int_equal(idem(p, "a", 0, now), 0);
    assert_int_equal(cu_roll(p), 1);
    eng_fault_hook("compact.round_start", append_during_round, p);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, now, false, &st), 0);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(st.records_removed, 1);
    eng_partition_unref(p); /* a crash */

    remove_snapshots(f->dir); /* torn by a power loss */
    p = cu_open(f->dir, &f->cfg, NULL, false, 0, NULL);
    assert_int_equal(idem(p, "c", 2, now), 3);
    eng_partition_close(p);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_type),
        cmocka_unit_test(test_control_type_refuses_malformed_keys),
        cmocka_unit_test(test_markers_are_never_aborted),
        cmocka_unit_test_setup_teardown(test_filter_aborted, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_aborted_transactions, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_producer_last_batch_kept, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_producer_batch_at_round_start, cu_setup, cu_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
