/* handle_internal.c - the partitioner's internal custom calls (gspmd.md D.21, D.6 note;
 * upstream custom_call_handler.cc): _SPMDInternalOp_RotateRight, _MultiRotate, _Wrap,
 * _MultiSlice and _MultiPad. Preprocessing passes put them in place of concat-of-slices,
 * "pad with wrap" and chains of overlapping slices; each is partitioned with collective-permutes
 * between neighbouring shards along one dim instead of replicating that dim.
 * Owns: parsing their backend_config ("dimension=0,amount=2,start_indices=[6],..."), the
 * rotation by whole shards, and the "super shard" (the own shard with halos from both
 * neighbours) the other four slice. Does not own: reshards (reshard.c).
 * Invariants: every precondition upstream asserts is checked before anything is emitted; a
 * failed one falls back to DefaultAction. */
#include "spmd/spmd_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- backend_config: "k=v,k=[a,b]" ---- */

/* The text after "key=" in the config (quotes stripped), or an empty string. */
static SlStr
config_value(const IrInstr *hlo, const char *key)
{
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_BACKEND_CONFIG);
    SlStr none = {NULL, 0};
    if (!a)
        return none;
    SlStr t = a->u.text;
    if (t.len >= 2 && t.ptr[0] == '"' && t.ptr[t.len - 1] == '"') {
        t.ptr++;
        t.len -= 2;
    }
    size_t kl = strlen(key);
    int depth = 0;
    for (size_t i = 0; i + kl < t.len; i++) {
        if (t.ptr[i] == '[')
            depth++;
        else if (t.ptr[i] == ']')
            depth--;
        bool at_start = i == 0 || (depth == 0 && t.ptr[i - 1] == ',');
        if (at_start && memcmp(t.ptr + i, key, kl) == 0 && t.ptr[i + kl] == '=')
            return (SlStr){t.ptr + i + kl + 1, t.len - i - kl - 1};
    }
    return none;
}

/* Integer number `index` of the value (0 for a scalar, element `index` of an array). */
static bool
config_int(const IrInstr *hlo, const char *key, uint32_t index, int64_t *out)
{
    SlStr v = config_value(hlo, key);
    if (!v.ptr)
        return false;
    size_t i = 0;
    bool array = v.len > 0 && v.ptr[0] == '[';
    if (array)
        i = 1;
    for (uint32_t k = 0; k < index; k++) { /* skip to the index-th element */
        while (i < v.len && v.ptr[i] != ',' && v.ptr[i] != ']')
            i++;
        if (i >= v.len || v.ptr[i] != ',')
            return false;
        i++;
    }
    char buf[32];
    size_t n = 0;
    while (i < v.len && n + 1 < sizeof(buf) && (v.ptr[i] == '-' || (v.ptr[i] >= '0' && v.ptr[i] <= '9')))
        buf[n++] = v.ptr[i++];
    buf[n] = '\0';
    if (n == 0 || (!array && index > 0))
        return false;
    *out = strtoll(buf, NULL, 10);
    return true;
}

/* ---- shared pieces ---- */

