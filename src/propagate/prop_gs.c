/* prop_gs.c - gather and scatter in the propagation pass: the dimensions that connect operand,
 * indices and output (updates) - explicit batch dims, implicit parallel dims found from an
 * iota in the indices, passthrough dims, index passthrough dims - and the forward and backward
 * rules built on them (XLA's hlo_sharding_util gather/scatter helpers). */
#include <string.h>

#include "propagate/prop_int.h"

/* FillOutputDimsWithIndicesDims. */
static void
fill_output_dims(PropGsDims *d, int64_t ivd, const int64_t *offset, uint32_t n_offset)
{
    int64_t max_i = -1;
    for (uint32_t k = 0; k < d->n; k++)
        if (d->indices[k] > max_i)
            max_i = d->indices[k];
    int64_t map[PROP_MAX_RANK + 2];
    for (int64_t k = 0; k <= max_i && k < PROP_MAX_RANK; k++)
        map[k] = -1;
    for (int64_t id = 0, od = 0; id <= max_i; id++, od++) {
        if (id == ivd)
            id++;
        while (prop_in_ints(offset, n_offset, od))
            od++;
        if (id <= max_i && id < PROP_MAX_RANK)
            map[id] = od;
    }
    for (uint32_t k = 0; k < d->n; k++)
        d->output[k] = d->indices[k] < PROP_MAX_RANK ? map[d->indices[k]] : -1;
}

static void
append(PropGsDims *d, const PropGsDims *o)
{
    for (uint32_t k = 0; k < o->n && d->n < PROP_MAX_RANK; k++) {
        d->operand[d->n] = o->operand[k];
        d->indices[d->n] = o->indices[k];
        d->output[d->n] = o->output[k];
        d->n++;
    }
}

/* For an s32 constant: the first dim (of size > 1) along which every element equals its
 * index, or -1. The literal's integers are read in row-major order. */
static int64_t
constant_iota_dim(const IrInstr *c)
{
    const IrShape *sh = &c->shape;
    int64_t n = ir_shape_elem_count(sh);
    if (sh->rank == 0 || sh->rank > PROP_MAX_RANK || n <= 0 || n > (1 << 20))
        return -1;
    bool is_dim[PROP_MAX_RANK];
    for (uint32_t d = 0; d < sh->rank; d++)
        is_dim[d] = true;
    int64_t idx[PROP_MAX_RANK] = {0}, seen = 0;
    SlStr t = c->literal;
    for (size_t p = 0; p < t.len && seen < n;) {
        char ch = t.ptr[p];
        if (!(ch == '-' || (ch >= '0' && ch <= '9'))) {
            p++;
            continue;
        }
        bool neg = ch == '-';
        if (neg)
            p++;
        int64_t v = 0;
        bool any = false;
        while (p < t.len && t.ptr[p] >= '0' && t.ptr[p] <= '9') {
            v = v * 10 + (t.ptr[p++] - '0');
            any = true;
        }
        if (!any)
            continue;
        if (neg)
            v = -v;
        for (uint32_t d = 0; d < sh->rank; d++)
            if (v != idx[d])
                is_dim[d] = false;
        seen++;
        for (uint32_t d = sh->rank; d-- > 0;) /* next row-major index */
            if (++idx[d] < sh->dims[d])
                break;
            else
                idx[d] = 0;
    }
    if (seen != n)
        return -1;
    for (uint32_t d = 0; d < sh->rank; d++)
        if (is_dim[d] && sh->dims[d] > 1)
            return d;
    return -1;
}

