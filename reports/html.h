/* html.h - the interactive HTML report (`shardlens html`, analyze's report.html): one
 * self-contained page with the totals, traffic per device and kind, the device mesh, a table
 * of collectives with their explanations, traffic by op_name prefix, the warnings and the
 * before/after diagrams; or, given an older run, what grew, shrank or is new.
 * Owns: the page's data (JSON built with cJSON) and how the page is put together from the
 * embedded assets (reports/assets/). Does not own: the diagrams, which come as SVG text
 * (viz/, wired by the CLI). Output is deterministic for the same inputs. */
#ifndef SHARDLENS_HTML_H
#define SHARDLENS_HTML_H

#include "reports/report.h"

typedef struct ReportHtmlGraph {
    const char *key;   /* "before", "after", or a source name for a neighbourhood view */
    const char *title; /* shown on its tab */
    const char *svg;   /* Graphviz SVG text */
    const char *note;  /* what was collapsed or cut, may be NULL */
} ReportHtmlGraph;

typedef struct ReportHtmlInput {
    const TraceRun *run; /* the run shown (the new one of a diff) */
    const Report *rep;   /* its report */
    const ReportHtmlGraph *graphs;
    uint32_t n_graphs;
    const Report *old_rep;             /* non-NULL: a diff page against this older report */
    const char *old_label, *new_label; /* how to name the two inputs (paths) */
} ReportHtmlInput;

/* Appends the page to `out`. */
SlStatus report_write_html(const ReportHtmlInput *in, SlBuf *out, SlError *err);

#endif
