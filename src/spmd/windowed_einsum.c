/* windowed_einsum.c - collective matmul (gspmd.md E.5, E.12; seeds/000
 * GetWindowedEinsumConfiguration, EmitWindowedDotGeneral). Owns: deciding whether a dot's
 * base case becomes a windowed loop (XLA's SpmdPartitionerOptions names and defaults), and
 * building that loop as ordinary HLO: a while whose condition is `i < n` and whose body runs
 * the local dot on the current window, accumulates (add, or dynamic-update-slice), and passes
 * the window one step around the device ring with a collective-permute. Every loop is
 * reported as a windowed-loop trace event. Does not own: the local dot (DotJob.create) or
 * collectives (collectives.c). Invariant: the loop bodies are emitted through spmd_emit with
 * cx->comp switched to the new computation, and the partition-id memos are restored after. */
#include "spmd/dot_int.h"

#include <stdio.h>
#include <string.h>

#define MIB_BYTES ((int64_t)1 << 20)

/* ---- configuration (E.5) ---- */

/* Time estimates of the base partitioner: XLA's are 0 unless a backend overrides them, which
 * makes the "Overhead outweighs benefit" veto inert; kept so the rule stays visible. */
static double
compute_time_ms(const DotProblem *p)
{
    (void)p;
    return 0.0;
}

static double
communication_time_ms(int64_t bytes)
{
    (void)bytes;
    return 0.0;
}

static bool
disabled_by_attribute(const IrInstr *hlo)
{
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_FRONTEND_ATTRIBUTES);
    for (uint32_t k = 0; a && k < a->u.frontend.n; k++) {
        const IrFrontendAttr *f = &a->u.frontend.v[k];
        if (sl_str_eq_cstr(sl_sym_str(f->key), "_xla_collective_matmul") &&
            (sl_str_eq_cstr(f->value, "\"none\"") || sl_str_eq_cstr(f->value, "none")))
            return true;
    }
    return false;
}

static void
record(SpmdCtx *cx, const DotJob *job, const DotWindowedConfig *cfg, const char *strategy,
       const char *reason, int64_t n)
{
    static const char *const alts[] = {"windowed_all_gather", "windowed_reduce_scatter",
                                       "no_windowed_einsum"};
    TraceKV nums[] = {
        {"loop_partitions", (double)n, NULL},
        {"max_windowed_einsum_iteration", (double)cx->opts->max_windowed_einsum_iteration, NULL},
        {"compared_bytes", (double)cfg->size_bytes, NULL},
        {"threshold_bytes", (double)cfg->threshold_bytes, NULL},
        {"threshold_for_windowed_einsum_mib", (double)cx->opts->threshold_for_windowed_einsum_mib,
         NULL},
    };
    spmd_dot_decide(cx, job, strategy, reason, alts, SL_COUNTOF(alts), nums, SL_COUNTOF(nums));
}

/* Threshold test: total_bytes_windowed_einsum_threshold (XLA's option, in bytes) when set,
 * else `size` against threshold_for_windowed_einsum_mib. */
static bool
big_enough(SpmdCtx *cx, const DotProblem *p, int64_t size, DotWindowedConfig *cfg)
{
    int64_t total = cx->opts->total_bytes_windowed_einsum_threshold_mib;
    if (total > 0) {
        cfg->size_bytes = ir_shape_byte_size(p->lhs.base_shape) +
                          ir_shape_byte_size(p->rhs.base_shape);
        cfg->threshold_bytes = total;
    } else {
        cfg->size_bytes = size;
        cfg->threshold_bytes = cx->opts->threshold_for_windowed_einsum_mib * MIB_BYTES;
    }
    return cfg->size_bytes >= cfg->threshold_bytes;
}

/* Cases 1 and 2 of E.5: the output matches one operand on its free dims; the other operand
 * travels around the ring. */
