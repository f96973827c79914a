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
            if (trace_explain(run, src->name, &b, &err) != SL_OK) {
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
 * it in a diagram collapsed per computation), for search. */
static void
put_instrs(Js *js, cJSON *root, const TraceRun *run)
{
    cJSON *names = chk(js, cJSON_AddArrayToObject(root, "names"));
    cJSON *comp = chk(js, cJSON_AddArrayToObject(root, "comp"));
    uint32_t first = 0;
    for (uint32_t i = 0; names && comp && i < run->n_instrs && !js->failed; i++) {
        const TraceRunInstr *in = &run->instrs[i];
        if (i == 0 || in->phase != run->instrs[i - 1].phase ||
            strcmp(in->computation, run->instrs[i - 1].computation) != 0)
            first = i;
        push_string(js, names, in->name);
        push_number(js, comp, first);
    }
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
    }
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
