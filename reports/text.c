/* text.c - the text report for people: what was assumed, totals, per kind, per device, top
 * source ops, per op_name, every collective, windowed loops. Owns: layout (aligned tables) and
 * number wording. Does not own: any figure (traffic.c computes them all).
 * Invariant: deterministic; bytes and times are printed for people (three significant digits,
 * B/KiB/MiB/GiB, us/ms/s); exact figures are summary.json's and the trace's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/report_int.h"

enum { MAX_COLS = 10, WARNINGS_SHOWN = 3 };

void
report_put_bytes(SlBuf *b, double v)
{
    if (v == floor(v) && fabs(v) < 9007199254740992.0) { /* 2^53: exact as an integer */
        sl_buf_printf(b, "%.0f", v);
        return;
    }
    char tmp[64];
    int n = snprintf(tmp, sizeof(tmp), "%.3f", v);
    if (n < 0 || (size_t)n >= sizeof(tmp)) { /* |v| >= 2^53 with decimals: never exact */
        sl_buf_printf(b, "%.17g", v);
        return;
    }
    while (n > 0 && tmp[n - 1] == '0')
        n--;
    if (n > 0 && tmp[n - 1] == '.')
        n--;
    sl_buf_append(b, tmp, (size_t)n);
}

/* ---- a small aligned table ---------------------------------------------------------------- */

typedef struct Table {
    uint32_t n_cols;
    const char *align; /* one of 'l' / 'r' per column */
    SlVec cells;       /* char *, row-major, heap */
    SlBuf cell;        /* the cell being written */
} Table;

static void
table_init(Table *t, const char *align)
{
    memset(t, 0, sizeof(*t));
    t->n_cols = (uint32_t)strlen(align);
    t->align = align;
    sl_buf_init(&t->cell);
}

/* Ends the cell written into t->cell. */
static void
table_end_cell(Table *t)
{
    char *c = malloc(t->cell.len + 1);
    if (c) {
        memcpy(c, t->cell.data ? t->cell.data : "", t->cell.len);
        c[t->cell.len] = '\0';
    }
    if (!c || !SL_VEC_PUSH(&t->cells, char *, c)) {
        free(c);
        t->cell.failed = true;
    }
    sl_buf_clear(&t->cell);
}

static void
table_cell(Table *t, const char *text)
{
    sl_buf_puts(&t->cell, text ? text : "");
    table_end_cell(t);
}

static void
table_bytes(Table *t, double v)
{
    sl_buf_put_size(&t->cell, v);
    table_end_cell(t);
}

static void
table_time(Table *t, double us)
{
    sl_buf_put_duration_us(&t->cell, us);
    table_end_cell(t);
}

static void
table_print(Table *t, SlBuf *out, const char *indent)
{
    size_t w[MAX_COLS] = {0};
    size_t n = t->cells.len;
    for (size_t k = 0; k < n; k++) {
        size_t len = strlen(SL_VEC_AT(&t->cells, char *, k));
        size_t col = k % t->n_cols;
        w[col] = len > w[col] ? len : w[col];
    }
    for (size_t k = 0; k < n; k++) {
        size_t col = k % t->n_cols;
        const char *c = SL_VEC_AT(&t->cells, char *, k);
        bool last = col + 1 == t->n_cols;
        if (col == 0)
            sl_buf_puts(out, indent);
        if (t->align[col] == 'r')
            sl_buf_printf(out, "%*s", (int)w[col], c);
        else if (last)
            sl_buf_puts(out, c);
        else
            sl_buf_printf(out, "%-*s", (int)w[col], c);
        sl_buf_puts(out, last ? "\n" : "  ");
        free(SL_VEC_AT(&t->cells, char *, k));
    }
    if (t->cell.failed)
        out->failed = true;
    sl_vec_fini(&t->cells);
    sl_buf_fini(&t->cell);
}

/* ---- sections ------------------------------------------------------------------------------ */

static void
put_time(SlBuf *b, double us)
{
    sl_buf_put_duration_us(b, us);
}

