/* viz_graph.c - builds the before and after diagrams of a selection of one phase: a node per
 * instruction, labelled and coloured; operand edges (after: labelled with bytes); a cluster
 * per called computation, nested under the instruction that calls it; and, after
 * partitioning, a cluster per source instruction holding what was emitted for it. Owns: node
 * and cluster labels and styles, and the legend. Does not own: which instructions are
 * selected (viz_index.c) or collapsed views (viz_tree.c).
 * Invariant: walks instructions, computations and edges in recorded order only. */
#include <stdlib.h>
#include <string.h>

#include "viz/viz_int.h"

/* Appends label text, keeping backslashes literal (DOT reads "\n", "\l" as escapes). */
static void
put_text(SlBuf *b, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\')
            sl_buf_putc(b, '\\');
        sl_buf_putc(b, *p);
    }
}

static const char *
instr_id(VizCtx *c, uint32_t i)
{
    return viz_fmt(&c->g, "%c%u", i < c->run->n_before ? 'b' : 'a', i);
}

/* The sharding that colours an instruction: its own before partitioning, its source's after. */
static uint32_t
palette_of(const VizCtx *c, uint32_t i)
{
    const TraceRunInstr *in = &c->run->instrs[i];
    if (in->phase == TRACE_AFTER && in->derived_from != TRACE_NONE)
        in = &c->run->instrs[in->derived_from];
    return viz_palette_find(&c->pal, in->sharding);
}

static void
put_groups(VizCtx *c, const TraceRunCollective *k, SlBuf *b)
{
    enum { SHOWN_PAIRS = 4, SHOWN_DEVICES = 8 };
    bool permute = strcmp(k->kind, "collective-permute") == 0;
    if (!k->group_offsets || k->n_groups < 1) {
        sl_buf_printf(b, "%lld groups of %lld", (long long)k->n_groups, (long long)k->group_size);
        return;
    }
    if (permute) {
        sl_buf_puts(b, "pairs ");
        for (int64_t g = 0; g < k->n_groups && g < SHOWN_PAIRS; g++) {
            const int64_t *d = k->devices + k->group_offsets[g];
            sl_buf_printf(b, "%s%lld->%lld", g ? ", " : "", (long long)d[0], (long long)d[1]);
        }
        if (k->n_groups > SHOWN_PAIRS)
            sl_buf_printf(b, ", ... (%lld pairs)", (long long)k->n_groups);
        return;
    }
    uint32_t n0 = k->group_offsets[1] - k->group_offsets[0];
    sl_buf_printf(b, "groups %lldx%lld {", (long long)k->n_groups, (long long)k->group_size);
    for (uint32_t d = 0; d < n0 && d < SHOWN_DEVICES; d++)
        sl_buf_printf(b, "%s%lld", d ? "," : "", (long long)k->devices[d]);
    sl_buf_puts(b, n0 > SHOWN_DEVICES ? ",...}" : "}");
    if (k->n_groups > 1)
        sl_buf_puts(b, ",...");
    SlBuf axes;
    sl_buf_init(&axes);
    if (viz_mesh_axes_of(&c->mesh, k->devices, n0, &axes))
        sl_buf_printf(b, " over %s", axes.data);
    sl_buf_fini(&axes);
}

static void
put_collective(VizCtx *c, const TraceRunCollective *k, SlBuf *b)
{
    int64_t trips = k->trip_count > 0 ? k->trip_count : 1;
    sl_buf_puts(b, "\\n");
    put_groups(c, k, b);
    sl_buf_puts(b, "\\nS ");
    viz_bytes(b, k->bytes);
    sl_buf_puts(b, ", sends ");
    viz_bytes(b, k->max_device_send_bytes / (double)trips);
    sl_buf_puts(b, "/device");
    if (k->trip_count > 1)
        sl_buf_printf(b, "\\nx%lld per run (in a loop)", (long long)k->trip_count);
    else if (k->trip_count < 0 && k->max_trip_count > 0)
        sl_buf_printf(b, "\\nat most x%lld per run (in a branch)", (long long)k->max_trip_count);
    else if (k->trip_count < 0)
        sl_buf_puts(b, "\\ntrip count unknown");
}

