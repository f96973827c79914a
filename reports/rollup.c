/* rollup.c - traffic rolled up four ways: per set of mesh axes a collective's groups span
 * (and per axis crossed, alone or with others), per op_name prefix of K components, per while
 * loop (the loops nested in it included) and per computation holding the collectives.
 * Owns: these groupings as text ("traffic per ...") and summary.json's "rollups". Does not
 * own: the bytes (each collective's, from traffic.c, trip counts applied the same way), the
 * axes (mesh.c). Invariant: rows sort by bytes sent, then key, so output is deterministic. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/report_int.h"

typedef struct Acc {
    SlVec rows; /* ReportRollup */
    SlMap at;   /* interned key -> index + 1 */
    SlInterner keys;
    bool oom;
} Acc;

static void
acc_init(Acc *a, SlArena *arena)
{
    memset(a, 0, sizeof(*a));
    sl_map_init(&a->at);
    sl_interner_init(&a->keys, arena);
}

static void
acc_fini(Acc *a)
{
    sl_vec_fini(&a->rows);
    sl_map_fini(&a->at);
    sl_interner_fini(&a->keys);
}

static ReportRollup *
row(Acc *a, SlStr key)
{
    SlSym k = sl_intern(&a->keys, key);
    uint64_t at = 0;
    if (!k) {
        a->oom = true;
        return NULL;
    }
    if (sl_map_get(&a->at, SL_MAP_KEY(k), &at))
        return &SL_VEC_AT(&a->rows, ReportRollup, at - 1);
    ReportRollup r = {sl_sym_cstr(k), NULL, {0}};
    if (!SL_VEC_PUSH(&a->rows, ReportRollup, r) ||
        !sl_map_put(&a->at, SL_MAP_KEY(k), a->rows.len)) {
        a->oom = true;
        return NULL;
    }
    return &SL_VEC_AT(&a->rows, ReportRollup, a->rows.len - 1);
}

static void
add(Acc *a, SlStr key, const ReportCollective *c)
{
    ReportRollup *r = row(a, key);
    if (r)
        report_traffic_add(&r->t, c);
}

static int
by_bytes(const void *pa, const void *pb)
{
    const ReportRollup *a = pa, *b = pb;
    if (a->t.send_bytes != b->t.send_bytes)
        return a->t.send_bytes > b->t.send_bytes ? -1 : 1;
    if (a->t.unknown_send_bytes != b->t.unknown_send_bytes)
        return a->t.unknown_send_bytes > b->t.unknown_send_bytes ? -1 : 1;
    return strcmp(a->key, b->key);
}

static ReportRollup *
take(Acc *a, SlArena *arena, uint32_t *n)
{
    *n = 0;
    if (a->oom || !a->rows.len)
        return NULL;
    qsort(a->rows.data, a->rows.len, sizeof(ReportRollup), by_bytes);
    ReportRollup *out = SL_DUP_ARRAY(arena, ReportRollup, a->rows.data, a->rows.len);
    if (!out) {
        a->oom = true;
        return NULL;
    }
    *n = (uint32_t)a->rows.len;
    return out;
}

/* The first `depth` '/'-separated components of `op_name` ("" when none). */
static SlStr
prefix_of(const char *op_name, uint32_t depth)
{
    if (!op_name)
        return sl_str("");
    const char *p = op_name;
    for (uint32_t k = 0; *p; p++)
        if (*p == '/' && ++k == depth)
            break;
    return (SlStr){op_name, (size_t)(p - op_name)};
}

/* Each axis a collective crosses: "part of data,model" crosses data and model. */
static void
add_crossed(Acc *a, const char *axes, const ReportCollective *c)
{
    static const char part[] = "part of ";
    if (strncmp(axes, part, sizeof(part) - 1) == 0)
        axes += sizeof(part) - 1;
    if (strcmp(axes, "none") == 0)
        return;
    for (const char *p = axes; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        add(a, (SlStr){p, n}, c);
        p += n + (e ? 1 : 0);
    }
}

