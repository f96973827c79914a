/* eval_dot.c - contractions: dot with general dimension numbers, and convolution (window,
 * padding, lhs/rhs dilation, reversal, feature and batch groups, dim_labels). Owns: the
 * accumulation rule, which is one sum in double (or wrapping int64) per output element, rounded
 * once to the result type. Dot packs both operands into [batch, free, contracting] order first
 * so the inner loop is contiguous; the cost is the product of the sizes, nothing more. Also
 * ragged-dot, as a dot over operands expanded by a zero-masked group dim. */
#include "sim/sim_int.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

/* Copies `a` transposed by `perm` (output dim i = operand dim perm[i]) into `dst`, as doubles
 * (as_float) or int64. */
static void
pack(const SimValue *a, const int64_t *perm, bool as_float, void *dst)
{
    int64_t as[SIM_MAX_RANK], map[SIM_MAX_RANK], pd[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    sim_strides(a->dims, a->rank, as);
    for (uint32_t i = 0; i < a->rank; i++) {
        map[i] = as[perm[i]];
        pd[i] = a->dims[perm[i]];
    }
    bool src_float = sim_is_float(a->dtype);
    for (int64_t i = 0; i < a->n; i++, sim_idx_next(idx, pd, a->rank)) {
        int64_t off = 0;
        for (uint32_t d = 0; d < a->rank; d++)
            off += idx[d] * map[d];
        SimElem e = a->data[off];
        if (as_float)
            ((double *)dst)[i] = src_float ? e.f : a->dtype == IR_DT_U64 ? (double)(uint64_t)e.i
                                                                           : (double)e.i;
        else
            ((int64_t *)dst)[i] = src_float ? (int64_t)e.f : e.i;
    }
}

typedef struct DotDims {
    int64_t perm[SIM_MAX_RANK]; /* batch..., free..., contracting... */
    int64_t b, f, k;            /* products */
} DotDims;

static bool
dot_dims(const SimValue *a, const int64_t *bd, uint32_t nb, const int64_t *cd, uint32_t nc,
         DotDims *o)
{
    bool used[SIM_MAX_RANK] = {false};
    uint32_t p = 0;
    o->b = o->f = o->k = 1;
    for (uint32_t i = 0; i < nb; i++) {
        if (bd[i] < 0 || bd[i] >= a->rank || used[bd[i]])
            return false;
        used[bd[i]] = true;
        o->perm[p++] = bd[i];
        o->b *= a->dims[bd[i]];
    }
    uint32_t free_at = p;
    p += a->rank - nb - nc;
    for (uint32_t i = 0; i < nc; i++) {
        if (cd[i] < 0 || cd[i] >= a->rank || used[cd[i]])
            return false;
        used[cd[i]] = true;
        o->perm[p++] = cd[i];
        o->k *= a->dims[cd[i]];
    }
    for (uint32_t d = 0; d < a->rank; d++) {
        if (!used[d]) {
            o->perm[free_at++] = d;
            o->f *= a->dims[d];
        }
    }
    return p == a->rank;
}

/* sum x[k] * y[k] in four interleaved partial sums (independent chains the CPU overlaps) */
static inline double
dot_f64(const double *x, const double *y, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
        s0 += x[k] * y[k];
        s1 += x[k + 1] * y[k + 1];
        s2 += x[k + 2] * y[k + 2];
        s3 += x[k + 3] * y[k + 3];
    }
    for (; k < n; k++)
        s0 += x[k] * y[k];
    return (s0 + s1) + (s2 + s3);
}

/* Four lhs rows against one rhs row at once: each rhs element is loaded once for four sums. */
static inline void
dot4_f64(const double *x, int64_t xs, const double *y, int64_t n, double *out)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const double *x0 = x, *x1 = x + xs, *x2 = x + 2 * xs, *x3 = x + 3 * xs;
    for (int64_t k = 0; k < n; k++) {
        double v = y[k];
        s0 += x0[k] * v;
        s1 += x1[k] * v;
        s2 += x2[k] * v;
        s3 += x3[k] * v;
    }
    out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

