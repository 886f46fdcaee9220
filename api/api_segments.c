/*
 * api_segments.c - looking inside a partition: segment listing, offset and
 * time index dumps, batch headers, and rolling on demand.
 */
#include "api_common.h"
#include "api_errors.h"
#include "api_router.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static json_t *ts_or_null(int64_t ts)
{
    return ts >= 0 ? json_integer(ts) : json_null();
}

void api_h_segments(api_ctx *ctx, const api_request *req, const api_params *params,
                    api_response *resp)
{
    /* Paged: a listing scans every batch header of the segments it shows,
     * so all of a long log's was seconds and megabytes.  ?start= (a
     * position, as the dumps take) stays for the clients that used it;
     * ?after= (a base offset) is the cursor that retention cannot shift. */
    int64_t start, after;
    size_t limit;
    if (!api_query_i64(req, resp, "start", -1, 0, INT64_MAX, &start) ||
        !api_page_query_number(req, resp, "a segment's base offset", INT64_MAX, &limit, &after))
        return;
    if (after >= 0 && start >= 0) {
        api_error(resp, req, "invalid_request", NULL, "give start or after, not both");
        return;
    }
    eng_partition *p;
    if (!api_lookup_partition(ctx, req, params, resp, &p))
        return;
    eng_segment_info *si;
    size_t n, total;
    bool more;
    int rc = after >= 0 ? eng_partition_segments_after(p, after, limit, &si, &n, &total, &more)
                        : eng_partition_segments_page(p, start < 0 ? 0 : (size_t)start, limit, &si,
                                                      &n, &total);
    if (!rc && after < 0)
        more = (start < 0 ? 0 : (size_t)start) + n < total;
    if (rc) {
        eng_errdetail d = {0};
        if (rc == ENG_ENOTOPIC)
            eng_fail(&d, rc, "topic '%s' was deleted", eng_partition_topic(p));
        api_error_from_engine(resp, req, rc, rc == ENG_ENOTOPIC ? &d : NULL);
        eng_partition_unref(p);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        char name[3][32];
        snprintf(name[0], sizeof name[0], "%020" PRId64 ".log", si[i].base_offset);
        snprintf(name[1], sizeof name[1], "%020" PRId64 ".index", si[i].base_offset);
        snprintf(name[2], sizeof name[2], "%020" PRId64 ".timeindex", si[i].base_offset);
        json_t *files = json_pack(
            "[{s:s,s:I,s:I},{s:s,s:I,s:i},{s:s,s:I,s:i}]", "name", name[0], "size_bytes",
            (json_int_t)si[i].size_bytes, "entries", (json_int_t)si[i].batch_count, "name", name[1],
            "size_bytes", (json_int_t)si[i].index_bytes, "entries", (int)si[i].index_entries,
            "name", name[2], "size_bytes", (json_int_t)si[i].timeindex_bytes, "entries",
            (int)si[i].timeindex_entries);
        json_t *o = json_pack("{s:I,s:I,s:I,s:I,s:I,s:b,s:b,s:o}", "base_offset",
                              (json_int_t)si[i].base_offset, "next_offset",
                              (json_int_t)si[i].next_offset, "record_count",
                              (json_int_t)si[i].record_count, "batch_count",
                              (json_int_t)si[i].batch_count, "size_bytes",
                              (json_int_t)si[i].size_bytes, "active", si[i].active, "damaged",
                              si[i].damaged, "files", files);
        json_object_set_new(o, "first_timestamp", ts_or_null(si[i].first_timestamp));
        json_object_set_new(o, "max_timestamp", ts_or_null(si[i].max_timestamp));
        json_array_append_new(arr, o);
    }
    json_t *next = n ? json_integer(si[n - 1].base_offset) : NULL;
    free(si);
    json_t *o = json_pack("{s:s,s:i,s:I,s:o}", "topic", eng_partition_topic(p), "partition",
                          (int)eng_partition_id(p), "segment_count", (json_int_t)total, "segments",
                          arr);
    api_page_answer(o, more, next);
    api_resp_json(resp, 200, o);
    eng_partition_unref(p);
}

