/* reshard_complex.c - TryComplexReshardHandling (gspmd.md C.9.1-C.9.3): the reshard patterns
 * tried between two tiled shardings before grouping on equal dims, each as a trial that is
 * undone when it would need full replication. Owns: trials (rolling back emitted
 * instructions, channel ids and partition-id memos), the split/merge pattern
 * (PatternMatchMergeOrSplitSharding with its split/merge reshape helpers) and the partially
 * replicated intermediates (patterns 2 and 3). Does not own: the decision order and the
 * reshard cache (reshard.c), the all-to-all itself (spmd_reshard_all_to_all_one).
 * Invariants: a pattern that returns SL_ERR_UNSUPPORTED leaves the output module, the channel
 * counter and the memos as it found them; emission only through the spmd_emit builders. */
#include "spmd/reshard_int.h"

#include <string.h>

/* ---- trials: reshards that must not fall back to full replication ---- */

#define TRIAL_MAX_MEMOS 8

/* What a failed trial restores: emitted instructions, channel ids, partition-id memos. */
typedef struct Trial {
    uint32_t n_instrs;
    int64_t channel;
    uint32_t n_memos;
    SpmdStateMemo *memo[TRIAL_MAX_MEMOS];
    SpmdStateMemo saved[TRIAL_MAX_MEMOS];
    bool frozen, allow;
} Trial;

static void
trial_begin(SpmdCtx *cx, const SpmdState *st, Trial *t)
{
    t->n_instrs = cx->comp->n_instrs;
    t->channel = cx->next_channel_id;
    t->n_memos = 0;
    for (const SpmdState *s = st; s && t->n_memos < TRIAL_MAX_MEMOS; s = s->outer) {
        t->memo[t->n_memos] = s->memo;
        t->saved[t->n_memos++] = *s->memo;
    }
    t->frozen = cx->cache_frozen;
    t->allow = cx->allow_full_replication;
    cx->cache_frozen = true;
    cx->allow_full_replication = false;
}

/* Ends a trial; SL_ERR_UNSUPPORTED undoes everything it emitted. */
static SlStatus
trial_end(SpmdCtx *cx, Trial *t, SlStatus st)
{
    cx->cache_frozen = t->frozen;
    cx->allow_full_replication = t->allow;
    if (st == SL_ERR_UNSUPPORTED) {
        cx->comp->n_instrs = t->n_instrs;
        cx->next_channel_id = t->channel;
        for (uint32_t k = 0; k < t->n_memos; k++)
            *t->memo[k] = t->saved[k];
    }
    return st;
}

/* C.9.1 (PatternMatchMergeOrSplitSharding): the dims where X and Y differ either with a 1 on
 * one side (d1) or with counts dividing each other over an evenly split dim (d2). Split a d2
 * dim i at the smaller count when some d1 dim j keeps the product ([.., X, .., Y, ..] <->
 * [.., X*Y, .., 1, ..]), else split the first d2 dim that shrinks at its target count. Fills
 * both shardings split at i and i. */
static bool
match_merge_split(SpmdCtx *cx, const IrShape *base, const ShdSharding *x, const ShdSharding *y,
                  const ShdSharding **before, const ShdSharding **after, uint32_t *dim)
{
    uint32_t r = shd_data_rank(x), d1[SPMD_MAX_RANK], d2[SPMD_MAX_RANK], n1 = 0, n2 = 0;
    if (r != shd_data_rank(y) || r > SPMD_MAX_RANK || !spmd_has_plain_subgroups(x) ||
        !spmd_has_plain_subgroups(y) ||
        shd_has_partial_replication(x) != shd_has_partial_replication(y) ||
        shd_replication_factor(x) != shd_replication_factor(y))
        return false;
    for (uint32_t d = 0; d < r; d++) {
        int64_t sx = x->tile_dims[d], sy = y->tile_dims[d];
        int64_t lo = sx < sy ? sx : sy, hi = sx < sy ? sy : sx;
        if (sx == sy)
            continue;
        if (lo == 1)
            d1[n1++] = d;
        else if (hi % lo == 0 && (base->dims[d] + lo - 1) / lo * lo % hi == 0)
            d2[n2++] = d;
    }
    int64_t size = 0;
    uint32_t i = 0;
    for (uint32_t a = 0; a < n2 && !size; a++)
        for (uint32_t b = 0; b < n1 && !size; b++) {
            i = d2[a];
            uint32_t j = d1[b];
            if (x->tile_dims[i] * x->tile_dims[j] == y->tile_dims[i] * y->tile_dims[j])
                size = x->tile_dims[i] < y->tile_dims[i] ? x->tile_dims[i] : y->tile_dims[i];
        }
    for (uint32_t a = 0; a < n2 && !size; a++) {
        i = d2[a];
        if (x->tile_dims[i] > y->tile_dims[i])
            size = y->tile_dims[i];
    }
    if (!size)
        return false;
    *before = shd_split_dim(cx->arena, x, i, size);
    *after = shd_split_dim(cx->arena, y, i, size);
    *dim = i;
    return *before && *after;
}

