/* handle_conv.c - convolution through the dot engine (gspmd.md §F.1; seeds/000
 * HandleConvolution, ParseConvolutionDimsInfo, create_sharded_conv). Owns: classifying the
 * convolution's dims into dot roles (batch/feature dims and dot-like spatial dims), the
 * create-sharded-conv callback that rewrites the window from local sizes, and case 0 (spatial
 * dims partitioned: the output-spatially-tiled plan through spmd_reshard_as_windowed_input).
 * Does not own: the strategies (handle_dot.c) or the halo exchange (reshard.c).
 * Invariant: every local convolution is built by create_conv. */
#include "spmd/dot_int.h"

#include <string.h>

/* Parsed dim_labels: positions of each role in the three tensors. */
typedef struct ConvLabels {
    int64_t ib, if_, ko, ki, ob, of;
    int64_t is[SPMD_MAX_RANK], ks[SPMD_MAX_RANK], os[SPMD_MAX_RANK]; /* by spatial index */
    uint32_t n_spatial;
    int64_t feature_groups, batch_groups;
} ConvLabels;

/* One side of dim_labels := [0-9bfio]+ ; digits name spatial dims in order. */
static bool
parse_side(SlStr s, char a, char b, int64_t *pa, int64_t *pb, int64_t *sp, uint32_t *n)
{
    *pa = *pb = -1;
    uint32_t cnt = 0;
    for (size_t i = 0; i < s.len; i++) {
        char c = s.ptr[i];
        if (c == a)
            *pa = (int64_t)i;
        else if (c == b)
            *pb = (int64_t)i;
        else if (c >= '0' && c <= '9' && (uint32_t)(c - '0') < SPMD_MAX_RANK) {
            sp[c - '0'] = (int64_t)i;
            cnt++;
        } else
            return false;
    }
    *n = cnt;
    return *pa >= 0 && *pb >= 0;
}

static bool
parse_labels(const IrInstr *hlo, ConvLabels *L)
{
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_DIM_LABELS);
    if (!a)
        return false;
    SlStr t = a->u.text;
    size_t u = 0, ar = 0;
    while (u < t.len && t.ptr[u] != '_')
        u++;
    for (ar = u; ar + 1 < t.len && !(t.ptr[ar] == '-' && t.ptr[ar + 1] == '>'); ar++)
        ;
    if (u >= t.len || ar + 1 >= t.len)
        return false;
    SlStr in = {t.ptr, u}, k = {t.ptr + u + 1, ar - u - 1}, o = {t.ptr + ar + 2, t.len - ar - 2};
    uint32_t n1, n2, n3;
    if (!parse_side(in, 'b', 'f', &L->ib, &L->if_, L->is, &n1) ||
        !parse_side(k, 'o', 'i', &L->ko, &L->ki, L->ks, &n2) ||
        !parse_side(o, 'b', 'f', &L->ob, &L->of, L->os, &n3) || n1 != n2 || n1 != n3)
        return false;
    L->n_spatial = n1;
    L->feature_groups = L->batch_groups = 1;
    ir_instr_int_attr(hlo, IR_ATTR_FEATURE_GROUP_COUNT, &L->feature_groups);
    ir_instr_int_attr(hlo, IR_ATTR_BATCH_GROUP_COUNT, &L->batch_groups);
    return true;
}

static bool
no_pad(const IrWindowDim *w)
{
    return w->pad_lo == 0 && w->pad_hi == 0;
}

/* F.1's classification of spatial dim k (lhs size a, rhs size b). */
static DotRole
classify_spatial(const IrWindowDim *w, int64_t a, int64_t b)
{
    bool plain = w->lhs_dilate == 1 && w->rhs_dilate == 1;
    int64_t bstride = a - 1 > 1 ? a - 1 : 1;
    if (a == w->size && w->size == w->lhs_dilate && no_pad(w) && !w->reversal &&
        ((w->stride == bstride && w->rhs_dilate == 1) || (w->rhs_dilate == bstride &&
                                                         w->stride == 1)))
        return DOT_BATCH;
    if (a == w->size && plain && no_pad(w) && !w->reversal)
        return DOT_CONTRACTING;
    if (w->stride == 1 && plain && b == 1 && w->size == 1 && no_pad(w) && !w->reversal)
        return DOT_LHS_NC;
    if (w->stride == 1 && plain && a == 1 && w->size == b && w->pad_lo == b - 1 &&
        w->pad_hi == b - 1 && w->reversal)
        return DOT_RHS_NC;
    return DOT_SPATIAL;
}

