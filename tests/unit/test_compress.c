/*
 * test_compress.c - Kafka's four record codecs (engine/eng_compress.c,
 * kafka-format.md §4) and broker-side recompression (eng_batch_recode).
 *
 * Covers: round trips through eng_records_compress and
 * eng_batch_plain_records for every codec and level edge (empty input, one
 * byte, 1 MiB incompressible and 1 MiB compressible); gzip written as a
 * gzip member (not zlib), levels applied and each default Kafka's, and
 * concatenated gzip members read whole; the xerial snappy
 * framing (magic, versions, 32 KiB blocks each with a big-endian length);
 * the lz4 frame Kafka's reader wants (FLG version 01, independent blocks, no
 * block/content checksum, no content size, 64 KiB blocks, a valid header
 * checksum), block independence proven by decoding each block alone;
 * decompression bombs (zstd, gzip, lz4 streams inflating past the 256 MiB
 * bound, a snappy block claiming 4 GiB) refused with ENG_ECORRUPT while a
 * 16 MiB stream still inflates; truncated and garbage streams refused;
 * several zstd frames read whole, bytes after the last one refused;
 * the raw (unframed) snappy kafkajs-snappy sends; eng_batch_recode keeping
 * offsets (gaps included), timestamps, keys, values, headers and producer
 * fields, with the first record's timestamp as base and a valid CRC, also
 * over the kafkajs batches in tests/data/kafkajs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_compress.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_varint.h"
#include "support.h"

#include <lz4.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define MIB (1u << 20)
#define BOUND (256u << 20) /* ENG_MAX_PLAIN_RECORDS */

static const int codecs[] = {ENG_CODEC_NONE, ENG_CODEC_GZIP, ENG_CODEC_SNAPPY, ENG_CODEC_LZ4,
                             ENG_CODEC_ZSTD};
static const char *const codec_names[] = {"none", "gzip", "snappy", "lz4", "zstd"};

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
}

static void fill_text(uint8_t *p, size_t n)
{
    static const char words[] = "kafka log segment offset index batch record ";
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)words[(i * 7 + i / 97) % (sizeof words - 1)];
}

/* A batch shell around a compressed records section: the header's length
 * and codec are what eng_batch_plain_records looks at. */
static uint8_t *wrap(int codec, const uint8_t *z, size_t zlen, eng_batch_header *h)
{
    memset(h, 0, sizeof *h);
    h->length = (int32_t)(ENG_BATCH_OVERHEAD - ENG_LOG_OVERHEAD + zlen);
    h->magic = 2;
    h->attributes = (int16_t)codec;
    h->record_count = 1;
    uint8_t *b = malloc(ENG_BATCH_OVERHEAD + zlen + 1);
    assert_non_null(b);
    eng_batch_header_encode(b, h);
    if (zlen)
        memcpy(b + ENG_BATCH_OVERHEAD, z, zlen);
    return b;
}

/* Decompresses z as codec; returns the engine code, output in *out. */
static int inflate_as(int codec, const uint8_t *z, size_t zlen, eng_buf *scratch,
                      const uint8_t **out, size_t *outlen)
{
    eng_batch_header h;
    uint8_t *b = wrap(codec, z, zlen, &h);
    int rc = eng_batch_plain_records(b, &h, scratch, out, outlen);
    if (rc == 0 && codec == ENG_CODEC_NONE) {
        /* a view into b: copy it before b goes */
        assert_int_equal(eng_buf_reserve(scratch, *outlen + 1), 0);
        memcpy(scratch->data, *out, *outlen);
        *out = scratch->data;
    }
    free(b);
    return rc;
}

static void roundtrip(int codec, int level, const uint8_t *in, size_t len)
{
    eng_buf z = {0}, scratch = {0};
    assert_int_equal(eng_records_compress(codec, level, in, len, &z), 0);
    const uint8_t *out;
    size_t outlen;
    int rc = inflate_as(codec, z.data, z.len, &scratch, &out, &outlen);
    if (rc || outlen != len || (len && memcmp(out, in, len)))
        fail_msg("%s level %d, %zu bytes: rc %d, got %zu bytes back", codec_names[codec], level, len,
                 rc, outlen);
    eng_buf_free(&z);
    eng_buf_free(&scratch);
}

