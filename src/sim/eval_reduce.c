/* eval_reduce.c - kernels that apply a called computation: reduce (variadic), reduce-window
 * (variadic, base and window dilation, padding), select-and-scatter, and sort (stable, any
 * comparator). Owns: the order in which elements meet the body, which follows XLA's evaluator
 * (row-major over the reduced positions). Does not own: the body's arithmetic (a recognised
 * `op(p0, p1)` body takes sim_apply2's fast path; any other body is interpreted). */
#include "sim/sim_int.h"

#include <stdlib.h>
#include <string.h>

#define SIM_MAX_VARIADIC 16 /* operands of a variadic reduce, reduce-window or sort */

/* k accumulators and k new elements through a body with 2k scalar parameters. */
typedef struct Body {
    SimCtx *cx;
    const IrInstr *ins;
    const IrComputation *comp;
    int64_t dev;
    uint32_t k;
    int fast_op;       /* the body's recognised scalar binary op, or -1 (sim_fast_binop) */
    bool fast_swapped;
    IrDtype t[SIM_MAX_VARIADIC];
    SimValue *args[2 * SIM_MAX_VARIADIC];
} Body;

static SlStatus
body_init(Body *b, SimCtx *cx, const IrInstr *ins, IrAttrKey key, int64_t dev, uint32_t k,
          SimValue *const *ops)
{
    memset(b, 0, sizeof *b);
    b->cx = cx, b->ins = ins, b->dev = dev, b->k = k;
    b->comp = ir_instr_called(ins, key);
    if (!b->comp)
        return sim_fail(cx, ins, SL_ERR_INVALID, "missing called computation");
    if (k > SIM_MAX_VARIADIC)
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "more than %d operands", SIM_MAX_VARIADIC);
    SimPlan *p;
    SlStatus st = sim_plan_get(cx, b->comp, &p);
    if (st)
        return st;
    b->fast_op = p->fast_op;
    b->fast_swapped = p->fast_swapped;
    for (uint32_t j = 0; j < k; j++) {
        b->t[j] = ops[j]->dtype;
        if (!(b->args[j] = sim_value_new_array(b->t[j], NULL, 0)) ||
            !(b->args[k + j] = sim_value_new_array(b->t[j], NULL, 0)))
            return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    }
    return SL_OK;
}

static void
body_fini(Body *b)
{
    for (uint32_t j = 0; j < 2 * SIM_MAX_VARIADIC; j++)
        sim_value_unref(b->args[j]);
}

/* acc[j] = body(acc..., x...)[j] */
static SlStatus
body_apply(Body *b, SimElem *acc, const SimElem *x)
{
    if (b->k == 1 && b->fast_op >= 0) { /* no plan lookup in the hot loop */
        IrOp op = (IrOp)b->fast_op;
        acc[0] = sim_fix(b->t[0], b->fast_swapped ? sim_binop(op, b->t[0], x[0], acc[0])
                                                  : sim_binop(op, b->t[0], acc[0], x[0]));
        return SL_OK;
    }
    if (b->k == 1)
        return sim_apply2(b->cx, b->ins, b->comp, b->t[0], acc[0], x[0], &acc[0]);
    SimElem in[2 * SIM_MAX_VARIADIC];
    IrDtype ty[2 * SIM_MAX_VARIADIC];
    for (uint32_t j = 0; j < b->k; j++) {
        in[j] = acc[j], in[b->k + j] = x[j];
        ty[j] = ty[b->k + j] = b->t[j];
    }
    SlStatus st = sim_call_scalars(b->cx, b->ins, b->comp, b->dev, in, ty, 2 * b->k, acc, b->k);
    for (uint32_t j = 0; !st && j < b->k; j++)
        acc[j] = sim_fix(b->t[j], acc[j]);
    return st;
}

