/* check_control.c - shape rules of tuples and control flow for ir_module_check(): tuple,
 * get-tuple-element, while, conditional (predicate or branch index), call and its async form
 * (call-start, call-update, call-done), scan. Owns: fitting each called computation's parameters
 * and root to the call. Does not own: that called computations are in the module and listed
 * before their callers (check.c), the parameter and root rules themselves (check_common.c).
 * Invariant: the module is never modified; inferred shapes live in the checker's scratch
 * arena. */
/* clang-format off */
#include "ir/check_int.h" /* the file's own header first */
/* clang-format on */

/* ---- tuples ----------------------------------------------------------------------------- */

SlStatus
ck_check_tuple(IrCheck *ck, const IrInstr *in)
{
    IrShape *elems = in->n_operands ? SL_NEW_ARRAY(&ck->scratch, IrShape, in->n_operands) : NULL;
    if (in->n_operands && !elems)
        return ck_nomem(ck, in);
    for (uint32_t k = 0; k < in->n_operands; k++)
        elems[k] = *opnd(in, k);
    IrShape t;
    if (!ck_new_tuple(ck, elems, in->n_operands, &t))
        return ck_nomem(ck, in);
    return ck_expect(ck, in, &t);
}

SlStatus
ck_check_gte(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_operands(ck, in, 1)))
        return st;
    const IrShape *t = opnd(in, 0);
    int64_t index = -1;
    if (!ir_shape_is_tuple(t))
        return ck_bad(ck, in, "operand is not a tuple");
    if (!ir_instr_int_attr(in, IR_ATTR_INDEX, &index) || index < 0 || index >= (int64_t)t->n_elems)
        return ck_bad(ck, in, "index=%lld out of range for a tuple of %u elements",
                      (long long)index, t->n_elems);
    return ck_expect(ck, in, &t->elems[index]);
}

/* ---- control flow ------------------------------------------------------------------------ */

SlStatus
ck_check_while(IrCheck *ck, const IrInstr *in)
{
    IrComputation *cond, *body;
    SlStatus st;
    if ((st = ck_need_operands(ck, in, 1)) ||
        (st = ck_need_called(ck, in, IR_ATTR_CONDITION, &cond)) ||
        (st = ck_need_called(ck, in, IR_ATTR_BODY, &body)) || (st = ck_expect(ck, in, opnd(in, 0))))
        return st;
    IrShape pred;
    ck_new_shape(ck, IR_DT_PRED, 0, &pred);
    if ((st = ck_need_param_count(ck, in, cond, 1)) ||
        (st = ck_need_param_count(ck, in, body, 1)) ||
        (st = ck_need_param(ck, in, cond, 0, &in->shape)) ||
        (st = ck_need_param(ck, in, body, 0, &in->shape)) ||
        (st = ck_need_root(ck, in, body, &in->shape)) || (st = ck_need_root(ck, in, cond, &pred)))
        return st;
    return SL_OK;
}

static SlStatus
check_branch(IrCheck *ck, const IrInstr *in, const IrComputation *c, uint32_t operand)
{
    SlStatus st;
    if ((st = ck_need_param_count(ck, in, c, 1)) ||
        (st = ck_need_param(ck, in, c, 0, opnd(in, operand))) ||
        (st = ck_need_root(ck, in, c, &in->shape)))
        return st;
    return SL_OK;
}

