/* verify.c - checks a partitioned module against its original: seeded random inputs, the
 * original evaluated on one device, the inputs cut into shards by the original's entry
 * parameter shardings (uneven shards padded with zeros), the partitioned module run on N
 * devices, and every device's output tile compared with the matching part of the reference.
 * Owns: the input generator (a splitmix64 stream, so runs are reproducible), finding integer
 * parameters that feed indices, the tolerance rule. Does not own: evaluation (eval.c) or tile
 * arithmetic (src/sharding, gspmd.md §A.5). */
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

void
sim_verify_options_init(SimVerifyOptions *o)
{
    o->seed = 0;
    o->trials = 1;
    o->rtol = -1;
    o->atol = -1;
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
 * convolution, or its input for reductions. Loops count once (trip counts are unknown). */
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
        work *= kn / (of > 0 ? of : 1);
    } else {
        for (uint32_t j = 0; j < ins->n_operands; j++)
            if (ir_shape_is_array(&ins->operands[j]->shape))
                work += (double)ir_shape_elem_count(&ins->operands[j]->shape);
    }
    return work;
}

/* Why the outputs of a module using `ins` cannot be compared, or NULL: random numbers and
 * host transfers differ between one device and N by design. */
static const char *
not_comparable(const IrInstr *ins)
{
    switch (ins->op) {
    case IR_OP_RNG:
    case IR_OP_RNG_BIT_GENERATOR:
    case IR_OP_RNG_GET_AND_UPDATE_STATE: return "random numbers";
    case IR_OP_INFEED: return "data from the host";
    case IR_OP_OUTFEED: return "data sent to the host";
    case IR_OP_CUSTOM_CALL: {
        const IrAttr *a = ir_instr_find_attr(ins, IR_ATTR_CUSTOM_CALL_TARGET);
        return a && sl_str_eq_cstr(a->u.text, "\"GetRngSeed\"") ? "a random seed" : NULL;
    }
    default: return NULL;
    }
}

static SlStatus
check_comparable(const IrModule *m, SlError *err)
{
    for (uint32_t c = 0; c < m->n_comps; c++) {
        for (uint32_t i = 0; i < m->comps[c]->n_instrs; i++) {
            const IrInstr *ins = m->comps[c]->instrs[i];
            const char *why = not_comparable(ins);
            SlSrcLoc loc = {0};
            loc.line = ins->src_line;
            loc.col = ins->src_col;
            int64_t channel;
            if (sim_is_collective(ins->op) && ir_instr_int_attr(ins, IR_ATTR_CHANNEL_ID, &channel))
                return sl_fail(err, SL_ERR_UNSUPPORTED, loc, "%%%s (%s): a collective in the "
                               "unpartitioned module belongs to a manually partitioned region; "
                               "manual regions are not simulated", sl_sym_cstr(ins->name),
                               ir_op_name(ins->op));
            if (!why)
                continue;
            return sl_fail(err, SL_ERR_UNSUPPORTED, loc, "outputs are not comparable: %s "
                           "(%%%s involves %s, which one device and N devices do not share)",
                           ins->op == IR_OP_CUSTOM_CALL ? "GetRngSeed" : ir_op_name(ins->op),
                           sl_sym_cstr(ins->name), why);
        }
    }
    return SL_OK;
}

/* Refuses modules whose evaluation would take minutes or gigabytes, naming the estimate. */
static SlStatus
check_size(const IrModule *m, const char *which, SlError *err)
{
    double work = 0;
    int64_t max_elems = 0;
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c]->n_instrs; i++)
            work += instr_work(m->comps[c]->instrs[i], &max_elems);
    if (work <= SIM_MAX_WORK && max_elems <= SIM_MAX_ELEMS)
        return SL_OK;
    return sl_fail(err, SL_ERR_UNSUPPORTED, (SlSrcLoc){0},
                   "the %s module is too large to simulate: about %.3g element operations and "
                   "an array of %" PRId64 " elements (limits %.3g and %" PRId64 ")",
                   which, work, max_elems, SIM_MAX_WORK, SIM_MAX_ELEMS);
}

/* ---- cutting inputs and reading outputs ------------------------------------------------------ */

static bool
is_whole(const ShdSharding *s)
{
    return !s || s->kind == SHD_REPLICATED || s->kind == SHD_MAXIMAL || s->kind == SHD_UNKNOWN ||
           s->kind == SHD_UNREDUCED;
}

