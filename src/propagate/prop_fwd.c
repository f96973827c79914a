/* prop_fwd.c - the forward rules (XLA's InferShardingFromOperands): an instruction's sharding
 * from its operands', per opcode, plus which instructions take part at all
 * (SupportSpatialPartitioning) and at which aggressiveness level a sharding passes through an
 * op. Owns: those rules. Does not own: the order of the sweeps (prop_fix.c), dot and
 * convolution (prop_dot.c), gather/scatter (prop_gs.c). */
#include <string.h>

#include "propagate/prop_int.h"

static bool
is_elementwise(const IrInstr *i)
{
    if (ir_op_family(i->op) == IR_FAM_ELEMENTWISE || i->op == IR_OP_RNG)
        return true;
    if (i->op == IR_OP_BITCAST_CONVERT && i->n_operands == 1)
        return i->operands[0]->shape.rank == i->shape.rank;
    return false;
}

bool
prop_can_pass_at_level(const IrInstr *i, int level)
{
    if (is_elementwise(i) || prop_is_custom_call(i, "Sharding"))
        return true;
    switch (i->op) {
    case IR_OP_CALL:
    case IR_OP_CONCATENATE:
    case IR_OP_COPY:
    case IR_OP_DYNAMIC_SLICE:
    case IR_OP_DYNAMIC_UPDATE_SLICE:
    case IR_OP_GET_TUPLE_ELEMENT:
    case IR_OP_OPT_BARRIER:
    case IR_OP_RESHAPE:
    case IR_OP_TUPLE:
    case IR_OP_TRANSPOSE:
    case IR_OP_WHILE: return true;
    case IR_OP_BROADCAST: return level >= 2;
    default: return level >= 1;
    }
}

static bool
has_side_effect(const IrInstr *i)
{
    switch (i->op) {
    case IR_OP_SEND:
    case IR_OP_SEND_DONE:
    case IR_OP_RECV:
    case IR_OP_RECV_DONE:
    case IR_OP_INFEED:
    case IR_OP_OUTFEED:
    case IR_OP_RNG:
    case IR_OP_RNG_GET_AND_UPDATE_STATE: return true;
    case IR_OP_CUSTOM_CALL: {
        const IrAttr *a = ir_instr_find_other(i, "custom_call_has_side_effect");
        return a && sl_str_eq_cstr(a->u.other.text, "true");
    }
    default: return false;
    }
}

static bool
is_passthrough_custom(const IrInstr *i)
{
    if (prop_is_custom_call(i, "Sharding") || prop_is_custom_call(i, "X64Combine") ||
        prop_is_custom_call(i, "LayoutConstraint"))
        return true;
    if (i->n_operands != 1 || !ir_shape_is_array(&i->shape) ||
        !ir_shape_is_array(&i->operands[0]->shape) || i->operands[0]->shape.rank != i->shape.rank)
        return false;
    static const char *const k_targets[] = {
        "ResizeNearest", "ResizeBilinear", "ResizeNearestGrad", "ResizeBilinearGrad", "Cholesky",
        "MoveToHost",    "MoveToDevice",   "PinToDevice",       "PinToDeviceSram"};
    for (size_t k = 0; k < SL_COUNTOF(k_targets); k++)
        if (prop_is_custom_call(i, k_targets[k]))
            return true;
    return false;
}

static bool
is_barrier(const IrInstr *i)
{
    return prop_is_custom_call(i, "ShardBarrierFrom") || prop_is_custom_call(i, "ShardBarrierTo");
}

