/* gs_level.c - one level of the gather/scatter recursion (gspmd.md B, F.3, F.4): what every
 * method shares. Owns: sharding helpers (tiling moved along paired dims, grouping on
 * replicated dims, aligning groups), values in a (grouped) state (resharding, grouping,
 * finishing a level in the result sharding), emission of the local gather/scatter, index
 * bounds and clamps, the replicated fallback, the dim priorities and the child problem of a
 * recursion step. Does not own: choosing a method (handle_gather_scatter.c) or the methods
 * (gs_methods.c). Invariant: emission only through spmd_emit()/builders. */
#include "spmd/gs_int.h"

#include <string.h>

int64_t
spmd_gs_tiles_on(const ShdSharding *s, const int64_t *dims, uint32_t n)
{
    int64_t t = 1;
    for (uint32_t i = 0; shd_is_tiled(s) && i < n; i++)
        t *= shd_dim_shards(s, (uint32_t)dims[i]);
    return t;
}

/* ---- sharding helpers (gspmd.md B) ---- */

/* PropagateShardingAlongDimsAndReplicateOthers: target dim td[i] takes the tiling of source
 * dim sd[i]; every other device factor becomes replication. */
const ShdSharding *
spmd_gs_prop_dims(SpmdCtx *cx, const ShdSharding *src, const int64_t *sd, const int64_t *td,
                  uint32_t n, uint32_t tgt_rank)
{
    SlArena *a = cx->arena;
    if (!shd_is_tiled(src) || tgt_rank >= GS_R)
        return shd_replicated(a);
    const ShdSharding *p = shd_partially_replicate_all_except(a, src, sd, n);
    if (!p || !shd_is_tiled(p) || p->n_subgroups > 1 ||
        (p->n_subgroups == 1 && p->subgroups[0] != SHD_SUB_REPLICATED))
        return shd_replicated(a);
    uint32_t sr = shd_data_rank(p), nt = p->n_tile_dims;
    int64_t dims[GS_R + 1], prod = 1, total = shd_device_count(p);
    for (uint32_t d = 0; d < tgt_rank; d++)
        dims[d] = 1;
    for (uint32_t i = 0; i < n; i++)
        prod *= dims[td[i]] = shd_dim_shards(p, (uint32_t)sd[i]);
    dims[tgt_rank] = total / prod;
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, total);
    if (!devs)
        return NULL;
    int64_t tc[GS_R + 1] = {0}, sc[GS_R + 1];
    for (int64_t lin = 0; lin < total; lin++) {
        memset(sc, 0, sizeof(sc));
        for (uint32_t i = 0; i < n; i++)
            sc[sd[i]] = tc[td[i]];
        if (nt > sr)
            sc[sr] = tc[tgt_rank];
        int64_t at = 0;
        for (uint32_t d = 0; d < nt; d++)
            at = at * p->tile_dims[d] + sc[d];
        devs[lin] = p->devices[at];
        for (uint32_t d = tgt_rank + 1; d-- > 0;)
            if (++tc[d] < dims[d])
                break;
            else
                tc[d] = 0;
    }
    ShdSubgroup rep = SHD_SUB_REPLICATED;
    return shd_tiled(a, dims, tgt_rank + 1, devs, &rep, 1);
}

/* GroupShardingOnReplicatedDim: the replication dim's major part when it splits into the
 * groups, else shards borrowed from the data dims in priority order `prio`, else replicated
 * inside iota groups (src/sharding/groups.c). */
ShdGrouped
spmd_gs_group_on_replicated(SpmdCtx *cx, const ShdSharding *s, int64_t num_groups,
                            int64_t num_tiles, uint32_t rank, const int64_t *prio, uint32_t n_prio)
{
    return shd_group_on_replicated_dim(cx->arena, s, num_groups, num_tiles, rank, prio, n_prio);
}

ShdGrouped
spmd_gs_align(SpmdCtx *cx, const ShdGrouped *x, const ShdGrouped *ref)
{
    return shd_align_groups_with(cx->arena, x, ref);
}

bool
spmd_gs_grouped_ok(const ShdGrouped *g, const ShdGrouped *ref)
{
    return g->inner && g->device_groups && g->n_groups == ref->n_groups &&
           g->group_size == ref->group_size;
}

