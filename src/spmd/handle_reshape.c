/* handle_reshape.c - the reshape handler (gspmd.md D.3; upstream HandleReshape).
 * Owns: choosing compatible (operand, output) sharding pairs; the recursive partition that
 * groups devices on the dims the reshape keeps sharded and partitions the rest inside the
 * groups; the inner fallback that fixes the misalignment of an uneven split or merge of the one
 * sharded dim with a halo exchange (window of size 1 with high padding), else replicates.
 * Does not own: sharding arithmetic (shd_reshape, shd_propagate_through_reshape), reshards and
 * halo exchanges (reshard.c, halo.c). */
#include "spmd/spmd_int.h"

#include <string.h>

#define RESHAPE_MAX_DEPTH 16 /* recursion levels before the inner fallback is forced */

/* The one data dim with more than one shard, or -1 (UniqueTiledDim). */
static int64_t
unique_tiled_dim(const ShdSharding *s)
{
    if (!shd_is_tiled(s))
        return -1;
    int64_t dim = -1;
    for (uint32_t d = 0; d < shd_data_rank(s); d++) {
        if (s->tile_dims[d] == 1)
            continue;
        if (dim >= 0)
            return -1;
        dim = d;
    }
    return dim;
}

static int64_t
major_size(const IrShape *s, int64_t dim)
{
    int64_t p = 1;
    for (int64_t d = 0; d < dim; d++)
        p *= s->dims[d];
    return p;
}

/* Replicate, reshape the full value, reshard to `s` (the last resort). */
static SlStatus
replicate_reshape(SpmdCtx *cx, const SpmdValue *op, const ShdSharding *s, const IrShape *base,
                  IrInstr **out, SlError *err)
{
    SpmdValue rep, res;
    SlStatus st = spmd_replicate(cx, op, &rep, err);
    if (st != SL_OK)
        return st;
    IrInstr *r = spmd_emit_reshape(cx, rep.hlo, base->dims, base->rank);
    if (!r)
        return spmd_nomem(cx, err);
    SpmdValue rv = {r, base, shd_replicated(cx->arena), op->state};
    st = spmd_reshard(cx, &rv, s, NULL, &res, err);
    *out = res.hlo;
    return st;
}

/* `s`'s device order on the operand's tile dims (fixes a device order mismatch). */
static const ShdSharding *
aligned_sharding(SpmdCtx *cx, const ShdSharding *s, const ShdSharding *op_s)
{
    bool s_rep = s->n_subgroups == 1 && s->subgroups[0] == SHD_SUB_REPLICATED;
    bool o_rep = op_s->n_subgroups == 1 && op_s->subgroups[0] == SHD_SUB_REPLICATED;
    if ((s->n_subgroups && !s_rep) || (op_s->n_subgroups && !o_rep) || s_rep != o_rep ||
        shd_device_count(s) != shd_device_count(op_s))
        return NULL;
    ShdSubgroup rep = SHD_SUB_REPLICATED;
    return shd_tiled(cx->arena, op_s->tile_dims, op_s->n_tile_dims, s->devices, s_rep ? &rep : NULL,
                     s_rep ? 1 : 0);
}

/* A window of size 1 that only pads `dim` at the high end by `hi`. */
static IrWindowDim *
pad_high_window(SpmdCtx *cx, uint32_t rank, int64_t dim, int64_t hi)
{
    IrWindowDim *w = SL_NEW_ARRAY(&cx->scratch, IrWindowDim, rank ? rank : 1);
    if (!w)
        return NULL;
    for (uint32_t d = 0; d < rank; d++)
        w[d] = (IrWindowDim){1, 1, 0, (int64_t)d == dim ? hi : 0, 1, 1, false};
    return w;
}

/* Split of the sharded dim (A = split * B): realign the input with a halo exchange so that
 * each shard holds whole output rows, then reshape locally. */
static SlStatus
split_dim(SpmdCtx *cx, const SpmdValue *op, const ShdSharding *s, const IrShape *base,
          int64_t in_dim, int64_t out_dim, IrInstr **out, SlError *err)
{
    int64_t n = shd_dim_shards(s, (uint32_t)out_dim);
    int64_t split = op->base_shape->dims[in_dim] / base->dims[out_dim];
    IrShape os = spmd_local_shape(cx, base, s);
    int64_t hi = os.dims[out_dim] * split * n - op->base_shape->dims[in_dim];
    IrWindowDim *w = pad_high_window(cx, op->base_shape->rank, in_dim, hi);
    SpmdWindowedInput wi;
    SlStatus st = w ? spmd_reshard_as_windowed_input(cx, op, w, op->sharding,
                                                     spmd_emit_constant_scalar(cx,
                                                                               base->dtype, 0),
                                                     false, &wi, err)
                    : spmd_nomem(cx, err);
    if (st == SL_ERR_UNSUPPORTED || (st == SL_OK && wi.dynamic_slice_index) ||
        (st == SL_OK && wi.sharded_input->shape.dims[in_dim] != os.dims[out_dim] * split))
        return replicate_reshape(cx, op, s, base, out, err);
    if (st != SL_OK)
        return st;
    *out = spmd_emit_reshape(cx, wi.sharded_input, os.dims, os.rank);
    return *out ? SL_OK : spmd_nomem(cx, err);
}

