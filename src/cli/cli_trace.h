/* cli_trace.h - what the trace commands share (partition --trace, report, explain, diff,
 * analyze): partition options from -n/--set, a partition run recorded into a trace database,
 * loading a recorded run, and the report's model options. Owns: the clock (created_at and
 * duration come from here, never from the library). Invariant: every function that returns an
 * int returns an exit code and has printed its diagnostic when it is not CLI_EXIT_OK. */
#ifndef SHARDLENS_CLI_TRACE_H
#define SHARDLENS_CLI_TRACE_H

#include "cli/cli_util.h"
#include "propagate/prop.h"
#include "reports/report.h"
#include "spmd/spmd.h"
#include "trace/trace_db.h"
#include "trace/trace_run.h"

/* Option ids shared by the report-making commands; a command's own ids stay below 100. */
enum {
    CLI_OPT_RUN = 100,
    CLI_OPT_LINK_GBPS,
    CLI_OPT_LATENCY_US,
    CLI_OPT_MESH,
    CLI_OPT_DEVICES_PER_NODE,
    CLI_OPT_INTER_NODE_GBPS,
    CLI_OPT_TOP,
    CLI_OPT_DEVICE_MEMORY_GIB,
    CLI_OPT_OP_NAME_DEPTH,
};

/* The model options' rows, for a command's CliOpt table. */
#define CLI_REPORT_MODEL_OPTS                                                                        \
    {CLI_OPT_LINK_GBPS,                                                                              \
     0,                                                                                              \
     "link-gbps",                                                                                    \
     "G",                                                                                            \
     "link bandwidth in Gbit/s, as nccl-tests bus bandwidth (default 100)",                          \
     false},                                                                                         \
        {CLI_OPT_LATENCY_US, 0, "latency-us", "L", "latency per algorithm step (default 5)", false}, \
        {CLI_OPT_MESH, 0, "mesh", "AXES", "name mesh axes over the devices: data=2,model=4", false}, \
        {CLI_OPT_TOP, 0, "top", "K", "rows of each ranked table of the text report (default 10)",   \
         false},                                                                                     \
        {CLI_OPT_DEVICE_MEMORY_GIB, 0, "device-memory-gib", "G",                                     \
         "warn when a device's estimated peak memory exceeds G GiB", false},                         \
        {CLI_OPT_OP_NAME_DEPTH, 0, "by-op-name-depth", "K",                                          \
         "roll traffic up by the first K '/'-separated components of op_name", false},               \
        {CLI_OPT_DEVICES_PER_NODE,                                                                   \
         0,                                                                                          \
         "devices-per-node",                                                                         \
         "K",                                                                                        \
         "two-level topology: K devices per node",                                                   \
         false},                                                                                     \
    {                                                                                                \
        CLI_OPT_INTER_NODE_GBPS, 0, "inter-node-gbps", "G",                                          \
            "bandwidth between nodes in Gbit/s (default 25)", false                                  \
    }

/* ReportOptions from CLI_REPORT_MODEL_OPTS; usage errors print and return CLI_EXIT_BAD_INPUT. */
int cli_report_options(const CliArgs *a, ReportOptions *o);

/* SpmdOptions from -n (option `n_id`), else the module header, else the device count all the
 * shardings agree on (said on stderr; shardings that disagree are an error naming the counts),
 * and every --set (`set_id`). */
int cli_spmd_options(const CliArgs *a, int n_id, int set_id, const CliInput *in, SpmdOptions *o);

/* The --trip-count NAME=N options (option `opt_id`), in `arena`: NAME must name a while
 * instruction of `m` (a leading '%' is allowed), N a non-negative integer. Usage errors print
 * and return CLI_EXIT_BAD_INPUT. */
int cli_trip_counts(const CliArgs *a, int opt_id, const IrModule *m, SlArena *arena,
                    TraceTripCount **out, uint32_t *n);
