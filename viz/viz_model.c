/* viz_model.c - the diagram model and its DOT text. Owns: node, edge and cluster storage and
 * the DOT writer. Does not own: what goes into a diagram (viz_graph.c, viz_tree.c) or
 * layout (viz_render.c). Invariant: output order is creation order (clusters nest by parent,
 * nodes inside their cluster, every edge after every node), so the text is deterministic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viz/viz_int.h"

static const char *const k_attr_names[VIZ_A_COUNT] = {
#define VIZ_ATTR_NAME(e, s) s,
    VIZ_ATTRS(VIZ_ATTR_NAME)
#undef VIZ_ATTR_NAME
};

void
viz_graph_init(VizGraph *g, SlArena *a, const char *name)
{
    memset(g, 0, sizeof(*g));
    g->arena = a;
    g->name = name;
}

void
viz_graph_fini(VizGraph *g)
{
    sl_vec_fini(&g->nodes);
    sl_vec_fini(&g->edges);
    sl_vec_fini(&g->clusters);
}

uint32_t
viz_add_node(VizGraph *g, const char *id, uint32_t cluster)
{
    VizNode n = {.id = id, .cluster = cluster};
    if (!id || !SL_VEC_PUSH(&g->nodes, VizNode, n)) {
        g->failed = true;
        return VIZ_NONE;
    }
    return (uint32_t)g->nodes.len - 1;
}

uint32_t
viz_add_edge(VizGraph *g, uint32_t tail, uint32_t head)
{
    VizEdge e = {.tail = tail, .head = head};
    if (tail == VIZ_NONE || head == VIZ_NONE)
        return VIZ_NONE;
    if (!SL_VEC_PUSH(&g->edges, VizEdge, e)) {
        g->failed = true;
        return VIZ_NONE;
    }
    return (uint32_t)g->edges.len - 1;
}

uint32_t
viz_add_cluster(VizGraph *g, const char *id, uint32_t parent)
{
    VizCluster c = {.id = id, .parent = parent};
    if (!id || !SL_VEC_PUSH(&g->clusters, VizCluster, c)) {
        g->failed = true;
        return VIZ_NONE;
    }
    return (uint32_t)g->clusters.len - 1;
}

VizAttrs *
viz_node_attrs(VizGraph *g, uint32_t n)
{
    return n == VIZ_NONE ? NULL : &SL_VEC_AT(&g->nodes, VizNode, n).a;
}

VizAttrs *
viz_edge_attrs(VizGraph *g, uint32_t e)
{
    return e == VIZ_NONE ? NULL : &SL_VEC_AT(&g->edges, VizEdge, e).a;
}

VizAttrs *
viz_cluster_attrs(VizGraph *g, uint32_t c)
{
    return c == VIZ_NONE ? NULL : &SL_VEC_AT(&g->clusters, VizCluster, c).a;
}

const char *
viz_fmt(VizGraph *g, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        g->failed = true;
        return NULL;
    }
    char *p = sl_arena_alloc(g->arena, (size_t)n + 1, 1);
    if (!p) {
        g->failed = true;
        return NULL;
    }
    if ((size_t)n < sizeof(small)) {
        memcpy(p, small, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        vsnprintf(p, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return p;
}

const char *
viz_strdup_buf(VizGraph *g, const SlBuf *b)
{
    SlStr s = sl_buf_str(b);
    char *p = b->failed ? NULL : sl_arena_strndup(g->arena, s.ptr, s.len);
    if (!p)
        g->failed = true;
    return p;
}

/* ---- DOT text ------------------------------------------------------------------------------ */

/* A quoted DOT string. Label text carries its own "\n" and "\l" escapes (built by us), so only
 * quotes are escaped here, plus raw newlines. */
static void
put_quoted(SlBuf *out, const char *s)
{
    sl_buf_putc(out, '"');
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            sl_buf_puts(out, "\\\"");
        else if (*p == '\n')
            sl_buf_puts(out, "\\n");
        else
            sl_buf_putc(out, *p);
    }
    sl_buf_putc(out, '"');
}

static void
put_attrs(SlBuf *out, const VizAttrs *a, const char *sep)
{
    bool first = true;
    for (int k = 0; k < VIZ_A_COUNT; k++) {
        if (!a->v[k])
            continue;
        if (!first)
            sl_buf_puts(out, sep);
        first = false;
        sl_buf_printf(out, "%s=", k_attr_names[k]);
        if (k == VIZ_A_LABEL && a->html_label)
            sl_buf_printf(out, "<%s>", a->v[k]);
        else
            put_quoted(out, a->v[k]);
    }
}

static void
put_indent(SlBuf *out, int depth)
{
    for (int i = 0; i < depth; i++)
        sl_buf_puts(out, "  ");
}

static void
put_node(SlBuf *out, const VizNode *n, int depth)
{
    put_indent(out, depth);
    put_quoted(out, n->id);
    bool any = n->a.html_label;
    for (int k = 0; k < VIZ_A_COUNT; k++)
        any = any || n->a.v[k];
    if (any) {
        sl_buf_puts(out, " [");
        put_attrs(out, &n->a, ", ");
        sl_buf_putc(out, ']');
    }
    sl_buf_puts(out, ";\n");
}

typedef struct Lists {
    uint32_t *node_off, *nodes;     /* nodes per cluster (slot n_clusters: top level) */
    uint32_t *child_off, *children; /* clusters per parent (same slots) */
} Lists;

