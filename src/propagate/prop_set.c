/* prop_set.c - setting shardings and recording where they came from: the interned (kept)
 * shardings, one copy per distinct sharding, and the stable set the fixed point starts from,
 * whose pointers may key memos; prop_set() and the PropOrigin it records; prop_improve()
 * (MaybeImproveInstructionSharding); and origins as text. Owns: PropCtx's interned, kept and
 * stable tables and its origins list. Does not own: which sharding to set (the rules;
 * px_improved() in prop_shd.c). Invariant: a kept sharding is never freed or changed. */
#include "propagate/prop_int.h"

/* ---- setting shardings ---- */

static uint64_t
sh_hash(const ShdSharding *s)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)s->kind;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    MIX(s->shard_group_kind);
    MIX(s->device);
    for (size_t k = 0; k < s->metadata.len; k++)
        MIX((unsigned char)s->metadata.ptr[k]);
    if (s->kind == SHD_TILED) {
        for (uint32_t k = 0; k < s->n_tile_dims; k++)
            MIX(s->tile_dims[k]);
        for (uint32_t k = 0; k < s->n_subgroups; k++)
            MIX(s->subgroups[k]);
        int64_t total = shd_device_count(s);
        for (int64_t k = 0; k < total; k++)
            MIX(s->devices[k]);
        MIX(s->has_iota);
    }
    if (s->kind == SHD_TUPLE)
        for (uint32_t k = 0; k < s->n_leaves; k++)
            MIX(sh_hash(s->leaves[k]));
#undef MIX
    return h;
}

static bool
same_exactly(const ShdSharding *a, const ShdSharding *b)
{
    if (!shd_equal(a, b) || !sl_str_eq(a->metadata, b->metadata) || a->has_iota != b->has_iota)
        return false;
    if (a->kind == SHD_TUPLE)
        for (uint32_t k = 0; k < a->n_leaves; k++)
            if (!same_exactly(a->leaves[k], b->leaves[k]))
                return false;
    return true;
}

/* Slot of a pointer in the kept-pointer set (cap a power of two). */
static uint32_t
ptr_slot(const ShdSharding *s, uint32_t cap)
{
    uint64_t v = (uint64_t)(uintptr_t)s * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(v >> 32) & (cap - 1);
}

/* The kept copy of `s`: one per distinct sharding (most instructions share a few). Kept
 * shardings are never freed or changed, so their pointers also key the transform memo
 * (prop_shd.c); scratch memory is reused, so a scratch pointer is never in `kept`. */
static const ShdSharding *
keep_sharding(PropCtx *cx, const ShdSharding *s)
{
    if (!s)
        return NULL;
    if (prop_is_kept(cx, s))
        return s; /* no two kept shardings are the same: s is the one the probe would find */
    if (cx->n_interned * 2 >= cx->cap_interned) {
        uint32_t cap = cx->cap_interned ? cx->cap_interned * 2 : 1024;
        const ShdSharding **t = SL_NEW_ARRAY(cx->keep, const ShdSharding *, cap);
        const ShdSharding **kt = SL_NEW_ARRAY(cx->keep, const ShdSharding *, cap);
        if (!t || !kt)
            return shd_clone(cx->keep, s);
        for (uint32_t k = 0; k < cx->cap_interned; k++) {
            const ShdSharding *e = cx->interned[k];
            if (!e)
                continue;
            uint32_t p = (uint32_t)sh_hash(e) & (cap - 1);
            while (t[p])
                p = (p + 1) & (cap - 1);
            t[p] = e;
            p = ptr_slot(e, cap);
            while (kt[p])
                p = (p + 1) & (cap - 1);
            kt[p] = e;
        }
        cx->interned = t;
        cx->kept = kt;
        cx->cap_interned = cap;
    }
    uint32_t p = (uint32_t)sh_hash(s) & (cx->cap_interned - 1);
    while (cx->interned[p]) {
        if (cx->interned[p] == s || same_exactly(cx->interned[p], s))
            return cx->interned[p];
        p = (p + 1) & (cx->cap_interned - 1);
    }
    const ShdSharding *c = cx->a != cx->keep ? shd_clone(cx->keep, s) : s;
    if (c) {
        cx->interned[p] = c;
        cx->n_interned++;
        uint32_t q = ptr_slot(c, cx->cap_interned);
        while (cx->kept[q])
            q = (q + 1) & (cx->cap_interned - 1);
        cx->kept[q] = c;
    }
    return c;
}