SlStatus
ck_check_conditional(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if (in->n_operands < 2)
        return ck_bad(ck, in, "expects a selector and branch operands");
    const IrShape *sel = opnd(in, 0);
    const IrAttr *br = ir_instr_find_attr(in, IR_ATTR_BRANCH_COMPUTATIONS);
    if (br) {
        if (!is_scalar(sel) || sel->dtype != IR_DT_S32)
            return ck_bad(ck, in, "branch index must be s32[]");
        if (in->n_operands != br->u.comps.n + 1)
            return ck_bad(ck, in, "%u branches but %u branch operands", br->u.comps.n,
                          in->n_operands - 1);
        for (uint32_t b = 0; b < br->u.comps.n; b++)
            if ((st = check_branch(ck, in, br->u.comps.v[b], b + 1)))
                return st;
        return SL_OK;
    }
    IrComputation *t, *f;
    if ((st = ck_need_called(ck, in, IR_ATTR_TRUE_COMPUTATION, &t)) ||
        (st = ck_need_called(ck, in, IR_ATTR_FALSE_COMPUTATION, &f)) ||
        (st = ck_need_operands(ck, in, 3)))
        return st;
    if (!is_scalar(sel) || sel->dtype != IR_DT_PRED)
        return ck_bad(ck, in, "predicate must be pred[]");
    if ((st = check_branch(ck, in, t, 1)) || (st = check_branch(ck, in, f, 2)))
        return st;
    return SL_OK;
}

SlStatus
ck_check_call(IrCheck *ck, const IrInstr *in)
{
    IrComputation *c;
    SlStatus st;
    if ((st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &c)) ||
        (st = ck_need_param_count(ck, in, c, in->n_operands)))
        return st;
    for (uint32_t k = 0; k < in->n_operands; k++)
        if ((st = ck_need_param(ck, in, c, k, opnd(in, k))))
            return st;
    return ck_need_root(ck, in, c, &in->shape);
}

/* call-start (XLA's async sugar for a call): the result is a tuple of (the operands as a
 * tuple, the callee's result, contexts...); call-update keeps it, call-done takes element 1. */
SlStatus
ck_check_async_call(IrCheck *ck, const IrInstr *in)
{
    const IrShape *s = &in->shape;
    SlStatus st;
    if (in->op == IR_OP_CALL_START) {
        IrComputation *c;
        if ((st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &c)) ||
            (st = ck_need_param_count(ck, in, c, in->n_operands)))
            return st;
        for (uint32_t k = 0; k < in->n_operands; k++)
            if ((st = ck_need_param(ck, in, c, k, opnd(in, k))))
                return st;
        if (!ir_shape_is_tuple(s) || s->n_elems < 2)
            return ck_bad(ck, in, "declared shape must be a tuple of (operands, result, "
                                  "contexts...)");
        IrShape *elems =
            in->n_operands ? SL_NEW_ARRAY(&ck->scratch, IrShape, in->n_operands) : NULL;
        if (in->n_operands && !elems)
            return ck_nomem(ck, in);
        for (uint32_t k = 0; k < in->n_operands; k++)
            elems[k] = *opnd(in, k);
        IrShape ops;
        if (!ck_new_tuple(ck, elems, in->n_operands, &ops))
            return ck_nomem(ck, in);
        if (!ck_shape_match(&s->elems[0], &ops)) {
            char a[SHAPE_TEXT_BYTES], b[SHAPE_TEXT_BYTES];
            return ck_bad(ck, in, "element 0 of the declared shape is %s, the operands are %s",
                          ck_shape_text(&s->elems[0], a, sizeof(a)),
                          ck_shape_text(&ops, b, sizeof(b)));
        }
        return ck_need_root(ck, in, c, &s->elems[1]);
    }
    const IrInstr *from = in->operands[0];
    if (from->op != IR_OP_CALL_START && from->op != IR_OP_CALL_UPDATE)
        return ck_bad(ck, in, "operand %%%s must be a call-start or call-update, not %s",
                      sl_sym_cstr(from->name), ir_op_name(from->op));
    if (in->op == IR_OP_CALL_UPDATE)
        return ck_expect(ck, in, &from->shape);
    return ck_expect(ck, in, &from->shape.elems[1]);
}

/* `s` with dim `d` deleted (keep) or a dim of size `len` inserted at `d`, into scratch. */
static bool
scan_slice_shape(IrCheck *ck, const IrShape *s, uint32_t d, bool insert, int64_t len,
                 IrShape *out)
{
    if (!ck_new_shape(ck, s->dtype, insert ? s->rank + 1 : s->rank - 1, out))
        return false;
    for (uint32_t i = 0, w = 0; i < out->rank; i++) {
        if (insert && i == d) {
            out->dims[i] = len;
            continue;
        }
        if (!insert && w == d)
            w++;
        out->dims[i] = dim(s, w++);
    }
    return true;
}