static uint32_t
top_of(const Report *r)
{
    return r->model.top ? r->model.top : REPORT_DEFAULT_TOP;
}

static void
print_model(const Report *r, SlBuf *out)
{
    const ReportOptions *o = &r->model;
    sl_buf_puts(out, "model: ring algorithms, bytes per device and per execution, g = group size, "
                     "S = full buffer:\n"
                     "       all-gather, reduce-scatter, all-to-all (g-1)/g*S; all-reduce "
                     "2(g-1)/g*S;\n"
                     "       collective-permute S sent by each source, S received by each target;"
                     " groups of one 0;\n"
                     "       collectives in loops count once per iteration (unknown trip counts "
                     "are reported apart)\n");
    sl_buf_puts(out,
                "time:  latency * steps + bytes each device sends / bandwidth, the link speed read "
                "as\n       nccl-tests bus bandwidth, collectives one after another;\n");
    sl_buf_printf(out, "       link %g Gbit/s (%s), latency %g us per step (%s)\n", o->link_gbps,
                  o->is_default_link ? "default; --link-gbps" : "--link-gbps", o->latency_us,
                  o->is_default_latency ? "default; --latency-us" : "--latency-us");
    if (o->devices_per_node > 0)
        sl_buf_printf(out, "       %lld devices per node, %g Gbit/s between nodes (%s)\n",
                      (long long)o->devices_per_node, o->inter_node_gbps,
                      o->is_default_inter ? "default; --inter-node-gbps" : "--inter-node-gbps");
    if (o->mesh)
        sl_buf_printf(out, "mesh:  %s (axes over the device order, last axis fastest)\n", o->mesh);
    else
        sl_buf_puts(out, "mesh:  none given (--mesh data=2,model=4 names the axes collectives "
                         "span)\n");
}

static void
put_unknown(SlBuf *out, const ReportTraffic *t)
{
    sl_buf_printf(out, "%u collective%s in loops with unknown trip counts: ",
                  t->unknown_trip_collectives, t->unknown_trip_collectives == 1 ? "" : "s");
    sl_buf_put_size(out, t->unknown_send_bytes);
    sl_buf_puts(out, " sent per execution, not included above");
}

static void
print_totals(const Report *r, SlBuf *out)
{
    const ReportTraffic *t = &r->total;
    sl_buf_printf(out, "\ntotals\n  collectives      %u\n  bytes sent       ", t->collectives);
    sl_buf_put_size(out, t->send_bytes);
    sl_buf_puts(out, ", summed over devices; as many are received\n  busiest device   ");
    if (r->bottleneck_device >= 0) {
        const ReportTraffic *d = &r->devices[r->bottleneck_device].t;
        sl_buf_printf(out, "%lld: ", (long long)r->bottleneck_device);
        sl_buf_put_size(out, d->send_bytes);
        sl_buf_puts(out, " sent, ");
        sl_buf_put_size(out, d->recv_bytes);
        sl_buf_puts(out, " received\n");
    } else {
        sl_buf_puts(out, "none (no device moves any byte)\n");
    }
    if (r->n_fallback_sources) {
        sl_buf_puts(out, "  by fallback      ");
        sl_buf_put_size(out, r->fallback.send_bytes);
        sl_buf_printf(out, " of it (%u collective%s) at %u custom call%s partitioned by "
                           "fallback: XLA runs their own partitioning rule, so this part is an "
                           "upper bound\n",
                      r->fallback.collectives, r->fallback.collectives == 1 ? "" : "s",
                      r->n_fallback_sources, r->n_fallback_sources == 1 ? "" : "s");
    }
    sl_buf_puts(out, "  estimated time   ");
    put_time(out, t->time_us);
    sl_buf_puts(out, "\n  trip counts      ");
    if (t->unknown_trip_collectives)
        put_unknown(out, t);
    else
        sl_buf_puts(out, "all known");
    sl_buf_putc(out, '\n');
}

