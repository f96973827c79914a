/* viz_tree.c - the groups of one phase, for pages that open a collapsed diagram box by box
 * (viz.h, "groups of a phase"): the tree (computation, op_name prefixes, opcode splits, runs
 * of consecutive boxes) and each group's own diagram. Owns: the tree's shape and the group
 * boxes' labels. Does not own: which groups get drawn (the caller's budget) or the layout.
 * Invariant: built in one walk over the phase in recorded order; children keep the order of
 * their first instruction, so ids, names and DOT text never depend on hashes or pointers. */
#include <stdlib.h>
#include <string.h>

#include "viz/viz_int.h"

#define ITEM_OP 0x80000000u
/* In a view of more than twice this many items, an item feeding more than this many others
 * gets a count in its label instead of its edges. */
#define VIZ_TREE_FAN_EDGES 6 /* an item that is an instruction (global index | ITEM_OP) */

typedef struct TNode {
    uint32_t parent;
    const char *name; /* arena, NUL-terminated */
    uint32_t first;   /* first instruction under it (recorded order) */
    SlVec items;      /* uint32_t: node ids, or instruction | ITEM_OP, in order of first instr */
    bool dead;        /* absorbed into another node */
    bool is_run;      /* a run of consecutive items of its parent ("a .. b") */
} TNode;

struct VizTreeView {
    SlArena arena;
    VizCtx c;
    VizIndex x;
    VizTree t;
    VizOptions o;
    SlVec nodes;       /* TNode, while building */
    uint32_t *order;   /* [hi - lo]: instructions in tree order (each group's are contiguous) */
    uint32_t *start;   /* [n]: first position of group g's members in order */
    uint32_t *pos;     /* [hi - lo]: position of each instruction in order, UINT32_MAX */
    uint32_t **kids;   /* [n]: its items (final ids), n_kids[g] of them */
    uint32_t *n_kids;
    bool ok;
    bool split_opcode; /* some group split its ops by opcode */
};

static TNode *
node_at(VizTreeView *v, uint32_t id)
{
    return &SL_VEC_AT(&v->nodes, TNode, id);
}

static uint32_t
new_node(VizTreeView *v, uint32_t parent, const char *name, size_t len, uint32_t first)
{
    TNode n = {parent, sl_arena_strndup(&v->arena, name, len), first, {0}, false, false};
    if (!n.name || !SL_VEC_PUSH(&v->nodes, TNode, n)) {
        v->ok = false;
        return VIZ_NONE;
    }
    return (uint32_t)v->nodes.len - 1;
}

static void
push_item(VizTreeView *v, uint32_t node, uint32_t item)
{
    if (!SL_VEC_PUSH(&node_at(v, node)->items, uint32_t, item))
        v->ok = false;
}

/* The child of `parent` called name[0, len) (kind: 'c' computation, 'p' prefix part, 'o'
 * opcode), made at instruction i when new. */
static uint32_t
child(VizTreeView *v, SlMap *index, uint32_t parent, char kind, const char *name, size_t len,
      uint32_t i)
{
    uint64_t key = (sl_hash_bytes(name, len) * 1000003u + parent) * 31u + (uint64_t)kind, got;
    for (;; key++) {
        if (key == SL_MAP_EMPTY)
            key = 0;
        if (!sl_map_get(index, key, &got))
            break;
        TNode *n = node_at(v, (uint32_t)got);
        if (n->parent == parent && strlen(n->name) == len && memcmp(n->name, name, len) == 0)
            return (uint32_t)got;
    }
    uint32_t id = new_node(v, parent, name, len, i);
    if (id == VIZ_NONE || !sl_map_put(index, key, id)) {
        v->ok = false;
        return VIZ_NONE;
    }
    push_item(v, parent, id);
    return id;
}

static const char *
op_name_of(const TraceRun *run, uint32_t i)
{
    const TraceRunInstr *in = &run->instrs[i];
    if (in->phase == TRACE_AFTER && in->derived_from != TRACE_NONE)
        in = &run->instrs[in->derived_from];
    return in->op_name;
}

/* Where each instruction's op goes while the tree is built: the group of its computation (one
 * outside the entry, placed where the computation's only call site is, else at the top), then
 * down its op_name prefix (minus the part its caller's op_name already gave). */
