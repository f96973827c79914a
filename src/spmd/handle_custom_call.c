/* handle_custom_call.c - custom calls (gspmd.md D.21): Sharding, SPMDFullToShardShape,
 * SPMDShardToFullShape, layout/host annotations; the internal rotate/wrap/multi-slice/pad
 * ops go to handle_internal.c; everything else goes to DefaultAction.
 * Invariant: switching between the automatic and the manual world never communicates. */
#include "spmd/dot_int.h"

#include <stdio.h>
#include <string.h>

static bool
target_is(const IrInstr *hlo, const char *name)
{
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_CUSTOM_CALL_TARGET);
    if (!a)
        return false;
    SlStr t = a->u.text;
    if (t.len >= 2 && t.ptr[0] == '"' && t.ptr[t.len - 1] == '"') {
        t.ptr++;
        t.len -= 2;
    }
    return sl_str_eq_cstr(t, name);
}

/* A `copy` of `x` registered as hlo's value with base shape `base` and sharding `s`. */
static SlStatus
copy_as(SpmdCtx *cx, const IrInstr *hlo, IrInstr *x, const IrShape *base, const ShdSharding *s,
        SlError *err)
{
    IrInstr *c = spmd_emit_copy(cx, x);
    if (!c)
        return spmd_nomem(cx, err);
    SpmdValue v = spmd_value(cx, c, base, s);
    spmd_set_result(cx, hlo, &v);
    return SL_OK;
}

/* DefaultAction on a custom call: every operand replicated, the full computation on every
 * device. Said when it moves or duplicates data: some operand or the result is sharded. */
static void
warn_fallback(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s)
{
    bool sharded = !shd_is_tile_maximal(s);
    for (uint32_t i = 0; i < hlo->n_operands && !sharded; i++)
        sharded = !shd_is_tile_maximal(spmd_sharding_of(cx, hlo->operands[i]));
    if (!sharded)
        return;
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_CUSTOM_CALL_TARGET);
    SlStr t = a ? a->u.text : sl_str("?");
    char msg[320];
    snprintf(msg, sizeof(msg),
             "custom-call %.*s has no partitioning rule here: partitioned by fallback, its "
             "operands replicated (all-gathered) and the full call run on every device",
             (int)(t.len < 160 ? t.len : 160), t.ptr);
    spmd_warn(cx, TRACE_WARN_CUSTOM_CALL, msg);
}

SlStatus
spmd_handle_custom_call(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (hlo->n_operands == 1 && target_is(hlo, "SPMDFullToShardShape")) {
        const SpmdValue *in = spmd_get_value(cx, hlo->operands[0]);
        if (!in)
            return spmd_fail(cx, err, SL_ERR_INTERNAL, "operand not partitioned");
        IrInstr *x = spmd_pad_with_value(cx, in, NULL, 0);
        if (!x)
            return spmd_nomem(cx, err);
        /* as below: the operand's local shape must be the local shape of the (manual) output
         * (an unsharded operand of a shard-shaped result would be used at the wrong shape) */
        IrShape want = spmd_local_shape(cx, &hlo->shape, s);
        if (!ir_shape_equal(&want, &x->shape, false))
            return spmd_fail(cx, err, SL_ERR_INVALID,
                             "the operand's local shape does not match the local manual output "
                             "shape");
        return copy_as(cx, hlo, x, &hlo->shape, s, err);
    }
    if (hlo->n_operands == 1 && target_is(hlo, "SPMDShardToFullShape")) {
        const SpmdValue *in = spmd_get_value(cx, hlo->operands[0]);
        if (!in)
            return spmd_fail(cx, err, SL_ERR_INTERNAL, "operand not partitioned");
        SlStatus st = copy_as(cx, hlo, in->hlo, &hlo->shape, s, err);
        if (st != SL_OK)
            return st;
        /* the copy's local shape must be the local shape of the (tiled) output sharding */
        IrShape want = spmd_local_shape(cx, &hlo->shape, s);
        const SpmdValue *out = spmd_get_value(cx, hlo);
        if (!ir_shape_equal(&want, &out->hlo->shape, false))
            return spmd_fail(cx, err, SL_ERR_INVALID,
                             "manual operand shape does not match the local output shape");
        return SL_OK;
    }
    if (target_is(hlo, "TopK"))
        return spmd_handle_topk(cx, hlo, err);
    static const char *const internal[] = {"_SPMDInternalOp_RotateRight",
                                           "_SPMDInternalOp_MultiRotate", "_SPMDInternalOp_Wrap",
                                           "_SPMDInternalOp_MultiSlice",
                                           "_SPMDInternalOp_MultiPad"};
    for (size_t k = 0; k < SL_COUNTOF(internal); k++)
        if (target_is(hlo, internal[k]))
            return spmd_handle_internal_custom_call(cx, hlo, internal[k], err);
    /* A Sharding custom call left for the partitioner (propagation makes it a copy) is
     * XLA's DefaultAction: run on the replicated operand, then cut to its sharding. A later
     * replicated use then finds the full value in the reshard cache, not an all-gather. */
    if (hlo->n_operands == 1 && target_is(hlo, "Sharding"))
        return spmd_handle_default(cx, hlo, err);
    if (target_is(hlo, "LayoutConstraint") || target_is(hlo, "MoveToHost") ||
        target_is(hlo, "MoveToDevice") || target_is(hlo, "annotate_device_placement")) {
        const ShdSharding *targets[1] = {s};
        if (hlo->n_operands == 1 && !ir_shape_is_tuple(&hlo->shape))
            return spmd_handle_with_shardings(cx, hlo, targets, s, err);
    }
    if (shd_is_manual(s)) {
        uint32_t n = hlo->n_operands;
        const ShdSharding **t = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n ? n : 1);
        if (!t)
            return spmd_nomem(cx, err);
        for (uint32_t i = 0; i < n; i++)
            t[i] = NULL;
        return spmd_handle_with_shardings(cx, hlo, t, s, err);
    }
    if (target_is(hlo, "__op$block_scaled_dot"))
        return spmd_handle_block_scaled_dot(cx, hlo, err);
    warn_fallback(cx, hlo, s);
    return spmd_handle_default(cx, hlo, err);
}
