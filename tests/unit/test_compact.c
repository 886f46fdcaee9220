/*
 * test_compact.c - the log cleaner's building blocks and the textbook case
 * (kafka-format.md §6, §16; DESIGN §3).  test_compact_swap.c covers the
 * swap, refusals and the cleanable range; test_compact_model.c the
 * model-based, multi-round and concurrent-reader cases.
 *
 *   - eng_offset_map: put/get/overwrite, latest offset, probing on full
 *     tables, huge-page tables, capacity = slots x
 *     load factor (put refuses a new key when full, still updates an old
 *     one), clear, byte keys, memory fixed whatever the key sizes (10 KB
 *     keys, measured with ASan's allocator statistics), maps smaller than
 *     two slots, a key matched on all 16 bytes of its hash;
 *   - eng_clean_filter_batch against Kafka's vectors: the first clean of
 *     v3_tombstone_header_java_conventions is byte-for-byte
 *     v3_tombstone_after_first_clean; an emptied batch is exactly
 *     cleaner_empty_batch_header when kept, dropped otherwise (and such a
 *     header is dropped by a later clean unless last of its group); keyless
 *     records go; a tombstone goes at its horizon (or at once when
 *     superseded); records past the map's latest offset stay;
 *     lastOffsetDelta, LogAppendTime maxTimestamp and an existing horizon
 *     survive a rebuild; unchanged and control batches are copied; a batch
 *     whose CRC does not match is refused (ENG_ECRC), not rewritten;
 *     compressed batches (every codec) are rebuilt in their codec;
 *   - the textbook case: user1..user3 three times and a tombstone for user2
 *     in one batch leave offsets 6, 8, 9 with their values and the delete
 *     horizon written into the batch; the tombstone survives a clean just
 *     before its horizon and goes on the clean at it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_offset_map.h"
#include "support.h"


#if defined(__SANITIZE_ADDRESS__)
/* ASan's allocator statistics (sanitizer/allocator_interface.h, not on
 * GCC's include path). */
size_t __sanitizer_get_current_allocated_bytes(void);
#define HEAP_BYTES() __sanitizer_get_current_allocated_bytes()
#else
#define HEAP_BYTES() ((size_t)0)
#endif

typedef cu_fixture fixture;

static const uint8_t *K(const char *s)
{
    return (const uint8_t *)s;
}

/* ---- (a) the offset map ------------------------------------------------ */

static void test_offset_map(void **state)
{
    (void)state;
    eng_offset_map *m;
    assert_int_equal(eng_offset_map_new(100 * 24 + 10, 0.9, &m), 0);
    assert_int_equal(eng_offset_map_slots(m), 100);
    assert_int_equal(eng_offset_map_max_entries(m), 90);
    assert_int_equal(eng_offset_map_latest(m), -1);
    assert_int_equal(eng_offset_map_get(m, K("nope"), 4), -1);
    char key[32];
    for (int i = 0; i < 90; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        assert_true(eng_offset_map_put(m, K(key), strlen(key), 1000 + i));
    }
    assert_int_equal(eng_offset_map_size(m), 90);
    assert_true(eng_offset_map_full(m));
    assert_true(eng_offset_map_utilization(m) > 0.899 && eng_offset_map_utilization(m) < 0.901);
    /* Full: a new key is refused, an existing one still moves. */
    assert_false(eng_offset_map_put(m, K("key-90"), 6, 2000));
    assert_int_equal(eng_offset_map_get(m, K("key-90"), 6), -1);
    assert_true(eng_offset_map_put(m, K("key-5"), 5, 5000));
    assert_int_equal(eng_offset_map_size(m), 90);
    for (int i = 0; i < 90; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        assert_int_equal(eng_offset_map_get(m, K(key), strlen(key)), i == 5 ? 5000 : 1000 + i);
    }
    assert_int_equal(eng_offset_map_latest(m), 5000);
    eng_offset_map_update_latest(m, 4000); /* never lowers */
    assert_int_equal(eng_offset_map_latest(m), 5000);
    eng_offset_map_update_latest(m, 6000);
    assert_int_equal(eng_offset_map_latest(m), 6000);
    /* Keys are bytes: a prefix, an empty key and embedded zeros are distinct. */
    eng_offset_map_clear(m);
    assert_int_equal(eng_offset_map_size(m), 0);
    assert_int_equal(eng_offset_map_latest(m), -1);
    assert_int_equal(eng_offset_map_get(m, K("key-1"), 5), -1);
    assert_true(eng_offset_map_put(m, K("ab"), 2, 1));
    assert_true(eng_offset_map_put(m, K("a"), 1, 2));
    assert_true(eng_offset_map_put(m, K(""), 0, 3));
    assert_true(eng_offset_map_put(m, K("a\0b"), 3, 4));
    assert_int_equal(eng_offset_map_get(m, K("ab"), 2), 1);
    assert_int_equal(eng_offset_map_get(m, K("a"), 1), 2);
    assert_int_equal(eng_offset_map_get(m, K(""), 0), 3);
    assert_int_equal(eng_offset_map_get(m, K("a\0b"), 3), 4);
    assert_int_equal(eng_offset_map_get(m, K("a\0c"), 3), -1);
    assert_int_equal(eng_offset_map_latest(m), 4);
    eng_offset_map_free(m);

    assert_int_equal(eng_offset_map_new(24 * 10, 0.5, &m), 0);
    assert_int_equal(eng_offset_map_max_entries(m), 5);
    eng_offset_map_free(m);
}

