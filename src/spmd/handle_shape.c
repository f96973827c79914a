/* handle_shape.c - data-movement handlers (gspmd.md D.2, D.4, D.5, D.7-D.9, D.19): broadcast,
 * transpose, slice, pad, reverse, dynamic-slice, dynamic-update-slice. Decides operand
 * shardings and local attributes; reshards through handle_common.c / spmd_reshard().
 * Slice, pad and reverse go through the windowed-input reshard (halo.c) and fall back to
 * DefaultAction only when it has no plan. A replicated dynamic-slice of one row may instead be
 * broadcast by the row's owner (enable_dynamic_slice_collective_broadcast). Reshape (D.3) is
 * in handle_reshape.c. */
#include "spmd/spmd_int.h"

#include <stdint.h>
#include <stdio.h>
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
        SlArenaMark mark = sl_arena_mark(cx->arena);
        const ShdSharding *ps = shd_partially_replicate_dims(cx->arena, s, newd, nn);
        if (!ps)
            return spmd_nomem(cx, err);
        op_s = nb == 0 || !shd_is_tiled(ps) ? shd_replicated(cx->arena)
                                             : shd_remove_dims(cx->arena, ps, newd, nn);
        op_s = spmd_keep_sharding(cx, mark, op_s);
        if (!op_s)
            return spmd_handle_default(cx, hlo, err);
    }
    const ShdSharding *targets[1] = {op_s};
    return spmd_handle_with_shardings(cx, hlo, targets, s, err);
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

/* True for a scalar constant whose literal reads as zero (0, 0.0, -0, false). */
static bool
is_zero_constant(const IrInstr *i)
{
    if (i->op != IR_OP_CONSTANT || i->shape.rank != 0 || i->literal.len == 0)
        return false;
    bool digit = false;
    for (size_t k = 0; k < i->literal.len; k++) {
        char c = i->literal.ptr[k];
        if (c == '0')
            digit = true;
        else if (c != '-' && c != '.' && c != '+')
            return sl_str_eq_cstr(i->literal, "false");
    }
    return digit;
}

/* Local slice of a windowed-input result (SliceDataFromWindowReshard). */
static IrInstr *
slice_from_window(SpmdCtx *cx, const SpmdWindowedInput *wi, const IrSliceDim *sd,
                  uint32_t rank)
{
    int64_t lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK], stride[SPMD_MAX_RANK];
    IrInstr *x = wi->sharded_input;
    for (uint32_t d = 0; d < rank; d++) {
        lo[d] = -wi->shard_window[d].pad_lo;
        hi[d] = x->shape.dims[d] + wi->shard_window[d].pad_hi;
        stride[d] = sd[d].stride;
    }
    return spmd_emit_slice_strided(cx, x, lo, hi, stride);
}

static SlStatus merged_pad_slice(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s,
                                 SlError *err);

SlStatus
spmd_handle_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (shd_is_tiled(s)) {
        SlStatus mst = merged_pad_slice(cx, hlo, s, err);
        if (mst != SL_ERR_UNSUPPORTED)
            return mst;
    }
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_SLICE);
    const IrShape *in = &hlo->operands[0]->shape;
    uint32_t r = in->rank;
    if (!a || a->u.slice.n != r || r > SPMD_MAX_RANK || r == 0)
        return spmd_handle_default(cx, hlo, err);
    /* D.5: a slice is a window of size 1, stride = slice stride, padding -start / limit - D */
    IrWindowDim win[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < r; d++) {
        IrSliceDim sd = a->u.slice.v[d];
        win[d] = (IrWindowDim){1, sd.stride, -sd.start, sd.limit - in->dims[d], 1, 1, false};
    }
    const SpmdValue *op = spmd_get_value(cx, hlo->operands[0]);
    const ShdSharding *cur = op->sharding;
    const ShdSharding *cands[2] = {shd_is_tiled(s) ? s : NULL, NULL};
    if (shd_is_tiled(cur) && shd_data_rank(cur) == r && shd_num_tiles(cur) > shd_num_tiles(s)) {
        cands[0] = cur;
        cands[1] = s;
    }
    IrInstr *zero = spmd_emit_constant_scalar(cx, in->dtype, 0);
    for (uint32_t c = 0; c < 2 && cands[c]; c++) {
        SpmdWindowedInput wi;
        SlStatus st = spmd_reshard_as_windowed_input(cx, op, win, cands[c], zero, false, &wi, err);
        if (st == SL_ERR_UNSUPPORTED)
            continue;
        if (st != SL_OK)
            return st;
        IrInstr *local = slice_from_window(cx, &wi, a->u.slice.v, r);
        const ShdSharding *fs = cands[c];
        if (local && !shd_equal(fs, s)) {
            /* sliced in the operand's sharding: to the slice's own first, as upstream's
             * HandleSliceHelper, so that only a slice that is still the windowed input
             * itself gets the copy below */
            SpmdValue lv = spmd_value(cx, local, &hlo->shape, fs), rv;
            st = spmd_reshard(cx, &lv, s, NULL, &rv, err);
            if (st != SL_OK)
                return st;
            local = rv.hlo;
            fs = s;
        }
        if (local == wi.sharded_input) /* never share the windowed-input result (upstream) */
            local = spmd_emit_copy(cx, local);
        if (!local)
            return spmd_nomem(cx, err);
        return spmd_finish(cx, hlo, local, fs, err);
    }
    return spmd_handle_default(cx, hlo, err);
}

