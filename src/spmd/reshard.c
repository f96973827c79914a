/* reshard.c - PartitionedHlo::Reshard (gspmd.md §C): make a partitioned value have another
 * sharding. Owns: the reshard cache, the decision order of C.2, replication (C.4), the
 * replicated -> sharded slicing (C.3), device reorders (C.6), all-to-all chains (C.7), the
 * partial-replication transitions (C.8), grouping fallbacks (C.9) and masking (C.10).
 * Does not own: building collectives (collectives.c) or sharding arithmetic (src/sharding).
 * Invariants: every call emits one `reshard` trace event (cache hits included); collectives are
 * attributed to the reshard being built through cx->cur_reshard. */
#include "spmd/spmd_int.h"

#include <string.h>

typedef struct Plan {
    const char *method; /* recorded in the trace */
} Plan;

static SlStatus no_cache(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, IrInstr *pad,
                         SpmdValue *out, Plan *plan, SlError *err);

static bool
is_repl_like(const ShdSharding *s)
{
    return s->kind == SHD_REPLICATED || s->kind == SHD_UNREDUCED || s->kind == SHD_UNKNOWN;
}

static SpmdValue
with(const SpmdValue *v, IrInstr *hlo, const ShdSharding *s)
{
    SpmdValue r = *v;
    r.hlo = hlo;
    r.sharding = s;
    return r;
}

static int64_t
ceil_div(int64_t a, int64_t b)
{
    return b > 0 ? (a + b - 1) / b : a;
}

/* ---- cache ---- */

static bool
cache_find(SpmdCtx *cx, const IrInstr *hlo, const IrShape *base, const ShdSharding *t,
           SpmdValue *out)
{
    uint64_t v = 0;
    if (!sl_map_get(&cx->reshard_cache, SL_MAP_KEY(hlo), &v))
        return false;
    for (SpmdCacheEntry *e = (SpmdCacheEntry *)(uintptr_t)v; e; e = e->next)
        if (shd_equal(e->target, t) && ir_shape_equal(e->base_shape, base, false)) {
            *out = e->result;
            return true;
        }
    return false;
}

static void
cache_put(SpmdCtx *cx, const IrInstr *hlo, const IrShape *base, const ShdSharding *t,
          const SpmdValue *r)
{
    SpmdCacheEntry *e = SL_NEW(cx->arena, SpmdCacheEntry);
    if (!e)
        return;
    uint64_t v = 0;
    e->next = sl_map_get(&cx->reshard_cache, SL_MAP_KEY(hlo), &v)
                  ? (SpmdCacheEntry *)(uintptr_t)v
                  : NULL;
    e->target = t;
    e->base_shape = base;
    e->result = *r;
    sl_map_put(&cx->reshard_cache, SL_MAP_KEY(hlo), SL_MAP_KEY(e));
}

static void
trace_reshard(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *to, const char *method,
              const IrInstr *result, uint32_t seq)
{
    if (!cx->trace->ops->reshard)
        return;
    TraceReshard ev = {cx->visiting, v->hlo, v->sharding, to, method, result, seq};
    cx->trace->ops->reshard(cx->trace, &ev);
}

SlStatus
spmd_reshard(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *target, IrInstr *pad_value,
             SpmdValue *out, SlError *err)
{
    if (!target || shd_equal(v->sharding, target)) {
        *out = *v;
        return SL_OK;
    }
    uint32_t seq = ++cx->reshard_seq;
    if (cache_find(cx, v->hlo, v->base_shape, target, out)) {
        trace_reshard(cx, v, target, "cache-hit", out->hlo, seq);
        return SL_OK;
    }
    uint32_t saved = cx->cur_reshard;
    const char *saved_cause = cx->coll_cause;
    cx->cur_reshard = seq;
    cx->coll_cause = "reshard";
    Plan plan = {"copy"};
    SlStatus st = no_cache(cx, v, target, pad_value, out, &plan, err);
    cx->cur_reshard = saved;
    cx->coll_cause = saved_cause;
    if (st != SL_OK)
        return st;
    if (!out->hlo)
        return spmd_nomem(cx, err);
    out->sharding = target;
    bool fewer_tiles = shd_num_tiles(target) < shd_num_tiles(v->sharding);
    if (cx->opts->cache_all_gather || !fewer_tiles) {
        cache_put(cx, v->hlo, v->base_shape, target, out);
        cache_put(cx, out->hlo, v->base_shape, v->sharding, v);
    }
    trace_reshard(cx, v, target, plan.method, out->hlo, seq);
    return SL_OK;
}

/* ---- masking (C.10) ---- */