/* GetDimensionForIota: the dim along which `i` counts 0, 1, 2, ..., or -1. */
static int64_t
iota_dim(const PropCtx *cx, const IrInstr *i, int depth)
{
    if (depth > 16)
        return -1;
    if (i->op == IR_OP_IOTA) {
        int64_t d = -1;
        ir_instr_int_attr(i, IR_ATTR_IOTA_DIMENSION, &d);
        return d;
    }
    if (i->shape.dtype != IR_DT_S32)
        return -1;
    if (i->op == IR_OP_CONSTANT)
        return constant_iota_dim(i);
    if (i->op == IR_OP_BROADCAST && i->n_operands) {
        int64_t od = iota_dim(cx, i->operands[0], depth + 1);
        const int64_t *dims;
        uint32_t nd = ir_instr_ints_attr(i, IR_ATTR_DIMENSIONS, &dims);
        return od >= 0 && (uint32_t)od < nd ? dims[od] : -1;
    }
    /* A loop-invariant tuple element of a while body, or a conditional branch's argument:
     * look at what the caller passes in. */
    if (i->op == IR_OP_GET_TUPLE_ELEMENT && i->n_operands &&
        i->operands[0]->op == IR_OP_PARAMETER && !i->parent->is_entry) {
        const IrInstr *caller = cx->caller[i->parent->id];
        int64_t idx = 0;
        ir_instr_int_attr(i, IR_ATTR_INDEX, &idx);
        if (!caller || idx < 0)
            return -1;
        if (caller->op == IR_OP_WHILE && caller->n_operands &&
            caller->operands[0]->op == IR_OP_TUPLE &&
            ir_instr_called(caller, IR_ATTR_BODY) == i->parent) {
            const IrInstr *root = i->parent->root;
            if (root && root->op == IR_OP_TUPLE && (uint32_t)idx < root->n_operands &&
                root->operands[idx] == i && (uint32_t)idx < caller->operands[0]->n_operands)
                return iota_dim(cx, caller->operands[0]->operands[idx], depth + 1);
        }
        if (caller->op == IR_OP_CONDITIONAL) {
            const IrAttr *b = ir_instr_find_attr(caller, IR_ATTR_BRANCH_COMPUTATIONS);
            int64_t k = -1;
            if (b) {
                for (uint32_t x = 0; x < b->u.comps.n; x++)
                    if (b->u.comps.v[x] == i->parent)
                        k = x;
            } else if (ir_instr_called(caller, IR_ATTR_TRUE_COMPUTATION) == i->parent) {
                k = 0;
            } else if (ir_instr_called(caller, IR_ATTR_FALSE_COMPUTATION) == i->parent) {
                k = 1;
            }
            if (k >= 0 && (uint32_t)(k + 1) < caller->n_operands) {
                const IrInstr *arg = caller->operands[k + 1];
                if (arg->op == IR_OP_TUPLE && (uint32_t)idx < arg->n_operands)
                    return iota_dim(cx, arg->operands[idx], depth + 1);
            }
        }
    }
    return -1;
}

/* GetGatherScatterBatchParallelDims. */
static bool
batch_parallel_dims(const PropCtx *cx, const IrInstr *operand, const IrInstr *indices, const int64_t *slice_sizes,
                    int64_t ivd, const int64_t *index_map, uint32_t n_map,
                    const int64_t *idx_batch, uint32_t n_idx_batch, const int64_t *offset,
                    uint32_t n_offset, PropGsDims *out)
{
    int64_t par[PROP_MAX_RANK];
    if (n_map > PROP_MAX_RANK)
        return false;
    for (uint32_t k = 0; k < n_map; k++)
        par[k] = -1;
    const IrInstr *orig = indices;
    while (indices->op == IR_OP_COPY && indices->n_operands)
        indices = indices->operands[0];
    if (indices->op != IR_OP_CONCATENATE)
        indices = orig;
    const int64_t *cd;
    uint32_t ncd = indices->op == IR_OP_CONCATENATE
                       ? ir_instr_ints_attr(indices, IR_ATTR_DIMENSIONS, &cd)
                       : 0;
    if (indices->op == IR_OP_CONCATENATE && ncd && cd[0] == ivd) {
        uint32_t done = 0;
        for (uint32_t k = 0; k < indices->n_operands; k++) {
            const IrInstr *op = indices->operands[k];
            int64_t n = op->shape.rank > (uint32_t)ivd ? op->shape.dims[ivd] : 1;
            int64_t d = iota_dim(cx, op, 0);
            if (d >= 0 && d != ivd)
                for (int64_t j = 0; j < n && done + j < n_map; j++)
                    par[done + j] = d;
            done += (uint32_t)n;
        }
    } else {
        int64_t d = iota_dim(cx, indices, 0);
        if (d >= 0 && d != ivd) {
            int64_t n = indices->shape.rank > (uint32_t)ivd ? indices->shape.dims[ivd] : 1;
            for (int64_t j = 0; j < n && j < (int64_t)n_map; j++)
                par[j] = d;
        }
    }
    memset(out, 0, sizeof(*out));
    for (uint32_t k = 0; k < n_map; k++) {
        int64_t ip = par[k], opd = index_map[k];
        if (ip < 0)
            continue;
        if (prop_in_ints(out->indices, out->n, ip))
            return false;
        if (slice_sizes[opd] == 1 && !prop_in_ints(idx_batch, n_idx_batch, ip)) {
            if (operand->shape.dims[opd] != indices->shape.dims[ip])
                return false;
            out->indices[out->n] = ip;
            out->operand[out->n] = opd;
            out->n++;
        }
    }
    if (!out->n)
        return false;
    fill_output_dims(out, ivd, offset, n_offset);
    return true;
}

