/* sdy_int.h - internals shared by the Shardy import's files (src/hlo/sdy_*.c only): the mesh,
 * tensor sharding and text cursor types, the import's context, and the functions one file calls
 * in another. sdy_text.c reads the sdy attribute text, sdy_convert.c turns a tensor sharding
 * into a GSPMD sharding, sdy_import.c rewrites the module and sdy_manual.c shard_map's manual
 * computations. */
#ifndef SHARDLENS_SDY_INT_H
#define SHARDLENS_SDY_INT_H

#include "base/base.h"
#include "hlo/sdy.h"
#include "ir/ir.h"
#include "sharding/shd.h"

#define SDY_MAX_AXES   64  /* mesh axes; more is rejected */
#define SDY_MAX_REFS   128 /* axis references in one tensor sharding */
#define SDY_MAX_RANK   64
#define SDY_MAX_PIECES 256 /* mesh axes after splitting at sub-axis boundaries */

typedef struct SdyMesh {
    SlStr name;
    uint32_t n_axes;
    SlStr *axis_names;
    int64_t *axis_sizes;
    uint32_t n_ids;
    int64_t *ids; /* NULL: iota */
    int64_t total;
} SdyMesh;

typedef struct SdyRef {
    uint32_t axis;     /* index into the mesh */
    int64_t pre, size; /* a whole axis: pre 1, size = the axis size */
} SdyRef;

typedef struct SdyTensor {
    const SdyMesh *mesh;
    uint32_t rank;
    uint32_t dim_first[SDY_MAX_RANK], dim_n[SDY_MAX_RANK]; /* into refs */
    bool dim_open[SDY_MAX_RANK];
    uint32_t n_refs;
    SdyRef refs[SDY_MAX_REFS];
    size_t ref_at[SDY_MAX_REFS]; /* text offset of each reference, for errors */
    uint32_t repl_first, n_repl, unred_first, n_unred;
} SdyTensor;

/* One value's text, unescaped ("\"" -> '"'), with the raw offset of every byte for errors. */
typedef struct SdyText {
    const char *s;
    size_t n, p;
    const uint32_t *raw_off; /* n + 1 entries */
    SlStr raw;
    SlSrcLoc at; /* the raw value's first byte */
    SlError *err;
} SdyText;

typedef struct SdyCtx {
    IrModule *m;
    SlArena *a;
    SlError *err;
    const char *path;
    SlMap locs; /* value pointer -> 1 + index into `loc_list` */
    const SdyValueLoc *loc_list;
    SdyMesh *meshes;
    uint32_t n_meshes;
} SdyCtx;

/* An instruction's `xla.sdy.sharding`: one tensor sharding, or a per-value list whose length
 * is the number of results (array leaves of the shape; 1 for an array). `open` (may be NULL)
 * gets the open dims of a single array value. */
typedef struct SdyParsed {
    const ShdSharding *sharding;
    const SdyMesh *mesh; /* of the (last) value sharding */
    const SdyTensor **tensors; /* per value, as read (in the arena) */
    uint32_t n_tensors;
    uint32_t n_open;
    int64_t open[SDY_MAX_RANK];
} SdyParsed;

/* ---- sdy_text.c: the sdy attribute text ------------------------------------------------- */

/* Fails at the cursor; `fmt` has one %s, for `arg`. */
SlStatus sdy_text_fail(SdyText *t, SlStatus st, const char *fmt, const char *arg)
    __attribute__((format(printf, 3, 0)));
SlStatus sdy_text_init(SdyText *t, SlArena *a, SlStr raw, SlSrcLoc at, SlError *err);
void sdy_skip_ws(SdyText *t);
char sdy_peek(SdyText *t);
bool sdy_eat(SdyText *t, const char *lit); /* consumes `lit` when the text continues with it */
SlStatus sdy_expect(SdyText *t, const char *lit, const char *what);
SlStatus sdy_read_name(SdyText *t, bool allow_ident, SlStr *out, const char *what);
SlStatus sdy_parse_meshes(SdyCtx *cx, SdyText *t); /* the header's xla.sdy.meshes */
SlStatus sdy_parse_tensor(SdyCtx *cx, SdyText *t, SdyTensor *ts);

/* ---- sdy_convert.c: a tensor sharding as a GSPMD sharding ------------------------------- */

/* NULL when the mesh splits into more than SDY_MAX_PIECES pieces or memory ran out; `manual`
 * (SDY_MAX_AXES entries, may be NULL) marks the axes that become a MANUAL subgroup. */
const ShdSharding *sdy_convert_manual(SlArena *a, const SdyTensor *ts, const bool *manual);
const ShdSharding *sdy_convert(SlArena *a, const SdyTensor *ts);

/* ---- sdy_instr.c: one instruction's attributes ------------------------------------------ */

SlStr sdy_call_target(const IrInstr *i); /* the custom-call target without quotes */
bool sdy_target_is(const IrInstr *i, const char *t);
const IrFrontendAttr *sdy_find_frontend(const IrInstr *i, const char *key);
SlSrcLoc sdy_value_loc(const SdyCtx *cx, const char *value, const IrInstr *owner);
SlSrcLoc sdy_instr_loc(const SdyCtx *cx, const IrInstr *i);
SlStatus sdy_parse_instr_sharding(SdyCtx *cx, const IrInstr *i, const IrFrontendAttr *f,
                                  const IrShape *shape, bool keep, SdyParsed *out);
SlStatus sdy_set_sharding(SdyCtx *cx, IrInstr *i, const ShdSharding *s);
SlStatus sdy_set_unspecified(SdyCtx *cx, IrInstr *i, const int64_t *dims, uint32_t n);

/* ---- sdy_import.c: the module (sdy.h's sdy_import) -------------------------------------- */

/* ---- sdy_manual.c: shard_map ----------------------------------------------------------- */

SlStatus sdy_import_manual(SdyCtx *cx);

#endif
