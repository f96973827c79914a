/* traffic.c - builds a Report from a TraceRun: for every collective, the bytes each device
 * sends and receives under the ring model, group by group (so uneven groups and groups of one
 * are exact), times the trip count of its enclosing loops; totals per device, per kind, per
 * source instruction and per metadata op_name; the time estimate; mesh axes.
 * Owns: this computation. It is deliberately independent of the trace database's views: S is
 * recomputed from the collective's printed shape and the groups are costed one by one, so the
 * views and this file check each other (tests/test_reports.c).
 * Invariant: an unknown trip count is never taken as 1; such collectives are totalled apart. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "reports/report_int.h"

/* ---- bytes of a shape in HLO text ---------------------------------------------------------- */

/* shape := '(' (shape (',' shape)*)? ')' | dtype ('[' (dim (',' dim)*)? ']')? layout?
 * dim := ('<=')? INT | '?'        (a bounded dim counts its bound) */
static bool
shape_bytes(const char **pp, double *out)
{
    const char *p = *pp;
    while (*p == ' ')
        p++;
    if (*p == '(') {
        double total = 0;
        p++;
        while (*p == ' ')
            p++;
        while (*p && *p != ')') {
            double one = 0;
            if (!shape_bytes(&p, &one))
                return false;
            total += one;
            while (*p == ' ' || *p == ',')
                p++;
        }
        if (*p != ')')
            return false;
        *pp = p + 1;
        *out = total;
        return true;
    }
    const char *name = p;
    while (isalnum((unsigned char)*p))
        p++;
    IrDtype dt;
    if (p == name || !ir_dtype_from_name((SlStr){name, (size_t)(p - name)}, &dt))
        return false;
    double elems = 1;
    if (*p == '[') {
        p++;
        while (*p && *p != ']') {
            if (p[0] == '<' && p[1] == '=')
                p += 2;
            if (*p == '?')
                return false; /* unbounded: no size */
            char *end = NULL;
            long long d = strtoll(p, &end, 10);
            if (end == p || d < 0)
                return false;
            elems *= (double)d;
            p = end;
            if (*p == ',')
                p++;
        }
        if (*p != ']')
            return false;
        p++;
    }
    if (*p == '{') { /* a layout, if any: skip it */
        int depth = 0;
        do {
            depth += *p == '{' ? 1 : *p == '}' ? -1 : 0;
            p++;
        } while (*p && depth > 0);
    }
    *pp = p;
    *out = elems * (double)ir_dtype_bits(dt) / 8.0;
    return true;
}

bool
report_shape_bytes(const char *shape, double *bytes)
{
    const char *p = shape;
    double v = 0;
    if (!p || !shape_bytes(&p, &v))
        return false;
    while (*p == ' ')
        p++;
    if (*p)
        return false;
    *bytes = v;
    return true;
}

/* ---- accumulation ------------------------------------------------------------------------- */

typedef struct Build {
    const TraceRun *run;
    const ReportOptions *o;
    SlArena *arena;
    Report *r;
    double *send, *recv;            /* per device, the current collective, one execution */
    bool *member;                   /* per device: in some group of the current collective */
    SlVec kinds, sources, op_names; /* ReportRow */
    SlMap kinds_at, sources_at, op_names_at; /* hash of a row's key -> index + 1 (row_get) */
    bool oom;
} Build;

void
report_traffic_add(ReportTraffic *t, const ReportCollective *c)
{
    t->collectives++;
    if (c->trip_count < 0) {
        t->unknown_trip_collectives++;
        t->unknown_send_bytes += c->send_bytes;
        t->unknown_recv_bytes += c->recv_bytes;
        t->unknown_time_us += c->time_us;
        return;
    }
    double trips = (double)c->trip_count;
    t->send_bytes += c->send_bytes * trips;
    t->recv_bytes += c->recv_bytes * trips;
    t->time_us += c->time_us * trips;
}

static bool
row_matches(const ReportRow *row, const char *key, const char *op_name, bool match_op_name)
{
    if (strcmp(row->key, key) != 0)
        return false;
    return !match_op_name || row->op_name == op_name ||
           (row->op_name && op_name && strcmp(row->op_name, op_name) == 0);
}

/* The row for `key` (and `op_name` when it is matched too), added when new. `at` finds it by
 * hash; a collision falls back to looking through all rows. */