IrInstr *
spmd_pad_with_value(SpmdCtx *cx, const SpmdValue *v, IrInstr *pad_value, uint64_t skip_mask)
{
    const ShdSharding *s = v->sharding;
    const IrShape *base = v->base_shape;
    if (!shd_is_tiled(s) || !ir_shape_is_array(base))
        return v->hlo;
    IrInstr *mask = NULL;
    IrShape ls = v->hlo->shape;
    IrShape is = ir_shape_make(cx->arena, IR_DT_S32, ls.dims, ls.rank);
    for (uint32_t d = 0; d < base->rank && d < SPMD_MAX_RANK; d++) {
        int64_t n = shd_dim_shards(s, d);
        if (n <= 1 || base->dims[d] % n == 0 || (d < 64 && (skip_mask >> d & 1)))
            continue;
        IrInstr *off = spmd_partition_offset(cx, v->state, s, base, d);
        IrInstr *iota = spmd_emit_iota(cx, &is, d);
        IrInstr *boff = spmd_emit_broadcast(cx, off, &is, NULL, 0);
        IrInstr *idx = spmd_emit_binary(cx, IR_OP_ADD, iota, boff);
        IrInstr *lim = spmd_emit_constant_scalar(cx, IR_DT_S32, base->dims[d]);
        IrInstr *blim = spmd_emit_broadcast(cx, lim, &is, NULL, 0);
        IrInstr *lt = spmd_emit_compare(cx, idx, blim, "LT");
        mask = mask ? spmd_emit_binary(cx, IR_OP_AND, mask, lt) : lt;
        if (!mask)
            return NULL;
    }
    if (!mask)
        return v->hlo;
    if (!pad_value)
        pad_value = spmd_emit_constant_scalar(cx, ls.dtype, 0);
    IrShape vs = ir_shape_clone(cx->arena, &ls);
    IrInstr *bpad = spmd_emit_broadcast(cx, pad_value, &vs, NULL, 0);
    return spmd_emit_select(cx, mask, v->hlo, bpad);
}

/* ---- replicate (C.4, C.5) ---- */

/* select(partition-id == device, x, 0) + all-reduce over all partitions of the state. */
static IrInstr *
broadcast_from_device(SpmdCtx *cx, const SpmdState *st, IrInstr *x, int64_t device)
{
    IrInstr *pid = spmd_partition_id(cx, st);
    IrInstr *d = spmd_emit_constant_scalar(cx, IR_DT_U32, device);
    IrInstr *eq = spmd_emit_compare(cx, pid, d, "EQ");
    if (!eq || !x)
        return NULL;
    IrShape ps = ir_shape_make(cx->arena, IR_DT_PRED, x->shape.dims, x->shape.rank);
    IrInstr *beq = x->shape.rank ? spmd_emit_broadcast(cx, eq, &ps, NULL, 0) : eq;
    IrInstr *zero = spmd_emit_zero_like(cx, &x->shape);
    IrInstr *sel = spmd_emit_select(cx, beq, x, zero);
    IrReplicaGroups all;
    memset(&all, 0, sizeof(all));
    IrComputation *red = spmd_reducer(cx, SPMD_RED_ADD, x->shape.dtype);
    return spmd_coll_all_reduce(cx, st, sel, red, &all);
}

