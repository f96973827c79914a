/* eval.c - the interpreter: evaluates a computation on a set of devices ("lanes") at once.
 * Owns: plans (operand positions, last uses), dispatch to the family kernels, control flow
 * (call, while, conditional: lanes that take different paths continue as separate groups) and
 * handing collectives every lane's operands at the same instruction. Does not own: any
 * opcode's arithmetic (eval_*.c) or collective semantics (collectives.c).
 * Invariant: a value is freed right after its last use, so memory follows the live set. */
#include "sim/sim_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX_WHILE_TRIPS ((int64_t)1 << 24) /* a loop running longer is reported, not hung */

SlStatus
sim_fail(SimCtx *cx, const IrInstr *ins, SlStatus st, const char *fmt, ...)
{
    char msg[SL_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    SlSrcLoc loc = {0};
    if (!ins)
        return sl_fail(cx->err, st, loc, "%s", msg);
    loc.line = ins->src_line;
    loc.col = ins->src_col;
    return sl_fail(cx->err, st, loc, "%%%s (%s) in %%%s: %s", sl_sym_cstr(ins->name),
                   ir_op_name(ins->op), ins->parent ? sl_sym_cstr(ins->parent->name) : "?", msg);
}

bool
sim_other_int_attr(const IrInstr *ins, const char *key, int64_t *out)
{
    const IrAttr *a = ir_instr_find_other(ins, key);
    if (a) {
        char buf[32];
        size_t n = a->u.text.len < sizeof buf - 1 ? a->u.text.len : sizeof buf - 1;
        memcpy(buf, a->u.text.ptr, n);
        buf[n] = 0;
        *out = strtoll(buf, NULL, 10);
        return true;
    }
    return false;
}

/* ---- context and plans --------------------------------------------------------------- */

void
sim_ctx_init(SimCtx *cx, const IrModule *m, int64_t n_devices, SlError *err)
{
    memset(cx, 0, sizeof *cx);
    cx->m = m;
    cx->n_devices = n_devices;
    cx->err = err;
    sl_map_init(&cx->plans);
    sl_map_init(&cx->consts);
}

static void
plan_free(SimPlan *p)
{
    free(p->op_start);
    free(p->op_idx);
    free(p->last_use);
    free(p->param_pos);
    free(p->regs);
    free(p);
}

void
sim_ctx_fini(SimCtx *cx)
{
    for (size_t i = 0; i < cx->plan_list.len; i++)
        plan_free(SL_VEC_AT(&cx->plan_list, SimPlan *, i));
    for (size_t i = 0; i < cx->const_list.len; i++)
        sim_value_unref(SL_VEC_AT(&cx->const_list, SimValue *, i));
    sl_vec_fini(&cx->plan_list);
    sl_vec_fini(&cx->const_list);
    sl_map_fini(&cx->plans);
    sl_map_fini(&cx->consts);
}

/* Fills operand positions and last uses; `pos` maps instruction -> index. */
static SlStatus
plan_fill(SimCtx *cx, SimPlan *p, const SlMap *pos)
{
    const IrComputation *c = p->comp;
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        const IrInstr *ins = c->instrs[i];
        p->op_start[i] = k;
        p->last_use[i] = i;
        if (ins->n_operands > p->max_ops)
            p->max_ops = ins->n_operands;
        for (uint32_t j = 0; j < ins->n_operands; j++) {
            uint64_t at;
            if (!sl_map_get(pos, SL_MAP_KEY(ins->operands[j]), &at) || at >= i)
                return sim_fail(cx, ins, SL_ERR_INVALID, "operand %u is not defined before it", j);
            p->op_idx[k++] = (uint32_t)at;
            p->last_use[at] = i;
        }
        if (ins->op == IR_OP_PARAMETER) {
            if (ins->parameter_number < 0 || ins->parameter_number >= p->n_params)
                return sim_fail(cx, ins, SL_ERR_INVALID, "parameter number out of range");
            p->param_pos[ins->parameter_number] = i;
        }
    }
    p->op_start[p->n] = k;
    p->last_use[p->root] = UINT32_MAX;
    return SL_OK;
}