static const char *
loop_key(const TraceRun *run, uint32_t w, SlArena *arena, const char **info)
{
    const TraceRunWhile *wl = &run->whiles[w];
    const char *name = wl->instr < run->n_instrs ? run->instrs[wl->instr].name : "?";
    char buf[32];
    if (wl->trip_count >= 0)
        snprintf(buf, sizeof(buf), "%lld", (long long)wl->trip_count);
    else
        snprintf(buf, sizeof(buf), "unknown");
    *info = sl_arena_strndup(arena, buf, strlen(buf));
    return name;
}

bool
report_rollup_build(const TraceRun *run, SlArena *arena, Report *r)
{
    Acc axes, crossed, prefix, loops, comps;
    acc_init(&axes, arena);
    acc_init(&crossed, arena);
    acc_init(&prefix, arena);
    acc_init(&loops, arena);
    acc_init(&comps, arena);
    for (uint32_t k = 0; k < r->n_collectives && k < run->n_collectives; k++) {
        const ReportCollective *c = &r->collectives[k];
        if (c->axes) {
            add(&axes, sl_str(c->axes), c);
            add_crossed(&crossed, c->axes, c);
        }
        if (r->model.op_name_depth)
            add(&prefix, prefix_of(c->op_name, r->model.op_name_depth), c);
        add(&comps, sl_str(c->computation ? c->computation : ""), c);
        /* the loop that runs it, and every loop around that one */
        for (uint32_t w = run->collectives[k].loop, guard = 0;
             w < run->n_whiles && guard <= run->n_whiles; w = run->whiles[w].outer, guard++) {
            const char *info = NULL;
            const char *key = loop_key(run, w, arena, &info);
            ReportRollup *row_w = row(&loops, sl_str(key));
            if (row_w) {
                report_traffic_add(&row_w->t, c);
                row_w->info = info;
            }
        }
    }
    r->by_axes = take(&axes, arena, &r->n_by_axes);
    r->by_crossed = take(&crossed, arena, &r->n_by_crossed);
    r->by_prefix = take(&prefix, arena, &r->n_by_prefix);
    r->by_loop = take(&loops, arena, &r->n_by_loop);
    r->by_computation = take(&comps, arena, &r->n_by_computation);
    bool ok = !axes.oom && !crossed.oom && !prefix.oom && !loops.oom && !comps.oom;
    acc_fini(&axes);
    acc_fini(&crossed);
    acc_fini(&prefix);
    acc_fini(&loops);
    acc_fini(&comps);
    return ok;
}

/* ---- text ------------------------------------------------------------------------------ */

static void
print_table(const char *title, const char *key_name, const ReportRollup *rows, uint32_t n,
            uint32_t top, bool with_info, SlBuf *out)
{
    if (!n)
        return;
    sl_buf_printf(out, "\n%s\n", title);
    size_t w = strlen(key_name);
    for (uint32_t k = 0; k < n && k < top; k++)
        w = strlen(rows[k].key) > w ? strlen(rows[k].key) : w;
    if (w > 72)
        w = 72;
    sl_buf_printf(out, "  %-*s  %s%-11s  %-11s  %s\n", (int)w, key_name, with_info ? "trips    " : "",
                  "collectives", "bytes sent", "time");
    for (uint32_t k = 0; k < n && k < top; k++) {
        const ReportRollup *r = &rows[k];
        sl_buf_printf(out, "  %-*s  ", (int)w, r->key[0] ? r->key : "(none)");
        if (with_info)
            sl_buf_printf(out, "%-7s  ", r->info ? r->info : "-");
        sl_buf_printf(out, "%-11u  ", r->t.collectives);
        SlBuf t;
        sl_buf_init(&t);
        sl_buf_put_size(&t, r->t.send_bytes);
        sl_buf_printf(out, "%-11s  ", t.failed ? "?" : sl_buf_str(&t).ptr);
        sl_buf_fini(&t);
        sl_buf_put_duration_us(out, r->t.time_us);
        if (r->t.unknown_trip_collectives) {
            sl_buf_printf(out, "  (+%u of unknown trip count: ", r->t.unknown_trip_collectives);
            sl_buf_put_size(out, r->t.unknown_send_bytes);
            sl_buf_puts(out, " per execution)");
        }
        sl_buf_putc(out, '\n');
    }
    if (n > top)
        sl_buf_printf(out, "  ... %u more in summary.json\n", n - top);
}

