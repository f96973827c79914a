/* algebra.c - shardings derived from shardings (gspmd.md B.2-B.8, B.10, B.11). Owns: the
 * tile-array rearrangements behind partial replication, dim insertion/removal, transpose,
 * reshape and reshape propagation (with the merge of compatible partial shardings), reverse,
 * tile moves, split/merge, and the reshard applicability checks. Does not own: device groups
 * (groups.c). Invariant: results are built with shd_make_tiled(), so they are normalized; an
 * iota input yields an iota result whenever the new array is one. */
#include "sharding/shd.h"

#include <string.h>

#include "sharding/shd_int.h"

static bool
in_list(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

static bool
is_plain_partial(const ShdSharding *s)
{
    return s->kind == SHD_TILED && s->n_subgroups == 1 && s->subgroups[0] == SHD_SUB_REPLICATED;
}

static bool
has_unreduced(const ShdSharding *s)
{
    for (uint32_t k = 0; k < s->n_subgroups; k++)
        if (s->subgroups[k] == SHD_SUB_UNREDUCED)
            return true;
    return false;
}

static ShdForm
form_of(const ShdSharding *s)
{
    return s->has_iota ? SHD_FORM_IOTA : SHD_FORM_EXPLICIT;
}

/* Transposes s's array by `perm` (over all tile dims) and re-views it as `dims`/`sub`. */
static const ShdSharding *
rearrange(SlArena *a, const ShdSharding *s, const int64_t *perm, const int64_t *dims,
          uint32_t n, const ShdSubgroup *sub, uint32_t n_sub)
{
    int64_t tdims[SHD_MAX_DIMS];
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, shd_device_count(s));
    if (!devs || n > SHD_MAX_DIMS)
        return NULL;
    shd_arr_transpose(s->devices, s->tile_dims, s->n_tile_dims, perm, devs, tdims);
    return shd_make_tiled(a, dims, n, devs, sub, n_sub, form_of(s));
}

static void
identity(int64_t *perm, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
}

/* ---- B.2 ---- */

const ShdSharding *
shd_partially_replicate_dims(SlArena *a, const ShdSharding *s, const int64_t *dims, uint32_t n)
{
    if (s->kind != SHD_TILED)
        return s;
    uint32_t r = shd_data_rank(s), np = 0;
    int64_t g = 1, perm[SHD_MAX_DIMS], nd[SHD_MAX_DIMS];
    for (uint32_t i = 0; i < r; i++)
        if (in_list(dims, n, i))
            g *= s->tile_dims[i];
    if (g == 1)
        return s;
    /* Stable order: kept data dims, listed data dims, then the subgroup dims. */
    for (uint32_t i = 0; i < r; i++)
        if (!in_list(dims, n, i))
            perm[np++] = i;
    for (uint32_t i = 0; i < r; i++)
        if (in_list(dims, n, i))
            perm[np++] = i;
    for (uint32_t i = r; i < s->n_tile_dims; i++)
        perm[np++] = i;
    memcpy(nd, s->tile_dims, s->n_tile_dims * sizeof(int64_t));
    for (uint32_t i = 0; i < r; i++)
        if (in_list(dims, n, i))
            nd[i] = 1;
    if (s->n_subgroups == 1 && s->subgroups[0] == SHD_SUB_REPLICATED) {
        nd[s->n_tile_dims - 1] *= g;
        return rearrange(a, s, perm, nd, s->n_tile_dims, s->subgroups, 1);
    }
    /* A new replicated subgroup right after the data dims; normalization reorders it. */
    ShdSubgroup sub[SHD_MAX_DIMS];
    if (s->n_tile_dims + 1 > SHD_MAX_DIMS)
        return NULL;
    memmove(nd + r + 1, nd + r, s->n_subgroups * sizeof(int64_t));
    nd[r] = g;
    sub[0] = SHD_SUB_REPLICATED;
    if (s->n_subgroups)
        memcpy(sub + 1, s->subgroups, s->n_subgroups * sizeof(ShdSubgroup));
    return rearrange(a, s, perm, nd, s->n_tile_dims + 1, sub, s->n_subgroups + 1);
}

const ShdSharding *
shd_partially_replicate_all_except(SlArena *a, const ShdSharding *s, const int64_t *keep,
                                   uint32_t n)
{
    int64_t others[SHD_MAX_DIMS];
    uint32_t k = 0;
    if (s->kind != SHD_TILED)
        return s;
    for (uint32_t i = 0; i < shd_data_rank(s); i++)
        if (!in_list(keep, n, i))
            others[k++] = i;
    return shd_partially_replicate_dims(a, s, others, k);
}

/* ---- B.3 ---- */

const ShdSharding *
shd_remove_dims(SlArena *a, const ShdSharding *s, const int64_t *dims, uint32_t n)
{
    if (s->kind != SHD_TILED || n == 0)
        return s;
    int64_t nd[SHD_MAX_DIMS];
    uint32_t k = 0, r = shd_data_rank(s);
    for (uint32_t i = 0; i < s->n_tile_dims; i++) {
        if (i < r && in_list(dims, n, i)) {
            if (s->tile_dims[i] != 1)
                return NULL;
            continue;
        }
        nd[k++] = s->tile_dims[i];
    }
    return shd_with_devices(a, s, nd, k, s->devices);
}

