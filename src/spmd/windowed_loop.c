/* windowed_loop.c - the windowed-einsum loop builder (gspmd.md E.12; seeds/000
 * EmitWindowedDotGeneral). Owns: turning a DotWindowedConfig into ordinary HLO: the while
 * with its (lhs, rhs, result, extra, i) tuple, its condition and body computations, the
 * operands as they enter the loop (masking, the reduce-scatter's contracting match), the ring
 * primitives (data ids, per-device slices and offsets, collective-permutes around the ring),
 * the plain one-direction body, the loop variant chosen from the options, the windowed-loop
 * trace event and the record in cx->wloops that spmd_windowed_code_motion (windowed_motion.c)
 * reads later. Does not own: the unrolled and bidirectional bodies (windowed_variants.c), the
 * decision whether to window (windowed_config.c), the local dot (DotJob.create), collectives
 * (collectives.c).
 * Invariant: the loop bodies are emitted through spmd_emit with cx->comp switched to the new
 * computation, and the partition-id memos are restored after. */
#include "spmd/windowed_int.h"

#include <stdlib.h>

/* table[id] as an s32[] scalar, `id` an in-loop u32[] value (G.2 with data_id as index). */
static IrInstr *
lookup(SpmdCtx *cx, const int64_t *tbl, int64_t n, IrInstr *id)
{
    bool same = true;
    for (int64_t k = 1; k < n; k++)
        same = same && tbl[k] == tbl[0];
    if (same)
        return spmd_emit_constant_scalar(cx, IR_DT_S32, n ? tbl[0] : 0);
    IrInstr *c = spmd_emit_constant_s32_array(cx, tbl, (uint32_t)n);
    int64_t one = 1;
    return spmd_emit_reshape(cx, spmd_emit_dynamic_slice(cx, c, &id, &one), NULL, 0);
}

/* Offsets of device `id`'s tile of `s` in a tensor whose tiles are `tile[d]` long; only dim
 * `only` moves when it is >= 0 (MakePartitionOffsets restricted to the windowing dims). */
bool
spmd_we_offsets_for_id(WeLoop *L, const ShdSharding *s, uint32_t rank, const int64_t *tile,
                       IrInstr *id, int64_t only, IrInstr **out)
{
    SpmdCtx *cx = L->cx;
    int64_t idx[SPMD_MAX_RANK];
    int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, L->N);
    if (!tbl || rank > SPMD_MAX_RANK)
        return false;
    for (uint32_t d = 0; d < rank; d++) {
        if (!shd_is_tiled(s) || shd_dim_shards(s, d) <= 1 || (only >= 0 && only != (int64_t)d)) {
            out[d] = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        } else {
            for (int64_t k = 0; k < L->N; k++)
                tbl[k] = shd_tile_index(s, k, idx) ? idx[d] * tile[d] : 0;
            out[d] = lookup(cx, tbl, L->N, id);
        }
        if (!out[d])
            return false;
    }
    return true;
}

/* `x` padded with zeros at the end of every dim `s` shards unevenly; tile sizes in `tile`. */
IrInstr *
spmd_we_pad_to_tiles(SpmdCtx *cx, IrInstr *x, const ShdSharding *s, int64_t *tile)
{
    IrPadDim pads[SPMD_MAX_RANK];
    bool padded = false;
    if (!x || x->shape.rank > SPMD_MAX_RANK)
        return NULL;
    for (uint32_t d = 0; d < x->shape.rank; d++) {
        int64_t k = shd_is_tiled(s) ? shd_dim_shards(s, d) : 1, D = x->shape.dims[d];
        tile[d] = (D + k - 1) / k;
        pads[d] = (IrPadDim){0, tile[d] * k - D, 0};
        padded = padded || pads[d].hi;
    }
    if (!padded)
        return x;
    return spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, x->shape.dtype, 0), pads);
}

