/* handle_dot.c - the dot engine (gspmd.md §E; seeds/000 HandleDot, HandleDotHelper,
 * PartitionDot). Owns: dimension roles (E.1), "sharding seen from another tensor" (E.2), the
 * recursive strategy order (E.3: base case before partial match, group on batch /
 * non-contracting / contracting dims, removal of output partial replication, base case after
 * partial match, inference from the output), grouping operands into per-group problems that
 * run in grouped SpmdStates, and one decision event per choice. Does not own: collectives
 * (reshard.c, collectives.c), the windowed loop (windowed_einsum.c), convolution windows
 * (handle_conv.c). Invariants: every local dot is emitted by DotJob.create; a strategy checks
 * that it applies (pure sharding arithmetic) before it emits anything. */
#include "spmd/dot_int.h"

#include <string.h>

/* Strategy names in the order PartitionDot tries them; a decision lists the earlier ones as
 * the alternatives that were considered and not taken. */
enum {
    S_CONV, S_BATCH_PARALLEL, S_BATCH_RESHARD_CHEAP, S_WINDOWED, S_BATCH_RESHARD,
    S_LHS_MATCHES_OUT, S_RHS_MATCHES_OUT, S_GROUP_BATCH, S_GROUP_NC, S_GROUP_CONTRACTING,
    S_REMOVE_PARTIAL, S_OUT_BATCH, S_OUT_LHS_NC, S_OUT_RHS_NC, S_REPLICATED_OUT_CONTRACTING,
    S_INFER_FROM_OUTPUT, S_REPLICATE, S_COUNT
};
static const char *const k_strategy[S_COUNT] = {
    "conv_spatial", "batch_parallel", "batch_reshard_without_all_reduce", "windowed_einsum",
    "batch_reshard", "lhs_matches_output_replicate_rhs", "rhs_matches_output_replicate_lhs",
    "group_on_batch", "group_on_non_contracting", "group_on_contracting",
    "remove_output_partial_replication", "output_batch_partitioned",
    "output_lhs_non_contracting_partitioned", "output_rhs_non_contracting_partitioned",
    "replicated_output_sharded_contracting", "infer_operands_from_output", "replicate",
};

/* ---- dimension roles and counts (E.1, E.2) ---- */

int64_t
spmd_dot_dim(const DotDimMap *m, DotSide side)
{
    return side == DOT_LHS ? m->lhs : side == DOT_RHS ? m->rhs : m->out;
}

int64_t
spmd_dot_parts(const ShdSharding *s, const DotDims *d, DotRole role, DotSide side)
{
    if (!s || !shd_is_tiled(s))
        return 1;
    int64_t p = 1;
    for (uint32_t k = 0; k < d->n[role]; k++) {
        int64_t dim = spmd_dot_dim(&d->role[role][k], side);
        if (dim >= 0)
            p *= shd_dim_shards(s, (uint32_t)dim);
    }
    return p;
}

const ShdSharding *
spmd_dot_seen_from(SpmdCtx *cx, const DotDims *d, const ShdSharding *s, DotSide from, DotSide to)
{
    int64_t map[SPMD_MAX_RANK];
    if (!s || d->rank[from] > SPMD_MAX_RANK)
        return NULL;
    if (!shd_is_tiled(s))
        return s;
    for (uint32_t i = 0; i < d->rank[from]; i++)
        map[i] = -1;
    for (int r = 0; r < DOT_ROLE_COUNT; r++)
        for (uint32_t k = 0; k < d->n[r]; k++) {
            int64_t f = spmd_dot_dim(&d->role[r][k], from);
            if (f >= 0)
                map[f] = spmd_dot_dim(&d->role[r][k], to);
        }
    return shd_transpose_collapsed(cx->arena, s, map, d->rank[from], d->rank[to]);
}

/* The tensor dims of one role on one side, into `out`; returns the count. */
static uint32_t
role_dims(const DotDims *d, DotRole role, DotSide side, int64_t *out)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < d->n[role]; k++) {
        int64_t dim = spmd_dot_dim(&d->role[role][k], side);
        if (dim >= 0)
            out[n++] = dim;
    }
    return n;
}

typedef struct Counts {
    int64_t n, lb, rb, ob, lc, rc, lnc, rnc, olnc, ornc, ls, rs, os;
} Counts;

static void
counts_of(const DotJob *job, const DotProblem *p, Counts *c)
{
    const DotDims *d = &job->dims;
    const ShdSharding *l = p->lhs.sharding, *r = p->rhs.sharding, *o = p->out;
    c->n = p->st->num_partitions;
    c->lb = spmd_dot_parts(l, d, DOT_BATCH, DOT_LHS);
    c->rb = spmd_dot_parts(r, d, DOT_BATCH, DOT_RHS);
    c->ob = spmd_dot_parts(o, d, DOT_BATCH, DOT_OUT);
    c->lc = spmd_dot_parts(l, d, DOT_CONTRACTING, DOT_LHS);
    c->rc = spmd_dot_parts(r, d, DOT_CONTRACTING, DOT_RHS);
    c->lnc = spmd_dot_parts(l, d, DOT_LHS_NC, DOT_LHS);
    c->rnc = spmd_dot_parts(r, d, DOT_RHS_NC, DOT_RHS);
    c->olnc = spmd_dot_parts(o, d, DOT_LHS_NC, DOT_OUT);
    c->ornc = spmd_dot_parts(o, d, DOT_RHS_NC, DOT_OUT);
    c->ls = spmd_dot_parts(l, d, DOT_SPATIAL, DOT_LHS);
    c->rs = spmd_dot_parts(r, d, DOT_SPATIAL, DOT_RHS);
    c->os = spmd_dot_parts(o, d, DOT_SPATIAL, DOT_OUT);
}

/* ---- decisions (issue 4 item 6) ---- */

void
spmd_dot_decide(SpmdCtx *cx, const DotJob *job, const char *strategy, const char *reason,
                const char *const *alts, uint32_t n_alts, const TraceKV *nums, uint32_t n_nums)
{
    if (!cx->trace->ops->decision)
        return;
    TraceDecision d = {job->hlo, job->handler, strategy, reason, alts, n_alts, nums, n_nums};
    cx->trace->ops->decision(cx->trace, &d);
}

static void
decide(SpmdCtx *cx, const DotJob *job, const DotProblem *p, int strategy, const char *reason)
{
    Counts c;
    counts_of(job, p, &c);
    TraceKV nums[] = {
        {"partitions", (double)c.n, NULL},
        {"lhs_batch", (double)c.lb, NULL},
        {"rhs_batch", (double)c.rb, NULL},
        {"out_batch", (double)c.ob, NULL},
        {"lhs_contracting", (double)c.lc, NULL},
        {"rhs_contracting", (double)c.rc, NULL},
        {"lhs_non_contracting", (double)c.lnc, NULL},
        {"rhs_non_contracting", (double)c.rnc, NULL},
        {"out_lhs_non_contracting", (double)c.olnc, NULL},
        {"out_rhs_non_contracting", (double)c.ornc, NULL},
        {"lhs_local_bytes", (double)ir_shape_byte_size(&p->lhs.hlo->shape), NULL},
        {"rhs_local_bytes", (double)ir_shape_byte_size(&p->rhs.hlo->shape), NULL},
        {"out_base_bytes", (double)ir_shape_byte_size(p->out_base), NULL},
    };
    int first = job->conv_case ? S_CONV : S_BATCH_PARALLEL;
    uint32_t n_alts = strategy > first ? (uint32_t)(strategy - first) : 0;
    spmd_dot_decide(cx, job, k_strategy[strategy], reason, k_strategy + first, n_alts, nums,
                    SL_COUNTOF(nums));
}

/* ---- small value helpers ---- */

static bool
is_partial(const ShdSharding *s)
{
    return s && shd_is_tiled(s) && shd_has_partial_replication(s);
}

/* Index of the replication tile dim when it is the only subgroup dim, else -1. */
static int64_t
replication_dim(const ShdSharding *s)
{
    if (!is_partial(s) || s->n_subgroups != 1 || s->subgroups[0] != SHD_SUB_REPLICATED)
        return -1;
    return (int64_t)shd_data_rank(s);
}

