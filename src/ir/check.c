/* check.c - ir_module_check: structural checks and shape inference over a whole module.
 * Owns: deciding whether a module is consistent: one entry, a root per computation, operands
 * defined before their users in the same computation, dense parameter numbers, called
 * computations listed before their callers with signatures that fit the call, and every
 * declared result shape equal to the one inferred the way XLA's ShapeInference / HloVerifier
 * do for the opcodes the partitioner handles (hlo-text.md §12). Does not own: sharding
 * validity (shd_check) or text (src/hlo). Opcodes without a rule are accepted as declared.
 * Invariants: the module is never modified; inferred shapes live in a scratch arena released
 * before returning; layouts are ignored and an unbounded dim ('?') matches any size.
 * The contraction and indexing rules (dot, convolution, gather, scatter) are in check_index.c;
 * check_int.h holds what the two files share. */
/* clang-format off */
#include "ir/ir.h" /* the module's header first: clang-format cannot tell it is ours */
/* clang-format on */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/check_int.h"

/* ---- errors ---------------------------------------------------------------------------- */

static SlSrcLoc
instr_loc(const IrCheck *ck, const IrInstr *in)
{
    SlSrcLoc loc = {ck->path, in ? in->src_line : 0, in ? in->src_col : 0};
    return loc;
}

SlStatus
ck_bad(IrCheck *ck, const IrInstr *in, const char *fmt, ...)
{
    char why[SL_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    const char *comp = in->parent ? sl_sym_cstr(in->parent->name) : "?";
    return sl_fail(ck->err, SL_ERR_INVALID, instr_loc(ck, in),
                   "instruction %%%s (%s) in computation %%%s: %s", sl_sym_cstr(in->name),
                   ir_op_name(in->op), comp, why);
}

SlStatus
ck_nomem(IrCheck *ck, const IrInstr *in)
{
    return sl_fail(ck->err, SL_ERR_NOMEM, instr_loc(ck, in), "out of memory checking module");
}

/* Shape text without layout, truncated to fit `out`. */
static const char *
shape_text(const IrShape *s, char *out, size_t n)
{
    SlBuf b;
    sl_buf_init(&b);
    ir_shape_print(s, false, &b);
    snprintf(out, n, "%s", b.failed || !b.data ? "?" : b.data);
    sl_buf_fini(&b);
    return out;
}

#define SHAPE_TEXT_BYTES 160

/* ---- shapes ---------------------------------------------------------------------------- */

/* Equality of dims only (element type ignored). */
bool
ck_same_dims(const IrShape *a, const IrShape *b)
{
    if (a->rank != b->rank)
        return false;
    for (uint32_t i = 0; i < a->rank; i++)
        if (!dim_eq(dim(a, i), dim(b, i)))
            return false;
    return true;
}

/* Shape equality ignoring layouts; ANY_DIM and unbounded dims match anything. */
static bool
shape_match(const IrShape *a, const IrShape *b)
{
    if (a->dtype != b->dtype)
        return false;
    if (ir_shape_is_tuple(a)) {
        if (a->n_elems != b->n_elems)
            return false;
        for (uint32_t i = 0; i < a->n_elems; i++)
            if (!shape_match(&a->elems[i], &b->elems[i]))
                return false;
        return true;
    }
    return ck_same_dims(a, b);
}

/* Saturating arithmetic: huge dims in bad input give a mismatch, never signed overflow. */
static int64_t
sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

static int64_t
sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX) : r;
}

/* Element count of an array shape, saturating. */
static int64_t
elem_count(const IrShape *s)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++)
        n = sat_mul(n, s->dims[i]);
    return n;
}

static bool
is_scalar(const IrShape *s)
{
    return ir_shape_is_array(s) && s->rank == 0;
}

/* A fresh array shape of `rank` zeroed dims in scratch; false on allocation failure. */
bool
ck_new_shape(IrCheck *ck, IrDtype t, uint32_t rank, IrShape *out)
{
    memset(out, 0, sizeof(*out));
    out->dtype = t;
    out->rank = rank;
    if (rank == 0)
        return true;
    out->dims = SL_NEW_ARRAY(&ck->scratch, int64_t, rank);
    return out->dims != NULL;
}

bool
ck_copy_shape(IrCheck *ck, const IrShape *src, IrShape *out)
{
    if (!ck_new_shape(ck, src->dtype, src->rank, out))
        return false;
    for (uint32_t i = 0; i < src->rank; i++)
        out->dims[i] = dim(src, i);
    return true;
}

/* A tuple shape over `n` element shapes (copied by value into scratch). */
static bool
new_tuple(IrCheck *ck, const IrShape *elems, uint32_t n, IrShape *out)
{
    memset(out, 0, sizeof(*out));
    out->dtype = IR_DT_TUPLE;
    out->n_elems = n;
    if (n == 0)
        return true;
    out->elems = SL_DUP_ARRAY(&ck->scratch, IrShape, elems, n);
    return out->elems != NULL;
}

/* k results as one shape: the array itself when k == 1, else a tuple of them. */
static bool
one_or_tuple(IrCheck *ck, const IrShape *leaves, uint32_t k, IrShape *out)
{
    if (k != 1)
        return new_tuple(ck, leaves, k, out);
    *out = leaves[0];
    return true;
}

/* Compares the declared result shape with the inferred one. */
SlStatus
ck_expect(IrCheck *ck, const IrInstr *in, const IrShape *inferred)
{
    if (shape_match(&in->shape, inferred))
        return SL_OK;
    char d[SHAPE_TEXT_BYTES], f[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "declared shape %s but inferred %s", shape_text(&in->shape, d, sizeof(d)),
                  shape_text(inferred, f, sizeof(f)));
}

SlStatus
ck_expect_k(IrCheck *ck, const IrInstr *in, const IrShape *leaves, uint32_t k)
{
    IrShape t;
    if (!one_or_tuple(ck, leaves, k, &t))
        return ck_nomem(ck, in);
    return ck_expect(ck, in, &t);
}

