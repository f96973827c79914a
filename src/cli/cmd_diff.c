/* cmd_diff.c - `shardlens diff OLD NEW [--max-increase PCT] [--json]`: compares the traffic of
 * two runs, each a trace database (its latest run) or a summary.json, and gates on growth.
 * Owns: telling the two input kinds apart (by the SQLite file header, not the name) and the
 * exit status: 1 when over the budget. Does not own: the comparison (reports/diff.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_trace.h"

enum { OPT_MAX_INCREASE, OPT_JSON };

static const CliOpt k_opts[] = {
    {OPT_MAX_INCREASE, 0, "max-increase", "PCT",
     "exit 1 when bytes sent (all devices, or the busiest) grow more than PCT percent",        false},
    {OPT_JSON,         0, "json",         NULL,  "print the comparison as JSON (for CI bots)", false},
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

static int
load_side(Side *s, const char *path, SlArena *arena)
{
    SlError err = {0};
    if (strcmp(path, "-") != 0 && is_sqlite(path)) {
        int code = cli_run_load(&s->run, path, 0, 0) /* the report needs no lists */;
        s->has_run = true;
        if (code != CLI_EXIT_OK)
            return code;
        ReportOptions o;
        report_options_init(&o);
        if (report_build(s->run.run, &o, arena, &s->report, &err))
            return cli_report_at(&err, path);
        return CLI_EXIT_OK;
    }
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
    int code = load_side(&old_s, a->pos[0], &arena);
    if (code == CLI_EXIT_OK)
        code = load_side(&new_s, a->pos[1], &arena);
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
    .usage = "OLD NEW [--max-increase PCT] [--json]",
    .summary = "compare two traces or summaries; gate on traffic growth",
    .description =
        "Compares the communication of OLD and NEW, each a trace database (its latest run)\n"
        "or a summary.json from report --json / analyze: totals, the busiest device, per\n"
        "collective kind, and per source op matched by name and op_name (added, removed,\n"
        "changed). Bytes have known trip counts applied.\n"
        "--max-increase PCT fails (exit 1) when the bytes sent summed over devices, or the\n"
        "bytes the busiest device sends and receives, grow by more than PCT percent; growing\n"
        "by exactly PCT passes, and growing from zero always fails. --json prints the same\n"
        "comparison as JSON.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 2,
    .max_pos = 2,
    .run = run,
};