static void test_roundtrip_every_codec_and_level(void **state)
{
    (void)state;
    uint8_t one = 0x5a;
    uint8_t *noise = malloc(MIB), *text = malloc(MIB);
    assert_non_null(noise);
    assert_non_null(text);
    fill_random(noise, MIB, 1);
    fill_text(text, MIB);
    static const int gzip_levels[] = {ENG_CODEC_DEFAULT_LEVEL, -1, 1, 9};
    static const int lz4_levels[] = {ENG_CODEC_DEFAULT_LEVEL, 1, 9, 17};
    static const int zstd_levels[] = {ENG_CODEC_DEFAULT_LEVEL, -7, 1, 19};
    static const int no_level[] = {ENG_CODEC_DEFAULT_LEVEL};
    for (size_t c = 0; c < 5; c++) {
        const int *levels = no_level;
        size_t nlevels = 1;
        if (codecs[c] == ENG_CODEC_GZIP)
            levels = gzip_levels, nlevels = 4;
        else if (codecs[c] == ENG_CODEC_LZ4)
            levels = lz4_levels, nlevels = 4;
        else if (codecs[c] == ENG_CODEC_ZSTD)
            levels = zstd_levels, nlevels = 4;
        for (size_t l = 0; l < nlevels; l++) {
            roundtrip(codecs[c], levels[l], NULL, 0);
            roundtrip(codecs[c], levels[l], &one, 1);
            roundtrip(codecs[c], levels[l], noise, MIB);
            roundtrip(codecs[c], levels[l], text, MIB);
        }
    }
    /* Compressible input actually shrinks (the codec is not a copy). */
    for (size_t c = 1; c < 5; c++) {
        eng_buf z = {0};
        assert_int_equal(eng_records_compress(codecs[c], ENG_CODEC_DEFAULT_LEVEL, text, MIB, &z), 0);
        assert_true(z.len < MIB / 4);
        eng_buf_free(&z);
    }
    eng_buf z = {0};
    assert_int_equal(eng_records_compress(7, ENG_CODEC_DEFAULT_LEVEL, text, 10, &z), ENG_EINVAL);
    eng_buf_free(&z);
    assert_true(eng_codec_supported(ENG_CODEC_ZSTD));
    assert_false(eng_codec_supported(5));
    assert_false(eng_codec_supported(7));
    free(noise);
    free(text);
}

/* Compresses text with codec at level; the caller frees *z. */
static void compress_text(int codec, int level, const uint8_t *text, size_t len, eng_buf *z)
{
    *z = (eng_buf){0};
    assert_int_equal(eng_records_compress(codec, level, text, len, z), 0);
}

