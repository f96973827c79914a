/* eval_custom.c - custom calls with a single-device meaning, and scan. Owns: which targets the
 * evaluator knows (annotations that pass their operand through; TopK; __op$block_scaled_dot;
 * _SPMDInternalOp_RotateRight; GetRngSeed) and their semantics:
 *   TopK: per row of the last dimension, the k best elements and their s32 indices, best first
 *     (the comparator when given, else greater-than), ties to the lower index;
 *   __op$block_scaled_dot(lhs, rhs, lhs_scale[, rhs_scale]): each quantized operand times its
 *     scale broadcast over blocks of the minor (contracting) dimension (block = K / scale's K),
 *     then a dot contracting the minor dims with dim 0 as batch for rank 3 (XLA's
 *     BlockScalingRewriter documents this equivalence);
 *   RotateRight(dimension=d, amount=a): out[.., i, ..] = in[.., (i - a) mod n, ..];
 *   GetRngSeed: the run's seed from the environment (SimEnv rng_seed), the same on every
 *     device, as one execution's runtime hands it to all of its partitions;
 *   scan: XLA's ScanExpander loop, body(input slices..., carries...) -> (outputs..., carries...);
 *   triangular-solve: substitution in double, per batch.
 * Targets whose meaning depends on the sharding (the other _SPMDInternalOp_*) are refused. */
#include "sim/sim_int.h"

#include <stdlib.h>
#include <string.h>

static bool
target_is(const IrInstr *ins, const char *name)
{
    const IrAttr *a = ir_instr_find_attr(ins, IR_ATTR_CUSTOM_CALL_TARGET);
    if (!a)
        return false;
    SlStr t = a->u.text;
    if (t.len >= 2 && t.ptr[0] == '"') {
        t.ptr++;
        t.len -= 2;
    }
    return sl_str_eq_cstr(t, name);
}

static bool
is_identity_target(const IrInstr *ins)
{
    static const char *const k_ids[] = {
        "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "ShardBarrierFrom",
        "ShardBarrierTo", "X64Combine", "LayoutConstraint", "MoveToHost", "MoveToDevice",
        "PinToDevice", "PinToDeviceSram", "annotate_device_placement"};
    for (size_t i = 0; i < SL_COUNTOF(k_ids); i++)
        if (target_is(ins, k_ids[i]))
            return true;
    return false;
}

/* `key=INT` inside backend_config ("dimension=0,amount=2"); false when absent. */
static bool
config_int(const IrInstr *ins, const char *key, int64_t *out)
{
    const IrAttr *a = ir_instr_find_attr(ins, IR_ATTR_BACKEND_CONFIG);
    if (!a)
        return false;
    size_t kl = strlen(key);
    const char *p = a->u.text.ptr, *end = p + a->u.text.len;
    for (; p + kl < end; p++) {
        bool at_start = p == a->u.text.ptr || p[-1] == ',' || p[-1] == '"' || p[-1] == ' ';
        if (at_start && !memcmp(p, key, kl) && p[kl] == '=') {
            char buf[32];
            size_t n = 0;
            for (const char *q = p + kl + 1; q < end && n + 1 < sizeof buf &&
                                             ((*q >= '0' && *q <= '9') || *q == '-'); q++)
                buf[n++] = *q;
            buf[n] = 0;
            if (!n)
                return false;
            *out = strtoll(buf, NULL, 10);
            return true;
        }
    }
    return false;
}

/* ---- TopK ------------------------------------------------------------------------------- */

typedef struct TopK {
    SimCtx *cx;
    const IrInstr *ins;
    const IrComputation *cmp; /* NULL: greater-than */
    const IrInstr *fast;      /* comparator root compare(p0, p1) */
    int64_t dev;
    const SimValue *v;
} TopK;