static int64_t
ceil_ratio(int64_t a, int64_t b)
{
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

static int64_t
max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static IrInstr *
slice_dim(SpmdCtx *cx, IrInstr *x, uint32_t dim, int64_t lo, int64_t hi)
{
    int64_t st[SPMD_MAX_RANK], li[SPMD_MAX_RANK];
    if (!x || x->shape.rank > SPMD_MAX_RANK)
        return NULL;
    for (uint32_t d = 0; d < x->shape.rank; d++) {
        st[d] = 0;
        li[d] = x->shape.dims[d];
    }
    st[dim] = lo;
    li[dim] = hi;
    return spmd_emit_slice(cx, x, st, li);
}

static IrInstr *
pad_high(SpmdCtx *cx, IrInstr *x, uint32_t dim, int64_t hi, IrInstr *pad)
{
    IrPadDim pads[SPMD_MAX_RANK];
    if (!x)
        return NULL;
    for (uint32_t d = 0; d < x->shape.rank; d++)
        pads[d] = (IrPadDim){0, 0, 0};
    pads[dim].hi = hi;
    return spmd_emit_pad(cx, x, pad ? pad : spmd_emit_constant_scalar(cx, x->shape.dtype, 0),
                         pads);
}

static int
cmp_pair(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Collective-permute from every tile with index k < p along dim to the tile at
 * (k + shift) mod p; `skip_dst` (or -1) drops pairs into that index; sorted when asked. */
static IrInstr *
ring_permute(SpmdCtx *cx, const ShdSharding *s, uint32_t dim, int64_t p, int64_t shift,
             int64_t skip_dst, bool sorted, IrInstr *x)
{
    int64_t total = shd_device_count(s), stride = 1, n = s->tile_dims[dim];
    for (uint32_t d = s->n_tile_dims; d-- > dim + 1;)
        stride *= s->tile_dims[d];
    int64_t *pairs = SL_NEW_ARRAY(cx->arena, int64_t, 2 * total);
    if (!pairs || !x)
        return NULL;
    uint32_t np = 0;
    for (int64_t pos = 0; pos < total; pos++) {
        int64_t k = pos / stride % n;
        int64_t dst = (k + shift) % p;
        if (k >= p || dst == skip_dst)
            continue;
        pairs[2 * np] = s->devices[pos];
        pairs[2 * np++ + 1] = s->devices[pos + (dst - k) * stride];
    }
    if (sorted)
        qsort(pairs, np, 2 * sizeof(int64_t), cmp_pair);
    return spmd_coll_permute(cx, cx->state, x, pairs, np);
}

/* ---- RotateRight (the custom call, and the concatenate handler's rotate-right pattern) ---- */

/* Rotates the padded data right by `amount` elements, whole pieces moving between shards. */
static IrInstr *
rotate_padded(SpmdCtx *cx, const ShdSharding *s, IrInstr *x, uint32_t dim, int64_t p,
              int64_t amount)
{
    int64_t shard = x->shape.dims[dim], cur = 0;
    IrInstr *pieces[SPMD_MAX_RANK + 2];
    uint32_t n = 0;
    while (cur < shard && n < SL_COUNTOF(pieces)) {
        int64_t dist = ceil_ratio(amount - cur, shard);
        int64_t offset = dist * shard - amount + cur;
        int64_t size = shard - offset < shard - cur ? shard - offset : shard - cur;
        cur += size;
        IrInstr *halo = slice_dim(cx, x, dim, offset, offset + size);
        if (dist != 0)
            halo = ring_permute(cx, s, dim, p, dist, -1, false, halo);
        pieces[n++] = halo;
    }
    return spmd_emit_concatenate(cx, pieces, n, dim);
}

SlStatus
spmd_rotate_right(SpmdCtx *cx, const IrInstr *hlo, const IrInstr *src, uint32_t d,
                  int64_t amount, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const SpmdValue *v = spmd_get_value(cx, src);
    if (SL_NEVER(!v))
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "rotated value %s was not partitioned",
                         sl_sym_cstr(src->name));
    SpmdValue in;
    SlStatus st = spmd_reshard(cx, v, s, NULL, &in, err);
    if (st != SL_OK)
        return st;
    int64_t full = hlo->shape.dims[d], shard = in.hlo->shape.dims[d];
    int64_t p = ceil_ratio(full, shard), right_padding = p * shard - full;
    amount %= full;
    if (amount == 0)
        return spmd_finish(cx, hlo, spmd_emit_copy(cx, in.hlo), s, err);
    IrInstr *r0 = rotate_padded(cx, s, in.hlo, d, p, amount);
    if (right_padding == 0 || !r0)
        return spmd_finish(cx, hlo, r0, s, err);
    /* the elements that wrapped around came from the padded tail: take them from a second
     * rotation that skips the padding */
    IrInstr *r1 = rotate_padded(cx, s, in.hlo, d, p, (amount + right_padding) % (shard * p));
    IrInstr *off = spmd_partition_offset(cx, cx->state, s, &hlo->shape, d);
    IrShape is = ir_shape_make(cx->arena, IR_DT_S32, r0->shape.dims, r0->shape.rank);
    IrInstr *iota = spmd_emit_iota(cx, &is, d);
    IrInstr *bound = spmd_emit_binary(cx, IR_OP_SUBTRACT,
                                      spmd_emit_constant_scalar(cx, IR_DT_S32, amount), off);
    IrInstr *pred = spmd_emit_compare(cx, iota, spmd_emit_broadcast(cx, bound, &is, NULL, 0),
                                      "LT");
    return spmd_finish(cx, hlo, spmd_emit_select(cx, pred, r1, r0), s, err);
}

static SlStatus
rotate_right(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    int64_t dim, amount;
    if (!config_int(hlo, "dimension", 0, &dim) || !config_int(hlo, "amount", 0, &amount) ||
        amount < 0 || dim < 0 || (uint32_t)dim >= hlo->shape.rank || !shd_is_tiled(s) ||
        hlo->n_operands != 1)
        return spmd_handle_default(cx, hlo, err);
    return spmd_rotate_right(cx, hlo, hlo->operands[0], (uint32_t)dim, amount, err);
}

/* ---- the super shard (ConstructHaloExchangeSuperShard) ---- */

typedef struct Super {
    uint32_t dim;
    int64_t left, right;     /* elements from the left / right neighbour */
    bool handle_last;        /* also exchange between the last and the first shard */
    int64_t max_start, post; /* the caller slices [start, start + post) with start <= max_start */
    IrInstr *pad;            /* NULL: zero */
    bool first_uses_pad;     /* shard 0's left halo and the uneven tail become `pad` */
    IrInstr *offset;         /* out: s32[] tile index along dim */
    int64_t shard;           /* out: local size of the input */
} Super;

/* The left halo: the last `left` elements of the left neighbour (of the last shard's valid
 * data when the dim is uneven). */
static IrInstr *
left_halo(SpmdCtx *cx, const ShdSharding *s, IrInstr *x, const Super *sp, int64_t full,
          int64_t p, IrInstr *is_last)
{
    uint32_t dim = sp->dim;
    int64_t shard = sp->shard;
    IrInstr *send;
    if (full % p == 0 || !sp->handle_last) {
        send = slice_dim(cx, x, dim, shard - sp->left, shard);
    } else {
        IrInstr *other = spmd_emit_constant_scalar(cx, IR_DT_S32, shard - sp->left);
        IrInstr *last = spmd_emit_constant_scalar(cx, IR_DT_S32,
                                                  full - shard * (p - 1) - sp->left);
        IrInstr *offs[SPMD_MAX_RANK];
        int64_t sizes[SPMD_MAX_RANK];
        IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        for (uint32_t d = 0; d < x->shape.rank; d++) {
            offs[d] = zero;
            sizes[d] = x->shape.dims[d];
        }
        offs[dim] = spmd_emit_select(cx, is_last, last, other);
        sizes[dim] = sp->left;
        send = spmd_emit_dynamic_slice(cx, x, offs, sizes);
    }
    return ring_permute(cx, s, dim, p, 1, sp->handle_last ? -1 : 0, true, send);
}

/* Shard 0's left halo and the tail past the valid data of the last shard become `pad`. */
static void
mask_first(SpmdCtx *cx, const Super *sp, int64_t full, int64_t p, IrInstr *is_last,
           IrInstr **lh, IrInstr **local)
{
    uint32_t dim = sp->dim;
    if (*lh) {
        IrInstr *is_first = spmd_emit_compare(cx, sp->offset,
                                              spmd_emit_constant_scalar(cx, IR_DT_S32, 0), "EQ");
        IrShape hs = ir_shape_clone(cx->arena, &(*lh)->shape);
        *lh = spmd_emit_select(cx, is_first, spmd_emit_broadcast(cx, sp->pad, &hs, NULL, 0), *lh);
    }
    IrShape is = ir_shape_make(cx->arena, IR_DT_S32, (*local)->shape.dims, (*local)->shape.rank);
    IrInstr *iota = spmd_emit_iota(cx, &is, dim);
    IrInstr *limit = spmd_emit_select(
        cx, is_last, spmd_emit_constant_scalar(cx, IR_DT_S32, full - (p - 1) * sp->shard),
        spmd_emit_constant_scalar(cx, IR_DT_S32, sp->shard));
    IrInstr *lt = spmd_emit_compare(cx, iota, spmd_emit_broadcast(cx, limit, &is, NULL, 0), "LT");
    IrShape vs = ir_shape_clone(cx->arena, &(*local)->shape);
    *local = spmd_emit_select(cx, lt, *local, spmd_emit_broadcast(cx, sp->pad, &vs, NULL, 0));
}

/* Uneven dim with the last shard included: the right halo lands right after the valid data,
 * which ends earlier on the last shard (a dynamic-update-slice into a padded buffer). */
static IrInstr *
place_right_uneven(SpmdCtx *cx, const Super *sp, IrInstr *x, IrInstr *rh, int64_t full,
                   int64_t p, IrInstr *is_last, int64_t rrp)
{
    uint32_t dim = sp->dim;
    IrInstr *padded = pad_high(cx, x, dim, sp->right + rrp, sp->pad);
    IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
    IrInstr *offs[SPMD_MAX_RANK];
    if (!padded)
        return NULL;
    for (uint32_t d = 0; d < padded->shape.rank; d++)
        offs[d] = zero;
    IrInstr *last = spmd_emit_constant_scalar(cx, IR_DT_S32,
                                              sp->left + (full - (p - 1) * sp->shard));
    IrInstr *other = spmd_emit_constant_scalar(cx, IR_DT_S32, sp->left + sp->shard);
    offs[dim] = spmd_emit_select(cx, is_last, last, other);
    return spmd_emit_dus(cx, padded, rh, offs);
}

/* concat(left neighbour's tail, own shard, right neighbour's head), padded for the slices. */
static SlStatus
super_shard(SpmdCtx *cx, const IrInstr *operand, Super *sp, IrInstr **out, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, operand);
    SpmdValue in;
    SlStatus st = spmd_reshard(cx, spmd_get_value(cx, operand), s, NULL, &in, err);
    if (st != SL_OK)
        return st;
    uint32_t dim = sp->dim;
    int64_t full = operand->shape.dims[dim];
    sp->shard = in.hlo->shape.dims[dim];
    int64_t p = ceil_ratio(full, sp->shard);
    bool even = full % p == 0 || !sp->handle_last;
    IrInstr *x = in.hlo, *rh = NULL, *lh = NULL;
    if (sp->right > 0)
        rh = ring_permute(cx, s, dim, p, p - 1, sp->handle_last ? -1 : p - 1, true,
                          slice_dim(cx, x, dim, 0, sp->right));
    IrShape one = ir_shape_clone(cx->arena, &operand->shape);
    one.dims[dim] = p;
    sp->offset = spmd_partition_offset(cx, cx->state, s, &one, dim);
    IrInstr *is_last = spmd_emit_compare(cx, sp->offset,
                                         spmd_emit_constant_scalar(cx, IR_DT_S32, p - 1), "EQ");
    if (sp->left > 0)
        lh = left_halo(cx, s, x, sp, full, p, is_last);
    int64_t rrp = max64(0, sp->max_start + sp->post - sp->left - sp->shard - sp->right);
    if (even) {
        if (sp->first_uses_pad)
            mask_first(cx, sp, full, p, is_last, &lh, &x);
        IrInstr *ops[3];
        uint32_t n = 0;
        if (lh)
            ops[n++] = lh;
        ops[n++] = x;
        if (rh)
            ops[n++] = rh;
        x = spmd_emit_concatenate(cx, ops, n, dim);
    } else {
        if (lh)
            x = spmd_emit_concatenate(cx, (IrInstr *[]){lh, x}, 2, dim);
        if (rh) {
            x = place_right_uneven(cx, sp, x, rh, full, p, is_last, rrp);
            rrp = 0;
        }
    }
    if (rrp > 0)
        x = pad_high(cx, x, dim, rrp, sp->pad);
    *out = x;
    return x ? SL_OK : spmd_nomem(cx, err);
}