/* Device `dev`'s shard of `full` with the local shape `local`. */
static SlStatus
cut_leaf(const SimValue *full, const IrShape *fshape, const ShdSharding *s, const IrShape *local,
         int64_t dev, SimValue **out, SlError *err)
{
    SlSrcLoc nowhere = {0};
    if (s && s->kind == SHD_MANUAL)
        return sl_fail(err, SL_ERR_UNSUPPORTED, nowhere, "manual parameter shardings");
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
static void
cmp_elem(Cmp *c, IrDtype t, SimElem want, SimElem got, int64_t index, int64_t dev, double scale)
{
    SimVerifyReport *r = c->rep;
    double w = sim_is_float(t) ? want.f : (double)want.i, g = sim_is_float(t) ? got.f : (double)got.i;
    double e = 0, rtol, atol;
    bool same;
    tolerances(c, t, &rtol, &atol);
    if (!sim_is_float(t)) {
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

/* Device `dev`'s output leaf against the reference leaf under sharding `s`. */
static SlStatus
cmp_leaf(Cmp *c, const SimValue *ref, const IrShape *fshape, const ShdSharding *s,
         const SimValue *got, int64_t dev, SlError *err)
{
    SlSrcLoc nowhere = {0};
    if (s && s->kind == SHD_MANUAL)
        return sl_fail(err, SL_ERR_UNSUPPORTED, nowhere, "manual output shardings");
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
    sim_strides(ref->dims, ref->rank, rs);
    double scale = 0; /* the output's largest magnitude: rounding errors of long sums scale so */
    for (int64_t i = 0; sim_is_float(ref->dtype) && i < ref->n; i++)
        if (isfinite(ref->data[i].f) && fabs(ref->data[i].f) > scale)
            scale = fabs(ref->data[i].f);
    for (int64_t i = 0; i < got->n; i++, sim_idx_next(idx, got->dims, got->rank)) {
        int64_t at = 0;
        bool in = true;
        for (uint32_t d = 0; d < got->rank && in; d++) {
            in = idx[d] < ext[d];
            at += (off[d] + idx[d]) * rs[d];
        }
        if (in)
            cmp_elem(c, ref->dtype, ref->data[at], got->data[i], at, dev, scale);
    }
    return SL_OK;
}

/* Compares every device's result with the reference, leaf by leaf (tuples in pre-order). */
static SlStatus
cmp_outputs(Cmp *c, const IrInstr *root, SimValue *ref, SimValue *const *outs, int64_t n_dev,
            SlError *err)
{
    const ShdSharding *s = ir_instr_sharding(root);
    uint32_t n_leaves = ir_shape_leaf_count(&root->shape), n = 0;
    SimValue **rl = calloc((size_t)n_leaves + 1, sizeof *rl), **gl = calloc((size_t)n_leaves + 1,
                                                                             sizeof *gl);
    SlStatus st = rl && gl ? SL_OK : sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    if (!st)
        leaves_of(ref, rl, &n, n_leaves);
    if (!st && n != n_leaves)
        st = sl_fail(err, SL_ERR_INTERNAL, (SlSrcLoc){0}, "reference has %u leaves, want %u", n,
                     n_leaves);
    c->rep->n_outputs = n_leaves;
    for (int64_t d = 0; !st && d < n_dev; d++) {
        n = 0;
        leaves_of(outs[d], gl, &n, n_leaves);
        if (n != n_leaves)
            st = sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "the partitioned module returns %u "
                         "arrays, the original %u", n, n_leaves);
        for (uint32_t L = 0; !st && L < n_leaves; L++) {
            c->output = L;
            st = cmp_leaf(c, rl[L], ir_shape_leaf(&root->shape, L), s ? shd_leaf(s, L) : NULL,
                          gl[L], d, err);
        }
    }
    free(rl);
    free(gl);
    return st;
}

/* ---- the driver ------------------------------------------------------------------------------ */

typedef struct Trial {
    const IrModule *orig, *part;
    int64_t n_dev;
    uint32_t n_params;
    int64_t *bound;      /* per entry instruction of orig */
    SimValue **full;     /* n_params */
    SimValue **args;     /* n_dev * n_params */
    SimValue **outs;     /* n_dev */
    SimValue *ref;
} Trial;

static void
trial_clear(Trial *t)
{
    for (uint32_t p = 0; p < t->n_params; p++) {
        sim_value_unref(t->full[p]);
        t->full[p] = NULL;
    }
    for (int64_t i = 0; i < t->n_dev * t->n_params; i++) {
        sim_value_unref(t->args[i]);
        t->args[i] = NULL;
    }
    for (int64_t d = 0; d < t->n_dev; d++) {
        sim_value_unref(t->outs[d]);
        t->outs[d] = NULL;
    }
    sim_value_unref(t->ref);
    t->ref = NULL;
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
        if (!(t->full[k] = random_value(&r, &p->shape, t->bound[i])))
            return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory for inputs");
    }
    for (uint32_t k = 0; k < t->n_params; k++) {
        const IrInstr *op = ir_computation_param(oc, k), *pp = ir_computation_param(pc, k);
        if (!op || !pp)
            return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "parameter %u is missing", k);
        for (int64_t d = 0; d < t->n_dev; d++) {
            uint32_t leaf = 0;
            SlStatus st = cut_value(t->full[k], &op->shape, ir_instr_sharding(op), &leaf,
                                    &pp->shape, d, &t->args[d * t->n_params + k], err);
            if (st)
                return st;
        }
    }
    return SL_OK;
}