/* Replicates the listed data dims of a tiled value (ReplicatePartial). */
static SlStatus
replicate_dims(SpmdCtx *cx, const SpmdValue *v, const int64_t *dims, uint32_t n, SpmdValue *out,
               SlError *err)
{
    const ShdSharding *s = v->sharding;
    const IrShape *base = v->base_shape;
    int64_t ag[SPMD_MAX_RANK], dus[SPMD_MAX_RANK], bc[SPMD_MAX_RANK];
    uint32_t n_ag = 0, n_dus = 0, n_bc = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t d = (uint32_t)dims[k];
        int64_t shards = shd_dim_shards(s, d);
        if (shards <= 1)
            continue;
        int64_t D = base->dims[d], S = ceil_div(D, shards);
        if (D == S)
            bc[n_bc++] = d;
        else if (D <= shards / 2)
            dus[n_dus++] = d;
        else
            ag[n_ag++] = d;
    }
    IrInstr *x = v->hlo;
    for (uint32_t k = n_ag; k-- > 0;) {
        IrReplicaGroups g;
        SlStatus st = spmd_groups_for_dims(cx, s, &ag[k], 1, &g, err);
        if (st != SL_OK)
            return st;
        x = spmd_coll_all_gather(cx, v->state, x, &g, ag[k]);
        if (!x)
            return spmd_nomem(cx, err);
    }
    if (n_ag) { /* slice off gathered padding */
        int64_t lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK];
        for (uint32_t d = 0; d < base->rank; d++) {
            lo[d] = 0;
            hi[d] = x->shape.dims[d];
        }
        for (uint32_t k = 0; k < n_ag; k++)
            hi[ag[k]] = base->dims[ag[k]];
        x = spmd_emit_slice(cx, x, lo, hi);
    }
    if (n_dus) {
        /* mask padding, place the shard at its offset in zeros of full size, all-reduce */
        uint64_t skip = 0;
        for (uint32_t d = 0; d < base->rank && d < 64; d++) {
            bool listed = false;
            for (uint32_t k = 0; k < n_dus; k++)
                listed = listed || dus[k] == (int64_t)d;
            if (!listed)
                skip |= (uint64_t)1 << d;
        }
        const ShdSharding *after_ag =
            n_ag ? shd_partially_replicate_dims(cx->arena, s, ag, n_ag) : s;
        SpmdValue mv = with(v, x, after_ag ? after_ag : s);
        IrInstr *masked = spmd_pad_with_value(cx, &mv, NULL, skip);
        int64_t full[SPMD_MAX_RANK];
        IrInstr *offs[SPMD_MAX_RANK];
        IrInstr *zero_off = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        for (uint32_t d = 0; d < base->rank; d++) {
            full[d] = x->shape.dims[d];
            offs[d] = zero_off;
        }
        for (uint32_t k = 0; k < n_dus; k++) {
            uint32_t d = (uint32_t)dus[k];
            full[d] = base->dims[d];
            offs[d] = spmd_partition_offset(cx, v->state, s, base, d);
        }
        IrShape fs = ir_shape_make(cx->arena, x->shape.dtype, full, base->rank);
        IrInstr *zeros = spmd_emit_zero_like(cx, &fs);
        /* the shard may overhang the full size: slice it to fit first */
        int64_t lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK];
        for (uint32_t d = 0; d < base->rank; d++) {
            lo[d] = 0;
            hi[d] = masked ? (masked->shape.dims[d] < full[d] ? masked->shape.dims[d] : full[d]) : 0;
        }
        IrInstr *part = spmd_emit_slice(cx, masked, lo, hi);
        IrInstr *dus_i = spmd_emit_dus(cx, zeros, part, offs);
        IrComputation *red = spmd_reducer(cx, SPMD_RED_ADD, x->shape.dtype);
        x = spmd_all_reduce_along_dims(cx, v->state, dus_i, s, dus, n_dus, red);
        if (!x)
            return spmd_nomem(cx, err);
    }
    if (n_bc) {
        /* only tile 0 along these dims holds data: broadcast it within the groups */
        int64_t np = v->state->num_partitions;
        int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, np);
        int64_t idx[SPMD_MAX_RANK];
        if (!tbl)
            return spmd_nomem(cx, err);
        for (int64_t d = 0; d < np; d++) {
            bool first = shd_tile_index(s, d, idx);
            for (uint32_t k = 0; k < n_bc && first; k++)
                first = idx[bc[k]] == 0;
            tbl[d] = first ? 1 : 0;
        }
        IrInstr *flag = spmd_table_lookup(cx, v->state, tbl, np, IR_DT_S32);
        IrInstr *one = spmd_emit_constant_scalar(cx, IR_DT_S32, 1);
        IrInstr *eq = spmd_emit_compare(cx, flag, one, "EQ");
        IrShape ps = ir_shape_make(cx->arena, IR_DT_PRED, x->shape.dims, x->shape.rank);
        IrInstr *beq = x->shape.rank ? spmd_emit_broadcast(cx, eq, &ps, NULL, 0) : eq;
        IrInstr *zero = spmd_emit_zero_like(cx, &x->shape);
        IrInstr *sel = spmd_emit_select(cx, beq, x, zero);
        IrComputation *red = spmd_reducer(cx, SPMD_RED_ADD, x->shape.dtype);
        x = spmd_all_reduce_along_dims(cx, v->state, sel, s, bc, n_bc, red);
    }
    if (!x)
        return spmd_nomem(cx, err);
    const ShdSharding *rs = shd_partially_replicate_dims(cx->arena, s, dims, n);
    if (!rs)
        rs = shd_replicated(cx->arena);
    *out = with(v, x, rs);
    return SL_OK;
}

SlStatus
spmd_replicate(SpmdCtx *cx, const SpmdValue *v, SpmdValue *out, SlError *err)
{
    return spmd_reshard(cx, v, shd_replicated(cx->arena), NULL, out, err);
}

static SlStatus
replicate_no_cache(SpmdCtx *cx, const SpmdValue *v, SpmdValue *out, Plan *plan, SlError *err)
{
    const ShdSharding *s = v->sharding;
    if (is_repl_like(s) || s->kind == SHD_MANUAL) {
        *out = with(v, v->hlo, shd_replicated(cx->arena));
        return SL_OK;
    }
    if (s->kind == SHD_MAXIMAL) {
        plan->method = "broadcast";
        IrInstr *x = broadcast_from_device(cx, v->state, v->hlo, s->device);
        if (!x)
            return spmd_nomem(cx, err);
        *out = with(v, x, shd_replicated(cx->arena));
        return SL_OK;
    }
    if (!shd_is_tiled(s))
        return spmd_fail(cx, err, SL_ERR_UNSUPPORTED, "cannot replicate this sharding");
    plan->method = "all-gather";
    int64_t dims[SPMD_MAX_RANK];
    uint32_t r = shd_data_rank(s);
    for (uint32_t d = 0; d < r; d++)
        dims[d] = d;
    SlStatus st = replicate_dims(cx, v, dims, r, out, err);
    if (st == SL_OK)
        out->sharding = shd_replicated(cx->arena);
    return st;
}

/* ---- replicated -> sharded (C.3) ---- */

static SlStatus
slice_from_replicated(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, IrInstr *pad,
                      SpmdValue *out, SlError *err)
{
    const IrShape *base = v->base_shape;
    IrShape local = spmd_local_shape(cx, base, y);
    IrInstr *x = v->hlo;
    if (!shd_evenly_partitions(y, base)) {
        IrPadDim pads[SPMD_MAX_RANK];
        for (uint32_t d = 0; d < base->rank; d++) {
            int64_t n = shd_dim_shards(y, d);
            pads[d] = (IrPadDim){0, local.dims[d] * n - base->dims[d], 0};
            if (pads[d].hi < 0)
                pads[d].hi = 0;
        }
        if (!pad)
            pad = spmd_emit_constant_scalar(cx, base->dtype, 0);
        x = spmd_emit_pad(cx, x, pad, pads);
    }
    IrInstr *offs[SPMD_MAX_RANK];
    SlStatus st = spmd_partition_offsets(cx, v->state, y, base, offs, err);
    if (st != SL_OK)
        return st;
    x = spmd_emit_dynamic_slice(cx, x, offs, local.dims);
    if (!x)
        return spmd_nomem(cx, err);
    *out = with(v, x, y);
    return SL_OK;
}