/* Merge into the sharded dim (B = merge * A): reshape locally (padding included), then move
 * the data to its aligned place with a halo exchange. */
static SlStatus
merge_dims(SpmdCtx *cx, const SpmdValue *op, const ShdSharding *s, const IrShape *base,
           int64_t in_dim, int64_t out_dim, IrInstr **out, SlError *err)
{
    int64_t n = shd_dim_shards(s, (uint32_t)out_dim);
    int64_t merge = base->dims[out_dim] / op->base_shape->dims[in_dim];
    IrShape os = spmd_local_shape(cx, base, s);
    IrShape ts = ir_shape_clone(cx->arena, &os);
    ts.dims[out_dim] = op->hlo->shape.dims[in_dim] * merge;
    IrShape *tf = SL_NEW(cx->arena, IrShape);
    IrInstr *tmp = spmd_emit_reshape(cx, op->hlo, ts.dims, ts.rank);
    if (!tf || !tmp)
        return spmd_nomem(cx, err);
    *tf = ir_shape_clone(cx->arena, &ts);
    tf->dims[out_dim] = ts.dims[out_dim] * n;
    SpmdValue tv = {tmp, tf, s, op->state};
    IrWindowDim *w = pad_high_window(cx, base->rank, out_dim, base->dims[out_dim] - tf->dims[out_dim]);
    SpmdWindowedInput wi;
    SlStatus st = w ? spmd_reshard_as_windowed_input(cx, &tv, w, s,
                                                     spmd_emit_constant_scalar(cx,
                                                                               base->dtype, 0),
                                                     false, &wi, err)
                    : spmd_nomem(cx, err);
    if (st == SL_ERR_UNSUPPORTED || (st == SL_OK && wi.dynamic_slice_index) ||
        (st == SL_OK && wi.sharded_input->shape.dims[out_dim] != os.dims[out_dim]))
        return replicate_reshape(cx, op, s, base, out, err);
    if (st != SL_OK)
        return st;
    *out = wi.sharded_input;
    return SL_OK;
}

/* shard_reshape: one sharded dim on each side with equal major sizes, split or merge. */
static SlStatus
shard_reshape(SpmdCtx *cx, const SpmdValue *op, const ShdSharding *s, const IrShape *base,
              IrInstr **out, SlError *err)
{
    const ShdSharding *os = op->sharding;
    if (shd_num_tiles(os) != shd_num_tiles(s))
        return replicate_reshape(cx, op, s, base, out, err);
    int64_t in_dim = unique_tiled_dim(os), out_dim = unique_tiled_dim(s);
    if (in_dim < 0 || out_dim < 0 ||
        major_size(op->base_shape, in_dim) != major_size(base, out_dim))
        return replicate_reshape(cx, op, s, base, out, err);
    const ShdSharding *al = aligned_sharding(cx, s, os);
    if (!al)
        return replicate_reshape(cx, op, s, base, out, err);
    SpmdValue aop;
    SlStatus st = spmd_reshard(cx, op, al, NULL, &aop, err);
    if (st != SL_OK)
        return st;
    int64_t A = op->base_shape->dims[in_dim], B = base->dims[out_dim];
    if (A % B == 0)
        return split_dim(cx, &aop, s, base, in_dim, out_dim, out, err);
    if (B % A == 0)
        return merge_dims(cx, &aop, s, base, in_dim, out_dim, out, err);
    return replicate_reshape(cx, &aop, s, base, out, err);
}

/* Base shape with the grouped dims cut to one shard of `sizes` (local sizes or ceil). */
static IrShape *
group_base(SpmdCtx *cx, const IrShape *base, const ShdSharding *g, const IrShape *local)
{
    IrShape *r = SL_NEW(cx->arena, IrShape);
    if (!r)
        return NULL;
    *r = ir_shape_clone(cx->arena, base);
    for (uint32_t d = 0; d < base->rank; d++) {
        int64_t n = shd_dim_shards(g, d);
        if (n > 1)
            r->dims[d] = local ? local->dims[d] : (base->dims[d] + n - 1) / n;
    }
    return r;
}

static SlStatus recursive_shard(SpmdCtx *cx, const SpmdValue *op, const ShdSharding *s,
                                const IrShape *base, int depth, IrInstr **out, SlError *err);

/* Dims of `s` with more than one shard. */
static uint32_t
sharded_dims(const ShdSharding *s, uint32_t rank, int64_t *dims)
{
    uint32_t n = 0;
    for (uint32_t d = 0; d < rank; d++)
        if (shd_dim_shards(s, d) > 1)
            dims[n++] = d;
    return n;
}

/* One level of the recursion: group operand and output on the dims the propagated sharding
 * keeps, partition the rest inside the groups, reshard the ungrouped result to `s`. */
