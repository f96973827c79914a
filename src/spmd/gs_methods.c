/* gs_methods.c - the gather/scatter partitioning methods (gspmd.md F.3, F.4; seed:
 * PartitionGather/PartitionScatter's index-parallel, explicit-batch, operand-passthrough,
 * trivially-sliced-operand and index-passthrough cases). Owns: each method's applicability
 * test and its emission: the parallel methods' output sharding, the operand-passthrough
 * window, the trivially sliced operand's index masking and combining all-reduce, the index
 * passthrough with the scatter's identity operand. Does not own: their order or cost
 * (handle_gather_scatter.c), the shared level helpers (gs_level.c).
 * Invariant: each method sets *out = NULL when it does not apply, and checks that before it
 * emits anything. */
#include "spmd/gs_int.h"

/* ---- the methods (each: *out = NULL when it does not apply, checked before emitting) ---- */

/* Output (scatter: updates) sharding of the parallel methods: the indices' sharding on every
 * index dim but the index vector dim (GatherOutputShardingFromIndex), refined where compatible
 * by the operand's passthrough dims with its parallel dims replicated, so the recursion can
 * work on the operand as it is instead of aligning groups. */
static const ShdSharding *
parallel_window(SpmdCtx *cx, const Gs *p, const ShdSharding *os, const ShdSharding *is,
                const GsPairs *pd, uint32_t wr)
{
    int64_t id[GS_R], od[GS_R];
    uint32_t n = 0;
    for (uint32_t d = 0; d < p->idx.base_shape->rank && n < GS_R; d++) {
        int64_t o = (int64_t)d == p->dn.ivd ? -1 : spmd_gs_out_dim_of_idx(&p->dn, d, wr);
        if (o >= 0) {
            id[n] = d;
            od[n++] = o;
        }
    }
    const ShdSharding *ws = spmd_gs_prop_dims(cx, is, id, od, n, wr);
    if (!ws || !shd_is_tiled(ws))
        return spmd_gs_prop_dims(cx, is, pd->idx, pd->out, pd->n, wr);
    GsPairs pp;
    spmd_gs_operand_passthrough_dims(p, &pp);
    const ShdSharding *po =
        pp.n ? shd_partially_replicate_dims(cx->arena, os, pd->op, pd->n) : NULL;
    const ShdSharding *pass =
        po && shd_is_tiled(po) ? spmd_gs_prop_dims(cx, po, pp.op, pp.out, pp.n, wr) : NULL;
    const ShdSharding *m =
        pass && shd_is_tiled(pass) && spmd_gs_tiles_on(pass, pp.out, pp.n) > 1
            ? shd_merge_if_compatible(cx->arena, pass, ws, shd_num_tiles(ws) + 1)
            : NULL;
    return m && shd_is_tiled(m) ? m : ws;
}

/* Explicit-batch and index-parallel: operand and indices sharded alike on the parallel dims,
 * indices shifted by the operand offsets (index-parallel only), grouped, recursed. */
