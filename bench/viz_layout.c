/* viz_layout.c - what dot's time grows with (bench, not a test): lays out views of traced runs
 * of several sizes (whole phases drawn uncollapsed, --focus neighbourhoods of growing depth,
 * every group of the group tree) and prints per view its nodes, edges, labelled edges, layout
 * units (viz_graph_units, what --layout-budget counts), the estimate and dot's CPU seconds,
 * for fitting viz_estimate_seconds (bench/README.md).
 * usage: bench_viz_layout TRACE.db [FOCUS] [MAX_DEPTH]   (tab-separated lines on stdout)
 *        bench_viz_layout --dot FILE.dot...               (dot's CPU seconds for each file) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cgraph.h>
#include <gvc.h>

#include "trace/trace_db.h"
#include "trace/trace_run.h"
#include "viz/viz.h"

static double
cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Nodes: lines `  "id" [`; edges: lines with ` -> `; labelled: edges with a label (not xlabel). */
static void
shape_of(const SlBuf *dot, size_t *nodes, size_t *edges, size_t *labelled)
{
    *nodes = *edges = *labelled = 0;
    for (const char *line = dot->data; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[256];
        size_t k = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
        memcpy(buf, line, k);
        buf[k] = 0;
        if (strstr(buf, "\" -> \"")) {
            (*edges)++;
            *labelled += strstr(buf, " [label=") != NULL;
        } else if (!strncmp(buf, "  \"", 3) || !strncmp(buf, "    \"", 5))
            (*nodes)++;
        line = end ? end + 1 : NULL;
    }
}

/* After dot's own layout of `dot`: the virtual nodes of its long edges (ranks crossed, over
 * every edge; twice the ranks when a label takes a rank of its own) and the widest rank, and
 * dot's CPU seconds for that layout. */
static GVC_t *g_gvc;

static double
real_ranks(const SlBuf *dot, uint64_t *virt, uint64_t *widest, uint64_t *sq)
{
    *virt = *widest = *sq = 0;
    Agraph_t *g = agmemread(dot->data);
    if (!g)
        return -1;
    double t0 = cpu_seconds();
    gvLayout(g_gvc, g, "dot");
    double t = cpu_seconds() - t0;
    int max_rank = 0;
    for (Agnode_t *n = agfstnode(g); n; n = agnxtnode(g, n))
        max_rank = ND_rank(n) > max_rank ? ND_rank(n) : max_rank;
    uint64_t *width = calloc((size_t)max_rank + 2, sizeof(uint64_t));
    for (Agnode_t *n = agfstnode(g); n && width; n = agnxtnode(g, n)) {
        width[ND_rank(n)]++;
        for (Agedge_t *e = agfstout(g, n); e; e = agnxtout(g, e)) {
            int a = ND_rank(agtail(e)), b = ND_rank(aghead(e));
            int lo = a < b ? a : b, hi = a < b ? b : a;
            for (int k = lo + 1; k < hi; k++)
                width[k]++;
            *virt += hi - lo > 1 ? (uint64_t)(hi - lo - 1) : 0;
        }
    }
    for (int k = 0; width && k <= max_rank; k++) {
        *widest = width[k] > *widest ? width[k] : *widest;
        *sq += width[k] * width[k];
    }
    free(width);
    agclose(g); /* the layout's memory is left to the process (viz_render.c's double free) */
    return t;
}

static void
measure(VizRenderer *r, const VizOptions *o, const char *db, const char *what, const SlBuf *dot,
        uint64_t units)
{
    size_t nodes, edges, labelled;
    shape_of(dot, &nodes, &edges, &labelled);
    SlBuf svg;
    sl_buf_init(&svg);
    SlError err = {0};
    double t0 = cpu_seconds();
    SlStatus st = viz_layout_svg(r, dot, o, what, units, &svg, &err);
    double t = cpu_seconds() - t0;
    sl_buf_fini(&svg);
    if (st) {
        fprintf(stderr, "%s %s: %s\n", db, what, err.msg);
        return;
    }
    uint64_t virt, widest, sq;
    double t2 = real_ranks(dot, &virt, &widest, &sq);
    printf("%s\t%s\t%zu\t%zu\t%zu\t%llu\t%.3f\t%llu\t%llu\t%llu\t%.3f\n", db, what, nodes,
           edges, labelled, (unsigned long long)units, t, (unsigned long long)virt,
           (unsigned long long)widest, (unsigned long long)sq, t2);
    fflush(stdout);
}

