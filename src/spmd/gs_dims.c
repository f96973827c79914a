/* gs_dims.c - the dimension classes of a gather or scatter (gspmd.md F.3, F.4; seed:
 * GatherScatterDims and its index-parallel, operand-passthrough, index-passthrough, explicit-
 * batch and trivially-sliced finders). Owns: reading the dimension numbers under the gather's
 * names, and pairing operand, indices and output/update dims per class, including the
 * recognition of iota indices (through while loops and their sole callers) for the
 * index-parallel class. Does not own: shardings of those dims (gs_level.c) or any emission.
 * Invariant: pure functions of the instruction and its module; nothing is emitted. */
#include "spmd/gs_int.h"

#include <string.h>

bool
spmd_gs_has_dim(const int64_t *v, uint32_t n, int64_t d)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == d)
            return true;
    return false;
}

static uint32_t
ints_attr(const IrInstr *i, IrAttrKey k, const int64_t **v)
{
    return ir_instr_ints_attr(i, k, v);
}

void
spmd_gs_read_dims(const IrInstr *hlo, bool is_scatter, GsDims *dn)
{
    memset(dn, 0, sizeof(*dn));
    dn->n_offset = ints_attr(hlo, is_scatter ? IR_ATTR_UPDATE_WINDOW_DIMS : IR_ATTR_OFFSET_DIMS,
                             &dn->offset);
    dn->n_collapsed = ints_attr(
        hlo, is_scatter ? IR_ATTR_INSERTED_WINDOW_DIMS : IR_ATTR_COLLAPSED_SLICE_DIMS,
        &dn->collapsed);
    dn->n_index_map = ints_attr(
        hlo, is_scatter ? IR_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS : IR_ATTR_START_INDEX_MAP,
        &dn->index_map);
    dn->n_op_batch = ints_attr(
        hlo, is_scatter ? IR_ATTR_INPUT_BATCHING_DIMS : IR_ATTR_OPERAND_BATCHING_DIMS,
        &dn->op_batch);
    dn->n_idx_batch = ints_attr(hlo,
                                is_scatter ? IR_ATTR_SCATTER_INDICES_BATCHING_DIMS
                                           : IR_ATTR_START_INDICES_BATCHING_DIMS,
                                &dn->idx_batch);
    if (!ir_instr_int_attr(hlo, IR_ATTR_INDEX_VECTOR_DIM, &dn->ivd))
        dn->ivd = 0;
}

/* ---- dimension classes ---- */

/* k-th batch (non-offset) output dim for indices dim `idx_dim` (FillOutputDimsWithIndicesDims). */
int64_t
spmd_gs_out_dim_of_idx(const GsDims *dn, int64_t idx_dim, uint32_t out_rank)
{
    int64_t k = idx_dim - (idx_dim > dn->ivd ? 1 : 0);
    for (uint32_t o = 0; o < out_rank; o++)
        if (!spmd_gs_has_dim(dn->offset, dn->n_offset, o) && k-- == 0)
            return o;
    return -1;
}

/* Operand dims whose slice spans the whole dim, with their offset (window) output dims. */
void
spmd_gs_operand_passthrough_dims(const Gs *p, GsPairs *r)
{
    r->n = 0;
    uint32_t k = 0;
    const IrShape *ob = p->ops[0].base_shape;
    for (uint32_t d = 0; d < ob->rank; d++) {
        if (spmd_gs_has_dim(p->dn.collapsed, p->dn.n_collapsed, d) ||
            spmd_gs_has_dim(p->dn.op_batch, p->dn.n_op_batch, d))
            continue;
        if (k < p->dn.n_offset && p->slice[d] == ob->dims[d]) {
            r->op[r->n] = d;
            r->out[r->n++] = p->dn.offset[k];
        }
        k++;
    }
}

/* The only instruction of `m` calling `c` (through any computation attribute), else NULL. */
static const IrInstr *
sole_caller(const IrModule *m, const IrComputation *c)
{
    const IrInstr *found = NULL;
    for (uint32_t k = 0; m && k < m->n_comps; k++) {
        const IrComputation *cc = m->comps[k];
        for (uint32_t j = 0; j < cc->n_instrs; j++) {
            const IrInstr *i = cc->instrs[j];
            for (uint16_t a = 0; a < i->n_attrs; a++) {
                const IrAttr *at = &i->attrs[a];
                bool calls = false;
                if (ir_attr_kind(at->key) == IR_AK_COMP)
                    calls = at->u.comp == c;
                else if (ir_attr_kind(at->key) == IR_AK_COMPS)
                    for (uint32_t b = 0; b < at->u.comps.n; b++)
                        calls = calls || at->u.comps.v[b] == c;
                if (!calls)
                    continue;
                if (found && found != i)
                    return NULL;
                found = i;
            }
        }
    }
    return found;
}

