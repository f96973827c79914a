/* cmd_check.c - `shardlens check IN.hlo [-n N]`: parse, ir_module_check, shd_check of every
 * sharding, then one summary line. Owns: choosing the device count the shardings are checked
 * against and the summary's wording (tests and scripts match it exactly). */
#include "cli/cli_util.h"
#include "sharding/shd.h"

enum { OPT_NUM_PARTITIONS };

static const CliOpt k_opts[] = {
    {OPT_NUM_PARTITIONS, 'n', "num-partitions", "N",
     "check shardings against N devices (default: the header's num_partitions=)", false},
};

typedef struct Counts {
    uint32_t instrs, sharded;
} Counts;

static void
count_module(const IrModule *m, Counts *c)
{
    for (uint32_t k = 0; k < m->n_comps; k++) {
        const IrComputation *comp = m->comps[k];
        c->instrs += comp->n_instrs;
        for (uint32_t i = 0; i < comp->n_instrs; i++) {
            const ShdSharding *s = ir_instr_sharding(comp->instrs[i]);
            c->sharded += s != NULL;
        }
    }
}

static int
run(const CliArgs *a)
{
    const char *n_text = cli_args_value(a, OPT_NUM_PARTITIONS);
    int64_t n = 0;
    if (n_text && !cli_parse_devices(a->cmd, "--num-partitions", n_text, &n))
        return CLI_EXIT_BAD_INPUT;
    CliInput in;
    SlError err = {0};
    int code = CLI_EXIT_OK;
    if (cli_input_load_timed(&in, a->pos[0], a->phases, &err) || cli_input_check(&in, &err)) {
        code = cli_report(&err, &in);
        cli_input_fini(&in);
        return code;
    }
    const IrModule *m = in.module;
    Counts c = {0};
    count_module(m, &c);
    const char *how = "";
    bool unknown = false; /* no count given, and the shardings do not determine one */
    if (!n && ir_module_find_header(m, "num_partitions")) {
        n = ir_module_num_partitions(m);
    } else if (!n) {
        SlStatus cst = cli_devices_from_shardings(m, in.display, &n, &err);
        if (cst == SL_ERR_UNSUPPORTED) {
            unknown = true;
            err = (SlError){0};
        } else if (cst) {
            code = cli_report(&err, &in);
            cli_input_fini(&in);
            return code;
        }
        how = n > 1 ? " (from shardings)" : "";
        n = unknown ? 0 : n > 1 ? n : 1;
    }
    cli_phase_begin(a->phases, CLI_PHASE_CHECK);
    SlStatus st = cli_check_shardings(m, in.display, n, &err);
    cli_phase_end(a->phases, CLI_PHASE_CHECK, 0);
    if (st) {
        code = cli_report(&err, &in);
    } else if (unknown) {
        printf("%s: ok: %u computations, %u instructions, %u sharded, num_partitions not "
               "determined (the shardings name devices beyond their tile count; pass -n N)\n",
               in.display, m->n_comps, c.instrs, c.sharded);
        code = cli_stdout_close(code);
    } else {
        printf("%s: ok: %u computations, %u instructions, %u sharded, num_partitions=%lld%s\n",
               in.display, m->n_comps, c.instrs, c.sharded, (long long)n, how);
        code = cli_stdout_close(code);
    }
    cli_input_fini(&in);
    return code;
}

const CliCommand cmd_check = {
    .name = "check",
    .usage = "IN.hlo [-n|--num-partitions N]",
    .summary = "check a module's structure, shapes and shardings",
    .description =
        "Parses IN.hlo ('-' for standard input), checks its structure (roots, operand order,\n"
        "parameter numbers, called computations), infers the result shape of every\n"
        "instruction the partitioner handles and compares it with the declared one, and\n"
        "checks every sharding against its instruction's shape and the device count.\n"
        "Prints one summary line on success:\n"
        "  IN.hlo: ok: C computations, I instructions, S sharded, num_partitions=N\n"
        "The device count is -n, else the header's num_partitions=, else the count all the\n"
        "shardings agree on (marked \"(from shardings)\"; shardings that disagree are an\n"
        "error naming the counts). Shardings of one count that name a device id beyond it\n"
        "(devices=[4]0,1,4,5) leave the count undetermined, as in XLA: they are checked\n"
        "without one (ids non-negative, each once) and the line ends \"num_partitions not\n"
        "determined (...)\"; partition then needs -n. An inconsistent module is bad input:\n"
        "FILE:LINE:COL: error: ..., exit status 2.\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 1,
    .run = run,
};