/* Whether element j (row offset base) goes before element i. */
static SlStatus
topk_before(TopK *t, int64_t base, int64_t j, int64_t i, bool *out)
{
    SimElem a = t->v->data[base + j], b = t->v->data[base + i];
    if (!t->cmp) {
        *out = sim_is_float(t->v->dtype) ? a.f > b.f : a.i > b.i;
        return SL_OK;
    }
    if (t->fast) {
        bool ok = true;
        *out = sim_compare(t->fast, t->v->dtype, a, b, &ok);
        if (ok)
            return SL_OK;
    }
    SimElem in[4] = {a, b, {.i = j}, {.i = i}}, r;
    IrDtype ty[4] = {t->v->dtype, t->v->dtype, IR_DT_S32, IR_DT_S32};
    uint32_t n_params = ir_computation_param_count(t->cmp);
    SlStatus st = sim_call_scalars(t->cx, t->ins, t->cmp, t->dev, in, ty, n_params == 2 ? 2 : 4,
                                   &r, 1);
    *out = !st && r.i != 0;
    return st;
}

/* The k best of one row into best[0..k), best first; an element goes after every element
 * already kept that it does not beat, so equal values keep index order. */
static SlStatus
topk_row(TopK *t, int64_t base, int64_t n, int64_t k, int64_t *best)
{
    int64_t have = 0;
    SlStatus st = SL_OK;
    for (int64_t j = 0; !st && j < n; j++) {
        bool beats = have < k;
        if (!beats)
            st = topk_before(t, base, j, best[have - 1], &beats);
        if (st || !beats)
            continue;
        int64_t lo = 0, hi = have < k ? have : k - 1; /* first position j beats */
        while (!st && lo < hi) {
            int64_t mid = (lo + hi) / 2;
            bool b = false;
            st = topk_before(t, base, j, best[mid], &b);
            if (b)
                hi = mid;
            else
                lo = mid + 1;
        }
        int64_t last = have < k ? have : k - 1;
        memmove(best + lo + 1, best + lo, (size_t)(last - lo) * sizeof *best);
        best[lo] = j;
        if (have < k)
            have++;
    }
    return st;
}

static void
topk_fast(TopK *t)
{
    t->fast = NULL;
    if (!t->cmp)
        return;
    const IrInstr *r = t->cmp->root ? t->cmp->root : t->cmp->instrs[t->cmp->n_instrs - 1];
    if (r->op == IR_OP_COMPARE && r->operands[0]->op == IR_OP_PARAMETER &&
        r->operands[1]->op == IR_OP_PARAMETER && r->operands[0]->parameter_number == 0 &&
        r->operands[1]->parameter_number == 1)
        t->fast = r;
}

static SlStatus
eval_topk(SimCtx *cx, const IrInstr *ins, int64_t dev, const SimValue *v, SimValue **out)
{
    const IrShape *s = &ins->shape;
    if (s->dtype != IR_DT_TUPLE || s->n_elems != 2 || v->rank < 1 ||
        s->elems[0].rank != v->rank)
        return sim_fail(cx, ins, SL_ERR_INVALID, "TopK takes [..., n] and returns (values, "
                        "indices) of [..., k]");
    const IrAttr *cc = ir_instr_find_attr(ins, IR_ATTR_CALLED_COMPUTATIONS);
    TopK t = {cx, ins, cc && cc->u.comps.n ? cc->u.comps.v[0] : NULL, NULL, dev, v};
    topk_fast(&t);
    int64_t n = v->dims[v->rank - 1], k = s->elems[0].dims[v->rank - 1];
    int64_t rows = n ? v->n / n : 0;
    SimValue *vals = sim_value_new(&s->elems[0]), *idx = sim_value_new(&s->elems[1]);
    int64_t *best = calloc((size_t)k + 1, sizeof *best);
    SlStatus st = vals && idx && best ? SL_OK : sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    if (!st && (k > n || vals->n != rows * k || idx->n != rows * k))
        st = sim_fail(cx, ins, SL_ERR_INVALID, "TopK result shape does not fit the operand");
    for (int64_t r = 0; !st && r < rows; r++) {
        st = topk_row(&t, r * n, n, k, best);
        for (int64_t j = 0; !st && j < k; j++) {
            vals->data[r * k + j] = v->data[r * n + best[j]];
            idx->data[r * k + j] = sim_fix(idx->dtype, (SimElem){.i = best[j]});
        }
    }
    SimValue *el[2] = {vals, idx};
    if (!st && !(*out = sim_value_new_tuple(el, 2)))
        st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    sim_value_unref(vals);
    sim_value_unref(idx);
    free(best);
    return st;
}

