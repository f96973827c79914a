/* cmd_html.c - `shardlens html TRACE.db [--run ID] [-o report.html] [model options]` and
 * `shardlens html OLD.db NEW.db -o diff.html`: the interactive report page. Owns: rendering
 * the page's diagrams (viz/) and handing them with the report to reports/html.c; which groups
 * of a collapsed module are drawn (the budgets below). Invariant: the page is written
 * atomically. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_html.h"
#include "cli/cli_trace.h"

enum { OPT_OUTPUT, OPT_BUDGET };

static const CliOpt k_opts[] = {
    {CLI_OPT_RUN, 0,   "run",    "ID",          "which run of TRACE.db (default: the latest)",  false},
    {OPT_OUTPUT,  'o', "output", "report.html", "where to write the page (default report.html)", false},
    {OPT_BUDGET,  0,   "layout-budget", "U",    "nodes + edges of all group diagrams (default: by size)", false},
    CLI_REPORT_MODEL_OPTS,
};

/* Budgets of a group tree, in layout units (nodes + edges, viz_graph_units) and SVG bytes: one
 * group's diagram, and all of a phase's together. dot takes about 0.15 ms per unit at these
 * sizes and the SVG about 0.8 KB per unit, while the rest of the page costs about 10 us per
 * instruction: a phase of n instructions gets BASE + EXTRA * (1 - n / SCALE_INSTRS) (no less
 * than BASE), which keeps a page to about 1.5 s of CPU and under 20 MB at any size. Groups
 * past them are listed on the page instead of drawn. */
enum {
    GROUP_UNITS = 600,
    AFTER_UNITS = 2400,
    AFTER_EXTRA_UNITS = 7200,
    BEFORE_UNITS = 1000,
    BEFORE_EXTRA_UNITS = 3000,
    AFTER_BYTES = 3 << 20,
    AFTER_EXTRA_BYTES = 5 << 20,
    BEFORE_BYTES = 3 << 19,
    BEFORE_EXTRA_BYTES = 5 << 19,
    SCALE_INSTRS = 100000,
    MISSES = 32, /* groups in a row that did not fit: stop looking for one that does */
};

/* BASE + EXTRA * (1 - n / SCALE_INSTRS), at least BASE. */
static uint64_t
scaled(uint64_t base, uint64_t extra, uint32_t n)
{
    return n >= SCALE_INSTRS ? base : base + extra * (SCALE_INSTRS - n) / SCALE_INSTRS;
}

static void
graph_slot(CliHtmlGraphs *g, const char *key, const char *title)
{
    uint32_t k = g->n++;
    g->g[k].key = key;
    g->g[k].title = title;
    g->g[k].svg = g->svg[k].data;
    g->g[k].note = g->note[k].len ? g->note[k].data : NULL;
}

/* The group children of g, busiest first (then biggest, then first). */
typedef struct Kid {
    uint32_t g;
    double send;
    uint32_t members;
} Kid;

static int
by_busiest(const void *pa, const void *pb)
{
    const Kid *a = pa, *b = pb;
    if (a->send != b->send)
        return a->send > b->send ? -1 : 1;
    if (a->members != b->members)
        return a->members > b->members ? -1 : 1;
    return a->g < b->g ? -1 : a->g > b->g;
}

/* The SVG element of Graphviz's output, without the XML prolog (the page is HTML) and the
 * comments (one per node and edge, naming it again). */
static const char *
svg_body(SlArena *a, const SlBuf *svg)
{
    const char *s = svg->data ? svg->data : "";
    const char *p = strstr(s, "<svg");
    if (!p)
        p = s;
    char *out = sl_arena_alloc_uninit(a, svg->len + 1, 1);
    if (!out)
        return NULL;
    size_t n = 0;
    while (*p) {
        if (p[0] == '<' && p[1] == '!' && p[2] == '-' && p[3] == '-') {
            const char *end = strstr(p, "-->");
            if (!end)
                break;
            p = end + 3;
            if (*p == '\n')
                p++;
            continue;
        }
        out[n++] = *p++;
    }
    out[n] = '\0';
    return out;
}

