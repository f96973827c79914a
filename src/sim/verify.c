/* verify.c - checks a partitioned module against its original: seeded random inputs, the
 * original evaluated on one device (on N when it has manually partitioned regions), the inputs
 * cut into shards by the original's entry parameter shardings (uneven shards padded with
 * zeros), the partitioned module run on N devices, and every device's output tile compared
 * with the matching part of the reference. Owns: the input generator (a splitmix64 stream, so
 * runs are reproducible), finding integer parameters that feed indices, the tolerance rule,
 * the host side of infeed and outfeed, the size limits. Does not own: evaluation (eval.c,
 * manual.c) or tile arithmetic (src/sharding, gspmd.md §A.5). */
#include "sim/sim_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sharding/shd.h"

#define SIM_SMALL_INT 4 /* integer inputs that feed no index are drawn from [-4, 4] ([0, 4]) */
#define SIM_MAX_WORK 4e9 /* estimated element operations per evaluation we agree to simulate */
#define SIM_MAX_ELEMS ((int64_t)1 << 27) /* elements of the largest array (8 bytes each) */
#define SIM_PART_WORK_FACTOR 4 /* the partitioned run may take this many times SIM_MAX_WORK */
#define SIM_MAX_PART_ELEMS ((int64_t)1 << 28) /* the largest array times the device count */

void
sim_verify_options_init(SimVerifyOptions *o)
{
    o->seed = 0;
    o->trials = 1;
    o->rtol = -1;
    o->atol = -1;
    o->max_while_trips = 0;
}

/* ---- inputs ---------------------------------------------------------------------------- */

typedef struct Rng {
    uint64_t s;
} Rng;