/* A slot holds a key when all 16 bytes of its MD5 match: hashes equal in
 * either half and different in the other (the first probe lands on the
 * same slot) are different keys.  Real keys with such hashes are not to be
 * found, so the hashes are made up. */
static void test_offset_map_whole_hash(void **state)
{
    (void)state;
    eng_offset_map *m;
    assert_int_equal(eng_offset_map_new(64 * 24, 0.9, &m), 0);
    eng_key_hash a, hi, lo;
    for (int i = 0; i < 16; i++)
        a.b[i] = (uint8_t)(0x11 * (i + 1));
    hi = a;
    hi.b[15] ^= 0x80; /* same first 8 bytes */
    lo = a;
    lo.b[7] ^= 0x80; /* same last 8 bytes, same first probe window */
    assert_true(eng_offset_map_put_hashed(m, &a, 10));
    assert_int_equal(eng_offset_map_get_hashed(m, &hi), -1);
    assert_int_equal(eng_offset_map_get_hashed(m, &lo), -1);
    assert_true(eng_offset_map_put_hashed(m, &hi, 20));
    assert_true(eng_offset_map_put_hashed(m, &lo, 30));
    assert_int_equal(eng_offset_map_size(m), 3);
    assert_int_equal(eng_offset_map_get_hashed(m, &a), 10);
    assert_int_equal(eng_offset_map_get_hashed(m, &hi), 20);
    assert_int_equal(eng_offset_map_get_hashed(m, &lo), 30);
    eng_offset_map_free(m);
}

/* A map smaller than two slots must still answer: with one slot and one key
 * every probe of another key lands on that slot forever. */
static void test_offset_map_tiny(void **state)
{
    (void)state;
    size_t sizes[] = {0, 1, 24, 47};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        eng_offset_map *m;
        assert_int_equal(eng_offset_map_new(sizes[i], 0.9, &m), 0);
        assert_true(eng_offset_map_max_entries(m) >= 1);
        assert_true(eng_offset_map_max_entries(m) < eng_offset_map_slots(m));
        assert_true(eng_offset_map_put(m, K("a"), 1, 7));
        assert_int_equal(eng_offset_map_get(m, K("b"), 1), -1);
        assert_false(eng_offset_map_put(m, K("b"), 1, 8));
        assert_int_equal(eng_offset_map_get(m, K("a"), 1), 7);
        eng_offset_map_free(m);
    }
}

/* Full maps of several sizes: every key is found, absent keys end their probe
 * (past the 13 hash windows into the linear steps on small tables), and the
 * hashed entry points agree with the plain ones. */