static SlStatus
need_operands(IrCheck *ck, const IrInstr *in, uint32_t n)
{
    if (in->n_operands != n)
        return ck_bad(ck, in, "expects %u operands, got %u", n, in->n_operands);
    return SL_OK;
}

static SlStatus
need_array(IrCheck *ck, const IrInstr *in, uint32_t k)
{
    if (ir_shape_is_array(opnd(in, k)))
        return SL_OK;
    char t[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "operand %u (%%%s) must be an array, got %s", k,
                  sl_sym_cstr(in->operands[k]->name), shape_text(opnd(in, k), t, sizeof(t)));
}

static SlStatus
need_declared_array(IrCheck *ck, const IrInstr *in)
{
    if (ir_shape_is_array(&in->shape))
        return SL_OK;
    char t[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "declared shape %s must be an array",
                  shape_text(&in->shape, t, sizeof(t)));
}

SlStatus
ck_need_arrays(IrCheck *ck, const IrInstr *in, uint32_t n)
{
    SlStatus st = need_operands(ck, in, n);
    for (uint32_t k = 0; k < n && !st; k++)
        st = need_array(ck, in, k);
    return st;
}

SlStatus
ck_need_all_arrays(IrCheck *ck, const IrInstr *in)
{
    SlStatus st = SL_OK;
    if (in->n_operands == 0)
        return ck_bad(ck, in, "expects at least one operand");
    for (uint32_t k = 0; k < in->n_operands && !st; k++)
        st = need_array(ck, in, k);
    return st;
}

/* A list attribute whose entries must be distinct dims of a rank-`rank` shape. */
SlStatus
ck_need_dims(IrCheck *ck, const IrInstr *in, const char *what, const int64_t *v, uint32_t n,
             uint32_t rank)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= (int64_t)rank)
            return ck_bad(ck, in, "%s entry %lld is out of range for rank %u", what,
                          (long long)v[i], rank);
        for (uint32_t j = 0; j < i; j++)
            if (v[j] == v[i])
                return ck_bad(ck, in, "%s repeats dim %lld", what, (long long)v[i]);
    }
    return SL_OK;
}

/* ---- called computations ----------------------------------------------------------------- */

/* The parameter `k` of `c` must have shape `want`. */
static SlStatus
need_param(IrCheck *ck, const IrInstr *in, const IrComputation *c, int64_t k, const IrShape *want)
{
    const IrInstr *p = ir_computation_param(c, k);
    if (!p)
        return ck_bad(ck, in, "called computation %%%s has no parameter %lld", sl_sym_cstr(c->name),
                      (long long)k);
    if (shape_match(&p->shape, want))
        return SL_OK;
    char a[SHAPE_TEXT_BYTES], b[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "parameter %lld of %%%s has shape %s, expected %s", (long long)k,
                  sl_sym_cstr(c->name), shape_text(&p->shape, a, sizeof(a)),
                  shape_text(want, b, sizeof(b)));
}

static SlStatus
need_param_count(IrCheck *ck, const IrInstr *in, const IrComputation *c, uint32_t n)
{
    uint32_t have = ir_computation_param_count(c);
    if (have != n)
        return ck_bad(ck, in, "called computation %%%s takes %u parameters, expected %u",
                      sl_sym_cstr(c->name), have, n);
    return SL_OK;
}

static SlStatus
need_root(IrCheck *ck, const IrInstr *in, const IrComputation *c, const IrShape *want)
{
    if (!c->root || shape_match(&c->root->shape, want))
        return SL_OK;
    char a[SHAPE_TEXT_BYTES], b[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "called computation %%%s returns %s, expected %s", sl_sym_cstr(c->name),
                  shape_text(&c->root->shape, a, sizeof(a)), shape_text(want, b, sizeof(b)));
}

SlStatus
ck_need_called(IrCheck *ck, const IrInstr *in, IrAttrKey key, IrComputation **out)
{
    *out = ir_instr_called(in, key);
    if (!*out)
        return ck_bad(ck, in, "missing %s=", ir_attr_name(key));
    return SL_OK;
}

/* A reducer taking 2k scalars (accumulators then inputs, typed like `inits`) and returning
 * k scalars (a tuple when k > 1). */
SlStatus
ck_need_reducer(IrCheck *ck, const IrInstr *in, const IrComputation *c, const IrDtype *types,
                uint32_t k)
{
    SlStatus st = need_param_count(ck, in, c, 2 * k);
    if (st)
        return st;
    IrShape *leaves = SL_NEW_ARRAY(&ck->scratch, IrShape, k);
    if (!leaves)
        return ck_nomem(ck, in);
    for (uint32_t i = 0; i < k; i++) {
        ck_new_shape(ck, types[i], 0, &leaves[i]);
        if ((st = need_param(ck, in, c, i, &leaves[i])) ||
            (st = need_param(ck, in, c, k + i, &leaves[i])))
            return st;
    }
    IrShape root;
    if (!one_or_tuple(ck, leaves, k, &root))
        return ck_nomem(ck, in);
    return need_root(ck, in, c, &root);
}

/* ---- elementwise --------------------------------------------------------------------- */

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

SlStatus
ck_dims_mismatch(IrCheck *ck, const IrInstr *in, uint32_t a, uint32_t b)
{
    char x[SHAPE_TEXT_BYTES], y[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "operand shapes %s and %s are not compatible",
                  shape_text(opnd(in, a), x, sizeof(x)), shape_text(opnd(in, b), y, sizeof(y)));
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
    if (st || (st = need_param_count(ck, in, c, in->n_operands)))
        return st;
    for (uint32_t k = 1; k < in->n_operands; k++)
        if (!ck_same_dims(opnd(in, k), opnd(in, 0)))
            return ck_dims_mismatch(ck, in, 0, k);
    if (c->root)
        inf->dtype = c->root->shape.dtype;
    return ck_expect(ck, in, inf);
}

