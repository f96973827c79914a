/* windowed_einsum.c - collective matmul (gspmd.md E.5, E.12; seeds/000
 * GetWindowedEinsumConfiguration, EmitWindowedDotGeneral). Owns: deciding whether a dot's
 * base case becomes a windowed loop (XLA's SpmdPartitionerOptions names and defaults: the
 * byte/MiB thresholds, the users check, disable_ag_rewrite_for_multiple_consumers, partial
 * windowing), and building that loop as ordinary HLO: a while whose body runs the local dot
 * on the current window, accumulates (add, or dynamic-update-slice), and passes the window
 * (or, for reduce-scatter, the result) around the device ring with collective-permutes; in
 * the plain, unrolled (two half-steps) and bidirectional (both ring directions, one dot over
 * a pair dim) variants. Every loop is reported as a windowed-loop trace event and recorded in
 * cx->wloops; once its computation is partitioned, spmd_windowed_code_motion moves reduces
 * that consume a dynamic-update-slice loop's result into the body. Does not own:
 * the local dot (DotJob.create) or collectives (collectives.c). Invariant: the loop bodies
 * are emitted through spmd_emit with cx->comp switched to the new computation, and the
 * partition-id memos are restored after. */
#include "spmd/dot_int.h"

#include <stdio.h>
#include <stdlib.h>
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

/* Threshold test: total_bytes_windowed_einsum_threshold (XLA's option, in bytes, -1 = unset)
 * compares the source dot's two full operands; else `size` (this level's full operand or
 * output) is compared with threshold_for_windowed_einsum_mib. */
static bool
big_enough(SpmdCtx *cx, const DotJob *job, int64_t size, DotWindowedConfig *cfg)
{
    int64_t total = cx->opts->total_bytes_windowed_einsum_threshold;
    if (total >= 0) {
        const IrInstr *h = job->hlo;
        cfg->size_bytes = ir_shape_byte_size(&h->operands[0]->shape) +
                          ir_shape_byte_size(&h->operands[1]->shape);
        cfg->threshold_bytes = total;
    } else {
        cfg->size_bytes = size;
        cfg->threshold_bytes = cx->opts->threshold_for_windowed_einsum_mib * MIB_BYTES;
    }
    return cfg->size_bytes >= cfg->threshold_bytes;
}

static const ShdSharding *
own_sharding(const IrInstr *i)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_SHARDING);
    return a ? a->u.sharding : NULL;
}

/* The sharding `user` would like its operand `op` to have (GetShardingFromUser, reduced to the
 * two users that matter here: dots, and elementwise users of the same shape); NULL = unknown. */
static const ShdSharding *
sharding_from_user(SpmdCtx *cx, const IrInstr *op, const IrInstr *user)
{
    const ShdSharding *us = own_sharding(user);
    if (!us || us->kind == SHD_TUPLE)
        return NULL;
    if (user->op == IR_OP_DOT && user->n_operands == 2) {
        DotDims d;
        if (spmd_dot_dims_of(cx, user, &d) != SL_OK)
            return NULL;
        return spmd_dot_infer_operand(cx, &d, us, user->operands[0] == op ? DOT_LHS : DOT_RHS);
    }
    if (ir_op_family(user->op) == IR_FAM_ELEMENTWISE && ir_shape_equal(&user->shape, &op->shape, false))
        return us;
    return NULL;
}

/* The "users check" of E.5: when another user of the operand to be gathered wants the same
 * sharding the dot would gather it to, the all-gather is shared, so no loop is built. */
static bool
users_allow_loop(SpmdCtx *cx, const DotJob *job, bool window_lhs)
{
    if (cx->opts->skip_checking_windowed_einsum_users)
        return true;
    const IrInstr *op = job->hlo->operands[window_lhs ? 0 : 1];
    const IrComputation *c = job->hlo->parent;
    uint32_t users = 0;
    for (uint32_t k = 0; c && k < c->n_instrs; k++)
        for (uint32_t j = 0; j < c->instrs[k]->n_operands; j++)
            if (c->instrs[k]->operands[j] == op) {
                users++;
                break;
            }
    const ShdSharding *ideal = users > 1 ? sharding_from_user(cx, op, job->hlo) : NULL;
    const ShdSharding *have = own_sharding(op);
    for (uint32_t k = 0; ideal && k < c->n_instrs; k++) {
        const IrInstr *u = c->instrs[k];
        bool uses = false;
        for (uint32_t j = 0; j < u->n_operands; j++)
            uses = uses || u->operands[j] == op;
        const ShdSharding *want = uses && u != job->hlo ? sharding_from_user(cx, op, u) : NULL;
        if (!want || (have && shd_equal(want, have)))
            continue;
        if (shd_equal(want, ideal))
            return false;
    }
    return true;
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
        !big_enough(cx, job, ir_shape_byte_size(win->base_shape), cfg) ||
        !users_allow_loop(cx, job, window_lhs))
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
        !big_enough(cx, job, ir_shape_byte_size(p->out_base), cfg))
        return false;
    const ShdSharding *o2s =
        spmd_dot_seen_from(cx, d, p->out, DOT_OUT, olnc == n ? DOT_LHS : DOT_RHS);
    if (!o2s)
        return false;
    cfg->kind = DOT_WE_RS;
    cfg->windowed_lhs = olnc != n;
    return true;
}

/* Partial windowing (E.5 #4): the lhs sharding with its loop dim `w` moved into replication,
 * merged with the rhs tile dims aligned to the right (position by position, as the upstream
 * check lines them up), must give exactly the output sharding. */
static bool
partial_merge_matches(const ShdSharding *ls, const ShdSharding *rs, const ShdSharding *o,
                      uint32_t w)
{
    uint32_t r = ls->n_tile_dims;
    if (!shd_is_tiled(rs) || rs->n_tile_dims > r + 1 || !shd_is_tiled(o) ||
        shd_data_rank(o) != r || shd_device_count(o) != shd_device_count(ls) ||
        shd_device_count(rs) != shd_device_count(ls) || r > SPMD_MAX_RANK)
        return false;
    uint32_t off = r + 1 - rs->n_tile_dims;
    int64_t a[SPMD_MAX_RANK], b[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < r; d++) {
        a[d] = d == w ? 1 : ls->tile_dims[d];
        b[d] = d < off ? 1 : rs->tile_dims[d - off];
        int64_t m = a[d] == 1 ? b[d] : (b[d] == 1 || b[d] == a[d]) ? a[d] : 0;
        if (m != shd_dim_shards(o, d))
            return false;
    }
    int64_t li[SPMD_MAX_RANK], ri[SPMD_MAX_RANK + 1], oi[SPMD_MAX_RANK];
    for (int64_t k = 0; k < shd_device_count(ls); k++) {
        int64_t dev = ls->devices[k];
        if (!shd_tile_index(ls, dev, li) || !shd_tile_index(rs, dev, ri) ||
            !shd_tile_index(o, dev, oi))
            return false;
        for (uint32_t d = 0; d < r; d++)
            if ((a[d] > 1 && li[d] != oi[d]) || (b[d] > 1 && ri[d - off] != oi[d]))
                return false;
    }
    return true;
}

/* The loop dim of partial windowing: exactly one sharded lhs free dim the output leaves
 * unsharded (-1 otherwise), and exactly one sharded like the output (*kept). */
static int64_t
partial_loop_dim(const DotJob *job, const DotProblem *p, int64_t *kept)
{
    const ShdSharding *ls = p->lhs.sharding;
    int64_t w = -1, n_w = 0, n_k = 0;
    for (uint32_t k = 0; k < job->dims.n[DOT_LHS_NC]; k++) {
        const DotDimMap *m = &job->dims.role[DOT_LHS_NC][k];
        int64_t t = shd_dim_shards(ls, (uint32_t)m->lhs), o = shd_dim_shards(p->out, (uint32_t)m->out);
        if (t > 1 && o == 1) {
            w = m->lhs;
            n_w++;
        } else if (t > 1 && o == t) {
            *kept = m->lhs;
            n_k++;
        }
    }
    return n_w == 1 && n_k == 1 ? w : -1;
}

