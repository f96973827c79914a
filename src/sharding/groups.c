/* groups.c - device groups (gspmd.md B.9, C.11) and replica groups for collectives (G.3).
 * Owns: grouping a sharding on tile dims, on its replication dim, or on its manual subgroup
 * dims; ungrouping, aligning groups, and the [G,M] device arrays behind all-gather/all-reduce
 * groups. Does not own: emitting collectives (src/spmd).
 * Invariant: every walk over a device array is linear in its size (inverse indices, no
 * per-device searches). */
#include "sharding/shd.h"

#include <string.h>

#include "sharding/shd_int.h"

/* ---- GroupShardingOnDims / UngroupSharding ---- */

ShdGrouped
shd_group_on_dims(SlArena *a, const ShdSharding *s, const int64_t *dims, uint32_t n,
                  const int64_t *shards_per_dim)
{
    ShdGrouped g;
    memset(&g, 0, sizeof(g));
    if (s->kind != SHD_TILED || n > s->n_tile_dims)
        return g;
    int64_t inner_dims[SHD_MAX_DIMS], idx[SHD_MAX_DIMS] = {0};
    memcpy(inner_dims, s->tile_dims, s->n_tile_dims * sizeof(int64_t));
    g.n_group_dims = n;
    g.group_dims = SL_DUP_ARRAY(a, int64_t, dims, n);
    g.group_dim_sizes = SL_NEW_ARRAY(a, int64_t, n ? n : 1);
    if (!g.group_dims || !g.group_dim_sizes)
        return g;
    g.n_groups = 1;
    for (uint32_t i = 0; i < n; i++) {
        int64_t shards = shards_per_dim ? shards_per_dim[i] : 1;
        if (dims[i] < 0 || dims[i] >= (int64_t)s->n_tile_dims || shards < 1 ||
            s->tile_dims[dims[i]] % shards)
            return (ShdGrouped){0};
        g.group_dim_sizes[i] = s->tile_dims[dims[i]] / shards;
        inner_dims[dims[i]] = shards;
        g.n_groups *= g.group_dim_sizes[i];
    }
    int64_t total = shd_device_count(s);
    g.group_size = total / g.n_groups;
    g.data_rank = shd_data_rank(s);
    g.device_groups = SL_NEW_ARRAY(a, int64_t, total);
    int64_t *fill = SL_NEW_ARRAY(a, int64_t, g.n_groups);
    if (!g.device_groups || !fill)
        return g;
    /* Row-major walk: a device's group comes from its coordinates on the group dims. */
    for (int64_t lin = 0; lin < total; lin++) {
        int64_t gid = 0;
        for (uint32_t i = 0; i < n; i++)
            gid = gid * g.group_dim_sizes[i] + idx[dims[i]] / inner_dims[dims[i]];
        g.device_groups[gid * g.group_size + fill[gid]++] = s->devices[lin];
        for (uint32_t i = s->n_tile_dims; i-- > 0;)
            if (++idx[i] < s->tile_dims[i])
                break;
            else
                idx[i] = 0;
    }
    /* No shards left inside a group: replicated (not a one-device tiling, nor {manual}). */
    g.inner = shd_prod(inner_dims, s->n_tile_dims) == 1
                  ? shd_replicated(a)
                  : shd_tiled_iota(a, inner_dims, s->n_tile_dims, s->subgroups, s->n_subgroups);
    return g;
}

/* GetGroupedReplicatedSharding: `n_groups` runs of consecutive ids, replicated inside. */
static ShdGrouped
grouped_replicated(SlArena *a, int64_t n_groups, int64_t num_tiles, uint32_t data_rank)
{
    ShdGrouped g;
    memset(&g, 0, sizeof(g));
    if (n_groups < 1 || num_tiles % n_groups)
        return g;
    g.n_groups = n_groups;
    g.group_size = num_tiles / n_groups;
    g.n_group_dims = 1;
    g.group_dims = SL_NEW_ARRAY(a, int64_t, 1);
    g.group_dim_sizes = SL_NEW_ARRAY(a, int64_t, 1);
    g.device_groups = SL_NEW_ARRAY(a, int64_t, num_tiles);
    g.data_rank = data_rank;
    g.inner = shd_replicated(a);
    if (!g.group_dims || !g.group_dim_sizes || !g.device_groups)
        return (ShdGrouped){0};
    g.group_dims[0] = data_rank;
    g.group_dim_sizes[0] = n_groups;
    for (int64_t i = 0; i < num_tiles; i++)
        g.device_groups[i] = i;
    return g;
}

/* XLA's PrimeFactorization, kept exact because it decides which shards get borrowed: trial
 * division stops at the square root of what is left, so a last prime factor above it is not
 * listed (6 -> {2}, 5 -> {}). `out` holds at least 64 entries. */
