/* sharding.c - the sharding value: constructors with XLA's normalization (gspmd.md A.4), iota
 * recovery (A.3), predicates, and tile queries (A.5). Does not own: text (text.c), the
 * algebra of §B (algebra.c, groups.c). Invariant: values are immutable once returned; a tiled
 * value always carries its materialized device array and, when ids are dense, an inverse
 * index so that device lookups are O(1). */
#include "sharding/shd.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sharding/shd_int.h"

/* ---- small array helpers ---- */

int64_t
shd_prod(const int64_t *v, uint32_t n)
{
    int64_t p = 1;
    for (uint32_t i = 0; i < n; i++)
        p *= v[i];
    return p;
}

void
shd_unravel(int64_t lin, const int64_t *dims, uint32_t n, int64_t *coords)
{
    for (uint32_t i = n; i-- > 0;) {
        coords[i] = lin % dims[i];
        lin /= dims[i];
    }
}

void
shd_arr_transpose(const int64_t *src, const int64_t *dims, uint32_t n, const int64_t *perm,
                  int64_t *out, int64_t *out_dims)
{
    int64_t src_strides[SHD_MAX_DIMS], strides[SHD_MAX_DIMS], idx[SHD_MAX_DIMS] = {0};
    int64_t stride = 1;
    assert(n <= SHD_MAX_DIMS);
    for (uint32_t i = n; i-- > 0;) {
        src_strides[i] = stride;
        stride *= dims[i];
    }
    for (uint32_t j = 0; j < n; j++) {
        out_dims[j] = dims[perm[j]];
        strides[j] = src_strides[perm[j]];
    }
    /* Walk the output row-major with an odometer, tracking the source offset. */
    int64_t total = stride, off = 0;
    for (int64_t lin = 0; lin < total; lin++) {
        out[lin] = src[off];
        for (uint32_t j = n; j-- > 0;) {
            off += strides[j];
            if (++idx[j] < out_dims[j])
                break;
            off -= strides[j] * out_dims[j];
            idx[j] = 0;
        }
    }
}

/* ---- iota recovery ---- */

/* A level of a transposed iota: `size` consecutive positions whose values step by `stride`. */
typedef struct Level {
    int64_t size, stride;
} Level;

static int
cmp_level_stride_desc(const void *x, const void *y)
{
    const Level *a = x, *b = y;
    return (a->stride < b->stride) - (a->stride > b->stride);
}

/* Splits `v` into levels from the minor end; greedy runs merge adjacent in-order axes, which
 * is exactly XLA's canonical merge. */
static uint32_t
find_levels(const int64_t *v, int64_t n, Level *lv)
{
    uint32_t k = 0;
    int64_t block = 1;
    if (n <= 0 || v[0] != 0)
        return UINT32_MAX;
    while (block < n) {
        int64_t st = v[block];
        if (k == SHD_MAX_DIMS || st <= 0 || st >= n)
            return UINT32_MAX;
        int64_t c = 1;
        while (c * block < n && v[c * block] == c * st)
            c++;
        if ((n / block) % c != 0)
            return UINT32_MAX;
        lv[k].size = c;
        lv[k].stride = st;
        k++;
        block *= c;
    }
    return k;
}

static bool
levels_match(const int64_t *v, int64_t n, const Level *lv, uint32_t k)
{
    Level sorted[SHD_MAX_DIMS];
    memcpy(sorted, lv, k * sizeof(Level));
    qsort(sorted, k, sizeof(Level), cmp_level_stride_desc);
    int64_t expect = 1;
    for (uint32_t i = k; i-- > 0;) {
        if (sorted[i].stride != expect)
            return false;
        expect *= sorted[i].size;
    }
    if (expect != n)
        return false;
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, val = 0;
        for (uint32_t j = 0; j < k; j++) {
            val += (rem % lv[j].size) * lv[j].stride;
            rem /= lv[j].size;
        }
        if (val != v[i])
            return false;
    }
    return true;
}

