/* arena.c - chunked bump allocation with sticky failure and mark/release for scratch use. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise(2) */
#include "base.h"
#include "base_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct SlArenaChunk {
    SlArenaChunk *prev;
    size_t cap, used;
    size_t clean;     /* bytes from here to cap were never handed out: still zero */
    size_t map_bytes; /* mapped directly (big chunks): the mapping's length; 0: calloc */
    _Alignas(max_align_t) unsigned char mem[];
};

/* Chunks this big are mapped directly, with transparent huge pages where the system offers
 * them on request: a big module's arena then takes one fault per 2 MiB instead of one per
 * 4 KiB page, and the pages still cost memory only once touched. */
#define ARENA_MAP_BYTES ((size_t)2 * 1024 * 1024)

void *
sl_table_alloc(size_t bytes)
{
    if (bytes < ARENA_MAP_BYTES)
        return calloc(1, bytes ? bytes : 1);
    size_t mapped = (bytes + ARENA_MAP_BYTES - 1) & ~(ARENA_MAP_BYTES - 1);
    void *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, mapped, MADV_HUGEPAGE);
#endif
    return p;
}

void
sl_table_free(void *p, size_t bytes)
{
    if (!p)
        return;
    if (bytes < ARENA_MAP_BYTES)
        free(p);
    else
        munmap(p, (bytes + ARENA_MAP_BYTES - 1) & ~(ARENA_MAP_BYTES - 1));
}

static void
chunk_free(SlArenaChunk *c)
{
    if (c->map_bytes)
        munmap(c, c->map_bytes);
    else
        free(c);
}

void
sl_arena_init(SlArena *a)
{
    a->head = NULL;
    a->total_bytes = 0;
    a->failed = false;
    a->spare = NULL;
}

void
sl_arena_fini(SlArena *a)
{
    SlArenaChunk *c = a->head;
    while (c) {
        SlArenaChunk *prev = c->prev;
        chunk_free(c);
        c = prev;
    }
    if (a->spare)
        chunk_free(a->spare);
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
    SlArenaChunk *c = a->spare;
    if (c && c->cap >= need) {
        /* Reused: its bytes may be dirty, so every zeroed allocation clears what it takes. */
        a->spare = NULL;
        c->prev = a->head;
        c->used = 0;
        c->clean = c->cap;
        a->head = c;
        a->total_bytes += c->cap;
        return c;
    }
    c = NULL;
    size_t bytes = sizeof(SlArenaChunk) + cap;
    if (bytes >= ARENA_MAP_BYTES) {
        /* Whole huge pages: round up, and hand the rounding to the chunk. */
        bytes = (bytes + ARENA_MAP_BYTES - 1) & ~(ARENA_MAP_BYTES - 1);
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
#ifdef MADV_HUGEPAGE
            madvise(p, bytes, MADV_HUGEPAGE);
#endif
            c = p;
            c->map_bytes = bytes;
            cap = bytes - sizeof(SlArenaChunk);
        }
    }
    if (!c) {
        /* calloc: allocations past `clean` need no memset. */
        if (!(c = calloc(1, sizeof(SlArenaChunk) + cap)))
            return NULL;
        c->map_bytes = 0;
    }
    c->prev = a->head;
    c->cap = cap;
    c->used = 0;
    c->clean = 0;
    a->head = c;
    a->total_bytes += cap;
    return c;
}

/* The first offset at or after `used` whose address is `align`-aligned (the chunk itself is
 * only max_align_t-aligned, so larger alignments depend on where the chunk landed). */
static size_t
aligned_off(const SlArenaChunk *c, size_t used, size_t align)
{
    uintptr_t at = (uintptr_t)(c->mem + used);
    return used + (size_t)(((at + align - 1) & ~(uintptr_t)(align - 1)) - at);
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
        off = aligned_off(c, c->used, align);
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
        off = aligned_off(c, 0, align);
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
sl_arena_extend(SlArena *a, void *p, size_t old_size, size_t new_size)
{
    SlArenaChunk *c = a->head;
    if (a->failed || !c || !p || new_size < old_size)
        return false;
    unsigned char *q = p;
    if (q < c->mem || q > c->mem + c->used || (size_t)(q - c->mem) + old_size != c->used)
        return false;
    size_t off = (size_t)(q - c->mem);
    if (c->cap - off < new_size)
        return false;
    c->used = off + new_size;
    if (c->used > c->clean)
        c->clean = c->used;
    return true;
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
        SlArenaChunk *c = a->head;
        a->total_bytes -= c->cap;
        a->head = prev;
        /* Small chunks only: a big one's pages would stay resident while unused. */
        if (!c->map_bytes && (!a->spare || a->spare->cap < c->cap)) {
            if (a->spare)
                chunk_free(a->spare);
            a->spare = c;
        } else {
            chunk_free(c);
        }
    }
    if (a->head)
        a->head->used = m.used;
}
