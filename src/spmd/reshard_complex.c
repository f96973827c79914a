/* reshard_complex.c - TryComplexReshardHandling (gspmd.md C.9.1-C.9.3): the reshard patterns
 * tried between two tiled shardings before grouping on equal dims, each as a trial that is
 * undone when it would need full replication. Owns: trials (rolling back emitted
 * instructions, channel ids and partition-id memos), the split/merge pattern
 * (PatternMatchMergeOrSplitSharding with its split/merge reshape helpers), the single
 * all-to-all moving a tile factor between two dims on a refined mesh, and the partially
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

/* C.9.1 (PatternMatchMergeOrSplitSharding): X, Y differ on dims i, j with
 * [X, Y] <-> [X*Y, 1] or [X*Y, Z] <-> [X, Y*Z]. Fills the split source sharding, the target
 * expressed on the split shape and i. */
static bool
match_merge_split(SpmdCtx *cx, const IrShape *local, const IrShape *base, const ShdSharding *x,
                  const ShdSharding *y, const ShdSharding **before, const ShdSharding **after,
                  uint32_t *dim)
{
    uint32_t r = shd_data_rank(x), diff[SPMD_MAX_RANK], nd = 0;
    if (r != shd_data_rank(y) || !spmd_has_plain_subgroups(x) || !spmd_has_plain_subgroups(y) ||
        shd_replication_factor(x) != shd_replication_factor(y) ||
        shd_has_partial_replication(x) != shd_has_partial_replication(y))
        return false;
    for (uint32_t d = 0; d < r; d++)
        if (x->tile_dims[d] != y->tile_dims[d])
            diff[nd++] = d;
    for (uint32_t a = 0; a < nd; a++)
        for (uint32_t b = a + 1; b < nd; b++) {
            uint32_t i = diff[a], j = diff[b];
            int64_t xi = x->tile_dims[i], xj = x->tile_dims[j], yi = y->tile_dims[i],
                    yj = y->tile_dims[j], nsz;
            int ones = (xi == 1) + (xj == 1) + (yi == 1) + (yj == 1);
            if (ones == 1) {
                if (xi * xj != yi * yj)
                    continue;
                if (xi == 1 || yi == 1) {
                    uint32_t t = i;
                    i = j;
                    j = t;
                }
                if (y->tile_dims[j] == 1) {
                    if (local->dims[i] % x->tile_dims[j] != 0)
                        continue;
                    nsz = x->tile_dims[i];
                } else {
                    if (base->dims[i] % x->tile_dims[i] != 0)
                        continue;
                    nsz = y->tile_dims[i];
                }
            } else if (ones == 0) {
                if (xi < yi) {
                    uint32_t t = i;
                    i = j;
                    j = t;
                }
                if (x->tile_dims[i] != y->tile_dims[i] * y->tile_dims[j] ||
                    base->dims[i] % x->tile_dims[i] != 0)
                    continue;
                nsz = y->tile_dims[i];
            } else {
                continue;
            }
            const ShdSharding *bs = shd_split_dim(cx->arena, x, i, nsz);
            if (!bs)
                continue;
            int64_t dims[SPMD_MAX_RANK + 4];
            memcpy(dims, bs->tile_dims, bs->n_tile_dims * sizeof(dims[0]));
            uint32_t jj = j + (j > i ? 1 : 0);
            int64_t t = dims[i + 1];
            dims[i + 1] = dims[jj];
            dims[jj] = t;
            const ShdSharding *as = shd_tiled(cx->arena, dims, bs->n_tile_dims, y->devices,
                                              x->subgroups, x->n_subgroups);
            if (!as)
                continue;
            *before = bs;
            *after = as;
            *dim = i;
            return true;
        }
    return false;
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

/* Splits tile dims p and q of s into [major, minor] pairs (the higher dim first, so that the
 * lower index holds): minor k_p after p, k_q after q. */
static const ShdSharding *
split_two(SlArena *a, const ShdSharding *s, uint32_t p, int64_t k_p, uint32_t q, int64_t k_q)
{
    uint32_t hi = p > q ? p : q, lo = p > q ? q : p;
    int64_t k_hi = hi == p ? k_p : k_q, k_lo = hi == p ? k_q : k_p;
    const ShdSharding *t = shd_split_dim(a, s, hi, s->tile_dims[hi] / k_hi);
    return t ? shd_split_dim(a, t, lo, t->tile_dims[lo] / k_lo) : NULL;
}

/* Local reshape of v to `dims` (rank n) with the given base dims and sharding. */
static SpmdValue
reshape_to(SpmdCtx *cx, const SpmdValue *v, const int64_t *dims, const int64_t *base_dims,
           uint32_t n, const ShdSharding *s)
{
    IrShape *nb = SL_NEW(cx->arena, IrShape);
    if (nb)
        *nb = ir_shape_make(cx->arena, v->base_shape->dtype, base_dims, n);
    SpmdValue out = {spmd_emit_reshape(cx, v->hlo, dims, n), nb, s, v->state};
    return out;
}

/* A factor k moving between the minor ends of two dims, [.., A*k, .., B, ..] -> [.., A, ..,
 * B*k, ..], as one all-to-all on the refined mesh: split dim p (base [A, k*L_p]) and dim q
 * (base [B, L_q]) so that k is a tile dim of its own on both sides, swap it from p's minor
 * half to q's, merge back. Only when the swap lands exactly on Y (no device reorder) and both
 * dims divide evenly. */
static SlStatus
move_factor(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out, SpmdPlan *plan,
            SlError *err)
{
    const ShdSharding *x = v->sharding;
    const IrShape *base = v->base_shape;
    uint32_t r = shd_data_rank(x), p = UINT32_MAX, q = UINT32_MAX, nd = 0;
    if (r != shd_data_rank(y) || r + 2 > SPMD_MAX_RANK || x->n_subgroups != y->n_subgroups ||
        !spmd_has_plain_subgroups(x) || !spmd_has_plain_subgroups(y) ||
        shd_replication_factor(x) != shd_replication_factor(y) ||
        shd_device_count(x) != shd_device_count(y) || v->hlo->shape.rank != r)
        return SL_ERR_UNSUPPORTED;
    for (uint32_t d = 0; d < r; d++) {
        if (x->tile_dims[d] == y->tile_dims[d])
            continue;
        nd++;
        if (x->tile_dims[d] > y->tile_dims[d])
            p = d;
        else
            q = d;
    }
    if (nd != 2 || p == UINT32_MAX || q == UINT32_MAX || x->tile_dims[p] % y->tile_dims[p])
        return SL_ERR_UNSUPPORTED;
    int64_t k = x->tile_dims[p] / y->tile_dims[p];
    if (k < 2 || y->tile_dims[q] != x->tile_dims[q] * k || base->dims[p] % x->tile_dims[p] ||
        base->dims[q] % y->tile_dims[q])
        return SL_ERR_UNSUPPORTED;
    const ShdSharding *xs = split_two(cx->arena, x, p, k, q, 1);
    const ShdSharding *ys = split_two(cx->arena, y, p, 1, q, k);
    uint32_t pm = p + 1 + (q < p), qm = q + 1 + (p < q); /* the minor halves */
    const ShdSharding *swapped = xs ? shd_all_to_all_sharding(cx->arena, xs, pm, qm) : NULL;
    if (!ys || !swapped || !shd_equal(swapped, ys))
        return SL_ERR_UNSUPPORTED;
    int64_t ld[SPMD_MAX_RANK], bd[SPMD_MAX_RANK];
    uint32_t w = 0;
    for (uint32_t d = 0; d < r; d++) {
        int64_t L = v->hlo->shape.dims[d];
        if (d == p || d == q) {
            int64_t major = x->tile_dims[d] / (d == p ? k : 1);
            ld[w] = 1;
            bd[w++] = major;
            ld[w] = L;
            bd[w++] = base->dims[d] / major;
        } else {
            ld[w] = L;
            bd[w++] = base->dims[d];
        }
    }
    SpmdValue sv = reshape_to(cx, v, ld, bd, r + 2, xs), mv;
    if (!sv.hlo || !sv.base_shape)
        return spmd_nomem(cx, err);
    plan->method = "refined-all-to-all";
    SlStatus st = spmd_reshard_all_to_all_one(cx, &sv, pm, qm, &mv, err);
    if (st != SL_OK)
        return st;
    IrShape ls = spmd_local_shape(cx, base, y);
    *out = reshape_to(cx, &mv, ls.dims, base->dims, r, y);
    out->base_shape = base;
    return out->hlo ? SL_OK : spmd_nomem(cx, err);
}

/* TryComplexReshardHandling (C.9.1-C.9.3), each pattern undone when it would replicate. */
SlStatus
spmd_reshard_complex(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                     SpmdPlan *plan, SlError *err)
{
    const ShdSharding *before, *after;
    uint32_t i;
    Trial t;
    if (match_merge_split(cx, &v->hlo->shape, v->base_shape, v->sharding, y, &before, &after,
                          &i)) {
        plan->method = "split-merge";
        trial_begin(cx, v->state, &t);
        return trial_end(cx, &t, merge_split(cx, v, y, before, after, i, out, plan, err));
    }
    trial_begin(cx, v->state, &t);
    SlStatus mst = trial_end(cx, &t, move_factor(cx, v, y, out, plan, err));
    if (mst != SL_ERR_UNSUPPORTED)
        return mst;
    const ShdSharding *mid = complex_intermediate(cx, v->sharding, y);
    if (!mid || shd_equal(mid, v->sharding))
        return SL_ERR_UNSUPPORTED;
    trial_begin(cx, v->state, &t);
    SpmdValue m;
    cx->allow_full_replication = t.allow; /* the intermediate is a full Reshard */
    SlStatus st = spmd_reshard(cx, v, mid, NULL, &m, err);
    cx->allow_full_replication = false;
    if (st == SL_OK)
        st = spmd_reshard_no_cache(cx, &m, y, NULL, out, plan, err);
    return trial_end(cx, &t, st);
}