/* ---- block-scaled dot ----------------------------------------------------------------- */

/* x times its scale, broadcast over blocks of the minor dimension, as type `t`. */
static SlStatus
dequantize(SimCtx *cx, const IrInstr *ins, const SimValue *x, const SimValue *sc, IrDtype t,
           SimValue **out)
{
    bool fits = x->rank >= 1 && sc->rank == x->rank && sim_is_float(x->dtype) &&
                sim_is_float(sc->dtype);
    for (uint32_t d = 0; fits && d + 1 < x->rank; d++)
        fits = x->dims[d] == sc->dims[d];
    int64_t k = fits ? x->dims[x->rank - 1] : 0, ks = fits ? sc->dims[x->rank - 1] : 0;
    if (!fits || ks < 1 || k % ks)
        return sim_fail(cx, ins, SL_ERR_INVALID, "a scale's shape does not fit its operand "
                        "(same dims, the minor one dividing the operand's)");
    int64_t bs = k / ks;
    SimValue *r = sim_value_new_array(t, x->dims, x->rank);
    if (!r)
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < x->n; i++)
        r->data[i].f = sim_round(t, x->data[i].f * sc->data[(i / k) * ks + (i % k) / bs].f);
    *out = r;
    return SL_OK;
}

static SlStatus
eval_block_scaled_dot(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out)
{
    IrDtype t = ins->shape.dtype;
    if ((ins->n_operands != 3 && ins->n_operands != 4) || !sim_is_float(t) ||
        ops[0]->rank != ops[1]->rank || ops[0]->rank < 2 || ops[0]->rank > 3)
        return sim_fail(cx, ins, SL_ERR_INVALID, "block_scaled_dot takes (lhs, rhs, lhs_scale"
                        "[, rhs_scale]) of rank 2 or 3 and a float result");
    SimValue *l = NULL, *r = NULL;
    SlStatus st = dequantize(cx, ins, ops[0], ops[2], t, &l);
    if (!st && ins->n_operands == 4)
        st = dequantize(cx, ins, ops[1], ops[3], t, &r);
    else if (!st)
        r = sim_value_ref(ops[1]);
    int64_t c = ops[0]->rank - 1, b = 0;
    SimDotNums dn = {&b, &c, &b, &c, ops[0]->rank == 3, 1, ops[0]->rank == 3, 1};
    if (!st)
        st = sim_dot(cx, ins, l, r, &dn, &ins->shape, out);
    sim_value_unref(l);
    sim_value_unref(r);
    return st;
}

/* ---- rotate ------------------------------------------------------------------------------ */

static SlStatus
eval_rotate_right(SimCtx *cx, const IrInstr *ins, const SimValue *a, SimValue **out)
{
    int64_t dim = -1, amount = -1;
    if (!config_int(ins, "dimension", &dim) || !config_int(ins, "amount", &amount) ||
        dim < 0 || dim >= a->rank || amount < 0 || a->dtype == IR_DT_TUPLE)
        return sim_fail(cx, ins, SL_ERR_INVALID, "RotateRight needs dimension= and amount=");
    SimValue *r = sim_value_like(a);
    if (!r)
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    int64_t n = a->dims[dim], inner = 1;
    for (uint32_t d = (uint32_t)dim + 1; d < a->rank; d++)
        inner *= a->dims[d];
    int64_t sh = n ? amount % n : 0;
    for (int64_t i = 0; i < a->n; i++) {
        int64_t pos = (i / inner) % n, src = (pos - sh + n) % n;
        r->data[i] = a->data[i + (src - pos) * inner];
    }
    *out = r;
    return SL_OK;
}