static void test_offset_map_probing(void **state)
{
    (void)state;
    size_t slots[] = {3, 10, 257, 4099};
    for (size_t s = 0; s < sizeof slots / sizeof *slots; s++) {
        eng_offset_map *m;
        assert_int_equal(eng_offset_map_new(slots[s] * 24, 0.9, &m), 0);
        size_t max = eng_offset_map_max_entries(m);
        char key[32];
        for (size_t i = 0; i < max; i++) {
            int n = snprintf(key, sizeof key, "k%zu", i);
            if (i % 2) {
                assert_true(eng_offset_map_put(m, K(key), (size_t)n, (int64_t)i));
            } else {
                eng_key_hash h;
                eng_offset_map_hash(m, K(key), (size_t)n, &h);
                eng_offset_map_prefetch(m, &h);
                assert_true(eng_offset_map_put_hashed(m, &h, (int64_t)i));
            }
        }
        assert_true(eng_offset_map_full(m));
        for (size_t i = 0; i < max; i++) {
            int n = snprintf(key, sizeof key, "k%zu", i);
            eng_key_hash h;
            eng_offset_map_hash(m, K(key), (size_t)n, &h);
            assert_int_equal(eng_offset_map_get_hashed(m, &h), (int64_t)i);
            assert_int_equal(eng_offset_map_get(m, K(key), (size_t)n), (int64_t)i);
        }
        for (size_t i = 0; i < 100; i++) {
            int n = snprintf(key, sizeof key, "absent%zu", i);
            assert_int_equal(eng_offset_map_get(m, K(key), (size_t)n), -1);
        }
        eng_offset_map_free(m);
    }
}

/* A table of several huge pages lives in its own mapping: it starts empty,
 * and clear empties it between rounds. */
static void test_offset_map_large(void **state)
{
    (void)state;
    eng_offset_map *m;
    assert_int_equal(eng_offset_map_new((size_t)5 << 20, 0.9, &m), 0);
    assert_int_equal(eng_offset_map_slots(m), ((size_t)5 << 20) / 24);
    char key[32];
    for (int round = 0; round < 2; round++) {
        eng_offset_map_clear(m);
        for (int i = 0; i < 1000; i++) {
            int n = snprintf(key, sizeof key, "k%d", i);
            assert_int_equal(eng_offset_map_get(m, K(key), (size_t)n), -1);
            assert_true(eng_offset_map_put(m, K(key), (size_t)n, round * 1000 + i));
        }
        assert_int_equal(eng_offset_map_size(m), 1000);
        for (int i = 0; i < 1000; i++) {
            int n = snprintf(key, sizeof key, "k%d", i);
            assert_int_equal(eng_offset_map_get(m, K(key), (size_t)n), round * 1000 + i);
        }
    }
    eng_offset_map_free(m);
}

static void test_offset_map_fixed_memory(void **state)
{
    (void)state;
    enum { NKEYS = 200, KLEN = 10 * 1024 };
    uint8_t *keys = malloc((size_t)NKEYS * KLEN);
    assert_non_null(keys);
    for (size_t i = 0; i < (size_t)NKEYS * KLEN; i++)
        keys[i] = (uint8_t)(i * 2654435761u >> 13);
    eng_offset_map *m;
    assert_int_equal(eng_offset_map_new(64 * 24, 0.9, &m), 0);
    assert_int_equal(eng_offset_map_slots(m), 64);
    size_t max = eng_offset_map_max_entries(m);
    assert_int_equal(max, 57);
    /* Warm up whatever the hash context allocates once. */
    assert_true(eng_offset_map_put(m, keys, KLEN, 0));
    size_t before = HEAP_BYTES();
    for (int round = 0; round < 3; round++) {
        eng_offset_map_clear(m);
        for (int i = 0; i < NKEYS; i++)
            assert_true(eng_offset_map_put(m, keys + (size_t)i * KLEN, KLEN, i) == ((size_t)i < max));
        for (int i = 0; i < NKEYS; i++)
            assert_int_equal(eng_offset_map_get(m, keys + (size_t)i * KLEN, KLEN),
                             (size_t)i < max ? i : -1);
    }
    size_t after = HEAP_BYTES();
    /* 200 keys of 10 KB went through: the map kept 64 x 24 bytes. */
    assert_true(after <= before + 1024);
    assert_int_equal(eng_offset_map_slots(m), 64);
    assert_int_equal(eng_offset_map_size(m), max);
    eng_offset_map_free(m);
    free(keys);
}

