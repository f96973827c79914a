/* check_array.c - shape rules of the array ops for ir_module_check(): elementwise (unary, binary,
 * select, clamp, map) and bitcast-convert; data movement (broadcast, reshape, transpose, slice,
 * dynamic-slice, dynamic-update-slice, pad, concatenate); iota; the ops that keep an operand's
 * shape (reverse, opt-barrier, sort, cholesky, triangular-solve, select-and-scatter); the
 * custom calls the partitioner gives a meaning. Owns: inferring these result shapes the way
 * XLA's ShapeInference does. Does not own: dispatch (check.c) or the shared helpers
 * (check_common.c). Invariant: the module is never modified; inferred shapes live in the
 * checker's scratch arena. */
/* clang-format off */
#include "ir/check_int.h" /* the file's own header first */
/* clang-format on */

/* ---- elementwise --------------------------------------------------------------------- */

/* The declared result must be an array. */
static SlStatus
need_declared_array(IrCheck *ck, const IrInstr *in)
{
    if (ir_shape_is_array(&in->shape))
        return SL_OK;
    char t[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "declared shape %s must be an array",
                  ck_shape_text(&in->shape, t, sizeof(t)));
}

static IrDtype
complex_part(IrDtype t)
{
    return t == IR_DT_C64 ? IR_DT_F32 : t == IR_DT_C128 ? IR_DT_F64 : t;
}

static SlStatus
check_unary(IrCheck *ck, const IrInstr *in, IrShape *inf)
{
    if (in->op == IR_OP_IS_FINITE)
        inf->dtype = IR_DT_PRED;
    else if (in->op == IR_OP_ABS || in->op == IR_OP_REAL || in->op == IR_OP_IMAG)
        inf->dtype = complex_part(inf->dtype);
    else if (in->op == IR_OP_CONVERT)
        inf->dtype = in->shape.dtype; /* any target type */
    return ck_expect(ck, in, inf);
}

static SlStatus
same_type_operands(IrCheck *ck, const IrInstr *in, uint32_t from, uint32_t to)
{
    for (uint32_t k = from + 1; k < to; k++) {
        if (opnd(in, k)->dtype != opnd(in, from)->dtype)
            return ck_bad(ck, in, "operand %u has type %s but operand %u has %s", k,
                          ir_dtype_name(opnd(in, k)->dtype), from,
                          ir_dtype_name(opnd(in, from)->dtype));
    }
    return SL_OK;
}

static SlStatus
check_binary(IrCheck *ck, const IrInstr *in, IrShape *inf)
{
    if (!ck_same_dims(opnd(in, 0), opnd(in, 1)))
        return ck_dims_mismatch(ck, in, 0, 1);
    SlStatus st;
    if (in->op == IR_OP_STOCHASTIC_CONVERT) {
        inf->dtype = in->shape.dtype;
        return ck_expect(ck, in, inf);
    }
    if ((st = same_type_operands(ck, in, 0, 2)))
        return st;
    if (in->op == IR_OP_COMPARE)
        inf->dtype = IR_DT_PRED;
    else if (in->op == IR_OP_COMPLEX)
        inf->dtype = inf->dtype == IR_DT_F64 ? IR_DT_C128 : IR_DT_C64;
    return ck_expect(ck, in, inf);
}

/* select(pred, on_true, on_false): pred may be a scalar. */
static SlStatus
check_select(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if (opnd(in, 0)->dtype != IR_DT_PRED)
        return ck_bad(ck, in, "predicate has type %s, expected pred",
                      ir_dtype_name(opnd(in, 0)->dtype));
    if (!ck_same_dims(opnd(in, 1), opnd(in, 2)))
        return ck_dims_mismatch(ck, in, 1, 2);
    if (!is_scalar(opnd(in, 0)) && !ck_same_dims(opnd(in, 0), opnd(in, 1)))
        return ck_dims_mismatch(ck, in, 0, 1);
    if ((st = same_type_operands(ck, in, 1, 3)))
        return st;
    return ck_expect(ck, in, opnd(in, 1));
}

/* clamp(min, operand, max): min and max may be scalars. */
static SlStatus
check_clamp(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    for (uint32_t k = 0; k < 3; k += 2)
        if (!is_scalar(opnd(in, k)) && !ck_same_dims(opnd(in, k), opnd(in, 1)))
            return ck_dims_mismatch(ck, in, k, 1);
    if ((st = same_type_operands(ck, in, 0, 3)))
        return st;
    return ck_expect(ck, in, opnd(in, 1));
}