static void
dot_loop_f64(const DotDims *l, const DotDims *r, const double *lp, const double *rp,
             SimValue *out)
{
    int64_t K = l->k, M = l->f, N = r->f;
    for (int64_t b = 0; b < l->b; b++) {
        const double *lb = lp + b * M * K, *rb = rp + b * N * K;
        SimElem *ob = out->data + b * M * N;
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) {
            for (int64_t n = 0; n < N; n++) {
                double s[4];
                dot4_f64(lb + m * K, K, rb + n * K, K, s);
                for (int q = 0; q < 4; q++)
                    ob[(m + q) * N + n] = sim_fix(out->dtype, (SimElem){.f = s[q]});
            }
        }
        for (; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                ob[m * N + n] = sim_fix(out->dtype, (SimElem){.f = dot_f64(lb + m * K,
                                                                           rb + n * K, K)});
    }
}

static void
dot_loop(const DotDims *l, const DotDims *r, const void *lp, const void *rp, bool as_float,
         SimValue *out)
{
    if (as_float) {
        dot_loop_f64(l, r, lp, rp, out);
        return;
    }
    int64_t at = 0;
    for (int64_t b = 0; b < l->b; b++) {
        for (int64_t m = 0; m < l->f; m++) {
            for (int64_t n = 0; n < r->f; n++, at++) {
                int64_t lo = (b * l->f + m) * l->k, ro = (b * r->f + n) * r->k;
                const int64_t *x = (const int64_t *)lp + lo, *y = (const int64_t *)rp + ro;
                uint64_t s = 0;
                for (int64_t k = 0; k < l->k; k++)
                    s += (uint64_t)x[k] * (uint64_t)y[k];
                out->data[at].i = (int64_t)s;
                out->data[at] = sim_fix(out->dtype, out->data[at]);
            }
        }
    }
}

SlStatus
sim_dot(SimCtx *cx, const IrInstr *ins, const SimValue *a, const SimValue *b,
        const SimDotNums *dn, const IrShape *shape, SimValue **out)
{
    DotDims l, r;
    if (a->dtype == IR_DT_TUPLE || b->dtype == IR_DT_TUPLE || dn->nlb != dn->nrb ||
        dn->nlc != dn->nrc || !dot_dims(a, dn->lb, dn->nlb, dn->lc, dn->nlc, &l) ||
        !dot_dims(b, dn->rb, dn->nrb, dn->rc, dn->nrc, &r) || l.b != r.b || l.k != r.k)
        return sim_fail(cx, ins, SL_ERR_INVALID, "dot dimension numbers do not fit the operands");
    if (!sim_is_array_dtype(shape->dtype) || shape->dtype == IR_DT_TUPLE)
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "dot result type");
    SimValue *res = sim_value_new(shape);
    if (!res)
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    if (res->n != l.b * l.f * r.f) {
        sim_value_unref(res);
        return sim_fail(cx, ins, SL_ERR_INVALID, "result shape does not match the dot");
    }
    bool as_float = sim_is_float(res->dtype);
    size_t w = as_float ? sizeof(double) : sizeof(int64_t);
    void *lp = malloc((size_t)(a->n + 1) * w), *rp = malloc((size_t)(b->n + 1) * w);
    if (!lp || !rp) {
        free(lp);
        free(rp);
        sim_value_unref(res);
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    }
    pack(a, l.perm, as_float, lp);
    pack(b, r.perm, as_float, rp);
    dot_loop(&l, &r, lp, rp, as_float, res);
    free(lp);
    free(rp);
    *out = res;
    return SL_OK;
}

SlStatus
sim_eval_dot(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out)
{
    SimDotNums dn;
    dn.nlb = ir_instr_ints_attr(ins, IR_ATTR_LHS_BATCH_DIMS, &dn.lb);
    dn.nlc = ir_instr_ints_attr(ins, IR_ATTR_LHS_CONTRACTING_DIMS, &dn.lc);
    dn.nrb = ir_instr_ints_attr(ins, IR_ATTR_RHS_BATCH_DIMS, &dn.rb);
    dn.nrc = ir_instr_ints_attr(ins, IR_ATTR_RHS_CONTRACTING_DIMS, &dn.rc);
    return sim_dot(cx, ins, ops[0], ops[1], &dn, &ins->shape, out);
}

