/* eval_shape.c - data movement: broadcast, reshape/bitcast, transpose, slice, concatenate,
 * pad (negative and interior), dynamic-slice and dynamic-update-slice (start indices clamped
 * as XLA does), reverse. Owns: index arithmetic between an output and its operand. Does not own:
 * element conversion (none happens here). Invariant: each kernel walks its output once in
 * row-major order, so the work is linear in the output size. */
#include "sim/sim_int.h"

#include <string.h>

static SimValue *
result_for(const IrInstr *ins, const SimValue *like)
{
    return sim_value_new_array(like->dtype, ins->shape.dims, ins->shape.rank);
}

static SlStatus
eval_broadcast(SimCtx *cx, const IrInstr *ins, const SimValue *a, SimValue *r)
{
    const int64_t *dims;
    uint32_t n = ir_instr_ints_attr(ins, IR_ATTR_DIMENSIONS, &dims);
    if (n != a->rank)
        return sim_fail(cx, ins, SL_ERR_INVALID, "dimensions do not match the operand rank");
    int64_t as[SIM_MAX_RANK], map[SIM_MAX_RANK] = {0}, idx[SIM_MAX_RANK] = {0};
    sim_strides(a->dims, a->rank, as);
    for (uint32_t i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] >= r->rank)
            return sim_fail(cx, ins, SL_ERR_INVALID, "broadcast dimension out of range");
        map[dims[i]] = as[i]; /* output dim -> operand stride; 0 for new dims */
    }
    for (int64_t i = 0; i < r->n; i++, sim_idx_next(idx, r->dims, r->rank)) {
        int64_t off = 0;
        for (uint32_t d = 0; d < r->rank; d++)
            off += idx[d] * map[d];
        r->data[i] = a->data[off];
    }
    return SL_OK;
}

static SlStatus
eval_transpose(SimCtx *cx, const IrInstr *ins, const SimValue *a, SimValue *r)
{
    const int64_t *perm;
    uint32_t n = ir_instr_ints_attr(ins, IR_ATTR_DIMENSIONS, &perm);
    if (n != a->rank || n != r->rank)
        return sim_fail(cx, ins, SL_ERR_INVALID, "bad permutation");
    int64_t as[SIM_MAX_RANK], map[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    sim_strides(a->dims, a->rank, as);
    for (uint32_t i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= n)
            return sim_fail(cx, ins, SL_ERR_INVALID, "bad permutation");
        map[i] = as[perm[i]];
    }
    for (int64_t i = 0; i < r->n; i++, sim_idx_next(idx, r->dims, r->rank)) {
        int64_t off = 0;
        for (uint32_t d = 0; d < r->rank; d++)
            off += idx[d] * map[d];
        r->data[i] = a->data[off];
    }
    return SL_OK;
}

/* Arrays as rows of their minor dimension: the row length, and in *lead the number of leading
 * dims to iterate (rank - 1; 0 for a scalar, one row of one element). */
static int64_t
row_len(const SimValue *v, uint32_t *lead)
{
    *lead = v->rank ? v->rank - 1 : 0;
    return v->rank ? v->dims[v->rank - 1] : 1;
}

