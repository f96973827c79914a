/* html.c - the HTML report page: the run as JSON (cJSON), put into the page template with the
 * style and script compiled in from reports/assets/. Owns: the page's data layout, which
 * report.js reads (field names here and there must agree). Invariant: the JSON is the only
 * thing that varies between pages, and it is built from the run and its report in their own
 * (deterministic) order. */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "reports/html.h"
#include "reports/html_assets.h"

/* cJSON calls return NULL on allocation failure; remember it and carry on. */
typedef struct Js {
    bool failed;
} Js;

static cJSON *
chk(Js *js, cJSON *v)
{
    if (!v)
        js->failed = true;
    return v;
}

static void
num(Js *js, cJSON *o, const char *key, double v)
{
    if (o)
        chk(js, cJSON_AddNumberToObject(o, key, v));
}

static void
str(Js *js, cJSON *o, const char *key, const char *v)
{
    if (o)
        chk(js, v ? cJSON_AddStringToObject(o, key, v) : cJSON_AddNullToObject(o, key));
}

static cJSON *
push_object(Js *js, cJSON *array)
{
    cJSON *o = chk(js, cJSON_CreateObject());
    if (o && array && !cJSON_AddItemToArray(array, o)) {
        cJSON_Delete(o);
        js->failed = true;
        return NULL;
    }
    return o;
}

static void
push_string(Js *js, cJSON *array, const char *s)
{
    cJSON *v = chk(js, cJSON_CreateString(s ? s : ""));
    if (v && array && !cJSON_AddItemToArray(array, v)) {
        cJSON_Delete(v);
        js->failed = true;
    }
}

static void
push_number(Js *js, cJSON *array, double n)
{
    cJSON *v = chk(js, cJSON_CreateNumber(n));
    if (v && array && !cJSON_AddItemToArray(array, v)) {
        cJSON_Delete(v);
        js->failed = true;
    }
}

/* Big arrays (a number or a name per instruction) go in as raw JSON text: cJSON prints each
 * number with printf and reads it back to check, which was most of a 100k page's write time. */
static void
raw_put_int(SlBuf *b, int64_t v)
{
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        sl_buf_putc(b, '-');
    while (n)
        sl_buf_putc(b, tmp[--n]);
}

static void
raw_put_string(SlBuf *b, const char *s)
{
    sl_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            sl_buf_putc(b, '\\');
            sl_buf_putc(b, (char)*p);
        } else if (*p < 0x20)
            sl_buf_printf(b, "\\u%04x", *p);
        else
            sl_buf_putc(b, (char)*p);
    }
    sl_buf_putc(b, '"');
}

/* Adds the raw JSON text in `b` (cleared afterwards) as `key` of `o`. */
static void
raw_add(Js *js, cJSON *o, const char *key, SlBuf *b)
{
    if (b->failed)
        js->failed = true;
    else if (o)
        chk(js, cJSON_AddRawToObject(o, key, b->data ? b->data : "[]"));
    sl_buf_clear(b);
}

static void
put_traffic(Js *js, cJSON *o, const ReportTraffic *t)
{
    num(js, o, "collectives", t->collectives);
    num(js, o, "send", t->send_bytes);
    num(js, o, "recv", t->recv_bytes);
    num(js, o, "time_us", t->time_us);
    num(js, o, "unknown", t->unknown_trip_collectives);
    num(js, o, "unknown_send", t->unknown_send_bytes);
}

static void
put_rows(Js *js, cJSON *root, const char *name, const ReportRow *rows, uint32_t n)
{
    cJSON *a = chk(js, cJSON_AddArrayToObject(root, name));
    for (uint32_t k = 0; a && k < n; k++) {
        cJSON *o = push_object(js, a);
        str(js, o, "key", rows[k].key);
        str(js, o, "op_name", rows[k].op_name);
        put_traffic(js, o, &rows[k].t);
    }
}

