/* memory.c - the memory section of the reports: the estimate the trace recorded (tables memory
 * and memory_buffer, src/memory/memory.h for the model) as text, in summary.json ("memory"),
 * read back for diff, and diff's comparison and gate of the largest device peak.
 * Owns: the memory wording and JSON keys. Does not own: the estimate (computed when the run
 * was traced, src/memory). Invariant: output is deterministic: groups in trace order, devices
 * ascending, buffers largest first as recorded. */
#include <cJSON.h>
#include <math.h>
#include <string.h>

#include "reports/report_int.h"

#define GIB ((double)(1ull << 30))

static const char *
instr_name(const TraceRun *run, uint32_t i)
{
    return i < run->n_instrs ? run->instrs[i].name : NULL;
}

/* The input instruction an output instruction derives from (itself for 'before' ones). */
static const TraceRunInstr *
source_of(const TraceRun *run, uint32_t i)
{
    if (i >= run->n_instrs)
        return NULL;
    const TraceRunInstr *in = &run->instrs[i];
    if (in->phase == TRACE_AFTER && in->derived_from < run->n_instrs)
        return &run->instrs[in->derived_from];
    return in;
}

static bool
build_one(const TraceRun *run, const TraceRunMemory *m, const ReportOptions *o, SlArena *a,
          ReportMemory *out)
{
    memset(out, 0, sizeof(*out));
    out->is_partitioned = m->phase == TRACE_AFTER;
    out->n_devices = m->n_devices;
    if (m->n_devices && !(out->devices = SL_DUP_ARRAY(a, int64_t, m->devices, m->n_devices)))
        return false;
    out->parameter_bytes = m->parameter_bytes;
    out->output_bytes = m->output_bytes;
    out->alias_bytes = m->alias_bytes;
    out->peak_bytes = m->peak_bytes;
    out->peak_temp_bytes = m->peak_temp_bytes;
    out->peak_instr = instr_name(run, m->peak_instr);
    const TraceRunInstr *ps = source_of(run, m->peak_instr);
    out->peak_op_name = ps ? ps->op_name : NULL;
    out->is_over_limit = o->device_memory_gib > 0 && (double)m->peak_bytes > o->device_memory_gib * GIB;
    if (m->n_top && !(out->top = SL_NEW_ARRAY(a, ReportMemBuffer, m->n_top)))
        return false;
    if (m->n_profile && !(out->profile = SL_DUP_ARRAY(a, int64_t, m->profile, m->n_profile)))
        return false;
    out->n_profile = m->n_profile;
    out->profile_step = m->profile_step;
    for (uint32_t k = 0; k < m->n_top; k++) {
        const TraceRunMemBuffer *b = &m->top[k];
        const TraceRunInstr *s = source_of(run, b->instr);
        ReportMemBuffer rb = {instr_name(run, b->instr),
                              b->instr < run->n_instrs ? run->instrs[b->instr].opcode : NULL,
                              b->kind,
                              s ? s->name : NULL,
                              s ? s->op_name : NULL,
                              b->bytes,
                              b->leaf};
        out->top[out->n_top++] = rb;
    }
    return true;
}

bool
report_memory_build(const TraceRun *run, const ReportOptions *o, SlArena *a, Report *r)
{
    uint32_t n_after = 0;
    for (uint32_t k = 0; k < run->n_memory; k++)
        n_after += run->memory[k].phase == TRACE_AFTER;
    if (n_after && !(r->mem_groups = SL_NEW_ARRAY(a, ReportMemory, n_after)))
        return false;
    for (uint32_t k = 0; k < run->n_memory; k++) {
        const TraceRunMemory *m = &run->memory[k];
        ReportMemory *dst = NULL;
        if (m->phase == TRACE_AFTER)
            dst = &r->mem_groups[r->n_mem_groups++];
        else if (!r->mem_before && (dst = r->mem_before = SL_NEW(a, ReportMemory)) == NULL)
            return false;
        if (dst && !build_one(run, m, o, a, dst))
            return false;
    }
    return true;
}

/* ---- text ------------------------------------------------------------------------------ */

/* "0-3", "0,2,5-7" */
static void
put_devices(SlBuf *b, const int64_t *d, uint32_t n)
{
    for (uint32_t k = 0; k < n;) {
        uint32_t e = k;
        while (e + 1 < n && d[e + 1] == d[e] + 1)
            e++;
        sl_buf_printf(b, k ? ",%lld" : "%lld", (long long)d[k]);
        if (e > k)
            sl_buf_printf(b, "-%lld", (long long)d[e]);
        k = e + 1;
    }
}