SlStatus
sim_eval_custom_call(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                     SimValue **out)
{
    if (is_identity_target(ins) && ins->n_operands == 1) {
        if (ops[0]->dtype == IR_DT_TUPLE || ops[0]->n == ir_shape_elem_count(&ins->shape)) {
            *out = sim_value_ref(ops[0]);
            return SL_OK;
        }
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED,
                        "custom-call changing the shape outside a partitioned module (manual "
                        "sharding regions are not simulated)");
    }
    if (target_is(ins, "TopK") && ins->n_operands == 1)
        return eval_topk(cx, ins, dev, ops[0], out);
    if (target_is(ins, "GetRngSeed") && ins->n_operands == 0) {
        if (!cx->env || !cx->env->rng_seed)
            return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "no runtime to take a seed from");
        if (ins->shape.dtype == IR_DT_TUPLE || !(*out = sim_value_new(&ins->shape)))
            return sim_fail(cx, ins, SL_ERR_INVALID, "GetRngSeed returns an array");
        for (int64_t i = 0; i < (*out)->n; i++)
            (*out)->data[i] = sim_fix((*out)->dtype, (SimElem){.i = (int64_t)*cx->env->rng_seed});
        return SL_OK;
    }
    if (target_is(ins, "__op$block_scaled_dot"))
        return eval_block_scaled_dot(cx, ins, ops, out);
    if (target_is(ins, "_SPMDInternalOp_RotateRight") && ins->n_operands == 1)
        return eval_rotate_right(cx, ins, ops[0], out);
    const IrAttr *a = ir_instr_find_attr(ins, IR_ATTR_CUSTOM_CALL_TARGET);
    SlStr t = a ? a->u.text : sl_str("?");
    if (t.len > 17 && !memcmp(t.ptr, "\"_SPMDInternalOp_", 17))
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "custom-call target %.*s not simulated: "
                        "its result depends on the sharding, it has no single-device meaning",
                        SL_STR_ARG(t));
    return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "custom-call target %.*s not simulated",
                    SL_STR_ARG(t));
}

/* ---- scan ------------------------------------------------------------------------------- */

typedef struct Scan {
    uint32_t n_in, n_carry, n_out;
    int64_t dim, len;
    bool reverse;
} Scan;

/* Moves slice `at` of dimension `dim` between a full array and a slice (rank - 1) array. */
static void
slice_copy(SimValue *full, SimValue *part, int64_t dim, int64_t at, bool to_part)
{
    int64_t len = full->dims[dim], inner = 1;
    for (uint32_t d = (uint32_t)dim + 1; d < full->rank; d++)
        inner *= full->dims[d];
    for (int64_t i = 0; i < part->n; i++) {
        int64_t o = i / inner, in = i % inner, f = (o * len + at) * inner + in;
        if (to_part)
            part->data[i] = full->data[f];
        else
            full->data[f] = sim_convert(part->dtype, full->dtype, part->data[i]);
    }
}

static SimValue *
slice_value(const SimValue *full, int64_t dim)
{
    int64_t dims[SIM_MAX_RANK];
    uint32_t r = 0;
    for (uint32_t d = 0; d < full->rank; d++)
        if (d != dim)
            dims[r++] = full->dims[d];
    return sim_value_new_array(full->dtype, dims, r);
}

static bool
other_attr_is(const IrInstr *ins, const char *key, const char *text)
{
    const IrAttr *a = ir_instr_find_other(ins, key);
    return a && sl_str_eq_cstr(a->u.text, text);
}