/* ReshardDataForPad: the pad as a window (size 1, edge padding, base dilation interior+1);
 * masking is needed where padding shows and the pad value is not a literal zero or the dim
 * is uneven. */
static bool
pad_window(const IrShape *in, const IrPadDim *pads, bool zero, const ShdSharding *s,
           IrWindowDim *win)
{
    bool mask = false;
    for (uint32_t d = 0; d < in->rank; d++) {
        IrPadDim p = pads[d];
        int64_t n = shd_dim_shards(s, d);
        win[d] = (IrWindowDim){1, 1, p.lo, p.hi, p.interior + 1, 1, false};
        mask = mask || (n > 1 && (p.lo > 0 || p.hi > 0 || p.interior > 0) &&
                        (!zero || in->dims[d] % n != 0));
    }
    return mask;
}

/* PadHelper: `op` padded by `pads` with the replicated scalar `pv`, as the local shard of a
 * result of base shape `out` in sharding `s` (tiled, same rank). SL_ERR_UNSUPPORTED (nothing
 * in err) when the windowed-input reshard has no plan. */
static SlStatus
pad_helper(SpmdCtx *cx, const SpmdValue *op, IrInstr *pv, bool pv_zero, const IrPadDim *pads,
           const IrShape *out, const ShdSharding *s, IrInstr **local, SlError *err)
{
    uint32_t r = op->base_shape->rank;
    if (r == 0 || r > SPMD_MAX_RANK)
        return SL_ERR_UNSUPPORTED;
    IrWindowDim win[SPMD_MAX_RANK];
    bool mask = pad_window(op->base_shape, pads, pv_zero, s, win);
    SpmdWindowedInput wi;
    SlStatus st = spmd_reshard_as_windowed_input_ex(cx, op, win, s, pv, mask, true, &wi, err);
    if (st != SL_OK)
        return st;
    /* PadDataFromWindowReshard: the shard window's padding, then the owned part */
    IrPadDim lp[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < r; d++) {
        const IrWindowDim *w = &wi.shard_window[d];
        lp[d] = (IrPadDim){w->pad_lo, w->pad_hi, w->lhs_dilate - 1};
    }
    IrInstr *x = spmd_emit_pad(cx, wi.sharded_input, pv, lp);
    if (x && wi.dynamic_slice_index) {
        IrShape ls = spmd_local_shape(cx, out, s);
        x = spmd_emit_dynamic_slice(cx, x, wi.dynamic_slice_index, ls.dims);
    }
    *local = x;
    return x ? SL_OK : spmd_nomem(cx, err);
}

/* Upstream's preprocessing merges slice(copy*(pad(x))) into one pad of x when the pad and
 * the slice would each exchange halos on a sharded dim: the merged edge padding is the pad's
 * minus the slice's start (low) and the slice's limit past the padded data (high), either may
 * be negative. SL_ERR_UNSUPPORTED (nothing emitted) when the pattern does not apply. */
static SlStatus
merged_pad_slice(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s, SlError *err)
{
    const IrInstr *pad = hlo->operands[0];
    while (pad->op == IR_OP_COPY && pad->n_operands == 1)
        pad = pad->operands[0];
    const IrAttr *sa = ir_instr_find_attr(hlo, IR_ATTR_SLICE);
    const IrAttr *pa = pad->op == IR_OP_PAD ? ir_instr_find_attr(pad, IR_ATTR_PADDING) : NULL;
    uint32_t r = hlo->shape.rank;
    if (!sa || !pa || r == 0 || r > SPMD_MAX_RANK ||
        sa->u.slice.n != r || pa->u.pad.n != r ||
        !shd_equal(spmd_sharding_of(cx, pad), s) ||
        !shd_equal(spmd_sharding_of(cx, pad->operands[0]), s))
        return SL_ERR_UNSUPPORTED;
    IrPadDim merged[SPMD_MAX_RANK];
    bool multi_halo = false;
    for (uint32_t d = 0; d < r; d++) {
        IrPadDim p = pa->u.pad.v[d];
        IrSliceDim sd = sa->u.slice.v[d];
        if (p.interior != 0 || sd.stride != 1)
            return SL_ERR_UNSUPPORTED;
        multi_halo = multi_halo || (shd_dim_shards(s, d) != 1 && (p.lo != 0 || p.hi != 0) &&
                                    hlo->shape.dims[d] != pad->shape.dims[d]);
        merged[d] = (IrPadDim){p.lo - sd.start, sd.limit - (pad->shape.dims[d] - p.hi), 0};
    }
    if (!multi_halo)
        return SL_ERR_UNSUPPORTED;
    /* the use counts (a scan of the computation) only once everything else matched: the pad
     * and each copy on the way must feed this slice alone */
    for (const IrInstr *x = hlo->operands[0];; x = x->operands[0]) {
        if (ir_instr_user_count(x) != 1)
            return SL_ERR_UNSUPPORTED;
        if (x == pad)
            break;
    }
    const SpmdValue *op = spmd_get_value(cx, pad->operands[0]);
    const SpmdValue *pv0 = spmd_get_value(cx, pad->operands[1]);
    if (!op || !pv0)
        return SL_ERR_UNSUPPORTED;
    SpmdValue pv;
    SlStatus st = spmd_reshard(cx, pv0, shd_replicated(cx->arena), NULL, &pv, err);
    if (st != SL_OK)
        return st;
    IrInstr *local = NULL;
    st = pad_helper(cx, op, pv.hlo, is_zero_constant(pad->operands[1]), merged, &hlo->shape, s,
                    &local, err);
    if (st != SL_OK)
        return st;
    if (local == op->hlo)
        local = spmd_emit_copy(cx, local);
    return local ? spmd_finish(cx, hlo, local, s, err) : spmd_nomem(cx, err);
}

