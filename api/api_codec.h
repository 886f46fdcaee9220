/*
 * api_codec.h - records between JSON and the engine's record specs.
 *
 * Pure functions (no HTTP): the append body is parsed into eng_record_spec
 * views that point into the parsed JSON document (utf8 encoding) or into one
 * arena holding every base64-decoded field, so a request costs a handful of
 * allocations whatever its record count.  Reads turn decoded records back
 * into JSON objects.
 *
 * Append body: {"encoding":"utf8|base64","expected_offset":N,"records":[
 *   {"key":"k"|null,"value":"v"|null,"timestamp":ms,"partition":p,
 *    "headers":[{"name":"h","value":"x"|null}]}]}
 * A missing key is null; "value" must be present (null = tombstone); unknown
 * fields are refused so typos do not silently drop data.
 */
#ifndef API_CODEC_H
#define API_CODEC_H

#include "eng_batch.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct api_codec_err {
    const char *code; /* an api_errors code, e.g. "malformed_json" */
    char message[320];
    /* corrupt_record: the damaged batch's offsets (last < 0: not set) */
    int64_t first_offset, last_offset;
    /* invalid_utf8 on a read: the record that cannot be read as utf8 */
    bool has_record_offset;
    int64_t record_offset;
    /* invalid_timestamp in an append body: the record's place in the request */
    bool has_record_index;
    size_t record_index;
} api_codec_err;

/* The error's details object ({"first_offset","last_offset","next_offset"}
 * for a damaged batch, {"offset"} for a record a utf8 read cannot show,
 * {"record"} for an append's record with a bad timestamp), or NULL when it
 * has none.  A new reference. */
json_t *api_codec_err_details(const api_codec_err *e);

typedef struct api_append_body {
    json_t *doc;              /* owned */
    uint8_t *arena;           /* owned: decoded base64 bytes */
    eng_record_spec *recs;    /* owned array of n */
    eng_record_header *hdrs;  /* owned array of every header */
    int32_t *partitions;      /* owned: explicit "partition" or -1, per record */
    size_t n;
    int64_t expected_offset;  /* -1 when absent */
    bool base64;
} api_append_body;

/* Parses an append body; timestamps default to now_ms.  On failure err says
 * which code and why; nothing needs freeing. */
int api_parse_append(const uint8_t *body, size_t len, int64_t now_ms, size_t max_records,
                     api_append_body *out, api_codec_err *err);

void api_append_body_free(api_append_body *b);

/* Encodes n records as one uncompressed batch (base offset 0) into a malloc'd
 * buffer.  Returns 0 or -ENOMEM. */
int api_encode_batch(const eng_record_spec *recs, size_t n, uint8_t **out, size_t *len);

/* Parses "utf8" / "base64" (NULL = utf8); -1 if neither. */
int api_parse_encoding(const char *s, bool *base64);

/* Checks a stored batch's CRC-32C before its records are decoded for a JSON,
 * SSE or NDJSON reader: those formats carry no checksum of their own, so a
 * bit flipped on disk would otherwise reach the client as data.  avail is
 * what follows the batch's start in the fetched bytes; where names the
 * partition for the log (a warning at most every 10 s).  0, or -1 with err
 * set (corrupt_record). */
int api_check_stored_batch(const uint8_t *batch, size_t avail, const eng_batch_header *h,
                           const char *topic, int32_t partition, api_codec_err *err);

/* Fills err for a stored batch whose CRC-32C holds but whose records do not
 * decode (a codec's payload or a record's framing: written so by another
 * program), with the same details as a CRC failure.  Returns -1. */
int api_stored_batch_unreadable(const eng_batch_header *h, api_codec_err *err);

/* One record as JSON: offset, timestamp, timestamp_type, key, value, headers.
 * NULL with err filled when bytes are not valid UTF-8 under utf8 encoding. */
json_t *api_record_json(const eng_record *r, bool log_append_time, bool base64,
                        api_codec_err *err);

/* Decodes strict base64 (padding required, no whitespace) into out (room for
 * 3/4 of len); returns the decoded length or -1. */
long api_base64_decode(const char *in, size_t len, uint8_t *out);

/* Kafka's murmur2 as used by its default partitioner. */
int32_t api_murmur2(const uint8_t *data, size_t len);

/* partition = toPositive(murmur2(key)) % n */
int32_t api_partition_for_key(const uint8_t *key, size_t len, int32_t n);

#endif