static SlStatus
plan_build(SimCtx *cx, const IrComputation *c, SimPlan **out)
{
    SimPlan *p = calloc(1, sizeof *p);
    uint32_t n_ops = 0;
    for (uint32_t i = 0; i < c->n_instrs; i++)
        n_ops += c->instrs[i]->n_operands;
    SlMap pos;
    sl_map_init(&pos);
    bool ok = p != NULL && c->n_instrs > 0;
    if (ok) {
        p->comp = c;
        p->n = c->n_instrs;
        p->n_params = ir_computation_param_count(c);
        p->op_start = calloc(p->n + 1, sizeof *p->op_start);
        p->op_idx = calloc(n_ops + 1, sizeof *p->op_idx);
        p->last_use = calloc(p->n, sizeof *p->last_use);
        p->param_pos = calloc(p->n_params + 1, sizeof *p->param_pos);
        ok = p->op_start && p->op_idx && p->last_use && p->param_pos;
    }
    for (uint32_t i = 0; ok && i < c->n_instrs; i++) {
        ok = sl_map_put(&pos, SL_MAP_KEY(c->instrs[i]), i);
        if (c->instrs[i] == c->root)
            p->root = i;
    }
    if (ok && !c->root)
        p->root = p->n - 1;
    SlStatus st = ok ? plan_fill(cx, p, &pos) : sim_fail(cx, NULL, SL_ERR_NOMEM, "out of memory");
    sl_map_fini(&pos);
    if (st || !SL_VEC_PUSH(&cx->plan_list, SimPlan *, p)) {
        if (p)
            plan_free(p);
        return st ? st : sim_fail(cx, NULL, SL_ERR_NOMEM, "out of memory");
    }
    p->fast_op = -1;
    p->scalar = -1;
    *out = p;
    return SL_OK;
}

SlStatus
sim_plan_get(SimCtx *cx, const IrComputation *c, SimPlan **out)
{
    uint64_t v;
    if (sl_map_get(&cx->plans, SL_MAP_KEY(c), &v)) {
        *out = (SimPlan *)(uintptr_t)v;
        return SL_OK;
    }
    SlStatus st = plan_build(cx, c, out);
    if (st)
        return st;
    (*out)->fast_op = sim_fast_binop(cx, c, &(*out)->fast_swapped);
    if (!sl_map_put(&cx->plans, SL_MAP_KEY(c), (uint64_t)(uintptr_t)*out))
        return sim_fail(cx, NULL, SL_ERR_NOMEM, "out of memory");
    return SL_OK;
}

int
sim_fast_binop(SimCtx *cx, const IrComputation *c, bool *swapped)
{
    (void)cx;
    const IrInstr *r = c->root ? c->root : (c->n_instrs ? c->instrs[c->n_instrs - 1] : NULL);
    *swapped = false;
    if (!r || r->n_operands != 2 || ir_op_arity(r->op) != 2 || r->op == IR_OP_COMPARE ||
        ir_op_family(r->op) != IR_FAM_ELEMENTWISE || r->shape.rank != 0)
        return -1;
    const IrInstr *a = r->operands[0], *b = r->operands[1];
    if (a->op != IR_OP_PARAMETER || b->op != IR_OP_PARAMETER || a == b ||
        ir_computation_param_count(c) != 2)
        return -1;
    switch (r->op) {
    case IR_OP_ADD: case IR_OP_MULTIPLY: case IR_OP_MAXIMUM: case IR_OP_MINIMUM:
    case IR_OP_AND: case IR_OP_OR: case IR_OP_XOR: case IR_OP_SUBTRACT: case IR_OP_DIVIDE:
        break;
    default: return -1;
    }
    *swapped = a->parameter_number == 1;
    return (int)r->op;
}

/* ---- applying bodies ------------------------------------------------------------------ */

SlStatus
sim_call(SimCtx *cx, const IrComputation *c, int64_t dev, SimValue *const *args, uint32_t n_args,
         SimValue **out)
{
    SimPlan *p;
    SlStatus st = sim_plan_get(cx, c, &p);
    if (st)
        return st;
    if (n_args != p->n_params)
        return sim_fail(cx, c->root, SL_ERR_INVALID, "called with %u arguments, takes %u",
                        n_args, p->n_params);
    return sim_eval_comp(cx, c, &dev, 1, args, out);
}

