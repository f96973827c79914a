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
#include "propagate/prop.h"

#ifndef SHARDLENS_VERSION
#define SHARDLENS_VERSION "unknown"
#endif

int
cli_report_at(SlError *err, const char *path)
{
    /* The file as the user named it; also, a location the trace layer set may point into a
     * connection it has already closed. */
    if (path && !(err->loc.path && strcmp(err->loc.path, SL_STDOUT_NAME) == 0))
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
    if ((v = cli_args_value(a, CLI_OPT_DEVICE_MEMORY_GIB)) &&
        !parse_real(cmd, "--device-memory-gib", v, 0, true, &o->device_memory_gib))
        return CLI_EXIT_BAD_INPUT;
    int64_t depth = 0;
    if ((v = cli_args_value(a, CLI_OPT_OP_NAME_DEPTH))) {
        if (!cli_parse_count(cmd, "--by-op-name-depth", v, &depth) || depth < 1)
            return depth < 1 ? cli_usage_error(cmd, "--by-op-name-depth expects K >= 1, got '%s'",
                                               v)
                             : CLI_EXIT_BAD_INPUT;
        o->op_name_depth = depth > UINT32_MAX ? UINT32_MAX : (uint32_t)depth;
    }
    int64_t top = 0;
    if ((v = cli_args_value(a, CLI_OPT_TOP))) {
        if (!cli_parse_count(cmd, "--top", v, &top))
            return CLI_EXIT_BAD_INPUT;
        o->top = top > UINT32_MAX ? UINT32_MAX : (uint32_t)top;
    }
    return CLI_EXIT_OK;
}

/* "KEY=VALUE" whose KEY is a propagation option (by XLA's ShardingPropagation names). */
static bool
is_prop_key(const char *kv)
{
    const char *eq = strchr(kv, '=');
    char key[64];
    size_t n = eq ? (size_t)(eq - kv) : 0;
    if (!n || n >= sizeof(key))
        return false;
    memcpy(key, kv, n);
    key[n] = '\0';
    return prop_options_has_key(key);
}

int
cli_prop_options(const CliArgs *a, int set_id, PropOptions *o)
{
    for (uint32_t i = 0; i < a->n_opts; i++) {
        if (a->opts[i].opt->id != set_id || !is_prop_key(a->opts[i].value))
            continue;
        const char *kv = a->opts[i].value, *eq = strchr(kv, '=');
        char key[64];
        memcpy(key, kv, (size_t)(eq - kv));
        key[eq - kv] = '\0';
        SlError err = {0};
        if (prop_options_set(o, key, eq + 1, &err))
            return cli_usage_error(a->cmd, "--set %s: %s", kv, err.msg);
    }
    return CLI_EXIT_OK;
}

int
cli_propagate_run(CliInput *in, const PropOptions *po, PropResult *r)
{
    SlError err = {0};
    cli_phase_begin(in->phases, CLI_PHASE_PROPAGATE);
    SlStatus st = prop_run(in->module, po, &in->arena, r, &err);
    cli_phase_end(in->phases, CLI_PHASE_PROPAGATE, 0);
    if (!st)
        return CLI_EXIT_OK;
    if (!err.status)
        sl_fail(&err, st, (SlSrcLoc){0}, "sharding propagation failed");
    if (!err.loc.path && err.loc.line)
        err.loc.path = in->display;
    return cli_report(&err, in);
}

int
cli_propagate_first(const CliArgs *a, int set_id, bool enabled, CliInput *in,
                    CliPropagation *p)
{
    memset(p, 0, sizeof(*p));
    prop_options_init(&p->opts);
    p->opts.is_spmd = true; /* as XLA's SPMD pipeline runs it, allow_* from the config */
    SlError err = {0};
    if (enabled && prop_options_from_module(&p->opts, in->module, &err)) {
        err.loc = (SlSrcLoc){.path = in->display, .line = 1, .col = 1};
        return cli_report(&err, in);
    }
    int code = cli_prop_options(a, set_id, &p->opts);
    if (code != CLI_EXIT_OK || !enabled)
        return code;
    /* Unannotated constants alone are no reason to propagate: replicated, each user slices
     * its part locally, with no communication and the same numbers. */
    uint32_t total = 0;
    if (!spmd_count_unannotated(in->module, false, &total))
        return CLI_EXIT_OK;
    uint32_t missing = spmd_count_unannotated(in->module, true, &total);
    /* XLA's pipeline before its propagation: memory placements become pass-through
     * annotations, then every call is inlined */
    ir_convert_memory_placement(in->module);
    prop_inline_calls(in->module);
    if ((code = cli_propagate_run(in, &p->opts, &p->result)) != CLI_EXIT_OK)
        return code;
    p->ran = true;
    const PropResult *r = &p->result;
    fprintf(stderr,
            "shardlens %s: %u of %u instructions had no sharding: propagated shardings to %u of "
            "%u instructions (XLA's sharding propagation; --no-propagate partitions them as "
            "replicated)\n",
            a->cmd->name, missing, total, r->n_propagated, r->n_instrs);
    return CLI_EXIT_OK;
}

void
cli_emit_origins(TraceSink *sink, const IrModule *m, const PropResult *r)
{
    if (!r || !r->n_origins || !sink->ops->origin)
        return;
    enum { MAX_PATH = 4096 };
    const IrInstr **path = malloc(MAX_PATH * sizeof(*path));
    if (!path)
        return;
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t k = 0; k < m->comps[c]->n_instrs; k++) {
            const IrInstr *i = m->comps[c]->instrs[k];
            const PropOrigin *o = i->id < r->n_ids ? r->final_origin[i->id] : NULL;
            if (!o)
                continue;
            TraceOrigin t = {i, o->sharding, prop_origin_source(o), path,
                             prop_origin_path(o, path, MAX_PATH), prop_dir_name(o->dir),
                             o->level, o->rule,
                             o->replaced && o->candidate ? o->candidate : NULL,
                             o->replaced && o->candidate ? o->replaced : NULL};
            sink->ops->origin(sink, &t);
        }
    free(path);
}