static bool
partial_case(SpmdCtx *cx, const DotJob *job, const DotProblem *p, DotWindowedConfig *cfg)
{
    const DotDims *d = &job->dims;
    const ShdSharding *ls = p->lhs.sharding;
    int64_t n = p->st->num_partitions, kept = -1;
    int64_t ornc = spmd_dot_parts(p->out, d, DOT_RHS_NC, DOT_OUT);
    if (!cx->opts->partial_windowed_einsum || !shd_is_tiled(ls) || ls->n_subgroups ||
        spmd_dot_parts(ls, d, DOT_LHS_NC, DOT_LHS) != n ||
        spmd_dot_parts(p->out, d, DOT_LHS_NC, DOT_OUT) * ornc != n ||
        spmd_dot_parts(p->rhs.sharding, d, DOT_RHS_NC, DOT_RHS) != ornc ||
        !big_enough(cx, job, ir_shape_byte_size(p->rhs.base_shape), cfg))
        return false;
    int64_t w = partial_loop_dim(job, p, &kept);
    if (w < 0)
        return false;
    /* the devices along the loop dim must come in increasing order */
    int64_t stride_w = 1, stride_k = 1, prev = ls->devices[0];
    for (uint32_t k = (uint32_t)w + 1; k < ls->n_tile_dims; k++)
        stride_w *= ls->tile_dims[k];
    for (uint32_t k = (uint32_t)kept + 1; k < ls->n_tile_dims; k++)
        stride_k *= ls->tile_dims[k];
    for (int64_t a = 0; a < ls->tile_dims[kept]; a++)
        for (int64_t b = 1; b < ls->tile_dims[w]; b++) {
            int64_t dev = ls->devices[a * stride_k + b * stride_w];
            if (dev < prev)
                return false;
            prev = dev;
        }
    if (!partial_merge_matches(ls, p->rhs.sharding, p->out, (uint32_t)w))
        return false;
    cfg->kind = DOT_WE_AG_NONCONTRACTING;
    cfg->windowed_lhs = true;
    cfg->windowing_dim = w;
    cfg->loop_partitions = ls->tile_dims[w];
    return true;
}

static const IrInstr *
through_reshape(const IrInstr *x)
{
    bool look = x->op == IR_OP_RESHAPE || x->op == IR_OP_BITCAST || x->op == IR_OP_TRANSPOSE;
    return look && x->n_operands ? x->operands[0] : x;
}

/* disable_ag_rewrite_for_multiple_consumers: an all-gather loop built earlier in this
 * computation (found by its body's name, as upstream does) already windows an operand of
 * this dot (looking through one reshape, bitcast or transpose). */
static bool
shares_all_gather_loop(SpmdCtx *cx, const DotProblem *p)
{
    static const char prefix[] = "windowed_dot_general_body_ag";
    const IrComputation *c = cx->comp;
    if (!cx->opts->disable_ag_rewrite_for_multiple_consumers || !c)
        return false;
    const IrInstr *l = through_reshape(p->lhs.hlo), *r = through_reshape(p->rhs.hlo);
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        const IrInstr *w = c->instrs[k];
        const IrAttr *b = w->op == IR_OP_WHILE ? ir_instr_find_attr(w, IR_ATTR_BODY) : NULL;
        if (!b || !b->u.comp || w->n_operands != 1)
            continue;
        SlStr name = sl_sym_str(b->u.comp->name);
        const IrInstr *t = w->operands[0];
        if (name.len < sizeof(prefix) - 1 || memcmp(name.ptr, prefix, sizeof(prefix) - 1) ||
            t->op != IR_OP_TUPLE || t->n_operands == 0)
            continue;
        if (t->operands[0] == l || t->operands[0] == r)
            return true;
    }
    return false;
}

