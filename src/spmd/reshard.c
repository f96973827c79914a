/* reshard.c - PartitionedHlo::Reshard (gspmd.md §C): make a partitioned value have another
 * sharding. Owns: the reshard cache, the decision order of C.2, replication (C.4), the
 * replicated -> sharded slicing (C.3), device reorders (C.6), all-to-all chains (C.7, uneven
 * dims re-laid out in the padded base shape first: spmd_halo_rewindow), the
 * partial-replication transitions (C.8), grouping on equal dims (C.9.4), masking (C.10),
 * unreduced shardings (resharded in their replicated form) and the depth guard that turns a
 * pattern making no progress into replication instead of endless recursion. Does not own: the complex patterns tried before grouping (C.9.1-C.9.3, reshard_complex.c),
 * building collectives (collectives.c) or sharding arithmetic (src/sharding).
 * Invariants: every call emits one `reshard` trace event (cache hits included); collectives are
 * attributed to the reshard being built through cx->cur_reshard. */
#include "spmd/reshard_int.h"

#include <string.h>

#include "spmd/halo_int.h"

bool
spmd_is_partial(const ShdSharding *s)
{
    return shd_is_tiled(s) && shd_has_partial_replication(s);
}

bool
spmd_has_plain_subgroups(const ShdSharding *s)
{
    for (uint32_t k = 0; k < s->n_subgroups; k++)
        if (s->subgroups[k] != SHD_SUB_REPLICATED)
            return false;
    return s->n_subgroups <= 1;
}

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

static SlStatus
reshard_at(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *target, IrInstr *pad_value,
           uint32_t depth, SpmdValue *out, SlError *err)
{
    if (!target || shd_equal(v->sharding, target)) {
        *out = *v;
        return SL_OK;
    }
    uint32_t seq = ++cx->reshard_seq;
    /* a gather to fewer tiles consults and fills the cache only with cache_all_gather; the
     * way back from the result is always recorded (PartitionedHlo::Reshard) */
    bool fewer_tiles =
        ir_shape_is_array(v->base_shape) && shd_num_tiles(target) < shd_num_tiles(v->sharding);
    bool use_cache = !fewer_tiles || cx->opts->cache_all_gather;
    /* a pad value asks for a fresh reshard that then replaces the cached one (upstream) */
    if (!pad_value && use_cache && cache_find(cx, v->hlo, v->base_shape, target, out)) {
        trace_reshard(cx, v, target, "cache-hit", out->hlo, seq);
        return SL_OK;
    }
    uint32_t saved = cx->cur_reshard;
    const char *saved_cause = cx->coll_cause;
    cx->cur_reshard = seq;
    cx->coll_cause = "reshard";
    SpmdPlan plan = {.method = "copy", .depth = depth};
    SlStatus st = spmd_reshard_no_cache(cx, v, target, pad_value, out, &plan, err);
    cx->cur_reshard = saved;
    cx->coll_cause = saved_cause;
    if (st != SL_OK)
        return st;
    if (!out->hlo)
        return spmd_nomem(cx, err);
    out->sharding = target;
    spmd_note_sharding(cx, out->hlo, target);
    if (!cx->cache_frozen) {
        cache_put(cx, out->hlo, v->base_shape, v->sharding, v);
        if (use_cache)
            cache_put(cx, v->hlo, v->base_shape, target, out);
    }
    trace_reshard(cx, v, target, plan.method, out->hlo, seq);
    return SL_OK;
}

SlStatus
spmd_reshard(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *target, IrInstr *pad_value,
             SpmdValue *out, SlError *err)
{
    return reshard_at(cx, v, target, pad_value, 0, out, err);
}

SlStatus
spmd_reshard_nested(SpmdCtx *cx, const SpmdPlan *parent, const SpmdValue *v, const ShdSharding *y,
                    SpmdValue *out, SlError *err)
{
    return reshard_at(cx, v, y, NULL, parent->depth, out, err);
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
    if (n_bc) {
        /* only tile 0 along these dims holds data: broadcast it within the groups of devices
         * that differ only there, first (XLA's ReplicatePartial: Broadcast() in per-group
         * state: the in-group id, a u32 table, compared with the group's device 0) */
        int64_t np = v->state->num_partitions;
        int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, np);
        int64_t idx[SPMD_MAX_RANK];
        if (!tbl)
            return spmd_nomem(cx, err);
        for (int64_t d = 0; d < np; d++) {
            int64_t in_group = 0;
            if (shd_tile_index(s, d, idx))
                for (uint32_t k = 0; k < n_bc; k++)
                    in_group = in_group * shd_dim_shards(s, (uint32_t)bc[k]) + idx[bc[k]];
            tbl[d] = in_group;
        }
        IrInstr *id = spmd_table_lookup(cx, v->state, tbl, np, IR_DT_U32);
        IrInstr *src = spmd_emit_constant_scalar(cx, IR_DT_U32, 0);
        IrInstr *eq = id && src ? spmd_emit_compare(cx, id, src, "EQ") : NULL;
        IrShape ps = ir_shape_make(cx->arena, IR_DT_PRED, x->shape.dims, x->shape.rank);
        IrInstr *beq = eq && x->shape.rank ? spmd_emit_broadcast(cx, eq, &ps, NULL, 0) : eq;
        IrInstr *zero = spmd_emit_zero_like(cx, &x->shape);
        IrInstr *sel = beq && zero ? spmd_emit_select(cx, beq, x, zero) : NULL;
        IrComputation *red = spmd_reducer(cx, SPMD_RED_ADD, x->shape.dtype);
        x = sel ? spmd_all_reduce_along_dims(cx, v->state, sel, s, bc, n_bc, red) : NULL;
        if (!x)
            return spmd_nomem(cx, err);
    }
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
replicate_no_cache(SpmdCtx *cx, const SpmdValue *v, SpmdValue *out, SpmdPlan *plan, SlError *err)
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