static SlStatus
check_elementwise(IrCheck *ck, const IrInstr *in)
{
    int arity = ir_op_arity(in->op);
    SlStatus st;
    if (arity >= 0 && (st = need_operands(ck, in, (uint32_t)arity)))
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
static SlStatus
check_bitcast_convert(IrCheck *ck, const IrInstr *in)
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
static SlStatus
check_broadcast(IrCheck *ck, const IrInstr *in)
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

static SlStatus
check_reshape(IrCheck *ck, const IrInstr *in)
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
    int64_t a = elem_count(op), b = elem_count(&in->shape);
    if (a == b)
        return SL_OK;
    char x[SHAPE_TEXT_BYTES], y[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "declared shape %s has %lld elements but operand %s has %lld",
                  shape_text(&in->shape, x, sizeof(x)), (long long)b, shape_text(op, y, sizeof(y)),
                  (long long)a);
}

/* transpose: output dim i = operand dim dimensions[i]. */
static SlStatus
check_transpose(IrCheck *ck, const IrInstr *in)
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

static SlStatus
check_slice(IrCheck *ck, const IrInstr *in)
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

static SlStatus
check_dynamic_slice(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if (in->n_operands < 1)
        return ck_bad(ck, in, "expects an operand");
    if ((st = need_array(ck, in, 0)))
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

static SlStatus
check_dynamic_update_slice(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if (in->n_operands < 2)
        return ck_bad(ck, in, "expects an operand and an update");
    if ((st = need_array(ck, in, 0)) || (st = need_array(ck, in, 1)))
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
static SlStatus
check_pad(IrCheck *ck, const IrInstr *in)
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
        inf.dims[i] =
            sat_add(sat_add(p->lo, p->hi), sat_add(d, d > 0 ? sat_mul(d - 1, p->interior) : 0));
        if (inf.dims[i] < 0)
            return ck_bad(ck, in, "padding makes dim %u negative (%lld)", i,
                          (long long)inf.dims[i]);
    }
    return ck_expect(ck, in, &inf);
}

static SlStatus
check_concatenate(IrCheck *ck, const IrInstr *in)
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
            (d == ANY_DIM || inf.dims[cd[0]] == ANY_DIM) ? ANY_DIM : sat_add(inf.dims[cd[0]], d);
    }
    return ck_expect(ck, in, &inf);
}

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
        if ((st = need_array(ck, in, i)) || (st = need_array(ck, in, k + i)))
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

static SlStatus
check_reduce(IrCheck *ck, const IrInstr *in)
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
    int64_t dilated = base > 0 ? sat_add(sat_mul(base - 1, positive_or_one(w->lhs_dilate)), 1) : 0;
    int64_t padded = sat_add(sat_add(dilated, w->pad_lo), w->pad_hi);
    int64_t win = sat_add(sat_mul(w->size - 1, positive_or_one(w->rhs_dilate)), 1);
    if (w->size <= 0 || padded < win)
        return 0;
    return (padded - win) / positive_or_one(w->stride) + 1;
}

static SlStatus
check_reduce_window(IrCheck *ck, const IrInstr *in)
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

/* ---- parameters, constants, iota, tuples ------------------------------------------------ */

static SlStatus
check_iota(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = need_operands(ck, in, 0)) || (st = need_declared_array(ck, in)))
        return st;
    int64_t d = -1;
    if (!ir_instr_int_attr(in, IR_ATTR_IOTA_DIMENSION, &d) || d < 0 || d >= (int64_t)in->shape.rank)
        return ck_bad(ck, in, "iota_dimension=%lld out of range for rank %u", (long long)d,
                      in->shape.rank);
    return SL_OK;
}

static SlStatus
check_tuple(IrCheck *ck, const IrInstr *in)
{
    IrShape *elems = in->n_operands ? SL_NEW_ARRAY(&ck->scratch, IrShape, in->n_operands) : NULL;
    if (in->n_operands && !elems)
        return ck_nomem(ck, in);
    for (uint32_t k = 0; k < in->n_operands; k++)
        elems[k] = *opnd(in, k);
    IrShape t;
    if (!new_tuple(ck, elems, in->n_operands, &t))
        return ck_nomem(ck, in);
    return ck_expect(ck, in, &t);
}

static SlStatus
check_gte(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = need_operands(ck, in, 1)))
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

static SlStatus
check_while(IrCheck *ck, const IrInstr *in)
{
    IrComputation *cond, *body;
    SlStatus st;
    if ((st = need_operands(ck, in, 1)) ||
        (st = ck_need_called(ck, in, IR_ATTR_CONDITION, &cond)) ||
        (st = ck_need_called(ck, in, IR_ATTR_BODY, &body)) || (st = ck_expect(ck, in, opnd(in, 0))))
        return st;
    IrShape pred;
    ck_new_shape(ck, IR_DT_PRED, 0, &pred);
    if ((st = need_param_count(ck, in, cond, 1)) || (st = need_param_count(ck, in, body, 1)) ||
        (st = need_param(ck, in, cond, 0, &in->shape)) ||
        (st = need_param(ck, in, body, 0, &in->shape)) ||
        (st = need_root(ck, in, body, &in->shape)) || (st = need_root(ck, in, cond, &pred)))
        return st;
    return SL_OK;
}

static SlStatus
check_branch(IrCheck *ck, const IrInstr *in, const IrComputation *c, uint32_t operand)
{
    SlStatus st;
    if ((st = need_param_count(ck, in, c, 1)) ||
        (st = need_param(ck, in, c, 0, opnd(in, operand))) ||
        (st = need_root(ck, in, c, &in->shape)))
        return st;
    return SL_OK;
}

