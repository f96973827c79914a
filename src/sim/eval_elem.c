/* eval_elem.c - elementwise kernels: unary and binary arithmetic, compare, select, clamp,
 * convert, bitcast-convert, reduce-precision, map, plus iota, partition-id and replica-id.
 * Owns: XLA's per-element semantics (integer division by zero, shifts past the width, NaN
 * propagation in maximum/minimum). Does not own: storage rules (value.c). Invariant: floats
 * are computed in double and rounded once on store; integers wrap to their width. */
#include "sim/sim_int.h"

#include <math.h>
#include <string.h>

static bool
is_u64(IrDtype t)
{
    return t == IR_DT_U64;
}

static SimElem
int_divide(IrOp op, IrDtype t, int64_t a, int64_t b)
{
    SimElem r = {.i = 0};
    bool is_signed = ir_dtype_kind(t) == 'S';
    if (op == IR_OP_DIVIDE) {
        if (b == 0)
            r.i = -1; /* all bits set, as XLA defines it */
        else if (is_u64(t))
            r.i = (int64_t)((uint64_t)a / (uint64_t)b);
        else if (is_signed && b == -1)
            r.i = (int64_t)(0 - (uint64_t)a); /* INT_MIN / -1 wraps to INT_MIN */
        else
            r.i = a / b;
    } else {
        if (b == 0)
            r.i = a;
        else if (is_u64(t))
            r.i = (int64_t)((uint64_t)a % (uint64_t)b);
        else if (b == -1)
            r.i = 0;
        else
            r.i = a % b;
    }
    return r;
}

static SimElem
int_shift(IrOp op, IrDtype t, int64_t a, int64_t b)
{
    uint32_t w = ir_dtype_bits(t);
    uint64_t mask = w >= 64 ? UINT64_MAX : ((uint64_t)1 << w) - 1;
    SimElem r = {.i = 0};
    bool big = b < 0 || (uint64_t)b >= w;
    if (op == IR_OP_SHIFT_LEFT)
        r.i = big ? 0 : (int64_t)((uint64_t)a << b);
    else if (op == IR_OP_SHIFT_RIGHT_LOGICAL)
        r.i = big ? 0 : (int64_t)(((uint64_t)a & mask) >> b);
    else /* arithmetic: the stored value is sign-extended already */
        r.i = big ? (a < 0 ? -1 : 0) : (a < 0 ? ~(int64_t)(~(uint64_t)a >> b) : a >> b);
    return r;
}

static SimElem
int_binop(IrOp op, IrDtype t, int64_t a, int64_t b)
{
    SimElem r = {.i = 0};
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    bool lt = is_u64(t) ? ua < ub : a < b;
    switch (op) {
    case IR_OP_ADD: r.i = (int64_t)(ua + ub); break;
    case IR_OP_SUBTRACT: r.i = (int64_t)(ua - ub); break;
    case IR_OP_MULTIPLY: r.i = (int64_t)(ua * ub); break;
    case IR_OP_DIVIDE:
    case IR_OP_REMAINDER: return int_divide(op, t, a, b);
    case IR_OP_MAXIMUM: r.i = lt ? b : a; break;
    case IR_OP_MINIMUM: r.i = lt ? a : b; break;
    case IR_OP_AND: r.i = a & b; break;
    case IR_OP_OR: r.i = a | b; break;
    case IR_OP_XOR: r.i = a ^ b; break;
    case IR_OP_SHIFT_LEFT:
    case IR_OP_SHIFT_RIGHT_LOGICAL:
    case IR_OP_SHIFT_RIGHT_ARITHMETIC: return int_shift(op, t, a, b);
    case IR_OP_POWER: {
        uint64_t acc = 1, base = ua;
        for (int64_t e = b; e > 0; e >>= 1, base *= base)
            if (e & 1)
                acc *= base;
        r.i = b < 0 ? (a == 1 ? 1 : 0) : (int64_t)acc;
        break;
    }
    default: break;
    }
    return r;
}