bool
shd_iota_recover(SlArena *a, const int64_t *devs, int64_t count, IrIota *io)
{
    Level lv[SHD_MAX_DIMS];
    uint32_t k = find_levels(devs, count, lv);
    if (k == UINT32_MAX || !levels_match(devs, count, lv, k))
        return false;
    if (k <= 1) {
        io->n_reshape = 1;
        io->reshape = SL_NEW_ARRAY(a, int64_t, 1);
        io->perm = NULL;
        if (!io->reshape)
            return false;
        io->reshape[0] = count;
        return true;
    }
    Level sorted[SHD_MAX_DIMS];
    memcpy(sorted, lv, k * sizeof(Level));
    qsort(sorted, k, sizeof(Level), cmp_level_stride_desc);
    io->n_reshape = k;
    io->reshape = SL_NEW_ARRAY(a, int64_t, k);
    io->perm = SL_NEW_ARRAY(a, int64_t, k);
    if (!io->reshape || !io->perm)
        return false;
    for (uint32_t i = 0; i < k; i++)
        io->reshape[i] = sorted[i].size;
    /* Transposed axis j (major first) is level k-1-j; its reshape axis is its stride rank. */
    for (uint32_t j = 0; j < k; j++) {
        int64_t st = lv[k - 1 - j].stride;
        for (uint32_t r = 0; r < k; r++)
            if (sorted[r].stride == st)
                io->perm[j] = r;
    }
    return true;
}

/* ---- constructors ---- */

/* Shardings without data are immutable constants shared by every user (the partitioner asks
 * for one per instruction; allocating each cost 7 % of its arena). */
static const ShdSharding k_simple[] = {
    [SHD_REPLICATED] = {.kind = SHD_REPLICATED},
    [SHD_MANUAL] = {.kind = SHD_MANUAL},
    [SHD_UNKNOWN] = {.kind = SHD_UNKNOWN},
    [SHD_UNREDUCED] = {.kind = SHD_UNREDUCED},
    [SHD_TUPLE] = {.kind = SHD_TUPLE},
};

const ShdSharding *
shd_make_simple(SlArena *a, ShdKind kind)
{
    if ((unsigned)kind < SL_COUNTOF(k_simple) && kind != SHD_MAXIMAL && kind != SHD_TILED)
        return &k_simple[kind];
    ShdSharding *s = SL_NEW(a, ShdSharding);
    if (s)
        s->kind = kind;
    return s;
}

const ShdSharding *
shd_replicated(SlArena *a)
{
    return shd_make_simple(a, SHD_REPLICATED);
}

const ShdSharding *
shd_manual(SlArena *a)
{
    return shd_make_simple(a, SHD_MANUAL);
}

const ShdSharding *
shd_unknown(SlArena *a)
{
    return shd_make_simple(a, SHD_UNKNOWN);
}

const ShdSharding *
shd_unreduced(SlArena *a)
{
    return shd_make_simple(a, SHD_UNREDUCED);
}

const ShdSharding *
shd_maximal(SlArena *a, int64_t device)
{
    ShdSharding *s = SL_NEW(a, ShdSharding);
    if (s) {
        s->kind = SHD_MAXIMAL;
        s->device = device;
    }
    return s;
}

/* Sorts each replication group (the contiguous last-dim runs) ascending. */
static int
cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static void
sort_groups(int64_t *devs, int64_t total, int64_t group)
{
    for (int64_t g = 0; g < total; g += group) {
        int64_t i = 1;
        while (i < group && devs[g + i - 1] <= devs[g + i])
            i++;
        if (i < group)
            qsort(devs + g, (size_t)group, sizeof(int64_t), cmp_i64);
    }
}

/* Up to this many devices a linear search is as fast as an index, and most shardings the
 * partitioner derives are on small meshes and looked up a few times at most. */
#define SHD_DEV_POS_MIN_DEVICES 64

/* The dense inverse index, when there are many ids, non-negative and not much larger than
 * the count. */