/* Totals, devices, kinds, sources and mesh of one report. */
static void
put_report(Js *js, cJSON *o, const Report *r)
{
    str(js, o, "module", r->module);
    num(js, o, "num_partitions", (double)r->num_partitions);
    cJSON *t = chk(js, cJSON_AddObjectToObject(o, "total"));
    put_traffic(js, t, &r->total);
    num(js, o, "busiest", (double)r->bottleneck_device);
    cJSON *f = chk(js, cJSON_AddObjectToObject(o, "fallback"));
    put_traffic(js, f, &r->fallback);
    num(js, f, "sources", (double)r->n_fallback_sources);
    cJSON *d = chk(js, cJSON_AddArrayToObject(o, "devices"));
    for (uint32_t k = 0; d && k < r->n_devices; k++) {
        cJSON *e = push_object(js, d);
        num(js, e, "device", (double)r->devices[k].device);
        num(js, e, "send", r->devices[k].t.send_bytes);
        num(js, e, "recv", r->devices[k].t.recv_bytes);
        num(js, e, "unknown_send", r->devices[k].t.unknown_send_bytes);
    }
    put_rows(js, o, "kinds", r->kinds, r->n_kinds);
    put_rows(js, o, "sources", r->sources, r->n_sources);
    cJSON *m = chk(js, cJSON_AddArrayToObject(o, "mesh"));
    for (uint32_t k = 0; m && k < r->n_axes; k++) {
        cJSON *e = push_object(js, m);
        str(js, e, "name", r->axes[k].name);
        num(js, e, "size", (double)r->axes[k].size);
    }
    cJSON *mo = chk(js, cJSON_AddObjectToObject(o, "model"));
    num(js, mo, "link_gbps", r->model.link_gbps);
    num(js, mo, "latency_us", r->model.latency_us);
}

/* Replica groups of a collective, the first MAX_GROUPS of them (the page says how many). */
static void
put_groups(Js *js, cJSON *o, const TraceRunCollective *c)
{
    enum { MAX_GROUPS = 64, MAX_DEVICES = 4096 };
    cJSON *a = chk(js, cJSON_AddArrayToObject(o, "groups"));
    uint32_t shown = 0;
    for (int64_t g = 0; a && c->group_offsets && g < c->n_groups && g < MAX_GROUPS; g++) {
        uint32_t lo = c->group_offsets[g], hi = c->group_offsets[g + 1];
        if (shown + (hi - lo) > MAX_DEVICES)
            break;
        cJSON *ga = chk(js, cJSON_CreateArray());
        if (ga && !cJSON_AddItemToArray(a, ga)) {
            cJSON_Delete(ga);
            js->failed = true;
            return;
        }
        for (uint32_t k = lo; ga && k < hi; k++)
            push_number(js, ga, (double)c->devices[k]);
        shown += hi - lo;
    }
}

/* Explanations are stored as lists of line numbers into one table of distinct lines: the
 * explanations of a model's layers repeat most of their lines (the alternatives and their
 * reasons), and a 100k-instruction module's page shrinks by more than half. */
typedef struct Lines {
    cJSON *table;
    SlMap by_hash; /* hash -> index + 1 of the first line with that hash */
    SlVec text;    /* const char * (owned copies), by index */
} Lines;

static uint32_t
line_index(Js *js, Lines *l, const char *s, size_t n)
{
    uint64_t h = sl_hash_bytes(s, n), v = 0;
    if (h == SL_MAP_EMPTY)
        h = 0;
    if (sl_map_get(&l->by_hash, h, &v)) {
        const char *old = SL_VEC_AT(&l->text, const char *, v - 1);
        if (strlen(old) == n && memcmp(old, s, n) == 0)
            return (uint32_t)v - 1;
    }
    char *copy = malloc(n + 1);
    if (!copy || !SL_VEC_PUSH(&l->text, const char *, copy)) {
        free(copy);
        js->failed = true;
        return 0;
    }
    memcpy(copy, s, n);
    copy[n] = '\0';
    uint32_t idx = (uint32_t)l->text.len - 1;
    push_string(js, l->table, copy);
    if (!v && !sl_map_put(&l->by_hash, h, (uint64_t)idx + 1))
        js->failed = true;
    return idx;
}

static void
push_lines(Js *js, Lines *l, cJSON *array, const char *text)
{
    cJSON *a = chk(js, cJSON_CreateArray());
    if (a && !cJSON_AddItemToArray(array, a)) {
        cJSON_Delete(a);
        js->failed = true;
        return;
    }
    for (const char *p = text; a && *p && !js->failed;) {
        size_t n = strcspn(p, "\n");
        push_number(js, a, line_index(js, l, p, n));
        p += n;
        if (*p == '\n')
            p++;
    }
}

/* One row per collective of the run, in output order, with its explanation (one per source,
 * shared by index; each a list of indices into "lines"). */
