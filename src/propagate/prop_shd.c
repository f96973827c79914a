/* prop_shd.c - XLA's view of shardings as the propagation pass uses it: which shardings count as
 * tile maximal or spatially partitioned, which of two is more specific, merging partial
 * replication ("most specific wins"), sub-tiling, tuple sub-shardings and the op-metadata lists
 * shardings carry. Owns: these comparisons over ShdSharding. Does not own: the arithmetic that
 * builds new tile arrays (src/sharding). */
#include <string.h>

#include "propagate/prop_int.h"

/* ---- predicates ---- */

static bool
leaf_tile_maximal(const ShdSharding *s)
{
    return s->kind == SHD_REPLICATED || s->kind == SHD_MAXIMAL || s->kind == SHD_UNREDUCED;
}

bool
px_tile_maximal(const ShdSharding *s)
{
    if (s->kind != SHD_TUPLE)
        return leaf_tile_maximal(s);
    for (uint32_t i = 0; i < s->n_leaves; i++)
        if (!leaf_tile_maximal(s->leaves[i]))
            return false;
    return true;
}

bool
px_replicated(const ShdSharding *s)
{
    if (s->kind != SHD_TUPLE)
        return s->kind == SHD_REPLICATED;
    for (uint32_t i = 0; i < s->n_leaves; i++)
        if (s->leaves[i]->kind != SHD_REPLICATED)
            return false;
    return true;
}

bool
px_manual_leaf(const ShdSharding *s)
{
    return s->kind == SHD_MANUAL;
}

bool
px_manual(const ShdSharding *s)
{
    if (s->kind != SHD_TUPLE)
        return s->kind == SHD_MANUAL;
    if (!s->n_leaves)
        return false;
    for (uint32_t i = 0; i < s->n_leaves; i++)
        if (s->leaves[i]->kind != SHD_MANUAL)
            return false;
    return true;
}

static bool
leaf_spatial(const ShdSharding *s)
{
    return !leaf_tile_maximal(s) || s->kind == SHD_REPLICATED;
}

bool
px_spatial(const ShdSharding *s)
{
    if (!s)
        return false;
    if (s->kind != SHD_TUPLE)
        return leaf_spatial(s);
    for (uint32_t i = 0; i < s->n_leaves; i++)
        if (leaf_spatial(s->leaves[i]))
            return true;
    return false;
}

bool
px_partial(const ShdSharding *s)
{
    if (s->kind != SHD_TILED)
        return false;
    for (uint32_t k = 0; k < s->n_subgroups; k++)
        if (s->subgroups[k] == SHD_SUB_REPLICATED)
            return true;
    return false;
}

int64_t
px_num_tiles(const ShdSharding *s)
{
    return s->kind == SHD_TILED ? shd_num_tiles(s) : 1;
}

static bool
leaf_more_specific(const ShdSharding *l, const ShdSharding *r)
{
    if (px_manual_leaf(l) && leaf_tile_maximal(r))
        return true;
    if (px_manual_leaf(l) || px_manual_leaf(r))
        return false;
    if (!leaf_tile_maximal(r))
        return px_num_tiles(l) > px_num_tiles(r);
    return r->kind == SHD_REPLICATED ? l->kind != SHD_REPLICATED : !leaf_tile_maximal(l);
}

static uint32_t
n_leaves_of(const ShdSharding *s)
{
    return s->kind == SHD_TUPLE ? s->n_leaves : 1;
}

static const ShdSharding *
leaf_of(const ShdSharding *s, uint32_t i)
{
    return s->kind == SHD_TUPLE ? s->leaves[i] : s;
}

bool
px_more_specific(const ShdSharding *l, const ShdSharding *r)
{
    if (l->kind != SHD_TUPLE && r->kind != SHD_TUPLE)
        return leaf_more_specific(l, r);
    uint32_t n = n_leaves_of(l) > n_leaves_of(r) ? n_leaves_of(l) : n_leaves_of(r);
    bool better = false;
    for (uint32_t i = 0; i < n; i++) {
        const ShdSharding *a = leaf_of(l, i < n_leaves_of(l) ? i : 0);
        const ShdSharding *b = leaf_of(r, i < n_leaves_of(r) ? i : 0);
        if (leaf_more_specific(b, a))
            return false;
        if (leaf_more_specific(a, b))
            better = true;
    }
    return better;
}