static SlStatus
group_and_recurse(SpmdCtx *cx, const SpmdValue *op, const ShdSharding *s, const IrShape *base,
                  const ShdSharding *prop, const ShdSharding *back, int depth, IrInstr **out,
                  SlError *err)
{
    int64_t od[SPMD_MAX_RANK], gd[SPMD_MAX_RANK];
    uint32_t nod = sharded_dims(back, op->base_shape->rank, od);
    uint32_t ngd = sharded_dims(prop, base->rank, gd);
    bool use_orig = shd_num_tiles(s) > shd_num_tiles(prop);
    for (uint32_t k = 0; k < ngd; k++)
        use_orig = use_orig && shd_dim_shards(prop, (uint32_t)gd[k]) ==
                                   shd_dim_shards(s, (uint32_t)gd[k]);
    ShdGrouped og = shd_group_on_dims(cx->arena, op->sharding, od, nod, NULL);
    ShdGrouped outg = shd_group_on_dims(cx->arena, use_orig ? s : prop, gd, ngd, NULL);
    if (use_orig && outg.inner)
        outg = shd_align_groups_with(cx->arena, &outg, &og);
    if (!og.inner || !outg.inner || !outg.device_groups || og.n_groups != outg.n_groups)
        return shard_reshape(cx, op, s, base, out, err);
    const SpmdState *ist =
        spmd_state_grouped(cx, op->state, og.device_groups, og.n_groups, og.group_size);
    IrInstr *copy = spmd_emit_copy(cx, op->hlo);
    IrShape *ib = group_base(cx, op->base_shape, back, &op->hlo->shape);
    IrShape *ob = group_base(cx, base, prop, NULL);
    const ShdSharding *ys = shd_ungroup(cx->arena, &outg);
    if (!ist || !copy || !ib || !ob || !ys)
        return spmd_nomem(cx, err);
    SpmdValue inner = {copy, ib, og.inner, ist};
    IrInstr *r = NULL;
    SlStatus st = recursive_shard(cx, &inner, outg.inner, ob, depth + 1, &r, err);
    if (st != SL_OK)
        return st;
    SpmdValue rv = {r, base, ys, op->state}, res;
    st = spmd_reshard(cx, &rv, s, NULL, &res, err);
    *out = res.hlo;
    return st;
}

static SlStatus
recursive_shard(SpmdCtx *cx, const SpmdValue *op, const ShdSharding *s, const IrShape *base,
                int depth, IrInstr **out, SlError *err)
{
    const ShdSharding *prop =
        shd_propagate_through_reshape(cx->arena, op->base_shape, base, op->sharding);
    if (!prop || !shd_is_tiled(prop) || depth >= RESHAPE_MAX_DEPTH)
        return shard_reshape(cx, op, s, base, out, err);
    const ShdSharding *back = shd_reshape(cx->arena, base, op->base_shape, prop);
    if (!back || !shd_is_tiled(back))
        return shard_reshape(cx, op, s, base, out, err);
    return group_and_recurse(cx, op, s, base, prop, back, depth, out, err);
}

/* True when (in_s, out_s) is a usable pair: equal tile counts and matching local sizes. */
static bool
is_pair(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *in_s, const ShdSharding *out_s)
{
    if (!in_s || !out_s || shd_num_tiles(in_s) != shd_num_tiles(out_s))
        return false;
    IrShape li = spmd_local_shape(cx, &hlo->operands[0]->shape, in_s);
    IrShape lo = spmd_local_shape(cx, &hlo->shape, out_s);
    return ir_shape_elem_count(&li) == ir_shape_elem_count(&lo);
}

SlStatus
spmd_handle_reshape(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (!shd_is_tiled(s) || !ir_shape_is_array(&hlo->shape))
        return spmd_handle_default(cx, hlo, err);
    const IrShape *in = &hlo->operands[0]->shape;
    const SpmdValue *op = spmd_get_value(cx, hlo->operands[0]);
    /* the operand sharding that maps onto the output sharding ... */
    const ShdSharding *in_s = shd_reshape(cx->arena, &hlo->shape, in, s);
    if (is_pair(cx, hlo, in_s, s))
        return spmd_handle_with_shardings(cx, hlo, (const ShdSharding *[]){in_s}, s, err);
    /* ... or the output sharding of the operand's, with the operand sharding it maps back to */
    const ShdSharding *out_s = shd_reshape(cx->arena, in, &hlo->shape, op->sharding);
    in_s = out_s ? shd_reshape(cx->arena, &hlo->shape, in, out_s) : NULL;
    if (is_pair(cx, hlo, in_s, out_s))
        return spmd_handle_with_shardings(cx, hlo, (const ShdSharding *[]){in_s}, out_s, err);
    if (op->base_shape->rank > SPMD_MAX_RANK || hlo->shape.rank > SPMD_MAX_RANK)
        return spmd_handle_default(cx, hlo, err);
    IrInstr *local = NULL;
    SlStatus st = recursive_shard(cx, op, s, &hlo->shape, 0, &local, err);
    if (st != SL_OK)
        return st;
    return spmd_finish(cx, hlo, local, s, err);
}