static void
put_cell_size(SlBuf *b, int64_t v, int width)
{
    SlBuf t;
    sl_buf_init(&t);
    sl_buf_put_size(&t, (double)v);
    sl_buf_printf(b, "%-*s", width, t.failed ? "?" : sl_buf_str(&t).ptr);
    sl_buf_fini(&t);
}

static void
put_where(SlBuf *b, const ReportMemory *m)
{
    sl_buf_printf(b, "%%%s", m->peak_instr ? m->peak_instr : "?");
    if (m->peak_op_name)
        sl_buf_printf(b, " (%s)", m->peak_op_name);
}

static void
print_group(const ReportMemory *m, SlBuf *out)
{
    if (m->is_partitioned) {
        sl_buf_puts(out, "  after partitioning, device");
        sl_buf_puts(out, m->n_devices == 1 ? " " : "s ");
        put_devices(out, m->devices, m->n_devices);
    } else {
        sl_buf_puts(out, "  before partitioning, one device");
    }
    sl_buf_puts(out, ":\n    parameters ");
    put_cell_size(out, m->parameter_bytes, 11);
    sl_buf_puts(out, "outputs ");
    put_cell_size(out, m->output_bytes, 11);
    sl_buf_puts(out, "donated ");
    put_cell_size(out, m->alias_bytes, 0);
    sl_buf_puts(out, "\n    peak ");
    put_cell_size(out, m->peak_bytes, 0);
    sl_buf_puts(out, " (temporaries ");
    put_cell_size(out, m->peak_temp_bytes, 0);
    sl_buf_puts(out, ") at ");
    put_where(out, m);
    sl_buf_putc(out, '\n');
}

static void
print_top(const ReportMemory *m, SlBuf *out)
{
    if (!m->n_top)
        return;
    sl_buf_puts(out, "    largest buffers live at the peak:\n");
    for (uint32_t k = 0; k < m->n_top; k++) {
        const ReportMemBuffer *b = &m->top[k];
        sl_buf_printf(out, "    %2u. ", k + 1);
        put_cell_size(out, b->bytes, 11);
        sl_buf_printf(out, "%-10s %%%s", b->kind, b->name ? b->name : "?");
        if (b->leaf || (b->opcode && (!strcmp(b->opcode, "while") || !strcmp(b->opcode, "tuple"))))
            sl_buf_printf(out, " leaf %u", b->leaf);
        sl_buf_printf(out, " %s", b->opcode ? b->opcode : "?");
        if (m->is_partitioned && b->source && b->name && strcmp(b->source, b->name))
            sl_buf_printf(out, " <- %%%s", b->source);
        if (b->op_name)
            sl_buf_printf(out, " (%s)", b->op_name);
        sl_buf_putc(out, '\n');
    }
}

static int64_t
largest_peak(const Report *r, const ReportMemory **which)
{
    int64_t best = -1;
    *which = NULL;
    for (uint32_t k = 0; k < r->n_mem_groups; k++)
        if (r->mem_groups[k].peak_bytes > best) {
            best = r->mem_groups[k].peak_bytes;
            *which = &r->mem_groups[k];
        }
    return best;
}

void
report_memory_print_text(const Report *r, SlBuf *out)
{
    if (!r->mem_before && !r->n_mem_groups)
        return;
    sl_buf_puts(out, "\nmemory per device (estimated: live buffers under the module's schedule, "
                     "parameters at local shapes)\n");
    if (r->mem_before)
        print_group(r->mem_before, out);
    for (uint32_t k = 0; k < r->n_mem_groups; k++)
        print_group(&r->mem_groups[k], out);
    const ReportMemory *big = NULL;
    if (r->mem_before && largest_peak(r, &big) >= 0 && r->mem_before->peak_bytes > 0) {
        sl_buf_puts(out, "  partitioning changes the peak by ");
        double pct = 100.0 * ((double)big->peak_bytes - (double)r->mem_before->peak_bytes) /
                     (double)r->mem_before->peak_bytes;
        sl_buf_printf(out, "%+.1f%%\n", pct);
    }
    if (r->mem_before && r->mem_before->n_top) {
        sl_buf_puts(out, "  before partitioning:\n");
        print_top(r->mem_before, out);
    }
    for (uint32_t k = 0; k < r->n_mem_groups; k++) {
        if (r->n_mem_groups > 1) {
            sl_buf_puts(out, "  devices ");
            put_devices(out, r->mem_groups[k].devices, r->mem_groups[k].n_devices);
            sl_buf_puts(out, ":\n");
        } else {
            sl_buf_puts(out, "  after partitioning:\n");
        }
        print_top(&r->mem_groups[k], out);
    }
    report_memory_warning_lines(r, out);
}