/* IsShardingStrictlyBetter: manual over tile maximal, with no leaf the other way round. */
static bool
strictly_better(const ShdSharding *l, const ShdSharding *r)
{
    if (l->kind != SHD_TUPLE && r->kind != SHD_TUPLE)
        return px_manual_leaf(l) && leaf_tile_maximal(r);
    uint32_t n = n_leaves_of(l) > n_leaves_of(r) ? n_leaves_of(l) : n_leaves_of(r);
    int mask = 0;
    for (uint32_t i = 0; i < n; i++) {
        const ShdSharding *a = leaf_of(l, i < n_leaves_of(l) ? i : 0);
        const ShdSharding *b = leaf_of(r, i < n_leaves_of(r) ? i : 0);
        if (px_manual_leaf(a) && leaf_tile_maximal(b))
            mask |= 1;
        if (px_manual_leaf(b) && leaf_tile_maximal(a))
            mask |= 2;
    }
    return mask == 1;
}

/* ---- metadata lists ---- */

/* Splits a verbatim metadata text into its items: "{op_name=..}" is one item,
 * "{{..}, {..}}" a list. At most `cap` items are returned. */
static uint32_t
md_items(SlStr md, SlStr *items, uint32_t cap)
{
    size_t i = 0, n = md.len;
    while (i < n && md.ptr[i] == ' ')
        i++;
    if (i >= n || md.ptr[i] != '{')
        return 0;
    size_t j = i + 1;
    while (j < n && md.ptr[j] == ' ')
        j++;
    if (j < n && md.ptr[j] == '}')
        return 0; /* "{}" */
    if (j >= n || md.ptr[j] != '{') {
        items[0] = (SlStr){md.ptr + i, n - i};
        while (items[0].len && items[0].ptr[items[0].len - 1] == ' ')
            items[0].len--;
        return cap ? 1 : 0;
    }
    uint32_t k = 0;
    int depth = 0;
    bool in_str = false;
    size_t start = j;
    for (size_t p = j; p < n; p++) {
        char c = md.ptr[p];
        if (in_str) {
            if (c == '\\')
                p++;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '"')
            in_str = true;
        else if (c == '{') {
            if (depth++ == 0)
                start = p;
        } else if (c == '}') {
            if (depth == 0)
                break; /* the outer list's brace */
            if (--depth == 0 && k < cap)
                items[k++] = (SlStr){md.ptr + start, p + 1 - start};
        }
    }
    return k;
}

#define MD_CAP 32

static SlStr
md_join(PropCtx *cx, const SlStr *items, uint32_t n)
{
    if (n == 0)
        return (SlStr){"", 0};
    if (n == 1)
        return items[0];
    size_t len = 2;
    for (uint32_t i = 0; i < n; i++)
        len += items[i].len + (i ? 2 : 0);
    char *p = sl_arena_alloc(cx->a, len + 1, 1);
    if (!p)
        return items[0];
    size_t w = 0;
    p[w++] = '{';
    for (uint32_t i = 0; i < n; i++) {
        if (i) {
            p[w++] = ',';
            p[w++] = ' ';
        }
        memcpy(p + w, items[i].ptr, items[i].len);
        w += items[i].len;
    }
    p[w++] = '}';
    return (SlStr){p, w};
}

SlStr
px_md_merge(PropCtx *cx, SlStr first, SlStr second)
{
    SlStr items[2 * MD_CAP];
    uint32_t n = md_items(first, items, MD_CAP);
    SlStr more[MD_CAP];
    uint32_t m = md_items(second, more, MD_CAP);
    if (m == 0)
        return first;
    if (n == 0)
        return second;
    uint32_t n0 = n;
    for (uint32_t i = 0; i < m; i++) {
        bool dup = false;
        for (uint32_t j = 0; j < n0 && !dup; j++)
            dup = sl_str_eq(items[j], more[i]);
        if (!dup)
            items[n++] = more[i];
    }
    return n == n0 ? first : md_join(cx, items, n);
}