SimElem
sim_binop(IrOp op, IrDtype t, SimElem a, SimElem b)
{
    if (!sim_is_float(t))
        return int_binop(op, t, a.i, b.i);
    double x = a.f, y = b.f;
    SimElem r = {.f = 0};
    switch (op) {
    case IR_OP_ADD: r.f = x + y; break;
    case IR_OP_SUBTRACT: r.f = x - y; break;
    case IR_OP_MULTIPLY: r.f = x * y; break;
    case IR_OP_DIVIDE: r.f = x / y; break;
    case IR_OP_REMAINDER: r.f = fmod(x, y); break;
    case IR_OP_MAXIMUM: r.f = isnan(x) || isnan(y) ? NAN : (x > y || (x == y && !signbit(x))) ? x : y; break;
    case IR_OP_MINIMUM: r.f = isnan(x) || isnan(y) ? NAN : (x < y || (x == y && signbit(x))) ? x : y; break;
    case IR_OP_POWER: r.f = pow(x, y); break;
    case IR_OP_ATAN2: r.f = atan2(x, y); break;
    default: r.f = NAN; break;
    }
    return r;
}

static bool
float_unop(IrOp op, double x, double *r)
{
    switch (op) {
    case IR_OP_ABS: *r = fabs(x); break;
    case IR_OP_CEIL: *r = ceil(x); break;
    case IR_OP_COSINE: *r = cos(x); break;
    case IR_OP_EXP: *r = exp(x); break;
    case IR_OP_EXPM1: *r = expm1(x); break;
    case IR_OP_FLOOR: *r = floor(x); break;
    case IR_OP_LOG: *r = log(x); break;
    case IR_OP_LOG1P: *r = log1p(x); break;
    case IR_OP_LOGISTIC: *r = 1.0 / (1.0 + exp(-x)); break;
    case IR_OP_NEGATE: *r = -x; break;
    case IR_OP_ROUND_AFZ: *r = round(x); break;
    case IR_OP_ROUND_EVEN: *r = nearbyint(x); break;
    case IR_OP_RSQRT: *r = 1.0 / sqrt(x); break;
    case IR_OP_CBRT: *r = cbrt(x); break;
    case IR_OP_SIGN: *r = isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : x; break;
    case IR_OP_SINE: *r = sin(x); break;
    case IR_OP_SQRT: *r = sqrt(x); break;
    case IR_OP_TAN: *r = tan(x); break;
    case IR_OP_TANH: *r = tanh(x); break;
    case IR_OP_ERF: *r = erf(x); break;
    case IR_OP_ACOS: *r = acos(x); break;
    case IR_OP_ACOSH: *r = acosh(x); break;
    case IR_OP_ASIN: *r = asin(x); break;
    case IR_OP_ASINH: *r = asinh(x); break;
    case IR_OP_ATANH: *r = atanh(x); break;
    case IR_OP_COSH: *r = cosh(x); break;
    case IR_OP_SINH: *r = sinh(x); break;
    case IR_OP_COPY:
    case IR_OP_REAL: *r = x; break;
    case IR_OP_IMAG: *r = 0; break;
    default: return false;
    }
    return true;
}

static bool
int_unop(IrOp op, IrDtype t, int64_t x, int64_t *r)
{
    uint32_t w = ir_dtype_bits(t);
    uint64_t mask = w >= 64 ? UINT64_MAX : ((uint64_t)1 << w) - 1, u = (uint64_t)x & mask;
    switch (op) {
    case IR_OP_ABS: *r = x < 0 ? (int64_t)(0 - (uint64_t)x) : x; break;
    case IR_OP_NEGATE: *r = (int64_t)(0 - (uint64_t)x); break;
    case IR_OP_NOT: *r = t == IR_DT_PRED ? !x : ~x; break;
    case IR_OP_SIGN: *r = x > 0 ? 1 : x < 0 ? -1 : 0; break;
    case IR_OP_POPCNT:
        *r = 0;
        for (; u; u &= u - 1)
            (*r)++;
        break;
    case IR_OP_CLZ:
        *r = 0;
        for (int b = (int)w - 1; b >= 0 && !((u >> b) & 1); b--)
            (*r)++;
        break;
    case IR_OP_COPY:
    case IR_OP_REAL: *r = x; break;
    default: return false;
    }
    return true;
}