static uint32_t
prime_factors(int64_t n, int64_t *out)
{
    uint32_t k = 0;
    while (n > 0 && n % 2 == 0) {
        out[k++] = 2;
        n /= 2;
    }
    for (int64_t f = 3; f * f <= n; f += 2)
        while (n % f == 0) {
            out[k++] = f;
            n /= f;
        }
    return k;
}

static bool
is_plain_partial(const ShdSharding *s)
{
    return s->kind == SHD_TILED && s->n_subgroups == 1 && s->subgroups[0] == SHD_SUB_REPLICATED;
}

/* Step 2 of GroupShardingOnReplicatedDim: move prime factors of the replicable dims' shard
 * counts, in order, into the replication dim until it has `n_groups` entries; NULL if they do
 * not suffice. Like XLA, the result is laid over iota(N), not over s's device order. */
static const ShdSharding *
borrow_replication(SlArena *a, const ShdSharding *s, int64_t n_groups, const int64_t *dims,
                   uint32_t n)
{
    bool partial = is_plain_partial(s);
    int64_t reps = partial ? s->tile_dims[s->n_tile_dims - 1] : 1, most = reps;
    int64_t td[SHD_MAX_DIMS + 1], factors[64];
    uint32_t nt = s->n_tile_dims;
    for (uint32_t i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] >= (int64_t)shd_data_rank(s))
            return NULL;
        most *= s->tile_dims[dims[i]];
    }
    if (most % n_groups || n_groups % reps)
        return NULL;
    int64_t borrow = n_groups / reps;
    memcpy(td, s->tile_dims, nt * sizeof(int64_t));
    if (!partial)
        td[nt++] = 1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nf = prime_factors(s->tile_dims[dims[i]], factors);
        for (uint32_t k = 0; k < nf; k++) {
            if (borrow % factors[k])
                continue;
            td[dims[i]] /= factors[k];
            td[nt - 1] *= factors[k];
            borrow /= factors[k];
            if (borrow == 1) {
                static const ShdSubgroup rep = SHD_SUB_REPLICATED;
                return shd_tiled_iota(a, td, nt, &rep, 1);
            }
        }
    }
    return NULL;
}

ShdGrouped
shd_group_on_replicated_dim(SlArena *a, const ShdSharding *s, int64_t n_groups, int64_t num_tiles,
                            uint32_t data_rank, const int64_t *replicable_dims, uint32_t n)
{
    if (n_groups < 1)
        return (ShdGrouped){0};
    /* 1. The replication dim alone has enough devices: its major part forms the groups. */
    if (is_plain_partial(s) && s->tile_dims[s->n_tile_dims - 1] % n_groups == 0) {
        int64_t dim = s->n_tile_dims - 1, shards = s->tile_dims[dim] / n_groups;
        return shd_group_on_dims(a, s, &dim, 1, &shards);
    }
    /* 2. Borrow shards from the replicable dims (only for tilings without other subgroups). */
    if (s->kind == SHD_TILED && (s->n_subgroups == 0 || is_plain_partial(s))) {
        const ShdSharding *p = borrow_replication(a, s, n_groups, replicable_dims, n);
        if (p && p->kind == SHD_TILED) {
            int64_t dim = p->n_tile_dims - 1;
            return shd_group_on_dims(a, p, &dim, 1, NULL);
        }
    }
    /* 3. Replicated inside iota groups. */
    return grouped_replicated(a, n_groups, num_tiles, data_rank);
}

ShdGrouped
shd_group_on_manual(SlArena *a, const ShdSharding *s)
{
    int64_t manual[SHD_MAX_DIMS], dims[SHD_MAX_DIMS];
    ShdSubgroup sub[SHD_MAX_DIMS];
    uint32_t r = shd_data_rank(s), nm = 0, nd = r, ns = 0;
    if (!shd_is_manual_subgroup(s))
        return (ShdGrouped){0};
    memcpy(dims, s->tile_dims, r * sizeof(int64_t));
    for (uint32_t i = 0; i < s->n_subgroups; i++) {
        if (s->subgroups[i] == SHD_SUB_MANUAL) {
            manual[nm++] = r + i;
        } else {
            dims[nd++] = s->tile_dims[r + i];
            sub[ns++] = s->subgroups[i];
        }
    }
    ShdGrouped g = shd_group_on_dims(a, s, manual, nm, NULL);
    if (!g.device_groups)
        return g;
    /* Inner: the data dims and the other subgroups, without the manual dims. */
    g.inner = shd_prod(dims, nd) == 1 ? shd_replicated(a) : shd_tiled_iota(a, dims, nd, sub, ns);
    g.subgroup_manual = true;
    return g;
}

