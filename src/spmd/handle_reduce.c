/* handle_reduce.c - reduce (variadic too) and sort (gspmd.md D.10, D.13). Owns: choosing the
 * input sharding, masking uneven reduced dims with the init value, and the all-reduce over the
 * groups that share a reduced sharded dim (with the reduce's own computation); for variadic
 * reduces, the all-gather of the partial results and a second reduce instead. */
#include "spmd/spmd_int.h"

#include <string.h>

/* A variadic reduce over sharded dims cannot all-reduce its tuple: every device keeps its
 * partial results with the reduced dims as size 1, all-gathers them along those dims (the
 * devices that share the kept dims) and reduces the gathered partials again (upstream
 * HandleReduce's tuple branch). ops[] holds the local inputs and then the inits. */
static SlStatus
combine_partials(SpmdCtx *cx, const IrInstr *hlo, IrInstr *local, IrInstr *const *ops,
                 const ShdSharding *in_s, const IrShape *ls, IrInstr **out, SlError *err)
{
    uint32_t n_in = hlo->n_operands / 2;
    const int64_t *rd;
    uint32_t nr = ir_instr_ints_attr(hlo, IR_ATTR_DIMENSIONS, &rd);
    if (ops[0]->shape.rank > SPMD_MAX_RANK)
        return spmd_fail(cx, err, SL_ERR_UNSUPPORTED, "variadic reduce of rank %u",
                         ops[0]->shape.rank);
    const ShdSharding *gathered = shd_partially_replicate_dims(cx->arena, in_s, rd, nr);
    IrInstr **next = SL_NEW_ARRAY(cx->arena, IrInstr *, hlo->n_operands);
    if (!gathered || !next)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n_in; i++) {
        const IrShape *in = &ops[i]->shape;
        int64_t local_dims[SPMD_MAX_RANK], base_dims[SPMD_MAX_RANK];
        for (uint32_t d = 0; d < in->rank; d++)
            local_dims[d] = base_dims[d] = in->dims[d];
        for (uint32_t k = 0; k < nr; k++) {
            local_dims[rd[k]] = 1;
            base_dims[rd[k]] = shd_dim_shards(in_s, (uint32_t)rd[k]);
        }
        IrInstr *part = spmd_emit_reshape(cx, spmd_emit_gte(cx, local, i), local_dims, in->rank);
        IrShape *base = SL_NEW(cx->arena, IrShape);
        if (!part || !base)
            return spmd_nomem(cx, err);
        *base = ir_shape_with_dims(cx->arena, &part->shape, base_dims);
        SpmdValue v = {part, base, in_s, cx->state}, g;
        const char *saved = cx->coll_cause;
        cx->coll_cause = "reduce";
        SlStatus st = spmd_reshard(cx, &v, gathered, NULL, &g, err);
        cx->coll_cause = saved;
        if (st != SL_OK)
            return st;
        next[i] = g.hlo;
        next[n_in + i] = ops[n_in + i];
    }
    *out = spmd_emit_clone(cx, hlo, ls, next, hlo->n_operands);
    return *out ? SL_OK : spmd_nomem(cx, err);
}

