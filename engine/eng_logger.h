/*
 * eng_logger.h - how the engine reports events without knowing where they go.
 *
 * The engine never prints.  It calls eng_logf(), which forwards one formatted
 * line to the sink that service/ installed with eng_logger_set_sink().  With
 * no sink installed, lines are dropped (unit tests stay quiet).
 */
#ifndef ENG_LOGGER_H
#define ENG_LOGGER_H

typedef enum { ENG_LOG_DEBUG, ENG_LOG_INFO, ENG_LOG_WARN, ENG_LOG_ERROR } eng_log_level;

/* The sink receives one line (no trailing newline); it must be thread-safe. */
typedef void (*eng_log_sink)(eng_log_level level, const char *line, void *ctx);

void eng_logger_set_sink(eng_log_sink sink, void *ctx, eng_log_level min_level);

void eng_logf(eng_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ENG_DEBUG(...) eng_logf(ENG_LOG_DEBUG, __VA_ARGS__)
#define ENG_INFO(...) eng_logf(ENG_LOG_INFO, __VA_ARGS__)
#define ENG_WARN(...) eng_logf(ENG_LOG_WARN, __VA_ARGS__)
#define ENG_ERROR(...) eng_logf(ENG_LOG_ERROR, __VA_ARGS__)

#endif