const ShdSharding *
shd_insert_dims(SlArena *a, const ShdSharding *s, const int64_t *positions, uint32_t n)
{
    if (s->kind != SHD_TILED || n == 0)
        return s;
    int64_t nd[SHD_MAX_DIMS];
    uint32_t r = shd_data_rank(s), new_rank = r + n, src = 0;
    if (s->n_tile_dims + n > SHD_MAX_DIMS)
        return NULL;
    for (uint32_t i = 0; i < new_rank; i++)
        nd[i] = in_list(positions, n, i) ? 1 : s->tile_dims[src++];
    if (src != r)
        return NULL; /* positions out of range or repeated */
    memcpy(nd + new_rank, s->tile_dims + r, s->n_subgroups * sizeof(int64_t));
    return shd_with_devices(a, s, nd, s->n_tile_dims + n, s->devices);
}

/* ---- B.4 ---- */

const ShdSharding *
shd_transpose(SlArena *a, const ShdSharding *s, const int64_t *perm)
{
    if (s->kind != SHD_TILED)
        return s;
    int64_t full[SHD_MAX_DIMS], nd[SHD_MAX_DIMS];
    uint32_t r = shd_data_rank(s);
    uint64_t seen = 0;
    identity(full, s->n_tile_dims);
    for (uint32_t i = 0; i < r; i++) {
        if (perm[i] < 0 || perm[i] >= (int64_t)r || (seen >> perm[i] & 1))
            return NULL;
        seen |= UINT64_C(1) << perm[i];
        full[i] = perm[i];
    }
    for (uint32_t i = 0; i < s->n_tile_dims; i++)
        nd[i] = s->tile_dims[full[i]];
    return rearrange(a, s, full, nd, s->n_tile_dims, s->subgroups, s->n_subgroups);
}

const ShdSharding *
shd_transpose_collapsed(SlArena *a, const ShdSharding *s, const int64_t *src_to_tgt,
                        uint32_t src_rank, uint32_t tgt_rank)
{
    if (s->kind != SHD_TILED)
        return s;
    uint32_t r = shd_data_rank(s), np = 0;
    int64_t perm[SHD_MAX_DIMS], nd[SHD_MAX_DIMS], tgt_to_src[SHD_MAX_DIMS];
    if (src_rank != r || tgt_rank + s->n_subgroups > SHD_MAX_DIMS)
        return NULL;
    for (uint32_t j = 0; j < tgt_rank; j++)
        tgt_to_src[j] = -1;
    for (uint32_t i = 0; i < r; i++) {
        int64_t t = src_to_tgt[i];
        if (t < 0) {
            if (s->tile_dims[i] != 1)
                return NULL; /* a dropped dim must be unsharded */
            continue;
        }
        if (t >= (int64_t)tgt_rank || tgt_to_src[t] >= 0)
            return NULL;
        tgt_to_src[t] = i;
    }
    /* Mapped source dims in target order, then the dropped (size-1) ones, then subgroups. */
    for (uint32_t j = 0; j < tgt_rank; j++) {
        nd[j] = tgt_to_src[j] >= 0 ? s->tile_dims[tgt_to_src[j]] : 1;
        if (tgt_to_src[j] >= 0)
            perm[np++] = tgt_to_src[j];
    }
    for (uint32_t i = 0; i < r; i++)
        if (src_to_tgt[i] < 0)
            perm[np++] = i;
    for (uint32_t i = r; i < s->n_tile_dims; i++) {
        perm[np++] = i;
        nd[tgt_rank + i - r] = s->tile_dims[i];
    }
    return rearrange(a, s, perm, nd, tgt_rank + s->n_subgroups, s->subgroups, s->n_subgroups);
}

/* ---- B.5 ---- */

static int64_t
gcd64(int64_t x, int64_t y)
{
    while (y) {
        int64_t t = x % y;
        x = y;
        y = t;
    }
    return x;
}

/* Source dims still to place, as a stack (top = most major remaining). */
typedef struct ReshapeState {
    int64_t src_size[2 * SHD_MAX_DIMS], src_parts[2 * SHD_MAX_DIMS];
    int n_src;
    int64_t tgt[2 * SHD_MAX_DIMS];
    int n_tgt;
    int64_t out[2 * SHD_MAX_DIMS]; /* target tile dims, major first */
    int n_out;
    bool grow_last;                /* the next placed factor multiplies the last target dim */
    int64_t src_index;             /* source dim of the last popped entry */
    int64_t replicate[SHD_MAX_DIMS];
    uint32_t n_replicate;
} ReshapeState;

static void
rs_push_src(ReshapeState *st, int64_t size, int64_t parts)
{
    st->src_size[st->n_src] = size;
    st->src_parts[st->n_src++] = parts;
    st->src_index--;
}

static void
rs_pop_src(ReshapeState *st)
{
    st->n_src--;
    st->src_index++;
}

static void
rs_emit(ReshapeState *st, int64_t n)
{
    if (st->grow_last)
        st->out[st->n_out - 1] *= n;
    else
        st->out[st->n_out++] = n;
    st->grow_last = false;
}

static bool
rs_sharded_left(const ReshapeState *st)
{
    for (int i = 0; i < st->n_src; i++)
        if (st->src_parts[i] != 1)
            return true;
    return false;
}