static void
build_dev_pos(SlArena *a, ShdSharding *s, int64_t total)
{
    if (total <= SHD_DEV_POS_MIN_DEVICES)
        return;
    int64_t max_id = -1;
    for (int64_t i = 0; i < total; i++) {
        if (s->devices[i] < 0)
            return;
        if (s->devices[i] > max_id)
            max_id = s->devices[i];
    }
    if (max_id >= 4 * total + 1024)
        return;
    int64_t *pos = SL_NEW_ARRAY(a, int64_t, (size_t)max_id + 1);
    if (!pos)
        return;
    for (int64_t i = 0; i <= max_id; i++)
        pos[i] = -1;
    for (int64_t i = total; i-- > 0;)
        pos[s->devices[i]] = i; /* the first occurrence wins on duplicates */
    s->dev_pos = pos;
    s->n_dev_pos = max_id + 1;
}

static const ShdSharding *
finish_tiled(SlArena *a, const int64_t *dims, uint32_t n, const int64_t *devs,
             const ShdSubgroup *sub, uint32_t n_sub, ShdForm form)
{
    ShdSharding *s = SL_NEW(a, ShdSharding);
    int64_t total = shd_prod(dims, n);
    if (!s)
        return NULL;
    s->kind = SHD_TILED;
    s->n_tile_dims = n;
    s->tile_dims = SL_DUP_ARRAY(a, int64_t, dims, n);
    s->devices = SL_DUP_ARRAY(a, int64_t, devs, total);
    s->n_subgroups = n_sub;
    if (n_sub)
        s->subgroups = SL_DUP_ARRAY(a, ShdSubgroup, sub, n_sub);
    if (!s->tile_dims || !s->devices || (n_sub && !s->subgroups))
        return NULL;
    /* XLA's PartialTile: the devices of each replication group in ascending order, whatever
     * the array's form, so that shardings placing data alike are equal and print alike. */
    if (n_sub && sub[n_sub - 1] == SHD_SUB_REPLICATED)
        sort_groups(s->devices, total, dims[n - 1]);
    if (form == SHD_FORM_IOTA && shd_iota_recover(a, s->devices, total, &s->iota))
        s->has_iota = true;
    if (s->has_iota) {
        s->iota.n_dims = n;
        s->iota.dims = s->tile_dims;
    }
    build_dev_pos(a, s, total);
    return s;
}

const ShdSharding *
shd_make_tiled(SlArena *a, const int64_t *dims, uint32_t n, const int64_t *devices,
               const ShdSubgroup *sub, uint32_t n_sub, ShdForm form)
{
    assert(n_sub <= n && n <= SHD_MAX_DIMS);
    uint32_t r = n - n_sub;
    if (n_sub == 0)
        return finish_tiled(a, dims, n, devices, NULL, 0, form);
    bool same = true;
    for (uint32_t i = 1; i < n_sub; i++)
        same = same && sub[i] == sub[0];
    if (same && shd_prod(dims, r) == 1) {
        switch (sub[0]) {
        case SHD_SUB_MANUAL: return shd_manual(a);
        case SHD_SUB_REPLICATED: return shd_replicated(a);
        case SHD_SUB_UNREDUCED: return shd_unreduced(a);
        }
    }
    /* Group the subgroup dims by type (dropping size-1 dims) and merge each group. */
    static const ShdSubgroup k_order[] = {SHD_SUB_MANUAL, SHD_SUB_UNREDUCED, SHD_SUB_REPLICATED};
    int64_t perm[SHD_MAX_DIMS], tdims[SHD_MAX_DIMS], merged[SHD_MAX_DIMS];
    bool used[SHD_MAX_DIMS] = {false};
    ShdSubgroup types[SL_COUNTOF(k_order)];
    uint32_t np = 0, nm = r, nt = 0;
    for (uint32_t i = 0; i < r; i++) {
        perm[np++] = i;
        merged[i] = dims[i];
    }
    for (size_t t = 0; t < SL_COUNTOF(k_order); t++) {
        int64_t size = 1;
        for (uint32_t i = r; i < n; i++) {
            if (sub[i - r] != k_order[t] || dims[i] == 1)
                continue;
            perm[np++] = i;
            used[i] = true;
            size *= dims[i];
        }
        if (size > 1) {
            merged[nm++] = size;
            types[nt++] = k_order[t];
        }
    }
    for (uint32_t i = r; i < n; i++) /* the dropped size-1 dims go last; they carry nothing */
        if (!used[i])
            perm[np++] = i;
    int64_t total = shd_prod(dims, n);
    /* The transposed array is copied by finish_tiled: small ones stay off the arena. */
    int64_t small[SHD_DEV_POS_MIN_DEVICES];
    int64_t *tmp = total <= SHD_DEV_POS_MIN_DEVICES ? small : SL_NEW_ARRAY(a, int64_t, total);
    if (!tmp)
        return NULL;
    shd_arr_transpose(devices, dims, n, perm, tmp, tdims);
    if (nt == 0 && nm == 0) /* only size-1 subgroup dims: nothing is tiled */
        return shd_replicated(a);
    if (nt == 0)
        return finish_tiled(a, merged, nm, tmp, NULL, 0, form);
    if (nt == 1 && merged[nm - 1] == total) /* all devices in one subgroup: no tiling left */
        return shd_make_tiled(a, merged, nm, tmp, types, 1, form);
    return finish_tiled(a, merged, nm, tmp, types, nt, form);
}