/* GetPerGroupBaseShape. */
const IrShape *
spmd_gs_per_group_shape(SpmdCtx *cx, const IrShape *base, const ShdGrouped *g)
{
    IrShape *r = SL_NEW(cx->arena, IrShape);
    if (!r)
        return NULL;
    *r = ir_shape_clone(cx->arena, base);
    for (uint32_t i = 0; i < g->n_group_dims; i++) {
        int64_t d = g->group_dims[i];
        if (d < (int64_t)r->rank && g->group_dim_sizes[i] > 0)
            r->dims[d] = (r->dims[d] + g->group_dim_sizes[i] - 1) / g->group_dim_sizes[i];
    }
    return r;
}

/* ---- values ---- */

/* spmd_reshard in any state; in a grouped state a cached view keyed by the same local
 * instruction may belong to another state, so a shape mismatch retries on a fresh copy. */
SlStatus
spmd_gs_reshard(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *t, IrInstr *pad, SpmdValue *out,
                SlError *err)
{
    if (shd_equal(v->sharding, t)) {
        *out = *v;
        out->sharding = t;
        return SL_OK;
    }
    SlStatus st = spmd_reshard(cx, v, t, pad, out, err);
    if (st != SL_OK || v->state->n_groups == 0)
        return st;
    IrShape want = spmd_local_shape(cx, v->base_shape, t);
    if (ir_shape_equal(&want, &out->hlo->shape, false))
        return SL_OK;
    SpmdValue fresh = *v;
    fresh.hlo = spmd_emit_copy(cx, v->hlo);
    if (!fresh.hlo)
        return spmd_nomem(cx, err);
    return spmd_reshard(cx, &fresh, t, pad, out, err);
}

SlStatus
spmd_gs_reshard_indices(SpmdCtx *cx, const Gs *p, const ShdSharding *t, SpmdValue *out,
                        SlError *err)
{
    const SpmdValue *v = &p->idx;
    IrInstr *pad = NULL;
    if (p->is_scatter && shd_is_tiled(t) && ir_dtype_kind(v->base_shape->dtype) == 'S') {
        bool uneven = false;
        for (uint32_t d = 0; d < v->base_shape->rank; d++)
            uneven |= v->base_shape->dims[d] % shd_dim_shards(t, d) != 0;
        if (uneven && !(pad = spmd_emit_constant_scalar(cx, v->base_shape->dtype, -1)))
            return spmd_nomem(cx, err);
    }
    return spmd_gs_reshard(cx, v, t, pad, out, err);
}

/* PerGroupPartitionedHlo: reshard to the ungrouped sharding, then view inside the groups. */
SlStatus
spmd_gs_group_value(SpmdCtx *cx, const SpmdValue *v, const ShdGrouped *g, const SpmdState *gs,
                    SpmdValue *out, SlError *err)
{
    const ShdSharding *u = shd_ungroup(cx->arena, g);
    if (!u)
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "cannot ungroup a gather/scatter sharding");
    SpmdValue r;
    SlStatus st = spmd_gs_reshard(cx, v, u, NULL, &r, err);
    if (st != SL_OK)
        return st;
    const IrShape *b = spmd_gs_per_group_shape(cx, v->base_shape, g);
    if (!b)
        return spmd_nomem(cx, err);
    *out = (SpmdValue){r.hlo, b, g->inner, gs};
    return SL_OK;
}