static uint64_t
rng_next(Rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int64_t
rng_range(Rng *r, int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* A random array of `shape`; `idx_hi` >= 0 bounds integers to [0, idx_hi]. */
static SimValue *
random_array(Rng *r, const IrShape *shape, int64_t idx_hi)
{
    SimValue *v = sim_value_new(shape);
    if (!v)
        return NULL;
    IrDtype t = shape->dtype;
    bool is_signed = ir_dtype_kind(t) == 'S';
    for (int64_t i = 0; i < v->n; i++) {
        if (t == IR_DT_F8E8M0FNU) /* block scales: powers of two near 1 */
            v->data[i].f = ldexp(1.0, (int)rng_range(r, -2, 2));
        else if (sim_is_float(t))
            v->data[i].f = sim_round(t, (double)(rng_next(r) >> 11) * 0x1p-52 - 1.0);
        else if (t == IR_DT_PRED)
            v->data[i].i = (int64_t)(rng_next(r) >> 63);
        else if (idx_hi >= 0)
            v->data[i] = sim_fix(t, (SimElem){.i = rng_range(r, 0, idx_hi)});
        else
            v->data[i].i = rng_range(r, is_signed ? -SIM_SMALL_INT : 0, SIM_SMALL_INT);
    }
    return v;
}

static SimValue *
random_value(Rng *r, const IrShape *shape, int64_t idx_hi)
{
    if (shape->dtype != IR_DT_TUPLE)
        return sim_is_array_dtype(shape->dtype) ? random_array(r, shape, idx_hi)
                                                : sim_value_new(shape);
    SimValue *t = sim_value_new_tuple(NULL, 0);
    SimValue **el = calloc(shape->n_elems + 1, sizeof *el);
    bool ok = t && el;
    for (uint32_t i = 0; ok && i < shape->n_elems; i++)
        ok = (el[i] = random_value(r, &shape->elems[i], -1)) != NULL;
    SimValue *res = ok ? sim_value_new_tuple(el, shape->n_elems) : NULL;
    for (uint32_t i = 0; el && i < shape->n_elems; i++)
        sim_value_unref(el[i]);
    free(el);
    sim_value_unref(t);
    return res;
}

/* Scatter: the smallest (operand dim - window extent) over the dims the indices address. */
static int64_t
scatter_bound(const IrInstr *u, const IrShape *a)
{
    const int64_t *sdod, *iwd, *ibd, *uwd;
    uint32_t n = ir_instr_ints_attr(u, IR_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS, &sdod);
    uint32_t ni = ir_instr_ints_attr(u, IR_ATTR_INSERTED_WINDOW_DIMS, &iwd);
    uint32_t nb = ir_instr_ints_attr(u, IR_ATTR_INPUT_BATCHING_DIMS, &ibd);
    uint32_t nu = ir_instr_ints_attr(u, IR_ATTR_UPDATE_WINDOW_DIMS, &uwd);
    const IrShape *up = &u->operands[u->n_operands - 1]->shape;
    int64_t wsize[SIM_MAX_RANK], hi = INT64_MAX;
    uint32_t p = 0;
    if (a->rank > SIM_MAX_RANK)
        return -1;
    for (uint32_t d = 0; d < a->rank; d++) {
        bool inserted = false;
        for (uint32_t i = 0; i < ni; i++)
            inserted |= iwd[i] == d;
        for (uint32_t i = 0; i < nb; i++)
            inserted |= ibd[i] == d;
        wsize[d] = 1;
        if (!inserted && p < nu && uwd[p] >= 0 && uwd[p] < up->rank)
            wsize[d] = up->dims[uwd[p++]];
    }
    for (uint32_t k = 0; k < n; k++)
        if (sdod[k] >= 0 && sdod[k] < a->rank && a->dims[sdod[k]] - wsize[sdod[k]] < hi)
            hi = a->dims[sdod[k]] - wsize[sdod[k]];
    return hi == INT64_MAX ? -1 : hi;
}

/* Largest valid start index where `u` consumes operand `j` as an index, or -1. */
static int64_t
index_bound(const IrInstr *u, uint32_t j)
{
    const IrShape *a = &u->operands[0]->shape;
    const int64_t *v, *w;
    int64_t hi = INT64_MAX;
    if (u->op == IR_OP_DYNAMIC_SLICE && j >= 1 && j - 1 < a->rank) {
        uint32_t n = ir_instr_ints_attr(u, IR_ATTR_DYNAMIC_SLICE_SIZES, &v);
        return j - 1 < n ? a->dims[j - 1] - v[j - 1] : -1;
    }
    if (u->op == IR_OP_DYNAMIC_UPDATE_SLICE && j >= 2 && j - 2 < a->rank)
        return a->dims[j - 2] - u->operands[1]->shape.dims[j - 2];
    if (u->op == IR_OP_GATHER && j == 1) {
        uint32_t n = ir_instr_ints_attr(u, IR_ATTR_START_INDEX_MAP, &v);
        uint32_t ns = ir_instr_ints_attr(u, IR_ATTR_SLICE_SIZES, &w);
        for (uint32_t k = 0; k < n; k++)
            if (v[k] >= 0 && v[k] < a->rank && v[k] < ns && a->dims[v[k]] - w[v[k]] < hi)
                hi = a->dims[v[k]] - w[v[k]];
        return hi == INT64_MAX ? -1 : hi;
    }
    if (u->op == IR_OP_SCATTER && u->n_operands % 2 == 1 && j == u->n_operands / 2) {
        return scatter_bound(u, a);
    }
    return -1;
}

static bool
is_transparent(IrOp op)
{
    return op == IR_OP_CONVERT || op == IR_OP_RESHAPE || op == IR_OP_BITCAST ||
           op == IR_OP_BROADCAST || op == IR_OP_TRANSPOSE || op == IR_OP_COPY ||
           op == IR_OP_SLICE || op == IR_OP_CONCATENATE || op == IR_OP_REVERSE ||
           op == IR_OP_CUSTOM_CALL;
}

/* For each entry instruction, the smallest index bound reached from it through value-preserving
 * ops: one backward pass over the instruction list (users come after their operands), so the
 * cost is linear in the number of operand edges. */
static SlStatus
index_bounds(const IrComputation *c, int64_t *bound, SlError *err)
{
    SlMap pos;
    sl_map_init(&pos);
    for (uint32_t i = 0; i < c->n_instrs; i++) {
        bound[i] = -1;
        if (!sl_map_put(&pos, SL_MAP_KEY(c->instrs[i]), i)) {
            sl_map_fini(&pos);
            return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
        }
    }
    for (uint32_t i = c->n_instrs; i-- > 0;) {
        const IrInstr *u = c->instrs[i];
        for (uint32_t j = 0; j < u->n_operands; j++) {
            uint64_t at;
            if (!sl_map_get(&pos, SL_MAP_KEY(u->operands[j]), &at))
                continue;
            int64_t b = is_transparent(u->op) ? bound[i] : index_bound(u, j);
            if (b >= 0 && (bound[at] < 0 || b < bound[at]))
                bound[at] = b;
        }
    }
    sl_map_fini(&pos);
    return SL_OK;
}

/* Element operations of one instruction: its output, times the contraction for dot and
 * convolution (less the holes of base dilation, which the kernel skips), or its input for
 * reductions. Loops count once (trip counts are unknown). */
static double
instr_work(const IrInstr *ins, int64_t *max_elems)
{
    double work = 0;
    for (uint32_t L = 0; L < ir_shape_leaf_count(&ins->shape); L++) {
        const IrShape *s = ir_shape_leaf(&ins->shape, L);
        int64_t n = ir_shape_is_array(s) ? ir_shape_elem_count(s) : 0;
        *max_elems = n > *max_elems ? n : *max_elems;
        work += (double)n;
    }
    if (ins->op == IR_OP_DOT && ins->n_operands == 2) {
        const int64_t *cd;
        uint32_t n = ir_instr_ints_attr(ins, IR_ATTR_LHS_CONTRACTING_DIMS, &cd);
        for (uint32_t i = 0; i < n; i++)
            if (cd[i] >= 0 && cd[i] < ins->operands[0]->shape.rank)
                work *= (double)ins->operands[0]->shape.dims[cd[i]];
    } else if (ins->op == IR_OP_CONVOLUTION && ins->n_operands == 2) {
        const IrShape *k = &ins->operands[1]->shape;
        double kn = (double)ir_shape_elem_count(k), of = 1;
        const IrAttr *lab = ir_instr_find_attr(ins, IR_ATTR_DIM_LABELS);
        for (size_t i = 0, pos = 0; lab && i < lab->u.text.len && lab->u.text.ptr[i] != '-'; i++) {
            if (lab->u.text.ptr[i] == '_') {
                pos = 0;
                continue;
            }
            if (lab->u.text.ptr[i] == 'o' && pos < k->rank)
                of = (double)k->dims[pos];
            pos++;
        }
        /* with base dilation only one window position in lhs_dilate lands on an element */
        const IrAttr *w = ir_instr_find_attr(ins, IR_ATTR_WINDOW);
        double dil = 1;
        for (uint32_t i = 0; w && i < w->u.window.n; i++)
            dil *= w->u.window.v[i].lhs_dilate > 1 ? (double)w->u.window.v[i].lhs_dilate : 1;
        work *= kn / (of > 0 ? of : 1) / dil;
    } else {
        for (uint32_t j = 0; j < ins->n_operands; j++)
            if (ir_shape_is_array(&ins->operands[j]->shape))
                work += (double)ir_shape_elem_count(&ins->operands[j]->shape);
    }
    return work;
}

/* Why the outputs of a module using `ins` cannot be compared, or NULL: random numbers differ
 * between one device and N by design (host transfers are simulated: see the host below). The
 * device's id has no single-device meaning outside a manual region (`manual`: the reference
 * runs on N devices, each with its own id): one device's value is not another's tile. */
static const char *
not_comparable(const IrInstr *ins, bool manual)
{
    switch (ins->op) {
    case IR_OP_RNG:
    case IR_OP_RNG_BIT_GENERATOR:
    case IR_OP_RNG_GET_AND_UPDATE_STATE: return "random numbers differ between one device and N";
    case IR_OP_PARTITION_ID:
    case IR_OP_REPLICA_ID:
        return manual ? NULL : "outside a manual region the device's id differs between one device and N";
    default: return NULL;
    }
}

/* Whether any leaf of `i` (under its sharding) is, or is not, unreduced. */
static bool
any_leaf(const IrInstr *i, bool unreduced)
{
    const ShdSharding *s = ir_instr_sharding(i);
    uint32_t n = ir_shape_leaf_count(&i->shape);
    for (uint32_t L = 0; L < (n ? n : 1); L++)
        if (shd_is_unreduced(s ? shd_leaf(s, L) : NULL) == unreduced)
            return true;
    return false;
}

static bool module_is_manual(const IrModule *m);

/* The root of a reduce's or reduce-window's reducer, else NULL. */
static const IrInstr *
reducer_root(const IrInstr *ins)
{
    if (ins->op != IR_OP_REDUCE && ins->op != IR_OP_REDUCE_WINDOW)
        return NULL;
    const IrComputation *c = ir_instr_called(ins, IR_ATTR_TO_APPLY);
    return c && c->n_instrs ? (c->root ? c->root : c->instrs[c->n_instrs - 1]) : NULL;
}

/* A reduce or reduce-window whose reducer's root is one of its parameters ("keep the last"):
 * XLA leaves the order of a reduction open, so one device and N may pick different
 * elements. */
static bool
order_dependent_reducer(const IrInstr *ins)
{
    const IrInstr *root = reducer_root(ins);
    return root && root->op == IR_OP_PARAMETER;
}

/* Whether the init `v` (of type `t`) of a reduction by `op` gives the same result applied once
 * as once per shard: any value for the idempotent maximum, minimum, and, or; the identity for
 * add, or and multiply. */
static bool
repeatable_init(IrOp op, IrDtype t, SimElem v)
{
    bool fl = ir_dtype_kind(t) == 'F';
    switch (op) {
    case IR_OP_ADD:
    case IR_OP_XOR: return fl ? v.f == 0 : v.i == 0;
    case IR_OP_MULTIPLY: return fl ? v.f == 1 : v.i == 1;
    default: return true;
    }
}

/* A reduce or reduce-window of one input whose init is a constant that is not the identity of
 * its add, xor or multiply reducer: XLA's semantics require the identity and leave the result
 * open otherwise, and a partitioned reduce applies the init once per shard (harmless only for
 * idempotent reducers). */
static bool
non_identity_init(const IrInstr *ins)
{
    const IrInstr *root = reducer_root(ins);
    if (!root || ins->n_operands != 2)
        return false;
    const IrInstr *init = ins->operands[1];
    if (root->n_operands != 2 || root->operands[0]->op != IR_OP_PARAMETER ||
        root->operands[1]->op != IR_OP_PARAMETER || init->op != IR_OP_CONSTANT ||
        !ir_shape_is_array(&init->shape) || init->shape.rank != 0)
        return false;
    SimValue *v = NULL;
    SlError e = {0};
    if (sim_literal_parse(&init->shape, init->literal, &v, &e) != SL_OK || !v)
        return false;
    bool id = v->n != 1 || repeatable_init(root->op, init->shape.dtype, v->data[0]);
    sim_value_unref(v);
    return !id;
}

static SlStatus
check_comparable(const IrModule *m, SlError *err)
{
    /* An unreduced input is a sum of per-device partial values; an output not annotated
     * unreduced that derives from it has no meaning a single device can reproduce (the
     * partitioner leaves partial values partial). */
    const IrComputation *e = m->entry;
    const IrInstr *root = e && e->n_instrs ? (e->root ? e->root : e->instrs[e->n_instrs - 1])
                                           : NULL;
    for (uint32_t k = 0; root && k < e->n_params; k++) {
        const IrInstr *p = e->params[k];
        if (p && any_leaf(p, true) && any_leaf(root, false))
            return sl_fail(err, SL_ERR_UNSUPPORTED, (SlSrcLoc){NULL, p->src_line, p->src_col},
                           "outputs are not comparable: parameter %%%s is unreduced (partial "
                           "values per device) and an output is not annotated unreduced",
                           sl_sym_cstr(p->name));
    }
    bool manual = module_is_manual(m);
    for (uint32_t c = 0; c < m->n_comps; c++) {
        for (uint32_t i = 0; i < m->comps[c]->n_instrs; i++) {
            const IrInstr *ins = m->comps[c]->instrs[i];
            const char *why = not_comparable(ins, manual);
            if (!why && order_dependent_reducer(ins))
                why = "its reducer returns one of its operands, so the result depends on the "
                      "order of the reduction, which partitioning changes";
            if (!why && non_identity_init(ins))
                why = "its init value is not the identity of its reducer, which XLA requires: "
                      "the result is undefined, and partitioning applies the init once per "
                      "shard";
            SlSrcLoc loc = {0};
            loc.line = ins->src_line;
            loc.col = ins->src_col;
            if (!why)
                continue;
            return sl_fail(err, SL_ERR_UNSUPPORTED, loc,
                           "outputs are not comparable: %s %%%s: %s", ir_op_name(ins->op),
                           sl_sym_cstr(ins->name), why);
        }
    }
    return SL_OK;
}

/* Refuses modules whose evaluation would take minutes or gigabytes, naming the estimate. The
 * partitioned module runs every instruction on each of n_dev devices at once, so its work and
 * its largest array count n_dev times (parameters and constants excepted: devices share them). */
static SlStatus
check_size(const IrModule *m, const char *which, int64_t n_dev, SlError *err)
{
    double work = 0;
    int64_t max_elems = 0;
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c]->n_instrs; i++) {
            const IrInstr *ins = m->comps[c]->instrs[i];
            int64_t e = 0;
            work += instr_work(ins, &e);
            if (n_dev == 1 || (ins->op != IR_OP_PARAMETER && ins->op != IR_OP_CONSTANT))
                max_elems = e > max_elems ? e : max_elems;
        }
    double dev_work = work * (double)n_dev, dev_elems = (double)max_elems * (double)n_dev;
    double work_limit = SIM_MAX_WORK * (n_dev > 1 ? SIM_PART_WORK_FACTOR : 1);
    int64_t elems_limit = n_dev > 1 ? SIM_MAX_PART_ELEMS : SIM_MAX_ELEMS;
    if (dev_work <= work_limit && dev_elems <= (double)elems_limit)
        return SL_OK;
    return sl_fail(err, SL_ERR_UNSUPPORTED, (SlSrcLoc){0},
                   "the %s module is too large to simulate: about %.3g element operations and "
                   "an array of %.3g elements over its %" PRId64 " device%s (limits %.3g and "
                   "%" PRId64 ")",
                   which, dev_work, dev_elems, n_dev, n_dev == 1 ? "" : "s", work_limit,
                   elems_limit);
}