int
cli_spmd_options(const CliArgs *a, int n_id, int set_id, const CliInput *in, SpmdOptions *o)
{
    const IrModule *m = in->module;
    spmd_options_init(o);
    const char *n_text = cli_args_value(a, n_id);
    int64_t n = 0;
    if (n_text && !cli_parse_devices(a->cmd, "--num-partitions", n_text, &n))
        return CLI_EXIT_BAD_INPUT;
    if (!n && ir_module_find_header(m, "num_partitions"))
        n = ir_module_num_partitions(m);
    if (!n) {
        SlError err = {0};
        if (cli_devices_from_shardings(m, in->display, &n, &err))
            return cli_report(&err, in);
        if (n > 0)
            fprintf(stderr,
                    "shardlens %s: %s: no num_partitions in the header and no -n: partitioning "
                    "for %lld devices, the count all the shardings agree on\n",
                    a->cmd->name, in->display, (long long)n);
    }
    if (n < 1)
        return cli_usage_error(a->cmd, "no partition count: pass -n N or put num_partitions=N "
                                       "in the module header (no sharding names devices)");
    for (uint32_t i = 0; i < a->n_opts; i++) {
        if (a->opts[i].opt->id != set_id)
            continue;
        SlError err = {0};
        if (is_prop_key(a->opts[i].value))
            continue; /* cli_propagate_first's */
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

void
cli_iso_now(char *buf, size_t n)
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
    if (st && !err.loc.path && err.loc.line)
        err.loc.path = in->display; /* the partitioner locates the instruction in the input */
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

/* The while instruction of `m` named `name`, or NULL (*what: the opcode found instead). */
static const IrInstr *
find_while(const IrModule *m, SlStr name, const char **what)
{
    *what = NULL;
    for (uint32_t c = 0; c < m->n_comps; c++) {
        for (uint32_t k = 0; k < m->comps[c]->n_instrs; k++) {
            const IrInstr *i = m->comps[c]->instrs[k];
            if (!i->name || !sl_str_eq(sl_sym_str(i->name), name))
                continue;
            if (i->op == IR_OP_WHILE)
                return i;
            *what = ir_op_name(i->op);
        }
    }
    return NULL;
}

int
cli_trip_counts(const CliArgs *a, int opt_id, const IrModule *m, SlArena *arena,
                TraceTripCount **out, uint32_t *n)
{
    *out = NULL;
    *n = 0;
    uint32_t total = 0;
    for (uint32_t i = 0; i < a->n_opts; i++)
        total += a->opts[i].opt->id == opt_id;
    if (!total)
        return CLI_EXIT_OK;
    TraceTripCount *tc = SL_NEW_ARRAY(arena, TraceTripCount, total);
    if (!tc)
        return cli_usage_error(a->cmd, "out of memory");
    for (uint32_t i = 0; i < a->n_opts; i++) {
        if (a->opts[i].opt->id != opt_id)
            continue;
        const char *v = a->opts[i].value, *eq = strrchr(v, '=');
        const char *name = v[0] == '%' ? v + 1 : v;
        char *end = NULL;
        errno = 0;
        long long count = eq ? strtoll(eq + 1, &end, 10) : -1;
        if (!eq || eq == name || errno || end == eq + 1 || *end || count < 0)
            return cli_usage_error(a->cmd, "--trip-count expects NAME=N with N >= 0, got '%s'",
                                   v);
        SlStr nm = {name, (size_t)(eq - name)};
        const char *what = NULL;
        if (!find_while(m, nm, &what)) {
            if (what)
                return cli_usage_error(a->cmd, "--trip-count %s: %%%.*s is a %s, not a while", v,
                                       SL_STR_ARG(nm), what);
            return cli_usage_error(a->cmd, "--trip-count %s: no instruction %%%.*s in the input",
                                   v, SL_STR_ARG(nm));
        }
        for (uint32_t k = 0; k < *n; k++)
            if (strlen(tc[k].name) == nm.len && memcmp(tc[k].name, nm.ptr, nm.len) == 0)
                return cli_usage_error(a->cmd, "--trip-count %%%.*s is given twice",
                                       SL_STR_ARG(nm));
        tc[*n].name = sl_arena_strndup(arena, nm.ptr, nm.len);
        tc[*n].count = count;
        if (!tc[*n].name)
            return cli_usage_error(a->cmd, "out of memory");
        (*n)++;
    }
    *out = tc;
    return CLI_EXIT_OK;
}

int
cli_partition_traced(CliInput *in, const SpmdOptions *o, const char *trace_path,
                     const TraceTripCount *trips, uint32_t n_trips, const CliPropagation *prop,
                     SlBuf *text, int64_t *run_id)
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
        cli_iso_now(created, sizeof(created));
        if (prop && prop->ran)
            prop_options_print(&prop->opts, &opts);
        spmd_options_print(o, &opts);
        TraceRunInfo info = {SHARDLENS_VERSION, created,        in->src.text, sl_buf_str(&opts),
                             o->num_partitions, trips, n_trips};
        cli_phase_begin(in->phases, CLI_PHASE_TRACE);
        if (trace_db_open(trace_path, TRACE_DB_APPEND, &db, &err) ||
            trace_db_begin_run(db, in->module, &info, &sink, &err))
            code = cli_report_at(&err, trace_path);
        else if (prop && prop->ran)
            cli_emit_origins(sink, in->module, &prop->result);
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
    if (code == CLI_EXIT_OK && text) {
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
