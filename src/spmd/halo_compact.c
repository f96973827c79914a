/* halo_compact.c - the compact halo exchange (gspmd.md C.12; upstream ExchangeHaloCompact):
 * used when a shard's window lies far from its own shard (a slice into the middle, a pad to
 * twice the size), so that neighbour-to-neighbour halos would have to cross many shards.
 * Owns: cutting each shard's window into pieces (own data, data of one other shard, padding),
 * packing the transfers into as few collective-permutes as possible (each device receives at
 * most one piece per permute), and reassembling each shard's window with per-ordinal selects,
 * a concatenate, a dynamic-slice and the optional padding mask.
 * Does not own: deciding to use it (halo.c) or the ordinal (the caller's).
 * Invariants: communication only through spmd_coll_permute(); temporaries in cx->scratch. */
#include "spmd/halo_int.h"

#include <string.h>

enum { PIECE_PAD = -2, PIECE_SELF = -1, PIECE_UNSEEN = -5 };

/* One piece of one shard's window: [start, limit) of shard `at`'s data (or padding). */
typedef struct Piece {
    int64_t my;     /* the shard whose window this is */
    int64_t start;  /* offset inside the source shard (or the padding run) */
    int64_t limit;
    int64_t cp;     /* index into the permutes, PIECE_SELF or PIECE_PAD */
    int64_t offset; /* offset inside the window */
    int64_t at;     /* source shard (not for padding) */
} Piece;

typedef struct PieceList {
    Piece *v;
    int64_t n, cap;
} PieceList;

/* A permute made for the exchange: the received slice and where it starts in the source. */
typedef struct Permute {
    IrInstr *hlo;
    int64_t start;
} Permute;

/* A piece another shard needs: its shard and its index in that shard's list. */
typedef struct Dst {
    int64_t shard, idx;
} Dst;

typedef struct DstList {
    Dst *v;
    int64_t n, next;
} DstList;

typedef struct Compact {
    SpmdCtx *cx;
    const SpmdState *st;
    const ShdSharding *s;
    uint32_t dim;
    IrInstr *x;
    int64_t n, S, base, max_window;
    PieceList *pieces; /* n lists */
    DstList *dsts;     /* n lists, by source shard */
    Permute *cps;
    int64_t n_cps;
} Compact;

static int64_t
max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t
min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static Piece *
push_piece(PieceList *l)
{
    return l->n < l->cap ? &l->v[l->n++] : NULL;
}

IrInstr *
spmd_halo_table_lookup(SpmdCtx *cx, const int64_t *table, int64_t n, IrInstr *ordinal)
{
    bool same = true;
    for (int64_t k = 1; k < n; k++)
        same = same && table[k] == table[0];
    if (same || n < 2)
        return spmd_emit_constant_scalar(cx, IR_DT_S32, n ? table[0] : 0);
    IrInstr *tbl = spmd_emit_constant_s32_array(cx, table, (uint32_t)n);
    int64_t one = 1;
    IrInstr *ds = spmd_emit_dynamic_slice(cx, tbl, &ordinal, &one);
    return spmd_emit_reshape(cx, ds, NULL, 0);
}

/* Cuts every shard's window into pieces that each come from one place. */
static bool
cut_windows(Compact *c, const int64_t *left, const int64_t *right)
{
    int64_t S = c->S;
    for (int64_t i = 0; i < c->n; i++)
        c->max_window = max64(c->max_window, S + left[i] + right[i]);
    int64_t cap = 3 * (c->max_window / S) + 8;
    c->pieces = SL_NEW_ARRAY(&c->cx->scratch, PieceList, c->n);
    if (!c->pieces)
        return false;
    for (int64_t i = 0; i < c->n; i++) {
        PieceList *l = &c->pieces[i];
        l->v = SL_NEW_ARRAY(&c->cx->scratch, Piece, cap);
        l->n = 0;
        l->cap = cap;
        if (!l->v)
            return false;
        int64_t start = i * S - left[i], limit = (i + 1) * S + right[i];
        for (int64_t next = start; next < limit;) {
            Piece *p = push_piece(l);
            if (!p)
                return false;
            *p = (Piece){i, ((next % S) + S) % S, 0, PIECE_SELF, next - start, 0};
            int64_t size = limit - next;
            if (next < 0 || next >= c->base) {
                if (next < 0)
                    size = min64(size, -next);
                p->cp = PIECE_PAD;
            } else {
                size = min64(S - p->start, size);
                p->at = next / S;
            }
            p->limit = p->start + size;
            next += size;
        }
    }
    return true;
}