SlStatus
sim_apply2(SimCtx *cx, const IrInstr *ins, const IrComputation *c, IrDtype t, SimElem a,
           SimElem b, SimElem *out)
{
    SimPlan *p;
    SlStatus st = sim_plan_get(cx, c, &p);
    if (st)
        return st;
    if (p->fast_op >= 0) {
        *out = sim_fix(t, p->fast_swapped ? sim_binop((IrOp)p->fast_op, t, b, a)
                                          : sim_binop((IrOp)p->fast_op, t, a, b));
        return SL_OK;
    }
    const IrInstr *root = p->comp->instrs[p->root];
    if (root->op == IR_OP_PARAMETER && p->n_params == 2) { /* "keep" / "overwrite" bodies */
        *out = root->parameter_number == 0 ? a : b;
        return SL_OK;
    }
    SimElem args[2] = {a, b};
    IrDtype types[2] = {t, t};
    SimElem r;
    st = sim_call_scalars(cx, ins, c, 0, args, types, 2, &r, 1);
    if (!st) {
        IrDtype rt = p->comp->instrs[p->root]->shape.dtype;
        *out = rt == IR_DT_TUPLE ? r : sim_convert(rt, t, r);
    }
    return st;
}

static bool
is_scalar_instr(const IrInstr *ins, bool is_root)
{
    if (is_root && ins->op == IR_OP_TUPLE) {
        for (uint32_t j = 0; j < ins->n_operands; j++)
            if (ins->operands[j]->shape.dtype == IR_DT_TUPLE)
                return false;
        return true;
    }
    IrOpFamily f = ir_op_family(ins->op);
    bool simple = ins->op == IR_OP_PARAMETER || ins->op == IR_OP_CONSTANT ||
                  (f == IR_FAM_ELEMENTWISE && ins->op != IR_OP_MAP) ||
                  f == IR_FAM_BITCAST_CONVERT;
    return simple && ins->shape.rank == 0 && sim_is_array_dtype(ins->shape.dtype) &&
           ins->n_operands <= 3;
}

static SlStatus eval_constant(SimCtx *cx, const IrInstr *ins, SimValue **out);

/* Decides once whether `p` can run on registers, and decodes its constants. */
static SlStatus
plan_scalar(SimCtx *cx, SimPlan *p)
{
    p->scalar = 0;
    for (uint32_t i = 0; i < p->n; i++)
        if (!is_scalar_instr(p->comp->instrs[i], i == p->root))
            return SL_OK;
    if (!(p->regs = calloc(p->n, sizeof *p->regs)))
        return sim_fail(cx, p->comp->root, SL_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < p->n; i++) {
        const IrInstr *ins = p->comp->instrs[i];
        SimValue *v = NULL;
        if (ins->op != IR_OP_CONSTANT)
            continue;
        SlStatus st = eval_constant(cx, ins, &v);
        if (st)
            return st;
        p->regs[i] = v->data[0];
        sim_value_unref(v);
    }
    p->scalar = 1;
    return SL_OK;
}

static SlStatus
run_scalar(SimCtx *cx, SimPlan *p, const SimElem *args, SimElem *outs, uint32_t n_out)
{
    const IrComputation *c = p->comp;
    for (uint32_t i = 0; i < p->n; i++) {
        const IrInstr *ins = c->instrs[i];
        SimElem x[3];
        IrDtype t[3];
        if (ins->op == IR_OP_PARAMETER)
            p->regs[i] = sim_fix(ins->shape.dtype, args[ins->parameter_number]);
        if (ins->op == IR_OP_PARAMETER || ins->op == IR_OP_CONSTANT || ins->op == IR_OP_TUPLE)
            continue;
        for (uint32_t j = 0; j < ins->n_operands; j++) {
            x[j] = p->regs[p->op_idx[p->op_start[i] + j]];
            t[j] = ins->operands[j]->shape.dtype;
        }
        if (!sim_elem_apply(ins, t, x, &p->regs[i]))
            return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "opcode not supported for %s",
                            ir_dtype_name(t[0]));
    }
    const IrInstr *root = c->instrs[p->root];
    uint32_t n = root->op == IR_OP_TUPLE ? root->n_operands : 1;
    if (n != n_out)
        return sim_fail(cx, root, SL_ERR_INVALID, "returns %u values, %u expected", n, n_out);
    for (uint32_t j = 0; j < n; j++)
        outs[j] = root->op == IR_OP_TUPLE ? p->regs[p->op_idx[p->op_start[p->root] + j]]
                                          : p->regs[p->root];
    return SL_OK;
}