/* The piece of the (locally full) operand `x` that belongs to ring position `id` under `s`. */
IrInstr *
spmd_we_slice_for_id(WeLoop *L, IrInstr *x, IrInstr *id, const ShdSharding *s)
{
    int64_t tile[SPMD_MAX_RANK];
    IrInstr *offs[SPMD_MAX_RANK];
    x = spmd_we_pad_to_tiles(L->cx, x, s, tile);
    if (!x || !spmd_we_offsets_for_id(L, s, x->shape.rank, tile, id, -1, offs))
        return NULL;
    return spmd_emit_dynamic_slice(L->cx, x, offs, tile);
}

IrInstr *
spmd_we_u32(WeLoop *L, int64_t v)
{
    return spmd_emit_constant_scalar(L->cx, IR_DT_U32, v);
}

/* data_id = (idx + partition_id) mod N: the ring position whose data is used now. */
static IrInstr *
data_id(WeLoop *L, IrInstr *idx)
{
    SpmdCtx *cx = L->cx;
    IrInstr *pid = spmd_partition_id(cx, L->p->st);
    return spmd_emit_binary(cx, IR_OP_REMAINDER, spmd_emit_binary(cx, IR_OP_ADD, idx, pid),
                            spmd_we_u32(L, L->N));
}

/* One unidirectional step: dot of the current window at ring index `idx`, accumulated into
 * `res` (add, or dynamic-update-slice at the data id's offsets). */
IrInstr *
spmd_we_step(WeLoop *L, IrInstr *lhs, IrInstr *rhs, IrInstr *res, IrInstr *idx)
{
    SpmdCtx *cx = L->cx;
    IrInstr *id = idx ? data_id(L, idx) : NULL;
    if (!id)
        return NULL;
    if (L->slice) {
        if (L->cfg->windowed_lhs)
            rhs = spmd_we_slice_for_id(L, rhs, id, L->slice);
        else
            lhs = spmd_we_slice_for_id(L, lhs, id, L->slice);
    }
    IrInstr *dot = lhs && rhs ? L->job->create(cx, L->job, lhs, rhs, L->p->window) : NULL;
    if (!dot)
        return NULL;
    if (!L->dus)
        return spmd_emit_binary(cx, IR_OP_ADD, res, dot);
    IrInstr *offs[SPMD_MAX_RANK];
    if (!spmd_we_offsets_for_id(L, L->dus, dot->shape.rank, dot->shape.dims, id, L->dus_dim, offs))
        return NULL;
    return spmd_emit_dus(cx, res, dot, offs);
}

/* ---- computations ---- */

static IrComputation *
begin_comp(SpmdCtx *cx, const char *name, const IrShape *param_shape, IrInstr **param,
           IrComputation **saved)
{
    SlSym nm = spmd_unique_name(cx, sl_str(name));
    IrComputation *c = nm ? ir_computation_new(cx->out, nm) : NULL;
    IrShape ps = ir_shape_clone(cx->arena, param_shape);
    IrInstr *pi = c ? ir_instr_new(cx->out, IR_OP_PARAMETER, &ps, NULL, 0) : NULL;
    if (!pi)
        return NULL;
    pi->parameter_number = 0;
    *saved = cx->comp;
    cx->comp = c;
    *param = spmd_emit(cx, pi, "param");
    return *param ? c : NULL;
}

static bool
end_comp(SpmdCtx *cx, IrComputation *c, IrInstr *root, IrComputation *saved)
{
    cx->comp = saved;
    if (!c || !root)
        return false;
    c->root = root;
    return ir_module_add_computation(cx->out, c) == SL_OK;
}

static IrInstr *
emit_with_comps(SpmdCtx *cx, IrOp op, const IrShape *shape, IrInstr *const *ops, uint32_t n,
                IrAttrKey k1, IrComputation *c1, IrAttrKey k2, IrComputation *c2)
{
    IrShape s = ir_shape_clone(cx->arena, shape);
    IrInstr *i = c1 && c2 ? ir_instr_new(cx->out, op, &s, ops, n) : NULL;
    IrAttr *a1 = i ? ir_instr_add_attr(cx->out, i, k1) : NULL;
    IrAttr *a2 = a1 ? ir_instr_add_attr(cx->out, i, k2) : NULL;
    if (!a2)
        return NULL;
    a1->u.comp = c1;
    a2->u.comp = c2;
    return spmd_emit(cx, i, NULL);
}

