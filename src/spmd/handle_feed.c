/* handle_feed.c - infeed whose data does not partition evenly (gspmd.md D.0; upstream
 * HandleInfeed). Owns: the per-partition unpadded shapes, grouping partitions with the same
 * shape into branches, and the conditional whose branch k runs the infeed with branch k's
 * shape and pads it to the shard shape. Does not own: the even case and single-device
 * infeeds (spmd_handle_default), the token (its producer's value).
 * Invariants: nothing is emitted before the shapes are known to be supported; emission only
 * through spmd_emit() and the builders. */
#include "spmd/spmd_int.h"

#include <stdio.h>
#include <string.h>

#define FEED_MAX_LEAVES 64

/* MakeNonPaddedShapeForGivenPartition over the leaves of `shape` from *leaf on. */
static bool
part_shape(SpmdCtx *cx, const IrShape *shape, const ShdSharding *s, uint32_t *leaf, int64_t dev,
           IrShape *out)
{
    if (shape->dtype == IR_DT_TUPLE) {
        *out = ir_shape_clone(cx->arena, shape);
        for (uint32_t k = 0; k < shape->n_elems; k++)
            if (!part_shape(cx, &shape->elems[k], s, leaf, dev, &out->elems[k]))
                return false;
        return true;
    }
    const ShdSharding *l = shd_leaf(s, (*leaf)++);
    int64_t owner = -1;
    *out = ir_shape_clone(cx->arena, shape);
    if (!l || shd_is_replicated(l) || !ir_shape_is_array(shape))
        return l != NULL;
    if (shd_unique_device(l, &owner)) {
        if (owner != dev)
            *out = ir_shape_make(cx->arena, IR_DT_TUPLE, NULL, 0);
        return true;
    }
    if (!shd_is_tiled(l) || shd_data_rank(l) != shape->rank)
        return false;
    for (uint32_t d = 0; d < shape->rank; d++)
        out->dims[d] = shd_tile_extent(l, shape, d, dev);
    return true;
}

/* Branch k's infeed element padded to the shard shape `want` (PadToShape / CreateZero). */
static IrInstr *
pad_to(SpmdCtx *cx, IrInstr *x, const IrShape *want)
{
    if (!x || ir_shape_equal(&x->shape, want, false))
        return x;
    if (want->dtype == IR_DT_TUPLE) {
        IrInstr *el[FEED_MAX_LEAVES];
        if (want->n_elems > FEED_MAX_LEAVES)
            return NULL;
        bool empty = x->shape.dtype == IR_DT_TUPLE && x->shape.n_elems == 0;
        for (uint32_t k = 0; k < want->n_elems; k++) {
            IrInstr *g = empty ? NULL : spmd_emit_gte(cx, x, k);
            el[k] = empty ? pad_to(cx, spmd_emit_zero_like(cx, &want->elems[k]), &want->elems[k])
                          : pad_to(cx, g, &want->elems[k]);
            if (!el[k])
                return NULL;
        }
        return spmd_emit_tuple(cx, el, want->n_elems);
    }
    if (x->shape.dtype == IR_DT_TUPLE)
        return spmd_emit_zero_like(cx, want);
    IrPadDim pads[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < want->rank && d < SPMD_MAX_RANK; d++)
        pads[d] = (IrPadDim){0, want->dims[d] - x->shape.dims[d], 0};
    return spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, want->dtype, 0), pads);
}

/* One branch: parameter token, infeed with `shape`, data padded to `shard`. */
static IrComputation *
branch(SpmdCtx *cx, const IrInstr *hlo, const IrShape *shape, const IrShape *shard,
       const IrShape *token, uint32_t k)
{
    char name[48];
    snprintf(name, sizeof(name), "infeed_branch_%u", k);
    SlSym nm = ir_module_unique_name(cx->out, sl_str(name));
    IrComputation *c = nm ? ir_computation_new(cx->out, nm) : NULL;
    IrShape ps = ir_shape_clone(cx->arena, token);
    IrInstr *pi = c ? ir_instr_new(cx->out, IR_OP_PARAMETER, &ps, NULL, 0) : NULL;
    if (!pi)
        return NULL;
    pi->parameter_number = 0;
    IrComputation *saved = cx->comp;
    cx->comp = c;
    IrInstr *param = spmd_emit(cx, pi, "infeed_token_param");
    IrInstr *els[2] = {param, NULL};
    IrShape ts = ir_shape_clone(cx->arena, &hlo->shape);
    ts.elems[0] = ir_shape_clone(cx->arena, shape);
    IrInstr *inf = param ? spmd_emit_clone(cx, hlo, &ts, els, 1) : NULL;
    IrInstr *root = inf;
    if (inf && !ir_shape_equal(shape, shard, false)) {
        els[0] = pad_to(cx, spmd_emit_gte(cx, inf, 0), shard);
        els[1] = els[0] ? spmd_emit_gte(cx, inf, 1) : NULL;
        root = els[1] ? spmd_emit_tuple(cx, els, 2) : NULL;
    }
    cx->comp = saved;
    if (!root)
        return NULL;
    c->root = root;
    return ir_module_add_computation(cx->out, c) == SL_OK ? c : NULL;
}