static bool
is_plain_partial(const ShdSharding *s)
{
    return s->kind == SHD_TILED && s->n_subgroups == 1 && s->subgroups[0] == SHD_SUB_REPLICATED;
}

/* Offsets of a replicated value's slice for a partially replicated target, as XLA's
 * PerGroupSliceFromReplicated builds them: the device's group (its replication group, in
 * tile order) from a u32 table, then per sharded dim a table over the groups' tiles indexed
 * by it; constant 0 on the other dims. */
static SlStatus
group_slice_offsets(SpmdCtx *cx, const SpmdState *st, const ShdSharding *y, const IrShape *base,
                    IrInstr **offs, SlError *err)
{
    int64_t np = st->num_partitions, tiles = shd_num_tiles(y), idx[SPMD_MAX_RANK];
    uint32_t r = shd_data_rank(y);
    int64_t *gid = SL_NEW_ARRAY(cx->arena, int64_t, np);
    int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, tiles);
    if (!gid || !tbl || r > SPMD_MAX_RANK)
        return spmd_nomem(cx, err);
    for (int64_t d = 0; d < np; d++) {
        if (!shd_tile_index(y, d, idx))
            return SL_ERR_UNSUPPORTED;
        int64_t lin = 0;
        for (uint32_t i = 0; i < r; i++)
            lin = lin * y->tile_dims[i] + idx[i];
        gid[d] = lin;
    }
    IrInstr *g = NULL;
    for (uint32_t d = 0; d < base->rank; d++) {
        int64_t n = shd_dim_shards(y, d);
        if (n <= 1) {
            offs[d] = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        } else {
            if (!g)
                g = spmd_table_lookup_at(cx, spmd_partition_id(cx, st), gid, np, IR_DT_U32);
            int64_t per = (base->dims[d] + n - 1) / n, stride = 1;
            for (uint32_t i = d + 1; i < r; i++)
                stride *= y->tile_dims[i];
            for (int64_t t = 0; t < tiles; t++)
                tbl[t] = t / stride % n * per;
            offs[d] = spmd_table_lookup_at(cx, g, tbl, tiles, IR_DT_S32);
        }
        if (!offs[d])
            return spmd_nomem(cx, err);
    }
    return SL_OK;
}

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
    SlStatus st = is_plain_partial(y) ? group_slice_offsets(cx, v->state, y, base, offs, err)
                                      : spmd_partition_offsets(cx, v->state, y, base, offs, err);
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

SlStatus
spmd_reshard_all_to_all_one(SpmdCtx *cx, const SpmdValue *v, uint32_t src, uint32_t tgt,
                            SpmdValue *out, SlError *err)
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
    /* 1. lay dim tgt out in the padded base shape of xs, split b ways: shard i holds
     * [i * g * S', (i + 1) * g * S') with S' = ceil(D_t / a), so that the g pieces line up with
     * xs's tiles even when D_t does not divide (a pad for b == 1, else an exchange) */
    int64_t want_t = g * ceil_div(base->dims[tgt], a);
    x = spmd_halo_rewindow(cx, v->state, s, tgt, x, base->dims[tgt], want_t);
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
    /* 6. shard j of xs now holds [j * g * L_s, (j + 1) * g * L_s) of src: move it to the
     * standard [j * S, (j + 1) * S), S = ceil(D_s / b) (a slice for b == 1, else an exchange) */
    int64_t want_s = ceil_div(base->dims[src], shd_dim_shards(xs, src));
    x = spmd_halo_rewindow(cx, v->state, xs, src, x, base->dims[src], want_s);
    if (!x)
        return spmd_nomem(cx, err);
    *out = with(v, x, xs);
    return SL_OK;
}

/* Reshape/transpose around one all-to-all on a merged leading dim (TryMultipleSourceTargetDims
 * steps 1-3): each target dim t_k splits into [g_k, L/g_k], the g_k move to the front and merge,
 * all-to-all on dim 0, then each g_k merges into its source dim. */
