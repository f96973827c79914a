/* dot_group.c - the dot engine's grouping strategies (gspmd.md §E.6-E.9; seeds/000
 * PartitionDotGroupOnBatch, PartitionDotGroupOnNonContracting, PartitionDotGroupOnContracting,
 * the removal of output partial replication). Owns: grouping operands and the output on dims
 * (GroupShardingOnDims / AlignGroupsWith / FindMatchingPartitionedDimsForGrouping), the
 * per-group problems that recurse through spmd_partition_dot in grouped SpmdStates, and the
 * all-reduce of partial products when grouping on contracting dims.
 * Does not own: the strategy order and base cases (handle_dot.c), collectives (reshard.c,
 * collectives.c). Invariant: a strategy checks that it applies (pure sharding arithmetic)
 * before it emits anything; local ops come only from DotJob.create. */
#include "spmd/dot_int.h"

#include <string.h>

/* ---- grouping helpers ---- */

/* Index of the replication tile dim when it is the only subgroup dim, else -1. */
/* Index of the replication tile dim when it is the only subgroup dim, else -1. */
static int64_t
replication_dim(const ShdSharding *s)
{
    if (!s || !shd_is_tiled(s) || !shd_has_partial_replication(s) || s->n_subgroups != 1 ||
        s->subgroups[0] != SHD_SUB_REPLICATED)
        return -1;
    return (int64_t)shd_data_rank(s);
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
    SlArenaMark mark = sl_arena_mark(cx->arena);
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
    t = spmd_keep_sharding(cx, mark, t); /* everything since `mark` was arithmetic for t */
    SpmdValue r = *v;
    SlStatus st = spmd_dot_reshard_to(cx, v, t, &r, err);
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
    const SpmdValue *sc = spmd_dot_scale_of(p, v);
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
    SlArenaMark mark = sl_arena_mark(cx->arena);
    const ShdSharding *u = shd_ungroup(cx->arena, &a);
    *exact = u && shd_equal(u, x) && same_groups(&a, ref);
    sl_arena_release(cx->arena, mark); /* u only answered the question */
    return a;
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
    SlArenaMark mark = sl_arena_mark(cx->arena);
    return spmd_dot_to_out(cx, p, dot, spmd_keep_sharding(cx, mark, shd_ungroup(cx->arena, og)),
                           out, err);
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
    uint32_t n = spmd_dot_role_dims(&job->dims, DOT_BATCH, DOT_LHS, ld);
    spmd_dot_role_dims(&job->dims, DOT_BATCH, DOT_RHS, rd);
    spmd_dot_role_dims(&job->dims, DOT_BATCH, DOT_OUT, od);
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
    DotCounts c;
    spmd_dot_counts(job, p, &c);
    if (c.ob <= 1 || (c.lb != c.ob && c.rb != c.ob))
        return SL_OK;
    const DotDims *d = &job->dims;
    ShdGrouped lg, rg, og;
    if (batch_counts_match(d, p)) {
        if (!batch_groups_matching(cx, job, p, rm, &lg, &rg, &og))
            return SL_OK;
    } else {
        int64_t ld[SPMD_MAX_RANK], rd[SPMD_MAX_RANK], od[SPMD_MAX_RANK], cnt[SPMD_MAX_RANK];
        uint32_t n = spmd_dot_role_dims(d, DOT_BATCH, DOT_LHS, ld);
        spmd_dot_role_dims(d, DOT_BATCH, DOT_RHS, rd);
        spmd_dot_role_dims(d, DOT_BATCH, DOT_OUT, od);
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
    spmd_dot_decide_strategy(
        cx, job, p, DOT_S_GROUP_BATCH,
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

/* Tile coordinates of every device (subgroup dims included): coords[d * n_tile_dims + i];
 * NULL when device ids are not 0..N-1. */
static int64_t *
tile_coords(SpmdCtx *cx, const ShdSharding *s)
{
    int64_t total = shd_device_count(s), nd = s->n_tile_dims;
    int64_t *c = SL_NEW_ARRAY(&cx->scratch, int64_t, total * nd); /* a lookup table */
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

/* PartialReplicatedGroupShardingWithAssignedDeviceGroups: `s` (partially replicated, the
 * replication a multiple of og's group count) grouped on its replication dim into og's very
 * device groups, which moves no data: each group must hold every tile equally often, laid out
 * alike in every group (the in-group ids taken in og's member order). */
static bool
assigned_replication_groups(SpmdCtx *cx, const ShdSharding *s, const ShdGrouped *og,
                            ShdGrouped *g)
{
    int64_t rd = replication_dim(s), G = og->n_groups, S = og->group_size;
    if (rd < 0 || G < 1 || shd_replication_factor(s) % G || shd_device_count(s) != G * S ||
        s->n_tile_dims > SPMD_MAX_RANK + 1)
        return false;
    int64_t per = shd_replication_factor(s) / G, tiles = shd_num_tiles(s);
    int64_t t[SPMD_MAX_RANK + 1];
    if (tiles * per != S)
        return false;
    memcpy(t, s->tile_dims, (size_t)rd * sizeof(int64_t));
    t[rd] = per;
    const int64_t *c = tile_coords(cx, s);
    int64_t *pos = SL_NEW_ARRAY(&cx->scratch, int64_t, tiles);
    int64_t *devs = SL_NEW_ARRAY(&cx->scratch, int64_t, S);
    if (!c || !pos || !devs)
        return false;
    static const ShdSubgroup rep = SHD_SUB_REPLICATED;
    const ShdSharding *inner = NULL;
    for (int64_t k = 0; k < G; k++) {
        memset(pos, 0, (size_t)tiles * sizeof(int64_t));
        for (int64_t m = 0; m < S; m++) {
            int64_t dev = og->device_groups[k * S + m], li = 0;
            for (int64_t i = 0; i < rd; i++)
                li = li * s->tile_dims[i] + c[dev * s->n_tile_dims + i];
            if (pos[li] == per)
                return false;
            devs[li * per + pos[li]++] = m;
        }
        const ShdSharding *gi = shd_tiled(cx->arena, t, (uint32_t)rd + 1, devs, &rep, 1);
        if (!gi || (inner && !shd_equal(inner, gi)))
            return false;
        inner = gi;
    }
    int64_t *gd = SL_NEW_ARRAY(cx->arena, int64_t, 2);
    if (!gd)
        return false;
    gd[0] = rd;
    gd[1] = G;
    *g = *og;
    g->n_group_dims = 1;
    g->group_dims = gd;
    g->group_dim_sizes = gd + 1;
    g->inner = inner;
    g->data_rank = (uint32_t)rd;
    g->subgroup_manual = false;
    return true;
}

/* `s` (partially replicated) with the device axes of data dim `dim` and of the replication
 * dim swapped (upstream's TransposeSharding over all tile dims); NULL on arena failure. */
static const ShdSharding *
swap_with_replication(SpmdCtx *cx, const ShdSharding *s, uint32_t dim)
{
    uint32_t nd = s->n_tile_dims, last = nd - 1;
    int64_t t[SPMD_MAX_RANK + 1], idx[SPMD_MAX_RANK + 1], total = shd_device_count(s);
    int64_t *devs = SL_NEW_ARRAY(cx->arena, int64_t, total);
    if (!devs || nd > SPMD_MAX_RANK + 1)
        return NULL;
    memcpy(t, s->tile_dims, nd * sizeof(int64_t));
    t[dim] = s->tile_dims[last];
    t[last] = s->tile_dims[dim];
    for (int64_t k = 0; k < total; k++) {
        int64_t rest = k, src = 0;
        for (uint32_t i = nd; i-- > 0;) {
            idx[i] = rest % t[i];
            rest /= t[i];
        }
        int64_t x = idx[dim];
        idx[dim] = idx[last];
        idx[last] = x;
        for (uint32_t i = 0; i < nd; i++)
            src = src * s->tile_dims[i] + idx[i];
        devs[k] = s->devices[src];
    }
    static const ShdSubgroup rep = SHD_SUB_REPLICATED;
    return shd_tiled(cx->arena, t, nd, devs, &rep, 1);
}

/* The first match of the replicas with the output groups, trying the replication dim and
 * then, from the last data dim down, each dim swapped with it (the operand then moves to
 * that swapped sharding). */
static bool
assigned_groups_any_dim(SpmdCtx *cx, const ShdSharding *s, const ShdGrouped *og, ShdGrouped *g)
{
    int64_t rd = replication_dim(s);
    if (rd < 0 || shd_replication_factor(s) % og->n_groups)
        return false;
    for (int64_t i = rd; i >= 0; i--) {
        if (s->tile_dims[i] % og->n_groups)
            continue;
        const ShdSharding *m = i == rd ? s : swap_with_replication(cx, s, (uint32_t)i);
        if (m && replication_dim(m) == rd && assigned_replication_groups(cx, m, og, g))
            return true;
    }
    return false;
}

/* GetNonContractingPartitionGroupedShardingForOtherOperand for an operand in sharding `s`,
 * reduced to its three outcomes: group on the replication dim, group on the tile dims whose
 * device groups coincide with the output's (FindMatchingPartitionedDimsForGrouping; then
 * gathered along the data dims among them), or none (false: upstream's nullopt). */
static bool
other_grouping(SpmdCtx *cx, const ShdSharding *s, const ShdGrouped *og, bool rm, ShdGrouped *g,
               bool *gather)
{
    *gather = false;
    int64_t rd = replication_dim(s);
    int64_t G = og->n_groups;
    if (assigned_groups_any_dim(cx, s, og, g))
        return true;
    if (rd >= 0 && shd_replication_factor(s) % G == 0) {
        int64_t shards = shd_replication_factor(s) / G;
        bool exact;
        ShdGrouped a = group_aligned(cx, s, &rd, 1, &shards, og, &exact);
        if (a.inner && (exact || !rm)) {
            *g = a;
            return true;
        }
    }
    int64_t dims[SPMD_MAX_RANK + 1];
    uint32_t n = matching_group_dims(cx, s, og, dims);
    ShdGrouped a = n ? shd_group_on_dims(cx->arena, s, dims, n, NULL) : (ShdGrouped){0};
    if (a.inner && a.n_groups == G) {
        *g = align_any_order(cx, &a, og);
        *gather = true;
        return true;
    }
    return false;
}

/* The other operand's grouping: from its own sharding, else (not replicated, no spatial dims)
 * from the sharding the output and the matching operand `ms` imply for it, which it is then
 * resharded to first (*via; upstream's expected_other_sharding), else replicated in groups
 * (false). */
static bool
other_operand_groups(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool lhs_match,
                     const ShdSharding *ms, const ShdGrouped *og, bool rm, ShdGrouped *g,
                     bool *gather, const ShdSharding **via)
{
    const SpmdValue *o = lhs_match ? &p->rhs : &p->lhs;
    *via = NULL;
    if (other_grouping(cx, o->sharding, og, rm, g, gather))
        return true;
    if (shd_is_tiled(o->sharding) && job->dims.n[DOT_SPATIAL] == 0) {
        const ShdSharding *e = spmd_dot_infer_operand_with_other(
            cx, &job->dims, p->out, ms, lhs_match ? DOT_RHS : DOT_LHS);
        if (e && other_grouping(cx, e, og, rm, g, gather)) {
            *via = e;
            return true;
        }
    }
    *gather = false;
    *g = replicated_in_groups(cx, og, NULL, 0, job->dims.rank[lhs_match ? 1 : 0]);
    return false;
}

/* One way of grouping on non-contracting dims: the matching operand's free dims sharded like
 * the output (md on the operand, od on the output), the groupings, and the other operand's. */
typedef struct NcPlan {
    int64_t md[SPMD_MAX_RANK], od[SPMD_MAX_RANK];
    uint32_t n;
    ShdGrouped og, mg, otg;
    bool exact;      /* the matching operand needs no device moves */
    bool gather;     /* the other operand is gathered along its group dims */
    bool other_found; /* the other operand has a grouping (else replicated in groups) */
    const ShdSharding *other_via; /* resharded to this before entering its groups, or NULL */
} NcPlan;

static const ShdSharding *retile_dims(SpmdCtx *cx, const ShdSharding *s, const int64_t *dims,
                                      const int64_t *counts, uint32_t n);

static bool
nc_plan(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool lhs_match, bool rm,
        NcPlan *pl)
{
    const DotDims *d = &job->dims;
    DotRole role = lhs_match ? DOT_LHS_NC : DOT_RHS_NC;
    DotSide ms = lhs_match ? DOT_LHS : DOT_RHS;
    const SpmdValue *mv = lhs_match ? &p->lhs : &p->rhs;
    int64_t cnt[SPMD_MAX_RANK];
    pl->n = 0;
    if (!shd_is_tiled(mv->sharding) || !shd_is_tiled(p->out))
        return false;
    /* when the role's partition counts agree as a whole, upstream groups on all its dims and
     * re-tiles the operand with the output's per-dim counts (the operand then moves to
     * match, e.g. by all-to-all); otherwise only on the dims sharded alike */
    int64_t parts = spmd_dot_parts(mv->sharding, d, role, ms);
    bool whole = parts > 1 && parts == spmd_dot_parts(p->out, d, role, DOT_OUT);
    for (uint32_t k = 0; k < d->n[role]; k++) {
        const DotDimMap *m = &d->role[role][k];
        int64_t a = spmd_dot_dim(m, ms);
        int64_t t = shd_dim_shards(mv->sharding, (uint32_t)a);
        int64_t o = shd_dim_shards(p->out, (uint32_t)m->out);
        if (whole || (t > 1 && t == o)) {
            pl->md[pl->n] = a;
            cnt[pl->n] = o;
            pl->od[pl->n++] = m->out;
        }
    }
    pl->og = pl->n ? shd_group_on_dims(cx->arena, p->out, pl->od, pl->n, NULL) : (ShdGrouped){0};
    if (!pl->og.inner)
        return false;
    const ShdSharding *mt = whole ? retile_dims(cx, mv->sharding, pl->md, cnt, pl->n)
                                  : mv->sharding;
    if (!mt)
        return false;
    pl->mg = group_aligned(cx, mt, pl->md, pl->n, NULL, &pl->og, &pl->exact);
    if (!pl->mg.inner)
        return false;
    pl->exact = pl->exact && shd_equal(mt, mv->sharding);
    pl->other_found = other_operand_groups(cx, job, p, lhs_match, mv->sharding, &pl->og, rm,
                                           &pl->otg, &pl->gather, &pl->other_via);
    return true;
}

/* EstimateWindowedEinsumIterationsForNonContractingPartitioning, one side: the iterations of
 * the windowed loop the per-group problem of matching that side would run, -1 when the other
 * operand has no grouping or no loop applies. A dry run: nothing is emitted or recorded. */
static int64_t nc_windowed_dry_run(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                                   bool lhs_match);

static int64_t
nc_windowed_iterations(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool lhs_match)
{
    /* the dry run's plans, states and shapes are garbage once the count is known */
    SlArenaMark mark = sl_arena_mark(cx->arena);
    uint32_t instrs = cx->out->next_instr_id, reshards = cx->reshard_seq;
    int64_t n = nc_windowed_dry_run(cx, job, p, lhs_match);
    if (cx->out->next_instr_id == instrs && cx->reshard_seq == reshards &&
        !sl_arena_failed(cx->arena))
        sl_arena_release(cx->arena, mark);
    return n;
}

static int64_t
nc_windowed_dry_run(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool lhs_match)
{
    NcPlan pl;
    if (!nc_plan(cx, job, p, lhs_match, false, &pl) || !pl.other_found)
        return -1;
    const SpmdValue *mv = lhs_match ? &p->lhs : &p->rhs, *ov = lhs_match ? &p->rhs : &p->lhs;
    const SpmdState *gst =
        spmd_state_grouped(cx, p->st, pl.og.device_groups, pl.og.n_groups, pl.og.group_size);
    SpmdValue m = {mv->hlo, group_base(cx, mv->base_shape, &pl.mg), pl.mg.inner, gst};
    SpmdValue o = {ov->hlo, pl.gather ? ov->base_shape : group_base(cx, ov->base_shape, &pl.otg),
                   pl.otg.inner, gst};
    DotProblem in = {lhs_match ? m : o, lhs_match ? o : m, group_base(cx, p->out_base, &pl.og),
                     pl.og.inner, gst, p->window, {0}, {0}};
    if (!gst || !m.base_shape || !o.base_shape || !in.out_base)
        return -1;
    TraceSink *saved = cx->trace;
    DotWindowedConfig cfg;
    cx->trace = trace_null_sink();
    spmd_windowed_config(cx, job, &in, &cfg);
    cx->trace = saved;
    return cfg.kind != DOT_WE_NONE ? gst->num_partitions : -1;
}

/* LhsIsBestMatchForNonContractingPartitioning: 1 lhs, 0 rhs, -1 neither. With both possible,
 * choose_faster_windowed_einsum_over_mem prefers the side whose windowed loop runs fewer
 * iterations (the base partitioner's time estimates are 0), or the lhs exactly when only it
 * gets a loop (*iters: both counts, -1 where none); otherwise the smaller replication of the
 * other operand wins. */
static int
lhs_is_best_match(SpmdCtx *cx, const DotJob *job, const DotCounts *c, const DotProblem *p,
                  int64_t *iters)
{
    bool may_l = c->lnc == c->olnc && c->lnc > 1, may_r = c->rnc == c->ornc && c->rnc > 1;
    iters[0] = iters[1] = -1;
    if (may_l && may_r) {
        if (cx->opts->choose_faster_windowed_einsum_over_mem && !job->create_scaled) {
            iters[0] = nc_windowed_iterations(cx, job, p, true);
            iters[1] = nc_windowed_iterations(cx, job, p, false);
        }
        if (iters[0] >= 0 && iters[1] >= 0)
            return iters[0] < iters[1] ? 1 : 0;
        if (cx->opts->choose_faster_windowed_einsum_over_mem && !job->create_scaled)
            return iters[0] >= 0 ? 1 : 0; /* only a matching lhs gets a loop, or neither */
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

/* The decision behind the matching side when windowed-loop iterations chose it. */
static void
decide_match_by_iterations(SpmdCtx *cx, const DotJob *job, int best, const int64_t *iters)
{
    if (iters[0] < 0 && iters[1] < 0)
        return;
    TraceKV nums[] = {{"lhs_matching_iterations", (double)iters[0], NULL},
                      {"rhs_matching_iterations", (double)iters[1], NULL}};
    spmd_dot_decide(cx, job, best ? "non_contracting_match_lhs" : "non_contracting_match_rhs",
                    "choose_faster_windowed_einsum_over_mem: both operands match the output on "
                    "free dims; group on the side whose windowed loop runs fewer iterations "
                    "(-1: no loop; the lhs when only it gets one)",
                    NULL, 0, nums, SL_COUNTOF(nums));
}

SlStatus
spmd_dot_group_on_non_contracting(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm,
                                  IrInstr **out, SlError *err)
{
    DotCounts c;
    spmd_dot_counts(job, p, &c);
    int64_t iters[2];
    int best = lhs_is_best_match(cx, job, &c, p, iters);
    NcPlan pl;
    if (best < 0 || !nc_plan(cx, job, p, best == 1, rm, &pl) || (rm && !pl.exact))
        return SL_OK;
    decide_match_by_iterations(cx, job, best, iters);
    const SpmdValue *mv = best ? &p->lhs : &p->rhs, *ov = best ? &p->rhs : &p->lhs;
    const SpmdState *gst =
        spmd_state_grouped(cx, p->st, pl.og.device_groups, pl.og.n_groups, pl.og.group_size);
    if (!gst)
        return spmd_nomem(cx, err);
    spmd_dot_decide_strategy(
        cx, job, p, DOT_S_GROUP_NC,
        best ? "the lhs is sharded like the output on its free dims: group devices on them "
               "and gather the rhs within each group"
             : "the rhs is sharded like the output on its free dims: group devices on them "
               "and gather the lhs within each group");
    SpmdValue gm, go, gms, gos, ovia, svia;
    DotProblem pv = *p; /* the other operand (and its scale) after the reshard to other_via */
    SlStatus st = SL_OK;
    if (pl.other_via) {
        st = spmd_dot_reshard_to(cx, ov, pl.other_via, &ovia, err);
        if (st == SL_OK)
            st = spmd_dot_reshard_scale(cx, p, ov, pl.other_via, &svia, err);
        if (st != SL_OK)
            return st;
        *(best ? &pv.rhs : &pv.lhs) = ovia;
        if (svia.hlo)
            *(best ? &pv.rhs_scale : &pv.lhs_scale) = svia;
        ov = best ? &pv.rhs : &pv.lhs;
    }
    st = enter_group_mx(cx, p, mv, &pl.mg, false, gst, &gm, &gms, err);
    if (st == SL_OK)
        st = enter_group_mx(cx, &pv, ov, &pl.otg, pl.gather, gst, &go, &gos, err);
    if (st != SL_OK)
        return st;
    return best ? recurse_in_groups(cx, job, p, &gm, &go, &gms, &gos, &pl.og, gst, out, err)
                : recurse_in_groups(cx, job, p, &go, &gm, &gos, &gms, &pl.og, gst, out, err);
}

/* ---- group on contracting dims (E.8) ---- */

/* How group-on-contracting forms its output (GetDotGroupPartitionContractingOutputShardings):
 * grouped on the output's replication dim (no slicing), grouped on the output tile dims on
 * which every contracting group agrees (`slice`: the inner creator all-reduces the partial
 * products over them and slices its result, a reduce-scatter), or replicated. */
typedef struct ContractingOut {
    const ShdSharding *inner;   /* per-group output sharding */
    const ShdSharding *full;    /* sharding of the all-reduced result at this level */
    const IrShape *inner_base;  /* per-group output base shape */
    DotReduceSlice *slice;      /* NULL: all-reduce after the per-group problem */
} ContractingOut;

/* The output grouped on the tile dims its devices share with the contracting groups `ref`,
 * when that grouping lines up with `ref` member for member. */
static bool
contracting_slice(SpmdCtx *cx, const DotProblem *p, const ShdGrouped *ref, ContractingOut *co)
{
    int64_t sd[SPMD_MAX_RANK + 1];
    uint32_t n = matching_group_dims(cx, p->out, ref, sd), rank = shd_data_rank(p->out);
    ShdGrouped g = n ? shd_group_on_dims(cx->arena, p->out, sd, n, NULL) : (ShdGrouped){0};
    ShdGrouped a = g.inner && g.n_groups == ref->n_groups ? align_any_order(cx, &g, ref) : g;
    const ShdSharding *u = a.inner ? shd_ungroup(cx->arena, &a) : NULL;
    DotReduceSlice *rs = SL_NEW(cx->arena, DotReduceSlice);
    if (!u || !rs || !shd_equal(u, p->out) || !same_groups(&a, ref))
        return false;
    memset(rs, 0, sizeof(*rs));
    for (uint32_t k = 0; k < n; k++) {
        if (sd[k] < (int64_t)rank)
            rs->dims[rs->n++] = sd[k];
        else
            rs->reduce_replication = true;
    }
    if (rs->n == 0)
        return false;
    rs->st = p->st;
    rs->out = p->out;
    *co = (ContractingOut){a.inner, p->out, group_base(cx, p->out_base, &a), rs};
    return co->inner_base != NULL;
}

static void
contracting_output(SpmdCtx *cx, const DotProblem *p, const ShdGrouped *ref, ContractingOut *co)
{
    int64_t G = ref->n_groups, rd = replication_dim(p->out);
    *co = (ContractingOut){shd_replicated(cx->arena), shd_replicated(cx->arena), p->out_base,
                           NULL};
    if (rd >= 0 && shd_replication_factor(p->out) % G == 0) {
        /* upstream aligns ignoring group order and keeps the result even when the groups
         * differ: the inner result then lies in ungroup(a), and the final reshard moves it */
        int64_t shards = shd_replication_factor(p->out) / G;
        ShdGrouped g = shd_group_on_dims(cx->arena, p->out, &rd, 1, &shards);
        ShdGrouped a = g.inner && g.n_groups == G ? align_any_order(cx, &g, ref) : g;
        const ShdSharding *u = a.inner ? shd_ungroup(cx->arena, &a) : NULL;
        if (u) {
            co->inner = a.inner;
            co->full = u;
            return;
        }
    }
    if (shd_is_tiled(p->out))
        contracting_slice(cx, p, ref, co);
}

/* The inner creator of a sliced group-on-contracting output: the partial products are
 * all-reduced over the output slice dims (in the contracting level's state) and the result
 * is sliced on them, as if it were replicated (no reshard-cache entries: the fake base shape
 * is the local one). */
static IrInstr *
reduce_slice(SpmdCtx *cx, const DotReduceSlice *rs, IrInstr *x)
{
    if (!x)
        return NULL;
    const char *saved = cx->coll_cause;
    bool frozen = cx->cache_frozen;
    cx->coll_cause = rs->outer->handler;
    cx->cache_frozen = true;
    x = spmd_dot_all_reduce(cx, rs->outer, rs->st, x, rs->out, rs->dims, rs->n);
    const ShdSharding *t = shd_partially_replicate_all_except(cx->arena, rs->out, rs->dims, rs->n);
    SpmdValue v = {x, x ? &x->shape : NULL, shd_replicated(cx->arena), rs->st}, r;
    SlError e;
    memset(&e, 0, sizeof(e));
    x = x && t && spmd_reshard(cx, &v, t, NULL, &r, &e) == SL_OK ? r.hlo : NULL;
    if (x && rs->reduce_replication) {
        int64_t rd = shd_data_rank(rs->out);
        x = spmd_dot_all_reduce(cx, rs->outer, rs->st, x, rs->out, &rd, 1);
    }
    cx->cache_frozen = frozen;
    cx->coll_cause = saved;
    return x;
}

static IrInstr *
create_reduce_slice(SpmdCtx *cx, const DotJob *job, IrInstr *lhs, IrInstr *rhs,
                    const IrWindowDim *w)
{
    const DotJob *o = job->reduce_slice->outer;
    return reduce_slice(cx, job->reduce_slice, o->create(cx, o, lhs, rhs, w));
}

static IrInstr *
create_scaled_reduce_slice(SpmdCtx *cx, const DotJob *job, IrInstr *lhs, IrInstr *rhs,
                           IrInstr *lhs_scale, IrInstr *rhs_scale)
{
    const DotJob *o = job->reduce_slice->outer;
    return reduce_slice(cx, job->reduce_slice,
                        o->create_scaled(cx, o, lhs, rhs, lhs_scale, rhs_scale));
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
IrInstr *
spmd_dot_mask_contracting(SpmdCtx *cx, const SpmdValue *outer, const int64_t *dims, uint32_t n)
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
    DotCounts c;
    spmd_dot_counts(job, p, &c);
    *ls = p->lhs.sharding;
    *rs = p->rhs.sharding;
    if (c.lc != c.rc || c.lc <= 1)
        return c.lc > 1 && c.rc > 1 ? matching_contracting(&job->dims, p, ld, rd) : 0;
    uint32_t n = spmd_dot_role_dims(&job->dims, DOT_CONTRACTING, DOT_LHS, ld);
    spmd_dot_role_dims(&job->dims, DOT_CONTRACTING, DOT_RHS, rd);
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

/* The per-group operands of group-on-contracting: both operands (and scales) resharded to the
 * ungrouped forms of `lg`, `rg`, masked on the contracting dims, in state in->st. */
static SlStatus
contracting_operands(SpmdCtx *cx, const DotProblem *p, const ShdGrouped *lg,
                     const ShdGrouped *rg, const int64_t *ld, const int64_t *rd, uint32_t n,
                     DotProblem *in, SlError *err)
{
    SlArenaMark mark = sl_arena_mark(cx->arena);
    const ShdSharding *lu = spmd_keep_sharding(cx, mark, shd_ungroup(cx->arena, lg));
    mark = sl_arena_mark(cx->arena);
    const ShdSharding *ru = spmd_keep_sharding(cx, mark, shd_ungroup(cx->arena, rg));
    SpmdValue l1, r1, ls1, rs1;
    SlStatus st = spmd_dot_reshard_to(cx, &p->lhs, lu, &l1, err);
    if (st == SL_OK)
        st = spmd_dot_reshard_to(cx, &p->rhs, ru, &r1, err);
    if (st == SL_OK)
        st = spmd_dot_reshard_scale(cx, p, &p->lhs, lu, &ls1, err);
    if (st == SL_OK)
        st = spmd_dot_reshard_scale(cx, p, &p->rhs, ru, &rs1, err);
    if (st != SL_OK)
        return st;
    l1.hlo = spmd_dot_mask_contracting(cx, &l1, ld, n);
    r1.hlo = spmd_dot_mask_contracting(cx, &r1, rd, n);
    if (!l1.hlo || !r1.hlo)
        return spmd_nomem(cx, err);
    in->lhs = (SpmdValue){l1.hlo, group_base(cx, p->lhs.base_shape, lg), lg->inner, in->st};
    in->rhs = (SpmdValue){r1.hlo, group_base(cx, p->rhs.base_shape, rg), rg->inner, in->st};
    if (ls1.hlo && rs1.hlo) {
        ls1.hlo = spmd_dot_mask_contracting(cx, &ls1, ld, n);
        rs1.hlo = spmd_dot_mask_contracting(cx, &rs1, rd, n);
        if (!ls1.hlo || !rs1.hlo)
            return spmd_nomem(cx, err);
        in->lhs_scale =
            (SpmdValue){ls1.hlo, group_base(cx, ls1.base_shape, lg), lg->inner, in->st};
        in->rhs_scale =
            (SpmdValue){rs1.hlo, group_base(cx, rs1.base_shape, rg), rg->inner, in->st};
    }
    return SL_OK;
}

/* Runs the per-group problem `in`: with a sliced output through a job whose creator reduces
 * and slices, else followed by the all-reduce over the contracting groups. */
static SlStatus
contracting_recurse(SpmdCtx *cx, const DotJob *job, const DotProblem *p, const DotProblem *in,
                    const ShdGrouped *lg, const int64_t *ld, uint32_t n, const ContractingOut *co,
                    IrInstr **out, SlError *err)
{
    DotJob ij = *job;
    if (co->slice) {
        co->slice->outer = job;
        ij.reduce_slice = co->slice;
        ij.create = create_reduce_slice;
        ij.create_scaled = job->create_scaled ? create_scaled_reduce_slice : NULL;
    }
    IrInstr *dot = NULL;
    SlStatus st = spmd_partition_dot(cx, &ij, in, &dot, err);
    if (st != SL_OK || co->slice)
        return st == SL_OK ? spmd_dot_to_out(cx, p, dot, co->full, out, err) : st;
    IrInstr *ar = spmd_dot_all_reduce(cx, job, p->st, dot, shd_ungroup(cx->arena, lg), ld, n);
    return spmd_dot_to_out(cx, p, ar, co->full, out, err);
}

SlStatus
spmd_dot_group_on_contracting(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm,
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
    SlArenaMark mark = sl_arena_mark(cx->arena);
    const ShdSharding *lu = shd_ungroup(cx->arena, &lg), *ru = shd_ungroup(cx->arena, &rg);
    bool fits = lu && ru &&
                (!rm || (shd_equal(lu, p->lhs.sharding) && shd_equal(ru, p->rhs.sharding)));
    sl_arena_release(cx->arena, mark); /* lu, ru only answered the question */
    if (!fits)
        return SL_OK;
    ContractingOut co;
    contracting_output(cx, p, &lg, &co);
    const SpmdState *gst =
        spmd_state_grouped(cx, p->st, lg.device_groups, lg.n_groups, lg.group_size);
    if (!gst || !co.inner || !co.full)
        return spmd_nomem(cx, err);
    /* [re-tiled][sliced] */
    static const char *const why[2][2] = {
        {"both operands are sharded alike on contracting dims: each device group multiplies "
         "its slice of K and the partial products are summed with an all-reduce",
         "both operands are sharded alike on contracting dims: each device group multiplies "
         "its slice of K, and each local product is all-reduced and sliced on the output "
         "dims the groups share (a reduce-scatter)"},
        {"both operands have the same contracting partition count on different dims: the "
         "smaller one is re-tiled to the larger's per-dim counts, then each device group "
         "multiplies its slice of K and the partial products are summed with an all-reduce",
         "both operands have the same contracting partition count on different dims: the "
         "smaller one is re-tiled to the larger's per-dim counts, then each local product "
         "is all-reduced and sliced on the output dims the groups share (a reduce-scatter)"}};
    bool retiled = !shd_equal(ls, p->lhs.sharding) || !shd_equal(rs, p->rhs.sharding);
    spmd_dot_decide_strategy(cx, job, p, DOT_S_GROUP_CONTRACTING, why[retiled][co.slice != NULL]);
    DotProblem in = {{0}, {0}, co.inner_base, co.inner, gst, p->window, {0}, {0}};
    SlStatus st = contracting_operands(cx, p, &lg, &rg, ld, rd, n, &in, err);
    if (st != SL_OK)
        return st;
    return contracting_recurse(cx, job, p, &in, &lg, ld, n, &co, out, err);
}

/* ---- remove output partial replication (E.9) ---- */

SlStatus
spmd_dot_remove_output_partial(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
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
    spmd_dot_decide_strategy(
        cx, job, p, DOT_S_REMOVE_PARTIAL,
        "both operands are replicated and the output is partially replicated: every "
        "replica group computes the whole output sharded over its members");
    SpmdValue gl = {p->lhs.hlo, p->lhs.base_shape, p->lhs.sharding, gst};
    SpmdValue gr = {p->rhs.hlo, p->rhs.base_shape, p->rhs.sharding, gst};
    SpmdValue gls = p->lhs_scale, grs = p->rhs_scale;
    gls.state = grs.state = gst;
    return recurse_in_groups(cx, job, p, &gl, &gr, &gls, &grs, &og, gst, out, err);
}