static SlStatus
group_values(SpmdCtx *cx, const SpmdValue *v, uint32_t n, const ShdGrouped *g,
             const SpmdState *gs, SpmdValue *out, SlError *err)
{
    for (uint32_t k = 0; k < n; k++) {
        SlStatus st = spmd_gs_group_value(cx, &v[k], g, gs, &out[k], err);
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

/* Result of a level: local `x` in sharding `s` (array, or per leaf for a variadic scatter),
 * resharded to the level's output sharding. */
SlStatus
spmd_gs_finish_level(SpmdCtx *cx, const Gs *p, IrInstr *x, const ShdSharding *s, IrInstr **out,
                     SlError *err)
{
    if (!x)
        return spmd_nomem(cx, err);
    const IrShape *base = p->out_base;
    const ShdSharding *from = s, *to = p->out_s;
    if (p->is_scatter && p->n > 1) {
        IrShape *t = SL_NEW(cx->arena, IrShape);
        const ShdSharding **fl = SL_NEW_ARRAY(cx->arena, const ShdSharding *, p->n);
        const ShdSharding **tl = SL_NEW_ARRAY(cx->arena, const ShdSharding *, p->n);
        IrShape *el = SL_NEW_ARRAY(cx->arena, IrShape, p->n);
        if (!t || !fl || !tl || !el)
            return spmd_nomem(cx, err);
        for (uint32_t k = 0; k < p->n; k++) {
            el[k] = *p->ops[k].base_shape;
            fl[k] = s;
            tl[k] = p->out_s;
        }
        memset(t, 0, sizeof(*t));
        t->dtype = IR_DT_TUPLE;
        t->n_elems = p->n;
        t->elems = el;
        base = t;
        from = shd_tuple(cx->arena, fl, p->n);
        to = shd_tuple(cx->arena, tl, p->n);
        if (!from || !to)
            return spmd_nomem(cx, err);
    }
    SpmdValue v = {x, base, from, p->st}, r;
    SlStatus st = spmd_gs_reshard(cx, &v, to, NULL, &r, err);
    *out = st == SL_OK ? r.hlo : NULL;
    return st;
}

/* ---- emission ---- */

static IrInstr *
emit_concat_1d(SpmdCtx *cx, IrInstr *const *parts, uint32_t n, IrDtype t)
{
    int64_t len = n;
    IrShape s = ir_shape_make(cx->arena, t, &len, 1);
    IrInstr *i = ir_instr_new(cx->out, IR_OP_CONCATENATE, &s, parts, n);
    IrAttr *a = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_DIMENSIONS) : NULL;
    int64_t *v = SL_NEW(cx->arena, int64_t);
    if (!a || !v)
        return NULL;
    *v = 0;
    a->u.ints.n = 1;
    a->u.ints.v = v;
    return spmd_emit(cx, i, NULL);
}

/* One s32 scalar per index component, as a value shaped like the local indices `like`
 * (concatenated along index_vector_dim, converted to the indices' type). */
static IrInstr *
index_vector(SpmdCtx *cx, const Gs *p, IrInstr **comp, const IrInstr *like)
{
    uint32_t k = p->dn.n_index_map;
    IrInstr *v;
    int64_t bdim = p->dn.ivd;
    if ((int64_t)like->shape.rank > p->dn.ivd) {
        int64_t one = 1;
        for (uint32_t i = 0; i < k; i++)
            comp[i] = spmd_emit_reshape(cx, comp[i], &one, 1);
        v = k == 1 ? comp[0] : emit_concat_1d(cx, comp, k, IR_DT_S32);
    } else {
        v = comp[0];
        bdim = -1;
    }
    if (v && like->shape.dtype != IR_DT_S32)
        v = spmd_emit_convert(cx, v, like->shape.dtype);
    if (!v)
        return NULL;
    IrShape s = ir_shape_clone(cx->arena, &like->shape);
    return spmd_emit_broadcast(cx, v, &s, &bdim, bdim < 0 ? 0 : 1);
}

/* Per-component lower bound: the partition's offset on `dims` of the operand, else 0; upper
 * bound (when `hi` is given): offset + local size - 1, else the full size. */
bool
spmd_gs_index_bounds(SpmdCtx *cx, const Gs *p, const SpmdValue *op, const int64_t *dims, uint32_t n,
                     const IrInstr *like, IrInstr **lo, IrInstr **hi)
{
    IrInstr *los[GS_R], *his[GS_R];
    uint32_t k = p->dn.n_index_map;
    if (k == 0 || k > GS_R)
        return false;
    for (uint32_t i = 0; i < k; i++) {
        int64_t d = p->dn.index_map[i];
        bool on = spmd_gs_has_dim(dims, n, d) && shd_dim_shards(op->sharding, (uint32_t)d) > 1;
        los[i] = on ? spmd_partition_offset(cx, op->state, op->sharding, op->base_shape,
                                            (uint32_t)d)
                    : spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        if (!hi)
            continue;
        int64_t lim = on ? op->hlo->shape.dims[d] - 1 : op->base_shape->dims[d];
        IrInstr *c = spmd_emit_constant_scalar(cx, IR_DT_S32, lim);
        his[i] = on ? spmd_emit_binary(cx, IR_OP_ADD, los[i], c) : c;
    }
    *lo = index_vector(cx, p, los, like);
    if (hi)
        *hi = index_vector(cx, p, his, like);
    return *lo && (!hi || *hi);
}

IrInstr *
spmd_gs_emit_clamp(SpmdCtx *cx, IrInstr *lo, IrInstr *x, IrInstr *hi)
{
    IrInstr *ops[3] = {lo, x, hi};
    IrShape s = ir_shape_clone(cx->arena, &x->shape);
    return spmd_emit_op(cx, IR_OP_CLAMP, &s, ops, 3);
}

/* The local gather/scatter on values in `p`'s state (replicated there in the fallback). */
static IrInstr *
emit_local(SpmdCtx *cx, const Gs *p, IrInstr *const *ops, uint32_t n_ops)
{
    IrShape sh;
    if (p->is_scatter && p->n > 1) {
        IrShape *el = SL_NEW_ARRAY(cx->arena, IrShape, p->n);
        if (!el)
            return NULL;
        for (uint32_t k = 0; k < p->n; k++)
            el[k] = ops[k]->shape;
        memset(&sh, 0, sizeof(sh));
        sh.dtype = IR_DT_TUPLE;
        sh.n_elems = p->n;
        sh.elems = el;
    } else {
        sh = ir_shape_clone(cx->arena, p->is_scatter ? &ops[0]->shape : p->out_base);
    }
    IrInstr *g = spmd_emit_clone(cx, p->hlo, &sh, ops, n_ops);
    if (!g || p->is_scatter)
        return g;
    IrAttr *a = ir_instr_find_attr_mut(g, IR_ATTR_SLICE_SIZES);
    int64_t *v = SL_DUP_ARRAY(cx->arena, int64_t, p->slice, p->ops[0].base_shape->rank);
    if (!a || !v)
        return a ? NULL : g;
    a->u.ints.v = v;
    return g;
}

static uint32_t
n_inputs(const Gs *p)
{
    return p->is_scatter ? 2 * p->n + 1 : 2;
}

/* Input i of the local op: operands, indices, updates (gather: operand, indices). */
static const SpmdValue *
input(const Gs *p, uint32_t i)
{
    if (i < p->n)
        return &p->ops[i];
    return i == p->n ? &p->idx : &p->upd[i - p->n - 1];
}

SlStatus
spmd_gs_replicate_fallback(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err)
{
    uint32_t n = n_inputs(p);
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, n);
    const ShdSharding *rep = shd_replicated(cx->arena);
    if (!ops || !rep)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++) {
        SpmdValue r;
        SlStatus st = spmd_gs_reshard(cx, input(p, i), rep, NULL, &r, err);
        if (st != SL_OK)
            return st;
        ops[i] = r.hlo;
    }
    return spmd_gs_finish_level(cx, p, emit_local(cx, p, ops, n), rep, out, err);
}