/* ---- convolution ----------------------------------------------------------------------- */

typedef struct ConvDims {
    int64_t lb, lf, rI, rO, ob, of; /* batch/feature positions in lhs, rhs, output */
    int64_t ls[SIM_MAX_RANK], rs[SIM_MAX_RANK], os[SIM_MAX_RANK]; /* spatial positions */
    uint32_t nsp;
} ConvDims;

/* dim_labels := lhs '_' rhs '->' out, e.g. b01f_01io->b01f */
static bool
parse_labels(SlStr t, ConvDims *c)
{
    const char *p = t.ptr, *end = t.ptr + t.len;
    int64_t *slots[3] = {c->ls, c->rs, c->os};
    uint32_t nsp[3] = {0, 0, 0};
    memset(c, -1, sizeof *c);
    for (int part = 0; part < 3; part++) {
        for (int64_t pos = 0; p < end && *p != '_' && *p != '-'; p++, pos++) {
            char ch = *p;
            if (ch >= '0' && ch <= '9') {
                if (ch - '0' >= SIM_MAX_RANK)
                    return false;
                slots[part][ch - '0'] = pos;
                nsp[part]++;
            } else if (ch == 'b' && part != 1) {
                *(part == 0 ? &c->lb : &c->ob) = pos;
            } else if (ch == 'f' && part != 1) {
                *(part == 0 ? &c->lf : &c->of) = pos;
            } else if (ch == 'i' && part == 1) {
                c->rI = pos;
            } else if (ch == 'o' && part == 1) {
                c->rO = pos;
            } else {
                return false;
            }
        }
        p += p < end && *p == '-' ? 2 : 1; /* "_" or "->" */
    }
    c->nsp = nsp[0];
    return nsp[0] == nsp[1] && nsp[1] == nsp[2] && c->lb >= 0 && c->lf >= 0 && c->rI >= 0 &&
           c->rO >= 0 && c->ob >= 0 && c->of >= 0;
}

typedef struct Conv {
    const SimValue *a, *k;
    SimValue *o;
    ConvDims d;
    const IrWindowDim *win;
    int64_t g, bg; /* feature_group_count, batch_group_count */
    double *lp, *kp; /* lhs packed as [b, spatial..., f], kernel as [o, spatial..., i] */
    int64_t lps[SIM_MAX_RANK], kps[SIM_MAX_RANK]; /* their strides */
} Conv;

/* Sum for one output element at index `oi`: a contiguous dot over the input features of its
 * group for each window position inside the (dilated, padded) input. */
static double
conv_point(const Conv *c, const int64_t *oi)
{
    const ConvDims *d = &c->d;
    int64_t of = oi[d->of], n_of = c->k->dims[d->rO], ifg = c->k->dims[d->rI];
    int64_t fgrp = of / (n_of / c->g), bgrp = of / (n_of / c->bg);
    int64_t in_b = bgrp * (c->a->dims[d->lb] / c->bg) + oi[d->ob];
    int64_t wsz[SIM_MAX_RANK], w[SIM_MAX_RANK] = {0}, nw = 1;
    for (uint32_t s = 0; s < d->nsp; s++) {
        wsz[s] = c->k->dims[d->rs[s]];
        nw *= wsz[s];
    }
    double sum = 0;
    for (int64_t p = 0; p < nw; p++, sim_idx_next(w, wsz, d->nsp)) {
        int64_t lo = in_b * c->lps[0] + fgrp * ifg, ko = of * c->kps[0];
        bool inside = true;
        for (uint32_t s = 0; s < d->nsp && inside; s++) {
            const IrWindowDim *wd = &c->win[s];
            int64_t pos = oi[d->os[s]] * wd->stride + w[s] * wd->rhs_dilate - wd->pad_lo;
            int64_t q = pos / wd->lhs_dilate;
            inside = pos >= 0 && pos % wd->lhs_dilate == 0 && q < c->a->dims[d->ls[s]];
            lo += q * c->lps[s + 1];
            ko += (wd->reversal ? wsz[s] - 1 - w[s] : w[s]) * c->kps[s + 1];
        }
        if (!inside)
            continue;
        sum += dot_f64(c->lp + lo, c->kp + ko, ifg);
    }
    return sum;
}

