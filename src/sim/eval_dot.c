/* eval_dot.c - contractions: dot with general dimension numbers, and convolution (window,
 * padding, lhs/rhs dilation, reversal, feature and batch groups, dim_labels). Owns: the
 * accumulation rule, which is one sum in double (or wrapping int64) per output element, rounded
 * once to the result type. Dot packs both operands into [batch, free, contracting] order first
 * so the inner loop is contiguous; the cost is the product of the sizes, nothing more. */
#include "sim/sim_int.h"

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

static void
dot_loop(const DotDims *l, const DotDims *r, const void *lp, const void *rp, bool as_float,
         SimValue *out)
{
    int64_t at = 0;
    for (int64_t b = 0; b < l->b; b++) {
        for (int64_t m = 0; m < l->f; m++) {
            for (int64_t n = 0; n < r->f; n++, at++) {
                int64_t lo = (b * l->f + m) * l->k, ro = (b * r->f + n) * r->k;
                if (as_float) {
                    const double *x = (const double *)lp + lo, *y = (const double *)rp + ro;
                    double s = 0;
                    for (int64_t k = 0; k < l->k; k++)
                        s += x[k] * y[k];
                    out->data[at].f = s;
                } else {
                    const int64_t *x = (const int64_t *)lp + lo, *y = (const int64_t *)rp + ro;
                    uint64_t s = 0;
                    for (int64_t k = 0; k < l->k; k++)
                        s += (uint64_t)x[k] * (uint64_t)y[k];
                    out->data[at].i = (int64_t)s;
                }
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
        const double *x = c->lp + lo, *y = c->kp + ko;
        for (int64_t i = 0; i < ifg; i++)
            sum += x[i] * y[i];
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
