/* cmd_analyze.c - `shardlens analyze IN.hlo [-n N] --out DIR`: partition with a trace, report
 * and draw, all into DIR: partitioned.hlo, trace.db, summary.json, report.txt, and before.svg /
 * after.svg when the build has viz/. Owns: the directory layout and the order of the steps.
 * Invariant: every file is written atomically, and trace.db holds exactly this run (it is built
 * beside under a temporary name and renamed over any older one). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_trace.h"
#include "propagate/prop.h"

#include "cli/cli_html.h"
#include "viz/viz.h"

enum { OPT_N, OPT_OUT, OPT_SET, OPT_TRIP_COUNT, OPT_NO_PROPAGATE };

static const CliOpt k_opts[] = {
    {OPT_N,   'n', "num-partitions", "N",         "partition for N devices (default: the header's, else the shardings')",   false},
    {OPT_OUT, 0,   "out",            "DIR",       "directory for every output (created when missing)", false},
    {OPT_SET, 0,   "set",            "KEY=VALUE", "set a partitioner option by its XLA name",          true },
    {OPT_TRIP_COUNT, 0, "trip-count", "NAME=N",   "while NAME of the input runs N times",              true },
    {OPT_NO_PROPAGATE, 0, "no-propagate", NULL, "partition unannotated instructions as replicated (no sharding propagation first)", false},
    CLI_REPORT_MODEL_OPTS,
};

/* mkdir -p */
static SlStatus
make_dir(const char *dir, SlError *err)
{
    SlSrcLoc loc = {dir, 0, 0};
    size_t n = strlen(dir);
    char *p = malloc(n + 1);
    if (!p)
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    memcpy(p, dir, n + 1);
    SlStatus st = SL_OK;
    for (size_t k = 1; k <= n && !st; k++) {
        if (p[k] != '/' && p[k] != '\0')
            continue;
        char keep = p[k];
        p[k] = '\0';
        struct stat sb;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            st = sl_fail(err, SL_ERR_IO, loc, "cannot create directory: %s", strerror(errno));
        else if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
            st = sl_fail(err, SL_ERR_IO, loc, "not a directory: %s", p);
        p[k] = keep;
    }
    free(p);
    return st;
}

typedef struct Paths {
    char hlo[4096], trace[4096], trace_tmp[4096], json[4096], text[4096], before[4096], after[4096],
        html[4096];
    char trace_journal[4200], tmp_prefix[4096];
} Paths;

static bool
join(char *out, size_t n, const char *dir, const char *name)
{
    size_t len = strlen(dir);
    const char *sep = len && dir[len - 1] == '/' ? "" : "/";
    int w = snprintf(out, n, "%s%s%s", dir, sep, name);
    return w > 0 && (size_t)w < n;
}

static bool
make_paths(Paths *p, const char *dir)
{
    char tmp[64];
    snprintf(tmp, sizeof(tmp), ".trace.db.tmp.%ld", (long)getpid());
    snprintf(p->trace_journal, sizeof(p->trace_journal), "%s", "");
    return join(p->tmp_prefix, sizeof(p->tmp_prefix), dir, ".trace.db.tmp.") &&
           join(p->hlo, sizeof(p->hlo), dir, "partitioned.hlo") &&
           join(p->trace, sizeof(p->trace), dir, "trace.db") &&
           join(p->trace_tmp, sizeof(p->trace_tmp), dir, tmp) &&
           join(p->json, sizeof(p->json), dir, "summary.json") &&
           join(p->text, sizeof(p->text), dir, "report.txt") &&
           join(p->before, sizeof(p->before), dir, "before.svg") &&
           join(p->after, sizeof(p->after), dir, "after.svg") &&
           join(p->html, sizeof(p->html), dir, "report.html");
}

/* Removes a temporary database and the journal files SQLite may have left beside it. */
static void
remove_db(const char *path)
{
    static const char *const suffixes[] = {"", "-journal", "-wal", "-shm"};
    char p[4200];
    for (size_t k = 0; k < SL_COUNTOF(suffixes); k++) {
        snprintf(p, sizeof(p), "%s%s", path, suffixes[k]);
        (void)remove(p);
    }
}