void
report_memory_warning_lines(const Report *r, SlBuf *out)
{
    for (uint32_t k = 0; k < r->n_mem_groups; k++) {
        const ReportMemory *m = &r->mem_groups[k];
        if (!m->is_over_limit)
            continue;
        sl_buf_puts(out, "warning: device-memory: device");
        sl_buf_puts(out, m->n_devices == 1 ? " " : "s ");
        put_devices(out, m->devices, m->n_devices);
        sl_buf_puts(out, " peak at ");
        put_cell_size(out, m->peak_bytes, 0);
        sl_buf_printf(out, ", over --device-memory-gib %g, at ", r->model.device_memory_gib);
        put_where(out, m);
        sl_buf_putc(out, '\n');
    }
}

/* ---- summary.json ---------------------------------------------------------------------- */

static bool
jstr(cJSON *o, const char *key, const char *v)
{
    return v ? cJSON_AddStringToObject(o, key, v) != NULL : cJSON_AddNullToObject(o, key) != NULL;
}

static bool
jnum(cJSON *o, const char *key, double v)
{
    return cJSON_AddNumberToObject(o, key, v) != NULL;
}

static cJSON *
jgroup(const ReportMemory *m, bool with_devices)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o != NULL;
    if (ok && with_devices) {
        cJSON *d = cJSON_AddArrayToObject(o, "devices");
        ok = d != NULL;
        for (uint32_t k = 0; ok && k < m->n_devices; k++) {
            cJSON *n = cJSON_CreateNumber((double)m->devices[k]);
            ok = n && cJSON_AddItemToArray(d, n);
        }
    }
    ok = ok && jnum(o, "parameter_bytes", (double)m->parameter_bytes) &&
         jnum(o, "output_bytes", (double)m->output_bytes) &&
         jnum(o, "alias_bytes", (double)m->alias_bytes) &&
         jnum(o, "peak_bytes", (double)m->peak_bytes) &&
         jnum(o, "peak_temp_bytes", (double)m->peak_temp_bytes) &&
         jstr(o, "peak_instr", m->peak_instr) && jstr(o, "peak_op_name", m->peak_op_name);
    if (ok && with_devices)
        ok = cJSON_AddBoolToObject(o, "over_device_memory", m->is_over_limit) != NULL;
    cJSON *t = ok ? cJSON_AddArrayToObject(o, "peak_buffers") : NULL;
    ok = t != NULL;
    for (uint32_t k = 0; ok && k < m->n_top; k++) {
        const ReportMemBuffer *b = &m->top[k];
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(t, e) && jstr(e, "name", b->name) &&
             jstr(e, "opcode", b->opcode) && jstr(e, "kind", b->kind) &&
             jnum(e, "bytes", (double)b->bytes) && jnum(e, "leaf", b->leaf) &&
             jstr(e, "source", b->source) &&
             jstr(e, "op_name", b->op_name);
    }
    cJSON *p = ok ? cJSON_AddObjectToObject(o, "profile") : NULL;
    ok = p && jnum(p, "step", (double)m->profile_step);
    cJSON *lb = ok ? cJSON_AddArrayToObject(p, "live_bytes") : NULL;
    ok = lb != NULL;
    for (uint32_t k = 0; ok && k < m->n_profile; k++) {
        cJSON *n = cJSON_CreateNumber((double)m->profile[k]);
        ok = n && cJSON_AddItemToArray(lb, n);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

bool
report_memory_put_json(const Report *r, struct cJSON *root)
{
    if (!r->mem_before) /* a trace of the same run always holds both */
        return true;
    cJSON *mem = cJSON_AddObjectToObject(root, "memory");
    if (!mem)
        return false;
    cJSON *u = jgroup(r->mem_before, false);
    bool ok = u && cJSON_AddItemToObject(mem, "unpartitioned", u);
    ok = ok && (r->model.device_memory_gib > 0
                    ? jnum(mem, "device_memory_gib", r->model.device_memory_gib)
                    : cJSON_AddNullToObject(mem, "device_memory_gib") != NULL);
    cJSON *d = ok ? cJSON_AddArrayToObject(mem, "devices") : NULL;
    ok = d != NULL;
    for (uint32_t k = 0; ok && k < r->n_mem_groups; k++) {
        cJSON *g = jgroup(&r->mem_groups[k], true);
        ok = g && cJSON_AddItemToArray(d, g);
    }
    return ok;
}

/* ---- reading back (diff) --------------------------------------------------------------- */

static int64_t
get_i64(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? report_json_i64(v->valuedouble) : 0;
}

static const char *
get_str(const cJSON *o, const char *key, SlArena *a)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v))
        return NULL;
    return sl_arena_strndup(a, v->valuestring, strlen(v->valuestring));
}

