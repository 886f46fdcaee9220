/*
 * api_codec.c - JSON <-> records, base64, and Kafka's key partitioner.
 */
#include "api_codec.h"
#include "api_utf8.h"

#include "eng_fs.h"
#include "eng_logger.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(api_codec_err *err, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(api_codec_err *err, const char *code, const char *fmt, ...)
{
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}

int api_parse_encoding(const char *s, bool *base64)
{
    if (!s || strcmp(s, "utf8") == 0 || strcmp(s, "utf-8") == 0) {
        *base64 = false;
        return 0;
    }
    if (strcmp(s, "base64") == 0) {
        *base64 = true;
        return 0;
    }
    return -1;
}

static int b64val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long api_base64_decode(const char *in, size_t len, uint8_t *out)
{
    if (len % 4)
        return -1;
    size_t pad = 0;
    if (len >= 1 && in[len - 1] == '=')
        pad++;
    if (len >= 2 && in[len - 2] == '=')
        pad++;
    for (size_t i = 0; i < len - pad; i++)
        if (b64val((unsigned char)in[i]) < 0)
            return -1;
    if (len == 0)
        return 0;
    int n = EVP_DecodeBlock(out, (const unsigned char *)in, (int)len);
    if (n < 0)
        return -1;
    return (long)((size_t)n - pad);
}

/* Reads a string|null field as bytes; decodes base64 into the arena. */
static int take_bytes(json_t *v, bool base64, uint8_t **arena, const uint8_t **data, int32_t *len,
                      const char *what, size_t idx, api_codec_err *err)
{
    if (!v || json_is_null(v)) {
        *data = NULL;
        *len = -1;
        return 0;
    }
    if (!json_is_string(v))
        return fail(err, "invalid_request", "record %zu: %s must be a string or null", idx, what);
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (!base64) {
        *data = (const uint8_t *)s;
        *len = (int32_t)n;
        return 0;
    }
    long got = api_base64_decode(s, n, *arena);
    if (got < 0)
        return fail(err, "invalid_base64", "record %zu: %s is not valid base64", idx, what);
    *data = *arena;
    *len = (int32_t)got;
    *arena += got;
    return 0;
}

static bool only_keys(json_t *obj, const char *const *allowed, const char **bad)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        bool ok = false;
        for (size_t i = 0; allowed[i]; i++)
            ok |= strcmp(allowed[i], k) == 0;
        if (!ok) {
            *bad = k;
            return false;
        }
    }
    return true;
}

void api_append_body_free(api_append_body *b)
{
    json_decref(b->doc);
    free(b->arena);
    free(b->recs);
    free(b->hdrs);
    free(b->partitions);
    memset(b, 0, sizeof *b);
}

static int parse_record(json_t *rec, size_t i, int64_t now_ms, api_append_body *b, uint8_t **arena,
                        size_t *hdr_used, api_codec_err *err)
{
    static const char *const rec_keys[] = {"key", "value", "timestamp", "headers", "partition", NULL};
    static const char *const hdr_keys[] = {"name", "value", NULL};
    const char *bad;
    if (!json_is_object(rec))
        return fail(err, "invalid_request", "record %zu must be an object", i);
    json_t *key = json_object_get(rec, "key"), *value = json_object_get(rec, "value");
    json_t *ts = json_object_get(rec, "timestamp"), *part = json_object_get(rec, "partition");
    json_t *hs = json_object_get(rec, "headers");
    /* Every field was looked up anyway: an unknown one shows as a count
     * that does not add up, and only then are the names compared (the
     * comparisons were 2% of a 100-record append). */
    size_t known = !!key + !!value + !!ts + !!part + !!hs;
    if (known != json_object_size(rec) && !only_keys(rec, rec_keys, &bad))
        return fail(err, "invalid_request", "record %zu: unknown field '%.64s'", i, bad);
    eng_record_spec *r = &b->recs[i];
    if (take_bytes(key, b->base64, arena, &r->key, &r->key_len, "key", i, err))
        return -1;
    if (!value)
        return fail(err, "invalid_request", "record %zu: value is required (null for a tombstone)", i);
    if (take_bytes(value, b->base64, arena, &r->value, &r->value_len, "value", i, err))
        return -1;
    if (!ts || json_is_null(ts)) {
        r->timestamp = now_ms;
    } else if (!json_is_integer(ts)) {
        return fail(err, "invalid_request", "record %zu: timestamp must be an integer (ms)", i);
    } else {
        r->timestamp = json_integer_value(ts);
        if (r->timestamp < 0) {
            /* Named in details as the window's refusal names it (README). */
            err->has_record_index = true;
            err->record_index = i;
            return fail(err, "invalid_timestamp", "record %zu: timestamp %lld is negative", i,
                        (long long)r->timestamp);
        }
    }
    b->partitions[i] = -1;
    if (part && !json_is_null(part)) {
        if (!json_is_integer(part) || json_integer_value(part) < 0 ||
            json_integer_value(part) > INT32_MAX)
            return fail(err, "invalid_request", "record %zu: partition must be a non-negative integer", i);
        b->partitions[i] = (int32_t)json_integer_value(part);
    }
    if (hs && !json_is_null(hs)) {
        if (!json_is_array(hs))
            return fail(err, "invalid_request", "record %zu: headers must be an array", i);
        r->headers = &b->hdrs[*hdr_used];
        r->header_count = (uint32_t)json_array_size(hs);
        size_t k;
        json_t *h;
        json_array_foreach(hs, k, h) {
            if (!json_is_object(h) || !only_keys(h, hdr_keys, &bad))
                return fail(err, "invalid_request",
                            "record %zu: header %zu must be {\"name\":..., \"value\":...}", i, k);
            json_t *name = json_object_get(h, "name");
            if (!json_is_string(name))
                return fail(err, "invalid_request", "record %zu: header %zu needs a string name", i, k);
            eng_record_header *eh = &b->hdrs[(*hdr_used)++];
            eh->key = (const uint8_t *)json_string_value(name);
            eh->key_len = (int32_t)json_string_length(name);
            if (take_bytes(json_object_get(h, "value"), b->base64, arena, &eh->value,
                           &eh->value_len, "header value", i, err))
                return -1;
        }
    }
    return 0;
}

