/* report.h - communication reports of a recorded run (product.md "Cost model", "Reports"):
 * per-device byte traffic under the ring model, a time estimate, mesh axes of every
 * collective, the text report, summary.json, and diff of two runs or summaries.
 * Owns: the cost model as reported, and the JSON form (only reports/ sees cJSON). Works on a
 * TraceRun loaded by the trace reader, never on the partitioner. Output is deterministic: rows
 * are sorted, nothing depends on the clock, the run id or pointer values. Every Report lives in
 * the arena passed to the function that made it; strings may point into the TraceRun. */
#ifndef SHARDLENS_REPORT_H
#define SHARDLENS_REPORT_H

#include "base/base.h"
#include "trace/trace_run.h"

#define REPORT_SCHEMA_VERSION          1
#define REPORT_DEFAULT_LINK_GBPS       100.0 /* Gbit/s per device (bus bandwidth) */
#define REPORT_DEFAULT_LATENCY_US      5.0   /* per ring step */
#define REPORT_DEFAULT_INTER_NODE_GBPS 25.0  /* with devices_per_node, between nodes */
#define REPORT_DEFAULT_TOP             10    /* rows of each ranked table in the text report */

typedef struct ReportOptions {
    double link_gbps;         /* > 0: Gbit/s (1e9 bit/s) each device sends at within a node */
    double latency_us;        /* >= 0: paid once per algorithm step */
    int64_t devices_per_node; /* 0: one level; K: devices [kK, (k+1)K) form node k */
    double inter_node_gbps;   /* > 0: a group with members on two nodes runs at this rate */
    const char *mesh;         /* "data=2,model=4": axes over the device order, or NULL */
    uint32_t top;             /* rows of the text report's ranked tables (collectives, source
                                 ops, op_names); 0: REPORT_DEFAULT_TOP */
    bool is_default_link, is_default_latency, is_default_inter; /* for the output's wording */
    double device_memory_gib; /* > 0: warn when a device's estimated peak memory exceeds it */
    uint32_t op_name_depth;   /* > 0: traffic rolled up by the first K op_name components */
} ReportOptions;
void report_options_init(ReportOptions *o); /* the defaults above, no mesh, one level */

typedef struct ReportAxis {
    const char *name;
    int64_t size;
} ReportAxis;

/* Traffic of a set of collectives. Known trip counts are applied; collectives whose trip count
 * is unknown are kept apart, per execution, and never counted as if they ran once. */
typedef struct ReportTraffic {
    uint32_t collectives;
    double send_bytes, recv_bytes; /* summed over the set's devices, trip counts applied */
    double time_us;                /* estimated, trip counts applied */
    uint32_t unknown_trip_collectives;
    double unknown_send_bytes, unknown_recv_bytes, unknown_time_us; /* per execution */
} ReportTraffic;

typedef struct ReportCollective {
    const char *name, *kind, *opcode, *computation, *shape;
    const char *source, *op_name;  /* the input instruction it derives from; NULL when none */
    const char *cause;             /* NULL when unreported */
    const char *axes;              /* "model", "data,model", "none", ...; NULL without a mesh */
    int64_t channel_id;            /* -1: none */
    int64_t group_size, n_groups;  /* largest group; permute: 2 and the number of pairs */
    double bytes;                  /* S of the cost model, one execution */
    int64_t trip_count;            /* -1: unknown */
    int64_t max_trip_count;        /* unknown trip count: at most this many (a conditional's
                                      branch, gspmd.md H.4); -1: unbounded or trip_count known */
    double send_bytes, recv_bytes; /* one execution, summed over devices */
    double max_device_send_bytes;  /* one execution, the busiest device */
    uint32_t steps;                /* algorithm steps of the slowest group */
    bool crosses_nodes;            /* some group spans two nodes (two-level topology only) */
    double time_us;                /* one execution */
} ReportCollective;

typedef struct ReportDevice {
    int64_t device;
    ReportTraffic t; /* this device's own bytes; time is not split per device (0) */
} ReportDevice;