static void
put_collectives(Js *js, cJSON *root, const TraceRun *run)
{
    cJSON *a = chk(js, cJSON_AddArrayToObject(root, "collectives"));
    cJSON *ex = chk(js, cJSON_AddArrayToObject(root, "explain"));
    uint32_t *explain_of = calloc((size_t)run->n_instrs + 1, sizeof(uint32_t)); /* id + 1 */
    if (!explain_of) {
        js->failed = true;
        return;
    }
    uint32_t n_explained = 0;
    SlBuf b;
    sl_buf_init(&b);
    Lines lines = {chk(js, cJSON_AddArrayToObject(root, "lines")), {0}, {0}};
    sl_map_init(&lines.by_hash);
    for (uint32_t k = 0; a && ex && k < run->n_collectives; k++) {
        const TraceRunCollective *c = &run->collectives[k];
        const TraceRunInstr *in = &run->instrs[c->instr];
        const TraceRunInstr *src = c->source != TRACE_NONE ? &run->instrs[c->source] : NULL;
        cJSON *o = push_object(js, a);
        str(js, o, "name", in->name);
        num(js, o, "instr", c->instr);
        str(js, o, "kind", c->kind);
        str(js, o, "shape", c->shape);
        num(js, o, "group_size", (double)c->group_size);
        num(js, o, "n_groups", (double)c->n_groups);
        put_groups(js, o, c);
        num(js, o, "bytes", c->bytes);
        num(js, o, "trips", (double)c->trip_count);
        num(js, o, "max_trips", (double)c->max_trip_count);
        num(js, o, "send", c->send_bytes);
        num(js, o, "max_send", c->max_device_send_bytes);
        str(js, o, "cause", c->cause);
        str(js, o, "source", src ? src->name : NULL);
        num(js, o, "source_instr", src ? (double)c->source : -1.0);
        str(js, o, "op_name", src ? src->op_name : in->op_name);
        if (!src) {
            num(js, o, "explain", -1);
            continue;
        }
        if (!explain_of[c->source]) {
            SlError err = {0};
            sl_buf_clear(&b);
            if (trace_explain_instr(run, c->source, &b, &err) != SL_OK) {
                sl_buf_clear(&b);
                sl_buf_printf(&b, "no explanation: %s", err.msg);
            }
            if (lines.table)
                push_lines(js, &lines, ex, b.data ? b.data : "");
            explain_of[c->source] = ++n_explained;
        }
        num(js, o, "explain", explain_of[c->source] - 1);
    }
    js->failed = js->failed || b.failed;
    sl_buf_fini(&b);
    free(explain_of);
    for (size_t k = 0; k < lines.text.len; k++)
        free((void *)SL_VEC_AT(&lines.text, const char *, k));
    sl_vec_fini(&lines.text);
    sl_map_fini(&lines.by_hash);
}

/* Every instruction's name, and the first instruction of its computation (the box that holds
 * it in a diagram collapsed per computation; run-length coded), for search. */
static void
put_instrs(Js *js, cJSON *root, const TraceRun *run)
{
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_putc(&b, '[');
    for (uint32_t i = 0; i < run->n_instrs; i++) {
        if (i)
            sl_buf_putc(&b, ',');
        raw_put_string(&b, run->instrs[i].name);
    }
    sl_buf_putc(&b, ']');
    raw_add(js, root, "names", &b);
    /* run-length coded: [first, count, first, count, ...] */
    sl_buf_putc(&b, '[');
    for (uint32_t i = 0; i < run->n_instrs;) {
        uint32_t j = i + 1;
        while (j < run->n_instrs && run->instrs[j].phase == run->instrs[i].phase &&
               strcmp(run->instrs[j].computation, run->instrs[i].computation) == 0)
            j++;
        if (i)
            sl_buf_putc(&b, ',');
        raw_put_int(&b, i);
        sl_buf_putc(&b, ',');
        raw_put_int(&b, j - i);
        i = j;
    }
    sl_buf_putc(&b, ']');
    raw_add(js, root, "comp", &b);
    sl_buf_fini(&b);
    num(js, root, "n_before", run->n_before);
}

static void
put_warnings(Js *js, cJSON *root, const TraceRun *run)
{
    cJSON *a = chk(js, cJSON_AddArrayToObject(root, "warnings"));
    for (uint32_t k = 0; a && k < run->n_warnings; k++) {
        const TraceRunWarning *w = &run->warnings[k];
        cJSON *o = push_object(js, a);
        str(js, o, "instr", w->instr != TRACE_NONE ? run->instrs[w->instr].name : NULL);
        str(js, o, "message", w->message);
    }
}

