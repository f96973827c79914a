/* handle_ragged_dot.c - ragged-dot and the block-scaled (MX) dot custom call (gspmd.md D.21,
 * §E; seeds/000 HandleRaggedDot; issue 4 item 5).
 * Owns: HandleRaggedDot (the three ragged modes: non-contracting, contracting, batch) and the
 * `__op$block_scaled_dot` entry into the dot engine with its create-sharded-scaled-dot
 * function. Does not own: the dot strategies (handle_dot.c), collectives (collectives.c).
 * Upstream partitions a ragged dot without resharding: its operands arrive in the shardings
 * the sharding rule made consistent, contracting dims sharded on the lhs are zero-padded and
 * summed with an all-reduce afterwards, and a ragged batch dim turns the op into a plain dot.
 * We check that consistency first (shard counts per dimension factor, replication where the
 * rule needs it) and replicate when it does not hold, so the result stays correct.
 * Invariant: every choice emits a `decision` event. */
#include "spmd/dot_int.h"

#include <string.h>

/* ---- ragged-dot ------------------------------------------------------------------------- */

typedef enum RaggedMode { RAGGED_NON_CONTRACTING, RAGGED_CONTRACTING, RAGGED_BATCH } RaggedMode;

static const char *const k_ragged_mode[] = {"non_contracting", "contracting", "batch"};

/* The dimension numbers of one ragged dot. */
typedef struct RaggedDims {
    const int64_t *lb, *rb, *lc, *rc, *rg;
    uint32_t nb, nc, nrg;
    int64_t ragged; /* the lhs ragged dim */
    RaggedMode mode;
} RaggedDims;

static bool
has(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t k = 0; k < n; k++)
        if (v[k] == x)
            return true;
    return false;
}

/* Reads and validates the dimension numbers; false when they are not a supported form. */
static bool
ragged_dims_of(const IrInstr *hlo, RaggedDims *d)
{
    const int64_t *lr;
    memset(d, 0, sizeof(*d));
    uint32_t nrb = ir_instr_ints_attr(hlo, IR_ATTR_RHS_BATCH_DIMS, &d->rb);
    uint32_t nrc = ir_instr_ints_attr(hlo, IR_ATTR_RHS_CONTRACTING_DIMS, &d->rc);
    d->nb = ir_instr_ints_attr(hlo, IR_ATTR_LHS_BATCH_DIMS, &d->lb);
    d->nc = ir_instr_ints_attr(hlo, IR_ATTR_LHS_CONTRACTING_DIMS, &d->lc);
    d->nrg = ir_instr_ints_attr(hlo, IR_ATTR_RHS_GROUP_DIMS, &d->rg);
    if (ir_instr_ints_attr(hlo, IR_ATTR_LHS_RAGGED_DIMS, &lr) != 1 || d->nb != nrb ||
        d->nc != nrc || hlo->n_operands != 3 || hlo->operands[0]->shape.rank > SPMD_MAX_RANK ||
        hlo->operands[1]->shape.rank > SPMD_MAX_RANK)
        return false;
    d->ragged = lr[0];
    d->mode = has(d->lc, d->nc, d->ragged)   ? RAGGED_CONTRACTING
              : has(d->lb, d->nb, d->ragged) ? RAGGED_BATCH
                                             : RAGGED_NON_CONTRACTING;
    return d->mode == RAGGED_NON_CONTRACTING ? d->nrg == 1 : d->nrg == 0;
}

static int64_t
shards(const ShdSharding *s, int64_t dim)
{
    return shd_is_tiled(s) && dim >= 0 ? shd_dim_shards(s, (uint32_t)dim) : 1;
}

/* group_sizes: batch dims, then (non-contracting mode) the lhs free dims before the ragged
 * dim or (contracting mode) the contracting dims before it, then the group dim, unsharded.
 * A ragged batch dim leaves group_sizes unused. */
