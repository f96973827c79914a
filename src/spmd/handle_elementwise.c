/* handle_elementwise.c - the elementwise family (gspmd.md D.1, D.6, D.18): unary/binary/ternary
 * ops, compare, select, clamp, convert, map, copy, opt-barrier, bitcast-convert, and the
 * "elementwise with dims to replicate" variant for concatenate, cholesky, triangular-solve.
 * Decides target shardings only; handle_common.c does the work. A concatenate of two slices
 * that rotates a value along its sharded dim (upstream's preprocessing turns it into
 * _SPMDInternalOp_RotateRight) is handed to spmd_rotate_right (handle_internal.c). */
#include "spmd/spmd_int.h"

SlStatus
spmd_handle_elementwise(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    uint32_t n = hlo->n_operands;
    const ShdSharding **targets = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n ? n : 1);
    if (!targets)
        return spmd_nomem(cx, err);
    /* D.1: with >= 2 operands all in one sharding, run in that sharding */
    const ShdSharding *common = NULL;
    if (n >= 2 && !ir_shape_is_tuple(&hlo->shape)) {
        for (uint32_t i = 0; i < n; i++) {
            const SpmdValue *v = spmd_get_value(cx, hlo->operands[i]);
            if (!v || v->base_shape->rank != hlo->shape.rank ||
                ir_shape_is_tuple(v->base_shape) || (common && !shd_equal(common, v->sharding))) {
                common = NULL;
                break;
            }
            common = v->sharding;
        }
        if (common && (common->kind == SHD_TUPLE || shd_is_manual(common) != shd_is_manual(s)))
            common = NULL;
    }
    const ShdSharding *run = common ? common : s;
    for (uint32_t i = 0; i < n; i++) {
        const IrShape *os = &hlo->operands[i]->shape;
        bool scalar_bcast = !ir_shape_is_tuple(os) && os->rank != hlo->shape.rank;
        targets[i] = scalar_bcast && shd_is_tiled(run) ? shd_replicated(cx->arena) : run;
    }
    return spmd_handle_with_shardings(cx, hlo, targets, run, err);
}

SlStatus
spmd_handle_elementwise_dims_to_replicate(SpmdCtx *cx, const IrInstr *hlo, const int64_t *dims,
                                          uint32_t n, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    /* Every operand goes to the output's sharding with `dims` replicated. Not the
     * elementwise handler's run-in-the-operands'-common-sharding shortcut: operands that
     * share a sharding tiled along a concat (or triangular) dim cannot run in it. */
    for (uint32_t k = 0; shd_is_tiled(s) && !shd_is_manual_subgroup(s) && k < n; k++) {
        uint32_t c = (uint32_t)dims[k];
        if (shd_dim_shards(s, c) <= 1)
            continue;
        int64_t t = shd_find_tile_move_target(&hlo->shape, s, c, dims, n);
        const ShdSharding *ns = t >= 0 ? shd_move_and_merge_tiles(cx->arena, s, c, (uint32_t)t)
                                       : NULL;
        if (!ns)
            ns = shd_partially_replicate_dims(cx->arena, s, &dims[k], 1);
        if (!ns)
            return spmd_nomem(cx, err);
        s = ns;
    }
    uint32_t no = hlo->n_operands;
    const ShdSharding **targets = SL_NEW_ARRAY(cx->arena, const ShdSharding *, no ? no : 1);
    if (!targets)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < no; i++)
        targets[i] = s;
    return spmd_handle_with_shardings(cx, hlo, targets, s, err);
}

/* x without its chain of single-use copies; NULL when what remains has other users. */
static const IrInstr *
skip_copies(const IrInstr *x)
{
    while (x->op == IR_OP_COPY && x->n_operands == 1 && ir_instr_user_count(x) == 1)
        x = x->operands[0];
    return ir_instr_user_count(x) == 1 ? x : NULL;
}

static const IrSliceDim *
slice_dims(const IrInstr *x)
{
    const IrAttr *a = x && x->op == IR_OP_SLICE ? ir_instr_find_attr(x, IR_ATTR_SLICE) : NULL;
    return a && a->u.slice.n == x->shape.rank ? a->u.slice.v : NULL;
}

/* The rotate-right pattern of upstream's preprocessing: concat(slice(x)[k:n], slice(x)[0:k])
 * along a sharded dim, x shaped and sharded like the result. Returns the amount n - k, or -1. */
