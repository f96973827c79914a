/* handle_control.c - parameters, constants, iota, tuples, control flow and the instructions
 * that already talk about partitions (gspmd.md D.14-D.17, D.20). Owns: partitioning called
 * computations in the context of their caller (while body/condition, call, branches).
 * Invariant: a called computation is partitioned once; later callers reuse it. */
#include "spmd/spmd_int.h"

#include <string.h>

SlStatus
spmd_handle_parameter(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    int64_t pn = hlo->parameter_number;
    if (cx->param_shardings && pn >= 0 && (uint64_t)pn < cx->n_param_shardings &&
        cx->param_shardings[pn])
        s = cx->param_shardings[pn];
    IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
    IrInstr *p = spmd_emit_clone(cx, hlo, &ls, NULL, 0);
    if (!p)
        return spmd_nomem(cx, err);
    /* entry parameters keep their sharding */
    if (cx->depth == 1 && ir_instr_sharding(hlo) &&
        !spmd_set_sharding_attr(cx, p, ir_instr_sharding(hlo)))
        return spmd_nomem(cx, err);
    SpmdValue v = spmd_value(cx, p, &hlo->shape, s);
    spmd_set_result(cx, hlo, &v);
    return SL_OK;
}

/* The next scalar of a literal's text (braces, commas, blanks and comments skipped); false at
 * the end. */
static bool
next_scalar(const char **p, const char *e, SlStr *tok)
{
    const char *s = *p;
    while (s < e) {
        if (*s == '/' && s + 1 < e && s[1] == '*') {
            const char *c = s + 2;
            while (c + 1 < e && !(c[0] == '*' && c[1] == '/'))
                c++;
            s = c + 2 <= e ? c + 2 : e;
        } else if (*s == '{' || *s == '}' || *s == ',' || *s == ' ' || *s == '\n' || *s == '\t' ||
                   *s == '\r') {
            s++;
        } else {
            break;
        }
    }
    const char *b = s;
    while (s < e && !strchr("{},/ \n\t\r", *s))
        s++;
    *p = s;
    *tok = (SlStr){b, (size_t)(s - b)};
    return s > b;
}

/* Literal::IsAllFirst on the text: every scalar spelled like the first (a value written two
 * ways counts as different, which only costs the shortcut). */
static bool
literal_all_first(SlStr lit, SlStr *first)
{
    const char *p = lit.ptr, *e = lit.ptr + lit.len;
    SlStr tok;
    if (!next_scalar(&p, e, first))
        return false;
    while (next_scalar(&p, e, &tok))
        if (!sl_str_eq(tok, *first))
            return false;
    return true;
}

static void
put_filled(SlBuf *b, const int64_t *dims, uint32_t rank, SlStr value)
{
    sl_buf_putc(b, '{');
    for (int64_t k = 0; k < dims[0]; k++) {
        if (k)
            sl_buf_puts(b, ", ");
        if (rank > 1)
            put_filled(b, dims + 1, rank - 1, value);
        else
            sl_buf_put_str(b, value);
    }
    sl_buf_putc(b, '}');
}

/* HandleConstant: replicated constants are cloned; an evenly tiled one whose elements are all
 * equal becomes a local constant of the shard shape (no reshard, so nothing in the reshard
 * cache leads back to the full constant); anything else is sliced from the replicated one. */
SlStatus
spmd_handle_constant(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    SlStr first;
    if (shd_is_tiled(s)) {
        if (!ir_shape_is_array(&hlo->shape) || hlo->shape.rank == 0 ||
            !shd_evenly_partitions(s, &hlo->shape) || !literal_all_first(hlo->literal, &first))
            return spmd_handle_default(cx, hlo, err);
        IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
        SlBuf b;
        sl_buf_init(&b);
        put_filled(&b, ls.dims, ls.rank, first);
        char *text = b.failed ? NULL : sl_arena_strndup(cx->arena, b.data, b.len);
        size_t len = b.len;
        sl_buf_fini(&b);
        IrInstr *c = text ? spmd_emit_clone(cx, hlo, &ls, NULL, 0) : NULL;
        if (!c)
            return spmd_nomem(cx, err);
        c->literal = (SlStr){text, len};
        SpmdValue v = spmd_value(cx, c, &hlo->shape, s);
        spmd_set_result(cx, hlo, &v);
        return SL_OK;
    }
    IrShape ls = ir_shape_clone(cx->arena, &hlo->shape);
    IrInstr *c = spmd_emit_clone(cx, hlo, &ls, NULL, 0);
    if (!c)
        return spmd_nomem(cx, err);
    SpmdValue v = spmd_value(cx, c, &hlo->shape, s);
    spmd_set_result(cx, hlo, &v);
    return SL_OK;
}

