/* cmd_report.c - `shardlens report TRACE.db [--run ID] [--json OUT.json] [model options]`.
 * Owns: wiring a recorded run to reports/: the text report on stdout, summary.json written
 * atomically. Does not own: any figure (reports/). */
#include <string.h>

#include "cli/cli_trace.h"

enum { OPT_JSON };

static const CliOpt k_opts[] = {
    {CLI_OPT_RUN, 0, "run",  "ID",       "which run of the trace (default: the latest)",      false},
    {OPT_JSON,    0, "json", "OUT.json", "also write summary.json ('-': only it, on stdout)", false},
    CLI_REPORT_MODEL_OPTS,
};

/* Builds the report of `r` and writes what was asked; returns the exit code. */
static int
write_report(const CliArgs *a, const CliRun *r, const ReportOptions *o)
{
    SlArena arena;
    Report *rep = NULL;
    SlError err = {0};
    SlBuf text;
    int code = CLI_EXIT_OK;
    const char *json = cli_args_value(a, OPT_JSON);
    sl_arena_init(&arena);
    sl_buf_init(&text);
    if (report_build(r->run, o, &arena, &rep, &err)) {
        code = err.status == SL_ERR_INVALID ? cli_usage_error(a->cmd, "%s", err.msg)
                                            : cli_report_at(&err, a->pos[0]);
    } else if (json && (report_write_json(rep, &text, &err) ||
                        sl_file_write_atomic(json, text.data, text.len, &err))) {
        code = cli_report_at(&err, json);
    } else if (!json || strcmp(json, "-") != 0) {
        sl_buf_clear(&text);
        report_print_text(rep, &text);
        if (sl_file_write_atomic("-", text.data ? text.data : "", text.len, &err))
            code = cli_report_at(&err, "-");
    }
    sl_buf_fini(&text);
    sl_arena_fini(&arena);
    return code;
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
    CliRun r;
    code = cli_run_load(&r, a->pos[0], run_id, 0) /* the report needs no lists */;
    if (code == CLI_EXIT_OK)
        code = write_report(a, &r, &o);
    cli_run_fini(&r);
    return code;
}

const CliCommand cmd_report = {
    .name = "report",
    .usage = "TRACE.db [--run ID] [--json OUT.json] [--link-gbps G] [--latency-us L] "
             "[--mesh AXES] [--devices-per-node K --inter-node-gbps G] [--top K]",
    .summary = "per-device traffic and communication time from a trace",
    .description =
        "Reads a run of a trace (partition --trace) and prints the bytes every collective\n"
        "makes each device send and receive under the ring model (nccl-tests conventions),\n"
        "trip counts of enclosing loops applied: totals, per collective kind, per device, the\n"
        "top source ops, per op_name, every collective, windowed loops. Collectives in loops\n"
        "whose trip count is unknown are counted apart, never as if they ran once.\n"
        "Time per collective: latency * steps + bytes each device sends / bandwidth, the\n"
        "bandwidth read as nccl-tests bus bandwidth; with --devices-per-node, a group with\n"
        "devices on two nodes runs at --inter-node-gbps. --mesh names axes over the device\n"
        "order (last axis fastest) so that each collective is said to run over its axes.\n"
        "--json writes summary.json (schema/summary.schema.json), deterministic byte for byte.\n"
        "Bytes and times are printed with three significant digits (B/KiB/MiB/GiB, us/ms/s);\n"
        "summary.json keeps the exact figures. Devices with identical traffic share a row.\n"
        "The collectives table lists the --top K (default 10) costliest, by bytes sent over\n"
        "the run, as do the source-op and op_name tables. The warnings section counts the\n"
        "partitioner's warnings by kind and names the first few of each.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 1,
    .run = run,
};
