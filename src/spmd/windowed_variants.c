/* windowed_variants.c - the unrolled and bidirectional windowed-einsum loops (gspmd.md E.12;
 * seeds/000 EmitWindowedDotGeneral with unroll_windowed_einsum / bidirectional_windowed_einsum).
 * Owns: the unrolled bodies (two half-steps per trip, all-gather and reduce-scatter), the
 * bidirectional body (both ring directions, one dot over a pair dim: its geometry, the two
 * data ids, the halves of the non-windowed operand, the dot with updated dimension numbers),
 * and the realignment of a reduce-scatter loop's two partial buffers after the loop. Does not
 * own: the loop skeleton, the ring primitives or the choice of variant (windowed_loop.c).
 * Invariant: as windowed_loop.c: everything is emitted into the body computation that
 * windowed_loop.c has opened (cx->comp), except spmd_we_finish_rs, which runs after the loop. */
#include "spmd/windowed_int.h"

/* ---- bidirectional half-step (dots only) ---- */

/* `x` with a size-1 dim inserted at `at`. */
IrInstr *
spmd_we_insert_unit_dim(SpmdCtx *cx, IrInstr *x, int64_t at)
{
    int64_t dims[SPMD_MAX_RANK + 1];
    uint32_t r = x ? x->shape.rank : 0, m = 0;
    if (!x || r >= SPMD_MAX_RANK)
        return NULL;
    for (uint32_t d = 0; d <= r; d++) {
        if ((int64_t)d == at)
            dims[m++] = 1;
        if (d < r)
            dims[m++] = x->shape.dims[d];
    }
    return spmd_emit_reshape(cx, x, dims, m);
}

/* `x` with dim `at` (size 1 or 2) removed, after keeping only index `k` of it. */
static IrInstr *
take_half(SpmdCtx *cx, IrInstr *x, int64_t at, int64_t k)
{
    int64_t start[SPMD_MAX_RANK] = {0}, limit[SPMD_MAX_RANK], dims[SPMD_MAX_RANK];
    uint32_t r = x ? x->shape.rank : 0, m = 0;
    if (!x || r > SPMD_MAX_RANK)
        return NULL;
    for (uint32_t d = 0; d < r; d++) {
        limit[d] = x->shape.dims[d];
        if ((int64_t)d != at)
            dims[m++] = x->shape.dims[d];
    }
    start[at] = k;
    limit[at] = k + 1;
    return spmd_emit_reshape(cx, spmd_emit_slice(cx, x, start, limit), dims, m);
}

/* One of the two slices of the non-windowed operand: the piece for `id`, placed at index 0
 * (`first`) or 1 of a new pair dim at ssd, the other index holding the lowest value (the
 * uneven padding comes first, so the lowest value fills the whole other index). */
static IrInstr *
slice_half(WeLoop *L, IrInstr *x, IrInstr *id, bool first)
{
    SpmdCtx *cx = L->cx;
    int64_t tile[SPMD_MAX_RANK];
    IrInstr *y = spmd_we_insert_unit_dim(cx, spmd_we_pad_to_tiles(cx, x, L->slice, tile), L->ssd);
    IrPadDim pads[SPMD_MAX_RANK];
    if (!y)
        return NULL;
    for (uint32_t d = 0; d < y->shape.rank; d++)
        pads[d] = (IrPadDim){0, 0, 0};
    pads[L->ssd] = (IrPadDim){first ? 0 : 1, first ? 1 : 0, 0};
    IrDtype t = y->shape.dtype;
    IrInstr *low = ir_dtype_kind(t) == 'F' ? spmd_emit_constant_literal(cx, t, "-inf")
                                            : spmd_emit_constant_scalar(cx, t, 0);
    y = spmd_emit_pad(cx, y, low, pads);
    return y ? spmd_we_slice_for_id(L, y, id, L->slice2) : NULL;
}

/* Shifts dims >= `at` of a dimension list by one and inserts `at` before the old dim `at`
 * when it was listed (upstream UpdateDDNums, keeping pairs aligned); `at` < 0: copy. */
static uint32_t
shift_insert(const int64_t *in, uint32_t n, int64_t at, int64_t *out)
{
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (at >= 0 && in[k] == at)
            out[m++] = at;
        out[m++] = at >= 0 && in[k] >= at ? in[k] + 1 : in[k];
    }
    return m;
}