/* ---- collective-permute (C.6) ---- */

static SlStatus
permute(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out, SlError *err)
{
    const ShdSharding *s = v->sharding;
    int64_t n = shd_device_count(s);
    int64_t *pairs = SL_NEW_ARRAY(cx->arena, int64_t, 2 * (n ? n : 1));
    if (!pairs)
        return spmd_nomem(cx, err);
    bool ident = true;
    for (int64_t k = 0; k < n; k++) {
        pairs[2 * k] = s->devices[k];
        pairs[2 * k + 1] = y->devices[k];
        ident = ident && s->devices[k] == y->devices[k];
    }
    if (ident && n == v->state->num_partitions) {
        *out = with(v, v->hlo, y);
        return SL_OK;
    }
    /* shortcut: data constant along the differing dims needs no communication */
    uint64_t bd = spmd_bcast_dims(cx, v->hlo);
    if (bd) {
        int64_t dims[SPMD_MAX_RANK];
        uint32_t nd = 0;
        for (uint32_t d = 0; d < v->base_shape->rank && d < 63; d++)
            if (bd >> d & 1)
                dims[nd++] = d;
        const ShdSharding *a = shd_partially_replicate_dims(cx->arena, s, dims, nd);
        const ShdSharding *b = shd_partially_replicate_dims(cx->arena, y, dims, nd);
        if (a && b && shd_equal(a, b)) {
            IrInstr *c = spmd_emit_copy(cx, v->hlo);
            if (!c)
                return spmd_nomem(cx, err);
            *out = with(v, c, y);
            return SL_OK;
        }
    }
    IrInstr *x = spmd_coll_permute(cx, v->state, v->hlo, pairs, (uint32_t)n);
    if (!x)
        return spmd_nomem(cx, err);
    *out = with(v, x, y);
    return SL_OK;
}

/* ---- all-to-all (C.7) ---- */

/* Groups of devices of `s` that differ only in the minor `g` factor of tile dim `t`. */
static SlStatus
split_groups(SpmdCtx *cx, const ShdSharding *s, uint32_t t, int64_t g, IrReplicaGroups *out,
             SlError *err)
{
    int64_t n_t = s->tile_dims[t];
    if (g == n_t)
        return spmd_groups_for_dims(cx, s, (const int64_t[]){t}, 1, out, err);
    const ShdSharding *sp = shd_split_dim(cx->arena, s, t, n_t / g);
    if (!sp)
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "cannot split tile dim %u", t);
    return spmd_groups_for_dims(cx, sp, (const int64_t[]){(int64_t)t + 1}, 1, out, err);
}

static SlStatus
all_to_all_one(SpmdCtx *cx, const SpmdValue *v, uint32_t src, uint32_t tgt, SpmdValue *out,
               SlError *err)
{
    const ShdSharding *s = v->sharding;
    const IrShape *base = v->base_shape;
    int64_t a = s->tile_dims[src], b = s->tile_dims[tgt];
    if (b == 0 || a % b != 0)
        return SL_ERR_UNSUPPORTED;
    int64_t g = a / b;
    const ShdSharding *xs = shd_all_to_all_sharding(cx->arena, s, src, tgt);
    if (!xs)
        return SL_ERR_UNSUPPORTED;
    IrInstr *x = v->hlo;
    uint32_t r = x->shape.rank;
    int64_t dims[SPMD_MAX_RANK + 1];
    /* 1. pad dim tgt so that it splits into g pieces of the target shard size */
    int64_t want_t = g * ceil_div(base->dims[tgt], a);
    if (x->shape.dims[tgt] < want_t) {
        IrPadDim pads[SPMD_MAX_RANK];
        for (uint32_t d = 0; d < r; d++)
            pads[d] = (IrPadDim){0, d == tgt ? want_t - x->shape.dims[tgt] : 0, 0};
        x = spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, base->dtype, 0), pads);
    } else if (x->shape.dims[tgt] > want_t) {
        int64_t lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK];
        for (uint32_t d = 0; d < r; d++) {
            lo[d] = 0;
            hi[d] = d == tgt ? want_t : x->shape.dims[d];
        }
        x = spmd_emit_slice(cx, x, lo, hi);
    }
    if (!x)
        return spmd_nomem(cx, err);
    /* 2. split tgt into [g, L/g] */
    uint32_t w = 0;
    for (uint32_t d = 0; d < r; d++) {
        if (d == tgt) {
            dims[w++] = g;
            dims[w++] = x->shape.dims[d] / g;
        } else {
            dims[w++] = x->shape.dims[d];
        }
    }
    x = spmd_emit_reshape(cx, x, dims, r + 1);
    /* 3. all-to-all on the g dim */
    IrReplicaGroups groups;
    SlStatus st = split_groups(cx, xs, tgt, g, &groups, err);
    if (st != SL_OK)
        return st;
    x = spmd_coll_all_to_all(cx, v->state, x, &groups, tgt);
    if (!x)
        return spmd_nomem(cx, err);
    /* 4. move the g dim right before src, 5. merge it into src */
    uint32_t src_pos = src < tgt ? src : src + 1;
    int64_t perm[SPMD_MAX_RANK + 1];
    uint32_t p = 0;
    for (uint32_t d = 0; d < r + 1; d++) {
        if (d == tgt)
            continue;
        if (d == src_pos)
            perm[p++] = tgt;
        perm[p++] = d;
    }
    x = spmd_emit_transpose(cx, x, perm);
    if (!x)
        return spmd_nomem(cx, err);
    w = 0;
    int64_t merged[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < r + 1; d++) {
        if (perm[d] == (int64_t)tgt) {
            merged[w++] = x->shape.dims[d] * x->shape.dims[d + 1];
            d++;
        } else {
            merged[w++] = x->shape.dims[d];
        }
    }
    x = spmd_emit_reshape(cx, x, merged, r);
    /* 6. slice away padding of src */
    int64_t want_s = ceil_div(base->dims[src], shd_dim_shards(xs, src));
    if (x && x->shape.dims[src] > want_s) {
        int64_t lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK];
        for (uint32_t d = 0; d < r; d++) {
            lo[d] = 0;
            hi[d] = d == src ? want_s : x->shape.dims[d];
        }
        x = spmd_emit_slice(cx, x, lo, hi);
    }
    if (!x)
        return spmd_nomem(cx, err);
    *out = with(v, x, xs);
    return SL_OK;
}