SlStatus
spmd_gs_method_parallel(SpmdCtx *cx, const Gs *p, const GsPairs *pd, bool need_offset,
                        IrInstr **out, SlError *err)
{
    const ShdSharding *os = NULL, *is = NULL;
    *out = NULL;
    if (!spmd_gs_parallel_targets(cx, p, pd, &os, &is))
        return SL_OK;
    /* The offsets are one vector along index_vector_dim, broadcast over the local indices:
     * that dim must be whole on every device (it is never a parallel dim). */
    int64_t ivd = p->dn.ivd;
    if (need_offset && ivd < (int64_t)p->idx.base_shape->rank &&
        shd_dim_shards(is, (uint32_t)ivd) > 1 &&
        !(is = shd_partially_replicate_dims(cx->arena, is, &ivd, 1)))
        return SL_OK;
    uint32_t wr = spmd_gs_window_rank(p);
    const ShdSharding *ws = parallel_window(cx, p, os, is, pd, wr);
    ShdGrouped gi = shd_group_on_dims(cx->arena, is, pd->idx, pd->n, NULL);
    if (!ws || !shd_is_tiled(ws) || !gi.inner)
        return SL_OK;
    ShdGrouped g0 = shd_group_on_dims(cx->arena, os, pd->op, pd->n, NULL);
    ShdGrouped gop = spmd_gs_align(cx, &g0, &gi);
    ShdGrouped w0 = shd_group_on_dims(cx->arena, ws, pd->out, pd->n, NULL);
    ShdGrouped gw = spmd_gs_align(cx, &w0, &gi);
    if (!spmd_gs_grouped_ok(&gop, &gi) || !spmd_gs_grouped_ok(&gw, &gi))
        return SL_OK;
    Gs q = *p;
    q.ops = spmd_gs_values_copy(cx, p->ops, p->n);
    q.upd = p->is_scatter ? spmd_gs_values_copy(cx, p->upd, p->n) : NULL;
    if (!q.ops || (p->is_scatter && !q.upd))
        return spmd_nomem(cx, err);
    SlStatus st = SL_OK;
    for (uint32_t k = 0; k < p->n && st == SL_OK; k++)
        st = spmd_gs_reshard(cx, &p->ops[k], os, NULL, &q.ops[k], err);
    for (uint32_t k = 0; p->is_scatter && k < p->n && st == SL_OK; k++)
        st = spmd_gs_reshard(cx, &p->upd[k], ws, NULL, &q.upd[k], err);
    if (st == SL_OK)
        st = spmd_gs_reshard_indices(cx, p, is, &q.idx, err);
    if (st == SL_OK && need_offset)
        st = spmd_gs_subtract_offsets(cx, &q, &q.ops[0], pd->op, pd->n, &q.idx, err);
    if (st != SL_OK)
        return st;
    const ShdGrouped *gout = p->is_scatter ? &gop : &gw;
    IrInstr *res = NULL;
    st = spmd_gs_recurse(cx, &q, &gop, &gi, &gw, gout, &q.idx, p->slice, &res, err);
    if (st != SL_OK)
        return st;
    return spmd_gs_finish_level(cx, p, res, shd_ungroup(cx->arena, gout), out, err);
}

/* The output (scatter: updates) sharding merged into the operand passthrough one `ws` where
 * compatible, so its other sharded dims are partitioned by the recursion instead of resharded
 * after; `ws` itself otherwise. */
const ShdSharding *
spmd_gs_refine_window(SpmdCtx *cx, const Gs *p, const ShdSharding *ws)
{
    const ShdSharding *ref = p->is_scatter ? p->upd[0].sharding : p->out_s;
    const ShdSharding *m = shd_is_tiled(ref) && shd_is_tiled(ws)
                               ? shd_merge_if_compatible(cx->arena, ref, ws, shd_num_tiles(ws) + 1)
                               : NULL;
    return m && shd_is_tiled(m) ? m : ws;
}

/* Operand passthrough: the output (scatter: updates) follows the operand on the dims the
 * slice spans whole; indices grouped on their replication or replicated per group. */
SlStatus
spmd_gs_method_operand_passthrough(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err)
{
    const ShdSharding *os = p->ops[0].sharding;
    GsPairs pp;
    *out = NULL;
    spmd_gs_operand_passthrough_dims(p, &pp);
    if (!shd_is_tiled(os) || pp.n == 0)
        return SL_OK;
    uint32_t wr = spmd_gs_window_rank(p);
    const ShdSharding *ws = spmd_gs_prop_dims(cx, os, pp.op, pp.out, pp.n, wr);
    if (!ws || !shd_is_tiled(ws))
        return SL_OK;
    int64_t wdims[GS_R], prio[GS_R], *slice = SL_DUP_ARRAY(cx->arena, int64_t, p->slice,
                                                            p->ops[0].base_shape->rank);
    uint32_t nw = 0, np = spmd_gs_index_prio(p, prio);
    for (uint32_t d = 0; d < wr; d++)
        if (shd_dim_shards(ws, d) > 1)
            wdims[nw++] = d;
    for (uint32_t i = 0; slice && i < pp.n; i++)
        slice[pp.op[i]] = p->ops[0].hlo->shape.dims[pp.op[i]];
    ws = spmd_gs_refine_window(cx, p, ws);
    ShdGrouped gw = shd_group_on_dims(cx->arena, ws, wdims, nw, NULL);
    ShdGrouped g0 = shd_group_on_dims(cx->arena, os, pp.op, pp.n, NULL);
    ShdGrouped gop = spmd_gs_align(cx, &g0, &gw);
    ShdGrouped i0 = spmd_gs_group_on_replicated(cx, p->idx.sharding,
                                                spmd_gs_tiles_on(os, pp.op, pp.n),
                                                shd_device_count(os), p->idx.base_shape->rank,
                                                prio, np);
    ShdGrouped gi = spmd_gs_align(cx, &i0, &gw);
    if (!slice || !gw.inner || !spmd_gs_grouped_ok(&gop, &gw) || !spmd_gs_grouped_ok(&gi, &gw))
        return SL_OK;
    const ShdGrouped *gout = p->is_scatter ? &gop : &gw;
    IrInstr *res = NULL;
    SlStatus st = spmd_gs_recurse(cx, p, &gop, &gi, &gw, gout, &p->idx, slice, &res, err);
    if (st != SL_OK)
        return st;
    return spmd_gs_finish_level(cx, p, res, shd_ungroup(cx->arena, gout), out, err);
}