/* Splits padding pieces longer than a shard (unless every shard is in padding at that
 * position) and lists, per source shard, the pieces other shards need from it. */
static bool
split_padding(Compact *c)
{
    int64_t n = c->n, S = c->S;
    PieceList *out = SL_NEW_ARRAY(&c->cx->scratch, PieceList, n);
    int64_t *next = SL_NEW_ARRAY(&c->cx->scratch, int64_t, n);
    c->dsts = SL_NEW_ARRAY(&c->cx->scratch, DstList, n);
    if (!out || !next || !c->dsts)
        return false;
    for (int64_t i = 0; i < n; i++) {
        int64_t cap = 2 * c->pieces[i].cap;
        out[i] = (PieceList){SL_NEW_ARRAY(&c->cx->scratch, Piece, cap), 0, cap};
        c->dsts[i] = (DstList){SL_NEW_ARRAY(&c->cx->scratch, Dst, n * cap), 0, 0};
        next[i] = 0;
        if (!out[i].v || !c->dsts[i].v)
            return false;
    }
    for (;;) {
        bool all_padding = true, empty = true;
        for (int64_t i = 0; i < n; i++)
            if (next[i] < c->pieces[i].n) {
                all_padding = all_padding && c->pieces[i].v[next[i]].cp == PIECE_PAD;
                empty = false;
            }
        if (empty)
            break;
        for (int64_t i = 0; i < n; i++) {
            if (next[i] >= c->pieces[i].n)
                continue;
            Piece *h = &c->pieces[i].v[next[i]], *nh = push_piece(&out[i]);
            if (!nh)
                return false;
            *nh = *h;
            if (!all_padding && h->cp == PIECE_PAD && h->limit > S) {
                nh->limit = S;
                h->start = 0;
                h->limit -= S;
            } else {
                next[i]++;
            }
            if (h->cp != PIECE_PAD && h->at != i) {
                DstList *d = &c->dsts[h->at];
                d->v[d->n++] = (Dst){i, out[i].n - 1};
            }
        }
    }
    memcpy(c->pieces, out, (size_t)n * sizeof(*out));
    return true;
}

/* Stable insertion sort of each source's destinations by their offset in the window. */
static void
sort_dsts(Compact *c)
{
    for (int64_t i = 0; i < c->n; i++) {
        DstList *d = &c->dsts[i];
        for (int64_t a = 1; a < d->n; a++) {
            Dst key = d->v[a];
            int64_t ko = c->pieces[key.shard].v[key.idx].offset, b = a;
            for (; b > 0 && c->pieces[d->v[b - 1].shard].v[d->v[b - 1].idx].offset > ko; b--)
                d->v[b] = d->v[b - 1];
            d->v[b] = key;
        }
    }
}

/* Collective-permute over in-dim shard pairs, repeated in every group of devices that agree
 * on all other tile coordinates (GroupShardingOnAllDimsExcept + per-group creator). */
static IrInstr *
group_permute(Compact *c, IrInstr *x, const int64_t *pairs, int64_t np)
{
    const ShdSharding *s = c->s;
    int64_t total = shd_device_count(s), stride = 1;
    for (uint32_t d = s->n_tile_dims; d-- > c->dim + 1;)
        stride *= s->tile_dims[d];
    int64_t n_groups = total / c->n;
    int64_t *all = SL_NEW_ARRAY(c->cx->arena, int64_t, 2 * np * n_groups);
    if (!all || !x)
        return NULL;
    int64_t w = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        int64_t base = g / stride * stride * c->n + g % stride; /* position with dim coord 0 */
        for (int64_t k = 0; k < np; k++) {
            all[w++] = s->devices[base + pairs[2 * k] * stride];
            all[w++] = s->devices[base + pairs[2 * k + 1] * stride];
        }
    }
    return spmd_coll_permute(c->cx, c->st, x, all, (uint32_t)(np * n_groups));
}

static IrInstr *
slice_dim(SpmdCtx *cx, IrInstr *x, uint32_t dim, int64_t lo, int64_t hi)
{
    int64_t st[SPMD_MAX_RANK], li[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < x->shape.rank; d++) {
        st[d] = 0;
        li[d] = x->shape.dims[d];
    }
    st[dim] = lo;
    li[dim] = hi;
    return spmd_emit_slice(cx, x, st, li);
}