static void
put_cluster(const VizGraph *g, const Lists *l, uint32_t c, int depth, SlBuf *out)
{
    const VizCluster *cl = &SL_VEC_AT(&g->clusters, VizCluster, c);
    put_indent(out, depth);
    sl_buf_puts(out, "subgraph ");
    put_quoted(out, cl->id);
    sl_buf_puts(out, " {\n");
    for (int k = 0; k < VIZ_A_COUNT; k++) {
        if (!cl->a.v[k])
            continue;
        VizAttrs one = {0};
        one.v[k] = cl->a.v[k];
        one.html_label = cl->a.html_label;
        put_indent(out, depth + 1);
        put_attrs(out, &one, "");
        sl_buf_puts(out, ";\n");
    }
    for (uint32_t i = l->node_off[c]; i < l->node_off[c + 1]; i++)
        put_node(out, &SL_VEC_AT(&g->nodes, VizNode, l->nodes[i]), depth + 1);
    for (uint32_t i = l->child_off[c]; i < l->child_off[c + 1]; i++)
        put_cluster(g, l, l->children[i], depth + 1, out);
    put_indent(out, depth);
    sl_buf_puts(out, "}\n");
}

/* Counting sort of `n` items by slot (0..n_slots-1), keeping creation order within a slot. */
static bool
bucket(const uint32_t *slot_of, uint32_t n, uint32_t n_slots, uint32_t **off, uint32_t **items)
{
    *off = calloc((size_t)n_slots + 1, sizeof(uint32_t));
    *items = calloc(n ? n : 1, sizeof(uint32_t));
    if (!*off || !*items)
        return false;
    for (uint32_t i = 0; i < n; i++)
        (*off)[slot_of[i] + 1]++;
    for (uint32_t s = 0; s < n_slots; s++)
        (*off)[s + 1] += (*off)[s];
    uint32_t *fill = calloc(n_slots ? n_slots : 1, sizeof(uint32_t));
    if (!fill)
        return false;
    for (uint32_t i = 0; i < n; i++)
        (*items)[(*off)[slot_of[i]] + fill[slot_of[i]]++] = i;
    free(fill);
    return true;
}

void
viz_graph_write_dot(const VizGraph *g, SlBuf *out)
{
    uint32_t n_nodes = (uint32_t)g->nodes.len, n_cl = (uint32_t)g->clusters.len;
    uint32_t top = n_cl; /* the top-level slot */
    uint32_t *slot = calloc(n_nodes > n_cl ? n_nodes + 1 : n_cl + 1, sizeof(uint32_t));
    Lists l = {0};
    bool ok = slot != NULL;
    for (uint32_t i = 0; ok && i < n_nodes; i++) {
        uint32_t c = SL_VEC_AT(&g->nodes, VizNode, i).cluster;
        slot[i] = c == VIZ_NONE ? top : c;
    }
    ok = ok && bucket(slot, n_nodes, n_cl + 1, &l.node_off, &l.nodes);
    for (uint32_t i = 0; ok && i < n_cl; i++) {
        uint32_t p = SL_VEC_AT(&g->clusters, VizCluster, i).parent;
        slot[i] = p == VIZ_NONE ? top : p;
    }
    ok = ok && bucket(slot, n_cl, n_cl + 1, &l.child_off, &l.children);
    if (!ok || g->failed) {
        out->failed = true;
    } else {
        sl_buf_puts(out, "digraph ");
        put_quoted(out, g->name);
        sl_buf_puts(out, " {\n");
        sl_buf_printf(out,
                      "  graph [rankdir=\"%s\", fontname=\"Helvetica\", fontsize=\"11\", "
                      "nodesep=\"0.25\", ranksep=\"0.35\", labelloc=\"t\"",
                      g->left_right ? "LR" : "TB");
        if (g->compound)
            sl_buf_puts(out, ", compound=\"true\"");
        if (g->cheap)
            sl_buf_puts(out, ", splines=\"line\", nslimit=\"0.02\", nslimit1=\"2\", "
                             "mclimit=\"0.5\"");
        if (g->label) {
            sl_buf_puts(out, ", label=");
            put_quoted(out, g->label);
        }
        sl_buf_puts(out, "];\n");
        sl_buf_puts(out, "  node [fontname=\"Helvetica\", fontsize=\"10\", shape=\"box\", "
                         "style=\"rounded,filled\", fillcolor=\"white\"];\n");
        sl_buf_puts(out, "  edge [fontname=\"Helvetica\", fontsize=\"9\", color=\"#555555\"];\n");
        for (uint32_t i = l.child_off[top]; i < l.child_off[top + 1]; i++)
            put_cluster(g, &l, l.children[i], 1, out);
        for (uint32_t i = l.node_off[top]; i < l.node_off[top + 1]; i++)
            put_node(out, &SL_VEC_AT(&g->nodes, VizNode, l.nodes[i]), 1);
        for (uint32_t i = 0; i < (uint32_t)g->edges.len; i++) {
            const VizEdge *e = &SL_VEC_AT(&g->edges, VizEdge, i);
            sl_buf_puts(out, "  ");
            put_quoted(out, SL_VEC_AT(&g->nodes, VizNode, e->tail).id);
            sl_buf_puts(out, " -> ");
            put_quoted(out, SL_VEC_AT(&g->nodes, VizNode, e->head).id);
            bool any = false;
            for (int k = 0; k < VIZ_A_COUNT; k++)
                any = any || e->a.v[k];
            if (any) {
                sl_buf_puts(out, " [");
                put_attrs(out, &e->a, ", ");
                sl_buf_putc(out, ']');
            }
            sl_buf_puts(out, ";\n");
        }
        sl_buf_puts(out, "}\n");
    }
    free(slot);
    free(l.node_off);
    free(l.nodes);
    free(l.child_off);
    free(l.children);
}