/* Puts a size-1 MANUAL subgroup dim at each group dim of a manual grouping; the inner's own
 * subgroup dims fill the other subgroup positions in order. */
static bool
insert_manual_dims(const ShdGrouped *g, int64_t *dims, uint32_t *n, ShdSubgroup *sub,
                   uint32_t *n_sub)
{
    uint32_t r = *n - *n_sub, total = *n_sub + g->n_group_dims, k = 0;
    int64_t sizes[SHD_MAX_DIMS];
    ShdSubgroup types[SHD_MAX_DIMS];
    if (r + total > SHD_MAX_DIMS)
        return false;
    for (uint32_t p = 0; p < total; p++) {
        bool manual = false;
        for (uint32_t i = 0; i < g->n_group_dims; i++)
            manual = manual || g->group_dims[i] == (int64_t)(r + p);
        if (manual) {
            sizes[p] = 1;
            types[p] = SHD_SUB_MANUAL;
        } else if (k < *n_sub) {
            sizes[p] = dims[r + k];
            types[p] = sub[k++];
        } else {
            return false; /* a group dim outside the subgroup positions */
        }
    }
    if (k != *n_sub)
        return false;
    memcpy(dims + r, sizes, total * sizeof(int64_t));
    memcpy(sub, types, total * sizeof(ShdSubgroup));
    *n = r + total;
    *n_sub = total;
    return true;
}

const ShdSharding *
shd_ungroup(SlArena *a, const ShdGrouped *g)
{
    if (!g->inner || !g->device_groups)
        return NULL;
    int64_t dims[SHD_MAX_DIMS], inner_dims[SHD_MAX_DIMS], idx[SHD_MAX_DIMS] = {0};
    ShdSubgroup sub[SHD_MAX_DIMS];
    uint32_t n, n_sub;
    const int64_t *inner_devs;
    if (g->inner->kind == SHD_TILED) {
        n = g->inner->n_tile_dims;
        n_sub = g->inner->n_subgroups;
        memcpy(dims, g->inner->tile_dims, n * sizeof(int64_t));
        if (n_sub)
            memcpy(sub, g->inner->subgroups, n_sub * sizeof(ShdSubgroup));
        inner_devs = g->inner->devices;
    } else {
        /* Replicated inside each group: the group is one replication subgroup. */
        n = g->data_rank;
        n_sub = 0;
        for (uint32_t i = 0; i < n; i++)
            dims[i] = 1;
        if (g->group_size > 1) {
            dims[n++] = g->group_size;
            sub[n_sub++] = SHD_SUB_REPLICATED;
        }
        inner_devs = NULL;
    }
    if (g->subgroup_manual) {
        if (!insert_manual_dims(g, dims, &n, sub, &n_sub))
            return NULL;
    } else {
        for (uint32_t i = 0; i < g->n_group_dims; i++)
            if (g->group_dims[i] >= (int64_t)n) { /* grouped on a subgroup dim the inner dropped */
                if (n >= SHD_MAX_DIMS)
                    return NULL;
                dims[n++] = 1;
                sub[n_sub++] = SHD_SUB_REPLICATED;
            }
    }
    memcpy(inner_dims, dims, n * sizeof(int64_t));
    for (uint32_t i = 0; i < g->n_group_dims; i++) {
        if (g->group_dims[i] >= (int64_t)n)
            return NULL;
        dims[g->group_dims[i]] *= g->group_dim_sizes[i];
    }
    int64_t total = shd_prod(dims, n);
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, total);
    if (!devs || total != g->n_groups * g->group_size)
        return NULL;
    for (int64_t lin = 0; lin < total; lin++) {
        int64_t gid = 0, in_lin = 0;
        for (uint32_t i = 0; i < g->n_group_dims; i++) {
            int64_t d = g->group_dims[i];
            gid = gid * g->group_dim_sizes[i] + idx[d] / inner_dims[d];
        }
        for (uint32_t i = 0; i < n; i++) {
            bool grouped = false;
            for (uint32_t k = 0; k < g->n_group_dims; k++)
                grouped = grouped || g->group_dims[k] == (int64_t)i;
            in_lin = in_lin * inner_dims[i] + (grouped ? idx[i] % inner_dims[i] : idx[i]);
        }
        int64_t m = inner_devs ? inner_devs[in_lin] : in_lin;
        devs[lin] = m >= 0 && m < g->group_size ? g->device_groups[gid * g->group_size + m] : -1;
        for (uint32_t i = n; i-- > 0;)
            if (++idx[i] < dims[i])
                break;
            else
                idx[i] = 0;
    }
    return shd_make_tiled(a, dims, n, devs, sub, n_sub, SHD_FORM_IOTA);
}

