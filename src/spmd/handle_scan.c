/* handle_scan.c - partitions scan (XLA's HandleScan). Owns: the scan's input and carry
 * shardings, rebuilding the body for shard-shaped slices, and the parallel prefix over a
 * sharded scan dimension. Does not own: resharding operands or results (spmd_reshard).
 * Invariants: emits only through spmd_emit() and the builders; the source body is never
 * changed, a rebuilt body is a new output computation (the source one may still be needed
 * verbatim by other callers); anything the scan handler does not model runs replicated
 * (spmd_handle_default), as XLA's DefaultAction does. */
#include "spmd/spmd_int.h"

#include <stdio.h>
#include <string.h>

typedef struct ScanInfo {
    uint32_t dim;     /* scan dimension */
    uint32_t n_in;    /* inputs (scanned operands) == outputs */
    uint32_t n_carry; /* carries: operands n_in.., results n_in.. */
    const IrComputation *body;
} ScanInfo;

/* ---- body rebuilding ------------------------------------------------------------------- */

/* Dimension classes of a scan body (XLA's ScanBodyDimAnalysis): one union-find node per
 * (instruction, dim); elementwise ops unify their operands' dims with their own, root element
 * k is unified with parameter k, and parameter dims seed their class with the new size.
 * Unseeded classes do not depend on the partitioning and keep their size. */
typedef struct BodyDims {
    const IrComputation *body;
    SlMap pos;        /* instruction -> index in body->instrs */
    uint32_t *first;  /* by index: the node of dim 0 */
    uint32_t *parent; /* by node */
    int64_t *size;    /* by class root: the new size, -1 while unknown */
} BodyDims;

static uint32_t
uf_find(BodyDims *bd, uint32_t x)
{
    while (bd->parent[x] != x) {
        bd->parent[x] = bd->parent[bd->parent[x]];
        x = bd->parent[x];
    }
    return x;
}

static uint32_t
node_of(BodyDims *bd, const IrInstr *i, uint32_t d)
{
    uint64_t k = 0;
    sl_map_get(&bd->pos, SL_MAP_KEY(i), &k);
    return bd->first[k] + d;
}

/* Unifies every dim of `a` with the same dim of `b`; false when the ranks differ. */
static bool
unify(BodyDims *bd, const IrInstr *a, const IrInstr *b)
{
    if (a->shape.rank != b->shape.rank || !ir_shape_is_array(&a->shape) ||
        !ir_shape_is_array(&b->shape))
        return false;
    for (uint32_t d = 0; d < a->shape.rank; d++) {
        uint32_t x = uf_find(bd, node_of(bd, a, d)), y = uf_find(bd, node_of(bd, b, d));
        if (x != y)
            bd->parent[x] = y;
    }
    return true;
}

static bool
has_called_computation(const IrInstr *i)
{
    for (uint32_t k = 0; k < i->n_attrs; k++) {
        IrAttrKind kind =
            i->attrs[k].key == IR_ATTR_OTHER ? IR_AK_RAW : ir_attr_kind(i->attrs[k].key);
        if (kind == IR_AK_COMP || kind == IR_AK_COMPS)
            return true;
    }
    return false;
}

/* Whether the body's op set is modeled (parameters, the root tuple, scalar constants,
 * broadcasts of scalars, elementwise ops without called computations), unifying as it goes. */
static bool
body_unify(BodyDims *bd)
{
    const IrComputation *c = bd->body;
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        const IrInstr *i = c->instrs[k];
        if (i->op == IR_OP_PARAMETER || i == c->root)
            continue;
        if (i->op == IR_OP_CONSTANT) {
            if (!ir_shape_is_array(&i->shape) || i->shape.rank != 0)
                return false;
            continue;
        }
        if (i->op == IR_OP_BROADCAST && i->n_operands == 1 &&
            ir_shape_is_array(&i->operands[0]->shape) && i->operands[0]->shape.rank == 0)
            continue; /* its dims unify through its users */
        if (!ir_op_is_elementwise(i->op) || !ir_shape_is_array(&i->shape) ||
            has_called_computation(i))
            return false;
        for (uint32_t o = 0; o < i->n_operands; o++)
            if (!unify(bd, i, i->operands[o]))
                return false;
    }
    for (uint32_t k = 0; k < c->root->n_operands; k++)
        if (!unify(bd, c->root->operands[k], ir_computation_param(c, k)))
            return false;
    return true;
}