/* Total order on doubles for type=TOTALORDER: -NaN < -inf < ... < -0 < +0 < ... < +NaN. */
static int64_t
total_key(double x)
{
    int64_t b;
    memcpy(&b, &x, sizeof b);
    return b < 0 ? b ^ INT64_MAX : b;
}

static const char *const k_dirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};

int
sim_compare_code(const IrInstr *ins)
{
    const IrAttr *d = ir_instr_find_attr(ins, IR_ATTR_DIRECTION);
    const IrAttr *ty = ir_instr_find_attr(ins, IR_ATTR_COMPARISON_TYPE);
    for (int k = 0; d && k < (int)SL_COUNTOF(k_dirs); k++)
        if (sl_str_eq_cstr(d->u.text, k_dirs[k]))
            return k | (ty && sl_str_eq_cstr(ty->u.text, "TOTALORDER") ? SIM_CMP_TOTAL : 0);
    return -1;
}

bool
sim_compare_coded(int code, IrDtype t, SimElem a, SimElem b)
{
    int c; /* -1, 0, 1; 2 = unordered */
    if (sim_is_float(t) && (code & SIM_CMP_TOTAL)) {
        int64_t x = total_key(a.f), y = total_key(b.f);
        c = x < y ? -1 : x > y;
    } else if (sim_is_float(t)) {
        c = isnan(a.f) || isnan(b.f) ? 2 : a.f < b.f ? -1 : a.f > b.f;
    } else if (is_u64(t)) {
        c = (uint64_t)a.i < (uint64_t)b.i ? -1 : (uint64_t)a.i > (uint64_t)b.i;
    } else {
        c = a.i < b.i ? -1 : a.i > b.i;
    }
    switch (code & ~SIM_CMP_TOTAL) {
    case 0: return c == 0;
    case 1: return c != 0;
    case 2: return c == -1;
    case 3: return c == -1 || c == 0;
    case 4: return c == 1;
    default: return c == 1 || c == 0;
    }
}

bool
sim_compare(const IrInstr *ins, IrDtype t, SimElem a, SimElem b, bool *ok)
{
    int code = sim_compare_code(ins);
    *ok = code >= 0;
    return code >= 0 && sim_compare_coded(code, t, a, b);
}

/* Encodings for bitcast-convert between same-width types. */
static uint64_t
to_bits(IrDtype t, SimElem x)
{
    uint32_t w = ir_dtype_bits(t);
    if (t == IR_DT_F64) {
        uint64_t u;
        memcpy(&u, &x.f, sizeof u);
        return u;
    }
    if (sim_is_float(t)) {
        float f = (float)x.f;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        if (t == IR_DT_BF16)
            return u >> 16; /* exact: the value is already a bf16 */
        if (t == IR_DT_F16) {
            uint32_t s = (u >> 16) & 0x8000u;
            double a = fabs(x.f);
            if (isnan(x.f))
                return s | 0x7e00u;
            if (isinf(x.f))
                return s | 0x7c00u;
            if (a < ldexp(1.0, -14))
                return s | (uint32_t)(a * ldexp(1.0, 24)); /* subnormal: exact */
            int e;
            double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
            return s | (uint32_t)(e + 14) << 10 | ((uint32_t)(m * 2048) & 0x3ffu);
        }
        return u;
    }
    return w >= 64 ? (uint64_t)x.i : (uint64_t)x.i & (((uint64_t)1 << w) - 1);
}

static SimElem
from_bits(IrDtype t, uint64_t u)
{
    SimElem r = {.i = 0};
    if (t == IR_DT_F64) {
        memcpy(&r.f, &u, sizeof r.f);
    } else if (t == IR_DT_F32 || t == IR_DT_BF16) {
        uint32_t v = t == IR_DT_BF16 ? (uint32_t)u << 16 : (uint32_t)u;
        float f;
        memcpy(&f, &v, sizeof f);
        r.f = f;
    } else if (t == IR_DT_F16) {
        int e = (int)(u >> 10) & 0x1f;
        double m = (double)(u & 0x3ff);
        r.f = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
        if (u & 0x8000)
            r.f = -r.f;
    } else {
        r.i = (int64_t)u;
        r = sim_fix(t, r);
    }
    return r;
}