static SlStatus
check_conditional(IrCheck *ck, const IrInstr *in)
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
        (st = need_operands(ck, in, 3)))
        return st;
    if (!is_scalar(sel) || sel->dtype != IR_DT_PRED)
        return ck_bad(ck, in, "predicate must be pred[]");
    if ((st = check_branch(ck, in, t, 1)) || (st = check_branch(ck, in, f, 2)))
        return st;
    return SL_OK;
}

static SlStatus
check_call(IrCheck *ck, const IrInstr *in)
{
    IrComputation *c;
    SlStatus st;
    if ((st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &c)) ||
        (st = need_param_count(ck, in, c, in->n_operands)))
        return st;
    for (uint32_t k = 0; k < in->n_operands; k++)
        if ((st = need_param(ck, in, c, k, opnd(in, k))))
            return st;
    return need_root(ck, in, c, &in->shape);
}

/* call-start (XLA's async sugar for a call): the result is a tuple of (the operands as a
 * tuple, the callee's result, contexts...); call-update keeps it, call-done takes element 1. */
static SlStatus
check_async_call(IrCheck *ck, const IrInstr *in)
{
    const IrShape *s = &in->shape;
    SlStatus st;
    if (in->op == IR_OP_CALL_START) {
        IrComputation *c;
        if ((st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &c)) ||
            (st = need_param_count(ck, in, c, in->n_operands)))
            return st;
        for (uint32_t k = 0; k < in->n_operands; k++)
            if ((st = need_param(ck, in, c, k, opnd(in, k))))
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
        if (!new_tuple(ck, elems, in->n_operands, &ops))
            return ck_nomem(ck, in);
        if (!shape_match(&s->elems[0], &ops)) {
            char a[SHAPE_TEXT_BYTES], b[SHAPE_TEXT_BYTES];
            return ck_bad(ck, in, "element 0 of the declared shape is %s, the operands are %s",
                          shape_text(&s->elems[0], a, sizeof(a)), shape_text(&ops, b, sizeof(b)));
        }
        return need_root(ck, in, c, &s->elems[1]);
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
static SlStatus
check_scan(IrCheck *ck, const IrInstr *in)
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
    if ((st = need_param_count(ck, in, body, in->n_operands)))
        return st;
    int64_t len = 0;
    for (uint32_t i = 0; i < ni; i++) {
        IrShape p;
        if ((st = need_array(ck, in, i)))
            return st;
        if (d >= opnd(in, i)->rank)
            return ck_bad(ck, in, "scan dimension %u is out of range for input %u", d, i);
        if (i == 0)
            len = dim(opnd(in, 0), d);
        else if (!dim_eq(dim(opnd(in, i), d), len))
            return ck_dims_mismatch(ck, in, 0, i);
        if (!scan_slice_shape(ck, opnd(in, i), d, false, 0, &p))
            return ck_nomem(ck, in);
        if ((st = need_param(ck, in, body, i, &p)))
            return st;
    }
    for (uint32_t j = ni; j < in->n_operands; j++)
        if ((st = need_param(ck, in, body, j, opnd(in, j))))
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
            if ((st = need_param(ck, in, body, ni + r - (n_res - nc), e)))
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
    else if (!new_tuple(ck, leaves, n_res, &inf))
        return ck_nomem(ck, in);
    return ck_expect(ck, in, &inf);
}

/* ---- collectives --------------------------------------------------------------------------- */

/* The partition count the module runs with: the caller's, else the header's. */
static int64_t
module_partitions(const IrCheck *ck)
{
    return ck->num_partitions ? ck->num_partitions : ir_module_num_partitions(ck->m);
}

/* Devices per group, following the collective's group mode (hlo-text.md §10). Empty groups
 * mean "everything the mode spans". */
static SlStatus
group_size(IrCheck *ck, const IrInstr *in, int64_t *out)
{
    const IrAttr *a = ir_instr_find_attr(in, IR_ATTR_REPLICA_GROUPS);
    int64_t size = 0;
    const IrReplicaGroups *rg = a ? a->u.groups : NULL;
    if (rg && rg->is_iota) {
        if (rg->iota.n_dims != 2)
            return ck_bad(ck, in, "iota replica_groups must have two dims");
        size = rg->iota.dims[1];
    } else if (rg && rg->n_groups > 0) {
        size = rg->group_sizes[0];
        for (uint32_t g = 1; g < rg->n_groups; g++)
            if (rg->group_sizes[g] != size)
                return ck_bad(ck, in, "replica groups have different sizes (%lld and %u)",
                              (long long)size, rg->group_sizes[g]);
    }
    const IrAttr *global = ir_instr_find_attr(in, IR_ATTR_USE_GLOBAL_DEVICE_IDS);
    bool has_channel = ir_instr_find_attr(in, IR_ATTR_CHANNEL_ID) != NULL;
    bool cross_partition = in->op == IR_OP_ALL_TO_ALL || in->op == IR_OP_COLLECTIVE_PERMUTE;
    int64_t replicas = ir_module_replica_count(ck->m), parts = module_partitions(ck);
    if (!has_channel)
        *out = size ? size : replicas;
    else if (global && global->u.b)
        *out = size ? size : replicas * parts;
    else if (cross_partition)
        *out = size ? size : parts;
    else
        *out = (size ? size : replicas) * parts;
    return SL_OK;
}

/* all-gather multiplies dimensions[0] by the group size, reduce-scatter divides it. */
static SlStatus
check_gather_scatter_dim(IrCheck *ck, const IrInstr *in, int64_t g, IrShape *leaves)
{
    SlStatus st;
    const int64_t *d;
    if (ir_instr_ints_attr(in, IR_ATTR_DIMENSIONS, &d) != 1)
        return ck_bad(ck, in, "dimensions= must name exactly one dim");
    for (uint32_t k = 0; k < in->n_operands; k++) {
        if ((st = ck_need_dims(ck, in, "dimensions", d, 1, leaves[k].rank)))
            return st;
        int64_t *x = &leaves[k].dims[d[0]];
        if (*x == ANY_DIM)
            continue;
        if (in->op == IR_OP_ALL_GATHER) {
            *x = sat_mul(*x, g);
        } else if (*x % g) {
            return ck_bad(ck, in, "dim %lld of size %lld is not divisible by the group size %lld",
                          (long long)d[0], (long long)*x, (long long)g);
        } else {
            *x /= g;
        }
    }
    return SL_OK;
}