/* Seeds parameter dims with `params[i]`; false when two seeds of one class disagree. */
static bool
body_seed(BodyDims *bd, const IrShape *params, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const IrInstr *p = ir_computation_param(bd->body, i);
        for (uint32_t d = 0; d < p->shape.rank; d++) {
            uint32_t r = uf_find(bd, node_of(bd, p, d));
            if (bd->size[r] != -1 && bd->size[r] != params[i].dims[d])
                return false;
            bd->size[r] = params[i].dims[d];
        }
    }
    return true;
}

static IrShape
body_new_shape(SpmdCtx *cx, BodyDims *bd, const IrInstr *i)
{
    IrShape s = ir_shape_clone(cx->arena, &i->shape);
    for (uint32_t d = 0; d < s.rank && s.dims; d++) {
        int64_t v = bd->size[uf_find(bd, node_of(bd, i, d))];
        if (v != -1)
            s.dims[d] = v;
    }
    return s;
}

/* Emits the body again into a new output computation with every value at its new shape. */
static IrComputation *
body_emit(SpmdCtx *cx, BodyDims *bd)
{
    const IrComputation *c = bd->body;
    char name[256];
    snprintf(name, sizeof(name), "%s.spmd", sl_sym_cstr(c->name));
    SlSym sym = spmd_unique_name(cx, sl_str(name));
    IrComputation *oc = sym ? ir_computation_new(cx->out, sym) : NULL;
    IrInstr **map = SL_NEW_ARRAY(&cx->scratch, IrInstr *, c->n_instrs ? c->n_instrs : 1);
    if (!oc || !map)
        return NULL;
    oc->execution_thread = c->execution_thread;
    IrComputation *saved = cx->comp;
    cx->comp = oc;
    bool ok = true;
    for (uint32_t k = 0; k < c->n_instrs && ok; k++) {
        const IrInstr *i = c->instrs[k];
        IrInstr *ops[8], **opv = ops;
        if (i->n_operands > SL_COUNTOF(ops))
            opv = SL_NEW_ARRAY(&cx->scratch, IrInstr *, i->n_operands);
        ok = opv != NULL;
        for (uint32_t o = 0; ok && o < i->n_operands; o++) {
            uint64_t at = 0;
            sl_map_get(&bd->pos, SL_MAP_KEY(i->operands[o]), &at);
            opv[o] = map[at];
        }
        IrShape s;
        if (i == c->root) {
            s = (IrShape){.dtype = IR_DT_TUPLE, .n_elems = i->n_operands};
            s.elems = SL_NEW_ARRAY(cx->arena, IrShape, i->n_operands ? i->n_operands : 1);
            ok = ok && s.elems;
            for (uint32_t o = 0; ok && o < i->n_operands; o++)
                s.elems[o] = opv[o]->shape;
        } else {
            s = body_new_shape(cx, bd, i);
        }
        map[k] = ok ? spmd_emit_clone(cx, i, &s, opv, i->n_operands) : NULL;
        ok = map[k] != NULL;
        if (ok && i == c->root)
            oc->root = map[k];
    }
    cx->comp = saved;
    if (!ok || !oc->root || ir_module_add_computation(cx->out, oc) != SL_OK)
        return NULL;
    return oc;
}

/* The body for per-shard parameter shapes `params` (n of them) into *out: the source body when
 * the shapes do not change, else a rebuilt one (CloneScanBodyWithNewShapes).
 * SL_ERR_UNSUPPORTED (nothing emitted) when the body cannot be modeled; SL_ERR_NOMEM. */