static IrInstr *
local_op(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr *l, IrInstr *r)
{
    if (!l || !r)
        return NULL;
    return job->create(cx, job, l, r, p->window);
}

/* ---- block-scaled operands (upstream PartitionedHloMX): a scale follows its operand ---- */

/* The scale travelling with operand `v` of `p` (NULL for plain dots). */
static const SpmdValue *
scale_of(const DotProblem *p, const SpmdValue *v)
{
    const SpmdValue *s = v == &p->lhs ? &p->lhs_scale : v == &p->rhs ? &p->rhs_scale : NULL;
    return s && s->hlo ? s : NULL;
}

/* local_op for operands that may carry scales (`ls`, `rs` NULL or hlo NULL when plain). */
static IrInstr *
local_op_mx(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr *l, IrInstr *r,
            const SpmdValue *ls, const SpmdValue *rs)
{
    if (!job->create_scaled)
        return local_op(cx, job, p, l, r);
    if (!l || !r || !ls || !rs || !ls->hlo || !rs->hlo)
        return NULL;
    return job->create_scaled(cx, job, l, r, ls->hlo, rs->hlo);
}

/* Reshards the scale of `v` (if any) to `t` (NULL = replicate) into *out (hlo NULL if none). */
static SlStatus
reshard_scale(SpmdCtx *cx, const DotProblem *p, const SpmdValue *v, const ShdSharding *t,
              SpmdValue *out, SlError *err)
{
    const SpmdValue *sc = scale_of(p, v);
    memset(out, 0, sizeof(*out));
    if (!sc)
        return SL_OK;
    return t ? spmd_reshard(cx, sc, t, NULL, out, err) : spmd_replicate(cx, sc, out, err);
}

/* Reshards local `hlo` (in sharding `s`, state p->st) to the problem's output sharding. */
static SlStatus
to_out(SpmdCtx *cx, const DotProblem *p, IrInstr *hlo, const ShdSharding *s, IrInstr **out,
       SlError *err)
{
    if (!hlo || !s)
        return spmd_nomem(cx, err);
    SpmdValue v = {hlo, p->out_base, s, p->st}, r;
    SlStatus st = spmd_reshard(cx, &v, p->out, NULL, &r, err);
    if (st == SL_OK)
        *out = r.hlo;
    return st;
}

static SlStatus
reshard_to(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *t, SpmdValue *out, SlError *err)
{
    if (!t)
        return spmd_nomem(cx, err);
    return spmd_reshard(cx, v, t, NULL, out, err);
}

static const IrShape *
group_base(SpmdCtx *cx, const IrShape *base, const ShdGrouped *g)
{
    IrShape *s = SL_NEW(cx->arena, IrShape);
    if (!s)
        return NULL;
    *s = ir_shape_clone(cx->arena, base);
    for (uint32_t i = 0; i < g->n_group_dims; i++) {
        int64_t d = g->group_dims[i], k = g->group_dim_sizes[i];
        if (d >= 0 && (uint32_t)d < s->rank && k > 0)
            s->dims[d] = (s->dims[d] + k - 1) / k;
    }
    return s;
}

/* Reshards `v` to the ungrouped form of `g` (group dims optionally replicated: the other
 * operand of E.7/E.8 gathered along them) and returns the per-group value in `gst`. */
static SlStatus
enter_group(SpmdCtx *cx, const SpmdValue *v, const ShdGrouped *g, bool replicate_group_dims,
            const SpmdState *gst, SpmdValue *out, SlError *err)
{
    const ShdSharding *t = g->n_group_dims == 0 && !shd_is_tiled(g->inner)
                               ? shd_replicated(cx->arena) /* replicated in every group */
                               : shd_ungroup(cx->arena, g);
    if (t && replicate_group_dims) {
        int64_t dims[SPMD_MAX_RANK];
        uint32_t n = 0;
        for (uint32_t i = 0; i < g->n_group_dims && n < SPMD_MAX_RANK; i++)
            if (g->group_dims[i] < (int64_t)g->data_rank)
                dims[n++] = g->group_dims[i];
        t = shd_partially_replicate_dims(cx->arena, t, dims, n);
    }
    SpmdValue r;
    SlStatus st = reshard_to(cx, v, t, &r, err);
    if (st != SL_OK)
        return st;
    const IrShape *b = replicate_group_dims ? v->base_shape : group_base(cx, v->base_shape, g);
    if (!b || !g->inner)
        return spmd_nomem(cx, err);
    *out = (SpmdValue){r.hlo, b, g->inner, gst};
    return SL_OK;
}

/* enter_group for operand `v` of `p` and, for block-scaled dots, its scale (same target). */
static SlStatus
enter_group_mx(SpmdCtx *cx, const DotProblem *p, const SpmdValue *v, const ShdGrouped *g,
               bool replicate_group_dims, const SpmdState *gst, SpmdValue *out,
               SpmdValue *out_scale, SlError *err)
{
    const SpmdValue *sc = scale_of(p, v);
    memset(out_scale, 0, sizeof(*out_scale));
    SlStatus st = enter_group(cx, v, g, replicate_group_dims, gst, out, err);
    if (st == SL_OK && sc)
        st = enter_group(cx, sc, g, replicate_group_dims, gst, out_scale, err);
    return st;
}

/* A grouping where every group is replicated inside (used for replicated operands). */
static ShdGrouped
replicated_in_groups(SpmdCtx *cx, const ShdGrouped *ref, const int64_t *dims, uint32_t n,
                     uint32_t rank)
{
    ShdGrouped g = *ref;
    g.n_group_dims = n;
    g.group_dims = n ? SL_DUP_ARRAY(cx->arena, int64_t, dims, n) : NULL;
    g.group_dim_sizes = n ? SL_DUP_ARRAY(cx->arena, int64_t, ref->group_dim_sizes, n) : NULL;
    g.inner = shd_replicated(cx->arena);
    g.data_rank = rank;
    return g;
}

static bool
same_groups(const ShdGrouped *a, const ShdGrouped *b)
{
    if (!a->device_groups || !b->device_groups || a->n_groups != b->n_groups ||
        a->group_size != b->group_size)
        return false;
    return !memcmp(a->device_groups, b->device_groups,
                   (size_t)(a->n_groups * a->group_size) * sizeof(int64_t));
}

/* AlignGroupsWith ignoring group order: x's groups are first put in the order of the `ref`
 * groups holding the same devices (when every group maps onto one), then aligned. */
static ShdGrouped
align_any_order(SpmdCtx *cx, const ShdGrouped *x, const ShdGrouped *ref)
{
    int64_t G = x->n_groups, S = x->group_size;
    int64_t *dg = SL_NEW_ARRAY(cx->arena, int64_t, G * S);
    if (!dg || G != ref->n_groups || S != ref->group_size)
        return shd_align_groups_with(cx->arena, x, ref);
    for (int64_t k = 0; k < G * S; k++)
        dg[k] = -1;
    for (int64_t g = 0; g < G; g++) {
        int64_t target = -1;
        for (int64_t r = 0; r < G && target < 0; r++)
            for (int64_t m = 0; m < S; m++)
                target = ref->device_groups[r * S + m] == x->device_groups[g * S] ? r : target;
        for (int64_t m = 0; target >= 0 && m < S; m++) {
            bool in = false;
            for (int64_t q = 0; q < S; q++)
                in = in || ref->device_groups[target * S + q] == x->device_groups[g * S + m];
            target = in ? target : -1;
        }
        if (target < 0 || dg[target * S] >= 0)
            return shd_align_groups_with(cx->arena, x, ref);
        memcpy(dg + target * S, x->device_groups + g * S, (size_t)S * sizeof(int64_t));
    }
    ShdGrouped y = *x;
    y.device_groups = dg;
    return shd_align_groups_with(cx->arena, &y, ref);
}

/* x grouped on `dims`, aligned to `ref`; *exact when no device moves are needed. */
static ShdGrouped
group_aligned(SpmdCtx *cx, const ShdSharding *x, const int64_t *dims, uint32_t n,
              const int64_t *shards, const ShdGrouped *ref, bool *exact)
{
    ShdGrouped g = shd_group_on_dims(cx->arena, x, dims, n, shards);
    *exact = false;
    if (!g.inner || g.n_groups != ref->n_groups)
        return (ShdGrouped){0};
    ShdGrouped a = shd_align_groups_with(cx->arena, &g, ref);
    const ShdSharding *u = shd_ungroup(cx->arena, &a);
    *exact = u && shd_equal(u, x) && same_groups(&a, ref);
    return a;
}

