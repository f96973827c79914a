/* windowed_motion.c - post-partition code motion of reduces into a windowed loop (gspmd.md
 * E.12). An all-gather loop on non-contracting or batch dims assembles its result with a chain of
 * dynamic-update-slices. When that result (maybe sliced to drop padding) only feeds
 * elementwise ops with small inputs (broadcasts, iotas, constants) and ends in simple
 * reduces, those ops are rebuilt per window inside the body and the loop carries the
 * reduce-shaped buffers (padded on the windowed dims) instead of the whole result.
 * Owns: the use index of a computation, finding the movable cluster, rebuilding it in the
 * body, rewiring and reordering the enclosing computation. Does not own: building the loops
 * (windowed_loop.c records them in cx->wloops). Invariant: runs once per computation after it
 * is partitioned (driver.c); a loop whose consumers do not qualify is left as it is. */
#include "spmd/windowed_int.h"

#include <stdlib.h>
#include <string.h>

/* Users of every instruction of one computation, by instruction id (CSR). */
typedef struct UseIdx {
    uint32_t n_ids;
    uint32_t *start; /* n_ids + 1 */
    IrInstr **list;
} UseIdx;

static void
use_idx_fini(UseIdx *u)
{
    free(u->start);
    free(u->list);
    *u = (UseIdx){0};
}

static bool
use_idx_build(UseIdx *u, const IrComputation *c, uint32_t n_ids)
{
    *u = (UseIdx){0};
    u->n_ids = n_ids;
    u->start = calloc((size_t)n_ids + 1, sizeof(uint32_t));
    size_t total = 0;
    for (uint32_t k = 0; k < c->n_instrs; k++)
        total += c->instrs[k]->n_operands;
    u->list = malloc((total ? total : 1) * sizeof(IrInstr *));
    uint32_t *fill = calloc((size_t)n_ids + 1, sizeof(uint32_t));
    if (!u->start || !u->list || !fill) {
        free(fill);
        use_idx_fini(u);
        return false;
    }
    for (uint32_t k = 0; k < c->n_instrs; k++)
        for (uint32_t o = 0; o < c->instrs[k]->n_operands; o++) {
            uint32_t id = c->instrs[k]->operands[o]->id;
            if (id < n_ids)
                u->start[id + 1]++;
        }
    for (uint32_t i = 0; i < n_ids; i++)
        u->start[i + 1] += u->start[i];
    for (uint32_t k = 0; k < c->n_instrs; k++)
        for (uint32_t o = 0; o < c->instrs[k]->n_operands; o++) {
            uint32_t id = c->instrs[k]->operands[o]->id;
            if (id < n_ids) {
                /* an instruction using x twice is listed once */
                bool dup = false;
                for (uint32_t j = u->start[id]; j < u->start[id] + fill[id]; j++)
                    dup = dup || u->list[j] == c->instrs[k];
                if (!dup)
                    u->list[u->start[id] + fill[id]++] = c->instrs[k];
            }
        }
    /* close the gaps left by duplicates: keep counts in fill */
    uint32_t w = 0;
    for (uint32_t i = 0; i < n_ids; i++) {
        uint32_t s = u->start[i];
        u->start[i] = w;
        for (uint32_t j = 0; j < fill[i]; j++)
            u->list[w++] = u->list[s + j];
    }
    u->start[n_ids] = w;
    free(fill);
    return true;
}

static uint32_t
n_users(const UseIdx *u, const IrInstr *x)
{
    return x->id < u->n_ids ? u->start[x->id + 1] - u->start[x->id] : 0;
}

static IrInstr *const *
users_of(const UseIdx *u, const IrInstr *x)
{
    return x->id < u->n_ids ? u->list + u->start[x->id] : NULL;
}

enum { M_MOVE = 1, M_NEWOP = 2, M_FOUND = 4, M_SEEN = 8, M_DEAD = 16 };

typedef struct Motion {
    SpmdCtx *cx;
    IrComputation *comp, *body;
    UseIdx use;
    uint8_t *mark; /* by id (n_ids of use) */
    uint32_t n_ids;
    IrInstr **newops; /* small operands, then the reduce buffers */
    uint32_t n_newops, cap_newops;
    IrInstr **reduces;
    uint32_t n_reduces, cap_reduces;
    IrInstr **found; /* scratch of find_small_inputs */
    uint32_t n_found, cap_found;
    IrInstr **stack;
    uint32_t n_stack, cap_stack;
    uint32_t n_move;
    uint32_t n_in; /* size of the clusters' maps */
} Motion;