static SlStatus
rebuild_body(SpmdCtx *cx, const ScanInfo *si, const IrShape *params, uint32_t n,
             IrComputation **out)
{
    const IrComputation *c = si->body;
    bool same = true;
    for (uint32_t i = 0; i < n; i++) {
        const IrInstr *p = ir_computation_param(c, i);
        same = same && p && ir_shape_equal(&p->shape, &params[i], false);
    }
    if (same) {
        *out = spmd_output_computation(cx, c);
        return *out ? SL_OK : SL_ERR_NOMEM;
    }
    const IrInstr *root = c->root;
    if (!root || root->op != IR_OP_TUPLE || root->n_operands != n ||
        ir_computation_param_count(c) != n)
        return SL_ERR_UNSUPPORTED;
    for (uint32_t i = 0; i < n; i++) {
        const IrInstr *p = ir_computation_param(c, i);
        if (!p || !ir_shape_is_array(&p->shape) || !ir_shape_is_array(&params[i]) ||
            p->shape.rank != params[i].rank)
            return SL_ERR_UNSUPPORTED;
    }
    BodyDims bd = {.body = c};
    sl_map_init(&bd.pos);
    uint32_t n_nodes = 0;
    bd.first = SL_NEW_ARRAY(&cx->scratch, uint32_t, c->n_instrs ? c->n_instrs : 1);
    bool ok = bd.first != NULL;
    for (uint32_t k = 0; ok && k < c->n_instrs; k++) {
        bd.first[k] = n_nodes;
        n_nodes += c->instrs[k]->shape.rank;
        ok = sl_map_put(&bd.pos, SL_MAP_KEY(c->instrs[k]), k);
    }
    bd.parent = ok ? SL_NEW_ARRAY(&cx->scratch, uint32_t, n_nodes ? n_nodes : 1) : NULL;
    bd.size = bd.parent ? SL_NEW_ARRAY(&cx->scratch, int64_t, n_nodes ? n_nodes : 1) : NULL;
    SlStatus st = bd.size ? SL_OK : SL_ERR_NOMEM;
    for (uint32_t x = 0; st == SL_OK && x < n_nodes; x++) {
        bd.parent[x] = x;
        bd.size[x] = -1;
    }
    if (st == SL_OK && !(body_unify(&bd) && body_seed(&bd, params, n)))
        st = SL_ERR_UNSUPPORTED;
    if (st == SL_OK && !(*out = body_emit(cx, &bd)))
        st = SL_ERR_NOMEM;
    sl_map_fini(&bd.pos);
    return st;
}

/* Per-shard body parameter shapes (ScanShardBodyParamShapes): input shard shapes with the
 * scan dim deleted, then carry shard shapes. */
static IrShape *
body_param_shapes(SpmdCtx *cx, const IrInstr *hlo, const ScanInfo *si, const ShdSharding *in_s,
                  const ShdSharding *carry_s)
{
    uint32_t n = si->n_in + si->n_carry;
    IrShape *v = SL_NEW_ARRAY(cx->arena, IrShape, n);
    for (uint32_t i = 0; v && i < n; i++) {
        const IrShape *full = &hlo->operands[i]->shape;
        IrShape l = spmd_local_shape(cx, full, i < si->n_in ? in_s : carry_s);
        if (i < si->n_in && l.dims) {
            memmove(&l.dims[si->dim], &l.dims[si->dim + 1],
                    (size_t)(l.rank - si->dim - 1) * sizeof(int64_t));
            l.rank--;
            l.layout = (SlStr){0};
            l.dim_kinds = NULL;
        }
        v[i] = l;
    }
    return v;
}

/* ---- emitting scans ---------------------------------------------------------------------- */

