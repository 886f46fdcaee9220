/*
 * api_json_arena.h - a per-thread bump allocator for jansson, for the hot
 * paths that build and drop thousands of small JSON values per request.
 *
 * A 1,000-record page is about 20,000 jansson allocations, and freeing the
 * tree then the large response body sent glibc through malloc_consolidate:
 * malloc and free were about 30% of a JSON read's CPU.  Inside a scope
 * (api_json_arena_begin .. end) on one thread, jansson allocates from a chunk
 * that is reset, not freed piece by piece, when the scope ends.
 *
 * Rules for a scope: every JSON value made inside it is released or turned
 * into bytes (api_resp_freeze) before api_json_arena_end, and none is handed
 * to another thread.  Strings jansson returns for the caller to free
 * (json_dumps) are arena memory inside a scope: use json_dumpb or
 * json_dump_callback there, never free() on them.  Values made outside a scope, and frees of them inside
 * one, go to malloc and free as before.  Under AddressSanitizer the chunk is
 * poisoned when a scope ends, so a value that outlived its scope is reported.
 */
#ifndef API_JSON_ARENA_H
#define API_JSON_ARENA_H

/* Routes jansson's allocations through the arena hooks; call once at start
 * before any JSON value exists (idempotent, thread-safe). */
void api_json_arena_install(void);

/* Opens a scope on this thread (scopes nest; the outermost one counts).  A
 * no-op until api_json_arena_install. */
void api_json_arena_begin(void);

/* Closes it; at the outermost end the chunk is reset for the next scope. */
void api_json_arena_end(void);

#endif
