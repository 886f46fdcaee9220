/* svc_version.h - the release this build reports (--version, /v1/info). */
#ifndef SVC_VERSION_H
#define SVC_VERSION_H

#define LOGSTORE_VERSION "0.1.0"

#endif
