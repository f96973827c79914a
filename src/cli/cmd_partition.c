/* cmd_partition.c - `shardlens partition IN.hlo [-n N] [-o OUT] [--trace DB] [--set K=V]...`.
 * Owns: the partition count rule (-n, else the header; an error when neither), option
 * wiring, and the order parse -> check -> shardings fit N -> partition -> check the result ->
 * print -> atomic write. Does not own: partitioning (src/spmd). Invariant: nothing is written
 * unless every step succeeded. */
#include "cli/cli_trace.h"
#include "cli/cli_util.h"
#include "propagate/prop.h"
#include "hlo/hlo.h"
#include "sharding/shd.h"
#include "spmd/spmd.h"
#include "trace/trace.h"

enum { OPT_NUM_PARTITIONS, OPT_OUTPUT, OPT_TRACE, OPT_SET, OPT_TRIP_COUNT, OPT_NO_PROPAGATE };

static const CliOpt k_opts[] = {
    {OPT_NUM_PARTITIONS, 'n', "num-partitions", "N",
     "partition for N devices (default: the header's num_partitions=, else the shardings')",                                             false},
    {OPT_OUTPUT,         'o', "output",         "OUT.hlo",   "write the partitioned module here (default: stdout)",
     false                                                                                                               },
    {OPT_TRACE,          0,   "trace",          "TRACE.db",  "append this run to a SQLite trace",    false},
    {OPT_SET,            0,   "set",            "KEY=VALUE", "set a partitioner option by its XLA name",            true },
    {OPT_TRIP_COUNT,     0,   "trip-count",     "NAME=N",    "while NAME of the input runs N times (for the trace)", true },
    {OPT_NO_PROPAGATE,   0,   "no-propagate",   NULL,        "partition unannotated instructions as replicated (no sharding propagation first)", false},
};

static void
help_extra(FILE *out)
{
    SpmdOptions o;
    SlBuf b;
    spmd_options_init(&o);
    sl_buf_init(&b);
    spmd_options_print_modelled(&o, &b);
    fputs("\npartitioner options for --set, with their defaults (XLA's SpmdPartitionerOptions):\n",
          out);
    cli_print_indented(out, sl_buf_str(&b));
    fputs("remove_dead_code is shardlens's own: the switch of the whole clean-up that ends\n"
          "partitioning as in XLA (dead code, tuple simplification, dead code, CSE); false keeps\n"
          "everything the handlers emitted. XLA's other option names are accepted and have no\n"
          "effect (the trace records them).\n",
          out);
    sl_buf_fini(&b);
}

static int
run(const CliArgs *a)
{
    CliInput in;
    SlError err = {0};
    SpmdOptions o;
    CliOutput out;
    TraceTripCount *trips = NULL;
    uint32_t n_trips = 0;
    CliPropagation prop;
    int code;
    cli_output_init(&out, cli_args_value(a, OPT_OUTPUT), a->phases);
    if (cli_input_load_timed(&in, a->pos[0], a->phases, &err) || cli_input_check(&in, &err))
        code = cli_report(&err, &in);
    else if ((code = cli_propagate_first(a, OPT_SET, !cli_args_has(a, OPT_NO_PROPAGATE), &in,
                                         &prop)) == CLI_EXIT_OK &&
             (code = cli_spmd_options(a, OPT_NUM_PARTITIONS, OPT_SET, &in, &o)) ==
                 CLI_EXIT_OK &&
             (code = cli_trip_counts(a, OPT_TRIP_COUNT, in.module, &in.arena, &trips, &n_trips)) ==
                 CLI_EXIT_OK) {
        o.input_propagated = prop.ran;
        code = cli_partition_traced(&in, &o, cli_args_value(a, OPT_TRACE), trips, n_trips, &prop,
                                    &out.text, NULL);
    }
    /* The text streams out only while printing, the last step; the file is committed only
     * when every step, the trace included, succeeded (else cli_output_fini removes it). */
    if (code == CLI_EXIT_OK)
        code = cli_output_finish(&out, &in);
    cli_output_fini(&out);
    cli_input_fini(&in);
    return code;
}

const CliCommand cmd_partition = {
    .name = "partition",
    .usage = "IN.hlo [-n|--num-partitions N] [-o|--output OUT.hlo] [--trace TRACE.db] "
             "[--set KEY=VALUE]... [--trip-count NAME=N]... [--no-propagate]",
    .summary = "partition a sharded module into its per-device module (GSPMD)",
    .description =
        "Parses and checks IN.hlo ('-' for standard input), checks that every sharding fits\n"
        "N devices, and partitions the module the way XLA's SPMD partitioner does: local\n"
        "shapes, collectives with their replica groups, the same dot strategies. Prints the\n"
        "partitioned module in HLO text; -o writes it atomically (no file on failure).\n"
        "N is -n, else the header's num_partitions=, else the device count all the\n"
        "shardings agree on (said on stderr; shardings that disagree are an error).\n"
        "Unknown --set names are errors (exit 2); constructs the partitioner does not\n"
        "support are named in the message (exit 3).\n"
        "--trace appends the run (every decision, reshard, collective and windowed loop)\n"
        "to a SQLite trace database, creating it when missing; a failed run leaves nothing\n"
        "in it. report, explain, diff and viz read it.\n" CLI_TRIP_COUNT_HELP CLI_PROPAGATE_HELP,
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 1,
    .run = run,
    .help_extra = help_extra,
};