/* scan(inputs..., inits...), dimensions={d}, num_carries=k, to_apply=body. The body takes the
 * input slices (dim d deleted) and the carries, and returns the output slices and the new
 * carries; the result holds the outputs (dim d of the inputs' length inserted) and the final
 * carries as a tuple; a single value may also be the bare array. */
SlStatus
ck_check_scan(IrCheck *ck, const IrInstr *in)
{
    IrComputation *body;
    const int64_t *sd;
    int64_t k = 0;
    SlStatus st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &body);
    if (st)
        return st;
    if (ir_instr_ints_attr(in, IR_ATTR_DIMENSIONS, &sd) != 1 || sd[0] < 0)
        return ck_bad(ck, in, "expects exactly one scan dimension");
    if (!ir_instr_int_attr(in, IR_ATTR_NUM_CARRIES, &k) || k < 0 || k >= (int64_t)in->n_operands)
        return ck_bad(ck, in, "num_carries= must leave at least one of the %u operands as input",
                      in->n_operands);
    uint32_t d = (uint32_t)sd[0], nc = (uint32_t)k, ni = in->n_operands - nc;
    if ((st = ck_need_param_count(ck, in, body, in->n_operands)))
        return st;
    int64_t len = 0;
    for (uint32_t i = 0; i < ni; i++) {
        IrShape p;
        if ((st = ck_need_array(ck, in, i)))
            return st;
        if (d >= opnd(in, i)->rank)
            return ck_bad(ck, in, "scan dimension %u is out of range for input %u", d, i);
        if (i == 0)
            len = dim(opnd(in, 0), d);
        else if (!dim_eq(dim(opnd(in, i), d), len))
            return ck_dims_mismatch(ck, in, 0, i);
        if (!scan_slice_shape(ck, opnd(in, i), d, false, 0, &p))
            return ck_nomem(ck, in);
        if ((st = ck_need_param(ck, in, body, i, &p)))
            return st;
    }
    for (uint32_t j = ni; j < in->n_operands; j++)
        if ((st = ck_need_param(ck, in, body, j, opnd(in, j))))
            return st;
    const IrShape *root = body->root ? &body->root->shape : NULL;
    if (!root)
        return SL_OK;
    bool is_tuple = ir_shape_is_tuple(root);
    uint32_t n_res = is_tuple ? root->n_elems : 1;
    if (n_res < nc)
        return ck_bad(ck, in, "%%%s returns %u values, fewer than num_carries=%u",
                      sl_sym_cstr(body->name), n_res, nc);
    IrShape *leaves = SL_NEW_ARRAY(&ck->scratch, IrShape, n_res);
    if (!leaves)
        return ck_nomem(ck, in);
    for (uint32_t r = 0; r < n_res; r++) {
        const IrShape *e = is_tuple ? &root->elems[r] : root;
        if (r >= n_res - nc) {
            if ((st = ck_need_param(ck, in, body, ni + r - (n_res - nc), e)))
                return st;
            leaves[r] = *e;
            continue;
        }
        if (!ir_shape_is_array(e) || d > e->rank)
            return ck_bad(ck, in, "output %u of %%%s cannot take scan dimension %u", r,
                          sl_sym_cstr(body->name), d);
        if (!scan_slice_shape(ck, e, d, true, len, &leaves[r]))
            return ck_nomem(ck, in);
    }
    /* Like XLA's verifier, the result and the body root are each read as "tuple elements or
     * itself": a single value may be declared bare or as a 1-tuple, whatever the root is. */
    IrShape inf;
    if (n_res == 1 && !ir_shape_is_tuple(&in->shape))
        inf = leaves[0];
    else if (!ck_new_tuple(ck, leaves, n_res, &inf))
        return ck_nomem(ck, in);
    return ck_expect(ck, in, &inf);
}