static SlStatus
all_to_all_chain(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, const int64_t *srcs,
                 const int64_t *tgts, uint32_t n, SpmdValue *out, Plan *plan, SlError *err)
{
    SpmdValue cur = *v;
    for (uint32_t k = 0; k < n; k++) {
        SpmdValue nx;
        SlStatus st = all_to_all_one(cx, &cur, (uint32_t)srcs[k], (uint32_t)tgts[k], &nx, err);
        if (st != SL_OK)
            return st;
        cur = nx;
    }
    if (shd_equal(cur.sharding, y)) {
        *out = cur;
        return SL_OK;
    }
    if (shd_can_reshard_with_collective_permute(cur.sharding, y)) {
        plan->method = "all-to-all+collective-permute";
        return permute(cx, &cur, y, out, err);
    }
    return no_cache(cx, &cur, y, NULL, out, plan, err);
}

/* ---- partial replication (C.8) ---- */

/* C.8.1: every device already holds its target tile inside its partial tile. */
static SlStatus
partial_to_tiled(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                 SlError *err)
{
    const ShdSharding *s = v->sharding;
    const ShdSharding *yc = shd_partial_replicate_reshard_compatible(cx->arena, s, y);
    if (!yc)
        return SL_ERR_UNSUPPORTED;
    const IrShape *base = v->base_shape;
    uint32_t r = base->rank;
    int64_t np = v->state->num_partitions;
    IrShape local = spmd_local_shape(cx, base, yc);
    IrInstr *x = v->hlo;
    int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, np);
    int64_t ix[SPMD_MAX_RANK], iy[SPMD_MAX_RANK];
    if (!tbl)
        return spmd_nomem(cx, err);
    /* check feasibility and the need to pad unsharded source dims */
    IrPadDim pads[SPMD_MAX_RANK];
    bool need_pad = false;
    for (uint32_t d = 0; d < r; d++) {
        int64_t nx = shd_dim_shards(s, d), ny = shd_dim_shards(yc, d);
        pads[d] = (IrPadDim){0, 0, 0};
        if (nx == ny)
            continue;
        int64_t Sx = ceil_div(base->dims[d], nx), Sy = local.dims[d];
        for (int64_t dev = 0; dev < np; dev++) {
            if (!shd_tile_index(s, dev, ix) || !shd_tile_index(yc, dev, iy))
                return SL_ERR_UNSUPPORTED;
            int64_t o = iy[d] * Sy - ix[d] * Sx;
            if (o < 0)
                return SL_ERR_UNSUPPORTED;
            if (o + Sy > Sx) {
                if (nx != 1)
                    return SL_ERR_UNSUPPORTED;
                pads[d].hi = Sy * ny - base->dims[d];
                need_pad = true;
            }
        }
    }
    if (need_pad)
        x = spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, base->dtype, 0), pads);
    IrInstr *offs[SPMD_MAX_RANK];
    IrInstr *zero = NULL;
    for (uint32_t d = 0; d < r; d++) {
        int64_t nx = shd_dim_shards(s, d), ny = shd_dim_shards(yc, d);
        if (nx == ny) {
            if (!zero)
                zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
            offs[d] = zero;
            continue;
        }
        int64_t Sx = ceil_div(base->dims[d], nx), Sy = local.dims[d];
        for (int64_t dev = 0; dev < np; dev++) {
            shd_tile_index(s, dev, ix);
            shd_tile_index(yc, dev, iy);
            tbl[dev] = iy[d] * Sy - ix[d] * Sx;
        }
        offs[d] = spmd_table_lookup(cx, v->state, tbl, np, IR_DT_S32);
    }
    x = spmd_emit_dynamic_slice(cx, x, offs, local.dims);
    if (!x)
        return spmd_nomem(cx, err);
    SpmdValue mid = with(v, x, yc);
    if (shd_equal(yc, y)) {
        *out = mid;
        return SL_OK;
    }
    if (shd_can_reshard_with_collective_permute(yc, y))
        return permute(cx, &mid, y, out, err);
    return SL_ERR_UNSUPPORTED;
}