/* A total by kind, by source instruction or by metadata op_name. */
typedef struct ReportRow {
    const char *key;     /* kind, source name or op_name ("" when the collective has none) */
    const char *op_name; /* source rows: the source's op_name, NULL when none */
    const char *opcode;  /* source rows: the source's opcode, NULL when unknown */
    ReportTraffic t;
} ReportRow;

typedef struct ReportLoop {
    const char *dot, *loop, *variant;
    int64_t iterations, bytes_per_iteration;
} ReportLoop;

/* A partitioner warning about the input or a fallback it took (trace `warning` table). */
typedef struct ReportWarning {
    const char *kind;    /* "unannotated", "already-partitioned", "custom-call-fallback",
                            "full-remat", "no-handler", "other", "ignored-alias" */
    const char *instr;   /* the input instruction it is about; NULL: the whole module */
    const char *op_name; /* that instruction's op_name; NULL when none */
    const char *message;
} ReportWarning;
/* A while loop of the output and its trip count (trace table while_loop). */
typedef struct ReportWhile {
    const char *loop, *source, *computation; /* source: the input while; NULL when none */
    int64_t trip_count;                      /* -1: unknown */
    const char *method; /* user, backend_config, pattern, partitioner, unknown */
    const char *reason; /* unknown: why; else how the count was found; may be NULL */
    int64_t executions; /* runs of the while itself per run of the module; -1: unknown */
    uint32_t collectives;            /* run by it, loops nested in it included */
    double send_bytes_per_execution; /* theirs, one execution each, summed over devices */
} ReportWhile;

/* A buffer live at the memory peak (memory.c). */
typedef struct ReportMemBuffer {
    const char *name, *opcode; /* the instruction that defines it */
    const char *kind;          /* parameter, output, temp, nested */
    const char *source;        /* partitioned: the input instruction it derives from */
    const char *op_name;       /* NULL when none */
    int64_t bytes;
    uint32_t leaf; /* array leaf of the instruction's shape, pre-order (0 for arrays) */
} ReportMemBuffer;

/* The memory estimate of the input on one device, or of the output for a group of devices
 * with the same figures (trace tables memory, memory_buffer; src/memory/memory.h). */
typedef struct ReportMemory {
    bool is_partitioned;
    int64_t *devices; /* partitioned: the group's devices, ascending */
    uint32_t n_devices;
    int64_t parameter_bytes, output_bytes, alias_bytes, peak_bytes, peak_temp_bytes;
    const char *peak_instr, *peak_op_name; /* where the peak is; NULL when unknown */
    ReportMemBuffer *top;                  /* largest first */
    uint32_t n_top;
    bool is_over_limit; /* peak_bytes > ReportOptions.device_memory_gib */
    int64_t *profile;   /* live bytes over the schedule (TraceRunMemory.profile), for charts */
    uint32_t n_profile;
    int64_t profile_step;
} ReportMemory;

/* Traffic summed over a group of collectives (rollup.c): a mesh axis set, an op_name prefix,
 * a loop or a called computation. Bytes are sent, summed over devices, trip counts applied. */
typedef struct ReportRollup {
    const char *key;  /* axes ("data", "data,model"), op_name prefix, loop or computation */
    const char *info; /* loops: trip count text ("8", "unknown"); else NULL */
    ReportTraffic t;
} ReportRollup;

