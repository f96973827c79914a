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
    uint32_t max_nodes;  /* above this, a whole graph is drawn as its group tree's first view */
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
/* viz_dot_text, also giving the view's layout cost in units (what --layout-budget counts). */
SlStatus viz_dot_text_units(const TraceRun *run, const VizOptions *o, SlBuf *out, SlBuf *note,
                            uint64_t *units, SlError *err);

/* Lays out DOT text (from viz_dot_text) with dot and appends it as SVG text to `svg`; `units`
 * (nodes + edges) and `what` only feed the progress line (o->progress). */
SlStatus viz_layout_svg(VizRenderer *r, const SlBuf *dot, const VizOptions *o, const char *what,
                        uint64_t units, SlBuf *svg, SlError *err);

/* ---- groups of a phase, box by box (viz_tree.c) ----------------------------------------------
 * A tree over one phase's instructions for pages that open a collapsed diagram one box at a
 * time: the levels are the computation (outside the entry), then the op_name prefixes (after
 * partitioning: the source's); a group that holds many ops without a prefix splits them by
 * opcode; a group with more than VIZ_TREE_FANOUT boxes and ops splits them into runs of
 * consecutive ones ("layer_0 .. layer_26"); a chain of single groups is one group; and a group
 * showing fewer than VIZ_TREE_MIN_BOXES takes in the contents of its biggest groups while it
 * stays within VIZ_TREE_MAX_BOXES. So every group's own diagram has at most VIZ_TREE_MAX_BOXES
 * boxes and ops, whatever the module's op_names. Group 0 is the root (the whole phase). */
#define VIZ_TREE_FANOUT 40
#define VIZ_TREE_MIN_BOXES 10
#define VIZ_TREE_MAX_BOXES 60
typedef struct VizTree {
    TracePhase phase;
    uint32_t lo, hi;        /* the phase's instructions: run->instrs[lo, hi) */
    uint32_t n;             /* groups */
    uint32_t *parent;       /* [n]: UINT32_MAX for the root */
    const char **name;      /* [n]: what its box says ("attn", "layer_0 .. layer_26") */
    const char **path;      /* [n]: the full name ("jit(main)/layer_3/attn") */
    uint32_t *members;      /* [n]: instructions under it, at any depth */
    uint32_t *items;        /* [n]: boxes and ops its own diagram shows */
    double *send;           /* [n]: bytes its collectives send per device, per execution */
    uint32_t *leaf;         /* [hi - lo]: the innermost group holding each instruction;
                               UINT32_MAX for reducers, which are not drawn */
    const char *basis;      /* "op_name prefixes", "computations, op_name prefixes", ... */
} VizTree;
typedef struct VizTreeView VizTreeView;
/* Builds the tree of `phase` with what drawing its groups needs (o: mesh, progress). Pair
 * with viz_tree_free. */
SlStatus viz_tree_new(VizTreeView **out, const TraceRun *run, TracePhase phase,
                       const VizOptions *o, SlError *err);
const VizTree *viz_tree_get(const VizTreeView *v);
/* Group g's own diagram as DOT text: a node per box and op it shows, data edges between them
 * (after: with bytes); `units` gets its nodes + edges. */
SlStatus viz_tree_dot(VizTreeView *v, uint32_t g, SlBuf *dot, uint64_t *units, SlError *err);
void viz_tree_free(VizTreeView *v); /* NULL is fine */

#endif