/* Local reshape splitting dim i into [L_i / size, size] (SplitReshapeHelper). */
static SpmdValue
split_helper(SpmdCtx *cx, const SpmdValue *v, uint32_t i, int64_t size, const ShdSharding *s)
{
    const IrShape *base = v->base_shape;
    uint32_t r = base->rank;
    int64_t ld[SPMD_MAX_RANK + 1], bd[SPMD_MAX_RANK + 1];
    int64_t f = size * s->tile_dims[i + 1];
    for (uint32_t d = 0, w = 0; d < r; d++) {
        ld[w] = d == i ? v->hlo->shape.dims[d] / size : v->hlo->shape.dims[d];
        bd[w++] = d == i ? base->dims[d] / f : base->dims[d];
        if (d == i) {
            ld[w] = size;
            bd[w++] = f;
        }
    }
    IrShape *nb = SL_NEW(cx->arena, IrShape);
    if (nb)
        *nb = ir_shape_make(cx->arena, base->dtype, bd, r + 1);
    SpmdValue out = {spmd_emit_reshape(cx, v->hlo, ld, r + 1), nb, s, v->state};
    return out;
}

/* Local reshape merging dims i and i + 1 (MergeReshapeHelper). */
static SpmdValue
merge_helper(SpmdCtx *cx, const SpmdValue *v, uint32_t i, const ShdSharding *s)
{
    const IrShape *base = v->base_shape;
    uint32_t r = base->rank;
    int64_t ld[SPMD_MAX_RANK], bd[SPMD_MAX_RANK];
    for (uint32_t d = 0, w = 0; d < r; d++) {
        ld[w] = v->hlo->shape.dims[d];
        bd[w++] = base->dims[d];
        if (d == i) {
            ld[w - 1] *= v->hlo->shape.dims[d + 1];
            bd[w - 1] *= base->dims[d + 1];
            d++;
        }
    }
    IrShape *nb = SL_NEW(cx->arena, IrShape);
    if (nb)
        *nb = ir_shape_make(cx->arena, base->dtype, bd, r - 1);
    SpmdValue out = {spmd_emit_reshape(cx, v->hlo, ld, r - 1), nb, s, v->state};
    return out;
}

static SlStatus
merge_split(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, const ShdSharding *before,
            const ShdSharding *after, uint32_t i, SpmdValue *out, SpmdPlan *plan, SlError *err)
{
    if (v->base_shape->rank + 1 > SPMD_MAX_RANK)
        return SL_ERR_UNSUPPORTED;
    SpmdValue sv = split_helper(cx, v, i, v->hlo->shape.dims[i], before), rv;
    if (!sv.hlo || !sv.base_shape)
        return spmd_nomem(cx, err);
    SlStatus st = spmd_reshard_no_cache(cx, &sv, after, NULL, &rv, plan, err);
    if (st != SL_OK)
        return st;
    const ShdSharding *ms = shd_merge_dims(cx->arena, after, i);
    if (!ms)
        return SL_ERR_UNSUPPORTED;
    rv.sharding = after;
    SpmdValue mv = merge_helper(cx, &rv, i, ms);
    if (!mv.hlo || !mv.base_shape)
        return spmd_nomem(cx, err);
    mv.base_shape = v->base_shape;
    if (shd_equal(ms, y)) {
        *out = mv;
        return SL_OK;
    }
    return spmd_reshard_no_cache(cx, &mv, y, NULL, out, plan, err);
}