const ShdSharding *
shd_with_devices(SlArena *a, const ShdSharding *like, const int64_t *dims, uint32_t n,
                 const int64_t *devices)
{
    return shd_make_tiled(a, dims, n, devices, like->subgroups, like->n_subgroups,
                          like->has_iota ? SHD_FORM_IOTA : SHD_FORM_EXPLICIT);
}

const ShdSharding *
shd_tiled(SlArena *a, const int64_t *tile_dims, uint32_t n_tile_dims, const int64_t *devices,
          const ShdSubgroup *subgroups, uint32_t n_subgroups)
{
    if (n_tile_dims > SHD_MAX_DIMS || n_subgroups > n_tile_dims)
        return NULL;
    return shd_make_tiled(a, tile_dims, n_tile_dims, devices, subgroups, n_subgroups,
                          SHD_FORM_IOTA);
}

const ShdSharding *
shd_tiled_iota(SlArena *a, const int64_t *tile_dims, uint32_t n_tile_dims,
               const ShdSubgroup *subgroups, uint32_t n_subgroups)
{
    if (n_tile_dims > SHD_MAX_DIMS || n_subgroups > n_tile_dims)
        return NULL;
    int64_t total = shd_prod(tile_dims, n_tile_dims);
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, total);
    if (!devs)
        return NULL;
    for (int64_t i = 0; i < total; i++)
        devs[i] = i;
    return shd_make_tiled(a, tile_dims, n_tile_dims, devs, subgroups, n_subgroups,
                          SHD_FORM_IOTA);
}

const ShdSharding *
shd_tuple(SlArena *a, const ShdSharding *const *leaves, uint32_t n)
{
    ShdSharding *s = SL_NEW(a, ShdSharding);
    if (!s)
        return NULL;
    s->kind = SHD_TUPLE;
    s->n_leaves = n;
    if (n) {
        s->leaves = SL_NEW_ARRAY(a, const ShdSharding *, n);
        if (!s->leaves)
            return NULL;
        for (uint32_t i = 0; i < n; i++)
            s->leaves[i] = leaves[i];
    }
    return s;
}

/* Deep copy into `a`: arrays, leaves and the metadata text, so that a value built in a scratch
 * arena outlives it. The shared constants are returned as they are. */