void
spmd_windowed_config(SpmdCtx *cx, const DotJob *job, const DotProblem *p, DotWindowedConfig *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    int64_t n = p->st->num_partitions;
    cfg->loop_partitions = n;
    cfg->windowing_dim = -1;
    if (n <= 1 || disabled_by_attribute(job->hlo) || job->dims.n[DOT_SPATIAL] > 0)
        return;
    if (shares_all_gather_loop(cx, p)) {
        record(cx, job, cfg, "no_windowed_einsum",
               "an operand is already windowed by an all-gather loop and "
               "disable_ag_rewrite_for_multiple_consumers is set",
               n);
        return;
    }
    if (n > cx->opts->max_windowed_einsum_iteration) {
        DotWindowedConfig probe = *cfg;
        if (all_gather_case(cx, job, p, false, &probe) ||
            all_gather_case(cx, job, p, true, &probe) || reduce_scatter_case(cx, job, p, &probe))
            record(cx, job, &probe, "no_windowed_einsum",
                   "the loop would need more iterations than max_windowed_einsum_iteration", n);
        return;
    }
    bool found = all_gather_case(cx, job, p, false, cfg) ||
                 all_gather_case(cx, job, p, true, cfg) || reduce_scatter_case(cx, job, p, cfg) ||
                 partial_case(cx, job, p, cfg);
    if (!found) {
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
    record(cx, job, cfg,
           cfg->kind == DOT_WE_RS          ? "windowed_reduce_scatter"
           : cfg->windowing_dim >= 0       ? "windowed_all_gather_partial"
                                           : "windowed_all_gather",
           cfg->windowing_dim >= 0
               ? "partial_windowed_einsum: the lhs has one sharded free dim the output leaves "
                 "unsharded, so only that dim is windowed, in independent rings"
               : "the compared size reaches the windowed-einsum threshold and the output "
                 "matches an operand, so the transfer is overlapped with the per-shard dots",
           cfg->loop_partitions);
}

/* ---- loop construction (E.12) ---- */

typedef enum LoopShape { LOOP_PLAIN, LOOP_UNROLLED, LOOP_BIDIR } LoopShape;

static bool record_loop(SpmdCtx *cx, IrInstr *loop, bool output_dus);

typedef struct Loop {
    SpmdCtx *cx;
    const DotJob *job;
    const DotProblem *p;
    const DotWindowedConfig *cfg;
    int64_t n;                 /* loop partitions: the ring length */
    int64_t N;                 /* partitions of the state: data ids are taken mod N */
    bool rs;                   /* reduce-scatter flavour: the result buffer travels */
    LoopShape shape;
    const ShdSharding *slice;  /* slices the non-windowed operand by data_id, or NULL */
    const ShdSharding *slice2; /* bidirectional: `slice` with the pair dim inserted at ssd */
    const ShdSharding *dus;    /* dynamic-update-slice offsets of the result, or NULL (add) */
    int64_t dus_dim;           /* partial windowing: the only output dim offsets move on */
    int64_t ssd;               /* bidirectional: first sharded dim of the slice sharding */
    int64_t wcd;               /* bidirectional all-gather: the window's pair dim */
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

/* Offsets of device `id`'s tile of `s` in a tensor whose tiles are `tile[d]` long; only dim
 * `only` moves when it is >= 0 (MakePartitionOffsets restricted to the windowing dims). */
static bool
offsets_for_id(Loop *L, const ShdSharding *s, uint32_t rank, const int64_t *tile, IrInstr *id,
               int64_t only, IrInstr **out)
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
static IrInstr *
pad_to_tiles(SpmdCtx *cx, IrInstr *x, const ShdSharding *s, int64_t *tile)
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
static IrInstr *
slice_for_id(Loop *L, IrInstr *x, IrInstr *id, const ShdSharding *s)
{
    int64_t tile[SPMD_MAX_RANK];
    IrInstr *offs[SPMD_MAX_RANK];
    x = pad_to_tiles(L->cx, x, s, tile);
    if (!x || !offsets_for_id(L, s, x->shape.rank, tile, id, -1, offs))
        return NULL;
    return spmd_emit_dynamic_slice(L->cx, x, offs, tile);
}

static IrInstr *
u32(Loop *L, int64_t v)
{
    return spmd_emit_constant_scalar(L->cx, IR_DT_U32, v);
}

/* data_id = (idx + partition_id) mod N: the ring position whose data is used now. */
static IrInstr *
data_id(Loop *L, IrInstr *idx)
{
    SpmdCtx *cx = L->cx;
    IrInstr *pid = spmd_partition_id(cx, L->p->st);
    return spmd_emit_binary(cx, IR_OP_REMAINDER, spmd_emit_binary(cx, IR_OP_ADD, idx, pid),
                            u32(L, L->N));
}

/* One unidirectional step: dot of the current window at ring index `idx`, accumulated into
 * `res` (add, or dynamic-update-slice at the data id's offsets). */
static IrInstr *
step(Loop *L, IrInstr *lhs, IrInstr *rhs, IrInstr *res, IrInstr *idx)
{
    SpmdCtx *cx = L->cx;
    IrInstr *id = idx ? data_id(L, idx) : NULL;
    if (!id)
        return NULL;
    if (L->slice) {
        if (L->cfg->windowed_lhs)
            rhs = slice_for_id(L, rhs, id, L->slice);
        else
            lhs = slice_for_id(L, lhs, id, L->slice);
    }
    IrInstr *dot = lhs && rhs ? L->job->create(cx, L->job, lhs, rhs, L->p->window) : NULL;
    if (!dot)
        return NULL;
    if (!L->dus)
        return spmd_emit_binary(cx, IR_OP_ADD, res, dot);
    IrInstr *offs[SPMD_MAX_RANK];
    if (!offsets_for_id(L, L->dus, dot->shape.rank, dot->shape.dims, id, L->dus_dim, offs))
        return NULL;
    return spmd_emit_dus(cx, res, dot, offs);
}

/* ---- bidirectional half-step (dots only) ---- */

/* `x` with a size-1 dim inserted at `at`. */
static IrInstr *
insert_unit_dim(SpmdCtx *cx, IrInstr *x, int64_t at)
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
slice_half(Loop *L, IrInstr *x, IrInstr *id, bool first)
{
    SpmdCtx *cx = L->cx;
    int64_t tile[SPMD_MAX_RANK];
    IrInstr *y = insert_unit_dim(cx, pad_to_tiles(cx, x, L->slice, tile), L->ssd);
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
    return y ? slice_for_id(L, y, id, L->slice2) : NULL;
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

static bool
listed_dim(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t k = 0; k < n; k++)
        if (v[k] == x)
            return true;
    return false;
}

/* The local dot of operands that carry a pair dim (lhs at `nl`, rhs at `nr`, -1 = none): the
 * source dimension numbers updated, the result shape derived; *od = the output pair dim. */
static IrInstr *
dot_with_pair_dims(Loop *L, IrInstr *l, IrInstr *r, int64_t nl, int64_t nr, int64_t *od)
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
            if (listed_dim(lists[side], cnt[side], d) || listed_dim(lists[2 + side], cnt[2 + side], d))
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
bidir_ids(Loop *L, IrInstr *i, IrInstr **ccw, IrInstr **cw)
{
    SpmdCtx *cx = L->cx;
    IrInstr *pid = spmd_partition_id(cx, L->p->st), *n = u32(L, L->N);
    IrInstr *a = spmd_emit_binary(cx, IR_OP_ADD, i, pid);
    IrInstr *b = spmd_emit_binary(cx, IR_OP_ADD, n, pid);
    if (L->rs) {
        a = spmd_emit_binary(cx, IR_OP_ADD, a, u32(L, L->N / 2 + 1));
        b = spmd_emit_binary(cx, IR_OP_SUBTRACT, b, u32(L, L->N / 2));
    } else {
        b = spmd_emit_binary(cx, IR_OP_SUBTRACT, b, u32(L, 1));
    }
    *ccw = spmd_emit_binary(cx, IR_OP_REMAINDER, a, n);
    b = spmd_emit_binary(cx, IR_OP_SUBTRACT, b, i);
    *cw = spmd_emit_binary(cx, IR_OP_REMAINDER, b, n);
}

/* One bidirectional half-step: a single dot over both windows (the counter-clockwise one in
 * the operand slot, the clockwise one `extra_in`), two results written. */
static bool
bidir_half(Loop *L, IrInstr *l, IrInstr *r, IrInstr **o, IrInstr *extra_in, IrInstr **cw_out,
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
    if (!offsets_for_id(L, L->dus, h0->shape.rank, h0->shape.dims, ccw, -1, offs))
        return false;
    *o = spmd_emit_dus(cx, *o, h0, offs);
    if (!*o || !offsets_for_id(L, L->dus, h1->shape.rank, h1->shape.dims, cw, -1, offs))
        return false;
    *o = spmd_emit_dus(cx, *o, h1, offs);
    return *o != NULL;
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
static IrInstr *
ring_permute(Loop *L, IrInstr *x, int64_t shift)
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
ring_step_conditional(Loop *L, IrInstr *x, IrInstr *i_next)
{
    SpmdCtx *cx = L->cx;
    IrComputation *saved, *tc, *fc;
    IrInstr *tp, *fp;
    tc = begin_comp(cx, "window_collective_permute", &x->shape, &tp, &saved);
    if (!tc || !end_comp(cx, tc, ring_permute(L, tp, -1), saved))
        return NULL;
    fc = begin_comp(cx, "last_iteration_noop", &x->shape, &fp, &saved);
    if (!fc || !end_comp(cx, fc, fp, saved))
        return NULL;
    IrInstr *pred = spmd_emit_compare(cx, i_next, u32(L, L->n), "LT");
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
body_plain(Loop *L, IrInstr **g)
{
    SpmdCtx *cx = L->cx;
    IrInstr *idx = L->rs ? spmd_emit_binary(cx, IR_OP_ADD, g[4], u32(L, 1)) : g[4];
    g[2] = step(L, g[0], g[1], g[2], idx);
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, g[4], u32(L, 1));
    int w = L->rs ? 2 : L->cfg->windowed_lhs ? 0 : 1;
    g[w] = g[2] && g[4] ? ring_step_conditional(L, g[w], g[4]) : NULL;
    return g[w] != NULL;
}

/* Unrolled all-gather: two half-steps, the window permuted before each dot (no conditional:
 * the last permute is wasted). */
static bool
body_unrolled_ag(Loop *L, IrInstr **g)
{
    SpmdCtx *cx = L->cx;
    int w = L->cfg->windowed_lhs ? 0 : 1;
    IrInstr *w1 = ring_permute(L, g[w], -1);
    g[2] = step(L, g[0], g[1], g[2], g[4]);
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, g[4], u32(L, 1));
    IrInstr *cur[2] = {g[0], g[1]};
    cur[w] = w1;
    IrInstr *w2 = ring_permute(L, w1, -1);
    g[2] = step(L, cur[0], cur[1], g[2], g[4]);
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, g[4], u32(L, 1));
    g[w] = w2;
    return g[2] && g[4] && g[w];
}

/* Unrolled reduce-scatter: the result moves two steps back and collects block i + 3 + p, the
 * extra buffer collects block i + p and moves two steps back; i += 2. */
static bool
body_unrolled_rs(Loop *L, IrInstr **g)
{
    SpmdCtx *cx = L->cx;
    g[2] = ring_permute(L, g[2], -2);
    g[3] = ring_permute(L, step(L, g[0], g[1], g[3], g[4]), -2);
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, g[4], u32(L, 2));
    IrInstr *real = spmd_emit_binary(cx, IR_OP_ADD, g[4], u32(L, 1));
    g[2] = g[2] && real ? step(L, g[0], g[1], g[2], real) : NULL;
    return g[2] && g[3] && g[4];
}

/* Bidirectional: two half-steps; in each, the main window (the result for RS) moves one step
 * counter-clockwise and the extra one one step clockwise, and one dot serves both. */
