/* halo.c - the windowed-input reshard and its halo exchange (gspmd.md C.12; upstream
 * ReshardAsWindowedInput, ExchangeHalo, ExchangeHaloAndGetValidData).
 * Owns: the per-dim window plan (which padded input elements each shard needs, the shard
 * window, the output dynamic-slice offsets), the edge-slice collective-permutes between
 * neighbours along one tile dim, the concatenation, trimming and masking of the exchanged data,
 * the explicit pad + dynamic-slice plan used when the windowed dims are replicated, and the
 * per-dim halo loop of select-and-scatter (its source and operand windows, upstream
 * HandleSelectAndScatter).
 * Does not own: reshards to the target (spmd_reshard) or the local windowed op (callers).
 * Invariants: every feasibility check runs before anything is emitted, so SL_ERR_UNSUPPORTED
 * leaves the output untouched; communication only through spmd_coll_permute(). Halos larger
 * than a neighbour's shard that would cover the whole dim, and the compact variant
 * (ExchangeHaloCompact), fall back to replicating the windowed dims. */
#include "spmd/halo_int.h"

#include <string.h>

/* The plan of one sharded, non-trivially windowed dim. Shards that hold no useful input may be
 * trimmed away (on the right, and a middle range), and so may useless data inside the only
 * useful shard; `n`, `S`, `el` and `ex_base` then describe the trimmed exchange. */
typedef struct DimPlan {
    int64_t n;          /* shards taking part in the exchange (after trimming) */
    int64_t S;          /* input shard size (after an in-shard trim) */
    int64_t el;         /* explicit left padding on the full shape (may be negative) */
    SpmdMad start, limit;   /* [start, limit) on the left-padded, undilated input, per ordinal */
    int64_t shard_size; /* local size with halos: max(limit - start) */
    int64_t padded;     /* limit(n - 1): the padded full size */
    bool ds_out;        /* the local result needs a dynamic-slice (base dilation) */
    int64_t W;          /* output windows per shard */
    int64_t bd, pl0, max_pl;
    int64_t ex_base;    /* full size the exchange sees: D, or S * n after trimming */
    bool trimmed;       /* n is less than the target's shard count */
    bool single;        /* trimmed to one shard: no exchange on this dim */
    bool pre_mask;      /* mask the uneven tail before the exchange */
    int64_t pre_lo, pre_hi;        /* in-shard slice before the exchange */
    int64_t mid_first, mid_count; /* trimmed middle range of shards (mid_count 0: none) */
    bool scatter;       /* select-and-scatter: shard 0's left halo is left(0), not el */
    bool mask_lo;       /* mask positions below el even when el == 0 (windows before the
                           first one: select-and-scatter) */
} DimPlan;