/* Resolves {base} to a referenced segment plus the paging window. */
static bool segment_param(api_ctx *ctx, const api_request *req, const api_params *params,
                          api_response *resp, eng_partition **p, eng_segment **seg, int64_t *start,
                          int64_t *limit)
{
    int64_t base;
    if (!api_parse_i64(api_param(params, "base"), &base) || base < 0) {
        api_error(resp, req, "invalid_request", NULL, "segment base offset must be a non-negative integer");
        return false;
    }
    if (!api_query_i64(req, resp, "start", 0, 0, INT64_MAX, start) ||
        !api_query_i64(req, resp, "limit", 1000, 1, 100000, limit))
        return false;
    if (!api_lookup_partition(ctx, req, params, resp, p))
        return false;
    if (seg) {
        int rc = eng_partition_segment(*p, base, seg);
        if (rc == ENG_ENOTOPIC) {
            eng_errdetail d = {0};
            eng_fail(&d, rc, "topic '%s' was deleted", eng_partition_topic(*p));
            api_error_from_engine(resp, req, rc, &d);
            eng_partition_unref(*p);
            return false;
        }
        if (rc) {
            api_error(resp, req, "segment_not_found", json_pack("{s:I}", "base_offset", (json_int_t)base),
                      "%s-%d has no segment with base offset %lld", eng_partition_topic(*p),
                      eng_partition_id(*p), (long long)base);
            eng_partition_unref(*p);
            return false;
        }
    }
    return true;
}

static void dump_index(api_ctx *ctx, const api_request *req, const api_params *params,
                       api_response *resp, bool time)
{
    eng_partition *p;
    eng_segment *seg;
    int64_t start, limit;
    if (!segment_param(ctx, req, params, resp, &p, &seg, &start, &limit))
        return;
    eng_index *idx = NULL;
    int rc = eng_segment_indexes(seg, time ? NULL : &idx, time ? &idx : NULL);
    if (rc == ENG_ENOTOPIC) {
        eng_errdetail d = {0};
        eng_fail(&d, rc, "topic '%s' was deleted", eng_partition_topic(p));
        api_error_from_engine(resp, req, rc, &d);
    } else if (rc) {
        api_error(resp, req, "internal_error", NULL, "the index could not be opened: %s",
                  eng_strerror(rc));
    } else {
        uint32_t n = eng_index_entries(idx);
        json_t *arr = json_array();
        for (int64_t i = start; i < n && i < start + limit; i++) {
            if (time) {
                int64_t ts, off;
                eng_time_index_entry(idx, (uint32_t)i, &ts, &off);
                json_array_append_new(arr, json_pack("{s:I,s:I}", "timestamp", (json_int_t)ts,
                                                     "offset", (json_int_t)off));
            } else {
                int64_t off;
                uint32_t pos;
                eng_offset_index_entry(idx, (uint32_t)i, &off, &pos);
                json_array_append_new(arr, json_pack("{s:I,s:I}", "offset", (json_int_t)off,
                                                     "position", (json_int_t)pos));
            }
        }
        api_resp_json(resp, 200,
                      json_pack("{s:I,s:i,s:I,s:I,s:o}", "base_offset",
                                (json_int_t)eng_segment_base(seg), "entry_count", (int)n,
                                "max_entries", (json_int_t)eng_index_max_entries(idx),
                                "file_bytes", (json_int_t)eng_index_file_bytes(idx), "entries", arr));
    }
    eng_segment_unref(seg);
    eng_partition_unref(p);
}

void api_h_segment_index(api_ctx *ctx, const api_request *req, const api_params *params,
                         api_response *resp)
{
    dump_index(ctx, req, params, resp, false);
}

void api_h_segment_timeindex(api_ctx *ctx, const api_request *req, const api_params *params,
                             api_response *resp)
{
    dump_index(ctx, req, params, resp, true);
}

