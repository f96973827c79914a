/* viz_render.c - the public entry points: choosing what to draw (whole graph, focus
 * neighbourhood, collapsed, or a before/after pair), and rendering DOT text with gvc.
 * Owns: the only cgraph/gvc calls, the collapse policy and the note that reports it.
 * Does not own: graph content (viz_graph.c, viz_tree.c).
 * Invariant: the DOT text is built first and is what gets laid out, so a picture and its DOT
 * text always agree; files are written atomically. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "viz/viz.h"

/* Included as system headers (viz/meson.build), which keeps their warnings out of ours. */
#include <cgraph.h>
#include <gvc.h>

#include "viz/viz_int.h"

void
viz_options_init(VizOptions *o)
{
    memset(o, 0, sizeof(*o));
    o->view = VIZ_BEFORE;
    o->format = VIZ_SVG;
    o->depth = 2;
    o->max_nodes = 400;
    o->budget = VIZ_DEFAULT_BUDGET;
}

SlStatus
viz_ctx_init(VizCtx *c, const TraceRun *run, const VizOptions *o, SlArena *a, SlBuf *note, SlError *err)
{
    memset(c, 0, sizeof(*c));
    c->run = run;
    c->opt = o;
    c->arena = a;
    c->note = note;
    c->top = VIZ_NONE;
    SlSrcLoc nowhere = {0};
    viz_graph_init(&c->g, a,
                   o->view == VIZ_BEFORE  ? "before"
                   : o->view == VIZ_AFTER ? "after"
                                          : "pair");
    SlStatus st = viz_mesh_parse(o->mesh, &c->mesh, err);
    if (st)
        return st;
    if (c->mesh.n_axes) {
        int64_t p = 1;
        for (uint32_t i = 0; i < c->mesh.n_axes; i++)
            p *= c->mesh.sizes[i];
        if (p != run->num_partitions)
            return sl_fail(err, SL_ERR_INVALID, nowhere,
                           "--mesh '%s' has %lld devices but the run has %lld partitions", o->mesh,
                           (long long)p, (long long)run->num_partitions);
    }
    st = viz_palette_init(&c->pal, run, &c->mesh, a, err);
    if (st)
        return st;
    c->used_pal = SL_NEW_ARRAY(a, bool, c->pal.n + 1);
    c->used_kind = SL_NEW_ARRAY(a, bool, viz_kind_count());
    if (!c->used_pal || !c->used_kind)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    return SL_OK;
}

void
viz_ctx_fini(VizCtx *c)
{
    viz_palette_fini(&c->pal);
    viz_graph_fini(&c->g);
}