static SlStatus
check_map(IrCheck *ck, const IrInstr *in, IrShape *inf)
{
    IrComputation *c;
    SlStatus st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &c);
    if (st || (st = ck_need_param_count(ck, in, c, in->n_operands)))
        return st;
    for (uint32_t k = 1; k < in->n_operands; k++)
        if (!ck_same_dims(opnd(in, k), opnd(in, 0)))
            return ck_dims_mismatch(ck, in, 0, k);
    if (c->root)
        inf->dtype = c->root->shape.dtype;
    return ck_expect(ck, in, inf);
}

SlStatus
ck_check_elementwise(IrCheck *ck, const IrInstr *in)
{
    int arity = ir_op_arity(in->op);
    SlStatus st;
    if (arity >= 0 && (st = ck_need_operands(ck, in, (uint32_t)arity)))
        return st;
    /* copy takes any shape, a tuple too (XLA's HandleCopy): the result is the operand's. */
    if (in->op == IR_OP_COPY && !ir_shape_is_array(opnd(in, 0)))
        return ck_expect(ck, in, opnd(in, 0));
    if ((st = ck_need_all_arrays(ck, in)))
        return st;
    if (in->op == IR_OP_SELECT)
        return check_select(ck, in);
    if (in->op == IR_OP_CLAMP)
        return check_clamp(ck, in);
    IrShape inf;
    if (!ck_copy_shape(ck, opnd(in, 0), &inf))
        return ck_nomem(ck, in);
    if (in->op == IR_OP_MAP)
        return check_map(ck, in, &inf);
    if (arity == 1)
        return check_unary(ck, in, &inf);
    return check_binary(ck, in, &inf);
}

/* bitcast-convert keeps dims when the bit widths agree; otherwise a minor dim appears or
 * disappears (ratio of widths), which we check when it is visible. */
SlStatus
ck_check_bitcast_convert(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 1)) || (st = need_declared_array(ck, in)))
        return st;
    uint32_t from = ir_dtype_bits(opnd(in, 0)->dtype), to = ir_dtype_bits(in->shape.dtype);
    if (from != to)
        return SL_OK;
    IrShape inf;
    if (!ck_copy_shape(ck, opnd(in, 0), &inf))
        return ck_nomem(ck, in);
    inf.dtype = in->shape.dtype;
    return ck_expect(ck, in, &inf);
}

/* ---- data movement ------------------------------------------------------------------- */

/* dimensions={...} of broadcast and transpose: one entry per operand dim, each a distinct dim
 * of a rank-`rank` shape. */
static SlStatus
dims_per_operand_dim(IrCheck *ck, const IrInstr *in, uint32_t rank, const int64_t **v)
{
    uint32_t n = ir_instr_ints_attr(in, IR_ATTR_DIMENSIONS, v), op_rank = opnd(in, 0)->rank;
    if (n != op_rank)
        return ck_bad(ck, in, "dimensions={...} has %u entries, operand rank is %u", n, op_rank);
    return ck_need_dims(ck, in, "dimensions", *v, n, rank);
}

/* broadcast: operand dim i lands on output dim dimensions[i]; other output dims are free. */
SlStatus
ck_check_broadcast(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 1)) || (st = need_declared_array(ck, in)))
        return st;
    const IrShape *op = opnd(in, 0);
    const int64_t *bd;
    uint32_t n = op->rank;
    if ((st = dims_per_operand_dim(ck, in, in->shape.rank, &bd)))
        return st;
    IrShape inf;
    if (!ck_copy_shape(ck, &in->shape, &inf))
        return ck_nomem(ck, in);
    inf.dtype = op->dtype;
    for (uint32_t i = 0; i < n; i++)
        inf.dims[bd[i]] = dim(op, i);
    return ck_expect(ck, in, &inf);
}

static bool
all_static(const IrShape *s)
{
    for (uint32_t i = 0; i < s->rank; i++)
        if (s->dim_kinds && s->dim_kinds[i] != IR_DIM_STATIC)
            return false;
    return true;
}