bool
prop_support_spatial(PropCtx *cx, const IrInstr *i, bool allow_output, bool allow_params)
{
    bool in_body = cx->caller[i->parent->id] != NULL;
    if (i->parent->root == i && !in_body && !(prop_is_entry_root(i) && allow_output))
        return false;
    if (is_elementwise(i) && (i->op != IR_OP_RNG || cx->o->is_spmd))
        return true;
    switch (i->op) {
    case IR_OP_BROADCAST:
    case IR_OP_CONCATENATE:
    case IR_OP_CONDITIONAL:
    case IR_OP_CONSTANT:
    case IR_OP_CONVOLUTION:
    case IR_OP_OPT_BARRIER:
    case IR_OP_DOT:
    case IR_OP_DYNAMIC_SLICE:
    case IR_OP_DYNAMIC_UPDATE_SLICE:
    case IR_OP_GATHER:
    case IR_OP_GET_TUPLE_ELEMENT:
    case IR_OP_INFEED:
    case IR_OP_IOTA:
    case IR_OP_PAD:
    case IR_OP_REDUCE_WINDOW:
    case IR_OP_RESHAPE:
    case IR_OP_SCATTER:
    case IR_OP_SELECT_AND_SCATTER:
    case IR_OP_SLICE:
    case IR_OP_SORT:
    case IR_OP_TRANSPOSE:
    case IR_OP_TUPLE:
    case IR_OP_WHILE:
    case IR_OP_REDUCE:
    case IR_OP_RNG_BIT_GENERATOR:
    case IR_OP_ALL_REDUCE:
    case IR_OP_COLLECTIVE_PERMUTE:
    case IR_OP_REDUCE_SCATTER: return true;
    case IR_OP_PARAMETER: return allow_params || in_body;
    case IR_OP_REVERSE: return cx->o->is_spmd;
    case IR_OP_CUSTOM_CALL:
        if (!cx->o->is_spmd)
            return false;
        return is_barrier(i) || is_passthrough_custom(i);
    default: return false;
    }
}

/* PickRepresentativeOperand. */
static const IrInstr *
representative(PropCtx *cx, const IrInstr *i)
{
    switch (i->op) {
    case IR_OP_MAP:
    case IR_OP_PAD:
    case IR_OP_POWER:
    case IR_OP_OPT_BARRIER:
    case IR_OP_RAGGED_ALL_TO_ALL:
    case IR_OP_REVERSE:
    case IR_OP_SLICE:
    case IR_OP_SHIFT_LEFT:
    case IR_OP_SHIFT_RIGHT_ARITHMETIC:
    case IR_OP_SHIFT_RIGHT_LOGICAL:
        return i->n_operands && prop_sh(cx, i->operands[0]) ? i->operands[0] : NULL;
    case IR_OP_CUSTOM_CALL: return is_passthrough_custom(i) && i->n_operands ? i->operands[0] : NULL;
    case IR_OP_BROADCAST:
    case IR_OP_CALL:
    case IR_OP_CONDITIONAL:
    case IR_OP_CONSTANT:
    case IR_OP_CONVOLUTION:
    case IR_OP_DOT:
    case IR_OP_DYNAMIC_SLICE:
    case IR_OP_DYNAMIC_UPDATE_SLICE:
    case IR_OP_GATHER:
    case IR_OP_GET_TUPLE_ELEMENT:
    case IR_OP_IOTA:
    case IR_OP_PARAMETER:
    case IR_OP_REDUCE:
    case IR_OP_REDUCE_WINDOW:
    case IR_OP_RESHAPE:
    case IR_OP_SCATTER:
    case IR_OP_SELECT_AND_SCATTER:
    case IR_OP_TRANSPOSE:
    case IR_OP_TUPLE: return NULL;
    default: break;
    }
    bool any_op = is_elementwise(i) || i->op == IR_OP_CONCATENATE || i->op == IR_OP_SORT ||
                  i->op == IR_OP_WHILE || i->op == IR_OP_TOPK ||
                  ir_op_family(i->op) == IR_FAM_COLLECTIVE || i->op == IR_OP_ALL_REDUCE ||
                  i->op == IR_OP_COLLECTIVE_PERMUTE;
    if (!any_op)
        return NULL;
    const IrInstr *best = NULL;
    for (uint32_t k = 0; k < i->n_operands; k++) {
        const ShdSharding *s = prop_sh(cx, i->operands[k]);
        if (s && (!best || px_more_specific(s, prop_sh(cx, best))))
            best = i->operands[k];
    }
    return best;
}