/* Packs both operands (see Conv) and evaluates every output element. */
static SlStatus
conv_run(SimCtx *cx, const IrInstr *ins, Conv *c)
{
    int64_t lperm[SIM_MAX_RANK], kperm[SIM_MAX_RANK], ld[SIM_MAX_RANK], kd[SIM_MAX_RANK];
    uint32_t r = c->d.nsp + 2;
    lperm[0] = c->d.lb, lperm[r - 1] = c->d.lf, kperm[0] = c->d.rO, kperm[r - 1] = c->d.rI;
    for (uint32_t s = 0; s < c->d.nsp; s++)
        lperm[s + 1] = c->d.ls[s], kperm[s + 1] = c->d.rs[s];
    for (uint32_t i = 0; i < r; i++)
        ld[i] = c->a->dims[lperm[i]], kd[i] = c->k->dims[kperm[i]];
    sim_strides(ld, r, c->lps);
    sim_strides(kd, r, c->kps);
    c->lp = malloc((size_t)(c->a->n + 1) * sizeof *c->lp);
    c->kp = malloc((size_t)(c->k->n + 1) * sizeof *c->kp);
    if (!c->lp || !c->kp) {
        free(c->lp);
        free(c->kp);
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    }
    pack(c->a, lperm, true, c->lp);
    pack(c->k, kperm, true, c->kp);
    /* as XLA's evaluator: operands of another element type are converted to the result's
     * first (floats into an integer result are truncated element by element) */
    char rk = ir_dtype_kind(c->o->dtype);
    if (rk == 'S' || rk == 'U' || rk == 'P') {
        for (int64_t i = 0; i < c->a->n; i++)
            c->lp[i] = rk == 'P' ? (c->lp[i] != 0) : trunc(c->lp[i]);
        for (int64_t i = 0; i < c->k->n; i++)
            c->kp[i] = rk == 'P' ? (c->kp[i] != 0) : trunc(c->kp[i]);
    }
    int64_t oi[SIM_MAX_RANK] = {0};
    for (int64_t i = 0; i < c->o->n; i++, sim_idx_next(oi, c->o->dims, c->o->rank))
        sim_value_set_f64(c->o, i, conv_point(c, oi));
    free(c->lp);
    free(c->kp);
    return SL_OK;
}

SlStatus
sim_eval_conv(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out)
{
    Conv c = {.a = ops[0], .k = ops[1], .g = 1, .bg = 1};
    const IrAttr *lab = ir_instr_find_attr(ins, IR_ATTR_DIM_LABELS);
    const IrAttr *win = ir_instr_find_attr(ins, IR_ATTR_WINDOW);
    ir_instr_int_attr(ins, IR_ATTR_FEATURE_GROUP_COUNT, &c.g);
    ir_instr_int_attr(ins, IR_ATTR_BATCH_GROUP_COUNT, &c.bg);
    static const IrWindowDim k_unit = {1, 1, 0, 0, 1, 1, false};
    IrWindowDim units[SIM_MAX_RANK];
    if (!lab || !parse_labels(lab->u.text, &c.d) || c.a->rank != c.d.nsp + 2 ||
        c.k->rank != c.d.nsp + 2 || ins->shape.rank != c.d.nsp + 2)
        return sim_fail(cx, ins, SL_ERR_INVALID, "dim_labels do not fit the operands");
    for (uint32_t s = 0; s < c.d.nsp; s++)
        units[s] = k_unit;
    c.win = win ? win->u.window.v : units;
    if ((win && win->u.window.n != c.d.nsp) || c.g < 1 || c.bg < 1 ||
        c.k->dims[c.d.rO] % c.g || c.k->dims[c.d.rO] % c.bg || c.a->dims[c.d.lb] % c.bg ||
        c.k->dims[c.d.rI] * c.g != c.a->dims[c.d.lf])
        return sim_fail(cx, ins, SL_ERR_INVALID, "window or group counts do not fit");
    if (!sim_is_array_dtype(ins->shape.dtype))
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "convolution result type");
    for (uint32_t s = 0; s < c.d.nsp; s++)
        if (c.win[s].stride < 1 || c.win[s].lhs_dilate < 1 || c.win[s].rhs_dilate < 1)
            return sim_fail(cx, ins, SL_ERR_INVALID, "bad window in spatial dim %u", s);
    if (!(c.o = sim_value_new(&ins->shape)))
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    SlStatus st = conv_run(cx, ins, &c);
    if (st) {
        sim_value_unref(c.o);
        return st;
    }
    *out = c.o;
    return SL_OK;
}