static IrInstr *
pad_dim(SpmdCtx *cx, IrInstr *x, uint32_t dim, int64_t lo, int64_t hi, IrInstr *pad)
{
    IrPadDim pads[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < x->shape.rank; d++)
        pads[d] = (IrPadDim){0, 0, 0};
    pads[dim] = (IrPadDim){lo, hi, 0};
    return spmd_emit_pad(cx, x, pad, pads);
}

/* True when piece h may not join a permute spanning [start, limit) of the source shard. */
static bool
delay_piece(const Compact *c, const Piece *h, const bool *dst_seen, int64_t start, int64_t limit)
{
    return dst_seen[h->my] || (start > h->limit && limit == c->S && h->start == 0) ||
           (limit < h->start && start == 0 && h->limit == c->S);
}

/* Packs the transfers into permutes: each round takes at most one piece per source and per
 * destination and sends the covering slice of the source shard. */
static bool
build_permutes(Compact *c)
{
    int64_t n = c->n, total = 0;
    for (int64_t i = 0; i < n; i++)
        total += c->dsts[i].n;
    c->cps = SL_NEW_ARRAY(&c->cx->scratch, Permute, total ? total : 1);
    int64_t *pairs = SL_NEW_ARRAY(&c->cx->scratch, int64_t, 2 * n);
    bool *seen = SL_NEW_ARRAY(&c->cx->scratch, bool, n);
    if (!c->cps || !pairs || !seen)
        return false;
    for (;;) {
        int64_t np = 0, start = c->S, limit = 0;
        memset(seen, 0, (size_t)n * sizeof(*seen));
        for (int64_t i = 0; i < n; i++) {
            DstList *d = &c->dsts[i];
            if (d->next >= d->n)
                continue;
            Piece *h = &c->pieces[d->v[d->next].shard].v[d->v[d->next].idx];
            if (np > 0 && delay_piece(c, h, seen, start, limit))
                continue;
            h->cp = c->n_cps;
            seen[h->my] = true;
            pairs[2 * np] = i;
            pairs[2 * np++ + 1] = h->my;
            start = min64(start, h->start);
            limit = max64(limit, h->limit);
            d->next++;
        }
        if (np == 0)
            return true;
        IrInstr *src = slice_dim(c->cx, c->x, c->dim, start, limit);
        IrInstr *cp = group_permute(c, src, pairs, np);
        if (!cp)
            return false;
        c->cps[c->n_cps++] = (Permute){cp, start};
    }
}

/* The local window assembled from the pieces; see spmd_halo_exchange_compact. */
typedef struct Assembly {
    IrInstr **concat;  /* concatenated pieces, one per piece index */
    int64_t n_concat;
    int64_t concat_size;
    int64_t self_start; /* where the own data starts in the first piece */
    bool all_padding;
} Assembly;

/* Where piece `idx` of every shard comes from (cp_index), the size of the concat piece and
 * the range of own data used; false when no shard has a piece `idx`. */
static bool
piece_extent(const Compact *c, int64_t idx, int64_t *cp_index, int64_t *max_size,
             int64_t *min_self, int64_t *max_self)
{
    bool seen_any = false;
    for (int64_t i = 0; i < c->n; i++) {
        cp_index[i] = PIECE_UNSEEN;
        if (idx >= c->pieces[i].n)
            continue;
        const Piece *h = &c->pieces[i].v[idx];
        seen_any = true;
        cp_index[i] = h->cp;
        if (h->cp >= 0) {
            *max_size = max64(*max_size, c->cps[h->cp].hlo->shape.dims[c->dim]);
        } else if (h->cp == PIECE_SELF) {
            *min_self = min64(*min_self, h->start);
            *max_self = max64(*max_self, h->limit);
            *max_size = max64(*max_size, *max_self - *min_self);
        } else {
            *max_size = max64(*max_size, h->limit - h->start);
        }
    }
    return seen_any;
}

/* The concat piece at index `idx`: per shard a permute, its own data or padding, chosen by a
 * table lookup on the ordinal. Returns false at the end (no shard has a piece `idx`). */