/* First dim (of size > 1) along which every element of an s32 constant equals its own
 * index on that dim; -1 when none or when the literal is not a plain list of integers. The
 * literal lists elements in row-major order, so a running multi-index tracks each value. */
static int64_t
constant_iota_dim(const IrInstr *i)
{
    uint32_t r = i->shape.rank;
    int64_t at[GS_R] = {0}, count = 0, total = 1;
    bool is_iota[GS_R];
    if (r == 0 || r > GS_R)
        return -1;
    for (uint32_t d = 0; d < r; d++) {
        is_iota[d] = true;
        total *= i->shape.dims[d];
    }
    const char *s = i->literal.ptr, *e = s + i->literal.len;
    while (s < e) {
        bool neg = *s == '-';
        if (!neg && (*s < '0' || *s > '9')) {
            if (!strchr("{}, \t\r\n", *s))
                return -1;
            s++;
            continue;
        }
        s += neg;
        int64_t v = 0;
        while (s < e && *s >= '0' && *s <= '9' && v < INT64_MAX / 10)
            v = v * 10 + (*s++ - '0');
        if (count++ >= total)
            return -1;
        for (uint32_t d = 0; d < r; d++)
            is_iota[d] = is_iota[d] && !neg && v == at[d];
        for (uint32_t d = r; d-- > 0;)
            if (++at[d] < i->shape.dims[d])
                break;
            else
                at[d] = 0;
    }
    for (uint32_t d = 0; count == total && d < r; d++)
        if (is_iota[d] && i->shape.dims[d] > 1)
            return d;
    return -1;
}

/* Iota dim of a source index value: iota, an s32 constant counting along a dim, broadcasts, and
 * (GetDimensionForIota) element k of a loop body's or branch's parameter when the caller's
 * tuple operand carries such a value at k and, for a while, the body passes element k on
 * unchanged. */
static int64_t
iota_dim(const IrModule *m, const IrInstr *i, uint32_t depth)
{
    if (depth > GS_R)
        return -1;
    if (i->op == IR_OP_GET_TUPLE_ELEMENT && i->n_operands == 1 &&
        i->operands[0]->op == IR_OP_PARAMETER && i->parent && !i->parent->is_entry) {
        int64_t k = -1;
        const IrInstr *call = sole_caller(m, i->parent);
        if (!ir_instr_int_attr(i, IR_ATTR_INDEX, &k) || k < 0 || !call)
            return -1;
        const IrInstr *arg = NULL;
        if (call->op == IR_OP_WHILE && call->n_operands == 1 &&
            ir_instr_called(call, IR_ATTR_BODY) == i->parent) {
            const IrInstr *root = i->parent->root;
            if (root && root->op == IR_OP_TUPLE && (uint64_t)k < root->n_operands &&
                root->operands[k] == i)
                arg = call->operands[0];
        } else if (call->op == IR_OP_CONDITIONAL) {
            const IrAttr *br = ir_instr_find_attr(call, IR_ATTR_BRANCH_COMPUTATIONS);
            for (uint32_t b = 0; br && b < br->u.comps.n; b++)
                if (br->u.comps.v[b] == i->parent && b + 1 < call->n_operands)
                    arg = call->operands[b + 1];
            /* the predicated form: true_computation takes operand 1, false_computation 2 */
            if (!br && call->n_operands == 3)
                arg = ir_instr_called(call, IR_ATTR_TRUE_COMPUTATION) == i->parent
                          ? call->operands[1]
                      : ir_instr_called(call, IR_ATTR_FALSE_COMPUTATION) == i->parent
                          ? call->operands[2]
                          : NULL;
        }
        if (!arg || arg->op != IR_OP_TUPLE || (uint64_t)k >= arg->n_operands)
            return -1;
        return iota_dim(m, arg->operands[k], depth + 1);
    }
    if (i->op == IR_OP_IOTA) {
        int64_t d = -1;
        return ir_instr_int_attr(i, IR_ATTR_IOTA_DIMENSION, &d) ? d : -1;
    }
    if (i->op == IR_OP_BROADCAST && i->n_operands == 1) {
        const int64_t *bd = NULL;
        uint32_t n = ir_instr_ints_attr(i, IR_ATTR_DIMENSIONS, &bd);
        int64_t d = iota_dim(m, i->operands[0], depth + 1);
        return d >= 0 && (uint32_t)d < n ? bd[d] : -1;
    }
    if (i->op != IR_OP_CONSTANT || i->shape.dtype != IR_DT_S32)
        return -1;
    return constant_iota_dim(i);
}

