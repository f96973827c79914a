/* check_common.c - the helpers the shape rules of ir_module_check() share: shape text for
 * messages, shape comparison and construction, saturating arithmetic, the operand rules
 * (counts, arrays, lists of dims), the called-computation rules (parameters, root, reducers)
 * and the comparison of a declared result with the inferred one. Owns: what "matches" means
 * (element types and dims; layouts ignored; an unbounded dim matches any size). Does not own:
 * the error itself (ck_bad, check.c) or any opcode's rule. Invariant: the module is never
 * modified; the shapes built here live in the checker's scratch arena. */
/* clang-format off */
#include "ir/check_int.h" /* the file's own header first */
/* clang-format on */

#include <stdio.h>
#include <string.h>

/* ---- shape text in messages ------------------------------------------------------------ */

/* Shape text without layout, truncated to fit `out`. */
const char *
ck_shape_text(const IrShape *s, char *out, size_t n)
{
    SlBuf b;
    sl_buf_init(&b);
    ir_shape_print(s, false, &b);
    snprintf(out, n, "%s", b.failed || !b.data ? "?" : b.data);
    sl_buf_fini(&b);
    return out;
}

SlStatus
ck_dims_mismatch(IrCheck *ck, const IrInstr *in, uint32_t a, uint32_t b)
{
    char x[SHAPE_TEXT_BYTES], y[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "operand shapes %s and %s are not compatible",
                  ck_shape_text(opnd(in, a), x, sizeof(x)),
                  ck_shape_text(opnd(in, b), y, sizeof(y)));
}

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
bool
ck_shape_match(const IrShape *a, const IrShape *b)
{
    if (a->dtype != b->dtype)
        return false;
    if (ir_shape_is_tuple(a)) {
        if (a->n_elems != b->n_elems)
            return false;
        for (uint32_t i = 0; i < a->n_elems; i++)
            if (!ck_shape_match(&a->elems[i], &b->elems[i]))
                return false;
        return true;
    }
    return ck_same_dims(a, b);
}

/* Saturating arithmetic: huge dims in bad input give a mismatch, never signed overflow. */
int64_t
ck_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

int64_t
ck_sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX) : r;
}

/* Element count of an array shape, saturating. */
int64_t
ck_elem_count(const IrShape *s)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++)
        n = ck_sat_mul(n, s->dims[i]);
    return n;
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
bool
ck_new_tuple(IrCheck *ck, const IrShape *elems, uint32_t n, IrShape *out)
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
        return ck_new_tuple(ck, leaves, k, out);
    *out = leaves[0];
    return true;
}

/* Compares the declared result shape with the inferred one. */
SlStatus
ck_expect(IrCheck *ck, const IrInstr *in, const IrShape *inferred)
{
    if (ck_shape_match(&in->shape, inferred))
        return SL_OK;
    char d[SHAPE_TEXT_BYTES], f[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "declared shape %s but inferred %s",
                  ck_shape_text(&in->shape, d, sizeof(d)), ck_shape_text(inferred, f, sizeof(f)));
}

SlStatus
ck_expect_k(IrCheck *ck, const IrInstr *in, const IrShape *leaves, uint32_t k)
{
    IrShape t;
    if (!one_or_tuple(ck, leaves, k, &t))
        return ck_nomem(ck, in);
    return ck_expect(ck, in, &t);
}

SlStatus
ck_need_operands(IrCheck *ck, const IrInstr *in, uint32_t n)
{
    if (in->n_operands != n)
        return ck_bad(ck, in, "expects %u operands, got %u", n, in->n_operands);
    return SL_OK;
}

SlStatus
ck_need_array(IrCheck *ck, const IrInstr *in, uint32_t k)
{
    if (ir_shape_is_array(opnd(in, k)))
        return SL_OK;
    char t[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "operand %u (%%%s) must be an array, got %s", k,
                  sl_sym_cstr(in->operands[k]->name), ck_shape_text(opnd(in, k), t, sizeof(t)));
}

SlStatus
ck_need_arrays(IrCheck *ck, const IrInstr *in, uint32_t n)
{
    SlStatus st = ck_need_operands(ck, in, n);
    for (uint32_t k = 0; k < n && !st; k++)
        st = ck_need_array(ck, in, k);
    return st;
}

SlStatus
ck_need_all_arrays(IrCheck *ck, const IrInstr *in)
{
    SlStatus st = SL_OK;
    if (in->n_operands == 0)
        return ck_bad(ck, in, "expects at least one operand");
    for (uint32_t k = 0; k < in->n_operands && !st; k++)
        st = ck_need_array(ck, in, k);
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
SlStatus
ck_need_param(IrCheck *ck, const IrInstr *in, const IrComputation *c, int64_t k,
              const IrShape *want)
{
    const IrInstr *p = ir_computation_param(c, k);
    if (!p)
        return ck_bad(ck, in, "called computation %%%s has no parameter %lld", sl_sym_cstr(c->name),
                      (long long)k);
    if (ck_shape_match(&p->shape, want))
        return SL_OK;
    char a[SHAPE_TEXT_BYTES], b[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "parameter %lld of %%%s has shape %s, expected %s", (long long)k,
                  sl_sym_cstr(c->name), ck_shape_text(&p->shape, a, sizeof(a)),
                  ck_shape_text(want, b, sizeof(b)));
}

SlStatus
ck_need_param_count(IrCheck *ck, const IrInstr *in, const IrComputation *c, uint32_t n)
{
    uint32_t have = ir_computation_param_count(c);
    if (have != n)
        return ck_bad(ck, in, "called computation %%%s takes %u parameters, expected %u",
                      sl_sym_cstr(c->name), have, n);
    return SL_OK;
}

SlStatus
ck_need_root(IrCheck *ck, const IrInstr *in, const IrComputation *c, const IrShape *want)
{
    if (!c->root || ck_shape_match(&c->root->shape, want))
        return SL_OK;
    char a[SHAPE_TEXT_BYTES], b[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "called computation %%%s returns %s, expected %s", sl_sym_cstr(c->name),
                  ck_shape_text(&c->root->shape, a, sizeof(a)), ck_shape_text(want, b, sizeof(b)));
}

SlStatus
ck_need_called(IrCheck *ck, const IrInstr *in, IrAttrKey key, IrComputation **out)
{
    *out = ir_instr_called(in, key);
    if (!*out)
        return ck_bad(ck, in, "missing %s=", ir_attr_name(key));
    return SL_OK;
}

/* A reducer taking 2k scalars (accumulators then inputs, typed like `types`) and returning
 * k scalars (a tuple when k > 1). */
SlStatus
ck_need_reducer(IrCheck *ck, const IrInstr *in, const IrComputation *c, const IrDtype *types,
                uint32_t k)
{
    SlStatus st = ck_need_param_count(ck, in, c, 2 * k);
    if (st)
        return st;
    IrShape *leaves = SL_NEW_ARRAY(&ck->scratch, IrShape, k);
    if (!leaves)
        return ck_nomem(ck, in);
    for (uint32_t i = 0; i < k; i++) {
        ck_new_shape(ck, types[i], 0, &leaves[i]);
        if ((st = ck_need_param(ck, in, c, i, &leaves[i])) ||
            (st = ck_need_param(ck, in, c, k + i, &leaves[i])))
            return st;
    }
    IrShape root;
    if (!one_or_tuple(ck, leaves, k, &root))
        return ck_nomem(ck, in);
    return ck_need_root(ck, in, c, &root);
}
