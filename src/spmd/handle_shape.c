/* handle_shape.c - data-movement handlers (gspmd.md D.2, D.4, D.5, D.7-D.9, D.19): broadcast,
 * transpose, slice, pad, reverse, dynamic-slice, dynamic-update-slice. Decides operand
 * shardings and local attributes; reshards through handle_common.c / spmd_reshard().
 * Slice, pad and reverse go through the windowed-input reshard (halo.c) and fall back to
 * DefaultAction only when it has no plan. Reshape (D.3) is in handle_reshape.c. */
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

SlStatus
spmd_handle_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
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
        if (local == wi.sharded_input) /* never share the windowed-input result (upstream) */
            local = spmd_emit_copy(cx, local);
        if (!local)
            return spmd_nomem(cx, err);
        return spmd_finish(cx, hlo, local, cands[c], err);
    }
    return spmd_handle_default(cx, hlo, err);
}

/* ReshardDataForPad: the pad as a window (size 1, edge padding, base dilation interior+1);
 * masking is needed where padding shows and the pad value is not a literal zero or the dim
 * is uneven. */
static bool
pad_window(const IrInstr *hlo, const ShdSharding *s, IrWindowDim *win)
{
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_PADDING);
    const IrShape *in = &hlo->operands[0]->shape;
    bool zero = is_zero_constant(hlo->operands[1]), mask = false;
    for (uint32_t d = 0; d < in->rank; d++) {
        IrPadDim p = a->u.pad.v[d];
        int64_t n = shd_dim_shards(s, d);
        win[d] = (IrWindowDim){1, 1, p.lo, p.hi, p.interior + 1, 1, false};
        mask = mask || (n > 1 && (p.lo > 0 || p.hi > 0 || p.interior > 0) &&
                        (!zero || in->dims[d] % n != 0));
    }
    return mask;
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
    IrWindowDim win[SPMD_MAX_RANK];
    bool mask = pad_window(hlo, s, win);
    SpmdWindowedInput wi;
    st = spmd_reshard_as_windowed_input_ex(cx, spmd_get_value(cx, hlo->operands[0]), win, s,
                                           pv.hlo, mask, true, &wi, err);
    if (st == SL_ERR_UNSUPPORTED)
        return spmd_handle_default(cx, hlo, err);
    if (st != SL_OK)
        return st;
    /* PadDataFromWindowReshard: the shard window's padding, then the owned part */
    IrPadDim pads[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < r; d++) {
        const IrWindowDim *w = &wi.shard_window[d];
        pads[d] = (IrPadDim){w->pad_lo, w->pad_hi, w->lhs_dilate - 1};
    }
    IrInstr *local = spmd_emit_pad(cx, wi.sharded_input, pv.hlo, pads);
    if (local && wi.dynamic_slice_index) {
        IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
        local = spmd_emit_dynamic_slice(cx, local, wi.dynamic_slice_index, ls.dims);
    }
    if (local == spmd_get_value(cx, hlo->operands[0])->hlo)
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