static IrInstr *
multi_a2a_emit(SpmdCtx *cx, const SpmdValue *v, const int64_t *es, const int64_t *et,
               const int64_t *g, uint32_t ne, int64_t total_g, const IrReplicaGroups *groups,
               IrInstr **t0_out)
{
    IrInstr *x = v->hlo;
    uint32_t r = x->shape.rank, w = 0, np = 0;
    int64_t s0[2 * SPMD_MAX_RANK], p0[2 * SPMD_MAX_RANK];
    for (uint32_t i = 0; i < r; i++) {
        int64_t gi = 0;
        for (uint32_t k = 0; k < ne; k++)
            gi = et[k] == (int64_t)i ? g[k] : gi;
        if (gi) {
            p0[np++] = w;
            s0[w++] = gi;
            s0[w++] = x->shape.dims[i] / gi;
        } else {
            s0[w++] = x->shape.dims[i];
        }
    }
    for (uint32_t i = 0; i < w; i++) {
        bool in = false;
        for (uint32_t k = 0; k < ne; k++)
            in = in || p0[k] == (int64_t)i;
        if (!in)
            p0[np++] = i;
    }
    IrInstr *t0 = spmd_emit_transpose(cx, spmd_emit_reshape(cx, x, s0, w), p0);
    if (!t0)
        return NULL;
    *t0_out = t0;
    int64_t s1[2 * SPMD_MAX_RANK];
    s1[0] = total_g;
    for (uint32_t i = ne; i < w; i++)
        s1[i - ne + 1] = t0->shape.dims[i];
    IrInstr *a2a = spmd_coll_all_to_all(cx, v->state, spmd_emit_reshape(cx, t0, s1, w - ne + 1),
                                        groups, 0);
    IrInstr *r2 = spmd_emit_reshape(cx, a2a, t0->shape.dims, w);
    /* permutation_1: iota(r) + ne, with eligible k inserted before source dim k */
    int64_t p1[2 * SPMD_MAX_RANK];
    uint32_t n1 = r;
    for (uint32_t i = 0; i < r; i++)
        p1[i] = i + ne;
    for (uint32_t k = 0; k < ne; k++) {
        uint32_t at = 0;
        while (at < n1 && p1[at] != es[k] + (int64_t)ne)
            at++;
        memmove(&p1[at + 1], &p1[at], (n1 - at) * sizeof(p1[0]));
        p1[at] = k;
        n1++;
    }
    IrInstr *t1 = spmd_emit_transpose(cx, r2, p1);
    if (!t1)
        return NULL;
    int64_t s3[SPMD_MAX_RANK];
    uint32_t n3 = 0;
    for (uint32_t i = 0; i < n1; i++) {
        if (p1[i] < (int64_t)ne) {
            s3[n3++] = t1->shape.dims[i] * t1->shape.dims[i + 1];
            i++;
        } else {
            s3[n3++] = t1->shape.dims[i];
        }
    }
    return spmd_emit_reshape(cx, t1, s3, n3);
}

/* Groups of `t` for one all-to-all over several target dims: devices agreeing on every tile
 * coordinate except the minor g[k] factor of each dim tdims[k], in row-major order. */
static bool
multi_groups(SpmdCtx *cx, const ShdSharding *t, const int64_t *tdims, const int64_t *g,
             uint32_t n, int64_t total_g, IrReplicaGroups *out)
{
    int64_t total = shd_device_count(t), n_groups = total / total_g;
    int64_t *fill = SL_NEW_ARRAY(cx->arena, int64_t, n_groups);
    uint32_t *sizes = SL_NEW_ARRAY(cx->arena, uint32_t, n_groups);
    int64_t *ids = SL_NEW_ARRAY(cx->arena, int64_t, total);
    if (!fill || !sizes || !ids)
        return false;
    for (int64_t p = 0; p < total; p++) {
        int64_t rem = p, idx[SPMD_MAX_RANK + 4], gid = 0;
        for (uint32_t d = t->n_tile_dims; d-- > 0;) {
            idx[d] = rem % t->tile_dims[d];
            rem /= t->tile_dims[d];
        }
        for (uint32_t d = 0; d < t->n_tile_dims; d++) {
            int64_t gs = 1;
            for (uint32_t k = 0; k < n; k++)
                gs = tdims[k] == (int64_t)d ? g[k] : gs;
            gid = gid * (t->tile_dims[d] / gs) + idx[d] / gs;
        }
        ids[gid * total_g + fill[gid]++] = t->devices[p];
    }
    for (int64_t k = 0; k < n_groups; k++)
        sizes[k] = (uint32_t)total_g;
    memset(out, 0, sizeof(*out));
    out->n_groups = (uint32_t)n_groups;
    out->group_sizes = sizes;
    out->ids = ids;
    return true;
}

/* C.7 last paragraph (TryMultipleSourceTargetDims): the eligible swaps (distinct dims, evenly
 * divisible) in one all-to-all on a merged leading dim; the rest go to rest_*. */