SlStatus
ck_check_reshape(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 1)) || (st = need_declared_array(ck, in)))
        return st;
    const IrShape *op = opnd(in, 0);
    if (op->dtype != in->shape.dtype)
        return ck_bad(ck, in, "operand type %s differs from declared type %s",
                      ir_dtype_name(op->dtype), ir_dtype_name(in->shape.dtype));
    if (!all_static(op) || !all_static(&in->shape))
        return SL_OK;
    int64_t a = ck_elem_count(op), b = ck_elem_count(&in->shape);
    if (a == b)
        return SL_OK;
    char x[SHAPE_TEXT_BYTES], y[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "declared shape %s has %lld elements but operand %s has %lld",
                  ck_shape_text(&in->shape, x, sizeof(x)), (long long)b,
                  ck_shape_text(op, y, sizeof(y)), (long long)a);
}

/* transpose: output dim i = operand dim dimensions[i]. */
SlStatus
ck_check_transpose(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 1)))
        return st;
    const IrShape *op = opnd(in, 0);
    const int64_t *perm;
    uint32_t n = op->rank;
    if ((st = dims_per_operand_dim(ck, in, op->rank, &perm)))
        return st;
    IrShape inf;
    if (!ck_new_shape(ck, op->dtype, n, &inf))
        return ck_nomem(ck, in);
    for (uint32_t i = 0; i < n; i++)
        inf.dims[i] = dim(op, (uint32_t)perm[i]);
    return ck_expect(ck, in, &inf);
}

SlStatus
ck_check_slice(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 1)))
        return st;
    const IrShape *op = opnd(in, 0);
    const IrAttr *a = ir_instr_find_attr(in, IR_ATTR_SLICE);
    if (!a || a->u.slice.n != op->rank)
        return ck_bad(ck, in, "slice={...} has %u ranges, operand rank is %u", a ? a->u.slice.n : 0,
                      op->rank);
    IrShape inf;
    if (!ck_new_shape(ck, op->dtype, op->rank, &inf))
        return ck_nomem(ck, in);
    for (uint32_t i = 0; i < op->rank; i++) {
        const IrSliceDim *s = &a->u.slice.v[i];
        int64_t stride = s->stride ? s->stride : 1, d = dim(op, i);
        if (s->start < 0 || s->limit < s->start || stride < 1 || (d != ANY_DIM && s->limit > d))
            return ck_bad(ck, in, "slice range [%lld:%lld:%lld] does not fit dim %u of size %lld",
                          (long long)s->start, (long long)s->limit, (long long)stride, i,
                          (long long)d);
        inf.dims[i] = (s->limit - s->start) / stride + ((s->limit - s->start) % stride != 0);
    }
    return ck_expect(ck, in, &inf);
}

/* Start indices: `rank` integer scalars from operand `first` on (or one rank-1 vector, the
 * old form). */
static SlStatus
check_start_indices(IrCheck *ck, const IrInstr *in, uint32_t first, uint32_t rank)
{
    uint32_t n = in->n_operands - first;
    bool vector_form = n == 1 && rank != 1 && opnd(in, first)->rank == 1;
    if (!vector_form && n != rank)
        return ck_bad(ck, in, "expects %u start indices, got %u", rank, n);
    for (uint32_t k = first; k < in->n_operands; k++) {
        char kind = ir_dtype_kind(opnd(in, k)->dtype);
        if ((kind != 'S' && kind != 'U') || (!vector_form && opnd(in, k)->rank != 0))
            return ck_bad(ck, in, "start index operand %u must be an integer scalar", k);
    }
    return SL_OK;
}

SlStatus
ck_check_dynamic_slice(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if (in->n_operands < 1)
        return ck_bad(ck, in, "expects an operand");
    if ((st = ck_need_array(ck, in, 0)))
        return st;
    const IrShape *op = opnd(in, 0);
    if ((st = check_start_indices(ck, in, 1, op->rank)))
        return st;
    const int64_t *sz;
    uint32_t n = ir_instr_ints_attr(in, IR_ATTR_DYNAMIC_SLICE_SIZES, &sz);
    if (n != op->rank)
        return ck_bad(ck, in, "dynamic_slice_sizes has %u entries, operand rank is %u", n,
                      op->rank);
    IrShape inf;
    if (!ck_new_shape(ck, op->dtype, n, &inf))
        return ck_nomem(ck, in);
    for (uint32_t i = 0; i < n; i++) {
        if (sz[i] < 0 || (dim(op, i) != ANY_DIM && sz[i] > dim(op, i)))
            return ck_bad(ck, in, "slice size %lld does not fit dim %u of size %lld",
                          (long long)sz[i], i, (long long)dim(op, i));
        inf.dims[i] = sz[i];
    }
    return ck_expect(ck, in, &inf);
}