const ShdSharding *
shd_clone(SlArena *a, const ShdSharding *s)
{
    if (!s || (s >= k_simple && s < k_simple + SL_COUNTOF(k_simple)))
        return s;
    ShdSharding *c = SL_NEW(a, ShdSharding);
    if (!c)
        return NULL;
    *c = *s;
    if (s->metadata.len) {
        char *t = SL_DUP_ARRAY(a, char, s->metadata.ptr, s->metadata.len);
        if (!t)
            return NULL;
        c->metadata.ptr = t;
    }
    if (s->kind == SHD_TUPLE) {
        const ShdSharding **lv = s->n_leaves ? SL_NEW_ARRAY(a, const ShdSharding *, s->n_leaves)
                                             : NULL;
        if (s->n_leaves && !lv)
            return NULL;
        for (uint32_t i = 0; i < s->n_leaves; i++)
            if (!(lv[i] = shd_clone(a, s->leaves[i])))
                return NULL;
        c->leaves = lv;
        return c;
    }
    if (s->kind != SHD_TILED)
        return c;
    int64_t total = shd_prod(s->tile_dims, s->n_tile_dims);
    c->tile_dims = SL_DUP_ARRAY(a, int64_t, s->tile_dims, s->n_tile_dims);
    c->devices = SL_DUP_ARRAY(a, int64_t, s->devices, total);
    if (!c->tile_dims || !c->devices)
        return NULL;
    if (s->n_subgroups && !(c->subgroups = SL_DUP_ARRAY(a, ShdSubgroup, s->subgroups,
                                                         s->n_subgroups)))
        return NULL;
    if (s->has_iota) {
        c->iota.dims = c->tile_dims;
        if (s->iota.n_reshape &&
            (!(c->iota.reshape = SL_DUP_ARRAY(a, int64_t, s->iota.reshape, s->iota.n_reshape)) ||
             (s->iota.perm &&
              !(c->iota.perm = SL_DUP_ARRAY(a, int64_t, s->iota.perm, s->iota.n_reshape)))))
            return NULL;
    }
    if (s->dev_pos && !(c->dev_pos = SL_DUP_ARRAY(a, int64_t, s->dev_pos, s->n_dev_pos)))
        return NULL;
    return c;
}

/* ---- predicates ---- */

bool
shd_equal(const ShdSharding *a, const ShdSharding *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->kind != b->kind || a->shard_group_kind != b->shard_group_kind ||
        (a->shard_group_kind && a->shard_group_id != b->shard_group_id))
        return false;
    switch (a->kind) {
    case SHD_REPLICATED:
    case SHD_MANUAL:
    case SHD_UNKNOWN:
    case SHD_UNREDUCED: return true;
    case SHD_MAXIMAL: return a->device == b->device;
    case SHD_TUPLE:
        if (a->n_leaves != b->n_leaves)
            return false;
        for (uint32_t i = 0; i < a->n_leaves; i++)
            if (!shd_equal(a->leaves[i], b->leaves[i]))
                return false;
        return true;
    case SHD_TILED:
        if (a->n_tile_dims != b->n_tile_dims || a->n_subgroups != b->n_subgroups)
            return false;
        if (memcmp(a->tile_dims, b->tile_dims, a->n_tile_dims * sizeof(int64_t)) ||
            (a->n_subgroups &&
             memcmp(a->subgroups, b->subgroups, a->n_subgroups * sizeof(ShdSubgroup))))
            return false;
        return memcmp(a->devices, b->devices,
                      (size_t)shd_device_count(a) * sizeof(int64_t)) == 0;
    }
    return false;
}

/* For tuples: true when every leaf satisfies `pred` (and there is at least one). */
static bool
all_leaves(const ShdSharding *s, bool (*pred)(const ShdSharding *))
{
    if (s->n_leaves == 0)
        return false;
    for (uint32_t i = 0; i < s->n_leaves; i++)
        if (!pred(s->leaves[i]))
            return false;
    return true;
}

bool
shd_is_replicated(const ShdSharding *s)
{
    return s->kind == SHD_TUPLE ? all_leaves(s, shd_is_replicated) : s->kind == SHD_REPLICATED;
}

bool
shd_is_maximal(const ShdSharding *s)
{
    return s->kind == SHD_TUPLE ? all_leaves(s, shd_is_maximal) : s->kind == SHD_MAXIMAL;
}