/* GetGatherConnectedDimsAcrossIndicesAndOutput (nothing excluded). */
static void
connected_dims(uint32_t indices_rank, int64_t ivd, uint32_t out_rank, const int64_t *offset,
               uint32_t n_offset, PropGsDims *d)
{
    memset(d, 0, sizeof(*d));
    int64_t id = 0;
    for (uint32_t od = 0; od < out_rank; od++) {
        if (prop_in_ints(offset, n_offset, od))
            continue;
        if (id == ivd)
            id++;
        if (id >= (int64_t)indices_rank)
            break;
        d->indices[d->n] = id;
        d->output[d->n] = od;
        d->n++;
        id++;
    }
}

/* Passthrough dims: operand dims kept whole in the slice, to their offset/window dims. */
static void
passthrough_dims(const IrShape *operand, const int64_t *collapsed, uint32_t n_collapsed,
                 const int64_t *batching, uint32_t n_batching, const int64_t *offset,
                 uint32_t n_offset, const int64_t *slice, PropGsDims *d)
{
    memset(d, 0, sizeof(*d));
    uint32_t skipped = 0;
    for (uint32_t k = 0; k < operand->rank; k++) {
        if (prop_in_ints(collapsed, n_collapsed, k) || prop_in_ints(batching, n_batching, k)) {
            skipped++;
            continue;
        }
        if (slice[k] != operand->dims[k])
            continue;
        if (k - skipped >= n_offset)
            continue;
        d->operand[d->n] = k;
        d->output[d->n] = offset[k - skipped];
        d->n++;
    }
}

typedef struct GatherInfo {
    const int64_t *offset, *collapsed, *start_map, *op_batch, *idx_batch, *slice;
    uint32_t n_offset, n_collapsed, n_start_map, n_op_batch, n_idx_batch, n_slice;
    int64_t ivd;
} GatherInfo;

static bool
gather_info(const IrInstr *g, GatherInfo *gi)
{
    gi->n_offset = ir_instr_ints_attr(g, IR_ATTR_OFFSET_DIMS, &gi->offset);
    gi->n_collapsed = ir_instr_ints_attr(g, IR_ATTR_COLLAPSED_SLICE_DIMS, &gi->collapsed);
    gi->n_start_map = ir_instr_ints_attr(g, IR_ATTR_START_INDEX_MAP, &gi->start_map);
    gi->n_op_batch = ir_instr_ints_attr(g, IR_ATTR_OPERAND_BATCHING_DIMS, &gi->op_batch);
    gi->n_idx_batch = ir_instr_ints_attr(g, IR_ATTR_START_INDICES_BATCHING_DIMS, &gi->idx_batch);
    gi->n_slice = ir_instr_ints_attr(g, IR_ATTR_SLICE_SIZES, &gi->slice);
    gi->ivd = 0;
    ir_instr_int_attr(g, IR_ATTR_INDEX_VECTOR_DIM, &gi->ivd);
    return g->n_operands >= 2 && gi->n_slice == g->operands[0]->shape.rank;
}

static bool
gather_parallel(const PropCtx *cx, const IrInstr *g, const GatherInfo *gi, PropGsDims *out)
{
    return batch_parallel_dims(cx, g->operands[0], g->operands[1], gi->slice, gi->ivd, gi->start_map,
                               gi->n_start_map, gi->idx_batch, gi->n_idx_batch, gi->offset,
                               gi->n_offset, out);
}