int
main(int argc, char **argv)
{
    g_gvc = gvContext();
    if (argc < 2) {
        fprintf(stderr, "usage: bench_viz_layout TRACE.db [FOCUS] [MAX_DEPTH]\n");
        return 2;
    }
    if (!strcmp(argv[1], "--dot")) {
        VizRenderer *r = NULL;
        SlError err = {0};
        if (viz_renderer_new(&r, &err))
            return 1;
        VizOptions o;
        viz_options_init(&o);
        for (int k = 2; k < argc; k++) {
            SlBuf dot;
            sl_buf_init(&dot);
            if (sl_file_read(argv[k], &dot, &err)) {
                fprintf(stderr, "%s: %s\n", argv[k], err.msg);
                return 1;
            }
            measure(r, &o, argv[k], "file", &dot, 0);
            sl_buf_fini(&dot);
        }
        viz_renderer_free(r);
        return 0;
    }
    const char *db_path = argv[1], *focus = argc > 2 ? argv[2] : NULL;
    int max_depth = argc > 3 ? atoi(argv[3]) : 6;
    SlError err = {0};
    TraceDb *db = NULL;
    SlArena arena;
    sl_arena_init(&arena);
    const TraceRun *run = NULL;
    VizRenderer *r = NULL;
    if (trace_db_open(db_path, TRACE_DB_READ, &db, &err) ||
        trace_run_load(db, 0, &arena, &run, &err) || viz_renderer_new(&r, &err)) {
        fprintf(stderr, "%s: %s\n", db_path, err.msg);
        return 1;
    }
    VizOptions o;
    viz_options_init(&o);
    o.budget = 0;
    o.max_nodes = 0;
    const char *base = strrchr(db_path, '/') ? strrchr(db_path, '/') + 1 : db_path;
    SlBuf dot;
    sl_buf_init(&dot);
    char what[64];
    for (int phase = 0; phase < 2; phase++) {
        o.view = phase ? VIZ_AFTER : VIZ_BEFORE;
        uint64_t units = 0;
        /* the whole phase, uncollapsed, for modules small enough to wait for */
        if (run->n_instrs <= 3000) {
            sl_buf_clear(&dot);
            o.focus = NULL;
            if (!viz_dot_text_units(run, &o, &dot, NULL, &units, &err)) {
                snprintf(what, sizeof(what), "%s-whole", phase ? "after" : "before");
                measure(r, &o, base, what, &dot, units);
            }
        }
        for (int d = 1; focus && d <= max_depth; d++) {
            sl_buf_clear(&dot);
            o.focus = focus;
            o.depth = d;
            if (viz_dot_text_units(run, &o, &dot, NULL, &units, &err))
                break;
            snprintf(what, sizeof(what), "%s-focus-%d", phase ? "after" : "before", d);
            measure(r, &o, base, what, &dot, units);
        }
        o.focus = NULL;
        VizTreeView *v = NULL;
        if (viz_tree_new(&v, run, phase ? TRACE_AFTER : TRACE_BEFORE, &o, &err))
            continue;
        const VizTree *t = viz_tree_get(v);
        for (uint32_t g = 0; g < t->n && g < 24; g++) {
            sl_buf_clear(&dot);
            if (viz_tree_dot(v, g, &dot, &units, &err))
                break;
            snprintf(what, sizeof(what), "%s-group-%u", phase ? "after" : "before", g);
            measure(r, &o, base, what, &dot, units);
        }
        viz_tree_free(v);
    }
    sl_buf_fini(&dot);
    viz_renderer_free(r);
    trace_db_close(db);
    sl_arena_fini(&arena);
    return 0;
}