static ReportRow *
row_get(Build *b, SlVec *rows, SlMap *at, const char *key, const char *op_name, bool match_op_name)
{
    uint64_t h = sl_hash_bytes(key, strlen(key));
    if (match_op_name)
        h = h * 31 + (op_name ? sl_hash_bytes(op_name, strlen(op_name)) + 1 : 0);
    if (h == SL_MAP_EMPTY)
        h--;
    uint64_t idx = 0;
    bool hashed = sl_map_get(at, h, &idx);
    if (hashed && row_matches(&SL_VEC_AT(rows, ReportRow, idx - 1), key, op_name, match_op_name))
        return &SL_VEC_AT(rows, ReportRow, idx - 1);
    for (size_t k = 0; hashed && k < rows->len; k++) {
        ReportRow *row = &SL_VEC_AT(rows, ReportRow, k);
        if (row_matches(row, key, op_name, match_op_name))
            return row;
    }
    ReportRow fresh = {key, op_name, NULL, {0}};
    if (!SL_VEC_PUSH(rows, ReportRow, fresh) || (!hashed && !sl_map_put(at, h, rows->len))) {
        b->oom = true;
        return NULL;
    }
    return &SL_VEC_AT(rows, ReportRow, rows->len - 1);
}

/* S of the cost model for a group of `g`, from the collective's own (local) result shape:
 * all-gather Out, reduce-scatter In = g x Out, the others their buffer. Asynchronous starts and
 * ragged all-to-all print other shapes: for them the recorded S is used. */
static double
full_bytes(const TraceRunCollective *c, const char *opcode, ReportKind kind, int64_t g)
{
    double out = 0;
    bool own = opcode && !strstr(opcode, "-start") && !strstr(opcode, "ragged") &&
               report_shape_bytes(c->shape, &out);
    if (!own)
        return kind == RK_REDUCE_SCATTER && c->group_size > 0
                   ? c->bytes / (double)c->group_size * (double)g
                   : c->bytes;
    return kind == RK_REDUCE_SCATTER ? out * (double)g : out;
}

/* Costs every group of `c` into b->send/recv/member and fills the per-execution figures. */
static void
cost_groups(Build *b, const TraceRunCollective *c, ReportCollective *rc, ReportKind kind)
{
    uint32_t nd = b->r->n_devices;
    memset(b->send, 0, nd * sizeof(*b->send));
    memset(b->recv, 0, nd * sizeof(*b->recv));
    memset(b->member, 0, nd * sizeof(*b->member));
    int64_t biggest = 0;
    double slowest = 0;
    for (int64_t g = 0; g < c->n_groups && c->devices; g++) {
        uint32_t off = c->group_offsets[g], n = c->group_offsets[g + 1] - off;
        const int64_t *dev = c->devices + off;
        biggest = n > biggest ? n : biggest;
        for (uint32_t k = 0; k < n; k++)
            if (dev[k] >= 0 && dev[k] < nd)
                b->member[dev[k]] = true;
        double s = full_bytes(c, rc->opcode, kind, n), per = 0;
        uint32_t steps = 0;
        if (kind == RK_PERMUTE) {
            if (n == 2 && dev[0] != dev[1] && dev[0] >= 0 && dev[0] < nd && dev[1] >= 0 &&
                dev[1] < nd) {
                b->send[dev[0]] += s;
                b->recv[dev[1]] += s;
                per = s;
                steps = 1;
            }
        } else {
            per = report_ring_bytes(kind, n, s);
            steps = report_ring_steps(kind, n);
            for (uint32_t k = 0; k < n; k++) {
                if (dev[k] >= 0 && dev[k] < nd) {
                    b->send[dev[k]] += per;
                    b->recv[dev[k]] += per;
                }
            }
        }
        bool crosses = report_crosses_nodes(b->o, dev, n);
        double t = steps ? report_time_us(b->o, steps, per, crosses) : 0;
        rc->crosses_nodes = rc->crosses_nodes || crosses;
        if (t > slowest) {
            slowest = t;
            rc->steps = steps;
        }
    }
    rc->group_size = kind == RK_PERMUTE ? 2 : biggest;
    rc->bytes = full_bytes(c, rc->opcode, kind, biggest ? biggest : c->group_size);
    rc->time_us = slowest;
    for (uint32_t d = 0; d < nd; d++) {
        rc->send_bytes += b->send[d];
        rc->recv_bytes += b->recv[d];
        if (b->send[d] > rc->max_device_send_bytes)
            rc->max_device_send_bytes = b->send[d];
    }
}