/* ---- base case before partial match (E.4) ---- */

/* E.4 rules 2 and 4: output batch-partitioned like one operand; reshard the other one. */
static SlStatus
batch_with_reshard(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool may_all_reduce,
                   IrInstr **out, SlError *err)
{
    Counts c;
    counts_of(job, p, &c);
    if (c.ob != c.n)
        return SL_OK;
    const DotDims *d = &job->dims;
    for (int side = 0; side < 2; side++) {
        const SpmdValue *me = side ? &p->rhs : &p->lhs, *other = side ? &p->lhs : &p->rhs;
        DotSide ms = side ? DOT_RHS : DOT_LHS, os = side ? DOT_LHS : DOT_RHS;
        if ((side ? c.rb : c.lb) != c.n)
            continue;
        const ShdSharding *o2me = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, ms);
        const ShdSharding *me2o = spmd_dot_seen_from(cx, d, me->sharding, ms, os);
        if (!o2me || !me2o || !shd_equal(o2me, me->sharding))
            continue;
        int64_t s1[SPMD_MAX_RANK], s2[SPMD_MAX_RANK];
        if (!may_all_reduce && !shd_can_reshard_with_collective_permute(other->sharding, me2o) &&
            shd_all_to_all_dims(other->sharding, me2o, s1, s2, SPMD_MAX_RANK) == 0)
            continue;
        SpmdValue r, rsc;
        SlStatus st = reshard_to(cx, other, me2o, &r, err);
        if (st == SL_OK)
            st = reshard_scale(cx, p, other, me2o, &rsc, err);
        if (st != SL_OK)
            return st;
        decide(cx, job, p, may_all_reduce ? S_BATCH_RESHARD : S_BATCH_RESHARD_CHEAP,
               side ? "the output is batch-partitioned exactly like the rhs, so the lhs is "
                      "resharded to match it"
                    : "the output is batch-partitioned exactly like the lhs, so the rhs is "
                      "resharded to match it");
        const SpmdValue *msc = scale_of(p, me);
        *out = side ? local_op_mx(cx, job, p, r.hlo, me->hlo, &rsc, msc)
                    : local_op_mx(cx, job, p, me->hlo, r.hlo, msc, &rsc);
        return *out ? SL_OK : spmd_nomem(cx, err);
    }
    return SL_OK;
}

/* E.4 rules 5 and 6: one operand is sharded exactly like the output on its free dims. */
static SlStatus
operand_matches_output(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
                       SlError *err)
{
    Counts c;
    counts_of(job, p, &c);
    for (int side = 0; side < 2; side++) {
        int64_t nc = side ? c.rnc : c.lnc, onc = side ? c.ornc : c.olnc;
        const SpmdValue *me = side ? &p->rhs : &p->lhs, *other = side ? &p->lhs : &p->rhs;
        if (nc != c.n || onc != c.n)
            continue;
        const ShdSharding *me2o =
            spmd_dot_seen_from(cx, &job->dims, me->sharding, side ? DOT_RHS : DOT_LHS, DOT_OUT);
        if (!me2o || !shd_equal(me2o, p->out))
            continue;
        SpmdValue r, rsc;
        SlStatus st = spmd_replicate(cx, other, &r, err);
        if (st == SL_OK)
            st = reshard_scale(cx, p, other, NULL, &rsc, err);
        if (st != SL_OK)
            return st;
        decide(cx, job, p, side ? S_RHS_MATCHES_OUT : S_LHS_MATCHES_OUT,
               "one operand is already sharded like the output on its free dims, so the "
               "other operand is replicated (all-gathered)");
        const SpmdValue *msc = scale_of(p, me);
        *out = side ? local_op_mx(cx, job, p, r.hlo, me->hlo, &rsc, msc)
                    : local_op_mx(cx, job, p, me->hlo, r.hlo, msc, &rsc);
        return *out ? SL_OK : spmd_nomem(cx, err);
    }
    return SL_OK;
}

static SlStatus
base_case_before(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
                 SlError *err)
{
    if (is_partial(p->out))
        return SL_OK;
    Counts c;
    counts_of(job, p, &c);
    const DotDims *d = &job->dims;
    const ShdSharding *l2r = spmd_dot_seen_from(cx, d, p->lhs.sharding, DOT_LHS, DOT_RHS);
    if (c.lb == c.rb && c.rb == c.n && l2r && shd_equal(l2r, p->rhs.sharding)) {
        decide(cx, job, p, S_BATCH_PARALLEL,
               "both operands are sharded identically on batch dims only: a local dot needs "
               "no communication");
        IrInstr *dot =
            local_op_mx(cx, job, p, p->lhs.hlo, p->rhs.hlo, &p->lhs_scale, &p->rhs_scale);
        return to_out(cx, p, dot, spmd_dot_seen_from(cx, d, p->lhs.sharding, DOT_LHS, DOT_OUT),
                      out, err);
    }
    SlStatus st = batch_with_reshard(cx, job, p, false, out, err);
    if (st != SL_OK || *out)
        return st;
    DotWindowedConfig cfg = {.kind = DOT_WE_NONE};
    if (!job->create_scaled) /* upstream: no windowed einsum for block-scaled dots */
        spmd_windowed_config(cx, job, p, &cfg);
    if (cfg.kind != DOT_WE_NONE) {
        decide(cx, job, p, S_WINDOWED,
               "an operand is large enough that overlapping its ring transfer with the "
               "per-shard matmuls beats gathering it first");
        return spmd_emit_windowed_dot(cx, job, p, &cfg, out, err);
    }
    st = batch_with_reshard(cx, job, p, true, out, err);
    if (st != SL_OK || *out)
        return st;
    return operand_matches_output(cx, job, p, out, err);
}

/* ---- grouping: shared tail ---- */

/* Runs the per-group problem and reshards its result (in ungroup(og) at this level) to the
 * output. `lhs`, `rhs` (and the scales `ls`, `rs` of a block-scaled dot, else NULL) are
 * already per-group values in `gst`. */
static SlStatus
recurse_in_groups(SpmdCtx *cx, const DotJob *job, const DotProblem *p, const SpmdValue *lhs,
                  const SpmdValue *rhs, const SpmdValue *ls, const SpmdValue *rs,
                  const ShdGrouped *og, const SpmdState *gst, IrInstr **out, SlError *err)
{
    DotProblem in = {*lhs, *rhs, group_base(cx, p->out_base, og), og->inner, gst, p->window,
                     {0}, {0}};
    if (ls)
        in.lhs_scale = *ls;
    if (rs)
        in.rhs_scale = *rs;
    if (!in.out_base || !in.out)
        return spmd_nomem(cx, err);
    IrInstr *dot = NULL;
    SlStatus st = spmd_partition_dot(cx, job, &in, &dot, err);
    if (st != SL_OK)
        return st;
    return to_out(cx, p, dot, shd_ungroup(cx->arena, og), out, err);
}

/* ---- group on batch dims (E.6) ---- */

/* `s` re-tiled so its `dims` carry `counts` (same device order; other dims dropped when the
 * total would not fit), grouped on `dims` and aligned to `ref`. */