/* A scan like `hlo` (attributes kept, sharding dropped) over `ops` with `body`. */
static IrInstr *
emit_scan(SpmdCtx *cx, const IrInstr *hlo, const IrShape *shape, IrInstr *const *ops, uint32_t n,
          IrComputation *body)
{
    for (uint32_t k = 0; k < n; k++)
        if (!ops[k] || !body)
            return NULL;
    IrInstr *i = ir_instr_new(cx->out, IR_OP_SCAN, shape, ops, n);
    if (!i || !ir_instr_reserve_attrs(cx->out, i, hlo->n_attrs))
        return NULL;
    for (uint32_t k = 0; k < hlo->n_attrs; k++) {
        const IrAttr *sa = &hlo->attrs[k];
        if (sa->key == IR_ATTR_SHARDING)
            continue;
        IrAttr *a = ir_instr_add_attr(cx->out, i, sa->key);
        if (!a)
            return NULL;
        *a = *sa;
        if (sa->key == IR_ATTR_TO_APPLY)
            a->u.comp = body;
    }
    return spmd_emit(cx, i, sl_sym_cstr(hlo->name));
}

/* ---- the handler ------------------------------------------------------------------------- */

/* Reads the scan's structure; false when it is not the shape-preserving form the partitioned
 * paths support (output k shaped like input k, each carry of rank input rank - 1). */
static bool
scan_info(const IrInstr *hlo, ScanInfo *si)
{
    const int64_t *dims;
    int64_t nc = 0;
    si->body = ir_instr_called(hlo, IR_ATTR_TO_APPLY);
    if (!si->body || ir_instr_ints_attr(hlo, IR_ATTR_DIMENSIONS, &dims) != 1 ||
        !ir_instr_int_attr(hlo, IR_ATTR_NUM_CARRIES, &nc) || nc < 0 ||
        nc >= (int64_t)hlo->n_operands || !ir_shape_is_tuple(&hlo->shape))
        return false;
    si->dim = (uint32_t)dims[0];
    si->n_carry = (uint32_t)nc;
    si->n_in = hlo->n_operands - si->n_carry;
    if (hlo->shape.n_elems != si->n_in + si->n_carry)
        return false;
    uint32_t rank = hlo->shape.elems[0].rank;
    for (uint32_t i = 0; i < si->n_in; i++) {
        const IrShape *in = &hlo->operands[i]->shape, *out = &hlo->shape.elems[i];
        if (!ir_shape_is_array(in) || !ir_shape_equal(in, out, false) || in->rank != rank ||
            si->dim >= rank)
            return false;
    }
    for (uint32_t j = 0; j < si->n_carry; j++) {
        const IrShape *c = &hlo->operands[si->n_in + j]->shape;
        if (!ir_shape_is_array(c) || c->rank + 1 != rank)
            return false;
    }
    return true;
}

/* The common sharding of all outputs when there is one and it is tiled, else NULL. */
static const ShdSharding *
output_sharding(const ShdSharding *s, const ScanInfo *si)
{
    if (s->kind != SHD_TUPLE || s->n_leaves != si->n_in + si->n_carry)
        return NULL;
    const ShdSharding *o = shd_leaf(s, 0);
    for (uint32_t i = 1; i < si->n_in; i++)
        if (!shd_equal(shd_leaf(s, i), o))
            return NULL;
    return o && shd_is_tiled(o) ? o : NULL;
}

/* Shard-local scan: inputs in `in_s` (scan dim unsharded), carries in `in_s` without the scan
 * dim, the body rebuilt for the shard shapes. SL_ERR_UNSUPPORTED (nothing emitted) when the
 * body cannot be rebuilt. */