/* k arrays of `dims`, returned as one array (k == 1) or a tuple. */
static SlStatus
make_results(SimCtx *cx, const IrInstr *ins, SimValue *const *inits, uint32_t k,
             SimValue **res, SimValue **out)
{
    const IrShape *s = &ins->shape;
    for (uint32_t j = 0; j < k; j++) {
        const IrShape *sj = s->dtype == IR_DT_TUPLE ? (j < s->n_elems ? &s->elems[j] : NULL) : s;
        if (!sj || sj->dtype == IR_DT_TUPLE)
            return sim_fail(cx, ins, SL_ERR_INVALID, "result shape does not match the inputs");
        res[j] = sim_value_new_array(inits[j]->dtype, sj->dims, sj->rank);
        if (!res[j])
            return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < res[j]->n; i++)
            res[j]->data[i] = inits[j]->data[0];
    }
    *out = k == 1 ? sim_value_ref(res[0]) : sim_value_new_tuple(res, k);
    return *out ? SL_OK : sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
}

static SlStatus
eval_reduce_body(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops, uint32_t k,
                 SimValue **res)
{
    const SimValue *a = ops[0];
    const int64_t *dims;
    uint32_t nd = ir_instr_ints_attr(ins, IR_ATTR_DIMENSIONS, &dims);
    bool red[SIM_MAX_RANK] = {false};
    for (uint32_t i = 0; i < nd; i++) {
        if (dims[i] < 0 || dims[i] >= a->rank)
            return sim_fail(cx, ins, SL_ERR_INVALID, "reduce dimension out of range");
        red[dims[i]] = true;
    }
    int64_t map[SIM_MAX_RANK] = {0}, rs[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0};
    sim_strides(res[0]->dims, res[0]->rank, rs);
    for (uint32_t d = 0, o = 0; d < a->rank; d++)
        if (!red[d])
            map[d] = o < res[0]->rank ? rs[o++] : 0;
    Body b;
    SlStatus st = body_init(&b, cx, ins, IR_ATTR_TO_APPLY, dev, k, ops);
    for (int64_t i = 0; !st && i < a->n; i++, sim_idx_next(idx, a->dims, a->rank)) {
        int64_t off = 0;
        SimElem acc[SIM_MAX_VARIADIC], x[SIM_MAX_VARIADIC];
        for (uint32_t d = 0; d < a->rank; d++)
            off += idx[d] * map[d];
        for (uint32_t j = 0; j < k; j++) {
            acc[j] = res[j]->data[off];
            x[j] = ops[j]->data[i];
        }
        st = body_apply(&b, acc, x);
        for (uint32_t j = 0; !st && j < k; j++)
            res[j]->data[off] = acc[j];
    }
    body_fini(&b);
    return st;
}

/* Per dim d and output index o_d: the operand offsets (times the dim's stride) of the window
 * positions that land on an operand element, in window order; padding and the holes between
 * dilated base elements are left out. tab[d] holds out_dims[d] rows of wsize[d] entries. */
typedef struct WinTab {
    int64_t *off[SIM_MAX_RANK];
    int64_t *cnt[SIM_MAX_RANK];
} WinTab;

static void
wintab_fini(WinTab *t, uint32_t rank)
{
    for (uint32_t d = 0; d < rank; d++) {
        free(t->off[d]);
        free(t->cnt[d]);
    }
}

static bool
wintab_init(WinTab *t, const IrWindowDim *win, const SimValue *a, const int64_t *as,
            const int64_t *out_dims, const int64_t *wsize)
{
    memset(t, 0, sizeof *t);
    for (uint32_t d = 0; d < a->rank; d++) {
        const IrWindowDim *wd = &win[d];
        t->off[d] = malloc((size_t)(out_dims[d] * wsize[d] + 1) * sizeof *t->off[d]);
        t->cnt[d] = malloc((size_t)(out_dims[d] + 1) * sizeof *t->cnt[d]);
        if (!t->off[d] || !t->cnt[d]) {
            wintab_fini(t, d + 1);
            return false;
        }
        for (int64_t o = 0; o < out_dims[d]; o++) {
            int64_t n = 0, *row = t->off[d] + o * wsize[d];
            for (int64_t w = 0; w < wsize[d]; w++) {
                int64_t p = o * wd->stride + w * wd->rhs_dilate - wd->pad_lo;
                if (p >= 0 && p % wd->lhs_dilate == 0 && p / wd->lhs_dilate < a->dims[d])
                    row[n++] = (p / wd->lhs_dilate) * as[d];
            }
            t->cnt[d][o] = n;
        }
    }
    return true;
}