SlStatus
spmd_handle_pad(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_PADDING);
    const IrShape *in = &hlo->operands[0]->shape;
    uint32_t r = in->rank;
    if (!a || a->u.pad.n != r || !shd_is_tiled(s) || r > SPMD_MAX_RANK || r == 0)
        return spmd_handle_default(cx, hlo, err);
    SpmdValue pv;
    SlStatus st = spmd_operand(cx, hlo, 1, shd_replicated(cx->arena), &pv, err);
    if (st != SL_OK)
        return st;
    const SpmdValue *op = spmd_get_value(cx, hlo->operands[0]);
    IrInstr *local = NULL;
    st = pad_helper(cx, op, pv.hlo, is_zero_constant(hlo->operands[1]), a->u.pad.v,
                    &hlo->shape, s, &local, err);
    if (st == SL_ERR_UNSUPPORTED)
        return spmd_handle_default(cx, hlo, err);
    if (st != SL_OK)
        return st;
    if (local == op->hlo)
        local = spmd_emit_copy(cx, local);
    if (!local)
        return spmd_nomem(cx, err);
    return spmd_finish(cx, hlo, local, s, err);
}

/* HaloExchangeToPadOnLeft: shift uneven reversed dims so that the padding sits on the left. */
static SlStatus
pad_on_left(SpmdCtx *cx, const SpmdValue *v, const int64_t *dims, uint32_t n, IrInstr **out,
            SlError *err)
{
    const IrShape *base = v->base_shape;
    IrWindowDim win[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < base->rank; d++) {
        win[d] = (IrWindowDim){1, 1, 0, 0, 1, 1, false};
        int64_t sh = shd_dim_shards(v->sharding, d);
        for (uint32_t k = 0; k < n; k++)
            if (dims[k] == (int64_t)d && sh > 1)
                win[d].pad_lo = (base->dims[d] + sh - 1) / sh * sh - base->dims[d];
    }
    SpmdWindowedInput wi;
    SlStatus st = spmd_reshard_as_windowed_input(
        cx, v, win, v->sharding, spmd_emit_constant_scalar(cx, base->dtype, 0), false, &wi, err);
    if (st == SL_OK && wi.dynamic_slice_index)
        return SL_ERR_UNSUPPORTED;
    *out = st == SL_OK ? wi.sharded_input : NULL;
    return st;
}

SlStatus
spmd_handle_reverse(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const int64_t *dims;
    uint32_t n = ir_instr_ints_attr(hlo, IR_ATTR_DIMENSIONS, &dims);
    if (!shd_is_tiled(s) || hlo->shape.rank > SPMD_MAX_RANK)
        return spmd_handle_default(cx, hlo, err);
    const ShdSharding *op_s = shd_reverse(cx->arena, s, dims, n);
    if (!op_s)
        return spmd_handle_default(cx, hlo, err);
    SpmdValue op;
    SlStatus st = spmd_operand(cx, hlo, 0, op_s, &op, err);
    if (st != SL_OK)
        return st;
    IrInstr *left = NULL;
    st = pad_on_left(cx, &op, dims, n, &left, err);
    if (st == SL_ERR_UNSUPPORTED)
        return spmd_handle_default(cx, hlo, err);
    if (st != SL_OK)
        return st;
    IrInstr *local = spmd_emit_clone(cx, hlo, &left->shape, &left, 1);
    if (!local)
        return spmd_nomem(cx, err);
    return spmd_finish(cx, hlo, local, s, err);
}

/* ---- dynamic-slice by collective-broadcast ---------------------------------------------- */

/* The one dim a replicated dynamic-slice takes a single row of, its owners (owner[i]: the
 * device holding row block i) and the operand's local value, when XLA's option applies: the
 * operand tiled only on that dim, one tile per partition (no replication, at most the option's
 * limit), evenly, and that dim's index an s32 scalar. */
typedef struct DsBroadcast {
    uint32_t dim;
    int64_t n;      /* tiles on `dim` == partitions */
    int64_t *owner; /* n device ids, by tile index */
    const SpmdValue *in;
} DsBroadcast;

