/* prop_dot.c - the dot and convolution rules of the propagation (XLA's dot_as_convolution_util
 * dimension maps, InferDotShardingFromOperands, the convolution's, and InferDotOperandSharding
 * for the backward sweep). Owns: classifying a dot's or convolution's dims (batch, contracting,
 * non-contracting, spatial) and mapping shardings across them. Does not own: which instruction
 * is visited when (prop_fix.c), the other opcodes' rules (prop_fwd.c, prop_bwd.c). */
#include <string.h>

#include "propagate/prop_int.h"

/* ---- dot and convolution dimension maps (dot_as_convolution_util) ---- */

typedef struct PropDimMap {
    int64_t lhs, rhs, out;
} PropDimMap;

typedef struct PropDotDims {
    PropDimMap batch[PROP_MAX_RANK], contr[PROP_MAX_RANK], lnc[PROP_MAX_RANK],
        rnc[PROP_MAX_RANK], conv[PROP_MAX_RANK];
    uint32_t nb, nc, nl, nr, ns;
    uint32_t lrank, rrank, orank;
} PropDotDims;

/* Clears the counts of `o`; the maps are read only below their counts (not clearing the 7.7 KB
 * of maps matters: every dot rule evaluation asks for them). */
static void
dims_clear(PropDotDims *o)
{
    o->nb = o->nc = o->nl = o->nr = o->ns = 0;
    o->lrank = o->rrank = o->orank = 0;
}

static bool
dot_dims(const IrInstr *d, PropDotDims *o)
{
    dims_clear(o);
    if (d->n_operands < 2)
        return false;
    const int64_t *lb, *rb, *lc, *rc;
    uint32_t nlb = ir_instr_ints_attr(d, IR_ATTR_LHS_BATCH_DIMS, &lb);
    uint32_t nrb = ir_instr_ints_attr(d, IR_ATTR_RHS_BATCH_DIMS, &rb);
    uint32_t nlc = ir_instr_ints_attr(d, IR_ATTR_LHS_CONTRACTING_DIMS, &lc);
    uint32_t nrc = ir_instr_ints_attr(d, IR_ATTR_RHS_CONTRACTING_DIMS, &rc);
    const IrShape *l = &d->operands[0]->shape, *r = &d->operands[1]->shape;
    if (nlb != nrb || nlc != nrc || l->rank > PROP_MAX_RANK || r->rank > PROP_MAX_RANK)
        return false;
    o->lrank = l->rank;
    o->rrank = r->rank;
    o->orank = d->shape.rank;
    for (uint32_t k = 0; k < nlb; k++)
        o->batch[o->nb++] = (PropDimMap){lb[k], rb[k], k};
    for (uint32_t k = 0; k < nlc; k++)
        o->contr[o->nc++] = (PropDimMap){lc[k], rc[k], -1};
    uint32_t out = nlb;
    for (uint32_t k = 0; k < l->rank; k++)
        if (!prop_in_ints(lb, nlb, k) && !prop_in_ints(lc, nlc, k))
            o->lnc[o->nl++] = (PropDimMap){k, -1, out++};
    for (uint32_t k = 0; k < r->rank; k++)
        if (!prop_in_ints(rb, nrb, k) && !prop_in_ints(rc, nrc, k))
            o->rnc[o->nr++] = (PropDimMap){-1, k, out++};
    return out == d->shape.rank;
}

typedef struct ConvLabels {
    int64_t b, f, sp[PROP_MAX_RANK];
    uint32_t n_sp;
} ConvLabels;

static bool
conv_group(SlStr s, char cb, char cf, ConvLabels *o)
{
    o->b = o->f = -1;
    o->n_sp = 0;
    int64_t sp[PROP_MAX_RANK];
    uint32_t nd = 0;
    for (size_t k = 0; k < s.len; k++) {
        char c = s.ptr[k];
        if (c == cb)
            o->b = (int64_t)k;
        else if (c == cf)
            o->f = (int64_t)k;
        else if (c >= '0' && c <= '9') {
            int d = c - '0';
            if (d >= PROP_MAX_RANK)
                return false;
            sp[d] = (int64_t)k;
            if ((uint32_t)d + 1 > nd)
                nd = (uint32_t)d + 1;
            o->n_sp++;
        } else
            return false;
    }
    if (o->b < 0 || o->f < 0 || o->n_sp != nd)
        return false;
    memcpy(o->sp, sp, nd * sizeof(int64_t));
    return true;
}