/* ---- MultiRotate, Wrap, MultiSlice, MultiPad ---- */

/* The first tuple element's shape (the op's shape when not a tuple). */
static const IrShape *
element_shape(const IrInstr *hlo)
{
    return ir_shape_is_tuple(&hlo->shape) && hlo->shape.n_elems > 0 ? &hlo->shape.elems[0]
                                                                     : &hlo->shape;
}

/* tuple(slice(x, [starts[i], starts[i] + size))...) registered as hlo's value. */
static SlStatus
finish_slices(SpmdCtx *cx, const IrInstr *hlo, IrInstr *x, uint32_t dim, const int64_t *starts,
              uint32_t n, int64_t size, bool bufferize, SlError *err)
{
    if (bufferize && x)
        x = spmd_emit_op(cx, IR_OP_OPT_BARRIER, &x->shape, &x, 1);
    IrInstr **parts = SL_NEW_ARRAY(cx->arena, IrInstr *, n ? n : 1);
    if (!parts || !x)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++)
        parts[i] = slice_dim(cx, x, dim, starts[i], starts[i] + size);
    return spmd_finish(cx, hlo, spmd_emit_tuple(cx, parts, n), spmd_sharding_of(cx, hlo), err);
}

/* Common checks: an integer `dimension` inside the rank and a tiled operand. */
static bool
get_dim(SpmdCtx *cx, const IrInstr *hlo, uint32_t *dim)
{
    int64_t d;
    if (hlo->n_operands < 1 || !config_int(hlo, "dimension", 0, &d) || d < 0 ||
        (uint32_t)d >= hlo->operands[0]->shape.rank ||
        !shd_is_tiled(spmd_sharding_of(cx, hlo->operands[0])))
        return false;
    *dim = (uint32_t)d;
    return true;
}