bool
shd_is_manual(const ShdSharding *s)
{
    return s->kind == SHD_TUPLE ? all_leaves(s, shd_is_manual) : s->kind == SHD_MANUAL;
}

bool
shd_is_tile_maximal(const ShdSharding *s)
{
    if (s->kind == SHD_TUPLE)
        return all_leaves(s, shd_is_tile_maximal);
    return s->kind != SHD_TILED;
}

bool
shd_is_tiled(const ShdSharding *s)
{
    return s->kind == SHD_TUPLE ? all_leaves(s, shd_is_tiled) : s->kind == SHD_TILED;
}

static bool
has_subgroup(const ShdSharding *s, ShdSubgroup t)
{
    if (s->kind != SHD_TILED)
        return false;
    for (uint32_t i = 0; i < s->n_subgroups; i++)
        if (s->subgroups[i] == t)
            return true;
    return false;
}

bool
shd_has_partial_replication(const ShdSharding *s)
{
    return has_subgroup(s, SHD_SUB_REPLICATED);
}

bool
shd_is_manual_subgroup(const ShdSharding *s)
{
    return has_subgroup(s, SHD_SUB_MANUAL);
}

bool
shd_is_unreduced(const ShdSharding *s)
{
    return s && (s->kind == SHD_UNREDUCED || has_subgroup(s, SHD_SUB_UNREDUCED));
}

bool
shd_unique_device(const ShdSharding *s, int64_t *device)
{
    if (s->kind == SHD_MAXIMAL) {
        *device = s->device;
        return true;
    }
    if (s->kind != SHD_TUPLE || s->n_leaves == 0)
        return false;
    int64_t first;
    if (!shd_unique_device(s->leaves[0], &first))
        return false;
    for (uint32_t i = 1; i < s->n_leaves; i++) {
        int64_t d;
        if (!shd_unique_device(s->leaves[i], &d) || d != first)
            return false;
    }
    *device = first;
    return true;
}

/* ---- queries ---- */

uint32_t
shd_data_rank(const ShdSharding *s)
{
    return s->kind == SHD_TILED ? s->n_tile_dims - s->n_subgroups : 0;
}

int64_t
shd_dim_shards(const ShdSharding *s, uint32_t dim)
{
    return dim < shd_data_rank(s) ? s->tile_dims[dim] : 1;
}

int64_t
shd_num_tiles(const ShdSharding *s)
{
    return s->kind == SHD_TILED ? shd_prod(s->tile_dims, shd_data_rank(s)) : 1;
}

int64_t
shd_replication_factor(const ShdSharding *s)
{
    if (!shd_has_partial_replication(s))
        return 1;
    return s->tile_dims[s->n_tile_dims - 1]; /* normalized: REPLICATED is the last subgroup */
}

int64_t
shd_device_count(const ShdSharding *s)
{
    return s->kind == SHD_TILED ? shd_prod(s->tile_dims, s->n_tile_dims) : 1;
}

int64_t
shd_device_pos(const ShdSharding *s, int64_t device)
{
    if (s->kind != SHD_TILED || device < 0)
        return -1;
    if (s->dev_pos)
        return device < s->n_dev_pos ? s->dev_pos[device] : -1;
    int64_t total = shd_device_count(s);
    for (int64_t i = 0; i < total; i++)
        if (s->devices[i] == device)
            return i;
    return -1;
}

bool
shd_tile_index(const ShdSharding *s, int64_t device, int64_t *index_out)
{
    int64_t coords[SHD_MAX_DIMS];
    int64_t pos = shd_device_pos(s, device);
    if (pos < 0)
        return false;
    shd_unravel(pos, s->tile_dims, s->n_tile_dims, coords);
    memcpy(index_out, coords, shd_data_rank(s) * sizeof(int64_t));
    return true;
}

/* Local shape of one array leaf under a non-tuple sharding. */
static IrShape
tile_array_shape(SlArena *a, const IrShape *full, const ShdSharding *s)
{
    IrShape out = ir_shape_clone(a, full);
    if (s->kind != SHD_TILED || full->rank != shd_data_rank(s) || !out.dims)
        return out;
    for (uint32_t i = 0; i < full->rank; i++)
        out.dims[i] = (full->dims[i] + s->tile_dims[i] - 1) / s->tile_dims[i];
    return out;
}