typedef struct ConvDnums {
    ConvLabels in, k, out;
} ConvDnums;

static bool
conv_labels(const IrInstr *c, ConvDnums *d)
{
    const IrAttr *a = ir_instr_find_attr(c, IR_ATTR_DIM_LABELS);
    if (!a)
        return false;
    SlStr t = a->u.text;
    const char *us = memchr(t.ptr, '_', t.len);
    const char *ar = NULL;
    for (size_t k = 0; k + 1 < t.len; k++)
        if (t.ptr[k] == '-' && t.ptr[k + 1] == '>')
            ar = t.ptr + k;
    if (!us || !ar || ar < us)
        return false;
    SlStr ls = {t.ptr, (size_t)(us - t.ptr)}, ks = {us + 1, (size_t)(ar - us - 1)},
          os = {ar + 2, (size_t)(t.ptr + t.len - ar - 2)};
    return conv_group(ls, 'b', 'f', &d->in) && conv_group(ks, 'o', 'i', &d->k) &&
           conv_group(os, 'b', 'f', &d->out) && d->in.n_sp == d->k.n_sp &&
           d->in.n_sp == d->out.n_sp;
}

static bool
conv_dims(const IrInstr *c, PropDotDims *o, ConvDnums *dn)
{
    dims_clear(o);
    if (c->n_operands < 2 || !conv_labels(c, dn))
        return false;
    const IrAttr *w = ir_instr_find_attr(c, IR_ATTR_WINDOW);
    uint32_t nw = w ? w->u.window.n : 0;
    if (nw != dn->in.n_sp)
        return false;
    const IrShape *l = &c->operands[0]->shape, *r = &c->operands[1]->shape;
    o->lnc[o->nl++] = (PropDimMap){dn->in.b, -1, dn->out.b};
    o->rnc[o->nr++] = (PropDimMap){-1, dn->k.b, dn->out.f}; /* k.b holds 'o' */
    o->contr[o->nc++] = (PropDimMap){dn->in.f, dn->k.f, -1};
    for (uint32_t s = 0; s < nw; s++) {
        const IrWindowDim *wd = &w->u.window.v[s];
        int64_t lhs = dn->in.sp[s], rhs = dn->k.sp[s], out = dn->out.sp[s];
        int64_t ls = l->dims[lhs], rs = r->dims[rhs];
        int64_t m1 = ls - 1 > 1 ? ls - 1 : 1;
        bool batch =
            (ls == wd->size && ls == wd->lhs_dilate &&
             ((m1 == wd->stride && wd->rhs_dilate == 1) || (m1 == wd->rhs_dilate && wd->stride == 1)) &&
             wd->pad_hi == 0 && wd->pad_lo == 0 && !wd->reversal) ||
            (ls == wd->size && wd->pad_hi == ls - 1 && wd->pad_lo == ls - 1 && wd->reversal &&
             wd->rhs_dilate == 1 && wd->stride == ls && wd->lhs_dilate == ls - 1);
        PropDimMap dm = {lhs, rhs, out};
        if (batch)
            o->batch[o->nb++] = dm;
        else if (ls == wd->size && wd->lhs_dilate == 1 && wd->rhs_dilate == 1 &&
                 wd->pad_hi == 0 && wd->pad_lo == 0 && !wd->reversal)
            o->contr[o->nc++] = dm;
        else if (wd->stride == 1 && wd->rhs_dilate == 1 && wd->lhs_dilate == 1) {
            if (rs == 1 && wd->size == 1 && wd->pad_hi == 0 && wd->pad_lo == 0 && !wd->reversal)
                o->lnc[o->nl++] = dm;
            else if (ls == 1 && wd->size == rs && wd->pad_hi == rs - 1 && wd->pad_lo == rs - 1 &&
                     wd->reversal)
                o->rnc[o->nr++] = dm;
            else
                o->conv[o->ns++] = dm;
        } else
            o->conv[o->ns++] = dm;
    }
    o->lrank = l->rank;
    o->rrank = r->rank;
    o->orank = c->shape.rank;
    return true;
}