typedef struct ConvPriv {
    ConvLabels labels;
    DotRole spatial_role[SPMD_MAX_RANK];
} ConvPriv;

static SlStatus
conv_dims(SpmdCtx *cx, const IrInstr *hlo, const IrWindowDim *w, uint32_t n_w, ConvPriv *pv,
          DotDims *d)
{
    ConvLabels *L = &pv->labels;
    const IrShape *ls = &hlo->operands[0]->shape, *rs = &hlo->operands[1]->shape;
    memset(d, 0, sizeof(*d));
    if (!parse_labels(hlo, L) || n_w != L->n_spatial || ls->rank > SPMD_MAX_RANK)
        return SL_ERR_UNSUPPORTED;
    d->rank[0] = ls->rank;
    d->rank[1] = rs->rank;
    d->rank[2] = hlo->shape.rank;
    for (int r = 0; r < DOT_ROLE_COUNT; r++)
        if (!(d->role[r] = SL_NEW_ARRAY(cx->arena, DotDimMap, ls->rank + 2)))
            return SL_ERR_NOMEM;
    d->role[DOT_LHS_NC][d->n[DOT_LHS_NC]++] = (DotDimMap){L->ib, -1, L->ob};
    d->role[DOT_RHS_NC][d->n[DOT_RHS_NC]++] = (DotDimMap){-1, L->ko, L->of};
    d->role[DOT_CONTRACTING][d->n[DOT_CONTRACTING]++] = (DotDimMap){L->if_, L->ki, -1};
    for (uint32_t k = 0; k < L->n_spatial; k++) {
        DotRole r = classify_spatial(&w[k], ls->dims[L->is[k]], rs->dims[L->ks[k]]);
        pv->spatial_role[k] = r;
        d->role[r][d->n[r]++] = (DotDimMap){L->is[k], L->ks[k], L->os[k]};
    }
    return SL_OK;
}

/* ---- create-sharded-conv ---- */

static int64_t
out_size(int64_t a, const IrWindowDim *w)
{
    int64_t in = a > 0 ? (a - 1) * w->lhs_dilate + 1 + w->pad_lo + w->pad_hi : 0;
    int64_t win = (w->size - 1) * w->rhs_dilate + 1;
    return in >= win && w->stride > 0 ? (in - win) / w->stride + 1 : 0;
}

/* Rewrites dot-like spatial dims of the window from the local sizes (F.1). */
static void
local_window(const ConvPriv *pv, const IrInstr *lhs, const IrInstr *rhs, IrWindowDim *w)
{
    const ConvLabels *L = &pv->labels;
    for (uint32_t k = 0; k < L->n_spatial; k++) {
        int64_t a = lhs->shape.dims[L->is[k]], b = rhs->shape.dims[L->ks[k]];
        switch (pv->spatial_role[k]) {
        case DOT_BATCH:
            w[k].size = a;
            w[k].lhs_dilate = a;
            if (w[k].rhs_dilate > 1)
                w[k].rhs_dilate = a - 1 > 1 ? a - 1 : 1;
            else
                w[k].stride = a - 1 > 1 ? a - 1 : 1;
            break;
        case DOT_CONTRACTING:
            w[k].size = a;
            break;
        case DOT_RHS_NC:
            w[k].size = b;
            w[k].pad_lo = w[k].pad_hi = b - 1;
            break;
        case DOT_LHS_NC:
        case DOT_SPATIAL:
        case DOT_ROLE_COUNT:
            break;
        }
    }
}

static void
set_int_attr(IrInstr *i, IrAttrKey k, int64_t v)
{
    IrAttr *a = ir_instr_find_attr_mut(i, k);
    if (a)
        a->u.i = v;
}