/* Places the shards of the source dims onto target dims, major to minor; false = "none". */
static bool
rs_walk(ReshapeState *st)
{
    while (st->n_src && st->n_tgt && rs_sharded_left(st)) {
        /* Unsharded source dims may be merged and split freely. */
        int64_t free_size = 1;
        while (st->n_src && st->src_parts[st->n_src - 1] == 1) {
            free_size *= st->src_size[st->n_src - 1];
            rs_pop_src(st);
        }
        while (st->n_tgt && st->tgt[st->n_tgt - 1] > 1 && free_size % st->tgt[st->n_tgt - 1] == 0) {
            free_size /= st->tgt[--st->n_tgt];
            rs_emit(st, 1);
        }
        if (free_size != 1)
            rs_push_src(st, free_size, 1);
        if (!st->n_src || !st->n_tgt)
            break;
        int64_t s = st->src_size[st->n_src - 1], n = st->src_parts[st->n_src - 1];
        rs_pop_src(st);
        int64_t t = st->tgt[--st->n_tgt];
        if (s == t) {
            rs_emit(st, n);
        } else if (t == 1) {
            rs_emit(st, 1);
            rs_push_src(st, s, n);
        } else if (s == 1) {
            st->tgt[st->n_tgt++] = t;
            if (n > 1)
                st->replicate[st->n_replicate++] = st->src_index;
        } else if (n == 1) {
            if (!st->n_src || st->src_parts[st->n_src - 1] != 1)
                break;
            st->src_size[st->n_src - 1] *= s;
        } else if (s % n != 0) {
            return false; /* uneven: the partitioner needs a halo exchange instead */
        } else {
            int64_t g = gcd64(n, t);
            if (g == 1)
                break;
            rs_push_src(st, s / g, n / g);
            st->tgt[st->n_tgt++] = t / g;
            rs_emit(st, g);
            st->grow_last = true;
        }
        if (st->n_src >= 2 * SHD_MAX_DIMS - 1 || st->n_tgt >= 2 * SHD_MAX_DIMS - 1 ||
            st->n_out >= 2 * SHD_MAX_DIMS - 1)
            return false;
    }
    return true;
}

const ShdSharding *
shd_reshape(SlArena *a, const IrShape *from, const IrShape *to, const ShdSharding *s)
{
    if (s->kind != SHD_TILED)
        return s;
    ReshapeState *st = SL_NEW(a, ReshapeState);
    if (!st || from->rank != shd_data_rank(s) || to->rank > SHD_MAX_DIMS)
        return NULL;
    for (uint32_t i = 0; i < from->rank; i++) {
        st->src_size[i] = from->dims[from->rank - 1 - i];
        st->src_parts[i] = s->tile_dims[from->rank - 1 - i];
    }
    st->n_src = (int)from->rank;
    for (uint32_t i = 0; i < to->rank; i++)
        st->tgt[i] = to->dims[to->rank - 1 - i];
    st->n_tgt = (int)to->rank;
    st->src_index = -1;
    if (!rs_walk(st) || shd_prod(st->out, (uint32_t)st->n_out) == 1 ||
        st->n_out > (int)to->rank)
        return NULL;
    while (st->n_out < (int)to->rank)
        st->out[st->n_out++] = 1;
    const ShdSharding *src = s;
    if (st->n_replicate) {
        src = shd_partially_replicate_dims(a, s, st->replicate, st->n_replicate);
        if (!src || src->kind != SHD_TILED)
            return src;
    }
    /* Subgroups carry over; whatever the data dims no longer hold becomes replication. */
    int64_t nd[SHD_MAX_DIMS];
    ShdSubgroup sub[SHD_MAX_DIMS];
    uint32_t n = to->rank, n_sub = src->n_subgroups, rep = UINT32_MAX;
    if (n + n_sub + 1 > SHD_MAX_DIMS)
        return NULL;
    memcpy(nd, st->out, n * sizeof(int64_t));
    for (uint32_t i = 0; i < n_sub; i++) {
        sub[i] = src->subgroups[i];
        nd[n + i] = src->tile_dims[shd_data_rank(src) + i];
        if (sub[i] == SHD_SUB_REPLICATED) {
            rep = n + i;
            nd[rep] = 1;
        }
    }
    int64_t left = shd_device_count(src) / shd_prod(nd, n + n_sub);
    if (left > 1) {
        if (rep == UINT32_MAX) {
            rep = n + n_sub;
            sub[n_sub++] = SHD_SUB_REPLICATED;
        }
        nd[rep] = left;
    }
    if (shd_prod(nd, n + n_sub) != shd_device_count(src))
        return NULL;
    return shd_make_tiled(a, nd, n + n_sub, src->devices, sub, n_sub, form_of(src));
}

/* ---- merging compatible partial shardings (MergeShardingIfCompatible) ---- */

static bool
next_permutation(uint32_t *v, uint32_t n)
{
    uint32_t i = n > 1 ? n - 1 : 0;
    while (i > 0 && v[i - 1] >= v[i])
        i--;
    if (i == 0)
        return false;
    uint32_t j = n - 1;
    while (v[j] <= v[i - 1])
        j--;
    uint32_t t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
    for (uint32_t lo = i, hi = n - 1; lo < hi; lo++, hi--) {
        t = v[lo];
        v[lo] = v[hi];
        v[hi] = t;
    }
    return true;
}