static IrShape
tile_shape_rec(SlArena *a, const IrShape *full, const ShdSharding *s, uint32_t *leaf)
{
    if (!ir_shape_is_tuple(full)) {
        const ShdSharding *l = shd_leaf(s, (*leaf)++);
        return l ? tile_array_shape(a, full, l) : ir_shape_clone(a, full);
    }
    IrShape out = *full;
    out.elems = SL_NEW_ARRAY(a, IrShape, full->n_elems);
    if (!out.elems) {
        out.n_elems = 0;
        return out;
    }
    for (uint32_t i = 0; i < full->n_elems; i++)
        out.elems[i] = tile_shape_rec(a, &full->elems[i], s, leaf);
    return out;
}

IrShape
shd_tile_shape(SlArena *a, const IrShape *full, const ShdSharding *s)
{
    uint32_t leaf = 0;
    return tile_shape_rec(a, full, s, &leaf);
}

/* Tile coordinate of `device` along data dim `dim`, or -1. */
static int64_t
tile_coord(const ShdSharding *s, uint32_t dim, int64_t device)
{
    int64_t coords[SHD_MAX_DIMS];
    if (s->kind != SHD_TILED || dim >= shd_data_rank(s))
        return -1;
    int64_t pos = shd_device_pos(s, device);
    if (pos < 0)
        return -1;
    shd_unravel(pos, s->tile_dims, s->n_tile_dims, coords);
    return coords[dim];
}

int64_t
shd_tile_offset(const ShdSharding *s, const IrShape *full, uint32_t dim, int64_t device)
{
    int64_t k = tile_coord(s, dim, device);
    if (k < 0 || dim >= full->rank)
        return 0;
    int64_t d = full->dims[dim], per = (d + s->tile_dims[dim] - 1) / s->tile_dims[dim];
    return k * per < d ? k * per : d;
}

int64_t
shd_tile_extent(const ShdSharding *s, const IrShape *full, uint32_t dim, int64_t device)
{
    if (dim >= full->rank)
        return 0;
    int64_t d = full->dims[dim];
    int64_t k = tile_coord(s, dim, device);
    if (k < 0)
        return s->kind == SHD_TILED && dim < shd_data_rank(s) ? 0 : d;
    int64_t per = (d + s->tile_dims[dim] - 1) / s->tile_dims[dim];
    int64_t lo = k * per < d ? k * per : d, hi = (k + 1) * per < d ? (k + 1) * per : d;
    return hi - lo;
}

bool
shd_evenly_partitions(const ShdSharding *s, const IrShape *full)
{
    if (ir_shape_is_tuple(full)) {
        uint32_t n = ir_shape_leaf_count(full);
        for (uint32_t i = 0; i < n; i++) {
            const ShdSharding *l = shd_leaf(s, i);
            if (l && !shd_evenly_partitions(l, ir_shape_leaf(full, i)))
                return false;
        }
        return true;
    }
    if (s->kind == SHD_TUPLE)
        return s->n_leaves == 1 && shd_evenly_partitions(s->leaves[0], full);
    if (s->kind == SHD_MAXIMAL)
        return false;
    if (s->kind != SHD_TILED)
        return true;
    if (full->rank != shd_data_rank(s))
        return false;
    for (uint32_t i = 0; i < full->rank; i++)
        if (full->dims[i] % s->tile_dims[i] != 0)
            return false;
    return true;
}

const ShdSharding *
shd_leaf(const ShdSharding *s, uint32_t leaf)
{
    if (s->kind != SHD_TUPLE)
        return s;
    return leaf < s->n_leaves ? s->leaves[leaf] : NULL;
}

/* ---- validation ---- */