/* ---- (b) one batch against Kafka's vectors ------------------------------- */

typedef struct filtered {
    eng_clean_action act;
    eng_clean_counts c;
    eng_buf out;
} filtered;

static void filter(const uint8_t *batch, size_t len, eng_offset_map *m, int64_t now, int64_t drm,
                   bool keep_empty, filtered *r)
{
    eng_batch_header h;
    assert_int_equal(eng_batch_validate(batch, len, &h), 0);
    eng_buf scratch = {0};
    memset(&r->c, 0, sizeof r->c);
    r->out.len = 0;
    assert_int_equal(eng_clean_filter_batch(batch, &h, m, now, drm, keep_empty, false, &scratch,
                                            &r->out, &r->act, &r->c),
                     0);
    eng_buf_free(&scratch);
    if (r->act == ENG_CLEAN_REWRITE) {
        eng_batch_header oh;
        assert_int_equal(eng_batch_validate(r->out.data, r->out.len, &oh), 0);
    }
}

static void vector(const char *name, uint8_t **b, size_t *len)
{
    assert_int_equal(ts_vector(name, b, len), 0);
}

static void test_vector_first_clean(void **state)
{
    fixture *f = *state;
    uint8_t *v3, *want;
    size_t n3, nwant;
    vector("v3_tombstone_header_java_conventions", &v3, &n3);
    vector("v3_tombstone_after_first_clean", &want, &nwant);
    assert_int_equal(nwant, 76);
    assert_true(eng_offset_map_put(f->map, K("k"), 1, 0));
    filtered r = {0};
    filter(v3, n3, f->map, 1000000, 86400000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_REWRITE);
    assert_int_equal(r.c.records, 1);
    assert_int_equal(r.c.removed, 0);
    assert_int_equal(r.out.len, nwant);
    assert_memory_equal(r.out.data, want, nwant);

    /* A later clean before the horizon (87,400,000) copies it. */
    filter(want, nwant, f->map, 87399999, 86400000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_COPY);
    assert_int_equal(r.c.removed, 0);
    /* At the horizon the tombstone goes: the batch is dropped... */
    filter(want, nwant, f->map, 87400000, 86400000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_DROP);
    assert_int_equal(r.c.removed, 1);
    assert_int_equal(r.c.tombstones_removed, 1);
    /* ...or, kept as the last of its group, becomes a header without the
     * horizon flag. */
    filter(want, nwant, f->map, 87400000, 86400000, true, &r);
    assert_int_equal(r.act, ENG_CLEAN_REWRITE);
    eng_batch_header h;
    assert_int_equal(r.out.len, ENG_BATCH_OVERHEAD);
    assert_int_equal(eng_batch_header_decode(r.out.data, r.out.len, &h), 0);
    assert_int_equal(h.record_count, 0);
    assert_int_equal(h.last_offset_delta, 0);
    assert_int_equal(h.base_timestamp, -1);
    assert_int_equal(h.max_timestamp, 1000);
    assert_int_equal(h.attributes, 0);

    /* A tombstone that is not the latest for its key goes at once. */
    assert_true(eng_offset_map_put(f->map, K("k"), 1, 5));
    filter(v3, n3, f->map, 1000000, 86400000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_DROP);
    assert_int_equal(r.c.removed, 1);

    /* A byte damaged on disk is refused, never rewritten under a fresh CRC
     * (the last byte is inside the record, not the header). */
    eng_batch_header h3;
    assert_int_equal(eng_batch_header_decode(v3, n3, &h3), 0);
    v3[n3 - 1] ^= 0x20;
    eng_buf scratch = {0};
    r.out.len = 0;
    assert_int_equal(eng_clean_filter_batch(v3, &h3, f->map, 1000000, 86400000, false, false, &scratch,
                                            &r.out, &r.act, &r.c),
                     ENG_ECRC);
    assert_int_equal(r.out.len, 0);
    eng_buf_free(&scratch);
    eng_buf_free(&r.out);
    free(v3);
    free(want);
}

