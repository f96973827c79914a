/* handle_shape.c - data-movement handlers (gspmd.md D.2-D.5, D.7-D.9, D.19): broadcast,
 * reshape, transpose, slice, pad, reverse, dynamic-slice, dynamic-update-slice. Decides operand
 * shardings and local attributes; reshards through handle_common.c / spmd_reshard().
 * Where a halo exchange would be needed (sliced/padded/reversed sharded dims) the dims are
 * replicated instead until spmd_reshard_as_windowed_input() covers them. */
#include "spmd/spmd_int.h"

#include <string.h>

SlStatus
spmd_handle_broadcast(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const int64_t *bd;
    uint32_t nb = ir_instr_ints_attr(hlo, IR_ATTR_DIMENSIONS, &bd);
    const ShdSharding *op_s = s;
    if (shd_is_tiled(s)) {
        int64_t newd[SPMD_MAX_RANK];
        uint32_t nn = 0;
        for (uint32_t d = 0; d < hlo->shape.rank; d++) {
            bool kept = false;
            for (uint32_t k = 0; k < nb; k++)
                kept = kept || bd[k] == (int64_t)d;
            if (!kept)
                newd[nn++] = d;
        }
        for (uint32_t k = 1; k < nb; k++)
            if (bd[k] <= bd[k - 1])
                return spmd_handle_default(cx, hlo, err);
        const ShdSharding *ps = shd_partially_replicate_dims(cx->arena, s, newd, nn);
        if (!ps)
            return spmd_nomem(cx, err);
        op_s = nb == 0 || !shd_is_tiled(ps) ? shd_replicated(cx->arena)
                                             : shd_remove_dims(cx->arena, ps, newd, nn);
        if (!op_s)
            return spmd_handle_default(cx, hlo, err);
    }
    const ShdSharding *targets[1] = {op_s};
    return spmd_handle_with_shardings(cx, hlo, targets, s, err);
}

SlStatus
spmd_handle_reshape(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const IrShape *in = &hlo->operands[0]->shape;
    if (!shd_is_tiled(s) && !shd_is_tiled(spmd_get_value(cx, hlo->operands[0])->sharding))
        return spmd_handle_with_shardings(cx, hlo, (const ShdSharding *[]){s}, s, err);
    /* 1: the operand sharding that maps onto the output sharding */
    const ShdSharding *in_s = shd_is_tiled(s) ? shd_reshape(cx->arena, &hlo->shape, in, s) : s;
    if (in_s && shd_num_tiles(in_s) == shd_num_tiles(s)) {
        IrShape li = spmd_local_shape(cx, in, in_s), lo = spmd_local_shape(cx, &hlo->shape, s);
        if (ir_shape_elem_count(&li) == ir_shape_elem_count(&lo))
            return spmd_handle_with_shardings(cx, hlo, (const ShdSharding *[]){in_s}, s, err);
    }
    /* ... or the output sharding the operand's current sharding maps to */
    const ShdSharding *cur = spmd_get_value(cx, hlo->operands[0])->sharding;
    const ShdSharding *out_s = shd_is_tiled(cur) ? shd_reshape(cx->arena, in, &hlo->shape, cur)
                                                  : NULL;
    if (out_s && shd_num_tiles(out_s) == shd_num_tiles(cur)) {
        IrShape li = spmd_local_shape(cx, in, cur), lo = spmd_local_shape(cx, &hlo->shape, out_s);
        if (ir_shape_elem_count(&li) == ir_shape_elem_count(&lo))
            return spmd_handle_with_shardings(cx, hlo, (const ShdSharding *[]){cur}, out_s, err);
    }
    return spmd_handle_default(cx, hlo, err);
}

SlStatus
spmd_handle_transpose(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const int64_t *perm;
    uint32_t n = ir_instr_ints_attr(hlo, IR_ATTR_DIMENSIONS, &perm);
    const ShdSharding *op_s = s;
    if (shd_is_tiled(s)) {
        int64_t inv[SPMD_MAX_RANK];
        if (n != hlo->shape.rank || n > SPMD_MAX_RANK)
            return spmd_handle_default(cx, hlo, err);
        for (uint32_t k = 0; k < n; k++)
            inv[perm[k]] = k;
        op_s = shd_transpose(cx->arena, s, inv);
        if (!op_s)
            return spmd_handle_default(cx, hlo, err);
    }
    return spmd_handle_with_shardings(cx, hlo, (const ShdSharding *[]){op_s}, s, err);
}