static SlStatus
all_to_all_multi(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, const int64_t *srcs,
                 const int64_t *tgts, uint32_t n, SpmdValue *out, int64_t *rest_s,
                 int64_t *rest_t, uint32_t *n_rest, SlError *err)
{
    const ShdSharding *x = v->sharding;
    const IrShape *base = v->base_shape;
    uint32_t order[SPMD_MAX_RANK], ne = 0, r = base->rank;
    int64_t es[SPMD_MAX_RANK], et[SPMD_MAX_RANK], g[SPMD_MAX_RANK], total_g = 1;
    uint64_t seen = 0;
    for (uint32_t k = 0; k < n; k++)
        order[k] = k;
    for (uint32_t a = 1; a < n; a++) /* stable sort by target dim */
        for (uint32_t b = a; b > 0 && tgts[order[b - 1]] > tgts[order[b]]; b--) {
            uint32_t t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    *n_rest = 0;
    for (uint32_t k = 0; k < n; k++) {
        int64_t sd = srcs[order[k]], td = tgts[order[k]];
        bool ok = !(seen >> sd & 1) && !(seen >> td & 1) &&
                  base->dims[sd] % x->tile_dims[sd] == 0 &&
                  base->dims[td] % y->tile_dims[td] == 0 && x->tile_dims[td] > 0 &&
                  x->tile_dims[sd] % x->tile_dims[td] == 0;
        if (ok) {
            g[ne] = x->tile_dims[sd] / x->tile_dims[td];
            ok = v->hlo->shape.dims[td] % g[ne] == 0;
        }
        if (!ok) {
            rest_s[*n_rest] = sd;
            rest_t[(*n_rest)++] = td;
            continue;
        }
        es[ne] = sd;
        et[ne] = td;
        total_g *= g[ne++];
        seen |= (uint64_t)1 << sd | (uint64_t)1 << td;
    }
    if (ne < 2 || r + ne > SPMD_MAX_RANK)
        return SL_ERR_UNSUPPORTED;
    const ShdSharding *tt = x;
    for (uint32_t k = 0; k < ne && tt; k++)
        tt = shd_all_to_all_sharding(cx->arena, tt, (uint32_t)es[k], (uint32_t)et[k]);
    IrReplicaGroups groups;
    if (!tt || !multi_groups(cx, tt, et, g, ne, total_g, &groups))
        return tt ? spmd_nomem(cx, err) : SL_ERR_UNSUPPORTED;
    IrInstr *t0 = NULL;
    IrInstr *res = multi_a2a_emit(cx, v, es, et, g, ne, total_g, &groups, &t0);
    if (!res)
        return spmd_nomem(cx, err);
    *out = with(v, res, tt);
    return SL_OK;
}

static SlStatus
all_to_all_chain(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, const int64_t *srcs,
                 const int64_t *tgts, uint32_t n, SpmdValue *out, SpmdPlan *plan, SlError *err)
{
    SpmdValue cur = *v;
    int64_t rs[SPMD_MAX_RANK], rt[SPMD_MAX_RANK];
    uint32_t nr = 0;
    SlStatus mst = all_to_all_multi(cx, v, y, srcs, tgts, n, &cur, rs, rt, &nr, err);
    if (mst == SL_OK) {
        srcs = rs;
        tgts = rt;
        n = nr;
    } else if (mst != SL_ERR_UNSUPPORTED) {
        return mst;
    } else {
        cur = *v;
    }
    for (uint32_t k = 0; k < n; k++) {
        SpmdValue nx;
        SlStatus st =
            spmd_reshard_all_to_all_one(cx, &cur, (uint32_t)srcs[k], (uint32_t)tgts[k], &nx, err);
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
    return spmd_reshard_no_cache(cx, &cur, y, NULL, out, plan, err);
}

/* ---- partial replication (C.8) ---- */

/* C.8.1 offsets: where each device's target tile starts inside its (re-laid-out) source tile:
 * tile_y * S_y - tile_x * (S_y * n_y / n_x), per dim whose shard count grows. */
static SlStatus
partial_offsets(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *yc, const IrShape *local,
                IrInstr **offs, SlError *err)
{
    /* As XLA: the target's offsets minus the source's over the padded base (local size times
     * the target's shards), on every dim, each side a table of its tile offsets or constant 0
     * where that side is unsharded (so `t - t` and `0 - 0` where nothing moves). */
    const ShdSharding *s = v->sharding;
    int64_t np = v->state->num_partitions;
    int64_t ix[SPMD_MAX_RANK], iy[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < v->base_shape->rank; d++) {
        int64_t nx = shd_dim_shards(s, d), ny = shd_dim_shards(yc, d), Sy = local->dims[d];
        IrInstr *side[2];
        for (int k = 0; k < 2; k++) {
            const ShdSharding *t = k ? s : yc;
            int64_t n = k ? nx : ny, size = Sy * ny / n;
            if (n == 1) {
                side[k] = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
                continue;
            }
            int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, np);
            if (!tbl)
                return spmd_nomem(cx, err);
            for (int64_t dev = 0; dev < np; dev++) {
                if (!shd_tile_index(t, dev, k ? ix : iy))
                    return SL_ERR_UNSUPPORTED;
                tbl[dev] = (k ? ix : iy)[d] * size;
            }
            side[k] = spmd_table_lookup(cx, v->state, tbl, np, IR_DT_S32);
        }
        offs[d] = side[0] && side[1] ? spmd_emit_binary(cx, IR_OP_SUBTRACT, side[0], side[1])
                                     : NULL;
        if (!offs[d])
            return spmd_nomem(cx, err);
    }
    return SL_OK;
}

/* C.8.1: every device holds its target tile inside its partial tile, after an exchange that
 * re-lays the source out for the target's padding (PadFromPartialReplicateShape). */
static SlStatus
partial_to_tiled(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                 SlError *err)
{
    const ShdSharding *s = v->sharding;
    const ShdSharding *yc = shd_partial_replicate_reshard_compatible(cx->arena, s, y);
    if (!yc)
        return SL_ERR_UNSUPPORTED;
    for (uint32_t d = 0; d < v->base_shape->rank; d++)
        if (shd_dim_shards(yc, d) % shd_dim_shards(s, d) != 0)
            return SL_ERR_UNSUPPORTED;
    if (!shd_equal(yc, y) && !shd_can_reshard_with_collective_permute(yc, y))
        return SL_ERR_UNSUPPORTED;
    IrShape local = spmd_local_shape(cx, v->base_shape, yc);
    IrInstr *offs[SPMD_MAX_RANK];
    SlStatus st = partial_offsets(cx, v, yc, &local, offs, err);
    if (st != SL_OK)
        return st;
    IrInstr *x = spmd_halo_pad_from_partial(cx, v->state, v->hlo, v->base_shape, s, yc);
    x = x ? spmd_emit_dynamic_slice(cx, x, offs, local.dims) : NULL;
    if (!x)
        return spmd_nomem(cx, err);
    SpmdValue mid = with(v, x, yc);
    if (shd_equal(yc, y)) {
        *out = mid;
        return SL_OK;
    }
    return permute(cx, &mid, y, out, err);
}

/* C.8.2 step 3 when every replicated dim is gathered: all-gather each within its groups,
 * trimming padding (in the root state, so the groups keep their iota form). */
static IrInstr *
gather_to_partial(SpmdCtx *cx, const SpmdValue *v, IrInstr *x, const ShdSharding *yc,
                  const ShdSharding *y, SlError *err)
{
    const IrShape *base = v->base_shape;
    uint32_t r = base->rank;
    for (uint32_t d = r; d-- > 0 && x;) {
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
            return NULL;
        x = spmd_coll_all_gather(cx, v->state, x, &g, d);
        int64_t want = ceil_div(base->dims[d], ny);
        if (x && x->shape.dims[d] > want) {
            int64_t lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK];
            for (uint32_t k = 0; k < r; k++) {
                lo[k] = 0;
                hi[k] = k == d ? want : x->shape.dims[k];
            }
            x = spmd_emit_slice(cx, x, lo, hi);
        }
    }
    return x;
}