enum { MAX_MERGE_CANDIDATES = 24 }; /* 4! orders of the dims a side lacks */

/* The arrays `s` can take in the merged layout `md` (r data dims, then `rep` if > 1): s's
 * replication dim is split into the dims s lacks plus the remaining replication, in every
 * order, and each factor moved to its place. Returns how many were stored in `out`. */
static uint32_t
merge_candidates(SlArena *a, const ShdSharding *s, const int64_t *md, uint32_t r, int64_t rep,
                 int64_t **out)
{
    int64_t total = shd_device_count(s), srep = shd_replication_factor(s);
    if (srep == rep) {
        out[0] = s->devices;
        return 1;
    }
    int64_t old[SHD_MAX_DIMS], nw[SHD_MAX_DIMS], at[SHD_MAX_DIMS];
    uint32_t n_old = 0, n_new = 0, ord[SHD_MAX_DIMS], count = 0;
    for (uint32_t i = 0; i < r; i++) {
        if (s->tile_dims[i] == md[i]) {
            at[i] = n_old;
            old[n_old++] = md[i];
        } else {
            at[i] = -1;
            nw[n_new++] = i;
        }
    }
    if (rep > 1)
        nw[n_new++] = r;
    for (uint32_t k = 0; k < n_new; k++)
        ord[k] = k;
    do {
        int64_t dims[SHD_MAX_DIMS], perm[SHD_MAX_DIMS], tdims[SHD_MAX_DIMS];
        memcpy(dims, old, n_old * sizeof(int64_t));
        for (uint32_t k = 0; k < n_new; k++) {
            int64_t d = nw[ord[k]];
            dims[n_old + k] = d < (int64_t)r ? md[d] : rep;
            perm[d] = n_old + k;
        }
        for (uint32_t i = 0; i < r; i++)
            if (at[i] >= 0)
                perm[i] = at[i];
        if (shd_prod(dims, n_old + n_new) != total)
            return 0; /* s's replication cannot supply the dims it lacks */
        int64_t *devs = SL_NEW_ARRAY(a, int64_t, total);
        if (!devs)
            return count;
        shd_arr_transpose(s->devices, dims, n_old + n_new, perm, devs, tdims);
        out[count++] = devs;
    } while (count < MAX_MERGE_CANDIDATES && next_permutation(ord, n_new));
    return count;
}

/* The fallback: fill the merged array row-major, each entry the smallest device left in both
 * the x group and the dst group of its tile; false when some intersection runs dry. Linear
 * in the device count times x's group size. */
static bool
merge_by_groups(SlArena *a, const ShdSharding *x, const ShdSharding *dst, const int64_t *md,
                uint32_t n, uint32_t r, int64_t *devs)
{
    int64_t total = shd_device_count(x), idx[SHD_MAX_DIMS] = {0}, n_ids = 0;
    int64_t xg_size = total / shd_num_tiles(x), dg_size = total / shd_num_tiles(dst);
    for (int64_t i = 0; i < total; i++)
        n_ids = x->devices[i] >= n_ids ? x->devices[i] + 1 : n_ids;
    /* Device -> group id in x and in dst; -1 once the device has been placed. */
    int64_t *xg = SL_NEW_ARRAY(a, int64_t, n_ids), *dg = SL_NEW_ARRAY(a, int64_t, n_ids);
    if (!xg || !dg || n_ids > 4 * total + 1024)
        return false;
    for (int64_t i = 0; i < n_ids; i++)
        xg[i] = dg[i] = -2;
    for (int64_t i = 0; i < total; i++) {
        if (x->devices[i] < 0 || dst->devices[i] < 0 || dst->devices[i] >= n_ids)
            return false;
        xg[x->devices[i]] = i / xg_size;
        dg[dst->devices[i]] = i / dg_size;
    }
    for (int64_t lin = 0; lin < total; lin++) {
        int64_t gx = 0, gd = 0, pick = -1;
        for (uint32_t i = 0; i < r; i++) {
            gx = gx * x->tile_dims[i] + (x->tile_dims[i] == 1 ? 0 : idx[i]);
            gd = gd * dst->tile_dims[i] + (dst->tile_dims[i] == 1 ? 0 : idx[i]);
        }
        for (int64_t k = gx * xg_size; k < (gx + 1) * xg_size; k++) {
            int64_t d = x->devices[k];
            if (xg[d] == gx && dg[d] == gd && (pick < 0 || d < pick))
                pick = d;
        }
        if (pick < 0)
            return false;
        devs[lin] = pick;
        xg[pick] = dg[pick] = -1;
        for (uint32_t i = n; i-- > 0;)
            if (++idx[i] < md[i])
                break;
            else
                idx[i] = 0;
    }
    return true;
}

/* MergeShardingIfCompatible: the sharding tiled like both `x` and the partially replicated
 * `dst` on every data dim, with at least `min_tiles` tiles; a non-tiled dst yields x. NULL
 * when there is none. Manual subgroups are not merged (callers group them away first). */