/* ---- cutting inputs and reading outputs ------------------------------------------------------ */

/* A leaf every device holds whole ({manual}: each device's own whole value). */
static bool
is_whole(const ShdSharding *s)
{
    return !s || s->kind == SHD_REPLICATED || s->kind == SHD_MAXIMAL || s->kind == SHD_UNKNOWN ||
           s->kind == SHD_UNREDUCED || s->kind == SHD_MANUAL;
}

/* The devices whose values sum to device `dev`'s part of an unreduced leaf (partial sums the
 * partitioner leaves unreduced on purpose): every device for {unreduced}, else the devices of
 * `dev`'s tile along the unreduced subgroup dim. Writes them to `out` (n_dev entries of room)
 * and returns how many; 0 when the leaf is not unreduced. Partial values combine by addition:
 * the sharding does not keep the reduction kind Shardy's text may name (`unreduced=max{..}`). */
static int64_t
unreduced_group(const ShdSharding *s, int64_t dev, int64_t n_dev, int64_t *out)
{
    if (s && s->kind == SHD_UNREDUCED) {
        for (int64_t d = 0; d < n_dev; d++)
            out[d] = d;
        return n_dev;
    }
    if (!s || s->kind != SHD_TILED)
        return 0;
    int64_t pos = -1, count = shd_device_count(s);
    for (int64_t q = 0; q < count && pos < 0; q++)
        if (s->devices[q] == dev)
            pos = q;
    for (uint32_t k = 0; pos >= 0 && k < s->n_subgroups; k++) {
        if (s->subgroups[k] != SHD_SUB_UNREDUCED)
            continue;
        uint32_t u = s->n_tile_dims - s->n_subgroups + k;
        int64_t stride = 1;
        for (uint32_t t = u + 1; t < s->n_tile_dims; t++)
            stride *= s->tile_dims[t];
        int64_t base = pos - (pos / stride) % s->tile_dims[u] * stride;
        for (int64_t j = 0; j < s->tile_dims[u] && j < n_dev; j++)
            out[j] = s->devices[base + j * stride];
        return s->tile_dims[u] < n_dev ? s->tile_dims[u] : n_dev;
    }
    return 0;
}

/* Device `dev`'s shard of `full` with the local shape `local`. An unreduced leaf is a sum of
 * partial values: the first device of each unreduced group holds the value, the others zeros. */