static bool
ds_broadcast_plan(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s, DsBroadcast *p)
{
    const IrShape *in = &hlo->operands[0]->shape;
    uint32_t r = in->rank, ns = 0;
    if (!cx->opts->enable_dynamic_slice_collective_broadcast || !shd_is_replicated(s) ||
        !ir_shape_is_array(&hlo->shape) || !ir_shape_is_array(in) || hlo->n_operands != r + 1 ||
        r > SPMD_MAX_RANK)
        return false;
    for (uint32_t d = 0; d < r; d++)
        if (hlo->shape.dims[d] != in->dims[d]) {
            p->dim = d;
            ns++;
        }
    if (ns != 1 || hlo->shape.dims[p->dim] != 1)
        return false;
    const IrShape *ix = &hlo->operands[p->dim + 1]->shape;
    p->in = spmd_get_value(cx, hlo->operands[0]);
    if (!ir_shape_is_array(ix) || ix->rank != 0 || ix->dtype != IR_DT_S32 || !p->in)
        return false;
    const ShdSharding *is = p->in->sharding;
    int64_t np = cx->state->num_partitions, len = in->dims[p->dim];
    if (!shd_is_tiled(is) || is->n_subgroups != 0 || shd_device_count(is) != np || len > INT32_MAX)
        return false;
    p->n = shd_dim_shards(is, p->dim);
    if (p->n <= 1 || p->n != np ||
        p->n > cx->opts->max_dynamic_slice_collective_broadcast_partitions || len % p->n != 0)
        return false;
    p->owner = SL_NEW_ARRAY(cx->arena, int64_t, p->n);
    if (!p->owner)
        return false;
    for (int64_t t = 0; t < p->n; t++)
        p->owner[t] = -1;
    for (int64_t dev = 0; dev < np; dev++) { /* other dims unsharded: index[d] says it all */
        int64_t idx[SPMD_MAX_RANK];
        if (!shd_tile_index(is, dev, idx) || idx[p->dim] < 0 || idx[p->dim] >= p->n ||
            p->owner[idx[p->dim]] != -1)
            return false;
        p->owner[idx[p->dim]] = dev;
    }
    return true;
}

/* Branch `k` of the conditional: parameter "operand" (the local slice), root a
 * collective-broadcast from owner[k] to every other partition. */
static IrComputation *
ds_broadcast_branch(SpmdCtx *cx, const DsBroadcast *p, int64_t k, const IrShape *slice)
{
    char name[64];
    snprintf(name, sizeof(name), "dynamic_slice_collective_broadcast_owner_%lld", (long long)k);
    SlSym nm = spmd_unique_name(cx, sl_str(name));
    IrComputation *c = nm ? ir_computation_new(cx->out, nm) : NULL;
    IrShape ps = ir_shape_clone(cx->arena, slice);
    IrInstr *pi = c ? ir_instr_new(cx->out, IR_OP_PARAMETER, &ps, NULL, 0) : NULL;
    IrReplicaGroups *g = SL_NEW(cx->arena, IrReplicaGroups);
    uint32_t *size = SL_NEW(cx->arena, uint32_t);
    int64_t *ids = SL_NEW_ARRAY(cx->arena, int64_t, p->n);
    if (!pi || !g || !size || !ids)
        return NULL;
    ids[0] = p->owner[k];
    for (int64_t t = 0, w = 1; t < p->n; t++)
        if (t != k)
            ids[w++] = p->owner[t];
    *size = (uint32_t)p->n;
    *g = (IrReplicaGroups){.n_groups = 1, .group_sizes = size, .ids = ids};
    pi->parameter_number = 0;
    IrComputation *saved = cx->comp;
    cx->comp = c;
    IrInstr *param = spmd_emit(cx, pi, "operand");
    const char *cause = cx->coll_cause;
    cx->coll_cause = "dynamic-slice";
    c->root = param ? spmd_coll_broadcast(cx, cx->state, param, g) : NULL;
    cx->coll_cause = cause;
    cx->comp = saved;
    return c->root && ir_module_add_computation(cx->out, c) == SL_OK ? c : NULL;
}

/* XLA's TryDynamicSliceWithCollectiveBroadcast: each partition slices its own block at the
 * clamped index's offset within the owning block, and a conditional on the owner's block
 * index runs the branch in which that owner broadcasts its row to everyone. */