static SlStatus
scan_local(SpmdCtx *cx, const IrInstr *hlo, const ScanInfo *si, const ShdSharding *in_s,
           SlError *err)
{
    int64_t sd = si->dim;
    const ShdSharding *carry_s = shd_remove_dims(cx->arena, in_s, &sd, 1);
    IrShape *params = carry_s ? body_param_shapes(cx, hlo, si, in_s, carry_s) : NULL;
    if (!params)
        return spmd_nomem(cx, err);
    IrComputation *body = NULL;
    SlStatus st = rebuild_body(cx, si, params, si->n_in + si->n_carry, &body);
    if (st != SL_OK)
        return st == SL_ERR_UNSUPPORTED ? st : spmd_nomem(cx, err);
    uint32_t n = hlo->n_operands;
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, n);
    const ShdSharding **leaves = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n);
    if (!ops || !leaves)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++) {
        SpmdValue v;
        leaves[i] = i < si->n_in ? in_s : carry_s;
        st = spmd_operand(cx, hlo, i, leaves[i], &v, err);
        if (st != SL_OK)
            return st;
        ops[i] = v.hlo;
    }
    const ShdSharding *out_s = shd_tuple(cx->arena, leaves, n);
    if (!out_s)
        return spmd_nomem(cx, err);
    IrShape ls = spmd_local_shape(cx, &hlo->shape, out_s);
    IrInstr *scan = emit_scan(cx, hlo, &ls, ops, n, body);
    return spmd_finish(cx, hlo, scan, out_s, err);
}

/* ---- parallel prefix over a sharded scan dimension ------------------------------------- */

/* State of the distributed parallel prefix (XLA's TryPartitionScanAlongScanDimension). */
typedef struct Prefix {
    const ScanInfo *si;
    const ShdSharding *in_s;    /* inputs: tiled on the scan dim */
    const ShdSharding *rep_s;   /* in_s with the scan dim replicated */
    const ShdSharding *carry_s; /* rep_s without the scan dim */
    int64_t n_shards, shard_len;
    IrComputation *body;  /* for shard-shaped slices */
    const IrShape *carry; /* n_in carry shard shapes (== the slice shapes) */
    IrInstr **in, **init; /* local inputs and inits */
} Prefix;

/* The gates: an associative scan with one carry per input, whose body returns each new carry
 * as the matching output too (prefix outputs are fed back as carries), over a scan length the
 * shards divide evenly (a padded shard would fold padding into its total), with carry shards
 * shaped like the input slices. SL_ERR_UNSUPPORTED (nothing emitted) otherwise. */
static SlStatus
prefix_plan(SpmdCtx *cx, const IrInstr *hlo, Prefix *pp, SlError *err)
{
    const ScanInfo *si = pp->si;
    const IrAttr *assoc = ir_instr_find_attr(hlo, IR_ATTR_IS_ASSOCIATIVE);
    const IrInstr *root = si->body->root;
    if (!assoc || !assoc->u.b || si->n_carry != si->n_in || !root || root->op != IR_OP_TUPLE ||
        root->n_operands != si->n_in + si->n_carry)
        return SL_ERR_UNSUPPORTED;
    for (uint32_t i = 0; i < si->n_carry; i++)
        if (root->operands[i] != root->operands[si->n_in + i])
            return SL_ERR_UNSUPPORTED;
    int64_t len = hlo->operands[0]->shape.dims[si->dim], sd = si->dim;
    pp->n_shards = shd_dim_shards(pp->in_s, si->dim);
    if (len == 0 || len % pp->n_shards != 0)
        return SL_ERR_UNSUPPORTED;
    pp->shard_len = len / pp->n_shards;
    pp->rep_s = shd_partially_replicate_dims(cx->arena, pp->in_s, &sd, 1);
    pp->carry_s = !pp->rep_s || !shd_is_tiled(pp->rep_s)
                      ? pp->rep_s
                      : shd_remove_dims(cx->arena, pp->rep_s, &sd, 1);
    IrShape *params = pp->carry_s ? body_param_shapes(cx, hlo, si, pp->in_s, pp->carry_s) : NULL;
    if (!params)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < si->n_carry; i++)
        if (!ir_shape_equal(&params[si->n_in + i], &params[i], false))
            return SL_ERR_UNSUPPORTED;
    pp->carry = &params[si->n_in];
    SlStatus st = rebuild_body(cx, si, params, si->n_in + si->n_carry, &pp->body);
    return st == SL_ERR_NOMEM ? spmd_nomem(cx, err) : st;
}

