/* summary_json.c - summary.json (schema/summary.schema.json): writing a Report, and reading one
 * back for diff. Owns: the JSON key names and their order (fixed: scripts rely on them) and the
 * only use of cJSON in the project. Invariant: byte-for-byte deterministic for equal reports;
 * nothing that changes from run to run (run id, clock, duration) is written. */
#include <cJSON.h>
#include <string.h>

#include "reports/report_int.h"

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct Js {
    bool oom;
} Js;

static cJSON *
chk(Js *js, cJSON *item)
{
    if (!item)
        js->oom = true;
    return item;
}

static void
num(Js *js, cJSON *o, const char *key, double v)
{
    chk(js, cJSON_AddNumberToObject(o, key, v));
}

static void
str(Js *js, cJSON *o, const char *key, const char *v)
{
    chk(js, v ? cJSON_AddStringToObject(o, key, v) : cJSON_AddNullToObject(o, key));
}

static void
num_or_null(Js *js, cJSON *o, const char *key, bool present, double v)
{
    chk(js, present ? cJSON_AddNumberToObject(o, key, v) : cJSON_AddNullToObject(o, key));
}

static cJSON *
add_object(Js *js, cJSON *array)
{
    cJSON *o = chk(js, cJSON_CreateObject());
    if (o && !cJSON_AddItemToArray(array, o)) {
        cJSON_Delete(o);
        js->oom = true;
        return NULL;
    }
    return o;
}

static void
put_traffic(Js *js, cJSON *o, const ReportTraffic *t, bool with_time)
{
    num(js, o, "collectives", t->collectives);
    num(js, o, "send_bytes", t->send_bytes);
    num(js, o, "recv_bytes", t->recv_bytes);
    if (with_time)
        num(js, o, "time_us", t->time_us);
    num(js, o, "unknown_trip_collectives", t->unknown_trip_collectives);
    num(js, o, "unknown_trip_send_bytes_per_execution", t->unknown_send_bytes);
    num(js, o, "unknown_trip_recv_bytes_per_execution", t->unknown_recv_bytes);
    if (with_time)
        num(js, o, "unknown_trip_time_us_per_execution", t->unknown_time_us);
}

static void
put_model(Js *js, cJSON *root, const Report *r)
{
    cJSON *m = chk(js, cJSON_AddObjectToObject(root, "model"));
    if (!m)
        return;
    str(js, m, "algorithm", "ring");
    str(js, m, "bandwidth_convention", "nccl-tests bus bandwidth");
    num(js, m, "link_gbps", r->model.link_gbps);
    num(js, m, "latency_us", r->model.latency_us);
    bool two = r->model.devices_per_node > 0;
    num_or_null(js, m, "devices_per_node", two, (double)r->model.devices_per_node);
    num_or_null(js, m, "inter_node_gbps", two, r->model.inter_node_gbps);
    cJSON *mesh = chk(js, r->n_axes ? cJSON_AddArrayToObject(root, "mesh")
                                    : cJSON_AddNullToObject(root, "mesh"));
    for (uint32_t k = 0; mesh && k < r->n_axes; k++) {
        cJSON *a = add_object(js, mesh);
        if (a) {
            str(js, a, "name", r->axes[k].name);
            num(js, a, "size", (double)r->axes[k].size);
        }
    }
}

static void
put_collective(Js *js, cJSON *o, const ReportCollective *c)
{
    bool known = c->trip_count >= 0;
    double trips = known ? (double)c->trip_count : 0;
    str(js, o, "name", c->name);
    str(js, o, "kind", c->kind);
    str(js, o, "source", c->source);
    num_or_null(js, o, "trip_count", known, trips);
    if (!known && c->max_trip_count >= 0) /* only then, so older summaries stay byte-stable */
        num(js, o, "trip_count_at_most", (double)c->max_trip_count);
    str(js, o, "op_name", c->op_name);
    str(js, o, "opcode", c->opcode);
    str(js, o, "computation", c->computation);
    str(js, o, "shape", c->shape);
    num_or_null(js, o, "channel_id", c->channel_id >= 0, (double)c->channel_id);
    num(js, o, "group_size", (double)c->group_size);
    num(js, o, "n_groups", (double)c->n_groups);
    str(js, o, "axes", c->axes);
    str(js, o, "cause", c->cause);
    num(js, o, "bytes", c->bytes);
    num(js, o, "send_bytes_per_execution", c->send_bytes);
    num(js, o, "recv_bytes_per_execution", c->recv_bytes);
    num(js, o, "max_device_send_bytes_per_execution", c->max_device_send_bytes);
    num(js, o, "time_us_per_execution", c->time_us);
    num_or_null(js, o, "send_bytes", known, c->send_bytes * trips);
    num_or_null(js, o, "time_us", known, c->time_us * trips);
    num(js, o, "steps", c->steps);
    chk(js, cJSON_AddBoolToObject(o, "crosses_nodes", c->crosses_nodes));
}