typedef struct Place {
    VizTreeView *v;
    SlMap index;     /* child() keys */
    uint32_t *anchor; /* [n_comps]: the computation's group, VIZ_NONE until made */
    uint32_t *at;     /* [hi - lo]: the node an instruction's op goes in, VIZ_NONE until known */
    bool nest_comps;  /* more than one computation is drawn */
    bool by_comp, by_prefix;
} Place;

/* Length of the op_name prefix of instruction i (up to its last '/'), 0 when none. */
static size_t
prefix_len(const char *s)
{
    const char *slash = s ? strrchr(s, '/') : NULL;
    return slash ? (size_t)(slash - s) : 0;
}

static uint32_t
place(Place *pl, uint32_t root, uint32_t i, int depth)
{
    VizTreeView *v = pl->v;
    const VizIndex *x = &v->x;
    const TraceRun *run = x->run;
    if (pl->at[i - x->lo] != VIZ_NONE)
        return pl->at[i - x->lo];
    uint32_t comp = viz_comp_of(x, i), at = root;
    const VizComp *cp = &x->comps[comp];
    const char *s = op_name_of(run, i);
    if (pl->nest_comps && !cp->is_entry) {
        const char *caller_op = NULL;
        if (pl->anchor[comp] == VIZ_NONE) {
            uint32_t base = root;
            if (cp->caller != VIZ_NONE && depth < 32 &&
                !x->comps[viz_comp_of(x, cp->caller)].is_reducer)
                base = place(pl, root, cp->caller, depth + 1);
            SlBuf nm;
            sl_buf_init(&nm);
            sl_buf_printf(&nm, "%%%s", cp->name);
            pl->anchor[comp] = nm.data && base != VIZ_NONE
                                   ? child(v, &pl->index, base, 'c', nm.data, nm.len, i)
                                   : VIZ_NONE;
            sl_buf_fini(&nm);
            pl->by_comp = true;
        }
        at = pl->anchor[comp];
        if (cp->caller != VIZ_NONE)
            caller_op = op_name_of(run, cp->caller);
        size_t skip = prefix_len(caller_op);
        if (s && skip && strncmp(s, caller_op, skip) == 0 && s[skip] == '/')
            s += skip + 1;
    }
    for (const char *p = s; p && v->ok && at != VIZ_NONE;) {
        const char *slash = strchr(p, '/');
        if (!slash) /* the last part names the op itself */
            break;
        if (slash > p) {
            at = child(v, &pl->index, at, 'p', p, (size_t)(slash - p), i);
            pl->by_prefix = true;
        }
        p = slash + 1;
    }
    pl->at[i - x->lo] = at;
    return at;
}

/* ---- shaping ----------------------------------------------------------------------------- */

static uint32_t
item_first(VizTreeView *v, uint32_t item)
{
    return item & ITEM_OP ? item & ~ITEM_OP : node_at(v, item)->first;
}

static uint32_t
n_items(VizTreeView *v, uint32_t id)
{
    return (uint32_t)node_at(v, id)->items.len;
}

/* Node `id` takes the place of its items: those move up into `into` at `at`. */
static void
absorb(VizTreeView *v, uint32_t into, size_t at, uint32_t id, bool prefix_names)
{
    TNode *n = node_at(v, id);
    SlVec moved = n->items;
    n->items = (SlVec){0};
    n->dead = true;
    for (size_t k = 0; k < moved.len; k++) {
        uint32_t it = SL_VEC_AT(&moved, uint32_t, k);
        if (it & ITEM_OP)
            continue;
        TNode *c = node_at(v, it);
        c->parent = into;
        if (prefix_names && !n->is_run) {
            const char *nm = c->name;
            size_t a = strlen(n->name), b = strlen(nm);
            char *s = sl_arena_alloc_uninit(&v->arena, a + b + 2, 1);
            if (!s) {
                v->ok = false;
                continue;
            }
            memcpy(s, n->name, a);
            s[a] = '/';
            memcpy(s + a + 1, nm, b + 1);
            c->name = s;
        }
    }
    SlVec *dst = &node_at(v, into)->items;
    SlVec out = {0};
    for (size_t k = 0; k < dst->len && v->ok; k++) {
        if (k == at) {
            for (size_t m = 0; m < moved.len && v->ok; m++)
                v->ok = SL_VEC_PUSH(&out, uint32_t, SL_VEC_AT(&moved, uint32_t, m));
        } else
            v->ok = SL_VEC_PUSH(&out, uint32_t, SL_VEC_AT(dst, uint32_t, k));
    }
    sl_vec_fini(&moved);
    sl_vec_fini(dst);
    *dst = out;
}