/* A tuple shape over `a` (na shapes) then `b` (nb shapes), in cx->arena. */
static IrShape
tuple_of(SpmdCtx *cx, const IrShape *a, uint32_t na, const IrShape *b, uint32_t nb)
{
    IrShape t = {.dtype = IR_DT_TUPLE, .n_elems = na + nb};
    t.elems = SL_NEW_ARRAY(cx->arena, IrShape, na + nb ? na + nb : 1);
    for (uint32_t k = 0; t.elems && k < na + nb; k++)
        t.elems[k] = k < na ? a[k] : b[k - na];
    return t;
}

/* Phase 1: each shard folds its own slices into carry-shaped totals. There is no identity to
 * start from, so the boundary slice (first, or last when reversed) seeds a scan over the
 * others, whose final carries are the totals. */
static bool
prefix_totals(SpmdCtx *cx, const IrInstr *hlo, Prefix *pp, bool reverse, IrInstr **totals)
{
    const ScanInfo *si = pp->si;
    uint32_t n = si->n_in, d = si->dim;
    IrInstr **rest = SL_NEW_ARRAY(cx->arena, IrInstr *, n);
    IrShape *rest_s = SL_NEW_ARRAY(cx->arena, IrShape, n);
    if (!rest || !rest_s)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        const IrShape *ls = &pp->in[i]->shape;
        int64_t start[SPMD_MAX_RANK] = {0}, limit[SPMD_MAX_RANK];
        memcpy(limit, ls->dims, ls->rank * sizeof(int64_t));
        start[d] = reverse ? pp->shard_len - 1 : 0;
        limit[d] = start[d] + 1;
        IrInstr *edge = spmd_emit_slice(cx, pp->in[i], start, limit);
        totals[i] = spmd_emit_reshape(cx, edge, pp->carry[i].dims, pp->carry[i].rank);
        if (!totals[i])
            return false;
        if (pp->shard_len == 1)
            continue;
        start[d] = reverse ? 0 : 1;
        limit[d] = start[d] + pp->shard_len - 1;
        if (!(rest[i] = spmd_emit_slice(cx, pp->in[i], start, limit)))
            return false;
        rest_s[i] = rest[i]->shape;
    }
    if (pp->shard_len == 1)
        return true;
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, 2 * n);
    IrShape ts = tuple_of(cx, rest_s, n, pp->carry, n);
    if (!ops || !ts.elems)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        ops[i] = rest[i];
        ops[n + i] = totals[i];
    }
    IrInstr *scan = emit_scan(cx, hlo, &ts, ops, 2 * n, pp->body);
    for (uint32_t i = 0; i < n; i++)
        if (!(totals[i] = spmd_emit_gte(cx, scan, n + i)))
            return false;
    return true;
}

/* Phase 2: the totals, stacked along the scan dim in shard order (all-gathered over the scan
 * dim's devices), scanned once from the inits: prefix k is the incoming carry of shard k + 1
 * (k - 1 reversed), and the final carries are the scan's, the same on every shard. */
static SlStatus
prefix_stack_scan(SpmdCtx *cx, const IrInstr *hlo, Prefix *pp, IrInstr **totals, IrInstr **prefix,
                  SlError *err)
{
    const ScanInfo *si = pp->si;
    uint32_t n = si->n_in, d = si->dim;
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, 2 * n);
    IrShape *gs = SL_NEW_ARRAY(cx->arena, IrShape, n);
    if (!ops || !gs)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++) {
        IrShape *base = SL_NEW(cx->arena, IrShape);
        if (!base)
            return spmd_nomem(cx, err);
        *base = ir_shape_clone(cx->arena, &hlo->operands[i]->shape);
        if (base->rank && !base->dims)
            return spmd_nomem(cx, err);
        base->dims[d] = pp->n_shards;
        int64_t dims[SPMD_MAX_RANK];
        memcpy(dims, pp->in[i]->shape.dims, base->rank * sizeof(int64_t));
        dims[d] = 1;
        IrInstr *stacked = spmd_emit_reshape(cx, totals[i], dims, base->rank);
        if (!stacked)
            return spmd_nomem(cx, err);
        SpmdValue v = spmd_value(cx, stacked, base, pp->in_s), g;
        SlStatus st = spmd_reshard(cx, &v, pp->rep_s, NULL, &g, err);
        if (st != SL_OK)
            return st;
        ops[i] = g.hlo;
        gs[i] = g.hlo->shape;
        ops[n + i] = pp->init[i];
    }
    IrShape ts = tuple_of(cx, gs, n, pp->carry, n);
    *prefix = ts.elems ? emit_scan(cx, hlo, &ts, ops, 2 * n, pp->body) : NULL;
    return *prefix ? SL_OK : spmd_nomem(cx, err);
}