static int
write_file(const char *path, const SlBuf *b)
{
    SlError err = {0};
    if (sl_file_write_atomic(path, b->data ? b->data : "", b->len, &err))
        return cli_report_at(&err, path);
    printf("  %s\n", path);
    return CLI_EXIT_OK;
}

/* before.svg, after.svg and report.html, from one set of layouts. */
static int
draw(const TraceRun *run, const Report *rep, const ReportOptions *ro, const Paths *p)
{
    /* One renderer for every picture: graphviz must not be set up twice in one process. */
    SlError err = {0};
    VizRenderer *r = NULL;
    if (viz_renderer_new(&r, &err))
        return cli_report_at(&err, p->after);
    CliHtmlGraphs g;
    int code = cli_html_graphs(r, run, ro->mesh, 0, p->trace, &g);
    const char *paths[] = {p->before, p->after};
    for (size_t k = 0; k < SL_COUNTOF(paths) && code == CLI_EXIT_OK; k++) {
        if (sl_file_write_atomic(paths[k], g.svg[k].data, g.svg[k].len, &err))
            code = cli_report_at(&err, paths[k]);
        else if (g.note[k].len)
            printf("  %s  (%.*s)\n", paths[k], (int)g.note[k].len, g.note[k].data);
        else
            printf("  %s\n", paths[k]);
    }
    if (code == CLI_EXIT_OK) {
        ReportHtmlInput in = {.run = run, .rep = rep};
        code = cli_html_write(&in, &g, p->html);
    }
    if (code == CLI_EXIT_OK)
        printf("  %s\n", p->html);
    cli_html_graphs_fini(&g);
    viz_renderer_free(r);
    return code;
}

/* Report, summary and diagrams from the freshly written trace. */
static int
report_all(const Paths *p, const ReportOptions *ro)
{
    CliRun r;
    int code = cli_run_load(&r, p->trace, 0, TRACE_LOAD_ALL);
    SlArena arena;
    sl_arena_init(&arena);
    Report *rep = NULL;
    SlError err = {0};
    SlBuf json, text;
    sl_buf_init(&json);
    sl_buf_init(&text);
    if (code == CLI_EXIT_OK && report_build(r.run, ro, &arena, &rep, &err))
        code = cli_report_at(&err, p->trace);
    if (code == CLI_EXIT_OK && report_write_json(rep, &json, &err))
        code = cli_report_at(&err, p->json);
    if (code == CLI_EXIT_OK)
        code = write_file(p->json, &json);
    if (code == CLI_EXIT_OK) {
        report_print_text(rep, &text);
        code = write_file(p->text, &text);
    }
    if (code == CLI_EXIT_OK)
        code = draw(r.run, rep, ro, p);
    if (code == CLI_EXIT_OK) {
        sl_buf_clear(&text);
        report_print_summary_line(rep, &text);
        printf("%.*s", (int)text.len, text.data ? text.data : "");
        sl_buf_clear(&text);
        report_print_warning_lines(rep, &text); /* one line per kind; report.txt has more */
        fflush(stdout);
        for (size_t i = 0; i < text.len;) {
            size_t j = i;
            while (j < text.len && text.data[j] != '\n')
                j++;
            fprintf(stderr, "analyze: %.*s\n", (int)(j - i), text.data + i);
            i = j + 1;
        }
    }
    sl_buf_fini(&json);
    sl_buf_fini(&text);
    sl_arena_fini(&arena);
    cli_run_fini(&r);
    return code;
}