static void
print_kinds(const Report *r, SlBuf *out)
{
    sl_buf_puts(out, "\nper collective kind\n");
    if (!r->n_kinds) {
        sl_buf_puts(out, "  (no collectives)\n");
        return;
    }
    Table t;
    table_init(&t, "lrrrr");
    const char *head[] = {"kind", "count", "bytes sent", "time", "unknown trips"};
    for (size_t k = 0; k < SL_COUNTOF(head); k++)
        table_cell(&t, head[k]);
    for (uint32_t k = 0; k < r->n_kinds; k++) {
        const ReportRow *row = &r->kinds[k];
        table_cell(&t, row->key);
        sl_buf_printf(&t.cell, "%u", row->t.collectives);
        table_end_cell(&t);
        table_bytes(&t, row->t.send_bytes);
        table_time(&t, row->t.time_us);
        sl_buf_printf(&t.cell, "%u", row->t.unknown_trip_collectives);
        table_end_cell(&t);
    }
    table_print(&t, out, "  ");
}

static bool
same_traffic(const ReportTraffic *a, const ReportTraffic *b)
{
    return a->send_bytes == b->send_bytes && a->recv_bytes == b->recv_bytes &&
           a->collectives == b->collectives &&
           a->unknown_trip_collectives == b->unknown_trip_collectives &&
           a->unknown_send_bytes == b->unknown_send_bytes &&
           a->unknown_recv_bytes == b->unknown_recv_bytes;
}

/* Devices with identical traffic share one row, named by their ids as ranges ("0-3,8-11");
 * rows come in the order of their lowest device. */
static void
print_devices(const Report *r, SlBuf *out)
{
    sl_buf_puts(out, "\nper device (devices with identical traffic share a row)\n");
    if (!r->n_devices) {
        sl_buf_puts(out, "  (no devices)\n");
        return;
    }
    uint32_t *row_of = calloc(r->n_devices, sizeof(uint32_t)); /* 1 + first device of its row */
    if (!row_of) {
        out->failed = true;
        return;
    }
    Table t;
    table_init(&t, "lrrr");
    const char *head[] = {"devices", "bytes sent", "bytes received", "collectives"};
    for (size_t k = 0; k < SL_COUNTOF(head); k++)
        table_cell(&t, head[k]);
    for (uint32_t d = 0; d < r->n_devices; d++) {
        if (row_of[d])
            continue;
        const ReportTraffic *x = &r->devices[d].t;
        uint32_t n = 0;
        for (uint32_t e = d; e < r->n_devices; e++)
            if (!row_of[e] && same_traffic(x, &r->devices[e].t)) {
                row_of[e] = d + 1;
                n++;
            }
        bool first = true;
        for (uint32_t e = d; e < r->n_devices; e++) {
            if (row_of[e] != d + 1 || (e > d && row_of[e - 1] == d + 1))
                continue;
            uint32_t last = e;
            while (last + 1 < r->n_devices && row_of[last + 1] == d + 1)
                last++;
            sl_buf_printf(&t.cell, "%s%lld", first ? "" : ",", (long long)r->devices[e].device);
            if (last > e)
                sl_buf_printf(&t.cell, "-%lld", (long long)r->devices[last].device);
            first = false;
        }
        table_end_cell(&t);
        table_bytes(&t, x->send_bytes);
        table_bytes(&t, x->recv_bytes);
        sl_buf_printf(&t.cell, "%u", x->collectives);
        table_end_cell(&t);
    }
    free(row_of);
    table_print(&t, out, "  ");
}

static void
print_rows(const char *title, const ReportRow *rows, uint32_t n, bool is_source, uint32_t top,
           SlBuf *out)
{
    sl_buf_printf(out, "\n%s\n", title);
    if (!n) {
        sl_buf_puts(out, "  (none)\n");
        return;
    }
    Table t;
    table_init(&t, is_source ? "llrrl" : "rrl");
    if (is_source) {
        table_cell(&t, "source");
        table_cell(&t, "opcode");
    }
    table_cell(&t, "collectives");
    table_cell(&t, "bytes sent");
    table_cell(&t, "op_name");
    uint32_t shown = n < top ? n : top;
    for (uint32_t k = 0; k < shown; k++) {
        const ReportRow *row = &rows[k];
        if (is_source) {
            sl_buf_printf(&t.cell, "%s%s", row->key[0] ? "%" : "(none)", row->key);
            table_end_cell(&t);
            table_cell(&t, row->opcode ? row->opcode : "-");
        }
        sl_buf_printf(&t.cell, "%u", row->t.collectives);
        table_end_cell(&t);
        table_bytes(&t, row->t.send_bytes);
        const char *op = is_source ? row->op_name : row->key;
        table_cell(&t, op && op[0] ? op : "-");
    }
    table_print(&t, out, "  ");
    if (shown < n)
        sl_buf_printf(out, "  ... %u more in summary.json\n", n - shown);
}