/* Index-parallel dims (GetGatherScatterBatchParallelDims) from the source indices producer. */
bool
spmd_gs_index_parallel_dims(const Gs *p, GsPairs *r)
{
    const IrInstr *ind = p->hlo->operands[p->is_scatter ? p->n : 1];
    const IrInstr *op = p->hlo->operands[0];
    int64_t in_dim[GS_R];
    uint32_t m = p->dn.n_index_map < GS_R ? p->dn.n_index_map : GS_R;
    for (uint32_t i = 0; i < m; i++)
        in_dim[i] = -1;
    const IrInstr *c = ind;
    while (c->op == IR_OP_COPY && c->n_operands == 1)
        c = c->operands[0];
    const int64_t *cd = NULL;
    if (c->op == IR_OP_CONCATENATE && ir_instr_ints_attr(c, IR_ATTR_DIMENSIONS, &cd) == 1 &&
        cd[0] == p->dn.ivd) {
        uint32_t at = 0;
        for (uint32_t k = 0; k < c->n_operands; k++) {
            const IrInstr *o = c->operands[k];
            int64_t cnt = (int64_t)o->shape.rank > p->dn.ivd ? o->shape.dims[p->dn.ivd] : 1;
            int64_t d = iota_dim(p->m, o, 0);
            for (int64_t j = 0; j < cnt && at < m; j++, at++)
                in_dim[at] = d != p->dn.ivd ? d : -1;
        }
    } else {
        int64_t d = iota_dim(p->m, ind, 0);
        for (uint32_t i = 0; i < m && d >= 0 && d != p->dn.ivd; i++)
            in_dim[i] = d;
    }
    r->n = 0;
    for (uint32_t i = 0; i < m; i++) {
        int64_t id = in_dim[i], od = p->dn.index_map[i];
        if (id < 0 || spmd_gs_has_dim(p->dn.idx_batch, p->dn.n_idx_batch, id))
            continue;
        if (spmd_gs_has_dim(r->idx, r->n, id))
            return false;
        if (p->slice[od] != 1)
            continue;
        if (op->shape.dims[od] != ind->shape.dims[id])
            return false;
        r->op[r->n] = od;
        r->idx[r->n++] = id;
    }
    for (uint32_t i = 0; i < r->n; i++)
        r->out[i] = spmd_gs_out_dim_of_idx(&p->dn, r->idx[i], p->out_base->rank + 0);
    return r->n > 0;
}

/* Indices dims (not ivd, not batching, not index-parallel) and their output/update dims. */
void
spmd_gs_index_passthrough_dims(const Gs *p, uint32_t out_rank, GsPairs *r)
{
    GsPairs par;
    bool has_par = spmd_gs_index_parallel_dims(p, &par);
    uint32_t ir = p->idx.base_shape->rank;
    r->n = 0;
    for (uint32_t d = 0; d < ir; d++) {
        if ((int64_t)d == p->dn.ivd || spmd_gs_has_dim(p->dn.idx_batch, p->dn.n_idx_batch, d) ||
            (has_par && spmd_gs_has_dim(par.idx, par.n, d)))
            continue;
        int64_t o = spmd_gs_out_dim_of_idx(&p->dn, d, out_rank);
        if (o < 0)
            continue;
        r->idx[r->n] = d;
        r->out[r->n++] = o;
    }
}

bool
spmd_gs_explicit_batch_dims(const Gs *p, uint32_t out_rank, GsPairs *r)
{
    r->n = 0;
    if (p->dn.n_op_batch == 0 || p->dn.n_op_batch != p->dn.n_idx_batch)
        return false;
    for (uint32_t i = 0; i < p->dn.n_op_batch && i < GS_R; i++) {
        r->op[i] = p->dn.op_batch[i];
        r->idx[i] = p->dn.idx_batch[i];
        r->out[i] = spmd_gs_out_dim_of_idx(&p->dn, r->idx[i], out_rank);
        r->n++;
    }
    return true;
}

/* Sharded operand dims indexed with slice size 1 (GatherScatterOperandPartitionedOnTrivial..). */
uint32_t
spmd_gs_trivial_sliced_dims(const Gs *p, int64_t *dims)
{
    const ShdSharding *s = p->ops[0].sharding;
    if (!shd_is_tiled(s))
        return 0;
    uint32_t n = 0;
    int64_t parts = 1;
    for (uint32_t i = 0; i < p->dn.n_index_map; i++) {
        int64_t d = p->dn.index_map[i];
        if (p->slice[d] == 1 && !spmd_gs_has_dim(dims, n, d)) {
            parts *= shd_dim_shards(s, (uint32_t)d);
            dims[n++] = d;
        }
    }
    return parts > 1 ? n : 0;
}
