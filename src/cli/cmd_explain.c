/* cmd_explain.c - `shardlens explain TRACE.db NAME [--run ID]`: why source instruction NAME
 * (or the source of output instruction NAME) was partitioned the way it was. Owns: the wiring
 * only; the account itself is trace_explain()'s. */
#include "cli/cli_trace.h"

static const CliOpt k_opts[] = {
    {CLI_OPT_RUN, 0, "run", "ID", "which run of the trace (default: the latest)", false},
};

static int
run(const CliArgs *a)
{
    int64_t run_id = 0;
    int code = cli_run_id(a, &run_id);
    if (code != CLI_EXIT_OK)
        return code;
    CliRun r;
    code = cli_run_load(&r, a->pos[0], run_id, TRACE_LOAD_ALL);
    if (code == CLI_EXIT_OK) {
        SlError err = {0};
        SlBuf text;
        sl_buf_init(&text);
        const char *name = a->pos[1][0] == '%' ? a->pos[1] + 1 : a->pos[1];
        if (trace_explain(r.run, name, &text, &err) ||
            sl_file_write_atomic("-", text.data ? text.data : "", text.len, &err))
            code = cli_report_at(&err, a->pos[0]);
        sl_buf_fini(&text);
    }
    cli_run_fini(&r);
    return code;
}

const CliCommand cmd_explain = {
    .name = "explain",
    .usage = "TRACE.db NAME [--run ID]",
    .summary = "why an instruction was partitioned the way it was",
    .description =
        "Prints, for source instruction NAME (with or without '%'; an output instruction's\n"
        "name explains its source): its sharding and its operands', the handler and strategy\n"
        "chosen with the alternatives and the numbers compared, each reshard (from -> to,\n"
        "method), each collective it caused with its bytes, and its windowed loop if any.\n"
        "For a dot, each alternative strategy says what it needs that the dot does not have\n"
        "and, when resharding the operands would make it apply, the bytes each device would\n"
        "send for that (ring model, the collectives named), against what the chosen\n"
        "strategy's collectives send; the chosen strategy is not among them.\n"
        "An unknown NAME is an error that lists the closest names.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 2,
    .max_pos = 2,
    .run = run,
};
