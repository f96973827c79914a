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

/* The groups of one phase, box by box (viz_tree_new's VizTree with each group's diagram):
 * the page opens a group's diagram on a click on its box, or lists its ops when it was not
 * drawn. Arrays are [n] unless said. */
typedef struct ReportHtmlTree {
    const char *phase;                /* "before" or "after": the graph it replaces */
    uint32_t lo, n_instrs;            /* the phase's instructions: run->instrs[lo, lo + n_instrs) */
    uint32_t n;                       /* groups; 0 is the root */
    const uint32_t *parent;           /* UINT32_MAX for the root */
    const char *const *name;          /* what its box says */
    const uint32_t *members;          /* instructions under it */
    const double *send;               /* bytes its collectives send per device per execution */
    const uint32_t *leaf;             /* [n_instrs]: innermost group, UINT32_MAX: not drawn */
    const char *const *svg;           /* its diagram (SVG text), NULL when not drawn */
    const uint64_t *units;            /* nodes + edges of its diagram */
    const uint8_t *why;               /* REPORT_HTML_* : why it was not drawn */
    uint64_t group_units, total_units; /* the budgets behind `why` */
    const char *basis;                /* what the levels are ("op_name prefixes", ...) */
} ReportHtmlTree;
enum { REPORT_HTML_DRAWN = 0, REPORT_HTML_TOO_LARGE = 1, REPORT_HTML_BUDGET_USED = 2 };

typedef struct ReportHtmlInput {
    const TraceRun *run; /* the run shown (the new one of a diff) */
    const Report *rep;   /* its report */
    const ReportHtmlGraph *graphs;
    uint32_t n_graphs;
    const ReportHtmlTree *trees; /* phases whose graph is a group tree (collapsed modules) */
    uint32_t n_trees;
    const Report *old_rep;             /* non-NULL: a diff page against this older report */
    const char *old_label, *new_label; /* how to name the two inputs (paths) */
} ReportHtmlInput;

/* Appends the page to `out`. */
SlStatus report_write_html(const ReportHtmlInput *in, SlBuf *out, SlError *err);

#endif