static SlStatus
cut_leaf(const SimValue *full, const IrShape *fshape, const ShdSharding *s, const IrShape *local,
         int64_t dev, SimValue **out, SlError *err)
{
    SlSrcLoc nowhere = {0};
    int64_t first = -1;
    if (s && (s->kind == SHD_UNREDUCED || s->kind == SHD_TILED)) {
        int64_t *group = calloc((size_t)shd_device_count(s) + (size_t)dev + 1, sizeof *group);
        if (!group)
            return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
        if (unreduced_group(s, dev, s->kind == SHD_UNREDUCED ? dev + 1 : shd_device_count(s),
                            group) > 0)
            first = group[0];
        free(group);
    }
    if (first >= 0 && first != dev) {
        if (local->dtype != full->dtype || local->rank != full->rank)
            return sl_fail(err, SL_ERR_INVALID, nowhere, "partitioned parameter shape does not "
                           "match the parameter's sharding");
        if (!(*out = sim_value_new(local)))
            return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
        return SL_OK;
    }
    bool same = local->rank == full->rank && local->dtype == full->dtype;
    for (uint32_t d = 0; same && d < local->rank; d++)
        same = local->dims[d] == full->dims[d];
    if (is_whole(s) && same) {
        *out = sim_value_ref((SimValue *)full);
        return SL_OK;
    }
    if (is_whole(s) || local->rank != full->rank || local->dtype != full->dtype)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "partitioned parameter shape does not "
                       "match the parameter's sharding");
    int64_t off[SIM_MAX_RANK], ext[SIM_MAX_RANK], fs[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    for (uint32_t d = 0; d < full->rank; d++) {
        off[d] = shd_tile_offset(s, fshape, d, dev);
        ext[d] = shd_tile_extent(s, fshape, d, dev);
        if (ext[d] > local->dims[d])
            return sl_fail(err, SL_ERR_INVALID, nowhere, "partitioned parameter is smaller "
                           "than its shard in dim %u", d);
    }
    sim_strides(full->dims, full->rank, fs);
    SimValue *v = sim_value_new(local);
    if (!v)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    for (int64_t i = 0; i < v->n; i++, sim_idx_next(idx, v->dims, v->rank)) {
        int64_t at = 0;
        bool in = true;
        for (uint32_t d = 0; d < v->rank && in; d++) {
            in = idx[d] < ext[d];
            at += (off[d] + idx[d]) * fs[d];
        }
        if (in)
            v->data[i] = full->data[at];
    }
    *out = v;
    return SL_OK;
}

static void
leaves_of(SimValue *v, SimValue **out, uint32_t *n, uint32_t cap)
{
    if (v->dtype != IR_DT_TUPLE) {
        if (*n < cap)
            out[*n] = v;
        (*n)++;
        return;
    }
    for (uint32_t i = 0; i < v->n_elems; i++)
        leaves_of(v->elems[i], out, n, cap);
}

/* Builds `local`-shaped device args from a full (possibly tuple) value, leaf by leaf. */
static SlStatus
cut_value(SimValue *full, const IrShape *fshape, const ShdSharding *s, uint32_t *leaf,
          const IrShape *local, int64_t dev, SimValue **out, SlError *err)
{
    if (fshape->dtype != IR_DT_TUPLE) {
        const ShdSharding *ls = s ? shd_leaf(s, (*leaf)++) : NULL;
        return cut_leaf(full, fshape, ls, local, dev, out, err);
    }
    if (local->dtype != IR_DT_TUPLE || local->n_elems != fshape->n_elems)
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "tuple parameter shapes differ");
    SimValue **el = calloc(fshape->n_elems + 1, sizeof *el);
    SlStatus st = el ? SL_OK : sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    for (uint32_t i = 0; !st && i < fshape->n_elems; i++)
        st = cut_value(full->elems[i], &fshape->elems[i], s, leaf, &local->elems[i], dev, &el[i],
                       err);
    if (!st && !(*out = sim_value_new_tuple(el, fshape->n_elems)))
        st = sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    for (uint32_t i = 0; el && i < fshape->n_elems; i++)
        sim_value_unref(el[i]);
    free(el);
    return st;
}

/* ---- comparing ---------------------------------------------------------------------------- */

typedef struct Cmp {
    const SimVerifyOptions *o;
    SimVerifyReport *rep;
    uint32_t trial, output;
    IrDtype narrow; /* the narrowest float type the original computes in (IR_DT_F64 if none) */
} Cmp;

/* Float outputs are compared at the precision of the narrowest float type the module computes
 * in: a bf16 sum converted to f32 carries bf16 rounding, in an order partitioning may change. */
static IrDtype
narrowest_float(const IrModule *m)
{
    IrDtype n = IR_DT_F64;
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c]->n_instrs; i++) {
            const IrInstr *ins = m->comps[c]->instrs[i];
            IrDtype t = ins->shape.dtype;
            if (ins->op == IR_OP_PARAMETER || ins->op == IR_OP_CONSTANT || !sim_is_float(t))
                continue;
            if (sim_is_f8(t) || ((t == IR_DT_BF16 || t == IR_DT_F16) && !sim_is_f8(n)) ||
                (t == IR_DT_F32 && n == IR_DT_F64))
                n = t;
        }
    return n;
}

static void
tolerances(const Cmp *c, IrDtype t, double *rtol, double *atol)
{
    double r = 1e-4, a = 1e-4;
    if (sim_is_float(t) && c->narrow != IR_DT_F64 && c->narrow != IR_DT_F32)
        t = c->narrow;
    if (t == IR_DT_BF16 || t == IR_DT_F16)
        r = a = 2e-2;
    else if (sim_is_f8(t))
        r = a = 0.25;
    else if (t == IR_DT_F64)
        r = a = 1e-9;
    *rtol = c->o->rtol >= 0 ? c->o->rtol : r;
    *atol = c->o->atol >= 0 ? c->o->atol : a;
}

/* Compares one element; records the first mismatch. */
static inline void
cmp_elem(Cmp *c, bool is_float, SimElem want, SimElem got, int64_t index, int64_t dev,
         double scale, double rtol, double atol)
{
    SimVerifyReport *r = c->rep;
    double w = is_float ? want.f : (double)want.i, g = is_float ? got.f : (double)got.i;
    double e = 0;
    bool same;
    if (!is_float) {
        same = want.i == got.i;
        e = fabs(w - g);
    } else if (isnan(w) || isnan(g)) {
        same = isnan(w) && isnan(g);
        e = same ? 0 : INFINITY;
    } else if (isinf(w) || isinf(g)) {
        same = w == g;
        e = same ? 0 : INFINITY;
    } else {
        e = fabs(w - g);
        same = e <= atol + rtol * (fabs(w) > scale ? fabs(w) : scale);
    }
    if (e > r->max_abs_err)
        r->max_abs_err = e;
    if (same || !r->ok)
        return;
    r->ok = false;
    r->bad_trial = c->trial;
    r->bad_output = c->output;
    r->bad_index = index;
    r->bad_device = dev;
    r->want = w;
    r->got = g;
    r->err = e;
}

/* The largest finite magnitude of a float array (0 for integers): rounding errors of long sums
 * scale with it, so it widens the tolerance of every element of the output. */
static double
ref_scale(const SimValue *ref)
{
    double scale = 0;
    for (int64_t i = 0; sim_is_float(ref->dtype) && i < ref->n; i++)
        if (isfinite(ref->data[i].f) && fabs(ref->data[i].f) > scale)
            scale = fabs(ref->data[i].f);
    return scale;
}

/* Device `dev`'s output leaf against the reference leaf under sharding `s`; `scale` is
 * ref_scale(ref). Walks the tile row by row along the minor dim. */