/* InferReduceShardingFromOperand. */
static bool
reduce_forward(PropCtx *cx, IrInstr *r, bool combine)
{
    uint32_t n_in = r->n_operands / 2;
    const int64_t *dims;
    uint32_t nd = ir_instr_ints_attr(r, IR_ATTR_DIMENSIONS, &dims);
    bool aggr = prop_non_root_users(cx, r) == 1, changed = false;
    for (uint32_t k = 0; k < n_in; k++) {
        IrInstr *op = r->operands[k];
        const ShdSharding *s = prop_sh(cx, op);
        if (!px_spatial(s))
            continue;
        cx->from = op;
        cx->rule = "reduce";
        if (px_manual(s)) {
            changed |= prop_improve_sub(cx, r, s, k, combine, aggr);
            continue;
        }
        bool sharded_reduced = false;
        if (!cx->o->is_spmd && s->kind == SHD_TILED)
            for (uint32_t x = 0; x < nd; x++)
                sharded_reduced |= dims[x] < shd_data_rank(s) && s->tile_dims[dims[x]] > 1;
        if (px_replicated(s) || sharded_reduced) {
            changed |= prop_improve(cx, r,
                                    px_single_tuple(cx, &r->shape,
                                                    px_replicate_all_data(cx, s, r->shape.rank)),
                                    combine, aggr);
            continue;
        }
        const ShdSharding *pr = px_replicate_dims(cx, s, dims, nd);
        if (px_replicated(pr)) {
            changed |= prop_improve(cx, r, px_single_tuple(cx, &r->shape, pr), combine, aggr);
            continue;
        }
        const ShdSharding *rm = px_remove_dims(cx, pr, dims, nd);
        if (!rm)
            continue;
        changed |= prop_improve(cx, r, px_single_tuple(cx, &r->shape, px_keep_md(cx, rm, s)),
                                combine, aggr);
    }
    return changed;
}

static bool
broadcast_forward(PropCtx *cx, IrInstr *b, bool combine)
{
    if (cx->level < 3)
        return false;
    const IrInstr *op = b->operands[0];
    const ShdSharding *s = prop_sh(cx, op);
    if (!px_spatial(s) || px_replicated(s) || s->kind != SHD_TILED)
        return false;
    const int64_t *dims;
    uint32_t nd = ir_instr_ints_attr(b, IR_ATTR_DIMENSIONS, &dims);
    int64_t td[PROP_MAX_RANK];
    uint32_t n = 0;
    for (uint32_t k = 0; k < b->shape.rank; k++) {
        int64_t src = -1;
        for (uint32_t x = 0; x < nd; x++)
            if (dims[x] == (int64_t)k)
                src = x;
        td[n++] = src < 0 ? 1 : s->tile_dims[src];
    }
    for (uint32_t k = shd_data_rank(s); k < s->n_tile_dims; k++)
        td[n++] = s->tile_dims[k];
    const ShdSharding *t =
        shd_tiled(cx->a, td, n, s->devices, s->subgroups, s->n_subgroups);
    cx->from = op;
    cx->rule = "broadcast";
    return t && prop_improve(cx, b, px_keep_md(cx, t, s), combine,
                             prop_non_root_users(cx, b) == 1);
}