/* Draws the groups of one tree breadth first from the root, busiest first, within budget. */
static SlStatus
draw_tree(VizRenderer *r, VizTreeView *view, const VizOptions *vo, uint64_t budget,
          size_t byte_budget, SlArena *a, ReportHtmlTree *out, SlBuf *root_svg, SlError *err)
{
    const VizTree *t = viz_tree_get(view);
    SlSrcLoc nowhere = {0};
    const char **svg = SL_NEW_ARRAY(a, const char *, t->n + 1);
    uint64_t *units = SL_NEW_ARRAY(a, uint64_t, t->n + 1);
    uint8_t *why = SL_NEW_ARRAY(a, uint8_t, t->n + 1);
    uint32_t *queue = malloc(((size_t)t->n + 1) * sizeof(uint32_t));
    Kid *kids = malloc(((size_t)t->n + 1) * sizeof(Kid));
    uint32_t *first_kid = calloc((size_t)t->n + 2, sizeof(uint32_t)), *kid_list = NULL;
    if (!svg || !units || !why || !queue || !kids || !first_kid) {
        free(queue);
        free(kids);
        free(first_kid);
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    }
    /* children lists (ids are pre-order, so each parent's children come after it) */
    for (uint32_t g = 1; g < t->n; g++)
        first_kid[t->parent[g] + 1]++;
    for (uint32_t g = 0; g < t->n; g++)
        first_kid[g + 1] += first_kid[g];
    kid_list = malloc(((size_t)t->n + 1) * sizeof(uint32_t));
    uint32_t *fill = calloc((size_t)t->n + 1, sizeof(uint32_t));
    SlStatus st = kid_list && fill ? SL_OK : sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    for (uint32_t g = 1; !st && g < t->n; g++)
        kid_list[first_kid[t->parent[g]] + fill[t->parent[g]]++] = g;
    free(fill);
    for (uint32_t g = 0; g < t->n; g++)
        why[g] = REPORT_HTML_BUDGET_USED;
    uint32_t head = 0, tail = 0;
    uint64_t used = 0;
    size_t bytes = 0;
    uint32_t misses = 0;
    queue[tail++] = 0;
    SlBuf dot, one;
    sl_buf_init(&dot);
    sl_buf_init(&one);
    while (!st && head < tail) {
        uint32_t g = queue[head++];
        uint32_t n = 0;
        for (uint32_t k = first_kid[g]; k < first_kid[g + 1]; k++) {
            uint32_t c = kid_list[k];
            kids[n++] = (Kid){c, t->send[c], t->members[c]};
        }
        qsort(kids, n, sizeof(Kid), by_busiest);
        for (uint32_t k = 0; k < n; k++)
            queue[tail++] = kids[k].g;
        if (g && (used >= budget || bytes >= byte_budget || misses >= MISSES))
            continue;
        sl_buf_clear(&dot);
        st = viz_tree_dot(view, g, &dot, &units[g], err);
        if (st)
            break;
        if (g && units[g] > GROUP_UNITS) {
            why[g] = REPORT_HTML_TOO_LARGE;
            continue;
        }
        if (g && used + units[g] > budget) {
            misses++; /* a smaller one further on may still fit */
            continue;
        }
        sl_buf_clear(&one);
        st = viz_layout_svg(r, &dot, vo, t->phase == TRACE_BEFORE ? "before" : "after", units[g],
                            &one, err);
        if (st)
            break;
        svg[g] = svg_body(a, &one);
        size_t len = svg[g] ? strlen(svg[g]) : 0;
        if (g && bytes + len > byte_budget) {
            svg[g] = NULL;
            misses++;
            continue;
        }
        misses = 0;
        used += units[g];
        bytes += len;
        why[g] = REPORT_HTML_DRAWN;
        if (!svg[g]) {
            st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
            break;
        }
        if (g == 0)
            sl_buf_append(root_svg, one.data, one.len);
    }
    sl_buf_fini(&dot);
    sl_buf_fini(&one);
    free(queue);
    free(kids);
    free(first_kid);
    free(kid_list);
    if (st)
        return st;
    *out = (ReportHtmlTree){
        .phase = t->phase == TRACE_BEFORE ? "before" : "after",
        .lo = t->lo,
        .n_instrs = t->hi - t->lo,
        .n = t->n,
        .parent = t->parent,
        .name = t->name,
        .members = t->members,
        .send = t->send,
        .leaf = t->leaf,
        .svg = svg,
        .units = units,
        .why = why,
        .group_units = GROUP_UNITS,
        .total_units = budget,
        .basis = t->basis,
    };
    return SL_OK;
}