/* Replicates the listed dims of a tiled sharding (identity for non-tiled ones). */
static const ShdSharding *
replicate_dims(SpmdCtx *cx, const ShdSharding *s, const int64_t *dims, uint32_t n)
{
    if (!shd_is_tiled(s) || n == 0)
        return s;
    return shd_partially_replicate_dims(cx->arena, s, dims, n);
}

/* Slicing dim d of a value in sharding `s` without a halo: output tile k (size So) must lie
 * inside input shard k (size Si) for every k. Fills offs[k] (the local start); false if not. */
static bool
aligned_slice(const ShdSharding *s, uint32_t d, int64_t D, IrSliceDim sd, int64_t *offs)
{
    int64_t n = shd_dim_shards(s, d);
    int64_t L = sd.limit - sd.start;
    if (sd.stride != 1 || n <= 1)
        return false;
    int64_t Si = (D + n - 1) / n, So = (L + n - 1) / n;
    for (int64_t k = 0; k < n; k++) {
        int64_t o = sd.start + k * So - k * Si;
        if (k * So >= L)
            o = 0; /* a pure-padding output tile: any data will do */
        if (o < 0 || o + So > Si)
            return false;
        offs[k] = o;
    }
    return true;
}

/* Emits the local slice of `op` (in sharding s) for the aligned case. */
static IrInstr *
local_aligned_slice(SpmdCtx *cx, const IrInstr *hlo, const SpmdValue *op, const ShdSharding *s,
                    int64_t **offs)
{
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_SLICE);
    const IrShape *in = &hlo->operands[0]->shape;
    uint32_t r = in->rank;
    IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
    int64_t lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK];
    bool dynamic = false;
    for (uint32_t d = 0; d < r; d++) {
        IrSliceDim sd = a->u.slice.v[d];
        if (offs[d]) {
            int64_t n = shd_dim_shards(s, d);
            bool same = true;
            for (int64_t k = 1; k < n; k++)
                same = same && offs[d][k] == offs[d][0];
            dynamic = dynamic || !same;
            lo[d] = offs[d][0];
        } else {
            lo[d] = sd.start;
        }
        hi[d] = lo[d] + ls.dims[d];
        if (!offs[d] && sd.stride != 1)
            return NULL; /* strided unsharded dims go through the clone path */
    }
    if (!dynamic) {
        IrInstr *x = spmd_emit_slice(cx, op->hlo, lo, hi);
        return x == op->hlo ? spmd_emit_copy(cx, x) : x; /* never alias another value */
    }
    IrInstr *o[SPMD_MAX_RANK];
    int64_t np = cx->state->num_partitions;
    int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, np);
    int64_t idx[SPMD_MAX_RANK];
    if (!tbl)
        return NULL;
    for (uint32_t d = 0; d < r; d++) {
        if (!offs[d]) {
            o[d] = spmd_emit_constant_scalar(cx, IR_DT_S32, lo[d]);
            continue;
        }
        for (int64_t dev = 0; dev < np; dev++)
            tbl[dev] = shd_tile_index(s, dev, idx) ? offs[d][idx[d]] : 0;
        o[d] = spmd_table_lookup(cx, cx->state, tbl, np, IR_DT_S32);
    }
    return spmd_emit_dynamic_slice(cx, op->hlo, o, ls.dims);
}