/* Transposes every tile dim (subgroups included) of s by perm. */
static const ShdSharding *
transpose_tiles(SlArena *a, const ShdSharding *s, const int64_t *perm)
{
    uint32_t n = s->n_tile_dims;
    int64_t nd[SPMD_MAX_RANK + 4], st[SPMD_MAX_RANK + 4], total = shd_device_count(s);
    int64_t *dev = SL_NEW_ARRAY(a, int64_t, total ? total : 1);
    if (!dev || n > SL_COUNTOF(nd))
        return NULL;
    for (uint32_t d = n, acc = 1; d-- > 0;) {
        st[d] = acc;
        acc *= (uint32_t)s->tile_dims[d];
    }
    for (uint32_t d = 0; d < n; d++)
        nd[d] = s->tile_dims[perm[d]];
    for (int64_t p = 0; p < total; p++) {
        int64_t rem = p, src = 0;
        for (uint32_t d = n; d-- > 0;) {
            src += rem % nd[d] * st[perm[d]];
            rem /= nd[d];
        }
        dev[p] = s->devices[src];
    }
    return shd_tiled(a, nd, n, dev, s->subgroups, s->n_subgroups);
}

/* Pattern 2 (PatternMatchPartiallyReplicateDim) and 3 (partial source, tiled target: swap the
 * replication dim into the first dim that needs its shards). */
static const ShdSharding *
complex_intermediate(SpmdCtx *cx, const ShdSharding *x, const ShdSharding *y)
{
    uint32_t r = shd_data_rank(x);
    if (spmd_is_partial(y) && spmd_has_plain_subgroups(y)) {
        for (uint32_t i = 0; i < r; i++) {
            int64_t n = x->tile_dims[i];
            if (n != 1 && n * shd_replication_factor(x) == shd_replication_factor(y))
                return shd_partially_replicate_dims(cx->arena, x, (const int64_t[]){i}, 1);
        }
    }
    if (spmd_is_partial(x) && spmd_has_plain_subgroups(x) && !spmd_is_partial(y) &&
        shd_data_rank(y) == r) {
        int64_t R = shd_replication_factor(x), perm[SPMD_MAX_RANK + 4];
        for (uint32_t d = 0; d < x->n_tile_dims; d++)
            perm[d] = d;
        for (uint32_t i = 0; i < r; i++)
            if (y->tile_dims[i] != x->tile_dims[i] && x->tile_dims[i] == 1 &&
                y->tile_dims[i] % R == 0) {
                perm[i] = x->n_tile_dims - 1;
                perm[x->n_tile_dims - 1] = i;
                return transpose_tiles(cx->arena, x, perm);
            }
    }
    return NULL;
}

/* TryComplexReshardHandling (C.9.1-C.9.3), each pattern undone when it would replicate. */
SlStatus
spmd_reshard_complex(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                     SpmdPlan *plan, SlError *err)
{
    const ShdSharding *before, *after;
    uint32_t i;
    Trial t;
    if (match_merge_split(cx, v->base_shape, v->sharding, y, &before, &after, &i)) {
        plan->method = "split-merge";
        trial_begin(cx, v->state, &t);
        return trial_end(cx, &t, merge_split(cx, v, y, before, after, i, out, plan, err));
    }
    const ShdSharding *mid = complex_intermediate(cx, v->sharding, y);
    if (!mid || shd_equal(mid, v->sharding))
        return SL_ERR_UNSUPPORTED;
    trial_begin(cx, v->state, &t);
    SpmdValue m;
    cx->allow_full_replication = t.allow; /* the intermediate is a full Reshard */
    SlStatus st = spmd_reshard_nested(cx, plan, v, mid, &m, err);
    cx->allow_full_replication = false;
    if (st == SL_OK)
        st = spmd_reshard_no_cache(cx, &m, y, NULL, out, plan, err);
    return trial_end(cx, &t, st);
}