static bool
gather_parallel_forward(PropCtx *cx, IrInstr *g, const PropGsDims *d, bool combine)
{
    bool changed = false;
    const ShdSharding *os = prop_sh(cx, g->operands[0]), *is = prop_sh(cx, g->operands[1]);
    if (px_spatial(os)) {
        cx->from = g->operands[0];
        cx->rule = "gather parallel dims (operand)";
        changed |= prop_improve(cx, g, px_along_dims(cx, os, d->operand, d->output, d->n, g->shape.rank),
                                combine, false);
    }
    if (px_spatial(is)) {
        cx->from = g->operands[1];
        cx->rule = "gather parallel dims (indices)";
        changed |= prop_improve(cx, g, px_along_dims(cx, is, d->indices, d->output, d->n, g->shape.rank),
                                combine, false);
    }
    return changed;
}

bool
prop_gather_forward(PropCtx *cx, IrInstr *g, bool combine)
{
    GatherInfo gi;
    if (!gather_info(g, &gi))
        return false;
    bool changed = false;
    if (gi.n_op_batch) {
        PropGsDims d = {0};
        for (uint32_t k = 0; k < gi.n_op_batch && k < gi.n_idx_batch; k++) {
            d.operand[d.n] = gi.op_batch[k];
            d.indices[d.n] = gi.idx_batch[k];
            d.n++;
        }
        fill_output_dims(&d, gi.ivd, gi.offset, gi.n_offset);
        changed |= gather_parallel_forward(cx, g, &d, combine);
    }
    const ShdSharding *is = prop_sh(cx, g->operands[1]);
    if (px_spatial(is)) {
        const ShdSharding *s = is;
        if (!px_tile_maximal(is) && !px_manual(is)) {
            PropGsDims c;
            connected_dims(g->operands[1]->shape.rank, gi.ivd, g->shape.rank, gi.offset,
                           gi.n_offset, &c);
            s = px_along_dims(cx, is, c.indices, c.output, c.n, g->shape.rank);
        }
        cx->from = g->operands[1];
        cx->rule = "gather index passthrough";
        changed |= prop_improve(cx, g, s, combine, false);
    }
    if (cx->o->is_spmd) {
        PropGsDims par;
        bool has_par = gather_parallel(cx, g, &gi, &par);
        if (has_par)
            changed |= gather_parallel_forward(cx, g, &par, combine);
        const ShdSharding *os = prop_sh(cx, g->operands[0]);
        if (px_spatial(os)) {
            const ShdSharding *f = has_par ? px_replicate_dims(cx, os, par.operand, par.n) : os;
            if (!px_tile_maximal(f) && !px_manual(f) && f->kind == SHD_TILED) {
                PropGsDims p;
                passthrough_dims(&g->operands[0]->shape, gi.collapsed, gi.n_collapsed,
                                 gi.op_batch, gi.n_op_batch, gi.offset, gi.n_offset, gi.slice, &p);
                const ShdSharding *r =
                    px_along_dims(cx, f, p.operand, p.output, p.n, g->shape.rank);
                if (r && !px_tile_maximal(r)) {
                    cx->from = g->operands[0];
                    cx->rule = "gather operand passthrough";
                    changed |= prop_improve(cx, g, r, combine, false);
                }
            }
        }
    }
    return changed;
}

/* Two candidates, the parallel one first, merged as GatherOperandShardingFromOutput does. */
static const ShdSharding *
merge_two(PropCtx *cx, const ShdSharding *parallel, const ShdSharding *pass)
{
    if (!pass)
        return parallel;
    if (!parallel)
        return pass;
    const ShdSharding *p = pass;
    if (px_merge(cx, parallel, &p, true))
        return p;
    const ShdSharding *q = parallel;
    if (px_merge(cx, pass, &q, true))
        return q;
    return parallel;
}

