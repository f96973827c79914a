/* cmd_html.c - `shardlens html TRACE.db [--run ID] [-o report.html] [model options]` and
 * `shardlens html OLD.db NEW.db -o diff.html`: the interactive report page. Owns: rendering
 * the page's diagrams (viz/) and handing them with the report to reports/html.c; which
 * neighbourhoods are drawn for a collapsed module. Invariant: the page is written atomically. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_html.h"
#include "cli/cli_trace.h"

enum { OPT_OUTPUT };

static const CliOpt k_opts[] = {
    {CLI_OPT_RUN, 0,   "run",    "ID",          "which run of TRACE.db (default: the latest)",  false},
    {OPT_OUTPUT,  'o', "output", "report.html", "where to write the page (default report.html)", false},
    CLI_REPORT_MODEL_OPTS,
};

/* The budget of a neighbourhood view: small, so that all of them together stay in seconds. */
enum { FOCUS_BUDGET = 300 };

static void
graph_slot(CliHtmlGraphs *g, const char *key, const char *title)
{
    uint32_t k = g->n++;
    g->g[k].key = key;
    g->g[k].title = title;
    g->g[k].svg = g->svg[k].data;
    g->g[k].note = g->note[k].len ? g->note[k].data : NULL;
}

/* Source ops by the bytes their collectives send, most first (ties: first in the run). */
static uint32_t
busiest_sources(const TraceRun *run, uint32_t *out, uint32_t max)
{
    double *sent = calloc((size_t)run->n_instrs + 1, sizeof(double));
    if (!sent)
        return 0;
    for (uint32_t k = 0; k < run->n_collectives; k++)
        if (run->collectives[k].source != TRACE_NONE)
            sent[run->collectives[k].source] += run->collectives[k].send_bytes + 1.0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < run->n_before; i++) {
        if (sent[i] <= 0)
            continue;
        uint32_t at = n;
        while (at > 0 && sent[out[at - 1]] < sent[i])
            at--;
        if (at >= max)
            continue;
        if (n < max)
            n++;
        memmove(out + at + 1, out + at, (n - 1 - at) * sizeof(*out));
        out[at] = i;
    }
    free(sent);
    return n;
}

int
cli_html_graphs(VizRenderer *r, const TraceRun *run, const char *mesh, const char *where,
                CliHtmlGraphs *out)
{
    memset(out, 0, sizeof(*out));
    sl_arena_init(&out->arena);
    for (uint32_t k = 0; k < SL_COUNTOF(out->svg); k++) {
        sl_buf_init(&out->svg[k]);
        sl_buf_init(&out->note[k]);
    }
    const VizView views[] = {VIZ_BEFORE, VIZ_AFTER};
    static const char *const keys[] = {"before", "after"};
    bool collapsed = false;
    SlError err = {0};
    for (uint32_t k = 0; k < 2; k++) {
        VizOptions vo;
        viz_options_init(&vo);
        vo.view = views[k];
        vo.mesh = mesh;
        vo.progress = true;
        uint32_t slot = out->n;
        if (viz_svg_text(r, run, &vo, &out->svg[slot], &out->note[slot], &err))
            return cli_report_at(&err, where);
        collapsed = collapsed || (k == 1 && out->note[slot].len);
        graph_slot(out, keys[k], k ? "after partitioning" : "before partitioning");
    }
    if (!collapsed)
        return CLI_EXIT_OK;
    uint32_t src[CLI_HTML_MAX_FOCUS];
    uint32_t n = busiest_sources(run, src, CLI_HTML_MAX_FOCUS);
    for (uint32_t k = 0; k < n; k++) {
        VizOptions vo;
        viz_options_init(&vo);
        vo.view = VIZ_AFTER;
        vo.mesh = mesh;
        vo.focus = run->instrs[src[k]].name;
        vo.depth = 2;
        vo.budget = FOCUS_BUDGET;
        vo.progress = true;
        uint32_t slot = out->n;
        if (viz_svg_text(r, run, &vo, &out->svg[slot], &out->note[slot], &err))
            return cli_report_at(&err, where);
        SlBuf t;
        sl_buf_init(&t);
        sl_buf_printf(&t, "%%%s (%s)", run->instrs[src[k]].name, run->instrs[src[k]].opcode);
        SlStr s = sl_buf_str(&t);
        const char *title = sl_arena_strndup(&out->arena, s.ptr, s.len);
        sl_buf_fini(&t);
        graph_slot(out, run->instrs[src[k]].name, title ? title : "");
    }
    return CLI_EXIT_OK;
}

void
cli_html_graphs_fini(CliHtmlGraphs *g)
{
    for (uint32_t k = 0; k < SL_COUNTOF(g->svg); k++) {
        sl_buf_fini(&g->svg[k]);
        sl_buf_fini(&g->note[k]);
    }
    sl_arena_fini(&g->arena);
}

int
cli_html_write(ReportHtmlInput *in, const CliHtmlGraphs *graphs, const char *path)
{
    if (graphs && !in->n_graphs) {
        in->graphs = graphs->g;
        in->n_graphs = graphs->n;
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
        code = cli_html_graphs(vr, new_r.run, new_rep->model.mesh, new_path, &graphs);
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
    .usage = "TRACE.db [--run ID] [-o report.html] [--mesh AXES] [model options] | "
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
        "name. A module too big to draw whole starts collapsed; the neighbourhoods of the\n"
        "busiest source ops are drawn too, and clicking a collapsed box opens the busiest\n"
        "one inside it.\n"
        "Given OLD.db and NEW.db (the latest run of each), the page also shows what grew,\n"
        "what shrank and what is new, per kind and per source op.\n"
        "The model options are report's. The page is written atomically.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 2,
    .run = run,
};