static void note(VizCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
note(VizCtx *c, const char *fmt, ...)
{
    if (!c->note)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (c->note->len)
        sl_buf_puts(c->note, "; ");
    sl_buf_vprintf(c->note, fmt, ap);
    va_end(ap);
}

static VizSel
sel_new(const VizIndex *x, SlArena *a)
{
    VizSel s = {SL_NEW_ARRAY(a, uint8_t, x->hi - x->lo + 1), 0, false};
    return s;
}

void
viz_ctx_reset(VizCtx *c)
{
    const char *name = c->g.name;
    viz_graph_fini(&c->g);
    viz_graph_init(&c->g, c->arena, name);
    memset(c->used_pal, 0, (c->pal.n + 1) * sizeof(bool));
    memset(c->used_kind, 0, viz_kind_count() * sizeof(bool));
}

static bool
over_budget(const VizCtx *c)
{
    return c->opt->budget && viz_graph_units(&c->g) > c->opt->budget;
}

/* The neighbourhood of o->focus, cut further while its graph is past the layout budget. */
static SlStatus
build_focus(VizCtx *c, const VizIndex *x, VizSel *s, const char *phase, SlError *err)
{
    const VizOptions *o = c->opt;
    SlVec seeds = {0};
    SlStatus st = viz_resolve(x, o->focus, &seeds, err);
    uint32_t cap = o->max_nodes ? o->max_nodes : UINT32_MAX;
    bool truncated = false, shrunk = false;
    uint64_t first_units = 0;
    uint32_t last_count = UINT32_MAX;
    while (st == SL_OK) {
        viz_select_focus(x, seeds.data, (uint32_t)seeds.len, o->depth < 0 ? 0 : o->depth, cap, s,
                         &truncated);
        st = viz_build_phase(c, x, s, err);
        /* the seeds themselves are always drawn: stop when a try draws no fewer */
        if (st || !over_budget(c) || s->count <= 1 || s->count >= last_count)
            break;
        last_count = s->count;
        uint64_t units = viz_graph_units(&c->g);
        if (!first_units)
            first_units = units;
        /* nodes in proportion to the budget, and always fewer than this try */
        uint64_t next = (uint64_t)s->count * o->budget / units;
        cap = next >= s->count ? s->count - 1 : next < 1 ? 1 : (uint32_t)next;
        shrunk = true;
        viz_ctx_reset(c);
    }
    sl_vec_fini(&seeds);
    if (st)
        return st;
    if (shrunk)
        note(c,
             "%s: the neighbourhood of %s within depth %d (%llu nodes and edges) is past the "
             "layout budget of %u (about %.0f s of dot): cut at %u nodes",
             phase, o->focus, o->depth, (unsigned long long)first_units, o->budget,
             viz_estimate_seconds(first_units), s->count);
    else if (truncated)
        note(c,
             "%s: the neighbourhood of %s within depth %d was cut at %u nodes "
             "(--max-nodes)",
             phase, o->focus, o->depth, s->count);
    c->g.label = viz_phase_title(c, x, s->count);
    return SL_OK;
}

/* A whole phase, or the neighbourhood of o->focus in it. A whole phase past --max-nodes or past
 * the layout budget is not built here: `why` then says why, and the caller draws the first view
 * of the phase's group tree instead (tree_view). */
static SlStatus
build_view(VizCtx *c, const VizIndex *x, SlBuf *why, SlError *err)
{
    const VizOptions *o = c->opt;
    const char *phase = x->phase == TRACE_BEFORE ? "before" : "after";
    VizSel s = sel_new(x, c->arena);
    SlSrcLoc nowhere = {0};
    if (!s.sel)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    if (o->focus)
        return build_focus(c, x, &s, phase, err);
    viz_select_all(x, &s);
    if (o->max_nodes && s.count > o->max_nodes) {
        sl_buf_printf(why, "%u instructions exceed --max-nodes %u", s.count, o->max_nodes);
        return SL_OK;
    }
    SlStatus st = viz_build_phase(c, x, &s, err);
    c->g.label = viz_phase_title(c, x, s.count);
    if (st || !over_budget(c))
        return st;
    uint64_t units = viz_graph_units(&c->g);
    sl_buf_printf(why,
                  "%u instructions (%llu nodes and edges) are past the layout budget of %u "
                  "(about %.0f s of dot)",
                  s.count, (unsigned long long)units, o->budget, viz_estimate_seconds(units));
    viz_ctx_reset(c);
    return SL_OK;
}

/* The collapsed view of a whole phase: the first view of its group tree (viz_tree.c), the one
 * the HTML page opens with, one box per group with its instructions and what it sends, the
 * edges between two boxes merged into one. */
static SlStatus
tree_view(const TraceRun *run, const VizOptions *o, TracePhase phase, const char *why,
          SlBuf *out, SlBuf *note_out, uint64_t *units, SlError *err)
{
    VizTreeView *v = NULL;
    SlStatus st = viz_tree_new(&v, run, phase, o, err);
    if (!st)
        st = viz_tree_dot(v, 0, out, units, err);
    if (!st && note_out) {
        const VizTree *t = viz_tree_get(v);
        uint32_t boxes = 0;
        for (uint32_t g = 1; g < t->n; g++)
            boxes += t->parent[g] == 0;
        uint32_t ops = t->items[0] - boxes;
        if (note_out->len)
            sl_buf_puts(note_out, "; ");
        sl_buf_printf(note_out,
                      "%s: %s: drew one box per group of %s (%u box%s", phase == TRACE_BEFORE ?
                      "before" : "after", why, t->basis, boxes, boxes == 1 ? "" : "es");
        if (ops)
            sl_buf_printf(note_out, " and %u op%s", ops, ops == 1 ? "" : "s");
        sl_buf_puts(note_out, ", the first view of the HTML page); use --focus NAME to see "
                              "instructions");
    }
    viz_tree_free(v);
    return st;
}

static SlStatus
build_pair(VizCtx *c, const VizIndex *bx, const VizIndex *ax, SlError *err)
{
    SlSrcLoc nowhere = {0};
    if (!c->opt->focus)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "a pair view needs an instruction name");
    SlVec seeds = {0};
    SlStatus st = viz_resolve(bx, c->opt->focus, &seeds, err);
    if (st) {
        sl_vec_fini(&seeds);
        return st;
    }
    uint32_t source = SL_VEC_AT(&seeds, uint32_t, 0);
    sl_vec_fini(&seeds);
    const TraceRunInstr *src = &c->run->instrs[source];
    VizSel bs = sel_new(bx, c->arena), as = sel_new(ax, c->arena);
    if (!bs.sel || !as.sel)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    bool cut = false, cut2 = false;
    uint32_t cap = c->opt->max_nodes ? c->opt->max_nodes : UINT32_MAX;
    viz_select_focus(bx, &source, 1, 1, cap, &bs, &cut);
    SlVec derived = {0};
    for (uint32_t i = ax->lo; i < ax->hi; i++)
        if (c->run->instrs[i].derived_from == source && !SL_VEC_PUSH(&derived, uint32_t, i))
            break;
    viz_select_focus(ax, derived.data, (uint32_t)derived.len, 1, cap, &as, &cut2);
    uint32_t n_derived = (uint32_t)derived.len;
    for (uint32_t i = 0; i < ax->hi - ax->lo; i++) /* the after cluster's label names them */
        if (as.sel[i] == VIZ_SEL_FOCUS)
            as.sel[i] = VIZ_SEL_IN;
    sl_vec_fini(&derived);
    if (cut || cut2)
        note(c, "pair %s: cut at %u nodes per side (--max-nodes)", src->name, cap);

    c->top = viz_add_cluster(&c->g, "cluster_before", VIZ_NONE);
    VizAttrs *a = viz_cluster_attrs(&c->g, c->top);
    if (a) {
        a->v[VIZ_A_LABEL] = viz_fmt(&c->g, "before: %%%s (%s)", src->name, src->opcode);
        a->v[VIZ_A_STYLE] = "rounded";
    }
    st = viz_build_phase(c, bx, &bs, err);
    if (st)
        return st;
    c->top = viz_add_cluster(&c->g, "cluster_after", VIZ_NONE);
    a = viz_cluster_attrs(&c->g, c->top);
    if (a) {
        uint32_t d = bx->decision[source];
        SlBuf t;
        sl_buf_init(&t);
        if (d != VIZ_NONE) {
            sl_buf_puts(&t, ", strategy ");
            viz_put_strategy(c->run, d, &t);
        }
        a->v[VIZ_A_LABEL] =
            viz_fmt(&c->g, "after: %u instruction%s emitted for %%%s%s", n_derived,
                    n_derived == 1 ? "" : "s", src->name, t.data ? t.data : "");
        if (t.failed)
            c->g.failed = true;
        sl_buf_fini(&t);
        a->v[VIZ_A_STYLE] = "rounded";
    }
    st = viz_build_phase(c, ax, &as, err);
    c->top = VIZ_NONE;
    c->g.label = viz_fmt(&c->g, "%s: %%%s before and after partitioning for %lld devices",
                         c->run->module, src->name, (long long)c->run->num_partitions);
    return st;
}