SlStatus
spmd_handle_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_SLICE);
    const IrShape *in = &hlo->operands[0]->shape;
    if (!a || a->u.slice.n != in->rank)
        return spmd_handle_default(cx, hlo, err);
    int64_t sliced[SPMD_MAX_RANK];
    uint32_t ns = 0;
    for (uint32_t d = 0; d < in->rank; d++) {
        IrSliceDim sd = a->u.slice.v[d];
        if (sd.start != 0 || sd.limit != in->dims[d] || sd.stride != 1)
            sliced[ns++] = d;
    }
    /* D.5: with the operand's sharding when it has more tiles, else the result's; sliced
     * sharded dims must not need a halo */
    const ShdSharding *cur = spmd_get_value(cx, hlo->operands[0])->sharding;
    const ShdSharding *cands[2] = {shd_is_tiled(cur) &&
                                           shd_num_tiles(cur) > shd_num_tiles(s) ? cur : s, s};
    for (uint32_t c = 0; c < 2 && shd_is_tiled(cands[c]) && ns; c++) {
        const ShdSharding *ts = cands[c];
        int64_t *offs[SPMD_MAX_RANK] = {0};
        bool ok = shd_data_rank(ts) == in->rank;
        for (uint32_t k = 0; k < ns && ok; k++) {
            uint32_t d = (uint32_t)sliced[k];
            if (shd_dim_shards(ts, d) <= 1)
                continue;
            offs[d] = SL_NEW_ARRAY(cx->arena, int64_t, shd_dim_shards(ts, d));
            ok = offs[d] && aligned_slice(ts, d, in->dims[d], a->u.slice.v[d], offs[d]);
        }
        if (!ok)
            continue;
        SpmdValue op;
        SlStatus st = spmd_operand(cx, hlo, 0, ts, &op, err);
        if (st != SL_OK)
            return st;
        IrInstr *local = local_aligned_slice(cx, hlo, &op, ts, offs);
        if (local)
            return spmd_finish(cx, hlo, local, ts, err);
    }
    const ShdSharding *rs = replicate_dims(cx, s, sliced, ns);
    if (!rs)
        return spmd_nomem(cx, err);
    SpmdValue op;
    SlStatus st = spmd_operand(cx, hlo, 0, rs, &op, err);
    if (st != SL_OK)
        return st;
    IrShape ls = spmd_local_shape(cx, &hlo->shape, rs);
    IrInstr *local = spmd_emit_clone(cx, hlo, &ls, &op.hlo, 1);
    if (!local)
        return spmd_nomem(cx, err);
    /* unsliced dims are taken whole from the local shard */
    IrAttr *la = ir_instr_find_attr_mut(local, IR_ATTR_SLICE);
    IrSliceDim *v = la ? SL_DUP_ARRAY(cx->arena, IrSliceDim, a->u.slice.v, in->rank) : NULL;
    if (!v)
        return spmd_nomem(cx, err);
    for (uint32_t d = 0; d < in->rank; d++)
        if (shd_dim_shards(rs, d) > 1)
            v[d] = (IrSliceDim){0, op.hlo->shape.dims[d], 1};
    la->u.slice.v = v;
    return spmd_finish(cx, hlo, local, rs, err);
}

SlStatus
spmd_handle_pad(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_PADDING);
    const IrShape *in = &hlo->operands[0]->shape;
    if (!a || a->u.pad.n != in->rank)
        return spmd_handle_default(cx, hlo, err);
    int64_t padded[SPMD_MAX_RANK];
    uint32_t np = 0;
    for (uint32_t d = 0; d < in->rank; d++) {
        IrPadDim p = a->u.pad.v[d];
        if (p.lo || p.hi || p.interior)
            padded[np++] = d;
    }
    const ShdSharding *rs = replicate_dims(cx, s, padded, np);
    if (!rs)
        return spmd_nomem(cx, err);
    /* uneven unpadded sharded dims would carry garbage between the pieces: only even ones */
    if (shd_is_tiled(rs) && !shd_evenly_partitions(rs, &hlo->shape))
        return spmd_handle_default(cx, hlo, err);
    const ShdSharding *targets[2] = {rs, shd_replicated(cx->arena)};
    return spmd_handle_with_shardings(cx, hlo, targets, rs, err);
}

SlStatus
spmd_handle_reverse(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const int64_t *dims;
    uint32_t n = ir_instr_ints_attr(hlo, IR_ATTR_DIMENSIONS, &dims);
    if (!shd_is_tiled(s))
        return spmd_handle_with_shardings(cx, hlo, (const ShdSharding *[]){s}, s, err);
    /* uneven reversed dims would need the pad-on-left halo exchange: replicate them */
    int64_t uneven[SPMD_MAX_RANK];
    uint32_t nu = 0;
    for (uint32_t k = 0; k < n; k++) {
        int64_t sh = shd_dim_shards(s, (uint32_t)dims[k]);
        if (sh > 1 && hlo->shape.dims[dims[k]] % sh != 0)
            uneven[nu++] = dims[k];
    }
    const ShdSharding *out_s = replicate_dims(cx, s, uneven, nu);
    const ShdSharding *op_s = out_s && shd_is_tiled(out_s)
                                  ? shd_reverse(cx->arena, out_s, dims, n)
                                  : out_s;
    if (!op_s)
        return spmd_handle_default(cx, hlo, err);
    return spmd_handle_with_shardings(cx, hlo, (const ShdSharding *[]){op_s}, out_s, err);
}