/* C.8.2: gather within the groups that share one target tile. */
static SlStatus
tiled_to_partial(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                 SlError *err)
{
    const ShdSharding *yc = shd_partial_replicate_reshard_compatible(cx->arena, y, v->sharding);
    if (!yc)
        return SL_ERR_UNSUPPORTED;
    const IrShape *base = v->base_shape;
    uint32_t r = base->rank;
    /* feasibility: gathered sub-tiles must line up with the target tiles */
    for (uint32_t d = 0; d < r; d++) {
        int64_t ny = shd_dim_shards(y, d), nc = shd_dim_shards(yc, d);
        if (nc == ny)
            continue;
        if (ny == 0 || nc % ny != 0)
            return SL_ERR_UNSUPPORTED;
        int64_t f = nc / ny;
        if (ny > 1 && f * ceil_div(base->dims[d], nc) != ceil_div(base->dims[d], ny))
            return SL_ERR_UNSUPPORTED;
    }
    SpmdValue cur = *v;
    if (!shd_equal(v->sharding, yc)) {
        if (!shd_can_reshard_with_collective_permute(v->sharding, yc))
            return SL_ERR_UNSUPPORTED;
        SlStatus st = permute(cx, v, yc, &cur, err);
        if (st != SL_OK)
            return st;
    }
    IrInstr *x = cur.hlo;
    for (uint32_t d = r; d-- > 0;) {
        int64_t ny = shd_dim_shards(y, d), nc = shd_dim_shards(yc, d);
        if (nc == ny)
            continue;
        IrReplicaGroups g;
        SlStatus st;
        if (ny == 1)
            st = spmd_groups_for_dims(cx, yc, (const int64_t[]){d}, 1, &g, err);
        else
            st = split_groups(cx, yc, d, nc / ny, &g, err);
        if (st != SL_OK)
            return st;
        x = spmd_coll_all_gather(cx, v->state, x, &g, d);
        if (!x)
            return spmd_nomem(cx, err);
        int64_t want = ceil_div(base->dims[d], ny);
        if (x->shape.dims[d] > want) {
            int64_t lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK];
            for (uint32_t k = 0; k < r; k++) {
                lo[k] = 0;
                hi[k] = k == d ? want : x->shape.dims[k];
            }
            x = spmd_emit_slice(cx, x, lo, hi);
        }
    }
    if (!x)
        return spmd_nomem(cx, err);
    *out = with(v, x, y);
    return SL_OK;
}

/* ---- grouping on equally sharded dims (C.9.4) ---- */

static SlStatus
group_on_equal_dims(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                    Plan *plan, SlError *err)
{
    const ShdSharding *s = v->sharding;
    uint32_t r = shd_data_rank(s);
    int64_t e[SPMD_MAX_RANK];
    uint32_t ne = 0;
    for (uint32_t d = 0; d < r; d++)
        if (shd_dim_shards(s, d) > 1 && shd_dim_shards(s, d) == shd_dim_shards(y, d))
            e[ne++] = d;
    if (ne == 0 || ne == r)
        return SL_ERR_UNSUPPORTED;
    ShdGrouped gx = shd_group_on_dims(cx->arena, s, e, ne, NULL);
    ShdGrouped gy0 = shd_group_on_dims(cx->arena, y, e, ne, NULL);
    if (!gx.inner || !gy0.inner || gx.n_groups != gy0.n_groups)
        return SL_ERR_UNSUPPORTED;
    ShdGrouped gy = shd_align_groups_with(cx->arena, &gy0, &gx);
    if (!gy.inner || !gy.device_groups)
        return SL_ERR_UNSUPPORTED;
    const SpmdState *gs =
        spmd_state_grouped(cx, v->state, gx.device_groups, gx.n_groups, gx.group_size);
    if (!gs)
        return spmd_nomem(cx, err);
    /* per-group base shape: grouped dims shrink to one shard */
    IrShape gb = ir_shape_clone(cx->arena, v->base_shape);
    for (uint32_t k = 0; k < ne; k++)
        gb.dims[e[k]] = ceil_div(gb.dims[e[k]], shd_dim_shards(s, (uint32_t)e[k]));
    IrShape *gbp = SL_NEW(cx->arena, IrShape);
    if (!gbp)
        return spmd_nomem(cx, err);
    *gbp = gb;
    SpmdValue inner = {v->hlo, gbp, gx.inner, gs};
    SpmdValue res;
    SlStatus st = no_cache(cx, &inner, gy.inner, NULL, &res, plan, err);
    if (st != SL_OK)
        return st;
    const ShdSharding *ys = shd_ungroup(cx->arena, &gy);
    if (!ys)
        return SL_ERR_UNSUPPORTED;
    SpmdValue mid = with(v, res.hlo, ys);
    if (shd_equal(ys, y)) {
        *out = mid;
        return SL_OK;
    }
    if (shd_can_reshard_with_collective_permute(ys, y))
        return permute(cx, &mid, y, out, err);
    return no_cache(cx, &mid, y, NULL, out, plan, err);
}