/* Partition -> branch index (shapes numbered by first appearance); NULL when unsupported. */
static IrShape *
branch_shapes(SpmdCtx *cx, const IrShape *data, const ShdSharding *s, int64_t *index,
              uint32_t *n_branches)
{
    int64_t n = cx->state->num_partitions;
    IrShape *shapes = SL_NEW_ARRAY(cx->arena, IrShape, n);
    uint32_t nb = 0;
    for (int64_t p = 0; shapes && p < n; p++) {
        uint32_t leaf = 0, k = 0;
        IrShape ps;
        if (!part_shape(cx, data, s, &leaf, p, &ps))
            return NULL;
        while (k < nb && !ir_shape_equal(&shapes[k], &ps, false))
            k++;
        if (k == nb)
            shapes[nb++] = ps;
        index[p] = k;
    }
    *n_branches = nb;
    return shapes;
}

static SlStatus
handle_infeed(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    int64_t dev = -1, n = cx->state->num_partitions;
    const IrShape *data = hlo->shape.n_elems == 2 ? &hlo->shape.elems[0] : NULL;
    if (!data || cx->state->n_groups || n < 1 || shd_unique_device(s, &dev) ||
        ir_shape_leaf_count(data) == 0 || s->kind != SHD_TUPLE || hlo->n_operands != 1 ||
        shd_evenly_partitions(s, &hlo->shape))
        return spmd_handle_default(cx, hlo, err);
    int64_t *index = SL_NEW_ARRAY(cx->arena, int64_t, n);
    uint32_t nb = 0;
    IrShape *shapes = index ? branch_shapes(cx, data, s, index, &nb) : NULL;
    if (!shapes || nb < 2)
        return spmd_handle_default(cx, hlo, err);
    const SpmdValue *tok = spmd_get_value(cx, hlo->operands[0]);
    IrShape shard = shd_tile_shape(cx->arena, &hlo->shape, s);
    IrComputation **br = SL_NEW_ARRAY(cx->arena, IrComputation *, nb);
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, nb + 1);
    if (!tok || !br || !ops)
        return spmd_nomem(cx, err);
    for (uint32_t k = 0; k < nb; k++)
        if (!(br[k] = branch(cx, hlo, &shapes[k], &shard.elems[0], &tok->hlo->shape, k)))
            return spmd_nomem(cx, err);
    ops[0] = nb == (uint32_t)n
                 ? spmd_emit_convert(cx, spmd_partition_id(cx, cx->state), IR_DT_S32)
                 : spmd_table_lookup(cx, cx->state, index, n, IR_DT_S32);
    for (uint32_t k = 0; k < nb; k++)
        ops[k + 1] = tok->hlo;
    IrInstr *c = ops[0] ? ir_instr_new(cx->out, IR_OP_CONDITIONAL, &shard, ops, nb + 1) : NULL;
    IrAttr *a = c ? ir_instr_add_attr(cx->out, c, IR_ATTR_BRANCH_COMPUTATIONS) : NULL;
    if (!a)
        return spmd_nomem(cx, err);
    a->u.comps.n = nb;
    a->u.comps.v = br;
    IrInstr *r = spmd_emit(cx, c, NULL);
    return r ? spmd_finish(cx, hlo, r, s, err) : spmd_nomem(cx, err);
}

/* The side-effect family: uneven infeeds here, the rest replicated (with the driver's warning
 * for a family without a handler). */
SlStatus
spmd_handle_side_effect(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    if (hlo->op == IR_OP_INFEED)
        return handle_infeed(cx, hlo, err);
    char msg[128];
    snprintf(msg, sizeof(msg), "no handler for %s: partitioned as replicated",
             ir_op_name(hlo->op));
    spmd_warn(cx, msg);
    return spmd_handle_default(cx, hlo, err);
}