void
report_rollup_print_text(const Report *r, SlBuf *out)
{
    uint32_t top = r->model.top ? r->model.top : REPORT_DEFAULT_TOP;
    const char *bytes = "bytes sent summed over devices, trip counts applied";
    char title[160];
    snprintf(title, sizeof(title), "traffic per set of mesh axes the groups span (%s)", bytes);
    print_table(title, "axes", r->by_axes, r->n_by_axes, top, false, out);
    snprintf(title, sizeof(title), "traffic crossing each mesh axis, alone or with others (%s)",
             bytes);
    print_table(title, "axis", r->by_crossed, r->n_by_crossed, top, false, out);
    snprintf(title, sizeof(title), "traffic per op_name prefix of %u component%s (%s)",
             r->model.op_name_depth, r->model.op_name_depth == 1 ? "" : "s", bytes);
    print_table(title, "op_name prefix", r->by_prefix, r->n_by_prefix, top, false, out);
    snprintf(title, sizeof(title), "traffic per while loop, loops nested in it included (%s)",
             bytes);
    print_table(title, "loop", r->by_loop, r->n_by_loop, top, true, out);
    snprintf(title, sizeof(title), "traffic per computation holding the collectives (%s)", bytes);
    if (r->n_by_computation > 1 || r->n_by_loop)
        print_table(title, "computation", r->by_computation, r->n_by_computation, top, false,
                    out);
}

/* ---- summary.json ---------------------------------------------------------------------- */

static bool
put_rows(cJSON *parent, const char *name, const char *key_name, const ReportRollup *rows,
         uint32_t n, bool present)
{
    if (!present)
        return cJSON_AddNullToObject(parent, name) != NULL;
    cJSON *a = cJSON_AddArrayToObject(parent, name);
    bool ok = a != NULL;
    for (uint32_t k = 0; ok && k < n; k++) {
        const ReportRollup *r = &rows[k];
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(a, o) && cJSON_AddStringToObject(o, key_name, r->key) &&
             (!r->info || cJSON_AddStringToObject(o, "trip_count", r->info)) &&
             cJSON_AddNumberToObject(o, "collectives", r->t.collectives) &&
             cJSON_AddNumberToObject(o, "send_bytes", r->t.send_bytes) &&
             cJSON_AddNumberToObject(o, "recv_bytes", r->t.recv_bytes) &&
             cJSON_AddNumberToObject(o, "time_us", r->t.time_us) &&
             cJSON_AddNumberToObject(o, "unknown_trip_collectives",
                                     r->t.unknown_trip_collectives) &&
             cJSON_AddNumberToObject(o, "unknown_trip_send_bytes_per_execution",
                                     r->t.unknown_send_bytes);
    }
    return ok;
}

bool
report_rollup_put_json(const Report *r, struct cJSON *root)
{
    cJSON *o = cJSON_AddObjectToObject(root, "rollups");
    bool mesh = r->n_axes > 0;
    return o && put_rows(o, "mesh_axes", "axes", r->by_axes, r->n_by_axes, mesh) &&
           put_rows(o, "crossing_axes", "axis", r->by_crossed, r->n_by_crossed, mesh) &&
           (r->model.op_name_depth
                ? cJSON_AddNumberToObject(o, "op_name_depth", r->model.op_name_depth) != NULL
                : cJSON_AddNullToObject(o, "op_name_depth") != NULL) &&
           put_rows(o, "op_name_prefixes", "prefix", r->by_prefix, r->n_by_prefix,
                    r->model.op_name_depth > 0) &&
           put_rows(o, "loops", "loop", r->by_loop, r->n_by_loop, true) &&
           put_rows(o, "computations", "computation", r->by_computation, r->n_by_computation,
                    true);
}