SlStatus
ck_check_dynamic_update_slice(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if (in->n_operands < 2)
        return ck_bad(ck, in, "expects an operand and an update");
    if ((st = ck_need_array(ck, in, 0)) || (st = ck_need_array(ck, in, 1)))
        return st;
    const IrShape *op = opnd(in, 0), *up = opnd(in, 1);
    if ((st = check_start_indices(ck, in, 2, op->rank)))
        return st;
    if (up->rank != op->rank || up->dtype != op->dtype)
        return ck_dims_mismatch(ck, in, 0, 1);
    for (uint32_t i = 0; i < op->rank; i++)
        if (dim(op, i) != ANY_DIM && dim(up, i) > dim(op, i))
            return ck_bad(ck, in, "update dim %u of size %lld exceeds operand size %lld", i,
                          (long long)dim(up, i), (long long)dim(op, i));
    return ck_expect(ck, in, op);
}

/* pad: out = lo + hi + d + (d - 1) * interior per dim; lo and hi may be negative. */
SlStatus
ck_check_pad(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 2)))
        return st;
    const IrShape *op = opnd(in, 0);
    if (!is_scalar(opnd(in, 1)) || opnd(in, 1)->dtype != op->dtype)
        return ck_bad(ck, in, "padding value must be a %s scalar", ir_dtype_name(op->dtype));
    const IrAttr *a = ir_instr_find_attr(in, IR_ATTR_PADDING);
    if (!a || a->u.pad.n != op->rank)
        return ck_bad(ck, in, "padding has %u dims, operand rank is %u", a ? a->u.pad.n : 0,
                      op->rank);
    IrShape inf;
    if (!ck_new_shape(ck, op->dtype, op->rank, &inf))
        return ck_nomem(ck, in);
    for (uint32_t i = 0; i < op->rank; i++) {
        const IrPadDim *p = &a->u.pad.v[i];
        int64_t d = dim(op, i);
        if (p->interior < 0)
            return ck_bad(ck, in, "negative interior padding in dim %u", i);
        if (d == ANY_DIM) {
            inf.dims[i] = ANY_DIM;
            continue;
        }
        inf.dims[i] = ck_sat_add(ck_sat_add(p->lo, p->hi),
                                 ck_sat_add(d, d > 0 ? ck_sat_mul(d - 1, p->interior) : 0));
        if (inf.dims[i] < 0)
            return ck_bad(ck, in, "padding makes dim %u negative (%lld)", i,
                          (long long)inf.dims[i]);
    }
    return ck_expect(ck, in, &inf);
}

SlStatus
ck_check_concatenate(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_all_arrays(ck, in)))
        return st;
    const IrShape *first = opnd(in, 0);
    const int64_t *cd;
    if (ir_instr_ints_attr(in, IR_ATTR_DIMENSIONS, &cd) != 1)
        return ck_bad(ck, in, "dimensions= must name exactly one dim");
    if ((st = ck_need_dims(ck, in, "dimensions", cd, 1, first->rank)))
        return st;
    IrShape inf;
    if (!ck_copy_shape(ck, first, &inf))
        return ck_nomem(ck, in);
    for (uint32_t k = 1; k < in->n_operands; k++) {
        const IrShape *s = opnd(in, k);
        if (s->rank != first->rank || s->dtype != first->dtype)
            return ck_dims_mismatch(ck, in, 0, k);
        for (uint32_t i = 0; i < s->rank; i++) {
            if (i != (uint32_t)cd[0] && !dim_eq(dim(s, i), dim(first, i)))
                return ck_dims_mismatch(ck, in, 0, k);
        }
        int64_t d = dim(s, (uint32_t)cd[0]);
        inf.dims[cd[0]] =
            (d == ANY_DIM || inf.dims[cd[0]] == ANY_DIM) ? ANY_DIM : ck_sat_add(inf.dims[cd[0]], d);
    }
    return ck_expect(ck, in, &inf);
}

/* ---- iota ------------------------------------------------------------------------------- */

SlStatus
ck_check_iota(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_operands(ck, in, 0)) || (st = need_declared_array(ck, in)))
        return st;
    int64_t d = -1;
    if (!ir_instr_int_attr(in, IR_ATTR_IOTA_DIMENSION, &d) || d < 0 || d >= (int64_t)in->shape.rank)
        return ck_bad(ck, in, "iota_dimension=%lld out of range for rank %u", (long long)d,
                      in->shape.rank);
    return SL_OK;
}