SlStatus
spmd_handle_reduce(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    uint32_t n_in = hlo->n_operands / 2;
    if (n_in == 0 || shd_is_maximal(s) || shd_is_manual(s))
        return spmd_handle_default(cx, hlo, err);
    const int64_t *rd;
    uint32_t nr = ir_instr_ints_attr(hlo, IR_ATTR_DIMENSIONS, &rd);
    const IrShape *in0 = &hlo->operands[0]->shape;
    const SpmdValue *v0 = spmd_get_value(cx, hlo->operands[0]);
    if (!v0 || ir_shape_is_tuple(in0))
        return spmd_handle_default(cx, hlo, err);
    const ShdSharding *in_s = v0->sharding;
    if (!shd_is_tiled(in_s))
        in_s = shd_replicated(cx->arena);
    bool variadic = n_in > 1;
    int64_t sharded[SPMD_MAX_RANK];
    uint32_t n_sharded = 0;
    for (uint32_t k = 0; k < nr; k++)
        if (shd_is_tiled(in_s) && shd_dim_shards(in_s, (uint32_t)rd[k]) > 1)
            sharded[n_sharded++] = rd[k];
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, hlo->n_operands);
    if (!ops)
        return spmd_nomem(cx, err);
    const ShdSharding *rep = shd_replicated(cx->arena);
    for (uint32_t i = 0; i < n_in; i++) { /* inits first: they mask the inputs */
        SpmdValue iv;
        SlStatus st = spmd_operand(cx, hlo, n_in + i, rep, &iv, err);
        if (st != SL_OK)
            return st;
        ops[n_in + i] = iv.hlo;
    }
    uint64_t keep_mask = 0;
    for (uint32_t d = 0; d < in0->rank && d < 64; d++) {
        bool reduced = false;
        for (uint32_t k = 0; k < nr; k++)
            reduced = reduced || rd[k] == (int64_t)d;
        if (!reduced)
            keep_mask |= (uint64_t)1 << d;
    }
    for (uint32_t i = 0; i < n_in; i++) {
        SpmdValue iv;
        SlStatus st = spmd_operand(cx, hlo, i, in_s, &iv, err);
        if (st != SL_OK)
            return st;
        ops[i] = spmd_pad_with_value(cx, &iv, ops[n_in + i], keep_mask);
        if (!ops[i])
            return spmd_nomem(cx, err);
    }
    /* result sharding: reduced dims replicated, then removed */
    const ShdSharding *rs = in_s;
    if (shd_is_tiled(in_s)) {
        SlArenaMark mark = sl_arena_mark(cx->arena);
        const ShdSharding *ps = shd_partially_replicate_dims(cx->arena, in_s, rd, nr);
        rs = ps && shd_is_tiled(ps) ? shd_remove_dims(cx->arena, ps, rd, nr) : ps;
        rs = spmd_keep_sharding(cx, mark, rs);
        if (!rs)
            return spmd_handle_default(cx, hlo, err);
    }
    const ShdSharding *out_s = rs;
    if (variadic) {
        const ShdSharding **leaves = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n_in);
        if (!leaves)
            return spmd_nomem(cx, err);
        for (uint32_t i = 0; i < n_in; i++)
            leaves[i] = rs;
        out_s = shd_tuple(cx->arena, leaves, n_in);
    }
    IrShape ls = spmd_local_shape(cx, &hlo->shape, out_s);
    IrInstr *local = spmd_emit_clone(cx, hlo, &ls, ops, hlo->n_operands);
    if (!local)
        return spmd_nomem(cx, err);
    if (n_sharded && variadic) {
        SlStatus st = combine_partials(cx, hlo, local, ops, in_s, &ls, &local, err);
        if (st != SL_OK)
            return st;
    } else if (n_sharded) {
        IrComputation *red = spmd_output_computation(cx, ir_instr_called(hlo, IR_ATTR_TO_APPLY));
        const char *saved = cx->coll_cause;
        cx->coll_cause = "reduce";
        local = spmd_all_reduce_along_dims(cx, cx->state, local, in_s, sharded, n_sharded, red);
        cx->coll_cause = saved;
    }
    return spmd_finish(cx, hlo, local, out_s, err);
}

SlStatus
spmd_handle_sort(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const int64_t *dims;
    if (ir_instr_ints_attr(hlo, IR_ATTR_DIMENSIONS, &dims) != 1 || hlo->n_operands == 0)
        return spmd_handle_default(cx, hlo, err);
    uint32_t sd = (uint32_t)dims[0];
    const ShdSharding *leaf = s;
    if (s->kind == SHD_TUPLE) {
        leaf = shd_leaf(s, 0);
        for (uint32_t k = 1; k < s->n_leaves; k++)
            if (!shd_equal(shd_leaf(s, k), leaf))
                return spmd_handle_default(cx, hlo, err);
    }
    if (!leaf || !shd_is_tiled(leaf))
        return spmd_handle_default(cx, hlo, err);
    const IrShape *in0 = &hlo->operands[0]->shape;
    const ShdSharding *run = leaf;
    int64_t n_sd = shd_dim_shards(leaf, sd);
    if (n_sd > 1) {
        run = NULL;
        for (uint32_t t = 0; t < in0->rank && in0->rank >= 2; t++)
            if (t != sd && in0->dims[t] % (n_sd * shd_dim_shards(leaf, t)) == 0) {
                run = shd_move_and_merge_tiles(cx->arena, leaf, sd, t);
                break;
            }
        if (!run)
            run = shd_partially_replicate_dims(cx->arena, leaf, &dims[0], 1);
        if (!run)
            return spmd_nomem(cx, err);
    }
    uint32_t n = hlo->n_operands;
    const ShdSharding **targets = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n);
    const ShdSharding **leaves = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n);
    if (!targets || !leaves)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++)
        targets[i] = leaves[i] = run;
    const ShdSharding *out_s = ir_shape_is_tuple(&hlo->shape) ? shd_tuple(cx->arena, leaves, n)
                                                              : run;
    return spmd_handle_with_shardings(cx, hlo, targets, out_s, err);
}