/* Every device sends `x` `shift` steps along its ring of n devices (s -> s + shift mod n,
 * several independent rings when n < N). */
IrInstr *
spmd_we_ring_permute(WeLoop *L, IrInstr *x, int64_t shift)
{
    int64_t *pairs = SL_NEW_ARRAY(L->cx->arena, int64_t, 2 * L->N);
    if (!pairs || !x)
        return NULL;
    for (int64_t s = 0; s < L->N; s++) {
        pairs[2 * s] = s;
        pairs[2 * s + 1] = ((s % L->n + shift) % L->n + L->n) % L->n + s / L->n * L->n;
    }
    const char *saved = L->cx->coll_cause;
    L->cx->coll_cause = "windowed-einsum";
    IrInstr *r = spmd_coll_permute(L->cx, L->p->st, x, pairs, (uint32_t)L->N);
    L->cx->coll_cause = saved;
    return r;
}

/* conditional(i < n, window_collective_permute(x), last_iteration_noop(x)). */
static IrInstr *
ring_step_conditional(WeLoop *L, IrInstr *x, IrInstr *i_next)
{
    SpmdCtx *cx = L->cx;
    IrComputation *saved, *tc, *fc;
    IrInstr *tp, *fp;
    tc = begin_comp(cx, "window_collective_permute", &x->shape, &tp, &saved);
    if (!tc || !end_comp(cx, tc, spmd_we_ring_permute(L, tp, -1), saved))
        return NULL;
    fc = begin_comp(cx, "last_iteration_noop", &x->shape, &fp, &saved);
    if (!fc || !end_comp(cx, fc, fp, saved))
        return NULL;
    IrInstr *pred = spmd_emit_compare(cx, i_next, spmd_we_u32(L, L->n), "LT");
    IrInstr *ops[3] = {pred, x, x};
    if (!pred)
        return NULL;
    return emit_with_comps(cx, IR_OP_CONDITIONAL, &x->shape, ops, 3, IR_ATTR_TRUE_COMPUTATION,
                           tc, IR_ATTR_FALSE_COMPUTATION, fc);
}

/* g = (lhs, rhs, result, extra, i) throughout the bodies below. */

/* Plain body: one dot, then the window (the result buffer for RS) moves one step back around
 * the ring, skipped on the last iteration. RS computes block i + 1 + p. */
static bool
body_plain(WeLoop *L, IrInstr **g)
{
    SpmdCtx *cx = L->cx;
    IrInstr *idx = L->rs ? spmd_emit_binary(cx, IR_OP_ADD, g[4], spmd_we_u32(L, 1)) : g[4];
    g[2] = spmd_we_step(L, g[0], g[1], g[2], idx);
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, g[4], spmd_we_u32(L, 1));
    int w = L->rs ? 2 : L->cfg->windowed_lhs ? 0 : 1;
    g[w] = g[2] && g[4] ? ring_step_conditional(L, g[w], g[4]) : NULL;
    return g[w] != NULL;
}

static IrComputation *
build_body(WeLoop *L, const IrShape *tuple_shape)
{
    SpmdCtx *cx = L->cx;
    IrComputation *saved;
    IrInstr *param, *g[5];
    IrComputation *c = begin_comp(cx, L->rs ? "windowed_dot_general_body_rs"
                                            : "windowed_dot_general_body_ag",
                                  tuple_shape, &param, &saved);
    if (!c)
        return NULL;
    for (int k = 0; k < 5; k++)
        g[k] = spmd_emit_gte(cx, param, k);
    bool ok = g[0] && g[1] && g[2] && g[3] && g[4];
    if (ok && L->shape == WE_LOOP_BIDIR)
        ok = spmd_we_body_bidir(L, g);
    else if (ok && L->shape == WE_LOOP_UNROLLED)
        ok = L->rs ? spmd_we_body_unrolled_rs(L, g) : spmd_we_body_unrolled_ag(L, g);
    else if (ok)
        ok = body_plain(L, g);
    IrInstr *root = ok ? spmd_emit_tuple(cx, g, 5) : NULL;
    return end_comp(cx, c, root, saved) ? c : NULL;
}