typedef struct Report {
    const char *module, *input_hash, *tool_version;
    int64_t num_partitions;
    ReportOptions model; /* as used; `mesh` is the canonical text */
    ReportAxis *axes;    /* n_axes; none without a mesh */
    uint32_t n_axes;
    ReportTraffic total;
    int64_t bottleneck_device;     /* most bytes sent + received, lowest id on ties; -1: none */
    ReportCollective *collectives; /* output order */
    uint32_t n_collectives;
    ReportDevice *devices; /* 0 .. n_devices-1 */
    uint32_t n_devices;
    ReportRow *kinds, *sources, *op_names; /* kinds by name; the others by bytes, then name */
    uint32_t n_kinds, n_sources, n_op_names;
    ReportLoop *loops;
    uint32_t n_loops;
    ReportWarning *warnings; /* grouped by kind (kinds in order of first appearance), then in
                                recording order */
    uint32_t n_warnings;
    /* The traffic of the collectives whose source is a custom call the partitioner could only
     * partition by fallback (warning custom-call-fallback): XLA runs the call's own
     * partitioning rule (e.g. JAX custom_partitioning) there, so this part of the totals is an
     * upper bound, not XLA's figure. */
    ReportTraffic fallback;
    uint32_t n_fallback_sources; /* such calls with collectives */
    ReportWhile *whiles; /* output order, outer loops first */
    uint32_t n_whiles;
    /* Collectives of unknown trip count in no loop of unknown count: in a conditional's
     * branch, which runs at most as often as the conditional (whether it runs is data). */
    uint32_t n_unknown_in_branches;
    ReportMemory *mem_before; /* the input on one device; NULL when the trace has none */
    ReportMemory *mem_groups; /* the partitioned module, per group of devices */
    uint32_t n_mem_groups;
    /* Rollups (rollup.c), by bytes sent, then key: */
    ReportRollup *by_axes;       /* with a mesh: per set of axes the groups span */
    uint32_t n_by_axes;
    ReportRollup *by_crossed;    /* with a mesh: per axis crossed, alone or with others */
    uint32_t n_by_crossed;
    ReportRollup *by_prefix;     /* with op_name_depth: per op_name prefix */
    uint32_t n_by_prefix;
    ReportRollup *by_loop;       /* per while loop (directly in it), trip counts applied */
    uint32_t n_by_loop;
    ReportRollup *by_computation; /* per computation holding the collectives */
    uint32_t n_by_computation;
} Report;

/* Computes the report of `run`. A mesh that does not parse or whose size is not the run's
 * device count is SL_ERR_INVALID; bad model numbers are SL_ERR_INVALID. */
SlStatus report_build(const TraceRun *run, const ReportOptions *o, SlArena *arena, Report **out,
                      SlError *err);
/* Bytes of a shape in HLO text ("f32[8,16]", "(s4[3], bf16[2])"), sub-byte types packed;
 * false when the text is not a shape. */
bool report_shape_bytes(const char *shape, double *bytes);

/* The text report for people: totals, per kind, per device, top source ops, collectives,
 * windowed loops, with the model's assumptions stated. */
void report_print_text(const Report *r, SlBuf *out);
/* One line: collectives, bytes sent, the busiest device, estimated time, unknown trips. */
void report_print_summary_line(const Report *r, SlBuf *out);
/* One line per kind of warning: "warning: KIND: N, first %NAME (op_name): MESSAGE". */
void report_print_warning_lines(const Report *r, SlBuf *out);
/* summary.json (schema/summary.schema.json), byte-for-byte deterministic. */
SlStatus report_write_json(const Report *r, SlBuf *out, SlError *err);
/* Reads a summary.json back (for diff). Errors name `path`. */
SlStatus report_parse_json(SlStr text, const char *path, SlArena *arena, Report **out,
                           SlError *err);

typedef struct ReportDiffOptions {
    bool has_budget;
    double max_increase_pct;           /* >= 0: growth allowed for total and busiest-device bytes */
    const char *old_label, *new_label; /* how to name the inputs (paths), may be NULL */
    bool has_memory_budget;
    double max_memory_increase_pct; /* >= 0: growth allowed for the largest device peak */
} ReportDiffOptions;

/* Compares two reports: per kind, busiest device, per source op (matched by name and
 * op_name), per (source, kind), bytes as per-execution bytes times trip counts. Writes text
 * or, with `as_json`, JSON for bots into `out`; `*over_budget` is true when a budget is set
 * and a gated figure grew past it, or traffic of unknown trip count grew (diff.c). */
SlStatus report_diff(const Report *old_r, const Report *new_r, const ReportDiffOptions *o,
                     bool as_json, SlBuf *out, bool *over_budget, SlError *err);
/* False when both name their module and the names differ (diff warns: different modules). */
bool report_same_module(const Report *a, const Report *b);

#endif