static IrInstr *
create_conv(SpmdCtx *cx, const DotJob *job, IrInstr *lhs, IrInstr *rhs, const IrWindowDim *w0)
{
    const ConvPriv *pv = job->conv;
    const ConvLabels *L = &pv->labels;
    IrWindowDim *w = SL_DUP_ARRAY(cx->arena, IrWindowDim, w0 ? w0 : job->window,
                                  L->n_spatial ? L->n_spatial : 1);
    int64_t dims[SPMD_MAX_RANK];
    if (!w)
        return NULL;
    local_window(pv, lhs, rhs, w);
    int64_t kif = rhs->shape.dims[L->ki], lif = lhs->shape.dims[L->if_];
    int64_t fgc = L->feature_groups > 1 && kif > 0 ? lif / kif : 1;
    int64_t bgc = 1;
    if (L->batch_groups > 1) {
        int64_t shards = job->hlo->operands[0]->shape.dims[L->ib] / (lhs->shape.dims[L->ib]);
        bgc = shards > 0 ? L->batch_groups / shards : L->batch_groups;
        bgc = bgc > 0 ? bgc : 1;
    }
    dims[L->ob] = lhs->shape.dims[L->ib] / bgc;
    dims[L->of] = rhs->shape.dims[L->ko];
    for (uint32_t k = 0; k < L->n_spatial; k++)
        dims[L->os[k]] = out_size(lhs->shape.dims[L->is[k]], &w[k]);
    IrShape s = ir_shape_with_dims(cx->arena, &job->hlo->shape, dims);
    IrInstr *ops[2] = {lhs, rhs};
    IrInstr *c = spmd_emit_clone(cx, job->hlo, &s, ops, 2);
    IrAttr *wa = c ? ir_instr_find_attr_mut(c, IR_ATTR_WINDOW) : NULL;
    if (wa) {
        wa->u.window.v = w;
        wa->u.window.n = L->n_spatial;
    }
    if (c) {
        set_int_attr(c, IR_ATTR_FEATURE_GROUP_COUNT, fgc);
        set_int_attr(c, IR_ATTR_BATCH_GROUP_COUNT, bgc);
    }
    return c;
}

/* ---- case 0 (F.1) ---- */

/* Grouped convolutions: the grouped feature (or batch) dim becomes a batch role. */
static DotDims
grouped_dims(SpmdCtx *cx, const DotDims *d, const ConvLabels *L)
{
    DotDims g = *d;
    for (int r = 0; r < DOT_ROLE_COUNT; r++) {
        g.role[r] = SL_NEW_ARRAY(cx->arena, DotDimMap, d->n[r] + 2);
        if (!g.role[r])
            return (DotDims){0};
        g.n[r] = 0;
    }
    for (uint32_t k = 0; k < d->n[DOT_BATCH]; k++)
        g.role[DOT_BATCH][g.n[DOT_BATCH]++] = d->role[DOT_BATCH][k];
    for (uint32_t k = 0; k < d->n[DOT_SPATIAL]; k++)
        g.role[DOT_SPATIAL][g.n[DOT_SPATIAL]++] = d->role[DOT_SPATIAL][k];
    if (L->feature_groups > 1) {
        g.role[DOT_BATCH][g.n[DOT_BATCH]++] = (DotDimMap){L->if_, L->ko, L->of};
        g.role[DOT_LHS_NC][g.n[DOT_LHS_NC]++] = (DotDimMap){L->ib, -1, L->ob};
        g.role[DOT_RHS_NC][g.n[DOT_RHS_NC]++] = (DotDimMap){-1, L->ki, -1};
    } else {
        g.role[DOT_BATCH][g.n[DOT_BATCH]++] = (DotDimMap){L->ib, L->ko, L->of};
        g.role[DOT_CONTRACTING][g.n[DOT_CONTRACTING]++] = (DotDimMap){L->if_, L->ki, -1};
    }
    return g;
}

static SlStatus
emit_with(SpmdCtx *cx, const DotJob *job, const DotProblem *p, const ShdSharding *lt,
          const ShdSharding *rt, const ShdSharding *res, IrInstr **out, SlError *err)
{
    SpmdValue l, r, v, o;
    if (!lt || !rt || !res)
        return SL_OK;
    SlStatus st = spmd_reshard(cx, &p->lhs, lt, NULL, &l, err);
    if (st == SL_OK)
        st = spmd_reshard(cx, &p->rhs, rt, NULL, &r, err);
    if (st != SL_OK)
        return st;
    IrInstr *c = job->create(cx, job, l.hlo, r.hlo, p->window);
    if (!c)
        return spmd_nomem(cx, err);
    v = (SpmdValue){c, p->out_base, res, p->st};
    st = spmd_reshard(cx, &v, p->out, NULL, &o, err);
    *out = o.hlo;
    return st;
}