/* The output sharding a dot gets from operand `k`'s (InferDotShardingFromOperands' lambda). */
static const ShdSharding *
dot_from_operand(PropCtx *cx, const IrInstr *d, const PropDotDims *dn, int k)
{
    const ShdSharding *s = prop_sh(cx, d->operands[k]);
    if (px_tile_maximal(s) || s->kind != SHD_TILED)
        return s;
    int64_t rep[PROP_MAX_RANK];
    uint32_t nrep = 0;
    for (uint32_t x = 0; x < dn->nc; x++)
        rep[nrep++] = k == 0 ? dn->contr[x].lhs : dn->contr[x].rhs;
    const PropDimMap *other = k == 0 ? dn->rnc : dn->lnc;
    uint32_t no = k == 0 ? dn->nr : dn->nl;
    for (uint32_t x = 0; x < no; x++) {
        int64_t dd = k == 0 ? other[x].lhs : other[x].rhs;
        if (dd >= 0)
            rep[nrep++] = dd;
    }
    const ShdSharding *r = px_replicate_dims(cx, s, rep, nrep);
    if (r->kind != SHD_TILED)
        return r;
    int64_t map[PROP_MAX_RANK];
    uint32_t rank = k == 0 ? dn->lrank : dn->rrank;
    for (uint32_t x = 0; x < rank; x++)
        map[x] = -1;
    for (uint32_t x = 0; x < dn->nb; x++)
        map[k == 0 ? dn->batch[x].lhs : dn->batch[x].rhs] = dn->batch[x].out;
    const PropDimMap *mine = k == 0 ? dn->lnc : dn->rnc;
    uint32_t nm = k == 0 ? dn->nl : dn->nr;
    for (uint32_t x = 0; x < nm; x++)
        map[k == 0 ? mine[x].lhs : mine[x].rhs] = mine[x].out;
    const ShdSharding *t = px_transpose_collapsed(cx, r, map, rank, dn->orank);
    return t ? px_keep_md(cx, t, s) : NULL;
}

/* LookaheadUserSharding: the sharding a chain of single users asks of `i`, or NULL. */
static const ShdSharding *
lookahead(PropCtx *cx, IrInstr *i)
{
    if (prop_n_users(cx, i) != 1)
        return NULL;
    IrInstr *chain[256];
    uint32_t n = 0;
    chain[n++] = i;
    IrInstr *cur = prop_user(cx, i, 0);
    chain[n++] = cur;
    while (!prop_sh(cx, cur)) {
        if (prop_n_users(cx, cur) != 1 || n >= SL_COUNTOF(chain))
            return NULL;
        cur = prop_user(cx, cur, 0);
        chain[n++] = cur;
    }
    const ShdSharding *s = NULL;
    bool set[256] = {false};
    for (uint32_t k = n - 1; k >= 1; k--) {
        s = prop_from_user(cx, chain[k - 1], chain[k], 1 << 30);
        if (s && k != 1) {
            cx->sh[chain[k - 1]->id] = s;
            set[k - 1] = true;
            continue;
        }
        break;
    }
    for (uint32_t k = 1; k + 1 < n; k++)
        if (set[k])
            cx->sh[chain[k]->id] = NULL;
    return s;
}