/* Many ops directly in a group, of two or more opcodes: one group per opcode, where its first
 * op stands. */
static void
split_by_opcode(VizTreeView *v, uint32_t id)
{
    const TraceRun *run = v->x.run;
    uint32_t ops = 0, first_op = VIZ_NONE;
    bool mixed = false;
    for (size_t k = 0; k < node_at(v, id)->items.len; k++) {
        uint32_t it = SL_VEC_AT(&node_at(v, id)->items, uint32_t, k);
        if (!(it & ITEM_OP))
            continue;
        ops++;
        if (first_op == VIZ_NONE)
            first_op = it & ~ITEM_OP;
        else if (strcmp(run->instrs[first_op].opcode, run->instrs[it & ~ITEM_OP].opcode))
            mixed = true;
    }
    if (ops <= VIZ_TREE_FANOUT || !mixed)
        return;
    SlMap count; /* opcode hash -> ops of it (an opcode with one op keeps it in place) */
    sl_map_init(&count);
    for (size_t k = 0; k < node_at(v, id)->items.len && v->ok; k++) {
        uint32_t it = SL_VEC_AT(&node_at(v, id)->items, uint32_t, k);
        const char *op = it & ITEM_OP ? run->instrs[it & ~ITEM_OP].opcode : NULL;
        uint64_t key = op ? sl_hash_bytes(op, strlen(op)) : 0, c = 0;
        if (!op)
            continue;
        key = key == SL_MAP_EMPTY ? 0 : key;
        (void)sl_map_get(&count, key, &c);
        v->ok = sl_map_put(&count, key, c + 1);
    }
    SlMap by_opcode;
    sl_map_init(&by_opcode);
    SlVec out = {0};
    SlVec items = node_at(v, id)->items;
    node_at(v, id)->items = (SlVec){0};
    for (size_t k = 0; k < items.len && v->ok; k++) {
        uint32_t it = SL_VEC_AT(&items, uint32_t, k);
        if (!(it & ITEM_OP)) {
            v->ok = SL_VEC_PUSH(&out, uint32_t, it);
            continue;
        }
        uint32_t i = it & ~ITEM_OP;
        const char *op = run->instrs[i].opcode;
        uint64_t key = sl_hash_bytes(op, strlen(op)), got = 0, c = 0;
        if (sl_map_get(&count, key == SL_MAP_EMPTY ? 0 : key, &c) && c < 2) {
            v->ok = SL_VEC_PUSH(&out, uint32_t, it); /* hash collisions only merge counts */
            continue;
        }
        for (;; key++) {
            if (key == SL_MAP_EMPTY)
                key = 0;
            if (!sl_map_get(&by_opcode, key, &got) || !strcmp(node_at(v, (uint32_t)got)->name, op))
                break;
        }
        if (!sl_map_get(&by_opcode, key, &got)) {
            got = new_node(v, id, op, strlen(op), i);
            v->ok = v->ok && sl_map_put(&by_opcode, key, got) && SL_VEC_PUSH(&out, uint32_t, got);
        }
        if (v->ok)
            push_item(v, (uint32_t)got, it);
    }
    sl_map_fini(&by_opcode);
    sl_map_fini(&count);
    sl_vec_fini(&items);
    node_at(v, id)->items = out;
    v->split_opcode = true;
}

static void
item_name(VizTreeView *v, uint32_t item, SlBuf *out)
{
    if (item & ITEM_OP)
        sl_buf_printf(out, "%%%s", v->x.run->instrs[item & ~ITEM_OP].name);
    else
        sl_buf_puts(out, node_at(v, item)->name);
}

/* More than VIZ_TREE_FANOUT items: runs of consecutive ones become groups ("a .. b"), as
 * many as needed for at most VIZ_TREE_FANOUT (a run that is still too big splits again). */
