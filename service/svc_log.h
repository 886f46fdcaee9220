/*
 * svc_log.h - the log sink: one line per event on stderr,
 * "2026-11-29T15:03:00.123Z INFO message".
 */
#ifndef SVC_LOG_H
#define SVC_LOG_H

#include "eng_logger.h"

/* Parses DEBUG|INFO|WARN|ERROR (case-insensitive); -1 if unknown. */
int svc_log_parse_level(const char *s);

/* Installs the stderr sink for the engine and api layers. */
void svc_log_install(eng_log_level min_level);

#endif
