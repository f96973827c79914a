/* cmd_viz.c - `shardlens viz TRACE.db [--run ID] [--before B.svg] [--after A.svg]
 * [--pair NAME [-o P.svg]] [--focus NAME] [--depth K] [--format svg|png|dot] [--mesh AXES]
 * [--max-nodes N]`. Owns: option wiring, default file names and the format rule (--format,
 * else the file's extension, else svg). Does not own: diagrams (viz/). Invariant: every file
 * is written atomically; a failure leaves no partial file behind. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "trace/trace_db.h"
#include "trace/trace_run.h"
#include "viz/viz.h"

enum {
    OPT_RUN,
    OPT_BEFORE,
    OPT_AFTER,
    OPT_PAIR,
    OPT_OUTPUT,
    OPT_FOCUS,
    OPT_DEPTH,
    OPT_FORMAT,
    OPT_MESH,
    OPT_MAX_NODES,
    OPT_BUDGET
};

static const CliOpt k_opts[] = {
    {OPT_RUN,       0,   "run",       "ID",          "which run of the trace (default: the last)",          false},
    {OPT_BEFORE,    0,   "before",    "B.svg",       "diagram of the input graph",                          false},
    {OPT_AFTER,     0,   "after",     "A.svg",       "diagram of the partitioned graph",                    false},
    {OPT_PAIR,      0,   "pair",      "NAME",        "one source op before and after, side by side",        false},
    {OPT_OUTPUT,    'o', "output",    "P.svg",       "where --pair writes (default: pair.svg)",             false},
    {OPT_FOCUS,     0,   "focus",     "NAME",        "only the neighbourhood of instruction NAME",          false},
    {OPT_DEPTH,     0,   "depth",     "K",           "neighbourhood radius for --focus (default 2)",        false},
    {OPT_FORMAT,    0,   "format",    "svg|png|dot", "output format (default: from the file name, or svg)",
     false                                                                                                       },
    {OPT_MESH,      0,   "mesh",      "AXES",        "name mesh axes in labels: data=2,model=4",            false},
    {OPT_MAX_NODES, 0,   "max-nodes", "N",           "collapse whole graphs above N instructions (default 400)",
     false                                                                                                       },
    {OPT_BUDGET,    0,   "layout-budget", "U",       "most nodes + edges given to dot (default 1000; 0: none)",
     false                                                                                                       },
};

static bool
parse_format(const char *s, VizFormat *f)
{
    if (!strcmp(s, "svg"))
        *f = VIZ_SVG;
    else if (!strcmp(s, "png"))
        *f = VIZ_PNG;
    else if (!strcmp(s, "dot") || !strcmp(s, "gv"))
        *f = VIZ_DOT;
    else
        return false;
    return true;
}

/* --format, else the extension of `path`, else svg. */
static VizFormat
format_for(const char *given, const char *path)
{
    VizFormat f = VIZ_SVG;
    if (given && parse_format(given, &f))
        return f;
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (dot && !strchr(dot, '/') && parse_format(dot + 1, &f))
        return f;
    return VIZ_SVG;
}

static int
report_at(SlError *err, const char *path)
{
    if (!err->loc.path)
        err->loc.path = path;
    return cli_report(err, NULL);
}

typedef struct Job {
    VizView view;
    const char *path;
} Job;

static int
draw(VizRenderer *r, const TraceRun *run, const VizOptions *base, const char *format, Job job)
{
    VizOptions o = *base;
    o.view = job.view;
    o.format = format_for(format, job.path);
    SlBuf note;
    SlError err = {0};
    sl_buf_init(&note);
    SlStatus st = viz_render_with(r, run, &o, job.path, &note, &err);
    if (note.len)
        fprintf(stderr, "shardlens viz: note: %s\n", note.data);
    sl_buf_fini(&note);
    if (st == SL_ERR_INVALID && !err.loc.path) { /* a name or --mesh: the user's input */
        fprintf(stderr, "shardlens viz: error: %s\n", err.msg);
        return cli_exit_code(st);
    }
    return st ? report_at(&err, job.path) : CLI_EXIT_OK;
}

static int
options(const CliArgs *a, VizOptions *o, int64_t *run_id)
{
    viz_options_init(o);
    const char *v;
    int64_t n = 0;
    *run_id = 0;
    if ((v = cli_args_value(a, OPT_RUN)) && !cli_parse_count(a->cmd, "--run", v, run_id))
        return CLI_EXIT_BAD_INPUT;
    if ((v = cli_args_value(a, OPT_DEPTH))) {
        if (!strcmp(v, "0"))
            n = 0;
        else if (!cli_parse_count(a->cmd, "--depth", v, &n))
            return CLI_EXIT_BAD_INPUT;
        if (n > 1000)
            return cli_usage_error(a->cmd, "--depth %s is too deep (at most 1000)", v);
        o->depth = (int)n;
    }
    if ((v = cli_args_value(a, OPT_MAX_NODES))) {
        if (!cli_parse_count(a->cmd, "--max-nodes", v, &n))
            return CLI_EXIT_BAD_INPUT;
        o->max_nodes = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    }
    if ((v = cli_args_value(a, OPT_BUDGET))) {
        if (!strcmp(v, "0"))
            n = 0;
        else if (!cli_parse_count(a->cmd, "--layout-budget", v, &n))
            return CLI_EXIT_BAD_INPUT;
        o->budget = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    }
    o->progress = true;
    VizFormat f;
    if ((v = cli_args_value(a, OPT_FORMAT)) && !parse_format(v, &f))
        return cli_usage_error(a->cmd, "--format expects svg, png or dot, got '%s'", v);
    if (cli_args_has(a, OPT_DEPTH) && !cli_args_has(a, OPT_FOCUS) && !cli_args_has(a, OPT_PAIR))
        return cli_usage_error(a->cmd, "--depth needs --focus NAME");
    if (cli_args_has(a, OPT_OUTPUT) && !cli_args_has(a, OPT_PAIR))
        return cli_usage_error(a->cmd, "--output is where --pair writes; use --before/--after");
    o->focus = cli_args_value(a, OPT_FOCUS);
    o->mesh = cli_args_value(a, OPT_MESH);
    return CLI_EXIT_OK;
}