static bool
concat_forward(PropCtx *cx, IrInstr *c, bool combine)
{
    const IrInstr *op = representative(cx, c);
    if (!op || !px_spatial(prop_sh(cx, op)))
        return false;
    if (cx->level == 0) {
        const int64_t *dims;
        uint32_t nd = ir_instr_ints_attr(c, IR_ATTR_DIMENSIONS, &dims);
        for (uint32_t k = 0; k < c->n_operands; k++) {
            const IrInstr *co = c->operands[k];
            const ShdSharding *cs = prop_sh(cx, co);
            if (!px_spatial(cs) || px_num_tiles(cs) <= 1 || co->op != IR_OP_RESHAPE ||
                (co->operands[0]->op != IR_OP_PARAMETER &&
                 co->operands[0]->op != IR_OP_GET_TUPLE_ELEMENT))
                return false;
            for (uint32_t x = 0; x < nd; x++)
                if (cs->kind == SHD_TILED && dims[x] < shd_data_rank(cs) &&
                    cs->tile_dims[dims[x]] > 1)
                    return false;
        }
    }
    cx->from = op;
    cx->rule = "concatenate";
    return prop_improve(cx, c, prop_sh(cx, op), combine, prop_non_root_users(cx, c) == 1);
}

static bool
dynamic_slice_from_operand1(PropCtx *cx, IrInstr *i, bool combine)
{
    const IrInstr *op = i->op == IR_OP_DYNAMIC_SLICE ? i->operands[0] : i->operands[1];
    const ShdSharding *s = prop_sh(cx, op);
    if (!px_spatial(s) || px_manual(s))
        return false;
    int64_t sd[PROP_MAX_RANK];
    uint32_t n = 0;
    for (uint32_t k = 0; k < i->shape.rank && k < op->shape.rank; k++)
        if (i->shape.dims[k] != op->shape.dims[k])
            sd[n++] = k;
    cx->from = op;
    cx->rule = i->op == IR_OP_DYNAMIC_SLICE ? "dynamic-slice" : "dynamic-update-slice update";
    return prop_improve(cx, i, px_replicate_dims(cx, s, sd, n), combine,
                        prop_non_root_users(cx, i) == 1);
}

static bool
sort_forward(PropCtx *cx, IrInstr *s, bool combine)
{
    const IrInstr *op = representative(cx, s);
    const ShdSharding *os = op ? prop_sh(cx, op) : NULL;
    if (!op || !px_spatial(os))
        return false;
    const int64_t *dims;
    uint32_t nd = ir_instr_ints_attr(s, IR_ATTR_DIMENSIONS, &dims);
    int64_t sd = nd ? dims[0] : 0;
    if (os->kind == SHD_TILED && sd < shd_data_rank(os) && os->tile_dims[sd] != 1 &&
        shd_find_tile_move_target(&op->shape, os, (uint32_t)sd, NULL, 0) < 0)
        return false;
    cx->from = op;
    cx->rule = "sort";
    return prop_improve(cx, s, px_single_tuple(cx, &s->shape, os), combine,
                        prop_non_root_users(cx, s) == 1);
}

static bool
parameter_forward(PropCtx *cx, IrInstr *p, bool combine)
{
    IrInstr *caller = cx->caller[p->parent->id];
    if (!caller)
        return false;
    const IrInstr *src = NULL;
    if (caller->op == IR_OP_CONDITIONAL) {
        const IrAttr *b = ir_instr_find_attr(caller, IR_ATTR_BRANCH_COMPUTATIONS);
        if (b) {
            for (uint32_t k = 0; k < b->u.comps.n; k++)
                if (b->u.comps.v[k] == p->parent && k + 1 < caller->n_operands)
                    src = caller->operands[k + 1];
        } else if (ir_instr_called(caller, IR_ATTR_TRUE_COMPUTATION) == p->parent &&
                   caller->n_operands > 1)
            src = caller->operands[1];
        else if (ir_instr_called(caller, IR_ATTR_FALSE_COMPUTATION) == p->parent &&
                 caller->n_operands > 2)
            src = caller->operands[2];
    } else if (caller->op == IR_OP_CALL && p->parameter_number < caller->n_operands) {
        src = caller->operands[p->parameter_number];
    }
    if (!src || !prop_sh(cx, src))
        return false;
    cx->from = src;
    cx->rule = "call operand";
    return prop_improve(cx, p, prop_sh(cx, src), combine, false);
}