bool
prop_is_kept(const PropCtx *cx, const ShdSharding *s)
{
    if (!s || !cx->cap_interned)
        return false;
    for (uint32_t q = ptr_slot(s, cx->cap_interned); cx->kept[q];
         q = (q + 1) & (cx->cap_interned - 1))
        if (cx->kept[q] == s)
            return true;
    return false;
}

bool
prop_is_stable(const PropCtx *cx, const ShdSharding *s)
{
    if (prop_is_kept(cx, s))
        return true;
    if (!s || !cx->cap_stable)
        return false;
    for (uint32_t q = ptr_slot(s, cx->cap_stable); cx->stable[q];
         q = (q + 1) & (cx->cap_stable - 1))
        if (cx->stable[q] == s)
            return true;
    return false;
}

/* Records the shardings the fixed point starts from (cx->sh) as stable. */
void
prop_collect_stable(PropCtx *cx)
{
    uint32_t cap = 64;
    while (cap < 2 * cx->n_ids + 2)
        cap *= 2;
    cx->stable = SL_NEW_ARRAY(cx->keep, const ShdSharding *, cap);
    if (!cx->stable)
        return;
    cx->cap_stable = cap;
    for (uint32_t id = 0; id < cx->n_ids; id++) {
        const ShdSharding *s = cx->sh[id];
        if (!s)
            continue;
        uint32_t q = ptr_slot(s, cap);
        while (cx->stable[q] && cx->stable[q] != s)
            q = (q + 1) & (cap - 1);
        cx->stable[q] = s;
    }
}

const ShdSharding *
prop_keep(PropCtx *cx, const ShdSharding *s)
{
    return keep_sharding(cx, s);
}

bool
prop_set(PropCtx *cx, IrInstr *i, const ShdSharding *s, const ShdSharding *candidate)
{
    if (ir_shape_is_tuple(&i->shape))
        s = px_single_tuple(cx, &i->shape, s);
    s = keep_sharding(cx, s);
    candidate = keep_sharding(cx, candidate);
    if (!s)
        return false;
    PropOrigin *o = SL_NEW(cx->keep, PropOrigin);
    if (!o)
        return false;
    o->instr = i;
    o->sharding = s;
    o->from = cx->from;
    o->prev = cx->from ? cx->origin[cx->from->id] : NULL;
    o->replaced = cx->sh[i->id];
    o->candidate = candidate;
    o->dir = cx->dir;
    o->level = cx->level;
    o->rule = cx->rule ? cx->rule : "";
    o->seq = (uint32_t)cx->origins.len;
    SL_VEC_PUSH(&cx->origins, PropOrigin *, o);
    cx->sh[i->id] = s;
    cx->origin[i->id] = o;
    return true;
}

bool
prop_improve(PropCtx *cx, IrInstr *i, const ShdSharding *s, bool combine, bool aggressive)
{
    if (!s)
        return false;
    const ShdSharding *r = px_improved(cx, s, prop_sh(cx, i), &i->shape, combine, aggressive);
    if (!r)
        return false;
    return prop_set(cx, i, r, s);
}

bool
prop_improve_sub(PropCtx *cx, IrInstr *i, const ShdSharding *s, uint32_t index, bool combine,
                 bool aggressive)
{
    if (!s)
        return false;
    if (!ir_shape_is_tuple(&i->shape))
        return index == 0 && prop_improve(cx, i, s, combine, aggressive);
    const ShdSharding *cur = prop_sh(cx, i);
    const ShdSharding *sub = cur ? px_sub(cx, cur, &i->shape, index) : NULL;
    const ShdSharding *r =
        px_improved(cx, s, sub, &i->shape.elems[index], combine, aggressive);
    if (!r)
        return false;
    return prop_set(cx, i, px_replace_sub(cx, cur, &i->shape, index, r), s);
}