int api_parse_append(const uint8_t *body, size_t len, int64_t now_ms, size_t max_records,
                     api_append_body *out, api_codec_err *err)
{
    static const char *const top_keys[] = {"encoding", "expected_offset", "records", NULL};
    api_append_body b = {.expected_offset = -1};
    json_error_t jerr;
    const char *bad;
    if (!body || len == 0)
        return fail(err, "malformed_json", "the request body is empty; expected a JSON object");
    /* A key given twice ("value" in a record, "expected_offset") was taken
     * at its last value, silently. */
    b.doc = json_loadb((const char *)body, len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
    if (!b.doc) {
        if (json_error_code(&jerr) == json_error_invalid_utf8)
            return fail(err, "invalid_utf8", "the body is not valid UTF-8: %s", jerr.text);
        return fail(err, "malformed_json", "malformed JSON at line %d column %d: %s", jerr.line,
                    jerr.column, jerr.text);
    }
    int rc = -1;
    if (!json_is_object(b.doc)) {
        fail(err, "invalid_request", "the body must be a JSON object");
        goto done;
    }
    if (!only_keys(b.doc, top_keys, &bad)) {
        fail(err, "invalid_request", "unknown field '%.64s'", bad);
        goto done;
    }
    json_t *enc = json_object_get(b.doc, "encoding");
    /* A NUL would end the name early for api_parse_encoding: "base64\u0000x"
     * is no encoding. */
    if (enc && (!json_is_string(enc) || strlen(json_string_value(enc)) != json_string_length(enc) ||
                api_parse_encoding(json_string_value(enc), &b.base64))) {
        fail(err, "invalid_request", "encoding must be \"utf8\" or \"base64\"");
        goto done;
    }
    json_t *exp = json_object_get(b.doc, "expected_offset");
    if (exp && !json_is_null(exp)) {
        if (!json_is_integer(exp) || json_integer_value(exp) < 0) {
            fail(err, "invalid_request", "expected_offset must be a non-negative integer");
            goto done;
        }
        b.expected_offset = json_integer_value(exp);
    }
    json_t *recs = json_object_get(b.doc, "records");
    if (!json_is_array(recs) || json_array_size(recs) == 0) {
        fail(err, "invalid_request", "records must be a non-empty array");
        goto done;
    }
    b.n = json_array_size(recs);
    if (b.n > max_records) {
        fail(err, "request_too_large", "%zu records in one request; the limit is %zu", b.n,
             max_records);
        goto done;
    }
    size_t nhdrs = 0, i;
    json_t *rec;
    json_array_foreach(recs, i, rec) {
        json_t *hs = json_is_object(rec) ? json_object_get(rec, "headers") : NULL;
        if (json_is_array(hs))
            nhdrs += json_array_size(hs);
    }
    b.recs = calloc(b.n, sizeof *b.recs);
    b.hdrs = calloc(nhdrs ? nhdrs : 1, sizeof *b.hdrs);
    b.partitions = calloc(b.n, sizeof *b.partitions);
    /* Decoded base64 is never longer than the body that carried it. */
    b.arena = b.base64 ? malloc(len) : NULL;
    if (!b.recs || !b.hdrs || !b.partitions || (b.base64 && !b.arena)) {
        fail(err, "internal_error", "out of memory");
        goto done;
    }
    uint8_t *arena = b.arena;
    size_t hdr_used = 0;
    json_array_foreach(recs, i, rec) {
        if (parse_record(rec, i, now_ms, &b, &arena, &hdr_used, err))
            goto done;
    }
    rc = 0;
    *out = b;
done:
    if (rc)
        api_append_body_free(&b);
    return rc;
}

int api_encode_batch(const eng_record_spec *recs, size_t n, uint8_t **out, size_t *len)
{
    size_t size = eng_batch_encoded_size(recs, n);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return -ENOMEM;
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    if (eng_batch_encode(buf, size, &bp, recs, n) != size) {
        free(buf);
        return -ENOMEM;
    }
    *out = buf;
    *len = size;
    return 0;
}

/* Whether every byte is below 0x80: such bytes are valid UTF-8, so jansson's
 * own per-code-point check (a third of a JSON read's CPU) can be skipped.
 * Eight bytes are tested at a time. */
static bool all_ascii(const uint8_t *p, size_t n)
{
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, sizeof w);
        acc |= w;
    }
    for (; i < n; i++)
        acc |= p[i];
    return (acc & 0x8080808080808080ull) == 0;
}