static void
add_to_devices(Build *b, const ReportCollective *rc)
{
    for (uint32_t d = 0; d < b->r->n_devices; d++) {
        if (!b->member[d])
            continue;
        ReportCollective mine = *rc;
        mine.send_bytes = b->send[d];
        mine.recv_bytes = b->recv[d];
        mine.time_us = 0;
        report_traffic_add(&b->r->devices[d].t, &mine);
    }
}

static const char *
name_of(const TraceRun *run, uint32_t idx)
{
    return idx < run->n_instrs ? run->instrs[idx].name : NULL;
}

static void
add_collective(Build *b, const TraceRunCollective *c, ReportCollective *rc)
{
    const TraceRun *run = b->run;
    const TraceRunInstr *in = c->instr < run->n_instrs ? &run->instrs[c->instr] : NULL;
    const TraceRunInstr *src = c->source < run->n_instrs ? &run->instrs[c->source] : NULL;
    ReportKind kind = report_kind_of(c->kind);
    rc->name = in ? in->name : "";
    rc->opcode = in ? in->opcode : c->kind;
    rc->computation = in ? in->computation : "";
    rc->kind = c->kind;
    rc->shape = c->shape;
    rc->source = name_of(run, c->source);
    rc->op_name = src ? src->op_name : in ? in->op_name : NULL;
    rc->cause = c->cause;
    rc->channel_id = c->has_channel_id ? c->channel_id : -1;
    rc->n_groups = c->n_groups;
    rc->trip_count = c->trip_count < 0 ? -1 : c->trip_count;
    rc->max_trip_count = c->trip_count < 0 && c->max_trip_count >= 0 ? c->max_trip_count : -1;
    cost_groups(b, c, rc, kind);
    if (b->r->n_axes) {
        rc->axes = report_mesh_axes_of(b->r->axes, b->r->n_axes, c, kind == RK_PERMUTE, b->arena);
        b->oom = b->oom || !rc->axes;
    }
    add_to_devices(b, rc);
    report_traffic_add(&b->r->total, rc);
    ReportRow *row = row_get(b, &b->kinds, &b->kinds_at, rc->kind, NULL, false);
    if (row)
        report_traffic_add(&row->t, rc);
    row = row_get(b, &b->sources, &b->sources_at, rc->source ? rc->source : "", rc->op_name, true);
    if (row) {
        row->opcode = src ? src->opcode : NULL;
        report_traffic_add(&row->t, rc);
    }
    row = row_get(b, &b->op_names, &b->op_names_at, rc->op_name ? rc->op_name : "", NULL, false);
    if (row)
        report_traffic_add(&row->t, rc);
}

/* ---- ordering ------------------------------------------------------------------------------ */

static int
by_key(const void *pa, const void *pb)
{
    const ReportRow *a = pa, *b = pb;
    return strcmp(a->key, b->key);
}

/* Most bytes first (known, then unknown per execution), then by key and op_name. */
static int
by_bytes(const void *pa, const void *pb)
{
    const ReportRow *a = pa, *b = pb;
    if (a->t.send_bytes != b->t.send_bytes)
        return a->t.send_bytes > b->t.send_bytes ? -1 : 1;
    if (a->t.unknown_send_bytes != b->t.unknown_send_bytes)
        return a->t.unknown_send_bytes > b->t.unknown_send_bytes ? -1 : 1;
    int c = strcmp(a->key, b->key);
    if (c)
        return c;
    return strcmp(a->op_name ? a->op_name : "", b->op_name ? b->op_name : "");
}

static ReportRow *
take_rows(Build *b, SlVec *rows, uint32_t *n, int (*cmp)(const void *, const void *))
{
    ReportRow *out = NULL;
    *n = 0;
    if (rows->len) {
        qsort(rows->data, rows->len, sizeof(ReportRow), cmp);
        out = SL_DUP_ARRAY(b->arena, ReportRow, rows->data, rows->len);
        if (out)
            *n = (uint32_t)rows->len;
        else
            b->oom = true;
    }
    sl_vec_fini(rows);
    return out;
}

/* ---- entry point -------------------------------------------------------------------------- */

static SlStatus
check_options(const ReportOptions *o, SlError *err)
{
    SlSrcLoc nowhere = {NULL, 0, 0};
    if (!(o->link_gbps > 0) || !(o->inter_node_gbps > 0))
        return sl_fail(err, SL_ERR_INVALID, nowhere, "link bandwidths must be positive");
    if (!(o->latency_us >= 0))
        return sl_fail(err, SL_ERR_INVALID, nowhere, "latency must be zero or positive");
    if (o->devices_per_node < 0)
        return sl_fail(err, SL_ERR_INVALID, nowhere, "devices per node must be positive");
    return SL_OK;
}