const ShdSharding *
px_with_md(PropCtx *cx, const ShdSharding *s, SlStr md)
{
    if (!s || s->kind == SHD_TUPLE)
        return s;
    if (sl_str_eq(s->metadata, md))
        return s;
    ShdSharding *c = SL_NEW(cx->a, ShdSharding);
    if (!c)
        return s;
    *c = *s;
    c->metadata = md;
    return c;
}

const ShdSharding *
px_keep_md(PropCtx *cx, const ShdSharding *s, const ShdSharding *src)
{
    if (!s || !src || s == src || src->kind == SHD_TUPLE)
        return s;
    if (s->kind == SHD_TUPLE) {
        const ShdSharding **lv = SL_NEW_ARRAY(cx->a, const ShdSharding *, s->n_leaves + 1);
        if (!lv)
            return s;
        for (uint32_t i = 0; i < s->n_leaves; i++)
            lv[i] = px_with_md(cx, s->leaves[i], src->metadata);
        return shd_tuple(cx->a, lv, s->n_leaves);
    }
    return px_with_md(cx, s, src->metadata);
}

const ShdSharding *
px_strip_md(PropCtx *cx, const ShdSharding *s)
{
    if (!s)
        return s;
    if (s->kind != SHD_TUPLE)
        return px_with_md(cx, s, (SlStr){"", 0});
    bool any = false;
    for (uint32_t i = 0; i < s->n_leaves; i++)
        any = any || s->leaves[i]->metadata.len;
    if (!any)
        return s;
    const ShdSharding **lv = SL_NEW_ARRAY(cx->a, const ShdSharding *, s->n_leaves + 1);
    if (!lv)
        return s;
    for (uint32_t i = 0; i < s->n_leaves; i++)
        lv[i] = px_with_md(cx, s->leaves[i], (SlStr){"", 0});
    return shd_tuple(cx->a, lv, s->n_leaves);
}

/* ---- merging ---- */

bool
px_manual_subgroup(const ShdSharding *s)
{
    if (!s || s->kind != SHD_TILED)
        return false;
    for (uint32_t k = 0; k < s->n_subgroups; k++)
        if (s->subgroups[k] == SHD_SUB_MANUAL)
            return true;
    return false;
}

/* A manual-subgroup sharding (normalized: manual, then replicated) with its manual dim read
 * as the last data dim, and back. */
const ShdSharding *
px_manual_as_data(PropCtx *cx, const ShdSharding *s)
{
    static const ShdSubgroup rep = SHD_SUB_REPLICATED;
    if (!px_manual_subgroup(s) || s->n_subgroups > 2 || s->subgroups[0] != SHD_SUB_MANUAL)
        return NULL;
    return shd_tiled(cx->a, s->tile_dims, s->n_tile_dims, s->devices, &rep,
                     s->n_subgroups == 2 ? 1 : 0);
}

const ShdSharding *
px_data_as_manual(PropCtx *cx, const ShdSharding *s)
{
    static const ShdSubgroup sub[2] = {SHD_SUB_MANUAL, SHD_SUB_REPLICATED};
    if (!s || s->kind != SHD_TILED || shd_data_rank(s) < 1)
        return NULL;
    bool partial = px_partial(s);
    return shd_tiled(cx->a, s->tile_dims, s->n_tile_dims, s->devices, sub, partial ? 2 : 1);
}

static const ShdSharding *
merge_plain(PropCtx *cx, const ShdSharding *to_merge, const ShdSharding *dst, int64_t min_tiles)
{
    if (!px_partial(dst) || shd_data_rank(dst) != shd_data_rank(to_merge))
        return NULL;
    const ShdSharding *r = shd_merge_if_compatible(cx->a, to_merge, dst, min_tiles);
    return r == to_merge ? NULL : r;
}