static void
put_loop(const TraceRunLoop *l, SlBuf *b)
{
    sl_buf_printf(b, "\\nwindowed einsum (%s)\\n%lld iterations, ", l->variant,
                  (long long)l->iterations);
    viz_bytes(b, (double)l->bytes_per_iteration);
    sl_buf_puts(b, "/iteration/device");
}

/* Appends `s` cut to the label width, with DOT's backslashes kept literal. */
static void
put_cut(SlBuf *b, const char *s)
{
    SlBuf t;
    sl_buf_init(&t);
    viz_put_cut(&t, s, VIZ_LABEL_WIDTH);
    put_text(b, t.data ? t.data : "");
    b->failed = b->failed || t.failed;
    sl_buf_fini(&t);
}

static void
put_shape(SlBuf *b, const char *shape)
{
    SlBuf t;
    sl_buf_init(&t);
    viz_put_shape(&t, shape, VIZ_LABEL_WIDTH);
    put_text(b, t.data ? t.data : "");
    b->failed = b->failed || t.failed;
    sl_buf_fini(&t);
}

/* A node's tooltip: its op_name and source line and, when the label had to cut its name,
 * shape or sharding to VIZ_LABEL_WIDTH, the full text of them first. */
static const char *
tooltip(VizCtx *c, const TraceRunInstr *in, const char *readable)
{
    bool cut = strlen(in->name) > VIZ_LABEL_WIDTH || strlen(in->shape) > VIZ_LABEL_WIDTH ||
               (readable && strlen(readable) > VIZ_LABEL_WIDTH);
    if (!cut && !in->op_name && !in->source_file)
        return NULL;
    SlBuf b;
    sl_buf_init(&b);
    if (cut) {
        sl_buf_puts(&b, "%");
        put_text(&b, in->name);
        sl_buf_printf(&b, " = %s ", in->opcode);
        put_text(&b, in->shape);
        if (in->sharding) {
            sl_buf_puts(&b, "\\nsharding=");
            put_text(&b, in->sharding);
        }
        if (in->op_name || in->source_file)
            sl_buf_puts(&b, "\\n");
    }
    if (in->op_name)
        put_text(&b, in->op_name);
    if (in->source_file) {
        sl_buf_puts(&b, in->op_name ? " at " : "");
        put_text(&b, in->source_file);
        if (in->source_line > 0)
            sl_buf_printf(&b, ":%lld", (long long)in->source_line);
    }
    const char *t = viz_strdup_buf(&c->g, &b);
    sl_buf_fini(&b);
    return t;
}