static bool
push(IrInstr ***v, uint32_t *n, uint32_t *cap, IrInstr *x)
{
    if (*n == *cap) {
        uint32_t c = *cap ? 2 * *cap : 16;
        IrInstr **nv = realloc(*v, c * sizeof(IrInstr *));
        if (!nv)
            return false;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return true;
}

static bool
marked(const Motion *M, const IrInstr *x, uint8_t bit)
{
    return x->id < M->n_ids && (M->mark[x->id] & bit);
}

static void
set_mark(Motion *M, const IrInstr *x, uint8_t bit)
{
    if (x->id < M->n_ids)
        M->mark[x->id] |= bit;
}

static bool
add_newop(Motion *M, IrInstr *x)
{
    if (marked(M, x, M_NEWOP))
        return true;
    set_mark(M, x, M_NEWOP);
    return push(&M->newops, &M->n_newops, &M->cap_newops, x);
}

static bool
same_dims(const IrShape *a, const IrShape *b)
{
    if (a->rank != b->rank || ir_shape_is_tuple(a) || ir_shape_is_tuple(b))
        return false;
    for (uint32_t d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

static bool
movable_elementwise(const IrInstr *x)
{
    if (!ir_op_is_elementwise(x->op) || ir_shape_is_tuple(&x->shape))
        return false;
    for (uint32_t o = 0; o < x->n_operands; o++)
        if (!same_dims(&x->operands[o]->shape, &x->shape))
            return false;
    return true;
}

/* The nodes producing `x` from small operands only (broadcast, constant and iota leaves,
 * elementwise inside): marked M_MOVE, their operands added as new operands. false (nothing
 * marked) when `x` depends on anything else. */
static int
find_small_inputs(Motion *M, IrInstr *x)
{
    M->n_found = 0;
    M->n_stack = 0;
    if (!push(&M->stack, &M->n_stack, &M->cap_stack, x))
        return -1;
    bool ok = true;
    while (M->n_stack && ok) {
        IrInstr *i = M->stack[--M->n_stack];
        if (marked(M, i, M_FOUND))
            continue;
        if (i->id >= M->n_ids) {
            ok = false;
        } else if (i->op == IR_OP_BROADCAST || i->op == IR_OP_CONSTANT || i->op == IR_OP_IOTA) {
            set_mark(M, i, M_FOUND);
            if (!push(&M->found, &M->n_found, &M->cap_found, i))
                return -1;
        } else if (movable_elementwise(i)) {
            set_mark(M, i, M_FOUND);
            if (!push(&M->found, &M->n_found, &M->cap_found, i))
                return -1;
            for (uint32_t o = 0; o < i->n_operands; o++)
                if (!push(&M->stack, &M->n_stack, &M->cap_stack, i->operands[o]))
                    return -1;
        } else {
            ok = false;
        }
    }
    for (uint32_t k = 0; k < M->n_found; k++) {
        IrInstr *i = M->found[k];
        M->mark[i->id] &= (uint8_t)~M_FOUND;
        if (!ok)
            continue;
        if (!marked(M, i, M_MOVE)) {
            set_mark(M, i, M_MOVE);
            M->n_move++;
        }
        if (i->op == IR_OP_BROADCAST)
            for (uint32_t o = 0; o < i->n_operands; o++)
                if (!add_newop(M, i->operands[o]))
                    return -1;
    }
    return ok ? 1 : 0;
}

/* A reduce whose computation is one elementwise op of its two parameters. */
static bool
simple_reduce(const IrInstr *x)
{
    if (x->op != IR_OP_REDUCE || x->n_operands != 2 || ir_shape_is_tuple(&x->shape))
        return false;
    const IrComputation *f = ir_instr_called(x, IR_ATTR_TO_APPLY);
    return f && f->n_instrs == 3 && ir_computation_param_count(f) == 2 && f->root &&
           ir_op_is_elementwise(f->root->op) && f->root->n_operands == 2;
}

/* Walks the consumers of `out` (XLA's cluster search); 1 when something is to move. */
static int
collect(Motion *M, IrInstr *out)
{
    set_mark(M, out, M_MOVE);
    M->n_move = 1;
    M->n_stack = 0;
    IrInstr **work = NULL;
    uint32_t n_work = 0, cap_work = 0;
    int res = 1;
    for (uint32_t k = 0; k < n_users(&M->use, out); k++)
        if (!push(&work, &n_work, &cap_work, users_of(&M->use, out)[k]))
            res = -1;
    while (n_work && res == 1) {
        IrInstr *i = work[--n_work];
        if (marked(M, i, M_MOVE))
            continue;
        if (simple_reduce(i)) {
            set_mark(M, i, M_MOVE);
            M->n_move++;
            if (!add_newop(M, i->operands[1]) ||
                !push(&M->reduces, &M->n_reduces, &M->cap_reduces, i))
                res = -1;
        } else if (i != M->comp->root && n_users(&M->use, i) > 0 && movable_elementwise(i) &&
                   i->id < M->n_ids) {
            for (uint32_t o = 0; o < i->n_operands && res == 1; o++) {
                if (marked(M, i->operands[o], M_MOVE))
                    continue;
                int f = find_small_inputs(M, i->operands[o]);
                res = f < 0 ? -1 : f == 0 ? 0 : 1;
            }
            if (res != 1)
                break;
            set_mark(M, i, M_MOVE);
            M->n_move++;
            for (uint32_t k = 0; k < n_users(&M->use, i) && res == 1; k++)
                if (!push(&work, &n_work, &cap_work, users_of(&M->use, i)[k]))
                    res = -1;
        } else {
            res = 0;
        }
    }
    free(work);
    if (res == 1 && (M->n_move <= 1 || M->n_reduces == 0))
        res = 0;
    /* a reduce depending on another one would make a cycle */
    if (res == 1 && M->n_reduces > 1) {
        for (uint32_t r = 0; r < M->n_reduces && res == 1; r++) {
            for (uint32_t k = 0; k < M->n_ids; k++)
                M->mark[k] &= (uint8_t)~M_SEEN;
            M->n_stack = 0;
            for (uint32_t o = 0; o < M->reduces[r]->n_operands; o++)
                if (!push(&M->stack, &M->n_stack, &M->cap_stack, M->reduces[r]->operands[o]))
                    res = -1;
            while (M->n_stack && res == 1) {
                IrInstr *i = M->stack[--M->n_stack];
                if (marked(M, i, M_SEEN))
                    continue;
                set_mark(M, i, M_SEEN);
                if (i->op == IR_OP_REDUCE)
                    for (uint32_t q = 0; q < M->n_reduces; q++)
                        if (M->reduces[q] == i)
                            res = 0;
                for (uint32_t o = 0; o < i->n_operands && res == 1; o++)
                    if (!push(&M->stack, &M->n_stack, &M->cap_stack, i->operands[o]))
                        res = -1;
            }
        }
    }
    return res;
}

/* Per dynamic-update-slice of the body's result chain: where each moved node lives. */
typedef struct Cluster {
    IrInstr *dus;
    IrInstr **in; /* by outside id */
} Cluster;

static IrInstr *
clone_with(SpmdCtx *cx, const IrInstr *src, const IrShape *shape, IrInstr *const *ops, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (!ops[k])
            return NULL;
    IrShape s = ir_shape_clone(cx->arena, shape);
    IrInstr *i = ir_instr_new(cx->out, src->op, &s, ops, n);
    if (!i || !ir_instr_reserve_attrs(cx->out, i, src->n_attrs))
        return NULL;
    for (uint32_t k = 0; k < src->n_attrs; k++) {
        if (src->attrs[k].key == IR_ATTR_SHARDING)
            continue;
        IrAttr *a = ir_instr_add_attr(cx->out, i, src->attrs[k].key);
        if (!a)
            return NULL;
        *a = src->attrs[k];
    }
    i->literal = src->literal;
    return spmd_emit(cx, i, NULL);
}

static IrShape
dims_like(SpmdCtx *cx, IrDtype t, const IrShape *dims_of)
{
    return ir_shape_make(cx->arena, t, dims_of->dims, dims_of->rank);
}

/* x padded with zeros at the high end up to `dims` (x itself when already that size). */
static IrInstr *
pad_to(SpmdCtx *cx, IrInstr *x, const int64_t *dims)
{
    if (!x)
        return NULL;
    IrPadDim pads[SPMD_MAX_RANK];
    bool any = false;
    for (uint32_t d = 0; d < x->shape.rank && d < SPMD_MAX_RANK; d++) {
        pads[d] = (IrPadDim){0, dims[d] - x->shape.dims[d], 0};
        any = any || pads[d].hi != 0;
    }
    if (!any)
        return x;
    return spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, x->shape.dtype, 0), pads);
}

static IrInstr *
window_of(SpmdCtx *cx, IrInstr *padded, const Cluster *c)
{
    return spmd_emit_dynamic_slice(cx, padded, c->dus->operands + 2,
                                   c->dus->operands[1]->shape.dims);
}

/* Builds the moved nodes in the body for every cluster; reduces are left for later. */
static bool
build_inside(Motion *M, Cluster *cl, uint32_t n_cl, IrInstr *out, const IrShape *padded)
{
    SpmdCtx *cx = M->cx;
    IrInstr **work = NULL;
    uint32_t n_work = 0, cap_work = 0;
    bool ok = true;
#define AVAILABLE_USERS(x)                                                                         \
    for (uint32_t k_ = 0; k_ < n_users(&M->use, (x)) && ok; k_++) {                                \
        IrInstr *u_ = users_of(&M->use, (x))[k_];                                                  \
        bool all_ = marked(M, u_, M_MOVE) && !cl[0].in[u_->id];                                    \
        for (uint32_t o_ = 0; o_ < u_->n_operands && all_; o_++)                                   \
            all_ = u_->operands[o_]->id < M->n_in && cl[0].in[u_->operands[o_]->id];               \
        if (all_)                                                                                  \
            ok = push(&work, &n_work, &cap_work, u_);                                              \
    }
    for (uint32_t k = 0; k < M->n_newops && ok; k++)
        AVAILABLE_USERS(M->newops[k]);
    AVAILABLE_USERS(out);
    /* moved nodes without operands (iotas, array constants) start chains of their own;
     * pushed last first so they are built in program order */
    for (uint32_t k = M->comp->n_instrs; k-- > 0 && ok;) {
        IrInstr *x = M->comp->instrs[k];
        if (x->n_operands == 0 && x != out && marked(M, x, M_MOVE))
            ok = push(&work, &n_work, &cap_work, x);
    }
    while (n_work && ok) {
        IrInstr *i = work[--n_work];
        bool all = true;
        for (uint32_t c = 0; c < n_cl; c++)
            all = all && cl[c].in[i->id];
        if (all)
            continue;
        if (i->op == IR_OP_BROADCAST) {
            const int64_t *bd = NULL;
            uint32_t nb = ir_instr_ints_attr(i, IR_ATTR_DIMENSIONS, &bd);
            IrInstr *op = i->operands[0];
            int64_t pd[SPMD_MAX_RANK];
            for (uint32_t d = 0; d < op->shape.rank && d < SPMD_MAX_RANK; d++)
                pd[d] = d < nb ? padded->dims[bd[d]] : op->shape.dims[d];
            IrInstr *pop = pad_to(cx, cl[0].in[op->id], pd);
            IrShape s = dims_like(cx, i->shape.dtype, padded);
            IrInstr *b = clone_with(cx, i, &s, &pop, 1);
            for (uint32_t c = 0; c < n_cl; c++)
                cl[c].in[i->id] = window_of(cx, b, &cl[c]);
        } else if (i->op == IR_OP_IOTA || i->op == IR_OP_CONSTANT) {
            IrInstr *v;
            if (i->op == IR_OP_IOTA) {
                IrShape s = dims_like(cx, i->shape.dtype, padded);
                v = clone_with(cx, i, &s, NULL, 0);
            } else {
                v = pad_to(cx, clone_with(cx, i, &i->shape, NULL, 0), padded->dims);
            }
            for (uint32_t c = 0; c < n_cl; c++)
                cl[c].in[i->id] = window_of(cx, v, &cl[c]);
        } else if (i->op != IR_OP_REDUCE && ir_op_is_elementwise(i->op)) {
            IrInstr *ops[8];
            if (i->n_operands > 8) {
                ok = false;
                break;
            }
            for (uint32_t c = 0; c < n_cl; c++) {
                for (uint32_t o = 0; o < i->n_operands; o++)
                    ops[o] = cl[c].in[i->operands[o]->id];
                IrShape s = dims_like(cx, i->shape.dtype, &cl[c].dus->operands[1]->shape);
                cl[c].in[i->id] = clone_with(cx, i, &s, ops, i->n_operands);
            }
        }
        for (uint32_t c = 0; c < n_cl; c++)
            if (i->op != IR_OP_REDUCE && !cl[c].in[i->id])
                ok = false;
        AVAILABLE_USERS(i);
    }
#undef AVAILABLE_USERS
    free(work);
    return ok;
}

/* The reduce `r` over cluster `c`'s window, folded into `last` (the buffer so far). */
static IrInstr *
reduce_inside(Motion *M, const Cluster *c, IrInstr *r, IrInstr *last, const IrShape *padded,
              const IrShape *unpadded)
{
    SpmdCtx *cx = M->cx;
    IrInstr *op0 = c->in[r->operands[0]->id], *op1 = c->in[r->operands[1]->id];
    if (!op0 || !op1)
        return NULL;
    const int64_t *rd = NULL;
    uint32_t nr = ir_instr_ints_attr(r, IR_ATTR_DIMENSIONS, &rd);
    IrInstr *offs[SPMD_MAX_RANK];
    int64_t od[SPMD_MAX_RANK];
    uint32_t n_off = 0;
    bool accumulate = false;
    for (uint32_t d = 0; d < op0->shape.rank; d++) {
        if (spmd_we_listed_dim(rd, nr, d)) {
            if (r->operands[0]->shape.dims[d] != op0->shape.dims[d]) {
                accumulate = true;
                if (unpadded->dims[d] != padded->dims[d]) { /* mask the padding off */
                    IrShape is = dims_like(cx, IR_DT_S32, &op0->shape);
                    IrInstr *iota = spmd_emit_iota(cx, &is, d);
                    IrInstr *at = spmd_emit_broadcast(cx, c->dus->operands[2 + d], &is, NULL, 0);
                    IrInstr *lim = spmd_emit_broadcast(
                        cx, spmd_emit_constant_scalar(cx, IR_DT_S32, r->operands[0]->shape.dims[d]),
                        &is, NULL, 0);
                    IrInstr *in =
                        spmd_emit_compare(cx, spmd_emit_binary(cx, IR_OP_ADD, iota, at), lim, "LT");
                    IrShape os = ir_shape_clone(cx->arena, &op0->shape);
                    op0 = spmd_emit_select(cx, in, op0, spmd_emit_broadcast(cx, op1, &os, NULL, 0));
                }
            }
            continue;
        }
        od[n_off] = op0->shape.dims[d];
        offs[n_off++] = c->dus->operands[2 + d];
    }
    IrShape rs = ir_shape_make(cx->arena, r->shape.dtype, od, n_off);
    rs.layout = r->shape.layout;
    IrInstr *ops[2] = {op0, op1};
    IrInstr *o = clone_with(cx, r, &rs, ops, 2);
    if (o && accumulate) {
        const IrComputation *f = ir_instr_called(r, IR_ATTR_TO_APPLY);
        IrInstr *prev = spmd_emit_dynamic_slice(cx, last, offs, od);
        o = spmd_emit_binary(cx, f->root->op, o, prev);
    }
    if (o && !same_dims(&o->shape, &last->shape))
        o = spmd_emit_dus(cx, last, o, offs);
    return o;
}

/* Drops `start` and then every operand left without users (parameters, calls and
 * communication stay). Counts come from `u` and are kept in `cnt`. */
static bool
removable(const IrInstr *x)
{
    switch (x->op) {
    case IR_OP_CONSTANT:
    case IR_OP_GET_TUPLE_ELEMENT:
    case IR_OP_RESHAPE:
    case IR_OP_DYNAMIC_SLICE:
    case IR_OP_DYNAMIC_UPDATE_SLICE:
    case IR_OP_BROADCAST:
    case IR_OP_IOTA:
    case IR_OP_SLICE:
    case IR_OP_PARTITION_ID:
    case IR_OP_REDUCE:
    case IR_OP_TUPLE:
    case IR_OP_PAD:
        return true;
    default:
        return ir_op_is_elementwise(x->op) && x->op != IR_OP_MAP;
    }
}

static bool
remove_unused(Motion *M, uint32_t *cnt, const IrComputation *c, IrInstr *start)
{
    IrInstr **st = NULL;
    uint32_t n = 0, cap = 0;
    bool ok = push(&st, &n, &cap, start);
    while (n && ok) {
        IrInstr *x = st[--n];
        if (marked(M, x, M_DEAD) || x == c->root)
            continue;
        set_mark(M, x, M_DEAD);
        for (uint32_t o = 0; o < x->n_operands && ok; o++) {
            IrInstr *p = x->operands[o];
            if (p->id >= M->n_ids || marked(M, p, M_DEAD))
                continue;
            bool first = true; /* an operand used twice by x counts once */
            for (uint32_t q = 0; q < o; q++)
                first = first && x->operands[q] != p;
            if (first && cnt[p->id] > 0 && --cnt[p->id] == 0 && removable(p))
                ok = push(&st, &n, &cap, p);
        }
    }
    free(st);
    return ok;
}

/* Reorders `c` so operands precede users (stable otherwise), dropping M_DEAD instructions;
 * with `root_last` the root goes to the end. */
static bool
reorder(Motion *M, IrComputation *c, bool root_last)
{
    uint32_t n = c->n_instrs, w = 0;
    IrInstr **out = malloc((n ? n : 1) * sizeof(IrInstr *));
    IrInstr **st = NULL;
    uint32_t ns = 0, cap = 0;
    if (!out)
        return false;
    uint32_t ids = M->cx->out->next_instr_id;
    uint8_t *done = calloc(ids ? ids : 1, 1);
    bool ok = done != NULL;
    for (uint32_t pass = 0; pass < 2 && ok; pass++)
        for (uint32_t k = 0; k < n && ok; k++) {
            IrInstr *x = c->instrs[k];
            bool is_last = root_last && x == c->root;
            if (is_last != (pass == 1))
                continue;
            if (done[x->id] || marked(M, x, M_DEAD))
                continue;
            ok = push(&st, &ns, &cap, x);
            while (ns && ok) {
                IrInstr *t = st[ns - 1];
                if (done[t->id]) {
                    ns--;
                    continue;
                }
                IrInstr *need = NULL;
                for (uint32_t o = 0; o < t->n_operands && !need; o++)
                    if (!done[t->operands[o]->id])
                        need = t->operands[o];
                if (need) {
                    ok = push(&st, &ns, &cap, need);
                } else {
                    done[t->id] = 1;
                    out[w++] = t;
                    ns--;
                }
            }
        }
    if (ok) {
        memcpy(c->instrs, out, w * sizeof(IrInstr *));
        c->n_instrs = w;
    }
    free(done);
    free(st);
    free(out);
    return ok;
}

static bool
grow_marks(Motion *M)
{
    uint32_t n = M->cx->out->next_instr_id;
    if (n <= M->n_ids)
        return true;
    uint8_t *m = realloc(M->mark, n);
    if (!m)
        return false;
    memset(m + M->n_ids, 0, n - M->n_ids);
    M->mark = m;
    M->n_ids = n;
    return true;
}

/* Users counted per id over `c` (an instruction using x twice counts once). */
static uint32_t *
count_users(const IrComputation *c, uint32_t n_ids)
{
    uint32_t *cnt = calloc(n_ids ? n_ids : 1, sizeof(uint32_t));
    if (!cnt)
        return NULL;
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        const IrInstr *x = c->instrs[k];
        for (uint32_t o = 0; o < x->n_operands; o++) {
            bool first = true;
            for (uint32_t q = 0; q < o; q++)
                first = first && x->operands[q] != x->operands[o];
            if (first && x->operands[o]->id < n_ids)
                cnt[x->operands[o]->id]++;
        }
    }
    return cnt;
}