static SlStatus
cmp_leaf(Cmp *c, const SimValue *ref, const IrShape *fshape, const ShdSharding *s,
         const SimValue *got, int64_t dev, double scale, SlError *err)
{
    SlSrcLoc nowhere = {0};
    if (s && s->kind == SHD_MAXIMAL && s->device != dev)
        return SL_OK;
    if (got->dtype != ref->dtype || got->rank != ref->rank)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "output %u: partitioned type or rank "
                       "differs from the original", c->output);
    int64_t off[SIM_MAX_RANK] = {0}, ext[SIM_MAX_RANK], rs[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    for (uint32_t d = 0; d < ref->rank; d++) {
        ext[d] = is_whole(s) ? ref->dims[d] : shd_tile_extent(s, fshape, d, dev);
        off[d] = is_whole(s) ? 0 : shd_tile_offset(s, fshape, d, dev);
        if (ext[d] > got->dims[d])
            return sl_fail(err, SL_ERR_INVALID, nowhere, "output %u: device %" PRId64 " holds "
                           "%" PRId64 " elements in dim %u, its tile needs %" PRId64,
                           c->output, dev, got->dims[d], d, ext[d]);
    }
    if (got->n == 0)
        return SL_OK;
    sim_strides(ref->dims, ref->rank, rs);
    double rtol, atol;
    tolerances(c, ref->dtype, &rtol, &atol);
    bool is_float = sim_is_float(ref->dtype);
    uint32_t outer = ref->rank ? ref->rank - 1 : 0;
    int64_t row = ref->rank ? got->dims[outer] : 1, n_in = ref->rank ? ext[outer] : 1;
    int64_t o_in = ref->rank ? off[outer] : 0;
    for (int64_t i = 0; i < got->n; i += row, sim_idx_next(idx, got->dims, outer)) {
        int64_t at = o_in;
        bool in = true;
        for (uint32_t d = 0; d < outer && in; d++) {
            in = idx[d] < ext[d];
            at += (off[d] + idx[d]) * rs[d];
        }
        for (int64_t j = 0; in && j < n_in; j++)
            cmp_elem(c, is_float, ref->data[at + j], got->data[i + j], at + j, dev, scale, rtol,
                     atol);
    }
    return SL_OK;
}

/* The sum of leaf `L` over `group`'s devices, shaped like device group[0]'s leaf. */
static SimValue *
sum_leaf(SimValue *const *outs, const int64_t *group, int64_t n, uint32_t L, uint32_t n_leaves)
{
    SimValue **gl = calloc((size_t)n_leaves + 1, sizeof *gl), *sum = NULL;
    for (int64_t k = 0; gl && k < n; k++) {
        uint32_t got = 0;
        leaves_of(outs[group[k]], gl, &got, n_leaves);
        const SimValue *v = got == n_leaves ? gl[L] : NULL;
        if (!v || (sum && (v->n != sum->n || v->dtype != sum->dtype))) {
            sim_value_unref(sum);
            sum = NULL;
            break;
        }
        if (!sum && !(sum = sim_value_new_array(v->dtype, v->dims, v->rank)))
            break;
        bool is_float = sim_is_float(v->dtype);
        for (int64_t i = 0; i < v->n; i++) { /* rounded per add, as an all-reduce would */
            if (is_float)
                sum->data[i].f += v->data[i].f;
            else
                sum->data[i].i += v->data[i].i;
            sum->data[i] = sim_fix(v->dtype, sum->data[i]);
        }
    }
    free(gl);
    return sum;
}

/* Whether leaf `L` is the same array, bit for bit, on every device of `group`. */
static bool
leaf_identical(SimValue *const *outs, const int64_t *group, int64_t n, uint32_t L,
               uint32_t n_leaves)
{
    SimValue **gl = calloc((size_t)n_leaves + 1, sizeof *gl);
    const SimValue *first = NULL;
    bool same = gl != NULL;
    for (int64_t k = 0; same && k < n; k++) {
        uint32_t got = 0;
        leaves_of(outs[group[k]], gl, &got, n_leaves);
        const SimValue *v = got == n_leaves ? gl[L] : NULL;
        if (!v || v->dtype == IR_DT_TUPLE)
            same = false;
        else if (!first)
            first = v;
        else
            same = v->n == first->n && v->dtype == first->dtype &&
                   (v->n == 0 || memcmp(v->data, first->data, (size_t)v->n * sizeof(SimElem)) == 0);
    }
    free(gl);
    return same;
}

/* Compares every device's result with the reference (refs[d], or refs[0] when n_ref is 1),
 * leaf by leaf (tuples in pre-order). An unreduced leaf is compared as the sum of its partial
 * values over its unreduced group, unless every device of the group holds the same array:
 * XLA partitions an {unreduced} instruction as replicated and skips only the all-reduce of
 * the reduction it tags, so where no reduction is pending (an elementwise op of replicated
 * data, a dot whose operands are gathered first) every device holds the whole value, and
 * that is compared as it is. (Partials of a real reduction of random inputs are never equal
 * on every device.) */
static SlStatus
cmp_outputs(Cmp *c, const IrInstr *root, SimValue *const *refs, int64_t n_ref,
            SimValue *const *outs, int64_t n_dev, SlError *err)
{
    const ShdSharding *s = ir_instr_sharding(root);
    uint32_t n_leaves = ir_shape_leaf_count(&root->shape), n = 0;
    SimValue **rl = calloc((size_t)n_leaves + 1, sizeof *rl), **gl = calloc((size_t)n_leaves + 1,
                                                                             sizeof *gl);
    double *scale = calloc((size_t)n_leaves + 1, sizeof *scale);
    int64_t *group = calloc((size_t)n_dev + 1, sizeof *group);
    SlStatus st = rl && gl && scale && group ? SL_OK
                                    : sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    c->rep->n_outputs = n_leaves;
    for (int64_t d = 0; !st && d < n_dev; d++) {
        n = 0;
        leaves_of(refs[n_ref > 1 ? d : 0], rl, &n, n_leaves);
        if (n != n_leaves)
            st = sl_fail(err, SL_ERR_INTERNAL, (SlSrcLoc){0}, "reference has %u leaves, want %u",
                         n, n_leaves);
        n = 0;
        if (!st)
            leaves_of(outs[d], gl, &n, n_leaves);
        if (!st && n != n_leaves)
            st = sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "the partitioned module returns %u "
                         "arrays, the original %u", n, n_leaves);
        for (uint32_t L = 0; !st && L < n_leaves; L++) {
            c->output = L;
            if (d == 0 || n_ref > 1)
                scale[L] = ref_scale(rl[L]);
            const ShdSharding *ls = s ? shd_leaf(s, L) : NULL;
            int64_t n_group = group ? unreduced_group(ls, d, n_dev, group) : 0;
            if (n_group > 1 && leaf_identical(outs, group, n_group, L, n_leaves))
                n_group = 0;
            SimValue *sum = n_group ? sum_leaf(outs, group, n_group, L, n_leaves) : NULL;
            if (n_group && !sum)
                st = sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "output %u: the unreduced "
                             "partial values of device %" PRId64 "'s group differ in shape",
                             L, d);
            if (!st)
                st = cmp_leaf(c, rl[L], ir_shape_leaf(&root->shape, L), ls, sum ? sum : gl[L], d,
                              scale[L], err);
            sim_value_unref(sum);
        }
    }
    free(rl);
    free(gl);
    free(scale);
    free(group);
    return st;
}

/* ---- manual regions -------------------------------------------------------------------------
 * A module with manually partitioned parts (manual shardings, SPMDFullToShardShape, or
 * collectives, which only such regions hold before partitioning) has no single-device meaning:
 * its reference runs on N devices too (SimEnv `manual`). Inputs with a manual leaf get one
 * random value per manual group; the partitioned module's device d gets its tile of reference
 * device d's value, and its outputs are compared with reference device d's. */