/* One step: body(slices of the inputs at `at`, carries) -> outputs written at `at`, carries. */
static SlStatus
scan_step(SimCtx *cx, const IrInstr *ins, const IrComputation *body, int64_t dev,
          const Scan *s, int64_t at, SimValue *const *ops, SimValue **args, SimValue **res)
{
    for (uint32_t j = 0; j < s->n_in; j++)
        slice_copy(ops[j], args[j], s->dim, at, true);
    SimValue *r = NULL;
    SlStatus st = sim_call(cx, body, dev, args, s->n_in + s->n_carry, &r);
    uint32_t n = !st && r->dtype == IR_DT_TUPLE ? r->n_elems : 1;
    if (!st && n != s->n_out + s->n_carry)
        st = sim_fail(cx, ins, SL_ERR_INVALID, "body returns %u values, %u expected", n,
                      s->n_out + s->n_carry);
    for (uint32_t j = 0; !st && j < n; j++) {
        SimValue *e = r->dtype == IR_DT_TUPLE ? r->elems[j] : r;
        if (j < s->n_out) {
            if (e->dtype == IR_DT_TUPLE || e->n * s->len != res[j]->n)
                st = sim_fail(cx, ins, SL_ERR_INVALID, "body output %u does not fit", j);
            else
                slice_copy(res[j], e, s->dim, at, false);
            continue;
        }
        uint32_t c = s->n_in + (j - s->n_out);
        sim_value_unref(args[c]);
        args[c] = sim_value_ref(e);
    }
    sim_value_unref(r);
    return st;
}

static SlStatus
scan_setup(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, Scan *s)
{
    const int64_t *dims;
    int64_t nc = 0;
    ir_instr_int_attr(ins, IR_ATTR_NUM_CARRIES, &nc);
    uint32_t n_res = ins->shape.dtype == IR_DT_TUPLE ? ins->shape.n_elems : 1;
    if (ir_instr_ints_attr(ins, IR_ATTR_DIMENSIONS, &dims) != 1 || nc < 0 ||
        nc >= ins->n_operands || (uint32_t)nc > n_res)
        return sim_fail(cx, ins, SL_ERR_INVALID, "scan needs one dimension and inputs");
    s->n_carry = (uint32_t)nc;
    s->n_in = ins->n_operands - s->n_carry;
    s->n_out = n_res - s->n_carry;
    s->dim = dims[0];
    const IrAttr *rev = ir_instr_find_attr(ins, IR_ATTR_IS_REVERSE);
    s->reverse = rev && rev->u.b;
    for (uint32_t j = 0; j < s->n_in; j++)
        if (ops[j]->dtype == IR_DT_TUPLE || s->dim < 0 || s->dim >= ops[j]->rank ||
            ops[j]->dims[s->dim] != ops[0]->dims[s->dim])
            return sim_fail(cx, ins, SL_ERR_INVALID, "scan input %u does not fit", j);
    s->len = ops[0]->dims[s->dim];
    return SL_OK;
}

SlStatus
sim_eval_scan(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops, SimValue **out)
{
    const IrComputation *body = ir_instr_called(ins, IR_ATTR_TO_APPLY);
    Scan s = {0};
    SlStatus st = body ? scan_setup(cx, ins, ops, &s)
                       : sim_fail(cx, ins, SL_ERR_INVALID, "scan without to_apply");
    if (st)
        return st;
    uint32_t n_res = s.n_out + s.n_carry;
    SimValue **args = calloc(s.n_in + s.n_carry + 1, sizeof *args);
    SimValue **res = calloc(n_res + 1, sizeof *res);
    if (!args || !res)
        st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; !st && j < s.n_in + s.n_carry; j++)
        if (!(args[j] = j < s.n_in ? slice_value(ops[j], s.dim) : sim_value_ref(ops[j])))
            st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; !st && j < s.n_out; j++)
        if (!(res[j] = sim_value_new(ins->shape.dtype == IR_DT_TUPLE ? &ins->shape.elems[j]
                                                                     : &ins->shape)))
            st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < s.len; i++)
        st = scan_step(cx, ins, body, dev, &s, s.reverse ? s.len - 1 - i : i, ops, args, res);
    for (uint32_t j = 0; !st && j < s.n_carry; j++)
        res[s.n_out + j] = sim_value_ref(args[s.n_in + j]);
    if (!st)
        *out = ins->shape.dtype == IR_DT_TUPLE ? sim_value_new_tuple(res, n_res)
                                               : sim_value_ref(res[0]);
    if (!st && !*out)
        st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; args && j < s.n_in + s.n_carry; j++)
        sim_value_unref(args[j]);
    for (uint32_t j = 0; res && j < n_res; j++)
        sim_value_unref(res[j]);
    free(args);
    free(res);
    return st;
}