static int64_t
ceil_of(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

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

SpmdMad
spmd_mad(int64_t m, int64_t o, int64_t d)
{
    if (d != 1 && m % d == 0 && (o % d == 0 || o * m > 0)) {
        m /= d;
        o /= d;
        d = 1;
    }
    return (SpmdMad){m, o, d};
}

static int64_t
mad_eval(SpmdMad f, int64_t i)
{
    return (i * f.m + f.o) / f.d;
}

void
spmd_calc_add(SpmdCalc *c, int64_t coef, SpmdMad f)
{
    if (f.d == 1) {
        for (uint32_t k = 0; k < c->n; k++)
            if (c->t[k].d == 1) {
                int64_t m = c->coef[k] * c->t[k].m + coef * f.m;
                int64_t o = c->coef[k] * c->t[k].o + coef * f.o;
                c->t[k] = (SpmdMad){m, o, 1};
                c->coef[k] = 1;
                return;
            }
    }
    if (c->n < SPMD_CALC_MAX_TERMS) {
        c->t[c->n] = f;
        c->coef[c->n++] = coef;
    }
}

static SpmdCalc
calc_diff(SpmdMad a, SpmdMad b)
{
    SpmdCalc c = {0};
    spmd_calc_add(&c, 1, a);
    spmd_calc_add(&c, -1, b);
    return c;
}

int64_t
spmd_calc_eval(const SpmdCalc *c, int64_t i)
{
    int64_t v = 0;
    for (uint32_t k = 0; k < c->n; k++)
        v += c->coef[k] * mad_eval(c->t[k], i);
    return v;
}

int64_t
spmd_calc_max(const SpmdCalc *c, int64_t lo, int64_t hi)
{
    int64_t m = spmd_calc_eval(c, lo);
    for (int64_t i = lo + 1; i < hi; i++)
        m = max64(m, spmd_calc_eval(c, i));
    return m;
}

static bool
calc_is_constant(const SpmdCalc *c, int64_t n)
{
    for (int64_t i = 1; i < n; i++)
        if (spmd_calc_eval(c, i) != spmd_calc_eval(c, 0))
            return false;
    return true;
}

static IrInstr *
mad_emit(SpmdCtx *cx, SpmdMad f, IrInstr *ordinal)
{
    if (f.m == 0)
        return spmd_emit_constant_scalar(cx, IR_DT_S32, f.o / f.d);
    IrInstr *r = ordinal;
    if (f.m != 1)
        r = spmd_emit_binary(cx, IR_OP_MULTIPLY, r,
                             spmd_emit_constant_scalar(cx, IR_DT_S32, f.m));
    if (f.o != 0)
        r = spmd_emit_binary(cx, IR_OP_ADD, r, spmd_emit_constant_scalar(cx, IR_DT_S32, f.o));
    if (f.d != 1)
        r = spmd_emit_binary(cx, IR_OP_DIVIDE, r,
                             spmd_emit_constant_scalar(cx, IR_DT_S32, f.d));
    return r;
}

IrInstr *
spmd_calc_emit(SpmdCtx *cx, const SpmdCalc *c, IrInstr *ordinal)
{
    IrInstr *r = NULL;
    for (int pass = 0; pass < 2; pass++) /* positive terms first */
        for (uint32_t k = 0; k < c->n; k++) {
            if ((c->coef[k] > 0) != (pass == 0))
                continue;
            IrInstr *t = mad_emit(cx, c->t[k], ordinal);
            int64_t mag = c->coef[k] > 0 ? c->coef[k] : -c->coef[k];
            if (mag != 1)
                t = spmd_emit_binary(cx, IR_OP_MULTIPLY, t,
                                     spmd_emit_constant_scalar(cx, IR_DT_S32, mag));
            if (!r)
                r = c->coef[k] > 0 ? t
                                   : spmd_emit_binary(cx, IR_OP_SUBTRACT,
                                                      spmd_emit_constant_scalar(cx, IR_DT_S32, 0),
                                                      t);
            else
                r = spmd_emit_binary(cx, c->coef[k] > 0 ? IR_OP_ADD : IR_OP_SUBTRACT, r, t);
        }
    return r ? r : spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
}

/* ---- window plan ---- */

static bool
is_trivial(const IrWindowDim *w)
{
    return w->size == 1 && w->stride == 1 && w->pad_lo == 0 && w->pad_hi == 0 &&
           w->lhs_dilate == 1 && w->rhs_dilate == 1;
}

/* Base dilation: the shard window's padding and, with stride 1, the output offsets. */
static void
plan_base_dilation(DimPlan *p, const IrWindowDim *wd, int64_t dilated, IrWindowDim *swd)
{
    int64_t bd = p->bd, st = wd->stride, W = p->W;
    int64_t first0 = mad_eval(p->start, 0) * bd + swd->pad_lo;
    for (int64_t k = 0; k < p->n; k++) {
        int64_t first = mad_eval(p->start, k) * bd + swd->pad_lo - st * W * k;
        int64_t actual = first + (p->shard_size - 1) * bd + 1;
        swd->pad_hi = max64(swd->pad_hi, st * (W - 1) + dilated - actual);
    }
    if (st != 1)
        return;
    int64_t max_pl = first0;
    bool same = true;
    for (int64_t k = 1; k < p->n; k++) {
        int64_t first = mad_eval(p->start, k) * bd + swd->pad_lo - st * W * k;
        same = same && first == swd->pad_lo;
        max_pl = max64(max_pl, first);
    }
    p->ds_out = !same;
    p->pl0 = swd->pad_lo;
    p->max_pl = max_pl;
    swd->pad_lo = max_pl;
}

/* Drops shards on the right that hold only uneven padding or data cut off by negative high
 * padding; returns true when one shard is left (the dim then needs no exchange). */
static bool
trim_right(const IrWindowDim *wd, int64_t D, int64_t full, int64_t windows, IrWindowDim *swd,
           DimPlan *p)
{
    int64_t useful = ceil_of(D + wd->pad_hi, p->S);
    if (useful >= p->n)
        return false;
    p->n = max64(useful, windows);
    p->trimmed = true;
    if (p->n == 1) {
        p->single = true;
        swd->pad_hi = D + wd->pad_hi - p->S;
        return true;
    }
    p->ex_base = p->S * p->n;
    if (p->ex_base > D && wd->pad_hi > 0) {
        p->pre_mask = true;
    } else if (wd->pad_hi < 0 && full - wd->pad_lo < p->S) {
        p->S = full - wd->pad_lo; /* useful input smaller than a shard: slice it first */
        p->ex_base = p->S * p->n;
        p->pre_hi = p->S;
    }
    return false;
}

/* Drops the shards between the output-holding ones and the first useful input (a large
 * negative low padding); false when fewer than two shards would remain. */
static bool
trim_middle(int64_t full, int64_t windows, DimPlan *p)
{
    int64_t middle = (-p->el) / p->S - windows;
    if (middle <= 0)
        return true;
    p->n -= middle;
    if (p->n <= 1)
        return false;
    p->mid_first = windows;
    p->mid_count = middle;
    p->trimmed = true;
    p->el += middle * p->S;
    p->ex_base = p->S * p->n;
    if (-p->el > p->S * (p->n - 1)) { /* all useful data on the last shard: skip the rest */
        int64_t skip = -p->el - p->S * (p->n - 1);
        p->S -= skip;
        p->el += skip * p->n;
        p->pre_lo = skip;
        if (full < p->S) {
            skip = p->S - full;
            p->pre_hi -= skip;
            p->el += skip * (p->n - 1);
            p->S = full;
        }
        p->ex_base = p->S * p->n;
    }
    return true;
}

/* Plans one windowed dim of full size D cut into n shards of S; false when unsupported.
 * `trim` enables the shard trimming of the halo path (never for explicit pad + slice). */
static bool
plan_dim(const IrWindowDim *wd, int64_t D, int64_t n, int64_t S, bool trim, IrWindowDim *swd,
         DimPlan *p)
{
    int64_t bd = wd->lhs_dilate, st = wd->stride;
    if (bd < 1 || st < 1 || wd->rhs_dilate < 1 || wd->size < 1 || D < 1)
        return false;
    int64_t dilated = 1 + (wd->size - 1) * wd->rhs_dilate;
    int64_t full = 1 + (D - 1) * bd + wd->pad_lo + wd->pad_hi;
    if (full < dilated)
        return false;
    int64_t windows = (full - dilated) / st + 1;
    memset(p, 0, sizeof(*p));
    p->n = n;
    p->S = S;
    p->bd = bd;
    p->W = ceil_of(windows, n);
    p->ex_base = D;
    p->pre_hi = S;
    trim = trim && windows < n && wd->rhs_dilate == 1 && bd == 1;
    if (trim && trim_right(wd, D, full, windows, swd, p))
        return true;
    p->el = wd->pad_lo / bd;
    swd->pad_lo = wd->pad_lo % bd;
    swd->pad_hi = 0;
    if (trim && !trim_middle(full, windows, p))
        return false;
    if (st != 1 && (st * p->W) % bd != 0)
        return false;
    p->start = spmd_mad(st * p->W, bd - 1 - swd->pad_lo, bd);
    int64_t dss = st * (p->W - 1) + dilated;
    p->limit = spmd_mad(st * p->W, dss + bd - 1 - swd->pad_lo, bd);
    for (int64_t k = 0; k < p->n; k++)
        p->shard_size = max64(p->shard_size, mad_eval(p->limit, k) - mad_eval(p->start, k));
    p->padded = mad_eval(p->limit, p->n - 1);
    if (bd != 1)
        plan_base_dilation(p, wd, dilated, swd);
    return p->shard_size > 0;
}

/* ---- halo exchange along one dim ---- */

typedef struct Halo {
    SpmdCalc left, right;   /* per-ordinal halo sizes */
    int64_t max_l, max_r; /* over ordinals [1, n) and [0, n - 1) */
    int64_t lb, rb;     /* useful region [lb, rb) relative to the own shard */
    bool compact;       /* halos far beyond the neighbours: ExchangeHaloCompact */
} Halo;

/* Whether ExchangeHalo (neighbour halos) can build the halos h->left/right over n shards of
 * S; fills the rest of h. */
static bool
halo_fits(Halo *h, int64_t n, int64_t S)
{
    h->max_l = spmd_calc_max(&h->left, 1, n);
    h->max_r = spmd_calc_max(&h->right, 0, n - 1);
    if (h->max_l + h->max_r + S >= S * n && (h->max_l > S || h->max_r > S))
        return false;
    h->lb = -spmd_calc_max(&h->left, 0, n);
    h->rb = S + spmd_calc_max(&h->right, 0, n);
    return h->lb < h->rb;
}

/* Whether the halos h->left/right of plan p can be exchanged (between neighbours, or with
 * the compact exchange, which h->compact then selects). */
static bool
halo_feasible(const DimPlan *p, Halo *h)
{
    int64_t n = p->n, S = p->S;
    h->compact = false;
    if (p->el == spmd_calc_eval(&h->left, 0)) { /* ExchangeHaloCompact territory */
        int64_t max_halo = max64(spmd_calc_max(&h->left, 0, n), spmd_calc_max(&h->right, 0, n));
        int64_t max_lr = spmd_calc_eval(&h->left, 0) + spmd_calc_eval(&h->right, 0);
        for (int64_t i = 1; i < n; i++)
            max_lr = max64(max_lr, spmd_calc_eval(&h->left, i) + spmd_calc_eval(&h->right, i));
        if (S + max_lr == p->shard_size && max_halo > 2 * p->shard_size) {
            h->compact = true; /* unless replicating is simpler */
            return p->shard_size * 2 < n * S;
        }
    }
    return halo_fits(h, n, S);
}

/* Halo sizes of plan p, and whether they can be exchanged. */
static bool
halo_of(const DimPlan *p, Halo *h)
{
    h->left = calc_diff(spmd_mad(p->S, p->el, 1), p->start);
    h->right = calc_diff(p->limit, spmd_mad(p->S, p->S + p->el, 1));
    return halo_feasible(p, h);
}

/* Slice [lo, hi) of x along dim (x itself when that is everything). */
static IrInstr *
slice_dim(SpmdCtx *cx, IrInstr *x, uint32_t dim, int64_t lo, int64_t hi)
{
    int64_t st[SPMD_MAX_RANK], li[SPMD_MAX_RANK];
    if (!x)
        return NULL;
    for (uint32_t d = 0; d < x->shape.rank; d++) {
        st[d] = 0;
        li[d] = x->shape.dims[d];
    }
    st[dim] = lo;
    li[dim] = hi;
    return spmd_emit_slice(cx, x, st, li);
}

/* Collective-permute of `x` from tile k to tile k + shift along dim (shift may be negative),
 * pairs in row-major order of the tile array of `s`. */
static IrInstr *
shift_permute(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s, uint32_t dim,
              int64_t shift, IrInstr *x)
{
    int64_t total = shd_device_count(s), stride = 1;
    for (uint32_t d = s->n_tile_dims; d-- > dim + 1;)
        stride *= s->tile_dims[d];
    int64_t *pairs = SL_NEW_ARRAY(cx->arena, int64_t, 2 * total);
    if (!pairs || !x)
        return NULL;
    uint32_t np = 0;
    int64_t n = s->tile_dims[dim], a = shift < 0 ? -shift : shift;
    for (int64_t p = 0; p < total; p++) {
        int64_t k = p / stride % n;
        if (k < a)
            continue;
        /* every device at index k >= |shift| receives (shift > 0) or sends (shift < 0) */
        int64_t other = s->devices[p - a * stride];
        pairs[2 * np] = shift > 0 ? other : s->devices[p];
        pairs[2 * np + 1] = shift > 0 ? s->devices[p] : other;
        np++;
    }
    return spmd_coll_permute(cx, st, x, pairs, np);
}

/* ExchangeHalo: left halos, the (trimmed) own shard and right halos, concatenated. */
static IrInstr *
exchange(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s, uint32_t dim, IrInstr *x,
         const Halo *h, int64_t S)
{
    IrInstr *pieces[2 * SPMD_MAX_RANK + 1];
    uint32_t np = 0;
    for (int64_t i = ceil_of(h->max_l, S) - 1; i >= 0 && (-i - 1) * S < h->rb; i--) {
        int64_t incl = min64(h->max_l - S * i, S), rskip = max64(-i * S - h->rb, 0);
        IrInstr *src = slice_dim(cx, x, dim, S - incl, S - rskip);
        if (np < SL_COUNTOF(pieces))
            pieces[np++] = shift_permute(cx, st, s, dim, i + 1, src);
    }
    if (h->lb < S && h->rb > 0 && np < SL_COUNTOF(pieces))
        pieces[np++] = slice_dim(cx, x, dim, max64(0, h->lb), min64(S, h->rb));
    int64_t skipped = min64(max64(h->lb - S, 0), max64(h->max_r, 0)) / S;
    for (int64_t i = skipped; i < ceil_of(h->max_r, S); i++) {
        int64_t incl = min64(h->max_r - S * i, S), lskip = max64(h->lb - (i + 1) * S, 0);
        IrInstr *src = slice_dim(cx, x, dim, lskip, incl);
        if (np < SL_COUNTOF(pieces))
            pieces[np++] = shift_permute(cx, st, s, dim, -(i + 1), src);
    }
    return np ? spmd_emit_concatenate(cx, pieces, np, dim) : NULL;
}

/* select(el <= start(ordinal) + iota < D + el, x, pad) where padding or unevenness shows. */
static IrInstr *
mask_dim(SpmdCtx *cx, IrInstr *x, uint32_t dim, const DimPlan *p, int64_t D, IrInstr *offset,
         IrInstr *pad)
{
    int64_t right = p->padded - D - p->el;
    bool left = p->el > 0 || p->mask_lo;
    if (!x || (!left && right <= 0))
        return x;
    IrShape is = ir_shape_make(cx->arena, IR_DT_S32, x->shape.dims, x->shape.rank);
    IrInstr *idx = spmd_emit_binary(cx, IR_OP_ADD, spmd_emit_iota(cx, &is, dim),
                                    spmd_emit_broadcast(cx, offset, &is, NULL, 0));
    IrInstr *ok = NULL;
    if (left) {
        IrInstr *lo = spmd_emit_constant_scalar(cx, IR_DT_S32, p->el);
        ok = spmd_emit_compare(cx, idx, spmd_emit_broadcast(cx, lo, &is, NULL, 0), "GE");
    }
    if (right > 0) {
        IrInstr *hi = spmd_emit_constant_scalar(cx, IR_DT_S32, D + p->el);
        IrInstr *lt = spmd_emit_compare(cx, idx, spmd_emit_broadcast(cx, hi, &is, NULL, 0), "LT");
        ok = ok ? spmd_emit_binary(cx, IR_OP_AND, ok, lt) : lt;
    }
    IrShape vs = ir_shape_clone(cx->arena, &x->shape);
    return spmd_emit_select(cx, ok, x, spmd_emit_broadcast(cx, pad, &vs, NULL, 0));
}

/* Pads dim of x by (lo, hi) with pad. */
static IrInstr *
pad_dim(SpmdCtx *cx, IrInstr *x, uint32_t dim, int64_t lo, int64_t hi, IrInstr *pad)
{
    IrPadDim pads[SPMD_MAX_RANK];
    if (!x)
        return NULL;
    for (uint32_t d = 0; d < x->shape.rank; d++)
        pads[d] = (IrPadDim){0, 0, 0};
    pads[dim] = (IrPadDim){lo, hi, 0};
    return spmd_emit_pad(cx, x, pad, pads);
}

/* The compact exchange with the per-ordinal halo sizes of h. */
static IrInstr *
exchange_compact(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s, uint32_t dim,
                 IrInstr *x, const DimPlan *p, const Halo *h, IrInstr *ordinal, IrInstr *pad,
                 bool mask)
{
    int64_t *lr = SL_NEW_ARRAY(&cx->scratch, int64_t, 2 * p->n);
    if (!lr)
        return NULL;
    for (int64_t k = 0; k < p->n; k++) {
        lr[k] = spmd_calc_eval(&h->left, k);
        lr[p->n + k] = spmd_calc_eval(&h->right, k);
    }
    return spmd_halo_exchange_compact(cx, st, s, dim, x, p->ex_base, lr, lr + p->n,
                                      mask ? pad : NULL, mask, ordinal);
}

/* ExchangeHaloAndGetValidData for one dim (feasibility already checked by halo_of). The mask
 * compares positions on the padded shape, where the window starts at `mask_off` (NULL: the
 * plan's start). */
static IrInstr *
exchange_valid(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s, uint32_t dim,
               IrInstr *x, const DimPlan *p, const Halo *h, IrInstr *ordinal, IrInstr *pad,
               bool mask, bool force_mask_compact, const SpmdCalc *mask_off)
{
    if (h->compact)
        return exchange_compact(cx, st, s, dim, x, p, h, ordinal, pad,
                                mask || force_mask_compact);
    IrInstr *cat = exchange(cx, st, s, dim, x, h, p->S);
    if (!cat)
        return NULL;
    int64_t n = p->n, max_l = spmd_calc_max(&h->left, 1, n);
    /* window plans: shard 0's left halo is the explicit padding el; select-and-scatter: it is
     * left(0) itself (windows before the first, or a crop below el) */
    int64_t max_lp = max64(max_l, p->scatter ? spmd_calc_eval(&h->left, 0) : p->el);
    SpmdCalc off = {0}; /* max_lp - left(i): where shard i starts in the padded concat */
    spmd_calc_add(&off, 1, spmd_mad(0, max_lp, 1));
    for (uint32_t k = 0; k < h->left.n; k++)
        spmd_calc_add(&off, -h->left.coef[k], h->left.t[k]);
    int64_t xl = max64(0, max_lp - max64(0, max_l));
    int64_t xr = max64(0, spmd_calc_max(&off, 0, n) + p->shard_size - cat->shape.dims[dim] - xl);
    if (xl > 0 || xr > 0)
        cat = pad_dim(cx, cat, dim, xl, xr, pad);
    if (cat && cat->shape.dims[dim] != p->shard_size) {
        if (calc_is_constant(&h->left, n) && spmd_calc_eval(&h->left, 0) == p->el) {
            cat = slice_dim(cx, cat, dim, 0, p->shard_size);
        } else {
            IrInstr *offs[SPMD_MAX_RANK];
            int64_t sizes[SPMD_MAX_RANK];
            IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
            for (uint32_t d = 0; d < cat->shape.rank; d++) {
                offs[d] = zero;
                sizes[d] = cat->shape.dims[d];
            }
            offs[dim] = spmd_calc_emit(cx, &off, ordinal);
            sizes[dim] = p->shard_size;
            cat = spmd_emit_dynamic_slice(cx, cat, offs, sizes);
        }
    }
    if (!mask)
        return cat;
    IrInstr *moff = mask_off ? spmd_calc_emit(cx, mask_off, ordinal)
                             : mad_emit(cx, p->start, ordinal);
    return mask_dim(cx, cat, dim, p, p->ex_base, moff, pad);
}

/* The exchange plan of spmd_halo_exchange_valid; false when it is not feasible. */
static bool
plan_valid(int64_t n, int64_t S, int64_t base_size, const SpmdCalc *left, const SpmdCalc *right,
           int64_t el, int64_t size, DimPlan *p, Halo *h)
{
    if (n < 2 || S < 1 || size < 1)
        return false;
    /* the window of shard k starts at S * k + el - left(k) on the padded full shape */
    SpmdCalc start = {0};
    spmd_calc_add(&start, 1, spmd_mad(S, el, 1));
    for (uint32_t k = 0; k < left->n; k++)
        spmd_calc_add(&start, -left->coef[k], left->t[k]);
    *p = (DimPlan){.n = n, .S = S, .el = el, .shard_size = size, .ex_base = base_size,
                   .pre_hi = S, .padded = spmd_calc_eval(&start, n - 1) + size};
    *h = (Halo){.left = *left, .right = *right};
    return halo_feasible(p, h);
}

bool
spmd_halo_can_exchange(int64_t n, int64_t S, int64_t base_size, const SpmdCalc *left,
                       const SpmdCalc *right, int64_t el, int64_t size)
{
    DimPlan p;
    Halo h;
    return plan_valid(n, S, base_size, left, right, el, size, &p, &h);
}

IrInstr *
spmd_halo_exchange_valid(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s, uint32_t dim,
                         IrInstr *x, int64_t base_size, const SpmdCalc *left,
                         const SpmdCalc *right, int64_t el, int64_t size, IrInstr *ordinal)
{
    DimPlan p;
    Halo h;
    if (!x || !ordinal ||
        !plan_valid(shd_dim_shards(s, dim), x->shape.dims[dim], base_size, left, right, el, size,
                    &p, &h))
        return NULL;
    IrInstr *zero = spmd_emit_constant_scalar(cx, x->shape.dtype, 0);
    return exchange_valid(cx, st, s, dim, x, &p, &h, ordinal, zero, false, false, NULL);
}

/* ---- the reshard ---- */

typedef struct WinPlan {
    uint32_t rank;
    bool windowed[SPMD_MAX_RANK]; /* target-sharded dim with a non-trivial window */
    DimPlan dim[SPMD_MAX_RANK];
    int64_t shard_shape[SPMD_MAX_RANK];
    IrWindowDim *swin;
    bool ds_out;
    bool trimmed;                 /* some dim exchanges over fewer shards than the target */
} WinPlan;

static bool
plan_all(SpmdCtx *cx, const IrShape *base, const IrWindowDim *window, const ShdSharding *t,
         bool trim, WinPlan *wp)
{
    wp->rank = base->rank;
    wp->ds_out = false;
    wp->trimmed = false;
    wp->swin = SL_DUP_ARRAY(cx->arena, IrWindowDim, window, base->rank ? base->rank : 1);
    if (!wp->swin)
        return false;
    for (uint32_t d = 0; d < base->rank; d++) {
        int64_t n = shd_dim_shards(t, d), D = base->dims[d];
        wp->windowed[d] = n > 1 && !is_trivial(&window[d]);
        wp->shard_shape[d] = ceil_of(D, n);
        if (!wp->windowed[d])
            continue;
        DimPlan *p = &wp->dim[d];
        if (!plan_dim(&window[d], D, n, ceil_of(D, n), trim, &wp->swin[d], p))
            return false;
        wp->trimmed = wp->trimmed || p->trimmed;
        if (!p->single)
            wp->shard_shape[d] = p->shard_size;
        wp->ds_out = wp->ds_out || p->ds_out;
    }
    return true;
}

/* Shards taking part in the exchange along d (the target's count unless trimmed). */
static int64_t
exchange_shards(const WinPlan *wp, const ShdSharding *t, uint32_t d)
{
    if (!wp->windowed[d])
        return shd_dim_shards(t, d);
    return wp->dim[d].single ? 1 : wp->dim[d].n;
}

/* The target restricted to the shards left after trimming (subgroup dims kept). */
static const ShdSharding *
trimmed_target(SpmdCtx *cx, const ShdSharding *t, const WinPlan *wp)
{
    if (!wp->trimmed)
        return t;
    uint32_t nt = t->n_tile_dims;
    int64_t dims[SPMD_MAX_RANK + 8], idx[SPMD_MAX_RANK + 8];
    if (nt > SL_COUNTOF(dims))
        return NULL;
    int64_t total = 1;
    for (uint32_t d = 0; d < nt; d++) {
        dims[d] = d < wp->rank ? exchange_shards(wp, t, d) : t->tile_dims[d];
        total *= dims[d];
    }
    int64_t *devs = SL_NEW_ARRAY(&cx->scratch, int64_t, total);
    if (!devs)
        return NULL;
    for (int64_t k = 0; k < total; k++) {
        int64_t rest = k, pos = 0;
        for (uint32_t d = nt; d-- > 0;) {
            idx[d] = rest % dims[d];
            rest /= dims[d];
        }
        for (uint32_t d = 0; d < nt; d++) {
            int64_t i = idx[d];
            if (d < wp->rank && wp->windowed[d] && wp->dim[d].mid_count > 0 &&
                i >= wp->dim[d].mid_first)
                i += wp->dim[d].mid_count;
            pos = pos * t->tile_dims[d] + i;
        }
        devs[k] = t->devices[pos];
    }
    return shd_tiled(cx->arena, dims, nt, devs, t->subgroups, t->n_subgroups);
}

/* Output offsets of the base-dilated dims: W * k - (start(k) * bd + pl0 - max_pl). */
static IrInstr **
output_offsets(SpmdCtx *cx, const SpmdState *st, const ShdSharding *t, const WinPlan *wp)
{
    if (!wp->ds_out)
        return NULL;
    IrInstr **o = SL_NEW_ARRAY(cx->arena, IrInstr *, wp->rank);
    if (!o)
        return NULL;
    IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
    for (uint32_t d = 0; d < wp->rank; d++) {
        const DimPlan *p = &wp->dim[d];
        o[d] = zero;
        if (!wp->windowed[d] || !p->ds_out)
            continue;
        IrInstr *ord = spmd_partition_ordinal(cx, st, t, d);
        IrInstr *first = mad_emit(cx, spmd_mad(p->bd, p->pl0 - p->max_pl, 1),
                                  mad_emit(cx, p->start, ord));
        o[d] = spmd_emit_binary(cx, IR_OP_SUBTRACT, mad_emit(cx, spmd_mad(p->W, 0, 1), ord), first);
    }
    return o;
}

/* Windowed dims unsharded in the value (or the value replicated): explicit pad, then a
 * dynamic-slice of each shard's window range. */
static SlStatus
pad_and_slice(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *t, const WinPlan *wp,
              IrInstr *pad, SpmdWindowedInput *out, SlError *err)
{
    const IrShape *base = v->base_shape;
    bool repl = !shd_is_tiled(v->sharding);
    IrPadDim pads[SPMD_MAX_RANK];
    IrInstr *offs[SPMD_MAX_RANK];
    IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
    for (uint32_t d = 0; d < wp->rank; d++) {
        int64_t n = shd_dim_shards(t, d);
        pads[d] = (IrPadDim){0, 0, 0};
        offs[d] = zero;
        if (wp->windowed[d]) {
            const DimPlan *p = &wp->dim[d];
            pads[d] = (IrPadDim){p->el, p->padded - p->el - base->dims[d], 0};
            offs[d] = mad_emit(cx, p->start, spmd_partition_ordinal(cx, v->state, t, d));
        } else if (n > 1 && repl) {
            int64_t S = wp->shard_shape[d];
            pads[d] = (IrPadDim){0, S * n - base->dims[d], 0};
            offs[d] = mad_emit(cx, spmd_mad(S, 0, 1), spmd_partition_ordinal(cx, v->state, t, d));
        }
    }
    IrInstr *x = spmd_emit_pad(cx, v->hlo, pad, pads);
    x = spmd_emit_dynamic_slice(cx, x, offs, wp->shard_shape);
    out->sharded_input = x;
    out->shard_window = wp->swin;
    out->dynamic_slice_index = output_offsets(cx, v->state, t, wp);
    return x ? SL_OK : spmd_nomem(cx, err);
}

static bool
is_repl_value(const ShdSharding *s)
{
    return s->kind == SHD_REPLICATED || s->kind == SHD_UNKNOWN || s->kind == SHD_UNREDUCED;
}

/* The target with its windowed dims replicated (GetShardingReplicatedOnWindowedDimension). */
static const ShdSharding *
windowed_replicated(SpmdCtx *cx, const ShdSharding *t, const IrWindowDim *window, uint32_t r)
{
    int64_t dims[SPMD_MAX_RANK];
    uint32_t n = 0;
    for (uint32_t d = 0; d < r; d++)
        if (!is_trivial(&window[d]))
            dims[n++] = d;
    return n ? shd_partially_replicate_dims(cx->arena, t, dims, n) : t;
}

/* The ordinal along d among the exchanging shards: shards after a trimmed middle range move
 * down by the number of output-holding shards before it (as upstream computes it). */
static IrInstr *
exchange_ordinal(SpmdCtx *cx, const SpmdState *st, const ShdSharding *t, const DimPlan *p,
                 uint32_t d)
{
    IrInstr *ord = spmd_partition_ordinal(cx, st, t, d);
    if (p->mid_count == 0 || !ord)
        return ord;
    IrInstr *first = spmd_emit_constant_scalar(cx, IR_DT_S32, p->mid_first);
    IrInstr *on_left = spmd_emit_compare(cx, ord, first, "LT");
    IrInstr *right = spmd_emit_binary(cx, IR_OP_SUBTRACT, ord, first);
    return spmd_emit_select(cx, on_left, ord, right);
}

/* Before the exchange: mask the uneven tails of trimmed dims, slice away useless data. */
static IrInstr *
pre_exchange(SpmdCtx *cx, const SpmdValue *v, const WinPlan *wp, IrInstr *pad)
{
    uint64_t skip = ~(uint64_t)0;
    int64_t lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < wp->rank; d++) {
        lo[d] = 0;
        hi[d] = v->hlo->shape.dims[d];
        if (!wp->windowed[d] || wp->dim[d].single)
            continue;
        if (wp->dim[d].pre_mask && d < 64)
            skip &= ~((uint64_t)1 << d);
        lo[d] = wp->dim[d].pre_lo;
        hi[d] = wp->dim[d].pre_hi;
    }
    IrInstr *x = ~skip ? spmd_pad_with_value(cx, v, pad, skip) : v->hlo;
    return x ? spmd_emit_slice(cx, x, lo, hi) : NULL;
}