/* viz_dot_text, also giving the layout units of what it wrote. */
static SlStatus
dot_text(const TraceRun *run, const VizOptions *o, SlBuf *out, SlBuf *note_out, uint64_t *units,
         SlError *err)
{
    SlArena arena;
    VizCtx c;
    VizIndex bx, ax;
    sl_arena_init(&arena);
    SlStatus st = viz_ctx_init(&c, run, o, &arena, note_out, err);
    if (!st && o->view != VIZ_AFTER)
        st = viz_index_build(&bx, run, TRACE_BEFORE, &arena, err);
    if (!st && o->view != VIZ_BEFORE)
        st = viz_index_build(&ax, run, TRACE_AFTER, &arena, err);
    SlBuf why;
    sl_buf_init(&why);
    if (!st && o->view == VIZ_PAIR)
        st = build_pair(&c, &bx, &ax, err);
    else if (!st)
        st = build_view(&c, o->view == VIZ_BEFORE ? &bx : &ax, &why, err);
    if (!st && why.failed)
        st = sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    if (!st && why.len) {
        st = tree_view(run, o, o->view == VIZ_BEFORE ? TRACE_BEFORE : TRACE_AFTER, why.data, out,
                       note_out, units, err);
    } else if (!st) {
        viz_add_legend(&c, o->view != VIZ_BEFORE);
        viz_graph_cheapen(&c.g);
        *units = viz_graph_units(&c.g);
        viz_graph_write_dot(&c.g, out);
        if (out->failed) {
            SlSrcLoc nowhere = {0};
            st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory writing DOT text");
        }
    }
    sl_buf_fini(&why);
    viz_ctx_fini(&c);
    sl_arena_fini(&arena);
    return st;
}