uint32_t
viz_add_instr_node(VizCtx *c, const VizIndex *x, uint32_t i, uint32_t cluster, bool in_group)
{
    const TraceRunInstr *in = &c->run->instrs[i];
    uint32_t n = viz_add_node(&c->g, instr_id(c, i), cluster);
    VizAttrs *a = viz_node_attrs(&c->g, n);
    if (!a)
        return VIZ_NONE;
    SlBuf b;
    sl_buf_init(&b);
    uint32_t coll = x->collective[i], loop = x->loop[i];
    if (coll != VIZ_NONE) {
        sl_buf_printf(&b, "%s%s ", in->is_root ? "ROOT " : "", c->run->collectives[coll].kind);
        sl_buf_puts(&b, "%");
        put_cut(&b, in->name);
        sl_buf_puts(&b, "\\n");
        put_shape(&b, in->shape);
    } else {
        sl_buf_printf(&b, "%s%%", in->is_root ? "ROOT " : "");
        put_cut(&b, in->name);
        sl_buf_printf(&b, "\\n%s ", in->opcode);
        put_shape(&b, in->shape);
    }
    if (in->phase == TRACE_AFTER && in->derived_from != TRACE_NONE && !in_group &&
        strcmp(c->run->instrs[in->derived_from].name, in->name) != 0) {
        sl_buf_puts(&b, "\\nfrom %");
        put_cut(&b, c->run->instrs[in->derived_from].name);
    }
    const char *readable = NULL;
    if (in->phase == TRACE_BEFORE && in->sharding) {
        uint32_t p = viz_palette_find(&c->pal, in->sharding);
        readable = p != VIZ_NONE ? c->pal.readable[p] : in->sharding;
        sl_buf_puts(&b, "\\n");
        put_cut(&b, readable);
    }
    if (coll != VIZ_NONE)
        put_collective(c, &c->run->collectives[coll], &b);
    if (loop != VIZ_NONE)
        put_loop(&c->run->loops[loop], &b);
    a->v[VIZ_A_LABEL] = viz_strdup_buf(&c->g, &b);
    sl_buf_fini(&b);
    a->v[VIZ_A_FILLCOLOR] = viz_palette_color(palette_of(c, i));
    a->v[VIZ_A_TOOLTIP] = tooltip(c, in, readable);
    if (coll != VIZ_NONE) {
        const char *color = viz_collective_color(c->run->collectives[coll].kind);
        a->v[VIZ_A_SHAPE] = "box";
        a->v[VIZ_A_STYLE] = "filled,bold";
        a->v[VIZ_A_FILLCOLOR] = color;
        a->v[VIZ_A_COLOR] = "#222222";
        a->v[VIZ_A_FONTCOLOR] = "white";
        a->v[VIZ_A_PENWIDTH] = "2";
        a->v[VIZ_A_PERIPHERIES] = "2";
    } else if (loop != VIZ_NONE) {
        a->v[VIZ_A_SHAPE] = "box3d";
        a->v[VIZ_A_STYLE] = "filled,bold";
        a->v[VIZ_A_COLOR] = "#2e86c1";
    }
    return n;
}

void
viz_put_origin(const TraceRun *run, const VizIndex *x, uint32_t i, bool full, SlBuf *out)
{
    uint32_t k = i < run->n_instrs ? x->origin[i] : VIZ_NONE;
    if (k == VIZ_NONE)
        return;
    const TraceRunOrigin *o = &run->origins[k];
    sl_buf_puts(out, "origin: ");
    if (full) {
        sl_buf_puts(out, "%");
        put_text(out, run->instrs[i].name);
        sl_buf_puts(out, " got ");
        put_text(out, o->sharding);
        sl_buf_putc(out, ' ');
    }
    put_text(out, o->direction);
    if (o->source < run->n_instrs) {
        const TraceRunInstr *src = &run->instrs[o->source];
        sl_buf_puts(out, " from %");
        put_text(out, src->name);
        if (!strcmp(src->opcode, "parameter"))
            sl_buf_printf(out, " (parameter %lld%s)", (long long)src->param_number,
                          full ? ", annotated" : "");
        else if (full)
            sl_buf_puts(out, " (annotated)");
    }
    if (!full) {
        if (o->n_path > 2)
            sl_buf_printf(out, " via %u op%s", o->n_path - 2, o->n_path == 3 ? "" : "s");
        return;
    }
    for (uint32_t h = 1; h + 1 < o->n_path; h++) { /* source first, the instruction last */
        sl_buf_puts(out, h == 1 ? " through %" : h + 2 == o->n_path ? " and %" : ", %");
        put_text(out, o->path[h] < run->n_instrs ? run->instrs[o->path[h]].name : "?");
    }
    if (o->level >= 0)
        sl_buf_printf(out, " at level %d", o->level);
    if (o->rule) {
        sl_buf_puts(out, " (rule ");
        put_text(out, o->rule);
        sl_buf_putc(out, ')');
    }
    if (o->candidate && o->replaced) {
        sl_buf_puts(out, "; merged ");
        put_text(out, o->candidate);
        sl_buf_puts(out, " with ");
        put_text(out, o->replaced);
    }
}

/* The focused node of a neighbourhood says where its sharding came from: a short line in the
 * label, the whole chain (as explain gives it) first in the tooltip. */