static SlStatus
halo_path(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *t, const WinPlan *wp,
          const Halo *h, IrInstr *pad, const bool mask[2], SpmdWindowedInput *out,
          SlError *err)
{
    int64_t tiles = 1;
    for (uint32_t d = 0; d < wp->rank; d++)
        tiles *= exchange_shards(wp, t, d);
    out->shard_window = wp->swin;
    out->dynamic_slice_index = output_offsets(cx, v->state, t, wp);
    if (tiles == 1) { /* trimmed down to one shard: the data is already in place */
        out->sharded_input = v->hlo;
        return SL_OK;
    }
    const ShdSharding *ht = trimmed_target(cx, t, wp);
    IrInstr *x = ht ? pre_exchange(cx, v, wp, pad) : NULL;
    for (uint32_t d = 0; d < wp->rank && x; d++) {
        if (!wp->windowed[d] || wp->dim[d].single)
            continue;
        IrInstr *ord = exchange_ordinal(cx, v->state, t, &wp->dim[d], d);
        x = ord ? exchange_valid(cx, v->state, ht, d, x, &wp->dim[d], &h[d], ord, pad, mask[0],
                                 mask[1], NULL)
                : NULL;
    }
    if (!x)
        return spmd_nomem(cx, err);
    out->sharded_input = x;
    return SL_OK;
}