static int
run(const CliArgs *a)
{
    const char *dir = cli_args_value(a, OPT_OUT);
    if (!dir)
        return cli_usage_error(a->cmd, "--out DIR is required");
    ReportOptions ro;
    Paths p;
    int code = cli_report_options(a, &ro);
    if (code != CLI_EXIT_OK)
        return code;
    if (!make_paths(&p, dir))
        return cli_usage_error(a->cmd, "--out: path too long");
    CliInput in;
    SlError err = {0};
    SpmdOptions o;
    SlBuf hlo;
    sl_buf_init(&hlo);
    CliPropagation prop;
    prop.ran = false;
    if (cli_input_load_timed(&in, a->pos[0], a->phases, &err) || cli_input_check(&in, &err))
        code = cli_report(&err, &in);
    else if ((code = cli_propagate_first(a, OPT_SET, !cli_args_has(a, OPT_NO_PROPAGATE), &in,
                                         &prop)) == CLI_EXIT_OK)
        code = cli_spmd_options(a, OPT_N, OPT_SET, &in, &o);
    o.input_propagated = prop.ran;
    TraceTripCount *trips = NULL;
    uint32_t n_trips = 0;
    if (code == CLI_EXIT_OK)
        code = cli_trip_counts(a, OPT_TRIP_COUNT, in.module, &in.arena, &trips, &n_trips);
    if (code == CLI_EXIT_OK && make_dir(dir, &err))
        code = cli_report(&err, NULL);
    if (code == CLI_EXIT_OK) {
        /* Killed runs' temporaries are swept; ours go if this run is interrupted. */
        sl_tmp_sweep(p.tmp_prefix);
        snprintf(p.trace_journal, sizeof(p.trace_journal), "%s-journal", p.trace_tmp);
        sl_tmp_register(p.trace_tmp);
        sl_tmp_register(p.trace_journal);
        remove_db(p.trace_tmp);
        code = cli_partition_traced(&in, &o, p.trace_tmp, trips, n_trips, &prop, &hlo, NULL);
    }
    if (code == CLI_EXIT_OK) {
        printf("analyze: %s on %lld devices, into %s\n", in.display, (long long)o.num_partitions,
               dir);
        code = write_file(p.hlo, &hlo);
    }
    if (code == CLI_EXIT_OK && rename(p.trace_tmp, p.trace) != 0) {
        SlSrcLoc loc = {p.trace, 0, 0};
        sl_fail(&err, SL_ERR_IO, loc, "cannot write: %s", strerror(errno));
        code = cli_report(&err, NULL);
    } else if (code == CLI_EXIT_OK) {
        printf("  %s\n", p.trace);
    }
    remove_db(p.trace_tmp);
    sl_tmp_unregister(p.trace_tmp);
    sl_tmp_unregister(p.trace_journal);
    if (code == CLI_EXIT_OK)
        code = report_all(&p, &ro);
    sl_buf_fini(&hlo);
    cli_input_fini(&in);
    return code;
}

const CliCommand cmd_analyze = {
    .name = "analyze",
    .usage = "IN.hlo [-n|--num-partitions N] --out DIR [--set KEY=VALUE]... [--trip-count NAME=N]... "
             "[--link-gbps G] [--latency-us L] [--mesh AXES] [--devices-per-node K --inter-node-gbps G] "
             "[--top K] [--no-propagate]",
    .summary = "partition, trace, report and draw into one directory",
    .description =
        "Partitions IN.hlo with a trace and writes into DIR (created when missing):\n"
        "  partitioned.hlo  the per-device module (as partition -o writes it)\n"
        "  trace.db         the trace of this run alone (as partition --trace records it)\n"
        "  summary.json     the report as JSON (as report --json writes it)\n"
        "  report.txt       the report for people (as report prints it)\n"
        "  before.svg       the input graph, nodes coloured by sharding (when built with viz)\n"
        "  after.svg        the partitioned graph, collectives highlighted (when built with viz)\n"
        "  report.html      the interactive report (as `shardlens html` writes it)\n"
        "Each file is written atomically; the paths are printed as they are written, then\n"
        "the totals. The model options and --top are report's. Warnings (input without\n"
        "shardings, input already partitioned, custom calls partitioned by fallback, full\n"
        "rematerializations, opcodes without a handler) go to standard error, one line per\n"
        "kind; report.txt lists the first few of each and summary.json all of them.\n"
        CLI_TRIP_COUNT_HELP CLI_PROPAGATE_HELP,
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 1,
    .run = run,
};