static IrComputation *
build_cond(WeLoop *L, const IrShape *tuple_shape)
{
    SpmdCtx *cx = L->cx;
    IrComputation *saved;
    IrInstr *param;
    IrComputation *c = begin_comp(cx, L->rs ? "windowed_dot_general_cond_rs"
                                            : "windowed_dot_general_cond_ag",
                                  tuple_shape, &param, &saved);
    if (!c)
        return NULL;
    IrInstr *i = spmd_emit_gte(cx, param, 4);
    int64_t trips = L->shape == WE_LOOP_BIDIR ? L->n / 2 : L->n; /* i counts half-steps */
    IrInstr *lt = spmd_emit_compare(cx, i, spmd_we_u32(L, trips), "LT");
    return end_comp(cx, c, lt, saved) ? c : NULL;
}

/* Partition-id memos of the state chain: loop computations get their own partition-id, and
 * the enclosing computation keeps using the one it already has. */
typedef struct MemoSave {
    SpmdStateMemo saved[16];
    uint32_t n;
} MemoSave;

static void
memo_save(const SpmdState *st, MemoSave *m)
{
    m->n = 0;
    for (; st && m->n < SL_COUNTOF(m->saved); st = st->outer)
        m->saved[m->n++] = *st->memo;
}

static void
memo_restore(const SpmdState *st, const MemoSave *m)
{
    for (uint32_t k = 0; st && k < m->n; st = st->outer, k++)
        *st->memo = m->saved[k];
}

/* Result buffer shape: the local output, padded along the dims the DUS offsets move on. */
static IrShape
result_shape(WeLoop *L, bool *padded)
{
    SpmdCtx *cx = L->cx;
    IrShape s = spmd_local_shape(cx, L->p->out_base, L->p->out);
    *padded = false;
    for (uint32_t d = 0; L->dus && shd_is_tiled(L->dus) && d < s.rank; d++) {
        int64_t k = shd_dim_shards(L->dus, d);
        if (k <= 1)
            continue;
        int64_t padded_dim = k * ((s.dims[d] + k - 1) / k);
        *padded = *padded || padded_dim != s.dims[d];
        s.dims[d] = padded_dim;
    }
    return s;
}

static void
trace_loop(WeLoop *L, IrInstr *loop, int64_t window_bytes)
{
    static const char *const k_variant[2][3] = {
        {"all-gather", "all-gather-unrolled", "all-gather-bidirectional"},
        {"reduce-scatter", "reduce-scatter-unrolled", "reduce-scatter-bidirectional"}};
    SpmdCtx *cx = L->cx;
    if (!cx->trace->ops->windowed_loop)
        return;
    const char *variant = L->cfg->windowing_dim >= 0 ? "all-gather-partial"
                                                      : k_variant[L->rs][L->shape];
    int64_t per_trip = L->shape == WE_LOOP_BIDIR ? 4 : L->shape == WE_LOOP_UNROLLED ? 2 : 1;
    /* The plain loop permutes in the true branch of a conditional that skips the last
     * iteration, so that branch runs n - 1 times; other shapes state nothing (0). */
    TraceWindowedLoop ev = {L->job->hlo, loop, variant, L->n / per_trip,
                            window_bytes * per_trip, L->shape == WE_LOOP_PLAIN ? L->n - 1 : 0};
    cx->trace->ops->windowed_loop(cx->trace, &ev);
}

/* Operands as they enter the loop: masked where padding would leak into sums (E.12 "before
 * the loop"), and for RS with the contracting dims of the smaller one matched to the other. */
