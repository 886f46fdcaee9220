/*
 * api_producers.c - the idempotent producers a partition knows (Kafka's
 * DescribeProducers): what a retried batch is checked against.  Paged by
 * producer id, as every listing that grows pages (api_common.h): producer
 * ids are the clients' to choose, and a day's worth of them is many.
 */
#include "api_common.h"
#include "api_errors.h"
#include "api_router.h"

#include <stdlib.h>

static json_t *producer_json(const eng_producer_entry *e)
{
    json_t *batches = json_array();
    for (uint32_t i = 0; i < e->nbatches; i++) {
        const eng_producer_batch *b = &e->batches[i];
        int64_t first_seq = eng_producer_batch_first_seq(b);
        json_array_append_new(
            batches, json_pack("{s:I,s:i,s:I,s:I,s:I}", "first_sequence", (json_int_t)first_seq,
                               "last_sequence", (int)b->last_seq, "first_offset",
                               (json_int_t)(b->last_offset - b->offset_delta), "last_offset",
                               (json_int_t)b->last_offset, "timestamp", (json_int_t)b->timestamp));
    }
    const eng_producer_batch *last = e->nbatches ? &e->batches[e->nbatches - 1] : NULL;
    json_t *o = json_pack("{s:I,s:i,s:i,s:o}", "producer_id", (json_int_t)e->producer_id,
                          "producer_epoch", (int)e->epoch, "last_sequence",
                          last ? (int)last->last_seq : -1, "batches", batches);
    json_object_set_new(o, "last_offset", last ? json_integer(last->last_offset) : json_null());
    json_object_set_new(o, "last_timestamp",
                        e->last_timestamp >= 0 ? json_integer(e->last_timestamp) : json_null());
    return o;
}

void api_h_producers(api_ctx *ctx, const api_request *req, const api_params *params,
                     api_response *resp)
{
    size_t limit;
    int64_t after;
    if (!api_page_query_number(req, resp, "a producer id", INT64_MAX, &limit, &after))
        return;
    eng_partition *p;
    if (!api_lookup_partition(ctx, req, params, resp, &p))
        return;
    eng_producer_entry *e;
    size_t n;
    int rc = eng_partition_producers(p, &e, &n);
    if (rc) {
        api_error_from_engine(resp, req, rc, NULL);
        eng_partition_unref(p);
        return;
    }
    /* Sorted by id: the page starts past the cursor. */
    size_t first = 0;
    while (first < n && e[first].producer_id <= after)
        first++;
    size_t end = n - first < limit ? n : first + limit;
    json_t *arr = json_array();
    for (size_t i = first; i < end; i++)
        json_array_append_new(arr, producer_json(&e[i]));
    json_t *o = json_pack("{s:s,s:i,s:I,s:o}", "topic", eng_partition_topic(p), "partition",
                          (int)eng_partition_id(p), "producer_count", (json_int_t)n, "producers",
                          arr);
    api_page_answer(o, end < n, end > first ? json_integer(e[end - 1].producer_id) : NULL);
    free(e);
    api_resp_json(resp, 200, o);
    eng_partition_unref(p);
}