/* C.8.2 (ReshardToPartialReplicateWithAllGather): a halo exchange for uneven dims
 * (TileToPartialReplicateHaloExchange), then ReplicatePartial of the replicated dims in groups
 * of the devices sharing one target tile, over the target tile as base shape: a dim the
 * target holds in the first shard alone is broadcast from it, a short one all-reduced, the
 * rest all-gathered (gather_to_partial when that is all). */
static SlStatus
tiled_to_partial(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                 SlError *err)
{
    const ShdSharding *yc = shd_partial_replicate_reshard_compatible(cx->arena, y, v->sharding);
    if (!yc)
        return SL_ERR_UNSUPPORTED;
    int64_t rd[SPMD_MAX_RANK], rf[SPMD_MAX_RANK];
    uint32_t nr = 0;
    bool gather_only = true;
    for (uint32_t d = 0; d < v->base_shape->rank; d++) {
        int64_t ny = shd_dim_shards(y, d), nc = shd_dim_shards(yc, d);
        if (ny == 0 || nc % ny != 0)
            return SL_ERR_UNSUPPORTED;
        if (nc / ny == 1)
            continue;
        rd[nr] = d;
        rf[nr++] = nc / ny;
        int64_t tile = ceil_div(v->base_shape->dims[d], ny);
        gather_only = gather_only && tile != ceil_div(tile, nc / ny) && tile > nc / ny / 2;
    }
    ShdGrouped g = shd_group_on_dims(cx->arena, yc, rd, nr, rf);
    if (!g.inner || !g.device_groups)
        return SL_ERR_UNSUPPORTED;
    if (!shd_equal(v->sharding, yc) && !shd_can_reshard_with_collective_permute(v->sharding, yc))
        return SL_ERR_UNSUPPORTED;
    SpmdValue cur = *v;
    if (!shd_equal(v->sharding, yc)) {
        SlStatus st = permute(cx, v, yc, &cur, err);
        if (st != SL_OK)
            return st;
    }
    IrInstr *x = spmd_halo_tile_to_partial(cx, v->state, cur.hlo, v->base_shape, yc, y);
    if (!x)
        return spmd_nomem(cx, err);
    if (gather_only) {
        x = gather_to_partial(cx, v, x, yc, y, err);
        if (!x)
            return sl_arena_failed(cx->arena) ? spmd_nomem(cx, err) : SL_ERR_INVALID;
        *out = with(v, x, y);
        return SL_OK;
    }
    const SpmdState *gs =
        spmd_state_grouped(cx, v->state, g.device_groups, g.n_groups, g.group_size);
    IrShape *tile = SL_NEW(cx->arena, IrShape);
    if (!gs || !tile)
        return spmd_nomem(cx, err);
    *tile = spmd_local_shape(cx, v->base_shape, y);
    SpmdValue gv = {x, tile, g.inner, gs}, res;
    SlStatus st = replicate_dims(cx, &gv, rd, nr, &res, err);
    if (st != SL_OK)
        return st;
    *out = with(v, res.hlo, y);
    return SL_OK;
}