SlStatus
spmd_handle_dynamic_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (!shd_is_tiled(s))
        return spmd_handle_default(cx, hlo, err);
    const IrShape *in = &hlo->operands[0]->shape;
    uint32_t r = in->rank;
    if (hlo->n_operands != r + 1)
        return spmd_handle_default(cx, hlo, err);
    int64_t sliced[SPMD_MAX_RANK];
    uint32_t ns = 0;
    for (uint32_t d = 0; d < r; d++)
        if (hlo->shape.dims[d] != in->dims[d])
            sliced[ns++] = d;
    const ShdSharding *rs = replicate_dims(cx, s, sliced, ns);
    if (!rs)
        return spmd_nomem(cx, err);
    IrInstr *ops[SPMD_MAX_RANK + 1];
    SpmdValue v;
    SlStatus st = spmd_operand(cx, hlo, 0, rs, &v, err);
    if (st != SL_OK)
        return st;
    ops[0] = v.hlo;
    const ShdSharding *rep = shd_replicated(cx->arena);
    for (uint32_t d = 0; d < r; d++) {
        if (shd_dim_shards(rs, d) > 1) { /* a whole sharded dim starts at 0 */
            ops[d + 1] = spmd_emit_constant_scalar(cx, hlo->operands[d + 1]->shape.dtype, 0);
        } else {
            st = spmd_operand(cx, hlo, d + 1, rep, &v, err);
            if (st != SL_OK)
                return st;
            ops[d + 1] = v.hlo;
        }
    }
    IrShape ls = spmd_local_shape(cx, &hlo->shape, rs);
    IrInstr *local = spmd_emit_clone(cx, hlo, &ls, ops, r + 1);
    if (!local)
        return spmd_nomem(cx, err);
    IrAttr *sz = ir_instr_find_attr_mut(local, IR_ATTR_DYNAMIC_SLICE_SIZES);
    if (sz) {
        sz->u.ints.v = SL_DUP_ARRAY(cx->arena, int64_t, ls.dims, r ? r : 1);
        sz->u.ints.n = r;
    }
    return spmd_finish(cx, hlo, local, rs, err);
}

SlStatus
spmd_handle_dynamic_update_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (!shd_is_tiled(s))
        return spmd_handle_default(cx, hlo, err);
    const IrShape *upd = &hlo->operands[1]->shape;
    uint32_t r = hlo->shape.rank;
    if (hlo->n_operands != r + 2 || upd->rank != r)
        return spmd_handle_default(cx, hlo, err);
    int64_t sliced[SPMD_MAX_RANK];
    uint32_t ns = 0;
    for (uint32_t d = 0; d < r; d++)
        if (upd->dims[d] != hlo->shape.dims[d])
            sliced[ns++] = d;
    const ShdSharding *rs = replicate_dims(cx, s, sliced, ns);
    if (!rs)
        return spmd_nomem(cx, err);
    IrInstr *ops[SPMD_MAX_RANK + 2];
    SpmdValue v;
    SlStatus st;
    for (uint32_t i = 0; i < 2; i++) {
        st = spmd_operand(cx, hlo, i, rs, &v, err);
        if (st != SL_OK)
            return st;
        ops[i] = v.hlo;
    }
    const ShdSharding *rep = shd_replicated(cx->arena);
    for (uint32_t d = 0; d < r; d++) {
        if (shd_dim_shards(rs, d) > 1) {
            ops[d + 2] = spmd_emit_constant_scalar(cx, hlo->operands[d + 2]->shape.dtype, 0);
        } else {
            st = spmd_operand(cx, hlo, d + 2, rep, &v, err);
            if (st != SL_OK)
                return st;
            ops[d + 2] = v.hlo;
        }
    }
    IrShape ls = spmd_local_shape(cx, &hlo->shape, rs);
    IrInstr *local = spmd_emit_clone(cx, hlo, &ls, ops, r + 2);
    return spmd_finish(cx, hlo, local, rs, err);
}