static bool
body_bidir(Loop *L, IrInstr **g)
{
    SpmdCtx *cx = L->cx;
    int w = L->rs ? 2 : L->cfg->windowed_lhs ? 0 : 1;
    IrInstr *next[2] = {g[0], g[1]}, *o = g[2];
    IrInstr *ccw = ring_permute(L, g[w], -1);
    if (L->rs)
        o = ccw;
    else
        next[w] = ccw;
    IrInstr *cw = ring_permute(L, g[3], 1);
    if (!ccw || !cw || !bidir_half(L, g[0], g[1], &o, g[3], &cw, g[4]))
        return false;
    IrInstr *i1 = spmd_emit_binary(cx, IR_OP_ADD, g[4], u32(L, 1));
    IrInstr *second[2] = {next[0], next[1]};
    IrInstr *ccw2 = ring_permute(L, L->rs ? o : next[w], -1);
    if (L->rs)
        o = ccw2;
    else
        second[w] = ccw2;
    IrInstr *cw2 = ring_permute(L, cw, 1);
    if (!i1 || !ccw2 || !cw2 || !bidir_half(L, next[0], next[1], &o, cw, &cw2, i1))
        return false;
    g[0] = second[0];
    g[1] = second[1];
    g[2] = o;
    g[3] = cw2;
    g[4] = spmd_emit_binary(cx, IR_OP_ADD, i1, u32(L, 1));
    return g[4] != NULL;
}

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
    bool ok = g[0] && g[1] && g[2] && g[3] && g[4];
    if (ok && L->shape == LOOP_BIDIR)
        ok = body_bidir(L, g);
    else if (ok && L->shape == LOOP_UNROLLED)
        ok = L->rs ? body_unrolled_rs(L, g) : body_unrolled_ag(L, g);
    else if (ok)
        ok = body_plain(L, g);
    IrInstr *root = ok ? spmd_emit_tuple(cx, g, 5) : NULL;
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
    int64_t trips = L->shape == LOOP_BIDIR ? L->n / 2 : L->n; /* i counts half-steps */
    IrInstr *lt = spmd_emit_compare(cx, i, u32(L, trips), "LT");
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
    static const char *const k_variant[2][3] = {
        {"all-gather", "all-gather-unrolled", "all-gather-bidirectional"},
        {"reduce-scatter", "reduce-scatter-unrolled", "reduce-scatter-bidirectional"}};
    SpmdCtx *cx = L->cx;
    if (!cx->trace->ops->windowed_loop)
        return;
    const char *variant = L->cfg->windowing_dim >= 0 ? "all-gather-partial"
                                                      : k_variant[L->rs][L->shape];
    int64_t per_trip = L->shape == LOOP_BIDIR ? 4 : L->shape == LOOP_UNROLLED ? 2 : 1;
    /* The plain loop permutes in the true branch of a conditional that skips the last
     * iteration, so that branch runs n - 1 times; other shapes state nothing (0). */
    TraceWindowedLoop ev = {L->job->hlo, loop, variant, L->n / per_trip,
                            window_bytes * per_trip, L->shape == LOOP_PLAIN ? L->n - 1 : 0};
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

/* The first sharded dim of `s`, or -1. */
static int64_t
first_sharded_dim(const ShdSharding *s)
{
    for (uint32_t d = 0; s && shd_is_tiled(s) && d < shd_data_rank(s); d++)
        if (shd_dim_shards(s, d) > 1)
            return d;
    return -1;
}

/* The dim of `to` matched to dim `dim` of `from` by the role records, or -1. */
static int64_t
map_dim(const DotDims *d, DotSide from, DotSide to, int64_t dim)
{
    for (int r = 0; r < DOT_ROLE_COUNT; r++)
        for (uint32_t k = 0; k < d->n[r]; k++)
            if (spmd_dot_dim(&d->role[r][k], from) == dim)
                return spmd_dot_dim(&d->role[r][k], to);
    return -1;
}

/* Bidirectional geometry: the pair dims. Returns false when the shardings give none. */
static bool
bidir_dims(Loop *L)
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
    L->wcd = map_dim(d, L->slice ? xs : DOT_OUT, ws, L->ssd);
    return L->wcd >= 0;
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
    if (L->cfg->windowing_dim >= 0)
        L->dus_dim = map_dim(d, DOT_LHS, DOT_OUT, L->cfg->windowing_dim);
}

/* The loop variant the options ask for (E.12): bidirectional needs N mod 4 == 0, unrolled
 * N even, both a full ring; convolutions have no bidirectional form here. */
static void
choose_shape(Loop *L)
{
    SpmdCtx *cx = L->cx;
    bool full = L->n == L->N;
    L->shape = LOOP_PLAIN;
    if (cx->opts->bidirectional_windowed_einsum && L->N % 4 == 0 && full) {
        if (!L->job->conv_case && bidir_dims(L)) {
            L->shape = LOOP_BIDIR;
            return;
        }
        spmd_warn(cx, TRACE_WARN_OTHER, "bidirectional windowed einsum is not modelled for this operation: "
                      "emitting the unrolled or one-direction loop");
    }
    if (cx->opts->unroll_windowed_einsum && L->N % 2 == 0 && full)
        L->shape = LOOP_UNROLLED;
}