static SlStatus
check_collective(IrCheck *ck, const IrInstr *in)
{
    /* Async forms and ragged-all-to-all are accepted as declared. collective-broadcast keeps
     * its operands' shapes, as all-reduce does (a mutated one summing a f32[10,6] to f32[6]
     * passed check, and verify leaked and said "ok"). */
    if (in->op != IR_OP_ALL_REDUCE && in->op != IR_OP_ALL_GATHER &&
        in->op != IR_OP_REDUCE_SCATTER && in->op != IR_OP_ALL_TO_ALL &&
        in->op != IR_OP_COLLECTIVE_PERMUTE && in->op != IR_OP_COLLECTIVE_BROADCAST)
        return SL_OK;
    SlStatus st = SL_OK;
    if (in->n_operands == 0)
        return ck_bad(ck, in, "expects at least one operand");
    if (in->op == IR_OP_COLLECTIVE_PERMUTE && in->n_operands != 1)
        return SL_OK; /* in-place form with buffers and offsets */
    int64_t g = 1;
    IrShape *leaves = SL_NEW_ARRAY(&ck->scratch, IrShape, in->n_operands);
    IrDtype *types = SL_NEW_ARRAY(&ck->scratch, IrDtype, in->n_operands);
    if (!leaves || !types)
        return ck_nomem(ck, in);
    for (uint32_t k = 0; k < in->n_operands; k++) {
        if ((st = need_array(ck, in, k)))
            return st;
        if (!ck_copy_shape(ck, opnd(in, k), &leaves[k]))
            return ck_nomem(ck, in);
        types[k] = opnd(in, k)->dtype;
    }
    if ((st = group_size(ck, in, &g)))
        return st;
    if (g < 1)
        return ck_bad(ck, in, "replica groups are empty");
    if (in->op == IR_OP_ALL_GATHER || in->op == IR_OP_REDUCE_SCATTER)
        st = check_gather_scatter_dim(ck, in, g, leaves);
    if (st)
        return st;
    if (in->op == IR_OP_ALL_REDUCE || in->op == IR_OP_REDUCE_SCATTER) {
        IrComputation *c;
        for (uint32_t k = 0; k < in->n_operands; k++)
            if ((st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &c)) ||
                (st = ck_need_reducer(ck, in, c, &types[k], 1)))
                return st;
    }
    return ck_expect_k(ck, in, leaves, in->n_operands);
}

/* ---- ops that keep an operand's shape ------------------------------------------------------ */

/* reverse, opt-barrier, sort, cholesky, triangular-solve and select-and-scatter: the result is
 * an operand's shape (sort: all of them), so a mutated `f32[8,32] reverse(f32[])` is refused
 * here rather than read out of bounds by the simulator. */
static SlStatus
check_keeps_shape(IrCheck *ck, const IrInstr *in)
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
 * SPMDShardToFullShape change dims by the sharding (not checked here). Other targets are
 * opaque and accepted as declared. */
static SlStatus
check_custom_call(IrCheck *ck, const IrInstr *in)
{
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
                      shape_text(&in->shape, x, sizeof(x)), shape_text(op, y, sizeof(y)));
    }
    return SL_OK;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static SlStatus
check_shape_rules(IrCheck *ck, const IrInstr *in)
{
    switch (ir_op_family(in->op)) {
    case IR_FAM_ELEMENTWISE:
        return check_elementwise(ck, in);
    case IR_FAM_BITCAST_CONVERT:
        return check_bitcast_convert(ck, in);
    case IR_FAM_BROADCAST:
        return check_broadcast(ck, in);
    case IR_FAM_RESHAPE:
        return check_reshape(ck, in);
    case IR_FAM_TRANSPOSE:
        return check_transpose(ck, in);
    case IR_FAM_SLICE:
        return check_slice(ck, in);
    case IR_FAM_CONCATENATE:
        return check_concatenate(ck, in);
    case IR_FAM_PAD:
        return check_pad(ck, in);
    case IR_FAM_DYNAMIC_SLICE:
        return check_dynamic_slice(ck, in);
    case IR_FAM_DYNAMIC_UPDATE_SLICE:
        return check_dynamic_update_slice(ck, in);
    case IR_FAM_REDUCE:
        return check_reduce(ck, in);
    case IR_FAM_REDUCE_WINDOW:
        return check_reduce_window(ck, in);
    case IR_FAM_DOT:
        return ck_check_dot(ck, in);
    case IR_FAM_RAGGED_DOT:
        return ck_check_ragged_dot(ck, in);
    case IR_FAM_CONVOLUTION:
        return ck_check_convolution(ck, in);
    case IR_FAM_GATHER:
        return ck_check_gather(ck, in);
    case IR_FAM_SCATTER:
        return ck_check_scatter(ck, in);
    case IR_FAM_IOTA:
        return check_iota(ck, in);
    case IR_FAM_TUPLE:
        return check_tuple(ck, in);
    case IR_FAM_GET_TUPLE_ELEMENT:
        return check_gte(ck, in);
    case IR_FAM_WHILE:
        return check_while(ck, in);
    case IR_FAM_CONDITIONAL:
        return check_conditional(ck, in);
    case IR_FAM_CALL:
        return check_call(ck, in);
    case IR_FAM_SCAN:
        return check_scan(ck, in);
    case IR_FAM_ALL_REDUCE:
    case IR_FAM_COLLECTIVE:
    case IR_FAM_COLLECTIVE_PERMUTE:
        return check_collective(ck, in);
    case IR_FAM_PARAMETER:
    case IR_FAM_CONSTANT:
    case IR_FAM_PARTITION_ID:
        return SL_OK;
    case IR_FAM_OPT_BARRIER:
    case IR_FAM_REVERSE:
    case IR_FAM_SELECT_AND_SCATTER:
    case IR_FAM_SORT:
    case IR_FAM_CHOLESKY:
    case IR_FAM_TRIANGULAR_SOLVE:
        return check_keeps_shape(ck, in);
    case IR_FAM_CUSTOM_CALL:
        return check_custom_call(ck, in);
    case IR_FAM_OTHER:
        if (in->op == IR_OP_CALL_START || in->op == IR_OP_CALL_UPDATE ||
            in->op == IR_OP_CALL_DONE)
            return check_async_call(ck, in);
        return SL_OK;
    case IR_FAM_SIDE_EFFECT:
    case IR_FAM_RNG:
        return SL_OK;
    }
    return SL_OK;
}