bool
px_merge_if_compatible(PropCtx *cx, const ShdSharding *to_merge, int64_t min_tiles,
                       const ShdSharding **dst)
{
    if (to_merge->kind == SHD_TUPLE || (*dst)->kind == SHD_TUPLE || px_manual(to_merge) ||
        px_manual(*dst))
        return false;
    if (leaf_tile_maximal(to_merge) || to_merge->kind != SHD_TILED)
        return false;
    if (leaf_tile_maximal(*dst)) {
        *dst = to_merge;
        return true;
    }
    const ShdSharding *r = NULL;
    bool mt = px_manual_subgroup(to_merge), md = px_manual_subgroup(*dst);
    if (mt != md)
        return false;
    if (mt) {
        /* The manual dims must agree exactly; merged as one more data dim. */
        uint32_t r0 = shd_data_rank(to_merge);
        if (r0 != shd_data_rank(*dst) || !px_partial(*dst) ||
            to_merge->tile_dims[r0] != (*dst)->tile_dims[r0])
            return false;
        const ShdSharding *a = px_manual_as_data(cx, to_merge), *b = px_manual_as_data(cx, *dst);
        if (!a || !b)
            return false;
        const ShdSharding *m = merge_plain(cx, a, b, min_tiles * to_merge->tile_dims[r0]);
        r = m ? px_data_as_manual(cx, m) : NULL;
    } else {
        r = merge_plain(cx, to_merge, *dst, min_tiles);
    }
    if (!r)
        return false;
    *dst = px_with_md(cx, r, px_md_merge(cx, (*dst)->metadata, to_merge->metadata));
    return true;
}

static bool
merge_leaf(PropCtx *cx, const ShdSharding *to_merge, const ShdSharding **dst, bool combine)
{
    if (combine && px_partial(to_merge) && px_partial(*dst) &&
        shd_device_count(to_merge) == shd_device_count(*dst)) {
        int64_t t = px_num_tiles(to_merge) > px_num_tiles(*dst) ? px_num_tiles(to_merge)
                                                                : px_num_tiles(*dst);
        if (px_merge_if_compatible(cx, to_merge, t + 1, dst))
            return true;
    }
    return leaf_more_specific(*dst, to_merge);
}

bool
px_merge(PropCtx *cx, const ShdSharding *to_merge, const ShdSharding **dst, bool combine)
{
    if (to_merge->kind != SHD_TUPLE && (*dst)->kind != SHD_TUPLE)
        return merge_leaf(cx, to_merge, dst, combine);
    uint32_t n = n_leaves_of(*dst) > n_leaves_of(to_merge) ? n_leaves_of(*dst)
                                                           : n_leaves_of(to_merge);
    const ShdSharding **lv = SL_NEW_ARRAY(cx->a, const ShdSharding *, n + 1);
    if (!lv)
        return false;
    bool changed = false;
    for (uint32_t i = 0; i < n; i++) {
        lv[i] = leaf_of(*dst, i < n_leaves_of(*dst) ? i : 0);
        changed |= merge_leaf(cx, leaf_of(to_merge, i < n_leaves_of(to_merge) ? i : 0), &lv[i],
                              combine);
    }
    *dst = shd_tuple(cx->a, lv, n);
    return changed;
}

bool
px_subtiling_or_equal(const IrShape *shape, const ShdSharding *sub, const ShdSharding *s)
{
    if (px_manual(sub) || px_manual(s))
        return false;
    if (px_tile_maximal(s))
        return true;
    if (px_tile_maximal(sub) || sub->kind != SHD_TILED || s->kind != SHD_TILED)
        return false;
    uint32_t r = shd_data_rank(sub);
    if (r != shd_data_rank(s) || r != shape->rank || r > PROP_MAX_RANK)
        return false;
    int64_t pb[PROP_MAX_RANK], b[PROP_MAX_RANK];
    for (uint32_t i = 0; i < r; i++) {
        if (sub->tile_dims[i] < s->tile_dims[i])
            return false;
        pb[i] = (shape->dims[i] + sub->tile_dims[i] - 1) / sub->tile_dims[i];
        b[i] = (shape->dims[i] + s->tile_dims[i] - 1) / s->tile_dims[i];
    }
    int64_t total = shd_device_count(sub);
    int64_t pi[PROP_MAX_RANK], si[PROP_MAX_RANK];
    for (int64_t k = 0; k < total; k++) {
        int64_t dev = sub->devices[k];
        if (!shd_tile_index(sub, dev, pi) || !shd_tile_index(s, dev, si))
            return false;
        for (uint32_t j = 0; j < r; j++) {
            int64_t off = pb[j] * pi[j], soff = b[j] * si[j];
            if (off < soff)
                return false;
            if (off + pb[j] <= shape->dims[j] && off + pb[j] > soff + b[j])
                return false;
        }
    }
    return true;
}

