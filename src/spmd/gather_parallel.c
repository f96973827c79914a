/* gather_parallel.c - the operand and indices shardings of an index-parallel or explicit-batch
 * gather/scatter (gspmd.md F.3; upstream GatherScatterOperandsShardedAcrossParallelDims).
 * Owns: matching the tile counts of the paired parallel dims (stealing shards from a partial
 * replication), re-laying the operand's tile array so its parallel dims carry the indices'
 * counts while its other dims keep theirs, and aligning the device groups of both sides.
 * Does not own: choosing or running the method (handle_gather_scatter.c, gs_methods.c).
 * Invariants: pure sharding arithmetic, nothing emitted; NULL results mean "does not apply". */
#include "spmd/gs_int.h"

#include <string.h>

static bool
is_plain(const ShdSharding *s)
{
    return shd_is_tiled(s) && (s->n_subgroups == 0 ||
                               (s->n_subgroups == 1 && s->subgroups[0] == SHD_SUB_REPLICATED));
}

/* The same device array under new tile dims `dims` (n data dims, then the replication when
 * `rep` > 1): upstream's TileAssignment::Reshape. */
static const ShdSharding *
retile(SlArena *a, const ShdSharding *s, const int64_t *dims, uint32_t n, int64_t rep)
{
    int64_t d[SPMD_MAX_RANK + 1];
    static const ShdSubgroup rs = SHD_SUB_REPLICATED;
    if (n + 1 > SPMD_MAX_RANK)
        return NULL;
    memcpy(d, dims, n * sizeof(int64_t));
    d[n] = rep;
    return shd_tiled(a, d, rep > 1 ? n + 1 : n, s->devices, rep > 1 ? &rs : NULL,
                     rep > 1 ? 1 : 0);
}

/* AlignShardingOnDims: `s` with its groups along `sd` permuted to match `ref` along `rd`. */
static const ShdSharding *
align_on_dims(SlArena *a, const ShdSharding *s, const int64_t *sd, const ShdSharding *ref,
              const int64_t *rd, uint32_t n)
{
    ShdGrouped gs = shd_group_on_dims(a, s, sd, n, NULL);
    ShdGrouped gr = shd_group_on_dims(a, ref, rd, n, NULL);
    if (!gs.inner || !gr.inner)
        return NULL;
    ShdGrouped al = shd_align_groups_with(a, &gs, &gr);
    return al.inner ? shd_ungroup(a, &al) : NULL;
}

/* Multiplies `adj`'s tiles on `ad` up to `tgt`'s on `td`, taken from adj's replication. */
static const ShdSharding *
steal_replication(SlArena *a, const ShdSharding *adj, const int64_t *ad, const ShdSharding *tgt,
                  const int64_t *td, uint32_t n)
{
    uint32_t r = shd_data_rank(adj);
    int64_t dims[SPMD_MAX_RANK], rep = shd_replication_factor(adj);
    if (rep <= 1 || r > SPMD_MAX_RANK)
        return NULL;
    memcpy(dims, adj->tile_dims, r * sizeof(int64_t));
    for (uint32_t i = 0; i < n; i++) {
        int64_t want = tgt->tile_dims[td[i]], have = adj->tile_dims[ad[i]];
        if (want < have || want % have)
            return NULL;
        int64_t ratio = want / have;
        if (rep % ratio)
            return NULL;
        dims[ad[i]] *= ratio;
        rep /= ratio;
    }
    const ShdSharding *t = retile(a, adj, dims, r, rep);
    return t ? align_on_dims(a, t, ad, tgt, td, n) : NULL;
}

bool
spmd_gs_parallel_shardings(SpmdCtx *cx, const ShdSharding *op, const ShdSharding *idx,
                           const int64_t *od, const int64_t *id, uint32_t n,
                           const ShdSharding **op_out, const ShdSharding **idx_out)
{
    SlArena *a = cx->arena;
    if (!is_plain(op) || !is_plain(idx) || n == 0)
        return false;
    int64_t to = 1, ti = 1;
    for (uint32_t i = 0; i < n; i++) {
        to *= op->tile_dims[od[i]];
        ti *= idx->tile_dims[id[i]];
    }
    if (to == 1 && ti == 1)
        return false;
    if (ti != to) {
        const ShdSharding **adj = ti < to ? &idx : &op;
        const ShdSharding *tgt = ti < to ? op : idx;
        *adj = ti < to ? steal_replication(a, idx, id, tgt, od, n)
                       : steal_replication(a, op, od, tgt, id, n);
        if (!*adj)
            return false;
    }
    uint32_t r = shd_data_rank(op);
    int64_t dims[SPMD_MAX_RANK];
    if (r > SPMD_MAX_RANK)
        return false;
    memcpy(dims, op->tile_dims, r * sizeof(int64_t));
    for (uint32_t i = 0; i < n; i++)
        dims[od[i]] = idx->tile_dims[id[i]];
    const ShdSharding *t = retile(a, op, dims, r, shd_replication_factor(op));
    const ShdSharding *o = t ? align_on_dims(a, t, od, idx, id, n) : NULL;
    if (!o)
        return false;
    *op_out = o;
    *idx_out = idx;
    return true;
}