int
cli_html_graphs(VizRenderer *r, const TraceRun *run, const char *mesh, uint64_t layout_budget,
                const char *where, CliHtmlGraphs *out)
{
    memset(out, 0, sizeof(*out));
    sl_arena_init(&out->arena);
    for (uint32_t k = 0; k < SL_COUNTOF(out->svg); k++) {
        sl_buf_init(&out->svg[k]);
        sl_buf_init(&out->note[k]);
    }
    const VizView views[] = {VIZ_BEFORE, VIZ_AFTER};
    static const char *const keys[] = {"before", "after"};
    SlError err = {0};
    SlBuf dot;
    sl_buf_init(&dot);
    for (uint32_t k = 0; k < 2; k++) {
        VizOptions vo;
        viz_options_init(&vo);
        vo.view = views[k];
        vo.mesh = mesh;
        vo.progress = true;
        uint32_t slot = out->n;
        sl_buf_clear(&dot);
        SlStatus st = viz_dot_text(run, &vo, &dot, &out->note[slot], &err);
        if (!st && !out->note[slot].len) /* drawn whole */
            st = viz_layout_svg(r, &dot, &vo, keys[k], 0, &out->svg[slot], &err);
        else if (!st) { /* too big: the group tree, its root as the view */
            sl_buf_clear(&out->note[slot]);
            st = viz_tree_new(&out->view[k], run, views[k] == VIZ_BEFORE ? TRACE_BEFORE : TRACE_AFTER,
                               &vo, &err);
            ReportHtmlTree *t = &out->tree[out->n_trees];
            uint32_t n = 0;
            if (!st) {
                const VizTree *vt = viz_tree_get(out->view[k]);
                n = vt->hi - vt->lo;
            }
            uint64_t units = k ? scaled(AFTER_UNITS, AFTER_EXTRA_UNITS, n)
                               : scaled(BEFORE_UNITS, BEFORE_EXTRA_UNITS, n);
            if (layout_budget)
                units = k ? layout_budget : layout_budget * 5 / 12;
            size_t bytes = (size_t)(k ? scaled(AFTER_BYTES, AFTER_EXTRA_BYTES, n)
                                      : scaled(BEFORE_BYTES, BEFORE_EXTRA_BYTES, n));
            if (!st)
                st = draw_tree(r, out->view[k], &vo, units, bytes, &out->arena, t,
                               &out->svg[slot], &err);
            if (!st) {
                uint32_t drawn = 0;
                for (uint32_t g = 0; g < t->n; g++)
                    drawn += t->svg[g] != NULL;
                out->n_trees++;
                sl_buf_printf(&out->note[slot],
                              "%s: %u instructions are too many to draw at once: one box per "
                              "group (%s; %u groups, %u of them drawn); click a box to open it",
                              keys[k], t->n_instrs, t->basis, t->n, drawn);
            }
        }
        if (st) {
            sl_buf_fini(&dot);
            return cli_report_at(&err, where);
        }
        graph_slot(out, keys[k], k ? "after partitioning" : "before partitioning");
    }
    sl_buf_fini(&dot);
    return CLI_EXIT_OK;
}

void
cli_html_graphs_fini(CliHtmlGraphs *g)
{
    for (uint32_t k = 0; k < SL_COUNTOF(g->svg); k++) {
        sl_buf_fini(&g->svg[k]);
        sl_buf_fini(&g->note[k]);
        viz_tree_free(g->view[k]);
    }
    sl_arena_fini(&g->arena);
}

int
cli_html_write(ReportHtmlInput *in, const CliHtmlGraphs *graphs, const char *path)
{
    if (graphs && !in->n_graphs) {
        in->graphs = graphs->g;
        in->n_graphs = graphs->n;
        in->trees = graphs->tree;
        in->n_trees = graphs->n_trees;
    }
    SlBuf page;
    SlError err = {0};
    sl_buf_init(&page);
    int code = CLI_EXIT_OK;
    if (report_write_html(in, &page, &err) ||
        sl_file_write_atomic(path, page.data, page.len, &err))
        code = cli_report_at(&err, path);
    sl_buf_fini(&page);
    return code;
}

static int
build_report(const CliArgs *a, const CliRun *r, const ReportOptions *o, SlArena *arena,
             Report **rep, const char *path)
{
    SlError err = {0};
    if (!report_build(r->run, o, arena, rep, &err))
        return CLI_EXIT_OK;
    return err.status == SL_ERR_INVALID ? cli_usage_error(a->cmd, "%s", err.msg)
                                        : cli_report_at(&err, path);
}