/* Each shard's incoming carries: the neighbour shard's inclusive prefix, or the init on the
 * boundary shard (the first; the last when reversed). */
static bool
prefix_incoming(SpmdCtx *cx, Prefix *pp, bool reverse, IrInstr *prefix, IrInstr **incoming)
{
    const ScanInfo *si = pp->si;
    uint32_t n = si->n_in, d = si->dim;
    IrInstr *ord = spmd_partition_ordinal(cx, cx->state, pp->in_s, d);
    IrInstr *zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
    IrInstr *one = spmd_emit_constant_scalar(cx, IR_DT_S32, 1);
    IrInstr *edge = reverse ? spmd_emit_constant_scalar(cx, IR_DT_S32, pp->n_shards - 1) : zero;
    IrInstr *next = spmd_emit_binary(cx, reverse ? IR_OP_ADD : IR_OP_SUBTRACT, ord, one);
    IrInstr *nb = spmd_emit_binary(cx, reverse ? IR_OP_MINIMUM : IR_OP_MAXIMUM, next, edge);
    IrInstr *is_edge = spmd_emit_compare(cx, ord, edge, "EQ");
    if (!nb || !is_edge)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        IrInstr *all = spmd_emit_gte(cx, prefix, i);
        if (!all)
            return false;
        IrInstr *starts[SPMD_MAX_RANK];
        int64_t sizes[SPMD_MAX_RANK];
        for (uint32_t k = 0; k < all->shape.rank; k++) {
            starts[k] = k == d ? nb : zero;
            sizes[k] = k == d ? 1 : all->shape.dims[k];
        }
        IrInstr *mine = spmd_emit_dynamic_slice(cx, all, starts, sizes);
        IrInstr *c = spmd_emit_reshape(cx, mine, pp->carry[i].dims, pp->carry[i].rank);
        IrShape ps = ir_shape_make(cx->arena, IR_DT_PRED, pp->carry[i].dims, pp->carry[i].rank);
        IrInstr *pred = c ? spmd_emit_broadcast(cx, is_edge, &ps, NULL, 0) : NULL;
        if (!(incoming[i] = pred ? spmd_emit_select(cx, pred, pp->init[i], c) : NULL))
            return false;
    }
    return true;
}

/* The parallel prefix: shard totals (phase 1), a scan of the gathered totals (phase 2), then
 * the shard-local scan seeded with the true incoming carries (phase 3). Its only
 * communication is one all-gather of carry-sized totals per input. */