static SlStatus
prepare_operands(WeLoop *L, IrInstr **lhs, IrInstr **rhs, SlError *err)
{
    SpmdCtx *cx = L->cx;
    const DotProblem *p = L->p;
    SpmdValue l = p->lhs, r = p->rhs;
    if (L->rs) {
        const DotDims *d = &L->job->dims;
        bool lhs_smaller =
            ir_shape_byte_size(&l.hlo->shape) < ir_shape_byte_size(&r.hlo->shape);
        const ShdSharding *t = lhs_smaller ? spmd_dot_seen_from(cx, d, r.sharding, DOT_RHS, DOT_LHS)
                                           : spmd_dot_seen_from(cx, d, l.sharding, DOT_LHS, DOT_RHS);
        SpmdValue *v = lhs_smaller ? &l : &r;
        if (t && !shd_equal(t, v->sharding)) {
            SpmdValue moved;
            SlStatus st = spmd_reshard(cx, v, t, NULL, &moved, err);
            if (st != SL_OK)
                return st;
            *v = moved;
        }
        l.hlo = spmd_pad_with_value(cx, &l, NULL, 0);
        r.hlo = spmd_pad_with_value(cx, &r, NULL, 0);
    } else if (L->cfg->kind == DOT_WE_AG_CONTRACTING) {
        SpmdValue *w = L->cfg->windowed_lhs ? &l : &r;
        w->hlo = spmd_pad_with_value(cx, w, NULL, 0);
    }
    *lhs = l.hlo;
    *rhs = r.hlo;
    return *lhs && *rhs ? SL_OK : spmd_nomem(cx, err);
}

/* The dim of `to` matched to dim `dim` of `from` by the role records, or -1. */
int64_t
spmd_we_map_dim(const DotDims *d, DotSide from, DotSide to, int64_t dim)
{
    for (int r = 0; r < DOT_ROLE_COUNT; r++)
        for (uint32_t k = 0; k < d->n[r]; k++)
            if (spmd_dot_dim(&d->role[r][k], from) == dim)
                return spmd_dot_dim(&d->role[r][k], to);
    return -1;
}

static void
loop_shardings(WeLoop *L)
{
    SpmdCtx *cx = L->cx;
    const DotDims *d = &L->job->dims;
    const DotProblem *p = L->p;
    bool wl = L->cfg->windowed_lhs;
    DotSide ws = wl ? DOT_LHS : DOT_RHS, xs = wl ? DOT_RHS : DOT_LHS;
    const ShdSharding *w = wl ? p->lhs.sharding : p->rhs.sharding;
    L->slice = L->dus = NULL;
    switch (L->cfg->kind) {
    case DOT_WE_AG_CONTRACTING:
        L->slice = spmd_dot_seen_from(cx, d, w, ws, xs);
        break;
    case DOT_WE_AG_BATCH:
        L->slice = spmd_dot_seen_from(cx, d, w, ws, xs);
        L->dus = spmd_dot_seen_from(cx, d, w, ws, DOT_OUT);
        break;
    case DOT_WE_AG_NONCONTRACTING:
        L->dus = spmd_dot_seen_from(cx, d, w, ws, DOT_OUT);
        break;
    case DOT_WE_RS:
        L->slice = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, xs);
        break;
    case DOT_WE_NONE:
        break;
    }
    if (L->cfg->windowing_dim >= 0)
        L->dus_dim = spmd_we_map_dim(d, DOT_LHS, DOT_OUT, L->cfg->windowing_dim);
}

/* The loop variant the options ask for (E.12): bidirectional needs N mod 4 == 0, unrolled
 * N even, both a full ring; convolutions have no bidirectional form here. */
static void
choose_shape(WeLoop *L)
{
    SpmdCtx *cx = L->cx;
    bool full = L->n == L->N;
    L->shape = WE_LOOP_PLAIN;
    if (cx->opts->bidirectional_windowed_einsum && L->N % 4 == 0 && full) {
        if (!L->job->conv_case && spmd_we_bidir_dims(L)) {
            L->shape = WE_LOOP_BIDIR;
            return;
        }
        spmd_warn(cx, TRACE_WARN_OTHER, "bidirectional windowed einsum is not modelled for this operation: "
                      "emitting the unrolled or one-direction loop");
    }
    if (cx->opts->unroll_windowed_einsum && L->N % 2 == 0 && full)
        L->shape = WE_LOOP_UNROLLED;
}