SlStatus
spmd_handle_iota(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    int64_t dim = 0;
    if (!shd_is_tiled(s) || !ir_instr_int_attr(hlo, IR_ATTR_IOTA_DIMENSION, &dim))
        return spmd_handle_default(cx, hlo, err);
    IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
    IrInstr *x = spmd_emit_clone(cx, hlo, &ls, NULL, 0);
    int64_t n = shd_dim_shards(s, (uint32_t)dim);
    if (x && n > 1) {
        /* the tile's ordinal times the local size (XLA's HandleIota), not an offset table */
        IrInstr *ord = spmd_partition_ordinal(cx, cx->state, s, (uint32_t)dim);
        IrInstr *size = spmd_emit_constant_scalar(cx, IR_DT_S32, ls.dims[dim]);
        IrInstr *off = ord && size ? spmd_emit_binary(cx, IR_OP_MULTIPLY, ord, size) : NULL;
        IrInstr *conv = spmd_emit_convert(cx, off, hlo->shape.dtype);
        IrInstr *b = spmd_emit_broadcast(cx, conv, &ls, NULL, 0);
        x = spmd_emit_binary(cx, IR_OP_ADD, x, b);
    }
    if (!x)
        return spmd_nomem(cx, err);
    SpmdValue v = spmd_value(cx, x, &hlo->shape, s);
    spmd_set_result(cx, hlo, &v);
    return SL_OK;
}

SlStatus
spmd_handle_tuple(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    uint32_t n = hlo->n_operands;
    const ShdSharding **targets = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n ? n : 1);
    if (!targets)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++)
        if (!(targets[i] = spmd_element_sharding(cx, s, &hlo->shape, i)))
            return spmd_nomem(cx, err);
    return spmd_handle_with_shardings(cx, hlo, targets, s, err);
}

SlStatus
spmd_handle_gte(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const SpmdValue *t = spmd_get_value(cx, hlo->operands[0]);
    int64_t index = 0;
    if (!t || !ir_instr_int_attr(hlo, IR_ATTR_INDEX, &index) || index < 0 ||
        (uint32_t)index >= t->base_shape->n_elems)
        return spmd_fail(cx, err, SL_ERR_INVALID, "bad get-tuple-element");
    const ShdSharding *es = spmd_element_sharding(cx, t->sharding, t->base_shape, (uint32_t)index);
    IrShape ls = t->hlo->shape.elems[index];
    IrInstr *g = spmd_emit_clone(cx, hlo, &ls, &t->hlo, 1);
    if (!g || !es)
        return spmd_nomem(cx, err);
    return spmd_finish(cx, hlo, g, es, err);
}

/* Partitions `c` (once per distinct shardings) with every parameter in `param_s` and the root
 * resharded to `root_s`. */
static SlStatus
partition_called(SpmdCtx *cx, const IrComputation *c, const ShdSharding *param_s,
                 const ShdSharding *root_s, SlError *err)
{
    uint32_t np = ir_computation_param_count(c);
    const ShdSharding **ps = SL_NEW_ARRAY(cx->arena, const ShdSharding *, np ? np : 1);
    if (!ps)
        return spmd_nomem(cx, err);
    for (uint32_t k = 0; k < np; k++)
        ps[k] = param_s;
    return spmd_partition_called(cx, c, ps, np, root_s, err);
}

SlStatus
spmd_handle_while(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    IrComputation *cond = ir_instr_called(hlo, IR_ATTR_CONDITION);
    IrComputation *body = ir_instr_called(hlo, IR_ATTR_BODY);
    if (!cond || !body)
        return spmd_fail(cx, err, SL_ERR_INVALID, "while without condition or body");
    SpmdValue op;
    SlStatus st = spmd_operand(cx, hlo, 0, s, &op, err);
    if (st == SL_OK)
        st = partition_called(cx, cond, s, NULL, err);
    if (st == SL_OK)
        st = partition_called(cx, body, s, s, err);
    if (st != SL_OK)
        return st;
    IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
    IrInstr *w = spmd_emit_clone(cx, hlo, &ls, &op.hlo, 1);
    return spmd_finish(cx, hlo, w, s, err);
}