static void
describe_failure(SimVerifyReport *r, const SlError *e)
{
    r->ok = false;
    if (e)
        snprintf(r->detail, sizeof r->detail, "the partitioned module failed to run: %.400s",
                 e->msg);
    else
        snprintf(r->detail, sizeof r->detail,
                 "output %u differs at element %" PRId64 " on device %" PRId64
                 " (trial %u): want %.9g, got %.9g (error %.3g)",
                 r->bad_output, r->bad_index, r->bad_device, r->bad_trial, r->want, r->got,
                 r->err);
}

static SlStatus
run_trial(Trial *t, const SimVerifyOptions *o, uint32_t trial, SimVerifyReport *rep,
          SlError *err)
{
    SlStatus st = make_inputs(t, o->seed * 0x9e3779b97f4a7c15u + trial + 1, err);
    if (!st)
        st = sim_run(t->orig, 1, t->full, &t->ref, err);
    if (st)
        return st;
    SlError perr = {0};
    st = sim_run(t->part, t->n_dev, t->args, t->outs, &perr);
    if (st == SL_ERR_INVALID || st == SL_ERR_INTERNAL) { /* a broken program, not bad input */
        describe_failure(rep, &perr);
        return SL_OK;
    }
    if (st) {
        *err = perr;
        rep->error_in_partitioned = true;
        return st;
    }
    Cmp c = {o, rep, trial, 0, narrowest_float(t->orig)};
    st = cmp_outputs(&c, t->orig->entry->root ? t->orig->entry->root
                                                : t->orig->entry->instrs[t->orig->entry->n_instrs - 1],
                     t->ref, t->outs, t->n_dev, err);
    if (!st && !rep->ok)
        describe_failure(rep, NULL);
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
    Trial t = {orig, part, n_devices, ir_computation_param_count(orig->entry), 0, 0, 0, 0, 0};
    if (ir_computation_param_count(part->entry) != t.n_params)
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "the partitioned module takes %u "
                       "parameters, the original %u", ir_computation_param_count(part->entry),
                       t.n_params);
    SlStatus size_st = check_comparable(orig, err);
    if (!size_st)
        size_st = check_size(orig, "original", err);
    if (size_st)
        return size_st;
    t.bound = calloc(orig->entry->n_instrs, sizeof *t.bound);
    t.full = calloc(t.n_params + 1, sizeof *t.full);
    t.args = calloc((size_t)(n_devices * t.n_params) + 1, sizeof *t.args);
    t.outs = calloc((size_t)n_devices + 1, sizeof *t.outs);
    SlStatus st = t.bound && t.full && t.args && t.outs
                      ? index_bounds(orig->entry, t.bound, err)
                      : sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    for (uint32_t k = 0; !st && report->ok && k < (o->trials ? o->trials : 1); k++) {
        st = run_trial(&t, o, k, report, err);
        report->trials_run = k + 1;
        trial_clear(&t);
    }
    free(t.bound);
    free(t.full);
    free(t.args);
    free(t.outs);
    return st;
}