SlStatus
viz_dot_text_units(const TraceRun *run, const VizOptions *o, SlBuf *out, SlBuf *note_out,
                   uint64_t *units, SlError *err)
{
    return dot_text(run, o, out, note_out, units, err);
}

SlStatus
viz_dot_text(const TraceRun *run, const VizOptions *o, SlBuf *out, SlBuf *note_out, SlError *err)
{
    uint64_t units = 0;
    return dot_text(run, o, out, note_out, &units, err);
}

/* ---- progress --------------------------------------------------------------------------------
 */

typedef struct Progress {
    bool on;
    const char *what;
    double start;
} Progress;

static double
now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A line before a layout estimated at a second or more, and one after any that took that. */
static Progress
progress_begin(const VizOptions *o, const char *what, uint64_t units)
{
    Progress p = {o->progress, what, now_seconds()};
    double est = viz_estimate_seconds(units);
    if (p.on && est >= 1.0)
        fprintf(stderr, "shardlens: laying out %s: %llu nodes and edges, about %.0f s of dot\n",
                what, (unsigned long long)units, est);
    return p;
}

static void
progress_end(const Progress *p)
{
    double took = now_seconds() - p->start;
    if (p->on && took >= 1.0)
        fprintf(stderr, "shardlens: laid out %s in %.1f s\n", p->what, took);
}

/* ---- rendering --------------------------------------------------------------------------------
 */

/* LeakSanitizer's hook (used only in sanitizer builds): graphviz, and the font libraries its
 * text layout loads, keep caches for the life of the process (gvContext's plugin table,
 * fontconfig's font sets, pango's font map), which are not ours to free. Our own allocations
 * never pass through these libraries, so a leak of ours is still reported. */
const char *__lsan_default_suppressions(void);
const char *
__lsan_default_suppressions(void)
{
    return "leak:libgvc.so\n"
           "leak:libcgraph.so\n"
           "leak:libgvplugin_\n"
           "leak:libfontconfig.so\n"
           "leak:libpango\n"
           "leak:libglib-2.0.so\n"
           "leak:libgobject-2.0.so\n"
           "leak:libcairo.so\n"
           "leak:libharfbuzz.so\n"
           "leak:libfreetype.so\n";
}

/* ...and without a table of them on every exit. */
const char *__lsan_default_options(void);
const char *
__lsan_default_options(void)
{
    return "print_suppressions=0";
}

struct VizRenderer {
    GVC_t *gvc;
};

SlStatus
viz_renderer_new(VizRenderer **out, SlError *err)
{
    SlSrcLoc nowhere = {0};
    VizRenderer *r = calloc(1, sizeof(*r));
    *out = NULL;
    if (!r)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    agseterr(AGERR); /* warnings (e.g. font substitutions) would only be noise */
    r->gvc = gvContext();
    if (!r->gvc) {
        free(r);
        return sl_fail(err, SL_ERR_IO, nowhere, "graphviz: cannot create a context");
    }
    *out = r;
    return SL_OK;
}