static SlStatus
eval_slice(SimCtx *cx, const IrInstr *ins, const SimValue *a, SimValue *r)
{
    const IrAttr *s = ir_instr_find_attr(ins, IR_ATTR_SLICE);
    if (!s || s->u.slice.n != a->rank)
        return sim_fail(cx, ins, SL_ERR_INVALID, "slice ranges do not match the rank");
    int64_t as[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    sim_strides(a->dims, a->rank, as);
    for (uint32_t d = 0; d < a->rank; d++) {
        const IrSliceDim *sd = &s->u.slice.v[d];
        if (sd->start < 0 || sd->stride < 1 ||
            (r->dims[d] > 0 && sd->start + (r->dims[d] - 1) * sd->stride >= a->dims[d]))
            return sim_fail(cx, ins, SL_ERR_INVALID, "slice out of bounds in dim %u", d);
    }
    uint32_t lead;
    int64_t len = row_len(r, &lead);
    const IrSliceDim *last = r->rank ? &s->u.slice.v[r->rank - 1] : NULL;
    for (int64_t row = 0; len > 0 && row < r->n / len; row++, sim_idx_next(idx, r->dims, lead)) {
        int64_t off = 0;
        for (uint32_t d = 0; d < lead; d++)
            off += (s->u.slice.v[d].start + idx[d] * s->u.slice.v[d].stride) * as[d];
        SimElem *dst = r->data + row * len;
        if (!last)
            dst[0] = a->data[off];
        else if (last->stride == 1)
            memcpy(dst, a->data + off + last->start, (size_t)len * sizeof *dst);
        else
            for (int64_t j = 0; j < len; j++)
                dst[j] = a->data[off + last->start + j * last->stride];
    }
    return SL_OK;
}

static SlStatus
eval_concat(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue *r)
{
    const int64_t *dims;
    if (ir_instr_ints_attr(ins, IR_ATTR_DIMENSIONS, &dims) != 1 || dims[0] < 0 ||
        dims[0] >= r->rank)
        return sim_fail(cx, ins, SL_ERR_INVALID, "concatenate needs one dimension");
    uint32_t cd = (uint32_t)dims[0];
    /* Copy runs: for each outer index, each operand contributes a contiguous block. */
    int64_t outer = 1, inner = 1, at = 0;
    for (uint32_t d = 0; d < cd; d++)
        outer *= r->dims[d];
    for (uint32_t d = cd + 1; d < r->rank; d++)
        inner *= r->dims[d];
    for (int64_t o = 0; o < outer; o++) {
        for (uint32_t k = 0; k < ins->n_operands; k++) {
            int64_t blk = ops[k]->rank == r->rank ? ops[k]->dims[cd] * inner : -1;
            if (blk < 0 || ops[k]->n != outer * blk || at + blk > r->n)
                return sim_fail(cx, ins, SL_ERR_INVALID, "operand %u does not fit", k);
            if (blk > 0)
                memcpy(r->data + at, ops[k]->data + o * blk, (size_t)blk * sizeof *r->data);
            at += blk;
        }
    }
    return at == r->n ? SL_OK : sim_fail(cx, ins, SL_ERR_INVALID, "operand sizes do not add up");
}

static SlStatus
eval_pad(SimCtx *cx, const IrInstr *ins, const SimValue *a, const SimValue *pv, SimValue *r)
{
    const IrAttr *p = ir_instr_find_attr(ins, IR_ATTR_PADDING);
    if (!p || p->u.pad.n != a->rank || pv->n != 1)
        return sim_fail(cx, ins, SL_ERR_INVALID, "padding does not match the rank");
    int64_t as[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    sim_strides(a->dims, a->rank, as);
    uint32_t lead;
    int64_t len = row_len(r, &lead);
    for (int64_t row = 0; len > 0 && row < r->n / len; row++, sim_idx_next(idx, r->dims, lead)) {
        int64_t off = 0;
        bool inside = true;
        for (uint32_t d = 0; d < lead && inside; d++) {
            const IrPadDim *pd = &p->u.pad.v[d];
            int64_t q = idx[d] - pd->lo, step = pd->interior + 1;
            inside = q >= 0 && q % step == 0 && q / step < a->dims[d];
            off += inside ? (q / step) * as[d] : 0;
        }
        SimElem *dst = r->data + row * len;
        for (int64_t j = 0; j < len; j++)
            dst[j] = pv->data[0];
        if (!inside)
            continue;
        if (lead == r->rank) {
            dst[0] = a->data[off];
            continue;
        }
        const IrPadDim *pd = &p->u.pad.v[lead];
        int64_t step = pd->interior + 1, n_last = a->dims[lead];
        for (int64_t q = 0; q < n_last; q++) {
            int64_t j = pd->lo + q * step;
            if (j >= 0 && j < len)
                dst[j] = a->data[off + q];
        }
    }
    return SL_OK;
}

/* Start indices from scalar operands ops[first..], or from one index vector ops[first] (the
 * older packed form), clamped into [0, dim - size]. */
static void
clamped_starts(SimValue *const *ops, uint32_t first, bool packed, const SimValue *a,
               const int64_t *sizes, int64_t *start)
{
    for (uint32_t d = 0; d < a->rank; d++) {
        SimElem e = packed ? ops[first]->data[d] : ops[first + d]->data[0];
        IrDtype t = ops[packed ? first : first + d]->dtype;
        int64_t s = sim_is_float(t) ? (int64_t)e.f : e.i, hi = a->dims[d] - sizes[d];
        start[d] = s < 0 ? 0 : s > hi ? hi : s;
    }
}

/* Whether the start indices come as one vector of rank elements after `first` operands. */
static bool
is_packed(const IrInstr *ins, SimValue *const *ops, uint32_t first, uint32_t rank)
{
    return ins->n_operands == first + 1 && rank != 1 && ops[first]->rank == 1 &&
           ops[first]->n == rank;
}

static SlStatus
eval_dynamic_slice(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue *r)
{
    const SimValue *a = ops[0];
    bool packed = is_packed(ins, ops, 1, a->rank);
    if ((!packed && ins->n_operands != a->rank + 1) || r->rank != a->rank)
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "dynamic-slice needs one scalar per dim "
                        "or one index vector");
    int64_t start[SIM_MAX_RANK], as[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    clamped_starts(ops, 1, packed, a, r->dims, start);
    sim_strides(a->dims, a->rank, as);
    uint32_t lead;
    int64_t len = row_len(r, &lead);
    for (int64_t row = 0; len > 0 && row < r->n / len; row++, sim_idx_next(idx, r->dims, lead)) {
        int64_t off = lead < r->rank ? start[lead] : 0;
        for (uint32_t d = 0; d < lead; d++)
            off += (start[d] + idx[d]) * as[d];
        memcpy(r->data + row * len, a->data + off, (size_t)len * sizeof *r->data);
    }
    return SL_OK;
}

static SlStatus
eval_dus(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue *r)
{
    const SimValue *a = ops[0], *u = ops[1];
    bool packed = is_packed(ins, ops, 2, a->rank);
    if ((!packed && ins->n_operands != a->rank + 2) || u->rank != a->rank)
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED,
                        "dynamic-update-slice needs one scalar per dim or one index vector");
    int64_t start[SIM_MAX_RANK], rs[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    for (uint32_t d = 0; d < a->rank; d++)
        if (u->dims[d] > a->dims[d])
            return sim_fail(cx, ins, SL_ERR_INVALID, "update larger than the operand");
    clamped_starts(ops, 2, packed, a, u->dims, start);
    sim_strides(r->dims, r->rank, rs);
    if (a->n > 0)
        memcpy(r->data, a->data, (size_t)a->n * sizeof *r->data);
    uint32_t lead;
    int64_t len = row_len(u, &lead);
    for (int64_t row = 0; len > 0 && row < u->n / len; row++, sim_idx_next(idx, u->dims, lead)) {
        int64_t off = lead < r->rank ? start[lead] : 0;
        for (uint32_t d = 0; d < lead; d++)
            off += (start[d] + idx[d]) * rs[d];
        memcpy(r->data + off, u->data + row * len, (size_t)len * sizeof *r->data);
    }
    return SL_OK;
}

static SlStatus
eval_reverse(SimCtx *cx, const IrInstr *ins, const SimValue *a, SimValue *r)
{
    const int64_t *dims;
    uint32_t n = ir_instr_ints_attr(ins, IR_ATTR_DIMENSIONS, &dims);
    bool flip[SIM_MAX_RANK] = {false};
    for (uint32_t i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] >= a->rank)
            return sim_fail(cx, ins, SL_ERR_INVALID, "reverse dimension out of range");
        flip[dims[i]] = true;
    }
    int64_t as[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    sim_strides(a->dims, a->rank, as);
    uint32_t lead;
    int64_t len = row_len(r, &lead);
    bool flip_last = lead < r->rank && flip[lead];
    for (int64_t row = 0; len > 0 && row < r->n / len; row++, sim_idx_next(idx, r->dims, lead)) {
        int64_t off = 0;
        for (uint32_t d = 0; d < lead; d++)
            off += (flip[d] ? a->dims[d] - 1 - idx[d] : idx[d]) * as[d];
        SimElem *dst = r->data + row * len;
        for (int64_t j = 0; j < len; j++)
            dst[j] = a->data[off + (flip_last ? len - 1 - j : j)];
    }
    return SL_OK;
}

static SlStatus
dispatch(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue *r)
{
    switch (ins->op) {
    case IR_OP_BROADCAST: return eval_broadcast(cx, ins, ops[0], r);
    case IR_OP_RESHAPE:
    case IR_OP_BITCAST:
        if (ops[0]->n != r->n)
            return sim_fail(cx, ins, SL_ERR_INVALID, "element counts differ");
        if (r->n > 0)
            memcpy(r->data, ops[0]->data, (size_t)r->n * sizeof *r->data);
        return SL_OK;
    case IR_OP_TRANSPOSE: return eval_transpose(cx, ins, ops[0], r);
    case IR_OP_SLICE: return eval_slice(cx, ins, ops[0], r);
    case IR_OP_CONCATENATE: return eval_concat(cx, ins, ops, r);
    case IR_OP_PAD: return eval_pad(cx, ins, ops[0], ops[1], r);
    case IR_OP_DYNAMIC_SLICE: return eval_dynamic_slice(cx, ins, ops, r);
    case IR_OP_DYNAMIC_UPDATE_SLICE: return eval_dus(cx, ins, ops, r);
    case IR_OP_REVERSE: return eval_reverse(cx, ins, ops[0], r);
    default: return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "opcode not supported by the evaluator");
    }
}

SlStatus
sim_eval_shape(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out)
{
    if (ins->shape.dtype == IR_DT_TUPLE || ops[0]->dtype == IR_DT_TUPLE ||
        ins->shape.rank > SIM_MAX_RANK)
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "tuple or rank above %d", SIM_MAX_RANK);
    if (ins->op == IR_OP_BITCAST && ops[0]->dtype != ins->shape.dtype)
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "bitcast changing the element type");
    SimValue *r = result_for(ins, ops[0]);
    if (!r)
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    SlStatus st = dispatch(cx, ins, ops, r);
    if (st) {
        sim_value_unref(r);
        return st;
    }
    *out = r;
    return SL_OK;
}