static IrInstr *
emit_loop(Loop *L, IrInstr *lhs, IrInstr *rhs, const IrShape *res_shape)
{
    SpmdCtx *cx = L->cx;
    IrInstr *zero = spmd_emit_zero_like(cx, res_shape), *extra;
    if (L->shape == LOOP_BIDIR && !L->rs) { /* the window gets its pair dim; a copy pre-shifted */
        IrInstr **w = L->cfg->windowed_lhs ? &lhs : &rhs;
        *w = insert_unit_dim(cx, *w, L->wcd);
        extra = ring_permute(L, *w, 1);
    } else {
        extra = spmd_emit_zero_like(cx, res_shape);
    }
    IrInstr *elems[5] = {lhs, rhs, zero, extra, u32(L, 0)};
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

/* After an unrolled or bidirectional reduce-scatter loop: the two partial buffers are
 * realigned (extra one step clockwise when bidirectional, the result one step clockwise when
 * unroll_windowed_einsum is set, as upstream applies both flags) and added. */
static IrInstr *
finish_rs(Loop *L, IrInstr *loop, IrInstr *res)
{
    SpmdCtx *cx = L->cx;
    if (!L->rs || L->shape == LOOP_PLAIN)
        return res;
    IrInstr *extra = spmd_emit_gte(cx, loop, 3);
    if (L->shape == LOOP_BIDIR)
        extra = ring_permute(L, extra, 1);
    if (cx->opts->unroll_windowed_einsum && L->N % 2 == 0) {
        if (L->shape == LOOP_BIDIR)
            spmd_warn(cx, TRACE_WARN_OTHER, "bidirectional and unroll_windowed_einsum together: the reduce-scatter "
                          "result is shifted once more after the loop, as upstream does; the "
                          "blocks end up on the wrong devices");
        res = ring_permute(L, res, 1);
    }
    return res && extra ? spmd_emit_binary(cx, IR_OP_ADD, res, extra) : NULL;
}

SlStatus
spmd_emit_windowed_dot(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                       const DotWindowedConfig *cfg, IrInstr **out, SlError *err)
{
    Loop L = (Loop){.cx = cx, .job = job, .p = p, .cfg = cfg, .n = cfg->loop_partitions,
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
    IrInstr *res = finish_rs(&L, loop, spmd_emit_gte(cx, loop, 2));
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

/* ---- post-partition code motion of reduces into the loop ------------------------------- *
 * An all-gather loop on non-contracting or batch dims assembles its result with a chain of
 * dynamic-update-slices. When that result (maybe sliced to drop padding) only feeds
 * elementwise ops with small inputs (broadcasts, iotas, constants) and ends in simple
 * reduces, those ops are rebuilt per window inside the body and the loop carries the
 * reduce-shaped buffers (padded on the windowed dims) instead of the whole result. */

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

/* Users of every instruction of one computation, by instruction id (CSR). */
typedef struct UseIdx {
    uint32_t n_ids;
    uint32_t *start; /* n_ids + 1 */
    IrInstr **list;
} UseIdx;

static void
use_idx_fini(UseIdx *u)
{
    free(u->start);
    free(u->list);
    *u = (UseIdx){0};
}

static bool
use_idx_build(UseIdx *u, const IrComputation *c, uint32_t n_ids)
{
    *u = (UseIdx){0};
    u->n_ids = n_ids;
    u->start = calloc((size_t)n_ids + 1, sizeof(uint32_t));
    size_t total = 0;
    for (uint32_t k = 0; k < c->n_instrs; k++)
        total += c->instrs[k]->n_operands;
    u->list = malloc((total ? total : 1) * sizeof(IrInstr *));
    uint32_t *fill = calloc((size_t)n_ids + 1, sizeof(uint32_t));
    if (!u->start || !u->list || !fill) {
        free(fill);
        use_idx_fini(u);
        return false;
    }
    for (uint32_t k = 0; k < c->n_instrs; k++)
        for (uint32_t o = 0; o < c->instrs[k]->n_operands; o++) {
            uint32_t id = c->instrs[k]->operands[o]->id;
            if (id < n_ids)
                u->start[id + 1]++;
        }
    for (uint32_t i = 0; i < n_ids; i++)
        u->start[i + 1] += u->start[i];
    for (uint32_t k = 0; k < c->n_instrs; k++)
        for (uint32_t o = 0; o < c->instrs[k]->n_operands; o++) {
            uint32_t id = c->instrs[k]->operands[o]->id;
            if (id < n_ids) {
                /* an instruction using x twice is listed once */
                bool dup = false;
                for (uint32_t j = u->start[id]; j < u->start[id] + fill[id]; j++)
                    dup = dup || u->list[j] == c->instrs[k];
                if (!dup)
                    u->list[u->start[id] + fill[id]++] = c->instrs[k];
            }
        }
    /* close the gaps left by duplicates: keep counts in fill */
    uint32_t w = 0;
    for (uint32_t i = 0; i < n_ids; i++) {
        uint32_t s = u->start[i];
        u->start[i] = w;
        for (uint32_t j = 0; j < fill[i]; j++)
            u->list[w++] = u->list[s + j];
    }
    u->start[n_ids] = w;
    free(fill);
    return true;
}

static uint32_t
n_users(const UseIdx *u, const IrInstr *x)
{
    return x->id < u->n_ids ? u->start[x->id + 1] - u->start[x->id] : 0;
}

static IrInstr *const *
users_of(const UseIdx *u, const IrInstr *x)
{
    return x->id < u->n_ids ? u->list + u->start[x->id] : NULL;
}

enum { M_MOVE = 1, M_NEWOP = 2, M_FOUND = 4, M_SEEN = 8, M_DEAD = 16 };

typedef struct Motion {
    SpmdCtx *cx;
    IrComputation *comp, *body;
    UseIdx use;
    uint8_t *mark; /* by id (n_ids of use) */
    uint32_t n_ids;
    IrInstr **newops; /* small operands, then the reduce buffers */
    uint32_t n_newops, cap_newops;
    IrInstr **reduces;
    uint32_t n_reduces, cap_reduces;
    IrInstr **found; /* scratch of find_small_inputs */
    uint32_t n_found, cap_found;
    IrInstr **stack;
    uint32_t n_stack, cap_stack;
    uint32_t n_move;
    uint32_t n_in; /* size of the clusters' maps */
} Motion;

static bool
push(IrInstr ***v, uint32_t *n, uint32_t *cap, IrInstr *x)
{
    if (*n == *cap) {
        uint32_t c = *cap ? 2 * *cap : 16;
        IrInstr **nv = realloc(*v, c * sizeof(IrInstr *));
        if (!nv)
            return false;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return true;
}

static bool
marked(const Motion *M, const IrInstr *x, uint8_t bit)
{
    return x->id < M->n_ids && (M->mark[x->id] & bit);
}

static void
set_mark(Motion *M, const IrInstr *x, uint8_t bit)
{
    if (x->id < M->n_ids)
        M->mark[x->id] |= bit;
}

static bool
add_newop(Motion *M, IrInstr *x)
{
    if (marked(M, x, M_NEWOP))
        return true;
    set_mark(M, x, M_NEWOP);
    return push(&M->newops, &M->n_newops, &M->cap_newops, x);
}

static bool
same_dims(const IrShape *a, const IrShape *b)
{
    if (a->rank != b->rank || ir_shape_is_tuple(a) || ir_shape_is_tuple(b))
        return false;
    for (uint32_t d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

static bool
movable_elementwise(const IrInstr *x)
{
    if (!ir_op_is_elementwise(x->op) || ir_shape_is_tuple(&x->shape))
        return false;
    for (uint32_t o = 0; o < x->n_operands; o++)
        if (!same_dims(&x->operands[o]->shape, &x->shape))
            return false;
    return true;
}

/* The nodes producing `x` from small operands only (broadcast, constant and iota leaves,
 * elementwise inside): marked M_MOVE, their operands added as new operands. false (nothing
 * marked) when `x` depends on anything else. */
static int
find_small_inputs(Motion *M, IrInstr *x)
{
    M->n_found = 0;
    M->n_stack = 0;
    if (!push(&M->stack, &M->n_stack, &M->cap_stack, x))
        return -1;
    bool ok = true;
    while (M->n_stack && ok) {
        IrInstr *i = M->stack[--M->n_stack];
        if (marked(M, i, M_FOUND))
            continue;
        if (i->id >= M->n_ids) {
            ok = false;
        } else if (i->op == IR_OP_BROADCAST || i->op == IR_OP_CONSTANT || i->op == IR_OP_IOTA) {
            set_mark(M, i, M_FOUND);
            if (!push(&M->found, &M->n_found, &M->cap_found, i))
                return -1;
        } else if (movable_elementwise(i)) {
            set_mark(M, i, M_FOUND);
            if (!push(&M->found, &M->n_found, &M->cap_found, i))
                return -1;
            for (uint32_t o = 0; o < i->n_operands; o++)
                if (!push(&M->stack, &M->n_stack, &M->cap_stack, i->operands[o]))
                    return -1;
        } else {
            ok = false;
        }
    }
    for (uint32_t k = 0; k < M->n_found; k++) {
        IrInstr *i = M->found[k];
        M->mark[i->id] &= (uint8_t)~M_FOUND;
        if (!ok)
            continue;
        if (!marked(M, i, M_MOVE)) {
            set_mark(M, i, M_MOVE);
            M->n_move++;
        }
        if (i->op == IR_OP_BROADCAST)
            for (uint32_t o = 0; o < i->n_operands; o++)
                if (!add_newop(M, i->operands[o]))
                    return -1;
    }
    return ok ? 1 : 0;
}

/* A reduce whose computation is one elementwise op of its two parameters. */
static bool
simple_reduce(const IrInstr *x)
{
    if (x->op != IR_OP_REDUCE || x->n_operands != 2 || ir_shape_is_tuple(&x->shape))
        return false;
    const IrComputation *f = ir_instr_called(x, IR_ATTR_TO_APPLY);
    return f && f->n_instrs == 3 && ir_computation_param_count(f) == 2 && f->root &&
           ir_op_is_elementwise(f->root->op) && f->root->n_operands == 2;
}

/* Walks the consumers of `out` (XLA's cluster search); 1 when something is to move. */
static int
collect(Motion *M, IrInstr *out)
{
    set_mark(M, out, M_MOVE);
    M->n_move = 1;
    M->n_stack = 0;
    IrInstr **work = NULL;
    uint32_t n_work = 0, cap_work = 0;
    int res = 1;
    for (uint32_t k = 0; k < n_users(&M->use, out); k++)
        if (!push(&work, &n_work, &cap_work, users_of(&M->use, out)[k]))
            res = -1;
    while (n_work && res == 1) {
        IrInstr *i = work[--n_work];
        if (marked(M, i, M_MOVE))
            continue;
        if (simple_reduce(i)) {
            set_mark(M, i, M_MOVE);
            M->n_move++;
            if (!add_newop(M, i->operands[1]) ||
                !push(&M->reduces, &M->n_reduces, &M->cap_reduces, i))
                res = -1;
        } else if (i != M->comp->root && n_users(&M->use, i) > 0 && movable_elementwise(i) &&
                   i->id < M->n_ids) {
            for (uint32_t o = 0; o < i->n_operands && res == 1; o++) {
                if (marked(M, i->operands[o], M_MOVE))
                    continue;
                int f = find_small_inputs(M, i->operands[o]);
                res = f < 0 ? -1 : f == 0 ? 0 : 1;
            }
            if (res != 1)
                break;
            set_mark(M, i, M_MOVE);
            M->n_move++;
            for (uint32_t k = 0; k < n_users(&M->use, i) && res == 1; k++)
                if (!push(&work, &n_work, &cap_work, users_of(&M->use, i)[k]))
                    res = -1;
        } else {
            res = 0;
        }
    }
    free(work);
    if (res == 1 && (M->n_move <= 1 || M->n_reduces == 0))
        res = 0;
    /* a reduce depending on another one would make a cycle */
    if (res == 1 && M->n_reduces > 1) {
        for (uint32_t r = 0; r < M->n_reduces && res == 1; r++) {
            for (uint32_t k = 0; k < M->n_ids; k++)
                M->mark[k] &= (uint8_t)~M_SEEN;
            M->n_stack = 0;
            for (uint32_t o = 0; o < M->reduces[r]->n_operands; o++)
                if (!push(&M->stack, &M->n_stack, &M->cap_stack, M->reduces[r]->operands[o]))
                    res = -1;
            while (M->n_stack && res == 1) {
                IrInstr *i = M->stack[--M->n_stack];
                if (marked(M, i, M_SEEN))
                    continue;
                set_mark(M, i, M_SEEN);
                if (i->op == IR_OP_REDUCE)
                    for (uint32_t q = 0; q < M->n_reduces; q++)
                        if (M->reduces[q] == i)
                            res = 0;
                for (uint32_t o = 0; o < i->n_operands && res == 1; o++)
                    if (!push(&M->stack, &M->n_stack, &M->cap_stack, i->operands[o]))
                        res = -1;
            }
        }
    }
    return res;
}

/* Per dynamic-update-slice of the body's result chain: where each moved node lives. */
typedef struct Cluster {
    IrInstr *dus;
    IrInstr **in; /* by outside id */
} Cluster;

static IrInstr *
clone_with(SpmdCtx *cx, const IrInstr *src, const IrShape *shape, IrInstr *const *ops, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (!ops[k])
            return NULL;
    IrShape s = ir_shape_clone(cx->arena, shape);
    IrInstr *i = ir_instr_new(cx->out, src->op, &s, ops, n);
    if (!i || !ir_instr_reserve_attrs(cx->out, i, src->n_attrs))
        return NULL;
    for (uint32_t k = 0; k < src->n_attrs; k++) {
        if (src->attrs[k].key == IR_ATTR_SHARDING)
            continue;
        IrAttr *a = ir_instr_add_attr(cx->out, i, src->attrs[k].key);
        if (!a)
            return NULL;
        *a = src->attrs[k];
    }
    i->literal = src->literal;
    return spmd_emit(cx, i, NULL);
}

static IrShape
dims_like(SpmdCtx *cx, IrDtype t, const IrShape *dims_of)
{
    return ir_shape_make(cx->arena, t, dims_of->dims, dims_of->rank);
}

/* x padded with zeros at the high end up to `dims` (x itself when already that size). */
static IrInstr *
pad_to(SpmdCtx *cx, IrInstr *x, const int64_t *dims)
{
    if (!x)
        return NULL;
    IrPadDim pads[SPMD_MAX_RANK];
    bool any = false;
    for (uint32_t d = 0; d < x->shape.rank && d < SPMD_MAX_RANK; d++) {
        pads[d] = (IrPadDim){0, dims[d] - x->shape.dims[d], 0};
        any = any || pads[d].hi != 0;
    }
    if (!any)
        return x;
    return spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, x->shape.dtype, 0), pads);
}

static IrInstr *
window_of(SpmdCtx *cx, IrInstr *padded, const Cluster *c)
{
    return spmd_emit_dynamic_slice(cx, padded, c->dus->operands + 2,
                                   c->dus->operands[1]->shape.dims);
}

/* Builds the moved nodes in the body for every cluster; reduces are left for later. */
static bool
build_inside(Motion *M, Cluster *cl, uint32_t n_cl, IrInstr *out, const IrShape *padded)
{
    SpmdCtx *cx = M->cx;
    IrInstr **work = NULL;
    uint32_t n_work = 0, cap_work = 0;
    bool ok = true;
#define AVAILABLE_USERS(x)                                                                         \
    for (uint32_t k_ = 0; k_ < n_users(&M->use, (x)) && ok; k_++) {                                \
        IrInstr *u_ = users_of(&M->use, (x))[k_];                                                  \
        bool all_ = marked(M, u_, M_MOVE) && !cl[0].in[u_->id];                                    \
        for (uint32_t o_ = 0; o_ < u_->n_operands && all_; o_++)                                   \
            all_ = u_->operands[o_]->id < M->n_in && cl[0].in[u_->operands[o_]->id];               \
        if (all_)                                                                                  \
            ok = push(&work, &n_work, &cap_work, u_);                                              \
    }
    for (uint32_t k = 0; k < M->n_newops && ok; k++)
        AVAILABLE_USERS(M->newops[k]);
    AVAILABLE_USERS(out);
    /* moved nodes without operands (iotas, array constants) start chains of their own;
     * pushed last first so they are built in program order */
    for (uint32_t k = M->comp->n_instrs; k-- > 0 && ok;) {
        IrInstr *x = M->comp->instrs[k];
        if (x->n_operands == 0 && x != out && marked(M, x, M_MOVE))
            ok = push(&work, &n_work, &cap_work, x);
    }
    while (n_work && ok) {
        IrInstr *i = work[--n_work];
        bool all = true;
        for (uint32_t c = 0; c < n_cl; c++)
            all = all && cl[c].in[i->id];
        if (all)
            continue;
        if (i->op == IR_OP_BROADCAST) {
            const int64_t *bd = NULL;
            uint32_t nb = ir_instr_ints_attr(i, IR_ATTR_DIMENSIONS, &bd);
            IrInstr *op = i->operands[0];
            int64_t pd[SPMD_MAX_RANK];
            for (uint32_t d = 0; d < op->shape.rank && d < SPMD_MAX_RANK; d++)
                pd[d] = d < nb ? padded->dims[bd[d]] : op->shape.dims[d];
            IrInstr *pop = pad_to(cx, cl[0].in[op->id], pd);
            IrShape s = dims_like(cx, i->shape.dtype, padded);
            IrInstr *b = clone_with(cx, i, &s, &pop, 1);
            for (uint32_t c = 0; c < n_cl; c++)
                cl[c].in[i->id] = window_of(cx, b, &cl[c]);
        } else if (i->op == IR_OP_IOTA || i->op == IR_OP_CONSTANT) {
            IrInstr *v;
            if (i->op == IR_OP_IOTA) {
                IrShape s = dims_like(cx, i->shape.dtype, padded);
                v = clone_with(cx, i, &s, NULL, 0);
            } else {
                v = pad_to(cx, clone_with(cx, i, &i->shape, NULL, 0), padded->dims);
            }
            for (uint32_t c = 0; c < n_cl; c++)
                cl[c].in[i->id] = window_of(cx, v, &cl[c]);
        } else if (i->op != IR_OP_REDUCE && ir_op_is_elementwise(i->op)) {
            IrInstr *ops[8];
            if (i->n_operands > 8) {
                ok = false;
                break;
            }
            for (uint32_t c = 0; c < n_cl; c++) {
                for (uint32_t o = 0; o < i->n_operands; o++)
                    ops[o] = cl[c].in[i->operands[o]->id];
                IrShape s = dims_like(cx, i->shape.dtype, &cl[c].dus->operands[1]->shape);
                cl[c].in[i->id] = clone_with(cx, i, &s, ops, i->n_operands);
            }
        }
        for (uint32_t c = 0; c < n_cl; c++)
            if (i->op != IR_OP_REDUCE && !cl[c].in[i->id])
                ok = false;
        AVAILABLE_USERS(i);
    }
#undef AVAILABLE_USERS
    free(work);
    return ok;
}

/* The reduce `r` over cluster `c`'s window, folded into `last` (the buffer so far). */
static IrInstr *
reduce_inside(Motion *M, const Cluster *c, IrInstr *r, IrInstr *last, const IrShape *padded,
              const IrShape *unpadded)
{
    SpmdCtx *cx = M->cx;
    IrInstr *op0 = c->in[r->operands[0]->id], *op1 = c->in[r->operands[1]->id];
    if (!op0 || !op1)
        return NULL;
    const int64_t *rd = NULL;
    uint32_t nr = ir_instr_ints_attr(r, IR_ATTR_DIMENSIONS, &rd);
    IrInstr *offs[SPMD_MAX_RANK];
    int64_t od[SPMD_MAX_RANK];
    uint32_t n_off = 0;
    bool accumulate = false;
    for (uint32_t d = 0; d < op0->shape.rank; d++) {
        if (listed_dim(rd, nr, d)) {
            if (r->operands[0]->shape.dims[d] != op0->shape.dims[d]) {
                accumulate = true;
                if (unpadded->dims[d] != padded->dims[d]) { /* mask the padding off */
                    IrShape is = dims_like(cx, IR_DT_S32, &op0->shape);
                    IrInstr *iota = spmd_emit_iota(cx, &is, d);
                    IrInstr *at = spmd_emit_broadcast(cx, c->dus->operands[2 + d], &is, NULL, 0);
                    IrInstr *lim = spmd_emit_broadcast(
                        cx, spmd_emit_constant_scalar(cx, IR_DT_S32, r->operands[0]->shape.dims[d]),
                        &is, NULL, 0);
                    IrInstr *in =
                        spmd_emit_compare(cx, spmd_emit_binary(cx, IR_OP_ADD, iota, at), lim, "LT");
                    IrShape os = ir_shape_clone(cx->arena, &op0->shape);
                    op0 = spmd_emit_select(cx, in, op0, spmd_emit_broadcast(cx, op1, &os, NULL, 0));
                }
            }
            continue;
        }
        od[n_off] = op0->shape.dims[d];
        offs[n_off++] = c->dus->operands[2 + d];
    }
    IrShape rs = ir_shape_make(cx->arena, r->shape.dtype, od, n_off);
    rs.layout = r->shape.layout;
    IrInstr *ops[2] = {op0, op1};
    IrInstr *o = clone_with(cx, r, &rs, ops, 2);
    if (o && accumulate) {
        const IrComputation *f = ir_instr_called(r, IR_ATTR_TO_APPLY);
        IrInstr *prev = spmd_emit_dynamic_slice(cx, last, offs, od);
        o = spmd_emit_binary(cx, f->root->op, o, prev);
    }
    if (o && !same_dims(&o->shape, &last->shape))
        o = spmd_emit_dus(cx, last, o, offs);
    return o;
}

/* Drops `start` and then every operand left without users (parameters, calls and
 * communication stay). Counts come from `u` and are kept in `cnt`. */
static bool
removable(const IrInstr *x)
{
    switch (x->op) {
    case IR_OP_CONSTANT:
    case IR_OP_GET_TUPLE_ELEMENT:
    case IR_OP_RESHAPE:
    case IR_OP_DYNAMIC_SLICE:
    case IR_OP_DYNAMIC_UPDATE_SLICE:
    case IR_OP_BROADCAST:
    case IR_OP_IOTA:
    case IR_OP_SLICE:
    case IR_OP_PARTITION_ID:
    case IR_OP_REDUCE:
    case IR_OP_TUPLE:
    case IR_OP_PAD:
        return true;
    default:
        return ir_op_is_elementwise(x->op) && x->op != IR_OP_MAP;
    }
}

static bool
remove_unused(Motion *M, uint32_t *cnt, const IrComputation *c, IrInstr *start)
{
    IrInstr **st = NULL;
    uint32_t n = 0, cap = 0;
    bool ok = push(&st, &n, &cap, start);
    while (n && ok) {
        IrInstr *x = st[--n];
        if (marked(M, x, M_DEAD) || x == c->root)
            continue;
        set_mark(M, x, M_DEAD);
        for (uint32_t o = 0; o < x->n_operands && ok; o++) {
            IrInstr *p = x->operands[o];
            if (p->id >= M->n_ids || marked(M, p, M_DEAD))
                continue;
            bool first = true; /* an operand used twice by x counts once */
            for (uint32_t q = 0; q < o; q++)
                first = first && x->operands[q] != p;
            if (first && cnt[p->id] > 0 && --cnt[p->id] == 0 && removable(p))
                ok = push(&st, &n, &cap, p);
        }
    }
    free(st);
    return ok;
}

/* Reorders `c` so operands precede users (stable otherwise), dropping M_DEAD instructions;
 * with `root_last` the root goes to the end. */
static bool
reorder(Motion *M, IrComputation *c, bool root_last)
{
    uint32_t n = c->n_instrs, w = 0;
    IrInstr **out = malloc((n ? n : 1) * sizeof(IrInstr *));
    IrInstr **st = NULL;
    uint32_t ns = 0, cap = 0;
    if (!out)
        return false;
    uint32_t ids = M->cx->out->next_instr_id;
    uint8_t *done = calloc(ids ? ids : 1, 1);
    bool ok = done != NULL;
    for (uint32_t pass = 0; pass < 2 && ok; pass++)
        for (uint32_t k = 0; k < n && ok; k++) {
            IrInstr *x = c->instrs[k];
            bool is_last = root_last && x == c->root;
            if (is_last != (pass == 1))
                continue;
            if (done[x->id] || marked(M, x, M_DEAD))
                continue;
            ok = push(&st, &ns, &cap, x);
            while (ns && ok) {
                IrInstr *t = st[ns - 1];
                if (done[t->id]) {
                    ns--;
                    continue;
                }
                IrInstr *need = NULL;
                for (uint32_t o = 0; o < t->n_operands && !need; o++)
                    if (!done[t->operands[o]->id])
                        need = t->operands[o];
                if (need) {
                    ok = push(&st, &ns, &cap, need);
                } else {
                    done[t->id] = 1;
                    out[w++] = t;
                    ns--;
                }
            }
        }
    if (ok) {
        memcpy(c->instrs, out, w * sizeof(IrInstr *));
        c->n_instrs = w;
    }
    free(done);
    free(st);
    free(out);
    return ok;
}

static bool
grow_marks(Motion *M)
{
    uint32_t n = M->cx->out->next_instr_id;
    if (n <= M->n_ids)
        return true;
    uint8_t *m = realloc(M->mark, n);
    if (!m)
        return false;
    memset(m + M->n_ids, 0, n - M->n_ids);
    M->mark = m;
    M->n_ids = n;
    return true;
}

/* Users counted per id over `c` (an instruction using x twice counts once). */
static uint32_t *
count_users(const IrComputation *c, uint32_t n_ids)
{
    uint32_t *cnt = calloc(n_ids ? n_ids : 1, sizeof(uint32_t));
    if (!cnt)
        return NULL;
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        const IrInstr *x = c->instrs[k];
        for (uint32_t o = 0; o < x->n_operands; o++) {
            bool first = true;
            for (uint32_t q = 0; q < o; q++)
                first = first && x->operands[q] != x->operands[o];
            if (first && x->operands[o]->id < n_ids)
                cnt[x->operands[o]->id]++;
        }
    }
    return cnt;
}

static bool
in_comp(const IrComputation *c, const IrInstr *x)
{
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (c->instrs[k] == x)
            return true;
    return false;
}

/* Puts computation `f` before `user` in the module's list (callees precede callers). */
static void
callee_first(IrModule *m, const IrComputation *f, const IrComputation *user)
{
    uint32_t fi = m->n_comps, ui = m->n_comps;
    for (uint32_t k = 0; k < m->n_comps; k++) {
        if (m->comps[k] == f)
            fi = k;
        if (m->comps[k] == user)
            ui = k;
    }
    if (fi == m->n_comps || ui == m->n_comps || fi < ui)
        return;
    IrComputation *moved = m->comps[fi];
    memmove(m->comps + ui + 1, m->comps + ui, (fi - ui) * sizeof(IrComputation *));
    m->comps[ui] = moved;
}

/* 1: moved; 0: the loop does not qualify (nothing changed); -1: out of memory. */
static int
move_into_loop(SpmdCtx *cx, IrComputation *comp, IrInstr *loop)
{
    if (!in_comp(comp, loop) || loop->n_operands != 1 || loop->shape.n_elems != 5)
        return 0;
    IrInstr *init = loop->operands[0];
    IrComputation *body = ir_instr_called(loop, IR_ATTR_BODY);
    IrComputation *cond = ir_instr_called(loop, IR_ATTR_CONDITION);
    if (init->op != IR_OP_TUPLE || init->n_operands != 5 || !body || !cond || !body->root ||
        body->root->op != IR_OP_TUPLE || body->root->n_operands != 5 ||
        body->root->operands[2]->op != IR_OP_DYNAMIC_UPDATE_SLICE ||
        !ir_computation_param(body, 0) || !ir_computation_param(cond, 0))
        return 0;
    Motion M = {.cx = cx, .comp = comp, .body = body};
    int res = 0;
    Cluster *cl = NULL;
    uint32_t n_cl = 0;
    uint32_t *cnt = NULL;
    M.n_ids = cx->out->next_instr_id;
    M.mark = calloc(M.n_ids ? M.n_ids : 1, 1);
    if (!M.mark || !use_idx_build(&M.use, comp, M.n_ids)) {
        res = -1;
        goto done;
    }
    if (n_users(&M.use, loop) != 1)
        goto done;
    IrInstr *gte = users_of(&M.use, loop)[0];
    int64_t index = -1;
    if (gte->op != IR_OP_GET_TUPLE_ELEMENT || !ir_instr_int_attr(gte, IR_ATTR_INDEX, &index) ||
        index != 2 || ir_shape_is_tuple(&gte->shape) || gte->shape.rank > SPMD_MAX_RANK)
        goto done;
    IrInstr *out = gte;
    if (n_users(&M.use, gte) == 1 && users_of(&M.use, gte)[0]->op == IR_OP_SLICE)
        out = users_of(&M.use, gte)[0];
    const IrShape padded = gte->shape, unpadded = out->shape;
    for (IrInstr *d = body->root->operands[2]; d->op == IR_OP_DYNAMIC_UPDATE_SLICE;
         d = d->operands[0])
        if (d->n_operands != 2 + padded.rank || d->operands[1]->shape.rank != padded.rank)
            goto done;
    res = collect(&M, out);
    if (res != 1)
        goto done;

    IrComputation *saved_comp = cx->comp;
    const IrInstr *saved_visiting = cx->visiting;
    cx->comp = comp;
    cx->visiting = M.reduces[0]->derived_from;
    /* reduce-shaped buffers: kept dims padded like the loop result */
    uint32_t first_buf = M.n_newops;
    for (uint32_t r = 0; r < M.n_reduces && res == 1; r++) {
        IrInstr *red = M.reduces[r];
        const int64_t *rd = NULL;
        uint32_t nr = ir_instr_ints_attr(red, IR_ATTR_DIMENSIONS, &rd);
        int64_t bd[SPMD_MAX_RANK];
        uint32_t nb = 0;
        for (uint32_t d = 0; d < padded.rank; d++)
            if (!listed_dim(rd, nr, d))
                bd[nb++] = padded.dims[d];
        IrShape bs = ir_shape_make(cx->arena, red->shape.dtype, bd, nb);
        IrInstr *buf = spmd_emit_zero_like(cx, &bs);
        if (!buf || !push(&M.newops, &M.n_newops, &M.cap_newops, buf))
            res = -1;
    }
    IrInstr *sub = res == 1 ? spmd_emit_tuple(cx, M.newops, M.n_newops) : NULL;
    if (!sub)
        res = -1;
    /* the loop state's element 2 becomes the sub-tuple */
    if (res == 1) {
        IrShape ts = loop->shape;
        ts.elems = SL_DUP_ARRAY(cx->arena, IrShape, loop->shape.elems, 5);
        if (!ts.elems) {
            res = -1;
        } else {
            ts.elems[2] = sub->shape;
            init->operands[2] = sub;
            init->shape = ts;
            loop->shape = ts;
            ir_computation_param(cond, 0)->shape = ts;
            ir_computation_param(body, 0)->shape = ts;
            body->root->shape = ts;
        }
    }
    if (res == 1 && !grow_marks(&M))
        res = -1;
    M.n_in = M.n_ids;
    /* clusters: one per dynamic-update-slice of the result chain, outermost first */
    cx->comp = body;
    cx->visiting = loop->derived_from;
    for (IrInstr *d = body->root->operands[2]; res == 1 && d->op == IR_OP_DYNAMIC_UPDATE_SLICE;
         d = d->operands[0]) {
        Cluster *ncl = realloc(cl, (n_cl + 1) * sizeof(Cluster));
        if (!ncl) {
            res = -1;
            break;
        }
        cl = ncl;
        cl[n_cl].dus = d;
        cl[n_cl].in = calloc(M.n_in, sizeof(IrInstr *));
        if (!cl[n_cl++].in) {
            res = -1;
            break;
        }
        cl[n_cl - 1].in[out->id] = d->operands[1];
    }
    IrInstr *inner = NULL;
    if (res == 1) {
        inner = spmd_emit_gte(cx, ir_computation_param(body, 0), 2);
        for (uint32_t k = 0; k < M.n_newops && inner; k++) {
            IrInstr *g = spmd_emit_gte(cx, inner, k);
            if (!g || M.newops[k]->id >= M.n_in)
                inner = NULL;
            for (uint32_t c = 0; c < n_cl && inner; c++)
                cl[c].in[M.newops[k]->id] = g;
        }
        if (!inner || !build_inside(&M, cl, n_cl, out, &padded))
            res = -1;
    }
    IrInstr **outs = res == 1 ? calloc(M.n_newops, sizeof(IrInstr *)) : NULL;
    if (res == 1 && !outs)
        res = -1;
    for (uint32_t k = 0; k < M.n_newops && res == 1; k++)
        outs[k] = cl[0].in[M.newops[k]->id];
    for (uint32_t r = 0; r < M.n_reduces && res == 1; r++) {
        IrInstr *last = outs[first_buf + r];
        for (uint32_t c = 0; c < n_cl && last; c++)
            last = reduce_inside(&M, &cl[c], M.reduces[r], last, &padded, &unpadded);
        outs[first_buf + r] = last;
        if (!last)
            res = -1;
    }
    for (uint32_t r = 0; r < M.n_reduces && res == 1; r++)
        callee_first(cx->out, ir_instr_called(M.reduces[r], IR_ATTR_TO_APPLY), body);
    IrInstr *new_out = res == 1 ? spmd_emit_tuple(cx, outs, M.n_newops) : NULL;
    free(outs);
    if (res == 1 && !new_out)
        res = -1;
    IrInstr *old_dus = body->root->operands[2];
    if (res == 1) {
        body->root->operands[2] = new_out;
        /* the outside: the reduces read the loop's buffers */
        cx->comp = comp;
        cx->visiting = M.reduces[0]->derived_from;
        IrInstr *g = spmd_emit_gte(cx, loop, 2);
        for (uint32_t r = 0; r < M.n_reduces && g && res == 1; r++) {
            IrInstr *red = M.reduces[r];
            IrInstr *v = spmd_emit_gte(cx, g, first_buf + r);
            if (v && !same_dims(&v->shape, &red->shape)) {
                int64_t start[SPMD_MAX_RANK] = {0};
                v = spmd_emit_slice(cx, v, start, red->shape.dims);
            }
            if (!v) {
                res = -1;
                break;
            }
            for (uint32_t k = 0; k < comp->n_instrs; k++)
                for (uint32_t o = 0; o < comp->instrs[k]->n_operands; o++)
                    if (comp->instrs[k]->operands[o] == red)
                        comp->instrs[k]->operands[o] = v;
            if (comp->root == red)
                comp->root = v;
            for (uint32_t k = 0; k < cx->n_values; k++)
                if (cx->values[k].hlo == red)
                    cx->values[k].hlo = v;
        }
        if (!g)
            res = -1;
    }
    cx->comp = saved_comp;
    cx->visiting = saved_visiting;
    if (res != 1 || !grow_marks(&M)) {
        res = -1;
        goto done;
    }
    /* drop what nothing reads any more, then restore the operand order */
    cnt = count_users(body, M.n_ids);
    if (!cnt || !remove_unused(&M, cnt, body, old_dus) || !reorder(&M, body, true)) {
        res = -1;
        goto done;
    }
    free(cnt);
    cnt = count_users(comp, M.n_ids);
    for (uint32_t r = 0; r < M.n_reduces && cnt && res == 1; r++)
        if (!remove_unused(&M, cnt, comp, M.reduces[r]))
            res = -1;
    if (!cnt || res != 1 || !reorder(&M, comp, false))
        res = -1;
done:
    for (uint32_t c = 0; c < n_cl; c++)
        free(cl[c].in);
    free(cl);
    free(cnt);
    free(M.mark);
    free(M.newops);
    free(M.reduces);
    free(M.found);
    free(M.stack);
    use_idx_fini(&M.use);
    return res;
}

SlStatus
spmd_windowed_code_motion(SpmdCtx *cx, IrComputation *oc, SlError *err)
{
    for (uint32_t k = 0; k < cx->n_wloops; k++) {
        SpmdWindowedLoop *w = &cx->wloops[k];
        if (w->comp != oc || !w->output_dus)
            continue;
        int r = move_into_loop(cx, oc, w->loop);
        if (r < 0 && sl_arena_failed(cx->arena))
            return spmd_nomem(cx, err);
        if (r < 0)
            return spmd_fail(cx, err, SL_ERR_INTERNAL,
                             "moving the consumers of windowed loop %%%s into it failed",
                             sl_sym_cstr(w->loop->name));
    }
    return SL_OK;
}