static bool
in_comp(const IrComputation *c, const IrInstr *x)
{
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (c->instrs[k] == x)
            return true;
    return false;
}

/* Puts computation `f` before `user` in the module's list (callees precede callers). */
static void
callee_first(IrModule *m, const IrComputation *f, const IrComputation *user)
{
    uint32_t fi = m->n_comps, ui = m->n_comps;
    for (uint32_t k = 0; k < m->n_comps; k++) {
        if (m->comps[k] == f)
            fi = k;
        if (m->comps[k] == user)
            ui = k;
    }
    if (fi == m->n_comps || ui == m->n_comps || fi < ui)
        return;
    IrComputation *moved = m->comps[fi];
    memmove(m->comps + ui + 1, m->comps + ui, (fi - ui) * sizeof(IrComputation *));
    m->comps[ui] = moved;
}

/* 1: moved; 0: the loop does not qualify (nothing changed); -1: out of memory. */
static int
move_into_loop(SpmdCtx *cx, IrComputation *comp, IrInstr *loop)
{
    if (!in_comp(comp, loop) || loop->n_operands != 1 || loop->shape.n_elems != 5)
        return 0;
    IrInstr *init = loop->operands[0];
    IrComputation *body = ir_instr_called(loop, IR_ATTR_BODY);
    IrComputation *cond = ir_instr_called(loop, IR_ATTR_CONDITION);
    if (init->op != IR_OP_TUPLE || init->n_operands != 5 || !body || !cond || !body->root ||
        body->root->op != IR_OP_TUPLE || body->root->n_operands != 5 ||
        body->root->operands[2]->op != IR_OP_DYNAMIC_UPDATE_SLICE ||
        !ir_computation_param(body, 0) || !ir_computation_param(cond, 0))
        return 0;
    Motion M = {.cx = cx, .comp = comp, .body = body};
    int res = 0;
    Cluster *cl = NULL;
    uint32_t n_cl = 0;
    uint32_t *cnt = NULL;
    M.n_ids = cx->out->next_instr_id;
    M.mark = calloc(M.n_ids ? M.n_ids : 1, 1);
    if (!M.mark || !use_idx_build(&M.use, comp, M.n_ids)) {
        res = -1;
        goto done;
    }
    if (n_users(&M.use, loop) != 1)
        goto done;
    IrInstr *gte = users_of(&M.use, loop)[0];
    int64_t index = -1;
    if (gte->op != IR_OP_GET_TUPLE_ELEMENT || !ir_instr_int_attr(gte, IR_ATTR_INDEX, &index) ||
        index != 2 || ir_shape_is_tuple(&gte->shape) || gte->shape.rank > SPMD_MAX_RANK)
        goto done;
    IrInstr *out = gte;
    if (n_users(&M.use, gte) == 1 && users_of(&M.use, gte)[0]->op == IR_OP_SLICE)
        out = users_of(&M.use, gte)[0];
    const IrShape padded = gte->shape, unpadded = out->shape;
    for (IrInstr *d = body->root->operands[2]; d->op == IR_OP_DYNAMIC_UPDATE_SLICE;
         d = d->operands[0])
        if (d->n_operands != 2 + padded.rank || d->operands[1]->shape.rank != padded.rank)
            goto done;
    res = collect(&M, out);
    if (res != 1)
        goto done;

    IrComputation *saved_comp = cx->comp;
    const IrInstr *saved_visiting = cx->visiting;
    cx->comp = comp;
    cx->visiting = M.reduces[0]->derived_from;
    /* reduce-shaped buffers: kept dims padded like the loop result */
    uint32_t first_buf = M.n_newops;
    for (uint32_t r = 0; r < M.n_reduces && res == 1; r++) {
        IrInstr *red = M.reduces[r];
        const int64_t *rd = NULL;
        uint32_t nr = ir_instr_ints_attr(red, IR_ATTR_DIMENSIONS, &rd);
        int64_t bd[SPMD_MAX_RANK];
        uint32_t nb = 0;
        for (uint32_t d = 0; d < padded.rank; d++)
            if (!spmd_we_listed_dim(rd, nr, d))
                bd[nb++] = padded.dims[d];
        IrShape bs = ir_shape_make(cx->arena, red->shape.dtype, bd, nb);
        IrInstr *buf = spmd_emit_zero_like(cx, &bs);
        if (!buf || !push(&M.newops, &M.n_newops, &M.cap_newops, buf))
            res = -1;
    }
    IrInstr *sub = res == 1 ? spmd_emit_tuple(cx, M.newops, M.n_newops) : NULL;
    if (!sub)
        res = -1;
    /* the loop state's element 2 becomes the sub-tuple */
    if (res == 1) {
        IrShape ts = loop->shape;
        ts.elems = SL_DUP_ARRAY(cx->arena, IrShape, loop->shape.elems, 5);
        if (!ts.elems) {
            res = -1;
        } else {
            ts.elems[2] = sub->shape;
            init->operands[2] = sub;
            init->shape = ts;
            loop->shape = ts;
            ir_computation_param(cond, 0)->shape = ts;
            ir_computation_param(body, 0)->shape = ts;
            body->root->shape = ts;
        }
    }
    if (res == 1 && !grow_marks(&M))
        res = -1;
    M.n_in = M.n_ids;
    /* clusters: one per dynamic-update-slice of the result chain, outermost first */
    cx->comp = body;
    cx->visiting = loop->derived_from;
    for (IrInstr *d = body->root->operands[2]; res == 1 && d->op == IR_OP_DYNAMIC_UPDATE_SLICE;
         d = d->operands[0]) {
        Cluster *ncl = realloc(cl, (n_cl + 1) * sizeof(Cluster));
        if (!ncl) {
            res = -1;
            break;
        }
        cl = ncl;
        cl[n_cl].dus = d;
        cl[n_cl].in = calloc(M.n_in, sizeof(IrInstr *));
        if (!cl[n_cl++].in) {
            res = -1;
            break;
        }
        cl[n_cl - 1].in[out->id] = d->operands[1];
    }
    IrInstr *inner = NULL;
    if (res == 1) {
        inner = spmd_emit_gte(cx, ir_computation_param(body, 0), 2);
        for (uint32_t k = 0; k < M.n_newops && inner; k++) {
            IrInstr *g = spmd_emit_gte(cx, inner, k);
            if (!g || M.newops[k]->id >= M.n_in)
                inner = NULL;
            for (uint32_t c = 0; c < n_cl && inner; c++)
                cl[c].in[M.newops[k]->id] = g;
        }
        if (!inner || !build_inside(&M, cl, n_cl, out, &padded))
            res = -1;
    }
    IrInstr **outs = res == 1 ? calloc(M.n_newops, sizeof(IrInstr *)) : NULL;
    if (res == 1 && !outs)
        res = -1;
    for (uint32_t k = 0; k < M.n_newops && res == 1; k++)
        outs[k] = cl[0].in[M.newops[k]->id];
    for (uint32_t r = 0; r < M.n_reduces && res == 1; r++) {
        IrInstr *last = outs[first_buf + r];
        for (uint32_t c = 0; c < n_cl && last; c++)
            last = reduce_inside(&M, &cl[c], M.reduces[r], last, &padded, &unpadded);
        outs[first_buf + r] = last;
        if (!last)
            res = -1;
    }
    for (uint32_t r = 0; r < M.n_reduces && res == 1; r++)
        callee_first(cx->out, ir_instr_called(M.reduces[r], IR_ATTR_TO_APPLY), body);
    IrInstr *new_out = res == 1 ? spmd_emit_tuple(cx, outs, M.n_newops) : NULL;
    free(outs);
    if (res == 1 && !new_out)
        res = -1;
    IrInstr *old_dus = body->root->operands[2];
    if (res == 1) {
        body->root->operands[2] = new_out;
        /* the outside: the reduces read the loop's buffers */
        cx->comp = comp;
        cx->visiting = M.reduces[0]->derived_from;
        IrInstr *g = spmd_emit_gte(cx, loop, 2);
        for (uint32_t r = 0; r < M.n_reduces && g && res == 1; r++) {
            IrInstr *red = M.reduces[r];
            IrInstr *v = spmd_emit_gte(cx, g, first_buf + r);
            if (v && !same_dims(&v->shape, &red->shape)) {
                int64_t start[SPMD_MAX_RANK] = {0};
                v = spmd_emit_slice(cx, v, start, red->shape.dims);
            }
            if (!v) {
                res = -1;
                break;
            }
            for (uint32_t k = 0; k < comp->n_instrs; k++)
                for (uint32_t o = 0; o < comp->instrs[k]->n_operands; o++)
                    if (comp->instrs[k]->operands[o] == red)
                        comp->instrs[k]->operands[o] = v;
            if (comp->root == red)
                comp->root = v;
            for (uint32_t k = 0; k < cx->n_values; k++)
                if (cx->values[k].hlo == red)
                    cx->values[k].hlo = v;
        }
        if (!g)
            res = -1;
    }
    cx->comp = saved_comp;
    cx->visiting = saved_visiting;
    if (res != 1 || !grow_marks(&M)) {
        res = -1;
        goto done;
    }
    /* drop what nothing reads any more, then restore the operand order */
    cnt = count_users(body, M.n_ids);
    if (!cnt || !remove_unused(&M, cnt, body, old_dus) || !reorder(&M, body, true)) {
        res = -1;
        goto done;
    }
    free(cnt);
    cnt = count_users(comp, M.n_ids);
    for (uint32_t r = 0; r < M.n_reduces && cnt && res == 1; r++)
        if (!remove_unused(&M, cnt, comp, M.reduces[r]))
            res = -1;
    if (!cnt || res != 1 || !reorder(&M, comp, false))
        res = -1;
done:
    for (uint32_t c = 0; c < n_cl; c++)
        free(cl[c].in);
    free(cl);
    free(cnt);
    free(M.mark);
    free(M.newops);
    free(M.reduces);
    free(M.found);
    free(M.stack);
    use_idx_fini(&M.use);
    return res;
}

SlStatus
spmd_windowed_code_motion(SpmdCtx *cx, IrComputation *oc, SlError *err)
{
    for (uint32_t k = 0; k < cx->n_wloops; k++) {
        SpmdWindowedLoop *w = &cx->wloops[k];
        if (w->comp != oc || !w->output_dus)
            continue;
        int r = move_into_loop(cx, oc, w->loop);
        if (r < 0 && sl_arena_failed(cx->arena))
            return spmd_nomem(cx, err);
        if (r < 0)
            return spmd_fail(cx, err, SL_ERR_INTERNAL,
                             "moving the consumers of windowed loop %%%s into it failed",
                             sl_sym_cstr(w->loop->name));
    }
    return SL_OK;
}