void api_h_segment_batches(api_ctx *ctx, const api_request *req, const api_params *params,
                           api_response *resp)
{
    eng_partition *p;
    int64_t start, limit, base;
    if (!segment_param(ctx, req, params, resp, &p, NULL, &start, &limit))
        return;
    api_parse_i64(api_param(params, "base"), &base);
    eng_batch_dump *d;
    size_t n, total;
    int64_t damaged_at;
    int rc = eng_partition_dump_batches(p, base, (size_t)start, (size_t)limit, &d, &n, &total,
                                        &damaged_at);
    if (rc == ENG_ENOTFOUND) {
        api_error(resp, req, "segment_not_found", json_pack("{s:I}", "base_offset", (json_int_t)base),
                  "no segment with base offset %lld", (long long)base);
    } else if (rc) {
        api_error_from_engine(resp, req, rc, NULL);
    } else {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            const eng_batch_header *h = &d[i].header;
            static const char *const codecs[] = {"none", "gzip", "snappy", "lz4", "zstd", "?", "?", "?"};
            json_array_append_new(
                arr, json_pack("{s:I,s:I,s:I,s:I,s:i,s:I,s:I,s:i,s:s,s:s,s:I,s:i,s:i,s:i,s:b,s:b,s:b}",
                               "position", (json_int_t)d[i].position, "size_bytes",
                               (json_int_t)eng_batch_size(h), "base_offset", (json_int_t)h->base_offset,
                               "last_offset", (json_int_t)eng_batch_last_offset(h), "record_count",
                               (int)h->record_count, "base_timestamp", (json_int_t)h->base_timestamp,
                               "max_timestamp", (json_int_t)h->max_timestamp, "magic", (int)h->magic,
                               "compression", codecs[h->attributes & 7], "timestamp_type",
                               (h->attributes & 8) ? "LogAppendTime" : "CreateTime", "producer_id",
                               (json_int_t)h->producer_id, "producer_epoch", (int)h->producer_epoch,
                               "base_sequence", (int)h->base_sequence, "partition_leader_epoch",
                               (int)h->leader_epoch, "is_transactional", (h->attributes & 0x10) != 0,
                               "is_control", (h->attributes & 0x20) != 0, "valid", d[i].valid));
            json_t *last = json_array_get(arr, json_array_size(arr) - 1);
            json_object_set_new(last, "crc", json_integer(h->crc));
            json_object_set_new(last, "computed_crc", json_integer(d[i].computed_crc));
            json_object_set_new(last, "delete_horizon_ms",
                                (h->attributes & 0x40) ? json_integer(h->base_timestamp) : json_null());
        }
        free(d);
        json_t *page = json_pack("{s:I,s:I,s:o}", "base_offset", (json_int_t)base, "batch_count",
                                 (json_int_t)total, "batches", arr);
        /* The byte position where the segment stops being whole batches. */
        json_object_set_new(page, "damaged_at",
                            damaged_at >= 0 ? json_integer(damaged_at) : json_null());
        api_resp_json(resp, 200, page);
    }
    eng_partition_unref(p);
}

void api_h_segment_roll(api_ctx *ctx, const api_request *req, const api_params *params,
                        api_response *resp)
{
    /* No options yet: a body that asks for something is refused, not ignored. */
    json_t *body = api_body_object(req, resp, true);
    if (!body)
        return;
    size_t fields = json_object_size(body);
    json_decref(body);
    if (fields) {
        api_error(resp, req, "invalid_request", NULL, "segments:roll takes no body (or {})");
        return;
    }
    eng_partition *p;
    if (!api_lookup_partition(ctx, req, params, resp, &p))
        return;
    eng_partition_info in;
    eng_partition_info_get(p, &in);
    int64_t before = in.active_base_offset;
    int64_t base;
    int rc = eng_partition_roll(p, &base);
    if (rc)
        api_error_from_engine(resp, req, rc, NULL);
    else
        api_resp_json(resp, 200, json_pack("{s:I,s:I,s:b}", "active_segment_base_offset",
                                           (json_int_t)base, "previous_base_offset",
                                           (json_int_t)before, "rolled", base != before));
    eng_partition_unref(p);
}