/* ---- ragged-dot ------------------------------------------------------------------------
 * Three modes by where the lhs ragged dim sits. group_sizes is [prefix..., G]: its prefix dims
 * index the operands' leading dims positionally, and for each prefix index the G sizes cut the
 * ragged dim into consecutive groups from 0 (rows past their sum belong to no group).
 *   non-contracting: row r of the ragged dim in group g multiplies rhs group g (rhs_group_dims);
 *                    rows in no group give zeros. Output: the dot's shape without the group dim.
 *   contracting:     output [G, dot shape...]; group g sums only the contracting indices in g.
 *   batch:           a plain dot (each batch row is independent; the sizes change nothing).
 * Both ragged modes are computed as one dot over a "dense" operand with the group dim inserted
 * at position P (= rank(group_sizes) - 1), zero outside each group. */

/* `v` with a dim of size G inserted at P: element (.., g@P, ..) is v's element when its index
 * along `ragged` (a dim of v, >= P) lies in group g for v's leading P indices, else zero. */
static SimValue *
ragged_dense(const SimValue *v, const SimValue *gs, uint32_t P, uint32_t ragged)
{
    int64_t G = gs->dims[P], dims[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0}, vs[SIM_MAX_RANK];
    if (v->rank + 1 > SIM_MAX_RANK)
        return NULL;
    for (uint32_t d = 0, s = 0; d <= v->rank; d++)
        dims[d] = d == P ? G : v->dims[s++];
    SimValue *o = sim_value_new_array(v->dtype, dims, v->rank + 1);
    if (!o)
        return NULL;
    sim_strides(v->dims, v->rank, vs);
    for (int64_t i = 0; i < o->n; i++, sim_idx_next(idx, dims, v->rank + 1)) {
        int64_t g = idx[P], pre = 0, at = 0, lo = 0;
        for (uint32_t d = 0; d < P; d++)
            pre = pre * gs->dims[d] + idx[d];
        for (int64_t k = 0; k < g; k++)
            lo += gs->data[pre * G + k].i;
        int64_t row = idx[ragged + 1];
        if (row < lo || row >= lo + gs->data[pre * G + g].i)
            continue;
        for (uint32_t d = 0, s = 0; d <= v->rank; d++)
            if (d != P)
                at += idx[d] * vs[s++];
        o->data[i] = v->data[at];
    }
    return o;
}

/* dims shifted past an inserted dim at P, with P itself first when `lead`. */
static uint32_t
shift_dims(const int64_t *in, uint32_t n, uint32_t P, bool lead, int64_t *out)
{
    uint32_t k = 0;
    if (lead)
        out[k++] = P;
    for (uint32_t i = 0; i < n; i++)
        out[k++] = in[i] >= (int64_t)P ? in[i] + 1 : in[i];
    return k;
}

