/* intern.c - string interning: one record per distinct text, compared by pointer.
 * The table keeps each record's hash beside its pointer, so a probe that meets another name
 * costs no load from the record; only a probable match reads the text. */
#include "base.h"

#include <stdlib.h>
#include <string.h>

#define INTERN_MIN_CAP ((size_t)1024)

/* A fast hash for short names, eight bytes per step; private to the interner (sl_hash_bytes
 * is the stable, recorded one). */
static uint32_t
name_hash(const char *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
    }
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return (uint32_t)h;
}

void
sl_interner_init(SlInterner *in, SlArena *arena)
{
    in->arena = arena;
    in->slots = NULL;
    in->cap = 0;
    in->count = 0;
}

void
sl_interner_fini(SlInterner *in)
{
    free(in->slots);
    in->slots = NULL;
    in->cap = in->count = 0;
}

static bool
resize(SlInterner *in, size_t cap)
{
    SlInternSlot *slots = calloc(cap, sizeof(SlInternSlot));
    if (!slots)
        return false;
    for (size_t i = 0; i < in->cap; i++) {
        if (!in->slots[i].sym)
            continue;
        size_t j = in->slots[i].hash & (cap - 1);
        while (slots[j].sym)
            j = (j + 1) & (cap - 1);
        slots[j] = in->slots[i];
    }
    free(in->slots);
    in->slots = slots;
    in->cap = cap;
    return true;
}

bool
sl_interner_reserve(SlInterner *in, size_t n)
{
    size_t cap = in->cap ? in->cap : INTERN_MIN_CAP;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 4 / sizeof(SlInternSlot))
            return false;
        cap *= 2;
    }
    return cap == in->cap || resize(in, cap);
}

SlSym
sl_intern(SlInterner *in, SlStr s)
{
    if (s.len > UINT32_MAX)
        return NULL;
    if ((in->count + 1) * 2 > in->cap && !resize(in, in->cap ? in->cap * 2 : INTERN_MIN_CAP))
        return NULL;
    uint32_t h = name_hash(s.ptr, s.len);
    size_t mask = in->cap - 1;
    size_t j = h & mask;
    for (;;) {
        SlSym cur = in->slots[j].sym;
        if (!cur)
            break;
        if (in->slots[j].hash == h && cur->len == s.len && memcmp(cur->text, s.ptr, s.len) == 0)
            return cur;
        j = (j + 1) & mask;
    }
    SlSymRec *r =
        sl_arena_alloc_uninit(in->arena, sizeof(SlSymRec) + s.len + 1, _Alignof(SlSymRec));
    if (!r)
        return NULL;
    r->len = (uint32_t)s.len;
    r->hash = h;
    if (s.len)
        memcpy(r->text, s.ptr, s.len);
    r->text[s.len] = '\0';
    in->slots[j].sym = r;
    in->slots[j].hash = h;
    in->count++;
    return r;
}

SlSym
sl_intern_cstr(SlInterner *in, const char *s)
{
    return sl_intern(in, sl_str(s));
}
