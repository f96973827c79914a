/* handle_conv.c - convolution through the dot engine (gspmd.md §F.1; seeds/000
 * HandleConvolution, ParseConvolutionDimsInfo, create_sharded_conv). Owns: classifying the
 * convolution's dims into dot roles (batch/feature dims and dot-like spatial dims), the
 * create-sharded-conv callback that rewrites the window from local sizes, and case 0
 * (PartitionConvolution: group-count alignment, both operands spatially tiled with lhs or rhs
 * halos and an all-reduce, output spatially tiled; then the grouped-dims recursion).
 * Does not own: the dot strategies (handle_dot.c) or the halo exchange (halo.c).
 * Invariant: every local convolution is built by create_conv. */
#include "spmd/dot_int.h"
#include "spmd/halo_int.h"

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
    DotDims dims; /* the source roles (grouped convolutions convert them per call) */
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

/* ---- case 0 (F.1): PartitionConvolution and the grouped-dims recursion ---- */

typedef enum ConvMap { MAP_PLAIN, MAP_FEATURE_GROUPED, MAP_BATCH_GROUPED } ConvMap;

/* Index maps between the three tensors (all of rank n_spatial + 2): r2l[rhs dim] = lhs dim,
 * o2l[out dim] = lhs dim, and their inverses. Plain: kernel output feature <-> input batch,
 * kernel input feature <-> input feature; feature-grouped swaps the kernel pair; batch-grouped
 * swaps the output pair. */
typedef struct ConvPerm {
    int64_t r2l[SPMD_MAX_RANK], l2r[SPMD_MAX_RANK], o2l[SPMD_MAX_RANK], l2o[SPMD_MAX_RANK];
} ConvPerm;

static void
conv_perm(const ConvLabels *L, ConvMap map, ConvPerm *m)
{
    bool fg = map == MAP_FEATURE_GROUPED, bg = map == MAP_BATCH_GROUPED;
    m->r2l[L->ko] = fg ? L->if_ : L->ib;
    m->r2l[L->ki] = fg ? L->ib : L->if_;
    m->o2l[L->ob] = bg ? L->if_ : L->ib;
    m->o2l[L->of] = bg ? L->ib : L->if_;
    for (uint32_t k = 0; k < L->n_spatial; k++) {
        m->r2l[L->ks[k]] = L->is[k];
        m->o2l[L->os[k]] = L->is[k];
    }
    for (uint32_t i = 0; i < L->n_spatial + 2; i++) {
        m->l2r[m->r2l[i]] = i;
        m->l2o[m->o2l[i]] = i;
    }
}

static int64_t
shards(const ShdSharding *s, int64_t dim)
{
    return dim >= 0 ? shd_dim_shards(s, (uint32_t)dim) : 1;
}