static bool
all_gather_case(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool window_lhs,
                DotWindowedConfig *cfg)
{
    const DotDims *d = &job->dims;
    int64_t n = p->st->num_partitions;
    const SpmdValue *keep = window_lhs ? &p->rhs : &p->lhs, *win = window_lhs ? &p->lhs : &p->rhs;
    DotSide ks = window_lhs ? DOT_RHS : DOT_LHS, ws = window_lhs ? DOT_LHS : DOT_RHS;
    if (spmd_dot_parts(p->out, d, window_lhs ? DOT_RHS_NC : DOT_LHS_NC, DOT_OUT) != n ||
        !cx->opts->enable_windowed_einsum_for_all_gather)
        return false;
    const ShdSharding *o2k = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, ks);
    if (!o2k || !shd_equal(o2k, keep->sharding) ||
        !big_enough(cx, p, ir_shape_byte_size(win->base_shape), cfg))
        return false;
    cfg->windowed_lhs = window_lhs;
    if (spmd_dot_parts(win->sharding, d, DOT_CONTRACTING, ws) == n)
        cfg->kind = DOT_WE_AG_CONTRACTING;
    else if (spmd_dot_parts(win->sharding, d, window_lhs ? DOT_LHS_NC : DOT_RHS_NC, ws) == n)
        cfg->kind = DOT_WE_AG_NONCONTRACTING;
    else if (spmd_dot_parts(win->sharding, d, DOT_BATCH, ws) == n)
        cfg->kind = DOT_WE_AG_BATCH;
    return cfg->kind != DOT_WE_NONE;
}

static bool
reduce_scatter_case(SpmdCtx *cx, const DotJob *job, const DotProblem *p, DotWindowedConfig *cfg)
{
    const DotDims *d = &job->dims;
    int64_t n = p->st->num_partitions;
    int64_t olnc = spmd_dot_parts(p->out, d, DOT_LHS_NC, DOT_OUT);
    int64_t ornc = spmd_dot_parts(p->out, d, DOT_RHS_NC, DOT_OUT);
    if (spmd_dot_parts(p->lhs.sharding, d, DOT_CONTRACTING, DOT_LHS) != n ||
        spmd_dot_parts(p->rhs.sharding, d, DOT_CONTRACTING, DOT_RHS) != n ||
        (olnc != n && ornc != n) || !cx->opts->enable_windowed_einsum_for_reduce_scatter ||
        !big_enough(cx, p, ir_shape_byte_size(p->out_base), cfg))
        return false;
    const ShdSharding *o2s =
        spmd_dot_seen_from(cx, d, p->out, DOT_OUT, olnc == n ? DOT_LHS : DOT_RHS);
    if (!o2s)
        return false;
    cfg->kind = DOT_WE_RS;
    cfg->windowed_lhs = olnc != n;
    return true;
}

void
spmd_windowed_config(SpmdCtx *cx, const DotJob *job, const DotProblem *p, DotWindowedConfig *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    int64_t n = p->st->num_partitions;
    cfg->loop_partitions = n;
    if (n <= 1 || disabled_by_attribute(job->hlo) || job->dims.n[DOT_SPATIAL] > 0)
        return;
    bool found = all_gather_case(cx, job, p, false, cfg) ||
                 all_gather_case(cx, job, p, true, cfg) || reduce_scatter_case(cx, job, p, cfg);
    if (!found)
        return;
    if (n > cx->opts->max_windowed_einsum_iteration) {
        record(cx, job, cfg, "no_windowed_einsum",
               "the loop would need more iterations than max_windowed_einsum_iteration", n);
        cfg->kind = DOT_WE_NONE;
        return;
    }
    double comp = compute_time_ms(p), comm = communication_time_ms(cfg->size_bytes);
    if (comp > 0.0 && comm > 0.0 && comp < comm) {
        record(cx, job, cfg, "no_windowed_einsum",
               "Overhead outweighs benefit. Skipping windowed einsum", n);
        cfg->kind = DOT_WE_NONE;
        return;
    }
    record(cx, job, cfg, cfg->kind == DOT_WE_RS ? "windowed_reduce_scatter" : "windowed_all_gather",
           "the compared size reaches the windowed-einsum threshold and the output matches an "
           "operand, so the transfer is overlapped with the per-shard dots",
           n);
}