static void
split_in_runs(VizTreeView *v, uint32_t id)
{
    size_t n = n_items(v, id);
    if (n <= VIZ_TREE_FANOUT || !v->ok)
        return;
    size_t per = (n + VIZ_TREE_FANOUT - 1) / VIZ_TREE_FANOUT;
    SlVec items = node_at(v, id)->items;
    node_at(v, id)->items = (SlVec){0};
    SlVec runs = {0};
    for (size_t k = 0; k < n && v->ok; k += per) {
        size_t end = k + per < n ? k + per : n;
        uint32_t a = SL_VEC_AT(&items, uint32_t, k), b = SL_VEC_AT(&items, uint32_t, end - 1);
        SlBuf nm;
        sl_buf_init(&nm);
        item_name(v, a, &nm);
        if (end - k > 1) {
            sl_buf_puts(&nm, " .. ");
            item_name(v, b, &nm);
        }
        uint32_t r = new_node(v, id, nm.data ? nm.data : "", nm.len, item_first(v, a));
        v->ok = v->ok && !nm.failed && SL_VEC_PUSH(&runs, uint32_t, r);
        if (v->ok)
            node_at(v, r)->is_run = true;
        sl_buf_fini(&nm);
        for (size_t m = k; m < end && v->ok; m++) {
            uint32_t it = SL_VEC_AT(&items, uint32_t, m);
            if (!(it & ITEM_OP))
                node_at(v, it)->parent = r;
            push_item(v, r, it);
        }
        if (v->ok)
            split_in_runs(v, r);
    }
    sl_vec_fini(&items);
    node_at(v, id)->items = runs;
}

static uint32_t
subtree_size(VizTreeView *v, uint32_t id)
{
    uint32_t n = 0;
    for (size_t k = 0; k < n_items(v, id); k++) {
        uint32_t it = SL_VEC_AT(&node_at(v, id)->items, uint32_t, k);
        n += it & ITEM_OP ? 1 : subtree_size(v, it);
    }
    return n;
}

/* Fewer than VIZ_TREE_MIN_BOXES items: take in the items of the biggest group while that
 * keeps at most VIZ_TREE_MAX_BOXES. */
static void
fill(VizTreeView *v, uint32_t id)
{
    while (v->ok && n_items(v, id) < VIZ_TREE_MIN_BOXES) {
        size_t best = SIZE_MAX;
        uint32_t best_size = 0, n = n_items(v, id);
        for (size_t k = 0; k < n; k++) {
            uint32_t it = SL_VEC_AT(&node_at(v, id)->items, uint32_t, k);
            if (it & ITEM_OP || n - 1 + n_items(v, it) > VIZ_TREE_MAX_BOXES)
                continue;
            uint32_t size = subtree_size(v, it);
            if (size > best_size) {
                best = k;
                best_size = size;
            }
        }
        if (best == SIZE_MAX)
            return;
        absorb(v, id, best, SL_VEC_AT(&node_at(v, id)->items, uint32_t, best), true);
    }
}

static void
shape(VizTreeView *v, uint32_t id, int depth)
{
    /* a chain of single groups is one group */
    while (v->ok && n_items(v, id) == 1 && !(SL_VEC_AT(&node_at(v, id)->items, uint32_t, 0) &
                                             ITEM_OP)) {
        uint32_t only = SL_VEC_AT(&node_at(v, id)->items, uint32_t, 0);
        const char *a = node_at(v, id)->name, *b = node_at(v, only)->name;
        SlBuf nm;
        sl_buf_init(&nm);
        sl_buf_printf(&nm, "%s%s%s", a, *a ? "/" : "", b);
        node_at(v, id)->name = nm.data ? sl_arena_strndup(&v->arena, nm.data, nm.len) : NULL;
        v->ok = v->ok && node_at(v, id)->name && !nm.failed;
        sl_buf_fini(&nm);
        absorb(v, id, 0, only, false);
    }
    split_by_opcode(v, id);
    for (size_t k = 0; v->ok && depth < 64 && k < n_items(v, id); k++) {
        uint32_t it = SL_VEC_AT(&node_at(v, id)->items, uint32_t, k);
        if (!(it & ITEM_OP))
            shape(v, it, depth + 1);
    }
    split_in_runs(v, id);
    fill(v, id);
}

/* ---- the final tree ------------------------------------------------------------------------ */

typedef struct Finish {
    VizTreeView *v;
    uint32_t *id_of; /* [nodes]: final id */
    uint32_t next, placed;
} Finish;