/* ---- ops that keep an operand's shape ------------------------------------------------------ */

/* reverse, opt-barrier, sort, cholesky, triangular-solve and select-and-scatter: the result is
 * an operand's shape (sort: all of them), so a mutated `f32[8,32] reverse(f32[])` is refused
 * here rather than read out of bounds by the simulator. */
SlStatus
ck_check_keeps_shape(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    const int64_t *v;
    uint32_t n;
    switch (in->op) {
    case IR_OP_OPT_BARRIER:
        return ck_expect(ck, in, opnd(in, 0));
    case IR_OP_REVERSE:
        if ((st = ck_need_arrays(ck, in, 1)))
            return st;
        n = ir_instr_ints_attr(in, IR_ATTR_DIMENSIONS, &v);
        if ((st = ck_need_dims(ck, in, "dimensions", v, n, opnd(in, 0)->rank)))
            return st;
        return ck_expect(ck, in, opnd(in, 0));
    case IR_OP_CHOLESKY:
        if ((st = ck_need_arrays(ck, in, 1)))
            return st;
        if (opnd(in, 0)->rank < 2)
            return ck_bad(ck, in, "operand must have rank 2 or more, got %u", opnd(in, 0)->rank);
        return ck_expect(ck, in, opnd(in, 0));
    case IR_OP_TRIANGULAR_SOLVE:
        if ((st = ck_need_arrays(ck, in, 2)))
            return st;
        return ck_expect(ck, in, opnd(in, 1));
    case IR_OP_SELECT_AND_SCATTER:
        if ((st = ck_need_arrays(ck, in, 3)))
            return st;
        return ck_expect(ck, in, opnd(in, 0));
    case IR_OP_SORT: {
        if ((st = ck_need_all_arrays(ck, in)))
            return st;
        for (uint32_t k = 1; k < in->n_operands; k++)
            if (!ck_same_dims(opnd(in, k), opnd(in, 0)))
                return ck_dims_mismatch(ck, in, 0, k);
        n = ir_instr_ints_attr(in, IR_ATTR_DIMENSIONS, &v);
        if (n != 1)
            return ck_bad(ck, in, "dimensions={...} has %u entries, sort takes 1", n);
        if ((st = ck_need_dims(ck, in, "dimensions", v, n, opnd(in, 0)->rank)))
            return st;
        IrShape *leaves = SL_NEW_ARRAY(&ck->scratch, IrShape, in->n_operands);
        if (!leaves)
            return ck_nomem(ck, in);
        for (uint32_t k = 0; k < in->n_operands; k++)
            leaves[k] = *opnd(in, k);
        return ck_expect_k(ck, in, leaves, in->n_operands);
    }
    default:
        return SL_OK;
    }
}

/* ---- custom calls ------------------------------------------------------------------------ */

static bool
target_is(const IrInstr *in, const char *name)
{
    const IrAttr *a = ir_instr_find_attr(in, IR_ATTR_CUSTOM_CALL_TARGET);
    SlStr t = a ? a->u.text : sl_str("");
    if (t.len >= 2 && t.ptr[0] == '"' && t.ptr[t.len - 1] == '"')
        t = (SlStr){t.ptr + 1, t.len - 2};
    return sl_str_eq_cstr(t, name);
}

/* The custom calls the partitioner gives a meaning (gspmd.md D.21) keep their operand's
 * element type and rank: Sharding keeps the whole shape; SPMDFullToShardShape and
 * SPMDShardToFullShape change dims by the sharding (not checked here); TopK as above; the
 * shard barriers take one operand of any shape and keep it. Other
 * targets are opaque and accepted as declared. */
/* TopK (XLA's TopkRewriter form, which the partitioner splits): operand [batch..., n] of rank
 * 1 or 2; result (values, s32 indices), both [batch..., k] with k <= n and the operand's
 * leading dim and element type for the values. */
