/*
 * svc_meta.h - the JSON form of meta/<topic>.json, handed to the engine as
 * its eng_meta_codec:
 *   {"version":1,"name":"orders","topic_id":"...","partitions":3,
 *    "created_ms":1718000000000,"configs":{"segment.bytes":"1048576"}}
 */
#ifndef SVC_META_H
#define SVC_META_H

#include "eng_manager.h"

eng_meta_codec svc_meta_codec(void);

#endif