const ShdSharding *
prop_gather_from_user(PropCtx *cx, const IrInstr *i, const IrInstr *g)
{
    GatherInfo gi;
    if (!gather_info(g, &gi))
        return NULL;
    const ShdSharding *us = prop_sh(cx, g);
    if (i == g->operands[1]) {
        if (px_tile_maximal(us) || px_manual(us))
            return us;
        PropGsDims c;
        connected_dims(g->operands[1]->shape.rank, gi.ivd, g->shape.rank, gi.offset, gi.n_offset,
                       &c);
        return px_along_dims(cx, us, c.output, c.indices, c.n, g->operands[1]->shape.rank);
    }
    if (!cx->o->is_spmd || i != g->operands[0])
        return NULL;
    if (px_tile_maximal(us) || px_manual(us))
        return us;
    uint32_t orank = g->operands[0]->shape.rank;
    PropGsDims par = {0}, imp;
    if (gi.n_op_batch) {
        for (uint32_t k = 0; k < gi.n_op_batch && k < gi.n_idx_batch; k++) {
            par.operand[par.n] = gi.op_batch[k];
            par.indices[par.n] = gi.idx_batch[k];
            par.n++;
        }
        fill_output_dims(&par, gi.ivd, gi.offset, gi.n_offset);
    }
    if (gather_parallel(cx, g, &gi, &imp))
        append(&par, &imp);
    const ShdSharding *parallel =
        par.n ? px_along_dims(cx, us, par.output, par.operand, par.n, orank) : NULL;
    PropGsDims p;
    passthrough_dims(&g->operands[0]->shape, gi.collapsed, gi.n_collapsed, gi.op_batch,
                     gi.n_op_batch, gi.offset, gi.n_offset, gi.slice, &p);
    const ShdSharding *pass = px_along_dims(cx, us, p.output, p.operand, p.n, orank);
    if (pass && px_tile_maximal(pass))
        pass = NULL;
    return merge_two(cx, parallel, pass);
}

/* ---- scatter ---- */

typedef struct ScatterInfo {
    const int64_t *window, *inserted, *to_operand, *in_batch, *idx_batch;
    uint32_t n_window, n_inserted, n_to_operand, n_in_batch, n_idx_batch;
    int64_t ivd;
    uint32_t n; /* operands (and updates) */
    int64_t slice[PROP_MAX_RANK];
} ScatterInfo;

static bool
scatter_info(const IrInstr *s, ScatterInfo *si)
{
    si->n_window = ir_instr_ints_attr(s, IR_ATTR_UPDATE_WINDOW_DIMS, &si->window);
    si->n_inserted = ir_instr_ints_attr(s, IR_ATTR_INSERTED_WINDOW_DIMS, &si->inserted);
    si->n_to_operand = ir_instr_ints_attr(s, IR_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS, &si->to_operand);
    si->n_in_batch = ir_instr_ints_attr(s, IR_ATTR_INPUT_BATCHING_DIMS, &si->in_batch);
    si->n_idx_batch = ir_instr_ints_attr(s, IR_ATTR_SCATTER_INDICES_BATCHING_DIMS, &si->idx_batch);
    si->ivd = 0;
    ir_instr_int_attr(s, IR_ATTR_INDEX_VECTOR_DIM, &si->ivd);
    if (s->n_operands < 3 || (s->n_operands - 1) % 2)
        return false;
    si->n = (s->n_operands - 1) / 2;
    const IrShape *op = &s->operands[0]->shape, *up = &s->operands[si->n + 1]->shape;
    if (op->rank > PROP_MAX_RANK)
        return false;
    uint32_t w = 0;
    for (uint32_t k = 0; k < op->rank; k++) {
        si->slice[k] = 1;
        if (prop_in_ints(si->inserted, si->n_inserted, k) || prop_in_ints(si->in_batch, si->n_in_batch, k))
            continue;
        if (w >= si->n_window || si->window[w] >= (int64_t)up->rank)
            return false;
        si->slice[k] = up->dims[si->window[w++]];
    }
    return true;
}

static const IrInstr *
sc_operand(const IrInstr *s, uint32_t k)
{
    return s->operands[k];
}

static const IrInstr *
sc_indices(const IrInstr *s, const ScatterInfo *si)
{
    return s->operands[si->n];
}

static const IrInstr *
sc_update(const IrInstr *s, const ScatterInfo *si, uint32_t k)
{
    return s->operands[si->n + 1 + k];
}

static bool
scatter_parallel(const PropCtx *cx, const IrInstr *s, const ScatterInfo *si, PropGsDims *out)
{
    return batch_parallel_dims(cx, sc_operand(s, 0), sc_indices(s, si), si->slice, si->ivd,
                               si->to_operand, si->n_to_operand, si->idx_batch, si->n_idx_batch,
                               si->window, si->n_window, out);
}