/* Strings that repeat (shardings, rules, kinds) once, in "strs", referred to by index. */
static double
str_ref(Js *js, Lines *l, const char *s)
{
    return s ? (double)line_index(js, l, s, strlen(s)) : -1.0;
}

/* Where propagation got each sharding (the last sharding_origin row of an instruction, the
 * one explain prints): [instr, sharding, source, source's parameter number (-1: not a
 * parameter), [path], direction, level, rule, candidate, replaced], strings as "strs" indices
 * (-1: none). And, after partitioning, the input instruction each one derives from. */
static void
put_origins(Js *js, cJSON *root, const TraceRun *run, Lines *strs)
{
    cJSON *a = chk(js, cJSON_AddArrayToObject(root, "origins"));
    uint32_t *last = malloc(((size_t)run->n_instrs + 1) * sizeof(uint32_t));
    if (!last) {
        js->failed = true;
        return;
    }
    memset(last, 0xff, ((size_t)run->n_instrs + 1) * sizeof(uint32_t));
    for (uint32_t k = 0; k < run->n_origins; k++)
        if (run->origins[k].instr < run->n_instrs)
            last[run->origins[k].instr] = k;
    for (uint32_t i = 0; a && i < run->n_instrs && !js->failed; i++) {
        if (last[i] == UINT32_MAX)
            continue;
        const TraceRunOrigin *o = &run->origins[last[i]];
        cJSON *e = chk(js, cJSON_CreateArray());
        if (!e || !cJSON_AddItemToArray(a, e)) {
            cJSON_Delete(e);
            js->failed = true;
            break;
        }
        bool has_src = o->source < run->n_instrs;
        const TraceRunInstr *src = has_src ? &run->instrs[o->source] : NULL;
        push_number(js, e, i);
        push_number(js, e, str_ref(js, strs, o->sharding));
        push_number(js, e, has_src ? (double)o->source : -1.0);
        push_number(js, e, src && !strcmp(src->opcode, "parameter") ? (double)src->param_number
                                                                      : -1.0);
        cJSON *path = chk(js, cJSON_CreateArray());
        if (!path || !cJSON_AddItemToArray(e, path)) {
            cJSON_Delete(path);
            js->failed = true;
            break;
        }
        for (uint32_t h = 0; h < o->n_path; h++)
            push_number(js, path, o->path[h] < run->n_instrs ? (double)o->path[h] : -1.0);
        push_number(js, e, str_ref(js, strs, o->direction));
        push_number(js, e, o->level);
        push_number(js, e, str_ref(js, strs, o->rule));
        push_number(js, e, str_ref(js, strs, o->candidate));
        push_number(js, e, str_ref(js, strs, o->replaced));
    }
    free(last);
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_putc(&b, '[');
    for (uint32_t i = run->n_before; i < run->n_instrs; i++) {
        if (i > run->n_before)
            sl_buf_putc(&b, ',');
        raw_put_int(&b, run->instrs[i].derived_from < run->n_instrs
                            ? (int64_t)run->instrs[i].derived_from
                            : -1);
    }
    sl_buf_putc(&b, ']');
    raw_add(js, root, "derived", &b);
    sl_buf_fini(&b);
}