static SlStatus
ds_broadcast(SpmdCtx *cx, const IrInstr *hlo, const DsBroadcast *p, SlError *err)
{
    const IrShape *in = &hlo->operands[0]->shape;
    uint32_t r = in->rank, d = p->dim;
    int64_t len = in->dims[d];
    SpmdValue v;
    SlStatus st = spmd_operand(cx, hlo, d + 1, shd_replicated(cx->arena), &v, err);
    if (st != SL_OK)
        return st;
    IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
    IrInstr *last = spmd_emit_constant_scalar(cx, IR_DT_S32, len - 1);
    IrInstr *cl[3] = {zero, v.hlo, last};
    IrInstr *idx = zero && last ? spmd_emit_op(cx, IR_OP_CLAMP, &v.hlo->shape, cl, 3) : NULL;
    IrInstr *block = spmd_emit_constant_scalar(cx, IR_DT_S32, len / p->n);
    IrInstr *owner = spmd_emit_binary(cx, IR_OP_DIVIDE, idx, block);
    IrInstr *start = spmd_emit_binary(cx, IR_OP_MULTIPLY, owner, block);
    IrInstr *local = spmd_emit_binary(cx, IR_OP_SUBTRACT, idx, start);
    IrInstr *starts[SPMD_MAX_RANK];
    for (uint32_t k = 0; k < r; k++)
        starts[k] = k == d ? local : zero;
    IrInstr *slice =
        local ? spmd_emit_dynamic_slice(cx, p->in->hlo, starts, hlo->shape.dims) : NULL;
    IrComputation **br = SL_NEW_ARRAY(cx->arena, IrComputation *, p->n);
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, p->n + 1);
    if (!slice || !br || !ops)
        return spmd_nomem(cx, err);
    ops[0] = owner;
    for (int64_t k = 0; k < p->n; k++) {
        if (!(br[k] = ds_broadcast_branch(cx, p, k, &slice->shape)))
            return spmd_nomem(cx, err);
        ops[k + 1] = slice;
    }
    IrShape cs = ir_shape_clone(cx->arena, &hlo->shape);
    IrInstr *c = ir_instr_new(cx->out, IR_OP_CONDITIONAL, &cs, ops, (uint32_t)p->n + 1);
    IrAttr *a = c ? ir_instr_add_attr(cx->out, c, IR_ATTR_BRANCH_COMPUTATIONS) : NULL;
    if (!a)
        return spmd_nomem(cx, err);
    a->u.comps.n = (uint32_t)p->n;
    a->u.comps.v = br;
    IrInstr *res = spmd_emit(cx, c, NULL);
    if (!res)
        return spmd_nomem(cx, err);
    if (cx->trace->ops->decision) {
        static const char *const alt[] = {"all-gather"};
        TraceKV nums[] = {{"branches", (double)p->n, NULL}};
        TraceDecision dd = {hlo, "dynamic-slice", "collective-broadcast",
                            "replicated row of an operand tiled one block per partition: the "
                            "block's owner broadcasts the row instead of all-gathering the operand",
                            alt, 1, nums, 1};
        cx->trace->ops->decision(cx->trace, &dd);
    }
    return spmd_finish(cx, hlo, res, shd_replicated(cx->arena), err);
}

SlStatus
spmd_handle_dynamic_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    DsBroadcast bp = {0};
    if (ds_broadcast_plan(cx, hlo, s, &bp))
        return ds_broadcast(cx, hlo, &bp, err);
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