typedef struct ElemArgs {
    const IrInstr *ins;
    IrDtype in_t, out_t;
    int64_t rp_exp, rp_mant; /* reduce-precision */
} ElemArgs;

static SimElem
reduce_precision(const ElemArgs *e, SimElem x)
{
    if (!isfinite(x.f) || x.f == 0)
        return x;
    int emax = (1 << (e->rp_exp - 1)) - 1, emin = 1 - emax;
    int ex;
    (void)frexp(x.f, &ex);
    int lead = ex - 1 < emin ? emin : ex - 1;
    int q = lead - (int)e->rp_mant;
    double r = ldexp(nearbyint(ldexp(x.f, -q)), q);
    x.f = fabs(r) >= ldexp(1.0, emax + 1) ? copysign(INFINITY, x.f) : r;
    return x;
}

/* One output element from up to three operand elements; false for an unsupported opcode. */
static bool
elem(const ElemArgs *e, const SimElem *x, SimElem *out)
{
    IrOp op = e->ins->op;
    IrDtype t = e->in_t;
    bool ok = true;
    switch (op) {
    case IR_OP_CONVERT: *out = sim_convert(t, e->out_t, x[0]); return true;
    case IR_OP_BITCAST_CONVERT: *out = from_bits(e->out_t, to_bits(t, x[0])); return true;
    case IR_OP_REDUCE_PRECISION: *out = sim_fix(e->out_t, reduce_precision(e, x[0])); return true;
    case IR_OP_IS_FINITE: out->i = isfinite(x[0].f); return true;
    case IR_OP_COMPARE: out->i = sim_compare(e->ins, t, x[0], x[1], &ok); return ok;
    case IR_OP_SELECT: *out = x[0].i ? x[1] : x[2]; return true;
    case IR_OP_CLAMP: {
        SimElem lo = sim_binop(IR_OP_MAXIMUM, t, x[0], x[1]);
        *out = sim_binop(IR_OP_MINIMUM, t, lo, x[2]);
        return true;
    }
    default: break;
    }
    if (ir_op_arity(op) == 2) {
        *out = sim_fix(e->out_t, sim_binop(op, t, x[0], x[1]));
        return op != IR_OP_COMPLEX && op != IR_OP_MULHI && op != IR_OP_STOCHASTIC_CONVERT &&
               (sim_is_float(t) || op != IR_OP_ATAN2);
    }
    if (sim_is_float(t))
        ok = float_unop(op, x[0].f, &out->f);
    else
        ok = int_unop(op, t, x[0].i, &out->i);
    *out = sim_fix(e->out_t, *out);
    return ok;
}

/* Same width, and no 8-bit float (their encodings are not modelled). */
static bool
bitcast_ok(IrDtype from, IrDtype to)
{
    return ir_dtype_bits(from) == ir_dtype_bits(to) && !sim_is_f8(from) && !sim_is_f8(to);
}

bool
sim_elem_apply(const IrInstr *ins, const IrDtype *in_types, const SimElem *x, SimElem *out)
{
    ElemArgs e = {ins, in_types[ins->op == IR_OP_SELECT ? 1 : 0], ins->shape.dtype, 8, 23};
    if (ins->op == IR_OP_REDUCE_PRECISION) {
        sim_other_int_attr(ins, "exponent_bits", &e.rp_exp);
        sim_other_int_attr(ins, "mantissa_bits", &e.rp_mant);
    }
    if (ins->op == IR_OP_BITCAST_CONVERT && !bitcast_ok(e.in_t, e.out_t))
        return false;
    return elem(&e, x, out);
}