static SlStatus
check_topk(IrCheck *ck, const IrInstr *in)
{
    SlStatus st = ck_need_arrays(ck, in, 1);
    if (st)
        return st;
    const IrShape *op = opnd(in, 0), *r = &in->shape;
    char x[SHAPE_TEXT_BYTES], y[SHAPE_TEXT_BYTES];
    if (op->rank < 1 || op->rank > 2)
        return ck_bad(ck, in, "TopK takes an operand of rank 1 or 2, got %s",
                      ck_shape_text(op, x, sizeof(x)));
    bool ok = r->dtype == IR_DT_TUPLE && r->n_elems == 2;
    for (uint32_t e = 0; ok && e < 2; e++) {
        const IrShape *v = &r->elems[e];
        ok = v->dtype != IR_DT_TUPLE && v->rank == op->rank &&
             v->dtype == (e ? IR_DT_S32 : op->dtype) && dim_eq(dim(v, 0), dim(&r->elems[0], 0));
        for (uint32_t d = 0; ok && d + 1 < op->rank; d++)
            ok = dim_eq(dim(v, d), dim(op, d));
        uint32_t last = op->rank - 1;
        ok = ok && dim_eq(dim(v, last), dim(&r->elems[0], last)) &&
             (dim(v, last) == ANY_DIM || dim(op, last) == ANY_DIM || dim(v, last) <= dim(op, last));
    }
    if (!ok)
        return ck_bad(ck, in,
                      "TopK of %s must give (values, s32 indices) of the operand's leading dims "
                      "and k <= its last dim, declared %s",
                      ck_shape_text(op, x, sizeof(x)), ck_shape_text(r, y, sizeof(y)));
    return SL_OK;
}

/* __op$block_scaled_dot (lhs, rhs, lhs_scale[, rhs_scale]): lhs [batch?, m, k] and rhs
 * [batch?, n, k] of one rank, 2 or 3, contracting their minor dims; the result is
 * [batch?, m, n] (found by the verify fuzzer: a declared f32[128,1026] against 1024 rhs rows
 * reached the partitioner). */
static SlStatus
check_block_scaled_dot(IrCheck *ck, const IrInstr *in)
{
    if (in->n_operands < 3 || in->n_operands > 4)
        return ck_bad(ck, in, "a block-scaled dot takes 3 or 4 operands, got %u", in->n_operands);
    SlStatus st;
    if ((st = ck_need_array(ck, in, 0)) || (st = ck_need_array(ck, in, 1)) ||
        (st = need_declared_array(ck, in)))
        return st;
    const IrShape *l = opnd(in, 0), *r = opnd(in, 1);
    uint32_t rank = l->rank;
    if (rank < 2 || rank > 3 || r->rank != rank)
        return ck_bad(ck, in, "a block-scaled dot takes lhs and rhs of one rank, 2 or 3");
    if (!dim_eq(dim(l, rank - 1), dim(r, rank - 1)) || (rank == 3 && !dim_eq(dim(l, 0), dim(r, 0))))
        return ck_bad(ck, in, "a block-scaled dot's lhs and rhs must agree on the contracting "
                              "(minor) dim and the batch dim");
    IrShape inf;
    if (!ck_new_shape(ck, in->shape.dtype, rank, &inf))
        return ck_nomem(ck, in);
    if (rank == 3)
        inf.dims[0] = dim(l, 0);
    inf.dims[rank - 2] = dim(l, rank - 2);
    inf.dims[rank - 1] = dim(r, rank - 2);
    return ck_expect(ck, in, &inf);
}

SlStatus
ck_check_custom_call(IrCheck *ck, const IrInstr *in)
{
    if (target_is(in, "TopK"))
        return check_topk(ck, in);
    if (target_is(in, "__op$block_scaled_dot"))
        return check_block_scaled_dot(ck, in);
    /* the shard barriers of propagation pass one value (array or tuple) through */
    if (target_is(in, "ShardBarrierFrom") || target_is(in, "ShardBarrierTo")) {
        if (in->n_operands != 1)
            return ck_bad(ck, in, "a shard barrier takes 1 operand, got %u", in->n_operands);
        return ck_expect(ck, in, opnd(in, 0));
    }
    bool keeps_shape = target_is(in, "Sharding");
    if (!keeps_shape && !target_is(in, "SPMDFullToShardShape") &&
        !target_is(in, "SPMDShardToFullShape"))
        return SL_OK;
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 1)) || (st = need_declared_array(ck, in)))
        return st;
    const IrShape *op = opnd(in, 0);
    if (keeps_shape)
        return ck_expect(ck, in, op);
    if (op->dtype != in->shape.dtype || op->rank != in->shape.rank) {
        char x[SHAPE_TEXT_BYTES], y[SHAPE_TEXT_BYTES];
        return ck_bad(ck, in, "declared shape %s must have the type and rank of operand %s",
                      ck_shape_text(&in->shape, x, sizeof(x)), ck_shape_text(op, y, sizeof(y)));
    }
    return SL_OK;
}