/* Value of a scalar integer constant (the DUS analysis only reads start indices). */
static bool
const_scalar_int(const IrInstr *i, int64_t *out)
{
    char k = ir_dtype_kind(i->shape.dtype);
    if (i->op != IR_OP_CONSTANT || i->shape.rank != 0 || (k != 'S' && k != 'U') ||
        i->literal.len == 0 || i->literal.len > 20)
        return false;
    const char *c = i->literal.ptr, *e = c + i->literal.len;
    bool neg = *c == '-';
    c += neg || *c == '+';
    if (c == e)
        return false;
    int64_t v = 0;
    for (; c < e; c++) {
        if (*c < '0' || *c > '9' || v > (INT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (*c - '0');
    }
    *out = neg ? -v : v;
    return true;
}

/* XLA's debug option xla_enable_enzyme_comms_opt (`--set enable_enzyme_opt=true`). */
static bool
enzyme_opt(const SpmdCtx *cx)
{
    return cx->opts->enable_enzyme_opt;
}

typedef enum DusMethod { DUS_DEFAULT, DUS_SINGLE_PARTITION, DUS_CONSTANT_INDICES } DusMethod;

/* AnalyzeDynamicUpdateSlice: which DUS method applies. Slice dims are those the update does
 * not cover; the update stays on one partition when every partitioned slice dim has size 1
 * or a constant start whose first and last element fall into the same (ceil-sized) shard.
 * The constant-indices method (all starts constant and in bounds) runs only under the
 * enzyme option, which also counts partitioned full-size dims against a single partition. */
static DusMethod
dus_analyze(const SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s, int64_t *starts)
{
    const IrShape *upd = &hlo->operands[1]->shape;
    bool enzyme = enzyme_opt(cx), single = true, dynamic = false, any_partitioned = false;
    for (uint32_t d = 0; d < hlo->shape.rank; d++) {
        int64_t n = shd_dim_shards(s, d), full = hlo->shape.dims[d];
        bool is_const = const_scalar_int(hlo->operands[d + 2], &starts[d]);
        if (upd->dims[d] == full) {
            if (enzyme && n != 1) {
                single = false;
                dynamic = dynamic || !is_const;
            }
            continue;
        }
        if (n == 1)
            continue;
        any_partitioned = true;
        if (upd->dims[d] == 1)
            continue;
        if (!is_const) {
            single = false;
            dynamic = true;
            continue;
        }
        int64_t per = (full + n - 1) / n;
        if (starts[d] / per != (starts[d] + upd->dims[d] - 1) / per)
            single = false;
    }
    DusMethod m;
    if (!any_partitioned)
        m = DUS_DEFAULT;
    else if (enzyme && !dynamic)
        m = DUS_CONSTANT_INDICES;
    else if (single)
        m = DUS_SINGLE_PARTITION;
    else
        m = dynamic || !enzyme ? DUS_DEFAULT : DUS_CONSTANT_INDICES;
    if (m != DUS_CONSTANT_INDICES)
        return m;
    for (uint32_t d = 0; d < hlo->shape.rank; d++) { /* every start constant and in bounds */
        if (!const_scalar_int(hlo->operands[d + 2], &starts[d]) || starts[d] < 0 ||
            starts[d] + upd->dims[d] > hlo->shape.dims[d])
            return DUS_DEFAULT;
    }
    return m;
}

/* Replicated start index of dim d (zero for dims the update covers). */
static SlStatus
dus_index(SpmdCtx *cx, const IrInstr *hlo, uint32_t d, IrInstr **out, SlError *err)
{
    const IrInstr *idx = hlo->operands[d + 2];
    if (hlo->operands[1]->shape.dims[d] == hlo->shape.dims[d]) {
        *out = spmd_emit_constant_scalar(cx, idx->shape.dtype, 0);
        return *out ? SL_OK : spmd_nomem(cx, err);
    }
    SpmdValue v;
    SlStatus st = spmd_operand(cx, hlo, d + 2, shd_replicated(cx->arena), &v, err);
    *out = v.hlo;
    return st;
}

/* HandleDUSSinglePartitionUpdate: input and result keep the DUS sharding; the update is
 * replicated along the slice dims. Each partitioned slice dim gets its start shifted into the
 * local shard when the start lies in this partition's range (else 0), and a select keeps the
 * input on partitions outside the range. */
static SlStatus
dus_single_partition(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s,
                     const int64_t *sliced, uint32_t ns, SlError *err)
{
    uint32_t r = hlo->shape.rank;
    const ShdSharding *us = replicate_dims(cx, s, sliced, ns);
    if (!us)
        return spmd_nomem(cx, err);
    SpmdValue in, upd;
    SlStatus st = spmd_operand(cx, hlo, 0, s, &in, err);
    if (st == SL_OK)
        st = spmd_operand(cx, hlo, 1, us, &upd, err);
    if (st != SL_OK)
        return st;
    IrInstr *idx[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < r; d++)
        if ((st = dus_index(cx, hlo, d, &idx[d], err)) != SL_OK)
            return st;
    IrInstr *all = spmd_emit_constant_scalar(cx, IR_DT_PRED, 1);
    for (uint32_t k = 0; k < ns && all; k++) {
        uint32_t d = (uint32_t)sliced[k];
        if (shd_dim_shards(s, d) == 1)
            continue;
        IrDtype it = idx[d]->shape.dtype;
        IrInstr *i32 = it == IR_DT_S32 ? idx[d] : spmd_emit_convert(cx, idx[d], IR_DT_S32);
        IrInstr *size = spmd_emit_constant_scalar(cx, IR_DT_S32, in.hlo->shape.dims[d]);
        IrInstr *ord = spmd_partition_ordinal(cx, cx->state, s, d);
        IrInstr *lo = spmd_emit_binary(cx, IR_OP_MULTIPLY, ord, size);
        IrInstr *next = spmd_emit_binary(cx, IR_OP_ADD, ord,
                                         spmd_emit_constant_scalar(cx, IR_DT_S32, 1));
        IrInstr *hi = spmd_emit_binary(cx, IR_OP_MULTIPLY, next, size);
        /* one emit per statement: argument evaluation order would reorder the output */
        IrInstr *ge = spmd_emit_compare(cx, i32, lo, "GE");
        IrInstr *lt = spmd_emit_compare(cx, i32, hi, "LT");
        IrInstr *within = spmd_emit_binary(cx, IR_OP_AND, ge, lt);
        all = spmd_emit_binary(cx, IR_OP_AND, all, within);
        IrInstr *shifted = spmd_emit_binary(cx, IR_OP_SUBTRACT, i32, lo);
        IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        IrInstr *local = spmd_emit_select(cx, within, shifted, zero);
        idx[d] = it == IR_DT_S32 ? local : spmd_emit_convert(cx, local, it);
        if (!idx[d])
            return spmd_nomem(cx, err);
    }
    IrInstr *dus = all ? spmd_emit_dus(cx, in.hlo, upd.hlo, idx) : NULL;
    IrShape ps = dus ? ir_shape_make(cx->arena, IR_DT_PRED, dus->shape.dims, r) : (IrShape){0};
    IrInstr *mask = dus ? spmd_emit_broadcast(cx, all, &ps, NULL, 0) : NULL;
    IrInstr *res = mask ? spmd_emit_select(cx, mask, dus, in.hlo) : NULL;
    if (!res)
        return spmd_nomem(cx, err);
    return spmd_finish(cx, hlo, res, s, err);
}

/* A local instruction holding `x` (base shape `base`, replicated) padded by `pads` into the
 * local shard of `out` in `s`: PadHelper, else the full pad sliced to the shard. */
static SlStatus
dus_pad(SpmdCtx *cx, const SpmdValue *x, IrInstr *pv, bool pv_zero, const IrPadDim *pads,
        const IrShape *out, const ShdSharding *s, IrInstr **local, SlError *err)
{
    SlStatus st = pad_helper(cx, x, pv, pv_zero, pads, out, s, local, err);
    if (st != SL_ERR_UNSUPPORTED)
        return st;
    SpmdValue rep;
    if ((st = spmd_replicate(cx, x, &rep, err)) != SL_OK)
        return st;
    IrInstr *full = spmd_emit_pad(cx, rep.hlo, pv, pads);
    if (!full)
        return spmd_nomem(cx, err);
    SpmdValue fv = spmd_value(cx, full, out, shd_replicated(cx->arena)), sv;
    if ((st = spmd_reshard(cx, &fv, s, NULL, &sv, err)) != SL_OK)
        return st;
    *local = sv.hlo;
    return SL_OK;
}

/* A reverse of local `x` over the dims set in `mask` (x itself when none). */
static IrInstr *
emit_reverse(SpmdCtx *cx, IrInstr *x, uint64_t mask)
{
    int64_t dims[SPMD_MAX_RANK];
    uint32_t n = 0;
    for (uint32_t d = 0; x && d < x->shape.rank; d++)
        if (mask >> d & 1)
            dims[n++] = d;
    if (!x || n == 0)
        return x;
    IrInstr *i = ir_instr_new(cx->out, IR_OP_REVERSE, &x->shape, &x, 1);
    IrAttr *a = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_DIMENSIONS) : NULL;
    int64_t *v = SL_DUP_ARRAY(cx->arena, int64_t, dims, n);
    if (!a || !v)
        return NULL;
    a->u.ints.n = n;
    a->u.ints.v = v;
    return spmd_emit(cx, i, NULL);
}

/* Slice and pad (local, per dim) that place the update of a DUS on its input's shards. */
typedef struct DusPlace {
    int64_t start[SPMD_MAX_RANK], limit[SPMD_MAX_RANK];
    IrPadDim pad[SPMD_MAX_RANK];
} DusPlace;

/* Where a dim of the slice's operand goes when position `ss` lands on the DUS start `ds`:
 * what falls before 0 or past the DUS dim is sliced off, the rest is padded out (XLA's
 * new_slice_starts / padding_config2). Sets *needs_pad when padding is needed. */
static void
dus_place_whole(DusPlace *pl, uint32_t d, int64_t ss, int64_t ds, int64_t operand,
                int64_t full, bool *needs_pad)
{
    int64_t len = operand;
    pl->start[d] = 0;
    pl->limit[d] = operand;
    pl->pad[d] = (IrPadDim){0, 0, 0};
    if (ss > ds) {
        pl->start[d] = ss - ds;
        len -= pl->start[d];
    } else {
        pl->pad[d].lo = ds - ss;
        *needs_pad = *needs_pad || ss != ds;
    }
    int64_t end = pl->pad[d].lo + len;
    if (end > full) {
        pl->limit[d] -= end - full;
    } else {
        *needs_pad = *needs_pad || end != full;
        pl->pad[d].hi = full - end;
    }
}

/* Sharded dim d of the communication-free placement: the slice's operand is sharded like the
 * DUS, and either lines up with it exactly (same start, same size) or the slice and the DUS
 * range both lie in one shard of the same index. False when neither holds. */
static bool
dus_place_sharded(DusPlace *pl, uint32_t d, int64_t ss, int64_t ds, int64_t size,
                  int64_t operand, int64_t full, int64_t oss, int64_t iss)
{
    if (ss == ds && operand == full) {
        pl->start[d] = 0;
        pl->limit[d] = oss;
        pl->pad[d] = (IrPadDim){0, 0, 0};
        return true;
    }
    if (oss <= 0 || iss <= 0 || ss / oss != (ss + size - 1) / oss ||
        ds / iss != (ds + size - 1) / iss || ss / oss != ds / iss)
        return false;
    pl->start[d] = ss % oss;
    pl->limit[d] = pl->start[d] + size;
    pl->pad[d] = (IrPadDim){ds % iss, iss - (ds % iss + size), 0};
    return true;
}

/* ProcessUpdatePieceExtractOperand, slice leaf: when the update is a stride-1 slice (through
 * copies and reverses of unsharded dims) of a value sharded exactly like the DUS, and every
 * sharded dim places communication-free, the update on each shard is a local slice of that
 * value's shard, padded to the shard shape (garbage outside the update box is masked off by
 * the caller's select). SL_ERR_UNSUPPORTED (nothing emitted) otherwise. */
static SlStatus
dus_slice_update(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s, const int64_t *starts,
                 IrInstr *zero, IrInstr **out, SlError *err)
{
    uint32_t r = hlo->shape.rank;
    const IrInstr *piece = hlo->operands[1], *leaf = piece;
    uint64_t rev = 0;
    for (; leaf->op == IR_OP_COPY || leaf->op == IR_OP_REVERSE; leaf = leaf->operands[0]) {
        const int64_t *rd;
        uint32_t nr = leaf->op == IR_OP_REVERSE ? ir_instr_ints_attr(leaf, IR_ATTR_DIMENSIONS, &rd)
                                                : 0;
        for (uint32_t k = 0; k < nr; k++)
            if (rd[k] >= 0 && rd[k] < (int64_t)r)
                rev ^= UINT64_C(1) << rd[k];
    }
    const IrAttr *sa = leaf->op == IR_OP_SLICE ? ir_instr_find_attr(leaf, IR_ATTR_SLICE) : NULL;
    const IrInstr *src = sa ? leaf->operands[0] : NULL;
    const SpmdValue *rv = sa ? spmd_get_value(cx, src) : NULL;
    if (!sa || sa->u.slice.n != r || src->shape.rank != r || !rv || !shd_equal(rv->sharding, s))
        return SL_ERR_UNSUPPORTED;
    DusPlace pl;
    bool needs_pad = false;
    IrShape in_local = spmd_local_shape(cx, &hlo->shape, s);
    IrShape op_local = spmd_local_shape(cx, &src->shape, s);
    if (!in_local.dims && r)
        return spmd_nomem(cx, err);
    for (uint32_t d = 0; d < r; d++) {
        const IrSliceDim *sd = &sa->u.slice.v[d];
        int64_t opd = src->shape.dims[d], ss = rev >> d & 1 ? opd - sd->limit : sd->start;
        bool sharded = shd_dim_shards(s, d) > 1;
        if (sd->stride != 1 || (sharded && rev >> d & 1))
            return SL_ERR_UNSUPPORTED;
        dus_place_whole(&pl, d, ss, starts[d], opd, hlo->shape.dims[d], &needs_pad);
        if (sharded && !dus_place_sharded(&pl, d, ss, starts[d], piece->shape.dims[d], opd,
                                          hlo->shape.dims[d], op_local.dims[d],
                                          in_local.dims[d]))
            return SL_ERR_UNSUPPORTED;
    }
    IrInstr *x = emit_reverse(cx, rv->hlo, rev);
    bool local_pad = false;
    for (uint32_t d = 0; d < r; d++)
        local_pad = local_pad || pl.pad[d].lo > 0 || pl.pad[d].hi > 0;
    x = spmd_emit_slice(cx, x, pl.start, pl.limit);
    if (x && (local_pad || needs_pad))
        x = spmd_emit_pad(cx, x, zero, pl.pad);
    if (!x)
        return spmd_nomem(cx, err);
    if (SL_NEVER(!ir_shape_equal(&x->shape, &in_local, false)))
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "placed update does not fit the shard");
    if (cx->trace->ops->decision) {
        TraceDecision dd = {hlo, "dynamic-update-slice", "slice-update-local",
                            "the update is a slice of a value sharded like the result: each "
                            "shard slices and pads its own piece",
                            NULL, 0, NULL, 0};
        cx->trace->ops->decision(cx->trace, &dd);
    }
    *out = x;
    return SL_OK;
}

