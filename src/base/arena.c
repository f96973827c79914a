/* arena.c - chunked bump allocation with sticky failure and mark/release for scratch use. */
#include "base.h"

#include <stdlib.h>
#include <string.h>

struct SlArenaChunk {
    SlArenaChunk *prev;
    size_t cap, used;
    size_t clean; /* bytes from here to cap were never handed out: still zero from calloc */
    _Alignas(max_align_t) unsigned char mem[];
};

void
sl_arena_init(SlArena *a)
{
    a->head = NULL;
    a->total_bytes = 0;
    a->failed = false;
}

void
sl_arena_fini(SlArena *a)
{
    SlArenaChunk *c = a->head;
    while (c) {
        SlArenaChunk *prev = c->prev;
        free(c);
        c = prev;
    }
    sl_arena_init(a);
}

static SlArenaChunk *
chunk_new(SlArena *a, size_t need)
{
    size_t cap = SL_ARENA_CHUNK_BYTES;
    /* Grow chunk size with the arena so that huge modules do not make millions of chunks. */
    if (a->total_bytes / 4 > cap)
        cap = a->total_bytes / 4;
    if (need > cap)
        cap = need;
    /* calloc: large chunks come zeroed from mmap without being touched, so pages cost RSS
     * only once used and allocations past `clean` need no memset. */
    SlArenaChunk *c = calloc(1, sizeof(SlArenaChunk) + cap);
    if (!c)
        return NULL;
    c->prev = a->head;
    c->cap = cap;
    c->used = 0;
    c->clean = 0;
    a->head = c;
    a->total_bytes += cap;
    return c;
}

/* Bump-allocates `size` bytes; the caller learns whether they may hold old data (only after
 * sl_arena_release rolled back over them). */
static void *
bump(SlArena *a, size_t size, size_t align, bool zero)
{
    if (a->failed)
        return NULL;
    if (size == 0)
        size = 1;
    if (align == 0 || (align & (align - 1)))
        align = _Alignof(max_align_t);
    SlArenaChunk *c = a->head;
    size_t off = 0;
    if (c) {
        off = (c->used + align - 1) & ~(align - 1);
        if (off > c->cap || c->cap - off < size)
            c = NULL;
    }
    if (!c) {
        if (size > SIZE_MAX - align) {
            a->failed = true;
            return NULL;
        }
        c = chunk_new(a, size + align);
        if (!c) {
            a->failed = true;
            return NULL;
        }
        off = 0;
    }
    void *p = c->mem + off;
    c->used = off + size;
    if (off < c->clean && zero)
        memset(p, 0, (c->clean < c->used ? c->clean : c->used) - off);
    if (c->used > c->clean)
        c->clean = c->used;
    return p;
}

void *
sl_arena_alloc(SlArena *a, size_t size, size_t align)
{
    return bump(a, size, align, true);
}

void *
sl_arena_alloc_uninit(SlArena *a, size_t size, size_t align)
{
    return bump(a, size, align, false);
}

void *
sl_arena_alloc_array(SlArena *a, size_t n, size_t size, size_t align)
{
    if (size && n > SIZE_MAX / size) {
        a->failed = true;
        return NULL;
    }
    return sl_arena_alloc(a, n * size, align);
}

char *
sl_arena_strndup(SlArena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX) {
        a->failed = true;
        return NULL;
    }
    char *p = bump(a, n + 1, 1, false);
    if (p) {
        if (n)
            memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

void *
sl_arena_memdup(SlArena *a, const void *p, size_t size, size_t align)
{
    void *q = bump(a, size, align, size == 0);
    if (q && size)
        memcpy(q, p, size);
    return q;
}

bool
sl_arena_failed(const SlArena *a)
{
    return a->failed;
}

SlArenaMark
sl_arena_mark(const SlArena *a)
{
    SlArenaMark m = {a->head, a->head ? a->head->used : 0};
    return m;
}

void
sl_arena_release(SlArena *a, SlArenaMark m)
{
    while (a->head && a->head != m.chunk) {
        SlArenaChunk *prev = a->head->prev;
        a->total_bytes -= a->head->cap;
        free(a->head);
        a->head = prev;
    }
    if (a->head)
        a->head->used = m.used;
}
