/* cmd_verify.c - `shardlens verify IN.hlo [-n N] [--seed S] [--partitioned P.hlo] ...`.
 * Owns: option wiring and the order parse -> check -> shardings fit N -> partition (or read
 * P.hlo) -> simulate and compare -> one result line. Does not own: simulation (src/sim) or
 * partitioning (src/spmd). Exit status: 0 agree, 1 mismatch (or a partitioned program that
 * cannot run: deadlock, mismatched collective, host transfers out of step), 2 bad input, 3 not
 * checked (unsupported opcode, too large to simulate, outputs not comparable). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "sharding/shd.h"
#include "sim/sim.h"
#include "spmd/spmd.h"
#include "trace/trace.h"

enum { OPT_N, OPT_SEED, OPT_PARTITIONED, OPT_TRIALS, OPT_RTOL, OPT_ATOL, OPT_SET };

static const CliOpt k_opts[] = {
    {OPT_N,           'n', "num-partitions", "N",         "simulate N devices (default: the header's, else the shardings')", false},
    {OPT_SEED,        0,   "seed",           "S",         "seed for the random inputs (default 0)",     false},
    {OPT_PARTITIONED, 0,   "partitioned",    "P.hlo",     "check this partitioned module instead",      false},
    {OPT_TRIALS,      0,   "trials",         "T",         "repeat with T input sets (default 1)",       false},
    {OPT_RTOL,        0,   "rtol",           "R",         "relative tolerance (default by type)",       false},
    {OPT_ATOL,        0,   "atol",           "A",         "absolute tolerance (default by type)",       false},
    {OPT_SET,         0,   "set",            "KEY=VALUE", "set a partitioner option by its XLA name",   true },
};

static bool
parse_u64(const char *text, uint64_t *out)
{
    char *end;
    if (!text || !*text || *text == '-')
        return false;
    *out = strtoull(text, &end, 10);
    return *end == 0;
}

static bool
parse_tol(const char *text, double *out)
{
    char *end;
    if (!text)
        return true;
    *out = strtod(text, &end);
    return *text && *end == 0 && *out >= 0;
}

/* Fills the simulator and partitioner options; returns an exit code (0 = fine). */
static int
build_options(const CliArgs *a, const CliInput *in, SimVerifyOptions *so, SpmdOptions *po)
{
    const IrModule *m = in->module;
    sim_verify_options_init(so);
    spmd_options_init(po);
    const char *n_text = cli_args_value(a, OPT_N), *t_text = cli_args_value(a, OPT_TRIALS);
    int64_t n = 0, trials = 1;
    if (n_text && !cli_parse_devices(a->cmd, "--num-partitions", n_text, &n))
        return CLI_EXIT_BAD_INPUT;
    if (t_text && !cli_parse_count(a->cmd, "--trials", t_text, &trials))
        return CLI_EXIT_BAD_INPUT;
    if (!n && ir_module_find_header(m, "num_partitions"))
        n = ir_module_num_partitions(m);
    SlError count_err = {0};
    if (!n && cli_devices_from_shardings(m, in->display, &n, &count_err))
        return cli_report(&count_err, in);
    if (n < 1)
        return cli_usage_error(a->cmd, "no partition count: pass -n N or put num_partitions=N "
                                       "in the module header");
    const char *seed = cli_args_value(a, OPT_SEED);
    if (seed && !parse_u64(seed, &so->seed))
        return cli_usage_error(a->cmd, "--seed expects a non-negative integer, got '%s'", seed);
    if (!parse_tol(cli_args_value(a, OPT_RTOL), &so->rtol) ||
        !parse_tol(cli_args_value(a, OPT_ATOL), &so->atol))
        return cli_usage_error(a->cmd, "--rtol and --atol expect non-negative numbers");
    for (uint32_t i = 0; i < a->n_opts; i++) {
        SlError err = {0};
        if (a->opts[i].opt->id == OPT_SET && spmd_options_set(po, sl_str(a->opts[i].value), &err))
            return cli_usage_error(a->cmd, "--set %s: %s", a->opts[i].value, err.msg);
    }
    so->trials = (uint32_t)(trials > UINT32_MAX ? UINT32_MAX : trials);
    po->num_partitions = n;
    return CLI_EXIT_OK;
}

static int
print_result(const CliInput *in, const SimVerifyReport *r, int64_t n, const SimVerifyOptions *o)
{
    if (!r->ok) {
        fprintf(stderr, "%s: error: verify failed: %s\n", in->display, r->detail);
        if (!strncmp(r->detail, "output", 6)) /* a value mismatch, not a failure to run */
            fprintf(stderr, "%s: note: max error over the compared elements: %.3g\n",
                    in->display, r->max_abs_err);
        return CLI_EXIT_CHECK_FAILED;
    }
    printf("%s: ok: %u output%s agree on %" PRId64 " devices (%u trial%s, seed %" PRIu64
           ", max error %.3g)\n",
           in->display, r->n_outputs, r->n_outputs == 1 ? "" : "s", n, r->trials_run,
           r->trials_run == 1 ? "" : "s", o->seed, r->max_abs_err);
    return cli_stdout_close(CLI_EXIT_OK);
}