static const IrShape *
sc_out_shape(const IrInstr *s, const ScatterInfo *si)
{
    return si->n == 1 || !ir_shape_is_tuple(&s->shape) ? &s->shape : &s->shape.elems[0];
}

static bool
scatter_parallel_forward(PropCtx *cx, IrInstr *s, const ScatterInfo *si, const PropGsDims *d,
                         bool combine)
{
    bool changed = false;
    uint32_t rank = sc_out_shape(s, si)->rank;
    cx->rule = "scatter parallel dims";
    for (uint32_t k = 0; k < si->n; k++) {
        const ShdSharding *os = prop_sh(cx, sc_operand(s, k));
        if (!px_spatial(os))
            continue;
        cx->from = sc_operand(s, k);
        changed |= prop_improve_sub(cx, s, px_along_dims(cx, os, d->operand, d->operand, d->n, rank),
                                    k, combine, false);
    }
    const ShdSharding *is = prop_sh(cx, sc_indices(s, si));
    if (px_spatial(is)) {
        const ShdSharding *f = px_along_dims(cx, is, d->indices, d->operand, d->n, rank);
        cx->from = sc_indices(s, si);
        for (uint32_t k = 0; k < si->n; k++)
            changed |= prop_improve_sub(cx, s, f, k, combine, false);
    }
    for (uint32_t k = 0; k < si->n; k++) {
        const ShdSharding *us = prop_sh(cx, sc_update(s, si, k));
        if (!px_spatial(us))
            continue;
        cx->from = sc_update(s, si, k);
        changed |= prop_improve_sub(cx, s, px_along_dims(cx, us, d->output, d->operand, d->n, rank),
                                    k, combine, false);
    }
    return changed;
}

bool
prop_scatter_forward(PropCtx *cx, IrInstr *s, bool combine)
{
    ScatterInfo si;
    if (!scatter_info(s, &si))
        return false;
    bool changed = false;
    if (si.n_in_batch) {
        PropGsDims d = {0};
        for (uint32_t k = 0; k < si.n_in_batch && k < si.n_idx_batch; k++) {
            d.operand[d.n] = si.in_batch[k];
            d.indices[d.n] = si.idx_batch[k];
            d.n++;
        }
        fill_output_dims(&d, si.ivd, si.window, si.n_window);
        changed |= scatter_parallel_forward(cx, s, &si, &d, combine);
    }
    if (!cx->o->is_spmd) {
        cx->rule = "scatter (not SPMD: replicated)";
        cx->from = NULL;
        for (uint32_t k = 0; k < si.n; k++)
            changed |= prop_improve_sub(cx, s, shd_replicated(cx->a), k, combine, false);
        return changed;
    }
    for (uint32_t k = 0; k < si.n; k++) {
        const ShdSharding *os = prop_sh(cx, sc_operand(s, k));
        if (!px_spatial(os))
            continue;
        cx->from = sc_operand(s, k);
        cx->rule = "scatter operand";
        changed |= prop_improve_sub(cx, s, os, k, combine, false);
    }
    bool any_update = false;
    for (uint32_t k = 0; k < si.n; k++)
        any_update |= px_spatial(prop_sh(cx, sc_update(s, &si, k)));
    if (!px_spatial(prop_sh(cx, sc_indices(s, &si))) && !any_update)
        return changed;
    PropGsDims par;
    if (scatter_parallel(cx, s, &si, &par))
        changed |= scatter_parallel_forward(cx, s, &si, &par, combine);
    const IrShape *opshape = &sc_operand(s, 0)->shape;
    for (uint32_t k = 0; k < si.n; k++) {
        const ShdSharding *us = prop_sh(cx, sc_update(s, &si, k));
        if (!px_spatial(us) || px_tile_maximal(us) || px_manual(us))
            continue;
        PropGsDims p;
        passthrough_dims(opshape, si.inserted, si.n_inserted, si.in_batch, si.n_in_batch,
                         si.window, si.n_window, si.slice, &p);
        const ShdSharding *r = px_along_dims(cx, us, p.output, p.operand, p.n, opshape->rank);
        if (!r || px_tile_maximal(r))
            continue;
        cx->from = sc_update(s, &si, k);
        cx->rule = "scatter update passthrough";
        changed |= prop_improve_sub(cx, s, r, k, combine, false);
    }
    return changed;
}