/* Plans with trimming for the halo path and without it for explicit pad + slice. */
static SlStatus
plan_both(SpmdCtx *cx, const SpmdValue *v, const IrWindowDim *window, const ShdSharding *target,
          WinPlan *trimmed, WinPlan *plain)
{
    const IrShape *base = v->base_shape;
    if (!ir_shape_is_array(base) || base->rank > SPMD_MAX_RANK || !shd_is_tiled(target) ||
        shd_data_rank(target) != base->rank || v->sharding->kind == SHD_TUPLE ||
        shd_is_manual_subgroup(target) || !plan_all(cx, base, window, target, false, plain))
        return SL_ERR_UNSUPPORTED;
    if (!plan_all(cx, base, window, target, true, trimmed))
        *trimmed = *plain;
    return SL_OK;
}

SlStatus
spmd_reshard_as_windowed_input(SpmdCtx *cx, const SpmdValue *v, const IrWindowDim *window,
                               const ShdSharding *target, IrInstr *pad_value, bool mask_invalid,
                               SpmdWindowedInput *out, SlError *err)
{
    return spmd_reshard_as_windowed_input_ex(cx, v, window, target, pad_value, mask_invalid,
                                             false, out, err);
}

SlStatus
spmd_reshard_as_windowed_input_ex(SpmdCtx *cx, const SpmdValue *v, const IrWindowDim *window,
                                  const ShdSharding *target, IrInstr *pad_value,
                                  bool mask_invalid, bool force_mask_in_compact,
                                  SpmdWindowedInput *out, SlError *err)
{
    const IrShape *base = v->base_shape;
    WinPlan wp, plain;
    if (plan_both(cx, v, window, target, &wp, &plain) != SL_OK)
        return SL_ERR_UNSUPPORTED;
    memset(out, 0, sizeof(*out));
    const ShdSharding *rw = windowed_replicated(cx, target, window, base->rank);
    if (!rw)
        return spmd_nomem(cx, err);
    if (!pad_value)
        pad_value = spmd_emit_constant_scalar(cx, base->dtype, 0);
    SpmdValue cur = *v;
    bool same = shd_equal(cur.sharding, target);
    if (is_repl_value(cur.sharding) || (!same && shd_equal(rw, cur.sharding)))
        return pad_and_slice(cx, &cur, target, &plain, pad_value, out, err);
    Halo *h = SL_NEW_ARRAY(cx->arena, Halo, base->rank ? base->rank : 1);
    if (!h)
        return spmd_nomem(cx, err);
    bool ok = true;
    for (uint32_t d = 0; d < base->rank && ok; d++)
        ok = !wp.windowed[d] || wp.dim[d].single || halo_of(&wp.dim[d], &h[d]);
    SlStatus st = SL_OK;
    if (!same) /* upstream reshards to the target first, then retries */
        st = spmd_reshard(cx, &cur, target, NULL, &cur, err);
    if (st == SL_OK && !ok) { /* halo beyond the neighbour: replicate the windowed dims */
        if (!shd_equal(rw, cur.sharding))
            st = spmd_reshard(cx, &cur, rw, NULL, &cur, err);
        if (st == SL_OK)
            st = pad_and_slice(cx, &cur, target, &plain, pad_value, out, err);
        return st;
    }
    if (st != SL_OK)
        return st;
    const bool mask[2] = {mask_invalid, force_mask_in_compact};
    return halo_path(cx, &cur, target, &wp, h, pad_value, mask, out, err);
}