static const ShdSharding *
merge_compatible(SlArena *a, const ShdSharding *x, const ShdSharding *dst, int64_t min_tiles)
{
    if (x->kind != SHD_TILED)
        return NULL;
    if (dst->kind != SHD_TILED)
        return x;
    uint32_t r = shd_data_rank(x);
    if (!is_plain_partial(dst) || (x->n_subgroups && !is_plain_partial(x)) ||
        r != shd_data_rank(dst) || r + 1 > SHD_MAX_DIMS ||
        shd_device_count(x) != shd_device_count(dst))
        return NULL;
    int64_t md[SHD_MAX_DIMS], total = shd_device_count(x);
    for (uint32_t i = 0; i < r; i++) {
        int64_t xd = x->tile_dims[i], dd = dst->tile_dims[i];
        if (xd != dd && xd != 1 && dd != 1)
            return NULL;
        md[i] = xd != 1 ? xd : dd;
    }
    int64_t tiles = shd_prod(md, r), rep = tiles ? total / tiles : 0;
    if (!tiles || total % tiles || tiles < min_tiles)
        return NULL;
    uint32_t n = r;
    if (rep > 1)
        md[n++] = rep;
    /* First: an array both sides reach by splitting their replication (keeps iota forms);
     * like XLA, the last matching pair wins. */
    int64_t *xc[MAX_MERGE_CANDIDATES], *dc[MAX_MERGE_CANDIDATES], *devs = NULL;
    uint32_t nx = merge_candidates(a, x, md, r, rep, xc);
    uint32_t nd = merge_candidates(a, dst, md, r, rep, dc);
    for (uint32_t i = 0; i < nd; i++)
        for (uint32_t j = 0; j < nx; j++)
            if (!memcmp(dc[i], xc[j], (size_t)total * sizeof(int64_t)))
                devs = dc[i];
    static const ShdSubgroup rep_sub = SHD_SUB_REPLICATED;
    ShdForm form = x->has_iota || dst->has_iota ? SHD_FORM_IOTA : SHD_FORM_EXPLICIT;
    if (!devs) {
        devs = SL_NEW_ARRAY(a, int64_t, total);
        if (!devs || !merge_by_groups(a, x, dst, md, n, r, devs))
            return NULL;
        form = SHD_FORM_EXPLICIT;
    }
    return shd_make_tiled(a, md, n, devs, &rep_sub, n - r, form);
}

const ShdSharding *
shd_merge_if_compatible(SlArena *a, const ShdSharding *to_merge, const ShdSharding *dst,
                        int64_t min_tiles)
{
    return merge_compatible(a, to_merge, dst, min_tiles);
}

/* ---- B.5 reshape propagation ---- */

/* The sharding of `to` obtained from the shards of source dims [start, end) alone: reshape
 * that tiling (over iota), then lay s's devices out with those dims first and everything
 * else folded into the replication dim. NULL when that range does not reshape. */
static const ShdSharding *
reshape_range(SlArena *a, const IrShape *from, const IrShape *to, const ShdSharding *s,
              uint32_t start, uint32_t end)
{
    int64_t gd[SHD_MAX_DIMS], perm[SHD_MAX_DIMS], nd[SHD_MAX_DIMS + 1], tdims[SHD_MAX_DIMS];
    uint32_t r = from->rank, np = 0;
    for (uint32_t i = 0; i < r; i++)
        gd[i] = i >= start && i < end ? s->tile_dims[i] : 1;
    if (shd_prod(gd, r) == 1)
        return NULL;
    const ShdSharding *g = shd_tiled_iota(a, gd, r, NULL, 0);
    const ShdSharding *rs = g ? shd_reshape(a, from, to, g) : NULL;
    if (!rs || rs->kind != SHD_TILED || rs->n_tile_dims > to->rank + 1)
        return NULL;
    uint32_t n = rs->n_tile_dims;
    memcpy(nd, rs->tile_dims, n * sizeof(int64_t));
    int64_t total = shd_device_count(s), left = total / shd_prod(nd, n);
    if (n == to->rank)
        nd[n++] = left;
    else
        nd[n - 1] *= left;
    if (shd_prod(nd, n) != total)
        return NULL;
    for (uint32_t i = start; i < end; i++)
        perm[np++] = i;
    for (uint32_t i = 0; i < s->n_tile_dims; i++)
        if (i < start || i >= end)
            perm[np++] = i;
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, total);
    if (!devs)
        return NULL;
    shd_arr_transpose(s->devices, s->tile_dims, s->n_tile_dims, perm, devs, tdims);
    static const ShdSubgroup rep = SHD_SUB_REPLICATED;
    return shd_make_tiled(a, nd, n, devs, &rep, 1, form_of(s));
}

/* PropagateShardingThroughReshape: walk intervals of source dims, longest first from each
 * start; merge every one that reshapes into the result if it adds tiles, then continue after
 * it. Manual subgroups are handled inside their groups. */
