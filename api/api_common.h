/*
 * api_common.h - helpers every handler module uses: strict number parsing
 * for path and query values, partition lookup with the right error, JSON
 * body parsing with the right error.  Each helper that can fail fills the
 * response with the error itself and returns false, so handlers read as
 * straight-line code.
 */
#ifndef API_COMMON_H
#define API_COMMON_H

#include "api_ctx.h"
#include "api_request.h"
#include "eng_partition.h"

#include <stdbool.h>
#include <stdint.h>

/* Strict base-10 int64: no sign unless negative, no spaces, no trailing bytes. */
bool api_parse_i64(const char *s, int64_t *out);

/* Query integer `key` in [min, max], or dflt when absent. */
bool api_query_i64(const api_request *req, api_response *resp, const char *key, int64_t dflt,
                   int64_t min, int64_t max, int64_t *out);

/* Query boolean: absent -> dflt; "", "1", "true" -> true; "0", "false" -> false. */
bool api_query_bool(const api_request *req, api_response *resp, const char *key, bool dflt,
                    bool *out);


/* Every listing pages the same way (the topics, a topic's partitions, the
 * log dir's partitions, a partition's segments, the snapshots): at most
 * ?limit= items,
 * API_PAGE_DEFAULT when absent, so a client that ignores paging gets a
 * bounded answer rather than one document of every item; and ?after=, a
 * key of the listing's stable order (topic name; partition id; topic and
 * partition; base offset), from which the page goes on.  A key, not a
 * position: a client that follows "next_after" sees every item that exists
 * from its first page to its last exactly once, whatever is created or
 * deleted between its pages. */
#define API_PAGE_DEFAULT 1000
#define API_PAGE_MAX 100000

/* ?limit= in [1, API_PAGE_MAX], API_PAGE_DEFAULT when absent. */
bool api_page_limit(const api_request *req, api_response *resp, size_t *limit);

/* ?after= as given (borrowed from req), NULL when absent; an empty one is
 * refused.  what names the key in the 400's message ("a topic name"). */
bool api_page_after(const api_request *req, api_response *resp, const char *what,
                    const char **after);

/* Answers a refused ?after= value: 400 naming what the key must be. */
void api_page_bad_after(const api_request *req, api_response *resp, const char *what);

/* ?limit= and ?after= of a listing keyed by name: after (borrowed from req,
 * NULL when absent) must pass valid.  false: resp holds the 400. */
bool api_page_query_name(const api_request *req, api_response *resp, const char *what,
                         bool (*valid)(const char *), size_t *limit, const char **after);

/* The same for a listing keyed by a number in [0, max]: *after is -1 when
 * absent. */
bool api_page_query_number(const api_request *req, api_response *resp, const char *what,
                           int64_t max, size_t *limit, int64_t *after);

/* The page of a listing keyed by name: of names (n, sorted by strcmp), the
 * items [*first, *end), at most limit of them, starting at the first name
 * above after (NULL: from the start), which need not name one any more. */
void api_page_names(char *const *names, size_t n, const char *after, size_t limit,
                    size_t *first, size_t *end);

/* Adds the paging fields to a listing's answer o: "has_more", and
 * "next_after", the ?after= of the next page (next, stolen), null when
 * there is none. */
void api_page_answer(json_t *o, bool has_more, json_t *next);

/* Pages a listing of partitions across topics (the log dir's, the
 * cleaner's), which come by topic name (strcmp, as the engine sorts its
 * topics), then id.  Its ?after= is a partition's directory name,
 * <topic>-<partition>, read by its last '-' as the engine reads directory
 * names. */
typedef struct api_part_pager {
    size_t limit, listed;
    bool has_after, more;
    char after_topic[ENG_TOPIC_NAME_MAX + 1];
    int64_t after_partition;
    json_t *next; /* owned until api_part_pager_answer */
} api_part_pager;

/* Reads ?limit= and ?after=; false with the 400 answered. */
bool api_part_pager_init(const api_request *req, api_response *resp, api_part_pager *pg);

/* Offered each partition of the listing in order: true when p goes on
 * this page. */
bool api_part_pager_take(api_part_pager *pg, eng_partition *p);

/* Adds has_more and next_after to o. */
void api_part_pager_answer(api_part_pager *pg, json_t *o);

/* Looks up {topic}/{partition}; on success *out is referenced. */
bool api_lookup_partition(api_ctx *ctx, const api_request *req, const api_params *params,
                          api_response *resp, eng_partition **out);

/* True when the Content-Type is absent or application/json (any case, with
 * optional parameters); otherwise fills resp with 415 and returns false. */
/* True if the Content-Type value ct names exactly `type` (parameters allowed). */
bool api_media_type_is(const char *ct, const char *type);

bool api_json_content_type(const api_request *req, api_response *resp);

/* Parses the body as a JSON object (an empty body gives an empty object when
 * allow_empty).  Returns a new reference or NULL with resp filled. */
json_t *api_body_object(const api_request *req, api_response *resp, bool allow_empty);

/* A config value given as a JSON string, number or boolean, as the text the
 * engine stores (a real in the shortest form that reads back the same, so
 * 0.3 is "0.3").  False if v is another type or does not fit. */
bool api_config_text(json_t *v, char *buf, size_t len);

/* The engine manager (never NULL once dispatch let the request through);
 * borrowed: the context owns it. */
eng_manager *api_mgr(api_ctx *ctx);

/* Describes topic into *d (clear it with eng_topic_desc_clear).  False with
 * the error answered: invalid name (400), unknown topic (404). */
bool api_describe_topic(api_ctx *ctx, const api_request *req, api_response *resp,
                        const char *topic, eng_topic_desc *d);

/* Every partition of topic, referenced (eng_partitions_release), and its
 * description when d is not NULL, all of one incarnation of the name (see
 * eng_manager_topic_partitions).  False with the error answered: invalid
 * name (400), unknown topic (404). */
bool api_topic_partitions(api_ctx *ctx, const api_request *req, api_response *resp,
                          const char *topic, eng_topic_desc *d, eng_partition ***parts,
                          size_t *n);

/* A maintenance run's request (retention:run, compaction:run): its
 * arguments, ?partition=N and a body of {"dry_run": bool} or none, and the
 * partitions it covers, referenced (release with eng_partitions_release):
 * those of topic, or of every topic when topic is NULL, only partition N
 * when given.  False with the error answered (400 for the arguments; invalid
 * topic name, unknown topic or partition). */
bool api_maintenance_targets(api_ctx *ctx, const api_request *req, api_response *resp,
                             const char *topic, bool *dry_run, eng_partition ***out, size_t *n);

/* Ends a handler's JSON arena scope (api_json_arena.h): serializes resp's
 * JSON into bytes first (size_hint: a guess at their length), so nothing
 * made in the scope outlives it; answers 500 if that runs out of memory. */
void api_arena_close(const api_request *req, api_response *resp, size_t size_hint);

#endif