static int64_t
ceil_div(int64_t a, int64_t b)
{
    return b > 0 ? (a + b - 1) / b : a;
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

/* PartitionConvolutionWith{Feature,Batch}GroupCount: the group dim of one operand is sharded
 * over all N_cur devices; the other operand is aligned to it and every device convolves its
 * own groups. */
static SlStatus
group_count_aligned(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool feature,
                    IrInstr **out, SlError *err)
{
    const ConvLabels *L = &((const ConvPriv *)job->conv)->labels;
    const IrShape *ls = p->lhs.base_shape, *rs = p->rhs.base_shape;
    int64_t n = p->st->num_partitions, groups = feature ? L->feature_groups : L->batch_groups;
    int64_t ld = feature ? L->if_ : L->ib;
    if (groups <= 1 || groups % n)
        return SL_OK;
    if (feature ? (rs->dims[L->ko] % groups || ls->dims[L->if_] % groups)
                : (ls->dims[L->ib] != rs->dims[L->ko] || ls->dims[L->ib] != groups))
        return SL_OK;
    bool lp = shards(p->lhs.sharding, ld) == n, rp = shards(p->rhs.sharding, L->ko) == n;
    if (!lp && !rp)
        return SL_OK;
    ConvPerm m;
    conv_perm(L, feature ? MAP_FEATURE_GROUPED : MAP_BATCH_GROUPED, &m);
    const ShdSharding *lt = lp ? p->lhs.sharding : shd_transpose(cx->arena, p->rhs.sharding, m.l2r);
    const ShdSharding *rt = lp ? shd_transpose(cx->arena, p->lhs.sharding, m.r2l) : p->rhs.sharding;
    const ShdSharding *ot = lt ? shd_transpose(cx->arena, lt, m.o2l) : NULL;
    if (!lt || !rt || !ot)
        return SL_OK;
    TraceKV nums[] = {{"groups", (double)groups, NULL}, {"partitions", (double)n, NULL}};
    spmd_dot_decide(cx, job, feature ? "conv_feature_group_aligned" : "conv_batch_group_aligned",
                    lp ? "the lhs group dim is sharded over every device: align the rhs to it"
                       : "the rhs output feature dim is sharded over every device: align the "
                         "lhs to it",
                    NULL, 0, nums, 2);
    return emit_with(cx, job, p, lt, rt, ot, out, err);
}

/* The operand shardings of the spatial halo exchange: the smaller operand is aligned to the
 * larger (kernel spatial <-> input spatial with reversed dims in reversed device order,
 * kernel output feature <-> input batch, kernel input feature <-> input feature). False when
 * batch / output feature dims would be sharded or any spatial dim is base-dilated (upstream
 * has no halo plan for base dilation, not even on a parallel dim left unsharded). */
static bool
halo_operands(SpmdCtx *cx, const DotProblem *p, const ConvLabels *L, const int64_t *rev,
              uint32_t nrev, const ShdSharding **lt, const ShdSharding **rt)
{
    ConvPerm m;
    conv_perm(L, MAP_PLAIN, &m);
    if (ir_shape_byte_size(p->lhs.base_shape) < ir_shape_byte_size(p->rhs.base_shape)) {
        const ShdSharding *r = shd_reverse(cx->arena, p->rhs.sharding, rev, nrev);
        *lt = r ? shd_transpose(cx->arena, r, m.l2r) : NULL;
        *rt = p->rhs.sharding;
    } else {
        const ShdSharding *t = shd_transpose(cx->arena, p->lhs.sharding, m.r2l);
        *rt = t ? shd_reverse(cx->arena, t, rev, nrev) : NULL;
        *lt = p->lhs.sharding;
    }
    if (!*lt || !*rt || shards(*lt, L->ib) != 1 || shards(*rt, L->ko) != 1)
        return false;
    if (L->feature_groups > 1 && shards(*lt, L->if_) > 1)
        return false;
    for (uint32_t k = 0; k < L->n_spatial; k++) /* even unsharded (dot-batch-like) dims */
        if (p->window[k].lhs_dilate != 1)
            return false;
    return true;
}

/* Each rhs shard i covers kernel taps [i*R, (i+1)*R), so it reads the padded lhs range
 * [i*R*D - pl, i*R*D - pl + span), span = st*(WC-1) + (R-1)*D + 1: a window of size span and
 * stride R*D with one window per shard, which is what the windowed-input reshard builds (the
 * halos `(L - R*D)*i + pl` on the left, `(R*D - L)*(i+1) + 1 - D + st*(WC-1) - pl` on the
 * right). Fills the full-rank exchange window and the local conv window. */
static bool
lhs_halo_windows(const DotProblem *p, const ConvLabels *L, const ShdSharding *lt,
                 IrWindowDim *full, IrWindowDim *lw)
{
    const IrShape *ls = p->lhs.base_shape, *rs = p->rhs.base_shape;
    for (uint32_t i = 0; i < ls->rank; i++)
        full[i] = (IrWindowDim){1, 1, 0, 0, 1, 1, false};
    for (uint32_t k = 0; k < L->n_spatial; k++) {
        int64_t d = L->is[k], n = shards(lt, d);
        const IrWindowDim *wd = &p->window[k];
        lw[k] = *wd;
        if (n == 1)
            continue;
        int64_t base = ls->dims[d], r = ceil_div(rs->dims[L->ks[k]], n);
        int64_t rd = wd->rhs_dilate, wc = out_size(base, wd);
        if (wc < 1 || r < 1)
            return false;
        int64_t span = wd->stride * (wc - 1) + (r - 1) * rd + 1;
        full[d] = (IrWindowDim){span, r * rd, wd->pad_lo,
                                (n - 1) * r * rd + span - base - wd->pad_lo, 1, 1, false};
        lw[k].size = r;
        lw[k].pad_lo = lw[k].pad_hi = 0;
    }
    return true;
}

/* HaloExchangeToPadOnLeft: moves the uneven padding of the reversed rhs dims to the left
 * (a size-1 window with low padding), so that window reversal reads the taps in order. */
static SlStatus
rhs_pad_on_left(SpmdCtx *cx, const SpmdValue *r, const int64_t *rev, uint32_t nrev,
                IrInstr **out, SlError *err)
{
    const IrShape *b = r->base_shape;
    IrWindowDim *w = SL_NEW_ARRAY(cx->arena, IrWindowDim, b->rank);
    if (!w)
        return spmd_nomem(cx, err);
    bool any = false;
    for (uint32_t i = 0; i < b->rank; i++)
        w[i] = (IrWindowDim){1, 1, 0, 0, 1, 1, false};
    for (uint32_t k = 0; k < nrev; k++) {
        int64_t n = shards(r->sharding, rev[k]), size = b->dims[rev[k]];
        w[rev[k]].pad_lo = ceil_div(size, n) * n - size;
        any = any || w[rev[k]].pad_lo > 0;
    }
    *out = r->hlo;
    if (!any)
        return SL_OK;
    SpmdWindowedInput wi;
    SlStatus st = spmd_reshard_as_windowed_input(cx, r, w, r->sharding, NULL, true, &wi, err);
    if (st == SL_OK)
        *out = wi.sharded_input;
    return st;
}

/* Sum of the per-device partial convolutions over the devices that hold different operand
 * pieces (all N_cur when nothing is replicated), then the replicated result to the output. */
static SlStatus
sum_partials(SpmdCtx *cx, const DotJob *job, const DotProblem *p, const ShdSharding *lt,
             IrInstr *c, IrInstr **out, SlError *err)
{
    int64_t dims[SPMD_MAX_RANK];
    uint32_t nd = 0;
    for (uint32_t i = 0; i < p->lhs.base_shape->rank; i++)
        if (shards(lt, i) > 1)
            dims[nd++] = i;
    IrReplicaGroups groups;
    SlStatus st = spmd_groups_for_dims(cx, lt, dims, nd, &groups, err);
    if (st != SL_OK)
        return st;
    const char *saved = cx->coll_cause;
    cx->coll_cause = job->handler;
    IrInstr *ar = spmd_coll_all_reduce(cx, p->st, c, spmd_reducer(cx, SPMD_RED_ADD, c->shape.dtype),
                                       &groups);
    cx->coll_cause = saved;
    if (!ar)
        return spmd_nomem(cx, err);
    SpmdValue v = {ar, p->out_base, shd_replicated(cx->arena), p->st}, o;
    st = spmd_reshard(cx, &v, p->out, NULL, &o, err);
    *out = o.hlo;
    return st;
}

/* PartitionConvolutionWithSpatialDimensionHaloExchangeOnLHS (F.1 case 0 rule 2). */
static SlStatus
halo_on_lhs(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out, SlError *err)
{
    const ConvLabels *L = &((const ConvPriv *)job->conv)->labels;
    int64_t rev[SPMD_MAX_RANK];
    uint32_t nrev = 0;
    for (uint32_t k = 0; k < L->n_spatial; k++)
        if (p->window[k].reversal)
            rev[nrev++] = L->ks[k];
    const ShdSharding *lt, *rt;
    IrWindowDim *full = SL_NEW_ARRAY(cx->arena, IrWindowDim, p->lhs.base_shape->rank);
    IrWindowDim *lw = SL_NEW_ARRAY(cx->arena, IrWindowDim, L->n_spatial ? L->n_spatial : 1);
    if (!full || !lw)
        return spmd_nomem(cx, err);
    if (!halo_operands(cx, p, L, rev, nrev, &lt, &rt) || !lhs_halo_windows(p, L, lt, full, lw))
        return SL_OK;
    bool uneven = !shd_evenly_partitions(lt, p->lhs.base_shape);
    SpmdWindowedInput wi;
    SlStatus st = spmd_reshard_as_windowed_input_ex(cx, &p->lhs, full, lt, NULL, uneven, true,
                                                    &wi, err);
    if (st == SL_ERR_UNSUPPORTED)
        return SL_OK;
    if (st != SL_OK)
        return st;
    TraceKV nums[] = {{"reversed_dims", (double)nrev, NULL},
                      {"lhs_bytes", (double)ir_shape_byte_size(p->lhs.base_shape), NULL},
                      {"rhs_bytes", (double)ir_shape_byte_size(p->rhs.base_shape), NULL}};
    spmd_dot_decide(cx, job, "conv_halo_on_lhs",
                    "both operands are tiled on spatial dims: align the smaller operand, "
                    "exchange lhs halos so each device convolves its kernel slice over the "
                    "inputs it touches, and sum the partial results with an all-reduce",
                    NULL, 0, nums, 3);
    SpmdValue r;
    IrInstr *rh = NULL;
    st = spmd_reshard(cx, &p->rhs, rt, NULL, &r, err);
    if (st == SL_OK)
        st = rhs_pad_on_left(cx, &r, rev, nrev, &rh, err);
    if (st != SL_OK)
        return st;
    uint64_t skip = 0;
    for (uint32_t k = 0; k < nrev; k++)
        skip |= rev[k] < 64 ? (uint64_t)1 << rev[k] : 0;
    r.hlo = rh;
    rh = spmd_pad_with_value(cx, &r, NULL, skip);
    IrInstr *c = rh ? job->create(cx, job, wi.sharded_input, rh, lw) : NULL;
    if (!c)
        return spmd_nomem(cx, err);
    return sum_partials(cx, job, p, lt, c, out, err);
}

/* One spatial dim of the rhs-halo variant. With lhs shards of L, rhs shards of R, WC
 * output windows, stride st, window dilation D and low padding pl, lhs shard i meets the
 * kernel taps [(i*L + pl - (WC-1)*st) / D, (i*L + L + pl) / D) (rounded outwards), so the
 * rhs shard [i*R, (i+1)*R) needs the halos
 *   left(i)  = ceil((i*(R*D - L) + (WC-1)*st - pl) / D)
 *   right(i) = ceil(((i+1)*(L - R*D) + pl) / D)
 * and the local convolution slides that kernel piece over the lhs shard from the low padding
 * left(i)*D - i*(R*D - L) + pl. When that padding differs between shards, the lhs is padded
 * by its maximum on both sides and each shard dynamic-slices its own start. */
typedef struct RhsHaloDim {
    int64_t n;             /* shards of the dim (1: not exchanged) */
    SpmdCalc left, right;  /* halo sizes on the rhs, per shard */
    int64_t size;          /* rhs shard size with halos (the local window size) */
    SpmdCalc pad_lo;       /* the local low padding, per shard */
    int64_t pad_lo_max;    /* its maximum over the shards */
    int64_t lhs_size;      /* L */
} RhsHaloDim;

static SpmdCalc
calc_of(int64_t m, int64_t o, int64_t d)
{
    SpmdCalc c = {0};
    spmd_calc_add(&c, 1, spmd_mad(m, o, d));
    return c;
}

static bool
varies(const SpmdCalc *c, int64_t n)
{
    for (int64_t i = 1; i < n; i++)
        if (spmd_calc_eval(c, i) != spmd_calc_eval(c, 0))
            return true;
    return false;
}

/* The local window size: upstream's R + max left + max right, grown where it would not
 * reach the last kernel tap a shard meets. The halos are rounded outwards, so shard 0's left
 * halo (taken as explicit padding) may exceed what it needs and push its window short of
 * its right halo (window dilation with L > R*D); upstream would then drop those taps. */
static int64_t
rhs_halo_cover(const RhsHaloDim *h, int64_t n, int64_t l, int64_t r, int64_t rhs_size,
               const IrWindowDim *wd)
{
    int64_t size = h->size, d = wd->rhs_dilate;
    for (int64_t i = 0; i < n; i++) {
        /* last tap t with some output window w in [0, wc) reading lhs (i+1)*l - 1 or less:
         * t*d <= (i+1)*l - 1 + pl (w = 0); taps past the kernel hold zeros */
        int64_t num = (i + 1) * l - 1 + wd->pad_lo;
        int64_t last = num >= 0 ? num / d : -1;
        last = last < rhs_size - 1 ? last : rhs_size - 1;
        int64_t first = i * r - spmd_calc_eval(&h->left, i); /* where the window starts */
        if (last - first + 1 > size)
            size = last - first + 1;
    }
    return size;
}

/* Fills hd[] and the local conv window lw[]; false when upstream has no rhs-halo plan (base
 * dilation or reversal on any spatial dim) or a halo reaches beyond what the exchange builds. */
static bool
rhs_halo_plan(const DotProblem *p, const ConvLabels *L, const ShdSharding *rt, RhsHaloDim *hd,
              IrWindowDim *lw)
{
    const IrShape *ls = p->lhs.base_shape, *rs = p->rhs.base_shape;
    for (uint32_t k = 0; k < L->n_spatial; k++) {
        const IrWindowDim *wd = &p->window[k];
        int64_t n = shards(rt, L->ks[k]), base = ls->dims[L->is[k]];
        lw[k] = *wd;
        hd[k] = (RhsHaloDim){.n = n};
        if (wd->lhs_dilate != 1 || wd->reversal)
            return false;
        if (n == 1)
            continue;
        int64_t l = ceil_div(base, n), r = ceil_div(rs->dims[L->ks[k]], n);
        int64_t wc = out_size(base, wd), st = wd->stride, d = wd->rhs_dilate, pl = wd->pad_lo;
        if (wc < 1 || st < 1 || d < 1)
            return false;
        RhsHaloDim *h = &hd[k];
        h->lhs_size = l;
        h->left = calc_of(r * d - l, (wc - 1) * st - pl + d - 1, d);
        h->right = calc_of(l - r * d, l - r * d + pl + d - 1, d);
        h->size = r + spmd_calc_max(&h->left, 1, n) + spmd_calc_max(&h->right, 0, n - 1);
        h->size = rhs_halo_cover(h, n, l, r, rs->dims[L->ks[k]], wd);
        for (uint32_t t = 0; t < h->left.n; t++)
            spmd_calc_add(&h->pad_lo, d * h->left.coef[t], h->left.t[t]);
        spmd_calc_add(&h->pad_lo, -1, spmd_mad(r * d - l, -pl, 1));
        h->pad_lo_max = spmd_calc_max(&h->pad_lo, 0, n);
        lw[k].size = h->size;
        lw[k].pad_lo = varies(&h->pad_lo, n) ? 0 : h->pad_lo_max;
        lw[k].pad_hi = wc * st + (h->size - 1) * d - h->pad_lo_max - l;
        if (!spmd_halo_can_exchange(n, r, rs->dims[L->ks[k]], &h->left, &h->right,
                                    spmd_calc_eval(&h->left, 0), h->size))
            return false;
    }
    return true;
}
/* The lhs of the rhs-halo variant: where the local low padding varies between shards, pad
 * by its maximum on both sides and dynamic-slice from maximum - padding(i). */
static IrInstr *
rhs_halo_lhs(SpmdCtx *cx, const DotProblem *p, const ConvLabels *L, const ShdSharding *lt,
             const RhsHaloDim *hd, IrInstr *x)
{
    IrPadDim pads[SPMD_MAX_RANK];
    IrInstr *offs[SPMD_MAX_RANK];
    int64_t sizes[SPMD_MAX_RANK];
    bool any = false;
    IrInstr *zero = NULL;
    for (uint32_t d = 0; d < x->shape.rank; d++) {
        pads[d] = (IrPadDim){0, 0, 0};
        sizes[d] = x->shape.dims[d];
    }
    for (uint32_t k = 0; k < L->n_spatial; k++) {
        const RhsHaloDim *h = &hd[k];
        if (h->n == 1 || !varies(&h->pad_lo, h->n))
            continue;
        int64_t d = L->is[k];
        SpmdCalc start = calc_of(0, h->pad_lo_max, 1);
        for (uint32_t t = 0; t < h->pad_lo.n; t++)
            spmd_calc_add(&start, -h->pad_lo.coef[t], h->pad_lo.t[t]);
        if (!zero) {
            zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
            for (uint32_t i = 0; i < x->shape.rank; i++)
                offs[i] = zero;
        }
        pads[d] = (IrPadDim){h->pad_lo_max, h->pad_lo_max, 0};
        sizes[d] = h->lhs_size + h->pad_lo_max;
        offs[d] = spmd_calc_emit(cx, &start, spmd_partition_ordinal(cx, p->st, lt, (uint32_t)d));
        any = true;
    }
    if (!any)
        return x;
    IrInstr *padded = spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, x->shape.dtype, 0), pads);
    return spmd_emit_dynamic_slice(cx, padded, offs, sizes);
}

