/* cmd_print.c - `shardlens print IN.hlo [-o OUT]`: the module in canonical HLO text.
 * Owns: nothing but the wiring parse -> hlo_print_module -> atomic write (streamed). */
#include "cli/cli_util.h"
#include "hlo/hlo.h"

enum { OPT_OUTPUT };

static const CliOpt k_opts[] = {
    {OPT_OUTPUT, 'o', "output", "OUT.hlo", "write the text here (default: standard output)", false},
};

static int
run(const CliArgs *a)
{
    CliInput in;
    SlError err = {0};
    int code;
    if (cli_input_load_timed(&in, a->pos[0], a->phases, &err)) {
        code = cli_report(&err, &in);
    } else {
        CliOutput out;
        cli_output_init(&out, cli_args_value(a, OPT_OUTPUT), a->phases);
        cli_phase_begin(a->phases, CLI_PHASE_PRINT);
        hlo_print_module(in.module, &out.text);
        cli_phase_end(a->phases, CLI_PHASE_PRINT, out.text.spilled + out.text.len);
        code = cli_output_finish(&out, &in);
        cli_output_fini(&out);
    }
    cli_input_fini(&in);
    return code;
}

const CliCommand cmd_print = {
    .name = "print",
    .usage = "IN.hlo [-o|--output OUT.hlo]",
    .summary = "parse a module and print it as canonical HLO text",
    .description = "Parses IN.hlo ('-' for standard input) and prints it in canonical HLO text,\n"
                   "the form every other command prints. Printing the output again gives the\n"
                   "same text byte for byte.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 1,
    .run = run,
};