SlStatus
spmd_handle_call(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    IrComputation *callee = ir_instr_called(hlo, IR_ATTR_TO_APPLY);
    if (!callee) {
        const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_CALLS);
        callee = a && a->u.comps.n == 1 ? a->u.comps.v[0] : NULL;
    }
    if (!callee)
        return spmd_handle_default(cx, hlo, err);
    uint32_t n = hlo->n_operands;
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, n ? n : 1);
    const ShdSharding **ps = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n ? n : 1);
    if (!ops || !ps)
        return spmd_nomem(cx, err);
    /* XLA's PreprocessCallSites: a callee's parameters take their arguments' shardings (the
     * callee cloned per distinct set), so arguments pass unchanged and any reshard happens
     * inside, where the parameter is used. */
    for (uint32_t i = 0; i < n; i++) {
        ps[i] = ir_computation_param(callee, i) ? spmd_sharding_of(cx, hlo->operands[i]) : NULL;
        SpmdValue v;
        SlStatus st = spmd_operand(cx, hlo, i, ps[i], &v, err);
        if (st != SL_OK)
            return st;
        ops[i] = v.hlo;
    }
    SlStatus st = spmd_partition_called(cx, callee, ps, n, s, err);
    if (st != SL_OK)
        return st;
    IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
    IrInstr *c = spmd_emit_clone(cx, hlo, &ls, ops, n);
    return spmd_finish(cx, hlo, c, s, err);
}

SlStatus
spmd_handle_conditional(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    IrComputation *branches[64];
    uint32_t nb = 0;
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_BRANCH_COMPUTATIONS);
    if (a) {
        for (uint32_t k = 0; k < a->u.comps.n && nb < SL_COUNTOF(branches); k++)
            branches[nb++] = a->u.comps.v[k];
    } else {
        IrComputation *t = ir_instr_called(hlo, IR_ATTR_TRUE_COMPUTATION);
        IrComputation *f = ir_instr_called(hlo, IR_ATTR_FALSE_COMPUTATION);
        if (t && f) {
            branches[nb++] = t;
            branches[nb++] = f;
        }
    }
    uint32_t n = hlo->n_operands;
    if (nb == 0 || n != nb + 1)
        return spmd_handle_default(cx, hlo, err);
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, n);
    IrComputation *outs[SL_COUNTOF(branches)];
    if (!ops)
        return spmd_nomem(cx, err);
    const ShdSharding *pred_s = shd_is_manual(spmd_get_value(cx, hlo->operands[0])->sharding)
                                    ? NULL
                                    : shd_replicated(cx->arena);
    SpmdValue v;
    SlStatus st = spmd_operand(cx, hlo, 0, pred_s, &v, err);
    if (st != SL_OK)
        return st;
    ops[0] = v.hlo;
    for (uint32_t b = 0; b < nb; b++) { /* branch parameters as call parameters, above */
        const ShdSharding *ps =
            ir_computation_param(branches[b], 0) ? spmd_sharding_of(cx, hlo->operands[b + 1]) : NULL;
        st = spmd_operand(cx, hlo, b + 1, ps, &v, err);
        if (st == SL_OK)
            st = partition_called(cx, branches[b], ps, s, err);
        if (st != SL_OK)
            return st;
        if (!(outs[b] = spmd_output_computation(cx, branches[b])))
            return spmd_nomem(cx, err);
        ops[b + 1] = v.hlo;
    }
    IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
    IrInstr *c = spmd_emit_clone(cx, hlo, &ls, ops, n);
    if (!c)
        return spmd_nomem(cx, err);
    /* one computation may be two branches partitioned differently: each takes its own */
    IrAttr *ba = ir_instr_find_attr_mut(c, IR_ATTR_BRANCH_COMPUTATIONS);
    for (uint32_t b = 0; ba && b < nb && b < ba->u.comps.n; b++)
        ba->u.comps.v[b] = outs[b];
    if (!ba) {
        IrAttr *t = ir_instr_find_attr_mut(c, IR_ATTR_TRUE_COMPUTATION);
        IrAttr *f = ir_instr_find_attr_mut(c, IR_ATTR_FALSE_COMPUTATION);
        if (t)
            t->u.comp = outs[0];
        if (f)
            f->u.comp = outs[1];
    }
    return spmd_finish(cx, hlo, c, s, err);
}