/* A JSON string of bytes, or NULL if they are not UTF-8 (or on no memory). */
static json_t *utf8_json(const uint8_t *data, size_t len)
{
    if (all_ascii(data, len))
        return json_stringn_nocheck((const char *)data, len);
    return json_stringn((const char *)data, len);
}

/* A string|null JSON value for bytes; NULL result means invalid UTF-8. */
static json_t *bytes_json(const uint8_t *data, int32_t len, bool base64, bool *bad_utf8)
{
    if (!data || len < 0)
        return json_null();
    if (!base64) {
        json_t *s = utf8_json(data, (size_t)len);
        if (!s)
            *bad_utf8 = true;
        return s;
    }
    size_t cap = 4 * (((size_t)len + 2) / 3) + 1;
    char stackbuf[512];
    char *buf = cap <= sizeof stackbuf ? stackbuf : malloc(cap);
    if (!buf)
        return NULL;
    int n = EVP_EncodeBlock((unsigned char *)buf, data, len);
    json_t *s = json_stringn_nocheck(buf, (size_t)n);
    if (buf != stackbuf)
        free(buf);
    return s;
}

int api_check_stored_batch(const uint8_t *batch, size_t avail, const eng_batch_header *h,
                           const char *topic, int32_t partition, api_codec_err *err)
{
    size_t size = eng_batch_size(h);
    if (size <= avail && eng_batch_compute_crc(batch, size) == h->crc)
        return 0;
    /* Operators learn of damaged disks from the log, but a client retrying
     * the same read must not flood it. */
    static _Atomic int64_t last_warned_ms;
    int64_t now = eng_mono_ms(), last = atomic_load(&last_warned_ms);
    if ((last == 0 || now - last >= 10000) &&
        atomic_compare_exchange_strong(&last_warned_ms, &last, now))
        ENG_WARN("%s-%d: the stored batch holding offsets %lld to %lld fails its CRC-32C check "
                 "(damaged on disk); readers get corrupt_record there",
                 topic, partition, (long long)h->base_offset, (long long)eng_batch_last_offset(h));
    err->first_offset = h->base_offset;
    err->last_offset = eng_batch_last_offset(h);
    return fail(err, "corrupt_record",
                "the stored batch holding offsets %lld to %lld fails its CRC-32C check: its bytes "
                "on disk are damaged; records before it read normally, and a read from offset %lld "
                "skips it",
                (long long)h->base_offset, (long long)eng_batch_last_offset(h),
                (long long)eng_batch_last_offset(h) + 1);
}

int api_stored_batch_unreadable(const eng_batch_header *h, api_codec_err *err)
{
    err->first_offset = h->base_offset;
    err->last_offset = eng_batch_last_offset(h);
    return fail(err, "corrupt_record",
                "the stored batch holding offsets %lld to %lld passes its CRC-32C check but its "
                "records do not decode (it was written by a producer that broke the format); "
                "records before them read normally, and a read from offset %lld skips the batch",
                (long long)h->base_offset, (long long)eng_batch_last_offset(h),
                (long long)eng_batch_last_offset(h) + 1);
}