static bool
sharding_is_manual(const ShdSharding *s, const IrShape *shape)
{
    if (!s)
        return false;
    uint32_t n = ir_shape_leaf_count(shape);
    for (uint32_t L = 0; L < (n ? n : 1); L++) {
        const ShdSharding *l = shd_leaf(s, L);
        if (l && (l->kind == SHD_MANUAL || (l->kind == SHD_TILED && shd_is_manual_subgroup(l))))
            return true;
    }
    return false;
}

static bool
module_is_manual(const IrModule *m)
{
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c]->n_instrs; i++) {
            const IrInstr *ins = m->comps[c]->instrs[i];
            const IrAttr *t = ins->op == IR_OP_CUSTOM_CALL
                                  ? ir_instr_find_attr(ins, IR_ATTR_CUSTOM_CALL_TARGET)
                                  : NULL;
            if (sim_is_collective(ins->op) ||
                sharding_is_manual(ir_instr_sharding(ins), &ins->shape) ||
                (t && (sl_str_eq_cstr(t->u.text, "\"SPMDFullToShardShape\"") ||
                       sl_str_eq_cstr(t->u.text, "\"SPMDShardToFullShape\""))))
                return true;
        }
    return false;
}

/* Device `dev`'s reference value of `shape`: leaf L drawn from a stream seeded by (base, L, the
 * device's manual group under the leaf's sharding), so the devices of one group agree. */
static SimValue *
manual_value(uint64_t base, const IrShape *shape, const ShdSharding *s, uint32_t *leaf,
             int64_t dev, int64_t idx_hi)
{
    if (shape->dtype != IR_DT_TUPLE) {
        uint32_t L = (*leaf)++;
        int64_t g = sim_manual_group(s ? shd_leaf(s, L) : NULL, dev);
        Rng r = {base + 0x9e3779b97f4a7c15u * (L + 1) + 0xbf58476d1ce4e5b9u * (uint64_t)(g + 1)};
        return random_value(&r, shape, idx_hi);
    }
    SimValue **el = calloc(shape->n_elems + 1, sizeof *el);
    bool ok = el != NULL;
    for (uint32_t i = 0; ok && i < shape->n_elems; i++)
        ok = (el[i] = manual_value(base, &shape->elems[i], s, leaf, dev, -1)) != NULL;
    SimValue *res = ok ? sim_value_new_tuple(el, shape->n_elems) : NULL;
    for (uint32_t i = 0; el && i < shape->n_elems; i++)
        sim_value_unref(el[i]);
    free(el);
    return res;
}

/* ---- the host: infeed and outfeed ------------------------------------------------------------
 * The reference run gets one seeded global value per executed infeed (per manual group when
 * the infeed's sharding is manual) and logs every outfeed. In the partitioned run each device
 * takes, in its own program order, the transfers it participates in (all of them, except those
 * whose every data leaf is maximal on another device): an infeed hands it its tile of the
 * global value by the original infeed's sharding (uneven tiles padded with zeros up to the
 * local shape, a leaf held by another device as `()`), and outfeed data is compared with its
 * tile of the logged value like an output. */

typedef struct Feed {
    const IrInstr *ins;  /* of the original module */
    SimValue **vals;     /* the global data, per reference lane */
    uint32_t first_leaf; /* outfeeds: output number of its first data leaf */
} Feed;

typedef struct Host {
    SimEnv env;
    uint64_t seed;
    int64_t n_ref;             /* lanes of the reference run */
    SlVec in, out;             /* Feed, filled by the reference run */
    uint32_t out_leaves;       /* data leaves of every logged outfeed */
    int64_t *ref_in, *ref_out; /* reference run: per lane, transfers so far */
    int64_t *in_cur, *out_cur; /* partitioned run: per device, the next Feed to consider */
    Cmp *cmp;
    uint32_t n_root;           /* array leaves of the root: outfeed leaves are numbered after */
} Host;

static const IrShape *
feed_shape(const IrInstr *ins)
{
    if (ins->op == IR_OP_INFEED)
        return ins->shape.dtype == IR_DT_TUPLE && ins->shape.n_elems ? &ins->shape.elems[0] : NULL;
    return ins->n_operands ? &ins->operands[0]->shape : NULL;
}

/* Whether `dev` takes part in transfer `f` (see above). */
static bool
feed_has(const Feed *f, int64_t dev)
{
    const ShdSharding *s = ir_instr_sharding(f->ins);
    uint32_t n = ir_shape_leaf_count(feed_shape(f->ins));
    if (!s || n == 0)
        return true;
    for (uint32_t L = 0; L < n; L++) {
        const ShdSharding *ls = shd_leaf(s, L);
        if (!ls || ls->kind != SHD_MAXIMAL || ls->device == dev)
            return true;
    }
    return false;
}

/* The next transfer in `v` for `dev` at or after *cur, or NULL. */
static const Feed *
feed_next(const SlVec *v, int64_t *cur, int64_t dev)
{
    while ((size_t)*cur < v->len) {
        const Feed *f = &SL_VEC_AT(v, Feed, (size_t)(*cur)++);
        if (feed_has(f, dev))
            return f;
    }
    return NULL;
}

static bool
held_elsewhere(const ShdSharding *s, int64_t dev)
{
    return s && s->kind == SHD_MAXIMAL && s->device != dev;
}

static bool
is_empty_tuple(const IrShape *s)
{
    return s->dtype == IR_DT_TUPLE && s->n_elems == 0;
}

/* The reference lane's Feed number `k` in `v` for `ins`, appended when new. */
static SlStatus
feed_slot(Host *h, SlVec *v, int64_t k, const IrInstr *ins, Feed **out, SlError *err)
{
    SlSrcLoc nowhere = {0};
    if ((size_t)k == v->len) {
        Feed f = {ins, calloc((size_t)h->n_ref, sizeof(SimValue *)), 0};
        if (ins->op == IR_OP_OUTFEED) {
            f.first_leaf = h->out_leaves;
            h->out_leaves += ir_shape_leaf_count(feed_shape(ins));
        }
        if (!f.vals || !SL_VEC_PUSH(v, Feed, f)) {
            free(f.vals);
            return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
        }
    }
    *out = &SL_VEC_AT(v, Feed, (size_t)k);
    if ((*out)->ins != ins)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "devices run host transfers in different "
                       "orders");
    return SL_OK;
}

static SlStatus
host_ref_infeed(void *user, const IrInstr *ins, int64_t dev, SimValue **out, SlError *err)
{
    Host *h = user;
    Feed *f = NULL;
    int64_t k = h->ref_in[dev]++;
    SlStatus st = feed_slot(h, &h->in, k, ins, &f, err);
    if (st)
        return st;
    uint64_t base = h->seed + 0xd1b54a32d192ed03u * (uint64_t)(k + 1);
    uint32_t leaf = 0;
    Rng r = {base};
    SimValue *v = h->n_ref == 1 ? random_value(&r, feed_shape(ins), -1)
                                : manual_value(base, feed_shape(ins), ir_instr_sharding(ins),
                                               &leaf, dev, -1);
    if (!v)
        return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    sim_value_unref(f->vals[dev]);
    f->vals[dev] = v;
    *out = sim_value_ref(v);
    return SL_OK;
}

static SlStatus
host_ref_outfeed(void *user, const IrInstr *ins, int64_t dev, const SimValue *data, SlError *err)
{
    Host *h = user;
    Feed *f = NULL;
    SlStatus st = feed_slot(h, &h->out, h->ref_out[dev]++, ins, &f, err);
    if (st)
        return st;
    sim_value_unref(f->vals[dev]);
    f->vals[dev] = sim_value_ref((SimValue *)data);
    return SL_OK;
}