/* The general path: scalar values through sim_call. */
static SlStatus
call_values(SimCtx *cx, const IrInstr *ins, const IrComputation *c, int64_t dev,
            const SimElem *args, const IrDtype *types, uint32_t n_args, SimElem *outs,
            uint32_t n_out)
{
    SimValue **v = calloc(n_args + 1, sizeof *v), *r = NULL;
    SlStatus st = v ? SL_OK : sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; !st && j < n_args; j++) {
        if (!(v[j] = sim_value_new_array(types[j], NULL, 0)))
            st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
        else
            v[j]->data[0] = args[j];
    }
    if (!st)
        st = sim_call(cx, c, dev, v, n_args, &r);
    uint32_t n = !st && r->dtype == IR_DT_TUPLE ? r->n_elems : 1;
    if (!st && n != n_out)
        st = sim_fail(cx, ins, SL_ERR_INVALID, "body returns %u values, %u expected", n, n_out);
    for (uint32_t j = 0; !st && j < n; j++) {
        const SimValue *e = r->dtype == IR_DT_TUPLE ? r->elems[j] : r;
        if (e->dtype == IR_DT_TUPLE || e->n != 1)
            st = sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "body returning a non-scalar");
        else
            outs[j] = e->data[0];
    }
    sim_value_unref(r);
    for (uint32_t j = 0; v && j < n_args; j++)
        sim_value_unref(v[j]);
    free(v);
    return st;
}

SlStatus
sim_plan_scalar(SimCtx *cx, SimPlan *p)
{
    return p->scalar < 0 ? plan_scalar(cx, p) : SL_OK;
}

SlStatus
sim_call_scalars(SimCtx *cx, const IrInstr *ins, const IrComputation *c, int64_t dev,
                 const SimElem *args, const IrDtype *types, uint32_t n_args, SimElem *outs,
                 uint32_t n_out)
{
    SimPlan *p;
    SlStatus st = sim_plan_get(cx, c, &p);
    if (!st && p->scalar < 0)
        st = plan_scalar(cx, p);
    if (st)
        return st;
    if (n_args != p->n_params)
        return sim_fail(cx, ins, SL_ERR_INVALID, "calls %%%s with %u arguments, it takes %u",
                        sl_sym_cstr(c->name), n_args, p->n_params);
    if (p->scalar == 1)
        return run_scalar(cx, p, args, outs, n_out);
    return call_values(cx, ins, c, dev, args, types, n_args, outs, n_out);
}

/* ---- one instruction on one device -------------------------------------------------------- */

static SlStatus
eval_constant(SimCtx *cx, const IrInstr *ins, SimValue **out)
{
    uint64_t v;
    if (sl_map_get(&cx->consts, SL_MAP_KEY(ins), &v)) {
        *out = sim_value_ref((SimValue *)(uintptr_t)v);
        return SL_OK;
    }
    SlError e = {0};
    SimValue *c = NULL;
    if (sim_literal_parse(&ins->shape, ins->literal, &c, &e))
        return sim_fail(cx, ins, e.status, "%s", e.msg);
    if (!SL_VEC_PUSH(&cx->const_list, SimValue *, c) ||
        !sl_map_put(&cx->consts, SL_MAP_KEY(ins), (uint64_t)(uintptr_t)c)) {
        sim_value_unref(c);
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    }
    *out = sim_value_ref(c);
    return SL_OK;
}