bool
spmd_we_listed_dim(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t k = 0; k < n; k++)
        if (v[k] == x)
            return true;
    return false;
}

/* The local dot of operands that carry a pair dim (lhs at `nl`, rhs at `nr`, -1 = none): the
 * source dimension numbers updated, the result shape derived; *od = the output pair dim. */
static IrInstr *
dot_with_pair_dims(WeLoop *L, IrInstr *l, IrInstr *r, int64_t nl, int64_t nr, int64_t *od)
{
    static const IrAttrKey keys[4] = {IR_ATTR_LHS_BATCH_DIMS, IR_ATTR_RHS_BATCH_DIMS,
                                      IR_ATTR_LHS_CONTRACTING_DIMS, IR_ATTR_RHS_CONTRACTING_DIMS};
    SpmdCtx *cx = L->cx;
    int64_t lists[4][SPMD_MAX_RANK + 1], dims[2 * SPMD_MAX_RANK + 2];
    uint32_t cnt[4], m = 0;
    if (!l || !r || l->shape.rank > SPMD_MAX_RANK || r->shape.rank > SPMD_MAX_RANK)
        return NULL;
    for (int k = 0; k < 4; k++) {
        const int64_t *v;
        uint32_t n = ir_instr_ints_attr(L->job->hlo, keys[k], &v);
        cnt[k] = n < SPMD_MAX_RANK ? shift_insert(v, n, k % 2 ? nr : nl, lists[k]) : 0;
    }
    *od = -1;
    for (uint32_t k = 0; k < cnt[0]; k++) {
        *od = lists[0][k] == nl && nl >= 0 ? (int64_t)m : *od;
        dims[m++] = l->shape.dims[lists[0][k]];
    }
    for (int side = 0; side < 2; side++) {
        IrInstr *x = side ? r : l;
        int64_t nd = side ? nr : nl;
        for (uint32_t d = 0; d < x->shape.rank; d++) {
            if (spmd_we_listed_dim(lists[side], cnt[side], d) ||
                spmd_we_listed_dim(lists[2 + side], cnt[2 + side], d))
                continue;
            *od = (int64_t)d == nd ? (int64_t)m : *od;
            dims[m++] = x->shape.dims[d];
        }
    }
    IrShape s = ir_shape_make(cx->arena, L->job->hlo->shape.dtype, dims, m);
    IrInstr *ops[2] = {l, r};
    IrInstr *dot = spmd_emit_clone(cx, L->job->hlo, &s, ops, 2);
    for (int k = 0; dot && k < 4; k++) {
        IrAttr *a = ir_instr_find_attr_mut(dot, keys[k]);
        if (!a && cnt[k])
            a = ir_instr_add_attr(cx->out, dot, keys[k]);
        if (!a)
            continue;
        a->u.ints.n = cnt[k];
        a->u.ints.v = cnt[k] ? SL_DUP_ARRAY(cx->arena, int64_t, lists[k], cnt[k]) : NULL;
        if (cnt[k] && !a->u.ints.v)
            return NULL;
    }
    return dot;
}

/* The two data ids of a bidirectional half-step: counter-clockwise (i + p) and clockwise
 * (p - 1 - i), both shifted by half the ring for the reduce-scatter flavour. */
static void
bidir_ids(WeLoop *L, IrInstr *i, IrInstr **ccw, IrInstr **cw)
{
    SpmdCtx *cx = L->cx;
    IrInstr *pid = spmd_partition_id(cx, L->p->st), *n = spmd_we_u32(L, L->N);
    IrInstr *a = spmd_emit_binary(cx, IR_OP_ADD, i, pid);
    IrInstr *b = spmd_emit_binary(cx, IR_OP_ADD, n, pid);
    if (L->rs) {
        a = spmd_emit_binary(cx, IR_OP_ADD, a, spmd_we_u32(L, L->N / 2 + 1));
        b = spmd_emit_binary(cx, IR_OP_SUBTRACT, b, spmd_we_u32(L, L->N / 2));
    } else {
        b = spmd_emit_binary(cx, IR_OP_SUBTRACT, b, spmd_we_u32(L, 1));
    }
    *ccw = spmd_emit_binary(cx, IR_OP_REMAINDER, a, n);
    b = spmd_emit_binary(cx, IR_OP_SUBTRACT, b, i);
    *cw = spmd_emit_binary(cx, IR_OP_REMAINDER, b, n);
}