static void
assign(Finish *f, uint32_t node, uint32_t parent)
{
    VizTreeView *v = f->v;
    VizTree *t = &v->t;
    uint32_t g = f->next++;
    f->id_of[node] = g;
    TNode *n = node_at(v, node);
    t->parent[g] = parent;
    t->name[g] = n->name;
    v->start[g] = f->placed;
    t->items[g] = (uint32_t)n->items.len;
    v->n_kids[g] = (uint32_t)n->items.len;
    v->kids[g] = SL_NEW_ARRAY(&v->arena, uint32_t, n->items.len + 1);
    if (!v->kids[g] || !t->name[g]) {
        v->ok = false;
        return;
    }
    if (parent == UINT32_MAX || !*t->path[parent])
        t->path[g] = n->name;
    else {
        SlBuf p;
        sl_buf_init(&p);
        sl_buf_printf(&p, "%s/%s", t->path[parent], n->name);
        t->path[g] = p.data ? sl_arena_strndup(&v->arena, p.data, p.len) : NULL;
        v->ok = v->ok && t->path[g];
        sl_buf_fini(&p);
    }
    for (size_t k = 0; k < n->items.len && v->ok; k++) {
        uint32_t it = SL_VEC_AT(&node_at(v, node)->items, uint32_t, k);
        if (it & ITEM_OP) {
            uint32_t i = it & ~ITEM_OP;
            t->leaf[i - t->lo] = g;
            v->pos[i - t->lo] = f->placed;
            v->order[f->placed++] = i;
            v->kids[g][k] = it;
            const TraceRunCollective *c =
                v->x.collective[i] != VIZ_NONE ? &v->x.run->collectives[v->x.collective[i]] : NULL;
            if (c)
                t->send[g] +=
                    c->max_device_send_bytes / (double)(c->trip_count > 0 ? c->trip_count : 1);
        } else {
            assign(f, it, g);
            v->kids[g][k] = f->id_of[it];
        }
    }
    t->members[g] = f->placed - v->start[g];
    if (parent != UINT32_MAX)
        t->send[parent] += t->send[g];
}

static bool
finish(VizTreeView *v, uint32_t root)
{
    VizTree *t = &v->t;
    uint32_t live = 0, n = t->hi - t->lo;
    for (size_t k = 0; k < v->nodes.len; k++)
        live += !node_at(v, (uint32_t)k)->dead;
    SlArena *a = &v->arena;
    t->n = live;
    t->parent = SL_NEW_ARRAY(a, uint32_t, live);
    t->name = SL_NEW_ARRAY(a, const char *, live);
    t->path = SL_NEW_ARRAY(a, const char *, live);
    t->members = SL_NEW_ARRAY(a, uint32_t, live);
    t->items = SL_NEW_ARRAY(a, uint32_t, live);
    t->send = SL_NEW_ARRAY(a, double, live);
    t->leaf = SL_NEW_ARRAY(a, uint32_t, n + 1);
    v->start = SL_NEW_ARRAY(a, uint32_t, live);
    v->kids = SL_NEW_ARRAY(a, uint32_t *, live);
    v->n_kids = SL_NEW_ARRAY(a, uint32_t, live);
    v->order = SL_NEW_ARRAY(a, uint32_t, n + 1);
    v->pos = SL_NEW_ARRAY(a, uint32_t, n + 1);
    Finish f = {v, SL_NEW_ARRAY(a, uint32_t, v->nodes.len + 1), 0, 0};
    if (!t->parent || !t->name || !t->path || !t->members || !t->items || !t->send || !t->leaf ||
        !v->start || !v->kids || !v->n_kids || !v->order || !v->pos || !f.id_of)
        return false;
    memset(t->leaf, 0xff, (n + 1) * sizeof(uint32_t));
    memset(v->pos, 0xff, (n + 1) * sizeof(uint32_t));
    assign(&f, root, UINT32_MAX);
    return v->ok;
}