/* The device ids: in range (when the count is known), each once, as many as the module's. */
static SlStatus
check_devices(const ShdSharding *s, int64_t num_devices, SlSrcLoc loc, SlError *err)
{
    bool known = num_devices > 0; /* else XLA's rules without a count: ids >= 0, once each */
    if (s->kind == SHD_MAXIMAL) {
        if (s->device < 0 || (known && s->device >= num_devices))
            return sl_fail(err, SL_ERR_INVALID, loc, "device %lld out of range for %lld devices",
                           (long long)s->device, (long long)num_devices);
        return SL_OK;
    }
    if (s->kind != SHD_TILED)
        return SL_OK;
    int64_t total = shd_device_count(s);
    if (known && total != num_devices)
        return sl_fail(err, SL_ERR_INVALID, loc,
                       "tile assignment has %lld devices, module has %lld", (long long)total,
                       (long long)num_devices);
    if (total < 2)
        return sl_fail(err, SL_ERR_INVALID, loc, "tile assignment has a single device");
    for (int64_t i = 0; i < total; i++) {
        int64_t d = s->devices[i];
        if (d < 0 || (known && d >= num_devices))
            return sl_fail(err, SL_ERR_INVALID, loc, "device %lld out of range", (long long)d);
        if (shd_device_pos(s, d) != i)
            return sl_fail(err, SL_ERR_INVALID, loc, "device %lld appears twice", (long long)d);
    }
    return SL_OK;
}

static SlStatus
check_array(const ShdSharding *s, const IrShape *shape, int64_t num_devices, SlSrcLoc loc,
            SlError *err)
{
    if (s->kind != SHD_MAXIMAL && s->is_written_tiled && shape->rank != s->written_rank)
        return sl_fail(err, SL_ERR_INVALID, loc,
                       "sharding has %u tiled dims but the shape has rank %u", s->written_rank,
                       shape->rank);
    SlStatus st = check_devices(s, num_devices, loc, err);
    if (st != SL_OK || s->kind != SHD_TILED)
        return st;
    if (shape->rank != shd_data_rank(s))
        return sl_fail(err, SL_ERR_INVALID, loc,
                       "sharding has %u tiled dims but the shape has rank %u",
                       shd_data_rank(s), shape->rank);
    return SL_OK;
}

SlStatus
shd_check(const ShdSharding *s, const IrShape *shape, int64_t num_devices, SlSrcLoc loc,
          SlError *err)
{
    if (shape->dtype == IR_DT_TOKEN) {
        /* A token takes any sharding (an outfeed's covers its data too), but its devices must
         * exist: the partitioner places the feed by them. */
        uint32_t n = s->kind == SHD_TUPLE ? s->n_leaves : 1;
        for (uint32_t i = 0; i < n; i++) {
            const ShdSharding *l = s->kind == SHD_TUPLE ? shd_leaf(s, i) : s;
            SlStatus st = l->kind == SHD_TUPLE
                              ? sl_fail(err, SL_ERR_INVALID, loc, "nested tuple sharding")
                              : check_devices(l, num_devices, loc, err);
            if (st != SL_OK)
                return st;
        }
        return SL_OK;
    }
    if (!ir_shape_is_tuple(shape)) {
        if (s->kind == SHD_TUPLE)
            return sl_fail(err, SL_ERR_INVALID, loc, "tuple sharding on a non-tuple shape");
        return check_array(s, shape, num_devices, loc, err);
    }
    uint32_t n = ir_shape_leaf_count(shape);
    if (s->kind == SHD_TUPLE && s->n_leaves != n && !(n == 0 && s->n_leaves <= 1))
        return sl_fail(err, SL_ERR_INVALID, loc, "tuple sharding has %u leaves, shape has %u",
                       s->n_leaves, n);
    for (uint32_t i = 0; i < n; i++) {
        const ShdSharding *l = shd_leaf(s, i);
        if (l->kind == SHD_TUPLE)
            return sl_fail(err, SL_ERR_INVALID, loc, "nested tuple sharding");
        SlStatus st = check_array(l, ir_shape_leaf(shape, i), num_devices, loc, err);
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}