static void
add_focus_origin(VizCtx *c, const VizIndex *x, uint32_t i, VizAttrs *a)
{
    if (x->origin[i] == VIZ_NONE)
        return;
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_puts(&b, a->v[VIZ_A_LABEL] ? a->v[VIZ_A_LABEL] : "");
    sl_buf_puts(&b, "\\n");
    SlBuf line;
    sl_buf_init(&line);
    viz_put_origin(c->run, x, i, false, &line);
    viz_put_cut(&b, line.data ? line.data : "", VIZ_LABEL_WIDTH);
    a->v[VIZ_A_LABEL] = viz_strdup_buf(&c->g, &b);
    sl_buf_clear(&b);
    viz_put_origin(c->run, x, i, true, &b);
    if (a->v[VIZ_A_TOOLTIP]) {
        sl_buf_puts(&b, "\\n");
        sl_buf_puts(&b, a->v[VIZ_A_TOOLTIP]);
    }
    a->v[VIZ_A_TOOLTIP] = viz_strdup_buf(&c->g, &b);
    c->g.failed = c->g.failed || b.failed || line.failed;
    sl_buf_fini(&line);
    sl_buf_fini(&b);
}

void
viz_put_strategy(const TraceRun *run, uint32_t d, SlBuf *out)
{
    const TraceRunDecision *top = &run->decisions[d];
    put_text(out, top->strategy);
    for (uint32_t level = 2; level <= top->chain_length; level++)
        for (uint32_t k = 0; k < run->n_decisions; k++)
            if (run->decisions[k].instr == top->instr && run->decisions[k].level == level) {
                sl_buf_puts(out, ", then ");
                put_text(out, run->decisions[k].strategy);
            }
}

/* ---- legend ---------------------------------------------------------------------------------- */

void
viz_add_legend(VizCtx *c, bool with_kinds)
{
    const bool *used_palette = c->used_pal, *used_kinds = with_kinds ? c->used_kind : NULL;
    enum { MAX_ROWS = 24 };
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_puts(&b, "<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"3\">"
                    "<tr><td colspan=\"2\"><b>sharding (fill colour)</b></td></tr>");
    uint32_t rows = 0, hidden = 0;
    for (uint32_t p = 0; p < c->pal.n; p++) {
        if (!used_palette[p])
            continue;
        if (rows++ >= MAX_ROWS) {
            hidden++;
            continue;
        }
        sl_buf_printf(&b, "<tr><td bgcolor=\"%s\">", viz_palette_color(p));
        SlBuf cut;
        sl_buf_init(&cut);
        viz_put_cut(&cut, c->pal.readable[p], VIZ_LABEL_WIDTH);
        viz_html_escape(&b, cut.data ? cut.data : "");
        sl_buf_puts(&b, "</td><td align=\"left\">");
        sl_buf_clear(&cut);
        viz_put_cut(&cut, c->pal.shardings[p], 2 * VIZ_LABEL_WIDTH);
        viz_html_escape(&b, cut.data ? cut.data : "");
        b.failed = b.failed || cut.failed;
        sl_buf_fini(&cut);
        sl_buf_puts(&b, "</td></tr>");
    }
    if (hidden)
        sl_buf_printf(&b, "<tr><td colspan=\"2\">... and %u more</td></tr>", hidden);
    bool any_kind = false;
    for (uint32_t k = 0; used_kinds && k < viz_kind_count(); k++) {
        if (!used_kinds[k])
            continue;
        if (!any_kind)
            sl_buf_puts(&b, "<tr><td colspan=\"2\"><b>collectives</b></td></tr>");
        any_kind = true;
        sl_buf_printf(&b,
                      "<tr><td bgcolor=\"%s\"><font color=\"white\">%s</font></td>"
                      "<td align=\"left\">%s</td></tr>",
                      viz_collective_color(viz_kind_name(k)), viz_kind_name(k), viz_kind_note(k));
    }
    if (any_kind)
        sl_buf_puts(&b, "<tr><td colspan=\"2\" align=\"left\">S: the full buffer; sends: "
                        "what the busiest device sends per execution (ring model)</td></tr>");
    sl_buf_puts(&b, "</table>");
    if (!rows && !any_kind) { /* nothing coloured: no legend */
        sl_buf_fini(&b);
        return;
    }
    uint32_t n = viz_add_node(&c->g, "legend", VIZ_NONE);
    VizAttrs *a = viz_node_attrs(&c->g, n);
    if (a) {
        a->v[VIZ_A_LABEL] = viz_strdup_buf(&c->g, &b);
        a->html_label = true;
        a->v[VIZ_A_SHAPE] = "plaintext";
        a->v[VIZ_A_STYLE] = "solid";
    }
    sl_buf_fini(&b);
}

