/* diff.c - compares two reports (from trace databases or summary.json files): totals, the
 * busiest device, per kind, per source op matched by name and op_name, and the budget gate.
 * Owns: what "traffic grew" means: the bytes sent summed over devices, and the bytes the
 * busiest device sends plus receives, both per-execution bytes times known trip counts; either
 * growing by more than --max-increase percent fails. Growth from zero is infinite. Exactly at
 * the budget passes. Traffic of unknown trip count cannot be bounded: a source op whose
 * unknown-trip bytes per execution grow (a new one included) fails any budget. Rows are joined
 * by hash, so a diff costs time linear in the collectives (plus sorting the rows).
 * Invariant: figures come from the fixed fields only (devices, collectives), so a summary
 * written by any version of this schema diffs like a trace. */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/report_int.h"

/* Old and new of one figure. */
typedef struct Pair {
    double old_v, new_v;
} Pair;

enum { TRIPS_NONE = -1, TRIPS_MIXED = -2 };

/* One (source, op_name, kind) or (kind) row. */
typedef struct DRow {
    const char *source, *op_name, *kind; /* source/op_name NULL for kind rows */
    Pair count;
    Pair bytes;    /* known trip counts: per-execution bytes times the trip count */
    Pair per_exec; /* the same collectives, one execution each */
    Pair unknown;  /* collectives of unknown trip count, one execution each */
    int64_t trips[2]; /* old, new: the one trip count its known collectives share, TRIPS_NONE
                         (no known one) or TRIPS_MIXED */
    uint32_t next;    /* index + 1 of the next row with the same hash; 0: none */
} DRow;

/* Rows found by hash: `at` maps a key's hash to index + 1 of the first row with it; rows with
 * equal hashes are chained, so a lookup costs one probe plus the (rare) collisions. */
typedef struct Rows {
    SlVec v; /* DRow */
    SlMap at;
} Rows;

typedef struct Agg {
    Pair total, busiest, time, count, unknown;
    int64_t old_dev, new_dev;
    Rows kinds, sources;
    bool oom;
} Agg;

static bool
same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static uint64_t
hash_str(uint64_t h, const char *s)
{
    return h * 1099511628211ull ^ (s ? sl_hash_bytes(s, strlen(s)) + 1 : 0);
}

static DRow *
drow(Agg *g, Rows *rows, const char *source, const char *op_name, const char *kind)
{
    uint64_t h = hash_str(hash_str(hash_str(14695981039346656037ull, source), op_name), kind);
    if (h == SL_MAP_EMPTY)
        h--;
    uint64_t first = 0;
    bool hashed = sl_map_get(&rows->at, h, &first);
    uint32_t last = 0;
    for (uint32_t k = hashed ? (uint32_t)first : 0; k; k = SL_VEC_AT(&rows->v, DRow, k - 1).next) {
        DRow *r = &SL_VEC_AT(&rows->v, DRow, k - 1);
        if (same_str(r->source, source) && same_str(r->op_name, op_name) && same_str(r->kind, kind))
            return r;
        last = k;
    }
    DRow fresh = {source, op_name, kind, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {TRIPS_NONE, TRIPS_NONE},
                  0};
    if (!SL_VEC_PUSH(&rows->v, DRow, fresh)) {
        g->oom = true;
        return NULL;
    }
    uint32_t idx = (uint32_t)rows->v.len;
    if (last)
        SL_VEC_AT(&rows->v, DRow, last - 1).next = idx;
    else if (!sl_map_put(&rows->at, h, idx))
        g->oom = true;
    return &SL_VEC_AT(&rows->v, DRow, idx - 1);
}

static double *
side(Pair *p, bool is_new)
{
    return is_new ? &p->new_v : &p->old_v;
}

static void
row_add(DRow *row, const ReportCollective *c, bool is_new)
{
    bool known = c->trip_count >= 0;
    *side(&row->count, is_new) += 1;
    if (!known) {
        *side(&row->unknown, is_new) += c->send_bytes;
        return;
    }
    *side(&row->bytes, is_new) += c->send_bytes * (double)c->trip_count;
    *side(&row->per_exec, is_new) += c->send_bytes;
    int64_t *t = &row->trips[is_new];
    *t = *t == TRIPS_NONE ? c->trip_count : *t == c->trip_count ? *t : TRIPS_MIXED;
}