static SlStatus
window_of(SimCtx *cx, const IrInstr *ins, const SimValue *a, const IrWindowDim **win,
          int64_t *wsize)
{
    const IrAttr *w = ir_instr_find_attr(ins, IR_ATTR_WINDOW);
    if (!w || w->u.window.n != a->rank)
        return sim_fail(cx, ins, SL_ERR_INVALID, "window does not match the operand rank");
    for (uint32_t d = 0; d < a->rank; d++) {
        const IrWindowDim *wd = &w->u.window.v[d];
        if (wd->stride < 1 || wd->lhs_dilate < 1 || wd->rhs_dilate < 1 || wd->reversal)
            return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "window form in dim %u", d);
        wsize[d] = wd->size;
    }
    *win = w->u.window.v;
    return SL_OK;
}

static SlStatus
eval_reduce_window_body(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                        uint32_t k, SimValue **res)
{
    const SimValue *a = ops[0];
    const IrWindowDim *win;
    int64_t wsize[SIM_MAX_RANK], as[SIM_MAX_RANK], o[SIM_MAX_RANK] = {0};
    uint32_t rank = a->rank;
    SlStatus st = window_of(cx, ins, a, &win, wsize);
    if (st)
        return st;
    if (res[0]->rank != rank)
        return sim_fail(cx, ins, SL_ERR_INVALID, "result rank differs from the operand's");
    sim_strides(a->dims, rank, as);
    WinTab tab;
    if (!wintab_init(&tab, win, a, as, res[0]->dims, wsize))
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    Body b;
    st = body_init(&b, cx, ins, IR_ATTR_TO_APPLY, dev, k, ops);
    for (int64_t i = 0; !st && i < res[0]->n; i++, sim_idx_next(o, res[0]->dims, rank)) {
        SimElem acc[SIM_MAX_VARIADIC], x[SIM_MAX_VARIADIC];
        const int64_t *row[SIM_MAX_RANK];
        int64_t n[SIM_MAX_RANK], w[SIM_MAX_RANK] = {0}, total = 1;
        for (uint32_t d = 0; d < rank; d++) {
            row[d] = tab.off[d] + o[d] * wsize[d];
            n[d] = tab.cnt[d][o[d]];
            total *= n[d];
        }
        for (uint32_t j = 0; j < k; j++)
            acc[j] = res[j]->data[i];
        for (int64_t p = 0; !st && p < total; p++, sim_idx_next(w, n, rank)) {
            int64_t off = 0;
            for (uint32_t d = 0; d < rank; d++)
                off += row[d][w[d]];
            for (uint32_t j = 0; j < k; j++)
                x[j] = ops[j]->data[off];
            st = body_apply(&b, acc, x);
        }
        for (uint32_t j = 0; j < k; j++)
            res[j]->data[i] = acc[j];
    }
    body_fini(&b);
    wintab_fini(&tab, rank);
    return st;
}

/* select(a, b): true keeps the current selection a. */
static SlStatus
call_select(Body *b, SimElem cur, SimElem cand, bool *keep)
{
    SimElem in[2] = {cur, cand}, r;
    IrDtype ty[2] = {b->t[0], b->t[0]};
    SlStatus st = sim_call_scalars(b->cx, b->ins, b->comp, b->dev, in, ty, 2, &r, 1);
    if (!st)
        *keep = r.i != 0;
    return st;
}