static uint32_t
device_count(const TraceRun *run)
{
    int64_t n = run->num_partitions > 0 ? run->num_partitions : 0;
    for (uint32_t k = 0; k < run->n_collectives; k++) {
        const TraceRunCollective *c = &run->collectives[k];
        uint32_t total = c->devices && c->n_groups > 0 ? c->group_offsets[c->n_groups] : 0;
        for (uint32_t j = 0; j < total; j++)
            if (c->devices[j] >= n && c->devices[j] < (int64_t)UINT32_MAX / 2)
                n = c->devices[j] + 1;
    }
    return (uint32_t)n;
}

/* The run's warnings grouped by kind, kinds in order of first appearance. */
static void
take_warnings(Build *b)
{
    const TraceRun *run = b->run;
    Report *r = b->r;
    if (!run->n_warnings)
        return;
    r->warnings = SL_NEW_ARRAY(b->arena, ReportWarning, run->n_warnings);
    bool *taken = calloc(run->n_warnings, sizeof(bool));
    if (!r->warnings || !taken) {
        free(taken);
        b->oom = true;
        return;
    }
    for (uint32_t k = 0; k < run->n_warnings; k++) {
        if (taken[k])
            continue;
        const char *kind = run->warnings[k].kind ? run->warnings[k].kind : "other";
        for (uint32_t j = k; j < run->n_warnings; j++) {
            const TraceRunWarning *w = &run->warnings[j];
            if (taken[j] || strcmp(w->kind ? w->kind : "other", kind) != 0)
                continue;
            taken[j] = true;
            const TraceRunInstr *i = w->instr < run->n_instrs ? &run->instrs[w->instr] : NULL;
            ReportWarning x = {kind, i ? i->name : NULL, i ? i->op_name : NULL,
                               w->message ? w->message : ""};
            r->warnings[r->n_warnings++] = x;
        }
    }
    free(taken);
}

/* The traffic of the sources the partitioner took by custom-call fallback (Report.fallback). */
static void
sum_fallback(Report *r)
{
    for (uint32_t w = 0; w < r->n_warnings; w++) {
        const ReportWarning *x = &r->warnings[w];
        if (!x->instr || strcmp(x->kind, "custom-call-fallback") != 0)
            continue;
        for (uint32_t s = 0; s < r->n_sources; s++) {
            const ReportRow *row = &r->sources[s];
            if (strcmp(row->key, x->instr) != 0)
                continue;
            const ReportTraffic *t = &row->t;
            r->fallback.collectives += t->collectives;
            r->fallback.send_bytes += t->send_bytes;
            r->fallback.recv_bytes += t->recv_bytes;
            r->fallback.time_us += t->time_us;
            r->fallback.unknown_trip_collectives += t->unknown_trip_collectives;
            r->fallback.unknown_send_bytes += t->unknown_send_bytes;
            r->fallback.unknown_recv_bytes += t->unknown_recv_bytes;
            r->fallback.unknown_time_us += t->unknown_time_us;
            r->n_fallback_sources++;
            break;
        }
    }
}

/* The while loops, each with the collectives it runs (through every loop nested in it). */
static void
finish_whiles(Build *b)
{
    const TraceRun *run = b->run;
    Report *r = b->r;
    r->whiles = SL_NEW_ARRAY(b->arena, ReportWhile, run->n_whiles + 1);
    if (!r->whiles) {
        b->oom = true;
        return;
    }
    for (uint32_t k = 0; k < run->n_whiles; k++) {
        const TraceRunWhile *w = &run->whiles[k];
        const TraceRunInstr *in = w->instr < run->n_instrs ? &run->instrs[w->instr] : NULL;
        ReportWhile x = {in ? in->name : "",  name_of(run, w->source),
                         in ? in->computation : "", w->trip_count, w->method, w->reason,
                         w->executions, 0,  0};
        r->whiles[k] = x;
    }
    r->n_whiles = run->n_whiles;
    for (uint32_t k = 0; k < run->n_collectives && k < r->n_collectives; k++) {
        bool in_unknown_loop = false;
        /* up the chain of enclosing loops; outer indices are smaller, so this ends */
        for (uint32_t l = run->collectives[k].loop, n = 0; l < r->n_whiles && n <= r->n_whiles;
             l = run->whiles[l].outer, n++) {
            r->whiles[l].collectives++;
            r->whiles[l].send_bytes_per_execution += r->collectives[k].send_bytes;
            in_unknown_loop = in_unknown_loop || r->whiles[l].trip_count < 0;
        }
        r->n_unknown_in_branches += r->collectives[k].trip_count < 0 && !in_unknown_loop;
    }
}