/* Gather on a trivially sliced operand: clamp, shift by the partition's offset, mask the
 * out-of-range rows to zero and all-reduce (sum) over the sliced dims. */
static SlStatus
gather_mask_and_reduce(SpmdCtx *cx, const Gs *p, const SpmdValue *idx, IrInstr *lo,
                       IrInstr *hi, IrInstr *pg, const ShdSharding *outs, const int64_t *dims,
                       uint32_t n, IrInstr **out, SlError *err)
{
    IrInstr *lt = spmd_emit_compare(cx, idx->hlo, lo, "LT");
    IrInstr *gt = spmd_emit_compare(cx, idx->hlo, hi, "GT");
    IrInstr *f = lt && gt ? spmd_emit_binary(cx, IR_OP_OR, lt, gt) : NULL;
    IrShape fb = ir_shape_clone(cx->arena, idx->base_shape);
    fb.dtype = IR_DT_PRED;
    if (!f || !pg)
        return spmd_nomem(cx, err);
    int64_t bi[GS_R], bo[GS_R];
    uint32_t nb = 0;
    for (uint32_t d = 0; d < idx->base_shape->rank; d++)
        if ((int64_t)d != p->dn.ivd &&
            (bo[nb] = spmd_gs_out_dim_of_idx(&p->dn, d, p->out_base->rank)) >= 0)
            bi[nb++] = d;
    const ShdSharding *ft = spmd_gs_prop_dims(cx, outs, bo, bi, nb, idx->base_shape->rank);
    SpmdValue fv = {f, &fb, idx->sharding, idx->state}, fr;
    SlStatus st = ft ? spmd_gs_reshard(cx, &fv, ft, NULL, &fr, err) : spmd_nomem(cx, err);
    if (st != SL_OK)
        return st;
    f = fr.hlo;
    if ((int64_t)f->shape.rank > p->dn.ivd) {
        int64_t rd[GS_R], k = 0;
        for (uint32_t d = 0; d < f->shape.rank; d++)
            if ((int64_t)d != p->dn.ivd)
                rd[k++] = f->shape.dims[d];
        IrShape rs = ir_shape_make(cx->arena, IR_DT_PRED, rd, (uint32_t)k);
        IrInstr *ops[2] = {f, spmd_emit_constant_scalar(cx, IR_DT_PRED, 0)};
        IrInstr *r = ops[1] ? ir_instr_new(cx->out, IR_OP_REDUCE, &rs, ops, 2) : NULL;
        IrAttr *a = r ? ir_instr_add_attr(cx->out, r, IR_ATTR_DIMENSIONS) : NULL;
        IrAttr *c = r ? ir_instr_add_attr(cx->out, r, IR_ATTR_TO_APPLY) : NULL;
        int64_t *dv = SL_NEW(cx->arena, int64_t);
        if (!a || !c || !dv)
            return spmd_nomem(cx, err);
        *dv = p->dn.ivd;
        a->u.ints.n = 1;
        a->u.ints.v = dv;
        c->u.comp = spmd_reducer(cx, SPMD_RED_OR, IR_DT_PRED);
        f = c->u.comp ? spmd_emit(cx, r, NULL) : NULL;
    }
    int64_t bd[GS_R];
    uint32_t nbd = 0;
    for (uint32_t d = 0; d < pg->shape.rank; d++)
        if (!spmd_gs_has_dim(p->dn.offset, p->dn.n_offset, d))
            bd[nbd++] = d;
    IrShape ps = ir_shape_clone(cx->arena, &pg->shape);
    ps.dtype = IR_DT_PRED;
    IrInstr *bf = f ? spmd_emit_broadcast(cx, f, &ps, bd, nbd) : NULL;
    IrInstr *sel = bf ? spmd_emit_select(cx, bf, spmd_emit_zero_like(cx, &pg->shape), pg) : NULL;
    IrComputation *add = spmd_reducer(cx, SPMD_RED_ADD, pg->shape.dtype);
    const char *cause = cx->coll_cause;
    cx->coll_cause = "gather";
    IrInstr *ar = sel ? spmd_all_reduce_along_dims(cx, p->st, sel, p->ops[0].sharding, dims, n,
                                                   add)
                      : NULL;
    cx->coll_cause = cause;
    return spmd_gs_finish_level(cx, p, ar, outs, out, err);
}