const ShdSharding *
shd_propagate_through_reshape(SlArena *a, const IrShape *from, const IrShape *to,
                              const ShdSharding *s)
{
    if (s->kind != SHD_TILED)
        return s;
    if (from->rank != shd_data_rank(s) || to->rank + s->n_subgroups + 1 > SHD_MAX_DIMS)
        return shd_replicated(a);
    if (shd_is_manual_subgroup(s)) {
        ShdGrouped g = shd_group_on_manual(a, s);
        int64_t *gd = SL_NEW_ARRAY(a, int64_t, g.n_group_dims ? g.n_group_dims : 1);
        if (!g.inner || !gd)
            return NULL;
        g.inner = shd_propagate_through_reshape(a, from, to, g.inner);
        if (!g.inner)
            return NULL;
        for (uint32_t i = 0; i < g.n_group_dims; i++)
            gd[i] = g.group_dims[i] + (int64_t)to->rank - (int64_t)from->rank;
        g.group_dims = gd;
        g.data_rank = to->rank;
        return shd_ungroup(a, &g);
    }
    const ShdSharding *result = shd_replicated(a);
    uint32_t start = 0;
    while (result && start < from->rank) {
        uint32_t end = from->rank;
        for (; end > start; end--) {
            const ShdSharding *part = reshape_range(a, from, to, s, start, end);
            const ShdSharding *m =
                part ? merge_compatible(a, part, result, shd_num_tiles(result) + 1) : NULL;
            if (m) {
                result = m;
                break;
            }
        }
        start = end > start ? end : start + 1;
    }
    return result;
}

int64_t
shd_find_tile_move_target(const IrShape *shape, const ShdSharding *s, uint32_t src,
                          const int64_t *excluded, uint32_t n_excluded)
{
    if (s->kind != SHD_TILED || shape->rank < 2 || shape->rank != shd_data_rank(s) ||
        src >= shape->rank || shape->dims[src] == 1 || s->tile_dims[src] == 1)
        return -1;
    for (uint32_t t = 0; t < shape->rank; t++)
        if (t != src && !in_list(excluded, n_excluded, t) &&
            shape->dims[t] % (s->tile_dims[src] * s->tile_dims[t]) == 0)
            return t;
    return -1;
}

/* ---- B.6 - B.8 ---- */

const ShdSharding *
shd_reverse(SlArena *a, const ShdSharding *s, const int64_t *dims, uint32_t n)
{
    if (s->kind != SHD_TILED || n == 0)
        return s;
    int64_t total = shd_device_count(s), idx[SHD_MAX_DIMS] = {0}, strides[SHD_MAX_DIMS];
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, total), stride = 1;
    if (!devs)
        return NULL;
    for (uint32_t i = s->n_tile_dims; i-- > 0;) {
        strides[i] = stride;
        stride *= s->tile_dims[i];
    }
    for (int64_t lin = 0; lin < total; lin++) {
        int64_t src = 0;
        for (uint32_t i = 0; i < s->n_tile_dims; i++) {
            int64_t k = in_list(dims, n, i) ? s->tile_dims[i] - 1 - idx[i] : idx[i];
            src += k * strides[i];
        }
        devs[lin] = s->devices[src];
        for (uint32_t i = s->n_tile_dims; i-- > 0;)
            if (++idx[i] < s->tile_dims[i])
                break;
            else
                idx[i] = 0;
    }
    return shd_with_devices(a, s, s->tile_dims, s->n_tile_dims, devs);
}

const ShdSharding *
shd_move_and_merge_tiles(SlArena *a, const ShdSharding *s, uint32_t src, uint32_t tgt)
{
    if (s->kind != SHD_TILED)
        return s;
    uint32_t n = s->n_tile_dims, r = shd_data_rank(s);
    if (src >= r || tgt >= r || src == tgt || n + 1 > SHD_MAX_DIMS)
        return NULL;
    /* View with a size-1 axis after tgt; swap it with src; read back merged into tgt. */
    int64_t ext[SHD_MAX_DIMS], perm[SHD_MAX_DIMS], tdims[SHD_MAX_DIMS], nd[SHD_MAX_DIMS];
    uint32_t one = tgt + 1, src2 = src < one ? src : src + 1;
    for (uint32_t i = 0, k = 0; i < n + 1; i++)
        ext[i] = i == one ? 1 : s->tile_dims[k++];
    identity(perm, n + 1);
    perm[src2] = one;
    perm[one] = src2;
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, shd_device_count(s));
    if (!devs)
        return NULL;
    shd_arr_transpose(s->devices, ext, n + 1, perm, devs, tdims);
    memcpy(nd, s->tile_dims, n * sizeof(int64_t));
    nd[tgt] *= nd[src];
    nd[src] = 1;
    return shd_with_devices(a, s, nd, n, devs);
}

const ShdSharding *
shd_split_dim(SlArena *a, const ShdSharding *s, uint32_t dim, int64_t major)
{
    if (s->kind != SHD_TILED)
        return s;
    int64_t nd[SHD_MAX_DIMS];
    uint32_t n = s->n_tile_dims;
    if (dim >= shd_data_rank(s) || major < 1 || s->tile_dims[dim] % major || n + 1 > SHD_MAX_DIMS)
        return NULL;
    for (uint32_t i = 0, k = 0; i < n; i++) {
        nd[k++] = i == dim ? major : s->tile_dims[i];
        if (i == dim)
            nd[k++] = s->tile_dims[i] / major;
    }
    return shd_with_devices(a, s, nd, n + 1, s->devices);
}

const ShdSharding *
shd_merge_dims(SlArena *a, const ShdSharding *s, uint32_t dim)
{
    if (s->kind != SHD_TILED)
        return s;
    int64_t nd[SHD_MAX_DIMS];
    uint32_t n = s->n_tile_dims;
    if (dim + 1 >= shd_data_rank(s))
        return NULL;
    for (uint32_t i = 0, k = 0; i < n; i++) {
        if (i == dim + 1)
            nd[k - 1] *= s->tile_dims[i];
        else
            nd[k++] = s->tile_dims[i];
    }
    return shd_with_devices(a, s, nd, n - 1, s->devices);
}

