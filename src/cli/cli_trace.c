/* cli_trace.c - the parts the trace commands share (cli_trace.h): partition options, a
 * partition run recorded into a trace, loading a run back, the report's model options.
 * Owns: the clock reads of a trace (the run's created_at and duration; --time-phases has its
 * own, cli_phases.c). Does not own:
 * recording (src/trace) or partitioning (src/spmd). */
#include "cli/cli_trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hlo/hlo.h"

#ifndef SHARDLENS_VERSION
#define SHARDLENS_VERSION "unknown"
#endif

int
cli_report_at(SlError *err, const char *path)
{
    /* The file as the user named it; also, a location the trace layer set may point into a
     * connection it has already closed. */
    if (path)
        err->loc.path = path;
    return cli_report(err, NULL);
}

/* ---- options -------------------------------------------------------------------------------- */

/* A finite number >= `min` (> min when `strict`). */
static bool
parse_real(const CliCommand *cmd, const char *opt, const char *text, double min, bool strict,
           double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    bool ok = !errno && end != text && !*end && isfinite(v) && (strict ? v > min : v >= min);
    if (!ok) {
        cli_usage_error(cmd, "%s expects a %s number, got '%s'", opt,
                        strict ? "positive" : "non-negative", text);
        return false;
    }
    *out = v;
    return true;
}

int
cli_report_options(const CliArgs *a, ReportOptions *o)
{
    report_options_init(o);
    const CliCommand *cmd = a->cmd;
    const char *v;
    if ((v = cli_args_value(a, CLI_OPT_LINK_GBPS))) {
        if (!parse_real(cmd, "--link-gbps", v, 0, true, &o->link_gbps))
            return CLI_EXIT_BAD_INPUT;
        o->is_default_link = false;
    }
    if ((v = cli_args_value(a, CLI_OPT_LATENCY_US))) {
        if (!parse_real(cmd, "--latency-us", v, 0, false, &o->latency_us))
            return CLI_EXIT_BAD_INPUT;
        o->is_default_latency = false;
    }
    if ((v = cli_args_value(a, CLI_OPT_DEVICES_PER_NODE)) &&
        !cli_parse_count(cmd, "--devices-per-node", v, &o->devices_per_node))
        return CLI_EXIT_BAD_INPUT;
    if ((v = cli_args_value(a, CLI_OPT_INTER_NODE_GBPS))) {
        if (!o->devices_per_node)
            return cli_usage_error(cmd, "--inter-node-gbps needs --devices-per-node K");
        if (!parse_real(cmd, "--inter-node-gbps", v, 0, true, &o->inter_node_gbps))
            return CLI_EXIT_BAD_INPUT;
        o->is_default_inter = false;
    }
    o->mesh = cli_args_value(a, CLI_OPT_MESH);
    return CLI_EXIT_OK;
}

int
cli_spmd_options(const CliArgs *a, int n_id, int set_id, const IrModule *m, SpmdOptions *o)
{
    spmd_options_init(o);
    const char *n_text = cli_args_value(a, n_id);
    int64_t n = 0;
    if (n_text && !cli_parse_devices(a->cmd, "--num-partitions", n_text, &n))
        return CLI_EXIT_BAD_INPUT;
    if (!n && ir_module_find_header(m, "num_partitions"))
        n = ir_module_num_partitions(m);
    if (n < 1)
        return cli_usage_error(a->cmd, "no partition count: pass -n N or put num_partitions=N "
                                       "in the module header");
    for (uint32_t i = 0; i < a->n_opts; i++) {
        if (a->opts[i].opt->id != set_id)
            continue;
        SlError err = {0};
        if (spmd_options_set(o, sl_str(a->opts[i].value), &err))
            return cli_usage_error(a->cmd, "--set %s: %s", a->opts[i].value, err.msg);
    }
    o->num_partitions = n;
    return CLI_EXIT_OK;
}

int
cli_run_id(const CliArgs *a, int64_t *run_id)
{
    const char *v = cli_args_value(a, CLI_OPT_RUN);
    *run_id = 0;
    if (v && !cli_parse_count(a->cmd, "--run", v, run_id))
        return CLI_EXIT_BAD_INPUT;
    return CLI_EXIT_OK;
}

/* ---- partition with a trace --------------------------------------------------------------- */

static double
now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return -1;
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ISO 8601 UTC, e.g. 2025-01-31T12:00:00Z. */
static void
iso_now(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    if (t == (time_t)-1 || !gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, n, "unknown");
}