/* The gather's indices clamped into the operand's full shape (XLA's ClampGatherIndices): the
 * upper bounds one constant of the indices' type (dim size - 1 per start_index_map entry, a
 * vector broadcast along index_vector_dim, else a scalar), the lower bound broadcast(0). */
static IrInstr *
clamp_to_operand(SpmdCtx *cx, const Gs *p, IrInstr *idx)
{
    uint32_t k = p->dn.n_index_map;
    IrDtype t = idx->shape.dtype;
    IrShape is = ir_shape_clone(cx->arena, &idx->shape);
    IrInstr *top;
    if ((int64_t)idx->shape.rank > p->dn.ivd) {
        int64_t lim[GS_R];
        if (k == 0 || k > GS_R)
            return NULL;
        for (uint32_t i = 0; i < k; i++)
            lim[i] = p->ops[0].base_shape->dims[p->dn.index_map[i]] - 1;
        IrInstr *c = spmd_emit_constant_int_array(cx, t, lim, k);
        top = c ? spmd_emit_broadcast(cx, c, &is, &p->dn.ivd, 1) : NULL;
    } else {
        if (k != 1)
            return NULL;
        IrInstr *c = spmd_emit_constant_scalar(
            cx, t, p->ops[0].base_shape->dims[p->dn.index_map[0]] - 1);
        top = c ? spmd_emit_broadcast(cx, c, &is, NULL, 0) : NULL;
    }
    IrInstr *zero = spmd_emit_constant_scalar(cx, t, 0);
    IrInstr *lo = zero ? spmd_emit_broadcast(cx, zero, &is, NULL, 0) : NULL;
    return lo && top ? spmd_gs_emit_clamp(cx, lo, idx, top) : NULL;
}

/* Trivially sliced operand: the operand stays sharded, indices and output (scatter: updates)
 * are grouped on their replication (or replicated per group). Gather masks and all-reduces;
 * scatter only shifts the indices (out-of-range updates are dropped by scatter semantics). */