static bool
retile_grouped(SpmdCtx *cx, const ShdSharding *s, uint32_t rank, const int64_t *dims,
               const int64_t *counts, uint32_t n, const ShdGrouped *ref, ShdGrouped *out)
{
    if (!shd_is_tiled(s)) {
        *out = replicated_in_groups(cx, ref, dims, n, rank);
        return true;
    }
    if (s->n_subgroups > 1 || (s->n_subgroups == 1 && s->subgroups[0] != SHD_SUB_REPLICATED))
        return false;
    int64_t t[SPMD_MAX_RANK + 1], total = shd_device_count(s), prod = 1;
    int64_t repl = shd_replication_factor(s);
    for (uint32_t i = 0; i < rank; i++)
        t[i] = shd_dim_shards(s, i);
    for (uint32_t k = 0; k < n; k++)
        t[dims[k]] = counts[k];
    for (uint32_t i = 0; i < rank; i++)
        prod *= t[i];
    /* upstream keeps the replication dim: more tiles than devices take from it first, and
     * fewer tiles than devices (the operand sharded more ways than the output) fail */
    if (prod * repl > total && (prod * repl) % total == 0 && repl % (prod * repl / total) == 0)
        repl /= prod * repl / total;
    if (prod * repl < total)
        return false;
    if (prod * repl > total && (prod > total || total % prod)) {
        prod = 1;
        for (uint32_t i = 0; i < rank; i++) {
            bool keep = false;
            for (uint32_t k = 0; k < n; k++)
                keep = keep || dims[k] == (int64_t)i;
            t[i] = keep ? t[i] : 1;
            prod *= t[i];
        }
        if (prod > total || total % prod)
            return false;
    }
    ShdSubgroup rep = SHD_SUB_REPLICATED;
    uint32_t nt = rank;
    if (total / prod > 1)
        t[nt++] = total / prod;
    const ShdSharding *ns = shd_tiled(cx->arena, t, nt, s->devices, &rep, nt > rank ? 1 : 0);
    if (!ns)
        return false;
    ShdGrouped g = shd_group_on_dims(cx->arena, ns, dims, n, NULL);
    if (!g.inner || g.n_groups != ref->n_groups)
        return false;
    *out = shd_align_groups_with(cx->arena, &g, ref);
    return true;
}

static bool
batch_counts_match(const DotDims *d, const DotProblem *p)
{
    if (!shd_is_tiled(p->lhs.sharding) || !shd_is_tiled(p->rhs.sharding))
        return false;
    for (uint32_t k = 0; k < d->n[DOT_BATCH]; k++) {
        const DotDimMap *m = &d->role[DOT_BATCH][k];
        int64_t l = shd_dim_shards(p->lhs.sharding, (uint32_t)m->lhs);
        if (l != shd_dim_shards(p->rhs.sharding, (uint32_t)m->rhs) ||
            l != shd_dim_shards(p->out, (uint32_t)m->out))
            return false;
    }
    return true;
}

/* Both operands already grouped alike: align the smaller to the larger. */
static bool
batch_groups_matching(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm,
                      ShdGrouped *lg, ShdGrouped *rg, ShdGrouped *og)
{
    int64_t ld[SPMD_MAX_RANK], rd[SPMD_MAX_RANK], od[SPMD_MAX_RANK];
    uint32_t n = role_dims(&job->dims, DOT_BATCH, DOT_LHS, ld);
    role_dims(&job->dims, DOT_BATCH, DOT_RHS, rd);
    role_dims(&job->dims, DOT_BATCH, DOT_OUT, od);
    *lg = shd_group_on_dims(cx->arena, p->lhs.sharding, ld, n, NULL);
    *rg = shd_group_on_dims(cx->arena, p->rhs.sharding, rd, n, NULL);
    *og = shd_group_on_dims(cx->arena, p->out, od, n, NULL);
    if (!lg->inner || !rg->inner || !og->inner || lg->n_groups != rg->n_groups ||
        lg->n_groups != og->n_groups)
        return false;
    bool lhs_larger = ir_shape_byte_size(&p->lhs.hlo->shape) >
                      ir_shape_byte_size(&p->rhs.hlo->shape);
    if (lhs_larger)
        *rg = shd_align_groups_with(cx->arena, rg, lg);
    else
        *lg = shd_align_groups_with(cx->arena, lg, rg);
    const ShdSharding *lu = shd_ungroup(cx->arena, lg), *ru = shd_ungroup(cx->arena, rg);
    if (!lu || !ru)
        return false;
    if (rm && (!shd_equal(lu, p->lhs.sharding) || !shd_equal(ru, p->rhs.sharding)))
        return false;
    *og = shd_align_groups_with(cx->arena, og, lg);
    return true;
}

SlStatus
spmd_dot_group_on_batch(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm,
                        IrInstr **out, SlError *err)
{
    Counts c;
    counts_of(job, p, &c);
    if (c.ob <= 1 || (c.lb != c.ob && c.rb != c.ob))
        return SL_OK;
    const DotDims *d = &job->dims;
    ShdGrouped lg, rg, og;
    if (batch_counts_match(d, p)) {
        if (!batch_groups_matching(cx, job, p, rm, &lg, &rg, &og))
            return SL_OK;
    } else {
        int64_t ld[SPMD_MAX_RANK], rd[SPMD_MAX_RANK], od[SPMD_MAX_RANK], cnt[SPMD_MAX_RANK];
        uint32_t n = role_dims(d, DOT_BATCH, DOT_LHS, ld);
        role_dims(d, DOT_BATCH, DOT_RHS, rd);
        role_dims(d, DOT_BATCH, DOT_OUT, od);
        for (uint32_t k = 0; k < n; k++)
            cnt[k] = shd_dim_shards(p->out, (uint32_t)od[k]);
        og = shd_group_on_dims(cx->arena, p->out, od, n, NULL);
        if (!og.inner || !retile_grouped(cx, p->lhs.sharding, d->rank[0], ld, cnt, n, &og, &lg) ||
            !retile_grouped(cx, p->rhs.sharding, d->rank[1], rd, cnt, n, &og, &rg))
            return SL_OK;
        const ShdSharding *lu = shd_ungroup(cx->arena, &lg), *ru = shd_ungroup(cx->arena, &rg);
        if (!lu || !ru || (rm && (!shd_equal(lu, p->lhs.sharding) ||
                                  !shd_equal(ru, p->rhs.sharding))))
            return SL_OK;
    }
    const SpmdState *gst =
        spmd_state_grouped(cx, p->st, og.device_groups, og.n_groups, og.group_size);
    if (!gst)
        return spmd_nomem(cx, err);
    decide(cx, job, p, S_GROUP_BATCH,
           "the output is partitioned on batch dims like an operand: each device group "
           "computes its own batch slice (data parallelism)");
    SpmdValue gl, gr, gls, grs;
    SlStatus st = enter_group_mx(cx, p, &p->lhs, &lg, false, gst, &gl, &gls, err);
    if (st == SL_OK)
        st = enter_group_mx(cx, p, &p->rhs, &rg, false, gst, &gr, &grs, err);
    if (st != SL_OK)
        return st;
    return recurse_in_groups(cx, job, p, &gl, &gr, &gls, &grs, &og, gst, out, err);
}

/* ---- group on non-contracting dims (E.7) ---- */

/* LhsIsBestMatchForNonContractingPartitioning: 1 lhs, 0 rhs, -1 neither. */
static int
lhs_is_best_match(const Counts *c, const DotProblem *p)
{
    bool may_l = c->lnc == c->olnc && c->lnc > 1, may_r = c->rnc == c->ornc && c->rnc > 1;
    if (may_l && may_r) {
        /* the other operand is gathered across the matching groups: compare the totals */
        int64_t lb = ir_shape_byte_size(&p->lhs.hlo->shape);
        int64_t rb = ir_shape_byte_size(&p->rhs.hlo->shape);
        return c->lnc * rb < c->rnc * lb ? 1 : 0;
    }
    if (may_l || may_r)
        return may_l ? 1 : 0;
    if (c->lnc > 1 && c->olnc > 1)
        return 1;
    if (c->rnc > 1 && c->ornc > 1)
        return 0;
    return -1;
}

/* Tile coordinates of every device (subgroup dims included): coords[d * n_tile_dims + i];
 * NULL when device ids are not 0..N-1. */
static int64_t *
tile_coords(SpmdCtx *cx, const ShdSharding *s)
{
    int64_t total = shd_device_count(s), nd = s->n_tile_dims;
    int64_t *c = SL_NEW_ARRAY(cx->arena, int64_t, total * nd);
    for (int64_t k = 0; c && k < total; k++) {
        int64_t dev = s->devices[k], pos = k;
        if (dev < 0 || dev >= total)
            return NULL;
        for (int64_t i = nd - 1; i >= 0; i--) {
            c[dev * nd + i] = pos % s->tile_dims[i];
            pos /= s->tile_dims[i];
        }
    }
    return c;
}

