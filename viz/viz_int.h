/* viz_int.h - viz/ internals: the diagram model (nodes, edges, nested clusters with a fixed
 * attribute set), the index of a run's phase (computations, callers, users), labels and
 * colours. Used only inside viz/.
 * Invariant: the model is written out in creation order, and everything is created while
 * walking the run's arrays in recorded order, so DOT text never depends on pointers or hashes. */
#ifndef SHARDLENS_VIZ_INT_H
#define SHARDLENS_VIZ_INT_H

#include "viz/viz.h"

#define VIZ_NONE UINT32_MAX

/* ---- the model --------------------------------------------------------------------------- */

/* One row per DOT attribute the diagrams use; written in this order. */
#define VIZ_ATTRS(X)                                                                               \
    X(LABEL, "label")                                                                              \
    X(SHAPE, "shape")                                                                              \
    X(STYLE, "style")                                                                              \
    X(FILLCOLOR, "fillcolor")                                                                      \
    X(COLOR, "color")                                                                              \
    X(FONTCOLOR, "fontcolor")                                                                      \
    X(PENWIDTH, "penwidth")                                                                        \
    X(PERIPHERIES, "peripheries")                                                                  \
    X(LHEAD, "lhead")                                                                              \
    X(ARROWHEAD, "arrowhead")                                                                      \
    X(TOOLTIP, "tooltip")                                                                          \
    X(XLABEL, "xlabel")

typedef enum VizAttrKey {
#define VIZ_ATTR_ENUM(e, s) VIZ_A_##e,
    VIZ_ATTRS(VIZ_ATTR_ENUM)
#undef VIZ_ATTR_ENUM
        VIZ_A_COUNT
} VizAttrKey;

typedef struct VizAttrs {
    const char *v[VIZ_A_COUNT]; /* NULL: not written */
    bool html_label;            /* label is an HTML-like label, written as <...> */
} VizAttrs;

typedef struct VizNode {
    const char *id;
    uint32_t cluster; /* VIZ_NONE: top level */
    VizAttrs a;
} VizNode;

typedef struct VizEdge {
    uint32_t tail, head; /* node indices */
    VizAttrs a;
} VizEdge;

typedef struct VizCluster {
    const char *id;  /* starts with "cluster" */
    uint32_t parent; /* VIZ_NONE: top level */
    VizAttrs a;
} VizCluster;

typedef struct VizGraph {
    SlArena *arena; /* ids, labels and attribute strings */
    const char *name;
    const char *label;            /* graph label (title line), may be NULL */
    bool compound;                /* some edge uses lhead */
    bool left_right;              /* rankdir LR (wide trees of computations), else TB */
    bool cheap;                   /* bounded layout: straight edges, few simplex iterations */
    SlVec nodes, edges, clusters; /* VizNode, VizEdge, VizCluster (heap) */
    bool failed;                  /* sticky allocation failure */
} VizGraph;