/* Dense device -> value table over the ids of `devs`; -1 where absent. NULL if ids are wild. */
static int64_t *
index_of(SlArena *a, const int64_t *devs, int64_t n, int64_t *n_ids)
{
    int64_t max_id = -1;
    for (int64_t i = 0; i < n; i++) {
        if (devs[i] < 0)
            return NULL;
        max_id = devs[i] > max_id ? devs[i] : max_id;
    }
    if (max_id >= 4 * n + 1024)
        return NULL;
    int64_t *t = SL_NEW_ARRAY(a, int64_t, (size_t)max_id + 1);
    if (!t)
        return NULL;
    for (int64_t i = 0; i <= max_id; i++)
        t[i] = -1;
    *n_ids = max_id + 1;
    return t;
}

ShdGrouped
shd_align_groups_with(SlArena *a, const ShdGrouped *x, const ShdGrouped *ref)
{
    ShdGrouped out = *x;
    int64_t total = ref->n_groups * ref->group_size, n_ids = 0;
    if (x->n_groups != ref->n_groups || x->group_size != ref->group_size)
        return out;
    out.device_groups = ref->device_groups;
    int64_t *ref_group = index_of(a, ref->device_groups, total, &n_ids);
    int64_t *ref_pos = index_of(a, ref->device_groups, total, &n_ids);
    int64_t *perm = SL_NEW_ARRAY(a, int64_t, x->group_size);
    if (!ref_group || !ref_pos || !perm)
        return out;
    for (int64_t i = 0; i < total; i++) {
        ref_group[ref->device_groups[i]] = i / ref->group_size;
        ref_pos[ref->device_groups[i]] = i % ref->group_size;
    }
    /* Groups must match in order; the in-group positions map as in the first group (XLA's
     * AlignGroupsWith does not ask the others to agree). */
    for (int64_t gi = 0; gi < x->n_groups; gi++)
        for (int64_t m = 0; m < x->group_size; m++) {
            int64_t d = x->device_groups[gi * x->group_size + m];
            if (d < 0 || d >= n_ids || ref_group[d] != gi)
                return out;
            if (gi == 0)
                perm[m] = ref_pos[d];
        }
    if (x->inner && x->inner->kind == SHD_TILED) {
        const ShdSharding *in = x->inner;
        int64_t n = shd_device_count(in);
        int64_t *devs = SL_NEW_ARRAY(a, int64_t, n);
        if (!devs)
            return out;
        for (int64_t i = 0; i < n; i++)
            devs[i] = perm[in->devices[i]];
        out.inner = shd_make_tiled(a, in->tile_dims, in->n_tile_dims, devs, in->subgroups,
                                   in->n_subgroups, SHD_FORM_IOTA);
    }
    return out;
}

/* ---- replica groups (G.3) ---- */

SlStatus
shd_replica_groups_for_dims(SlArena *a, const ShdSharding *s, const int64_t *dims, uint32_t n,
                            IrReplicaGroups *out)
{
    memset(out, 0, sizeof(*out));
    if (s->kind != SHD_TILED || n > s->n_tile_dims)
        return SL_ERR_INVALID;
    int64_t perm[SHD_MAX_DIMS], tdims[SHD_MAX_DIMS], groups = 1, members = 1;
    uint32_t np = 0;
    uint64_t listed = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] >= (int64_t)s->n_tile_dims || (listed >> dims[i] & 1))
            return SL_ERR_INVALID;
        listed |= UINT64_C(1) << dims[i];
    }
    /* Other dims first (group order), the listed dims last (member order). */
    for (uint32_t i = 0; i < s->n_tile_dims; i++)
        if (!(listed >> i & 1)) {
            perm[np++] = i;
            groups *= s->tile_dims[i];
        }
    for (uint32_t i = 0; i < n; i++) {
        perm[np++] = dims[i];
        members *= s->tile_dims[dims[i]];
    }
    int64_t total = groups * members;
    out->ids = SL_NEW_ARRAY(a, int64_t, total);
    out->group_sizes = SL_NEW_ARRAY(a, uint32_t, groups);
    if (!out->ids || !out->group_sizes)
        return SL_ERR_NOMEM;
    shd_arr_transpose(s->devices, s->tile_dims, s->n_tile_dims, perm, out->ids, tdims);
    out->n_groups = (uint32_t)groups;
    for (int64_t g = 0; g < groups; g++)
        out->group_sizes[g] = (uint32_t)members;
    if (s->has_iota && shd_iota_recover(a, out->ids, total, &out->iota)) {
        out->iota.n_dims = 2;
        out->iota.dims = SL_NEW_ARRAY(a, int64_t, 2);
        if (!out->iota.dims)
            return SL_ERR_NOMEM;
        out->iota.dims[0] = groups;
        out->iota.dims[1] = members;
        out->is_iota = true;
    }
    return SL_OK;
}
