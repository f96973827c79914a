/* report_int.h - shared inside reports/ only: the per-group cost model, mesh decoding, and
 * number formatting. */
#ifndef SHARDLENS_REPORT_INT_H
#define SHARDLENS_REPORT_INT_H

#include "reports/report.h"

struct cJSON;

/* ---- cost.c: ring model and time of one group ---------------------------------------- */

typedef enum ReportKind {
    RK_ALL_GATHER,
    RK_REDUCE_SCATTER,
    RK_ALL_REDUCE,
    RK_ALL_TO_ALL,
    RK_PERMUTE,
    RK_BROADCAST,
    RK_OTHER, /* a kind this version does not cost: bytes 0, named in the report */
} ReportKind;

ReportKind report_kind_of(const char *kind);

/* Bytes each member of a group of `g` devices sends (and receives) for one execution of a
 * collective of `kind` with full buffer `s` (all kinds but collective-permute). */
double report_ring_bytes(ReportKind kind, int64_t g, double s);
/* Algorithm steps of one execution over a group of `g` (collective-permute: 1). */
uint32_t report_ring_steps(ReportKind kind, int64_t g);
/* latency * steps + bytes / bandwidth, in microseconds, at `gbps` Gbit/s. */
double report_time_us(const ReportOptions *o, uint32_t steps, double bytes, bool crosses_nodes);
/* True when `devices[0..n)` are not all on one node (never without a two-level topology). */
bool report_crosses_nodes(const ReportOptions *o, const int64_t *devices, uint32_t n);

/* ---- mesh.c: axes over the device order ------------------------------------------------- */

/* Parses "data=2,model=4" into axes; their product must be `n_devices`. */
SlStatus report_mesh_parse(const char *text, int64_t n_devices, SlArena *arena, ReportAxis **axes,
                           uint32_t *n_axes, SlError *err);
/* The canonical spelling of the axes ("data=2,model=4"). */
const char *report_mesh_print(const ReportAxis *axes, uint32_t n_axes, SlArena *arena);
/* The axes a collective's groups span: "model", "data,model", "none" (groups of one), with
 * "part of X" when a group covers only some of X's devices; permutes name the axes each pair
 * moves along. NULL on allocation failure. */
const char *report_mesh_axes_of(const ReportAxis *axes, uint32_t n_axes,
                                const TraceRunCollective *c, bool is_permute, SlArena *arena);

/* ---- schema_check.c: summary.json against schema/summary.schema.json ----------------------- */

/* Adds one collective to `t`: known trip counts multiply, unknown ones are kept apart, once
 * (traffic.c; the report's totals and the rollups share the rule). */
void report_traffic_add(ReportTraffic *t, const ReportCollective *c);

/* A JSON number as int64_t, saturating (converting a double out of range is undefined, and a
 * hostile summary may hold 2.4e66 where an integer belongs); NaN is 0. */
int64_t report_json_i64(double v);

/* Generated from schema/summary.schema.json (tools/embed.py). */
extern const char *const report_summary_schema_lines[];
extern const unsigned report_summary_schema_n_lines;
/* SL_ERR_INVALID naming the first place `doc` breaks the schema (a missing required key, a
 * value of the wrong type, ...), located at `path`. */
SlStatus report_check_summary(const struct cJSON *doc, const char *path, SlError *err);

/* ---- memory.c: the memory section (trace tables memory, memory_buffer) ------------------ */

/* Fills r->mem_before and r->mem_groups from the run; false when out of memory. */
bool report_memory_build(const TraceRun *run, const ReportOptions *o, SlArena *a, Report *r);
void report_memory_print_text(const Report *r, SlBuf *out);
/* "warning: device-memory: ..." for each group over --device-memory-gib. */
void report_memory_warning_lines(const Report *r, SlBuf *out);
bool report_memory_put_json(const Report *r, struct cJSON *root); /* adds "memory" */
bool report_memory_parse(const struct cJSON *root, SlArena *a, Report *r);
/* diff: the largest device peak, and its gate (--max-memory-increase). */
bool report_memory_diff_over(const Report *old_r, const Report *new_r, const ReportDiffOptions *o);
void report_memory_diff_text(const Report *old_r, const Report *new_r, const ReportDiffOptions *o,
                             SlBuf *b);
bool report_memory_diff_json(struct cJSON *root, const Report *old_r, const Report *new_r,
                             const ReportDiffOptions *o);

/* ---- rollup.c: traffic per mesh axes, op_name prefix, loop, computation ----------------- */

bool report_rollup_build(const TraceRun *run, SlArena *arena, Report *r); /* false: OOM */
void report_rollup_print_text(const Report *r, SlBuf *out);
bool report_rollup_put_json(const Report *r, struct cJSON *root); /* adds "rollups" */

/* ---- text.c / summary_json.c helpers ----------------------------------------------------- */

/* Exact byte counts: integers as integers, fractions (packed sub-byte types) with up to
 * three decimals, deterministically. */
void report_put_bytes(SlBuf *b, double v);
/* For people, text output uses sl_buf_put_size (base.h): "1.50 MiB", three significant
 * digits, whole bytes below 1 KiB; report_put_bytes is for exact figures only. */

#endif