static void
put_rows(Js *js, cJSON *root, const char *name, const char *key_name, const ReportRow *rows,
         uint32_t n, bool is_source)
{
    cJSON *a = chk(js, cJSON_AddArrayToObject(root, name));
    for (uint32_t k = 0; a && k < n; k++) {
        cJSON *o = add_object(js, a);
        if (!o)
            return;
        const char *key = rows[k].key[0] ? rows[k].key : NULL;
        str(js, o, key_name, key);
        if (is_source) {
            str(js, o, "op_name", rows[k].op_name);
            str(js, o, "opcode", rows[k].opcode);
        }
        put_traffic(js, o, &rows[k].t, true);
    }
}

static void
put_body(Js *js, cJSON *root, const Report *r)
{
    cJSON *t = chk(js, cJSON_AddObjectToObject(root, "totals"));
    if (t) {
        put_traffic(js, t, &r->total, true);
        num_or_null(js, t, "bottleneck_device", r->bottleneck_device >= 0,
                    (double)r->bottleneck_device);
        const ReportTraffic *b =
            r->bottleneck_device >= 0 ? &r->devices[r->bottleneck_device].t : NULL;
        num(js, t, "bottleneck_send_bytes", b ? b->send_bytes : 0);
        num(js, t, "bottleneck_recv_bytes", b ? b->recv_bytes : 0);
        cJSON *f = chk(js, cJSON_AddObjectToObject(t, "fallback"));
        if (f) {
            num(js, f, "sources", (double)r->n_fallback_sources);
            num(js, f, "collectives", (double)r->fallback.collectives);
            num(js, f, "send_bytes", r->fallback.send_bytes);
            num(js, f, "recv_bytes", r->fallback.recv_bytes);
        }
    }
    cJSON *d = chk(js, cJSON_AddArrayToObject(root, "devices"));
    for (uint32_t k = 0; d && k < r->n_devices; k++) {
        cJSON *o = add_object(js, d);
        if (!o)
            break;
        num(js, o, "device", (double)r->devices[k].device);
        put_traffic(js, o, &r->devices[k].t, false);
    }
    cJSON *c = chk(js, cJSON_AddArrayToObject(root, "collectives"));
    for (uint32_t k = 0; c && k < r->n_collectives; k++) {
        cJSON *o = add_object(js, c);
        if (!o)
            break;
        put_collective(js, o, &r->collectives[k]);
    }
    put_rows(js, root, "kinds", "kind", r->kinds, r->n_kinds, false);
    put_rows(js, root, "sources", "source", r->sources, r->n_sources, true);
    put_rows(js, root, "op_names", "op_name", r->op_names, r->n_op_names, false);
    cJSON *l = chk(js, cJSON_AddArrayToObject(root, "windowed_loops"));
    for (uint32_t k = 0; l && k < r->n_loops; k++) {
        cJSON *o = add_object(js, l);
        if (!o)
            break;
        str(js, o, "dot", r->loops[k].dot);
        str(js, o, "loop", r->loops[k].loop);
        str(js, o, "variant", r->loops[k].variant);
        num(js, o, "iterations", (double)r->loops[k].iterations);
        num(js, o, "bytes_per_iteration", (double)r->loops[k].bytes_per_iteration);
    }
    cJSON *wa = chk(js, cJSON_AddArrayToObject(root, "warnings"));
    for (uint32_t k = 0; wa && k < r->n_warnings; k++) {
        cJSON *o = add_object(js, wa);
        if (!o)
            break;
        str(js, o, "kind", r->warnings[k].kind);
        str(js, o, "instr", r->warnings[k].instr);
        str(js, o, "op_name", r->warnings[k].op_name);
        str(js, o, "message", r->warnings[k].message);
    }
    cJSON *wl = chk(js, cJSON_AddArrayToObject(root, "while_loops"));
    for (uint32_t k = 0; wl && k < r->n_whiles; k++) {
        const ReportWhile *w = &r->whiles[k];
        cJSON *o = add_object(js, wl);
        if (!o)
            break;
        str(js, o, "loop", w->loop);
        str(js, o, "source", w->source);
        str(js, o, "computation", w->computation);
        num_or_null(js, o, "trip_count", w->trip_count >= 0, (double)w->trip_count);
        str(js, o, "method", w->method);
        str(js, o, "reason", w->reason);
        num_or_null(js, o, "executions", w->executions >= 0, (double)w->executions);
        num(js, o, "collectives", w->collectives);
        num(js, o, "send_bytes_per_execution", w->send_bytes_per_execution);
    }
}