/* ---- clusters ------------------------------------------------------------------------------ */

typedef struct Builder {
    VizCtx *c;
    const VizIndex *x;
    const VizSel *s;
    uint32_t *comp_cluster; /* [n_comps], VIZ_NONE until made */
    SlMap group_count;      /* (comp << 32 | source) -> selected instructions */
    SlMap group_cluster;    /* (comp << 32 | source) -> cluster + 1 */
    uint32_t *node_of;      /* [hi - lo]: graph node, VIZ_NONE */
} Builder;

static uint64_t
group_key(uint32_t comp, uint32_t source)
{
    return (uint64_t)comp << 32 | source;
}

static bool
selected(const Builder *b, uint32_t i)
{
    return i >= b->x->lo && i < b->x->hi && b->s->sel[i - b->x->lo] != VIZ_SEL_OUT;
}

static uint32_t node_cluster(Builder *b, uint32_t i);

static const char *
comp_label(Builder *b, uint32_t comp)
{
    const VizComp *cp = &b->x->comps[comp];
    const TraceRun *run = b->c->run;
    SlBuf t;
    sl_buf_init(&t);
    sl_buf_puts(&t, "%");
    put_text(&t, cp->name);
    if (cp->caller != VIZ_NONE) {
        sl_buf_printf(&t, "\\n%s %%", viz_role_phrase(cp->role));
        put_text(&t, run->instrs[cp->caller].name);
        uint32_t l = b->x->loop[cp->caller];
        if (l != VIZ_NONE)
            sl_buf_printf(&t, " (windowed einsum, %s, %lld iterations)", run->loops[l].variant,
                          (long long)run->loops[l].iterations);
    } else if (cp->n_callers > 1) {
        sl_buf_printf(&t, "\\ncalled from %u places", cp->n_callers);
    } else {
        sl_buf_puts(&t, "\\n(caller not recorded)");
    }
    const char *s = viz_strdup_buf(&b->c->g, &t);
    sl_buf_fini(&t);
    return s;
}

static uint32_t
comp_cluster(Builder *b, uint32_t comp)
{
    const VizComp *cp = &b->x->comps[comp];
    if (cp->is_entry)
        return b->c->top;
    if (b->comp_cluster[comp] != VIZ_NONE)
        return b->comp_cluster[comp];
    uint32_t parent = b->c->top;
    if (cp->caller != VIZ_NONE && selected(b, cp->caller))
        parent = node_cluster(b, cp->caller);
    else if (cp->caller != VIZ_NONE)
        parent = comp_cluster(b, viz_comp_of(b->x, cp->caller));
    uint32_t cl = viz_add_cluster(&b->c->g, viz_fmt(&b->c->g, "cluster_c%u", comp), parent);
    VizAttrs *a = viz_cluster_attrs(&b->c->g, cl);
    if (!a)
        return VIZ_NONE;
    b->comp_cluster[comp] = cl;
    a->v[VIZ_A_LABEL] = comp_label(b, comp);
    a->v[VIZ_A_STYLE] = "rounded";
    a->v[VIZ_A_COLOR] = "#7f8c8d";
    if (cp->caller != VIZ_NONE && b->x->loop[cp->caller] != VIZ_NONE) {
        a->v[VIZ_A_STYLE] = "rounded,filled";
        a->v[VIZ_A_FILLCOLOR] = "#eef5fb";
        a->v[VIZ_A_COLOR] = "#2e86c1";
        a->v[VIZ_A_PENWIDTH] = "2";
    }
    return cl;
}