/* The memory estimates with their live-bytes profile and the peak's largest buffers. */
static void
put_memory(Js *js, cJSON *root, const TraceRun *run, Lines *strs)
{
    cJSON *a = chk(js, cJSON_AddArrayToObject(root, "memory"));
    for (uint32_t k = 0; a && k < run->n_memory && !js->failed; k++) {
        const TraceRunMemory *m = &run->memory[k];
        cJSON *o = push_object(js, a);
        str(js, o, "phase", m->phase == TRACE_BEFORE ? "before" : "after");
        cJSON *d = chk(js, cJSON_AddArrayToObject(o, "devices"));
        for (uint32_t j = 0; d && j < m->n_devices; j++)
            push_number(js, d, (double)m->devices[j]);
        num(js, o, "parameter", (double)m->parameter_bytes);
        num(js, o, "output", (double)m->output_bytes);
        num(js, o, "peak", (double)m->peak_bytes);
        num(js, o, "peak_temp", (double)m->peak_temp_bytes);
        num(js, o, "peak_instr", m->peak_instr < run->n_instrs ? (double)m->peak_instr : -1.0);
        num(js, o, "peak_position", (double)m->peak_position);
        num(js, o, "step", (double)m->profile_step);
        cJSON *p = chk(js, cJSON_AddArrayToObject(o, "profile"));
        for (uint32_t j = 0; p && j < m->n_profile; j++)
            push_number(js, p, (double)m->profile[j]);
        cJSON *t = chk(js, cJSON_AddArrayToObject(o, "top"));
        for (uint32_t j = 0; t && j < m->n_top; j++) {
            const TraceRunMemBuffer *b = &m->top[j];
            cJSON *e = push_object(js, t);
            num(js, e, "instr", b->instr < run->n_instrs ? (double)b->instr : -1.0);
            num(js, e, "bytes", (double)b->bytes);
            num(js, e, "kind", str_ref(js, strs, b->kind));
            const TraceRunInstr *in = b->instr < run->n_instrs ? &run->instrs[b->instr] : NULL;
            const TraceRunInstr *src = in && in->phase == TRACE_AFTER &&
                                               in->derived_from < run->n_instrs
                                           ? &run->instrs[in->derived_from]
                                           : in;
            str(js, e, "op_name", src ? src->op_name : NULL);
        }
    }
}

/* The group trees: per phase the groups' parents, names, sizes, traffic, diagrams (indices into
 * "tree_svgs"; -1: not drawn, with the reason in "why") and each instruction's innermost group. */
static void
raw_u32s(Js *js, cJSON *o, const char *key, const uint32_t *v, uint32_t n, SlBuf *b)
{
    sl_buf_putc(b, '[');
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            sl_buf_putc(b, ',');
        raw_put_int(b, v[k] == UINT32_MAX ? -1 : (int64_t)v[k]);
    }
    sl_buf_putc(b, ']');
    raw_add(js, o, key, b);
}

static void
put_trees(Js *js, cJSON *root, const ReportHtmlInput *in)
{
    cJSON *all = chk(js, cJSON_AddObjectToObject(root, "trees"));
    cJSON *svgs = chk(js, cJSON_AddArrayToObject(root, "tree_svgs"));
    uint32_t n_svgs = 0;
    SlBuf b;
    sl_buf_init(&b);
    for (uint32_t k = 0; all && svgs && k < in->n_trees && !js->failed; k++) {
        const ReportHtmlTree *t = &in->trees[k];
        cJSON *o = chk(js, cJSON_AddObjectToObject(all, t->phase));
        num(js, o, "lo", t->lo);
        str(js, o, "basis", t->basis);
        num(js, o, "group_units", (double)t->group_units);
        num(js, o, "total_units", (double)t->total_units);
        raw_u32s(js, o, "parent", t->parent, t->n, &b);
        raw_u32s(js, o, "members", t->members, t->n, &b);
        sl_buf_putc(&b, '[');
        for (uint32_t g = 0; g < t->n; g++) {
            if (g)
                sl_buf_putc(&b, ',');
            raw_put_string(&b, t->name[g]);
        }
        sl_buf_putc(&b, ']');
        raw_add(js, o, "name", &b);
        cJSON *send = chk(js, cJSON_AddArrayToObject(o, "send"));
        for (uint32_t g = 0; g < t->n && !js->failed; g++)
            push_number(js, send, t->send[g]);
        sl_buf_putc(&b, '[');
        for (uint32_t g = 0; g < t->n; g++) {
            if (g)
                sl_buf_putc(&b, ',');
            /* -2: the phase's own graph; -1: not drawn (why says why) */
            raw_put_int(&b, g == 0 ? -2 : t->svg[g] ? (int64_t)n_svgs++ : -1);
            if (g && t->svg[g])
                push_string(js, svgs, t->svg[g]);
        }
        sl_buf_putc(&b, ']');
        raw_add(js, o, "svg", &b);
        sl_buf_putc(&b, '[');
        for (uint32_t g = 0; g < t->n; g++) {
            if (g)
                sl_buf_putc(&b, ',');
            raw_put_int(&b, (int64_t)t->units[g]);
            sl_buf_putc(&b, ',');
            raw_put_int(&b, t->why[g]);
        }
        sl_buf_putc(&b, ']');
        raw_add(js, o, "units_why", &b); /* [units, why] per group */
        /* run-length coded: [group, count, group, count, ...] */
        sl_buf_putc(&b, '[');
        for (uint32_t i = 0; i < t->n_instrs;) {
            uint32_t j = i;
            while (j < t->n_instrs && t->leaf[j] == t->leaf[i])
                j++;
            if (i)
                sl_buf_putc(&b, ',');
            raw_put_int(&b, t->leaf[i] == UINT32_MAX ? -1 : (int64_t)t->leaf[i]);
            sl_buf_putc(&b, ',');
            raw_put_int(&b, j - i);
            i = j;
        }
        sl_buf_putc(&b, ']');
        raw_add(js, o, "leaf", &b);
    }
    sl_buf_fini(&b);
}