SlStatus
spmd_handle_partition_id(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    /* outside manual sharding the driver warns (spmd_check_partitioned_op) */
    IrShape ls = ir_shape_clone(cx->arena, &hlo->shape);
    IrInstr *p = spmd_emit_clone(cx, hlo, &ls, NULL, 0);
    if (!p)
        return spmd_nomem(cx, err);
    SpmdValue v = spmd_value(cx, p, &hlo->shape, s);
    spmd_set_result(cx, hlo, &v);
    return SL_OK;
}

/* Partially replicated rng: each replication group runs it once (the member with replication
 * coordinate 0) and broadcasts within the group (D.20). */
static SlStatus
rng_partial(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s, SlError *err)
{
    uint32_t rep_dim = s->n_tile_dims - 1;
    int64_t g = s->tile_dims[rep_dim];
    int64_t np = cx->state->num_partitions;
    int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, np);
    if (!tbl)
        return spmd_nomem(cx, err);
    for (int64_t k = 0; k < shd_device_count(s); k++)
        if (s->devices[k] >= 0 && s->devices[k] < np)
            tbl[s->devices[k]] = k % g;
    uint32_t n = hlo->n_operands;
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, n ? n : 1);
    if (!ops)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++) {
        SpmdValue v;
        SlStatus st = spmd_operand(cx, hlo, i, shd_replicated(cx->arena), &v, err);
        if (st != SL_OK)
            return st;
        ops[i] = v.hlo;
    }
    IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
    IrInstr *r = spmd_emit_clone(cx, hlo, &ls, ops, n);
    IrInstr *coord = spmd_table_lookup(cx, cx->state, tbl, np, IR_DT_U32);
    IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_U32, 0);
    IrInstr *eq = spmd_emit_compare(cx, coord, zero, "EQ");
    IrShape ps = ir_shape_make(cx->arena, IR_DT_PRED, ls.dims, ls.rank);
    IrInstr *beq = spmd_emit_broadcast(cx, eq, &ps, NULL, 0);
    IrInstr *sel = spmd_emit_select(cx, beq, r, spmd_emit_zero_like(cx, &ls));
    IrReplicaGroups groups;
    int64_t d = rep_dim;
    SlStatus st = spmd_groups_for_dims(cx, s, &d, 1, &groups, err);
    if (st != SL_OK)
        return st;
    const char *saved = cx->coll_cause;
    cx->coll_cause = "rng";
    IrInstr *ar = spmd_coll_all_reduce(cx, cx->state, sel,
                                       spmd_reducer(cx, SPMD_RED_ADD, ls.dtype), &groups);
    cx->coll_cause = saved;
    return spmd_finish(cx, hlo, ar, s, err);
}

SlStatus
spmd_handle_rng(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (shd_is_tiled(s) && shd_has_partial_replication(s) && !shd_is_manual_subgroup(s) &&
        !ir_shape_is_tuple(&hlo->shape))
        return rng_partial(cx, hlo, s, err);
    uint32_t n = hlo->n_operands;
    const ShdSharding **targets = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n ? n : 1);
    if (!targets)
        return spmd_nomem(cx, err);
    const ShdSharding *run;
    if (shd_is_manual(s) || shd_is_maximal(s) || shd_is_tiled(s))
        run = s; /* tiled: a local rng of the local shape */
    else
        run = shd_maximal(cx->arena, 0); /* replicated: device 0, then broadcast */
    for (uint32_t i = 0; i < n; i++)
        targets[i] = shd_is_tiled(run) ? shd_replicated(cx->arena) : run;
    return spmd_handle_with_shardings(cx, hlo, targets, run, err);
}

SlStatus
spmd_handle_all_reduce(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    return spmd_handle_elementwise(cx, hlo, err);
}

SlStatus
spmd_handle_collective_permute(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    return spmd_handle_elementwise(cx, hlo, err);
}