/* ---- manual subgroups (C.11) ---- */

static int
manual_dim(const ShdSharding *s)
{
    if (s->kind != SHD_TILED)
        return -1;
    uint32_t r = shd_data_rank(s);
    for (uint32_t k = 0; k < s->n_subgroups; k++)
        if (s->subgroups[k] == SHD_SUB_MANUAL)
            return (int)(r + k);
    return -1;
}

static SlStatus
manual_subgroups(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                 Plan *plan, SlError *err)
{
    int mx = manual_dim(v->sharding), my = manual_dim(y);
    if (mx < 0 || my < 0)
        return SL_ERR_UNSUPPORTED;
    int64_t dx = mx, dy = my;
    ShdGrouped gx = shd_group_on_dims(cx->arena, v->sharding, &dx, 1, NULL);
    ShdGrouped gy0 = shd_group_on_dims(cx->arena, y, &dy, 1, NULL);
    if (!gx.inner || !gy0.inner || gx.n_groups != gy0.n_groups)
        return SL_ERR_UNSUPPORTED;
    ShdGrouped gy = shd_align_groups_with(cx->arena, &gy0, &gx);
    if (!gy.inner)
        return SL_ERR_UNSUPPORTED;
    const SpmdState *gs =
        spmd_state_grouped(cx, v->state, gx.device_groups, gx.n_groups, gx.group_size);
    if (!gs)
        return spmd_nomem(cx, err);
    SpmdValue inner = {v->hlo, v->base_shape, gx.inner, gs};
    SpmdValue res;
    SlStatus st = no_cache(cx, &inner, gy.inner, NULL, &res, plan, err);
    if (st != SL_OK)
        return st;
    *out = with(v, res.hlo, y);
    return SL_OK;
}

/* ---- tuples ---- */

const ShdSharding *
spmd_element_sharding(SpmdCtx *cx, const ShdSharding *s, const IrShape *tuple_shape,
                      uint32_t index)
{
    if (s->kind != SHD_TUPLE || !ir_shape_is_tuple(tuple_shape) || index >= tuple_shape->n_elems)
        return s;
    uint32_t first = 0;
    for (uint32_t k = 0; k < index; k++)
        first += ir_shape_is_tuple(&tuple_shape->elems[k])
                     ? ir_shape_leaf_count(&tuple_shape->elems[k])
                     : 1;
    const IrShape *elem = &tuple_shape->elems[index];
    if (!ir_shape_is_tuple(elem))
        return shd_leaf(s, first);
    uint32_t n = ir_shape_leaf_count(elem);
    const ShdSharding **leaves = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n ? n : 1);
    if (!leaves)
        return NULL;
    for (uint32_t k = 0; k < n; k++)
        leaves[k] = shd_leaf(s, first + k);
    return shd_tuple(cx->arena, leaves, n);
}

static SlStatus
reshard_tuple(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
              SlError *err)
{
    const IrShape *base = v->base_shape;
    uint32_t n = base->n_elems;
    IrInstr **elems = SL_NEW_ARRAY(cx->arena, IrInstr *, n ? n : 1);
    if (!elems)
        return spmd_nomem(cx, err);
    bool changed = false;
    for (uint32_t k = 0; k < n; k++) {
        const IrShape *eb = &base->elems[k];
        const ShdSharding *xs = spmd_element_sharding(cx, v->sharding, base, k);
        const ShdSharding *ys = spmd_element_sharding(cx, y, base, k);
        IrInstr *g = spmd_emit_gte(cx, v->hlo, k);
        if (!g || !xs || !ys)
            return spmd_nomem(cx, err);
        SpmdValue ev = {g, eb, xs, v->state}, er;
        SlStatus st = spmd_reshard(cx, &ev, ys, NULL, &er, err);
        if (st != SL_OK)
            return st;
        changed = changed || er.hlo != g;
        elems[k] = er.hlo;
    }
    IrInstr *t = changed ? spmd_emit_tuple(cx, elems, n) : v->hlo;
    if (!t)
        return spmd_nomem(cx, err);
    *out = with(v, t, y);
    return SL_OK;
}

/* ---- the decision order (C.2) ---- */

static bool
shd_is_partial(const ShdSharding *s)
{
    return shd_is_tiled(s) && shd_has_partial_replication(s);
}

