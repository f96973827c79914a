/* intern.c - string interning: one record per distinct text, compared by pointer.
 * The table keeps each record's hash beside its pointer, so a probe that meets another name
 * costs no load from the record; only a probable match reads the text. */
#include "base.h"
#include "base_int.h"

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
    in->plain = false;
}

void
sl_interner_fini(SlInterner *in)
{
    sl_table_free(in->slots, in->cap * sizeof(SlInternSlot));
    in->slots = NULL;
    in->cap = in->count = 0;
}

enum { TAG_SHIFT = 48 };
#define ADDR_MASK (((uint64_t)1 << TAG_SHIFT) - 1)

/* Nonzero 16 bits of the hash, mixed so that they differ from the bits that pick the slot. */
static uint64_t
tag_of(uint32_t h)
{
    return (((uint64_t)h * 0x9e3779b97f4a7c15ull) >> TAG_SHIFT) | 1;
}

static uint64_t
slot_bits(bool plain, SlSym r, uint32_t h)
{
    uint64_t addr = (uint64_t)(uintptr_t)r;
    return plain ? addr : addr | tag_of(h) << TAG_SHIFT;
}

static SlSym
slot_sym(bool plain, uint64_t bits)
{
    return (SlSym)(uintptr_t)(plain ? bits : bits & ADDR_MASK);
}

/* Rebuilds the table at `cap` slots, holding bare addresses from now on when `plain`. */
static bool
rebuild(SlInterner *in, size_t cap, bool plain)
{
    SlInternSlot *slots =
        cap > SIZE_MAX / sizeof(SlInternSlot) ? NULL : sl_table_alloc(cap * sizeof(SlInternSlot));
    if (!slots)
        return false;
    for (size_t i = 0; i < in->cap; i++) {
        if (!in->slots[i].bits)
            continue;
        SlSym r = slot_sym(in->plain, in->slots[i].bits);
        size_t j = r->hash & (cap - 1);
        while (slots[j].bits)
            j = (j + 1) & (cap - 1);
        slots[j].bits = slot_bits(plain, r, r->hash);
    }
    sl_table_free(in->slots, in->cap * sizeof(SlInternSlot));
    in->slots = slots;
    in->cap = cap;
    in->plain = plain;
    return true;
}

static bool
resize(SlInterner *in, size_t cap)
{
    return rebuild(in, cap, in->plain);
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
    /* Grows at 13/16 full: slot tags keep long probe runs cheap (no record is read), and a
     * table reserved at half load then takes as many names again before it doubles. */
    if ((in->count + 1) * 16 > in->cap * 13 && !resize(in, in->cap ? in->cap * 2 : INTERN_MIN_CAP))
        return NULL;
    uint32_t h = name_hash(s.ptr, s.len);
    uint64_t tag = tag_of(h) << TAG_SHIFT;
    size_t mask = in->cap - 1;
    size_t j = h & mask;
    for (;;) {
        uint64_t bits = in->slots[j].bits;
        if (!bits)
            break;
        /* a slot with another tag cannot match; a candidate is checked on the record */
        if (in->plain || (bits & ~ADDR_MASK) == tag) {
            SlSym cur = slot_sym(in->plain, bits);
            if (cur->hash == h && cur->len == s.len && memcmp(cur->text, s.ptr, s.len) == 0)
                return cur;
        }
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
    if (!in->plain && (uint64_t)(uintptr_t)r >> TAG_SHIFT) {
        /* An address with the top bits in use (tagged pointers, 5-level page tables): keep
         * bare addresses from now on, and find the free slot again in the rebuilt table. */
        if (!rebuild(in, in->cap, true))
            return NULL;
        for (j = h & mask; in->slots[j].bits; j = (j + 1) & mask)
            ;
    }
    in->slots[j].bits = slot_bits(in->plain, r, h);
    in->count++;
    return r;
}

void
sl_intern_prefetch(const SlInterner *in, SlStr s)
{
    if (in->cap && s.len <= UINT32_MAX)
        __builtin_prefetch(&in->slots[name_hash(s.ptr, s.len) & (in->cap - 1)]);
}

SlSym
sl_intern_cstr(SlInterner *in, const char *s)
{
    return sl_intern(in, sl_str(s));
}