static bool
tuple_forward(PropCtx *cx, IrInstr *t)
{
    bool any = false;
    for (uint32_t k = 0; k < t->n_operands; k++)
        any = any || px_spatial(prop_sh(cx, t->operands[k]));
    if (!any)
        return false;
    uint32_t nl = ir_shape_leaf_count(&t->shape);
    const ShdSharding **lv = SL_NEW_ARRAY(cx->a, const ShdSharding *, nl + 1);
    if (!lv)
        return false;
    const ShdSharding *cur = prop_sh(cx, t);
    for (uint32_t k = 0; k < nl; k++)
        lv[k] = !cur ? shd_replicated(cx->a) : cur->kind == SHD_TUPLE ? cur->leaves[k] : cur;
    uint32_t idx = 0;
    const IrInstr *last_from = NULL;
    for (uint32_t k = 0; k < t->n_operands; k++) {
        const IrInstr *op = t->operands[k];
        const ShdSharding *os = prop_sh(cx, op);
        uint32_t n = ir_shape_leaf_count(&op->shape);
        if (os) {
            for (uint32_t x = 0; x < n && idx + x < nl; x++) {
                const ShdSharding *e = os->kind == SHD_TUPLE ? (x < os->n_leaves ? os->leaves[x] : NULL) : os;
                if (e && (!cur || px_more_specific(e, lv[idx + x]))) {
                    lv[idx + x] = e;
                    last_from = op;
                }
            }
        }
        idx += n;
    }
    const ShdSharding *ns = shd_tuple(cx->a, lv, nl);
    if (cur && shd_equal(ns, px_single_tuple(cx, &t->shape, cur)))
        return false;
    cx->from = last_from;
    cx->rule = "tuple";
    return prop_set(cx, t, ns, NULL);
}

/* The thread an async op's wrapped computation runs on (its `async_execution_thread`, which
 * XLA prints on the start only; updates and dones name their start), "main" when absent;
 * false when `i` is not an async op. */
static bool
async_thread(const IrInstr *i, SlStr *out)
{
    for (uint32_t hops = 0; hops < 64; hops++) {
        switch (i->op) {
        case IR_OP_ASYNC_START:
        case IR_OP_CALL_START: {
            const IrAttr *a = ir_instr_find_other(i, "async_execution_thread");
            *out = a ? a->u.text : sl_str("main");
            return true;
        }
        case IR_OP_ASYNC_UPDATE:
        case IR_OP_ASYNC_DONE:
        case IR_OP_CALL_UPDATE:
        case IR_OP_CALL_DONE:
            if (!i->n_operands)
                return false;
            i = i->operands[0];
            break;
        default: return false;
        }
    }
    return false;
}