static void
finish(Build *b)
{
    Report *r = b->r;
    r->bottleneck_device = -1;
    double most = 0;
    for (uint32_t d = 0; d < r->n_devices; d++) {
        double v = r->devices[d].t.send_bytes + r->devices[d].t.recv_bytes;
        if (v > most) {
            most = v;
            r->bottleneck_device = (int64_t)d;
        }
    }
    r->kinds = take_rows(b, &b->kinds, &r->n_kinds, by_key);
    r->sources = take_rows(b, &b->sources, &r->n_sources, by_bytes);
    r->op_names = take_rows(b, &b->op_names, &r->n_op_names, by_bytes);
    const TraceRun *run = b->run;
    finish_whiles(b);
    r->loops = run->n_loops ? SL_NEW_ARRAY(b->arena, ReportLoop, run->n_loops) : NULL;
    b->oom = b->oom || (run->n_loops && !r->loops);
    for (uint32_t k = 0; r->loops && k < run->n_loops; k++) {
        const TraceRunLoop *l = &run->loops[k];
        const char *dot = name_of(run, l->dot);
        ReportLoop x = {dot ? dot : "", l->loop_name, l->variant, l->iterations,
                        l->bytes_per_iteration};
        r->loops[r->n_loops++] = x;
    }
    take_warnings(b);
    sum_fallback(r);
}

void
report_options_init(ReportOptions *o)
{
    memset(o, 0, sizeof(*o));
    o->link_gbps = REPORT_DEFAULT_LINK_GBPS;
    o->latency_us = REPORT_DEFAULT_LATENCY_US;
    o->inter_node_gbps = REPORT_DEFAULT_INTER_NODE_GBPS;
    o->is_default_link = o->is_default_latency = o->is_default_inter = true;
}

SlStatus
report_build(const TraceRun *run, const ReportOptions *o, SlArena *arena, Report **out,
             SlError *err)
{
    SlSrcLoc nowhere = {NULL, 0, 0};
    if (check_options(o, err))
        return err->status;
    Report *r = SL_NEW(arena, Report);
    if (!r)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    r->module = run->module;
    r->input_hash = run->input_hash;
    r->tool_version = run->tool_version;
    r->num_partitions = run->num_partitions;
    r->model = *o;
    if (o->mesh) {
        SlStatus st =
            report_mesh_parse(o->mesh, run->num_partitions, arena, &r->axes, &r->n_axes, err);
        if (st)
            return st;
        r->model.mesh = report_mesh_print(r->axes, r->n_axes, arena);
    }
    r->n_devices = device_count(run);
    Build b = {run, o, arena, r, NULL, NULL, NULL, {0}, {0}, {0}, {0}, {0}, {0}, false};
    sl_map_init(&b.kinds_at);
    sl_map_init(&b.sources_at);
    sl_map_init(&b.op_names_at);
    size_t nd = r->n_devices ? r->n_devices : 1;
    b.send = calloc(nd, sizeof(double));
    b.recv = calloc(nd, sizeof(double));
    b.member = calloc(nd, sizeof(bool));
    r->devices = SL_NEW_ARRAY(arena, ReportDevice, nd);
    r->collectives = SL_NEW_ARRAY(arena, ReportCollective, run->n_collectives + 1);
    b.oom = !b.send || !b.recv || !b.member || !r->devices || !r->collectives;
    for (uint32_t d = 0; !b.oom && d < r->n_devices; d++)
        r->devices[d].device = d;
    for (uint32_t k = 0; !b.oom && k < run->n_collectives; k++) {
        add_collective(&b, &run->collectives[k], &r->collectives[k]);
        r->n_collectives = k + 1;
    }
    if (!b.oom)
        finish(&b);
    if (!b.oom && !report_memory_build(run, o, arena, r))
        b.oom = true;
    if (!b.oom && !report_rollup_build(run, arena, r))
        b.oom = true;
    free(b.send);
    free(b.recv);
    free(b.member);
    sl_vec_fini(&b.kinds);
    sl_vec_fini(&b.sources);
    sl_vec_fini(&b.op_names);
    sl_map_fini(&b.kinds_at);
    sl_map_fini(&b.sources_at);
    sl_map_fini(&b.op_names_at);
    if (b.oom || sl_arena_failed(arena))
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory building the report");
    *out = r;
    return SL_OK;
}