static bool same_bytes(const eng_buf *a, const eng_buf *b)
{
    return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

/* §4 and §18.1: gzip writes a gzip member (RFC 1952: 1f 8b, deflate), not a
 * zlib stream; the levels are applied, and the default of each codec is
 * Kafka's (gzip: zlib's 6, lz4: 9, zstd: 3).  Concatenated gzip members
 * read as one stream, as Java's GZIPInputStream reads them. */
static void test_gzip_member_and_levels(void **state)
{
    (void)state;
    uint8_t *text = malloc(MIB);
    assert_non_null(text);
    fill_text(text, MIB);
    eng_buf z;
    compress_text(ENG_CODEC_GZIP, ENG_CODEC_DEFAULT_LEVEL, text, 1000, &z);
    assert_true(z.len > 10);
    assert_int_equal(z.data[0], 0x1f);
    assert_int_equal(z.data[1], 0x8b);
    assert_int_equal(z.data[2], 8); /* CM = deflate */
    eng_buf_free(&z);

    static const struct {
        int codec, dflt, lo, hi;
    } lv[] = {{ENG_CODEC_GZIP, 6, 1, 9}, {ENG_CODEC_LZ4, 9, 1, 12}, {ENG_CODEC_ZSTD, 3, 1, 19}};
    for (size_t i = 0; i < sizeof lv / sizeof lv[0]; i++) {
        eng_buf d, k, lo, hi;
        compress_text(lv[i].codec, ENG_CODEC_DEFAULT_LEVEL, text, MIB, &d);
        compress_text(lv[i].codec, lv[i].dflt, text, MIB, &k);
        compress_text(lv[i].codec, lv[i].lo, text, MIB, &lo);
        compress_text(lv[i].codec, lv[i].hi, text, MIB, &hi);
        if (!same_bytes(&d, &k))
            fail_msg("%s: the default level is not %d", codec_names[lv[i].codec], lv[i].dflt);
        if (same_bytes(&lo, &hi))
            fail_msg("%s: levels %d and %d write the same bytes", codec_names[lv[i].codec], lv[i].lo,
                     lv[i].hi);
        eng_buf_free(&d);
        eng_buf_free(&k);
        eng_buf_free(&lo);
        eng_buf_free(&hi);
    }

    eng_buf a, b, both = {0}, scratch = {0};
    compress_text(ENG_CODEC_GZIP, 1, text, 3000, &a);
    compress_text(ENG_CODEC_GZIP, 9, text + 3000, 5000, &b);
    assert_int_equal(eng_buf_reserve(&both, a.len + b.len), 0);
    memcpy(both.data, a.data, a.len);
    memcpy(both.data + a.len, b.data, b.len);
    const uint8_t *out;
    size_t outlen;
    assert_int_equal(inflate_as(ENG_CODEC_GZIP, both.data, a.len + b.len, &scratch, &out, &outlen), 0);
    assert_int_equal(outlen, 8000);
    assert_memory_equal(out, text, 8000);
    eng_buf_free(&a);
    eng_buf_free(&b);
    eng_buf_free(&both);
    eng_buf_free(&scratch);
    free(text);
}

static void test_xerial_snappy_framing(void **state)
{
    (void)state;
    size_t len = 100 << 10; /* 3 full 32 KiB blocks and a 4 KiB one */
    uint8_t *in = malloc(len);
    assert_non_null(in);
    fill_text(in, len);
    eng_buf z = {0};
    assert_int_equal(eng_records_compress(ENG_CODEC_SNAPPY, ENG_CODEC_DEFAULT_LEVEL, in, len, &z), 0);
    static const uint8_t magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    assert_true(z.len > 16);
    assert_memory_equal(z.data, magic, 8);
    assert_int_equal(eng_be32(z.data + 8), 1);  /* version */
    assert_int_equal(eng_be32(z.data + 12), 1); /* compatible version */
    size_t pos = 16, done = 0, blocks = 0;
    char *plain = malloc(32 << 10);
    assert_non_null(plain);
    while (pos < z.len) {
        assert_true(z.len - pos >= 4);
        size_t n = eng_be32(z.data + pos);
        pos += 4;
        assert_true(n <= z.len - pos);
        size_t got = 32 << 10;
        assert_int_equal(snappy_uncompress((const char *)z.data + pos, n, plain, &got), SNAPPY_OK);
        size_t want = len - done < (32u << 10) ? len - done : (32u << 10);
        assert_int_equal(got, want);
        assert_memory_equal(plain, in + done, got);
        done += got;
        pos += n;
        blocks++;
    }
    assert_int_equal(pos, z.len);
    assert_int_equal(done, len);
    assert_int_equal(blocks, 4);
    /* The empty input is the bare 16-byte stream header. */
    eng_buf e = {0};
    assert_int_equal(eng_records_compress(ENG_CODEC_SNAPPY, ENG_CODEC_DEFAULT_LEVEL, in, 0, &e), 0);
    assert_int_equal(e.len, 16);
    eng_buf_free(&e);
    free(plain);
    free(in);
    eng_buf_free(&z);
}

/* kafkajs-snappy (what a kafkajs producer sends) writes one raw snappy block
 * with no xerial header; Kafka's reader (xerial SnappyInputStream) falls back
 * to raw snappy for such streams, so the broker accepts them. */
static void test_raw_snappy_is_read(void **state)
{
    (void)state;
    uint8_t in[3000];
    fill_text(in, sizeof in);
    size_t n = snappy_max_compressed_length(sizeof in);
    char *raw = malloc(n);
    assert_non_null(raw);
    assert_int_equal(snappy_compress((const char *)in, sizeof in, raw, &n), SNAPPY_OK);
    eng_buf scratch = {0};
    const uint8_t *out;
    size_t outlen;
    assert_int_equal(inflate_as(ENG_CODEC_SNAPPY, (uint8_t *)raw, n, &scratch, &out, &outlen), 0);
    assert_int_equal(outlen, sizeof in);
    assert_memory_equal(out, in, sizeof in);
    /* A truncated raw block is still refused. */
    assert_int_equal(inflate_as(ENG_CODEC_SNAPPY, (uint8_t *)raw, n - 3, &scratch, &out, &outlen),
                     ENG_ECORRUPT);
    eng_buf_free(&scratch);
    free(raw);
}

/* A snappy block that decodes to nothing (the varint 0), raw or in a xerial
 * frame, into a scratch buffer that has never held anything: found by
 * fuzz_batch, where writing into the NULL buffer was undefined behaviour. */
static void test_empty_snappy_block(void **state)
{
    (void)state;
    static const uint8_t raw[] = {0x00};
    static const uint8_t framed[] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1,
                                     0,    0,   0,   1,   0,   0,   0,   1, 0x00};
    const uint8_t *out;
    size_t outlen = 1;
    eng_buf scratch = {0};
    assert_int_equal(inflate_as(ENG_CODEC_SNAPPY, raw, sizeof raw, &scratch, &out, &outlen), 0);
    assert_int_equal(outlen, 0);
    eng_buf_free(&scratch);
    outlen = 1;
    assert_int_equal(inflate_as(ENG_CODEC_SNAPPY, framed, sizeof framed, &scratch, &out, &outlen),
                     0);
    assert_int_equal(outlen, 0);
    eng_buf_free(&scratch);
}