static void test_vector_empty_header(void **state)
{
    fixture *f = *state;
    uint8_t *want;
    size_t nwant;
    vector("cleaner_empty_batch_header", &want, &nwant);
    /* Offsets 20..29 of producer 1000 (epoch 0, sequence 0), every record at
     * ts 1000; every key has a later offset in the map. */
    char keys[10][16];
    cu_kv recs[10];
    for (int i = 0; i < 10; i++) {
        snprintf(keys[i], sizeof keys[i], "e%d", i);
        recs[i] = (cu_kv){keys[i], "x", 0};
        assert_true(eng_offset_map_put(f->map, K(keys[i]), 2, 100 + i));
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.base_offset = 20;
    bp.producer_id = 1000;
    bp.producer_epoch = 0;
    bp.base_sequence = 0;
    size_t len;
    uint8_t *batch = cu_encode(recs, 10, 1000, &bp, &len);
    filtered r = {0};
    filter(batch, len, f->map, 5000, 86400000, true, &r);
    assert_int_equal(r.act, ENG_CLEAN_REWRITE);
    assert_int_equal(r.c.removed, 10);
    assert_int_equal(r.out.len, nwant);
    assert_memory_equal(r.out.data, want, nwant);
    eng_batch_header h;
    assert_int_equal(eng_batch_header_decode(r.out.data, r.out.len, &h), 0);
    assert_int_equal(h.base_offset, 20);
    assert_int_equal(h.last_offset_delta, 9);
    assert_int_equal(h.record_count, 0);
    assert_int_equal(h.base_timestamp, -1);
    assert_int_equal(h.max_timestamp, 1000);
    assert_int_equal(h.attributes & ENG_ATTR_DELETE_HORIZON, 0);
    filter(batch, len, f->map, 5000, 86400000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_DROP);
    /* A header-only batch from an earlier clean stays only while it is the
     * last of its group; elsewhere it goes, as Kafka drops empty batches it
     * need not retain. */
    filter(want, nwant, f->map, 5000, 86400000, true, &r);
    assert_int_equal(r.act, ENG_CLEAN_COPY);
    filter(want, nwant, f->map, 5000, 86400000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_DROP);
    assert_int_equal(r.c.records, 0);
    assert_int_equal(r.c.removed, 0);
    eng_buf_free(&r.out);
    free(batch);
    free(want);
}

/* Keys (or "-" for none) and offsets of a batch's records, "k@o,...". */
static void describe(const uint8_t *b, size_t len, char *out, size_t cap)
{
    eng_batch_header h;
    assert_int_equal(eng_batch_validate(b, len, &h), 0);
    eng_buf scratch = {0};
    const uint8_t *plain;
    size_t plen;
    assert_int_equal(eng_batch_plain_records(b, &h, &scratch, &plain, &plen), 0);
    eng_record_iter it;
    eng_record r;
    eng_record_iter_init(&it, &h, plain, plen);
    size_t n = 0;
    out[0] = 0;
    while (eng_record_iter_next(&it, &r) == 1)
        n += (size_t)snprintf(out + n, cap - n, "%s%.*s@%lld", n ? "," : "",
                              r.key ? (int)r.key_len : 1, r.key ? (const char *)r.key : "-",
                              (long long)r.offset);
    eng_buf_free(&scratch);
}

static void test_filter_rules(void **state)
{
    fixture *f = *state;
    eng_offset_map *m = f->map;
    filtered r = {0};
    char desc[256];
    size_t len;
    eng_batch_header h;

    /* Keyless records go. */
    cu_kv a[] = {{"a", "1", 0}, {NULL, "2", 0}, {"b", "3", 0}};
    uint8_t *b = cu_encode(a, 3, 1000, NULL, &len);
    eng_offset_map_clear(m);
    eng_offset_map_put(m, K("a"), 1, 0);
    eng_offset_map_put(m, K("b"), 1, 2);
    filter(b, len, m, 5000, 1000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_REWRITE);
    assert_int_equal(r.c.keyless_removed, 1);
    assert_int_equal(r.c.removed, 1);
    describe(r.out.data, r.out.len, desc, sizeof desc);
    assert_string_equal(desc, "a@0,b@2");
    /* ...unless they are past the map's latest offset. */
    eng_offset_map_clear(m);
    eng_offset_map_put(m, K("a"), 1, 0);
    filter(b, len, m, 5000, 1000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_COPY);
    assert_int_equal(r.out.len, 0);
    free(b);

    /* Superseded records go, records past the latest offset stay whatever
     * the map says. */
    cu_kv same[] = {{"a", "1", 0}, {"a", "2", 0}, {"a", "3", 0}, {"a", "4", 0}, {"a", "5", 0}};
    b = cu_encode(same, 5, 1000, NULL, &len);
    eng_offset_map_clear(m);
    eng_offset_map_put(m, K("a"), 1, 2);
    filter(b, len, m, 5000, 1000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_REWRITE);
    describe(r.out.data, r.out.len, desc, sizeof desc);
    assert_string_equal(desc, "a@2,a@3,a@4");
    free(b);

    /* Trailing records removed: lastOffsetDelta is kept. */
    cu_kv xyz[] = {{"x", "1", 1001}, {"y", "2", 1003}, {"z", "3", 1002}};
    b = cu_encode(xyz, 3, 1000, NULL, &len);
    eng_offset_map_clear(m);
    eng_offset_map_put(m, K("x"), 1, 0);
    eng_offset_map_put(m, K("y"), 1, 1);
    eng_offset_map_put(m, K("z"), 1, 7);
    filter(b, len, m, 5000, 1000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_REWRITE);
    assert_int_equal(eng_batch_header_decode(r.out.data, r.out.len, &h), 0);
    assert_int_equal(h.last_offset_delta, 2);
    assert_int_equal(h.record_count, 2);
    assert_int_equal(h.max_timestamp, 1003);
    assert_int_equal(h.base_timestamp, 1001);
    /* Nothing removed, no tombstone: copied as it is. */
    eng_offset_map_put(m, K("z"), 1, 2);
    filter(b, len, m, 5000, 1000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_COPY);
    assert_int_equal(r.c.removed, 0);
    free(b);

    /* A rebuild of a batch that already has a horizon keeps it. */
    cu_kv tu[] = {{"t", NULL, 0}, {"u", "1", 0}, {"u", "2", 0}};
    b = cu_encode(tu, 3, 1000, NULL, &len);
    eng_offset_map_clear(m);
    eng_offset_map_put(m, K("t"), 1, 0);
    eng_offset_map_put(m, K("u"), 1, 2);
    filter(b, len, m, 1000000, 1000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_REWRITE);
    describe(r.out.data, r.out.len, desc, sizeof desc);
    assert_string_equal(desc, "t@0,u@2");
    assert_int_equal(eng_batch_header_decode(r.out.data, r.out.len, &h), 0);
    assert_true(h.attributes & ENG_ATTR_DELETE_HORIZON);
    assert_int_equal(h.base_timestamp, 1001000);
    size_t len2 = r.out.len;
    uint8_t *b2 = malloc(len2);
    memcpy(b2, r.out.data, len2);
    eng_offset_map_put(m, K("u"), 1, 9);
    filter(b2, len2, m, 1000500, 1000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_REWRITE);
    describe(r.out.data, r.out.len, desc, sizeof desc);
    assert_string_equal(desc, "t@0");
    assert_int_equal(eng_batch_header_decode(r.out.data, r.out.len, &h), 0);
    assert_true(h.attributes & ENG_ATTR_DELETE_HORIZON);
    assert_int_equal(h.base_timestamp, 1001000);
    assert_int_equal(h.last_offset_delta, 2);
    /* The record keeps its own timestamp (1000) under the horizon base. */
    eng_record_iter it;
    eng_record rec;
    eng_record_iter_init(&it, &h, r.out.data + ENG_BATCH_OVERHEAD, r.out.len - ENG_BATCH_OVERHEAD);
    assert_int_equal(eng_record_iter_next(&it, &rec), 1);
    assert_int_equal(rec.timestamp, 1000);
    free(b2);
    free(b);

    /* LogAppendTime: the broker's maxTimestamp survives a rebuild. */
    cu_kv la[] = {{"a", "1", 0}, {"a", "2", 0}};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.attributes = ENG_ATTR_LOG_APPEND_TIME;
    bp.max_timestamp = 2000;
    b = cu_encode(la, 2, 1000, &bp, &len);
    eng_offset_map_clear(m);
    eng_offset_map_put(m, K("a"), 1, 1);
    filter(b, len, m, 5000, 1000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_REWRITE);
    assert_int_equal(eng_batch_header_decode(r.out.data, r.out.len, &h), 0);
    assert_int_equal(h.attributes, ENG_ATTR_LOG_APPEND_TIME);
    assert_int_equal(h.max_timestamp, 2000);
    assert_int_equal(h.record_count, 1);
    free(b);

    /* Control batches are copied. */
    uint8_t *ctl;
    vector("control_commit_marker", &ctl, &len);
    filter(ctl, len, m, 5000, 1000, false, &r);
    assert_int_equal(r.act, ENG_CLEAN_COPY);
    free(ctl);
    eng_buf_free(&r.out);
}

/* Compressed batches are rebuilt in their own codec, horizon and all. */
static void test_filter_compressed(void **state)
{
    fixture *f = *state;
    static const int codecs[] = {ENG_CODEC_GZIP, ENG_CODEC_SNAPPY, ENG_CODEC_LZ4, ENG_CODEC_ZSTD};
    cu_kv recs[] = {{"a", "1", 0}, {"b", NULL, 0}, {"a", "2", 0}, {"c", "3", 0}};
    size_t len;
    uint8_t *plain = cu_encode(recs, 4, 1000, NULL, &len);
    eng_batch_header ph, h;
    assert_int_equal(eng_batch_validate(plain, len, &ph), 0);
    eng_offset_map_put(f->map, K("a"), 1, 2);
    eng_offset_map_put(f->map, K("b"), 1, 1);
    eng_offset_map_put(f->map, K("c"), 1, 3);
    char desc[256];
    for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++) {
        if (!eng_codec_supported(codecs[i]))
            continue;
        eng_buf scratch = {0}, z = {0};
        assert_int_equal(eng_batch_recode(plain, &ph, codecs[i], ENG_CODEC_DEFAULT_LEVEL, &scratch, &z), 0);
        eng_buf_free(&scratch);
        filtered r = {0};
        filter(z.data, z.len, f->map, 1000000, 1000, false, &r);
        assert_int_equal(r.act, ENG_CLEAN_REWRITE);
        assert_int_equal(r.c.removed, 1);
        assert_int_equal(eng_batch_header_decode(r.out.data, r.out.len, &h), 0);
        assert_int_equal(h.attributes, codecs[i] | ENG_ATTR_DELETE_HORIZON);
        assert_int_equal(h.base_timestamp, 1001000);
        assert_int_equal(h.record_count, 3);
        assert_int_equal(h.last_offset_delta, 3);
        describe(r.out.data, r.out.len, desc, sizeof desc);
        assert_string_equal(desc, "b@1,a@2,c@3");
        /* At the horizon the tombstone goes; codec and horizon stay. */
        eng_buf again = {0};
        filtered r2 = {0};
        assert_int_equal(eng_buf_reserve(&again, r.out.len), 0);
        memcpy(again.data, r.out.data, r.out.len);
        filter(again.data, r.out.len, f->map, 1001000, 1000, false, &r2);
        assert_int_equal(r2.act, ENG_CLEAN_REWRITE);
        assert_int_equal(r2.c.tombstones_removed, 1);
        assert_int_equal(eng_batch_header_decode(r2.out.data, r2.out.len, &h), 0);
        assert_int_equal(h.attributes, codecs[i] | ENG_ATTR_DELETE_HORIZON);
        describe(r2.out.data, r2.out.len, desc, sizeof desc);
        assert_string_equal(desc, "a@2,c@3");
        eng_buf_free(&again);
        eng_buf_free(&r2.out);
        eng_buf_free(&r.out);
        eng_buf_free(&z);
    }
    free(plain);
}