static const char *
group_label(Builder *b, uint32_t source)
{
    const TraceRun *run = b->c->run;
    const TraceRunInstr *src = &run->instrs[source];
    SlBuf t;
    sl_buf_init(&t);
    sl_buf_puts(&t, "from %");
    put_text(&t, src->name);
    sl_buf_printf(&t, " (%s)", src->opcode);
    uint32_t d = b->x->decision[source];
    if (d != VIZ_NONE) {
        sl_buf_puts(&t, ": ");
        viz_put_strategy(run, d, &t);
    }
    const char *s = viz_strdup_buf(&b->c->g, &t);
    sl_buf_fini(&t);
    return s;
}

/* Inside a computation called by an instruction of the same source, whose group or label
 * already names that source. */
static bool
same_source_as_caller(const Builder *b, uint32_t i)
{
    const TraceRunInstr *in = &b->c->run->instrs[i];
    uint32_t caller = b->x->comps[viz_comp_of(b->x, i)].caller;
    return in->phase == TRACE_AFTER && in->derived_from != TRACE_NONE && caller != VIZ_NONE &&
           selected(b, caller) && b->c->run->instrs[caller].derived_from == in->derived_from;
}

/* The cluster an instruction's node goes in: its source group (after, when the group holds two
 * or more drawn instructions), else its computation's. */
static uint32_t
node_cluster(Builder *b, uint32_t i)
{
    const TraceRunInstr *in = &b->c->run->instrs[i];
    uint32_t comp = viz_comp_of(b->x, i);
    uint64_t count = 0, cl = 0;
    if (in->phase != TRACE_AFTER || in->derived_from == TRACE_NONE || same_source_as_caller(b, i) ||
        !sl_map_get(&b->group_count, group_key(comp, in->derived_from), &count) || count < 2)
        return comp_cluster(b, comp);
    uint64_t key = group_key(comp, in->derived_from);
    if (sl_map_get(&b->group_cluster, key, &cl))
        return (uint32_t)cl - 1;
    uint32_t parent = comp_cluster(b, comp);
    uint32_t c = viz_add_cluster(
        &b->c->g, viz_fmt(&b->c->g, "cluster_s%u_c%u", in->derived_from, comp), parent);
    VizAttrs *a = viz_cluster_attrs(&b->c->g, c);
    if (!a || !sl_map_put(&b->group_cluster, key, (uint64_t)c + 1)) {
        b->c->g.failed = true;
        return parent;
    }
    a->v[VIZ_A_LABEL] = group_label(b, in->derived_from);
    a->v[VIZ_A_STYLE] = "dashed,rounded";
    a->v[VIZ_A_COLOR] = "#888888";
    return c;
}

/* ---- edges --------------------------------------------------------------------------------- */

static void
add_operand_edges(Builder *b, uint32_t i)
{
    const TraceRunInstr *in = &b->c->run->instrs[i];
    for (uint32_t k = 0; k < in->n_operands; k++) {
        uint32_t o = in->operands[k];
        if (!selected(b, o))
            continue;
        uint32_t e = viz_add_edge(&b->c->g, b->node_of[o - b->x->lo], b->node_of[i - b->x->lo]);
        VizAttrs *a = viz_edge_attrs(&b->c->g, e);
        if (!a || in->phase != TRACE_AFTER)
            continue;
        /* A get-tuple-element reads one element, not the whole tuple. */
        const TraceRunInstr *carried =
            strcmp(in->opcode, "get-tuple-element") == 0 ? in : &b->c->run->instrs[o];
        SlBuf t;
        sl_buf_init(&t);
        viz_bytes(&t, (double)carried->size_bytes);
        a->v[VIZ_A_LABEL] = viz_strdup_buf(&b->c->g, &t);
        sl_buf_fini(&t);
    }
}