static bool
assemble_piece(Compact *c, Assembly *as, int64_t idx, IrInstr *pad, IrInstr *ordinal,
               bool *failed)
{
    SpmdCtx *cx = c->cx;
    int64_t n = c->n, max_size = 0, min_self = c->S, max_self = 0;
    int64_t *cp_index = SL_NEW_ARRAY(&cx->scratch, int64_t, n);
    int64_t *piece_index = SL_NEW_ARRAY(&cx->scratch, int64_t, n);
    int64_t *cache = SL_NEW_ARRAY(&cx->scratch, int64_t, c->n_cps + 2);
    IrInstr **unique = SL_NEW_ARRAY(&cx->scratch, IrInstr *, c->n_cps + 2);
    if (!cp_index || !piece_index || !cache || !unique)
        return !(*failed = true);
    if (!piece_extent(c, idx, cp_index, &max_size, &min_self, &max_self))
        return false;
    min_self = max64(min_self - (max_size - (max_self - min_self)), 0);
    if (idx == 0)
        as->self_start = min_self;
    as->concat_size += max_size;
    IrShape ps = ir_shape_clone(cx->arena, &c->x->shape);
    ps.dims[c->dim] = max_size;
    IrInstr *padding = spmd_emit_broadcast(cx, pad, &ps, NULL, 0);
    int64_t n_unique = 0;
    for (int64_t k = 0; k < c->n_cps + 2; k++)
        cache[k] = PIECE_UNSEEN;
    for (int64_t i = 0; i < n; i++) {
        IrInstr *piece = padding;
        int64_t key = c->n_cps + 1;
        if (cp_index[i] >= 0) {
            as->all_padding = false;
            piece = c->cps[cp_index[i]].hlo;
            key = cp_index[i];
        } else if (cp_index[i] == PIECE_SELF) {
            as->all_padding = false;
            piece = slice_dim(cx, c->x, c->dim, min_self, min_self + max_size);
            key = c->n_cps;
        }
        if (cache[key] != PIECE_UNSEEN) {
            piece_index[i] = cache[key];
            continue;
        }
        if (piece && piece->shape.dims[c->dim] != max_size) {
            int64_t extra = max_size - piece->shape.dims[c->dim];
            piece = as->n_concat == 0 ? pad_dim(cx, piece, c->dim, extra, 0, pad)
                                      : pad_dim(cx, piece, c->dim, 0, extra, pad);
        }
        piece_index[i] = n_unique;
        unique[n_unique++] = piece;
        cache[key] = piece_index[i];
    }
    IrInstr *selector = spmd_halo_table_lookup(cx, piece_index, n, ordinal);
    int64_t init = n_unique > 1 && unique[0] == padding ? 1 : 0;
    IrInstr *selected = unique[init];
    for (int64_t k = init + 1; k < n_unique; k++) {
        if (unique[k] == padding)
            continue; /* masked later */
        IrInstr *pred = spmd_emit_compare(cx, selector,
                                          spmd_emit_constant_scalar(cx, IR_DT_S32, k), "EQ");
        IrShape bs = ir_shape_make(cx->arena, IR_DT_PRED, selected->shape.dims,
                                   selected->shape.rank);
        pred = spmd_emit_broadcast(cx, pred, &bs, NULL, 0);
        selected = spmd_emit_select(cx, pred, unique[k], selected);
        if (!selected)
            return !(*failed = true);
    }
    as->concat[as->n_concat++] = selected;
    return true;
}

/* Per-shard offset of the window in the concatenation, and the valid (non-padding) range. */
static int64_t
window_offsets(const Compact *c, const Assembly *as, const int64_t *left, const int64_t *right,
               int64_t *offset, int64_t *valid_lo, int64_t *valid_hi)
{
    int64_t first = as->concat[0]->shape.dims[c->dim], padded = as->concat_size;
    for (int64_t i = 0; i < c->n; i++) {
        offset[i] = valid_lo[i] = valid_hi[i] = 0;
        if (c->pieces[i].n == 0)
            continue;
        const Piece *h = &c->pieces[i].v[0];
        for (int64_t j = 0; j < c->pieces[i].n && c->pieces[i].v[j].cp == PIECE_PAD; j++)
            valid_lo[i] += c->pieces[i].v[j].limit - c->pieces[i].v[j].start;
        valid_hi[i] = left[i] + right[i] + c->S;
        int64_t high = right[i] + c->S * (i + 1) - c->base;
        if (high > 0)
            valid_hi[i] -= high;
        if (h->cp >= 0)
            offset[i] = h->start - c->cps[h->cp].start + first -
                        c->cps[h->cp].hlo->shape.dims[c->dim];
        else if (h->cp == PIECE_SELF)
            offset[i] = h->start - as->self_start;
        else
            offset[i] = first - (h->limit - h->start);
        padded = max64(padded, offset[i] + c->max_window);
    }
    return padded;
}