/* FindMatchingPartitionedDimsForGrouping: the tile dims of `s` (replication dim included)
 * on which the members of every group of `og` agree, when they split the devices into
 * exactly og's groups; returns their count (0: none). */
static uint32_t
matching_group_dims(SpmdCtx *cx, const ShdSharding *s, const ShdGrouped *og, int64_t *dims)
{
    int64_t G = og->n_groups, S = og->group_size, prod = 1;
    if (!shd_is_tiled(s) || G < 2 || S < 2 || shd_device_count(s) != G * S ||
        s->n_tile_dims > SPMD_MAX_RANK + 1)
        return 0;
    const int64_t *c = tile_coords(cx, s), *dg = og->device_groups;
    uint32_t n = 0, nd = s->n_tile_dims;
    for (uint32_t i = 0; c && i < nd; i++)
        if (s->tile_dims[i] > 1 && c[dg[0] * nd + i] == c[dg[1] * nd + i]) {
            dims[n++] = i;
            prod *= s->tile_dims[i];
        }
    if (!c || prod != G)
        return 0;
    for (int64_t g = 0; g < G; g++)
        for (int64_t m = 1; m < S; m++)
            for (uint32_t k = 0; k < n; k++)
                if (c[dg[g * S + m] * nd + dims[k]] != c[dg[g * S] * nd + dims[k]])
                    return 0;
    return n;
}

/* GetNonContractingPartitionGroupedShardingForOtherOperand, reduced to its three outcomes:
 * group on the replication dim, group on the tile dims whose device groups coincide with the
 * output's (FindMatchingPartitionedDimsForGrouping; then gathered along the data dims among
 * them), or replicate. */
static void
other_operand_groups(SpmdCtx *cx, const SpmdValue *o, uint32_t rank, const ShdGrouped *og,
                     bool rm, ShdGrouped *g, bool *gather)
{
    *gather = false;
    int64_t rd = replication_dim(o->sharding);
    int64_t G = og->n_groups;
    if (rd >= 0 && shd_replication_factor(o->sharding) % G == 0) {
        int64_t shards = shd_replication_factor(o->sharding) / G;
        bool exact;
        ShdGrouped a = group_aligned(cx, o->sharding, &rd, 1, &shards, og, &exact);
        if (a.inner && (exact || !rm)) {
            *g = a;
            return;
        }
    }
    int64_t dims[SPMD_MAX_RANK + 1];
    uint32_t n = matching_group_dims(cx, o->sharding, og, dims);
    ShdGrouped a = n ? shd_group_on_dims(cx->arena, o->sharding, dims, n, NULL) : (ShdGrouped){0};
    if (a.inner && a.n_groups == G) {
        *g = align_any_order(cx, &a, og);
        *gather = true;
        return;
    }
    *g = replicated_in_groups(cx, og, NULL, 0, rank);
}

static SlStatus
group_on_non_contracting(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm,
                         IrInstr **out, SlError *err)
{
    Counts c;
    counts_of(job, p, &c);
    int best = lhs_is_best_match(&c, p);
    if (best < 0 || !shd_is_tiled(p->out))
        return SL_OK;
    const DotDims *d = &job->dims;
    DotSide ms = best ? DOT_LHS : DOT_RHS;
    DotRole role = best ? DOT_LHS_NC : DOT_RHS_NC;
    const SpmdValue *mv = best ? &p->lhs : &p->rhs, *ov = best ? &p->rhs : &p->lhs;
    int64_t md[SPMD_MAX_RANK], od[SPMD_MAX_RANK];
    uint32_t n = 0;
    for (uint32_t k = 0; k < d->n[role]; k++) {
        const DotDimMap *m = &d->role[role][k];
        int64_t a = spmd_dot_dim(m, ms);
        if (!shd_is_tiled(mv->sharding))
            break;
        int64_t ms_ = shd_dim_shards(mv->sharding, (uint32_t)a);
        if (ms_ > 1 && ms_ == shd_dim_shards(p->out, (uint32_t)m->out)) {
            md[n] = a;
            od[n++] = m->out;
        }
    }
    if (n == 0)
        return SL_OK;
    ShdGrouped og = shd_group_on_dims(cx->arena, p->out, od, n, NULL);
    if (!og.inner)
        return SL_OK;
    bool exact;
    ShdGrouped mg = group_aligned(cx, mv->sharding, md, n, NULL, &og, &exact);
    if (!mg.inner || (rm && !exact))
        return SL_OK;
    ShdGrouped otg;
    bool gather;
    other_operand_groups(cx, ov, d->rank[best ? 1 : 0], &og, rm, &otg, &gather);
    const SpmdState *gst =
        spmd_state_grouped(cx, p->st, og.device_groups, og.n_groups, og.group_size);
    if (!gst)
        return spmd_nomem(cx, err);
    decide(cx, job, p, S_GROUP_NC,
           best ? "the lhs is sharded like the output on its free dims: group devices on them "
                  "and gather the rhs within each group"
                : "the rhs is sharded like the output on its free dims: group devices on them "
                  "and gather the lhs within each group");
    SpmdValue gm, go, gms, gos;
    SlStatus st = enter_group_mx(cx, p, mv, &mg, false, gst, &gm, &gms, err);
    if (st == SL_OK)
        st = enter_group_mx(cx, p, ov, &otg, gather, gst, &go, &gos, err);
    if (st != SL_OK)
        return st;
    return best ? recurse_in_groups(cx, job, p, &gm, &go, &gms, &gos, &og, gst, out, err)
                : recurse_in_groups(cx, job, p, &go, &gm, &gos, &gms, &og, gst, out, err);
}

/* ---- group on contracting dims (E.8) ---- */

/* The inner output sharding and the sharding the all-reduced result has at this level:
 * grouped on the output's replication dim (no slicing), on output dims whose device groups
 * coincide with the contracting groups (all-reduce + dynamic-slice), or replicated. */
static void
contracting_output(SpmdCtx *cx, const DotProblem *p, uint32_t rank, const ShdGrouped *ref,
                   const ShdSharding **inner, const ShdSharding **full)
{
    int64_t G = ref->n_groups, rd = replication_dim(p->out);
    bool exact;
    if (rd >= 0 && shd_replication_factor(p->out) % G == 0) {
        /* upstream aligns ignoring group order and keeps the result even when the groups
         * differ: the inner result then lies in ungroup(a), and the final reshard moves it */
        int64_t shards = shd_replication_factor(p->out) / G;
        ShdGrouped g = shd_group_on_dims(cx->arena, p->out, &rd, 1, &shards);
        ShdGrouped a = g.inner && g.n_groups == G ? align_any_order(cx, &g, ref) : g;
        const ShdSharding *u = a.inner ? shd_ungroup(cx->arena, &a) : NULL;
        if (u) {
            *inner = a.inner;
            *full = u;
            return;
        }
    }
    for (uint32_t i = 0; shd_is_tiled(p->out) && i < rank; i++) {
        int64_t dim = i;
        if (shd_dim_shards(p->out, i) != G)
            continue;
        ShdGrouped a = group_aligned(cx, p->out, &dim, 1, NULL, ref, &exact);
        if (a.inner && exact) {
            *inner = a.inner;
            *full = shd_partially_replicate_dims(cx->arena, p->out, &dim, 1);
            return;
        }
    }
    *inner = shd_replicated(cx->arena);
    *full = shd_replicated(cx->arena);
}

/* Contracting dims (as role indices) sharded alike on both operands. */
static uint32_t
matching_contracting(const DotDims *d, const DotProblem *p, int64_t *ld, int64_t *rd)
{
    uint32_t n = 0;
    if (!shd_is_tiled(p->lhs.sharding) || !shd_is_tiled(p->rhs.sharding))
        return 0;
    for (uint32_t k = 0; k < d->n[DOT_CONTRACTING]; k++) {
        const DotDimMap *m = &d->role[DOT_CONTRACTING][k];
        int64_t l = shd_dim_shards(p->lhs.sharding, (uint32_t)m->lhs);
        if (l > 1 && l == shd_dim_shards(p->rhs.sharding, (uint32_t)m->rhs)) {
            ld[n] = m->lhs;
            rd[n++] = m->rhs;
        }
    }
    return n;
}