static SlStatus
eval_simple(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out)
{
    switch (ins->op) {
    case IR_OP_TUPLE: *out = sim_value_new_tuple(ops, ins->n_operands); break;
    case IR_OP_GET_TUPLE_ELEMENT: {
        int64_t k = -1;
        ir_instr_int_attr(ins, IR_ATTR_INDEX, &k);
        if (ops[0]->dtype != IR_DT_TUPLE || k < 0 || k >= ops[0]->n_elems)
            return sim_fail(cx, ins, SL_ERR_INVALID, "tuple index %" PRId64 " out of range", k);
        *out = sim_value_ref(ops[0]->elems[k]);
        return SL_OK;
    }
    case IR_OP_OPT_BARRIER: *out = sim_value_ref(ops[0]); return SL_OK;
    case IR_OP_AFTER_ALL: *out = sim_value_new_array(IR_DT_TOKEN, NULL, 0); break;
    case IR_OP_ADD_DEPENDENCY: *out = sim_value_ref(ops[0]); return SL_OK;
    default: return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "opcode not supported by the evaluator");
    }
    return *out ? SL_OK : sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
}

/* infeed: (data from the host, token); outfeed: hands operand 0 to the host, gives a token. */
static SlStatus
eval_feed(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops, SimValue **out)
{
    bool in = ins->op == IR_OP_INFEED;
    if (!cx->env || (in ? !cx->env->infeed : !cx->env->outfeed))
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "no host to exchange data with");
    if (in ? ins->shape.dtype != IR_DT_TUPLE || ins->shape.n_elems != 2 : ins->n_operands < 1)
        return sim_fail(cx, ins, SL_ERR_INVALID, "malformed %s", ir_op_name(ins->op));
    SlError e = {0};
    SimValue *data = NULL, *tok = sim_value_new_array(IR_DT_TOKEN, NULL, 0);
    SlStatus st = tok ? SL_OK : sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    if (!st && (in ? cx->env->infeed(cx->env->user, ins, dev, &data, &e)
                   : cx->env->outfeed(cx->env->user, ins, dev, ops[0], &e)))
        st = sim_fail(cx, ins, e.status ? e.status : SL_ERR_INVALID, "%s", e.msg);
    if (!st && in) {
        SimValue *pair[2] = {data, tok};
        *out = sim_value_new_tuple(pair, 2);
        if (!*out)
            st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    } else if (!st) {
        *out = sim_value_ref(tok);
    }
    sim_value_unref(data);
    sim_value_unref(tok);
    return st;
}

static SlStatus
eval_op(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops, SimValue **out)
{
    if (ins->op == IR_OP_INFEED || ins->op == IR_OP_OUTFEED)
        return eval_feed(cx, ins, dev, ops, out);
    if (ins->op == IR_OP_CUSTOM_CALL)
        return sim_eval_custom_call(cx, ins, dev, ops, out);
    if (ins->op == IR_OP_SCAN)
        return sim_eval_scan(cx, ins, dev, ops, out);
    if (ins->op == IR_OP_TRIANGULAR_SOLVE)
        return sim_eval_triangular_solve(cx, ins, ops, out);
    switch (ir_op_family(ins->op)) {
    case IR_FAM_CONSTANT: return eval_constant(cx, ins, out);
    case IR_FAM_ELEMENTWISE:
    case IR_FAM_BITCAST_CONVERT:
    case IR_FAM_IOTA:
    case IR_FAM_PARTITION_ID: return sim_eval_elementwise(cx, ins, dev, ops, out);
    case IR_FAM_BROADCAST:
    case IR_FAM_RESHAPE:
    case IR_FAM_TRANSPOSE:
    case IR_FAM_SLICE:
    case IR_FAM_CONCATENATE:
    case IR_FAM_PAD:
    case IR_FAM_DYNAMIC_SLICE:
    case IR_FAM_DYNAMIC_UPDATE_SLICE:
    case IR_FAM_REVERSE: return sim_eval_shape(cx, ins, ops, out);
    case IR_FAM_REDUCE:
    case IR_FAM_REDUCE_WINDOW:
    case IR_FAM_SELECT_AND_SCATTER: return sim_eval_reduce(cx, ins, dev, ops, out);
    case IR_FAM_SORT: return sim_eval_sort(cx, ins, dev, ops, out);
    case IR_FAM_DOT: return sim_eval_dot(cx, ins, ops, out);
    case IR_FAM_CONVOLUTION: return sim_eval_conv(cx, ins, ops, out);
    case IR_FAM_GATHER: return sim_eval_gather(cx, ins, ops, out);
    case IR_FAM_SCATTER: return sim_eval_scatter(cx, ins, dev, ops, out);
    case IR_FAM_RAGGED_DOT: return sim_eval_ragged_dot(cx, ins, ops, out);
    case IR_FAM_OTHER:
        if (ins->op == IR_OP_REPLICA_ID)
            return sim_eval_elementwise(cx, ins, dev, ops, out);
        if (ins->op == IR_OP_BITCAST)
            return sim_eval_shape(cx, ins, ops, out);
        return eval_simple(cx, ins, ops, out);
    case IR_FAM_PARAMETER: case IR_FAM_CHOLESKY: case IR_FAM_TRIANGULAR_SOLVE:
    case IR_FAM_TUPLE: case IR_FAM_GET_TUPLE_ELEMENT: case IR_FAM_WHILE:
    case IR_FAM_CONDITIONAL: case IR_FAM_CALL: case IR_FAM_CUSTOM_CALL: case IR_FAM_ALL_REDUCE:
    case IR_FAM_COLLECTIVE: case IR_FAM_COLLECTIVE_PERMUTE: case IR_FAM_SIDE_EFFECT:
    case IR_FAM_RNG: case IR_FAM_OPT_BARRIER:
    case IR_FAM_SCAN: return eval_simple(cx, ins, ops, out); /* scan: sim_eval_scan above */
    }
    return eval_simple(cx, ins, ops, out);
}

