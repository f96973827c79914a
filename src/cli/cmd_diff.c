/* cmd_diff.c - `shardlens diff OLD NEW [--old-run ID] [--new-run ID] [--max-increase PCT]
 * [--json]`: compares the traffic of two runs, each a trace database (its latest run, or the
 * one --old-run / --new-run names) or a summary.json, and gates on growth.
 * Owns: telling the two input kinds apart (by the SQLite file header, not the name) and the
 * exit status: 1 when over the budget. Does not own: the comparison (reports/diff.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_trace.h"

enum { OPT_MAX_INCREASE, OPT_JSON, OPT_OLD_RUN, OPT_NEW_RUN };

static const CliOpt k_opts[] = {
    {OPT_MAX_INCREASE, 0, "max-increase", "PCT",
     "exit 1 when bytes sent (all devices, or the busiest) grow more than PCT percent",        false},
    {OPT_JSON,         0, "json",         NULL,  "print the comparison as JSON (for CI bots)", false},
    {OPT_OLD_RUN,      0, "old-run",      "ID",  "OLD is a trace: compare its run ID (default: its latest)", false},
    {OPT_NEW_RUN,      0, "new-run",      "ID",  "NEW is a trace: compare its run ID (default: its latest)", false},
};

/* One side: a report with everything it points to. */
typedef struct Side {
    CliRun run; /* when a trace */
    bool has_run;
    SlBuf text; /* when a summary */
    Report *report;
} Side;

static bool
is_sqlite(const char *path)
{
    static const char magic[] = "SQLite format 3"; /* and a NUL: 16 bytes */
    char head[sizeof(magic)] = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    size_t n = fread(head, 1, sizeof(head), f);
    fclose(f);
    return n == sizeof(head) && memcmp(head, magic, sizeof(magic)) == 0;
}

/* `run_id` 0: the latest run of a trace; a summary takes none. */
static int
load_side(const CliArgs *a, Side *s, const char *path, const char *which, int64_t run_id,
          SlArena *arena)
{
    SlError err = {0};
    if (strcmp(path, "-") != 0 && is_sqlite(path)) {
        int code = cli_run_load(&s->run, path, run_id, 0) /* the report needs no lists */;
        s->has_run = true;
        if (code != CLI_EXIT_OK)
            return code;
        ReportOptions o;
        report_options_init(&o);
        if (report_build(s->run.run, &o, arena, &s->report, &err))
            return cli_report_at(&err, path);
        return CLI_EXIT_OK;
    }
    if (run_id)
        return cli_usage_error(a->cmd, "--%s-run: %s is not a trace database", which, path);
    if (sl_file_read(path, &s->text, &err) ||
        report_parse_json(sl_buf_str(&s->text), strcmp(path, "-") ? path : "<stdin>", arena,
                          &s->report, &err))
        return cli_report_at(&err, path);
    return CLI_EXIT_OK;
}

static void
side_fini(Side *s)
{
    if (s->has_run)
        cli_run_fini(&s->run);
    sl_buf_fini(&s->text);
}

static int
run(const CliArgs *a)
{
    ReportDiffOptions o = {false, 0, a->pos[0], a->pos[1]};
    const char *pct = cli_args_value(a, OPT_MAX_INCREASE);
    if (pct) {
        char *end = NULL;
        errno = 0;
        o.max_increase_pct = strtod(pct, &end);
        if (errno || end == pct || *end || !isfinite(o.max_increase_pct) || o.max_increase_pct < 0)
            return cli_usage_error(a->cmd,
                                   "--max-increase expects a non-negative percentage, "
                                   "got '%s'",
                                   pct);
        o.has_budget = true;
    }
    if (strcmp(a->pos[0], "-") == 0 && strcmp(a->pos[1], "-") == 0)
        return cli_usage_error(a->cmd, "OLD and NEW cannot both be standard input");
    Side old_s, new_s;
    memset(&old_s, 0, sizeof(old_s));
    memset(&new_s, 0, sizeof(new_s));
    sl_buf_init(&old_s.text);
    sl_buf_init(&new_s.text);
    SlArena arena;
    sl_arena_init(&arena);
    int64_t runs[2] = {0, 0};
    const char *run_text[2] = {cli_args_value(a, OPT_OLD_RUN), cli_args_value(a, OPT_NEW_RUN)};
    for (int k = 0; k < 2; k++)
        if (run_text[k] && !cli_parse_count(a->cmd, k ? "--new-run" : "--old-run", run_text[k],
                                            &runs[k]))
            return CLI_EXIT_BAD_INPUT;
    int code = load_side(a, &old_s, a->pos[0], "old", runs[0], &arena);
    if (code == CLI_EXIT_OK)
        code = load_side(a, &new_s, a->pos[1], "new", runs[1], &arena);
    if (code == CLI_EXIT_OK && !report_same_module(old_s.report, new_s.report))
        fprintf(stderr,
                "shardlens diff: warning: OLD and NEW are different modules: %s (input %s) and "
                "%s (input %s)\n",
                old_s.report->module, old_s.report->input_hash ? old_s.report->input_hash : "?",
                new_s.report->module, new_s.report->input_hash ? new_s.report->input_hash : "?");
    if (code == CLI_EXIT_OK) {
        SlError err = {0};
        SlBuf out;
        bool over = false;
        sl_buf_init(&out);
        if (report_diff(old_s.report, new_s.report, &o, cli_args_has(a, OPT_JSON), &out, &over,
                        &err) ||
            sl_file_write_atomic("-", out.data ? out.data : "", out.len, &err))
            code = cli_report_at(&err, "-");
        else if (over)
            code = CLI_EXIT_CHECK_FAILED;
        sl_buf_fini(&out);
    }
    side_fini(&old_s);
    side_fini(&new_s);
    sl_arena_fini(&arena);
    return code;
}

const CliCommand cmd_diff = {
    .name = "diff",
    .usage = "OLD NEW [--old-run ID] [--new-run ID] [--max-increase PCT] [--json]",
    .summary = "compare two traces or summaries; gate on traffic growth",
    .description =
        "Compares the communication of OLD and NEW, each a trace database (its latest run, or\n"
        "run ID with --old-run / --new-run: OLD and NEW may be one file) or a summary.json\n"
        "from report --json / analyze (checked against schema/summary.schema.json: an\n"
        "invalid one is an error, exit 2): totals, the busiest device, per collective kind,\n"
        "and per source op matched by name and op_name (added, removed, changed). Bytes are\n"
        "per-execution bytes times trip counts, so traffic inside loops counts every\n"
        "iteration. OLD and NEW of different modules (by name) get a warning.\n"
        "--max-increase PCT fails (exit 1) when the bytes sent summed over devices, or the\n"
        "bytes the busiest device sends and receives, grow by more than PCT percent; growing\n"
        "by exactly PCT passes, and growing from zero always fails. A collective whose trip\n"
        "count is unknown cannot be bounded: when it is new, or its bytes per execution grow,\n"
        "that fails any budget. --json prints the same comparison as JSON.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 2,
    .max_pos = 2,
    .run = run,
};