static void test_lz4_frame_is_kafkas(void **state)
{
    (void)state;
    uint8_t *in = malloc(MIB);
    assert_non_null(in);
    fill_text(in, MIB / 2);
    fill_random(in + MIB / 2, MIB / 2, 9); /* some blocks will be stored raw */
    eng_buf z = {0};
    assert_int_equal(eng_records_compress(ENG_CODEC_LZ4, ENG_CODEC_DEFAULT_LEVEL, in, MIB, &z), 0);
    assert_true(z.len > 7);
    assert_int_equal(le32(z.data), 0x184D2204u);
    uint8_t flg = z.data[4], bd = z.data[5];
    assert_int_equal(flg >> 6, 1);        /* version 01 */
    assert_int_equal(flg & 0x20, 0x20);   /* block independence */
    assert_int_equal(flg & 0x10, 0);      /* no block checksum */
    assert_int_equal(flg & 0x08, 0);      /* no content size */
    assert_int_equal(flg & 0x04, 0);      /* no content checksum */
    assert_int_equal(flg & 0x03, 0);      /* reserved, no dictionary id */
    assert_int_equal(bd, 0x40);           /* 64 KiB blocks */
    /* The header checksum byte is right: liblz4 verifies it here. */
    LZ4F_dctx *d;
    assert_false(LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
    LZ4F_frameInfo_t fi;
    size_t consumed = z.len;
    assert_false(LZ4F_isError(LZ4F_getFrameInfo(d, &fi, z.data, &consumed)));
    assert_int_equal(consumed, 7);
    assert_int_equal(fi.blockMode, LZ4F_blockIndependent);
    assert_int_equal(fi.blockSizeID, LZ4F_max64KB);
    LZ4F_freeDecompressionContext(d);
    /* Every block decodes on its own: no block refers to an earlier one. */
    char *plain = malloc(64 << 10);
    assert_non_null(plain);
    size_t pos = 7, done = 0, blocks = 0;
    for (;;) {
        assert_true(z.len - pos >= 4);
        uint32_t word = le32(z.data + pos);
        pos += 4;
        if (word == 0)
            break;
        size_t n = word & 0x7fffffffu;
        assert_true(n <= z.len - pos && n <= (64u << 10));
        int got;
        if (word & 0x80000000u) {
            memcpy(plain, z.data + pos, n);
            got = (int)n;
        } else {
            got = LZ4_decompress_safe((const char *)z.data + pos, plain, (int)n, 64 << 10);
        }
        assert_true(got > 0 && (size_t)got <= (64u << 10));
        assert_memory_equal(plain, in + done, (size_t)got);
        done += (size_t)got;
        pos += n;
        blocks++;
    }
    assert_int_equal(pos, z.len); /* no content checksum after the end mark */
    assert_int_equal(done, MIB);
    assert_int_equal(blocks, 16);
    free(plain);
    free(in);
    eng_buf_free(&z);
}

/* ---- bounded decompression ---------------------------------------------------- */

/* A frame of linked blocks decodes with liblz4, but Kafka's reader refuses
 * it: an append must not store one (eng_validate.c asks this). */
static void test_lz4_dependent_blocks_flagged(void **state)
{
    (void)state;
    /* Several 64 KiB blocks: liblz4 makes a one-block frame independent
     * whatever it is asked. */
    enum { IN = 256 << 10 };
    uint8_t *in = malloc(IN);
    assert_non_null(in);
    fill_text(in, IN);
    for (int linked = 0; linked < 2; linked++) {
        LZ4F_preferences_t prefs;
        memset(&prefs, 0, sizeof prefs);
        prefs.frameInfo.blockSizeID = LZ4F_max64KB;
        prefs.frameInfo.blockMode = linked ? LZ4F_blockLinked : LZ4F_blockIndependent;
        size_t cap = LZ4F_compressFrameBound(IN, &prefs);
        uint8_t *z = malloc(cap);
        assert_non_null(z);
        size_t zlen = LZ4F_compressFrame(z, cap, in, IN, &prefs);
        assert_false(LZ4F_isError(zlen));
        eng_batch_header h;
        uint8_t *b = wrap(ENG_CODEC_LZ4, z, zlen, &h);
        assert_int_equal(eng_batch_lz4_dependent(b, &h), linked == 1);
        free(b);
        free(z);
    }
    free(in);
    /* Other codecs are never flagged. */
    eng_batch_header h;
    uint8_t *b = wrap(ENG_CODEC_GZIP, (const uint8_t *)"x", 1, &h);
    assert_false(eng_batch_lz4_dependent(b, &h));
    free(b);
}

static void zstd_of_zeros(size_t total, eng_buf *out)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    assert_non_null(c);
    uint8_t *zeros = calloc(1, MIB);
    assert_non_null(zeros);
    out->len = 0;
    for (size_t fed = 0; fed <= total; fed += MIB) {
        bool last = fed == total;
        ZSTD_inBuffer ib = {zeros, last ? 0 : MIB, 0};
        size_t left;
        do {
            assert_int_equal(eng_buf_reserve(out, out->len + (64 << 10)), 0);
            ZSTD_outBuffer ob = {out->data + out->len, out->cap - out->len, 0};
            left = ZSTD_compressStream2(c, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);
            assert_false(ZSTD_isError(left));
            out->len += ob.pos;
        } while (last ? left != 0 : ib.pos < ib.size);
    }
    free(zeros);
    ZSTD_freeCCtx(c);
}