/* Gets the partitioned module: P.hlo when given, else our partitioner's output. */
static int
partitioned_module(const CliArgs *a, CliInput *in, CliInput *p, const SpmdOptions *po,
                   SlArena *arena, IrModule **out)
{
    SlError err = {0};
    const char *path = cli_args_value(a, OPT_PARTITIONED);
    if (path) {
        if (cli_input_load(p, path, &err) || ir_module_check(p->module, p->display, &err))
            return cli_report(&err, p);
        *out = p->module;
        return CLI_EXIT_OK;
    }
    if (spmd_partition(in->module, po, trace_null_sink(), arena, out, &err))
        return cli_report(&err, in);
    return CLI_EXIT_OK;
}

static int
verify_loaded(const CliArgs *a, CliInput *in, const SimVerifyOptions *so, const SpmdOptions *po)
{
    SlError err = {0};
    SlArena arena;
    CliInput p = {0};
    IrModule *part = NULL;
    bool own = !cli_args_has(a, OPT_PARTITIONED);
    int code;
    sl_arena_init(&arena);
    if (cli_check_shardings(in->module, in->display, po->num_partitions, &err)) {
        code = cli_report(&err, in);
    } else if ((code = partitioned_module(a, in, &p, po, &arena, &part)) == CLI_EXIT_OK) {
        SimVerifyReport r;
        if (sim_verify(in->module, part, po->num_partitions, so, &r, &err)) {
            if (r.error_in_partitioned && !own)
                code = cli_report(&err, &p);
            else {
                err.loc.path = r.error_in_partitioned ? "<partitioned>" : in->display;
                code = cli_report(&err, r.error_in_partitioned ? NULL : in);
            }
        } else {
            code = print_result(in, &r, po->num_partitions, so);
        }
    }
    if (part && own)
        ir_module_fini(part);
    if (!own && p.path)
        cli_input_fini(&p);
    sl_arena_fini(&arena);
    return code;
}

static int
run(const CliArgs *a)
{
    CliInput in;
    SlError err = {0};
    SimVerifyOptions so;
    SpmdOptions po;
    int code;
    if (cli_input_load(&in, a->pos[0], &err) || ir_module_check(in.module, in.display, &err))
        code = cli_report(&err, &in);
    else if ((code = build_options(a, &in, &so, &po)) == CLI_EXIT_OK)
        code = verify_loaded(a, &in, &so, &po);
    cli_input_fini(&in);
    return code;
}

const CliCommand cmd_verify = {
    .name = "verify",
    .usage = "IN.hlo [-n N] [--seed S] [--partitioned P.hlo] [--trials T] [--rtol R] [--atol A] "
             "[--set KEY=VALUE]...",
    .summary = "simulate N devices and compare with the unpartitioned module",
    .description =
        "Makes seeded random inputs (floats in [-1,1), small integers, and in-range values for\n"
        "integer parameters that feed gather, scatter or dynamic-slice indices), evaluates\n"
        "IN.hlo on one device, cuts the inputs into shards by the entry parameter shardings,\n"
        "runs the partitioned module (ours, or P.hlo) on N simulated devices in lockstep with\n"
        "collectives exchanging real data, and compares every device's output tile with the\n"
        "original's result: |got - want| <= atol + rtol * max(|want|, max |output|).\n"
        "Tolerances default by type: f32 1e-4/1e-4, f16 and bf16 2e-2/2e-2, f64 1e-9/1e-9.\n"
        "Host transfers: the host sends one seeded value per infeed, and each device of the\n"
        "partitioned module receives its tile of it by the infeed's sharding; outfeed data is\n"
        "reassembled by the outfeed's sharding and compared like an extra output; GetRngSeed\n"
        "returns one seed shared by every device.\n"
        "Manually partitioned regions (manual shardings, SPMDFullToShardShape, collectives\n"
        "in IN.hlo): IN.hlo runs on N devices too, with one input value per manual group;\n"
        "device d of the partitioned module is compared with device d of IN.hlo.\n"
        "Exit status: 0 all outputs agree; 1 a mismatch (the first mismatching output,\n"
        "element, device, both values and the error are printed) or a partitioned program\n"
        "that cannot run (deadlock, mismatched collective, a device reading more infeeds or\n"
        "sending fewer outfeeds than the original); 2 bad input; 3 not checked: an opcode or\n"
        "custom-call target the evaluator does not support (named), a module too large to\n"
        "simulate (either module: the partitioned one counts every device), or outputs that\n"
        "are not comparable between one device and N (rng, partition-id and replica-id\n"
        "outside manual regions, reducers that keep one operand, an add or multiply\n"
        "reduction whose init is not its identity: named).\n",
    .opts = k_opts,
    .n_opts = SL_COUNTOF(k_opts),
    .min_pos = 1,
    .max_pos = 1,
    .run = run,
};
