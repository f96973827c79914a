/* cmd_propagate.c - `shardlens propagate IN.hlo [-n N] [-o OUT] [--set K=V]...`: XLA's sharding
 * propagation on the module, printed with every instruction's sharding.
 * Owns: the wiring parse -> (shardings fit N) -> prop_run -> print -> atomic write, and the
 * --set names. Does not own: propagation (src/propagate). Invariant: nothing is written unless
 * every step succeeded. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_trace.h"
#include "cli/cli_util.h"
#include "hlo/hlo.h"
#include "propagate/prop.h"
#include "spmd/spmd.h"
#include "trace/trace_db.h"

enum { OPT_NUM_PARTITIONS, OPT_OUTPUT, OPT_TRACE, OPT_SET, OPT_INLINE_CALLS };

static const CliOpt k_opts[] = {
    {OPT_NUM_PARTITIONS, 'n', "num-partitions", "N",
     "check that every sharding fits N devices (default: no check)",                  false},
    {OPT_OUTPUT,         'o', "output",         "OUT.hlo",   "write the module here (default: stdout)", false},
    {OPT_TRACE,          0,   "trace",          "TRACE.db",
     "append a run (the propagated module, partitioned) with every sharding's origin",       false},
    {OPT_SET,            0,   "set",            "KEY=VALUE", "set a propagation option by its XLA name", true },
    {OPT_INLINE_CALLS,   0,   "inline-calls",   NULL,
     "first run partition's pre-passes: memory placements to MoveToHost/MoveToDevice, then XLA's call-inliner", false},
};

static void
help_extra(FILE *out)
{
    PropOptions o;
    SlBuf b;
    prop_options_init(&o);
    sl_buf_init(&b);
    prop_options_print(&o, &b);
    fputs("\npropagation options for --set, with their defaults (XLA's ShardingPropagation):\n",
          out);
    cli_print_indented(out, sl_buf_str(&b));
    fputs("  execution_threads=NAME[,NAME...]  (default: all; computations of other threads,\n"
          "    by their execution_thread= (\"main\" when none), are left as they are)\n"
          "The two allow_* options take one value, or one per element of the entry's result\n"
          "tuple (per entry parameter), as XLA's absl::Span<bool> does.\n",
          out);
    sl_buf_fini(&b);
}

/* propagate's --set takes only propagation options: anything else is an error here. */
static int
parse_sets(const CliArgs *a, PropOptions *o)
{
    prop_options_init(o);
    for (uint32_t i = 0; i < a->n_opts; i++) {
        if (a->opts[i].opt->id != OPT_SET)
            continue;
        const char *kv = a->opts[i].value;
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv)
            return cli_usage_error(a->cmd, "--set %s: expected KEY=VALUE", kv);
        char key[128];
        size_t kl = (size_t)(eq - kv);
        if (kl >= sizeof(key))
            return cli_usage_error(a->cmd, "--set %s: unknown option", kv);
        memcpy(key, kv, kl);
        key[kl] = 0;
        if (!prop_options_has_key(key))
            return cli_usage_error(a->cmd, "--set %s: unknown propagation option '%s'", kv, key);
    }
    return cli_prop_options(a, OPT_SET, o);
}

/* --trace: the propagated module partitioned for N devices, recorded with the origins. */
static int
record_run(const CliArgs *a, CliInput *in, const CliPropagation *prop, int64_t n)
{
    if (!n && ir_module_find_header(in->module, "num_partitions"))
        n = ir_module_num_partitions(in->module);
    if (n < 1)
        return cli_usage_error(a->cmd, "--trace partitions the module: pass -n N or put "
                                       "num_partitions=N in the module header");
    SpmdOptions so;
    spmd_options_init(&so);
    so.num_partitions = n;
    return cli_partition_traced(in, &so, cli_args_value(a, OPT_TRACE), NULL, 0, prop, NULL, NULL);
}

static int
run(const CliArgs *a)
{
    CliInput in;
    SlError err = {0};
    PropOptions o;
    CliOutput out;
    int code = parse_sets(a, &o);
    if (code != CLI_EXIT_OK)
        return code;
    int64_t n = 0;
    const char *n_text = cli_args_value(a, OPT_NUM_PARTITIONS);
    if (n_text && !cli_parse_devices(a->cmd, "--num-partitions", n_text, &n))
        return CLI_EXIT_BAD_INPUT;
    cli_output_init(&out, cli_args_value(a, OPT_OUTPUT), a->phases);
    if (cli_input_load_timed(&in, a->pos[0], a->phases, &err) || cli_input_check(&in, &err) ||
        (n && cli_check_shardings(in.module, in.display, n, &err))) {
        code = cli_report(&err, &in);
    } else {
        CliPropagation prop = {.ran = true, .opts = o};
        if (cli_args_has(a, OPT_INLINE_CALLS)) {
            ir_convert_memory_placement(in.module);
            prop_inline_calls(in.module);
        }
        code = cli_propagate_run(&in, &o, &prop.result);
        if (code == CLI_EXIT_OK) {
            fprintf(stderr, "propagated shardings to %u of %u instructions\n",
                    prop.result.n_propagated, prop.result.n_instrs);
            if (cli_args_value(a, OPT_TRACE))
                code = record_run(a, &in, &prop, n);
        }
        if (code == CLI_EXIT_OK) {
            cli_phase_begin(a->phases, CLI_PHASE_PRINT);
            hlo_print_module(in.module, &out.text);
            cli_phase_end(a->phases, CLI_PHASE_PRINT, out.text.spilled + out.text.len);
            code = cli_output_finish(&out, &in);
        }
    }
    cli_output_fini(&out);
    cli_input_fini(&in);
    return code;
}

const CliCommand cmd_propagate = {
    .name = "propagate",
    .usage = "IN.hlo [-n|--num-partitions N] [-o|--output OUT.hlo] [--trace TRACE.db] "
             "[--set KEY=VALUE]...",
    .summary = "fill in the shardings of unannotated instructions (XLA's propagation)",
    .description =
        "Parses and checks IN.hlo ('-' for standard input) as `check` does, and runs XLA's\n"
        "sharding propagation pass (GSPMD's ShardingPropagation) on it: forward and\n"
        "backward passes over the aggressiveness levels 0..3 until nothing changes, merging\n"
        "partial replication so that the most specific sharding wins. Prints the module\n"
        "with every instruction's sharding; `Sharding` custom calls become copies and\n"
        "ShardBarrierFrom/To custom calls are removed, as in XLA. -o writes the text\n"
        "atomically (no file on failure). With -n, every input sharding must fit N\n"
        "devices. Prints \"propagated shardings to K of N instructions\" to standard\n"
        "error.\n"
        "--trace appends a run to a trace database: the propagated module partitioned for N\n"
        "devices (-n, else the header's num_partitions=), with one sharding_origin row per\n"
        "propagated sharding (source, path, direction, level, rule, merged candidates);\n"
        "`explain` starts with that chain.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 1,
    .run = run,
    .help_extra = help_extra,
};