/* select(valid_lo <= iota < valid_hi, x, pad). */
static IrInstr *
mask_window(Compact *c, IrInstr *x, const int64_t *valid_lo, const int64_t *valid_hi,
            IrInstr *pad, IrInstr *ordinal)
{
    SpmdCtx *cx = c->cx;
    IrShape is = ir_shape_make(cx->arena, IR_DT_S32, x->shape.dims, x->shape.rank);
    IrInstr *iota = spmd_emit_iota(cx, &is, c->dim);
    IrInstr *hi = spmd_halo_table_lookup(cx, valid_hi, c->n, ordinal);
    IrInstr *ok = spmd_emit_compare(cx, iota, spmd_emit_broadcast(cx, hi, &is, NULL, 0), "LT");
    bool any_lo = false;
    for (int64_t i = 0; i < c->n; i++)
        any_lo = any_lo || valid_lo[i] > 0;
    if (any_lo) {
        IrInstr *lo = spmd_halo_table_lookup(cx, valid_lo, c->n, ordinal);
        IrInstr *ge = spmd_emit_compare(cx, iota, spmd_emit_broadcast(cx, lo, &is, NULL, 0),
                                        "GE");
        ok = spmd_emit_binary(cx, IR_OP_AND, ok, ge);
    }
    IrShape vs = ir_shape_clone(cx->arena, &x->shape);
    return spmd_emit_select(cx, ok, x, spmd_emit_broadcast(cx, pad, &vs, NULL, 0));
}

/* Concatenates the pieces, aligns each shard's window at offset 0 and masks. */
static IrInstr *
finish(Compact *c, Assembly *as, const int64_t *left, const int64_t *right, IrInstr *pad,
       bool mask, IrInstr *ordinal)
{
    SpmdCtx *cx = c->cx;
    uint32_t dim = c->dim;
    if (as->all_padding) {
        IrShape bs = ir_shape_clone(cx->arena, &c->x->shape);
        bs.dims[dim] = c->max_window;
        return spmd_emit_broadcast(cx, pad, &bs, NULL, 0);
    }
    IrInstr *cat = spmd_emit_concatenate(cx, as->concat, (uint32_t)as->n_concat, dim);
    int64_t *offset = SL_NEW_ARRAY(&cx->scratch, int64_t, 3 * c->n);
    if (!cat || !offset)
        return NULL;
    int64_t *valid_lo = offset + c->n, *valid_hi = offset + 2 * c->n;
    int64_t padded = window_offsets(c, as, left, right, offset, valid_lo, valid_hi);
    if (padded > cat->shape.dims[dim])
        cat = pad_dim(cx, cat, dim, 0, padded - cat->shape.dims[dim], pad);
    if (cat && cat->shape.dims[dim] > c->max_window) {
        IrInstr *offs[SPMD_MAX_RANK];
        int64_t sizes[SPMD_MAX_RANK];
        IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        for (uint32_t d = 0; d < cat->shape.rank; d++) {
            offs[d] = zero;
            sizes[d] = cat->shape.dims[d];
        }
        offs[dim] = spmd_halo_table_lookup(cx, offset, c->n, ordinal);
        sizes[dim] = c->max_window;
        cat = spmd_emit_dynamic_slice(cx, cat, offs, sizes);
    }
    if (!mask || !cat)
        return cat;
    return mask_window(c, cat, valid_lo, valid_hi, pad, ordinal);
}

IrInstr *
spmd_halo_exchange_compact(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s, uint32_t dim,
                           IrInstr *x, int64_t base_size, const int64_t *left,
                           const int64_t *right, IrInstr *pad, bool mask, IrInstr *ordinal)
{
    Compact c = {cx, st, s, dim, x, s->tile_dims[dim], x->shape.dims[dim], base_size, 0,
                 NULL, NULL, NULL, 0};
    if (!pad)
        pad = spmd_emit_constant_scalar(cx, x->shape.dtype, 0);
    if (c.S < 1 || c.n < 1 || !pad || !cut_windows(&c, left, right) || !split_padding(&c))
        return NULL;
    sort_dsts(&c);
    if (!build_permutes(&c))
        return NULL;
    int64_t max_pieces = 0;
    for (int64_t i = 0; i < c.n; i++)
        max_pieces = max64(max_pieces, c.pieces[i].n);
    Assembly as = {SL_NEW_ARRAY(&cx->scratch, IrInstr *, max_pieces + 1), 0, 0, c.S, true};
    if (!as.concat)
        return NULL;
    bool failed = false;
    for (int64_t idx = 0; assemble_piece(&c, &as, idx, pad, ordinal, &failed); idx++)
        ;
    if (failed)
        return NULL;
    return finish(&c, &as, left, right, pad, mask, ordinal);
}