/* ---- grouping on equally sharded dims (C.9.4) ---- */

static SlStatus
group_on_equal_dims(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                    SpmdPlan *plan, SlError *err)
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
    const ShdSharding *ys = shd_ungroup(cx->arena, &gy);
    if (!ys || shd_equal(ys, s)) /* the groups would hand back the source: no progress */
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
    /* the grouped value is a copy of v (upstream), and the reshards below may replicate even
     * inside a trial: only the trial's own level is held back from full replication */
    IrInstr *copy = spmd_emit_copy(cx, v->hlo);
    if (!copy)
        return spmd_nomem(cx, err);
    bool allow = cx->allow_full_replication;
    cx->allow_full_replication = true;
    SpmdValue inner = {copy, gbp, gx.inner, gs}, res;
    SlStatus st = spmd_reshard_no_cache(cx, &inner, gy.inner, NULL, &res, plan, err);
    if (st == SL_OK) {
        SpmdValue mid = with(v, res.hlo, ys);
        if (shd_equal(ys, y))
            *out = mid;
        else if (shd_can_reshard_with_collective_permute(ys, y))
            st = permute(cx, &mid, y, out, err);
        else
            st = spmd_reshard_no_cache(cx, &mid, y, NULL, out, plan, err);
    }
    cx->allow_full_replication = allow;
    return st;
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

static const char k_manual_mismatch[] = "manual-subgroup (groups differ)";

/* Whether `a` and `b` put the same devices together (in any order of groups and members). */
static bool
same_group_sets(SpmdCtx *cx, const ShdGrouped *a, const ShdGrouped *b)
{
    int64_t total = a->n_groups * a->group_size;
    if (a->n_groups != b->n_groups || a->group_size != b->group_size || total <= 0)
        return false;
    int64_t *group_of = SL_NEW_ARRAY(&cx->scratch, int64_t, (size_t)total);
    if (!group_of)
        return false;
    for (int64_t i = 0; i < total; i++)
        group_of[i] = -1;
    for (int64_t i = 0; i < total; i++) {
        int64_t d = b->device_groups[i];
        if (d < 0 || d >= total)
            return false;
        group_of[d] = i / b->group_size;
    }
    for (int64_t g = 0; g < a->n_groups; g++) {
        int64_t first = -1;
        for (int64_t m = 0; m < a->group_size; m++) {
            int64_t d = a->device_groups[g * a->group_size + m];
            if (d < 0 || d >= total || group_of[d] < 0)
                return false;
            if (m == 0)
                first = group_of[d];
            else if (group_of[d] != first)
                return false;
        }
    }
    return true;
}

static SlStatus
manual_subgroups(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                 SpmdPlan *plan, SlError *err)
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
    if (!same_group_sets(cx, &gx, &gy0)) {
        /* The manual groups differ: the data of a manual group is the user's, and no
         * collective may move it to another group; XLA's partitioner requires the same
         * groups on both sides too. */
        SlBuf a, b;
        sl_buf_init(&a);
        sl_buf_init(&b);
        shd_print(v->sharding, &a);
        shd_print(y, &b);
        plan->method = k_manual_mismatch; /* final: no other pattern may try */
        SlStatus st = spmd_fail(cx, err, SL_ERR_UNSUPPORTED,
                                "resharding %s to %s would move data between manual "
                                "subgroups: their devices differ",
                                a.data ? a.data : "", b.data ? b.data : "");
        sl_buf_fini(&a);
        sl_buf_fini(&b);
        return st;
    }
    const SpmdState *gs =
        spmd_state_grouped(cx, v->state, gx.device_groups, gx.n_groups, gx.group_size);
    if (!gs)
        return spmd_nomem(cx, err);
    SpmdValue inner = {v->hlo, v->base_shape, gx.inner, gs};
    SpmdValue res;
    SlStatus st = spmd_reshard_no_cache(cx, &inner, gy.inner, NULL, &res, plan, err);
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

/* C.8.3 (ReshardPartialReplicateWithAllToAll): tiled [.., a, ..] <-> partial [1, .., a', R]
 * over the same device order, through the partial sharding with the last sharded dim moved
 * into the replication dim. */