static void
collect(Agg *g, const Report *r, bool is_new)
{
    for (uint32_t k = 0; k < r->n_collectives; k++) {
        const ReportCollective *c = &r->collectives[k];
        bool known = c->trip_count >= 0;
        double bytes = known ? c->send_bytes * (double)c->trip_count : 0;
        *side(&g->count, is_new) += 1;
        *side(&g->total, is_new) += bytes;
        *side(&g->time, is_new) += known ? c->time_us * (double)c->trip_count : 0;
        *side(&g->unknown, is_new) += known ? 0 : c->send_bytes;
        DRow *row = drow(g, &g->kinds, NULL, NULL, c->kind);
        if (row)
            row_add(row, c, is_new);
        row = drow(g, &g->sources, c->source ? c->source : "", c->op_name, c->kind);
        if (row)
            row_add(row, c, is_new);
    }
    int64_t best = -1;
    double most = 0;
    for (uint32_t d = 0; d < r->n_devices; d++) {
        double v = r->devices[d].t.send_bytes + r->devices[d].t.recv_bytes;
        if (v > most) { /* ties: the lowest id, listed first */
            most = v;
            best = r->devices[d].device;
        }
    }
    *side(&g->busiest, is_new) = most;
    if (is_new)
        g->new_dev = best;
    else
        g->old_dev = best;
}

/* Traffic of unknown trip count grew: a collective whose count is unknown is new, or moves more
 * per execution than before. Its growth cannot be bounded, so any is growth past a budget. */
static bool
unknown_grew(const DRow *r)
{
    return r->unknown.new_v > r->unknown.old_v;
}

/* Percent change; NAN when growing from zero (infinite). */
static double
pct(Pair p)
{
    if (p.old_v == 0)
        return p.new_v == 0 ? 0 : NAN;
    return (p.new_v - p.old_v) * 100.0 / p.old_v;
}

static bool
over(Pair p, double max_pct)
{
    if (p.new_v <= p.old_v)
        return false;
    if (p.old_v == 0)
        return true;
    return p.new_v * 100.0 > p.old_v * (100.0 + max_pct);
}

static int
by_change(const void *pa, const void *pb)
{
    const DRow *a = pa, *b = pb;
    double da = fabs(a->bytes.new_v - a->bytes.old_v), db = fabs(b->bytes.new_v - b->bytes.old_v);
    if (da != db)
        return da > db ? -1 : 1;
    da = fabs(a->unknown.new_v - a->unknown.old_v);
    db = fabs(b->unknown.new_v - b->unknown.old_v);
    if (da != db)
        return da > db ? -1 : 1;
    int c = strcmp(a->source ? a->source : "", b->source ? b->source : "");
    if (!c)
        c = strcmp(a->op_name ? a->op_name : "", b->op_name ? b->op_name : "");
    return c ? c : strcmp(a->kind, b->kind);
}

static int
by_kind(const void *pa, const void *pb)
{
    return strcmp(((const DRow *)pa)->kind, ((const DRow *)pb)->kind);
}

static const char *
status_of(const DRow *r)
{
    if (r->count.old_v == 0)
        return "added";
    if (r->count.new_v == 0)
        return "removed";
    return r->bytes.old_v == r->bytes.new_v && r->count.old_v == r->count.new_v &&
                   r->unknown.old_v == r->unknown.new_v
               ? "unchanged"
               : "changed";
}

/* ---- text ---------------------------------------------------------------------------------- */

static void
put_change(SlBuf *b, Pair p)
{
    double d = p.new_v - p.old_v;
    if (d >= 0)
        sl_buf_putc(b, '+');
    sl_buf_put_size(b, d);
    double c = pct(p);
    if (isnan(c))
        sl_buf_puts(b, " (new)");
    else if (p.old_v != 0)
        sl_buf_printf(b, " (%+.2f%%)", c);
}

static void
put_figure(SlBuf *b, const char *label, Pair p)
{
    sl_buf_printf(b, "  %-32s ", label);
    sl_buf_put_size(b, p.old_v);
    sl_buf_puts(b, " -> ");
    sl_buf_put_size(b, p.new_v);
    sl_buf_puts(b, "  ");
    put_change(b, p);
    sl_buf_putc(b, '\n');
}

/* " (device 3)", or nothing when no device moves anything */
static void
put_device(SlBuf *b, long long dev)
{
    if (dev >= 0)
        sl_buf_printf(b, " (device %lld)", dev);
}