static int
run(const CliArgs *a)
{
    VizOptions o;
    int64_t run_id = 0;
    int code = options(a, &o, &run_id);
    if (code)
        return code;
    const char *format = cli_args_value(a, OPT_FORMAT), *path = a->pos[0];
    VizFormat f = format_for(format, NULL);
    const char *ext = f == VIZ_PNG ? "png" : f == VIZ_DOT ? "dot" : "svg";
    char before_default[16], after_default[16], pair_default[16];
    snprintf(before_default, sizeof(before_default), "before.%s", ext);
    snprintf(after_default, sizeof(after_default), "after.%s", ext);
    snprintf(pair_default, sizeof(pair_default), "pair.%s", ext);

    Job jobs[3];
    uint32_t n_jobs = 0;
    const char *b = cli_args_value(a, OPT_BEFORE), *af = cli_args_value(a, OPT_AFTER);
    const char *pair = cli_args_value(a, OPT_PAIR);
    if (b)
        jobs[n_jobs++] = (Job){VIZ_BEFORE, b};
    if (af)
        jobs[n_jobs++] = (Job){VIZ_AFTER, af};
    if (pair) {
        const char *out = cli_args_value(a, OPT_OUTPUT);
        jobs[n_jobs++] = (Job){VIZ_PAIR, out ? out : pair_default};
    }
    if (!n_jobs) { /* neither asked for: both views, beside the current directory */
        jobs[n_jobs++] = (Job){VIZ_BEFORE, before_default};
        jobs[n_jobs++] = (Job){VIZ_AFTER, after_default};
    }

    SlError err = {0};
    TraceDb *db = NULL;
    SlArena arena;
    const TraceRun *tr = NULL;
    VizRenderer *r = NULL; /* one graphviz context for every picture (viz.h) */
    sl_arena_init(&arena);
    if (trace_db_open(path, TRACE_DB_READ, &db, &err) ||
        trace_run_load(db, run_id, &arena, &tr, &err)) {
        code = report_at(&err, path);
    } else if (viz_renderer_new(&r, &err)) {
        code = report_at(&err, NULL);
    } else {
        for (uint32_t k = 0; k < n_jobs && code == CLI_EXIT_OK; k++) {
            VizOptions jo = o;
            if (jobs[k].view == VIZ_PAIR)
                jo.focus = pair;
            code = draw(r, tr, &jo, format, jobs[k]);
        }
    }
    viz_renderer_free(r);
    trace_db_close(db);
    sl_arena_fini(&arena);
    return code;
}

const CliCommand cmd_viz = {
    .name = "viz",
    .usage = "TRACE.db [--run ID] [--before B.svg] [--after A.svg] [--focus NAME] [--depth K] "
             "[--pair NAME [-o P.svg]] [--format svg|png|dot] [--mesh AXES] [--max-nodes N] "
             "[--layout-budget U]",
    .summary = "before/after Graphviz diagrams from a trace",
    .description =
        "Renders the input graph (--before: every instruction with its opcode, shape and\n"
        "sharding, coloured by sharding) and the partitioned graph (--after: local shapes,\n"
        "collectives with their groups and bytes per device, edges labelled with bytes,\n"
        "loops as clusters, emitted instructions grouped under their source instruction)\n"
        "of a traced run. With neither, writes before.svg and after.svg here.\n"
        "--pair NAME draws one source instruction before and after partitioning.\n"
        "--focus NAME draws the instructions within --depth operand/user hops of NAME (a\n"
        "source name selects everything emitted for it in the after view). Without\n"
        "--focus, a graph above --max-nodes instructions is collapsed into the first view\n"
        "of the html page's group tree (called computations, op_name prefixes, opcodes,\n"
        "runs of consecutive boxes; 10 to 60 boxes and ops): one box per group with its\n"
        "instructions, collectives and bytes sent, the operand edges between two boxes\n"
        "merged into one (\"3 edges, 1.50 MiB\"), and a note says so.\n"
        "--layout-budget U bounds dot's work: a view whose nodes plus edges exceed U is\n"
        "collapsed the same way (a --focus neighbourhood is cut instead), and the note\n"
        "says so. Past 60 edges, edge labels are placed after the layout (xlabels).\n"
        "A layout estimated at a second or more is announced on stderr.\n"
        "The format is --format, else the file's extension (.svg, .png, .dot), else svg;\n"
        "dot text is deterministic. Files are written atomically.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 1,
    .run = run,
};