static bool
dot_forward(PropCtx *cx, IrInstr *d, const PropDotDims *dn, bool combine)
{
    const ShdSharding *i0 = NULL, *i1 = NULL, *cur = prop_sh(cx, d);
    const ShdSharding *c0 = NULL, *c1 = NULL;
    if (px_spatial(prop_sh(cx, d->operands[0])) && (c0 = dot_from_operand(cx, d, dn, 0)))
        i0 = px_improved(cx, c0, cur, &d->shape, combine, false);
    if (px_spatial(prop_sh(cx, d->operands[1])) && (c1 = dot_from_operand(cx, d, dn, 1)))
        i1 = px_improved(cx, c1, cur, &d->shape, combine, false);
    if (!i0 && !i1)
        return false;
    if (i0 && !i1) {
        cx->from = d->operands[0];
        cx->rule = "dot lhs";
        return prop_set(cx, d, i0, c0);
    }
    if (!i0 && i1) {
        cx->from = d->operands[1];
        cx->rule = "dot rhs";
        return prop_set(cx, d, i1, c1);
    }
    const ShdSharding *la = lookahead(cx, d);
    const ShdSharding *pri[2] = {i0, i1};
    int first = 0;
    bool defined = false;
    if (la) {
        bool s0 = px_subtiling_or_equal(&d->shape, la, i0);
        bool s1 = px_subtiling_or_equal(&d->shape, la, i1);
        if (s0 && !s1)
            defined = true;
        if (!s0 && s1) {
            first = 1;
            defined = true;
        }
    }
    if (!defined &&
        ir_shape_byte_size(&d->operands[0]->shape) < ir_shape_byte_size(&d->operands[1]->shape))
        first = 1;
    cx->from = d->operands[first];
    cx->rule = first ? "dot rhs (priority)" : "dot lhs (priority)";
    prop_set(cx, d, pri[first], first ? c1 : c0);
    cx->from = d->operands[1 - first];
    cx->rule = first ? "dot lhs (merged)" : "dot rhs (merged)";
    prop_improve(cx, d, pri[1 - first], combine, false);
    return true;
}

static bool
conv_kernel_small(const IrInstr *c, const ConvDnums *dn)
{
    const IrShape *r = &c->operands[1]->shape;
    int64_t kp = 1, op = 1;
    for (uint32_t s = 0; s < dn->in.n_sp; s++) {
        int64_t kd = r->dims[dn->k.sp[s]], od = c->shape.dims[dn->out.sp[s]];
        kp *= kd;
        op *= od;
        if (kd >= od && (s < 2 || kd > 3 || kp >= op))
            return false;
    }
    return true;
}

static bool
conv_forward(PropCtx *cx, IrInstr *c, bool combine)
{
    PropDotDims dd;
    ConvDnums dn;
    if (!conv_dims(c, &dd, &dn))
        return false;
    int64_t lparts = 1, rparts = 1;
    const ShdSharding *ls = prop_sh(cx, c->operands[0]), *rs = prop_sh(cx, c->operands[1]);
    for (uint32_t k = 0; k < dd.ns; k++) {
        if (ls && ls->kind == SHD_TILED)
            lparts *= ls->tile_dims[dd.conv[k].lhs];
        if (rs && rs->kind == SHD_TILED)
            rparts *= rs->tile_dims[dd.conv[k].rhs];
    }
    int64_t fgc = 1, bgc = 1;
    ir_instr_int_attr(c, IR_ATTR_FEATURE_GROUP_COUNT, &fgc);
    ir_instr_int_attr(c, IR_ATTR_BATCH_GROUP_COUNT, &bgc);
    if (dd.ns == 0 || (lparts == 1 && rparts == 1 && fgc == 1 && bgc == 1))
        return dot_forward(cx, c, &dd, combine);
    if (!px_spatial(ls))
        return false;
    cx->from = c->operands[0];
    if (px_tile_maximal(ls)) {
        cx->rule = "convolution (replicated lhs)";
        return prop_improve(cx, c, ls, combine, false);
    }
    if (ls->kind != SHD_TILED)
        return false;
    if (conv_kernel_small(c, &dn)) {
        if (ls->tile_dims[dn.in.f] > 1)
            return false;
        int64_t perm[PROP_MAX_RANK];
        perm[dn.out.b] = dn.in.b;
        perm[dn.out.f] = dn.in.f;
        for (uint32_t s = 0; s < dn.in.n_sp; s++)
            perm[dn.out.sp[s]] = dn.in.sp[s];
        const ShdSharding *t = shd_transpose(cx->a, ls, perm);
        cx->rule = "convolution (small kernel, like lhs)";
        return t && prop_improve(cx, c, px_keep_md(cx, t, ls), combine, false);
    }
    int64_t keep = dn.in.b;
    cx->rule = "convolution (large kernel, lhs batch)";
    return prop_improve(cx, c, px_replicate_except(cx, ls, &keep, 1), combine, false);
}

bool
prop_dot_forward(PropCtx *cx, IrInstr *d, bool combine)
{
    PropDotDims dd;
    return dot_dims(d, &dd) && dot_forward(cx, d, &dd, combine);
}