/* ---- control flow over lanes ------------------------------------------------------------ */

/* Runs `c` on the subset `sel` (lane numbers) of the lanes, with one argument per lane taken
 * from args[sel[k]] and results written to out[sel[k]]. */
static SlStatus
eval_subset(SimCtx *cx, const IrComputation *c, const int64_t *devs, const uint32_t *sel,
            uint32_t n_sel, SimValue *const *args, SimValue **out)
{
    int64_t *sdevs = calloc(n_sel + 1, sizeof *sdevs);
    SimValue **sargs = calloc(n_sel + 1, sizeof *sargs), **souts = calloc(n_sel + 1, sizeof *souts);
    SlStatus st = SL_OK;
    if (!sdevs || !sargs || !souts)
        st = sim_fail(cx, c->root, SL_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; !st && k < n_sel; k++) {
        sdevs[k] = devs[sel[k]];
        sargs[k] = args[sel[k]];
    }
    if (!st)
        st = sim_eval_comp(cx, c, sdevs, n_sel, sargs, souts);
    for (uint32_t k = 0; !st && k < n_sel; k++)
        out[sel[k]] = souts[k];
    free(sdevs);
    free(sargs);
    free(souts);
    return st;
}

static SlStatus
eval_while(SimCtx *cx, const IrInstr *ins, const int64_t *devs, uint32_t n, SimValue *const *init,
           SimValue **out)
{
    const IrComputation *cond = ir_instr_called(ins, IR_ATTR_CONDITION);
    const IrComputation *body = ir_instr_called(ins, IR_ATTR_BODY);
    if (!cond || !body)
        return sim_fail(cx, ins, SL_ERR_INVALID, "while without condition or body");
    SimValue **state = calloc(n, sizeof *state), **tmp = calloc(n, sizeof *tmp);
    uint32_t *act = calloc(n, sizeof *act), n_act = n;
    SlStatus st = state && tmp && act ? SL_OK : sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (uint32_t l = 0; !st && l < n; l++) {
        state[l] = sim_value_ref(init[l]);
        act[l] = l;
    }
    int64_t max_trips = cx->env && cx->env->max_while_trips > 0 ? cx->env->max_while_trips
                                                                 : SIM_MAX_WHILE_TRIPS;
    for (int64_t trip = 0; !st && n_act > 0; trip++) {
        if (trip > max_trips)
            st = sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "more than %" PRId64 " iterations",
                          max_trips);
        if (!st)
            st = eval_subset(cx, cond, devs, act, n_act, state, tmp);
        uint32_t keep = 0;
        for (uint32_t k = 0; !st && k < n_act; k++) {
            uint32_t l = act[k];
            bool go = tmp[l]->n == 1 && tmp[l]->data[0].i != 0;
            sim_value_unref(tmp[l]);
            tmp[l] = NULL;
            if (go)
                act[keep++] = l;
            else
                out[l] = sim_value_ref(state[l]);
        }
        n_act = keep;
        if (!st && n_act > 0)
            st = eval_subset(cx, body, devs, act, n_act, state, tmp);
        for (uint32_t k = 0; !st && k < n_act; k++) {
            sim_value_unref(state[act[k]]);
            state[act[k]] = tmp[act[k]];
            tmp[act[k]] = NULL;
        }
    }
    for (uint32_t l = 0; state && l < n; l++)
        sim_value_unref(state[l]);
    free(state);
    free(tmp);
    free(act);
    return st;
}