static bool
read_group(const cJSON *o, bool is_partitioned, SlArena *a, ReportMemory *m)
{
    memset(m, 0, sizeof(*m));
    m->is_partitioned = is_partitioned;
    m->parameter_bytes = get_i64(o, "parameter_bytes");
    m->output_bytes = get_i64(o, "output_bytes");
    m->alias_bytes = get_i64(o, "alias_bytes");
    m->peak_bytes = get_i64(o, "peak_bytes");
    m->peak_temp_bytes = get_i64(o, "peak_temp_bytes");
    m->peak_instr = get_str(o, "peak_instr", a);
    m->peak_op_name = get_str(o, "peak_op_name", a);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "devices");
    int n = cJSON_IsArray(d) ? cJSON_GetArraySize(d) : 0;
    if (n > 0 && !(m->devices = SL_NEW_ARRAY(a, int64_t, (size_t)n)))
        return false;
    const cJSON *e;
    cJSON_ArrayForEach(e, d) if (cJSON_IsNumber(e)) m->devices[m->n_devices++] =
        report_json_i64(e->valuedouble);
    return true;
}

bool
report_memory_parse(const struct cJSON *root, SlArena *a, Report *r)
{
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(root, "memory");
    if (!cJSON_IsObject(mem))
        return true;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(mem, "unpartitioned");
    if (cJSON_IsObject(u) &&
        (!(r->mem_before = SL_NEW(a, ReportMemory)) || !read_group(u, false, a, r->mem_before)))
        return false;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(mem, "devices");
    int n = cJSON_IsArray(d) ? cJSON_GetArraySize(d) : 0;
    if (n > 0 && !(r->mem_groups = SL_NEW_ARRAY(a, ReportMemory, (size_t)n)))
        return false;
    const cJSON *g;
    cJSON_ArrayForEach(g, d)
    {
        if (cJSON_IsObject(g) && !read_group(g, true, a, &r->mem_groups[r->n_mem_groups++]))
            return false;
    }
    return true;
}

/* ---- diff ------------------------------------------------------------------------------ */

/* The largest device peak of each side; -1 when a side has no estimate. */
static void
peaks(const Report *old_r, const Report *new_r, int64_t *o, int64_t *n)
{
    const ReportMemory *w;
    *o = largest_peak(old_r, &w);
    *n = largest_peak(new_r, &w);
}

bool
report_memory_diff_over(const Report *old_r, const Report *new_r, const ReportDiffOptions *o)
{
    int64_t a, b;
    peaks(old_r, new_r, &a, &b);
    if (!o->has_memory_budget || a < 0 || b < 0 || b <= a)
        return false;
    if (a == 0)
        return true; /* growth from nothing cannot be within a percentage */
    return 100.0 * (double)(b - a) / (double)a > o->max_memory_increase_pct;
}

void
report_memory_diff_text(const Report *old_r, const Report *new_r, const ReportDiffOptions *o,
                        SlBuf *b)
{
    int64_t pa, pb;
    peaks(old_r, new_r, &pa, &pb);
    if (pa < 0 && pb < 0)
        return;
    sl_buf_printf(b, "\nmemory (estimated peak of the largest device)\n  %-32s ", "peak bytes");
    if (pa >= 0)
        sl_buf_put_size(b, (double)pa);
    else
        sl_buf_puts(b, "(none)");
    sl_buf_puts(b, " -> ");
    if (pb >= 0)
        sl_buf_put_size(b, (double)pb);
    else
        sl_buf_puts(b, "(none)");
    if (pa > 0 && pb >= 0)
        sl_buf_printf(b, "  %+.1f%%", 100.0 * (double)(pb - pa) / (double)pa);
    sl_buf_putc(b, '\n');
    if (o->has_memory_budget)
        sl_buf_printf(b, "budget --max-memory-increase %g%%: peak memory %s\n",
                      o->max_memory_increase_pct,
                      report_memory_diff_over(old_r, new_r, o) ? "OVER: FAIL" : "ok: pass");
}

bool
report_memory_diff_json(struct cJSON *root, const Report *old_r, const Report *new_r,
                        const ReportDiffOptions *o)
{
    int64_t pa, pb;
    peaks(old_r, new_r, &pa, &pb);
    cJSON *m = cJSON_AddObjectToObject(root, "memory");
    return m &&
           (pa >= 0 ? jnum(m, "old_peak_bytes", (double)pa)
                    : cJSON_AddNullToObject(m, "old_peak_bytes") != NULL) &&
           (pb >= 0 ? jnum(m, "new_peak_bytes", (double)pb)
                    : cJSON_AddNullToObject(m, "new_peak_bytes") != NULL) &&
           (o->has_memory_budget ? jnum(m, "max_memory_increase_pct", o->max_memory_increase_pct)
                                 : cJSON_AddNullToObject(m, "max_memory_increase_pct") != NULL) &&
           cJSON_AddBoolToObject(m, "over_budget", report_memory_diff_over(old_r, new_r, o));
}
