/* viz_collapse.c - diagrams of graphs too big to lay out whole: one node per source
 * instruction and computation (everything the partitioner emitted for one input instruction
 * becomes one box), or one node per computation. Owns: the grouping and its labels. Does not
 * own: deciding when to collapse (viz_render.c). Invariant: a group is named after its first
 * member in recorded order, and groups, edges and clusters are made in that order. */
#include <stdlib.h>
#include <string.h>

#include "viz/viz_int.h"

/* One box of a collapsed diagram. */
typedef struct Group {
    uint32_t first;  /* first member (global instruction index) */
    uint32_t source; /* 'before' instruction, or VIZ_NONE */
    uint32_t comp;
    uint32_t members;
    uint32_t n_coll[8];     /* per collective kind (viz_kind_index) */
    double send_per_device; /* summed over its collectives, per execution */
    uint32_t loop;          /* a windowed loop among its members, VIZ_NONE */
    const char *prefix;     /* op_name prefix groups: the prefix (not NUL-terminated) */
    uint32_t prefix_len;
} Group;

typedef struct Groups {
    Group *g;
    uint32_t n;
    uint32_t *of; /* [hi - lo]: group per instruction, VIZ_NONE for undrawn */
} Groups;

/* The first `depth` '/'-separated parts of the op_name that names instruction i (after
 * partitioning: its source's), or NULL when it has no more parts than that. */
static const char *
op_prefix(const VizIndex *x, uint32_t i, uint32_t depth, uint32_t *len)
{
    const TraceRunInstr *in = &x->run->instrs[i];
    if (in->phase == TRACE_AFTER && in->derived_from != TRACE_NONE)
        in = &x->run->instrs[in->derived_from];
    const char *s = in->op_name;
    if (!s || !*s)
        return NULL;
    const char *p = s;
    for (uint32_t d = 0; d < depth; d++) {
        const char *slash = strchr(p, '/');
        if (!slash) /* no more than `depth` parts: a leaf, not a prefix */
            return NULL;
        p = slash + (d + 1 < depth ? 1 : 0);
    }
    *len = (uint32_t)(p - s);
    return s;
}

/* Groups by (computation, source); `by_comp`: by computation alone; `prefix_depth` > 0: by
 * (computation, op_name prefix of that many parts), instructions whose op_name is shorter (or
 * missing) together. */
static bool
make_groups_at(const VizIndex *x, bool by_comp, uint32_t prefix_depth, Groups *out)
{
    const TraceRun *run = x->run;
    uint32_t n = x->hi - x->lo;
    SlMap key_to_group;
    sl_map_init(&key_to_group);
    out->n = 0;
    out->g = calloc((size_t)n + 1, sizeof(Group));
    out->of = malloc(((size_t)n + 1) * sizeof(uint32_t));
    bool ok = out->g && out->of;
    for (uint32_t i = x->lo; ok && i < x->hi; i++) {
        uint32_t comp = viz_comp_of(x, i);
        out->of[i - x->lo] = VIZ_NONE;
        if (x->comps[comp].is_reducer)
            continue;
        uint32_t src = run->instrs[i].derived_from;
        uint32_t who = by_comp ? 0 : src != TRACE_NONE ? src : i;
        uint64_t key = (uint64_t)comp << 32 | who, gi = 0;
        uint32_t plen = 0;
        const char *prefix = prefix_depth ? op_prefix(x, i, prefix_depth, &plen) : NULL;
        if (prefix_depth && !prefix) { /* one box per computation for all of them */
            prefix = "(other op_names)";
            plen = (uint32_t)strlen(prefix);
        }
        if (prefix) /* top bit set: never a (comp, instruction) key */
            key = (sl_hash_bytes(prefix, plen) * 31u + comp) | (1ull << 63);
        if (!sl_map_get(&key_to_group, key, &gi)) {
            gi = out->n++;
            Group *g = &out->g[gi];
            g->first = i;
            g->source = by_comp || prefix ? VIZ_NONE : src != TRACE_NONE ? src : VIZ_NONE;
            g->comp = comp;
            g->loop = VIZ_NONE;
            g->prefix = prefix;
            g->prefix_len = plen;
            ok = sl_map_put(&key_to_group, key, gi);
        }
        Group *g = &out->g[gi];
        out->of[i - x->lo] = (uint32_t)gi;
        g->members++;
        uint32_t k = x->collective[i];
        if (k != VIZ_NONE) {
            const TraceRunCollective *c = &run->collectives[k];
            uint32_t kind = viz_kind_index(c->kind);
            g->n_coll[kind == VIZ_NONE ? SL_COUNTOF(g->n_coll) - 1 : kind]++;
            g->send_per_device +=
                c->max_device_send_bytes / (double)(c->trip_count > 0 ? c->trip_count : 1);
        }
        if (x->loop[i] != VIZ_NONE)
            g->loop = x->loop[i];
    }
    sl_map_fini(&key_to_group);
    return ok;
}

