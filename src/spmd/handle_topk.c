/* handle_topk.c - the TopK custom call sharded on its sort dim (gspmd.md D.13, D.21; upstream
 * HandleCustomCallTopK): every shard runs TopK on its own piece (padded with the lowest value),
 * the k candidates per shard are gathered (k * shards per row), a replicated sort (values, and
 * indices when someone reads them) picks the final k, and the result is resharded.
 * Owns: the sort comparators it creates (derived from the TopK, reported like emitted code).
 * Does not own: the gather (spmd_reshard) or padding (spmd_pad_with_value). */
#include "spmd/spmd_int.h"

#include <string.h>

/* Whether any reader of hlo's tuple may see the indices (IsTopKIndexOutputUsed). */
static bool
index_output_used(const IrInstr *hlo)
{
    const IrComputation *c = hlo->parent;
    for (uint32_t k = 0; c && k < c->n_instrs; k++) {
        const IrInstr *u = c->instrs[k];
        for (uint32_t o = 0; o < u->n_operands; o++) {
            if (u->operands[o] != hlo)
                continue;
            if (u->op != IR_OP_GET_TUPLE_ELEMENT)
                return true;
            int64_t idx = 0;
            const IrAttr *a = ir_instr_find_attr(u, IR_ATTR_INDEX);
            if (a)
                idx = a->u.i;
            for (uint32_t m = 0; idx > 0 && m < c->n_instrs; m++)
                for (uint32_t p = 0; p < c->instrs[m]->n_operands; p++)
                    if (c->instrs[m]->operands[p] == u)
                        return true;
            if (idx > 0 && c->root == u)
                return true;
        }
    }
    return c && c->root == hlo;
}

/* The lowest value of a float or signed type (CreateFirstWithType), NULL otherwise. */
static IrInstr *
lowest_value(SpmdCtx *cx, IrDtype t)
{
    if (ir_dtype_kind(t) == 'F')
        return spmd_emit_constant_literal(cx, t, "-inf");
    if (ir_dtype_kind(t) == 'S' && ir_dtype_bits(t) <= 64 && ir_dtype_bits(t) >= 2)
        return spmd_emit_constant_scalar(cx, t, -((int64_t)1 << (ir_dtype_bits(t) - 2)) * 2);
    return NULL;
}

static IrInstr *
param(SpmdCtx *cx, IrComputation *c, IrDtype t, int64_t n, const char *name)
{
    IrShape s = ir_shape_make(cx->arena, t, NULL, 0);
    IrInstr *p = ir_instr_new(cx->out, IR_OP_PARAMETER, &s, NULL, 0);
    if (!p)
        return NULL;
    p->parameter_number = n;
    p->name = spmd_unique_name(cx, sl_str(name));
    return p->name && ir_computation_add_instr(c, cx->out, p) == SL_OK ? p : NULL;
}

static IrInstr *
compare(SpmdCtx *cx, IrComputation *c, IrInstr *a, IrInstr *b, const char *dir)
{
    IrShape s = ir_shape_make(cx->arena, IR_DT_PRED, NULL, 0);
    IrInstr *ops[2] = {a, b};
    IrInstr *i = a && b ? ir_instr_new(cx->out, IR_OP_COMPARE, &s, ops, 2) : NULL;
    IrAttr *d = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_DIRECTION) : NULL;
    if (!d)
        return NULL;
    d->u.text = sl_str(dir);
    i->name = spmd_unique_name(cx, sl_str("compare"));
    return i->name && ir_computation_add_instr(c, cx->out, i) == SL_OK ? i : NULL;
}