/* ---- B.10 ---- */

/* Every device's tile under `target` (data rank r, each dim a multiple of partial's) is part of
 * its tile under `partial`. */
static bool
target_within_partial(const ShdSharding *partial, const ShdSharding *target, uint32_t r)
{
    int64_t ti[SHD_MAX_DIMS], pi[SHD_MAX_DIMS];
    int64_t total = shd_device_count(target);
    for (int64_t k = 0; k < total; k++) {
        int64_t dev = target->devices[k];
        if (!shd_tile_index(target, dev, ti) || !shd_tile_index(partial, dev, pi))
            return false;
        for (uint32_t i = 0; i < r; i++)
            if (ti[i] / (target->tile_dims[i] / partial->tile_dims[i]) != pi[i])
                return false;
    }
    return true;
}

const ShdSharding *
shd_partial_replicate_reshard_compatible(SlArena *a, const ShdSharding *partial,
                                         const ShdSharding *target)
{
    if (!is_plain_partial(partial) || target->kind != SHD_TILED ||
        (target->n_subgroups && !is_plain_partial(target)) ||
        shd_device_count(partial) != shd_device_count(target) ||
        shd_data_rank(partial) != shd_data_rank(target))
        return NULL;
    uint32_t r = shd_data_rank(partial), ne = 0, np = 0;
    int64_t split[SHD_MAX_DIMS], perm[SHD_MAX_DIMS], expand_at[SHD_MAX_DIMS], tdims[SHD_MAX_DIMS];
    if (2 * r + 1 > SHD_MAX_DIMS)
        return NULL;
    /* View: [partial data dims, expansion factors carved from the replication dim, rest]. */
    for (uint32_t i = 0; i < r; i++) {
        int64_t p = partial->tile_dims[i], t = target->tile_dims[i];
        if (t % p)
            return NULL;
        split[i] = p;
        expand_at[i] = -1;
        if (t > p) {
            expand_at[i] = r + ne;
            split[r + ne++] = t / p;
        }
    }
    /* XLA returns the target itself when each of its tiles lies inside the partial tile of
     * the same device (IsSubTilingOrEqualSharding over one element per target tile): then a
     * slice is all it takes, whatever the device order. */
    if (target_within_partial(partial, target, r))
        return target;
    int64_t rep = partial->tile_dims[r], carved = shd_prod(split + r, ne);
    if (rep % carved)
        return NULL;
    split[r + ne] = rep / carved;
    /* Interleave each expansion factor right after its dim (as the minor part). */
    for (uint32_t i = 0; i < r; i++) {
        perm[np++] = i;
        if (expand_at[i] >= 0)
            perm[np++] = expand_at[i];
    }
    perm[np++] = r + ne;
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, shd_device_count(partial));
    if (!devs)
        return NULL;
    shd_arr_transpose(partial->devices, split, r + ne + 1, perm, devs, tdims);
    if (target->n_subgroups)
        return shd_make_tiled(a, target->tile_dims, target->n_tile_dims, devs,
                              target->subgroups, 1, form_of(partial));
    if (split[r + ne] != 1)
        return NULL;
    return shd_make_tiled(a, target->tile_dims, target->n_tile_dims, devs, NULL, 0,
                          form_of(partial));
}

/* ---- B.11 ---- */

bool
shd_can_reshard_with_collective_permute(const ShdSharding *a, const ShdSharding *b)
{
    if (a->kind != SHD_TILED || b->kind != SHD_TILED || a->n_tile_dims != b->n_tile_dims ||
        shd_has_partial_replication(a) != shd_has_partial_replication(b))
        return false;
    if (memcmp(a->tile_dims, b->tile_dims, a->n_tile_dims * sizeof(int64_t)))
        return false;
    return memcmp(a->devices, b->devices, (size_t)shd_device_count(a) * sizeof(int64_t)) != 0;
}

/* A small ordered map: shard count -> dims with that count, in insertion order. */
typedef struct CountDims {
    int64_t count;
    int64_t dims[SHD_MAX_DIMS];
    uint32_t n;
} CountDims;

typedef struct CountMap {
    CountDims e[SHD_MAX_DIMS];
    uint32_t n; /* entries sorted by count */
} CountMap;

static CountDims *
cm_find(CountMap *m, int64_t count, bool create)
{
    uint32_t i = 0;
    while (i < m->n && m->e[i].count < count)
        i++;
    if (i < m->n && m->e[i].count == count)
        return &m->e[i];
    if (!create)
        return NULL;
    memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof(CountDims));
    m->n++;
    m->e[i].count = count;
    m->e[i].n = 0;
    return &m->e[i];
}

static void
cm_remove(CountMap *m, int64_t count, int64_t dim)
{
    CountDims *c = cm_find(m, count, false);
    if (!c)
        return;
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n; i++)
        if (c->dims[i] != dim)
            c->dims[k++] = c->dims[i];
    c->n = k;
    if (k == 0) {
        uint32_t at = (uint32_t)(c - m->e);
        memmove(&m->e[at], &m->e[at + 1], (m->n - at - 1) * sizeof(CountDims));
        m->n--;
    }
}