SlStatus
report_write_json(const Report *r, SlBuf *out, SlError *err)
{
    SlSrcLoc nowhere = {NULL, 0, 0};
    Js js = {false};
    cJSON *root = chk(&js, cJSON_CreateObject());
    if (root) {
        num(&js, root, "schema_version", REPORT_SCHEMA_VERSION);
        str(&js, root, "tool", "shardlens");
        str(&js, root, "traced_by", r->tool_version);
        str(&js, root, "module", r->module);
        str(&js, root, "input_hash", r->input_hash);
        num(&js, root, "num_partitions", (double)r->num_partitions);
        put_model(&js, root, r);
        put_body(&js, root, r);
        if (!js.oom && !report_rollup_put_json(r, root))
            js.oom = true;
        if (!js.oom && !report_memory_put_json(r, root))
            js.oom = true;
    }
    char *text = js.oom ? NULL : cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory writing the summary");
    sl_buf_puts(out, text);
    sl_buf_putc(out, '\n');
    cJSON_free(text);
    return out->failed ? sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory") : SL_OK;
}

/* ---- reading back ---------------------------------------------------------------------------- */

typedef struct Rd {
    const char *path;
    SlArena *arena;
    SlError *err;
} Rd;

static SlStatus
bad(Rd *rd, const char *what, const char *where, int index)
{
    SlSrcLoc loc = {rd->path, 0, 0};
    if (index >= 0)
        return sl_fail(rd->err, SL_ERR_INVALID, loc,
                       "not a shardlens summary: %s[%d] has no valid '%s'", where, index, what);
    return sl_fail(rd->err, SL_ERR_INVALID, loc, "not a shardlens summary: no valid '%s'%s%s", what,
                   where ? " in " : "", where ? where : "");
}

static const char *
get_str(Rd *rd, const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v))
        return NULL;
    return sl_arena_strndup(rd->arena, v->valuestring, strlen(v->valuestring));
}

static bool
get_num(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        return false;
    *out = v->valuedouble;
    return true;
}

static double
num_or(const cJSON *o, const char *key, double dflt)
{
    double v = dflt;
    return get_num(o, key, &v) ? v : dflt;
}

int64_t
report_json_i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

static uint32_t
to_u32(double v)
{
    if (!(v > 0))
        return 0;
    return v >= 4294967295.0 ? UINT32_MAX : (uint32_t)v;
}

static SlStatus
read_devices(Rd *rd, const cJSON *root, Report *r)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (!cJSON_IsArray(a))
        return bad(rd, "devices", NULL, -1);
    int n = cJSON_GetArraySize(a);
    r->devices = SL_NEW_ARRAY(rd->arena, ReportDevice, (size_t)n + 1);
    if (!r->devices)
        return bad(rd, "devices", NULL, -1);
    for (int k = 0; k < n; k++) {
        const cJSON *o = cJSON_GetArrayItem(a, k);
        ReportDevice *d = &r->devices[k];
        double dev = 0;
        if (!get_num(o, "device", &dev))
            return bad(rd, "device", "devices", k);
        d->device = report_json_i64(dev);
        if (!get_num(o, "send_bytes", &d->t.send_bytes))
            return bad(rd, "send_bytes", "devices", k);
        if (!get_num(o, "recv_bytes", &d->t.recv_bytes))
            return bad(rd, "recv_bytes", "devices", k);
        d->t.collectives = to_u32(num_or(o, "collectives", 0));
        d->t.unknown_trip_collectives = to_u32(num_or(o, "unknown_trip_collectives", 0));
        d->t.unknown_send_bytes = num_or(o, "unknown_trip_send_bytes_per_execution", 0);
        d->t.unknown_recv_bytes = num_or(o, "unknown_trip_recv_bytes_per_execution", 0);
    }
    r->n_devices = (uint32_t)n;
    return SL_OK;
}