static SlStatus
eval_select_and_scatter(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                        SimValue *r)
{
    const SimValue *a = ops[0], *src = ops[1];
    const IrWindowDim *win;
    int64_t wsize[SIM_MAX_RANK], as[SIM_MAX_RANK], o[SIM_MAX_RANK] = {0};
    uint32_t rank = a->rank;
    SlStatus st = window_of(cx, ins, a, &win, wsize);
    if (!st && src->rank != rank)
        st = sim_fail(cx, ins, SL_ERR_INVALID, "source rank differs from the operand");
    if (st)
        return st;
    sim_strides(a->dims, rank, as);
    WinTab tab;
    if (!wintab_init(&tab, win, a, as, src->dims, wsize))
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    Body sel, sc;
    SimValue *one[2] = {ops[0], ops[0]};
    SlStatus st1 = body_init(&sel, cx, ins, IR_ATTR_SELECT, dev, 1, one);
    SlStatus st2 = body_init(&sc, cx, ins, IR_ATTR_SCATTER, dev, 1, one);
    st = st1 ? st1 : st2;
    for (int64_t i = 0; !st && i < src->n; i++, sim_idx_next(o, src->dims, rank)) {
        const int64_t *row[SIM_MAX_RANK];
        int64_t n[SIM_MAX_RANK], w[SIM_MAX_RANK] = {0}, total = 1, best = -1;
        for (uint32_t d = 0; d < rank; d++) {
            row[d] = tab.off[d] + o[d] * wsize[d];
            n[d] = tab.cnt[d][o[d]];
            total *= n[d];
        }
        for (int64_t p = 0; !st && p < total; p++, sim_idx_next(w, n, rank)) {
            int64_t off = 0;
            bool keep = false;
            for (uint32_t d = 0; d < rank; d++)
                off += row[d][w[d]];
            if (best >= 0)
                st = call_select(&sel, a->data[best], a->data[off], &keep);
            if (best < 0 || !keep)
                best = off;
        }
        if (!st && best >= 0)
            st = sim_apply2(cx, ins, sc.comp, r->dtype, r->data[best], src->data[i],
                            &r->data[best]);
    }
    body_fini(&sel);
    body_fini(&sc);
    wintab_fini(&tab, rank);
    return st;
}

SlStatus
sim_eval_reduce(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                SimValue **out)
{
    uint32_t k = ins->op == IR_OP_SELECT_AND_SCATTER ? 1 : ins->n_operands / 2;
    if (k == 0 || k > SIM_MAX_VARIADIC || (ins->op != IR_OP_SELECT_AND_SCATTER &&
                                           ins->n_operands != 2 * k))
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "operand count %u", ins->n_operands);
    for (uint32_t j = 0; j < ins->n_operands; j++)
        if (ops[j]->dtype == IR_DT_TUPLE || (j < k && ops[j]->n != ops[0]->n))
            return sim_fail(cx, ins, SL_ERR_INVALID, "operand %u does not match", j);
    SimValue *res[SIM_MAX_VARIADIC] = {NULL};
    SimValue *const *inits = ins->op == IR_OP_SELECT_AND_SCATTER ? ops + 2 : ops + k;
    SlStatus st = make_results(cx, ins, inits, k, res, out);
    if (!st && ins->op == IR_OP_REDUCE)
        st = eval_reduce_body(cx, ins, dev, ops, k, res);
    else if (!st && ins->op == IR_OP_REDUCE_WINDOW)
        st = eval_reduce_window_body(cx, ins, dev, ops, k, res);
    else if (!st)
        st = eval_select_and_scatter(cx, ins, dev, ops, res[0]);
    for (uint32_t j = 0; j < k; j++)
        sim_value_unref(res[j]);
    if (st) {
        sim_value_unref(*out);
        *out = NULL;
    }
    return st;
}

/* ---- sort ---------------------------------------------------------------------------- */

/* A comparator made only of scalar elementwise instructions, split by what each instruction
 * reads: nothing (constants), only the lhs parameters (even numbers), only the rhs ones (odd),
 * or both. The one-sided values are computed once per element of the slice; a comparison then
 * evaluates only the instructions that read both sides. */
typedef struct SortMemo {
    SimPlan *p;
    uint8_t *side;   /* per instruction: 0 none, 1 lhs, 2 rhs, 3 both */
    uint32_t *slot;  /* one-sided instructions: column in `pre` */
    uint32_t n_slots;
    SimElem *pre;    /* len rows of n_slots */
    SimElem *regs;   /* per instruction */
    int *code;       /* compare instructions: sim_compare_code(); else -1 */
    uint32_t *pick, n_pick; /* one-sided instructions a comparison reads (their `pre` columns) */
    uint32_t *both, n_both; /* two-sided instructions to evaluate per comparison, in order */
} SortMemo;

typedef struct SortCtx {
    Body b;
    SimValue *const *ops;
    uint32_t k;
    const IrInstr *cmp;  /* fast path: ROOT compare(p[2m + swap], p[2m + 1 - swap]) */
    uint32_t cmp_operand;
    bool cmp_swapped;
    int cmp_code;        /* sim_compare_code(cmp) */
    SortMemo memo;       /* memo.p NULL: not used */
    int64_t base, stride; /* the slice being sorted: element i is at base + i * stride */
    SlStatus st;
} SortCtx;