const ShdSharding *
px_improved(PropCtx *cx, const ShdSharding *from, const ShdSharding *cur, const IrShape *shape,
            bool combine, bool aggressive)
{
    /* An equal candidate never improves (neither strictly better nor more specific, and
     * merging it adds no tiles): skip the merge. */
    if (cur && shd_equal(from, cur))
        return NULL;
    if (cur && strictly_better(from, cur))
        return from;
    if (!px_spatial(from))
        return NULL;
    if (!cur)
        return from;
    if (px_manual(from))
        return NULL;
    int64_t tiles = px_num_tiles(from);
    const ShdSharding *f = from;
    if (!px_merge(cx, cur, &f, combine))
        return NULL;
    if (!aggressive && ir_shape_is_array(shape) && !px_tile_maximal(cur) &&
        px_num_tiles(f) == tiles && !px_subtiling_or_equal(shape, f, cur))
        return NULL;
    return f;
}

/* ---- tuples ---- */

static uint32_t
leaf_count(const IrShape *s)
{
    return ir_shape_leaf_count(s);
}

const ShdSharding *
px_sub(PropCtx *cx, const ShdSharding *s, const IrShape *shape, uint32_t index)
{
    if (!s || s->kind != SHD_TUPLE || !ir_shape_is_tuple(shape) || index >= shape->n_elems)
        return s;
    uint32_t off = 0;
    for (uint32_t i = 0; i < index; i++)
        off += leaf_count(&shape->elems[i]);
    const IrShape *e = &shape->elems[index];
    uint32_t n = leaf_count(e);
    if (off + n > s->n_leaves)
        return NULL;
    if (!ir_shape_is_tuple(e))
        return s->leaves[off];
    return shd_tuple(cx->a, s->leaves + off, n);
}

const ShdSharding *
px_single_tuple(PropCtx *cx, const IrShape *shape, const ShdSharding *s)
{
    if (!ir_shape_is_tuple(shape) || !s || s->kind == SHD_TUPLE)
        return s;
    uint32_t n = leaf_count(shape);
    const ShdSharding **lv = SL_NEW_ARRAY(cx->a, const ShdSharding *, n + 1);
    if (!lv)
        return s;
    for (uint32_t i = 0; i < n; i++)
        lv[i] = s;
    return shd_tuple(cx->a, lv, n);
}

const ShdSharding *
px_replace_sub(PropCtx *cx, const ShdSharding *base, const IrShape *shape, uint32_t index,
               const ShdSharding *s)
{
    uint32_t n = leaf_count(shape);
    const ShdSharding **lv = SL_NEW_ARRAY(cx->a, const ShdSharding *, n + 1);
    if (!lv || index >= shape->n_elems)
        return base;
    for (uint32_t i = 0; i < n; i++)
        lv[i] = !base ? shd_replicated(cx->a) : base->kind == SHD_TUPLE ? base->leaves[i] : base;
    uint32_t off = 0;
    for (uint32_t i = 0; i < index; i++)
        off += leaf_count(&shape->elems[i]);
    uint32_t m = leaf_count(&shape->elems[index]);
    for (uint32_t k = 0; k < m; k++)
        lv[off + k] = s->kind == SHD_TUPLE ? (k < s->n_leaves ? s->leaves[k] : s) : s;
    return shd_tuple(cx->a, lv, n);
}

/* ---- derived shardings (metadata kept from the source) ---- */

const ShdSharding *
px_replicated_sh(PropCtx *cx, const ShdSharding *md_from)
{
    const ShdSharding *r = shd_replicated(cx->a);
    return md_from && md_from->kind != SHD_TUPLE ? px_with_md(cx, r, md_from->metadata) : r;
}

const ShdSharding *
px_manual_sh(PropCtx *cx, const ShdSharding *md_from)
{
    const ShdSharding *r = shd_manual(cx->a);
    return md_from && md_from->kind != SHD_TUPLE ? px_with_md(cx, r, md_from->metadata) : r;
}

static bool
has_manual_subgroup(const ShdSharding *s)
{
    if (s->kind != SHD_TILED)
        return false;
    for (uint32_t k = 0; k < s->n_subgroups; k++)
        if (s->subgroups[k] == SHD_SUB_MANUAL)
            return true;
    return false;
}