static void gzip_of_zeros(size_t total, eng_buf *out)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    assert_int_equal(deflateInit2(&s, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    uint8_t *zeros = calloc(1, MIB);
    assert_non_null(zeros);
    out->len = 0;
    for (size_t fed = 0; fed <= total; fed += MIB) {
        bool last = fed == total;
        s.next_in = zeros;
        s.avail_in = last ? 0 : MIB;
        int zr;
        do {
            assert_int_equal(eng_buf_reserve(out, out->len + (64 << 10)), 0);
            s.next_out = out->data + out->len;
            s.avail_out = (uInt)(out->cap - out->len);
            zr = deflate(&s, last ? Z_FINISH : Z_NO_FLUSH);
            assert_true(zr == Z_OK || zr == Z_STREAM_END || zr == Z_BUF_ERROR);
            out->len = out->cap - s.avail_out;
        } while (last ? zr != Z_STREAM_END : s.avail_in > 0);
    }
    deflateEnd(&s);
    free(zeros);
}

static void lz4_of_zeros(size_t total, eng_buf *out)
{
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    LZ4F_cctx *c;
    assert_false(LZ4F_isError(LZ4F_createCompressionContext(&c, LZ4F_VERSION)));
    uint8_t *zeros = calloc(1, MIB);
    assert_non_null(zeros);
    size_t bound = LZ4F_compressBound(MIB, &prefs);
    assert_int_equal(eng_buf_reserve(out, bound + 64), 0);
    out->len = LZ4F_compressBegin(c, out->data, out->cap, &prefs);
    for (size_t fed = 0; fed < total; fed += MIB) {
        assert_int_equal(eng_buf_reserve(out, out->len + bound), 0);
        size_t n = LZ4F_compressUpdate(c, out->data + out->len, out->cap - out->len, zeros, MIB, NULL);
        assert_false(LZ4F_isError(n));
        out->len += n;
    }
    assert_int_equal(eng_buf_reserve(out, out->len + bound), 0);
    out->len += LZ4F_compressEnd(c, out->data + out->len, out->cap - out->len, NULL);
    LZ4F_freeCompressionContext(c);
    free(zeros);
}

static void test_decompression_bombs_refused(void **state)
{
    (void)state;
    eng_buf z = {0}, scratch = {0};
    const uint8_t *out;
    size_t outlen;
    /* Under the bound is fine (the bound is not a tiny one). */
    zstd_of_zeros(16 * MIB, &z);
    assert_int_equal(inflate_as(ENG_CODEC_ZSTD, z.data, z.len, &scratch, &out, &outlen), 0);
    assert_int_equal(outlen, 16 * MIB);
    eng_buf_free(&scratch);

    zstd_of_zeros(BOUND + 16 * MIB, &z);
    assert_true(z.len < MIB); /* a small request body */
    assert_int_equal(inflate_as(ENG_CODEC_ZSTD, z.data, z.len, &scratch, &out, &outlen), ENG_ECORRUPT);
    assert_true(scratch.cap <= BOUND + MIB);
    eng_buf_free(&scratch);

    gzip_of_zeros(BOUND + 16 * MIB, &z);
    assert_true(z.len < MIB);
    assert_int_equal(inflate_as(ENG_CODEC_GZIP, z.data, z.len, &scratch, &out, &outlen), ENG_ECORRUPT);
    assert_true(scratch.cap <= BOUND + MIB);
    eng_buf_free(&scratch);

    lz4_of_zeros(BOUND + 16 * MIB, &z);
    assert_true(z.len < 2 * MIB);
    assert_int_equal(inflate_as(ENG_CODEC_LZ4, z.data, z.len, &scratch, &out, &outlen), ENG_ECORRUPT);
    assert_true(scratch.cap <= BOUND + MIB);
    eng_buf_free(&scratch);

    /* A xerial block whose raw snappy preamble claims ~4 GiB. */
    uint8_t s[16 + 4 + 8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
    eng_put_be32(s + 16, 8);
    static const uint8_t claim[8] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00, 0x00};
    memcpy(s + 20, claim, 8);
    assert_int_equal(inflate_as(ENG_CODEC_SNAPPY, s, sizeof s, &scratch, &out, &outlen), ENG_ECORRUPT);
    assert_true(scratch.cap < MIB);
    eng_buf_free(&scratch);
    eng_buf_free(&z);
}

static void test_truncated_and_garbage_refused(void **state)
{
    (void)state;
    size_t len = 100 << 10;
    uint8_t *in = malloc(len), *junk = malloc(4096);
    assert_non_null(in);
    assert_non_null(junk);
    fill_text(in, len);
    fill_random(junk, 4096, 77);
    eng_buf scratch = {0};
    const uint8_t *out;
    size_t outlen;
    for (size_t c = 1; c < 5; c++) {
        eng_buf z = {0};
        assert_int_equal(eng_records_compress(codecs[c], ENG_CODEC_DEFAULT_LEVEL, in, len, &z), 0);
        /* Cut inside the stream: never on a xerial block boundary, which is
         * a valid shorter stream (the framing has no total length). */
        size_t cuts[] = {1, 5, 9, z.len / 2 + 1, z.len - 3, z.len - 1};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            int rc = inflate_as(codecs[c], z.data, cuts[i], &scratch, &out, &outlen);
            if (rc != ENG_ECORRUPT)
                fail_msg("%s cut to %zu of %zu bytes: rc %d (%zu bytes out)", codec_names[c],
                         cuts[i], z.len, rc, rc ? 0 : outlen);
        }
        /* Garbage, and garbage after the codec's own magic. */
        assert_int_equal(inflate_as(codecs[c], junk, 4096, &scratch, &out, &outlen), ENG_ECORRUPT);
        uint8_t *mixed = malloc(4096);
        assert_non_null(mixed);
        memcpy(mixed, junk, 4096);
        memcpy(mixed, z.data, 16);
        if (codecs[c] == ENG_CODEC_SNAPPY)
            eng_put_be32(mixed + 16, 4000); /* one block of junk */
        int rc = inflate_as(codecs[c], mixed, 4096, &scratch, &out, &outlen);
        if (rc != ENG_ECORRUPT)
            fail_msg("%s: junk after a valid stream start gave rc %d", codec_names[c], rc);
        free(mixed);
        /* An empty records section of a compressed batch is not a stream. */
        rc = inflate_as(codecs[c], junk, 0, &scratch, &out, &outlen);
        if (rc != ENG_ECORRUPT)
            fail_msg("%s: an empty stream gave rc %d", codec_names[c], rc);
        eng_buf_free(&z);
    }
    /* Codecs 5..7 do not exist. */
    for (int c = 5; c <= 7; c++)
        assert_int_equal(inflate_as(c, in, 100, &scratch, &out, &outlen), ENG_ECORRUPT);
    eng_buf_free(&scratch);
    free(junk);
    free(in);
}