/* PartitionConvolutionWithSpatialDimensionHaloExchangeOnRHS (conv_halo_exchange_always_on_lhs
 * = false): operands aligned as for the lhs variant, the rhs gets the halos, each device
 * convolves its lhs shard with the kernel taps it meets, and the partials are summed. */
static SlStatus
halo_on_rhs(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out, SlError *err)
{
    const ConvLabels *L = &((const ConvPriv *)job->conv)->labels;
    const ShdSharding *lt, *rt;
    RhsHaloDim *hd = SL_NEW_ARRAY(cx->arena, RhsHaloDim, L->n_spatial ? L->n_spatial : 1);
    IrWindowDim *lw = SL_NEW_ARRAY(cx->arena, IrWindowDim, L->n_spatial ? L->n_spatial : 1);
    if (!hd || !lw)
        return spmd_nomem(cx, err);
    if (!halo_operands(cx, p, L, NULL, 0, &lt, &rt) || !rhs_halo_plan(p, L, rt, hd, lw))
        return SL_OK;
    TraceKV nums[] = {{"lhs_bytes", (double)ir_shape_byte_size(p->lhs.base_shape), NULL},
                      {"rhs_bytes", (double)ir_shape_byte_size(p->rhs.base_shape), NULL}};
    spmd_dot_decide(cx, job, "conv_halo_on_rhs",
                    "both operands are tiled on spatial dims and "
                    "conv_halo_exchange_always_on_lhs is false: align the smaller operand, "
                    "exchange rhs halos so each device convolves its input shard with the "
                    "kernel taps it meets, and sum the partial results with an all-reduce",
                    NULL, 0, nums, SL_COUNTOF(nums));
    SpmdValue l, r;
    SlStatus st = spmd_reshard(cx, &p->lhs, lt, NULL, &l, err);
    if (st == SL_OK)
        st = spmd_reshard(cx, &p->rhs, rt, NULL, &r, err);
    if (st != SL_OK)
        return st;
    IrInstr *lh = spmd_pad_with_value(cx, &l, NULL, 0);
    IrInstr *rh = spmd_pad_with_value(cx, &r, NULL, 0);
    lh = lh ? rhs_halo_lhs(cx, p, L, lt, hd, lh) : NULL;
    for (uint32_t k = 0; k < L->n_spatial && rh; k++) {
        const RhsHaloDim *h = &hd[k];
        uint32_t d = (uint32_t)L->ks[k];
        if (h->n == 1)
            continue;
        IrInstr *ord = spmd_partition_ordinal(cx, p->st, rt, d);
        rh = spmd_halo_exchange_valid(cx, p->st, rt, d, rh, p->rhs.base_shape->dims[d], &h->left,
                                      &h->right, spmd_calc_eval(&h->left, 0), h->size, ord);
    }
    IrInstr *c = lh && rh ? job->create(cx, job, lh, rh, lw) : NULL;
    if (!c)
        return spmd_nomem(cx, err);
    return sum_partials(cx, job, p, lt, c, out, err);
}