/* Local size along dim and the number of shards holding data. */
static void
shard_counts(SpmdCtx *cx, const IrInstr *operand, uint32_t dim, int64_t *shard, int64_t *p)
{
    IrShape ls = spmd_local_shape(cx, &operand->shape, spmd_sharding_of(cx, operand));
    *shard = ls.dims[dim];
    *p = ceil_ratio(operand->shape.dims[dim], *shard);
}

/* The right halo must come from one shard (the last one's valid data when uneven). */
static bool
super_ok(const Super *sp, int64_t full, int64_t shard, int64_t p)
{
    if (sp->left > shard)
        return false;
    if (full % p == 0 || !sp->handle_last)
        return sp->right <= shard;
    return sp->right <= full - (p - 1) * shard;
}

static SlStatus
multi_rotate(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    uint32_t dim;
    int64_t buf, l, r, shard, p;
    if (!get_dim(cx, hlo, &dim) || !config_int(hlo, "bufferize", 0, &buf) ||
        !config_int(hlo, "left_amount", 0, &l) || !config_int(hlo, "right_amount", 0, &r) ||
        l < 0 || r < 0 || !ir_shape_is_tuple(&hlo->shape))
        return spmd_handle_default(cx, hlo, err);
    shard_counts(cx, hlo->operands[0], dim, &shard, &p);
    int64_t full = element_shape(hlo)->dims[dim];
    Super sp = {dim, r, l, true, l + r, ceil_ratio(full, p), NULL, false, NULL, 0};
    if (!super_ok(&sp, hlo->operands[0]->shape.dims[dim], shard, p))
        return spmd_handle_default(cx, hlo, err);
    IrInstr *x = NULL;
    SlStatus st = super_shard(cx, hlo->operands[0], &sp, &x, err);
    int64_t *starts = SL_NEW_ARRAY(cx->arena, int64_t, l + r + 1);
    if (st != SL_OK || !starts)
        return st != SL_OK ? st : spmd_nomem(cx, err);
    for (int64_t i = 0; i < l + r + 1; i++)
        starts[i] = (l - i) + r; /* rotate by l - i */
    return finish_slices(cx, hlo, x, dim, starts, (uint32_t)(l + r + 1), shard, buf != 0, err);
}