/* One bidirectional half-step: a single dot over both windows (the counter-clockwise one in
 * the operand slot, the clockwise one `extra_in`), two results written. */
static bool
bidir_half(WeLoop *L, IrInstr *l, IrInstr *r, IrInstr **o, IrInstr *extra_in, IrInstr **cw_out,
           IrInstr *i)
{
    SpmdCtx *cx = L->cx;
    bool wl = L->cfg->windowed_lhs;
    int64_t nl = -1, nr = -1, od;
    IrInstr *ccw, *cw;
    bidir_ids(L, i, &ccw, &cw);
    if (!ccw || !cw)
        return false;
    if (L->slice) { /* contracting, batch and reduce-scatter flavours */
        IrInstr **x = wl ? &r : &l;
        IrInstr *a = slice_half(L, *x, ccw, true), *b = slice_half(L, *x, cw, false);
        bool fl = a && ir_dtype_kind(a->shape.dtype) == 'F';
        *x = a && b ? spmd_emit_binary(cx, fl ? IR_OP_MAXIMUM : IR_OP_ADD, a, b) : NULL;
        *(wl ? &nr : &nl) = L->ssd;
    }
    if (!L->rs) {
        IrInstr **x = wl ? &l : &r;
        IrInstr *parts[2] = {*x, extra_in};
        *x = spmd_emit_concatenate(cx, parts, 2, L->wcd);
        *(wl ? &nl : &nr) = L->wcd;
    }
    IrInstr *dot = dot_with_pair_dims(L, l, r, nl, nr, &od);
    if (!dot)
        return false;
    if (L->cfg->kind == DOT_WE_AG_CONTRACTING) {
        *o = spmd_emit_binary(cx, IR_OP_ADD, *o, dot);
        return *o != NULL;
    }
    IrInstr *h0 = take_half(cx, dot, od, 0), *h1 = take_half(cx, dot, od, 1);
    if (!h0 || !h1)
        return false;
    if (L->rs) {
        *o = spmd_emit_binary(cx, IR_OP_ADD, *o, h0);
        *cw_out = spmd_emit_binary(cx, IR_OP_ADD, *cw_out, h1);
        return *o && *cw_out;
    }
    IrInstr *offs[SPMD_MAX_RANK];
    if (!spmd_we_offsets_for_id(L, L->dus, h0->shape.rank, h0->shape.dims, ccw, -1, offs))
        return false;
    *o = spmd_emit_dus(cx, *o, h0, offs);
    if (!*o || !spmd_we_offsets_for_id(L, L->dus, h1->shape.rank, h1->shape.dims, cw, -1, offs))
        return false;
    *o = spmd_emit_dus(cx, *o, h1, offs);
    return *o != NULL;
}

/* Unrolled all-gather: two half-steps, the window permuted before each dot (no conditional:
 * the last permute is wasted). */
bool
spmd_we_body_unrolled_ag(WeLoop *L, IrInstr **g)
{
    SpmdCtx *cx = L->cx;
    int w = L->cfg->windowed_lhs ? 0 : 1;
    IrInstr *w1 = spmd_we_ring_permute(L, g[w], -1);
    g[2] = spmd_we_step(L, g[0], g[1], g[2], g[4]);
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, g[4], spmd_we_u32(L, 1));
    IrInstr *cur[2] = {g[0], g[1]};
    cur[w] = w1;
    IrInstr *w2 = spmd_we_ring_permute(L, w1, -1);
    g[2] = spmd_we_step(L, cur[0], cur[1], g[2], g[4]);
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, g[4], spmd_we_u32(L, 1));
    g[w] = w2;
    return g[2] && g[4] && g[w];
}

/* Unrolled reduce-scatter: the result moves two steps back and collects block i + 3 + p, the
 * extra buffer collects block i + p and moves two steps back; i += 2. */
bool
spmd_we_body_unrolled_rs(WeLoop *L, IrInstr **g)
{
    SpmdCtx *cx = L->cx;
    g[2] = spmd_we_ring_permute(L, g[2], -2);
    g[3] = spmd_we_ring_permute(L, spmd_we_step(L, g[0], g[1], g[3], g[4]), -2);
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, g[4], spmd_we_u32(L, 2));
    IrInstr *real = spmd_emit_binary(cx, IR_OP_ADD, g[4], spmd_we_u32(L, 1));
    g[2] = g[2] && real ? spmd_we_step(L, g[0], g[1], g[2], real) : NULL;
    return g[2] && g[3] && g[4];
}