/* Focus views: a small "+N" stub for the operands and users left out. */
static void
add_stubs(Builder *b, uint32_t i)
{
    const TraceRunInstr *in = &b->c->run->instrs[i];
    uint32_t li = i - b->x->lo, cut_ops = 0, cut_users = 0;
    for (uint32_t k = 0; k < in->n_operands; k++)
        cut_ops += in->operands[k] >= b->x->lo && in->operands[k] < b->x->hi &&
                   !selected(b, in->operands[k]);
    for (uint32_t k = b->x->user_off[li]; k < b->x->user_off[li + 1]; k++)
        cut_users += !selected(b, b->x->users[k]);
    for (int dir = 0; dir < 2; dir++) {
        uint32_t cut = dir == 0 ? cut_ops : cut_users;
        if (!cut)
            continue;
        uint32_t cl = SL_VEC_AT(&b->c->g.nodes, VizNode, b->node_of[li]).cluster;
        uint32_t n = viz_add_node(&b->c->g, viz_fmt(&b->c->g, "%s%u", dir ? "u" : "o", i), cl);
        VizAttrs *a = viz_node_attrs(&b->c->g, n);
        if (!a)
            return;
        a->v[VIZ_A_LABEL] = viz_fmt(&b->c->g, "+%u %s", cut, dir ? "users" : "operands");
        a->v[VIZ_A_SHAPE] = "plaintext";
        a->v[VIZ_A_STYLE] = "solid";
        a->v[VIZ_A_FONTCOLOR] = "#777777";
        uint32_t e = dir ? viz_add_edge(&b->c->g, b->node_of[li], n)
                         : viz_add_edge(&b->c->g, n, b->node_of[li]);
        VizAttrs *ea = viz_edge_attrs(&b->c->g, e);
        if (ea)
            ea->v[VIZ_A_STYLE] = "dotted";
    }
}

static void
add_call_edge(Builder *b, uint32_t caller, uint32_t comp, const char *role)
{
    const VizComp *cp = &b->x->comps[comp];
    uint32_t head = VIZ_NONE;
    for (uint32_t i = cp->first; i < cp->first + cp->n && head == VIZ_NONE; i++)
        if (selected(b, i))
            head = b->node_of[i - b->x->lo];
    uint32_t e = viz_add_edge(&b->c->g, b->node_of[caller - b->x->lo], head);
    VizAttrs *a = viz_edge_attrs(&b->c->g, e);
    if (!a)
        return;
    a->v[VIZ_A_STYLE] = "dashed";
    a->v[VIZ_A_COLOR] = "#2e86c1";
    a->v[VIZ_A_LABEL] = role;
    a->v[VIZ_A_LHEAD] = SL_VEC_AT(&b->c->g.clusters, VizCluster, b->comp_cluster[comp]).id;
    b->c->g.compound = true;
}

/* A dashed edge from each drawn caller into the cluster of its computation: computations
 * with one caller first, then every call site of the shared ones, in recorded order. */
static void
add_call_edges(Builder *b)
{
    for (uint32_t comp = 0; comp < b->x->n_comps; comp++) {
        const VizComp *cp = &b->x->comps[comp];
        if (cp->caller == VIZ_NONE || !selected(b, cp->caller) || b->comp_cluster[comp] == VIZ_NONE)
            continue;
        add_call_edge(b, cp->caller, comp, cp->role);
    }
    const TraceRun *run = b->c->run;
    for (uint32_t k = 0; k < run->n_calls; k++) {
        const TraceRunCall *call = &run->calls[k];
        if (!selected(b, call->instr))
            continue;
        uint32_t comp = viz_comp_named(b->x, call->computation);
        if (comp == VIZ_NONE || b->x->comps[comp].n_callers < 2 ||
            b->x->comps[comp].is_reducer || b->comp_cluster[comp] == VIZ_NONE)
            continue;
        add_call_edge(b, call->instr, comp, viz_role_word(call->role));
    }
}