/* A collective's cost over the run: bytes sent summed over devices, trip count applied; a
 * collective of unknown trip count counts one execution (it ranks, it is not added up). */
static double
total_send(const ReportCollective *c)
{
    return c->trip_count >= 0 ? c->send_bytes * (double)c->trip_count : c->send_bytes;
}

static double
total_time(const ReportCollective *c)
{
    return c->trip_count >= 0 ? c->time_us * (double)c->trip_count : c->time_us;
}

typedef struct Ranked {
    const ReportCollective *c;
    uint32_t at; /* output order, the last tie-break */
} Ranked;

static int
by_cost(const void *pa, const void *pb)
{
    const Ranked *a = pa, *b = pb;
    double sa = total_send(a->c), sb = total_send(b->c);
    if (sa != sb)
        return sa > sb ? -1 : 1;
    double ta = total_time(a->c), tb = total_time(b->c);
    if (ta != tb)
        return ta > tb ? -1 : 1;
    return a->at < b->at ? -1 : a->at > b->at;
}

static void
collective_row(Table *t, const ReportCollective *c)
{
    sl_buf_printf(&t->cell, "%%%s", c->name);
    table_end_cell(t);
    table_cell(t, c->kind);
    table_cell(t, c->axes ? c->axes : "-");
    if (report_kind_of(c->kind) == RK_PERMUTE)
        sl_buf_printf(&t->cell, "%lld pairs", (long long)c->n_groups);
    else
        sl_buf_printf(&t->cell, "%lldx%lld", (long long)c->n_groups, (long long)c->group_size);
    table_end_cell(t);
    table_bytes(t, c->bytes);
    if (c->trip_count < 0 && c->max_trip_count >= 0)
        sl_buf_printf(&t->cell, "<=%lld", (long long)c->max_trip_count);
    else if (c->trip_count < 0)
        sl_buf_puts(&t->cell, "unknown");
    else
        sl_buf_printf(&t->cell, "%lld", (long long)c->trip_count);
    table_end_cell(t);
    table_bytes(t, c->max_device_send_bytes);
    sl_buf_put_size(&t->cell, total_send(c));
    if (c->trip_count < 0)
        sl_buf_puts(&t->cell, " (1 execution)");
    table_end_cell(t);
    put_time(&t->cell, total_time(c));
    if (c->crosses_nodes)
        sl_buf_puts(&t->cell, " (inter-node)");
    table_end_cell(t);
    if (c->source)
        sl_buf_printf(&t->cell, "%%%s", c->source);
    else
        sl_buf_puts(&t->cell, "(none)");
    if (c->cause)
        sl_buf_printf(&t->cell, " (%s)", c->cause);
    table_end_cell(t);
}