bool
prop_conv_forward(PropCtx *cx, IrInstr *c, bool combine)
{
    return conv_forward(cx, c, combine);
}

/* InferDotOperandSharding (with the other operand considered). */
static const ShdSharding *
dot_operand(PropCtx *cx, const IrInstr *d, const PropDotDims *dn, int k, bool combine)
{
    const ShdSharding *ds = prop_sh(cx, d), *os = prop_sh(cx, d->operands[1 - k]);
    int64_t orep[PROP_MAX_RANK], xrep[PROP_MAX_RANK];
    uint32_t no = 0, nx = 0;
    const PropDimMap *other = k == 0 ? dn->rnc : dn->lnc;
    uint32_t nother = k == 0 ? dn->nr : dn->nl;
    for (uint32_t x = 0; x < nother; x++) {
        orep[no++] = other[x].out;
        xrep[nx++] = k == 0 ? other[x].rhs : other[x].lhs;
    }
    for (uint32_t x = 0; x < dn->nc; x++)
        if (dn->contr[x].out >= 0)
            orep[no++] = dn->contr[x].out;
    const PropDimMap *mine = k == 0 ? dn->lnc : dn->rnc;
    uint32_t nmine = k == 0 ? dn->nl : dn->nr;
    for (uint32_t x = 0; x < nmine; x++) {
        int64_t od = k == 0 ? mine[x].rhs : mine[x].lhs;
        if (od >= 0)
            xrep[nx++] = od;
    }
    uint32_t rank = k == 0 ? dn->lrank : dn->rrank, orank = k == 0 ? dn->rrank : dn->lrank;
    const ShdSharding *s = shd_replicated(cx->a);
    if (ds) {
        const ShdSharding *r = px_replicate_dims(cx, ds, orep, no);
        if (r->kind == SHD_TILED) {
            int64_t map[PROP_MAX_RANK];
            for (uint32_t x = 0; x < dn->orank; x++)
                map[x] = -1;
            for (uint32_t x = 0; x < dn->nb; x++)
                map[dn->batch[x].out] = k == 0 ? dn->batch[x].lhs : dn->batch[x].rhs;
            for (uint32_t x = 0; x < nmine; x++)
                map[mine[x].out] = k == 0 ? mine[x].lhs : mine[x].rhs;
            const ShdSharding *t = px_transpose_collapsed(cx, r, map, dn->orank, rank);
            s = t ? px_keep_md(cx, t, ds) : s;
        } else {
            s = r;
        }
    }
    if (os && px_spatial(os)) {
        const ShdSharding *r = px_replicate_dims(cx, os, xrep, nx);
        const ShdSharding *from_other = r;
        if (r->kind == SHD_TILED) {
            int64_t map[PROP_MAX_RANK];
            for (uint32_t x = 0; x < orank; x++)
                map[x] = -1;
            for (uint32_t x = 0; x < dn->nb; x++)
                map[k == 0 ? dn->batch[x].rhs : dn->batch[x].lhs] =
                    k == 0 ? dn->batch[x].lhs : dn->batch[x].rhs;
            for (uint32_t x = 0; x < dn->nc; x++)
                map[k == 0 ? dn->contr[x].rhs : dn->contr[x].lhs] =
                    k == 0 ? dn->contr[x].lhs : dn->contr[x].rhs;
            from_other = px_transpose_collapsed(cx, r, map, orank, rank);
            from_other = from_other ? px_keep_md(cx, from_other, os) : NULL;
        }
        if (from_other && px_merge(cx, s, &from_other, combine))
            s = from_other;
    }
    return s;
}

const ShdSharding *
prop_dot_operand_from_user(PropCtx *cx, const IrInstr *d, int k)
{
    PropDotDims dd;
    ConvDnums cdn;
    bool combine = cx->o->is_spmd && cx->level > 0;
    if (d->op == IR_OP_DOT) {
        if (!dot_dims(d, &dd))
            return NULL;
    } else {
        if (!conv_dims(d, &dd, &cdn) || dd.ns)
            return NULL;
    }
    return dot_operand(cx, d, &dd, k, combine);
}