/* "Partition on the grouped dim only and partially replicate the others." */
static SlStatus
grouped_dim_only(SpmdCtx *cx, const DotJob *gj, const DotProblem *p, const ConvLabels *L,
                 IrInstr **out, SlError *err)
{
    const DotDims *g = &gj->dims;
    int64_t lb = spmd_dot_parts(p->lhs.sharding, g, DOT_BATCH, DOT_LHS);
    int64_t rb = spmd_dot_parts(p->rhs.sharding, g, DOT_BATCH, DOT_RHS);
    int64_t ob = spmd_dot_parts(p->out, g, DOT_BATCH, DOT_OUT);
    int64_t mx = lb > rb ? (lb > ob ? lb : ob) : (rb > ob ? rb : ob);
    int64_t groups = L->feature_groups > 1 ? L->feature_groups : L->batch_groups;
    if (mx <= 1 || groups % mx)
        return SL_OK;
    int64_t ld = L->feature_groups > 1 ? L->if_ : L->ib, rd = L->ko, od = L->of;
    spmd_dot_decide(cx, gj, "grouped_conv_on_group_dim",
                    "grouped convolution: partition on the grouped dim only and partially "
                    "replicate the other dims",
                    NULL, 0, NULL, 0);
    if (mx == lb) {
        const ShdSharding *l = shd_partially_replicate_all_except(cx->arena, p->lhs.sharding, &ld, 1);
        return emit_with(cx, gj, p, l, spmd_dot_seen_from(cx, g, l, DOT_LHS, DOT_RHS),
                         spmd_dot_seen_from(cx, g, l, DOT_LHS, DOT_OUT), out, err);
    }
    if (mx == rb) {
        const ShdSharding *r = shd_partially_replicate_all_except(cx->arena, p->rhs.sharding, &rd, 1);
        return emit_with(cx, gj, p, spmd_dot_seen_from(cx, g, r, DOT_RHS, DOT_LHS), r,
                         spmd_dot_seen_from(cx, g, r, DOT_RHS, DOT_OUT), out, err);
    }
    const ShdSharding *o = shd_partially_replicate_all_except(cx->arena, p->out, &od, 1);
    return emit_with(cx, gj, p, spmd_dot_seen_from(cx, g, o, DOT_OUT, DOT_LHS),
                     spmd_dot_seen_from(cx, g, o, DOT_OUT, DOT_RHS), o, out, err);
}

/* Output spatially tiled (F.1 case 0 rule 3): lhs with halos from the windowed-input
 * reshard, rhs replicated. */
static SlStatus
output_spatial(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
               SlError *err)
{
    const ConvPriv *pv = job->conv;
    const ConvLabels *L = &pv->labels;
    const DotDims *d = &job->dims;
    if (spmd_dot_parts(p->out, d, DOT_SPATIAL, DOT_OUT) <= 1 ||
        spmd_dot_parts(p->out, d, DOT_RHS_NC, DOT_OUT) > 1 || p->lhs.base_shape->rank > SPMD_MAX_RANK)
        return SL_OK;
    const ShdSharding *lt = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, DOT_LHS);
    IrWindowDim *full = SL_NEW_ARRAY(cx->arena, IrWindowDim, p->lhs.base_shape->rank);
    if (!lt || !full)
        return SL_OK;
    for (uint32_t i = 0; i < p->lhs.base_shape->rank; i++)
        full[i] = (IrWindowDim){1, 1, 0, 0, 1, 1, false};
    for (uint32_t k = 0; k < L->n_spatial; k++)
        full[L->is[k]] = job->window[k];
    SpmdValue r;
    SpmdWindowedInput wi;
    SlStatus st = spmd_reshard_as_windowed_input(cx, &p->lhs, full, lt, NULL, true, &wi, err);
    if (st == SL_ERR_UNSUPPORTED)
        return SL_OK;
    if (st == SL_OK)
        st = spmd_replicate(cx, &p->rhs, &r, err);
    if (st != SL_OK)
        return st;
    spmd_dot_decide(cx, job, "conv_output_spatial_halo",
                    "the output is tiled on spatial dims: exchange input halos and run the "
                    "local convolution with the shard window",
                    NULL, 0, NULL, 0);
    IrWindowDim *w = SL_NEW_ARRAY(cx->arena, IrWindowDim, L->n_spatial ? L->n_spatial : 1);
    if (!w)
        return spmd_nomem(cx, err);
    for (uint32_t k = 0; k < L->n_spatial; k++)
        w[k] = wi.shard_window[L->is[k]];
    IrInstr *c = job->create(cx, job, wi.sharded_input, r.hlo, w);
    if (c && wi.dynamic_slice_index) {
        IrShape ls = spmd_local_shape(cx, p->out_base, p->out);
        IrInstr *offs[SPMD_MAX_RANK];
        for (uint32_t i = 0; i < ls.rank; i++)
            offs[i] = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        for (uint32_t k = 0; k < L->n_spatial; k++)
            offs[L->os[k]] = wi.dynamic_slice_index[L->is[k]];
        c = spmd_emit_dynamic_slice(cx, c, offs, ls.dims);
    }
    *out = c;
    return c ? SL_OK : spmd_nomem(cx, err);
}

