/* arena.c - chunked bump allocation with sticky failure and mark/release for scratch use. */
#include "base.h"

#include <stdlib.h>
#include <string.h>

struct SlArenaChunk {
    SlArenaChunk *prev;
    size_t cap, used;
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
    SlArenaChunk *c = malloc(sizeof(SlArenaChunk) + cap);
    if (!c)
        return NULL;
    c->prev = a->head;
    c->cap = cap;
    c->used = 0;
    a->head = c;
    a->total_bytes += cap;
    return c;
}

void *
sl_arena_alloc(SlArena *a, size_t size, size_t align)
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
    memset(p, 0, size);
    return p;
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
    char *p = sl_arena_alloc(a, n + 1, 1);
    if (p && n)
        memcpy(p, s, n);
    return p;
}

void *
sl_arena_memdup(SlArena *a, const void *p, size_t size, size_t align)
{
    void *q = sl_arena_alloc(a, size, align);
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