void viz_graph_init(VizGraph *g, SlArena *a, const char *name);
void viz_graph_fini(VizGraph *g);
uint32_t viz_add_node(VizGraph *g, const char *id, uint32_t cluster); /* VIZ_NONE on failure */
uint32_t viz_add_edge(VizGraph *g, uint32_t tail, uint32_t head);
uint32_t viz_add_cluster(VizGraph *g, const char *id, uint32_t parent);
VizAttrs *viz_node_attrs(VizGraph *g, uint32_t n); /* NULL for VIZ_NONE */
VizAttrs *viz_edge_attrs(VizGraph *g, uint32_t e);
VizAttrs *viz_cluster_attrs(VizGraph *g, uint32_t c);
static inline uint32_t
viz_node_count(const VizGraph *g)
{
    return (uint32_t)g->nodes.len;
}
/* printf into the graph's arena (NULL on failure, and the graph is marked failed). */
const char *viz_fmt(VizGraph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *viz_strdup_buf(VizGraph *g, const SlBuf *b);
/* Writes the model as DOT text. */
void viz_graph_write_dot(const VizGraph *g, SlBuf *out);

/* ---- labels ------------------------------------------------------------------------------ */

typedef struct VizMesh {
    uint32_t n_axes;
    const char *names[8];
    int64_t sizes[8];
} VizMesh;

/* Parses "data=2,model=4"; NULL or "" gives no axes. */
SlStatus viz_mesh_parse(const char *text, VizMesh *out, SlError *err);
/* Appends a readable account of sharding text `s` ("replicated", "dim1/4 (model)", ...). */
void viz_sharding_readable(SlArena *scratch, const char *s, const VizMesh *mesh, SlBuf *out);
/* Appends the mesh axes a group of devices spans ("model"), or nothing when it spans no
 * whole set of axes. */
bool viz_mesh_axes_of(const VizMesh *mesh, const int64_t *devices, uint32_t n, SlBuf *out);
void viz_bytes(SlBuf *out, double bytes); /* "512 B", "2.00 KiB", "1.50 MiB" (sl_buf_put_size) */
/* Label lines are cut to this many characters; the full text goes into the tooltip. */
#define VIZ_LABEL_WIDTH 48
/* Appends `s`, cut to `width` characters with "..." when longer. */
void viz_put_cut(SlBuf *out, const char *s, uint32_t width);
/* Appends shape text for a label: as is when it fits `width`, a tuple as
 * "(12 elements: f32[8,16], f32[..], ...)", an array with its dims elided as "f32[..]". */
void viz_put_shape(SlBuf *out, const char *shape, uint32_t width);
/* Appends `s` escaped for an HTML-like label. */
void viz_html_escape(SlBuf *out, const char *s);

/* Distinct shardings of the 'before' phase in first-appearance order, with their colours. */
typedef struct VizPalette {
    const char **shardings;
    const char **readable;
    uint32_t n;
    SlMap by_hash; /* sl_hash_bytes(text) -> index + 1 (first one with that hash) */
} VizPalette;

SlStatus viz_palette_init(VizPalette *p, const TraceRun *run, const VizMesh *mesh, SlArena *a,
                          SlError *err);
void viz_palette_fini(VizPalette *p);
uint32_t viz_palette_find(const VizPalette *p, const char *sharding); /* VIZ_NONE if absent */
const char *viz_palette_color(uint32_t idx); /* fill colour of palette entry idx */
const char *viz_collective_color(const char *kind);

/* ---- the index of one phase of a run ------------------------------------------------------- */

typedef struct VizComp {
    const char *name;
    uint32_t first, n; /* its instructions are run->instrs[first, first + n) */
    uint32_t caller;     /* its only call site, VIZ_NONE (uncalled, shared or a reducer) */
    const char *role;    /* first call site's: "body", "condition", "branch", "call", ... */
    uint32_t n_callers;  /* call sites (run->calls rows of this phase) */
    bool is_entry;     /* the last computation of the phase */
    bool is_reducer;   /* scalar-only and uncalled: a to_apply reducer, not drawn */
} VizComp;

typedef struct VizIndex {
    const TraceRun *run;
    TracePhase phase;
    uint32_t lo, hi; /* the phase's instructions: run->instrs[lo, hi) */
    VizComp *comps;
    uint32_t n_comps;
    uint32_t *comp_of;    /* [hi - lo]: computation index per instruction */
    uint32_t *user_off;   /* [hi - lo + 1] CSR offsets into users */
    uint32_t *users;      /* global instruction indices */
    uint32_t *collective; /* [n_instrs]: index into run->collectives, VIZ_NONE */
    uint32_t *loop;       /* [n_instrs]: index into run->loops (by loop while), VIZ_NONE */
    uint32_t *decision;   /* [n_instrs]: the top-level decision ('before'), VIZ_NONE */
    uint32_t *origin;     /* [n_instrs]: its last sharding_origin row ('before'), VIZ_NONE */
} VizIndex;

const char *viz_role_phrase(const char *role); /* "body of", "called by", ... */
/* The diagram's word for a called_computation role: branch_K is "branch", calls "call". */
const char *viz_role_word(const char *role);
/* The computation of x's phase named `name`, or VIZ_NONE. */
uint32_t viz_comp_named(const VizIndex *x, const char *name);
SlStatus viz_index_build(VizIndex *x, const TraceRun *run, TracePhase phase, SlArena *a,
                         SlError *err);
static inline uint32_t
viz_comp_of(const VizIndex *x, uint32_t instr)
{
    return x->comp_of[instr - x->lo];
}

/* ---- layout budget (viz_budget.c) ----------------------------------------------------------- */

/* What dot's time grows with: nodes plus edges of the graph as written. */
uint64_t viz_graph_units(const VizGraph *g);
/* dot's time for that many units on one core, measured on real modules (bench/README.md). */
double viz_estimate_seconds(uint64_t units);
/* Past this many edges, edge labels are written as xlabels: dot then places them after the
 * layout instead of giving each a virtual node on its own rank (ten times faster on a
 * 450-edge graph of Llama 3). Past VIZ_CHEAP_UNITS, the graph is also laid out cheaply:
 * straight edges (spline routing was 70% of a 5,000-unit layout) and network simplex cut to a
 * few iterations (nslimit; long edges give it tens of thousands of virtual nodes). */
#define VIZ_XLABEL_EDGES 60
#define VIZ_CHEAP_UNITS 300
void viz_graph_cheapen(VizGraph *g);

/* ---- views --------------------------------------------------------------------------------- */

/* Everything a view builder needs. */
typedef struct VizCtx {
    const TraceRun *run;
    const VizOptions *opt;
    VizMesh mesh;
    VizPalette pal;
    SlArena *arena; /* whole call */
    SlBuf *note;    /* may be NULL */
    VizGraph g;
    uint32_t top;    /* the cluster top-level content goes in (pair views), else VIZ_NONE */
    bool *used_pal;  /* [pal.n]: drawn somewhere, for the legend */
    bool *used_kind; /* [viz_kind_count()] */
} VizCtx;

/* The context of one call (viz_render.c): mesh, palette and an empty graph; reset empties the
 * graph (and the legend's marks) for another view. */
SlStatus viz_ctx_init(VizCtx *c, const TraceRun *run, const VizOptions *o, SlArena *a, SlBuf *note,
                      SlError *err);
void viz_ctx_fini(VizCtx *c);
void viz_ctx_reset(VizCtx *c);
/* Appends propagation's account of instruction i's sharding ("forward from %x through %c at
 * level 0, rule elementwise"; the full chain when `full`), or nothing. */
void viz_put_origin(const TraceRun *run, const VizIndex *x, uint32_t i, bool full, SlBuf *out);

/* Selection of a phase's instructions to draw: sel[i - lo] != 0. */
typedef struct VizSel {
    uint8_t *sel;    /* VIZ_SEL_* */
    uint32_t count;  /* instructions selected */
    bool is_partial; /* a neighbourhood: draw "+N" stubs for what was left out */
} VizSel;
enum { VIZ_SEL_OUT = 0, VIZ_SEL_IN = 1, VIZ_SEL_FOCUS = 2 };

/* Resolves `name` (with or without '%') to the instructions of x's phase it stands for: the
 * instruction itself, the instructions derived from a 'before' name, or the source of an
 * 'after' name. Unknown names are SL_ERR_INVALID with the closest names. */
SlStatus viz_resolve(const VizIndex *x, const char *name, SlVec *out, SlError *err);
/* Marks the instructions within `depth` operand/user hops of the seeds, stopping at
 * `max_nodes`. */
void viz_select_focus(const VizIndex *x, const uint32_t *seeds, uint32_t n_seeds, int depth,
                      uint32_t max_nodes, VizSel *s, bool *truncated);
void viz_select_all(const VizIndex *x, VizSel *s);

SlStatus viz_build_phase(VizCtx *c, const VizIndex *x, const VizSel *s, SlError *err);
SlStatus viz_build_pair(VizCtx *c, const VizIndex *before, const VizIndex *after, const char *name,
                        SlError *err);

/* Shared by the builders: node label/style for one instruction, and the legend. */
/* `in_group`: the node sits in its source's group cluster, which already names the source. */
uint32_t viz_add_instr_node(VizCtx *c, const VizIndex *x, uint32_t instr, uint32_t cluster,
                            bool in_group);
void viz_add_legend(VizCtx *c, bool with_kinds);
/* Appends the strategy chain that starts at top-level decision `d`: "group_on_contracting,
 * then batch_parallel". */
void viz_put_strategy(const TraceRun *run, uint32_t d, SlBuf *out);
const char *viz_phase_title(VizCtx *c, const VizIndex *x, uint32_t drawn);
uint32_t viz_kind_index(const char *kind); /* index into the collective kinds table */
uint32_t viz_kind_count(void);
const char *viz_kind_name(uint32_t k);
const char *viz_kind_note(uint32_t k); /* one line for the legend */

#endif