/* ---- shared pieces of the methods ---- */

/* Rank of the dims paired with index dims: gather output, scatter updates. */
uint32_t
spmd_gs_window_rank(const Gs *p)
{
    return p->is_scatter ? p->upd[0].base_shape->rank : p->out_base->rank;
}

/* GatherIndexDimsByPriority: ivd, index passthrough dims, then batching dims. */
uint32_t
spmd_gs_index_prio(const Gs *p, int64_t *out)
{
    uint32_t r = p->idx.base_shape->rank, n = 0;
    if (p->dn.ivd < (int64_t)r)
        out[n++] = p->dn.ivd;
    for (uint32_t d = 0; d < r; d++)
        if ((int64_t)d != p->dn.ivd && !spmd_gs_has_dim(p->dn.idx_batch, p->dn.n_idx_batch, d))
            out[n++] = d;
    for (uint32_t i = 0; i < p->dn.n_idx_batch && n < GS_R; i++)
        out[n++] = p->dn.idx_batch[i];
    return n;
}

/* GatherOperandDimsByPriority: trivially sliced dims, then operand passthrough dims. */
uint32_t
spmd_gs_operand_prio(const Gs *p, int64_t *out)
{
    uint32_t n = spmd_gs_trivial_sliced_dims(p, out);
    GsPairs pp;
    spmd_gs_operand_passthrough_dims(p, &pp);
    for (uint32_t i = 0; i < pp.n; i++)
        out[n++] = pp.op[i];
    return n;
}

/* GatherOutputDimsByPriority: output/update dims that are not operand passthrough first. */
uint32_t
spmd_gs_window_prio(const Gs *p, int64_t *out)
{
    GsPairs pp;
    spmd_gs_operand_passthrough_dims(p, &pp);
    uint32_t n = 0, r = spmd_gs_window_rank(p);
    for (uint32_t d = 0; d < r; d++)
        if (!spmd_gs_has_dim(pp.out, pp.n, d))
            out[n++] = d;
    for (uint32_t i = 0; i < pp.n; i++)
        out[n++] = pp.out[i];
    return n;
}

/* Operand/indices shardings that agree on the parallel dims
 * (GatherScatterOperandsShardedAcrossParallelDims, the side with fewer shards adopts). */
