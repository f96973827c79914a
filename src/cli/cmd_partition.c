/* cmd_partition.c - `shardlens partition IN.hlo [-n N] [-o OUT] [--trace DB] [--set K=V]...`.
 * Owns: the partition count rule (-n, else the header; an error when neither), option
 * wiring, and the order parse -> check -> shardings fit N -> partition -> check the result ->
 * print -> atomic write. Does not own: partitioning (src/spmd). Invariant: nothing is written
 * unless every step succeeded. */
#include "cli/cli_util.h"
#include "hlo/hlo.h"
#include "sharding/shd.h"
#include "spmd/spmd.h"
#include "trace/trace.h"

enum { OPT_NUM_PARTITIONS, OPT_OUTPUT, OPT_TRACE, OPT_SET };

static const CliOpt k_opts[] = {
    {OPT_NUM_PARTITIONS, 'n', "num-partitions", "N",
     "partition for N devices (default: the header's num_partitions=)",                                             false},
    {OPT_OUTPUT,         'o', "output",         "OUT.hlo",   "write the partitioned module here (default: stdout)",
     false                                                                                                               },
    {OPT_TRACE,          0,   "trace",          "TRACE.db",  "record the decisions in a SQLite trace (not yet)",    false},
    {OPT_SET,            0,   "set",            "KEY=VALUE", "set a partitioner option by its XLA name",            true },
};

static void
help_extra(FILE *out)
{
    SpmdOptions o;
    SlBuf b;
    spmd_options_init(&o);
    sl_buf_init(&b);
    spmd_options_print(&o, &b);
    fputs("\npartitioner options for --set, with their defaults (XLA's SpmdPartitionerOptions):\n",
          out);
    SlStr s = sl_buf_str(&b);
    for (size_t i = 0; i < s.len;) {
        size_t j = i;
        while (j < s.len && s.ptr[j] != '\n')
            j++;
        fprintf(out, "  %.*s\n", (int)(j - i), s.ptr + i);
        i = j + 1;
    }
    sl_buf_fini(&b);
}

static int
build_options(const CliArgs *a, const IrModule *m, SpmdOptions *o)
{
    spmd_options_init(o);
    const char *n_text = cli_args_value(a, OPT_NUM_PARTITIONS);
    int64_t n = 0;
    if (n_text && !cli_parse_count(a->cmd, "--num-partitions", n_text, &n))
        return CLI_EXIT_BAD_INPUT;
    if (!n && ir_module_find_header(m, "num_partitions"))
        n = ir_module_num_partitions(m);
    if (n < 1)
        return cli_usage_error(a->cmd, "no partition count: pass -n N or put num_partitions=N "
                                       "in the module header");
    for (uint32_t i = 0; i < a->n_opts; i++) {
        if (a->opts[i].opt->id != OPT_SET)
            continue;
        SlError err = {0};
        if (spmd_options_set(o, sl_str(a->opts[i].value), &err))
            return cli_usage_error(a->cmd, "--set %s: %s", a->opts[i].value, err.msg);
    }
    o->num_partitions = n;
    return CLI_EXIT_OK;
}

/* Partitions the loaded module and writes the result; returns the exit code. */
static int
partition_and_write(const CliArgs *a, CliInput *in, const SpmdOptions *o)
{
    SlError err = {0};
    SlArena out_arena;
    IrModule *out = NULL;
    int code;
    sl_arena_init(&out_arena);
    if (cli_check_shardings(in->module, in->display, o->num_partitions, &err)) {
        code = cli_report(&err, in);
    } else if (spmd_partition(in->module, o, trace_null_sink(), &out_arena, &out, &err)) {
        code = cli_report(&err, in);
    } else if (ir_module_check(out, "<partitioned>", &err)) {
        /* Our own output must be consistent: a failure here is a partitioner bug. */
        err.status = SL_ERR_INTERNAL;
        code = cli_report(&err, in);
    } else {
        SlBuf text;
        sl_buf_init(&text);
        hlo_print_module(out, &text);
        code = cli_write_output(cli_args_value(a, OPT_OUTPUT), &text, in);
        sl_buf_fini(&text);
    }
    if (out)
        ir_module_fini(out);
    sl_arena_fini(&out_arena);
    return code;
}

static int
run(const CliArgs *a)
{
    if (cli_args_has(a, OPT_TRACE)) {
        fprintf(stderr, "shardlens partition: error: --trace is not yet supported in this "
                        "version; run without it\n");
        return CLI_EXIT_UNSUPPORTED;
    }
    CliInput in;
    SlError err = {0};
    SpmdOptions o;
    int code;
    if (cli_input_load(&in, a->pos[0], &err) || ir_module_check(in.module, in.display, &err))
        code = cli_report(&err, &in);
    else if ((code = build_options(a, in.module, &o)) == CLI_EXIT_OK)
        code = partition_and_write(a, &in, &o);
    cli_input_fini(&in);
    return code;
}

const CliCommand cmd_partition = {
    .name = "partition",
    .usage = "IN.hlo [-n|--num-partitions N] [-o|--output OUT.hlo] [--trace TRACE.db] "
             "[--set KEY=VALUE]...",
    .summary = "partition a sharded module into its per-device module (GSPMD)",
    .description =
        "Parses and checks IN.hlo ('-' for standard input), checks that every sharding fits\n"
        "N devices, and partitions the module the way XLA's SPMD partitioner does: local\n"
        "shapes, collectives with their replica groups, the same dot strategies. Prints the\n"
        "partitioned module in HLO text; -o writes it atomically (no file on failure).\n"
        "N is -n, else the header's num_partitions=; giving neither is an error.\n"
        "Unknown --set names are errors (exit 2); constructs the partitioner does not\n"
        "support are named in the message (exit 3).\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 1,
    .run = run,
    .help_extra = help_extra,
};