SlStatus
spmd_gs_method_trivial_sliced(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err)
{
    int64_t dims[GS_R], ip[GS_R], wp[GS_R];
    const ShdSharding *os = p->ops[0].sharding;
    *out = NULL;
    uint32_t n = spmd_gs_trivial_sliced_dims(p, dims), nip = spmd_gs_index_prio(p, ip),
             nwp = spmd_gs_window_prio(p, wp);
    if (n == 0)
        return SL_OK;
    int64_t groups = spmd_gs_tiles_on(os, dims, n), tiles = shd_device_count(os);
    ShdGrouped gop = shd_group_on_dims(cx->arena, os, dims, n, NULL);
    ShdGrouped i0 = spmd_gs_group_on_replicated(cx, p->idx.sharding, groups, tiles,
                                        p->idx.base_shape->rank, ip, nip);
    const ShdSharding *ws0 = p->is_scatter ? p->upd[0].sharding : p->out_s;
    ShdGrouped w0 =
        spmd_gs_group_on_replicated(cx, ws0, groups, tiles, spmd_gs_window_rank(p), wp, nwp);
    ShdGrouped gi = spmd_gs_align(cx, &i0, &gop), gw = spmd_gs_align(cx, &w0, &gop);
    const ShdSharding *iu = shd_ungroup(cx->arena, &gi);
    if (!spmd_gs_grouped_ok(&gop, &gop) || !spmd_gs_grouped_ok(&gi, &gop) ||
        !spmd_gs_grouped_ok(&gw, &gop) || !iu)
        return SL_OK;
    SpmdValue idx;
    SlStatus st = spmd_gs_reshard_indices(cx, p, iu, &idx, err);
    if (st != SL_OK)
        return st;
    IrInstr *lo = NULL, *hi = NULL;
    if (!p->is_scatter)
        idx.hlo = clamp_to_operand(cx, p, idx.hlo);
    if (!idx.hlo || !spmd_gs_index_bounds(cx, p, &p->ops[0], dims, n, idx.hlo, &lo,
                                  p->is_scatter ? NULL : &hi))
        return spmd_nomem(cx, err);
    /* the shifted indices need no second clamp: the local gather clamps its start indices
     * into the shard, and those rows are masked below */
    SpmdValue adj = idx;
    adj.hlo = spmd_emit_binary(cx, IR_OP_SUBTRACT, idx.hlo, lo);
    if (!adj.hlo)
        return spmd_nomem(cx, err);
    const ShdGrouped *gout = p->is_scatter ? &gop : &gw;
    IrInstr *res = NULL;
    st = spmd_gs_recurse(cx, p, &gop, &gi, &gw, gout, &adj, p->slice, &res, err);
    if (st != SL_OK)
        return st;
    const ShdSharding *outs = shd_ungroup(cx->arena, gout);
    if (p->is_scatter || !outs)
        return spmd_gs_finish_level(cx, p, res, outs, out, err);
    return gather_mask_and_reduce(cx, p, &idx, lo, hi, res, outs, dims, n, out, err);
}

/* Scatter combiner kind and identity literal; false when not add/mul/min/max/and/or. */
static bool
combiner(const IrInstr *hlo, IrDtype t, SpmdRedKind *kind, const char **identity)
{
    IrComputation *c = ir_instr_called(hlo, IR_ATTR_TO_APPLY);
    const IrInstr *r = c ? c->root : NULL;
    if (!r || r->n_operands != 2 || r->operands[0]->op != IR_OP_PARAMETER ||
        r->operands[1]->op != IR_OP_PARAMETER)
        return false;
    char k = ir_dtype_kind(t);
    bool is_f = k == 'F', is_s = k == 'S';
    switch (r->op) {
    case IR_OP_ADD: *kind = SPMD_RED_ADD; *identity = "0"; return true;
    case IR_OP_MULTIPLY: *kind = SPMD_RED_ADD; *identity = "1"; return true;
    case IR_OP_AND: *kind = SPMD_RED_AND; *identity = "true"; return t == IR_DT_PRED;
    case IR_OP_OR: *kind = SPMD_RED_OR; *identity = "false"; return t == IR_DT_PRED;
    case IR_OP_MAXIMUM:
        *kind = SPMD_RED_MAX;
        *identity = is_f ? "-inf" : t == IR_DT_S32 ? "-2147483648" : "0";
        return is_f || t == IR_DT_S32 || k == 'U';
    case IR_OP_MINIMUM:
        *kind = SPMD_RED_MIN;
        *identity = is_f ? "inf" : t == IR_DT_S32 ? "2147483647" : "4294967295";
        return is_f || (is_s && t == IR_DT_S32) || t == IR_DT_U32;
    default:
        return false;
    }
}

/* Scatter index passthrough: the combining all-reduce runs over the devices that differ only
 * on the reduced index dims `rd`; inside each such group only the in-group id 0 keeps the real
 * operand, the others start from the combiner's identity, so the operand is counted once.
 * Grouping the indices' sharding on every other tile dim (index vector dim, replication)
 * yields exactly those groups. */