static void
sort_fast_path(SortCtx *s)
{
    const IrComputation *c = s->b.comp;
    const IrInstr *r = c->root ? c->root : c->instrs[c->n_instrs - 1];
    s->cmp = NULL;
    if (r->op != IR_OP_COMPARE || r->operands[0]->op != IR_OP_PARAMETER ||
        r->operands[1]->op != IR_OP_PARAMETER)
        return;
    int64_t p0 = r->operands[0]->parameter_number, p1 = r->operands[1]->parameter_number;
    if (p0 / 2 != p1 / 2 || p0 == p1 || (s->cmp_code = sim_compare_code(r)) < 0)
        return;
    s->cmp = r;
    s->cmp_operand = (uint32_t)(p0 / 2);
    s->cmp_swapped = p0 > p1;
}

static void
memo_fini(SortMemo *m)
{
    free(m->side);
    free(m->slot);
    free(m->pre);
    free(m->regs);
    free(m->code);
    free(m->pick);
    free(m->both);
    memset(m, 0, sizeof *m);
}

/* Prepares the memo when the comparator qualifies; leaves memo.p NULL otherwise. */
static SlStatus
memo_init(SortCtx *s, int64_t len)
{
    SortMemo *m = &s->memo;
    SimPlan *p;
    SlStatus st = sim_plan_get(s->b.cx, s->b.comp, &p);
    if (!st)
        st = sim_plan_scalar(s->b.cx, p);
    if (st || p->scalar != 1 || p->n_params != 2 * s->k)
        return st;
    m->side = calloc(p->n, sizeof *m->side);
    m->slot = calloc(p->n, sizeof *m->slot);
    m->regs = calloc(p->n, sizeof *m->regs);
    m->code = calloc(p->n, sizeof *m->code);
    m->pick = calloc(p->n, sizeof *m->pick);
    m->both = calloc(p->n, sizeof *m->both);
    if (!m->side || !m->slot || !m->regs || !m->code || !m->pick || !m->both) {
        memo_fini(m);
        return sim_fail(s->b.cx, s->b.ins, SL_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < p->n; i++) {
        const IrInstr *ins = p->comp->instrs[i];
        if (ins->op == IR_OP_PARAMETER)
            m->side[i] = ins->parameter_number % 2 ? 2 : 1;
        for (uint32_t j = p->op_start[i]; j < p->op_start[i + 1]; j++)
            m->side[i] |= m->side[p->op_idx[j]];
        if (m->side[i] == 3 && ins->op != IR_OP_PARAMETER && ins->op != IR_OP_TUPLE)
            m->both[m->n_both++] = i;
        m->regs[i] = p->regs[i]; /* constants */
        m->code[i] = ins->op == IR_OP_COMPARE ? sim_compare_code(ins) : -1;
    }
    /* keep only the one-sided values a comparison reads: operands of two-sided instructions
     * and the result (a tuple root's first operand); fewer columns, fewer cache misses */
    uint8_t *need = calloc(p->n, 1);
    if (!need) {
        memo_fini(m);
        return sim_fail(s->b.cx, s->b.ins, SL_ERR_NOMEM, "out of memory");
    }
    for (uint32_t k = 0; k < m->n_both; k++)
        for (uint32_t j = p->op_start[m->both[k]]; j < p->op_start[m->both[k] + 1]; j++)
            need[p->op_idx[j]] = 1;
    need[p->root] = 1;
    const IrInstr *root = p->comp->instrs[p->root];
    if (root->op == IR_OP_TUPLE && root->n_operands > 0)
        need[p->op_idx[p->op_start[p->root]]] = 1;
    for (uint32_t i = 0; i < p->n; i++) {
        if (need[i] && (m->side[i] == 1 || m->side[i] == 2)) {
            m->slot[i] = m->n_slots++;
            m->pick[m->n_pick++] = i;
        }
    }
    free(need);
    m->pre = calloc((size_t)len * m->n_slots + 1, sizeof *m->pre);
    if (!m->pre) {
        memo_fini(m);
        return sim_fail(s->b.cx, s->b.ins, SL_ERR_NOMEM, "out of memory");
    }
    m->p = p;
    return SL_OK;
}

/* Evaluates instruction i of the comparator into m->regs; false for an unknown opcode. */
static inline bool
memo_eval1(SortMemo *m, uint32_t i)
{
    const SimPlan *p = m->p;
    const IrInstr *ins = p->comp->instrs[i];
    SimElem x[3];
    IrDtype t[3];
    for (uint32_t j = 0; j < ins->n_operands && j < 3; j++) {
        x[j] = m->regs[p->op_idx[p->op_start[i] + j]];
        t[j] = ins->operands[j]->shape.dtype;
    }
    if (m->code[i] >= 0) { /* the hot cases, without attribute lookups */
        m->regs[i].i = sim_compare_coded(m->code[i], t[0], x[0], x[1]);
        return true;
    }
    if (ins->op == IR_OP_SELECT) {
        m->regs[i] = x[0].i ? x[1] : x[2];
        return true;
    }
    return sim_elem_apply(ins, t, x, &m->regs[i]);
}

/* Evaluates the instructions whose side is in `want` into m->regs. */
static bool
memo_eval(SortMemo *m, uint8_t want)
{
    const SimPlan *p = m->p;
    for (uint32_t i = 0; i < p->n; i++) {
        const IrInstr *ins = p->comp->instrs[i];
        if (!((1u << m->side[i]) & want) || ins->op == IR_OP_PARAMETER ||
            ins->op == IR_OP_TUPLE)
            continue;
        if (!memo_eval1(m, i))
            return false;
    }
    return true;
}

/* Fills the one-sided values of every element of the current slice. */
static SlStatus
memo_fill(SortCtx *s, int64_t len)
{
    SortMemo *m = &s->memo;
    const SimPlan *p = m->p;
    for (int64_t e = 0; e < len; e++) {
        int64_t off = s->base + e * s->stride;
        for (uint32_t q = 0; q < p->n_params; q++) {
            uint32_t at = p->param_pos[q];
            m->regs[at] = sim_fix(p->comp->instrs[at]->shape.dtype, s->ops[q / 2]->data[off]);
        }
        if (!memo_eval(m, 1u << 1 | 1u << 2))
            return sim_fail(s->b.cx, s->b.ins, SL_ERR_UNSUPPORTED, "comparator opcode");
        for (uint32_t k = 0; k < m->n_pick; k++)
            m->pre[(size_t)e * m->n_slots + m->slot[m->pick[k]]] = m->regs[m->pick[k]];
    }
    return SL_OK;
}

static bool
memo_less(SortCtx *s, int64_t i, int64_t j)
{
    SortMemo *m = &s->memo;
    const SimPlan *p = m->p;
    const SimElem *pi = m->pre + (size_t)i * m->n_slots, *pj = m->pre + (size_t)j * m->n_slots;
    for (uint32_t k = 0; k < m->n_pick; k++) {
        uint32_t q = m->pick[k];
        m->regs[q] = (m->side[q] == 1 ? pi : pj)[m->slot[q]];
    }
    for (uint32_t k = 0; k < m->n_both; k++) {
        if (!memo_eval1(m, m->both[k])) {
            s->st = sim_fail(s->b.cx, s->b.ins, SL_ERR_UNSUPPORTED, "comparator opcode");
            return false;
        }
    }
    const IrInstr *root = p->comp->instrs[p->root];
    return (root->op == IR_OP_TUPLE ? m->regs[p->op_idx[p->op_start[p->root]]]
                                    : m->regs[p->root]).i != 0;
}

/* less(i, j): the comparator on elements i and j (positions in the current slice). */
static bool
sort_less(SortCtx *s, int64_t pi, int64_t pj)
{
    if (s->st)
        return false;
    int64_t i = s->base + pi * s->stride, j = s->base + pj * s->stride;
    if (s->cmp) {
        const SimValue *v = s->ops[s->cmp_operand];
        return s->cmp_swapped ? sim_compare_coded(s->cmp_code, v->dtype, v->data[j], v->data[i])
                              : sim_compare_coded(s->cmp_code, v->dtype, v->data[i], v->data[j]);
    }
    if (s->memo.p)
        return memo_less(s, pi, pj);
    SimElem in[2 * SIM_MAX_VARIADIC], r = {.i = 0};
    IrDtype ty[2 * SIM_MAX_VARIADIC];
    for (uint32_t m = 0; m < s->k; m++) {
        in[2 * m] = s->ops[m]->data[i], in[2 * m + 1] = s->ops[m]->data[j];
        ty[2 * m] = ty[2 * m + 1] = s->ops[m]->dtype;
    }
    s->st = sim_call_scalars(s->b.cx, s->b.ins, s->b.comp, s->b.dev, in, ty, 2 * s->k, &r, 1);
    bool less = !s->st && r.i != 0;
    return less;
}

/* Stable merge sort of positions `v` (n of them) using `tmp`. */
static void
merge_sort(SortCtx *s, int64_t *v, int64_t *tmp, int64_t n)
{
    if (n < 2)
        return;
    int64_t h = n / 2;
    merge_sort(s, v, tmp, h);
    merge_sort(s, v + h, tmp, n - h);
    if (!sort_less(s, v[h], v[h - 1])) /* already in order */
        return;
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n)
        tmp[o++] = sort_less(s, v[j], v[i]) ? v[j++] : v[i++];
    while (i < h)
        tmp[o++] = v[i++];
    while (j < n)
        tmp[o++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof *v);
}