/* Comparator: values descending, then (with indices) indices ascending. */
static IrComputation *
comparator(SpmdCtx *cx, IrDtype t, bool with_index)
{
    SlSym name = spmd_unique_name(cx, sl_str(with_index ? "compare-value-and-index"
                                                        : "compare-value"));
    IrComputation *c = name ? ir_computation_new(cx->out, name) : NULL;
    if (!c)
        return NULL;
    IrInstr *v0 = param(cx, c, t, 0, "p.0.lhs"), *v1 = param(cx, c, t, 1, "p.0.rhs");
    IrInstr *root = compare(cx, c, v0, v1, "GT");
    if (with_index) {
        IrInstr *i0 = param(cx, c, IR_DT_S32, 2, "p.1.lhs");
        IrInstr *i1 = param(cx, c, IR_DT_S32, 3, "p.1.rhs");
        IrInstr *eq = compare(cx, c, v0, v1, "EQ"), *lt = compare(cx, c, i0, i1, "LT");
        IrShape s = ir_shape_make(cx->arena, IR_DT_PRED, NULL, 0);
        IrInstr *ops[3] = {eq, lt, root};
        IrInstr *sel = eq && lt && root ? ir_instr_new(cx->out, IR_OP_SELECT, &s, ops, 3) : NULL;
        if (!sel || !(sel->name = spmd_unique_name(cx, sl_str("select"))) ||
            ir_computation_add_instr(c, cx->out, sel) != SL_OK)
            return NULL;
        root = sel;
    }
    if (!root)
        return NULL;
    c->root = root;
    for (uint32_t k = 0; k < c->n_instrs; k++) { /* like spmd_reducer: traced, derived */
        c->instrs[k]->derived_from = cx->visiting;
        if (cx->trace->ops->emit)
            cx->trace->ops->emit(cx->trace, c->instrs[k], cx->visiting);
    }
    return ir_module_add_computation(cx->out, c) == SL_OK ? c : NULL;
}

/* The first k along dim 1. */
static IrInstr *
first_k(SpmdCtx *cx, IrInstr *x, int64_t k)
{
    int64_t lo[2] = {0, 0}, hi[2] = {x ? x->shape.dims[0] : 0, k};
    return x ? spmd_emit_slice(cx, x, lo, hi) : NULL;
}

/* sort(operands) along dim 1 with comparator `cmp`, stable. */
static IrInstr *
emit_sort(SpmdCtx *cx, IrInstr *const *ops, uint32_t n, IrComputation *cmp)
{
    IrShape s;
    if (n == 1) {
        s = ir_shape_clone(cx->arena, &ops[0]->shape);
    } else {
        s = ir_shape_make(cx->arena, IR_DT_TUPLE, NULL, 0);
        s.n_elems = n;
        s.elems = SL_NEW_ARRAY(cx->arena, IrShape, n);
        if (!s.elems)
            return NULL;
        for (uint32_t k = 0; k < n; k++)
            s.elems[k] = ops[k]->shape;
    }
    IrInstr *i = cmp ? ir_instr_new(cx->out, IR_OP_SORT, &s, ops, n) : NULL;
    IrAttr *d = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_DIMENSIONS) : NULL;
    IrAttr *st = d ? ir_instr_add_attr(cx->out, i, IR_ATTR_IS_STABLE) : NULL;
    IrAttr *ta = st ? ir_instr_add_attr(cx->out, i, IR_ATTR_TO_APPLY) : NULL;
    int64_t *one = SL_NEW(cx->arena, int64_t);
    if (!ta || !one)
        return NULL;
    *one = 1;
    d->u.ints.n = 1;
    d->u.ints.v = one;
    st->u.b = true;
    ta->u.comp = cmp;
    return spmd_emit(cx, i, "sort");
}

typedef struct TopK {
    const IrInstr *hlo;
    const ShdSharding *s;     /* the operand's sharding */
    const ShdSharding *rep;   /* sort dim replicated (batch dim kept) */
    const SpmdState *gst;     /* devices sharing a batch shard (root when unsharded) */
    int64_t shards, per, k, batch;
    IrDtype vt;
} TopK;

/* Gathers gte(topk, i) (in the operand's sharding, base [batch, k * shards]) to `rep`. */
static IrInstr *
gather(SpmdCtx *cx, const TopK *t, IrInstr *x, IrDtype dt, SlError *err)
{
    IrShape *base = SL_NEW(cx->arena, IrShape);
    if (!base || !x)
        return NULL;
    *base = ir_shape_make(cx->arena, dt, (int64_t[]){t->batch, t->k * t->shards}, 2);
    SpmdValue v = spmd_value(cx, x, base, t->s), r;
    return spmd_reshard(cx, &v, t->rep, NULL, &r, err) == SL_OK ? r.hlo : NULL;
}