/* ---- triangular-solve ------------------------------------------------------------------- */

/* Solves one system in place: rows of x (n_rhs right-hand sides of length m, stride `st` between
 * elements and `rs` between systems) against the m x m matrix t, lower triangular when `lower`. */
static void
tri_solve(const double *t, int64_t m, bool lower, double *x, int64_t n_rhs, int64_t st,
          int64_t rs)
{
    for (int64_t r = 0; r < n_rhs; r++) {
        double *v = x + r * rs;
        for (int64_t s = 0; s < m; s++) {
            int64_t i = lower ? s : m - 1 - s;
            double acc = v[i * st];
            for (int64_t s2 = 0; s2 < s; s2++) {
                int64_t k = lower ? s2 : m - 1 - s2;
                acc -= t[i * m + k] * v[k * st];
            }
            v[i * st] = acc / t[i * m + i];
        }
    }
}

/* op(a) x = b (left_side) or x op(a) = b, with a's other triangle ignored and a unit diagonal
 * when asked; op is the transpose for TRANSPOSE and ADJOINT (real types only). Computed in
 * double and rounded once. */
SlStatus
sim_eval_triangular_solve(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out)
{
    const SimValue *a = ops[0], *b = ops[1];
    bool left = other_attr_is(ins, "left_side", "true");
    bool lower = other_attr_is(ins, "lower", "true");
    bool unit = other_attr_is(ins, "unit_diagonal", "true");
    bool trans = other_attr_is(ins, "transpose_a", "TRANSPOSE") ||
                 other_attr_is(ins, "transpose_a", "ADJOINT");
    uint32_t r = b->rank;
    int64_t m = r >= 2 ? (left ? b->dims[r - 2] : b->dims[r - 1]) : 0;
    int64_t rows = r >= 2 ? b->dims[r - 2] : 0, cols = r >= 2 ? b->dims[r - 1] : 0;
    int64_t batch = rows > 0 && cols > 0 ? b->n / (rows * cols) : 0;
    if (r < 2 || a->rank != r || a->dims[r - 1] != m || a->dims[r - 2] != m || m < 1 ||
        !sim_is_float(b->dtype) || a->n != batch * m * m)
        return sim_fail(cx, ins, SL_ERR_INVALID, "triangular-solve shapes do not fit");
    double *t = malloc((size_t)(m * m + 1) * sizeof *t);
    double *x = malloc((size_t)(b->n + 1) * sizeof *x);
    SimValue *res = sim_value_like(b);
    if (!t || !x || !res) {
        free(t);
        free(x);
        sim_value_unref(res);
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < b->n; i++)
        x[i] = b->data[i].f;
    for (int64_t bi = 0; bi < batch; bi++) {
        const SimElem *ab = a->data + bi * m * m;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < m; j++) { /* t = op(tri(a)) */
                int64_t si = trans ? j : i, sj = trans ? i : j;
                bool keep = lower ? sj <= si : sj >= si;
                t[i * m + j] = si == sj && unit ? 1.0 : keep ? ab[si * m + sj].f : 0.0;
            }
        double *xb = x + bi * rows * cols;
        bool eff_lower = lower != trans;
        if (left) /* columns of b are the systems */
            tri_solve(t, m, eff_lower, xb, cols, cols, 1);
        else { /* x t = b: rows of b against t transposed */
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < i; j++) {
                    double s = t[i * m + j];
                    t[i * m + j] = t[j * m + i];
                    t[j * m + i] = s;
                }
            tri_solve(t, m, !eff_lower, xb, rows, 1, cols);
        }
    }
    for (int64_t i = 0; i < b->n; i++)
        res->data[i].f = sim_round(b->dtype, x[i]);
    free(t);
    free(x);
    *out = res;
    return SL_OK;
}