/* ---- (c) the textbook case ------------------------------------------------ */

static void expect_recs(eng_partition *p, const char *want)
{
    cu_recs rs;
    cu_read_ok(p, &rs);
    char got[2048];
    size_t n = 0;
    got[0] = 0;
    for (size_t i = 0; i < rs.n; i++)
        n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld:%s=%s", i ? " " : "",
                              (long long)rs.v[i].off, rs.v[i].key ? rs.v[i].key : "-",
                              rs.v[i].val ? rs.v[i].val : "null");
    cu_recs_free(&rs);
    assert_string_equal(got, want);
}

static void test_textbook(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_DELETE_RETENTION_MS].i = 1000;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    cu_kv recs[] = {{"user1", "a1", 0}, {"user2", "a2", 0}, {"user3", "a3", 0}, {"user1", "b1", 0},
                    {"user2", "b2", 0}, {"user3", "b3", 0}, {"user1", "c1", 0}, {"user2", "c2", 0},
                    {"user3", "c3", 0}, {"user2", NULL, 0}};
    for (int i = 0; i < 10; i++)
        recs[i].ts = CU_T0 + i;
    assert_int_equal(cu_append(p, recs, 10, CU_T0), 0);
    assert_int_equal(cu_roll(p), 10);
    int64_t now = CU_T0 + 60000;
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, now, false, &st), 0);
    assert_int_equal(st.first_dirty, 0);
    assert_int_equal(st.first_uncleanable, 10);
    assert_int_equal(st.end_offset, 10);
    assert_int_equal(st.records_read, 10);
    assert_int_equal(st.records_removed, 7);
    assert_int_equal(st.tombstones_removed, 0);
    assert_int_equal(st.segments_before, 1);
    assert_int_equal(st.segments_after, 1);
    expect_recs(p, "6:user1=c1 8:user3=c3 9:user2=null");
    /* One batch, rebuilt with the delete horizon, keeping its offsets. */
    eng_batch_dump *d;
    size_t n, total;
    assert_int_equal(eng_partition_dump_batches(p, 0, 0, 10, &d, &n, &total, NULL), 0);
    assert_int_equal(total, 1);
    assert_true(d[0].valid);
    assert_int_equal(d[0].header.base_offset, 0);
    assert_int_equal(d[0].header.last_offset_delta, 9);
    assert_int_equal(d[0].header.record_count, 3);
    assert_int_equal(d[0].header.attributes, ENG_ATTR_DELETE_HORIZON);
    assert_int_equal(d[0].header.base_timestamp, now + 1000);
    assert_int_equal(d[0].header.max_timestamp, CU_T0 + 9);
    free(d);
    cu_recs rs;
    cu_read_ok(p, &rs);
    assert_int_equal(rs.v[0].ts, CU_T0 + 6);
    assert_int_equal(rs.v[2].ts, CU_T0 + 9);
    cu_recs_free(&rs);
    assert_int_equal(eng_partition_log_end_offset(p), 10);

    /* Before the horizon the tombstone stays. */
    cu_kv u4 = {"user4", "d4", 0};
    assert_int_equal(cu_append(p, &u4, 1, CU_T0 + 20), 10);
    cu_roll(p);
    assert_int_equal(cu_clean(p, f->map, st.end_offset, now + 999, false, &st), 0);
    assert_int_equal(st.first_dirty, 10);
    assert_int_equal(st.end_offset, 11);
    assert_int_equal(st.tombstones_removed, 0);
    expect_recs(p, "6:user1=c1 8:user3=c3 9:user2=null 10:user4=d4");
    /* After it, the next clean removes it. */
    cu_kv u5 = {"user5", "e5", 0};
    assert_int_equal(cu_append(p, &u5, 1, CU_T0 + 30), 11);
    cu_roll(p);
    assert_int_equal(cu_clean(p, f->map, st.end_offset, now + 1000, false, &st), 0);
    assert_int_equal(st.end_offset, 12);
    assert_int_equal(st.tombstones_removed, 1);
    assert_int_equal(st.records_removed, 1);
    expect_recs(p, "6:user1=c1 8:user3=c3 10:user4=d4 11:user5=e5");
    assert_int_equal(eng_partition_log_end_offset(p), 12);
    eng_partition_close(p);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offset_map),
        cmocka_unit_test(test_offset_map_whole_hash),
        cmocka_unit_test(test_offset_map_tiny),
        cmocka_unit_test(test_offset_map_probing),
        cmocka_unit_test(test_offset_map_large),
        cmocka_unit_test(test_offset_map_fixed_memory),
        cmocka_unit_test_setup_teardown(test_vector_first_clean, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_vector_empty_header, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_filter_rules, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_filter_compressed, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_textbook, cu_setup, cu_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