bool
prop_same_sharding(const ShdSharding *a, const ShdSharding *b)
{
    if (!a || !b)
        return a == b;
    return shd_equal(a, b);
}

/* ---- origins as text ---- */

static const char *
dir_name(PropDir d)
{
    switch (d) {
    case PROP_DIR_ANNOTATED: return "annotated";
    case PROP_DIR_FORWARD: return "forward";
    case PROP_DIR_BACKWARD: return "backward";
    case PROP_DIR_GROUP: return "from its shard group";
    case PROP_DIR_COMPUTATION: return "across a computation boundary";
    case PROP_DIR_FIXUP: return "by the pass's fix-up";
    }
    return "?";
}

const char *
prop_dir_name(PropDir d)
{
    switch (d) {
    case PROP_DIR_ANNOTATED: return "annotated";
    case PROP_DIR_FORWARD: return "forward";
    case PROP_DIR_BACKWARD: return "backward";
    case PROP_DIR_GROUP: return "shard group";
    case PROP_DIR_COMPUTATION: return "computation";
    case PROP_DIR_FIXUP: return "fix-up";
    }
    return "?";
}

const IrInstr *
prop_origin_source(const PropOrigin *o)
{
    uint32_t guard = 0;
    while (o->prev && guard++ < 1u << 20)
        o = o->prev;
    return o->from;
}

uint32_t
prop_origin_path(const PropOrigin *o, const IrInstr **path, uint32_t cap)
{
    /* Walk back from o (nearest first), then reverse. */
    uint32_t n = 0;
    if (!cap)
        return 0;
    path[n++] = o->instr;
    const PropOrigin *p = o;
    for (; p && n < cap; p = p->prev) {
        if (!p->prev) {
            if (p->from)
                path[n++] = p->from;
            break;
        }
        path[n++] = p->prev->instr;
    }
    for (uint32_t a = 0, b = n - 1; a < b; a++, b--) {
        const IrInstr *t = path[a];
        path[a] = path[b];
        path[b] = t;
    }
    return n;
}

void
prop_origin_describe(const PropOrigin *o, SlBuf *out)
{
    sl_buf_printf(out, "%%%s got ", sl_sym_cstr(o->instr->name));
    shd_print(o->sharding, out);
    sl_buf_printf(out, " %s", dir_name(o->dir));
    /* The source: the first hop whose neighbour has no origin (an annotation). */
    const PropOrigin *hops[64];
    uint32_t nh = 0;
    for (const PropOrigin *p = o; p && nh < SL_COUNTOF(hops); p = p->prev)
        hops[nh++] = p;
    const PropOrigin *last = hops[nh - 1];
    if (last->from) {
        const IrInstr *src = last->from;
        sl_buf_printf(out, " from %%%s", sl_sym_cstr(src->name));
        if (src->op == IR_OP_PARAMETER)
            sl_buf_printf(out, " (parameter %lld, annotated)", (long long)src->parameter_number);
        else if (src->parent->root == src && src->parent->is_entry)
            sl_buf_puts(out, " (output, annotated)");
        else
            sl_buf_puts(out, " (annotated)");
    }
    if (nh > 1) {
        sl_buf_puts(out, " through");
        for (uint32_t k = nh - 1; k >= 1; k--)
            sl_buf_printf(out, "%s%%%s", k == nh - 1 ? " " : k == 1 ? " and " : ", ",
                          sl_sym_cstr(hops[k]->instr->name));
    }
    if (o->level >= 0)
        sl_buf_printf(out, " at level %d", o->level);
    if (o->rule && *o->rule)
        sl_buf_printf(out, " (rule %s)", o->rule);
    if (o->replaced && o->candidate && !shd_equal(o->candidate, o->sharding)) {
        sl_buf_puts(out, "; merged ");
        shd_print(o->candidate, out);
        sl_buf_puts(out, " with ");
        shd_print(o->replaced, out);
    }
}
