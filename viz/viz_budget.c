/* viz_budget.c - what keeps a diagram readable and its layout bounded: label text cut to a
 * width (tuples summarised), the layout cost of a graph in units, the time dot takes for them,
 * and the cheaper form of a big graph (edge labels as xlabels).
 * Owns: the cost model of a layout. Does not own: which view is drawn (viz_render.c decides
 * from these numbers). Invariant: everything here is a pure function of its inputs. */
#include <math.h>
#include <string.h>

#include "viz/viz_int.h"

void
viz_put_cut(SlBuf *out, const char *s, uint32_t width)
{
    size_t n = strlen(s);
    if (n <= width || width < 4) {
        sl_buf_puts(out, s);
        return;
    }
    sl_buf_append(out, s, width - 3);
    sl_buf_puts(out, "...");
}

/* Length of the element of a tuple shape starting at `s`: up to the ',' or ')' at depth 0. */
static size_t
element_len(const char *s)
{
    int depth = 0;
    size_t k = 0;
    for (; s[k]; k++) {
        char ch = s[k];
        if (ch == '(' || ch == '[' || ch == '{')
            depth++;
        else if (ch == ')' || ch == ']' || ch == '}') {
            if (depth == 0)
                break;
            depth--;
        } else if (ch == ',' && depth == 0)
            break;
    }
    return k;
}

/* One element, dims elided when it does not fit: "f32[..]", a nested tuple "(..)". */
static void
put_element(SlBuf *out, const char *s, size_t n, size_t room)
{
    if (n <= room) {
        sl_buf_append(out, s, n);
        return;
    }
    if (*s == '(') {
        sl_buf_puts(out, "(..)");
        return;
    }
    size_t type = strcspn(s, "[");
    sl_buf_append(out, s, type < n ? type : n);
    if (type < n)
        sl_buf_puts(out, "[..]");
}

void
viz_put_shape(SlBuf *out, const char *shape, uint32_t width)
{
    size_t n = strlen(shape);
    if (n <= width) {
        sl_buf_puts(out, shape);
        return;
    }
    if (shape[0] != '(') {
        put_element(out, shape, n, 0);
        return;
    }
    uint32_t count = 0;
    const char *p = shape + 1;
    while (*p && *p != ')') {
        size_t k = element_len(p);
        count++;
        p += k;
        if (*p == ',')
            p++;
        while (*p == ' ')
            p++;
    }
    size_t start = out->len;
    sl_buf_printf(out, "(%u elements: ", count);
    p = shape + 1;
    for (uint32_t i = 0; *p && *p != ')'; i++) {
        size_t k = element_len(p), used = out->len - start;
        /* ", ...)" must still fit after this element */
        if (used + 4 + 6 > width && i > 0) {
            sl_buf_puts(out, ", ...");
            break;
        }
        if (i)
            sl_buf_puts(out, ", ");
        size_t room = width > used + 8 ? width - used - 8 : 0;
        put_element(out, p, k, room);
        p += k;
        if (*p == ',')
            p++;
        while (*p == ' ')
            p++;
    }
    sl_buf_putc(out, ')');
}

uint64_t
viz_graph_units(const VizGraph *g)
{
    return (uint64_t)g->nodes.len + (uint64_t)g->edges.len;
}

/* Measured with dot (Graphviz 2.42) on views of the Llama 3 module (issue 18): 450 units in
 * 0.1 s, 710 to 750 in 2.4 to 4.3 s, 5,300 in 67 s with the edge labels as xlabels; between those the time
 * grows as units^1.7. */
double
viz_estimate_seconds(uint64_t units)
{
    return 3.0 * pow((double)units / 750.0, 1.7);
}

void
viz_graph_cheapen(VizGraph *g)
{
    g->cheap = viz_graph_units(g) > VIZ_CHEAP_UNITS;
    if (g->edges.len <= VIZ_XLABEL_EDGES)
        return;
    for (size_t i = 0; i < g->edges.len; i++) {
        VizEdge *e = &SL_VEC_AT(&g->edges, VizEdge, i);
        if (e->a.v[VIZ_A_LABEL] && !e->a.v[VIZ_A_XLABEL]) {
            e->a.v[VIZ_A_XLABEL] = e->a.v[VIZ_A_LABEL];
            e->a.v[VIZ_A_LABEL] = NULL;
        }
    }
}
