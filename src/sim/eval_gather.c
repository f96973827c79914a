/* eval_gather.c - gather and scatter with full dimension numbers, including operand/input
 * batching dims and an implicit trailing index vector dim. Owns: XLA's index rules: gather
 * clamps each start so the slice fits (a slice with a zero-size dim gives zeros); scatter
 * skips an update whose whole window does not fit.
 * Does not own: the scatter combiner's arithmetic (sim_apply2). */
#include "sim/sim_int.h"

#include <string.h>

typedef struct IndexMap {
    const SimValue *ix;
    int64_t ivd;                 /* index_vector_dim; == ix->rank: implicit size-1 vector */
    int64_t out_of_ix[SIM_MAX_RANK]; /* indices dim (not ivd) -> dim of the iterated array */
    int64_t ixs[SIM_MAX_RANK];   /* strides of ix */
} IndexMap;

/* `batch` lists the iterated array's dims that are not window/offset dims, in order; they pair
 * with the indices dims other than ivd, in order. */
static bool
index_map_init(IndexMap *m, const SimValue *ix, int64_t ivd, const int64_t *batch, uint32_t nb)
{
    m->ix = ix;
    m->ivd = ivd;
    sim_strides(ix->dims, ix->rank, m->ixs);
    uint32_t p = 0;
    for (uint32_t j = 0; j < ix->rank; j++) {
        if ((int64_t)j == ivd)
            continue;
        if (p >= nb)
            return false;
        m->out_of_ix[j] = batch[p++];
    }
    return p == nb && ivd >= 0 && ivd <= ix->rank;
}

/* Component k of the index vector selected by the iterated index `it`. */
static int64_t
index_at(const IndexMap *m, const int64_t *it, int64_t k)
{
    int64_t off = 0;
    for (uint32_t j = 0; j < m->ix->rank; j++)
        off += ((int64_t)j == m->ivd ? k : it[m->out_of_ix[j]]) * m->ixs[j];
    SimElem e = m->ix->data[off];
    return sim_is_float(m->ix->dtype) ? (int64_t)e.f : e.i;
}

static uint32_t
complement(uint32_t rank, const int64_t *a, uint32_t na, const int64_t *b, uint32_t nb,
           int64_t *out)
{
    uint32_t n = 0;
    for (uint32_t d = 0; d < rank; d++) {
        bool in = false;
        for (uint32_t i = 0; i < na; i++)
            in |= a[i] == d;
        for (uint32_t i = 0; i < nb; i++)
            in |= b[i] == d;
        if (!in)
            out[n++] = d;
    }
    return n;
}

static bool
dims_ok(const int64_t *v, uint32_t n, uint32_t rank)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= rank)
            return false;
    return n <= SIM_MAX_RANK;
}