static SlStatus
wrap(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    uint32_t dim;
    int64_t l, r, shard, p;
    if (!get_dim(cx, hlo, &dim) || !config_int(hlo, "left_amount", 0, &l) ||
        !config_int(hlo, "right_amount", 0, &r) || l < 0 || r < 0 ||
        ir_shape_is_tuple(&hlo->shape))
        return spmd_handle_default(cx, hlo, err);
    shard_counts(cx, hlo->operands[0], dim, &shard, &p);
    int64_t post = ceil_ratio(hlo->shape.dims[dim], p);
    Super sp = {dim, l, r, true, (post - shard) * (p - 1), post, NULL, false, NULL, 0};
    if (!super_ok(&sp, hlo->operands[0]->shape.dims[dim], shard, p))
        return spmd_handle_default(cx, hlo, err);
    IrInstr *x = NULL;
    SlStatus st = super_shard(cx, hlo->operands[0], &sp, &x, err);
    if (st != SL_OK)
        return st;
    IrInstr *start = spmd_emit_binary(cx, IR_OP_MULTIPLY, sp.offset,
                                      spmd_emit_constant_scalar(cx, IR_DT_S32, post - shard));
    IrInstr *offs[SPMD_MAX_RANK];
    int64_t sizes[SPMD_MAX_RANK];
    IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
    for (uint32_t d = 0; d < x->shape.rank; d++) {
        offs[d] = d == dim ? start : zero;
        sizes[d] = d == dim ? post : x->shape.dims[d];
    }
    return spmd_finish(cx, hlo, spmd_emit_dynamic_slice(cx, x, offs, sizes),
                       spmd_sharding_of(cx, hlo), err);
}