void
viz_renderer_free(VizRenderer *r)
{
    if (!r)
        return;
    gvFreeContext(r->gvc);
    free(r);
}

/* Object ids in creation order. cgraph's default id discipline uses the address of a name's
 * string as its id, and it keeps subgraphs ordered by id: dot then lays out and draws the
 * clusters in an order that depends on the heap, and the SVG changed from run to run while
 * the DOT text did not. This discipline maps no names itself (cgraph then keeps them in its
 * own name map) and hands out ids from a counter, so clusters come in the order of the text.
 * Ids are odd, as cgraph's own anonymous ids are. */
typedef struct IdState {
    IDTYPE next;
} IdState;

static void *
id_open(Agraph_t *g, Agdisc_t *disc)
{
    (void)g;
    (void)disc;
    IdState *s = calloc(1, sizeof(*s));
    if (s)
        s->next = 1;
    return s;
}

static long
id_map(void *state, int objtype, char *str, IDTYPE *id, int createflag)
{
    (void)objtype;
    IdState *s = state;
    if (str || !createflag || !s)
        return 0; /* names: cgraph's internal map; lookups of unknown ids fail */
    *id = s->next;
    s->next += 2;
    return 1;
}

static long
id_alloc(void *state, int objtype, IDTYPE id)
{
    (void)state;
    (void)objtype;
    (void)id;
    return 0; /* no caller-chosen ids */
}

static void
id_free(void *state, int objtype, IDTYPE id)
{
    (void)state;
    (void)objtype;
    (void)id;
}

static char *
id_print(void *state, int objtype, IDTYPE id)
{
    (void)state;
    (void)objtype;
    (void)id;
    return NULL; /* every name is in cgraph's internal map */
}

static void
id_close(void *state)
{
    free(state);
}

static void
id_register(void *state, int objtype, void *obj)
{
    (void)state;
    (void)objtype;
    (void)obj;
}

static Agiddisc_t seq_id_disc = {id_open, id_map, id_alloc, id_free, id_print, id_close,
                                 id_register};

/* Reads our DOT text with seq_id_disc (agmemread would use the default ids). */
static Agraph_t *
read_dot(const SlBuf *dot)
{
    FILE *f = fmemopen(dot->data, dot->len, "r");
    if (!f)
        return NULL;
    Agdisc_t disc = {&AgMemDisc, &seq_id_disc, &AgIoDisc};
    Agraph_t *g = agread(f, &disc);
    fclose(f);
    return g;
}

/* Graphviz 2.42's dot makes room for the label of a flat edge (both ends on one rank) by
 * reallocating that rank's node array, while the clusters on the rank still hold the old
 * array; gvFreeLayout then frees it a second time ("free(): double free detected", issue 18).
 * For such a layout we skip gvFreeLayout and let the layout's memory go (agclose still frees
 * the graph; the process renders a handful of diagrams at most). */
static bool
has_labelled_flat_edge(Agraph_t *g)
{
    for (Agnode_t *n = agfstnode(g); n; n = agnxtnode(g, n))
        for (Agedge_t *e = agfstout(g, n); e; e = agnxtout(g, e))
            if (ED_label(e) && ND_rank(agtail(e)) == ND_rank(aghead(e)))
                return true;
    return false;
}

SlStatus
viz_render_dot(VizRenderer *r, const SlBuf *dot, const char *format, const char *path,
               SlError *err)
{
    SlSrcLoc at = {path, 0, 0};
    Agraph_t *g = dot->data ? read_dot(dot) : NULL;
    if (!g)
        return sl_fail(err, SL_ERR_INTERNAL, at, "graphviz could not read our DOT text: %s",
                       aglasterr() ? aglasterr() : "no message");
    char *data = NULL;
    unsigned int len = 0;
    SlStatus st = SL_OK;
    if (gvLayout(r->gvc, g, "dot") != 0) {
        st = sl_fail(err, SL_ERR_IO, at, "graphviz: layout failed (is the dot plugin installed?)");
    } else {
        if (gvRenderData(r->gvc, g, format, &data, &len) != 0 || !data)
            st =
                sl_fail(err, SL_ERR_IO, at, "graphviz: cannot render %s (plugin missing?)", format);
        else
            st = sl_file_write_atomic(path, data, len, err);
        gvFreeRenderData(data);
        if (!has_labelled_flat_edge(g))
            gvFreeLayout(r->gvc, g);
    }
    agclose(g);
    return st;
}