static SlStatus
read_collective(Rd *rd, const cJSON *o, int k, ReportCollective *c)
{
    c->name = get_str(rd, o, "name");
    c->kind = get_str(rd, o, "kind");
    if (!c->name)
        return bad(rd, "name", "collectives", k);
    if (!c->kind)
        return bad(rd, "kind", "collectives", k);
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(o, "source");
    if (!cJSON_IsString(src) && !cJSON_IsNull(src))
        return bad(rd, "source", "collectives", k);
    c->source = get_str(rd, o, "source");
    const cJSON *trip = cJSON_GetObjectItemCaseSensitive(o, "trip_count");
    if (!cJSON_IsNumber(trip) && !cJSON_IsNull(trip))
        return bad(rd, "trip_count", "collectives", k);
    c->trip_count = cJSON_IsNumber(trip) ? report_json_i64(trip->valuedouble) : -1;
    c->max_trip_count = report_json_i64(num_or(o, "trip_count_at_most", -1));
    c->op_name = get_str(rd, o, "op_name");
    c->opcode = get_str(rd, o, "opcode");
    c->computation = get_str(rd, o, "computation");
    c->shape = get_str(rd, o, "shape");
    c->axes = get_str(rd, o, "axes");
    c->cause = get_str(rd, o, "cause");
    c->channel_id = report_json_i64(num_or(o, "channel_id", -1));
    c->group_size = report_json_i64(num_or(o, "group_size", 0));
    c->n_groups = report_json_i64(num_or(o, "n_groups", 0));
    c->bytes = num_or(o, "bytes", 0);
    c->send_bytes = num_or(o, "send_bytes_per_execution", 0);
    c->recv_bytes = num_or(o, "recv_bytes_per_execution", c->send_bytes);
    c->max_device_send_bytes = num_or(o, "max_device_send_bytes_per_execution", 0);
    c->time_us = num_or(o, "time_us_per_execution", 0);
    c->steps = to_u32(num_or(o, "steps", 0));
    return SL_OK;
}

SlStatus
report_parse_json(SlStr text, const char *path, SlArena *arena, Report **out, SlError *err)
{
    Rd rd = {path, arena, err};
    cJSON *root = cJSON_ParseWithLength(text.ptr, text.len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        SlSrcLoc loc = {path, 1, 1};
        for (const char *p = text.ptr; at && p < at && p < text.ptr + text.len; p++) {
            if (*p == '\n') {
                loc.line++;
                loc.col = 1;
            } else {
                loc.col++;
            }
        }
        return sl_fail(err, SL_ERR_PARSE, loc, "not valid JSON");
    }
    SlStatus st = SL_OK;
    Report *r = SL_NEW(arena, Report);
    double version = 0;
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
    bool newer = cJSON_IsNumber(sv) && sv->valuedouble > REPORT_SCHEMA_VERSION;
    if (!r) {
        st = bad(&rd, "schema_version", NULL, -1);
    } else if (!newer && (st = report_check_summary(root, path, err)) != SL_OK) {
        st = bad(&rd, "schema_version", NULL, -1);
    } else if (!get_num(root, "schema_version", &version)) {
        st = bad(&rd, "schema_version", NULL, -1);
    } else if (version > REPORT_SCHEMA_VERSION) {
        SlSrcLoc loc = {path, 0, 0};
        st = sl_fail(err, SL_ERR_INVALID, loc,
                     "summary schema_version %g is newer than this shardlens reads (%d)", version,
                     REPORT_SCHEMA_VERSION);
    } else {
        r->module = get_str(&rd, root, "module");
        r->input_hash = get_str(&rd, root, "input_hash");
        r->tool_version = get_str(&rd, root, "traced_by");
        r->num_partitions = report_json_i64(num_or(root, "num_partitions", 0));
        r->bottleneck_device = -1;
        st = read_devices(&rd, root, r);
    }
    const cJSON *a = st ? NULL : cJSON_GetObjectItemCaseSensitive(root, "collectives");
    if (!st && !cJSON_IsArray(a))
        st = bad(&rd, "collectives", NULL, -1);
    if (!st) {
        int n = cJSON_GetArraySize(a);
        r->collectives = SL_NEW_ARRAY(arena, ReportCollective, (size_t)n + 1);
        for (int k = 0; !st && r->collectives && k < n; k++)
            st = read_collective(&rd, cJSON_GetArrayItem(a, k), k, &r->collectives[k]);
        r->n_collectives = (uint32_t)n;
    }
    if (!st && !report_memory_parse(root, arena, r)) {
        SlSrcLoc loc = {path, 0, 0};
        st = sl_fail(err, SL_ERR_NOMEM, loc, "out of memory reading the summary");
    }
    cJSON_Delete(root);
    if (!st && sl_arena_failed(arena)) {
        SlSrcLoc loc = {path, 0, 0};
        st = sl_fail(err, SL_ERR_NOMEM, loc, "out of memory reading the summary");
    }
    if (!st)
        *out = r;
    return st;
}
