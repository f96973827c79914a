/* handle_common.c - the handler template (seed: HandleElementwise's shape) and DefaultAction
 * (gspmd.md D.0). Owns: resharding operands, cloning with the local shape, registering the
 * result and the final reshard to the instruction's own sharding. Handlers only decide the
 * shardings and call these. Invariant: emits only through spmd_emit()/builders. */
#include "spmd/spmd_int.h"

SlStatus
spmd_operand(SpmdCtx *cx, const IrInstr *hlo, uint32_t i, const ShdSharding *target,
             SpmdValue *out, SlError *err)
{
    const SpmdValue *v = spmd_get_value(cx, hlo->operands[i]);
    if (SL_NEVER(!v))
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "operand %u of %s was not partitioned", i,
                         sl_sym_cstr(hlo->name));
    if (!target) {
        *out = *v;
        return SL_OK;
    }
    return spmd_reshard(cx, v, target, NULL, out, err);
}

SlStatus
spmd_finish(SpmdCtx *cx, const IrInstr *hlo, IrInstr *local, const ShdSharding *s, SlError *err)
{
    if (!local)
        return spmd_nomem(cx, err);
    /* the source instruction outlives the run: its shape needs no copy */
    SpmdValue v = spmd_value(cx, local, &hlo->shape, s), r;
    SlStatus st = spmd_reshard(cx, &v, spmd_sharding_of(cx, hlo), NULL, &r, err);
    if (st != SL_OK)
        return st;
    spmd_set_result(cx, hlo, &r);
    return SL_OK;
}

SlStatus
spmd_handle_with_shardings(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *const *targets,
                           const ShdSharding *out_sharding, SlError *err)
{
    uint32_t n = hlo->n_operands;
    /* scratch: the clone copies its operand array */
    IrInstr **ops = SL_NEW_ARRAY(&cx->scratch, IrInstr *, n ? n : 1);
    if (!ops)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++) {
        SpmdValue v;
        SlStatus st = spmd_operand(cx, hlo, i, targets ? targets[i] : NULL, &v, err);
        if (st != SL_OK)
            return st;
        ops[i] = v.hlo;
    }
    IrShape ls = spmd_local_shape(cx, &hlo->shape, out_sharding);
    IrInstr *local = spmd_emit_clone(cx, hlo, &ls, ops, n);
    return spmd_finish(cx, hlo, local, out_sharding, err);
}

SlStatus
spmd_handle_default(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    if (ir_op_is_elementwise(hlo->op) && hlo->n_operands > 0)
        return spmd_handle_elementwise(cx, hlo, err);
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    int64_t dev = 0;
    const ShdSharding *base = shd_unique_device(s, &dev) ? shd_maximal(cx->arena, dev)
                              : shd_is_manual(s)        ? s
                                                        : shd_replicated(cx->arena);
    if (!base)
        return spmd_nomem(cx, err);
    uint32_t n = hlo->n_operands;
    const ShdSharding **targets = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n ? n : 1);
    if (!targets)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++)
        targets[i] = base;
    if (cx->trace->ops->decision) {
        TraceDecision d = {hlo, "default", shd_is_maximal(base) ? "single-device" : "replicate",
                           "no partitioned handler: run on the full shape", NULL, 0, NULL, 0};
        cx->trace->ops->decision(cx->trace, &d);
    }
    return spmd_handle_with_shardings(cx, hlo, targets, base, err);
}