static bool
make_groups(const VizIndex *x, bool by_comp, Groups *out)
{
    return make_groups_at(x, by_comp, 0, out);
}

static void
groups_fini(Groups *g)
{
    free(g->g);
    free(g->of);
}

uint32_t
viz_count_sources(const VizIndex *x)
{
    Groups g = {0};
    uint32_t n = make_groups(x, false, &g) ? g.n : UINT32_MAX;
    groups_fini(&g);
    return n;
}

static const char *
group_label(VizCtx *c, const VizIndex *x, const Group *g, bool by_comp)
{
    const TraceRun *run = c->run;
    SlBuf t;
    sl_buf_init(&t);
    if (g->prefix) {
        sl_buf_append(&t, g->prefix, g->prefix_len);
        sl_buf_printf(&t, "\\n%u instructions", g->members);
    } else if (by_comp) {
        const VizComp *cp = &x->comps[g->comp];
        sl_buf_printf(&t, "%%%s\\n%u instructions", cp->name, g->members);
        if (cp->is_entry)
            sl_buf_puts(&t, " (entry)");
    } else {
        const TraceRunInstr *who = &run->instrs[g->source != VIZ_NONE ? g->source : g->first];
        sl_buf_printf(&t, "%%%s\\n%s %s", who->name, who->opcode, who->shape);
        if (g->members > 1)
            sl_buf_printf(&t, "\\n%u instructions emitted", g->members);
    }
    for (uint32_t k = 0; k < SL_COUNTOF(g->n_coll); k++)
        if (g->n_coll[k])
            sl_buf_printf(&t, "\\n%s x%u", k < viz_kind_count() ? viz_kind_name(k) : "other",
                          g->n_coll[k]);
    if (g->send_per_device > 0) {
        sl_buf_puts(&t, "\\nsends ");
        viz_bytes(&t, g->send_per_device);
        sl_buf_puts(&t, "/device per execution");
    }
    if (g->loop != VIZ_NONE)
        sl_buf_printf(&t, "\\nwindowed einsum (%s, %lld iterations)", run->loops[g->loop].variant,
                      (long long)run->loops[g->loop].iterations);
    const char *s = viz_strdup_buf(&c->g, &t);
    sl_buf_fini(&t);
    return s;
}

static void
style_group(VizCtx *c, const VizIndex *x, const Group *g, VizAttrs *a)
{
    const TraceRunInstr *who = &c->run->instrs[g->source != VIZ_NONE ? g->source : g->first];
    uint32_t p = viz_palette_find(&c->pal, who->sharding);
    if (p != VIZ_NONE)
        c->used_pal[p] = true;
    a->v[VIZ_A_FILLCOLOR] = viz_palette_color(p);
    for (uint32_t k = 0; k < viz_kind_count(); k++) {
        if (!g->n_coll[k])
            continue;
        c->used_kind[k] = true;
        if (!a->v[VIZ_A_COLOR]) {
            a->v[VIZ_A_COLOR] = viz_collective_color(viz_kind_name(k));
            a->v[VIZ_A_PENWIDTH] = "3";
            a->v[VIZ_A_PERIPHERIES] = "2";
        }
    }
    (void)x;
}