SlStatus
viz_render_with(VizRenderer *r, const TraceRun *run, const VizOptions *o, const char *path,
                SlBuf *note_out, SlError *err)
{
    SlBuf dot;
    sl_buf_init(&dot);
    uint64_t units = 0;
    SlStatus st = dot_text(run, o, &dot, note_out, &units, err);
    Progress p = {0};
    if (!st && o->format != VIZ_DOT)
        p = progress_begin(o, path, units);
    if (!st && o->format == VIZ_DOT)
        st = sl_file_write_atomic(path, dot.data, dot.len, err);
    else if (!st)
        st = viz_render_dot(r, &dot, o->format == VIZ_PNG ? "png" : "svg", path, err);
    if (p.on)
        progress_end(&p);
    sl_buf_fini(&dot);
    return st;
}

SlStatus
viz_render(const TraceRun *run, const VizOptions *o, const char *path, SlBuf *note_out,
           SlError *err)
{
    VizRenderer *r = NULL;
    SlStatus st = o->format == VIZ_DOT ? SL_OK : viz_renderer_new(&r, err);
    if (!st && o->format == VIZ_DOT) {
        SlBuf dot;
        sl_buf_init(&dot);
        st = viz_dot_text(run, o, &dot, note_out, err);
        if (!st)
            st = sl_file_write_atomic(path, dot.data, dot.len, err);
        sl_buf_fini(&dot);
    } else if (!st) {
        st = viz_render_with(r, run, o, path, note_out, err);
    }
    viz_renderer_free(r);
    return st;
}

/* ---- SVG in memory (for pages that embed diagrams) ------------------------------------------ */

SlStatus
viz_layout_svg(VizRenderer *r, const SlBuf *dot, const VizOptions *o, const char *what,
               uint64_t units, SlBuf *svg, SlError *err)
{
    SlSrcLoc nowhere = {0};
    Agraph_t *g = dot->data ? read_dot(dot) : NULL;
    if (!g)
        return sl_fail(err, SL_ERR_INTERNAL, nowhere, "graphviz could not read our DOT text: %s",
                       aglasterr() ? aglasterr() : "no message");
    SlStatus st = SL_OK;
    Progress p = progress_begin(o, what, units);
    char *data = NULL;
    unsigned int len = 0;
    if (gvLayout(r->gvc, g, "dot") != 0) {
        st = sl_fail(err, SL_ERR_IO, nowhere, "graphviz: layout failed");
    } else {
        if (gvRenderData(r->gvc, g, "svg", &data, &len) != 0 || !data)
            st = sl_fail(err, SL_ERR_IO, nowhere, "graphviz: cannot render svg");
        else
            sl_buf_append(svg, data, len);
        gvFreeRenderData(data);
        if (!has_labelled_flat_edge(g)) /* as viz_render_dot does */
            gvFreeLayout(r->gvc, g);
    }
    progress_end(&p);
    agclose(g);
    if (!st && svg->failed)
        st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    return st;
}

SlStatus
viz_svg_text(VizRenderer *r, const TraceRun *run, const VizOptions *o, SlBuf *svg, SlBuf *note_out,
             SlError *err)
{
    SlBuf dot;
    sl_buf_init(&dot);
    uint64_t units = 0;
    SlStatus st = dot_text(run, o, &dot, note_out, &units, err);
    if (!st)
        st = viz_layout_svg(r, &dot, o, o->view == VIZ_BEFORE ? "before" : "after", units, svg,
                            err);
    sl_buf_fini(&dot);
    return st;
}
