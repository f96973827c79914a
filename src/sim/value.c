/* value.c - typed values: allocation and reference counts, rounding and wrapping to a dtype,
 * conversions between dtypes, and decoding constant literals. Owns: the one place that knows
 * how each dtype is stored in a SimElem (sim.h). Invariant: every element a kernel stores has
 * passed through sim_fix(), so reading never needs to renormalise. */
#include "sim/sim_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation ---------------------------------------------------------------------- */

SimValue *
sim_value_new_array(IrDtype t, const int64_t *dims, uint32_t rank)
{
    if (rank > SIM_MAX_RANK)
        return NULL;
    SimValue *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->refs = 1;
    v->dtype = t;
    v->rank = rank;
    v->n = 1;
    for (uint32_t d = 0; d < rank; d++) {
        v->dims[d] = dims[d];
        v->n *= dims[d];
    }
    if (t == IR_DT_TOKEN || t == IR_DT_OPAQUE)
        v->n = 0;
    if (v->n > 0) {
        v->data = calloc((size_t)v->n, sizeof *v->data);
        if (!v->data) {
            free(v);
            return NULL;
        }
    }
    return v;
}

SimValue *
sim_value_new_tuple(SimValue *const *elems, uint32_t n)
{
    SimValue *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->refs = 1;
    v->dtype = IR_DT_TUPLE;
    v->n_elems = n;
    v->elems = calloc(n ? n : 1, sizeof *v->elems);
    if (!v->elems) {
        free(v);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        v->elems[i] = sim_value_ref(elems[i]);
    return v;
}

SimValue *
sim_value_new(const IrShape *shape)
{
    if (shape->dtype != IR_DT_TUPLE)
        return sim_value_new_array(shape->dtype, shape->dims, shape->rank);
    SimValue *v = sim_value_new_tuple(NULL, 0);
    if (!v)
        return NULL;
    free(v->elems);
    v->elems = calloc(shape->n_elems ? shape->n_elems : 1, sizeof *v->elems);
    if (!v->elems) {
        free(v);
        return NULL;
    }
    v->n_elems = shape->n_elems;
    for (uint32_t i = 0; i < shape->n_elems; i++) {
        if (!(v->elems[i] = sim_value_new(&shape->elems[i]))) {
            sim_value_unref(v);
            return NULL;
        }
    }
    return v;
}

SimValue *
sim_value_ref(SimValue *v)
{
    if (v)
        v->refs++;
    return v;
}

void
sim_value_unref(SimValue *v)
{
    if (!v || --v->refs > 0)
        return;
    for (uint32_t i = 0; i < v->n_elems; i++)
        sim_value_unref(v->elems[i]);
    free(v->elems);
    free(v->data);
    free(v);
}

SimValue *
sim_value_like(const SimValue *v)
{
    return sim_value_new_array(v->dtype, v->dims, v->rank);
}

SimValue *
sim_value_copy(const SimValue *v)
{
    SimValue *c = sim_value_like(v);
    if (c && v->n > 0)
        memcpy(c->data, v->data, (size_t)v->n * sizeof *v->data);
    return c;
}

void
sim_strides(const int64_t *dims, uint32_t rank, int64_t *strides)
{
    int64_t s = 1;
    for (uint32_t d = rank; d-- > 0;) {
        strides[d] = s;
        s *= dims[d];
    }
}

int64_t
sim_scalar_i64(const SimValue *v)
{
    if (!v->data)
        return 0;
    return sim_is_float(v->dtype) ? (int64_t)v->data[0].f : v->data[0].i;
}

/* ---- dtypes ---------------------------------------------------------------------------- */

bool
sim_is_float(IrDtype t)
{
    return t == IR_DT_F16 || t == IR_DT_BF16 || t == IR_DT_F32 || t == IR_DT_F64 ||
           sim_is_f8(t);
}

bool
sim_is_f8(IrDtype t)
{
    return t == IR_DT_F8E5M2 || t == IR_DT_F8E4M3 || t == IR_DT_F8E4M3FN || t == IR_DT_F8E8M0FNU;
}

bool
sim_is_array_dtype(IrDtype t)
{
    if (sim_is_float(t) || t == IR_DT_PRED)
        return true;
    char k = ir_dtype_kind(t);
    return (k == 'S' || k == 'U') && ir_dtype_bits(t) >= 8;
}

/* Rounds x to a binary float with `p` significand bits (implicit bit included), minimum normal
 * exponent `emin` and maximum exponent `emax`: round to nearest even, subnormals, overflow to
 * infinity. Exact because doubles carry more than 2p + 2 bits for every format we round to. */
static double
round_format(double x, int p, int emin, int emax)
{
    if (!isfinite(x) || x == 0)
        return x;
    int e;
    (void)frexp(x, &e); /* x = m * 2^e, 0.5 <= |m| < 1: the leading bit has exponent e - 1 */
    int lead = e - 1 < emin ? emin : e - 1;
    int q = lead - (p - 1); /* exponent of one unit in the last place */
    double r = ldexp(nearbyint(ldexp(x, -q)), q);
    if (fabs(r) >= ldexp(1.0, emax + 1))
        return x > 0 ? INFINITY : -INFINITY;
    return r;
}

/* The 8-bit formats without infinities: e4m3fn saturates nothing and turns values past 448
 * into NaN; e8m0fnu holds only powers of two from 2^-127 to 2^127 (no zero, no sign), so
 * anything else non-positive, or out of range, is NaN. */
static double
round_f8_finite(IrDtype t, double x)
{
    if (t == IR_DT_F8E4M3FN) {
        double r = round_format(x, 4, -6, 8);
        return fabs(r) > 448 ? NAN : r;
    }
    if (!(x > 0) || isinf(x))
        return NAN;
    double r = round_format(x, 1, -127, 127);
    if (r == 0)
        r = ldexp(1.0, -127);
    return isinf(r) ? NAN : r;
}

double
sim_round(IrDtype t, double x)
{
    switch (t) {
    case IR_DT_F64: return x;
    case IR_DT_F32: return (double)(float)x;
    case IR_DT_BF16: return round_format(x, 8, -126, 127);
    case IR_DT_F16: return round_format(x, 11, -14, 15);
    case IR_DT_F8E5M2: return round_format(x, 3, -14, 15);
    case IR_DT_F8E4M3: return round_format(x, 4, -6, 7);
    case IR_DT_F8E4M3FN:
    case IR_DT_F8E8M0FNU: return isnan(x) ? x : round_f8_finite(t, x);
    default: {
        SimElem e = {.i = 0};
        if (isnan(x))
            return 0;
        e.i = x >= 9.2e18 ? INT64_MAX : x <= -9.2e18 ? INT64_MIN : (int64_t)x;
        return (double)sim_fix(t, e).i;
    }
    }
}

SimElem
sim_fix(IrDtype t, SimElem x)
{
    if (sim_is_float(t)) {
        x.f = sim_round(t, x.f);
        return x;
    }
    if (t == IR_DT_PRED) {
        x.i = x.i != 0;
        return x;
    }
    uint32_t bits = ir_dtype_bits(t);
    if (bits >= 64 || bits == 0)
        return x;
    uint64_t mask = ((uint64_t)1 << bits) - 1, u = (uint64_t)x.i & mask;
    if (ir_dtype_kind(t) == 'S' && (u >> (bits - 1)) & 1)
        u |= ~mask;
    x.i = (int64_t)u;
    return x;
}

/* Float to integer as XLA does on CPU: NaN becomes 0, out-of-range values saturate. */
static int64_t
float_to_int(IrDtype to, double f)
{
    if (isnan(f))
        return 0;
    int bits = (int)ir_dtype_bits(to);
    bool is_signed = ir_dtype_kind(to) == 'S';
    double lo = is_signed ? -ldexp(1.0, bits - 1) : 0;
    double hi = ldexp(1.0, is_signed ? bits - 1 : bits);
    if (f <= lo)
        return (int64_t)lo;
    if (f >= hi) {
        if (!is_signed)
            return bits >= 64 ? -1 : (int64_t)(((uint64_t)1 << bits) - 1);
        return bits >= 64 ? INT64_MAX : (int64_t)(((uint64_t)1 << (bits - 1)) - 1);
    }
    return is_signed ? (int64_t)trunc(f) : (int64_t)(uint64_t)trunc(f);
}

SimElem
sim_convert(IrDtype from, IrDtype to, SimElem x)
{
    SimElem r = {.i = 0};
    bool ff = sim_is_float(from), tf = sim_is_float(to);
    if (ff && tf) {
        r.f = x.f;
    } else if (ff && to == IR_DT_PRED) {
        r.i = x.f != 0;
    } else if (ff) {
        r.i = float_to_int(to, x.f);
        return sim_fix(to, r); /* u64 keeps its pattern */
    } else if (tf) {
        r.f = from == IR_DT_U64 ? (double)(uint64_t)x.i : (double)x.i;
    } else if (to == IR_DT_PRED) {
        r.i = x.i != 0;
    } else {
        r.i = x.i;
    }
    return sim_fix(to, r);
}

void
sim_value_set_f64(SimValue *v, int64_t i, double x)
{
    SimElem e;
    if (sim_is_float(v->dtype))
        e.f = x;
    else
        e = sim_convert(IR_DT_F64, v->dtype, (SimElem){.f = x});
    v->data[i] = sim_fix(v->dtype, e);
}

void
sim_value_set_i64(SimValue *v, int64_t i, int64_t x)
{
    v->data[i] = sim_convert(IR_DT_S64, v->dtype, (SimElem){.i = x});
}

/* ---- literals ------------------------------------------------------------------------ */

typedef struct LitReader {
    const char *p, *end;
} LitReader;

/* Skips whitespace, commas, braces and comments: a flattened array literal is its scalars in
 * row-major order, which is all the evaluator needs once the shape is known. */
static void
lit_skip(LitReader *r)
{
    while (r->p < r->end) {
        char c = *r->p;
        if (isspace((unsigned char)c) || c == ',' || c == '{' || c == '}') {
            r->p++;
        } else if (c == '/' && r->p + 1 < r->end && r->p[1] == '*') {
            const char *e = strstr(r->p + 2, "*/");
            r->p = e && e < r->end ? e + 2 : r->end;
        } else {
            return;
        }
    }
}

/* scalar := INT | DECIMAL | 'true' | 'false' | '-'? ('inf' | 'nan') ; returns false if none */
static bool
lit_scalar(LitReader *r, IrDtype t, SimElem *out)
{
    char buf[64];
    size_t n = 0;
    while (r->p + n < r->end && n < sizeof buf - 1 &&
           (isalnum((unsigned char)r->p[n]) || strchr("+-.()_", r->p[n])))
        n++;
    if (n == 0)
        return false;
    memcpy(buf, r->p, n);
    buf[n] = 0;
    r->p += n;
    double f;
    bool neg = buf[0] == '-';
    const char *w = neg ? buf + 1 : buf;
    if (!strcmp(buf, "true") || !strcmp(buf, "false")) {
        *out = sim_convert(IR_DT_PRED, t, (SimElem){.i = buf[0] == 't'});
        return true;
    }
    if (!strncmp(w, "inf", 3))
        f = neg ? -INFINITY : INFINITY;
    else if (!strncmp(w, "nan", 3))
        f = neg ? -NAN : NAN;
    else if (!sim_is_float(t) && !strpbrk(buf, ".eE")) {
        char *e;
        int64_t v = t == IR_DT_U64 ? (int64_t)strtoull(buf, &e, 10) : strtoll(buf, &e, 10);
        if (*e)
            return false;
        *out = sim_fix(t, (SimElem){.i = v});
        return true;
    } else {
        char *e;
        f = strtod(buf, &e);
        if (*e)
            return false;
    }
    *out = sim_convert(IR_DT_F64, t, (SimElem){.f = f});
    if (sim_is_float(t))
        out->f = sim_round(t, f);
    return true;
}

static SlStatus
lit_array(const IrShape *shape, SlStr text, SimValue **out, SlError *err)
{
    SlSrcLoc nowhere = {0};
    SimValue *v = sim_value_new(shape);
    if (!v)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory for a constant");
    LitReader r = {text.ptr, text.ptr + text.len};
    int64_t i = 0;
    for (lit_skip(&r); r.p < r.end; lit_skip(&r)) {
        SimElem e;
        if (i >= v->n || !lit_scalar(&r, shape->dtype, &e)) {
            int64_t n = v->n; /* read before the value is released */
            sim_value_unref(v);
            return sl_fail(err, SL_ERR_INVALID, nowhere, "bad literal for %s[%" PRId64
                           " elements]: '%.*s'", ir_dtype_name(shape->dtype), n,
                           SL_STR_ARG(text));
        }
        v->data[i++] = e;
    }
    if (i != v->n) {
        int64_t want = v->n;
        sim_value_unref(v);
        return sl_fail(err, SL_ERR_INVALID, nowhere,
                       "literal has %" PRId64 " elements, shape needs %" PRId64, i, want);
    }
    *out = v;
    return SL_OK;
}

/* tuple_literal := '(' literal (',' literal)* ')' : split at top-level commas. */
static SlStatus
lit_tuple(const IrShape *shape, SlStr text, SimValue **out, SlError *err)
{
    SlSrcLoc nowhere = {0};
    const char *p = text.ptr, *end = text.ptr + text.len;
    while (p < end && *p != '(')
        p++;
    while (end > p && end[-1] != ')')
        end--;
    if (p >= end)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "bad tuple literal");
    p++, end--;
    SimValue *t = sim_value_new(shape);
    if (!t)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory for a constant");
    for (uint32_t k = 0; k < shape->n_elems; k++) {
        int depth = 0;
        const char *q = p;
        while (q < end && (depth > 0 || *q != ',')) {
            depth += (*q == '{' || *q == '(') - (*q == '}' || *q == ')');
            q++;
        }
        SimValue *e = NULL;
        SlStr part = {p, (size_t)(q - p)};
        if (sim_literal_parse(&shape->elems[k], part, &e, err)) {
            sim_value_unref(t);
            return err->status;
        }
        sim_value_unref(t->elems[k]);
        t->elems[k] = e;
        p = q < end ? q + 1 : q;
    }
    *out = t;
    return SL_OK;
}

SlStatus
sim_literal_parse(const IrShape *shape, SlStr text, SimValue **out, SlError *err)
{
    SlSrcLoc nowhere = {0};
    for (size_t i = 0; i + 2 < text.len; i++)
        if (!memcmp(text.ptr + i, "...", 3))
            return sl_fail(err, SL_ERR_INVALID, nowhere, "literal not available ({...})");
    if (shape->dtype == IR_DT_TUPLE)
        return lit_tuple(shape, text, out, err);
    if (!sim_is_array_dtype(shape->dtype))
        return sl_fail(err, SL_ERR_UNSUPPORTED, nowhere, "constants of type %s",
                       ir_dtype_name(shape->dtype));
    return lit_array(shape, text, out, err);
}