/* Partitions into `*out` with `sink`; on failure the diagnostic is printed. */
static int
partition_checked(CliInput *in, const SpmdOptions *o, TraceSink *sink, SlArena *out_arena,
                  IrModule **out, double *duration_ms)
{
    SlError err = {0};
    double t0 = now_ms();
    cli_phase_begin(in->phases, CLI_PHASE_PARTITION);
    SlStatus st = spmd_partition(in->module, o, sink, out_arena, out, &err);
    cli_phase_end(in->phases, CLI_PHASE_PARTITION, 0);
    if (st)
        return cli_report(&err, in);
    double t1 = now_ms();
    *duration_ms = t0 >= 0 && t1 >= t0 ? t1 - t0 : -1;
    cli_phase_begin(in->phases, CLI_PHASE_CHECK);
    st = ir_module_check(*out, "<partitioned>", &err);
    cli_phase_end(in->phases, CLI_PHASE_CHECK, 0);
    if (st) {
        /* Our own output must be consistent: a failure here is a partitioner bug. */
        err.status = SL_ERR_INTERNAL;
        return cli_report(&err, in);
    }
    return CLI_EXIT_OK;
}

int
cli_partition_traced(CliInput *in, const SpmdOptions *o, const char *trace_path, SlBuf *text,
                     int64_t *run_id)
{
    SlError err = {0};
    if (run_id)
        *run_id = 0;
    cli_phase_begin(in->phases, CLI_PHASE_CHECK);
    SlStatus checked = cli_check_shardings(in->module, in->display, o->num_partitions, &err);
    cli_phase_end(in->phases, CLI_PHASE_CHECK, 0);
    if (checked)
        return cli_report(&err, in);
    TraceDb *db = NULL;
    TraceSink *sink = trace_null_sink();
    SlBuf opts;
    sl_buf_init(&opts);
    int code = CLI_EXIT_OK;
    if (trace_path) {
        char created[32];
        iso_now(created, sizeof(created));
        spmd_options_print(o, &opts);
        TraceRunInfo info = {SHARDLENS_VERSION, created, in->src.text, sl_buf_str(&opts),
                             o->num_partitions};
        cli_phase_begin(in->phases, CLI_PHASE_TRACE);
        if (trace_db_open(trace_path, TRACE_DB_APPEND, &db, &err) ||
            trace_db_begin_run(db, in->module, &info, &sink, &err))
            code = cli_report_at(&err, trace_path);
        sl_file_text_release(&in->src); /* hashing it read the whole input again */
        cli_phase_end(in->phases, CLI_PHASE_TRACE, 0);
    }
    SlArena out_arena;
    IrModule *out = NULL;
    double duration_ms = -1;
    sl_arena_init(&out_arena);
    if (code == CLI_EXIT_OK)
        code = partition_checked(in, o, sink, &out_arena, &out, &duration_ms);
    CliPhases *trace_phases = db ? in->phases : NULL;
    cli_phase_begin(trace_phases, CLI_PHASE_TRACE);
    if (db && code != CLI_EXIT_OK) {
        trace_db_abort_run(db);
    } else if (db && trace_db_end_run(db, out, duration_ms, run_id, &err)) {
        code = cli_report_at(&err, trace_path);
    }
    trace_db_close(db);
    db = NULL;
    cli_phase_end(trace_phases, CLI_PHASE_TRACE, 0);
    if (code == CLI_EXIT_OK) {
        cli_phase_begin(in->phases, CLI_PHASE_PRINT);
        hlo_print_module(out, text);
        cli_phase_end(in->phases, CLI_PHASE_PRINT, text->spilled + text->len);
        if (text->failed) {
            SlSrcLoc nowhere = {in->display, 0, 0};
            sl_fail(&err, SL_ERR_NOMEM, nowhere, "out of memory printing the module");
            code = cli_report(&err, in);
        }
    }
    trace_db_close(db);
    if (out)
        ir_module_fini(out);
    sl_arena_fini(&out_arena);
    sl_buf_fini(&opts);
    return code;
}

/* ---- loading a run -------------------------------------------------------------------------- */

int
cli_run_load(CliRun *r, const char *path, int64_t run_id, unsigned parts)
{
    memset(r, 0, sizeof(*r));
    sl_arena_init(&r->arena);
    SlError err = {0};
    if (trace_db_open(path, TRACE_DB_READ, &r->db, &err) ||
        trace_run_load_parts(r->db, run_id, parts, &r->arena, &r->run, &err))
        return cli_report_at(&err, path);
    return CLI_EXIT_OK;
}

void
cli_run_fini(CliRun *r)
{
    trace_db_close(r->db);
    r->db = NULL;
    sl_arena_fini(&r->arena);
}