static cJSON *
build_data(const ReportHtmlInput *in, Js *js)
{
    cJSON *root = chk(js, cJSON_CreateObject());
    if (!root)
        return NULL;
    num(js, root, "version", 1);
    cJSON *r = chk(js, cJSON_AddObjectToObject(root, "report"));
    put_report(js, r, in->rep);
    if (in->old_rep) {
        cJSON *o = chk(js, cJSON_AddObjectToObject(root, "old"));
        put_report(js, o, in->old_rep);
        str(js, root, "old_label", in->old_label);
        str(js, root, "new_label", in->new_label);
    }
    if (in->run) {
        put_collectives(js, root, in->run);
        put_instrs(js, root, in->run);
        put_warnings(js, root, in->run);
        Lines strs = {chk(js, cJSON_AddArrayToObject(root, "strs")), {0}, {0}};
        sl_map_init(&strs.by_hash);
        put_origins(js, root, in->run, &strs);
        put_memory(js, root, in->run, &strs);
        for (size_t k = 0; k < strs.text.len; k++)
            free((void *)SL_VEC_AT(&strs.text, const char *, k));
        sl_vec_fini(&strs.text);
        sl_map_fini(&strs.by_hash);
    }
    put_trees(js, root, in);
    cJSON *g = chk(js, cJSON_AddArrayToObject(root, "graphs"));
    for (uint32_t k = 0; g && k < in->n_graphs; k++) {
        cJSON *o = push_object(js, g);
        str(js, o, "key", in->graphs[k].key);
        str(js, o, "title", in->graphs[k].title);
        const char *svg = in->graphs[k].svg ? in->graphs[k].svg : "";
        const char *tag = strstr(svg, "<svg"); /* drop the XML prolog: the page is HTML */
        str(js, o, "svg", tag ? tag : svg);
        str(js, o, "note", in->graphs[k].note);
    }
    return root;
}

/* JSON text inside <script>: "</" and "<!--" would end or confuse the element; inside JSON
 * strings (the only place '<' occurs) "<\/" and "<\u0021--" read back the same. */
static void
put_script_json(SlBuf *out, const char *json)
{
    for (const char *p = json; *p; p++) {
        if (p[0] == '<' && p[1] == '/') {
            sl_buf_puts(out, "<\\/");
            p++;
        } else if (p[0] == '<' && p[1] == '!') {
            sl_buf_puts(out, "<\\u0021");
            p++;
        } else {
            const char *q = p;
            while (q[1] && q[1] != '<')
                q++;
            sl_buf_append(out, p, (size_t)(q - p) + 1);
            p = q;
        }
    }
}

static void
put_lines(SlBuf *out, const char *const *lines, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        sl_buf_puts(out, lines[k]);
}

SlStatus
report_write_html(const ReportHtmlInput *in, SlBuf *out, SlError *err)
{
    SlSrcLoc nowhere = {0};
    Js js = {0};
    cJSON *root = build_data(in, &js);
    char *json = root && !js.failed ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory building the page's data");
    for (unsigned k = 0; k < report_asset_page_n; k++) {
        const char *line = report_asset_page[k];
        if (strncmp(line, "@STYLE@", 7) == 0)
            put_lines(out, report_asset_style, report_asset_style_n);
        else if (strncmp(line, "@SCRIPT@", 8) == 0)
            put_lines(out, report_asset_script, report_asset_script_n);
        else if (strncmp(line, "@DATA@", 6) == 0) {
            put_script_json(out, json);
            sl_buf_putc(out, '\n');
        } else
            sl_buf_puts(out, line);
    }
    free(json);
    if (out->failed)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory writing the page");
    return SL_OK;
}