/* A zstd records section may hold several frames (zstd-jni, Kafka's reader,
 * reads them all); bytes after the last frame that are no frame are corrupt. */
static void test_zstd_frames(void **state)
{
    (void)state;
    uint8_t a[5000], b[3000];
    fill_text(a, sizeof a);
    fill_random(b, sizeof b, 5);
    eng_buf za = {0}, zb = {0}, both = {0}, scratch = {0};
    assert_int_equal(eng_records_compress(ENG_CODEC_ZSTD, 3, a, sizeof a, &za), 0);
    assert_int_equal(eng_records_compress(ENG_CODEC_ZSTD, 3, b, sizeof b, &zb), 0);
    assert_int_equal(eng_buf_reserve(&both, za.len + zb.len + 16), 0);
    memcpy(both.data, za.data, za.len);
    memcpy(both.data + za.len, zb.data, zb.len);
    const uint8_t *out;
    size_t outlen;
    assert_int_equal(inflate_as(ENG_CODEC_ZSTD, both.data, za.len + zb.len, &scratch, &out, &outlen), 0);
    assert_int_equal(outlen, sizeof a + sizeof b);
    assert_memory_equal(out, a, sizeof a);
    assert_memory_equal(out + sizeof a, b, sizeof b);
    memcpy(both.data + za.len, "GARBAGE-AFTER-IT", 16);
    assert_int_equal(inflate_as(ENG_CODEC_ZSTD, both.data, za.len + 16, &scratch, &out, &outlen),
                     ENG_ECORRUPT);
    assert_int_equal(inflate_as(ENG_CODEC_ZSTD, both.data, za.len + 2, &scratch, &out, &outlen),
                     ENG_ECORRUPT);
    eng_buf_free(&za);
    eng_buf_free(&zb);
    eng_buf_free(&both);
    eng_buf_free(&scratch);
}

/* ---- eng_batch_recode -------------------------------------------------------------- */