static SlStatus
scan_prefix(SpmdCtx *cx, const IrInstr *hlo, const ScanInfo *si, const ShdSharding *in_s,
            SlError *err)
{
    Prefix pp = {.si = si, .in_s = in_s};
    SlStatus st = prefix_plan(cx, hlo, &pp, err);
    if (st != SL_OK)
        return st;
    const IrAttr *rev = ir_instr_find_attr(hlo, IR_ATTR_IS_REVERSE);
    bool reverse = rev && rev->u.b;
    uint32_t n = si->n_in;
    pp.in = SL_NEW_ARRAY(cx->arena, IrInstr *, n);
    pp.init = SL_NEW_ARRAY(cx->arena, IrInstr *, n);
    IrInstr **tmp = SL_NEW_ARRAY(cx->arena, IrInstr *, 2 * n);
    IrShape *ls = SL_NEW_ARRAY(cx->arena, IrShape, n);
    if (!pp.in || !pp.init || !tmp || !ls)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < 2 * n && st == SL_OK; i++) {
        SpmdValue v;
        st = spmd_operand(cx, hlo, i, i < n ? in_s : pp.carry_s, &v, err);
        if (st == SL_OK)
            *(i < n ? &pp.in[i] : &pp.init[i - n]) = v.hlo;
    }
    if (st != SL_OK)
        return st;
    IrInstr *prefix = NULL;
    if (!prefix_totals(cx, hlo, &pp, reverse, tmp))
        return spmd_nomem(cx, err);
    if ((st = prefix_stack_scan(cx, hlo, &pp, tmp, &prefix, err)) != SL_OK)
        return st;
    if (!prefix_incoming(cx, &pp, reverse, prefix, &tmp[n]))
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++) {
        tmp[i] = pp.in[i];
        ls[i] = pp.in[i]->shape;
    }
    IrShape fs = tuple_of(cx, ls, n, pp.carry, n);
    IrInstr *final = fs.elems ? emit_scan(cx, hlo, &fs, tmp, 2 * n, pp.body) : NULL;
    const ShdSharding **leaves = SL_NEW_ARRAY(cx->arena, const ShdSharding *, 2 * n);
    if (!final || !leaves)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < 2 * n; i++) {
        tmp[i] = i < n ? spmd_emit_gte(cx, final, i) : spmd_emit_gte(cx, prefix, i);
        leaves[i] = i < n ? in_s : pp.carry_s;
    }
    const ShdSharding *out_s = shd_tuple(cx->arena, leaves, 2 * n);
    if (!out_s)
        return spmd_nomem(cx, err);
    return spmd_finish(cx, hlo, spmd_emit_tuple(cx, tmp, 2 * n), out_s, err);
}

static void
decide(SpmdCtx *cx, const IrInstr *hlo, const char *choice, const char *why)
{
    if (!cx->trace->ops->decision)
        return;
    TraceDecision d = {hlo, "scan", choice, why, NULL, 0, NULL, 0};
    cx->trace->ops->decision(cx->trace, &d);
}

SlStatus
spmd_handle_scan(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    ScanInfo si;
    int64_t dev = 0;
    if (shd_unique_device(s, &dev) || !scan_info(hlo, &si))
        return spmd_handle_default(cx, hlo, err);
    const ShdSharding *in_s = output_sharding(s, &si);
    if (!in_s)
        return spmd_handle_default(cx, hlo, err);
    const IrShape *in0 = &hlo->operands[0]->shape;
    if (shd_dim_shards(in_s, si.dim) > 1) {
        SlStatus st = scan_prefix(cx, hlo, &si, in_s, err);
        if (st != SL_ERR_UNSUPPORTED) {
            if (st == SL_OK)
                decide(cx, hlo, "parallel-prefix",
                       "associative scan sharded on its dimension: shard totals, one gathered "
                       "prefix scan, then shard-local scans from the true carries");
            return st;
        }
        /* the scan runs shard-local with its dimension whole: move its tiles to another
         * dimension, else replicate them (as the sort handler does) */
        int64_t t = shd_find_tile_move_target(in0, in_s, si.dim, NULL, 0);
        int64_t sd = si.dim;
        in_s = t >= 0 ? shd_move_and_merge_tiles(cx->arena, in_s, si.dim, (uint32_t)t)
                      : shd_partially_replicate_dims(cx->arena, in_s, &sd, 1);
        if (!in_s)
            return spmd_nomem(cx, err);
        if (!shd_is_tiled(in_s))
            return spmd_handle_default(cx, hlo, err);
        decide(cx, hlo, t >= 0 ? "move-tiles" : "replicate-scan-dim",
               "the scan dimension is sharded: the scan runs on whole scan lengths");
    }
    SlStatus st = scan_local(cx, hlo, &si, in_s, err);
    if (st == SL_ERR_UNSUPPORTED) {
        decide(cx, hlo, "replicate", "the body has ops the shard-shape rebuild does not model");
        return spmd_handle_default(cx, hlo, err);
    }
    return st;
}