/* ---- loop construction (E.12) ---- */

typedef struct Loop {
    SpmdCtx *cx;
    const DotJob *job;
    const DotProblem *p;
    const DotWindowedConfig *cfg;
    int64_t n;
    bool rs;                  /* reduce-scatter flavour: the result buffer travels */
    bool unroll;
    const ShdSharding *slice; /* slices the non-windowed operand by data_id, or NULL */
    const ShdSharding *dus;   /* dynamic-update-slice offsets of the result, or NULL (add) */
} Loop;

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

/* Offsets of device `id`'s tile of `s` in a tensor whose tiles are `tile[d]` long. */
static bool
offsets_for_id(Loop *L, const ShdSharding *s, uint32_t rank, const int64_t *tile, IrInstr *id,
               IrInstr **out)
{
    SpmdCtx *cx = L->cx;
    int64_t idx[SPMD_MAX_RANK];
    int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, L->n);
    if (!tbl || rank > SPMD_MAX_RANK)
        return false;
    for (uint32_t d = 0; d < rank; d++) {
        if (!shd_is_tiled(s) || shd_dim_shards(s, d) <= 1) {
            out[d] = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        } else {
            for (int64_t k = 0; k < L->n; k++)
                tbl[k] = shd_tile_index(s, k, idx) ? idx[d] * tile[d] : 0;
            out[d] = lookup(cx, tbl, L->n, id);
        }
        if (!out[d])
            return false;
    }
    return true;
}

/* The piece of the (locally full) operand `x` that belongs to ring position `id`. */
static IrInstr *
slice_for_id(Loop *L, IrInstr *x, IrInstr *id)
{
    SpmdCtx *cx = L->cx;
    uint32_t r = x->shape.rank;
    int64_t tile[SPMD_MAX_RANK];
    IrPadDim pads[SPMD_MAX_RANK];
    IrInstr *offs[SPMD_MAX_RANK];
    bool padded = false;
    for (uint32_t d = 0; d < r; d++) {
        int64_t k = shd_is_tiled(L->slice) ? shd_dim_shards(L->slice, d) : 1, D = x->shape.dims[d];
        tile[d] = (D + k - 1) / k;
        pads[d] = (IrPadDim){0, tile[d] * k - D, 0};
        padded = padded || pads[d].hi;
    }
    if (padded)
        x = spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, x->shape.dtype, 0), pads);
    if (!x || !offsets_for_id(L, L->slice, r, tile, id, offs))
        return NULL;
    return spmd_emit_dynamic_slice(cx, x, offs, tile);
}

/* One half-step: dot of the current window and accumulate into `res`. */
static IrInstr *
step(Loop *L, IrInstr *lhs, IrInstr *rhs, IrInstr *res, IrInstr *i)
{
    SpmdCtx *cx = L->cx;
    IrInstr *pid = spmd_partition_id(cx, L->p->st);
    IrInstr *at = L->rs ? spmd_emit_binary(cx, IR_OP_ADD, i,
                                           spmd_emit_constant_scalar(cx, IR_DT_U32, 1))
                        : i;
    IrInstr *id = spmd_emit_binary(cx, IR_OP_REMAINDER, spmd_emit_binary(cx, IR_OP_ADD, at, pid),
                                   spmd_emit_constant_scalar(cx, IR_DT_U32, L->n));
    if (!id)
        return NULL;
    if (L->slice) {
        if (L->cfg->windowed_lhs)
            rhs = slice_for_id(L, rhs, id);
        else
            lhs = slice_for_id(L, lhs, id);
    }
    IrInstr *dot = lhs && rhs ? L->job->create(cx, L->job, lhs, rhs, L->p->window) : NULL;
    if (!dot)
        return NULL;
    if (!L->dus)
        return spmd_emit_binary(cx, IR_OP_ADD, res, dot);
    IrInstr *offs[SPMD_MAX_RANK];
    if (!offsets_for_id(L, L->dus, dot->shape.rank, dot->shape.dims, id, offs))
        return NULL;
    return spmd_emit_dus(cx, res, dot, offs);
}

