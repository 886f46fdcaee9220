/*
 * api_errors.c - error codes, their HTTP statuses and Kafka equivalents.
 */
#include "api_errors.h"

#include "api_metrics.h"
#include "api_utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct err_def {
    const char *code;
    int status;
    const char *kafka; /* NULL: no Kafka equivalent */
    int kafka_code;
    bool retriable;
} err_def;

static const err_def table[] = {
    {"invalid_request", 400, "INVALID_REQUEST", 42, false},
    {"malformed_json", 400, "INVALID_REQUEST", 42, false},
    {"invalid_partitions", 400, "INVALID_PARTITIONS", 37, false},
    {"unauthorized", 401, "SASL_AUTHENTICATION_FAILED", 58, false},
    {"forbidden", 403, "TOPIC_AUTHORIZATION_FAILED", 29, false},
    {"route_not_found", 404, NULL, 0, false},
    {"unknown_topic", 404, "UNKNOWN_TOPIC_OR_PARTITION", 3, false},
    {"unknown_partition", 404, "UNKNOWN_TOPIC_OR_PARTITION", 3, false},
    {"segment_not_found", 404, NULL, 0, false},
    {"record_not_found", 404, NULL, 0, false},
    {"not_found", 404, NULL, 0, false},
    {"snapshot_not_found", 404, NULL, 0, false},
    {"method_not_allowed", 405, NULL, 0, false},
    {"topic_exists", 409, "TOPIC_ALREADY_EXISTS", 36, false},
    {"snapshot_exists", 409, NULL, 0, false},
    {"busy", 409, NULL, 0, true},
    {"out_of_order_sequence", 409, "OUT_OF_ORDER_SEQUENCE_NUMBER", 45, false},
    {"invalid_producer_epoch", 409, "INVALID_PRODUCER_EPOCH", 47, false},
    {"expected_offset_mismatch", 412, NULL, 0, false},
    {"request_too_large", 413, NULL, 0, false},
    {"record_too_large", 413, "MESSAGE_TOO_LARGE", 10, false},
    {"unsupported_media_type", 415, NULL, 0, false},
    {"offset_out_of_range", 416, "OFFSET_OUT_OF_RANGE", 1, false},
    {"invalid_config", 422, "INVALID_CONFIG", 40, false},
    {"invalid_topic_name", 422, "INVALID_TOPIC_EXCEPTION", 17, false},
    {"invalid_record", 422, "INVALID_RECORD", 87, false},
    {"corrupt_record", 422, "CORRUPT_MESSAGE", 2, false},
    {"invalid_timestamp", 422, "INVALID_TIMESTAMP", 32, false},
    {"invalid_base64", 422, "INVALID_RECORD", 87, false},
    {"invalid_utf8", 422, "INVALID_RECORD", 87, false},
    {"not_compacted", 422, NULL, 0, false},
    {"invalid_snapshot_name", 422, NULL, 0, false},
    {"too_many_waiters", 429, "THROTTLING_QUOTA_EXCEEDED", 89, true},
    {"internal_error", 500, "UNKNOWN_SERVER_ERROR", -1, false},
    {"not_ready", 503, "LEADER_NOT_AVAILABLE", 5, true},
    {"log_dir_offline", 503, "KAFKA_STORAGE_ERROR", 56, true},
    {"shutting_down", 503, "BROKER_NOT_AVAILABLE", 8, true},
    {"overloaded", 503, "THROTTLING_QUOTA_EXCEEDED", 89, true},
    {"disk_full", 507, "KAFKA_STORAGE_ERROR", 56, true},
    {"too_many_open_files", 507, "KAFKA_STORAGE_ERROR", 56, true},
    {"out_of_memory", 507, "KAFKA_STORAGE_ERROR", 56, true},
};

static const err_def *find_def(const char *code)
{
    const err_def *internal = NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].code, code) == 0)
            return &table[i];
        if (strcmp(table[i].code, "internal_error") == 0)
            internal = &table[i];
    }
    return internal;
}

int api_error_status(const char *code)
{
    return find_def(code)->status;
}

/* The message as a JSON string.  Messages quote what the client sent (a
 * path, a name), which may not be UTF-8, and a "%.64s" may cut a character
 * in two: such bytes are written as \xNN so the message still says what
 * was wrong.  Returns a new reference or NULL. */
static json_t *message_string(const char *message)
{
    json_t *j = json_string(message);
    if (j)
        return j;
    size_t len;
    char *text = api_utf8_repair((const uint8_t *)message, strlen(message), true, &len);
    if (!text)
        return NULL;
    j = json_stringn(text, len);
    free(text);
    return j;
}