/* The help lines of --trip-count, shared by partition and analyze. */
#define CLI_TRIP_COUNT_HELP                                                                        \
    "--trip-count NAME=N gives while instruction NAME of the input N iterations, for loops no\n"   \
    "analysis can count (the trace records the count with method 'user'; it wins over\n"           \
    "backend_config and the pattern). Repeatable; a NAME that is no while of the input is an\n"   \
    "error (exit 2).\n"

/* Sharding propagation that ran on a module before it is partitioned: its options (recorded
 * with the run) and its result (the origins, emitted into the trace). */
typedef struct CliPropagation {
    bool ran;
    PropOptions opts;
    PropResult result;
} CliPropagation;

/* Checks the shardings against N, partitions `in` (recording the run into `trace_path`, opened
 * for appending, when not NULL, with the user's trip counts `trips` and, when `prop` ran, its
 * options and origins), checks the result and prints it into `text` (NULL: not printed). On
 * success `*run_id` (may be NULL) is the recorded run, 0 without a trace. Nothing of a failed
 * run is in the trace. */

int cli_partition_traced(CliInput *in, const SpmdOptions *o, const char *trace_path,
                         const TraceTripCount *trips, uint32_t n_trips,
                         const CliPropagation *prop, SlBuf *text, int64_t *run_id);

/* The --set options (option `set_id`) that are sharding propagation's, by XLA's names, into
 * `o`; cli_spmd_options leaves those keys alone. */
int cli_prop_options(const CliArgs *a, int set_id, PropOptions *o);
/* prop_run on in->module with `po`, timed as the propagate phase; a failure is printed and
 * its exit code returned. */
int cli_propagate_run(CliInput *in, const PropOptions *po, PropResult *r);
/* Sharding propagation before partitioning, as XLA's pipeline runs it: when `enabled` and
 * some instruction the partitioner reads, other than a constant, has no sharding, runs XLA's
 * ShardingPropagation (is_spmd=true; --set may change its options) on in->module in place
 * and says so on stderr ("propagated shardings to K of N instructions"). `p->ran` tells
 * whether it ran. */
int cli_propagate_first(const CliArgs *a, int set_id, bool enabled, CliInput *in,
                        CliPropagation *p);
/* Every propagated sharding's origin in `r` (may be NULL), as trace events of `sink`. */
void cli_emit_origins(TraceSink *sink, const IrModule *m, const PropResult *r);
/* The help lines of --no-propagate and the propagation --set names, for partition/analyze. */
#define CLI_PROPAGATE_HELP                                                                         \
    "A module in which some instruction other than a constant has no sharding is first run\n"   \
    "through XLA's sharding propagation, as XLA's pipeline does before its partitioner\n"        \
    "(`shardlens propagate` shows its result): stderr says how many instructions got a\n"       \
    "sharding, the trace records where each came from (explain NAME starts with it).\n"         \
    "--no-propagate partitions unannotated instructions as replicated instead. --set also\n"    \
    "takes the propagation options by XLA's names (allow_spmd_sharding_propagation_to_output\n" \
    "=B, ..., see propagate --help).\n"

/* A run loaded from a trace database. */
typedef struct CliRun {
    TraceDb *db;
    SlArena arena;
    const TraceRun *run;
} CliRun;
/* Opens `path` read-only and loads run `run_id` (0: the latest) with the optional `parts`
 * (TraceLoadParts) its command needs. Pair with cli_run_fini. */
int cli_run_load(CliRun *r, const char *path, int64_t run_id, unsigned parts);
void cli_run_fini(CliRun *r);
/* --run ID (CLI_OPT_RUN) as a positive integer, 0 when absent. */
int cli_run_id(const CliArgs *a, int64_t *run_id);

/* The time now for a trace's run.created_at: ISO 8601 UTC, e.g. 2025-01-31T12:00:00Z
 * ("unknown" when the clock fails). */
void cli_iso_now(char *buf, size_t n);

/* Prints err as being about file `path` (its line:col kept) and returns the exit code. */
int cli_report_at(SlError *err, const char *path);

#endif