/* ---- computations ---- */

static IrComputation *
begin_comp(SpmdCtx *cx, const char *name, const IrShape *param_shape, IrInstr **param,
           IrComputation **saved)
{
    SlSym nm = ir_module_unique_name(cx->out, sl_str(name));
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

/* The ring step: every device sends `x` to its predecessor (s -> s-1 mod n). */
static IrInstr *
ring_permute(Loop *L, IrInstr *x)
{
    int64_t *pairs = SL_NEW_ARRAY(L->cx->arena, int64_t, 2 * L->n);
    if (!pairs || !x)
        return NULL;
    for (int64_t s = 0; s < L->n; s++) {
        pairs[2 * s] = s;
        pairs[2 * s + 1] = (s + L->n - 1) % L->n;
    }
    const char *saved = L->cx->coll_cause;
    L->cx->coll_cause = "windowed-einsum";
    IrInstr *r = spmd_coll_permute(L->cx, L->p->st, x, pairs, (uint32_t)L->n);
    L->cx->coll_cause = saved;
    return r;
}

/* conditional(i < n, window_collective_permute(x), last_iteration_noop(x)). */
static IrInstr *
ring_step_conditional(Loop *L, IrInstr *x, IrInstr *i_next)
{
    SpmdCtx *cx = L->cx;
    IrComputation *saved, *tc, *fc;
    IrInstr *tp, *fp;
    tc = begin_comp(cx, "window_collective_permute", &x->shape, &tp, &saved);
    if (!tc || !end_comp(cx, tc, ring_permute(L, tp), saved))
        return NULL;
    fc = begin_comp(cx, "last_iteration_noop", &x->shape, &fp, &saved);
    if (!fc || !end_comp(cx, fc, fp, saved))
        return NULL;
    IrInstr *pred =
        spmd_emit_compare(cx, i_next, spmd_emit_constant_scalar(cx, IR_DT_U32, L->n), "LT");
    IrInstr *ops[3] = {pred, x, x};
    if (!pred)
        return NULL;
    return emit_with_comps(cx, IR_OP_CONDITIONAL, &x->shape, ops, 3, IR_ATTR_TRUE_COMPUTATION,
                           tc, IR_ATTR_FALSE_COMPUTATION, fc);
}

/* Body: (lhs, rhs, result, extra, i) -> one iteration (two half-steps when unrolled). */
static IrComputation *
build_body(Loop *L, const IrShape *tuple_shape)
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
    IrInstr *one = spmd_emit_constant_scalar(cx, IR_DT_U32, 1);
    int w = L->cfg->windowed_lhs ? 0 : 1;
    IrInstr *res = step(L, g[0], g[1], g[2], g[4]);
    IrInstr *i1 = spmd_emit_binary(cx, IR_OP_ADD, g[4], one);
    if (L->unroll) { /* AG only: window moves every half-step, no conditional */
        IrInstr *w1 = ring_permute(L, g[w]);
        IrInstr *ops2[2] = {w ? g[0] : w1, w ? w1 : g[1]};
        res = step(L, ops2[0], ops2[1], res, i1);
        g[w] = ring_permute(L, w1);
        i1 = spmd_emit_binary(cx, IR_OP_ADD, i1, one);
    } else if (L->rs) {
        res = res && i1 ? ring_step_conditional(L, res, i1) : NULL;
    } else {
        g[w] = i1 ? ring_step_conditional(L, g[w], i1) : NULL;
    }
    IrInstr *elems[5] = {g[0], g[1], res, g[3], i1};
    IrInstr *root = res && g[w] ? spmd_emit_tuple(cx, elems, 5) : NULL;
    return end_comp(cx, c, root, saved) ? c : NULL;
}