SlStatus
sim_eval_gather(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out)
{
    const SimValue *a = ops[0], *ix = ops[1];
    const int64_t *od, *csd, *smap, *obd, *sibd, *ss;
    uint32_t nod = ir_instr_ints_attr(ins, IR_ATTR_OFFSET_DIMS, &od);
    uint32_t ncsd = ir_instr_ints_attr(ins, IR_ATTR_COLLAPSED_SLICE_DIMS, &csd);
    uint32_t nsm = ir_instr_ints_attr(ins, IR_ATTR_START_INDEX_MAP, &smap);
    uint32_t nobd = ir_instr_ints_attr(ins, IR_ATTR_OPERAND_BATCHING_DIMS, &obd);
    uint32_t nsibd = ir_instr_ints_attr(ins, IR_ATTR_START_INDICES_BATCHING_DIMS, &sibd);
    uint32_t nss = ir_instr_ints_attr(ins, IR_ATTR_SLICE_SIZES, &ss);
    int64_t ivd = ix->rank;
    ir_instr_int_attr(ins, IR_ATTR_INDEX_VECTOR_DIM, &ivd);
    SimValue *r = sim_value_new_array(a->dtype, ins->shape.dims, ins->shape.rank);
    if (!r)
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    int64_t batch[SIM_MAX_RANK], offop[SIM_MAX_RANK], a_s[SIM_MAX_RANK];
    uint32_t nb = complement(r->rank, od, nod, NULL, 0, batch);
    uint32_t noff = complement(a->rank, csd, ncsd, obd, nobd, offop);
    IndexMap m;
    if (nss != a->rank || noff != nod || nobd != nsibd || !dims_ok(od, nod, r->rank) ||
        !dims_ok(smap, nsm, a->rank) || !dims_ok(obd, nobd, a->rank) ||
        !dims_ok(sibd, nsibd, ix->rank) || !index_map_init(&m, ix, ivd, batch, nb)) {
        sim_value_unref(r);
        return sim_fail(cx, ins, SL_ERR_INVALID, "gather dimension numbers do not fit");
    }
    /* A slice with a zero-size dim holds nothing: XLA's CPU backend gives zeros (the output
     * is not empty when that dim is collapsed), and reading it would leave the operand. */
    for (uint32_t d = 0; d < a->rank; d++)
        if (ss[d] == 0) {
            *out = r;
            return SL_OK;
        }
    sim_strides(a->dims, a->rank, a_s);
    int64_t o[SIM_MAX_RANK] = {0};
    for (int64_t i = 0; i < r->n; i++, sim_idx_next(o, r->dims, r->rank)) {
        int64_t start[SIM_MAX_RANK] = {0}, off = 0;
        for (uint32_t k = 0; k < nsm; k++) {
            int64_t s = index_at(&m, o, k), hi = a->dims[smap[k]] - ss[smap[k]];
            start[smap[k]] = s < 0 ? 0 : s > hi ? hi : s;
        }
        for (uint32_t k = 0; k < nobd; k++)
            start[obd[k]] = o[m.out_of_ix[sibd[k]]];
        for (uint32_t p = 0; p < noff; p++)
            start[offop[p]] += o[od[p]];
        for (uint32_t d = 0; d < a->rank; d++)
            off += start[d] * a_s[d];
        r->data[i] = a->data[off];
    }
    *out = r;
    return SL_OK;
}

typedef struct ScatterDims {
    const int64_t *uwd, *iwd, *sdod, *ibd, *sibd;
    uint32_t nuwd, niwd, nsdod, nibd, nsibd;
    int64_t winop[SIM_MAX_RANK]; /* operand dims of the window, pairing with uwd */
    int64_t wsize[SIM_MAX_RANK]; /* window extent per operand dim */
} ScatterDims;

static bool
scatter_dims(const IrInstr *ins, const SimValue *a, const SimValue *ix, const SimValue *u,
             ScatterDims *s, IndexMap *m)
{
    s->nuwd = ir_instr_ints_attr(ins, IR_ATTR_UPDATE_WINDOW_DIMS, &s->uwd);
    s->niwd = ir_instr_ints_attr(ins, IR_ATTR_INSERTED_WINDOW_DIMS, &s->iwd);
    s->nsdod = ir_instr_ints_attr(ins, IR_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS, &s->sdod);
    s->nibd = ir_instr_ints_attr(ins, IR_ATTR_INPUT_BATCHING_DIMS, &s->ibd);
    s->nsibd = ir_instr_ints_attr(ins, IR_ATTR_SCATTER_INDICES_BATCHING_DIMS, &s->sibd);
    int64_t ivd = ix->rank, batch[SIM_MAX_RANK];
    ir_instr_int_attr(ins, IR_ATTR_INDEX_VECTOR_DIM, &ivd);
    uint32_t nw = complement(a->rank, s->iwd, s->niwd, s->ibd, s->nibd, s->winop);
    uint32_t nb = complement(u->rank, s->uwd, s->nuwd, NULL, 0, batch);
    if (nw != s->nuwd || s->nibd != s->nsibd || !dims_ok(s->uwd, s->nuwd, u->rank) ||
        !dims_ok(s->sdod, s->nsdod, a->rank) || !dims_ok(s->ibd, s->nibd, a->rank) ||
        !dims_ok(s->sibd, s->nsibd, ix->rank) || !index_map_init(m, ix, ivd, batch, nb))
        return false;
    for (uint32_t d = 0; d < a->rank; d++)
        s->wsize[d] = 1;
    for (uint32_t p = 0; p < nw; p++)
        s->wsize[s->winop[p]] = u->dims[s->uwd[p]];
    return true;
}

