/*
 * api_metrics.h - Prometheus metrics (text format 0.0.4) at GET /metrics.
 *
 * Request counts and latency histograms are kept here, per route of the
 * route table (so label cardinality is bounded by the table) and status;
 * everything else is read from the engine when scraped: per-topic traffic,
 * per-partition offsets and sizes, retention and cleaner work, fsync latency,
 * parked readers and open streams, the startup report, build info.
 */
#ifndef API_METRICS_H
#define API_METRICS_H

#include <stdint.h>

/* Counts one answered request: route is the index in api_routes() (-1 for
 * no route), status its HTTP status, us its duration. */
void api_metrics_request(int route, const char *method, int status, int64_t us);

/* Streams open right now (+1 when one starts, -1 when it ends). */
void api_metrics_streams(int delta);

/* Counts one answer or stream event that reported damaged stored data
 * (corrupt_record), so it can be alerted on. */
void api_metrics_corrupt_record(void);

#endif