const ShdSharding *
prop_scatter_from_user(PropCtx *cx, const IrInstr *i, const IrInstr *s)
{
    ScatterInfo si;
    if (!scatter_info(s, &si))
        return NULL;
    const ShdSharding *us = prop_sh(cx, s);
    for (uint32_t k = 0; k < si.n; k++)
        if (sc_operand(s, k) == i)
            return us->kind == SHD_TUPLE ? px_sub(cx, us, &s->shape, k) : us;
    const IrInstr *idx = sc_indices(s, &si);
    const IrShape *ushape = &sc_update(s, &si, 0)->shape;
    PropGsDims c;
    connected_dims(idx->shape.rank, si.ivd, ushape->rank, si.window, si.n_window, &c);
    if (i == idx) {
        const ShdSharding *common = NULL;
        bool ok = true;
        for (uint32_t k = 0; k < si.n; k++) {
            const ShdSharding *u = prop_sh(cx, sc_update(s, &si, k));
            if (!px_spatial(u))
                continue;
            const ShdSharding *f = px_tile_maximal(u) || px_manual(u)
                                       ? u
                                       : px_along_dims(cx, u, c.output, c.indices, c.n,
                                                       idx->shape.rank);
            if (!f)
                continue;
            if (!common)
                common = f;
            else if (ok && !shd_equal(common, f) &&
                     !px_merge_if_compatible(cx, f, px_num_tiles(common), &common))
                ok = false;
            if (!ok)
                break;
        }
        if (!ok) {
            for (uint32_t k = 0; k < si.n; k++) {
                const ShdSharding *u = prop_sh(cx, sc_update(s, &si, k));
                if (px_spatial(u))
                    return px_tile_maximal(u) || px_manual(u)
                               ? u
                               : px_along_dims(cx, u, c.output, c.indices, c.n, idx->shape.rank);
            }
        }
        return common;
    }
    int64_t uk = -1;
    for (uint32_t k = 0; k < si.n; k++)
        if (sc_update(s, &si, k) == i)
            uk = k;
    if (uk < 0)
        return NULL;
    const ShdSharding *is = prop_sh(cx, idx);
    const ShdSharding *from_idx = shd_replicated(cx->a);
    if (px_spatial(is))
        from_idx = px_tile_maximal(is) || px_manual(is)
                       ? is
                       : px_along_dims(cx, is, c.indices, c.output, c.n, ushape->rank);
    if (cx->o->is_spmd) {
        const ShdSharding *os = us->kind == SHD_TUPLE ? px_sub(cx, us, &s->shape, (uint32_t)uk) : us;
        const ShdSharding *from_out = NULL;
        if (os && (px_tile_maximal(os) || px_manual(os))) {
            from_out = os;
        } else if (os) {
            PropGsDims par = {0}, imp;
            if (si.n_in_batch) {
                for (uint32_t k = 0; k < si.n_in_batch && k < si.n_idx_batch; k++) {
                    par.operand[par.n] = si.in_batch[k];
                    par.indices[par.n] = si.idx_batch[k];
                    par.n++;
                }
                fill_output_dims(&par, si.ivd, si.window, si.n_window);
            }
            if (scatter_parallel(cx, s, &si, &imp))
                append(&par, &imp);
            const ShdSharding *parallel =
                par.n ? px_along_dims(cx, os, par.operand, par.output, par.n, ushape->rank) : NULL;
            PropGsDims p;
            passthrough_dims(&sc_operand(s, 0)->shape, si.inserted, si.n_inserted, si.in_batch,
                             si.n_in_batch, si.window, si.n_window, si.slice, &p);
            const ShdSharding *pass = px_along_dims(cx, os, p.operand, p.output, p.n, ushape->rank);
            if (pass && px_tile_maximal(pass))
                pass = NULL;
            from_out = merge_two(cx, parallel, pass);
        }
        if (from_out) {
            if (from_idx && from_out->kind != SHD_TUPLE && from_idx->kind != SHD_TUPLE)
                px_merge_if_compatible(cx, from_idx, px_num_tiles(from_out) + 1, &from_out);
            if (!px_tile_maximal(from_out))
                return from_out;
        }
    }
    if (from_idx && !px_tile_maximal(from_idx))
        return from_idx;
    return NULL;
}