/* Computation clusters for the per-source view, nested under the caller's computation. */
static uint32_t
comp_cluster(VizCtx *c, const VizIndex *x, uint32_t *made, uint32_t comp)
{
    const VizComp *cp = &x->comps[comp];
    if (cp->is_entry)
        return VIZ_NONE;
    if (made[comp] != VIZ_NONE)
        return made[comp];
    uint32_t parent =
        cp->caller != VIZ_NONE ? comp_cluster(c, x, made, viz_comp_of(x, cp->caller)) : VIZ_NONE;
    uint32_t cl = viz_add_cluster(&c->g, viz_fmt(&c->g, "cluster_c%u", comp), parent);
    VizAttrs *a = viz_cluster_attrs(&c->g, cl);
    if (!a)
        return VIZ_NONE;
    made[comp] = cl;
    if (cp->caller != VIZ_NONE)
        a->v[VIZ_A_LABEL] = viz_fmt(&c->g, "%%%s\\n%s %%%s", cp->name, viz_role_phrase(cp->role),
                                    c->run->instrs[cp->caller].name);
    else
        a->v[VIZ_A_LABEL] = viz_fmt(&c->g, "%%%s", cp->name);
    a->v[VIZ_A_STYLE] = "rounded";
    a->v[VIZ_A_COLOR] = "#7f8c8d";
    return cl;
}

typedef struct EdgeAcc {
    SlMap index;   /* tail << 32 | head -> edge + 1 */
    double *bytes; /* per edge */
    uint32_t cap;
} EdgeAcc;

static bool
acc_edge(VizCtx *c, EdgeAcc *acc, uint32_t tail, uint32_t head, double bytes)
{
    uint64_t key = (uint64_t)tail << 32 | head, e = 0;
    if (!sl_map_get(&acc->index, key, &e)) {
        uint32_t id = viz_add_edge(&c->g, tail, head);
        if (id == VIZ_NONE || id >= acc->cap || !sl_map_put(&acc->index, key, (uint64_t)id + 1))
            return false;
        acc->bytes[id] = 0;
        e = (uint64_t)id + 1;
    }
    acc->bytes[e - 1] += bytes;
    return true;
}

typedef struct Rank {
    uint32_t members, first, group;
} Rank;