/* Device `dev`'s part of global value `g` (shape `gs`, sharding `s`) in the local shape `ls`. */
static SlStatus
feed_cut(const SimValue *g, const IrShape *gs, const ShdSharding *s, uint32_t *leaf,
         const IrShape *ls, int64_t dev, SimValue **out, SlError *err)
{
    SlSrcLoc nowhere = {0};
    if (gs->dtype != IR_DT_TUPLE) {
        const ShdSharding *sl = s ? shd_leaf(s, (*leaf)++) : NULL;
        if (is_empty_tuple(ls) && held_elsewhere(sl, dev))
            return (*out = sim_value_new_tuple(NULL, 0))
                       ? SL_OK
                       : sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
        if (!sim_is_array_dtype(gs->dtype)) {
            *out = sim_value_new(ls);
            return *out ? SL_OK : sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
        }
        return cut_leaf(g, gs, sl, ls, dev, out, err);
    }
    if (ls->dtype != IR_DT_TUPLE || ls->n_elems != gs->n_elems)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "the infeed's tuple shape differs from the "
                       "original's");
    SimValue **el = calloc(gs->n_elems + 1, sizeof *el);
    SlStatus st = el ? SL_OK : sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    for (uint32_t i = 0; !st && i < gs->n_elems; i++)
        st = feed_cut(g->elems[i], &gs->elems[i], s, leaf, &ls->elems[i], dev, &el[i], err);
    if (!st && !(*out = sim_value_new_tuple(el, gs->n_elems)))
        st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    for (uint32_t i = 0; el && i < gs->n_elems; i++)
        sim_value_unref(el[i]);
    free(el);
    return st;
}

/* The logged value of `f` that device `dev` of the partitioned run is checked against. */
static const SimValue *
feed_value(const Host *h, const Feed *f, int64_t dev)
{
    return f->vals[h->n_ref > 1 ? dev : 0];
}

static SlStatus
host_part_infeed(void *user, const IrInstr *ins, int64_t dev, SimValue **out, SlError *err)
{
    Host *h = user;
    const Feed *f = feed_next(&h->in, &h->in_cur[dev], dev);
    if (!f || !feed_value(h, f, dev))
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "device %" PRId64 " reads more "
                       "infeeds than the original module", dev);
    uint32_t leaf = 0;
    return feed_cut(feed_value(h, f, dev), feed_shape(f->ins), ir_instr_sharding(f->ins), &leaf,
                    feed_shape(ins), dev, out, err);
}

/* Compares device `dev`'s outfeed data `got` with the logged global value `g`; leaf L of the
 * transfer is output number base + L. */
static SlStatus
feed_cmp(Cmp *c, const SimValue *g, const IrShape *gs, const ShdSharding *s, uint32_t base,
         uint32_t *leaf, const SimValue *got, int64_t dev, SlError *err)
{
    if (gs->dtype != IR_DT_TUPLE) {
        uint32_t L = (*leaf)++;
        const ShdSharding *sl = s ? shd_leaf(s, L) : NULL;
        if (got->dtype == IR_DT_TUPLE && got->n_elems == 0 && held_elsewhere(sl, dev))
            return SL_OK;
        if (!sim_is_array_dtype(gs->dtype))
            return SL_OK;
        c->output = base + L;
        return cmp_leaf(c, g, gs, sl, got, dev, ref_scale(g), err);
    }
    if (got->dtype != IR_DT_TUPLE || got->n_elems != gs->n_elems)
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "the outfeed's tuple shape differs "
                       "from the original's");
    for (uint32_t i = 0; i < gs->n_elems; i++) {
        SlStatus st = feed_cmp(c, g->elems[i], &gs->elems[i], s, base, leaf, got->elems[i], dev,
                               err);
        if (st)
            return st;
    }
    return SL_OK;
}

static SlStatus
host_part_outfeed(void *user, const IrInstr *ins, int64_t dev, const SimValue *data, SlError *err)
{
    Host *h = user;
    (void)ins;
    const Feed *f = feed_next(&h->out, &h->out_cur[dev], dev);
    if (!f || !feed_value(h, f, dev))
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "device %" PRId64 " sends more "
                       "outfeeds than the original module", dev);
    uint32_t leaf = 0;
    return feed_cmp(h->cmp, feed_value(h, f, dev), feed_shape(f->ins), ir_instr_sharding(f->ins),
                    h->n_root + f->first_leaf, &leaf, data, dev, err);
}

/* After the partitioned run: the transfers some device skipped, described into `why`. */
static bool
host_missed(Host *h, int64_t n_dev, char *why, size_t cap)
{
    for (int64_t d = 0; d < n_dev; d++) {
        if (feed_next(&h->in, &h->in_cur[d], d)) {
            snprintf(why, cap, "device %" PRId64 " reads fewer infeeds than the original module",
                     d);
            return true;
        }
        if (feed_next(&h->out, &h->out_cur[d], d)) {
            snprintf(why, cap, "device %" PRId64 " sends fewer outfeeds than the original module",
                     d);
            return true;
        }
    }
    return false;
}

static void
feeds_clear(SlVec *v, int64_t n_ref)
{
    for (size_t i = 0; i < v->len; i++) {
        Feed *f = &SL_VEC_AT(v, Feed, i);
        for (int64_t l = 0; l < n_ref; l++)
            sim_value_unref(f->vals[l]);
        free(f->vals);
    }
    v->len = 0;
}

static void
host_clear(Host *h)
{
    feeds_clear(&h->in, h->n_ref);
    feeds_clear(&h->out, h->n_ref);
    h->out_leaves = 0;
}

/* ---- the driver ------------------------------------------------------------------------------ */

typedef struct Trial {
    const IrModule *orig, *part;
    int64_t n_dev;
    int64_t n_ref;       /* devices the original runs on: 1, or n_dev with manual regions */
    uint32_t n_params;
    int64_t *bound;      /* per entry instruction of orig */
    SimValue **full;     /* n_ref * n_params, lane-major */
    SimValue **args;     /* n_dev * n_params */
    SimValue **outs;     /* n_dev */
    SimValue **refs;     /* n_ref */
    Host host;
} Trial;

static void
unref_all(SimValue **v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        sim_value_unref(v[i]);
        v[i] = NULL;
    }
}

static void
trial_clear(Trial *t)
{
    unref_all(t->full, t->n_ref * t->n_params);
    unref_all(t->args, t->n_dev * t->n_params);
    unref_all(t->outs, t->n_dev);
    unref_all(t->refs, t->n_ref);
}