static SlStatus
conv_case0(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm, IrInstr **out,
           bool *owned, SlError *err)
{
    const ConvPriv *pv = job->conv;
    const ConvLabels *L = &pv->labels;
    const DotDims *d = &job->dims;
    if (L->feature_groups > 1 || L->batch_groups > 1) {
        *owned = true;
        DotJob gj = *job;
        gj.dims = grouped_dims(cx, d, L);
        gj.conv_case = NULL;
        if (!gj.dims.role[DOT_BATCH])
            return spmd_nomem(cx, err);
        SlStatus st = spmd_dot_group_on_batch(cx, &gj, p, rm, out, err);
        if (st != SL_OK || *out || rm)
            return st;
        return grouped_dim_only(cx, &gj, p, L, out, err);
    }
    bool spatial = spmd_dot_parts(p->lhs.sharding, d, DOT_SPATIAL, DOT_LHS) > 1 ||
                   spmd_dot_parts(p->rhs.sharding, d, DOT_SPATIAL, DOT_RHS) > 1 ||
                   spmd_dot_parts(p->out, d, DOT_SPATIAL, DOT_OUT) > 1;
    bool other = spmd_dot_parts(p->lhs.sharding, d, DOT_BATCH, DOT_LHS) > 1 ||
                 spmd_dot_parts(p->rhs.sharding, d, DOT_BATCH, DOT_RHS) > 1 ||
                 spmd_dot_parts(p->out, d, DOT_BATCH, DOT_OUT) > 1 ||
                 (spmd_dot_parts(p->lhs.sharding, d, DOT_CONTRACTING, DOT_LHS) > 1 &&
                  spmd_dot_parts(p->rhs.sharding, d, DOT_CONTRACTING, DOT_RHS) > 1);
    if (d->n[DOT_SPATIAL] == 0 || !spatial || other)
        return SL_OK;
    return output_spatial(cx, job, p, out, err);
}

SlStatus
spmd_handle_conv(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const IrAttr *wa = ir_instr_find_attr(hlo, IR_ATTR_WINDOW);
    ConvPriv *pv = SL_NEW(cx->arena, ConvPriv);
    if (!pv)
        return spmd_nomem(cx, err);
    DotJob job;
    memset(&job, 0, sizeof(job));
    job.hlo = hlo;
    job.handler = "convolution";
    job.create = create_conv;
    job.conv_case = conv_case0;
    job.conv = pv;
    static const IrWindowDim none = {1, 1, 0, 0, 1, 1, false};
    job.window = wa ? wa->u.window.v : &none;
    job.n_window = wa ? wa->u.window.n : 0;
    SlStatus st = hlo->n_operands == 2
                      ? conv_dims(cx, hlo, job.window, job.n_window, pv, &job.dims)
                      : SL_ERR_UNSUPPORTED;
    if (st == SL_ERR_NOMEM)
        return spmd_nomem(cx, err);
    job.replicate_fallback = pv->labels.feature_groups > 1 || pv->labels.batch_groups > 1;
    if (st != SL_OK) {
        spmd_warn(cx, "convolution with unsupported dimension labels: partitioned as replicated");
        return spmd_handle_default(cx, hlo, err);
    }
    return spmd_dot_helper(cx, &job, err);
}
