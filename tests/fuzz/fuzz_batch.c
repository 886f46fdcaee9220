/*
 * fuzz_batch.c - the RecordBatch v2 decoder and the record codecs on
 * arbitrary bytes.
 *
 * Whatever the input: header decode, full validation, record iteration and
 * header iteration must never read outside the buffer, and a batch the
 * validator accepts must iterate exactly record_count records.
 *
 * A mutated batch almost never keeps a matching CRC-32C, so the raw input
 * alone stops at the CRC check and never reaches the records or the
 * decompressors.  The batch the header describes is therefore also checked
 * a second time from a copy whose CRC the harness recomputes: that is what
 * a client (or a disk) can hand the server on purpose.  For a compressed
 * batch, its records section is decompressed (gzip, snappy, lz4, zstd: the
 * output must stay within the engine's bound whatever the ratio), iterated,
 * and re-encoded with the next codec; the re-encoded batch must validate
 * and decompress to the same number of records.
 */
#include "eng_batch.h"
#include "eng_buf.h"
#include "eng_compress.h"
#include "eng_error.h"
#include "fuzz_support.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What eng_compress.c allows a records section to grow to. */
#define PLAIN_BOUND (256u << 20)

/* Iterates recs[0, len) as h's records (headers too); returns how many, or
 * -1 when the iterator stopped on an error. */
static int32_t iterate(const eng_batch_header *h, const uint8_t *recs, size_t len)
{
    eng_record_iter it;
    eng_record r;
    int32_t n = 0;
    int rc;
    eng_record_iter_init(&it, h, recs, len);
    while ((rc = eng_record_iter_next(&it, &r)) == 1) {
        const uint8_t *p = r.headers;
        eng_record_header hh;
        while (eng_record_header_next(&p, r.headers_end, &hh) == 1)
            ;
        n++;
    }
    return rc < 0 ? -1 : n;
}

/* A batch whose CRC is right: validation, decompression, re-encoding. */
static void check_valid_crc(const uint8_t *b, size_t size)
{
    eng_batch_header h;
    if (eng_batch_validate(b, size, &h) != 0)
        return;
    int codec = h.attributes & ENG_ATTR_CODEC_MASK;
    if (codec == ENG_CODEC_NONE) {
        /* the validator accepted a batch that does not iterate */
        CHECK(iterate(&h, b + ENG_BATCH_OVERHEAD, size - ENG_BATCH_OVERHEAD) == h.record_count);
        return;
    }
    eng_buf scratch = {0};
    const uint8_t *recs;
    size_t len;
    int rc = eng_batch_plain_records(b, &h, &scratch, &recs, &len);
    CHECK(rc == 0 || rc == ENG_ECORRUPT || rc == -ENOMEM);
    if (rc == 0) {
        CHECK(len <= PLAIN_BOUND);
        int32_t n = iterate(&h, recs, len);
        if (n == h.record_count && n >= 0) {
            /* Whole records: re-encoding must give a batch that reads back. */
            int to = codec % ENG_CODEC_ZSTD + 1; /* another compressed codec */
            eng_buf out = {0}, scratch2 = {0};
            rc = eng_batch_recode(b, &h, to, ENG_CODEC_DEFAULT_LEVEL, &scratch2, &out);
            CHECK(rc == 0 || rc == -ENOMEM);
            if (rc == 0) {
                eng_batch_header nh;
                CHECK(eng_batch_validate(out.data, out.len, &nh) == 0);
                CHECK((nh.attributes & ENG_ATTR_CODEC_MASK) == to);
                CHECK(eng_batch_plain_records(out.data, &nh, &scratch2, &recs, &len) == 0);
                CHECK(iterate(&nh, recs, len) == h.record_count);
            }
            eng_buf_free(&out);
            eng_buf_free(&scratch2);
        }
    }
    (void)eng_batch_lz4_dependent(b, &h);
    (void)eng_batch_lz4_dict_id(b, &h);
    (void)eng_batch_lz4_not_frame(b, &h);
    eng_buf_free(&scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    eng_batch_header h;
    if (eng_batch_header_decode(data, size, &h) == 0) {
        eng_batch_header v;
        int rc = eng_batch_validate(data, size, &v);
        if (rc == 0 && (h.attributes & ENG_ATTR_CODEC_MASK) == ENG_CODEC_NONE)
            /* the validator accepted a batch that does not iterate */
            CHECK(iterate(&h, data + ENG_BATCH_OVERHEAD, size - ENG_BATCH_OVERHEAD) ==
                  h.record_count);
        uint64_t bsize = eng_batch_size(&h);
        if (bsize >= ENG_BATCH_OVERHEAD && bsize <= size) {
            uint8_t *copy = malloc(bsize);
            CHECK(copy);
            memcpy(copy, data, bsize);
            eng_batch_update_crc(copy, bsize);
            check_valid_crc(copy, bsize);
            free(copy);
        }
    }
    /* The iterator alone, on any bytes as a records section. */
    eng_batch_header fake = {.record_count = 1000, .last_offset_delta = 1000};
    eng_record_iter it;
    eng_record r;
    eng_record_iter_init(&it, &fake, data, size);
    while (eng_record_iter_next(&it, &r) == 1)
        ;
    return 0;
}