static bool
group_sizes_consistent(const RaggedDims *d, const IrInstr *hlo, const ShdSharding *l,
                       const ShdSharding *g)
{
    if (d->mode == RAGGED_BATCH)
        return true;
    int64_t want[SPMD_MAX_RANK + 1];
    uint32_t n = 0;
    for (uint32_t k = 0; k < d->nb; k++)
        want[n++] = shards(l, d->lb[k]);
    for (uint32_t i = 0; d->mode == RAGGED_NON_CONTRACTING && i < d->ragged; i++)
        if (!has(d->lb, d->nb, i) && !has(d->lc, d->nc, i))
            want[n++] = shards(l, i);
    for (uint32_t k = 0; d->mode == RAGGED_CONTRACTING && k < d->nc && d->lc[k] != d->ragged; k++)
        want[n++] = shards(l, d->lc[k]);
    want[n++] = 1;
    if (hlo->operands[2]->shape.rank != n)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (shards(g, i) != want[i])
            return false;
    return true;
}

/* The sharding rule's factors, checked on shard counts: batch dims alike on lhs, rhs and the
 * output; free dims alike on their operand and the output; contracting dims alike on both
 * operands; a non-batch ragged dim, the rhs group dim and the output group dim unsharded. */
static bool
ragged_consistent(const RaggedDims *d, const IrInstr *hlo, const ShdSharding *l,
                  const ShdSharding *r, const ShdSharding *o)
{
    int64_t out = d->mode == RAGGED_CONTRACTING ? 1 : 0;
    if ((out == 1 && shards(o, 0) != 1) ||
        (d->mode != RAGGED_BATCH && shards(l, d->ragged) != 1) ||
        (d->nrg && shards(r, d->rg[0]) != 1))
        return false;
    for (uint32_t k = 0; k < d->nb; k++, out++)
        if (shards(l, d->lb[k]) != shards(r, d->rb[k]) || shards(l, d->lb[k]) != shards(o, out))
            return false;
    for (uint32_t i = 0; i < hlo->operands[0]->shape.rank; i++)
        if (!has(d->lb, d->nb, i) && !has(d->lc, d->nc, i) && shards(l, i) != shards(o, out++))
            return false;
    for (uint32_t i = 0; i < hlo->operands[1]->shape.rank; i++)
        if (!has(d->rb, d->nb, i) && !has(d->rc, d->nc, i) && !has(d->rg, d->nrg, i) &&
            shards(r, i) != shards(o, out++))
            return false;
    for (uint32_t k = 0; k < d->nc; k++)
        if (shards(l, d->lc[k]) != shards(r, d->rc[k]))
            return false;
    return out == (int64_t)hlo->shape.rank;
}

/* PadWithZeroOnSpecifiedDims: zeros over the uneven tails of the contracting dims only. */
static IrInstr *
pad_contracting(SpmdCtx *cx, const SpmdValue *v, const int64_t *dims, uint32_t n)
{
    uint64_t skip = 0;
    for (uint32_t i = 0; i < v->base_shape->rank && i < 64; i++)
        if (!has(dims, n, i))
            skip |= (uint64_t)1 << i;
    return spmd_pad_with_value(cx, v, NULL, skip);
}

/* A plain dot with the ragged dot's dot dimension numbers (ragged batch dim). */
static IrInstr *
emit_plain_dot(SpmdCtx *cx, const IrInstr *hlo, const IrShape *shape, IrInstr *l, IrInstr *r)
{
    IrInstr *ops[2] = {l, r};
    IrInstr *i = l && r ? ir_instr_new(cx->out, IR_OP_DOT, shape, ops, 2) : NULL;
    for (uint32_t k = 0; i && k < hlo->n_attrs; k++) {
        IrAttrKey key = hlo->attrs[k].key;
        if (key == IR_ATTR_SHARDING || key == IR_ATTR_LHS_RAGGED_DIMS ||
            key == IR_ATTR_RHS_GROUP_DIMS)
            continue;
        IrAttr *a = ir_instr_add_attr(cx->out, i, key);
        if (!a)
            return NULL;
        *a = hlo->attrs[k];
    }
    return i ? spmd_emit(cx, i, sl_sym_cstr(hlo->name)) : NULL;
}