static void
put_count(SlBuf *b, const char *label, Pair p)
{
    sl_buf_printf(b, "  %-32s %g -> %g  %+g", label, p.old_v, p.new_v, p.new_v - p.old_v);
    double c = pct(p);
    if (isnan(c))
        sl_buf_puts(b, " (new)");
    else if (p.old_v != 0)
        sl_buf_printf(b, " (%+.2f%%)", c);
    sl_buf_putc(b, '\n');
}

/* The verdict of each gated figure. */
typedef struct Gate {
    bool total, busiest, unknown;
    uint32_t n_unknown; /* source rows whose unknown-trip traffic grew */
} Gate;

static const char *
module_name(const Report *r)
{
    return r->module ? r->module : "?";
}

static bool
same_module(const Report *a, const Report *b)
{
    return !a->module || !b->module || strcmp(a->module, b->module) == 0;
}

/* "; 512 B per execution x 3 trips", and what of it has no trip count. */
static void
put_row_trips(SlBuf *b, const DRow *r)
{
    bool is_new = r->count.new_v > 0;
    double per = is_new ? r->per_exec.new_v : r->per_exec.old_v;
    int64_t t = r->trips[is_new];
    if (t > 1 || (t == TRIPS_MIXED && per > 0)) {
        sl_buf_puts(b, "; ");
        sl_buf_put_size(b, per);
        if (t == TRIPS_MIXED)
            sl_buf_puts(b, " per execution, times their trip counts");
        else
            sl_buf_printf(b, " per execution x %lld trips", (long long)t);
    }
    if (r->unknown.old_v != 0 || r->unknown.new_v != 0) {
        sl_buf_puts(b, "; unknown trip count: ");
        sl_buf_put_size(b, r->unknown.old_v);
        sl_buf_puts(b, " -> ");
        sl_buf_put_size(b, r->unknown.new_v);
        sl_buf_puts(b, " per execution");
        if (unknown_grew(r))
            sl_buf_puts(b, " (grew: counts against the budget)");
    }
}

static void
print_sources(const DRow *src, size_t n_src, SlBuf *b)
{
    sl_buf_puts(b, "\nper source op (matched by name and op_name; bytes are per-execution bytes "
                   "times trip counts)\n");
    size_t unchanged = 0;
    for (size_t k = 0; k < n_src; k++) {
        const DRow *r = &src[k];
        const char *st = status_of(r);
        if (strcmp(st, "unchanged") == 0) {
            unchanged++;
            continue;
        }
        sl_buf_printf(b, "  %-8s %s%s %s", st, r->source[0] ? "%" : "",
                      r->source[0] ? r->source : "(none)", r->kind);
        if (r->op_name)
            sl_buf_printf(b, " [%s]", r->op_name);
        sl_buf_printf(b, ": %g -> %g, ", r->count.old_v, r->count.new_v);
        sl_buf_put_size(b, r->bytes.old_v);
        sl_buf_puts(b, " -> ");
        sl_buf_put_size(b, r->bytes.new_v);
        sl_buf_puts(b, "  ");
        put_change(b, r->bytes);
        put_row_trips(b, r);
        sl_buf_putc(b, '\n');
    }
    if (unchanged)
        sl_buf_printf(b, "  (%zu unchanged)\n", unchanged);
    if (unchanged == n_src)
        sl_buf_puts(b, "  no source op changed\n");
}

