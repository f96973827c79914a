/* cmd_pending.c - the commands of the CLI contract (design/product.md) that later issues
 * implement: listed in help with their synopsis, and exiting with status 3 when called.
 * Owns: their synopses until each gets its own cmd_<name>.c. */
#include "cli/cli_util.h"

enum {
    OPT_RUN,
    OPT_JSON,
    OPT_GBPS,
    OPT_LATENCY,
    OPT_BEFORE,
    OPT_AFTER,
    OPT_FOCUS,
    OPT_DEPTH,
    OPT_MAX_INCREASE,
    OPT_N,
    OPT_SEED,
    OPT_PARTITIONED,
    OPT_OUT
};

static const CliOpt k_report_opts[] = {
    {OPT_RUN,     0, "run",        "ID",       "which run of the trace (default: the last)", false},
    {OPT_JSON,    0, "json",       "OUT.json", "also write the summary as JSON",             false},
    {OPT_GBPS,    0, "link-gbps",  "G",        "link bandwidth for time estimates",          false},
    {OPT_LATENCY, 0, "latency-us", "L",        "per-step latency for time estimates",        false},
};

const CliCommand cmd_report = {
    .name = "report",
    .usage = "TRACE.db [--run ID] [--json OUT.json] [--link-gbps G] [--latency-us L]",
    .summary = "per-device traffic and communication time from a trace",
    .description = "Reads a trace and prints totals, per collective kind, per device, the top\n"
                   "source ops by bytes and windowed loops.\n",
    .opts = k_report_opts,
    .n_opts = SL_COUNTOF(k_report_opts),
    .min_pos = 1,
    .max_pos = 1,
};

static const CliOpt k_viz_opts[] = {
    {OPT_RUN,    0, "run",    "ID",    "which run of the trace (default: the last)", false},
    {OPT_BEFORE, 0, "before", "B.svg", "diagram of the input graph",                 false},
    {OPT_AFTER,  0, "after",  "A.svg", "diagram of the partitioned graph",           false},
    {OPT_FOCUS,  0, "focus",  "NAME",  "only the neighbourhood of instruction NAME", false},
    {OPT_DEPTH,  0, "depth",  "K",     "neighbourhood radius for --focus",           false},
};

const CliCommand cmd_viz = {
    .name = "viz",
    .usage = "TRACE.db [--run ID] [--before B.svg] [--after A.svg] [--focus NAME] [--depth K]",
    .summary = "before/after Graphviz diagrams from a trace",
    .description = "Renders the input and partitioned graphs of a traced run.\n",
    .opts = k_viz_opts,
    .n_opts = SL_COUNTOF(k_viz_opts),
    .min_pos = 1,
    .max_pos = 1,
};

const CliCommand cmd_explain = {
    .name = "explain",
    .usage = "TRACE.db NAME",
    .summary = "why an instruction was partitioned the way it was",
    .description = "Prints the sharding, handler, strategy, alternatives and the collectives\n"
                   "caused by source instruction NAME.\n",
    .min_pos = 2,
    .max_pos = 2,
};

static const CliOpt k_diff_opts[] = {
    {OPT_MAX_INCREASE, 0, "max-increase", "PCT", "exit 1 when traffic grows more than PCT", false},
};

const CliCommand cmd_diff = {
    .name = "diff",
    .usage = "OLD NEW [--max-increase PCT]",
    .summary = "compare two traces or summaries; gate on traffic growth",
    .description = "Compares per-kind and per-op traffic of OLD and NEW (trace .db or summary\n"
                   ".json).\n",
    .opts = k_diff_opts,
    .n_opts = SL_COUNTOF(k_diff_opts),
    .min_pos = 2,
    .max_pos = 2,
};

static const CliOpt k_verify_opts[] = {
    {OPT_N,           'n', "num-partitions", "N",     "simulate N devices",                    false},
    {OPT_SEED,        0,   "seed",           "S",     "seed for the random inputs",            false},
    {OPT_PARTITIONED, 0,   "partitioned",    "P.hlo", "check this partitioned module instead", false},
};

const CliCommand cmd_verify = {
    .name = "verify",
    .usage = "IN.hlo [-n N] [--seed S] [--partitioned P.hlo]",
    .summary = "simulate N devices and compare with the unpartitioned module",
    .description = "Evaluates IN.hlo and its partitioned form on N simulated devices with\n"
                   "seeded random inputs, and compares the results.\n",
    .opts = k_verify_opts,
    .n_opts = SL_COUNTOF(k_verify_opts),
    .min_pos = 1,
    .max_pos = 1,
};

static const CliOpt k_analyze_opts[] = {
    {OPT_N,   'n', "num-partitions", "N",   "partition for N devices",    false},
    {OPT_OUT, 0,   "out",            "DIR", "directory for every output", false},
};

const CliCommand cmd_analyze = {
    .name = "analyze",
    .usage = "IN.hlo [-n N] --out DIR",
    .summary = "partition, trace, report and draw into one directory",
    .description = "Runs partition with a trace, report, viz and verify, writing into DIR.\n",
    .opts = k_analyze_opts,
    .n_opts = SL_COUNTOF(k_analyze_opts),
    .min_pos = 1,
    .max_pos = 1,
};