/* ---- structure ------------------------------------------------------------------------------- */

/* Every computation an instruction names must be in the module, listed before the caller. */
static SlStatus
check_callees(IrCheck *ck, const IrInstr *in, uint64_t caller_pos)
{
    for (uint32_t k = 0; k < in->n_attrs; k++) {
        const IrAttr *a = &in->attrs[k];
        IrAttrKind kind = ir_attr_kind(a->key);
        if (kind != IR_AK_COMP && kind != IR_AK_COMPS)
            continue;
        uint32_t n = kind == IR_AK_COMP ? 1 : a->u.comps.n;
        for (uint32_t j = 0; j < n; j++) {
            const IrComputation *c = kind == IR_AK_COMP ? a->u.comp : a->u.comps.v[j];
            uint64_t pos = 0;
            if (!c || !sl_map_get(&ck->comp_pos, SL_MAP_KEY(c), &pos))
                return ck_bad(ck, in, "%s= names a computation that is not in the module",
                              ir_attr_name(a->key));
            if (pos >= caller_pos)
                return ck_bad(ck, in, "called computation %%%s must be defined before %%%s",
                              sl_sym_cstr(c->name), sl_sym_cstr(in->parent->name));
        }
    }
    return SL_OK;
}

/* Bytes of `s`, false when its element count or byte size does not fit in int64 (a tuple:
 * the sum over its elements). Unbounded dims count as their bound, or 0. */
static bool
shape_bytes_fit(const IrShape *s, int64_t *bytes)
{
    int64_t total = 0, b;
    if (ir_shape_is_tuple(s)) {
        for (uint32_t i = 0; i < s->n_elems; i++)
            if (!shape_bytes_fit(&s->elems[i], &b) || __builtin_add_overflow(total, b, &total))
                return false;
        *bytes = total;
        return true;
    }
    int64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++)
        if (__builtin_mul_overflow(n, s->dims[i] > 0 ? s->dims[i] : 0, &n))
            return false;
    uint32_t bits = ir_dtype_bits(s->dtype);
    return !__builtin_mul_overflow(n, (int64_t)(bits < 8 ? 1 : bits / 8), bytes);
}

static SlStatus
check_shape_size(IrCheck *ck, const IrInstr *in)
{
    int64_t bytes;
    if (shape_bytes_fit(&in->shape, &bytes))
        return SL_OK;
    char t[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "shape %s holds more than 2^63-1 elements or bytes",
                  shape_text(&in->shape, t, sizeof(t)));
}

/* ---- literals ---- */

/* Skips what separates the scalars of a literal: space, commas, braces, comments. */
static const char *
literal_skip(const char *p, const char *end)
{
    while (p < end) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',' || *p == '{' ||
            *p == '}') {
            p++;
        } else if (*p == '/' && p + 1 < end && p[1] == '*') {
            p += 2;
            while (p + 1 < end && !(p[0] == '*' && p[1] == '/'))
                p++;
            p = p + 1 < end ? p + 2 : end;
        } else {
            break;
        }
    }
    return p;
}

/* A scalar of a literal: a number (sign, digits, '.', exponent), inf or nan (with an
 * optional payload), true or false. */
static bool
is_literal_scalar(const char *p, const char *end)
{
    if (p < end && (*p == '-' || *p == '+'))
        p++;
    size_t n = (size_t)(end - p);
    if ((n >= 3 && (!memcmp(p, "inf", 3) || !memcmp(p, "nan", 3))) ||
        (n == 4 && !memcmp(p, "true", 4)) || (n == 5 && !memcmp(p, "false", 5)))
        return true;
    return n > 0 && ((*p >= '0' && *p <= '9') || *p == '.');
}

/* Scalars in an array literal (a complex scalar "(re, im)" is one), up to `stop` + 1; -1 when
 * one of them is not a scalar. */
static int64_t
literal_scalars(SlStr text, bool complex, int64_t stop)
{
    const char *p = text.ptr, *end = text.ptr + text.len;
    int64_t n = 0;
    for (p = literal_skip(p, end); p < end && n <= stop; p = literal_skip(p, end)) {
        const char *start = p;
        if (complex && *p == '(') {
            while (p < end && *p != ')')
                p++;
            p += p < end;
        } else {
            while (p < end && !strchr(" \t\n\r,{}", *p))
                p++;
            if (!is_literal_scalar(start, p))
                return -1;
        }
        n++;
    }
    return n;
}

/* The literal of `shape` must hold one scalar per element; a tuple literal "(a, b)" one
 * literal per element. "{...}" (a literal elided by the printer) matches any shape. */