const char *
viz_phase_title(VizCtx *c, const VizIndex *x, uint32_t drawn)
{
    uint32_t reducers = 0;
    for (uint32_t k = 0; k < x->n_comps; k++)
        reducers += x->comps[k].is_reducer;
    SlBuf t;
    sl_buf_init(&t);
    sl_buf_printf(&t, "%s: %s, %lld partitions, %u of %u instructions",
                  x->phase == TRACE_BEFORE ? "before" : "after", c->run->module,
                  (long long)c->run->num_partitions, drawn, x->hi - x->lo);
    if (x->phase == TRACE_AFTER)
        sl_buf_printf(&t, ", %u collective%s in the module", c->run->n_collectives,
                      c->run->n_collectives == 1 ? "" : "s");
    if (reducers)
        sl_buf_printf(&t, " (%u reducer computation%s not drawn)", reducers,
                      reducers == 1 ? "" : "s");
    const char *r = viz_strdup_buf(&c->g, &t);
    sl_buf_fini(&t);
    return r;
}

SlStatus
viz_build_phase(VizCtx *c, const VizIndex *x, const VizSel *s, SlError *err)
{
    uint32_t n = x->hi - x->lo;
    Builder b = {.c = c, .x = x, .s = s};
    b.comp_cluster = malloc((size_t)(x->n_comps + 1) * sizeof(uint32_t));
    b.node_of = malloc((size_t)(n + 1) * sizeof(uint32_t));
    sl_map_init(&b.group_count);
    sl_map_init(&b.group_cluster);
    bool ok = b.comp_cluster && b.node_of;
    if (ok) {
        memset(b.comp_cluster, 0xff, (size_t)(x->n_comps + 1) * sizeof(uint32_t));
        memset(b.node_of, 0xff, (size_t)(n + 1) * sizeof(uint32_t));
    }
    for (uint32_t i = x->lo; ok && x->phase == TRACE_AFTER && i < x->hi; i++) {
        uint32_t src = c->run->instrs[i].derived_from;
        uint64_t v = 0, key = group_key(viz_comp_of(x, i), src);
        if (!selected(&b, i) || src == TRACE_NONE)
            continue;
        (void)sl_map_get(&b.group_count, key, &v);
        ok = sl_map_put(&b.group_count, key, v + 1);
    }
    for (uint32_t i = x->lo; ok && i < x->hi; i++) {
        if (!selected(&b, i))
            continue;
        uint32_t cl = node_cluster(&b, i);
        bool in_group =
            (cl != VIZ_NONE && cl != b.comp_cluster[viz_comp_of(x, i)] && cl != c->top) ||
            same_source_as_caller(&b, i);
        b.node_of[i - x->lo] = viz_add_instr_node(c, x, i, cl, in_group);
        uint32_t p = palette_of(c, i), k = x->collective[i];
        if (p != VIZ_NONE)
            c->used_pal[p] = true;
        if (k != VIZ_NONE && viz_kind_index(c->run->collectives[k].kind) != VIZ_NONE)
            c->used_kind[viz_kind_index(c->run->collectives[k].kind)] = true;
        if (s->sel[i - x->lo] == VIZ_SEL_FOCUS) {
            VizAttrs *a = viz_node_attrs(&c->g, b.node_of[i - x->lo]);
            if (a) {
                a->v[VIZ_A_COLOR] = "#c0392b";
                a->v[VIZ_A_PENWIDTH] = "3";
                add_focus_origin(c, x, i, a);
            }
        }
    }
    for (uint32_t i = x->lo; ok && i < x->hi; i++)
        if (selected(&b, i))
            add_operand_edges(&b, i);
    for (uint32_t i = x->lo; ok && s->is_partial && i < x->hi; i++)
        if (selected(&b, i))
            add_stubs(&b, i);
    if (ok)
        add_call_edges(&b);
    free(b.comp_cluster);
    free(b.node_of);
    sl_map_fini(&b.group_count);
    sl_map_fini(&b.group_cluster);
    if (!ok || c->g.failed) {
        SlSrcLoc nowhere = {0};
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory building the diagram");
    }
    return SL_OK;
}