/* Masks the uneven contracting dims of a per-group operand value with zeros (C.10). */
static IrInstr *
mask_contracting(SpmdCtx *cx, const SpmdValue *outer, const int64_t *dims, uint32_t n)
{
    uint64_t skip = 0;
    for (uint32_t i = 0; i < outer->base_shape->rank && i < 64; i++) {
        bool listed = false;
        for (uint32_t k = 0; k < n; k++)
            listed = listed || dims[k] == (int64_t)i;
        if (!listed)
            skip |= (uint64_t)1 << i;
    }
    return spmd_pad_with_value(cx, outer, NULL, skip);
}

/* `s` with tile dims `dims` set to `counts`, devices in the same order (upstream reshapes the
 * tile assignment); NULL when the tile count would change or `s` has subgroups other than one
 * replication dim. */
static const ShdSharding *
retile_dims(SpmdCtx *cx, const ShdSharding *s, const int64_t *dims, const int64_t *counts,
            uint32_t n)
{
    if (!shd_is_tiled(s) || s->n_tile_dims > SPMD_MAX_RANK + 1 || s->n_subgroups > 1 ||
        (s->n_subgroups == 1 && s->subgroups[0] != SHD_SUB_REPLICATED))
        return NULL;
    int64_t t[SPMD_MAX_RANK + 1], before = 1, after = 1;
    for (uint32_t i = 0; i < s->n_tile_dims; i++) {
        t[i] = s->tile_dims[i];
        before *= t[i];
    }
    for (uint32_t k = 0; k < n; k++)
        t[dims[k]] = counts[k];
    for (uint32_t i = 0; i < s->n_tile_dims; i++)
        after *= t[i];
    if (before != after)
        return NULL;
    return shd_tiled(cx->arena, t, s->n_tile_dims, s->devices, s->subgroups, s->n_subgroups);
}

/* The contracting dims to group on and the operand shardings to group: all contracting dims
 * when both operands have the same contracting partition count (the smaller operand re-tiled
 * to the larger's per-dim counts, GetDotGroupPartitionContractingLhsRhsShardings), else the
 * dims sharded alike on both sides. Returns the dim count (0: not applicable). */
static uint32_t
contracting_plan(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool lhs_larger,
                 int64_t *ld, int64_t *rd, const ShdSharding **ls, const ShdSharding **rs)
{
    Counts c;
    counts_of(job, p, &c);
    *ls = p->lhs.sharding;
    *rs = p->rhs.sharding;
    if (c.lc != c.rc || c.lc <= 1)
        return c.lc > 1 && c.rc > 1 ? matching_contracting(&job->dims, p, ld, rd) : 0;
    uint32_t n = role_dims(&job->dims, DOT_CONTRACTING, DOT_LHS, ld);
    role_dims(&job->dims, DOT_CONTRACTING, DOT_RHS, rd);
    int64_t cnt[SPMD_MAX_RANK];
    for (uint32_t k = 0; k < n; k++)
        cnt[k] = lhs_larger ? shd_dim_shards(*ls, (uint32_t)ld[k])
                            : shd_dim_shards(*rs, (uint32_t)rd[k]);
    const ShdSharding *t = lhs_larger ? retile_dims(cx, *rs, rd, cnt, n)
                                      : retile_dims(cx, *ls, ld, cnt, n);
    if (!t)
        return matching_contracting(&job->dims, p, ld, rd);
    *(lhs_larger ? rs : ls) = t;
    return n;
}

static SlStatus
group_on_contracting(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm,
                     IrInstr **out, SlError *err)
{
    int64_t ld[SPMD_MAX_RANK], rd[SPMD_MAX_RANK];
    const ShdSharding *ls, *rs;
    bool lhs_larger =
        ir_shape_byte_size(&p->lhs.hlo->shape) > ir_shape_byte_size(&p->rhs.hlo->shape);
    uint32_t n = contracting_plan(cx, job, p, lhs_larger, ld, rd, &ls, &rs);
    if (n == 0)
        return SL_OK;
    ShdGrouped lg = shd_group_on_dims(cx->arena, ls, ld, n, NULL);
    ShdGrouped rg = shd_group_on_dims(cx->arena, rs, rd, n, NULL);
    if (!lg.inner || !rg.inner || lg.n_groups != rg.n_groups)
        return SL_OK;
    if (lhs_larger)
        rg = shd_align_groups_with(cx->arena, &rg, &lg);
    else
        lg = shd_align_groups_with(cx->arena, &lg, &rg);
    const ShdSharding *lu = shd_ungroup(cx->arena, &lg), *ru = shd_ungroup(cx->arena, &rg);
    if (!lu || !ru || (rm && (!shd_equal(lu, p->lhs.sharding) || !shd_equal(ru, p->rhs.sharding))))
        return SL_OK;
    const ShdSharding *inner_out, *full_out;
    contracting_output(cx, p, job->dims.rank[DOT_OUT], &lg, &inner_out, &full_out);
    const SpmdState *gst =
        spmd_state_grouped(cx, p->st, lg.device_groups, lg.n_groups, lg.group_size);
    if (!gst || !inner_out || !full_out)
        return spmd_nomem(cx, err);
    decide(cx, job, p, S_GROUP_CONTRACTING,
           "both operands are sharded alike on contracting dims: each device group multiplies "
           "its slice of K and the partial products are summed with an all-reduce");
    SpmdValue l1, r1, gl, gr, ls1, rs1;
    SlStatus st = reshard_to(cx, &p->lhs, lu, &l1, err);
    if (st == SL_OK)
        st = reshard_to(cx, &p->rhs, ru, &r1, err);
    if (st == SL_OK)
        st = reshard_scale(cx, p, &p->lhs, lu, &ls1, err);
    if (st == SL_OK)
        st = reshard_scale(cx, p, &p->rhs, ru, &rs1, err);
    if (st != SL_OK)
        return st;
    l1.hlo = mask_contracting(cx, &l1, ld, n);
    r1.hlo = mask_contracting(cx, &r1, rd, n);
    if (!l1.hlo || !r1.hlo)
        return spmd_nomem(cx, err);
    gl = (SpmdValue){l1.hlo, group_base(cx, p->lhs.base_shape, &lg), lg.inner, gst};
    gr = (SpmdValue){r1.hlo, group_base(cx, p->rhs.base_shape, &rg), rg.inner, gst};
    DotProblem in = {gl, gr, p->out_base, inner_out, gst, p->window, {0}, {0}};
    if (ls1.hlo && rs1.hlo) {
        ls1.hlo = mask_contracting(cx, &ls1, ld, n);
        rs1.hlo = mask_contracting(cx, &rs1, rd, n);
        if (!ls1.hlo || !rs1.hlo)
            return spmd_nomem(cx, err);
        in.lhs_scale = (SpmdValue){ls1.hlo, group_base(cx, ls1.base_shape, &lg), lg.inner, gst};
        in.rhs_scale = (SpmdValue){rs1.hlo, group_base(cx, rs1.base_shape, &rg), rg.inner, gst};
    }
    IrInstr *dot = NULL;
    st = spmd_partition_dot(cx, job, &in, &dot, err);
    if (st != SL_OK)
        return st;
    const char *saved = cx->coll_cause;
    cx->coll_cause = job->handler;
    IrInstr *ar = spmd_all_reduce_along_dims(cx, p->st, dot, lu, ld, n,
                                             spmd_reducer(cx, SPMD_RED_ADD, dot->shape.dtype));
    cx->coll_cause = saved;
    return to_out(cx, p, ar, full_out, out, err);
}

/* ---- remove output partial replication (E.9) ---- */

static SlStatus
remove_output_partial(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
                      SlError *err)
{
    int64_t rd = replication_dim(p->out);
    if (rd < 0 || shd_is_tiled(p->lhs.sharding) || shd_is_tiled(p->rhs.sharding))
        return SL_OK;
    ShdGrouped og = shd_group_on_dims(cx->arena, p->out, &rd, 1, NULL);
    if (!og.inner)
        return SL_OK;
    const SpmdState *gst =
        spmd_state_grouped(cx, p->st, og.device_groups, og.n_groups, og.group_size);
    if (!gst)
        return spmd_nomem(cx, err);
    decide(cx, job, p, S_REMOVE_PARTIAL,
           "both operands are replicated and the output is partially replicated: every "
           "replica group computes the whole output sharded over its members");
    SpmdValue gl = {p->lhs.hlo, p->lhs.base_shape, p->lhs.sharding, gst};
    SpmdValue gr = {p->rhs.hlo, p->rhs.base_shape, p->rhs.sharding, gst};
    SpmdValue gls = p->lhs_scale, grs = p->rhs_scale;
    gls.state = grs.state = gst;
    return recurse_in_groups(cx, job, p, &gl, &gr, &gls, &grs, &og, gst, out, err);
}