SlStatus
viz_tree_new(VizTreeView **out, const TraceRun *run, TracePhase phase, const VizOptions *o,
              SlError *err)
{
    SlSrcLoc nowhere = {0};
    VizTreeView *v = calloc(1, sizeof(*v));
    *out = NULL;
    if (!v)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    sl_arena_init(&v->arena);
    v->o = *o;
    v->ok = true;
    SlStatus st = viz_ctx_init(&v->c, run, &v->o, &v->arena, NULL, err);
    if (!st)
        st = viz_index_build(&v->x, run, phase, &v->arena, err);
    if (st) {
        viz_tree_free(v);
        return st;
    }
    VizTree *t = &v->t;
    t->phase = phase;
    t->lo = v->x.lo;
    t->hi = v->x.hi;
    uint32_t drawn_comps = 0;
    for (uint32_t k = 0; k < v->x.n_comps; k++)
        drawn_comps += !v->x.comps[k].is_reducer;
    Place pl = {v, {0}, NULL, NULL, drawn_comps > 1, false, false};
    sl_map_init(&pl.index);
    pl.anchor = malloc(((size_t)v->x.n_comps + 1) * sizeof(uint32_t));
    pl.at = malloc(((size_t)(t->hi - t->lo) + 1) * sizeof(uint32_t));
    v->ok = pl.anchor && pl.at;
    if (v->ok) {
        memset(pl.anchor, 0xff, ((size_t)v->x.n_comps + 1) * sizeof(uint32_t));
        memset(pl.at, 0xff, ((size_t)(t->hi - t->lo) + 1) * sizeof(uint32_t));
    }
    uint32_t root = v->ok ? new_node(v, VIZ_NONE, "", 0, t->lo) : VIZ_NONE;
    for (uint32_t i = t->lo; v->ok && i < t->hi; i++) {
        if (v->x.comps[viz_comp_of(&v->x, i)].is_reducer)
            continue;
        uint32_t at = place(&pl, root, i, 0);
        if (at == VIZ_NONE)
            v->ok = false;
        else
            push_item(v, at, i | ITEM_OP);
    }
    bool by_comp = pl.by_comp, by_prefix = pl.by_prefix;
    free(pl.anchor);
    free(pl.at);
    sl_map_fini(&pl.index);
    if (v->ok)
        shape(v, root, 0);
    bool by_opcode = v->split_opcode;
    t->basis = by_comp && by_prefix ? "computations, op_name prefixes"
               : by_comp            ? "computations"
               : by_prefix          ? "op_name prefixes"
                                    : "opcodes";
    if (by_opcode && (by_comp || by_prefix))
        t->basis = by_comp && by_prefix ? "computations, op_name prefixes, opcodes"
                   : by_comp            ? "computations, opcodes"
                                        : "op_name prefixes, opcodes";
    if (v->ok)
        v->ok = finish(v, root);
    for (size_t k = 0; k < v->nodes.len; k++)
        sl_vec_fini(&node_at(v, (uint32_t)k)->items);
    sl_vec_fini(&v->nodes);
    if (!v->ok) {
        viz_tree_free(v);
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory grouping the diagram");
    }
    *out = v;
    return SL_OK;
}

const VizTree *
viz_tree_get(const VizTreeView *v)
{
    return &v->t;
}

void
viz_tree_free(VizTreeView *v)
{
    if (!v)
        return;
    for (size_t k = 0; k < v->nodes.len; k++)
        sl_vec_fini(&node_at(v, (uint32_t)k)->items);
    sl_vec_fini(&v->nodes);
    viz_ctx_fini(&v->c);
    sl_arena_fini(&v->arena);
    free(v);
}

/* ---- one group's diagram --------------------------------------------------------------------- */

/* The item of group g's diagram that shows instruction i (under g): the op itself, or the box
 * of the child group holding it. */
static uint32_t
item_in(const VizTreeView *v, uint32_t g, uint32_t i)
{
    const VizTree *t = &v->t;
    uint32_t at = t->leaf[i - t->lo];
    if (at == g)
        return i | ITEM_OP;
    while (at != UINT32_MAX && t->parent[at] != g)
        at = t->parent[at];
    return at;
}

static bool
under(const VizTreeView *v, uint32_t g, uint32_t i)
{
    const VizTree *t = &v->t;
    if (i < t->lo || i >= t->hi || v->pos[i - t->lo] == UINT32_MAX)
        return false;
    uint32_t p = v->pos[i - t->lo];
    return p >= v->start[g] && p < v->start[g] + t->members[g];
}