/* Branch index of one lane: pred operands pick true (0) / false (1); an s32 index out of range
 * takes the last branch, as XLA does. */
static uint32_t
branch_of(const SimValue *sel, uint32_t n_branches, bool is_pred)
{
    int64_t b = sel->n ? sel->data[0].i : 0;
    if (is_pred)
        return b ? 0 : 1;
    return b < 0 || b >= (int64_t)n_branches ? n_branches - 1 : (uint32_t)b;
}

static SlStatus
eval_conditional(SimCtx *cx, const IrInstr *ins, const int64_t *devs, uint32_t n,
                 SimValue *const *ops, SimValue **out)
{
    const IrComputation *tc = ir_instr_called(ins, IR_ATTR_TRUE_COMPUTATION);
    const IrAttr *br = ir_instr_find_attr(ins, IR_ATTR_BRANCH_COMPUTATIONS);
    bool is_pred = tc != NULL;
    uint32_t nb = is_pred ? 2 : br ? br->u.comps.n : 0;
    if (nb == 0 || ins->n_operands != nb + 1)
        return sim_fail(cx, ins, SL_ERR_INVALID, "malformed conditional");
    uint32_t *sel = calloc(n, sizeof *sel);
    SimValue **args = calloc(n, sizeof *args);
    SlStatus st = sel && args ? SL_OK : sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (uint32_t b = 0; !st && b < nb; b++) {
        const IrComputation *c = is_pred ? (b == 0 ? tc : ir_instr_called(
                                                               ins, IR_ATTR_FALSE_COMPUTATION))
                                         : br->u.comps.v[b];
        uint32_t k = 0;
        for (uint32_t l = 0; l < n; l++) {
            SimValue *const *lops = ops + (size_t)l * ins->n_operands;
            if (branch_of(lops[0], nb, is_pred) == b) {
                sel[k++] = l;
                args[l] = lops[1 + b];
            }
        }
        if (k > 0 && !c)
            st = sim_fail(cx, ins, SL_ERR_INVALID, "missing branch computation");
        else if (k > 0)
            st = eval_subset(cx, c, devs, sel, k, args, out);
    }
    free(sel);
    free(args);
    return st;
}

static SlStatus
eval_lanes(SimCtx *cx, const IrInstr *ins, const int64_t *devs, uint32_t n, SimValue *const *ops,
           SimValue **out)
{
    uint32_t k = ins->n_operands;
    if (ins->op == IR_OP_WHILE) {
        SimValue **init = calloc(n + 1, sizeof *init);
        if (!init)
            return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
        for (uint32_t l = 0; l < n; l++)
            init[l] = ops[(size_t)l * k];
        SlStatus st = eval_while(cx, ins, devs, n, init, out);
        free(init);
        return st;
    }
    if (ins->op == IR_OP_CONDITIONAL)
        return eval_conditional(cx, ins, devs, n, ops, out);
    if (ins->op == IR_OP_CALL) {
        const IrComputation *c = ir_instr_called(ins, IR_ATTR_TO_APPLY);
        if (!c)
            return sim_fail(cx, ins, SL_ERR_INVALID, "call without to_apply");
        return sim_eval_comp(cx, c, devs, n, ops, out);
    }
    if (sim_is_collective(ins->op))
        return sim_eval_collective(cx, ins, devs, n, ops, out);
    if (sim_is_manual_cut(cx, ins))
        return sim_eval_manual_cut(cx, ins, devs, n, ops, out);
    for (uint32_t l = 0; l < n; l++) {
        SlStatus st = eval_op(cx, ins, devs[l], ops + (size_t)l * k, &out[l]);
        if (st)
            return st;
    }
    return SL_OK;
}