/* ---- uneven partial-replication transitions (C.8.1 step 1, C.8.2 step 2) ---- */

static int64_t
padded_size(int64_t D, int64_t n)
{
    return (D + n - 1) / n * n;
}

/* The compact exchange along d of src where shard i's window moves by the given halos. */
static IrInstr *
compact_dim(SpmdCtx *cx, const SpmdState *st, const ShdSharding *src, IrInstr *x,
            const IrShape *base, uint32_t d, int64_t *left, int64_t *right)
{
    IrInstr *ord = spmd_partition_ordinal(cx, st, src, d);
    if (!ord)
        return NULL;
    return spmd_halo_exchange_compact(cx, st, src, d, x, base->dims[d], left, right, NULL,
                                      false, ord);
}

IrInstr *
spmd_halo_pad_from_partial(SpmdCtx *cx, const SpmdState *st, IrInstr *x, const IrShape *base,
                           const ShdSharding *src, const ShdSharding *dst)
{
    IrPadDim pads[SPMD_MAX_RANK];
    bool need_pad = false;
    for (uint32_t d = 0; d < base->rank && x; d++) {
        int64_t nx = shd_dim_shards(src, d), ny = shd_dim_shards(dst, d), D = base->dims[d];
        pads[d] = (IrPadDim){0, 0, 0};
        int64_t src_per = padded_size(D, nx) / nx, dst_per = padded_size(D, ny) / nx;
        if (ny <= nx || src_per >= dst_per)
            continue;
        if (nx == 1) { /* unsharded source: a plain pad */
            pads[d].hi = padded_size(D, ny) - padded_size(D, nx);
            need_pad = true;
            continue;
        }
        int64_t *lr = SL_NEW_ARRAY(&cx->scratch, int64_t, 2 * nx);
        if (!lr)
            return NULL;
        for (int64_t i = 0; i < nx; i++) {
            lr[i] = (src_per - dst_per) * i;
            lr[nx + i] = (dst_per - src_per) * (i + 1);
        }
        x = compact_dim(cx, st, src, x, base, d, lr, lr + nx);
    }
    if (need_pad && x)
        x = spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, base->dtype, 0), pads);
    return x;
}

IrInstr *
spmd_halo_tile_to_partial(SpmdCtx *cx, const SpmdState *st, IrInstr *x, const IrShape *base,
                          const ShdSharding *src, const ShdSharding *dst)
{
    for (uint32_t d = 0; d < base->rank && x; d++) {
        int64_t nx = shd_dim_shards(src, d), ny = shd_dim_shards(dst, d), D = base->dims[d];
        if (nx <= ny || ny == 1)
            continue;
        int64_t src_per = padded_size(D, nx) / ny, dst_per = padded_size(D, ny) / ny;
        if (src_per <= dst_per)
            continue;
        int64_t rf = nx / ny;
        int64_t *lr = SL_NEW_ARRAY(&cx->scratch, int64_t, 2 * nx);
        if (!lr)
            return NULL;
        for (int64_t i = 0; i < nx; i++) {
            lr[i] = (src_per - dst_per) * (i / rf);
            lr[nx + i] = -lr[i];
        }
        x = compact_dim(cx, st, src, x, base, d, lr, lr + nx);
    }
    return x;
}

IrInstr *
spmd_halo_rewindow(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s, uint32_t dim,
                   IrInstr *x, int64_t base_size, int64_t size)
{
    if (!x)
        return NULL;
    int64_t n = s->tile_dims[dim], L = x->shape.dims[dim];
    if (L == size)
        return x;
    if (n == 1 || base_size <= min64(L, size)) {
        if (size < L)
            return slice_dim(cx, x, dim, 0, size);
        return pad_dim(cx, x, dim, 0, size - L, spmd_emit_constant_scalar(cx, x->shape.dtype, 0));
    }
    int64_t *lr = SL_NEW_ARRAY(&cx->scratch, int64_t, 2 * n);
    IrInstr *ord = spmd_partition_ordinal(cx, st, s, dim);
    if (!lr || !ord)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        lr[i] = (L - size) * i;
        lr[n + i] = (size - L) * (i + 1);
    }
    return spmd_halo_exchange_compact(cx, st, s, dim, x, base_size, lr, lr + n, NULL, false, ord);
}