/* ---- base case after partial match (E.10) ---- */

/* Rule 4: replicated output, one operand fully sharded on contracting dims and larger than
 * the output: slice the other operand to match, local dot, all-reduce. */
static SlStatus
replicated_out_contracting(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                           const Counts *c, IrInstr **out, SlError *err)
{
    if (shd_is_tiled(p->out))
        return SL_OK;
    for (int side = 1; side >= 0; side--) {
        const SpmdValue *me = side ? &p->rhs : &p->lhs, *other = side ? &p->lhs : &p->rhs;
        DotSide ms = side ? DOT_RHS : DOT_LHS, os = side ? DOT_LHS : DOT_RHS;
        if ((side ? c->rc : c->lc) != c->n || shd_is_tiled(other->sharding) ||
            ir_shape_elem_count(me->base_shape) <= ir_shape_elem_count(p->out_base))
            continue;
        const ShdSharding *t = spmd_dot_seen_from(cx, &job->dims, me->sharding, ms, os);
        if (!t)
            continue;
        int64_t cd[SPMD_MAX_RANK], od[SPMD_MAX_RANK];
        uint32_t n = role_dims(&job->dims, DOT_CONTRACTING, ms, cd);
        role_dims(&job->dims, DOT_CONTRACTING, os, od);
        decide(cx, job, p, S_REPLICATED_OUT_CONTRACTING,
               "the output is replicated and one operand is sharded on contracting dims: "
               "slice the other operand to match (free), then all-reduce partial products");
        SpmdValue o2, os2, ms2 = {0};
        SlStatus st = reshard_to(cx, other, t, &o2, err);
        if (st == SL_OK)
            st = reshard_scale(cx, p, other, t, &os2, err);
        if (st != SL_OK)
            return st;
        IrInstr *mm = mask_contracting(cx, me, cd, n), *om = mask_contracting(cx, &o2, od, n);
        if (scale_of(p, me) && os2.hlo) {
            ms2 = *scale_of(p, me);
            ms2.hlo = mask_contracting(cx, &ms2, cd, n);
            os2.hlo = mask_contracting(cx, &os2, od, n);
        }
        IrInstr *dot = side ? local_op_mx(cx, job, p, om, mm, &os2, &ms2)
                            : local_op_mx(cx, job, p, mm, om, &ms2, &os2);
        if (!dot)
            return spmd_nomem(cx, err);
        const char *saved = cx->coll_cause;
        cx->coll_cause = job->handler;
        IrInstr *ar = spmd_all_reduce_along_dims(
            cx, p->st, dot, me->sharding, cd, n, spmd_reducer(cx, SPMD_RED_ADD, dot->shape.dtype));
        cx->coll_cause = saved;
        return to_out(cx, p, ar, shd_replicated(cx->arena), out, err);
    }
    return SL_OK;
}

/* Reshards lhs to `lt` and rhs to `rt` (NULL = replicate) and emits the local op, whose
 * result is in p->out. */
static SlStatus
reshard_both(SpmdCtx *cx, const DotJob *job, const DotProblem *p, const ShdSharding *lt,
             const ShdSharding *rt, IrInstr **out, SlError *err)
{
    SpmdValue l, r, ls, rs;
    SlStatus st = lt ? reshard_to(cx, &p->lhs, lt, &l, err) : spmd_replicate(cx, &p->lhs, &l, err);
    if (st == SL_OK)
        st = rt ? reshard_to(cx, &p->rhs, rt, &r, err) : spmd_replicate(cx, &p->rhs, &r, err);
    if (st == SL_OK)
        st = reshard_scale(cx, p, &p->lhs, lt, &ls, err);
    if (st == SL_OK)
        st = reshard_scale(cx, p, &p->rhs, rt, &rs, err);
    if (st != SL_OK)
        return st;
    *out = local_op_mx(cx, job, p, l.hlo, r.hlo, &ls, &rs);
    return *out ? SL_OK : spmd_nomem(cx, err);
}

static SlStatus
base_case_after(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
                SlError *err)
{
    if (is_partial(p->out))
        return SL_OK;
    Counts c;
    counts_of(job, p, &c);
    const DotDims *d = &job->dims;
    const ShdSharding *o2l = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, DOT_LHS);
    const ShdSharding *o2r = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, DOT_RHS);
    if (c.ob == c.n && o2l && o2r) {
        decide(cx, job, p, S_OUT_BATCH,
               "the output is partitioned on batch dims only: reshard both operands to match");
        return reshard_both(cx, job, p, o2l, o2r, out, err);
    }
    if (c.olnc == c.n && o2l) {
        decide(cx, job, p, S_OUT_LHS_NC,
               "the output is partitioned on the lhs free dims: reshard the lhs to match and "
               "replicate the rhs");
        return reshard_both(cx, job, p, o2l, NULL, out, err);
    }
    if (c.ornc == c.n && o2r) {
        decide(cx, job, p, S_OUT_RHS_NC,
               "the output is partitioned on the rhs free dims: reshard the rhs to match and "
               "replicate the lhs");
        return reshard_both(cx, job, p, NULL, o2r, out, err);
    }
    return replicated_out_contracting(cx, job, p, &c, out, err);
}

/* ---- PartitionDot (E.3) ---- */

static SlStatus
try_partition(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm, IrInstr **out,
              SlError *err)
{
    SlStatus st = SL_OK;
    bool owned = false;
    *out = NULL;
    if (job->conv_case)
        st = job->conv_case(cx, job, p, rm, out, &owned, err);
    if (owned || st != SL_OK || *out)
        return st;
    if (st == SL_OK && !*out)
        st = base_case_before(cx, job, p, out, err);
    if (st == SL_OK && !*out)
        st = spmd_dot_group_on_batch(cx, job, p, rm, out, err);
    if (st == SL_OK && !*out)
        st = group_on_non_contracting(cx, job, p, rm, out, err);
    if (st == SL_OK && !*out)
        st = group_on_contracting(cx, job, p, rm, out, err);
    if (st == SL_OK && !*out)
        st = remove_output_partial(cx, job, p, out, err);
    if (st == SL_OK && !*out)
        st = base_case_after(cx, job, p, out, err);
    return st;
}

/* Operand sharding implied by the output alone: dims absent from the operand are moved into
 * replication, contracting dims stay unsharded (InferDotOperandSharding). */
const ShdSharding *
spmd_dot_infer_operand(SpmdCtx *cx, const DotDims *d, const ShdSharding *o, DotSide side)
{
    if (!shd_is_tiled(o))
        return o;
    int64_t drop[SPMD_MAX_RANK];
    uint32_t n = role_dims(d, side == DOT_LHS ? DOT_RHS_NC : DOT_LHS_NC, DOT_OUT, drop);
    const ShdSharding *t = shd_partially_replicate_dims(cx->arena, o, drop, n);
    return t ? spmd_dot_seen_from(cx, d, t, DOT_OUT, side) : NULL;
}