static SlStatus
identity_operand(SpmdCtx *cx, const Gs *p, const ShdSharding *is, const int64_t *rd,
                 uint32_t n_rd, SpmdValue *op, SlError *err)
{
    SpmdRedKind kind;
    const char *id = NULL;
    if (!combiner(p->hlo, op->hlo->shape.dtype, &kind, &id))
        return SL_ERR_UNSUPPORTED;
    const SpmdState *st = p->st;
    int64_t keep[GS_R + 4];
    uint32_t nk = 0;
    for (uint32_t d = 0; shd_is_tiled(is) && d < is->n_tile_dims && nk < GS_R + 4; d++)
        if (is->tile_dims[d] > 1 &&
            (d >= is->n_tile_dims - is->n_subgroups || !spmd_gs_has_dim(rd, n_rd, d)))
            keep[nk++] = d;
    if (nk > 0) {
        ShdGrouped g = shd_group_on_dims(cx->arena, is, keep, nk, NULL);
        st = g.device_groups ? spmd_state_grouped(cx, p->st, g.device_groups, g.n_groups,
                                                  g.group_size)
                             : NULL;
    }
    IrInstr *pid = st ? spmd_partition_id(cx, st) : NULL;
    IrInstr *nz = pid ? spmd_emit_convert(cx, pid, IR_DT_PRED) : NULL;
    IrShape ps = ir_shape_clone(cx->arena, &op->hlo->shape), vs = ps;
    ps.dtype = IR_DT_PRED;
    vs = ir_shape_clone(cx->arena, &op->hlo->shape);
    IrInstr *bnz = nz ? spmd_emit_broadcast(cx, nz, &ps, NULL, 0) : NULL;
    IrInstr *c = bnz ? spmd_emit_constant_literal(cx, vs.dtype, id) : NULL;
    IrInstr *bc = c ? spmd_emit_broadcast(cx, c, &vs, NULL, 0) : NULL;
    op->hlo = bc ? spmd_emit_select(cx, bnz, bc, op->hlo) : NULL;
    return op->hlo ? SL_OK : spmd_nomem(cx, err);
}

static SlStatus
scatter_index_passthrough(SpmdCtx *cx, const Gs *q, const GsPairs *ip, const ShdSharding *is,
                          const ShdGrouped *gop, const ShdGrouped *gi, const ShdGrouped *gw,
                          IrInstr **out, SlError *err)
{
    const SpmdState *gs =
        spmd_state_grouped(cx, q->st, gw->device_groups, gw->n_groups, gw->group_size);
    const IrShape *ob = gs ? spmd_gs_per_group_shape(cx, q->out_base, gop) : NULL;
    if (!ob)
        return spmd_nomem(cx, err);
    SpmdValue op, upd, idx;
    SlStatus st = spmd_gs_group_value(cx, &q->ops[0], gop, gs, &op, err);
    if (st == SL_OK)
        st = identity_operand(cx, q, is, ip->idx, ip->n, &op, err);
    if (st == SL_OK)
        st = spmd_gs_group_value(cx, &q->upd[0], gw, gs, &upd, err);
    if (st == SL_OK)
        st = spmd_gs_group_value(cx, &q->idx, gi, gs, &idx, err);
    if (st != SL_OK)
        return st;
    Gs c = spmd_gs_child_of(q, gs, &op, &upd, &idx, ob, gop->inner, q->slice);
    IrInstr *res = NULL;
    st = spmd_gs_partition(cx, &c, true, &res, err);
    if (st != SL_OK)
        return st;
    IrComputation *red = spmd_output_computation(cx, ir_instr_called(q->hlo, IR_ATTR_TO_APPLY));
    const char *cause = cx->coll_cause;
    cx->coll_cause = "scatter";
    IrInstr *ar = res && red ? spmd_all_reduce_along_dims(cx, q->st, res, is, ip->idx, ip->n, red)
                             : NULL;
    cx->coll_cause = cause;
    return spmd_gs_finish_level(cx, q, ar, shd_ungroup(cx->arena, gop), out, err);
}