/* Combines update element `ui` into operand offset `off` of every result: the scalar body with
 * 2k parameters (current values, then updates) returns k values. */
static SlStatus
scatter_combine(SimCtx *cx, const IrInstr *ins, const IrComputation *body, int64_t dev,
                uint32_t k, SimValue **r, SimValue *const *u, int64_t off, int64_t ui)
{
    if (k == 1)
        return sim_apply2(cx, ins, body, r[0]->dtype, r[0]->data[off], u[0]->data[ui],
                          &r[0]->data[off]);
    SimElem in[2 * SIM_MAX_RANK], res[SIM_MAX_RANK];
    IrDtype ty[2 * SIM_MAX_RANK];
    for (uint32_t j = 0; j < k; j++) {
        in[j] = r[j]->data[off], in[k + j] = u[j]->data[ui];
        ty[j] = r[j]->dtype, ty[k + j] = u[j]->dtype;
    }
    SlStatus st = sim_call_scalars(cx, ins, body, dev, in, ty, 2 * k, res, k);
    for (uint32_t j = 0; !st && j < k; j++)
        r[j]->data[off] = sim_fix(r[j]->dtype, res[j]);
    return st;
}

/* The operand offset update element `i` (index `ui`) lands on, or -1 when its window does not
 * fit. */
static int64_t
scatter_target(const ScatterDims *s, const IndexMap *m, const SimValue *a, const int64_t *rs,
               const int64_t *ui)
{
    int64_t start[SIM_MAX_RANK] = {0}, off = 0;
    for (uint32_t k = 0; k < s->nsdod; k++)
        start[s->sdod[k]] = index_at(m, ui, k);
    for (uint32_t k = 0; k < s->nibd; k++)
        start[s->ibd[k]] = ui[m->out_of_ix[s->sibd[k]]];
    for (uint32_t d = 0; d < a->rank; d++)
        if (start[d] < 0 || start[d] + s->wsize[d] > a->dims[d])
            return -1;
    for (uint32_t p = 0; p < s->nuwd; p++)
        start[s->winop[p]] += ui[s->uwd[p]];
    for (uint32_t d = 0; d < a->rank; d++)
        off += start[d] * rs[d];
    return off;
}

/* scatter(operands[k], indices, updates[k]): a tuple of k results when k > 1. */
SlStatus
sim_eval_scatter(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                 SimValue **out)
{
    uint32_t k = ins->n_operands / 2;
    if (ins->n_operands % 2 != 1 || k < 1 || k > SIM_MAX_RANK)
        return sim_fail(cx, ins, SL_ERR_INVALID, "scatter takes k operands, indices, k updates");
    const SimValue *a = ops[0], *ix = ops[k], *u = ops[k + 1];
    const IrComputation *body = ir_instr_called(ins, IR_ATTR_TO_APPLY);
    ScatterDims s;
    IndexMap m;
    bool ok = body && scatter_dims(ins, a, ix, u, &s, &m);
    for (uint32_t j = 0; ok && j < k; j++)
        ok = ops[j]->dtype != IR_DT_TUPLE && ops[k + 1 + j]->dtype != IR_DT_TUPLE &&
             ops[j]->n == a->n && ops[k + 1 + j]->n == u->n;
    if (!ok)
        return sim_fail(cx, ins, SL_ERR_INVALID, "scatter dimension numbers do not fit");
    SimValue *r[SIM_MAX_RANK] = {NULL};
    SlStatus st = SL_OK;
    for (uint32_t j = 0; !st && j < k; j++)
        if (!(r[j] = sim_value_copy(ops[j])))
            st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    int64_t rs[SIM_MAX_RANK], ui[SIM_MAX_RANK] = {0};
    sim_strides(a->dims, a->rank, rs);
    for (int64_t i = 0; !st && i < u->n; i++, sim_idx_next(ui, u->dims, u->rank)) {
        int64_t off = scatter_target(&s, &m, a, rs, ui);
        if (off >= 0)
            st = scatter_combine(cx, ins, body, dev, k, r, ops + k + 1, off, i);
    }
    if (!st)
        *out = k == 1 ? sim_value_ref(r[0]) : sim_value_new_tuple(r, k);
    if (!st && !*out)
        st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; j < k; j++)
        sim_value_unref(r[j]);
    return st;
}
