/*
 * api_json_arena.c - see api_json_arena.h.
 *
 * Each thread keeps a list of chunks.  An allocation in a scope bumps a
 * pointer in the newest chunk, or opens a chunk of at least CHUNK_BYTES (or
 * the request's size).  free() of a pointer inside one of this thread's
 * chunks does nothing; anything else is a malloc'd pointer and is freed.  At
 * the end of the outermost scope the first chunk is kept for the next scope
 * and the others are returned, so a thread holds CHUNK_BYTES between
 * requests however large its last page was.
 */
#include "api_json_arena.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define CHUNK_BYTES (1u << 20)
#define ALIGN 16u

typedef struct chunk {
    struct chunk *next; /* older chunk */
    size_t used, cap;   /* bytes of data[] */
    _Alignas(16) unsigned char data[];
} chunk;

typedef struct arena {
    chunk *head; /* newest */
    unsigned depth;
} arena;

static _Thread_local arena t_arena;
static _Thread_local bool t_registered;
static _Atomic bool g_installed;
static pthread_key_t g_key; /* its destructor returns an exiting thread's chunks */

static bool owns(const arena *a, const void *p)
{
    for (const chunk *c = a->head; c; c = c->next)
        if ((const unsigned char *)p >= c->data && (const unsigned char *)p < c->data + c->cap)
            return true;
    return false;
}

static void *arena_malloc(size_t n)
{
    arena *a = &t_arena;
    if (a->depth == 0)
        return malloc(n);
    size_t want = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (want < n)
        return NULL;
    chunk *c = a->head;
    if (!c || c->cap - c->used < want) {
        size_t cap = want > CHUNK_BYTES ? want : CHUNK_BYTES;
        chunk *nc = malloc(sizeof *nc + cap);
        if (!nc)
            return NULL;
        nc->next = a->head;
        nc->used = 0;
        nc->cap = cap;
        POISON(nc->data, cap);
        a->head = c = nc;
    }
    void *p = c->data + c->used;
    c->used += want;
    UNPOISON(p, n);
    return p;
}

static void arena_free(void *p)
{
    if (p && !owns(&t_arena, p))
        free(p);
}

static void free_chunks(chunk *c, chunk *keep)
{
    while (c) {
        chunk *next = c->next;
        if (c != keep) {
            UNPOISON(c->data, c->cap);
            free(c);
        }
        c = next;
    }
}

static void on_thread_exit(void *v)
{
    arena *a = v;
    free_chunks(a->head, NULL);
    a->head = NULL;
}

static void install_once(void)
{
    if (pthread_key_create(&g_key, on_thread_exit) != 0)
        return; /* no arena: jansson keeps using malloc */
    json_set_alloc_funcs(arena_malloc, arena_free);
    g_installed = true;
}

void api_json_arena_install(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_once);
}

void api_json_arena_begin(void)
{
    if (!g_installed)
        return;
    if (!t_registered)
        t_registered = pthread_setspecific(g_key, &t_arena) == 0;
    if (t_registered)
        t_arena.depth++;
}

void api_json_arena_end(void)
{
    arena *a = &t_arena;
    if (a->depth == 0 || --a->depth > 0)
        return;
    /* Keep the oldest chunk (CHUNK_BYTES unless the first request was
     * larger), return the rest. */
    chunk *keep = NULL;
    for (chunk *c = a->head; c; c = c->next)
        if (!c->next && c->cap == CHUNK_BYTES)
            keep = c;
    free_chunks(a->head, keep);
    if (keep) {
        keep->used = 0;
        keep->next = NULL;
        POISON(keep->data, keep->cap);
    }
    a->head = keep;
}