static bool
literal_fits(const IrShape *shape, SlStr text, char *why, size_t n_why)
{
    for (size_t i = 0; i + 2 < text.len; i++)
        if (text.ptr[i] == '.' && text.ptr[i + 1] == '.' && text.ptr[i + 2] == '.')
            return true;
    if (ir_shape_is_tuple(shape)) {
        const char *p = text.ptr, *end = text.ptr + text.len;
        while (p < end && *p != '(')
            p++;
        while (end > p && end[-1] != ')')
            end--;
        if (p >= end) {
            snprintf(why, n_why, "a tuple literal must be in parentheses");
            return false;
        }
        p++, end--;
        for (uint32_t k = 0; k < shape->n_elems; k++) {
            int depth = 0;
            const char *q = p;
            while (q < end && (depth > 0 || *q != ',')) {
                depth += (*q == '{' || *q == '(') - (*q == '}' || *q == ')');
                q++;
            }
            if (q == p && p >= end) {
                snprintf(why, n_why, "the tuple literal has %u elements, the shape %u", k,
                         shape->n_elems);
                return false;
            }
            if (!literal_fits(&shape->elems[k], (SlStr){p, (size_t)(q - p)}, why, n_why))
                return false;
            p = q < end ? q + 1 : q;
        }
        if (literal_skip(p, end) < end) {
            snprintf(why, n_why, "the tuple literal has more than %u elements", shape->n_elems);
            return false;
        }
        return true;
    }
    if (!ir_shape_is_array(shape))
        return true;
    int64_t want = elem_count(shape);
    char kind = ir_dtype_kind(shape->dtype);
    int64_t got = literal_scalars(text, kind == 'C', want);
    if (got == want)
        return true;
    if (got < 0) {
        snprintf(why, n_why, "the literal '%.*s' is not a list of scalars",
                 text.len > 40 ? 40 : (int)text.len, text.ptr);
        return false;
    }
    snprintf(why, n_why, "the literal has %s%lld values, the shape %lld elements",
             got > want ? "more than " : "", (long long)(got > want ? want : got),
             (long long)want);
    return false;
}

static SlStatus
check_constant(IrCheck *ck, const IrInstr *in)
{
    char why[160];
    if (in->op != IR_OP_CONSTANT || literal_fits(&in->shape, in->literal, why, sizeof(why)))
        return SL_OK;
    return ck_bad(ck, in, "%s", why);
}

/* ---- device ids in attributes ---- */

/* Replica groups and source-target pairs name each device at most once (a pair list: each
 * source once and each target once), all below replica_count x num_partitions when the
 * header gives either (else below IR_MAX_DEVICES: the count comes with -n, later). */
static SlStatus
check_device_ids(IrCheck *ck, const IrInstr *in)
{
    int64_t limit = IR_MAX_DEVICES;
    if (ck->num_partitions || ir_module_find_header(ck->m, "replica_count") ||
        ir_module_find_header(ck->m, "num_partitions"))
        limit = sat_mul(ir_module_replica_count(ck->m), module_partitions(ck));
    const IrAttr *rg = ir_instr_find_attr(in, IR_ATTR_REPLICA_GROUPS);
    const IrAttr *stp = ir_instr_find_attr(in, IR_ATTR_SOURCE_TARGET_PAIRS);
    const IrReplicaGroups *g = rg ? rg->u.groups : NULL;
    if (g && !g->is_iota) {
        uint32_t n = 0;
        for (uint32_t k = 0; k < g->n_groups; k++)
            n += g->group_sizes[k];
        for (uint32_t i = 0; i < n; i++) {
            int64_t d = g->ids[i];
            if (d < 0 || d >= limit)
                return ck_bad(ck, in, "replica_groups names device %lld, outside 0..%lld",
                              (long long)d, (long long)limit - 1);
            if (sl_map_get(&ck->ids, (uint64_t)d, NULL))
                return ck_bad(ck, in, "replica_groups names device %lld twice", (long long)d);
            if (!sl_map_put(&ck->ids, (uint64_t)d, 1))
                return ck_nomem(ck, in);
        }
        sl_map_fini(&ck->ids);
        sl_map_init(&ck->ids);
    }
    if (!stp)
        return SL_OK;
    const uint32_t *sizes = stp->u.lists.sizes;
    const int64_t *v = stp->u.lists.v;
    SlStatus st = SL_OK;
    for (uint32_t k = 0, at = 0; k < stp->u.lists.n && !st; at += sizes[k++]) {
        if (sizes[k] != 2) {
            st = ck_bad(ck, in, "source_target_pairs entry %u is not a pair", k);
            break;
        }
        for (uint32_t j = 0; j < 2 && !st; j++) {
            int64_t d = v[at + j];
            uint64_t key = (uint64_t)d << 1 | j; /* sources and targets apart */
            if (d < 0 || d >= limit)
                st = ck_bad(ck, in, "source_target_pairs names device %lld, outside 0..%lld",
                            (long long)d, (long long)limit - 1);
            else if (sl_map_get(&ck->ids, key, NULL))
                st = ck_bad(ck, in, "device %lld is a %s twice in source_target_pairs",
                            (long long)d, j ? "target" : "source");
            else if (!sl_map_put(&ck->ids, key, 1))
                st = ck_nomem(ck, in);
        }
    }
    sl_map_fini(&ck->ids);
    sl_map_init(&ck->ids);
    return st;
}

/* The operand count and the required attributes of ir_ops.def, for every opcode. */
static SlStatus
check_signature(IrCheck *ck, const IrInstr *in)
{
    uint32_t min = ir_op_min_operands(in->op), n = in->n_operands;
    int max = ir_op_max_operands(in->op);
    if (n < min || (max >= 0 && n > (uint32_t)max)) {
        if (max == (int)min)
            return ck_bad(ck, in, "expects %u operand%s, got %u", min, min == 1 ? "" : "s", n);
        if (max < 0)
            return ck_bad(ck, in, "expects at least %u operand%s, got %u", min,
                          min == 1 ? "" : "s", n);
        return ck_bad(ck, in, "expects %u to %d operands, got %u", min, max, n);
    }
    for (unsigned k = 0; k < IR_ATTR_COUNT; k++)
        if (ir_op_requires_attr(in->op, (IrAttrKey)k) && !ir_instr_find_attr(in, (IrAttrKey)k))
            return ck_bad(ck, in, "missing %s=", ir_attr_name((IrAttrKey)k));
    int64_t ch = 0;
    if (ir_instr_int_attr(in, IR_ATTR_CHANNEL_ID, &ch) && (ch < 0 || ch >= IR_MAX_CHANNEL_ID))
        return ck_bad(ck, in, "channel_id=%lld is out of range (0 to 2^62 - 1)", (long long)ch);
    return SL_OK;
}