/* ---- computations -------------------------------------------------------------------------- */

static void
drop_all(SimValue **vals, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sim_value_unref(vals[i]);
}

/* Evaluates instruction i of `p` on every lane; vals[i * n + l]. */
static SlStatus
eval_instr(SimCtx *cx, const SimPlan *p, uint32_t i, const int64_t *devs, uint32_t n,
           SimValue *const *args, SimValue **vals, SimValue **ops)
{
    const IrInstr *ins = p->comp->instrs[i];
    SimValue **dst = vals + (size_t)i * n;
    if (ins->op == IR_OP_PARAMETER) {
        for (uint32_t l = 0; l < n; l++)
            dst[l] = sim_value_ref(args[(size_t)l * p->n_params + ins->parameter_number]);
        return SL_OK;
    }
    uint32_t k = ins->n_operands;
    for (uint32_t l = 0; l < n; l++)
        for (uint32_t j = 0; j < k; j++)
            ops[(size_t)l * k + j] = vals[(size_t)p->op_idx[p->op_start[i] + j] * n + l];
    return eval_lanes(cx, ins, devs, n, ops, dst);
}

SlStatus
sim_eval_comp(SimCtx *cx, const IrComputation *c, const int64_t *devs, uint32_t n_lanes,
              SimValue *const *args, SimValue **out)
{
    SimPlan *p;
    SlStatus st = sim_plan_get(cx, c, &p);
    if (st)
        return st;
    size_t n_vals = (size_t)p->n * n_lanes;
    SimValue **vals = calloc(n_vals, sizeof *vals);
    SimValue **ops = calloc((size_t)(p->max_ops + 1) * n_lanes, sizeof *ops);
    if (!vals || !ops)
        st = sim_fail(cx, c->root, SL_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; !st && i < p->n; i++) {
        st = eval_instr(cx, p, i, devs, n_lanes, args, vals, ops);
        for (uint32_t j = p->op_start[i]; !st && j < p->op_start[i + 1]; j++) {
            uint32_t at = p->op_idx[j];
            if (p->last_use[at] != i)
                continue;
            drop_all(vals + (size_t)at * n_lanes, n_lanes);
            memset(vals + (size_t)at * n_lanes, 0, n_lanes * sizeof *vals);
        }
        if (!st && p->last_use[i] == i) { /* unused */
            drop_all(vals + (size_t)i * n_lanes, n_lanes);
            memset(vals + (size_t)i * n_lanes, 0, n_lanes * sizeof *vals);
        }
    }
    if (!st)
        for (uint32_t l = 0; l < n_lanes; l++)
            out[l] = sim_value_ref(vals[(size_t)p->root * n_lanes + l]);
    if (vals)
        drop_all(vals, n_vals);
    free(vals);
    free(ops);
    return st;
}

SlStatus
sim_run(const IrModule *m, int64_t n_devices, SimValue *const *args, SimValue **out,
        SlError *err)
{
    return sim_run_env(m, n_devices, args, NULL, out, err);
}

SlStatus
sim_run_env(const IrModule *m, int64_t n_devices, SimValue *const *args, const SimEnv *env,
             SimValue **out, SlError *err)
{
    SimCtx cx;
    SlSrcLoc nowhere = {0};
    if (!m->entry)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "module has no entry computation");
    if (n_devices < 1 || n_devices > UINT32_MAX)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "bad device count %" PRId64, n_devices);
    if (ir_module_replica_count(m) != 1)
        return sl_fail(err, SL_ERR_UNSUPPORTED, nowhere, "replica_count other than 1");
    int64_t *devs = calloc((size_t)n_devices, sizeof *devs);
    if (!devs)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    for (int64_t d = 0; d < n_devices; d++)
        devs[d] = d;
    sim_ctx_init(&cx, m, n_devices, err);
    cx.env = env;
    SlStatus st = sim_eval_comp(&cx, m->entry, devs, (uint32_t)n_devices, args, out);
    sim_ctx_fini(&cx);
    free(devs);
    return st;
}