static IrComputation *
build_cond(Loop *L, const IrShape *tuple_shape)
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
    IrInstr *lt = spmd_emit_compare(cx, i, spmd_emit_constant_scalar(cx, IR_DT_U32, L->n), "LT");
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
result_shape(Loop *L, bool *padded)
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
trace_loop(Loop *L, IrInstr *loop, int64_t window_bytes)
{
    SpmdCtx *cx = L->cx;
    if (!cx->trace->ops->windowed_loop)
        return;
    const char *variant = L->rs ? "reduce-scatter"
                          : L->unroll ? "all-gather-unrolled"
                                      : "all-gather";
    int64_t iters = L->unroll ? L->n / 2 : L->n;
    TraceWindowedLoop ev = {L->job->hlo, loop, variant, iters,
                            window_bytes * (L->unroll ? 2 : 1)};
    cx->trace->ops->windowed_loop(cx->trace, &ev);
}

/* Operands as they enter the loop: masked where padding would leak into sums (E.12 "before
 * the loop"), and for RS with the contracting dims of the smaller one matched to the other. */
static SlStatus
prepare_operands(Loop *L, IrInstr **lhs, IrInstr **rhs, SlError *err)
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

static void
loop_shardings(Loop *L)
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
}

static IrInstr *
emit_loop(Loop *L, IrInstr *lhs, IrInstr *rhs, const IrShape *res_shape)
{
    SpmdCtx *cx = L->cx;
    IrInstr *zero = spmd_emit_zero_like(cx, res_shape);
    IrInstr *extra = spmd_emit_zero_like(cx, res_shape);
    IrInstr *elems[5] = {lhs, rhs, zero, extra, spmd_emit_constant_scalar(cx, IR_DT_U32, 0)};
    IrInstr *init = zero && extra && elems[4] ? spmd_emit_tuple(cx, elems, 5) : NULL;
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

SlStatus
spmd_emit_windowed_dot(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                       const DotWindowedConfig *cfg, IrInstr **out, SlError *err)
{
    Loop L = {cx, job, p, cfg, cfg->loop_partitions, cfg->kind == DOT_WE_RS, false, NULL, NULL};
    L.unroll = cx->opts->unroll_windowed_einsum && !L.rs && L.n % 2 == 0;
    if (cx->opts->bidirectional_windowed_einsum)
        spmd_warn(cx, "bidirectional windowed einsum is not modelled: emitting the "
                      "unidirectional loop");
    if (L.rs && cx->opts->unroll_windowed_einsum)
        spmd_warn(cx, "unrolled reduce-scatter windowed einsum is not modelled: emitting the "
                      "unidirectional loop");
    loop_shardings(&L);
    if ((cfg->kind != DOT_WE_AG_NONCONTRACTING && !L.slice) ||
        ((cfg->kind == DOT_WE_AG_NONCONTRACTING || cfg->kind == DOT_WE_AG_BATCH) && !L.dus))
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "windowed einsum without slice sharding");
    IrInstr *lhs, *rhs;
    SlStatus st = prepare_operands(&L, &lhs, &rhs, err);
    if (st != SL_OK)
        return st;
    bool padded;
    IrShape rs = result_shape(&L, &padded);
    IrInstr *loop = emit_loop(&L, lhs, rhs, &rs);
    IrInstr *res = spmd_emit_gte(cx, loop, 2);
    if (!res)
        return spmd_nomem(cx, err);
    if (padded) {
        IrShape ls = spmd_local_shape(cx, p->out_base, p->out);
        int64_t start[SPMD_MAX_RANK] = {0};
        res = spmd_emit_slice(cx, res, start, ls.dims);
    }
    IrInstr *w = cfg->windowed_lhs ? lhs : rhs;
    trace_loop(&L, loop, L.rs ? ir_shape_byte_size(&rs) : ir_shape_byte_size(&w->shape));
    *out = res;
    return res ? SL_OK : spmd_nomem(cx, err);
}
