/* cli_html.h - the diagrams and the page of `shardlens html`, shared with analyze (which
 * writes DIR/report.html and the same before/after SVGs). Owns: wiring viz/ (SVG text) to
 * reports/html.c (the page). Invariant: one VizRenderer for every picture of a process. */
#ifndef SHARDLENS_CLI_HTML_H
#define SHARDLENS_CLI_HTML_H

#include "reports/html.h"
#include "viz/viz.h"

typedef struct CliHtmlGraphs {
    ReportHtmlGraph g[2]; /* before, after */
    uint32_t n;
    SlBuf svg[2], note[2];
    VizTreeView *view[2];   /* the group tree of a phase too big to draw whole, or NULL */
    ReportHtmlTree tree[2]; /* ... as the page takes it */
    uint32_t n_trees;
    SlArena arena; /* group diagrams and their arrays */
} CliHtmlGraphs;

/* Renders the before and after views of `run` as SVG text. A phase too big to draw whole gets
 * a group tree instead (viz_tree_new): its root's diagram is the view, and the diagrams of
 * the groups below it are drawn breadth first, busiest first, within a per-group and a total
 * layout budget (`layout_budget` nodes + edges after partitioning, 5/12 of it before; 0: by the
 * module's size). Errors are reported (about `where`); returns the exit code. Pair with
 * cli_html_graphs_fini. */
int cli_html_graphs(VizRenderer *r, const TraceRun *run, const char *mesh, uint64_t layout_budget,
                    const char *where, CliHtmlGraphs *out);
void cli_html_graphs_fini(CliHtmlGraphs *g);
/* Writes the page (atomically) to `path`; `in` without graphs takes them from `graphs`. */
int cli_html_write(ReportHtmlInput *in, const CliHtmlGraphs *graphs, const char *path);

#endif
