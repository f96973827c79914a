/* check_reduce.c - shape rules of the reductions for ir_module_check(): reduce and reduce-window
 * (k inputs, k scalar inits and a reducer over the inits' types), and XLA's window arithmetic,
 * which convolution shares (check_index.c). Owns: inferring these result shapes. Does not own:
 * the reducer's signature (ck_need_reducer, check_common.c) or dispatch (check.c). Invariant:
 * the module is never modified; inferred shapes live in the checker's scratch arena. */
/* clang-format off */
#include "ir/check_int.h" /* the file's own header first */
/* clang-format on */

/* ---- reductions and windows ------------------------------------------------------------ */

/* Operands are k inputs then k scalar inits; inputs share dims. Fills the init types. */
static SlStatus
split_inputs_inits(IrCheck *ck, const IrInstr *in, uint32_t *k_out, IrDtype **types)
{
    SlStatus st;
    if (in->n_operands == 0 || in->n_operands % 2)
        return ck_bad(ck, in, "expects 2k operands (k inputs, k init values), got %u",
                      in->n_operands);
    uint32_t k = in->n_operands / 2;
    *types = SL_NEW_ARRAY(&ck->scratch, IrDtype, k);
    if (!*types)
        return ck_nomem(ck, in);
    for (uint32_t i = 0; i < k; i++) {
        if ((st = ck_need_array(ck, in, i)) || (st = ck_need_array(ck, in, k + i)))
            return st;
        if (!ck_same_dims(opnd(in, i), opnd(in, 0)))
            return ck_dims_mismatch(ck, in, 0, i);
        if (!is_scalar(opnd(in, k + i)))
            return ck_bad(ck, in, "init value operand %u must be a scalar", k + i);
        (*types)[i] = opnd(in, k + i)->dtype;
    }
    *k_out = k;
    return SL_OK;
}

/* reduce and reduce-window: k inputs, k scalar inits and a to_apply reducer over the inits'
 * types; gives k result slots to fill. */
static SlStatus
need_reduction(IrCheck *ck, const IrInstr *in, uint32_t *k, IrDtype **types, IrShape **leaves)
{
    IrComputation *c;
    SlStatus st = split_inputs_inits(ck, in, k, types);
    if (st || (st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &c)) ||
        (st = ck_need_reducer(ck, in, c, *types, *k)))
        return st;
    *leaves = SL_NEW_ARRAY(&ck->scratch, IrShape, *k);
    return *leaves ? SL_OK : ck_nomem(ck, in);
}

SlStatus
ck_check_reduce(IrCheck *ck, const IrInstr *in)
{
    uint32_t k;
    IrDtype *types;
    IrShape *leaves;
    SlStatus st = need_reduction(ck, in, &k, &types, &leaves);
    if (st)
        return st;
    const IrShape *op = opnd(in, 0);
    const int64_t *rd;
    uint32_t n = ir_instr_ints_attr(in, IR_ATTR_DIMENSIONS, &rd);
    if ((st = ck_need_dims(ck, in, "dimensions", rd, n, op->rank)))
        return st;
    for (uint32_t j = 0; j < k; j++) {
        if (!ck_new_shape(ck, types[j], op->rank - n, &leaves[j]))
            return ck_nomem(ck, in);
        uint32_t w = 0;
        for (uint32_t i = 0; i < op->rank; i++)
            if (!contains(rd, n, i))
                leaves[j].dims[w++] = dim(op, i);
    }
    return ck_expect_k(ck, in, leaves, k);
}

static int64_t
positive_or_one(int64_t v)
{
    return v > 0 ? v : 1; /* fields not printed are their defaults (1) */
}

/* Output size of one window dim over a base of size `base` (XLA's window arithmetic). */
int64_t
ck_window_out(int64_t base, const IrWindowDim *w)
{
    if (base == ANY_DIM)
        return ANY_DIM;
    int64_t dilated =
        base > 0 ? ck_sat_add(ck_sat_mul(base - 1, positive_or_one(w->lhs_dilate)), 1) : 0;
    int64_t padded = ck_sat_add(ck_sat_add(dilated, w->pad_lo), w->pad_hi);
    int64_t win = ck_sat_add(ck_sat_mul(w->size - 1, positive_or_one(w->rhs_dilate)), 1);
    if (w->size <= 0 || padded < win)
        return 0;
    return (padded - win) / positive_or_one(w->stride) + 1;
}

SlStatus
ck_check_reduce_window(IrCheck *ck, const IrInstr *in)
{
    uint32_t k;
    IrDtype *types;
    IrShape *leaves;
    SlStatus st = need_reduction(ck, in, &k, &types, &leaves);
    if (st)
        return st;
    const IrShape *op = opnd(in, 0);
    const IrAttr *a = ir_instr_find_attr(in, IR_ATTR_WINDOW);
    if (!a || a->u.window.n != op->rank)
        return ck_bad(ck, in, "window has %u dims, operand rank is %u", a ? a->u.window.n : 0,
                      op->rank);
    for (uint32_t j = 0; j < k; j++) {
        if (!ck_new_shape(ck, types[j], op->rank, &leaves[j]))
            return ck_nomem(ck, in);
        for (uint32_t i = 0; i < op->rank; i++)
            leaves[j].dims[i] = ck_window_out(dim(op, i), &a->u.window.v[i]);
    }
    return ck_expect_k(ck, in, leaves, k);
}