/* The `top` costliest collectives: most bytes sent over the run first, then most time. */
static void
print_collectives(const Report *r, SlBuf *out)
{
    uint32_t n = r->n_collectives, top = top_of(r), shown = n < top ? n : top;
    if (n > shown)
        sl_buf_printf(out, "\ncollectives (the %u costliest of %u: bytes sent over the run)\n",
                      shown, n);
    else
        sl_buf_puts(out, "\ncollectives (costliest first: bytes sent over the run)\n");
    if (!n) {
        sl_buf_puts(out, "  (none)\n");
        return;
    }
    Ranked *rank = malloc(n * sizeof(Ranked));
    if (!rank) {
        out->failed = true;
        return;
    }
    for (uint32_t k = 0; k < n; k++)
        rank[k] = (Ranked){&r->collectives[k], k};
    qsort(rank, n, sizeof(Ranked), by_cost);
    Table t;
    table_init(&t, "lllrrrrrrl");
    const char *head[] = {"name",       "kind",       "over", "groups", "S",
                          "trips",      "max sent/device", "total sent", "total time",
                          "source"};
    for (size_t k = 0; k < SL_COUNTOF(head); k++)
        table_cell(&t, head[k]);
    for (uint32_t k = 0; k < shown; k++)
        collective_row(&t, rank[k].c);
    free(rank);
    table_print(&t, out, "  ");
    sl_buf_puts(out, "  (max sent/device is per execution; total sent is summed over devices "
                     "and executions)\n");
    if (shown < n)
        sl_buf_printf(out, "  ... %u more in summary.json (--top K shows K)\n", n - shown);
}

static void
print_loops(const Report *r, SlBuf *out)
{
    sl_buf_puts(out, "\nwindowed loops\n");
    if (!r->n_loops) {
        sl_buf_puts(out, "  (none)\n");
        return;
    }
    Table t;
    table_init(&t, "lllrr");
    const char *head[] = {"dot", "loop", "variant", "iterations", "bytes/iteration"};
    for (size_t k = 0; k < SL_COUNTOF(head); k++)
        table_cell(&t, head[k]);
    for (uint32_t k = 0; k < r->n_loops; k++) {
        const ReportLoop *l = &r->loops[k];
        sl_buf_printf(&t.cell, "%%%s", l->dot);
        table_end_cell(&t);
        sl_buf_printf(&t.cell, "%%%s", l->loop);
        table_end_cell(&t);
        table_cell(&t, l->variant);
        sl_buf_printf(&t.cell, "%lld", (long long)l->iterations);
        table_end_cell(&t);
        table_bytes(&t, (double)l->bytes_per_iteration);
    }
    table_print(&t, out, "  ");
}

/* The warnings of one kind: r->warnings[*first, end) (they are grouped by kind). */
static uint32_t
kind_end(const Report *r, uint32_t first)
{
    uint32_t e = first;
    while (e < r->n_warnings && strcmp(r->warnings[e].kind, r->warnings[first].kind) == 0)
        e++;
    return e;
}

static void
put_warning(SlBuf *out, const ReportWarning *w)
{
    if (w->instr)
        sl_buf_printf(out, "%%%s", w->instr);
    else
        sl_buf_puts(out, "(module)");
    if (w->op_name && w->op_name[0])
        sl_buf_printf(out, " (%s)", w->op_name);
    sl_buf_printf(out, ": %s", w->message);
}

static void
print_warnings(const Report *r, SlBuf *out)
{
    sl_buf_puts(out, "\nwarnings\n");
    if (!r->n_warnings) {
        sl_buf_puts(out, "  (none)\n");
        return;
    }
    Table t;
    table_init(&t, "lr");
    table_cell(&t, "kind");
    table_cell(&t, "count");
    for (uint32_t k = 0; k < r->n_warnings; k = kind_end(r, k)) {
        table_cell(&t, r->warnings[k].kind);
        sl_buf_printf(&t.cell, "%u", kind_end(r, k) - k);
        table_end_cell(&t);
    }
    table_print(&t, out, "  ");
    for (uint32_t k = 0; k < r->n_warnings; k = kind_end(r, k)) {
        uint32_t end = kind_end(r, k);
        sl_buf_printf(out, "  %s:\n", r->warnings[k].kind);
        for (uint32_t w = k; w < end && w < k + WARNINGS_SHOWN; w++) {
            sl_buf_puts(out, "    ");
            put_warning(out, &r->warnings[w]);
            sl_buf_putc(out, '\n');
        }
        if (end - k > WARNINGS_SHOWN)
            sl_buf_printf(out, "    ... %u more in summary.json\n", end - k - WARNINGS_SHOWN);
    }
}