/* A batch as the cleaner leaves it: offset deltas 0, 2, 5 of lastOffsetDelta
 * 7, unsorted timestamps, a null key, a tombstone, headers (one null). */
static size_t gapped_batch(uint8_t *b, size_t cap)
{
    static const struct {
        int32_t delta;
        int64_t ts;
        const char *key, *value;
        int nh;
    } recs[] = {{0, 5000, "a", "alpha", 0}, {2, 4000, NULL, "no key", 2}, {5, 6000, "c", NULL, 1}};
    uint8_t body[512];
    size_t pos = 0;
    for (size_t i = 0; i < 3; i++) {
        uint8_t r[200];
        size_t n = 0;
        r[n++] = 0;
        n += eng_varlong_put(r + n, recs[i].ts - 5000);
        n += eng_varint_put(r + n, recs[i].delta);
        const char *kv[2] = {recs[i].key, recs[i].value};
        for (int j = 0; j < 2; j++) {
            int32_t l = kv[j] ? (int32_t)strlen(kv[j]) : -1;
            n += eng_varint_put(r + n, l);
            if (l > 0)
                memcpy(r + n, kv[j], (size_t)l), n += (size_t)l;
        }
        n += eng_varint_put(r + n, recs[i].nh);
        for (int j = 0; j < recs[i].nh; j++) {
            n += eng_varint_put(r + n, 2);
            memcpy(r + n, j ? "h2" : "h1", 2), n += 2;
            n += eng_varint_put(r + n, j ? -1 : 3);
            if (!j)
                memcpy(r + n, "xyz", 3), n += 3;
        }
        pos += eng_varint_put(body + pos, (int32_t)n);
        memcpy(body + pos, r, n);
        pos += n;
    }
    eng_batch_header h = {.base_offset = 1000, .length = (int32_t)(49 + pos), .leader_epoch = 3,
                          .magic = 2, .attributes = ENG_ATTR_TRANSACTIONAL, .last_offset_delta = 7,
                          .base_timestamp = 5000, .max_timestamp = 6000, .producer_id = 77,
                          .producer_epoch = 4, .base_sequence = 11, .record_count = 3};
    assert_true(ENG_BATCH_OVERHEAD + pos <= cap);
    eng_batch_header_encode(b, &h);
    memcpy(b + ENG_BATCH_OVERHEAD, body, pos);
    eng_batch_update_crc(b, ENG_BATCH_OVERHEAD + pos);
    return ENG_BATCH_OVERHEAD + pos;
}

/* Records of a batch as comparable text: offset, timestamp, key, value, headers. */
static char *describe(const uint8_t *b, const eng_batch_header *h)
{
    eng_buf scratch = {0};
    const uint8_t *recs;
    size_t len;
    assert_int_equal(eng_batch_plain_records(b, h, &scratch, &recs, &len), 0);
    size_t cap = 256 + len * 4, n = 0;
    char *s = calloc(1, cap);
    assert_non_null(s);
    eng_record_iter it;
    eng_record r;
    int rc;
    eng_record_iter_init(&it, h, recs, len);
    while ((rc = eng_record_iter_next(&it, &r)) == 1) {
        n += (size_t)snprintf(s + n, cap - n, "%lld@%lld k=%.*s/%d v=%.*s/%d h=", (long long)r.offset,
                              (long long)r.timestamp, r.key_len > 0 ? r.key_len : 0,
                              r.key ? (const char *)r.key : "", r.key_len,
                              r.value_len > 0 ? r.value_len : 0, r.value ? (const char *)r.value : "",
                              r.value_len);
        for (const uint8_t *p = r.headers; p < r.headers_end && n + 4 < cap; p++)
            n += (size_t)snprintf(s + n, cap - n, "%02x", *p);
        n += (size_t)snprintf(s + n, cap - n, ";");
    }
    assert_int_equal(rc, 0);
    eng_buf_free(&scratch);
    return s;
}