static void
print_text(const Agg *g, const Report *old_r, const Report *new_r, const DRow *kinds,
           size_t n_kinds, const DRow *src, size_t n_src, const ReportDiffOptions *o,
           const Gate *gate, SlBuf *b)
{
    sl_buf_printf(b, "shardlens diff: %s -> %s (bytes with known trip counts applied)\n",
                  o->old_label ? o->old_label : "old", o->new_label ? o->new_label : "new");
    if (!same_module(old_r, new_r))
        sl_buf_printf(b,
                      "  warning: OLD and NEW are different modules: %s (input %s) and %s "
                      "(input %s)\n",
                      module_name(old_r), old_r->input_hash ? old_r->input_hash : "?",
                      module_name(new_r), new_r->input_hash ? new_r->input_hash : "?");
    put_count(b, "collectives", g->count);
    put_figure(b, "bytes sent, summed over devices", g->total);
    sl_buf_printf(b, "  %-32s ", "busiest device, sent+received");
    sl_buf_put_size(b, g->busiest.old_v);
    put_device(b, g->old_dev);
    sl_buf_puts(b, " -> ");
    sl_buf_put_size(b, g->busiest.new_v);
    put_device(b, g->new_dev);
    sl_buf_puts(b, "  ");
    put_change(b, g->busiest);
    sl_buf_putc(b, '\n');
    sl_buf_printf(b, "  %-32s ", "estimated time");
    sl_buf_put_duration_us(b, g->time.old_v);
    sl_buf_puts(b, " -> ");
    sl_buf_put_duration_us(b, g->time.new_v);
    sl_buf_putc(b, '\n');
    if (g->unknown.old_v != 0 || g->unknown.new_v != 0)
        put_figure(b, "unknown-trip bytes/execution", g->unknown);
    sl_buf_puts(b, "\nper kind (bytes sent, summed over devices)\n");
    for (size_t k = 0; k < n_kinds; k++) {
        sl_buf_printf(b, "  %-22s %g -> %g collectives, ", kinds[k].kind, kinds[k].count.old_v,
                      kinds[k].count.new_v);
        sl_buf_put_size(b, kinds[k].bytes.old_v);
        sl_buf_puts(b, " -> ");
        sl_buf_put_size(b, kinds[k].bytes.new_v);
        sl_buf_puts(b, "  ");
        put_change(b, kinds[k].bytes);
        sl_buf_putc(b, '\n');
    }
    if (!n_kinds)
        sl_buf_puts(b, "  (no collectives on either side)\n");
    print_sources(src, n_src, b);
    if (o->has_budget) {
        sl_buf_printf(b, "\nbudget --max-increase %g%%: bytes sent %s, busiest device %s",
                      o->max_increase_pct, gate->total ? "OVER" : "ok",
                      gate->busiest ? "OVER" : "ok");
        if (gate->unknown)
            sl_buf_printf(b, ", unknown-trip traffic grew (%u source op%s)", gate->n_unknown,
                          gate->n_unknown == 1 ? "" : "s");
        sl_buf_printf(b, ": %s\n",
                      gate->total || gate->busiest || gate->unknown ? "FAIL" : "pass");
    }
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static bool
jfigure(cJSON *parent, const char *key, Pair p)
{
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    double c = pct(p);
    return o && cJSON_AddNumberToObject(o, "old", p.old_v) &&
           cJSON_AddNumberToObject(o, "new", p.new_v) &&
           cJSON_AddNumberToObject(o, "change", p.new_v - p.old_v) &&
           (isnan(c) ? cJSON_AddNullToObject(o, "change_pct")
                     : cJSON_AddNumberToObject(o, "change_pct", c));
}

static bool
jrows(cJSON *root, const char *key, const DRow *rows, size_t n, bool with_source)
{
    cJSON *a = cJSON_AddArrayToObject(root, key);
    bool ok = a != NULL;
    for (size_t k = 0; ok && k < n; k++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(a, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        if (with_source) {
            ok = (rows[k].source[0] ? cJSON_AddStringToObject(o, "source", rows[k].source)
                                    : cJSON_AddNullToObject(o, "source")) &&
                 (rows[k].op_name ? cJSON_AddStringToObject(o, "op_name", rows[k].op_name)
                                  : cJSON_AddNullToObject(o, "op_name"));
        }
        ok = ok && cJSON_AddStringToObject(o, "kind", rows[k].kind) &&
             cJSON_AddStringToObject(o, "status", status_of(&rows[k])) &&
             jfigure(o, "collectives", rows[k].count) && jfigure(o, "send_bytes", rows[k].bytes) &&
             jfigure(o, "send_bytes_per_execution", rows[k].per_exec) &&
             jfigure(o, "unknown_trip_send_bytes_per_execution", rows[k].unknown) &&
             cJSON_AddBoolToObject(o, "unknown_trip_grew", unknown_grew(&rows[k]));
    }
    return ok;
}

static bool
jmodule(cJSON *parent, const char *key, const Report *r)
{
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    return o &&
           (r->module ? cJSON_AddStringToObject(o, "module", r->module)
                      : cJSON_AddNullToObject(o, "module")) &&
           (r->input_hash ? cJSON_AddStringToObject(o, "input_hash", r->input_hash)
                          : cJSON_AddNullToObject(o, "input_hash"));
}

static char *
print_json(const Agg *g, const Report *old_r, const Report *new_r, const DRow *kinds,
           size_t n_kinds, const DRow *src, size_t n_src, const ReportDiffOptions *o,
           const Gate *gate)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root && cJSON_AddNumberToObject(root, "schema_version", REPORT_SCHEMA_VERSION) &&
              (o->old_label ? cJSON_AddStringToObject(root, "old", o->old_label)
                            : cJSON_AddNullToObject(root, "old")) &&
              (o->new_label ? cJSON_AddStringToObject(root, "new", o->new_label)
                            : cJSON_AddNullToObject(root, "new"));
    cJSON *m = ok ? cJSON_AddObjectToObject(root, "modules") : NULL;
    ok = m && jmodule(m, "old", old_r) && jmodule(m, "new", new_r) &&
         cJSON_AddBoolToObject(m, "same_module", same_module(old_r, new_r));
    cJSON *t = ok ? cJSON_AddObjectToObject(root, "totals") : NULL;
    ok = t && jfigure(t, "collectives", g->count) && jfigure(t, "send_bytes", g->total) &&
         jfigure(t, "busiest_device_bytes", g->busiest) && jfigure(t, "time_us", g->time) &&
         jfigure(t, "unknown_trip_send_bytes_per_execution", g->unknown) &&
         (g->old_dev >= 0 ? cJSON_AddNumberToObject(t, "old_busiest_device", (double)g->old_dev)
                          : cJSON_AddNullToObject(t, "old_busiest_device")) &&
         (g->new_dev >= 0 ? cJSON_AddNumberToObject(t, "new_busiest_device", (double)g->new_dev)
                          : cJSON_AddNullToObject(t, "new_busiest_device"));
    ok = ok && jrows(root, "kinds", kinds, n_kinds, false) &&
         jrows(root, "sources", src, n_src, true);
    cJSON *b = ok ? cJSON_AddObjectToObject(root, "budget") : NULL;
    ok = b &&
         (o->has_budget ? cJSON_AddNumberToObject(b, "max_increase_pct", o->max_increase_pct)
                        : cJSON_AddNullToObject(b, "max_increase_pct")) &&
         cJSON_AddBoolToObject(b, "send_bytes_over", gate->total) &&
         cJSON_AddBoolToObject(b, "busiest_device_over", gate->busiest) &&
         cJSON_AddBoolToObject(b, "unknown_trip_grew", gate->unknown) &&
         cJSON_AddBoolToObject(b, "over_budget", gate->total || gate->busiest || gate->unknown);
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return text;
}

static void
rows_fini(Rows *r)
{
    sl_vec_fini(&r->v);
    sl_map_fini(&r->at);
}

SlStatus
report_diff(const Report *old_r, const Report *new_r, const ReportDiffOptions *o, bool as_json,
            SlBuf *out, bool *over_budget, SlError *err)
{
    SlSrcLoc nowhere = {NULL, 0, 0};
    Agg g;
    memset(&g, 0, sizeof(g));
    sl_map_init(&g.kinds.at);
    sl_map_init(&g.sources.at);
    g.old_dev = g.new_dev = -1;
    collect(&g, old_r, false);
    collect(&g, new_r, true);
    Gate gate = {o->has_budget && over(g.total, o->max_increase_pct),
                 o->has_budget && over(g.busiest, o->max_increase_pct), false, 0};
    for (size_t k = 0; o->has_budget && k < g.sources.v.len; k++)
        gate.n_unknown += unknown_grew(&SL_VEC_AT(&g.sources.v, DRow, k));
    gate.unknown = gate.n_unknown > 0;
    *over_budget = gate.total || gate.busiest || gate.unknown;
    if (g.kinds.v.len)
        qsort(g.kinds.v.data, g.kinds.v.len, sizeof(DRow), by_kind);
    if (g.sources.v.len)
        qsort(g.sources.v.data, g.sources.v.len, sizeof(DRow), by_change);
    const DRow *kinds = g.kinds.v.data, *src = g.sources.v.data;
    SlStatus st = SL_OK;
    if (g.oom) {
        st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory comparing reports");
    } else if (as_json) {
        char *text = print_json(&g, old_r, new_r, kinds, g.kinds.v.len, src, g.sources.v.len, o,
                                &gate);
        if (!text) {
            st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory writing the diff");
        } else {
            sl_buf_puts(out, text);
            sl_buf_putc(out, '\n');
            cJSON_free(text);
        }
    } else {
        print_text(&g, old_r, new_r, kinds, g.kinds.v.len, src, g.sources.v.len, o, &gate, out);
    }
    rows_fini(&g.kinds);
    rows_fini(&g.sources);
    if (!st && out->failed)
        st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    return st;
}

bool
report_same_module(const Report *a, const Report *b)
{
    return same_module(a, b);
}