static SlStatus
make_inputs(Trial *t, uint64_t seed, SlError *err)
{
    Rng r = {seed};
    const IrComputation *oc = t->orig->entry, *pc = t->part->entry;
    for (uint32_t i = 0; i < oc->n_instrs; i++) {
        const IrInstr *p = oc->instrs[i];
        if (p->op != IR_OP_PARAMETER)
            continue;
        int64_t k = p->parameter_number;
        const ShdSharding *s = ir_instr_sharding(p);
        bool per_dev = t->n_ref > 1 && sharding_is_manual(s, &p->shape);
        uint64_t base = seed ^ (0x632be59bd9b4e019u * (uint64_t)(k + 1));
        for (int64_t l = 0; l < t->n_ref; l++) {
            uint32_t leaf = 0;
            SimValue **dst = &t->full[l * t->n_params + k];
            if (l > 0 && !per_dev)
                *dst = sim_value_ref(t->full[k]);
            else if (per_dev)
                *dst = manual_value(base, &p->shape, s, &leaf, l, t->bound[i]);
            else
                *dst = random_value(&r, &p->shape, t->bound[i]);
            if (!*dst)
                return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory for inputs");
        }
    }
    for (uint32_t k = 0; k < t->n_params; k++) {
        const IrInstr *op = ir_computation_param(oc, k), *pp = ir_computation_param(pc, k);
        if (!op || !pp)
            return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "parameter %u is missing", k);
        for (int64_t d = 0; d < t->n_dev; d++) {
            uint32_t leaf = 0;
            SimValue *full = t->full[(t->n_ref > 1 ? d : 0) * t->n_params + k];
            SlStatus st = cut_value(full, &op->shape, ir_instr_sharding(op), &leaf, &pp->shape, d,
                                    &t->args[d * t->n_params + k], err);
            if (st)
                return st;
        }
    }
    return SL_OK;
}

static void
describe_failure(SimVerifyReport *r, const SlError *e, const Host *h)
{
    r->ok = false;
    char what[160] = "";
    for (size_t i = 0; !e && i < h->out.len; i++) {
        const Feed *f = &SL_VEC_AT(&h->out, Feed, i);
        uint32_t n = ir_shape_leaf_count(feed_shape(f->ins));
        if (r->bad_output >= h->n_root + f->first_leaf &&
            r->bad_output < h->n_root + f->first_leaf + n)
            snprintf(what, sizeof what, " (data of %%%s, transfer %zu)",
                     sl_sym_cstr(f->ins->name), i);
    }
    if (e)
        snprintf(r->detail, sizeof r->detail, "the partitioned module failed to run: %.400s",
                 e->msg);
    else
        snprintf(r->detail, sizeof r->detail,
                 "output %u%s differs at element %" PRId64 " on device %" PRId64
                 " (trial %u): want %.9g, got %.9g (error %.3g)",
                 r->bad_output, what, r->bad_index, r->bad_device, r->bad_trial, r->want, r->got,
                 r->err);
}

static SlStatus
run_trial(Trial *t, const SimVerifyOptions *o, uint32_t trial, SimVerifyReport *rep,
          SlError *err)
{
    uint64_t seed = o->seed * 0x9e3779b97f4a7c15u + trial + 1;
    Host *h = &t->host;
    host_clear(h);
    h->seed = seed;
    memset(h->ref_in, 0, (size_t)t->n_ref * sizeof *h->ref_in);
    memset(h->ref_out, 0, (size_t)t->n_ref * sizeof *h->ref_out);
    h->env = (SimEnv){host_ref_infeed, host_ref_outfeed, h, t->n_ref > 1, &h->seed,
                      o->max_while_trips};
    SlStatus st = make_inputs(t, seed, err);
    if (!st)
        st = sim_run_env(t->orig, t->n_ref, t->full, &h->env, t->refs, err);
    if (st)
        return st;
    const IrComputation *oc = t->orig->entry;
    const IrInstr *root = oc->root ? oc->root : oc->instrs[oc->n_instrs - 1];
    Cmp c = {o, rep, trial, 0, narrowest_float(t->orig)};
    h->cmp = &c;
    h->n_root = ir_shape_leaf_count(&root->shape);
    memset(h->in_cur, 0, (size_t)t->n_dev * sizeof *h->in_cur);
    memset(h->out_cur, 0, (size_t)t->n_dev * sizeof *h->out_cur);
    h->env = (SimEnv){host_part_infeed, host_part_outfeed, h, false, &h->seed,
                      o->max_while_trips};
    SlError perr = {0};
    st = sim_run_env(t->part, t->n_dev, t->args, &h->env, t->outs, &perr);
    if (st == SL_ERR_INVALID || st == SL_ERR_INTERNAL) { /* a broken program, not bad input */
        describe_failure(rep, &perr, h);
        return SL_OK;
    }
    if (st) {
        *err = perr;
        rep->error_in_partitioned = true;
        return st;
    }
    if (host_missed(h, t->n_dev, rep->detail, sizeof rep->detail)) {
        rep->ok = false;
        return SL_OK;
    }
    st = cmp_outputs(&c, root, t->refs, t->n_ref, t->outs, t->n_dev, err);
    rep->n_outputs = h->n_root + h->out_leaves;
    if (!st && !rep->ok)
        describe_failure(rep, NULL, h);
    return st;
}

SlStatus
sim_verify(const IrModule *orig, const IrModule *part, int64_t n_devices,
           const SimVerifyOptions *o, SimVerifyReport *report, SlError *err)
{
    memset(report, 0, sizeof *report);
    report->ok = true;
    if (!orig->entry || !part->entry || !orig->entry->n_instrs || !part->entry->n_instrs)
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "a module has no entry computation");
    Trial t = {.orig = orig, .part = part, .n_dev = n_devices,
               .n_ref = module_is_manual(orig) ? n_devices : 1,
               .n_params = ir_computation_param_count(orig->entry)};
    if (ir_computation_param_count(part->entry) != t.n_params)
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "the partitioned module takes %u "
                       "parameters, the original %u", ir_computation_param_count(part->entry),
                       t.n_params);
    SlStatus size_st = check_comparable(orig, err);
    if (!size_st)
        size_st = check_size(orig, "original", t.n_ref, err);
    if (!size_st)
        size_st = check_size(part, "partitioned", n_devices, err);
    if (size_st)
        return size_st;
    t.host.n_ref = t.n_ref;
    t.bound = calloc(orig->entry->n_instrs, sizeof *t.bound);
    t.full = calloc((size_t)(t.n_ref * t.n_params) + 1, sizeof *t.full);
    t.args = calloc((size_t)(n_devices * t.n_params) + 1, sizeof *t.args);
    t.outs = calloc((size_t)n_devices + 1, sizeof *t.outs);
    t.refs = calloc((size_t)t.n_ref + 1, sizeof *t.refs);
    t.host.ref_in = calloc((size_t)t.n_ref + 1, sizeof *t.host.ref_in);
    t.host.ref_out = calloc((size_t)t.n_ref + 1, sizeof *t.host.ref_out);
    t.host.in_cur = calloc((size_t)n_devices + 1, sizeof *t.host.in_cur);
    t.host.out_cur = calloc((size_t)n_devices + 1, sizeof *t.host.out_cur);
    SlStatus st = t.bound && t.full && t.args && t.outs && t.refs && t.host.ref_in &&
                          t.host.ref_out && t.host.in_cur && t.host.out_cur
                      ? index_bounds(orig->entry, t.bound, err)
                      : sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    for (uint32_t k = 0; !st && report->ok && k < (o->trials ? o->trials : 1); k++) {
        st = run_trial(&t, o, k, report, err);
        report->trials_run = k + 1;
        trial_clear(&t);
    }
    host_clear(&t.host);
    sl_vec_fini(&t.host.in);
    sl_vec_fini(&t.host.out);
    free(t.host.ref_in);
    free(t.host.ref_out);
    free(t.host.in_cur);
    free(t.host.out_cur);
    free(t.bound);
    free(t.full);
    free(t.args);
    free(t.outs);
    free(t.refs);
    return st;
}