static SlStatus
partial_all_to_all(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                   SpmdPlan *plan, SlError *err)
{
    bool from_partial = spmd_is_partial(v->sharding);
    const ShdSharding *p = from_partial ? v->sharding : y, *t = from_partial ? y : v->sharding;
    if (!spmd_is_partial(p) || !spmd_has_plain_subgroups(p) || !shd_is_tiled(t) ||
        t->n_subgroups != 0 || t->n_tile_dims + 1 != p->n_tile_dims || p->tile_dims[0] != 1)
        return SL_ERR_UNSUPPORTED;
    int64_t R = p->tile_dims[p->n_tile_dims - 1];
    int rep = -1;
    for (uint32_t i = t->n_tile_dims; i-- > 0;) {
        if (t->tile_dims[i] > 1 && rep < 0) {
            if (t->tile_dims[i] != R)
                return SL_ERR_UNSUPPORTED;
            rep = (int)i;
        }
        if (t->tile_dims[i] != p->tile_dims[i + 1])
            return SL_ERR_UNSUPPORTED;
    }
    int64_t total = shd_device_count(t);
    if (rep < 0 || total != shd_device_count(p) ||
        memcmp(t->devices, p->devices, (size_t)total * sizeof(int64_t)) != 0)
        return SL_ERR_UNSUPPORTED;
    int64_t dims[SPMD_MAX_RANK + 4];
    memcpy(dims, t->tile_dims, t->n_tile_dims * sizeof(dims[0]));
    dims[rep] = 1;
    dims[t->n_tile_dims] = R;
    const ShdSubgroup sub = SHD_SUB_REPLICATED;
    const ShdSharding *tmp = shd_tiled(cx->arena, dims, t->n_tile_dims + 1, t->devices, &sub, 1);
    if (!tmp)
        return spmd_nomem(cx, err);
    int64_t srcs[SPMD_MAX_RANK + 4], tgts[SPMD_MAX_RANK + 4];
    SpmdValue m;
    if (from_partial) {
        uint32_t n = shd_all_to_all_dims(v->sharding, tmp, srcs, tgts, SPMD_MAX_RANK);
        if (n == 0)
            return SL_ERR_UNSUPPORTED;
        SlStatus st = all_to_all_chain(cx, v, tmp, srcs, tgts, n, &m, plan, err);
        return st == SL_OK ? spmd_reshard_nested(cx, plan, &m, y, out, err) : st;
    }
    uint32_t n = shd_all_to_all_dims(tmp, y, srcs, tgts, SPMD_MAX_RANK);
    if (n == 0)
        return SL_ERR_UNSUPPORTED;
    SlStatus st = spmd_reshard_nested(cx, plan, v, tmp, &m, err);
    return st == SL_OK ? all_to_all_chain(cx, &m, y, srcs, tgts, n, out, plan, err) : st;
}

/* ---- the decision order (C.2) ---- */

/* Replicated (or maximal) v to y without going back through the decision order. */
static SlStatus
from_replicated(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, IrInstr *pad, SpmdValue *out,
                SpmdPlan *plan, SlError *err)
{
    if (is_repl_like(y) || y->kind == SHD_MAXIMAL) {
        plan->method = "copy";
        IrInstr *c = y->kind == SHD_MAXIMAL ? spmd_emit_copy(cx, v->hlo) : v->hlo;
        if (!c)
            return spmd_nomem(cx, err);
        *out = with(v, c, y);
        return SL_OK;
    }
    if (!shd_is_tiled(y)) {
        *out = with(v, v->hlo, y);
        return SL_OK;
    }
    plan->method = "dynamic-slice";
    return slice_from_replicated(cx, v, y, pad, out, err);
}

/* The guard against patterns that hand back a reshard no closer to its target: past the
 * depth limit, replicate and slice (a trial, which must not replicate, fails instead). */
static SlStatus
give_up(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, IrInstr *pad, SpmdValue *out,
        SpmdPlan *plan, SlError *err)
{
    spmd_warn(cx, TRACE_WARN_OTHER, "reshard: no progress within the depth limit, replicating");
    if (!cx->allow_full_replication)
        return SL_ERR_UNSUPPORTED;
    SpmdValue rep;
    SlStatus st = replicate_no_cache(cx, v, &rep, plan, err);
    return st == SL_OK ? from_replicated(cx, &rep, y, pad, out, plan, err) : st;
}

static SlStatus decide(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, IrInstr *pad,
                       SpmdValue *out, SpmdPlan *plan, SlError *err);

SlStatus
spmd_reshard_no_cache(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, IrInstr *pad,
                      SpmdValue *out, SpmdPlan *plan, SlError *err)
{
    const IrShape *base = v->base_shape;
    if (base->dtype == IR_DT_TOKEN || !ir_shape_is_array(base)) {
        if (ir_shape_is_tuple(base)) { /* bounded by the shape's nesting: no depth check */
            plan->method = "tuple";
            return reshard_tuple(cx, v, y, out, err);
        }
        *out = with(v, v->hlo, y);
        plan->method = "none";
        return SL_OK;
    }
    if (plan->depth >= SPMD_RESHARD_MAX_DEPTH)
        return give_up(cx, v, y, pad, out, plan, err);
    plan->depth++;
    SlStatus st = decide(cx, v, y, pad, out, plan, err);
    plan->depth--;
    return st;
}