static int64_t
rotate_right_amount(SpmdCtx *cx, const IrInstr *hlo, uint32_t dim, const IrInstr **src)
{
    if (hlo->n_operands != 2)
        return -1;
    const IrInstr *lhs = hlo->operands[0], *rhs = hlo->operands[1];
    while (lhs->op == IR_OP_COPY && lhs->n_operands == 1)
        lhs = lhs->operands[0];
    while (rhs->op == IR_OP_COPY && rhs->n_operands == 1)
        rhs = rhs->operands[0];
    const IrSliceDim *ls = slice_dims(lhs), *rs = slice_dims(rhs);
    if (!ls || !rs || lhs->operands[0] != rhs->operands[0])
        return -1;
    const IrInstr *x = lhs->operands[0];
    if (!ir_shape_equal(&x->shape, &hlo->shape, false) ||
        !shd_equal(spmd_sharding_of(cx, x), spmd_sharding_of(cx, hlo)) ||
        ls[dim].stride != 1 || rs[dim].stride != 1 || ls[dim].start != rs[dim].limit)
        return -1;
    /* the use counts (a scan of the computation) only once everything else matched */
    if (skip_copies(hlo->operands[0]) != lhs || skip_copies(hlo->operands[1]) != rhs)
        return -1;
    *src = x;
    return lhs->shape.dims[dim];
}

SlStatus
spmd_handle_concatenate(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const int64_t *dims;
    uint32_t n = ir_instr_ints_attr(hlo, IR_ATTR_DIMENSIONS, &dims);
    if (n != 1)
        return spmd_handle_default(cx, hlo, err);
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const IrInstr *src = NULL;
    if (shd_is_tiled(s) && dims[0] >= 0 && (uint32_t)dims[0] < hlo->shape.rank &&
        shd_dim_shards(s, (uint32_t)dims[0]) > 1) {
        int64_t amount = rotate_right_amount(cx, hlo, (uint32_t)dims[0], &src);
        if (amount >= 0)
            return spmd_rotate_right(cx, hlo, src, (uint32_t)dims[0], amount, err);
    }
    return spmd_handle_elementwise_dims_to_replicate(cx, hlo, dims, 1, err);
}

SlStatus
spmd_handle_cholesky(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    uint32_t r = hlo->shape.rank;
    if (r < 2)
        return spmd_handle_default(cx, hlo, err);
    int64_t dims[2] = {r - 2, r - 1};
    return spmd_handle_elementwise_dims_to_replicate(cx, hlo, dims, 2, err);
}

SlStatus
spmd_handle_bitcast_convert(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const IrShape *in = &hlo->operands[0]->shape;
    uint32_t ro = hlo->shape.rank, ri = in->rank;
    if (ro == ri)
        return spmd_handle_elementwise(cx, hlo, err);
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (!shd_is_tiled(s))
        return spmd_handle_default(cx, hlo, err);
    const ShdSharding *in_s, *out_s;
    if (ro == ri + 1) { /* output grows a trailing bit dim: it must be unsharded */
        int64_t last = ro - 1;
        out_s = shd_partially_replicate_dims(cx->arena, s, &last, 1);
        in_s = out_s && shd_is_tiled(out_s) ? shd_remove_dims(cx->arena, out_s, &last, 1) : out_s;
    } else if (ri == ro + 1) {
        /* The input's trailing dim disappears: it is replicated on the operand's own
         * sharding, the result keeps the operand's other dims and is resharded after. */
        int64_t pos = ri - 1;
        const SpmdValue *ov = spmd_get_value(cx, hlo->operands[0]);
        if (!ov || !shd_is_tiled(ov->sharding)) {
            in_s = out_s = shd_replicated(cx->arena);
        } else {
            in_s = shd_partially_replicate_dims(cx->arena, ov->sharding, &pos, 1);
            out_s = in_s && shd_is_tiled(in_s) ? shd_remove_dims(cx->arena, in_s, &pos, 1)
                                               : in_s;
        }
    } else {
        return spmd_handle_default(cx, hlo, err);
    }
    if (!in_s || !out_s)
        return spmd_handle_default(cx, hlo, err);
    const ShdSharding *targets[1] = {in_s};
    return spmd_handle_with_shardings(cx, hlo, targets, out_s, err);
}