static int
by_size(const void *pa, const void *pb)
{
    const Rank *a = pa, *b = pb;
    if (a->members != b->members)
        return a->members > b->members ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* Keeps the `limit` biggest groups (ties: the earlier first member); returns how many go. */
static uint32_t
keep_biggest(const Groups *gs, uint32_t limit, bool *keep)
{
    Rank *r = malloc(((size_t)gs->n + 1) * sizeof(Rank));
    if (!r)
        return 0;
    for (uint32_t k = 0; k < gs->n; k++)
        r[k] = (Rank){gs->g[k].members, gs->g[k].first, k};
    qsort(r, gs->n, sizeof(Rank), by_size);
    for (uint32_t k = 0; k < gs->n; k++)
        keep[r[k].group] = k < limit;
    free(r);
    return gs->n > limit ? gs->n - limit : 0;
}

static SlStatus
build_groups(VizCtx *c, const VizIndex *x, bool by_comp, uint32_t prefix_depth, uint32_t *dropped,
             SlError *err)
{
    Groups gs = {0};
    EdgeAcc acc = {0};
    sl_map_init(&acc.index);
    uint32_t *made = malloc(((size_t)x->n_comps + 1) * sizeof(uint32_t));
    uint32_t *node = NULL;
    bool ok = made && make_groups_at(x, by_comp, prefix_depth, &gs);
    if (ok) {
        memset(made, 0xff, ((size_t)x->n_comps + 1) * sizeof(uint32_t));
        node = malloc(((size_t)gs.n + 1) * sizeof(uint32_t));
        acc.cap = x->user_off[x->hi - x->lo] + x->n_comps + 1; /* at most one per operand edge */
        acc.bytes = malloc((size_t)acc.cap * sizeof(double));
        ok = node && acc.bytes;
    }
    bool *keep = ok ? malloc(((size_t)gs.n + 1) * sizeof(bool)) : NULL;
    ok = ok && keep;
    for (uint32_t k = 0; ok && k < gs.n; k++)
        keep[k] = true;
    if (ok && dropped && c->opt->max_nodes && gs.n > c->opt->max_nodes)
        *dropped = keep_biggest(&gs, c->opt->max_nodes, keep);
    for (uint32_t k = 0; ok && k < gs.n; k++) {
        const Group *g = &gs.g[k];
        node[k] = VIZ_NONE;
        if (!keep[k])
            continue;
        uint32_t cl = by_comp ? VIZ_NONE : comp_cluster(c, x, made, g->comp);
        node[k] = viz_add_node(
            &c->g, viz_fmt(&c->g, "%s%u", by_comp ? "c" : g->prefix ? "p" : "g", g->first), cl);
        VizAttrs *a = viz_node_attrs(&c->g, node[k]);
        ok = a != NULL;
        if (ok) {
            a->v[VIZ_A_LABEL] = group_label(c, x, g, by_comp);
            style_group(c, x, g, a);
        }
    }
    for (uint32_t i = x->lo; ok && i < x->hi; i++) {
        uint32_t gv = gs.of[i - x->lo];
        const TraceRunInstr *in = &c->run->instrs[i];
        for (uint32_t k = 0; gv != VIZ_NONE && k < in->n_operands && ok; k++) {
            uint32_t o = in->operands[k];
            uint32_t gu = o >= x->lo && o < x->hi ? gs.of[o - x->lo] : VIZ_NONE;
            if (gu != VIZ_NONE && gu != gv && node[gu] != VIZ_NONE && node[gv] != VIZ_NONE)
                ok = acc_edge(c, &acc, node[gu], node[gv], (double)c->run->instrs[o].size_bytes);
        }
    }
    uint32_t n_data_edges = (uint32_t)c->g.edges.len;
    for (uint32_t comp = 0; ok && by_comp && comp < x->n_comps; comp++) {
        const VizComp *cp = &x->comps[comp];
        uint32_t callee = gs.of[cp->first - x->lo], caller = VIZ_NONE;
        if (cp->caller != VIZ_NONE)
            caller = gs.of[cp->caller - x->lo];
        if (callee == VIZ_NONE || caller == VIZ_NONE || node[callee] == VIZ_NONE ||
            node[caller] == VIZ_NONE)
            continue;
        VizAttrs *a = viz_edge_attrs(&c->g, viz_add_edge(&c->g, node[caller], node[callee]));
        if (a) {
            a->v[VIZ_A_LABEL] = cp->role;
            a->v[VIZ_A_STYLE] = "dashed";
        }
    }
    for (uint32_t e = 0; ok && x->phase == TRACE_AFTER && e < n_data_edges; e++) {
        SlBuf t;
        sl_buf_init(&t);
        viz_bytes(&t, acc.bytes[e]);
        viz_edge_attrs(&c->g, e)->v[VIZ_A_LABEL] = viz_strdup_buf(&c->g, &t);
        sl_buf_fini(&t);
    }
    groups_fini(&gs);
    free(keep);
    free(made);
    free(node);
    free(acc.bytes);
    sl_map_fini(&acc.index);
    if (!ok || c->g.failed) {
        SlSrcLoc nowhere = {0};
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory collapsing the diagram");
    }
    return SL_OK;
}

SlStatus
viz_build_by_source(VizCtx *c, const VizIndex *x, SlError *err)
{
    return build_groups(c, x, false, 0, NULL, err);
}

uint32_t
viz_prefix_depth_for(const VizIndex *x, uint32_t limit, uint32_t *n_groups)
{
    enum { MAX_DEPTH = 12 };
    uint32_t best = 0;
    *n_groups = 0;
    for (uint32_t d = 1; d <= MAX_DEPTH; d++) {
        Groups g = {0};
        bool ok = make_groups_at(x, false, d, &g);
        uint32_t n = g.n;
        groups_fini(&g);
        if (!ok || n > limit)
            break;
        if (n > *n_groups) {
            best = d;
            *n_groups = n;
        }
    }
    return *n_groups > 1 ? best : 0;
}

SlStatus
viz_build_by_prefix(VizCtx *c, const VizIndex *x, uint32_t depth, SlError *err)
{
    return build_groups(c, x, false, depth, NULL, err);
}

SlStatus
viz_build_by_comp(VizCtx *c, const VizIndex *x, uint32_t *dropped, SlError *err)
{
    *dropped = 0;
    c->g.left_right = true;
    return build_groups(c, x, true, 0, dropped, err);
}