/* ---- select-and-scatter (upstream HandleSelectAndScatter's per-dim halo loop) ---- */

/* One sharded dim: windows [first(k), limit(k)) overlap shard k's operand data; the source
 * and the operand exchange halos so that shard k holds those windows and the data they
 * cover. */
typedef struct ScatterDim {
    SpmdCalc win_first; /* first(k) */
    SpmdCalc data_off;  /* stride * first(k): the data window's start on the padded operand */
    DimPlan sp, dp; /* exchange shapes of the source and of the operand */
    Halo sh, dh;
} ScatterDim;

static bool
scatter_plan(const IrWindowDim *wd, int64_t D, int64_t Ds, int64_t n, ScatterDim *q)
{
    if (wd->lhs_dilate > 1 || wd->rhs_dilate > 1 || wd->stride < 1 || wd->size < 1 ||
        wd->pad_lo < 0 || wd->pad_hi < 0 || wd->reversal || D < 1 || Ds < 1)
        return false;
    /* a stride beyond the size leaves gaps, which the output keeps: widen the window */
    int64_t st = wd->stride, size = max64(wd->size, st), pl = wd->pad_lo;
    int64_t Sd = ceil_of(D, n), Ss = ceil_of(Ds, n);
    SpmdMad first = spmd_mad(Sd, pl - size + st, st), limit = spmd_mad(Sd, Sd + pl + st - 1, st);
    memset(q, 0, sizeof(*q));
    spmd_calc_add(&q->win_first, 1, first);
    spmd_calc_add(&q->data_off, st, first);
    int64_t max_windows = 0;
    for (int64_t k = 0; k < n; k++)
        max_windows = max64(max_windows, mad_eval(limit, k) - mad_eval(first, k));
    if (max_windows < 1)
        return false;
    /* the truncating division can start shard 0 (or more, for windows wider than a shard) at
     * a window before the first: its source and operand then hold garbage that the masks
     * must turn into init and pad, so that it selects and adds nothing */
    int64_t last = mad_eval(limit, n - 1);
    bool before = mad_eval(first, 0) < 0;
    q->sp = (DimPlan){.n = n, .S = Ss, .el = 0, .start = first, .shard_size = max_windows,
                      .padded = last, .ex_base = Ds, .pre_hi = Ss, .scatter = true,
                      .mask_lo = before};
    q->dp = (DimPlan){.n = n, .S = Sd, .el = pl, .shard_size = (max_windows - 1) * st + size,
                      .padded = (last - 1) * st + size, .ex_base = D, .pre_hi = Sd,
                      .scatter = true, .mask_lo = before};
    q->sh.left = calc_diff(spmd_mad(Ss, 0, 1), first);
    q->sh.right = calc_diff(limit, spmd_mad(Ss, Ss, 1));
    spmd_calc_add(&q->dh.left, 1, spmd_mad(Sd, pl, 1));
    spmd_calc_add(&q->dh.left, -st, first);
    spmd_calc_add(&q->dh.right, st, limit);
    spmd_calc_add(&q->dh.right, -1, spmd_mad(Sd, Sd + st + pl - size, 1));
    return halo_fits(&q->sh, n, Ss) && halo_fits(&q->dh, n, Sd);
}