/* Final sort of the gathered candidates: (values, indices + shard offset) or values only. */
static IrInstr *
final_topk(SpmdCtx *cx, const TopK *t, IrInstr *topk, SlError *err)
{
    IrInstr *vals = gather(cx, t, spmd_emit_gte(cx, topk, 0), t->vt, err);
    if (!vals)
        return NULL;
    if (!index_output_used(t->hlo)) {
        IrInstr *sorted = emit_sort(cx, &vals, 1, comparator(cx, t->vt, false));
        IrShape is = ir_shape_make(cx->arena, IR_DT_S32, (int64_t[]){vals->shape.dims[0], t->k},
                                   2);
        IrInstr *dummy = spmd_emit_broadcast(cx, spmd_emit_constant_scalar(cx, IR_DT_S32, 0),
                                             &is, NULL, 0);
        IrInstr *parts[2] = {first_k(cx, sorted, t->k), dummy};
        return spmd_emit_tuple(cx, parts, 2);
    }
    IrInstr *idx = spmd_emit_gte(cx, topk, 1);
    IrInstr *pid = spmd_emit_convert(cx, spmd_partition_id(cx, t->gst), IR_DT_S32);
    IrInstr *off = spmd_emit_binary(cx, IR_OP_MULTIPLY, pid,
                                    spmd_emit_constant_scalar(cx, IR_DT_S32, t->per));
    idx = idx ? spmd_emit_binary(cx, IR_OP_ADD, idx,
                                 spmd_emit_broadcast(cx, off, &idx->shape, NULL, 0))
              : NULL;
    IrInstr *ops[2] = {vals, gather(cx, t, idx, IR_DT_S32, err)};
    if (!ops[1])
        return NULL;
    IrInstr *sorted = emit_sort(cx, ops, 2, comparator(cx, t->vt, true));
    IrInstr *parts[2] = {first_k(cx, spmd_emit_gte(cx, sorted, 0), t->k),
                         first_k(cx, spmd_emit_gte(cx, sorted, 1), t->k)};
    return spmd_emit_tuple(cx, parts, 2);
}

SlStatus
spmd_handle_topk(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const IrInstr *in = hlo->n_operands == 1 ? hlo->operands[0] : NULL;
    const ShdSharding *s = in ? spmd_sharding_of(cx, in) : NULL;
    if (!s || !shd_is_tiled(s) || shd_has_partial_replication(s) || s->n_subgroups ||
        in->shape.rank != 2 || !ir_shape_is_tuple(&hlo->shape) || hlo->shape.n_elems != 2)
        return spmd_handle_default(cx, hlo, err);
    TopK t = {hlo, s, NULL, cx->state, shd_dim_shards(s, 1), 0, hlo->shape.elems[0].dims[1],
              hlo->shape.elems[0].dims[0], in->shape.dtype};
    t.per = (in->shape.dims[1] + t.shards - 1) / t.shards;
    IrInstr *lowest = lowest_value(cx, t.vt);
    if (t.k >= t.per || !lowest)
        return spmd_handle_default(cx, hlo, err);
    SpmdValue op;
    SlStatus st = spmd_operand(cx, hlo, 0, s, &op, err);
    if (st != SL_OK)
        return st;
    IrInstr *padded = spmd_pad_with_value(cx, &op, lowest, 0);
    t.rep = shd_replicated(cx->arena);
    if (shd_dim_shards(s, 0) > 1) {
        ShdGrouped g = shd_group_on_dims(cx->arena, s, (const int64_t[]){0}, 1, NULL);
        t.gst = g.device_groups ? spmd_state_grouped(cx, cx->state, g.device_groups, g.n_groups,
                                                     g.group_size)
                                : NULL;
        t.rep = shd_partially_replicate_dims(cx->arena, s, (const int64_t[]){1}, 1);
    }
    IrShape vs = hlo->shape.elems[0], is = hlo->shape.elems[1];
    vs.dims = SL_DUP_ARRAY(cx->arena, int64_t, vs.dims, 2);
    is.dims = SL_DUP_ARRAY(cx->arena, int64_t, is.dims, 2);
    if (!t.gst || !t.rep || !padded || !vs.dims || !is.dims)
        return spmd_nomem(cx, err);
    vs.dims[0] = is.dims[0] = op.hlo->shape.dims[0];
    IrShape ts = ir_shape_make(cx->arena, IR_DT_TUPLE, NULL, 0);
    IrShape elems[2] = {vs, is};
    ts.n_elems = 2;
    ts.elems = SL_DUP_ARRAY(cx->arena, IrShape, elems, 2);
    IrInstr *topk = ts.elems ? spmd_emit_clone(cx, hlo, &ts, &padded, 1) : NULL;
    IrInstr *res = topk ? final_topk(cx, &t, topk, err) : NULL;
    if (!res)
        return err->status != SL_OK ? err->status : spmd_nomem(cx, err);
    const ShdSharding *leaves[2] = {t.rep, t.rep};
    return spmd_finish(cx, hlo, res, shd_tuple(cx->arena, leaves, 2), err);
}