void
report_print_warning_lines(const Report *r, SlBuf *out)
{
    for (uint32_t k = 0; k < r->n_warnings; k = kind_end(r, k)) {
        uint32_t n = kind_end(r, k) - k;
        sl_buf_printf(out, "warning: %s: %u, first ", r->warnings[k].kind, n);
        put_warning(out, &r->warnings[k]);
        sl_buf_putc(out, '\n');
    }
    report_memory_warning_lines(r, out);
}

/* Which while loops have no trip count and why: their collectives are the unknown-trip
 * traffic the totals keep apart (with those of conditional branches). Printed only when there
 * is such traffic. */
static void
print_unknown_loops(const Report *r, SlBuf *out)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < r->n_whiles; k++)
        n += r->whiles[k].trip_count < 0;
    if (r->n_unknown_in_branches)
        sl_buf_printf(out,
                      "\n%u collective%s of unknown trip count in conditional branches: a branch "
                      "runs at most as often as its conditional, whether it runs is data\n",
                      r->n_unknown_in_branches, r->n_unknown_in_branches == 1 ? "" : "s");
    if (!n)
        return;
    sl_buf_printf(out, "\nloops with unknown trip counts (%u; their collectives are counted apart, "
                       "per execution; --trip-count NAME=N gives a count)\n",
                  n);
    Table t;
    table_init(&t, "llrrl");
    const char *head[] = {"loop", "source", "collectives", "bytes sent/execution", "why"};
    for (size_t k = 0; k < SL_COUNTOF(head); k++)
        table_cell(&t, head[k]);
    for (uint32_t k = 0; k < r->n_whiles; k++) {
        const ReportWhile *w = &r->whiles[k];
        if (w->trip_count >= 0)
            continue;
        sl_buf_printf(&t.cell, "%%%s", w->loop);
        table_end_cell(&t);
        if (w->source)
            sl_buf_printf(&t.cell, "%%%s", w->source);
        table_end_cell(&t);
        sl_buf_printf(&t.cell, "%u", w->collectives);
        table_end_cell(&t);
        table_bytes(&t, w->send_bytes_per_execution);
        table_cell(&t, w->reason ? w->reason : "-");
    }
    table_print(&t, out, "  ");
}

void
report_print_text(const Report *r, SlBuf *out)
{
    sl_buf_printf(out,
                  "shardlens report: module %s, %lld devices, input %s (traced by shardlens %s)\n",
                  r->module ? r->module : "?", (long long)r->num_partitions,
                  r->input_hash ? r->input_hash : "?", r->tool_version ? r->tool_version : "?");
    print_model(r, out);
    print_totals(r, out);
    print_warnings(r, out); /* beside the totals: what they can be trusted for */
    print_kinds(r, out);
    print_devices(r, out);
    print_rows("top source ops (bytes sent, summed over devices)", r->sources, r->n_sources, true,
               top_of(r), out);
    print_rows("per op_name", r->op_names, r->n_op_names, false, top_of(r), out);
    print_collectives(r, out);
    print_loops(r, out);
    print_unknown_loops(r, out);
    report_rollup_print_text(r, out);
    report_memory_print_text(r, out);
}

void
report_print_summary_line(const Report *r, SlBuf *out)
{
    const ReportTraffic *t = &r->total;
    sl_buf_printf(out, "%u collective%s, ", t->collectives, t->collectives == 1 ? "" : "s");
    sl_buf_put_size(out, t->send_bytes);
    sl_buf_puts(out, " sent summed over devices");
    if (r->bottleneck_device >= 0) {
        const ReportTraffic *d = &r->devices[r->bottleneck_device].t;
        sl_buf_printf(out, ", busiest device %lld (", (long long)r->bottleneck_device);
        sl_buf_put_size(out, d->send_bytes);
        sl_buf_puts(out, " sent, ");
        sl_buf_put_size(out, d->recv_bytes);
        sl_buf_puts(out, " received)");
    }
    sl_buf_puts(out, ", estimated ");
    put_time(out, t->time_us);
    if (t->unknown_trip_collectives) {
        sl_buf_puts(out, "; ");
        put_unknown(out, t);
    }
    sl_buf_putc(out, '\n');
}