SlStatus
spmd_halo_select_and_scatter(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s,
                             const IrWindowDim *w, const IrShape *base, const IrShape *src_base,
                             SpmdScatterHalo *io, SlError *err)
{
    uint32_t r = base->rank;
    if (r > SPMD_MAX_RANK || src_base->rank != r || shd_data_rank(s) != r)
        return SL_ERR_UNSUPPORTED;
    ScatterDim *q = SL_NEW_ARRAY(&cx->scratch, ScatterDim, r ? r : 1);
    if (!q)
        return spmd_nomem(cx, err);
    for (uint32_t d = 0; d < r; d++) {
        int64_t n = shd_dim_shards(s, d);
        if (n > 1 && !scatter_plan(&w[d], base->dims[d], src_base->dims[d], n, &q[d]))
            return SL_ERR_UNSUPPORTED;
    }
    IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
    for (uint32_t d = 0; d < r; d++) {
        io->offs[d] = zero;
        if (shd_dim_shards(s, d) <= 1)
            continue;
        IrInstr *ord = spmd_partition_ordinal(cx, st, s, d);
        if (!ord)
            return spmd_nomem(cx, err);
        io->source = exchange_valid(cx, st, s, d, io->source, &q[d].sp, &q[d].sh, ord,
                                    io->src_pad, true, false, &q[d].win_first);
        io->operand = exchange_valid(cx, st, s, d, io->operand, &q[d].dp, &q[d].dh, ord,
                                     io->op_pad, true, false, &q[d].data_off);
        if (!io->source || !io->operand)
            return spmd_nomem(cx, err);
        /* the own part of the local result starts after the left halo, on every shard: shard
         * 0's window starts at the padded position stride * first(0), so its left halo is the
         * low padding plus any windows before the first (upstream uses the low padding there,
         * which is off by those windows) */
        io->offs[d] = spmd_calc_emit(cx, &q[d].dh.left, ord);
        if (!io->offs[d])
            return spmd_nomem(cx, err);
    }
    return SL_OK;
}