static SlStatus
multi_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    uint32_t dim;
    int64_t buf, amount, start, limit, shard, p;
    if (!get_dim(cx, hlo, &dim) || !config_int(hlo, "bufferize", 0, &buf) ||
        !config_int(hlo, "amount", 0, &amount) ||
        !config_int(hlo, "start_indices", dim, &start) ||
        !config_int(hlo, "limit_indices", dim, &limit) || amount < 0 ||
        !ir_shape_is_tuple(&hlo->shape))
        return spmd_handle_default(cx, hlo, err);
    shard_counts(cx, hlo->operands[0], dim, &shard, &p);
    int64_t post = ceil_ratio(element_shape(hlo)->dims[dim], p);
    if (start > shard || limit < (p - 1) * shard)
        return spmd_handle_default(cx, hlo, err);
    int64_t from_right = max64(0, post + amount - shard + start);
    int64_t from_left = max64(0, (p - 1) * (shard - post) - start);
    int64_t max_start = start + from_left + (post - shard) * (p - 1);
    Super sp = {dim, from_left, from_right, false, max_start, post, NULL, false, NULL, 0};
    if (!super_ok(&sp, hlo->operands[0]->shape.dims[dim], shard, p))
        return spmd_handle_default(cx, hlo, err);
    IrInstr *x = NULL;
    SlStatus st = super_shard(cx, hlo->operands[0], &sp, &x, err);
    if (st != SL_OK)
        return st;
    int64_t extra = 0;
    if (post != shard) { /* each shard's results start at a different place */
        IrInstr *s0 = spmd_emit_binary(cx, IR_OP_MULTIPLY, sp.offset,
                                       spmd_emit_constant_scalar(cx, IR_DT_S32, post - shard));
        s0 = spmd_emit_binary(cx, IR_OP_ADD, s0,
                              spmd_emit_constant_scalar(cx, IR_DT_S32, start + from_left));
        IrInstr *offs[SPMD_MAX_RANK];
        int64_t sizes[SPMD_MAX_RANK];
        IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        for (uint32_t d = 0; d < x->shape.rank; d++) {
            offs[d] = d == dim ? s0 : zero;
            sizes[d] = d == dim ? post + amount : x->shape.dims[d];
        }
        x = spmd_emit_dynamic_slice(cx, x, offs, sizes);
    } else {
        extra = start + from_left;
    }
    int64_t *starts = SL_NEW_ARRAY(cx->arena, int64_t, amount + 1);
    if (!starts)
        return spmd_nomem(cx, err);
    for (int64_t i = 0; i <= amount; i++)
        starts[i] = i + extra;
    return finish_slices(cx, hlo, x, dim, starts, (uint32_t)(amount + 1), post, buf != 0, err);
}