static IrInstr *
emit_loop(WeLoop *L, IrInstr *lhs, IrInstr *rhs, const IrShape *res_shape)
{
    SpmdCtx *cx = L->cx;
    IrInstr *zero = spmd_emit_zero_like(cx, res_shape), *extra;
    /* bidirectional all-gather: the window gets its pair dim, and a copy pre-shifted */
    if (L->shape == WE_LOOP_BIDIR && !L->rs) {
        IrInstr **w = L->cfg->windowed_lhs ? &lhs : &rhs;
        *w = spmd_we_insert_unit_dim(cx, *w, L->wcd);
        extra = spmd_we_ring_permute(L, *w, 1);
    } else {
        extra = spmd_emit_zero_like(cx, res_shape);
    }
    IrInstr *elems[5] = {lhs, rhs, zero, extra, spmd_we_u32(L, 0)};
    IrInstr *init = lhs && rhs && zero && extra && elems[4] ? spmd_emit_tuple(cx, elems, 5) : NULL;
    if (!init)
        return NULL;
    MemoSave ms;
    memo_save(L->p->st, &ms);
    IrComputation *cond = build_cond(L, &init->shape);
    memo_restore(L->p->st, &ms);
    IrComputation *body = cond ? build_body(L, &init->shape) : NULL;
    memo_restore(L->p->st, &ms);
    return emit_with_comps(cx, IR_OP_WHILE, &init->shape, &init, 1, IR_ATTR_CONDITION, cond,
                           IR_ATTR_BODY, body);
}

static bool
record_loop(SpmdCtx *cx, IrInstr *loop, bool output_dus)
{
    if (cx->n_wloops == cx->cap_wloops) {
        uint32_t cap = cx->cap_wloops ? 2 * cx->cap_wloops : 8;
        SpmdWindowedLoop *v = realloc(cx->wloops, cap * sizeof(*v));
        if (!v)
            return false;
        cx->wloops = v;
        cx->cap_wloops = cap;
    }
    cx->wloops[cx->n_wloops++] = (SpmdWindowedLoop){loop, cx->comp, output_dus};
    return true;
}

SlStatus
spmd_emit_windowed_dot(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                       const DotWindowedConfig *cfg, IrInstr **out, SlError *err)
{
    WeLoop L = (WeLoop){.cx = cx, .job = job, .p = p, .cfg = cfg, .n = cfg->loop_partitions,
               .N = p->st->num_partitions, .rs = cfg->kind == DOT_WE_RS, .dus_dim = -1,
               .ssd = -1, .wcd = -1};
    loop_shardings(&L);
    if ((cfg->kind != DOT_WE_AG_NONCONTRACTING && !L.slice) ||
        ((cfg->kind == DOT_WE_AG_NONCONTRACTING || cfg->kind == DOT_WE_AG_BATCH) && !L.dus) ||
        L.n <= 0 || L.N % L.n)
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "windowed einsum without slice sharding");
    choose_shape(&L);
    IrInstr *lhs, *rhs;
    SlStatus st = prepare_operands(&L, &lhs, &rhs, err);
    if (st != SL_OK)
        return st;
    bool padded;
    IrShape rs = result_shape(&L, &padded);
    IrInstr *w = cfg->windowed_lhs ? lhs : rhs;
    int64_t window_bytes = L.rs ? ir_shape_byte_size(&rs) : ir_shape_byte_size(&w->shape);
    IrInstr *loop = emit_loop(&L, lhs, rhs, &rs);
    IrInstr *res = spmd_we_finish_rs(&L, loop, spmd_emit_gte(cx, loop, 2));
    if (!res)
        return spmd_nomem(cx, err);
    if (padded) {
        IrShape ls = spmd_local_shape(cx, p->out_base, p->out);
        int64_t start[SPMD_MAX_RANK] = {0};
        res = spmd_emit_slice(cx, res, start, ls.dims);
    }
    trace_loop(&L, loop, window_bytes);
    if (!record_loop(cx, loop, cfg->kind == DOT_WE_AG_NONCONTRACTING ||
                                   cfg->kind == DOT_WE_AG_BATCH))
        return spmd_nomem(cx, err);
    *out = res;
    return res ? SL_OK : spmd_nomem(cx, err);
}