/* The indices' sharding improved from the output (scatter: updates) sharding `ws` on the
 * index passthrough dims: merged when compatible, else (indices unsharded on those dims) taken
 * from `ws` outright when that tiles them more. */
static const ShdSharding *
improved_indices(SpmdCtx *cx, const Gs *p, const GsPairs *ip, const ShdSharding *ws)
{
    const ShdSharding *is = p->idx.sharding;
    const ShdSharding *t =
        spmd_gs_prop_dims(cx, ws, ip->out, ip->idx, ip->n, p->idx.base_shape->rank);
    if (!t || !shd_is_tiled(t))
        return is;
    const ShdSharding *m =
        shd_merge_if_compatible(cx->arena, t, is, shd_is_tiled(is) ? shd_num_tiles(is) + 1 : 2);
    if (m)
        return m;
    if ((!shd_is_tiled(is) || spmd_gs_tiles_on(is, ip->idx, ip->n) == 1) &&
        spmd_gs_tiles_on(t, ip->idx, ip->n) > spmd_gs_tiles_on(is, ip->idx, ip->n))
        return t;
    return is;
}

/* Index passthrough: the output (scatter: updates) follows the indices on their batch dims;
 * the operand is grouped on its replication or replicated per group. Scatter then combines
 * the per-group partial results with its own reduction. */
SlStatus
spmd_gs_method_index_passthrough(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err)
{
    GsPairs ip;
    int64_t prio[GS_R];
    uint32_t wr = spmd_gs_window_rank(p), np = spmd_gs_operand_prio(p, prio);
    const ShdSharding *is = p->idx.sharding, *ws = p->is_scatter ? p->upd[0].sharding : p->out_s;
    *out = NULL;
    spmd_gs_index_passthrough_dims(p, wr, &ip);
    if (ip.n == 0 || (p->is_scatter && p->n != 1))
        return SL_OK;
    is = improved_indices(cx, p, &ip, ws);
    if (!shd_is_tiled(is))
        return SL_OK;
    const ShdSharding *pass = spmd_gs_prop_dims(cx, is, ip.idx, ip.out, ip.n, wr);
    const ShdSharding *mp = pass && shd_is_tiled(pass)
                                ? shd_merge_if_compatible(cx->arena, ws, pass,
                                                          shd_num_tiles(pass) + 1)
                                : NULL;
    pass = mp ? mp : pass;
    SpmdRedKind kind;
    const char *ident = NULL;
    if (!pass || !shd_is_tiled(pass) ||
        (p->is_scatter && !combiner(p->hlo, p->ops[0].base_shape->dtype, &kind, &ident)))
        return SL_OK;
    int64_t groups = spmd_gs_tiles_on(is, ip.idx, ip.n), tiles = shd_device_count(is);
    ShdGrouped gw = shd_group_on_dims(cx->arena, pass, ip.out, ip.n, NULL);
    ShdGrouped i0 = shd_group_on_dims(cx->arena, is, ip.idx, ip.n, NULL);
    ShdGrouped gi = spmd_gs_align(cx, &i0, &gw);
    ShdGrouped o0 = spmd_gs_group_on_replicated(cx, p->ops[0].sharding, groups, tiles,
                                        p->ops[0].base_shape->rank, prio, np);
    ShdGrouped gop = spmd_gs_align(cx, &o0, &gw);
    if (!gw.inner || !spmd_gs_grouped_ok(&gi, &gw) || !spmd_gs_grouped_ok(&gop, &gw))
        return SL_OK;
    Gs q = *p;
    SlStatus st = spmd_gs_reshard_indices(cx, p, is, &q.idx, err);
    if (st != SL_OK || !p->is_scatter) {
        IrInstr *res = NULL;
        st = st == SL_OK ? spmd_gs_recurse(cx, &q, &gop, &gi, &gw, &gw, &q.idx, p->slice, &res, err)
                         : st;
        return st == SL_OK ? spmd_gs_finish_level(cx, p, res, pass, out, err) : st;
    }
    return scatter_index_passthrough(cx, &q, &ip, is, &gop, &gi, &gw, out, err);
}