SlStatus
spmd_partition_dot(SpmdCtx *cx, const DotJob *job, const DotProblem *p0, IrInstr **out,
                   SlError *err)
{
    DotProblem p = *p0;
    if (p.lhs.hlo == p.rhs.hlo) { /* keep the operands distinct for the reshard cache */
        p.rhs.hlo = spmd_emit_copy(cx, p.rhs.hlo);
        if (!p.rhs.hlo)
            return spmd_nomem(cx, err);
        if (p.rhs_scale.hlo && !(p.rhs_scale.hlo = spmd_emit_copy(cx, p.rhs_scale.hlo)))
            return spmd_nomem(cx, err);
    }
    for (int rm = 1; rm >= 0; rm--) {
        SlStatus st = try_partition(cx, job, &p, rm != 0, out, err);
        if (st != SL_OK || *out)
            return st;
    }
    const ShdSharding *lt = spmd_dot_infer_operand(cx, &job->dims, p.out, DOT_LHS);
    const ShdSharding *rt = spmd_dot_infer_operand(cx, &job->dims, p.out, DOT_RHS);
    if (job->dims.n[DOT_SPATIAL] == 0 && !job->replicate_fallback && lt && rt) {
        decide(cx, job, &p, S_INFER_FROM_OUTPUT,
               "no strategy matched the operand shardings: reshard both operands to the "
               "shardings the output implies");
        return reshard_both(cx, job, &p, lt, rt, out, err);
    }
    decide(cx, job, &p, S_REPLICATE,
           "no strategy matched: replicate both operands and slice the full result");
    IrInstr *dot = NULL;
    SlStatus st = reshard_both(cx, job, &p, NULL, NULL, &dot, err);
    if (st != SL_OK)
        return st;
    return to_out(cx, &p, dot, shd_replicated(cx->arena), out, err);
}

/* ---- HandleDotHelper and HandleDot ---- */

/* Block-scaled dots: operands 2 and 3 are the scales, resharded to their operands' shardings
 * (upstream requires them identical) so that every later reshard moves both alike. */
static SlStatus
attach_scales(SpmdCtx *cx, const DotJob *job, DotProblem *p, SlError *err)
{
    const IrInstr *hlo = job->hlo;
    if (!job->create_scaled)
        return SL_OK;
    const SpmdValue *ls = hlo->n_operands == 4 ? spmd_get_value(cx, hlo->operands[2]) : NULL;
    const SpmdValue *rs = hlo->n_operands == 4 ? spmd_get_value(cx, hlo->operands[3]) : NULL;
    if (SL_NEVER(!ls || !rs))
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "scales not partitioned");
    SlStatus st = spmd_reshard(cx, ls, p->lhs.sharding, NULL, &p->lhs_scale, err);
    if (st == SL_OK)
        st = spmd_reshard(cx, rs, p->rhs.sharding, NULL, &p->rhs_scale, err);
    p->lhs_scale.state = p->rhs_scale.state = cx->state;
    return st;
}

SlStatus
spmd_dot_helper(SpmdCtx *cx, const DotJob *job, SlError *err)
{
    const IrInstr *hlo = job->hlo;
    const SpmdValue *l = spmd_get_value(cx, hlo->operands[0]);
    const SpmdValue *r = spmd_get_value(cx, hlo->operands[1]);
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (SL_NEVER(!l || !r || !s))
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "operands not partitioned");
    if (s->kind == SHD_TUPLE && s->n_leaves == 1)
        s = s->leaves[0];
    int64_t dev;
    if (shd_unique_device(s, &dev) || shd_is_manual(s) || s->kind == SHD_TUPLE ||
        shd_is_manual_subgroup(s) || shd_is_manual_subgroup(l->sharding) ||
        shd_is_manual_subgroup(r->sharding)) {
        spmd_dot_decide(cx, job, "single_device_or_manual",
                        "the output is on one device or manual: no dot partitioning", NULL, 0,
                        NULL, 0);
        return spmd_handle_default(cx, hlo, err);
    }
    DotProblem p = {*l, *r, &hlo->shape, s, cx->state, job->window, {0}, {0}};
    p.lhs.state = p.rhs.state = cx->state;
    IrInstr *local = NULL;
    SlStatus st = attach_scales(cx, job, &p, err);
    if (st == SL_OK)
        st = spmd_partition_dot(cx, job, &p, &local, err);
    if (st != SL_OK)
        return st;
    return spmd_finish(cx, hlo, local, s, err);
}

/* create-sharded-dot: the only place a local dot is built (dims from the local operands). */
static IrInstr *
create_dot(SpmdCtx *cx, const DotJob *job, IrInstr *lhs, IrInstr *rhs, const IrWindowDim *w)
{
    (void)w;
    const DotDims *d = &job->dims;
    int64_t dims[SPMD_MAX_RANK];
    uint32_t n = 0;
    for (uint32_t k = 0; k < d->n[DOT_BATCH]; k++)
        dims[n++] = lhs->shape.dims[d->role[DOT_BATCH][k].lhs];
    for (uint32_t k = 0; k < d->n[DOT_LHS_NC]; k++)
        dims[n++] = lhs->shape.dims[d->role[DOT_LHS_NC][k].lhs];
    for (uint32_t k = 0; k < d->n[DOT_RHS_NC]; k++)
        dims[n++] = rhs->shape.dims[d->role[DOT_RHS_NC][k].rhs];
    IrShape s = ir_shape_with_dims(cx->arena, &job->hlo->shape, dims);
    IrInstr *ops[2] = {lhs, rhs};
    return spmd_emit_clone(cx, job->hlo, &s, ops, 2);
}

static bool
listed(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t k = 0; k < n; k++)
        if (v[k] == x)
            return true;
    return false;
}

/* ParseDotGeneralFromDot: batch, contracting, lhs free, rhs free (E.1). */
SlStatus
spmd_dot_dims_of(SpmdCtx *cx, const IrInstr *hlo, DotDims *d)
{
    const int64_t *lb, *rb, *lc, *rc;
    uint32_t nb = ir_instr_ints_attr(hlo, IR_ATTR_LHS_BATCH_DIMS, &lb);
    uint32_t nrb = ir_instr_ints_attr(hlo, IR_ATTR_RHS_BATCH_DIMS, &rb);
    uint32_t nc = ir_instr_ints_attr(hlo, IR_ATTR_LHS_CONTRACTING_DIMS, &lc);
    uint32_t nrc = ir_instr_ints_attr(hlo, IR_ATTR_RHS_CONTRACTING_DIMS, &rc);
    const IrShape *ls = &hlo->operands[0]->shape, *rs = &hlo->operands[1]->shape;
    memset(d, 0, sizeof(*d));
    if (nb != nrb || nc != nrc || ls->rank > SPMD_MAX_RANK || rs->rank > SPMD_MAX_RANK)
        return SL_ERR_UNSUPPORTED;
    d->rank[0] = ls->rank;
    d->rank[1] = rs->rank;
    d->rank[2] = hlo->shape.rank;
    for (int r = 0; r < DOT_ROLE_COUNT; r++)
        if (!(d->role[r] = SL_NEW_ARRAY(cx->arena, DotDimMap, ls->rank + rs->rank + 1)))
            return SL_ERR_NOMEM;
    int64_t next = 0;
    for (uint32_t k = 0; k < nb; k++)
        d->role[DOT_BATCH][d->n[DOT_BATCH]++] = (DotDimMap){lb[k], rb[k], next++};
    for (uint32_t k = 0; k < nc; k++)
        d->role[DOT_CONTRACTING][d->n[DOT_CONTRACTING]++] = (DotDimMap){lc[k], rc[k], -1};
    for (uint32_t i = 0; i < ls->rank; i++)
        if (!listed(lb, nb, i) && !listed(lc, nc, i))
            d->role[DOT_LHS_NC][d->n[DOT_LHS_NC]++] = (DotDimMap){i, -1, next++};
    for (uint32_t i = 0; i < rs->rank; i++)
        if (!listed(rb, nb, i) && !listed(rc, nc, i))
            d->role[DOT_RHS_NC][d->n[DOT_RHS_NC]++] = (DotDimMap){-1, i, next++};
    return next == (int64_t)hlo->shape.rank ? SL_OK : SL_ERR_UNSUPPORTED;
}

SlStatus
spmd_handle_dot(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    DotJob job;
    memset(&job, 0, sizeof(job));
    job.hlo = hlo;
    job.handler = "dot";
    job.create = create_dot;
    SlStatus st = hlo->n_operands == 2 ? spmd_dot_dims_of(cx, hlo, &job.dims) : SL_ERR_UNSUPPORTED;
    if (st == SL_ERR_NOMEM)
        return spmd_nomem(cx, err);
    if (st != SL_OK) {
        spmd_warn(cx, "dot with unsupported dimension numbers: partitioned as replicated");
        return spmd_handle_default(cx, hlo, err);
    }
    return spmd_dot_helper(cx, &job, err);
}