static SlStatus
sort_slices(SortCtx *s, uint32_t dim, SimValue **res)
{
    const SimValue *a = s->ops[0];
    int64_t len = a->dims[dim], stride = 1, n_slices = len ? a->n / len : 0;
    for (uint32_t d = dim + 1; d < a->rank; d++)
        stride *= a->dims[d];
    int64_t *v = calloc((size_t)len + 1, sizeof *v), *tmp = calloc((size_t)len + 1, sizeof *tmp);
    if (!v || !tmp)
        s->st = sim_fail(s->b.cx, s->b.ins, SL_ERR_NOMEM, "out of memory");
    if (!s->st && !s->cmp)
        s->st = memo_init(s, len);
    s->stride = stride;
    for (int64_t sl = 0; !s->st && sl < n_slices; sl++) {
        s->base = (sl / stride) * stride * len + sl % stride;
        for (int64_t i = 0; i < len; i++)
            v[i] = i;
        if (s->memo.p)
            s->st = memo_fill(s, len);
        if (!s->st)
            merge_sort(s, v, tmp, len);
        for (uint32_t m = 0; m < s->k; m++)
            for (int64_t i = 0; i < len; i++)
                res[m]->data[s->base + i * stride] = s->ops[m]->data[s->base + v[i] * stride];
    }
    memo_fini(&s->memo);
    free(v);
    free(tmp);
    return s->st;
}