/* HandleDUSAllPartitionedSliceDimsHaveConstantIndices (the general piece): no collectives.
 * A pred mask (false on the update's box, true elsewhere) and the update padded by zeros to
 * the full shape are both built shard-locally by the pad partitioner; the result selects the
 * input where the mask is true. */
static SlStatus
dus_constant_indices(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s,
                     const int64_t *starts, SlError *err)
{
    uint32_t r = hlo->shape.rank;
    const IrShape *us = &hlo->operands[1]->shape;
    IrPadDim pads[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < r; d++)
        pads[d] = (IrPadDim){starts[d], hlo->shape.dims[d] - starts[d] - us->dims[d], 0};
    SpmdValue in;
    SlStatus st = spmd_operand(cx, hlo, 0, s, &in, err);
    if (st != SL_OK)
        return st;
    IrShape upred = ir_shape_make(cx->arena, IR_DT_PRED, us->dims, r);
    IrShape *ubase = SL_NEW(cx->arena, IrShape), *obase = SL_NEW(cx->arena, IrShape);
    IrInstr *f = spmd_emit_constant_scalar(cx, IR_DT_PRED, 0);
    IrInstr *zeros = f && ubase && obase ? spmd_emit_broadcast(cx, f, &upred, NULL, 0) : NULL;
    IrInstr *one = spmd_emit_constant_scalar(cx, IR_DT_PRED, 1);
    IrInstr *zero = spmd_emit_constant_scalar(cx, hlo->shape.dtype, 0);
    if (!zeros || !one || !zero)
        return spmd_nomem(cx, err);
    *ubase = upred;
    *obase = ir_shape_make(cx->arena, IR_DT_PRED, hlo->shape.dims, r);
    SpmdValue zv = spmd_value(cx, zeros, ubase, shd_replicated(cx->arena));
    IrInstr *mask = NULL, *padded = NULL;
    if ((st = dus_pad(cx, &zv, one, false, pads, obase, s, &mask, err)) != SL_OK)
        return st;
    st = dus_slice_update(cx, hlo, s, starts, zero, &padded, err);
    const SpmdValue *uv = spmd_get_value(cx, hlo->operands[1]);
    if (st == SL_ERR_UNSUPPORTED)
        st = dus_pad(cx, uv, zero, true, pads, &hlo->shape, s, &padded, err);
    if (st != SL_OK)
        return st;
    IrInstr *res = spmd_emit_select(cx, mask, in.hlo, padded);
    if (!res)
        return spmd_nomem(cx, err);
    return spmd_finish(cx, hlo, res, s, err);
}

SlStatus
spmd_handle_dynamic_update_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (!shd_is_tiled(s))
        return spmd_handle_default(cx, hlo, err);
    const IrShape *upd = &hlo->operands[1]->shape;
    uint32_t r = hlo->shape.rank;
    if (hlo->n_operands != r + 2 || upd->rank != r || r > SPMD_MAX_RANK)
        return spmd_handle_default(cx, hlo, err);
    int64_t sliced[SPMD_MAX_RANK], starts[SPMD_MAX_RANK];
    uint32_t ns = 0;
    for (uint32_t d = 0; d < r; d++)
        if (upd->dims[d] != hlo->shape.dims[d])
            sliced[ns++] = d;
    DusMethod m = dus_analyze(cx, hlo, s, starts);
    if (m == DUS_CONSTANT_INDICES)
        return dus_constant_indices(cx, hlo, s, starts, err);
    if (m == DUS_SINGLE_PARTITION)
        return dus_single_partition(cx, hlo, s, sliced, ns, err);
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