static void
ragged_decide(SpmdCtx *cx, const IrInstr *hlo, const char *strategy, const char *reason,
              RaggedMode mode, int64_t n_sharded_contracting)
{
    if (!cx->trace->ops->decision)
        return;
    static const char *const alts[] = {"local_ragged_dot", "replicate"};
    TraceKV nums[] = {
        {"ragged_mode", (double)mode, k_ragged_mode[mode]},
        {"sharded_lhs_contracting_dims", (double)n_sharded_contracting, NULL},
    };
    TraceDecision d = {hlo, "ragged-dot", strategy, reason, alts, SL_COUNTOF(alts),
                       nums, SL_COUNTOF(nums)};
    cx->trace->ops->decision(cx->trace, &d);
}

/* The local op on consistent operands, then the all-reduce over sharded lhs contracting dims. */
static SlStatus
ragged_local(SpmdCtx *cx, const IrInstr *hlo, const RaggedDims *d, SpmdValue l, SpmdValue r,
             const SpmdValue *g, const ShdSharding *s, SlError *err)
{
    int64_t sharded[SPMD_MAX_RANK];
    uint32_t n = 0;
    for (uint32_t k = 0; k < d->nc; k++)
        if (shards(l.sharding, d->lc[k]) > 1)
            sharded[n++] = d->lc[k];
    ragged_decide(cx, hlo, d->mode == RAGGED_BATCH ? "local_dot" : "local_ragged_dot",
                  d->mode == RAGGED_BATCH
                      ? "the ragged dim is a batch dim: each partition's groups are whole, so a "
                        "plain dot of the local operands computes its piece"
                      : "the operand shardings agree with the ragged dot's dimension roles: "
                        "each partition runs the ragged dot on its local pieces",
                  d->mode, n);
    if (n) {
        l.hlo = pad_contracting(cx, &l, d->lc, d->nc);
        r.hlo = pad_contracting(cx, &r, d->rc, d->nc);
    }
    IrShape pshape = spmd_local_shape(cx, &hlo->shape, s);
    IrInstr *ops[3] = {l.hlo, r.hlo, g->hlo};
    IrInstr *x = d->mode == RAGGED_BATCH ? emit_plain_dot(cx, hlo, &pshape, l.hlo, r.hlo)
                 : l.hlo && r.hlo        ? spmd_emit_clone(cx, hlo, &pshape, ops, 3)
                                         : NULL;
    if (x && n) {
        const char *saved = cx->coll_cause;
        cx->coll_cause = "ragged-dot";
        x = spmd_all_reduce_along_dims(cx, cx->state, x, l.sharding, sharded, n,
                                       spmd_reducer(cx, SPMD_RED_ADD, x->shape.dtype));
        cx->coll_cause = saved;
    }
    if (!x)
        return spmd_nomem(cx, err);
    SpmdValue v = spmd_value(cx, x, &hlo->shape, s);
    spmd_set_result(cx, hlo, &v);
    return SL_OK;
}

SlStatus
spmd_handle_ragged_dot(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    RaggedDims d;
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const SpmdValue *l = NULL, *r = NULL, *g = NULL;
    if (hlo->n_operands == 3) {
        l = spmd_get_value(cx, hlo->operands[0]);
        r = spmd_get_value(cx, hlo->operands[1]);
        g = spmd_get_value(cx, hlo->operands[2]);
    }
    if (!ragged_dims_of(hlo, &d) || !s || !l || !r || !g) {
        spmd_warn(cx, TRACE_WARN_OTHER, "ragged-dot with unsupported dimension numbers: partitioned as replicated");
        return spmd_handle_default(cx, hlo, err);
    }
    int64_t dev;
    if (shd_unique_device(s, &dev) || shd_is_manual(s) || s->kind == SHD_TUPLE ||
        shd_is_manual_subgroup(s) || shd_is_manual_subgroup(l->sharding) ||
        shd_is_manual_subgroup(r->sharding) ||
        !ragged_consistent(&d, hlo, l->sharding, r->sharding, s) ||
        !group_sizes_consistent(&d, hlo, l->sharding, g->sharding)) {
        ragged_decide(cx, hlo, "replicate",
                      "the operand shardings do not agree with the ragged dot's dimension "
                      "roles (or the op is manual or on one device): run it on full operands",
                      d.mode, 0);
        return spmd_handle_default(cx, hlo, err);
    }
    SpmdValue lv = *l, rv = *r;
    if (lv.hlo == rv.hlo && !(rv.hlo = spmd_emit_copy(cx, rv.hlo)))
        return spmd_nomem(cx, err);
    return ragged_local(cx, hlo, &d, lv, rv, g, s, err);
}