const ShdSharding *
px_replicate_all_data(PropCtx *cx, const ShdSharding *s, uint32_t rank)
{
    if (px_manual(s))
        return s;
    if (!has_manual_subgroup(s))
        return px_replicated_sh(cx, s);
    const ShdSharding *r = px_replicate_except(cx, s, NULL, 0);
    if (r->kind == SHD_TILED && shd_data_rank(r) != rank) {
        int64_t pos[PROP_MAX_RANK];
        uint32_t have = shd_data_rank(r);
        if (have > rank) {
            for (uint32_t i = 0; i < have - rank; i++)
                pos[i] = i;
            r = px_remove_dims(cx, r, pos, have - rank);
        } else {
            for (uint32_t i = 0; i < rank - have; i++)
                pos[i] = have + i;
            r = px_insert_dims(cx, r, pos, rank - have);
        }
        r = px_keep_md(cx, r, s);
    }
    return r ? r : px_replicated_sh(cx, s);
}

/* ---- memo of pure transforms of stable shardings (prop_is_stable) ---- */

#define PROP_MEMO_SLOTS 4096u
#define PROP_MEMO_ARGS 40u

enum { MEMO_REPLICATE_DIMS = 1, MEMO_REPLICATE_EXCEPT, MEMO_REMOVE, MEMO_INSERT, MEMO_TRANSPOSE };

/* One remembered result: transform `tag` of the stable sharding `in` with `args`. Direct mapped:
 * a colliding transform replaces the slot. */
typedef struct PropMemo {
    const ShdSharding *in, *out;
    uint32_t tag, n;
    int64_t args[PROP_MEMO_ARGS];
} PropMemo;

/* The slot for (tag, in, args), or NULL when `in` is not stable or the arguments do not fit; *hit
 * when it holds the result. */
static PropMemo *
memo_slot(PropCtx *cx, uint32_t tag, const ShdSharding *in, const int64_t *args, uint32_t n,
          bool *hit)
{
    *hit = false;
    if (n > PROP_MEMO_ARGS || !prop_is_stable(cx, in))
        return NULL;
    if (!cx->memo && !(cx->memo = SL_NEW_ARRAY(cx->keep, PropMemo, PROP_MEMO_SLOTS)))
        return NULL;
    uint64_t h = ((uint64_t)(uintptr_t)in ^ tag) * 0x9e3779b97f4a7c15ull;
    for (uint32_t k = 0; k < n; k++)
        h = (h ^ (uint64_t)args[k]) * 0x100000001b3ull;
    PropMemo *e = &cx->memo[(h >> 32) & (PROP_MEMO_SLOTS - 1)];
    *hit = e->in == in && e->tag == tag && e->n == n &&
           (!n || !memcmp(e->args, args, n * sizeof(int64_t)));
    return e;
}

/* Remembers `out` (kept first) in slot `e`; returns the kept result. */
static const ShdSharding *
memo_put(PropCtx *cx, PropMemo *e, uint32_t tag, const ShdSharding *in, const int64_t *args,
         uint32_t n, const ShdSharding *out)
{
    if (!e || !out)
        return out;
    const ShdSharding *k = prop_keep(cx, out);
    if (!k)
        return out;
    e->in = in;
    e->out = k;
    e->tag = tag;
    e->n = n;
    if (n)
        memcpy(e->args, args, n * sizeof(int64_t));
    return k;
}

const ShdSharding *
px_replicate_dims(PropCtx *cx, const ShdSharding *s, const int64_t *dims, uint32_t n)
{
    if (s->kind != SHD_TILED)
        return s;
    bool hit;
    PropMemo *e = memo_slot(cx, MEMO_REPLICATE_DIMS, s, dims, n, &hit);
    if (hit)
        return e->out;
    const ShdSharding *r = shd_partially_replicate_dims(cx->a, s, dims, n);
    return memo_put(cx, e, MEMO_REPLICATE_DIMS, s, dims, n, r ? px_keep_md(cx, r, s) : s);
}

