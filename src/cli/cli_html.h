/* cli_html.h - the diagrams and the page of `shardlens html`, shared with analyze (which
 * writes DIR/report.html and the same before/after SVGs). Owns: wiring viz/ (SVG text) to
 * reports/html.c (the page). Invariant: one VizRenderer for every picture of a process. */
#ifndef SHARDLENS_CLI_HTML_H
#define SHARDLENS_CLI_HTML_H

#include "reports/html.h"
#include "viz/viz.h"

enum { CLI_HTML_MAX_FOCUS = 12 }; /* neighbourhood views of the busiest source ops */

typedef struct CliHtmlGraphs {
    ReportHtmlGraph g[2 + CLI_HTML_MAX_FOCUS]; /* before, after, then neighbourhoods */
    uint32_t n;
    SlBuf svg[2 + CLI_HTML_MAX_FOCUS], note[2 + CLI_HTML_MAX_FOCUS];
    SlArena arena; /* titles */
} CliHtmlGraphs;

/* Renders the before and after views of `run` (and, when the after view had to be collapsed,
 * the neighbourhoods of the source ops with the most traffic) as SVG text. Errors are
 * reported (about `where`); returns the exit code. Pair with cli_html_graphs_fini. */
int cli_html_graphs(VizRenderer *r, const TraceRun *run, const char *mesh, const char *where,
                    CliHtmlGraphs *out);
void cli_html_graphs_fini(CliHtmlGraphs *g);
/* Writes the page (atomically) to `path`; `in` without graphs takes them from `graphs`. */
int cli_html_write(ReportHtmlInput *in, const CliHtmlGraphs *graphs, const char *path);

#endif