bool
spmd_gs_parallel_targets(SpmdCtx *cx, const Gs *p, const GsPairs *pd, const ShdSharding **os,
                         const ShdSharding **is)
{
    const ShdSharding *o = p->ops[0].sharding, *i = p->idx.sharding;
    int64_t to = spmd_gs_tiles_on(o, pd->op, pd->n), ti = spmd_gs_tiles_on(i, pd->idx, pd->n);
    uint32_t orank = p->ops[0].base_shape->rank, irank = p->idx.base_shape->rank;
    if (to == 1 && ti == 1)
        return false;
    if (spmd_gs_parallel_shardings(cx, o, i, pd->op, pd->idx, pd->n, os, is))
        return true;
    if (ti >= to) {
        const ShdSharding *mine = spmd_gs_prop_dims(cx, o, pd->op, pd->idx, pd->n, irank);
        const ShdSharding *theirs = spmd_gs_prop_dims(cx, i, pd->idx, pd->idx, pd->n, irank);
        *is = i;
        *os = mine && theirs && shd_equal(mine, theirs)
                  ? o
                  : spmd_gs_prop_dims(cx, i, pd->idx, pd->op, pd->n, orank);
    } else {
        *os = o;
        *is = spmd_gs_prop_dims(cx, o, pd->op, pd->idx, pd->n, irank);
    }
    return *os && *is && shd_is_tiled(*os) && shd_is_tiled(*is);
}

/* Indices minus the operand offsets on `dims` (index-parallel and trivially sliced). */
SlStatus
spmd_gs_subtract_offsets(SpmdCtx *cx, const Gs *p, const SpmdValue *op, const int64_t *dims,
                         uint32_t n, SpmdValue *idx, SlError *err)
{
    IrInstr *lo = NULL;
    if (!spmd_gs_index_bounds(cx, p, op, dims, n, idx->hlo, &lo, NULL))
        return spmd_nomem(cx, err);
    idx->hlo = spmd_emit_binary(cx, IR_OP_SUBTRACT, idx->hlo, lo);
    return idx->hlo ? SL_OK : spmd_nomem(cx, err);
}

/* The child problem: values grouped, output/update base shape per group. */
Gs
spmd_gs_child_of(const Gs *p, const SpmdState *gs, SpmdValue *ops, SpmdValue *upd,
                 const SpmdValue *idx, const IrShape *out_base, const ShdSharding *out_s,
                 const int64_t *slice)
{
    Gs c = *p;
    c.ops = ops;
    c.upd = upd;
    c.idx = *idx;
    c.out_base = out_base;
    c.out_s = out_s;
    c.slice = slice;
    c.st = gs;
    c.depth = p->depth + 1;
    return c;
}

SpmdValue *
spmd_gs_values_copy(SpmdCtx *cx, const SpmdValue *v, uint32_t n)
{
    return n ? SL_DUP_ARRAY(cx->arena, SpmdValue, v, n) : NULL;
}

/* Groups every input of `p` (operands with `gop`, updates with `gupd`, indices with `gidx`),
 * partitions the child problem and returns its local result. */
SlStatus
spmd_gs_recurse(SpmdCtx *cx, const Gs *p, const ShdGrouped *gop, const ShdGrouped *gidx,
                const ShdGrouped *gupd, const ShdGrouped *gout, const SpmdValue *idx,
                const int64_t *slice, IrInstr **res, SlError *err)
{
    const SpmdState *gs =
        spmd_state_grouped(cx, p->st, gout->device_groups, gout->n_groups, gout->group_size);
    SpmdValue *ops = spmd_gs_values_copy(cx, p->ops, p->n), gi;
    SpmdValue *upd = p->is_scatter ? spmd_gs_values_copy(cx, p->upd, p->n) : NULL;
    const IrShape *ob = spmd_gs_per_group_shape(cx, p->out_base, gout);
    if (!gs || !ops || (p->is_scatter && !upd) || !ob)
        return spmd_nomem(cx, err);
    SlStatus st = group_values(cx, p->ops, p->n, gop, gs, ops, err);
    if (st == SL_OK && p->is_scatter)
        st = group_values(cx, p->upd, p->n, gupd, gs, upd, err);
    if (st == SL_OK)
        st = spmd_gs_group_value(cx, idx, gidx, gs, &gi, err);
    if (st != SL_OK)
        return st;
    Gs c = spmd_gs_child_of(p, gs, ops, upd, &gi, ob, gout->inner, slice);
    return spmd_gs_partition(cx, &c, true, res, err);
}