static SlStatus
no_cache(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, IrInstr *pad, SpmdValue *out,
         Plan *plan, SlError *err)
{
    const ShdSharding *x = v->sharding;
    const IrShape *base = v->base_shape;
    SlStatus st;
    if (base->dtype == IR_DT_TOKEN || !ir_shape_is_array(base)) {
        if (ir_shape_is_tuple(base)) {
            plan->method = "tuple";
            return reshard_tuple(cx, v, y, out, err);
        }
        *out = with(v, v->hlo, y);
        plan->method = "none";
        return SL_OK;
    }
    if (shd_equal(x, y)) {
        *out = *v;
        return SL_OK;
    }
    if (x->kind == SHD_TUPLE || y->kind == SHD_TUPLE) {
        /* an array with a one-leaf tuple sharding */
        const ShdSharding *xl = x->kind == SHD_TUPLE ? shd_leaf(x, 0) : x;
        const ShdSharding *yl = y->kind == SHD_TUPLE ? shd_leaf(y, 0) : y;
        if (!xl || !yl || xl->kind == SHD_TUPLE || yl->kind == SHD_TUPLE)
            return spmd_fail(cx, err, SL_ERR_INVALID, "tuple sharding on an array value");
        SpmdValue lv = with(v, v->hlo, xl);
        return no_cache(cx, &lv, yl, pad, out, plan, err);
    }
    if (shd_is_manual_subgroup(x) || shd_is_manual_subgroup(y)) {
        plan->method = "manual-subgroup";
        st = manual_subgroups(cx, v, y, out, plan, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
    }
    if (x->kind == SHD_MANUAL || y->kind == SHD_MANUAL) {
        plan->method = "manual";
        *out = with(v, v->hlo, y);
        return SL_OK;
    }
    /* 4: broadcast of a scalar: re-emit with the target's local shape */
    if (v->hlo->op == IR_OP_BROADCAST && v->hlo->n_operands == 1 &&
        v->hlo->operands[0]->shape.rank == 0 && !shd_is_maximal(y) &&
        v->hlo->parent == cx->comp) {
        plan->method = "broadcast";
        IrShape ls = spmd_local_shape(cx, base, y);
        IrInstr *b = spmd_emit_broadcast(cx, v->hlo->operands[0], &ls, NULL, 0);
        if (!b)
            return spmd_nomem(cx, err);
        *out = with(v, b, y);
        return SL_OK;
    }
    if (shd_can_reshard_with_collective_permute(x, y)) {
        plan->method = "collective-permute";
        return permute(cx, v, y, out, err);
    }
    bool x_tiled = shd_is_tiled(x), y_tiled = shd_is_tiled(y);
    if (x_tiled && y_tiled) {
        int64_t srcs[SPMD_MAX_RANK], tgts[SPMD_MAX_RANK];
        uint32_t n = shd_all_to_all_dims(x, y, srcs, tgts, SPMD_MAX_RANK);
        if (n > 0) {
            plan->method = "all-to-all";
            st = all_to_all_chain(cx, v, y, srcs, tgts, n, out, plan, err);
            if (st != SL_ERR_UNSUPPORTED)
                return st;
        }
    }
    if (y_tiled && shd_is_partial(x)) {
        plan->method = "dynamic-slice";
        st = partial_to_tiled(cx, v, y, out, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
    }
    if (x_tiled && shd_is_partial(y)) {
        plan->method = "all-gather";
        st = tiled_to_partial(cx, v, y, out, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
    }
    if (x_tiled && y_tiled) {
        /* C.9.2: replicate one dim first when that makes the replication factors match */
        if (shd_is_partial(y)) {
            for (uint32_t d = 0; d < shd_data_rank(x); d++) {
                int64_t nd = shd_dim_shards(x, d);
                if (nd > 1 && nd * shd_replication_factor(x) == shd_replication_factor(y)) {
                    int64_t dd = d;
                    const ShdSharding *mid = shd_partially_replicate_dims(cx->arena, x, &dd, 1);
                    if (!mid || shd_equal(mid, x))
                        break;
                    SpmdValue m;
                    plan->method = "all-gather";
                    st = replicate_dims(cx, v, &dd, 1, &m, err);
                    if (st != SL_OK)
                        return st;
                    m.sharding = mid;
                    return no_cache(cx, &m, y, pad, out, plan, err);
                }
            }
        }
        plan->method = "grouped";
        st = group_on_equal_dims(cx, v, y, out, plan, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
    }
    if (!is_repl_like(x)) {
        /* 10: replicate, then slice to the target */
        SpmdValue rep;
        Plan sub = {"all-gather"};
        if (x->kind == SHD_MAXIMAL && y->kind != SHD_MAXIMAL && v->state->n_groups == 0)
            sub.method = "broadcast";
        else if (x_tiled && y_tiled)
            spmd_warn(cx, "involuntary full rematerialization");
        st = replicate_no_cache(cx, v, &rep, &sub, err);
        if (st != SL_OK)
            return st;
        plan->method = sub.method;
        if (is_repl_like(y)) {
            *out = rep;
            return SL_OK;
        }
        return no_cache(cx, &rep, y, pad, out, plan, err);
    }
    if (is_repl_like(y) || y->kind == SHD_MAXIMAL) {
        plan->method = "copy";
        IrInstr *c = y->kind == SHD_MAXIMAL ? spmd_emit_copy(cx, v->hlo) : v->hlo;
        if (!c)
            return spmd_nomem(cx, err);
        *out = with(v, c, y);
        return SL_OK;
    }
    plan->method = "dynamic-slice";
    return slice_from_replicated(cx, v, y, pad, out, err);
}

/* ---- windowed input (C.12) ---- */

SlStatus
spmd_reshard_as_windowed_input(SpmdCtx *cx, const SpmdValue *v, const IrWindowDim *window,
                               const ShdSharding *target, IrInstr *pad_value, bool mask_invalid,
                               SpmdWindowedInput *out, SlError *err)
{
    (void)cx;
    (void)v;
    (void)window;
    (void)target;
    (void)pad_value;
    (void)mask_invalid;
    (void)out;
    (void)err;
    return SL_ERR_UNSUPPORTED;
}