static SlStatus
eval_map(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops, SimValue *r)
{
    const IrComputation *c = ir_instr_called(ins, IR_ATTR_TO_APPLY);
    uint32_t k = ins->n_operands;
    if (!c || k > SIM_MAX_RANK)
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "map without to_apply");
    SimValue *args[SIM_MAX_RANK];
    for (uint32_t j = 0; j < k; j++)
        args[j] = sim_value_new_array(ops[j]->dtype, NULL, 0);
    SlStatus st = SL_OK;
    for (int64_t i = 0; !st && i < r->n; i++) {
        SimValue *y = NULL;
        for (uint32_t j = 0; j < k; j++)
            args[j]->data[0] = ops[j]->data[i];
        st = sim_call(cx, c, dev, args, k, &y);
        if (!st)
            r->data[i] = sim_convert(y->dtype, r->dtype, y->data[0]);
        sim_value_unref(y);
    }
    for (uint32_t j = 0; j < k; j++)
        sim_value_unref(args[j]);
    return st;
}

static SlStatus
eval_nullary(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *r)
{
    if (ins->op == IR_OP_IOTA) {
        int64_t d = 0, idx[SIM_MAX_RANK] = {0};
        ir_instr_int_attr(ins, IR_ATTR_IOTA_DIMENSION, &d);
        if (d < 0 || d >= r->rank)
            return sim_fail(cx, ins, SL_ERR_INVALID, "iota_dimension out of range");
        for (int64_t i = 0; i < r->n; i++, sim_idx_next(idx, r->dims, r->rank))
            r->data[i] = sim_convert(IR_DT_S64, r->dtype, (SimElem){.i = idx[d]});
    } else if (r->n == 1) {
        r->data[0] = sim_convert(IR_DT_S64, r->dtype,
                                 (SimElem){.i = ins->op == IR_OP_PARTITION_ID ? dev : 0});
    }
    return SL_OK;
}

SlStatus
sim_eval_elementwise(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                     SimValue **out)
{
    if (ins->op == IR_OP_COPY && ins->n_operands == 1) { /* values are immutable */
        *out = sim_value_ref(ops[0]);
        return SL_OK;
    }
    if (!sim_is_array_dtype(ins->shape.dtype))
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "element type %s",
                        ir_dtype_name(ins->shape.dtype));
    SimValue *r = sim_value_new(&ins->shape);
    if (!r)
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    SlStatus st = SL_OK;
    uint32_t k = ins->n_operands;
    if (k == 0)
        st = eval_nullary(cx, ins, dev, r);
    else if (ins->op == IR_OP_MAP)
        st = eval_map(cx, ins, dev, ops, r);
    else if (k > 3)
        st = sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "elementwise with %u operands", k);
    for (uint32_t j = 0; !st && k <= 3 && ins->op != IR_OP_MAP && j < k; j++)
        if (ops[j]->dtype == IR_DT_TUPLE || (ops[j]->n != r->n && ops[j]->n != 1) ||
            !sim_is_array_dtype(ops[j]->dtype))
            st = sim_fail(cx, ins, SL_ERR_INVALID, "operand %u does not match the result", j);
    if (!st && k > 0 && k <= 3 && ins->op != IR_OP_MAP) {
        ElemArgs e = {ins, ops[ins->op == IR_OP_SELECT ? 1 : 0]->dtype, r->dtype, 8, 23};
        sim_other_int_attr(ins, "exponent_bits", &e.rp_exp);
        sim_other_int_attr(ins, "mantissa_bits", &e.rp_mant);
        if (ins->op == IR_OP_BITCAST_CONVERT && !bitcast_ok(e.in_t, e.out_t))
            st = sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "bitcast-convert between widths or "
                          "from/to an 8-bit float");
        for (int64_t i = 0; !st && i < r->n; i++) {
            SimElem x[3];
            for (uint32_t j = 0; j < k; j++)
                x[j] = ops[j]->data[ops[j]->n == 1 ? 0 : i];
            if (!elem(&e, x, &r->data[i]))
                st = sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "opcode not supported for %s",
                              ir_dtype_name(e.in_t));
        }
    }
    if (st) {
        sim_value_unref(r);
        return st;
    }
    *out = r;
    return SL_OK;
}