const ShdSharding *
px_replicate_except(PropCtx *cx, const ShdSharding *s, const int64_t *keep, uint32_t n)
{
    if (s->kind != SHD_TILED)
        return s;
    bool hit;
    PropMemo *e = memo_slot(cx, MEMO_REPLICATE_EXCEPT, s, keep, n, &hit);
    if (hit)
        return e->out;
    const ShdSharding *r = shd_partially_replicate_all_except(cx->a, s, keep, n);
    return memo_put(cx, e, MEMO_REPLICATE_EXCEPT, s, keep, n, r ? px_keep_md(cx, r, s) : s);
}

const ShdSharding *
px_remove_dims(PropCtx *cx, const ShdSharding *s, const int64_t *dims, uint32_t n)
{
    bool hit;
    PropMemo *e = s ? memo_slot(cx, MEMO_REMOVE, s, dims, n, &hit) : NULL;
    if (e && hit)
        return e->out;
    const ShdSharding *r = s ? shd_remove_dims(cx->a, s, dims, n) : NULL;
    return memo_put(cx, e, MEMO_REMOVE, s, dims, n, r);
}

const ShdSharding *
px_insert_dims(PropCtx *cx, const ShdSharding *s, const int64_t *pos, uint32_t n)
{
    bool hit;
    PropMemo *e = s ? memo_slot(cx, MEMO_INSERT, s, pos, n, &hit) : NULL;
    if (e && hit)
        return e->out;
    const ShdSharding *r = s ? shd_insert_dims(cx->a, s, pos, n) : NULL;
    return memo_put(cx, e, MEMO_INSERT, s, pos, n, r);
}

const ShdSharding *
px_transpose_collapsed(PropCtx *cx, const ShdSharding *s, const int64_t *src_to_tgt,
                       uint32_t src_rank, uint32_t tgt_rank)
{
    int64_t args[PROP_MEMO_ARGS];
    bool hit = false;
    PropMemo *e = NULL;
    if (s && src_rank + 1 <= PROP_MEMO_ARGS) {
        memcpy(args, src_to_tgt, src_rank * sizeof(int64_t));
        args[src_rank] = tgt_rank;
        e = memo_slot(cx, MEMO_TRANSPOSE, s, args, src_rank + 1, &hit);
    }
    if (e && hit)
        return e->out;
    const ShdSharding *r = s ? shd_transpose_collapsed(cx->a, s, src_to_tgt, src_rank, tgt_rank)
                             : NULL;
    return memo_put(cx, e, MEMO_TRANSPOSE, s, args, src_rank + 1, r);
}

const ShdSharding *
px_along_dims(PropCtx *cx, const ShdSharding *s, const int64_t *src_dims, const int64_t *tgt_dims,
              uint32_t n, uint32_t tgt_rank)
{
    if (px_tile_maximal(s) || px_manual(s) || s->kind != SHD_TILED)
        return s;
    const ShdSharding *r = px_replicate_except(cx, s, src_dims, n);
    if (px_tile_maximal(r) || r->kind != SHD_TILED)
        return r;
    int64_t map[PROP_MAX_RANK];
    uint32_t rank = shd_data_rank(r);
    if (rank > PROP_MAX_RANK)
        return NULL;
    for (uint32_t i = 0; i < rank; i++)
        map[i] = -1;
    for (uint32_t k = 0; k < n; k++)
        if (src_dims[k] >= 0 && src_dims[k] < (int64_t)rank)
            map[src_dims[k]] = tgt_dims[k];
    const ShdSharding *t = px_transpose_collapsed(cx, r, map, rank, tgt_rank);
    return t ? px_keep_md(cx, t, s) : NULL;
}

bool
px_evenly(const IrShape *shape, const ShdSharding *s)
{
    if (!s)
        return true;
    if (s->kind == SHD_TUPLE) {
        uint32_t n = ir_shape_leaf_count(shape);
        for (uint32_t i = 0; i < n && i < s->n_leaves; i++)
            if (!px_evenly(ir_shape_leaf(shape, i), s->leaves[i]))
                return false;
        return true;
    }
    if (s->kind != SHD_TILED || ir_shape_is_tuple(shape))
        return true;
    for (uint32_t i = 0; i < shape->rank && i < shd_data_rank(s); i++)
        if (shape->dims[i] % s->tile_dims[i])
            return false;
    return true;
}

bool
prop_in_ints(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t k = 0; k < n; k++)
        if (v[k] == x)
            return true;
    return false;
}