static const char *
box_label(VizTreeView *v, uint32_t h)
{
    const VizTree *t = &v->t;
    const TraceRun *run = v->x.run;
    uint32_t kinds[16] = {0};
    for (uint32_t p = v->start[h]; p < v->start[h] + t->members[h]; p++) {
        uint32_t k = v->x.collective[v->order[p]];
        if (k != VIZ_NONE) {
            uint32_t kind = viz_kind_index(run->collectives[k].kind);
            kinds[kind == VIZ_NONE || kind >= 15 ? 15 : kind]++;
        }
    }
    SlBuf b;
    sl_buf_init(&b);
    SlBuf cut;
    sl_buf_init(&cut);
    viz_put_cut(&cut, t->name[h], VIZ_LABEL_WIDTH);
    for (const char *p = cut.data ? cut.data : ""; *p; p++) {
        if (*p == '\\')
            sl_buf_putc(&b, '\\');
        sl_buf_putc(&b, *p);
    }
    sl_buf_fini(&cut);
    sl_buf_printf(&b, "\\n%u instruction%s, %u box%s inside", t->members[h],
                  t->members[h] == 1 ? "" : "s", t->items[h], t->items[h] == 1 ? "" : "es");
    for (uint32_t k = 0; k < 16; k++)
        if (kinds[k])
            sl_buf_printf(&b, "\\n%s x%u", k < viz_kind_count() ? viz_kind_name(k) : "other",
                          kinds[k]);
    if (t->send[h] > 0) {
        sl_buf_puts(&b, "\\nsends ");
        viz_bytes(&b, t->send[h]);
        sl_buf_puts(&b, "/device per execution");
    }
    const char *s = viz_strdup_buf(&v->c.g, &b);
    sl_buf_fini(&b);
    return s;
}

/* The operand edges from one item to another, merged into one. */
typedef struct Edge {
    uint64_t key;
    double bytes;   /* what they carry (after partitioning: per device) */
    uint32_t count; /* operand edges merged */
} Edge;

