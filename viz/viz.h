/* viz.h - Graphviz before/after diagrams of a recorded run (product.md "Diagrams").
 * Owns: building graphs with cgraph and rendering them with gvc. Works only on a TraceRun
 * loaded from the trace database (never on the partitioner). Output is deterministic: stable
 * node order and ids, so DOT text can be compared byte for byte. */
#ifndef SHARDLENS_VIZ_H
#define SHARDLENS_VIZ_H

#include "base/base.h"
#include "trace/trace_run.h"

typedef enum VizFormat { VIZ_SVG, VIZ_PNG, VIZ_DOT } VizFormat;
typedef enum VizView { VIZ_BEFORE, VIZ_AFTER, VIZ_PAIR } VizView;

typedef struct VizOptions {
    VizView view;
    VizFormat format;
    const char *focus;   /* NULL: whole graph (collapsed above max_nodes); VIZ_PAIR: the op */
    int depth;           /* neighbourhood radius around `focus` */
    uint32_t max_nodes;  /* above this, collapse per source op, then per computation */
    const char *mesh;    /* "data=2,model=4" or NULL: names mesh axes in labels */
    uint32_t budget;     /* layout units (nodes + edges) dot may get; past it the view is
                            collapsed (whole graphs) or cut (neighbourhoods). 0: none */
    bool progress;       /* a line on stderr before and after a layout estimated over 1 s */
} VizOptions;

#define VIZ_DEFAULT_BUDGET 1000
void viz_options_init(VizOptions *o); /* svg, before, depth 2, max_nodes 400, default budget */
/* Renders one view of `run` to `path` (written atomically). `note` (may be NULL) receives a
 * one-line account of any collapsing done, for the CLI to print. */
SlStatus viz_render(const TraceRun *run, const VizOptions *o, const char *path, SlBuf *note,
                    SlError *err);
/* A Graphviz context to render several diagrams with. Graphviz expects one per process: its
 * text-layout plugin keeps a pointer to the last font name across contexts, which a second
 * context then reads after the first freed it. A process drawing more than one diagram should
 * make one renderer and pass it to every viz_render_with (viz_render makes one per call). */
typedef struct VizRenderer VizRenderer;
SlStatus viz_renderer_new(VizRenderer **out, SlError *err);
void viz_renderer_free(VizRenderer *r); /* NULL is fine */
SlStatus viz_render_with(VizRenderer *r, const TraceRun *run, const VizOptions *o,
                         const char *path, SlBuf *note, SlError *err);
/* Lays out DOT text with dot and renders it as `format` ("svg", "png") to `path` (atomically);
 * viz_render_with is this after viz_dot_text. */
SlStatus viz_render_dot(VizRenderer *r, const SlBuf *dot, const char *format, const char *path,
                        SlError *err);
/* One view as SVG text appended to `svg` (as viz_render_with would write it as svg). */
SlStatus viz_svg_text(VizRenderer *r, const TraceRun *run, const VizOptions *o, SlBuf *svg,
                      SlBuf *note, SlError *err);
/* The DOT text of one view (what VIZ_DOT writes), for tests and golden files. */
SlStatus viz_dot_text(const TraceRun *run, const VizOptions *o, SlBuf *out, SlBuf *note,
                      SlError *err);

#endif