static bool
has_dim(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

SlStatus
sim_eval_ragged_dot(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out)
{
    SimDotNums dn;
    const int64_t *lr, *rg;
    dn.nlb = ir_instr_ints_attr(ins, IR_ATTR_LHS_BATCH_DIMS, &dn.lb);
    dn.nlc = ir_instr_ints_attr(ins, IR_ATTR_LHS_CONTRACTING_DIMS, &dn.lc);
    dn.nrb = ir_instr_ints_attr(ins, IR_ATTR_RHS_BATCH_DIMS, &dn.rb);
    dn.nrc = ir_instr_ints_attr(ins, IR_ATTR_RHS_CONTRACTING_DIMS, &dn.rc);
    uint32_t nrg = ir_instr_ints_attr(ins, IR_ATTR_RHS_GROUP_DIMS, &rg);
    const SimValue *a = ops[0], *b = ops[1], *gs = ops[2];
    if (ins->n_operands != 3 || ir_instr_ints_attr(ins, IR_ATTR_LHS_RAGGED_DIMS, &lr) != 1 ||
        a->dtype == IR_DT_TUPLE || b->dtype == IR_DT_TUPLE || gs->dtype == IR_DT_TUPLE ||
        gs->rank < 1 || lr[0] < 0 || lr[0] >= a->rank || dn.nlc != dn.nrc)
        return sim_fail(cx, ins, SL_ERR_INVALID, "ragged-dot dimension numbers do not fit");
    if (has_dim(dn.lb, dn.nlb, lr[0])) /* ragged batch: a plain dot */
        return nrg ? sim_fail(cx, ins, SL_ERR_INVALID, "rhs_group_dims with a ragged batch dim")
                   : sim_dot(cx, ins, a, b, &dn, &ins->shape, out);
    uint32_t P = gs->rank - 1, r = (uint32_t)lr[0];
    bool contracting = has_dim(dn.lc, dn.nlc, r);
    for (uint32_t d = 0; d < P; d++)
        if (d >= a->rank || gs->dims[d] != a->dims[d] ||
            (contracting && (d >= b->rank || gs->dims[d] != b->dims[d])))
            return sim_fail(cx, ins, SL_ERR_INVALID, "group_sizes dim %u does not match the "
                            "operands' leading dims", d);
    if (r < P || (contracting ? nrg != 0 : nrg != 1 || rg[0] < 0 || rg[0] >= b->rank))
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "ragged-dot form (ragged dim %u, %u "
                        "group_sizes prefix dims, %u rhs group dims)", r, P, nrg);
    int64_t lb[SIM_MAX_RANK + 1], lc[SIM_MAX_RANK + 1], rb[SIM_MAX_RANK + 1],
        rc[SIM_MAX_RANK + 1];
    SimValue *ad = ragged_dense(a, gs, P, r), *bd = NULL;
    SimDotNums nd = dn;
    nd.lb = lb, nd.lc = lc, nd.rb = rb, nd.rc = rc;
    if (ad && contracting) {
        uint32_t k = 0;
        while (k < dn.nlc && dn.lc[k] != r)
            k++;
        bd = ragged_dense(b, gs, P, (uint32_t)dn.rc[k]);
        nd.nlb = shift_dims(dn.lb, dn.nlb, P, true, lb);
        nd.nrb = shift_dims(dn.rb, dn.nrb, P, true, rb);
        nd.nlc = shift_dims(dn.lc, dn.nlc, P, false, lc);
        nd.nrc = shift_dims(dn.rc, dn.nrc, P, false, rc);
    } else if (ad) {
        bd = sim_value_ref(ops[1]);
        nd.nlb = shift_dims(dn.lb, dn.nlb, P, false, lb);
        nd.nlc = shift_dims(dn.lc, dn.nlc, P, true, lc);
        for (uint32_t i = 0; i < dn.nrb; i++)
            rb[i] = dn.rb[i];
        rc[0] = rg[0];
        for (uint32_t i = 0; i < dn.nrc; i++)
            rc[i + 1] = dn.rc[i];
        nd.nrc = dn.nrc + 1;
    }
    SlStatus st = ad && bd ? sim_dot(cx, ins, ad, bd, &nd, &ins->shape, out)
                           : sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    sim_value_unref(ad);
    sim_value_unref(bd);
    return st;
}