SlStatus
viz_tree_dot(VizTreeView *v, uint32_t g, SlBuf *dot, uint64_t *units, SlError *err)
{
    SlSrcLoc nowhere = {0};
    const VizTree *t = &v->t;
    const TraceRun *run = v->x.run;
    VizCtx *c = &v->c;
    viz_ctx_reset(c);
    if (g >= t->n)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "no group %u", g);
    uint32_t nk = v->n_kids[g];
    uint32_t *node_of = calloc((size_t)nk + 1, sizeof(uint32_t));
    SlMap slot; /* item -> index into kids + 1 */
    sl_map_init(&slot);
    bool ok = node_of != NULL;
    for (uint32_t k = 0; ok && k < nk; k++) {
        uint32_t it = v->kids[g][k];
        ok = sl_map_put(&slot, it, (uint64_t)k + 1);
        if (it & ITEM_OP) {
            uint32_t i = it & ~ITEM_OP;
            node_of[k] = viz_add_instr_node(c, &v->x, i, VIZ_NONE, false);
            const TraceRunInstr *colour = &run->instrs[i]; /* after: its source's sharding */
            if (colour->phase == TRACE_AFTER && colour->derived_from != TRACE_NONE)
                colour = &run->instrs[colour->derived_from];
            uint32_t p = viz_palette_find(&c->pal, colour->sharding);
            if (p != VIZ_NONE)
                c->used_pal[p] = true;
            uint32_t coll = v->x.collective[i];
            if (coll != VIZ_NONE && viz_kind_index(run->collectives[coll].kind) != VIZ_NONE)
                c->used_kind[viz_kind_index(run->collectives[coll].kind)] = true;
            continue;
        }
        node_of[k] = viz_add_node(&c->g, viz_fmt(&c->g, "h%u", it), VIZ_NONE);
        VizAttrs *a = viz_node_attrs(&c->g, node_of[k]);
        ok = a != NULL;
        if (!ok)
            break;
        a->v[VIZ_A_LABEL] = box_label(v, it);
        a->v[VIZ_A_SHAPE] = "folder";
        a->v[VIZ_A_FILLCOLOR] = t->send[it] > 0 ? "#fdebd0" : "#eaf2f8";
        a->v[VIZ_A_TOOLTIP] = viz_fmt(&c->g, "%s (click to open)", t->path[it]);
        if (t->send[it] > 0) {
            a->v[VIZ_A_COLOR] = "#c0392b";
            a->v[VIZ_A_PENWIDTH] = "2";
        }
    }
    /* data edges between the items, summed; bytes after partitioning */
    SlMap eidx;
    sl_map_init(&eidx);
    SlVec edges = {0};
    uint32_t in_from_outside = 0, out_to_outside = 0;
    for (uint32_t p = v->start[g]; ok && p < v->start[g] + t->members[g]; p++) {
        uint32_t i = v->order[p];
        const TraceRunInstr *in = &run->instrs[i];
        uint32_t head = item_in(v, g, i);
        for (uint32_t k = 0; ok && k < in->n_operands; k++) {
            uint32_t o = in->operands[k];
            if (!under(v, g, o)) {
                in_from_outside += o >= t->lo && o < t->hi;
                continue;
            }
            uint32_t tail = item_in(v, g, o);
            uint64_t ht = 0, hh = 0, e = 0;
            if (tail == head || !sl_map_get(&slot, tail, &ht) || !sl_map_get(&slot, head, &hh))
                continue;
            uint64_t key = (ht - 1) << 32 | (hh - 1);
            const TraceRunInstr *carried =
                strcmp(in->opcode, "get-tuple-element") == 0 ? in : &run->instrs[o];
            if (!sl_map_get(&eidx, key, &e)) {
                Edge ed = {key, 0, 0};
                ok = SL_VEC_PUSH(&edges, Edge, ed) && sl_map_put(&eidx, key, edges.len);
                e = edges.len;
            }
            if (ok) {
                SL_VEC_AT(&edges, Edge, e - 1).bytes += (double)carried->size_bytes;
                SL_VEC_AT(&edges, Edge, e - 1).count++;
            }
        }
    }
    for (uint32_t p = v->start[g]; ok && p < v->start[g] + t->members[g]; p++) {
        uint32_t i = v->order[p], li = i - t->lo;
        for (uint32_t k = v->x.user_off[li]; k < v->x.user_off[li + 1]; k++)
            out_to_outside += !under(v, g, v->x.users[k]);
    }
    /* An item that feeds many of the others (the parameters, an embedding) would draw a fan
     * of long edges across the whole view: its label says how many it feeds instead. */
    uint32_t *fan = calloc((size_t)nk + 1, sizeof(uint32_t));
    ok = ok && fan;
    for (size_t k = 0; ok && k < edges.len; k++)
        fan[SL_VEC_AT(&edges, Edge, k).key >> 32]++;
    for (uint32_t k = 0; ok && nk > 2 * VIZ_TREE_FAN_EDGES && k < nk; k++) {
        if (fan[k] <= VIZ_TREE_FAN_EDGES)
            continue;
        VizAttrs *a = viz_node_attrs(&c->g, node_of[k]);
        a->v[VIZ_A_LABEL] =
            viz_fmt(&c->g, "%s\\nfeeds %u of the boxes here (edges not drawn)", a->v[VIZ_A_LABEL],
                    fan[k]);
    }
    for (size_t k = 0; ok && k < edges.len; k++) {
        const Edge *ed = &SL_VEC_AT(&edges, Edge, k);
        if (nk > 2 * VIZ_TREE_FAN_EDGES && fan[ed->key >> 32] > VIZ_TREE_FAN_EDGES)
            continue;
        uint32_t e = viz_add_edge(&c->g, node_of[ed->key >> 32], node_of[ed->key & 0xffffffffu]);
        VizAttrs *a = viz_edge_attrs(&c->g, e);
        ok = a != NULL;
        /* after: the bytes they carry; merged edges: how many ("12 edges, 1.50 MiB") */
        if (ok && (t->phase == TRACE_AFTER || ed->count > 1)) {
            SlBuf b;
            sl_buf_init(&b);
            if (ed->count > 1)
                sl_buf_printf(&b, "%u edges%s", ed->count, t->phase == TRACE_AFTER ? ", " : "");
            if (t->phase == TRACE_AFTER)
                viz_bytes(&b, ed->bytes);
            a->v[VIZ_A_LABEL] = viz_strdup_buf(&c->g, &b);
            sl_buf_fini(&b);
        }
    }
    SlBuf title;
    sl_buf_init(&title);
    sl_buf_printf(&title, "%s: %s", t->phase == TRACE_BEFORE ? "before" : "after",
                  *t->path[g] ? t->path[g] : run->module);
    sl_buf_printf(&title, ", %u instructions in %u boxes and ops", t->members[g], t->items[g]);
    if (g && (in_from_outside || out_to_outside))
        sl_buf_printf(&title, "; %u operand edges come in from outside, %u go out",
                      in_from_outside, out_to_outside);
    c->g.label = viz_strdup_buf(&c->g, &title);
    sl_buf_fini(&title);
    if (ok && g == 0)
        viz_add_legend(c, t->phase == TRACE_AFTER);
    if (ok) {
        viz_graph_cheapen(&c->g);
        *units = viz_graph_units(&c->g);
        viz_graph_write_dot(&c->g, dot);
    }
    free(node_of);
    free(fan);
    sl_map_fini(&slot);
    sl_map_fini(&eidx);
    sl_vec_fini(&edges);
    if (!ok || c->g.failed || dot->failed)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory drawing a group");
    return SL_OK;
}