static SlStatus
check_operands_defined(IrCheck *ck, const IrComputation *c, const IrInstr *in)
{
    for (uint32_t k = 0; k < in->n_operands; k++) {
        const IrInstr *o = in->operands[k];
        if (!o)
            return ck_bad(ck, in, "operand %u is missing", k);
        if (o->parent != c || o->id >= ck->n_seen || ck->seen[o->id] != o)
            return ck_bad(ck, in, "operand %u (%%%s) is not defined earlier in %%%s", k,
                          sl_sym_cstr(o->name), sl_sym_cstr(c->name));
    }
    return SL_OK;
}

/* Parameter numbers are exactly 0..n-1, each once. */
static SlStatus
check_params(IrCheck *ck, const IrComputation *c)
{
    uint32_t n = ir_computation_param_count(c);
    bool *used = n ? SL_NEW_ARRAY(&ck->scratch, bool, n) : NULL;
    if (n && !used)
        return sl_fail(ck->err, SL_ERR_NOMEM, instr_loc(ck, NULL), "out of memory");
    for (uint32_t i = 0; i < c->n_instrs; i++) {
        const IrInstr *p = c->instrs[i];
        if (p->op != IR_OP_PARAMETER)
            continue;
        if (p->parameter_number < 0 || p->parameter_number >= (int64_t)n)
            return ck_bad(ck, p, "parameter number %lld out of range: %%%s has %u parameters",
                          (long long)p->parameter_number, sl_sym_cstr(c->name), n);
        if (used[p->parameter_number])
            return ck_bad(ck, p, "parameter number %lld used twice",
                          (long long)p->parameter_number);
        used[p->parameter_number] = true;
    }
    return SL_OK;
}

static SlStatus
check_computation(IrCheck *ck, const IrComputation *c, uint64_t pos)
{
    if (c->n_instrs == 0 || !c->root || c->root->parent != c) {
        SlSrcLoc loc = instr_loc(ck, c->n_instrs ? c->instrs[0] : NULL);
        return sl_fail(ck->err, SL_ERR_INVALID, loc, "computation %%%s has no root instruction",
                       sl_sym_cstr(c->name));
    }
    SlStatus st = check_params(ck, c);
    for (uint32_t i = 0; i < c->n_instrs && !st; i++) {
        const IrInstr *in = c->instrs[i];
        if (in->parent != c)
            return sl_fail(ck->err, SL_ERR_INTERNAL, instr_loc(ck, in),
                           "instruction %%%s is listed in %%%s but belongs elsewhere",
                           sl_sym_cstr(in->name), sl_sym_cstr(c->name));
        SlArenaMark mark = sl_arena_mark(&ck->scratch);
        if ((st = check_operands_defined(ck, c, in)) || (st = check_signature(ck, in)) ||
            (st = check_shape_size(ck, in)) || (st = check_constant(ck, in)) ||
            (st = check_device_ids(ck, in)) || (st = check_callees(ck, in, pos)) ||
            (st = check_shape_rules(ck, in)))
            return st;
        if (sl_arena_failed(&ck->scratch))
            return ck_nomem(ck, in);
        sl_arena_release(&ck->scratch, mark); /* inferred shapes are not kept */
        if (in->id >= ck->n_seen)
            return sl_fail(ck->err, SL_ERR_INTERNAL, instr_loc(ck, in),
                           "instruction %%%s has id %u beyond the module's %u",
                           sl_sym_cstr(in->name), in->id, ck->n_seen);
        ck->seen[in->id] = in;
    }
    return st;
}

SlStatus
ir_module_check(const IrModule *m, const char *path, SlError *err)
{
    return ir_module_check_for(m, path, 0, err);
}

SlStatus
ir_module_check_for(const IrModule *m, const char *path, int64_t num_partitions, SlError *err)
{
    IrCheck ck = {.m = m, .path = path, .err = err, .num_partitions = num_partitions};
    sl_arena_init(&ck.scratch);
    sl_map_init(&ck.comp_pos);
    sl_map_init(&ck.ids);
    SlStatus st = SL_OK;
    SlSrcLoc nowhere = {path, 0, 0};
    /* A first chunk, so that the per-instruction mark/release below never frees it. */
    (void)sl_arena_alloc(&ck.scratch, 1, 1);
    ck.n_seen = m->next_instr_id;
    ck.seen = calloc(ck.n_seen ? ck.n_seen : 1, sizeof(*ck.seen));
    if (!ck.seen)
        st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    uint32_t n_entry = 0;
    for (uint32_t i = 0; i < m->n_comps && !st; i++) {
        n_entry += m->comps[i]->is_entry;
        if (!sl_map_put(&ck.comp_pos, SL_MAP_KEY(m->comps[i]), (uint64_t)i + 1))
            st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    }
    if (!st && (!m->entry || n_entry != 1))
        st = sl_fail(err, SL_ERR_INVALID, nowhere,
                     "module %s must have exactly one ENTRY computation (has %u)",
                     sl_sym_cstr(m->name), n_entry);
    for (uint32_t i = 0; i < m->n_comps && !st; i++) {
        st = check_computation(&ck, m->comps[i], (uint64_t)i + 1);
        if (!st && sl_arena_failed(&ck.scratch))
            st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory checking module");
    }
    free(ck.seen);
    sl_map_fini(&ck.comp_pos);
    sl_map_fini(&ck.ids);
    sl_arena_fini(&ck.scratch);
    return st;
}
