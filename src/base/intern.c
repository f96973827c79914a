/* intern.c - string interning: one record per distinct text, compared by pointer. */
#include "base.h"

#include <stdlib.h>
#include <string.h>

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
rehash(SlInterner *in)
{
    size_t cap = in->cap ? in->cap * 2 : 1024;
    SlSym *slots = calloc(cap, sizeof(SlSym));
    if (!slots)
        return false;
    for (size_t i = 0; i < in->cap; i++) {
        SlSym s = in->slots[i];
        if (!s)
            continue;
        size_t j = s->hash & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = s;
    }
    free(in->slots);
    in->slots = slots;
    in->cap = cap;
    return true;
}

SlSym
sl_intern(SlInterner *in, SlStr s)
{
    if (s.len > UINT32_MAX)
        return NULL;
    if ((in->count + 1) * 2 > in->cap && !rehash(in))
        return NULL;
    uint32_t h = (uint32_t)sl_hash_bytes(s.ptr, s.len);
    size_t j = h & (in->cap - 1);
    for (;;) {
        SlSym cur = in->slots[j];
        if (!cur)
            break;
        if (cur->hash == h && cur->len == s.len && memcmp(cur->text, s.ptr, s.len) == 0)
            return cur;
        j = (j + 1) & (in->cap - 1);
    }
    SlSymRec *r = sl_arena_alloc(in->arena, sizeof(SlSymRec) + s.len + 1, _Alignof(SlSymRec));
    if (!r)
        return NULL;
    r->len = (uint32_t)s.len;
    r->hash = h;
    if (s.len)
        memcpy(r->text, s.ptr, s.len);
    r->text[s.len] = '\0';
    in->slots[j] = r;
    in->count++;
    return r;
}

SlSym
sl_intern_cstr(SlInterner *in, const char *s)
{
    return sl_intern(in, sl_str(s));
}