SlStatus
sim_eval_sort(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops, SimValue **out)
{
    SortCtx s = {.ops = ops, .k = ins->n_operands};
    const int64_t *dims;
    if (ir_instr_ints_attr(ins, IR_ATTR_DIMENSIONS, &dims) != 1 || s.k == 0 ||
        dims[0] < 0 || dims[0] >= ops[0]->rank)
        return sim_fail(cx, ins, SL_ERR_INVALID, "sort needs one dimension");
    for (uint32_t m = 0; m < s.k; m++)
        if (ops[m]->dtype == IR_DT_TUPLE || ops[m]->n != ops[0]->n)
            return sim_fail(cx, ins, SL_ERR_INVALID, "operand %u does not match", m);
    SimValue *res[SIM_MAX_VARIADIC] = {NULL};
    s.st = body_init(&s.b, cx, ins, IR_ATTR_TO_APPLY, dev, s.k, ops);
    for (uint32_t m = 0; !s.st && m < s.k; m++)
        if (!(res[m] = sim_value_copy(ops[m])))
            s.st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; !s.st && i < 2 * s.k; i++)
        s.b.args[i]->dtype = ops[i / 2]->dtype; /* comparator params come in (a_m, b_m) pairs */
    if (!s.st) {
        sort_fast_path(&s);
        sort_slices(&s, (uint32_t)dims[0], res);
    }
    if (!s.st)
        *out = s.k == 1 ? sim_value_ref(res[0]) : sim_value_new_tuple(res, s.k);
    if (!s.st && !*out)
        s.st = sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (uint32_t m = 0; m < s.k; m++)
        sim_value_unref(res[m]);
    body_fini(&s.b);
    return s.st;
}