uint32_t
shd_all_to_all_dims(const ShdSharding *from, const ShdSharding *to, int64_t *src_dims,
                    int64_t *tgt_dims, uint32_t cap)
{
    if (from->kind != SHD_TILED || to->kind != SHD_TILED ||
        from->n_tile_dims != to->n_tile_dims || shd_num_tiles(from) != shd_num_tiles(to))
        return 0;
    CountMap src, tgt;
    src.n = tgt.n = 0;
    for (uint32_t i = 0; i < from->n_tile_dims; i++) {
        if (from->tile_dims[i] == to->tile_dims[i])
            continue;
        CountDims *s = cm_find(&src, from->tile_dims[i], true);
        CountDims *t = cm_find(&tgt, to->tile_dims[i], true);
        s->dims[s->n++] = i;
        t->dims[t->n++] = i;
    }
    if (src.n == 0 || src.n != tgt.n)
        return 0;
    for (uint32_t i = 0; i < src.n; i++) {
        CountDims *t = cm_find(&tgt, src.e[i].count, false);
        if (!t || t->n != src.e[i].n)
            return 0;
    }
    uint32_t n_out = 0;
    while (src.n) {
        int64_t s_count = src.e[0].count;
        int64_t i = src.e[0].dims[src.e[0].n - 1];
        int64_t t_count = to->tile_dims[i];
        if (t_count == s_count) {
            cm_remove(&src, s_count, i);
            cm_remove(&tgt, s_count, i);
            continue;
        }
        CountDims *cands = cm_find(&src, t_count, false);
        if (!cands)
            return 0;
        uint32_t k = 0;
        if (s_count == 1) {
            while (k + 1 < cands->n && to->tile_dims[cands->dims[k]] == 1)
                k++;
        } else if (t_count % s_count == 0) {
            while (k + 1 < cands->n && to->tile_dims[cands->dims[k]] != s_count)
                k++;
        } else {
            return 0;
        }
        int64_t j = cands->dims[k];
        if (n_out == cap)
            return 0;
        src_dims[n_out] = j;
        tgt_dims[n_out++] = i;
        cm_remove(&tgt, t_count, i);
        src.e[0].dims[src.e[0].n - 1] = j; /* j now holds the old count of i */
        cm_remove(&src, t_count, j);
    }
    return n_out;
}

const ShdSharding *
shd_all_to_all_sharding(SlArena *a, const ShdSharding *s, uint32_t src, uint32_t tgt)
{
    if (s->kind != SHD_TILED || src >= s->n_tile_dims || tgt >= s->n_tile_dims || src == tgt)
        return NULL;
    int64_t na = s->tile_dims[src], nb = s->tile_dims[tgt];
    if (na % nb || s->n_tile_dims * 2 > SHD_MAX_DIMS)
        return NULL;
    /* Each dim i becomes (major, minor); src = (b, a/b), tgt = (b, 1); swap the minors. */
    int64_t split[SHD_MAX_DIMS], perm[SHD_MAX_DIMS], tdims[SHD_MAX_DIMS], nd[SHD_MAX_DIMS];
    uint32_t n = s->n_tile_dims;
    for (uint32_t i = 0; i < n; i++) {
        split[2 * i] = i == src || i == tgt ? nb : s->tile_dims[i];
        split[2 * i + 1] = i == src ? na / nb : 1;
        perm[2 * i] = 2 * i;
        perm[2 * i + 1] = 2 * i + 1;
    }
    perm[2 * src + 1] = 2 * tgt + 1;
    perm[2 * tgt + 1] = 2 * src + 1;
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, shd_device_count(s));
    if (!devs)
        return NULL;
    shd_arr_transpose(s->devices, split, 2 * n, perm, devs, tdims);
    memcpy(nd, s->tile_dims, n * sizeof(int64_t));
    nd[src] = nb;
    nd[tgt] = na;
    return shd_with_devices(a, s, nd, n, devs);
}

/* ---- unreduced subgroups ---- */

const ShdSharding *
shd_unreduced_as_replicated(SlArena *a, const ShdSharding *s)
{
    if (s->kind == SHD_UNREDUCED)
        return shd_replicated(a);
    if (s->kind == SHD_TUPLE) {
        const ShdSharding **leaves = SL_NEW_ARRAY(a, const ShdSharding *, s->n_leaves + 1);
        bool changed = false;
        if (!leaves)
            return NULL;
        for (uint32_t i = 0; i < s->n_leaves; i++) {
            leaves[i] = shd_unreduced_as_replicated(a, s->leaves[i]);
            if (!leaves[i])
                return NULL;
            changed = changed || leaves[i] != s->leaves[i];
        }
        return changed ? shd_tuple(a, leaves, s->n_leaves) : s;
    }
    if (s->kind != SHD_TILED || !has_unreduced(s))
        return s;
    /* The unreduced dim precedes the replicated one (normalized order), so retyping it and
     * letting the constructor merge the two is XLA's reshape of [.., U, R] into [.., U*R]. */
    ShdSubgroup sub[SHD_MAX_DIMS];
    for (uint32_t k = 0; k < s->n_subgroups; k++)
        sub[k] = s->subgroups[k] == SHD_SUB_UNREDUCED ? SHD_SUB_REPLICATED : s->subgroups[k];
    return shd_make_tiled(a, s->tile_dims, s->n_tile_dims, s->devices, sub, s->n_subgroups,
                          form_of(s));
}