/* Bidirectional: two half-steps; in each, the main window (the result for RS) moves one step
 * counter-clockwise and the extra one one step clockwise, and one dot serves both. */
bool
spmd_we_body_bidir(WeLoop *L, IrInstr **g)
{
    SpmdCtx *cx = L->cx;
    int w = L->rs ? 2 : L->cfg->windowed_lhs ? 0 : 1;
    IrInstr *next[2] = {g[0], g[1]}, *o = g[2];
    IrInstr *ccw = spmd_we_ring_permute(L, g[w], -1);
    if (L->rs)
        o = ccw;
    else
        next[w] = ccw;
    IrInstr *cw = spmd_we_ring_permute(L, g[3], 1);
    if (!ccw || !cw || !bidir_half(L, g[0], g[1], &o, g[3], &cw, g[4]))
        return false;
    IrInstr *i1 = spmd_emit_binary(cx, IR_OP_ADD, g[4], spmd_we_u32(L, 1));
    IrInstr *second[2] = {next[0], next[1]};
    IrInstr *ccw2 = spmd_we_ring_permute(L, L->rs ? o : next[w], -1);
    if (L->rs)
        o = ccw2;
    else
        second[w] = ccw2;
    IrInstr *cw2 = spmd_we_ring_permute(L, cw, 1);
    if (!i1 || !ccw2 || !cw2 || !bidir_half(L, next[0], next[1], &o, cw, &cw2, i1))
        return false;
    g[0] = second[0];
    g[1] = second[1];
    g[2] = o;
    g[3] = cw2;
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, i1, spmd_we_u32(L, 1));
    return g[4] != NULL;
}

/* The first sharded dim of `s`, or -1. */
static int64_t
first_sharded_dim(const ShdSharding *s)
{
    for (uint32_t d = 0; s && shd_is_tiled(s) && d < shd_data_rank(s); d++)
        if (shd_dim_shards(s, d) > 1)
            return d;
    return -1;
}

/* Bidirectional geometry: the pair dims. Returns false when the shardings give none. */
bool
spmd_we_bidir_dims(WeLoop *L)
{
    SpmdCtx *cx = L->cx;
    const DotDims *d = &L->job->dims;
    bool wl = L->cfg->windowed_lhs;
    DotSide ws = wl ? DOT_LHS : DOT_RHS, xs = wl ? DOT_RHS : DOT_LHS;
    L->ssd = first_sharded_dim(L->slice ? L->slice : L->dus);
    if (L->ssd < 0)
        return false;
    if (L->slice) {
        L->slice2 = shd_insert_dims(cx->arena, L->slice, &L->ssd, 1);
        if (!L->slice2)
            return false;
    }
    if (L->rs)
        return true;
    L->wcd = spmd_we_map_dim(d, L->slice ? xs : DOT_OUT, ws, L->ssd);
    return L->wcd >= 0;
}

/* After an unrolled or bidirectional reduce-scatter loop: the two partial buffers are
 * realigned (extra one step clockwise when bidirectional, the result one step clockwise when
 * unroll_windowed_einsum is set, as upstream applies both flags) and added. */
IrInstr *
spmd_we_finish_rs(WeLoop *L, IrInstr *loop, IrInstr *res)
{
    SpmdCtx *cx = L->cx;
    if (!L->rs || L->shape == WE_LOOP_PLAIN)
        return res;
    IrInstr *extra = spmd_emit_gte(cx, loop, 3);
    if (L->shape == WE_LOOP_BIDIR)
        extra = spmd_we_ring_permute(L, extra, 1);
    if (cx->opts->unroll_windowed_einsum && L->N % 2 == 0) {
        if (L->shape == WE_LOOP_BIDIR)
            spmd_warn(cx, TRACE_WARN_OTHER, "bidirectional and unroll_windowed_einsum together: the reduce-scatter "
                          "result is shifted once more after the loop, as upstream does; the "
                          "blocks end up on the wrong devices");
        res = spmd_we_ring_permute(L, res, 1);
    }
    return res && extra ? spmd_emit_binary(cx, IR_OP_ADD, res, extra) : NULL;
}