static SlStatus
multi_pad(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    uint32_t dim;
    int64_t buf, amount, shard, p;
    if (hlo->n_operands != 2 || !get_dim(cx, hlo, &dim) ||
        !config_int(hlo, "bufferize", 0, &buf) || !config_int(hlo, "amt", 0, &amount) ||
        amount < 0 || !ir_shape_is_tuple(&hlo->shape))
        return spmd_handle_default(cx, hlo, err);
    shard_counts(cx, hlo->operands[0], dim, &shard, &p);
    int64_t full = hlo->operands[0]->shape.dims[dim];
    int64_t post = ceil_ratio(element_shape(hlo)->dims[dim], p);
    if (amount > shard || amount > full - (p - 1) * shard || post != shard)
        return spmd_handle_default(cx, hlo, err);
    const SpmdValue *pv = spmd_get_value(cx, hlo->operands[1]);
    Super sp = {dim, amount, 0, false, amount, post, pv ? pv->hlo : NULL, true, NULL, 0};
    if (!sp.pad || !super_ok(&sp, full, shard, p))
        return spmd_handle_default(cx, hlo, err);
    IrInstr *x = NULL;
    SlStatus st = super_shard(cx, hlo->operands[0], &sp, &x, err);
    int64_t *starts = SL_NEW_ARRAY(cx->arena, int64_t, amount + 1);
    if (st != SL_OK || !starts)
        return st != SL_OK ? st : spmd_nomem(cx, err);
    for (int64_t i = 0; i <= amount; i++)
        starts[i] = i;
    return finish_slices(cx, hlo, x, dim, starts, (uint32_t)(amount + 1), post, buf != 0, err);
}

SlStatus
spmd_handle_internal_custom_call(SpmdCtx *cx, const IrInstr *hlo, const char *target,
                                 SlError *err)
{
    if (strcmp(target, "_SPMDInternalOp_RotateRight") == 0)
        return rotate_right(cx, hlo, err);
    if (strcmp(target, "_SPMDInternalOp_MultiRotate") == 0)
        return multi_rotate(cx, hlo, err);
    if (strcmp(target, "_SPMDInternalOp_Wrap") == 0)
        return wrap(cx, hlo, err);
    if (strcmp(target, "_SPMDInternalOp_MultiSlice") == 0)
        return multi_slice(cx, hlo, err);
    if (strcmp(target, "_SPMDInternalOp_MultiPad") == 0)
        return multi_pad(cx, hlo, err);
    return SL_ERR_UNSUPPORTED;
}