static SlStatus
decide(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, IrInstr *pad, SpmdValue *out,
       SpmdPlan *plan, SlError *err)
{
    const ShdSharding *x = v->sharding;
    const IrShape *base = v->base_shape;
    SlStatus st;
    if (shd_equal(x, y)) {
        *out = *v;
        return SL_OK;
    }
    /* unreduced data is resharded as if replicated (XLA rewrites these shardings before
     * partitioning); this also keeps the patterns below from chasing the subgroup type */
    const ShdSharding *xr = shd_unreduced_as_replicated(cx->arena, x);
    const ShdSharding *yr = shd_unreduced_as_replicated(cx->arena, y);
    if (!xr || !yr)
        return spmd_nomem(cx, err);
    if (xr != x || yr != y) {
        SpmdValue rv = with(v, v->hlo, xr);
        st = spmd_reshard_no_cache(cx, &rv, yr, pad, out, plan, err);
        if (st == SL_OK)
            out->sharding = y;
        return st;
    }
    if (x->kind == SHD_TUPLE || y->kind == SHD_TUPLE) {
        /* an array with a one-leaf tuple sharding */
        const ShdSharding *xl = x->kind == SHD_TUPLE ? shd_leaf(x, 0) : x;
        const ShdSharding *yl = y->kind == SHD_TUPLE ? shd_leaf(y, 0) : y;
        if (!xl || !yl || xl->kind == SHD_TUPLE || yl->kind == SHD_TUPLE)
            return spmd_fail(cx, err, SL_ERR_INVALID, "tuple sharding on an array value");
        SpmdValue lv = with(v, v->hlo, xl);
        return spmd_reshard_no_cache(cx, &lv, yl, pad, out, plan, err);
    }
    if (shd_is_manual_subgroup(x) || shd_is_manual_subgroup(y)) {
        plan->method = "manual-subgroup";
        st = manual_subgroups(cx, v, y, out, plan, err);
        if (st != SL_ERR_UNSUPPORTED || plan->method == k_manual_mismatch)
            return st;
    }
    if (y->kind == SHD_MANUAL && x->kind != SHD_MANUAL && v->hlo->op == IR_OP_CONSTANT) {
        /* constants never get manual shardings from propagation: enter manual replicated */
        SpmdValue rep;
        st = replicate_no_cache(cx, v, &rep, plan, err);
        if (st == SL_OK)
            *out = with(v, rep.hlo, y);
        return st;
    }
    if (x->kind == SHD_MANUAL || y->kind == SHD_MANUAL) {
        /* A manual value has its full shape on every device: only a value whose local shape
         * is its full shape (replicated, or one device's) enters or leaves manual code as it
         * is. A sharded one goes through SPMDFullToShardShape / SPMDShardToFullShape in XLA's
         * input; without them the shapes on both sides cannot agree. */
        const ShdSharding *other = x->kind == SHD_MANUAL ? y : x;
        IrShape ls = spmd_local_shape(cx, base, other);
        if (other->kind != SHD_MANUAL && !ir_shape_equal(&ls, base, false)) {
            SlBuf a, b;
            sl_buf_init(&a);
            sl_buf_init(&b);
            shd_print(x, &a);
            shd_print(y, &b);
            st = spmd_fail(cx, err, SL_ERR_UNSUPPORTED,
                           "%s %s value used as %s: a sharded value enters or leaves manual "
                           "code only through custom-call SPMDFullToShardShape or "
                           "SPMDShardToFullShape",
                           x->kind == SHD_MANUAL ? "a manual" : "a sharded",
                           a.data ? a.data : "", b.data ? b.data : "");
            sl_buf_fini(&a);
            sl_buf_fini(&b);
            return st;
        }
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
    if (y_tiled && spmd_is_partial(x)) {
        plan->method = "dynamic-slice";
        st = partial_to_tiled(cx, v, y, out, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
    }
    if (y_tiled && spmd_is_partial(x)) {
        plan->method = "partial-all-to-all";
        st = partial_all_to_all(cx, v, y, out, plan, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
    }
    if (x_tiled && spmd_is_partial(y)) {
        plan->method = "all-gather";
        st = tiled_to_partial(cx, v, y, out, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
        plan->method = "partial-all-to-all";
        st = partial_all_to_all(cx, v, y, out, plan, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
    }
    if (x_tiled && y_tiled) {
        st = spmd_reshard_complex(cx, v, y, out, plan, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
        plan->method = "grouped";
        st = group_on_equal_dims(cx, v, y, out, plan, err);
        if (st != SL_ERR_UNSUPPORTED)
            return st;
    }
    if (!is_repl_like(x) && !cx->allow_full_replication)
        return SL_ERR_UNSUPPORTED;
    if (!is_repl_like(x)) {
        /* 10: replicate, then slice to the target */
        SpmdValue rep;
        SpmdPlan sub = {.method = "all-gather", .depth = plan->depth};
        if (x->kind == SHD_MAXIMAL && y->kind != SHD_MAXIMAL && v->state->n_groups == 0)
            sub.method = "broadcast";
        else if (x_tiled && y_tiled)
            spmd_warn(cx, TRACE_WARN_FULL_REMAT, "involuntary full rematerialization: the value is "
                                                         "replicated on every device, then "
                                                         "sliced to its new sharding");
        st = replicate_no_cache(cx, v, &rep, &sub, err);
        if (st != SL_OK)
            return st;
        plan->method = sub.method;
        if (is_repl_like(y)) {
            *out = rep;
            return SL_OK;
        }
        return spmd_reshard_no_cache(cx, &rep, y, pad, out, plan, err);
    }
    return from_replicated(cx, v, y, pad, out, plan, err);
}