/* Recodes every batch of buf to codec and checks what must survive. */
static void recode_all(const uint8_t *buf, size_t len, int codec, const char *what)
{
    eng_buf scratch = {0}, out = {0};
    for (size_t pos = 0; pos < len;) {
        eng_batch_header h, nh;
        assert_int_equal(eng_batch_header_decode(buf + pos, len - pos, &h), 0);
        out.len = 0;
        int rc = eng_batch_recode(buf + pos, &h, codec, ENG_CODEC_DEFAULT_LEVEL, &scratch, &out);
        if (rc)
            fail_msg("%s -> %s: recode failed with %d", what, codec_names[codec], rc);
        assert_int_equal(eng_batch_validate(out.data, out.len, &nh), 0);
        assert_int_equal(eng_batch_compute_crc(out.data, out.len), nh.crc);
        assert_int_equal(nh.attributes & ENG_ATTR_CODEC_MASK, codec);
        assert_int_equal(nh.attributes & ~ENG_ATTR_CODEC_MASK, h.attributes & ~ENG_ATTR_CODEC_MASK);
        assert_int_equal(nh.base_offset, h.base_offset);
        assert_int_equal(nh.last_offset_delta, h.last_offset_delta);
        assert_int_equal(nh.record_count, h.record_count);
        assert_int_equal(nh.max_timestamp, h.max_timestamp);
        assert_int_equal(nh.leader_epoch, h.leader_epoch);
        assert_int_equal(nh.producer_id, h.producer_id);
        assert_int_equal(nh.producer_epoch, h.producer_epoch);
        assert_int_equal(nh.base_sequence, h.base_sequence);
        char *before = describe(buf + pos, &h), *after = describe(out.data, &nh);
        if (strcmp(before, after))
            fail_msg("%s -> %s changed records:\n  %s\n  %s", what, codec_names[codec], before, after);
        /* Kafka's rebuild: baseTimestamp = the first record's timestamp. */
        char first_ts[32];
        snprintf(first_ts, sizeof first_ts, "@%lld ", (long long)nh.base_timestamp);
        assert_non_null(strstr(before, first_ts));
        assert_true(strstr(before, first_ts) < strchr(before, ';'));
        free(before);
        free(after);
        pos += eng_batch_size(&h);
    }
    eng_buf_free(&scratch);
    eng_buf_free(&out);
}

static void test_recode_keeps_everything(void **state)
{
    (void)state;
    uint8_t b[1024];
    size_t n = gapped_batch(b, sizeof b);
    eng_batch_header h;
    assert_int_equal(eng_batch_validate(b, n, &h), 0);
    for (size_t c = 0; c < 5; c++) {
        recode_all(b, n, codecs[c], "gapped batch");
        /* and back from that codec to every other one */
        eng_buf scratch = {0}, once = {0};
        assert_int_equal(eng_batch_recode(b, &h, codecs[c], ENG_CODEC_DEFAULT_LEVEL, &scratch, &once), 0);
        for (size_t d = 0; d < 5; d++)
            recode_all(once.data, once.len, codecs[d], codec_names[c]);
        eng_buf_free(&scratch);
        eng_buf_free(&once);
    }
    /* The gaps survive: offsets 1000, 1002, 1005 and last offset 1007. */
    char *d = describe(b, &h);
    assert_non_null(strstr(d, "1000@5000"));
    assert_non_null(strstr(d, "1002@4000"));
    assert_non_null(strstr(d, "1005@6000"));
    free(d);
}

static void test_recode_kafkajs_batches(void **state)
{
    (void)state;
    static const char *const files[] = {"plain.bin", "headers.bin", "nullkeys.bin", "tombstones.bin",
                                        "multi.bin", "gzip.bin", "snappy.bin", "lz4.bin", "zstd.bin",
                                        "logappend.bin", "idempotent.bin"};
    size_t tried = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char rel[64];
        snprintf(rel, sizeof rel, "kafkajs/%s", files[f]);
        uint8_t *buf;
        size_t len;
        if (ts_read_file(ts_data_path(rel), &buf, &len)) {
            /* A codec gen.js could not build is absent (see its README). */
            assert_true(strstr(files[f], "snappy") || strstr(files[f], "lz4") ||
                        strstr(files[f], "zstd"));
            continue;
        }
        tried++;
        for (size_t pos = 0; pos < len;) {
            eng_batch_header h;
            assert_int_equal(eng_batch_header_decode(buf + pos, len - pos, &h), 0);
            if (eng_batch_validate(buf + pos, eng_batch_size(&h), &h))
                fail_msg("%s: kafkajs batch at %zu does not validate", files[f], pos);
            pos += eng_batch_size(&h);
        }
        for (size_t c = 0; c < 5; c++)
            recode_all(buf, len, codecs[c], files[f]);
        free(buf);
    }
    assert_true(tried >= 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_every_codec_and_level),
        cmocka_unit_test(test_gzip_member_and_levels),
        cmocka_unit_test(test_xerial_snappy_framing),
        cmocka_unit_test(test_raw_snappy_is_read),
        cmocka_unit_test(test_empty_snappy_block),
        cmocka_unit_test(test_lz4_frame_is_kafkas),
        cmocka_unit_test(test_lz4_dependent_blocks_flagged),
        cmocka_unit_test(test_decompression_bombs_refused),
        cmocka_unit_test(test_truncated_and_garbage_refused),
        cmocka_unit_test(test_zstd_frames),
        cmocka_unit_test(test_recode_keeps_everything),
        cmocka_unit_test(test_recode_kafkajs_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