/* The error object, counted by no metric. */
static json_t *error_object(const api_request *req, const err_def *d, const char *message,
                            json_t *details)
{
    json_t *o = json_object();
    if (!o) {
        json_decref(details);
        return NULL;
    }
    json_object_set_new(o, "error_code", json_string(d->code));
    json_t *msg = message_string(message ? message : "");
    json_object_set_new(o, "message", msg ? msg : json_string("(unprintable message)"));
    json_object_set_new(o, "kafka_error", d->kafka ? json_string(d->kafka) : json_null());
    json_object_set_new(o, "kafka_error_code", d->kafka ? json_integer(d->kafka_code) : json_null());
    json_object_set_new(o, "retriable", json_boolean(d->retriable));
    json_object_set_new(o, "details", details ? details : json_object());
    json_object_set_new(o, "request_id", json_string(req ? req->request_id : ""));
    return o;
}

json_t *api_error_object(const api_request *req, const char *code, const char *message,
                         json_t *details)
{
    const err_def *d = find_def(code);
    if (!strcmp(d->code, "corrupt_record"))
        api_metrics_corrupt_record();
    return error_object(req, d, message, details);
}

void api_error(api_response *resp, const api_request *req, const char *code, json_t *details,
               const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    free(resp->raw);
    resp->raw = NULL;
    resp->content_type = NULL;
    api_resp_json(resp, find_def(code)->status, api_error_object(req, code, msg, details));
}

void api_error_stopping(api_response *resp, const api_request *req, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_error(resp, req, "shutting_down", NULL, "%s", msg);
    api_resp_header(resp, "Retry-After", "1");
}

const char *api_error_code_for(int rc)
{
    switch (rc) {
    case ENG_EINVAL: return "invalid_request";
    case ENG_ECORRUPT:
    case ENG_ECRC: return "corrupt_record";
    case ENG_ETOOLARGE: return "record_too_large";
    case ENG_ENOTOPIC: return "unknown_topic";
    case ENG_ENOPARTITION: return "unknown_partition";
    case ENG_ETOPICEXISTS: return "topic_exists";
    case ENG_ETOPICNAME: return "invalid_topic_name";
    case ENG_ECONFIG: return "invalid_config";
    case ENG_EOFFSET: return "offset_out_of_range";
    case ENG_EEXPECTED: return "expected_offset_mismatch";
    case ENG_ETIMESTAMP: return "invalid_timestamp";
    case ENG_ENULLKEY:
    case ENG_EINVRECORD:
    case ENG_EUNSUPPORTED: return "invalid_record";
    case ENG_ESEQUENCE: return "out_of_order_sequence";
    case ENG_EPRODUCER_FENCED: return "invalid_producer_epoch";
    case ENG_ENOTFOUND: return "not_found";
    case ENG_EOFFLINE: return "log_dir_offline";
    case ENG_ESHUTDOWN: return "shutting_down";
    case ENG_EBUSY: return "busy";
    case ENG_ENOTCOMPACT: return "not_compacted";
    case ENG_ENOTREADY: return "not_ready";
    case ENG_ELIMIT: return "too_many_waiters";
    case -ENOSPC:
    case -EDQUOT: return "disk_full";
    case -EMFILE:
    case -ENFILE: return "too_many_open_files";
    case -ENOMEM: return "out_of_memory";
    default: return "internal_error";
    }
}

json_t *api_engine_details(int rc, const eng_errdetail *d)
{
    json_t *details = json_object();
    if (d && d->key[0])
        json_object_set_new(details, "key", json_string(d->key));
    if (d && d->has_bounds) {
        if (rc == ENG_EOFFSET) {
            json_object_set_new(details, "log_start_offset", json_integer(d->lo));
            json_object_set_new(details, "high_watermark", json_integer(d->hi));
        } else if (rc == ENG_EEXPECTED) {
            json_object_set_new(details, "expected_offset", json_integer(d->lo));
            json_object_set_new(details, "log_end_offset", json_integer(d->hi));
        } else if (rc == ENG_ETOOLARGE) {
            json_object_set_new(details, "max_bytes", json_integer(d->hi));
        } else if (rc == ENG_ECORRUPT) { /* damage in the .log: where reading goes on */
            json_object_set_new(details, "next_offset", json_integer(d->hi));
        } else if (rc == ENG_ENULLKEY || rc == ENG_ETIMESTAMP) {
            json_object_set_new(details, "batch", json_integer(d->lo));
            json_object_set_new(details, "offset_delta", json_integer(d->hi));
        }
    }
    return details;
}

void api_error_from_engine(api_response *resp, const api_request *req, int rc,
                           const eng_errdetail *d)
{
    const char *msg = d && d->message[0] ? d->message : eng_strerror(rc);
    api_error(resp, req, api_error_code_for(rc), api_engine_details(rc, d), "%s", msg);
}

void api_error_from_append(api_response *resp, const api_request *req, int rc,
                           const eng_errdetail *d)
{
    const err_def *def = find_def(api_error_code_for(rc));
    const char *msg = d && d->message[0] ? d->message : eng_strerror(rc);
    free(resp->raw);
    resp->raw = NULL;
    resp->content_type = NULL;
    api_resp_json(resp, def->status, error_object(req, def, msg, api_engine_details(rc, d)));
}