bool
prop_forward(PropCtx *cx, IrInstr *i)
{
    if (!prop_can_pass_at_level(i, cx->level))
        return false;
    const ShdSharding *cur = prop_sh(cx, i);
    if (cur && px_manual(cur))
        return false;
    bool tuple_cc = i->op == IR_OP_CUSTOM_CALL && ir_shape_is_tuple(&i->shape);
    /* an async op whose computation runs on a thread this pass does not visit is manual as a
     * whole when an operand is (XLA: nothing inside it can say otherwise) */
    SlStr thread;
    bool foreign_async = async_thread(i, &thread) && !prop_options_thread_named(cx->o, thread);
    if ((!cur || px_tile_maximal(cur)) &&
        (ir_shape_is_array(&i->shape) || i->op == IR_OP_REDUCE || i->op == IR_OP_SORT ||
         i->op == IR_OP_REDUCE_WINDOW || tuple_cc || foreign_async)) {
        for (uint32_t k = 0; k < i->n_operands; k++) {
            const ShdSharding *os = prop_sh(cx, i->operands[k]);
            if (!os || !px_manual(os))
                continue;
            if (prop_is_custom_call(i, "SPMDShardToFullShape"))
                return false;
            if (cx->level == 0 && (i->op == IR_OP_CONCATENATE || i->op == IR_OP_DYNAMIC_SLICE))
                return false;
            cx->from = i->operands[k];
            cx->rule = "manual";
            return prop_set(cx, i, px_single_tuple(cx, &i->shape, px_manual_sh(cx, os)), NULL);
        }
    }
    if (prop_saturated(cx, cur) && i->op != IR_OP_GET_TUPLE_ELEMENT)
        return false;
    bool combine = cx->o->is_spmd && cx->level > 0;
    if (!prop_support_spatial(cx, i, cx->allow_output, false)) {
        if (ir_shape_is_tuple(&i->shape) || i->n_operands == 0 || i->parent->root == i ||
            has_side_effect(i))
            return false;
        for (uint32_t k = 0; k < i->n_operands; k++) {
            const ShdSharding *os = prop_sh(cx, i->operands[k]);
            if (os && px_tile_maximal(os) && os->kind != SHD_MAXIMAL) {
                cx->from = i->operands[k];
                cx->rule = "replicated operand";
                return prop_improve(cx, i, os, combine, false);
            }
        }
        return false;
    }
    bool aggr = prop_non_root_users(cx, i) == 1;
    switch (i->op) {
    case IR_OP_GET_TUPLE_ELEMENT: {
        const IrInstr *op = i->operands[0];
        if (!px_spatial(prop_sh(cx, op)))
            return false;
        int64_t idx = 0;
        ir_instr_int_attr(i, IR_ATTR_INDEX, &idx);
        const ShdSharding *s = px_sub(cx, prop_sh(cx, op), &op->shape, (uint32_t)idx);
        if (!s)
            return false;
        cx->from = op;
        cx->rule = "get-tuple-element";
        if (px_manual(s))
            return prop_set(cx, i, s, NULL);
        return prop_improve(cx, i, s, combine, aggr);
    }
    case IR_OP_TUPLE: return tuple_forward(cx, i);
    case IR_OP_REDUCE: return reduce_forward(cx, i, combine);
    case IR_OP_BROADCAST: return broadcast_forward(cx, i, combine);
    case IR_OP_CONCATENATE: return concat_forward(cx, i, combine);
    case IR_OP_CONVOLUTION: return prop_conv_forward(cx, i, combine);
    case IR_OP_TRANSPOSE: {
        const ShdSharding *s = prop_sh(cx, i->operands[0]);
        if (!px_spatial(s))
            return false;
        const int64_t *dims;
        ir_instr_ints_attr(i, IR_ATTR_DIMENSIONS, &dims);
        const ShdSharding *t = shd_transpose(cx->a, s, dims);
        cx->from = i->operands[0];
        cx->rule = "transpose";
        return t && prop_improve(cx, i, px_keep_md(cx, t, s), combine, aggr);
    }
    case IR_OP_REDUCE_WINDOW: {
        const IrAttr *w = ir_instr_find_attr(i, IR_ATTR_WINDOW);
        for (uint32_t k = 0; w && k < w->u.window.n; k++)
            if (w->u.window.v[k].lhs_dilate > 1 || w->u.window.v[k].rhs_dilate > 1)
                return false;
        bool changed = false;
        for (uint32_t k = 0; k < i->n_operands / 2; k++) {
            const ShdSharding *s = prop_sh(cx, i->operands[k]);
            if (!px_spatial(s))
                continue;
            cx->from = i->operands[k];
            cx->rule = "reduce-window";
            changed |= prop_improve(cx, i, px_single_tuple(cx, &i->shape, s), combine, aggr);
        }
        return changed;
    }
    case IR_OP_SELECT_AND_SCATTER: {
        const ShdSharding *s = prop_sh(cx, i->operands[0]);
        if (!px_spatial(s))
            return false;
        const IrAttr *w = ir_instr_find_attr(i, IR_ATTR_WINDOW);
        for (uint32_t k = 0; w && k < w->u.window.n; k++)
            if (w->u.window.v[k].lhs_dilate > 1)
                return false;
        cx->from = i->operands[0];
        cx->rule = "select-and-scatter";
        return prop_improve(cx, i, s, combine, aggr);
    }
    case IR_OP_RESHAPE: {
        const ShdSharding *s = prop_sh(cx, i->operands[0]);
        if (!px_spatial(s))
            return false;
        const ShdSharding *t =
            shd_propagate_through_reshape(cx->a, &i->operands[0]->shape, &i->shape, s);
        cx->from = i->operands[0];
        cx->rule = "reshape";
        return t && prop_improve(cx, i, px_keep_md(cx, t, s), combine, aggr);
    }
    case IR_OP_REVERSE: {
        const ShdSharding *s = prop_sh(cx, i->operands[0]);
        if (!px_spatial(s))
            return false;
        const int64_t *dims;
        uint32_t nd = ir_instr_ints_attr(i, IR_ATTR_DIMENSIONS, &dims);
        const ShdSharding *t = shd_reverse(cx->a, s, dims, nd);
        cx->from = i->operands[0];
        cx->rule = "reverse";
        return t && prop_improve(cx, i, px_keep_md(cx, t, s), combine, aggr);
    }
    case IR_OP_DOT: return prop_dot_forward(cx, i, combine);
    case IR_OP_PARAMETER: return parameter_forward(cx, i, combine);
    case IR_OP_SORT: return sort_forward(cx, i, combine);
    case IR_OP_DYNAMIC_SLICE: return dynamic_slice_from_operand1(cx, i, combine);
    case IR_OP_DYNAMIC_UPDATE_SLICE: {
        bool changed = dynamic_slice_from_operand1(cx, i, combine);
        const ShdSharding *s = prop_sh(cx, i->operands[0]);
        if (px_spatial(s)) {
            cx->from = i->operands[0];
            cx->rule = "dynamic-update-slice operand";
            changed |= prop_improve(cx, i, s, combine, false);
        }
        return changed;
    }
    case IR_OP_GATHER: return prop_gather_forward(cx, i, combine);
    case IR_OP_SCATTER: return prop_scatter_forward(cx, i, combine);
    case IR_OP_WHILE: {
        const ShdSharding *s = prop_sh(cx, i->operands[0]);
        if (!s)
            return false;
        if (cur)
            px_merge(cx, cur, &s, combine);
        cx->from = i->operands[0];
        cx->rule = "while operand";
        return prop_improve(cx, i, s, combine, false);
    }
    case IR_OP_CUSTOM_CALL: {
        const ShdSharding *s = NULL;
        if (prop_is_custom_call(i, "ShardBarrierFrom"))
            return false;
        if (prop_is_custom_call(i, "ShardBarrierTo")) {
            s = prop_sh(cx, i->operands[0]);
            if (!s)
                return false;
            cx->from = i->operands[0];
        } else {
            const IrInstr *op = representative(cx, i);
            if (!op || !px_spatial(prop_sh(cx, op)))
                return false;
            s = prop_sh(cx, op);
            cx->from = op;
        }
        cx->rule = "custom-call";
        return prop_improve(cx, i, s, combine, aggr);
    }
    default: break;
    }
    if (is_elementwise(i) && combine) {
        bool changed = false;
        for (uint32_t k = 0; k < i->n_operands; k++) {
            const ShdSharding *s = prop_sh(cx, i->operands[k]);
            if (!px_spatial(s))
                continue;
            cx->from = i->operands[k];
            cx->rule = "elementwise";
            if (i->op == IR_OP_RNG) {
                changed |= prop_improve(cx, i, px_replicate_all_data(cx, s, i->shape.rank),
                                        combine, aggr);
                continue;
            }
            changed |= prop_improve(cx, i, s, combine, i->n_operands == 1 && aggr);
        }
        return changed;
    }
    const IrInstr *op = representative(cx, i);
    if (!op || !px_spatial(prop_sh(cx, op)))
        return false;
    cx->from = op;
    cx->rule = is_elementwise(i) ? "elementwise" : ir_op_name(i->op);
    return prop_improve(cx, i, prop_sh(cx, op), combine, aggr);
}