/* ---- block-scaled dot ------------------------------------------------------------------- */

/* The roles of `__op$block_scaled_dot(lhs, rhs, lhs_scale, rhs_scale)`: the last dim
 * contracts, dim 0 is the batch dim at rank 3; the scales share their operands' roles. */
static bool
scaled_dims_of(SpmdCtx *cx, const IrInstr *hlo, DotDims *d)
{
    memset(d, 0, sizeof(*d));
    if (hlo->n_operands != 4 || ir_shape_is_tuple(&hlo->shape))
        return false;
    uint32_t rank = hlo->operands[0]->shape.rank;
    if ((rank != 2 && rank != 3) || hlo->operands[1]->shape.rank != rank ||
        hlo->operands[2]->shape.rank != rank || hlo->operands[3]->shape.rank != rank ||
        hlo->shape.rank != rank)
        return false;
    for (int r = 0; r < DOT_ROLE_COUNT; r++)
        if (!(d->role[r] = SL_NEW_ARRAY(cx->arena, DotDimMap, 2)))
            return false;
    d->rank[0] = d->rank[1] = d->rank[2] = rank;
    int64_t b = rank == 3 ? 1 : 0, last = (int64_t)rank - 1;
    if (b)
        d->role[DOT_BATCH][d->n[DOT_BATCH]++] = (DotDimMap){0, 0, 0};
    d->role[DOT_CONTRACTING][d->n[DOT_CONTRACTING]++] = (DotDimMap){last, last, -1};
    d->role[DOT_LHS_NC][d->n[DOT_LHS_NC]++] = (DotDimMap){b, -1, b};
    d->role[DOT_RHS_NC][d->n[DOT_RHS_NC]++] = (DotDimMap){-1, b, b + 1};
    return true;
}

/* create-sharded-scaled-dot: the local block-scaled dot (shape from the local operands). */
static IrInstr *
create_scaled_dot(SpmdCtx *cx, const DotJob *job, IrInstr *lhs, IrInstr *rhs,
                  IrInstr *lhs_scale, IrInstr *rhs_scale)
{
    const DotDims *d = &job->dims;
    int64_t dims[3];
    uint32_t n = 0;
    if (d->n[DOT_BATCH])
        dims[n++] = lhs->shape.dims[d->role[DOT_BATCH][0].lhs];
    dims[n++] = lhs->shape.dims[d->role[DOT_LHS_NC][0].lhs];
    dims[n++] = rhs->shape.dims[d->role[DOT_RHS_NC][0].rhs];
    IrShape s = ir_shape_with_dims(cx->arena, &job->hlo->shape, dims);
    IrInstr *ops[4] = {lhs, rhs, lhs_scale, rhs_scale};
    return spmd_emit_clone(cx, job->hlo, &s, ops, 4);
}

SlStatus
spmd_handle_block_scaled_dot(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    DotJob job;
    memset(&job, 0, sizeof(job));
    job.hlo = hlo;
    job.handler = "block_scaled_dot";
    job.create_scaled = create_scaled_dot;
    if (!scaled_dims_of(cx, hlo, &job.dims)) {
        if (sl_arena_failed(cx->arena))
            return spmd_nomem(cx, err);
        spmd_dot_decide(cx, &job, "replicate",
                        "a block-scaled dot needs 4 operands of rank 2 or 3: run it on full "
                        "operands",
                        NULL, 0, NULL, 0);
        return spmd_handle_default(cx, hlo, err);
    }
    return spmd_dot_helper(cx, &job, err);
}