static int
run(const CliArgs *a)
{
    ReportOptions o;
    int64_t run_id = 0;
    int code = cli_report_options(a, &o);
    if (code == CLI_EXIT_OK)
        code = cli_run_id(a, &run_id);
    if (code != CLI_EXIT_OK)
        return code;
    int64_t budget = 0;
    const char *bv = cli_args_value(a, OPT_BUDGET);
    if (bv && !cli_parse_count(a->cmd, "--layout-budget", bv, &budget))
        return CLI_EXIT_BAD_INPUT;
    bool is_diff = a->n_pos == 2;
    if (is_diff && run_id)
        return cli_usage_error(a->cmd, "--run picks a run of one trace; a diff takes the latest "
                                       "run of each");
    const char *out = cli_args_value(a, OPT_OUTPUT);
    if (!out)
        out = is_diff ? "diff.html" : "report.html";
    const char *new_path = a->pos[is_diff ? 1 : 0];
    CliRun old_r = {0}, new_r = {0};
    bool old_loaded = false;
    SlArena arena;
    sl_arena_init(&arena);
    Report *old_rep = NULL, *new_rep = NULL;
    if (is_diff) {
        code = cli_run_load(&old_r, a->pos[0], 0, TRACE_LOAD_ALL);
        old_loaded = true;
        if (code == CLI_EXIT_OK)
            code = build_report(a, &old_r, &o, &arena, &old_rep, a->pos[0]);
    }
    bool new_loaded = false;
    if (code == CLI_EXIT_OK) {
        code = cli_run_load(&new_r, new_path, run_id, TRACE_LOAD_ALL);
        new_loaded = true;
    }
    if (code == CLI_EXIT_OK)
        code = build_report(a, &new_r, &o, &arena, &new_rep, new_path);
    VizRenderer *vr = NULL;
    SlError err = {0};
    CliHtmlGraphs graphs;
    bool have_graphs = false;
    if (code == CLI_EXIT_OK && viz_renderer_new(&vr, &err))
        code = cli_report_at(&err, out);
    if (code == CLI_EXIT_OK) {
        code = cli_html_graphs(vr, new_r.run, new_rep->model.mesh, (uint64_t)budget, new_path,
                               &graphs);
        have_graphs = true;
    }
    if (code == CLI_EXIT_OK) {
        ReportHtmlInput in = {.run = new_r.run, .rep = new_rep, .old_rep = old_rep};
        in.old_label = is_diff ? a->pos[0] : NULL;
        in.new_label = is_diff ? a->pos[1] : NULL;
        code = cli_html_write(&in, &graphs, out);
    }
    if (code == CLI_EXIT_OK)
        printf("wrote %s\n", out);
    if (have_graphs)
        cli_html_graphs_fini(&graphs);
    viz_renderer_free(vr);
    if (new_loaded)
        cli_run_fini(&new_r);
    if (old_loaded)
        cli_run_fini(&old_r);
    sl_arena_fini(&arena);
    return code;
}

const CliCommand cmd_html = {
    .name = "html",
    .usage = "TRACE.db [--run ID] [-o report.html] [--layout-budget U] [--mesh AXES] [model options] | "
             "OLD.db NEW.db [-o diff.html]",
    .summary = "an interactive HTML report (or a diff) from a trace",
    .description =
        "Writes one self-contained page (no network, everything inline) that opens in any\n"
        "browser: the totals with the busiest device and the estimated time; bytes sent\n"
        "per device and per kind; with --mesh, the device mesh coloured by traffic (hover\n"
        "a collective to see its groups on it); a sortable, filterable table of the\n"
        "collectives (click one for its explanation, as `explain` gives it, and to select\n"
        "it in the graph); traffic by op_name prefix; the warnings; and the before/after\n"
        "diagrams (Graphviz layouts, as `viz` draws them) with pan, zoom and search by\n"
        "name. A module too big to draw whole starts collapsed into 10 to 60 boxes (groups\n"
        "by computation, op_name prefix, opcode, or runs of them); clicking a box opens\n"
        "its own diagram, down to the ops. Diagrams are drawn busiest first within a layout\n"
        "budget; a group past it lists its ops instead, each a link. Selecting an op shows\n"
        "where its sharding came from (propagation's origin, as `explain` gives it). A\n"
        "chart shows live bytes over the schedule per device, the peak marked and its\n"
        "largest buffers listed. --layout-budget U bounds the nodes + edges of all group\n"
        "diagrams after partitioning (before: 5/12 of U); by default it shrinks from 9,600\n"
        "for small modules to 2,400 at 100k instructions.\n"
        "Given OLD.db and NEW.db (the latest run of each), the page also shows what grew,\n"
        "what shrank and what is new, per kind and per source op.\n"
        "The model options are report's. The page is written atomically.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 2,
    .run = run,
};