/* A header name as a JSON string.  Kafka's header keys are strings, but a
 * producer's bytes are stored as sent: Kafka's Java client decodes one that
 * is not UTF-8 with U+FFFD in place of the bad bytes, and so does this.
 * (Answering invalid_utf8 made the record unreadable, base64 reads too.)
 * NULL only when out of memory. */
static json_t *header_name_json(const uint8_t *key, int32_t len)
{
    size_t n = len > 0 ? (size_t)len : 0;
    json_t *j = utf8_json(key, n);
    if (j)
        return j;
    size_t fixed_len;
    char *fixed = api_utf8_repair(key, n, false, &fixed_len);
    if (!fixed)
        return NULL;
    j = json_stringn_nocheck(fixed, fixed_len);
    free(fixed);
    return j;
}

json_t *api_codec_err_details(const api_codec_err *e)
{
    /* A client that tails past such a record needs its offset as a number:
     * to re-read it with encoding=base64, or to skip it. */
    if (e->code && e->has_record_offset && strcmp(e->code, "invalid_utf8") == 0)
        return json_pack("{s:I}", "offset", (json_int_t)e->record_offset);
    if (e->code && e->has_record_index && strcmp(e->code, "invalid_timestamp") == 0)
        return json_pack("{s:I}", "record", (json_int_t)e->record_index);
    if (!e->code || strcmp(e->code, "corrupt_record") != 0 || e->last_offset < e->first_offset ||
        e->last_offset < 0)
        return NULL;
    return json_pack("{s:I,s:I,s:I}", "first_offset", (json_int_t)e->first_offset, "last_offset",
                     (json_int_t)e->last_offset, "next_offset", (json_int_t)e->last_offset + 1);
}

json_t *api_record_json(const eng_record *r, bool log_append_time, bool base64, api_codec_err *err)
{
    bool bad = false;
    json_t *o = json_object();
    json_t *hdrs = json_array();
    if (!o || !hdrs)
        goto oom;
    json_object_set_new(o, "offset", json_integer(r->offset));
    json_object_set_new(o, "timestamp", json_integer(r->timestamp));
    json_object_set_new(o, "timestamp_type",
                        json_string_nocheck(log_append_time ? "LogAppendTime" : "CreateTime"));
    json_object_set_new(o, "key", bytes_json(r->key, r->key_len, base64, &bad));
    json_object_set_new(o, "value", bytes_json(r->value, r->value_len, base64, &bad));
    const uint8_t *p = r->headers;
    eng_record_header h;
    while (eng_record_header_next(&p, r->headers_end, &h) == 1) {
        json_t *ho = json_object();
        json_t *name = header_name_json(h.key, h.key_len);
        if (!name) {
            json_decref(ho);
            goto oom;
        }
        json_object_set_new(ho, "name", name);
        json_object_set_new(ho, "value", bytes_json(h.value, h.value_len, base64, &bad));
        json_array_append_new(hdrs, ho);
    }
    json_object_set_new(o, "headers", hdrs);
    if (bad) {
        json_decref(o);
        fail(err, "invalid_utf8",
             "record at offset %lld holds bytes that are not UTF-8; read with encoding=base64",
             (long long)r->offset);
        err->has_record_offset = true;
        err->record_offset = r->offset;
        return NULL;
    }
    return o;
oom:
    json_decref(o);
    json_decref(hdrs);
    fail(err, "internal_error", "out of memory");
    return NULL;
}

int32_t api_murmur2(const uint8_t *data, size_t length)
{
    const uint32_t m = 0x5bd1e995;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    size_t len4 = length / 4;
    for (size_t i = 0; i < len4; i++) {
        size_t i4 = i * 4;
        uint32_t k = (uint32_t)data[i4] | (uint32_t)data[i4 + 1] << 8 |
                     (uint32_t)data[i4 + 2] << 16 | (uint32_t)data[i4 + 3] << 24;
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    size_t tail = length & ~(size_t)3;
    switch (length % 4) {
    case 3:
        h ^= (uint32_t)data[tail + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[tail + 1] << 8;
        /* fall through */
    case 1:
        h ^= data[tail];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

int32_t api_partition_for_key(const uint8_t *key, size_t len, int32_t n)
{
    return (int32_t)(((uint32_t)api_murmur2(key, len) & 0x7fffffffu) % (uint32_t)n);
}