/* Output spatially tiled (F.1 case 0 rule 3, PartitionConvolutionTiledOutput): lhs with
 * halos from the windowed-input reshard, rhs replicated. */
static SlStatus
output_spatial(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
               SlError *err)
{
    const ConvLabels *L = &((const ConvPriv *)job->conv)->labels;
    if (!shd_is_tiled(p->out) || shards(p->out, L->of) > 1 ||
        p->lhs.base_shape->rank > SPMD_MAX_RANK)
        return SL_OK;
    if ((L->feature_groups > 1 || L->batch_groups > 1) &&
        (shards(p->lhs.sharding, L->feature_groups > 1 ? L->if_ : L->ib) > 1 ||
         shards(p->rhs.sharding, L->ko) > 1))
        return SL_OK;
    ConvPerm m;
    conv_perm(L, MAP_PLAIN, &m);
    const ShdSharding *lt = shd_transpose(cx->arena, p->out, m.l2o);
    IrWindowDim *full = SL_NEW_ARRAY(cx->arena, IrWindowDim, p->lhs.base_shape->rank);
    if (!lt || !full)
        return SL_OK;
    for (uint32_t i = 0; i < p->lhs.base_shape->rank; i++)
        full[i] = (IrWindowDim){1, 1, 0, 0, 1, 1, false};
    for (uint32_t k = 0; k < L->n_spatial; k++)
        full[L->is[k]] = p->window[k];
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

/* PartitionConvolution: group-count alignment, both operands tiled (halo exchange), output
 * tiled; *out stays NULL when none applies. */
static SlStatus
partition_convolution(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
                      SlError *err)
{
    SlStatus st = group_count_aligned(cx, job, p, false, out, err);
    if (st == SL_OK && !*out)
        st = group_count_aligned(cx, job, p, true, out, err);
    bool tiled = shd_is_tiled(p->lhs.sharding) && shd_is_tiled(p->rhs.sharding);
    bool on_lhs = cx->opts->conv_halo_exchange_always_on_lhs;
    if (st == SL_OK && !*out && tiled && !on_lhs)
        st = halo_on_rhs(cx, job, p, out, err);
    else if (st == SL_OK && !*out && tiled)
        st = halo_on_lhs(cx, job, p, out, err);
    if (st == SL_OK && !*out)
        st = output_spatial(cx, job, p, out, err);
    return st;
}

/* Grouped convolutions: the grouped feature (or batch) dim becomes a batch role
 * (ConvertDimNumsWith{Feature,Batch}GroupCount), always from the source roles. */
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
    TraceKV nums[] = {{"lhs_group_partitions", (double)lb, NULL},
                      {"rhs_group_partitions", (double)rb, NULL},
                      {"out_group_partitions", (double)ob, NULL}};
    spmd_dot_decide(cx, gj, "grouped_conv_on_group_dim",
                    "grouped convolution: partition on the grouped dim only, as the most "
                    "partitioned of lhs / rhs / output has it, and partially replicate the "
                    "other dims",
                    NULL, 0, nums, 3);
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

/* PartitionConvOnBatchOrFeatureGroupedDims: group on the converted batch dims (E.6), else
 * (second pass) partition on the grouped dim only. */
static SlStatus
grouped_conv(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm, IrInstr **out,
             SlError *err)
{
    const ConvPriv *pv = job->conv;
    const ConvLabels *L = &pv->labels;
    const IrShape *ls = p->lhs.base_shape, *rs = p->rhs.base_shape;
    int64_t gd = L->feature_groups > 1 ? L->if_ : L->ib;
    int64_t groups = L->feature_groups > 1 ? L->feature_groups : L->batch_groups;
    if (ls->dims[gd] != rs->dims[L->ko] &&
        !(shd_is_tiled(p->lhs.sharding) && groups % shards(p->lhs.sharding, gd) == 0))
        return SL_OK;
    DotJob gj = *job;
    gj.dims = grouped_dims(cx, &pv->dims, L);
    if (!gj.dims.role[DOT_BATCH])
        return spmd_nomem(cx, err);
    SlStatus st = spmd_dot_group_on_batch(cx, &gj, p, rm, out, err);
    if (st != SL_OK || *out || rm)
        return st;
    return grouped_dim_only(cx, &gj, p, L, out, err);
}

static SlStatus
conv_case0(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm, IrInstr **out,
           bool *owned, SlError *err)
{
    const ConvLabels *L = &((const ConvPriv *)job->conv)->labels;
    const DotDims *d = &job->dims;
    bool grouped = L->feature_groups > 1 || L->batch_groups > 1;
    bool spatial = spmd_dot_parts(p->lhs.sharding, d, DOT_SPATIAL, DOT_LHS) > 1 ||
                   spmd_dot_parts(p->rhs.sharding, d, DOT_SPATIAL, DOT_RHS) > 1 ||
                   spmd_dot_parts(p->out, d, DOT_SPATIAL, DOT_OUT) > 1;
    bool other = spmd_dot_parts(p->lhs.sharding, d, DOT_BATCH, DOT_LHS) > 1 ||
                 spmd_dot_parts(p->rhs.sharding, d, DOT_BATCH, DOT_RHS) > 1 ||
                 spmd_dot_parts(p->out, d, DOT_BATCH, DOT_OUT) > 1 ||
                 (spmd_dot_parts(p->lhs.sharding, d, DOT_CONTRACTING, DOT_LHS) > 1 &&
                  spmd_dot_parts(p->rhs.sharding, d, DOT_CONTRACTING, DOT_RHS) > 1);
    if (!grouped && (d->n[DOT_SPATIAL] == 0 || !spatial || other))
        return SL_OK;
    if (L->feature_groups > 1 && p->rhs.hlo->shape.dims[L->ki] > 1) {
        *owned = true; /* upstream: grouped with a local kernel input feature > 1 */
        spmd_dot_decide(cx, job, "grouped_conv_unsupported",
                        "feature-grouped convolution whose local kernel input feature dim is "
                        "larger than 1: no partitioned strategy",
                        NULL, 0, NULL, 0);
        return SL_OK;
    }
    SlStatus st = partition_convolution(cx, job, p, out, err);
    if (st != SL_OK || *out || !grouped)
        return st;
    *owned = true;
    return grouped_conv(cx, job, p, rm, out, err);
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
        spmd_warn(cx, TRACE_WARN_OTHER, "convolution with unsupported dimension labels: partitioned as replicated");
        return spmd_handle_default(cx, hlo, err);
    }
    pv->dims = job.dims;
    return spmd_dot_helper(cx, &job, err);
}
