/* ir.h - the HLO IR: modules, computations, instructions, shapes and typed attributes.
 * Owns: the in-memory form of a module and the only ways to build one (the parser and the
 * partitioner both construct through ir_*_new / ir_*_add). Does not own: text (src/hlo),
 * sharding semantics (src/sharding; the IR only carries an opaque ShdSharding pointer).
 * Lifetime: everything of a module lives in the arena given to ir_module_new(). Operand links
 * are pointers inside one module; `id` numbers instructions in creation order, for stable
 * output and for cross-references from traces. */
#ifndef SHARDLENS_IR_H
#define SHARDLENS_IR_H

#include "base/base.h"

struct ShdSharding; /* src/sharding: opaque here */

typedef enum IrDtype {
#define IR_DTYPE(e, name, bits, kind) IR_DT_##e,
#include "ir/ir_types.def"
#undef IR_DTYPE
    IR_DT_COUNT
} IrDtype;

typedef enum IrOp {
#define IR_OP(e, name, family, min, max, attrs) IR_OP_##e,
#include "ir/ir_ops.def"
#undef IR_OP
    IR_OP_COUNT
} IrOp;

typedef enum IrOpFamily {
    IR_FAM_PARAMETER, IR_FAM_CONSTANT, IR_FAM_IOTA, IR_FAM_PARTITION_ID, IR_FAM_ELEMENTWISE,
    IR_FAM_BITCAST_CONVERT, IR_FAM_OPT_BARRIER, IR_FAM_BROADCAST, IR_FAM_RESHAPE,
    IR_FAM_TRANSPOSE, IR_FAM_SLICE, IR_FAM_CONCATENATE, IR_FAM_PAD, IR_FAM_DYNAMIC_SLICE,
    IR_FAM_DYNAMIC_UPDATE_SLICE, IR_FAM_REVERSE, IR_FAM_REDUCE, IR_FAM_REDUCE_WINDOW,
    IR_FAM_SELECT_AND_SCATTER, IR_FAM_SORT, IR_FAM_DOT, IR_FAM_CONVOLUTION, IR_FAM_GATHER,
    IR_FAM_SCATTER, IR_FAM_CHOLESKY, IR_FAM_TRIANGULAR_SOLVE, IR_FAM_TUPLE,
    IR_FAM_GET_TUPLE_ELEMENT, IR_FAM_WHILE, IR_FAM_CONDITIONAL, IR_FAM_CALL, IR_FAM_CUSTOM_CALL,
    IR_FAM_ALL_REDUCE, IR_FAM_COLLECTIVE, IR_FAM_COLLECTIVE_PERMUTE, IR_FAM_SIDE_EFFECT,
    IR_FAM_RNG, IR_FAM_RAGGED_DOT, IR_FAM_SCAN, IR_FAM_OTHER,
} IrOpFamily;

typedef enum IrAttrKey {
#define IR_ATTR(e, name, kind) IR_ATTR_##e,
#include "ir/ir_attrs.def"
#undef IR_ATTR
    IR_ATTR_OTHER, /* any other key: kept with its verbatim value */
    IR_ATTR_COUNT
} IrAttrKey;

/* The largest device count (replicas x partitions) any input may name: -n, num_partitions=,
 * replica_count=, a sharding's tile assignment or mesh, replica groups. Checked before
 * anything of that size is allocated (README "Limits"). */
#define IR_MAX_DEVICES 65536
/* Parameter numbers are below this (the parser rejects larger ones): a computation's
 * parameter index is an array of that size. */
#define IR_MAX_PARAMS (1 << 20)
/* channel_id= values are below this: partitioning numbers its new collectives after the
 * largest one, which must not overflow int64. */
#define IR_MAX_CHANNEL_ID (INT64_C(1) << 62)

typedef enum IrAttrKind {
    IR_AK_INT, IR_AK_BOOL, IR_AK_INTS, IR_AK_INT_LISTS, IR_AK_REPLICA_GROUPS, IR_AK_COMP,
    IR_AK_COMPS, IR_AK_IDENT, IR_AK_STRING, IR_AK_SLICE, IR_AK_PADDING, IR_AK_WINDOW,
    IR_AK_DIM_LABELS, IR_AK_SHARDING, IR_AK_METADATA, IR_AK_FRONTEND, IR_AK_RAW,
} IrAttrKind;

/* ---- tables ---- */
const char *ir_dtype_name(IrDtype t);
uint32_t ir_dtype_bits(IrDtype t); /* 0 for token/opaque/tuple */
char ir_dtype_kind(IrDtype t);     /* 'F','S','U','P','C','T','O','X' as in ir_types.def */
bool ir_dtype_from_name(SlStr s, IrDtype *out);
const char *ir_op_name(IrOp op);
IrOpFamily ir_op_family(IrOp op);
int ir_op_arity(IrOp op); /* the exact operand count; -1: it varies */
/* Operand-count bounds and required attributes of ir_ops.def (max -1: no bound). */
uint32_t ir_op_min_operands(IrOp op);
int ir_op_max_operands(IrOp op);
bool ir_op_operand_count_ok(IrOp op, uint32_t n); /* n within those bounds */
bool ir_op_requires_attr(IrOp op, IrAttrKey k);
bool ir_op_from_name(SlStr s, IrOp *out);
bool ir_op_is_elementwise(IrOp op);
const char *ir_attr_name(IrAttrKey k);
IrAttrKind ir_attr_kind(IrAttrKey k);
IrAttrKey ir_attr_key_from_name(SlStr s); /* IR_ATTR_OTHER when not in the table */

/* ---- shapes ---- */
typedef enum IrDimKind { IR_DIM_STATIC = 0, IR_DIM_BOUNDED = 1, IR_DIM_UNBOUNDED = 2 } IrDimKind;

typedef struct IrShape {
    IrDtype dtype;          /* IR_DT_TUPLE for tuples */
    uint32_t rank;          /* arrays: number of dims; 0 for scalars and tuples */
    int64_t *dims;          /* rank entries; for bounded dims the bound */
    uint8_t *dim_kinds;     /* rank IrDimKind entries, or NULL when all static */
    SlStr layout;           /* verbatim "{1,0}" text incl. braces; empty when absent */
    uint32_t n_elems;       /* tuples: number of element shapes */
    struct IrShape *elems;  /* tuples: n_elems shapes */
} IrShape;

bool ir_shape_is_tuple(const IrShape *s);
bool ir_shape_is_array(const IrShape *s); /* not tuple, token or opaque */
int64_t ir_shape_elem_count(const IrShape *s);       /* arrays only; 1 for scalars */
int64_t ir_shape_byte_size(const IrShape *s);        /* sum over tuple leaves; whole bytes */
bool ir_shape_equal(const IrShape *a, const IrShape *b, bool compare_layout);
uint32_t ir_shape_leaf_count(const IrShape *s);      /* array leaves in pre-order */
const IrShape *ir_shape_leaf(const IrShape *s, uint32_t leaf); /* pre-order leaf */
IrShape ir_shape_make(SlArena *a, IrDtype t, const int64_t *dims, uint32_t rank);
IrShape ir_shape_clone(SlArena *a, const IrShape *s); /* deep copy */
/* A copy with new dims and, when the rank matches, the same layout text. */
IrShape ir_shape_with_dims(SlArena *a, const IrShape *s, const int64_t *dims);
void ir_shape_print(const IrShape *s, bool with_layout, SlBuf *out);

/* ---- typed attribute values ---- */
typedef struct IrSliceDim { int64_t start, limit, stride; } IrSliceDim;
typedef struct IrPadDim { int64_t lo, hi, interior; } IrPadDim;
typedef struct IrWindowDim {
    int64_t size, stride, pad_lo, pad_hi, lhs_dilate, rhs_dilate;
    bool reversal;
} IrWindowDim;

/* An iota device array: iota(prod(reshape)) viewed as `reshape`, transposed by `perm`, then
 * read row-major as `dims`. Shared by iota replica groups and iota tile assignments. */
typedef struct IrIota { /* counts first: no padding (an IrAttr's size follows from it) */
    uint32_t n_dims;
    uint32_t n_reshape;
    int64_t *dims;
    int64_t *reshape;
    int64_t *perm; /* n_reshape entries; identity when NULL */
} IrIota;
int64_t ir_iota_count(const IrIota *io);
/* Writes all ir_iota_count() device ids in row-major order of `dims`. */
void ir_iota_expand(const IrIota *io, int64_t *out);

typedef struct IrReplicaGroups {
    IrIota iota;           /* when is_iota: dims = {G, M} */
    uint32_t n_groups;     /* list form: number of groups (0 = "{}", all devices) */
    bool is_iota;          /* printed as [G,M]<=[..]T(..) */
    uint32_t *group_sizes; /* list form */
    int64_t *ids;          /* list form: concatenated groups */
} IrReplicaGroups;

typedef struct IrMetadata {
    SlStr raw;            /* the whole "{...}" text, reprinted verbatim */
    SlStr op_type, op_name, source_file; /* unquoted contents; empty when absent */
    int64_t source_line;  /* 0 when absent */
} IrMetadata;

typedef struct IrFrontendAttr { SlSym key; SlStr value; /* verbatim, quotes included */ } IrFrontendAttr;

struct IrComputation;
/* An attribute: 32 bytes on 64-bit hosts (every instruction carries a few by value, so big
 * values such as replica groups live behind a pointer). */
typedef struct IrAttr {
    IrAttrKey key;
    union {
        int64_t i;                         /* INT */
        bool b;                            /* BOOL */
        struct { uint32_t n; int64_t *v; } ints;               /* INTS */
        struct { uint32_t n; uint32_t *sizes; int64_t *v; } lists; /* INT_LISTS */
        const IrReplicaGroups *groups;     /* REPLICA_GROUPS */
        struct IrComputation *comp;        /* COMP */
        struct { uint32_t n; struct IrComputation **v; } comps; /* COMPS */
        SlStr text;                        /* IDENT, STRING (quotes included), DIM_LABELS, RAW, OTHER */
        struct { SlStr text; SlSym key; } other; /* OTHER: `text` aliases u.text; the name */
        struct { uint32_t n; IrSliceDim *v; } slice;  /* SLICE */
        struct { uint32_t n; IrPadDim *v; } pad;      /* PADDING */
        struct { uint32_t n; IrWindowDim *v; } window; /* WINDOW */
        const struct ShdSharding *sharding; /* SHARDING */
        const IrMetadata *metadata;          /* METADATA */
        struct { uint32_t n; IrFrontendAttr *v; } frontend; /* FRONTEND */
    } u;
} IrAttr;

/* ---- instructions, computations, modules ---- */
typedef struct IrComputation IrComputation;
typedef struct IrModule IrModule;

typedef struct IrInstr {
    SlSym name;
    IrOp op;
    uint32_t id;                /* creation order within the module */
    IrShape shape;
    struct IrInstr **operands;
    uint32_t n_operands;
    uint16_t n_attrs, cap_attrs;
    IrAttr *attrs;              /* in print order */
    IrComputation *parent;
    int64_t parameter_number;   /* parameter only */
    SlStr literal;              /* constant only: verbatim literal text */
    const struct IrInstr *derived_from; /* emitted instructions: the source instruction */
    uint32_t src_line, src_col; /* where the parser read it (1-based); 0 when built in memory */
} IrInstr;

struct IrComputation {
    SlSym name;
    uint32_t id;
    bool is_entry;
    IrInstr **instrs;           /* in order; operands precede users */
    uint32_t n_instrs, cap_instrs;
    IrInstr *root;              /* NULL until set; the last instruction when unmarked */
    IrInstr **params;           /* by parameter number (set before the instruction is added) */
    uint32_t n_params;          /* 1 + the highest parameter number added; gaps are NULL */
    uint32_t cap_params;
    SlStr execution_thread;     /* verbatim string incl. quotes; empty when absent */
};

typedef struct IrHeaderAttr { SlSym key; SlStr value; /* verbatim */ } IrHeaderAttr;

/* One array of an original value (`origin={...}`): the instruction of the unoptimized module
 * that produced it and, inside a tuple, its shape index. */
typedef struct IrOriginArray {
    SlStr name;        /* the text between the quotes, verbatim (escapes kept) */
    uint32_t n_index;
    const int64_t *index; /* n_index entries; NULL when 0 */
} IrOriginArray;

/* An origin_recovery_table entry (hlo-text.md §3): `old` is gone from the module; `now` holds
 * a value from which `module` (its entry takes `now` as parameter 0) computes `old`. `module`
 * NULL: the two are the same value. */
typedef struct IrRecovery {
    IrOriginArray old, now;
    IrModule *module; /* in the arena of the module holding the table */
} IrRecovery;

struct IrModule {
    SlArena *arena;             /* not owned */
    SlInterner *names;          /* not owned */
    SlSym name;
    IrHeaderAttr *header;       /* module attributes in print order, num_partitions included */
    uint32_t n_header, cap_header;
    IrComputation **comps;      /* callees before callers */
    uint32_t n_comps, cap_comps;
    IrComputation *entry;
    uint32_t next_instr_id, next_comp_id;
    SlMap name_counters;        /* unique-name bookkeeping (heap): call ir_module_fini */
    bool names_pending;         /* the names in comps are not in name_counters yet: the first
                                   ir_module_unique_name puts them there (the parser defers
                                   them, since most parsed modules never need a new name) */
    IrRecovery *recovery;       /* origin_recovery_table in insertion order (printed sorted) */
    uint32_t n_recovery, cap_recovery;
    SlMap recovery_index;       /* hash of `old` -> 1 + index in `recovery` (heap) */
    bool sdy_round_trip;        /* read from Shardy's round-trip form (sdy_import): XLA's
                                   pipeline takes it through StableHLO, which has no tuple
                                   values (prop_inline_calls then forwards tuple elements) */
};

IrModule *ir_module_new(SlArena *arena, SlInterner *names, SlSym name);
void ir_module_fini(IrModule *m); /* frees the heap side tables (recovery modules' too); the
                                   * arena holds the rest */
int64_t ir_module_num_partitions(const IrModule *m); /* 1 when absent */
int64_t ir_module_replica_count(const IrModule *m);  /* 1 when absent */
const IrHeaderAttr *ir_module_find_header(const IrModule *m, const char *key);
/* Sets (or appends) a header attribute with a verbatim value. */
SlStatus ir_module_set_header(IrModule *m, const char *key, SlStr value);
IrComputation *ir_module_find_computation(const IrModule *m, SlSym name);
bool ir_origin_array_equal(const IrOriginArray *a, const IrOriginArray *b);
/* original_array := '{' '"' NAME '"' (' {' INT (',' INT)* '}')? '}'   (as XLA prints it) */
void ir_origin_array_print(const IrOriginArray *a, SlBuf *out);
/* The table entry whose `old` equals `old`, or NULL. */
const IrRecovery *ir_module_find_recovery(const IrModule *m, const IrOriginArray *old);
/* Appends an entry (copied; the arrays' text must live as long as the module); SL_ERR_INVALID
 * when `e->old` is already in the table. ir_module_fini also finishes `e->module`. */
SlStatus ir_module_add_recovery(IrModule *m, const IrRecovery *e);

/* Returns `base` if unused in the module, else `base.N` with the next free N (XLA style). */
SlSym ir_module_unique_name(IrModule *m, SlStr base);
/* Records a name read from text so later unique names avoid it. */
void ir_module_reserve_name(IrModule *m, SlSym name);
/* Raises the unique-name counter of `base` (its suffix-free name) to `next`: later unique names
 * of that base get suffixes >= next (1 + the highest suffix taken; 1 when only the bare base is
 * taken). A lower `next` than the module's own count changes nothing; false on OOM. */
bool ir_module_set_name_counter(IrModule *m, SlSym base, uint64_t next);
/* The rule every unique-name table shares: "foo.12" is base "foo" with suffix 12; a name with no
 * ".digits" suffix (or one of more than 15 digits) is its own base and gives -1. */
int64_t ir_name_split(SlStr name, SlStr *base);
/* Interns "base.n" (n in decimal); NULL when out of memory. */
SlSym ir_name_with_suffix(SlInterner *names, SlStr base, uint64_t n);
/* Instead of reserving names one by one while building: reserves every computation and
 * instruction name in `m` at the first ir_module_unique_name. */
void ir_module_defer_names(IrModule *m);

IrComputation *ir_computation_new(IrModule *m, SlSym name); /* not yet listed in the module */
SlStatus ir_module_add_computation(IrModule *m, IrComputation *c); /* appends to comps */
SlStatus ir_computation_add_instr(IrComputation *c, IrModule *m, IrInstr *i);
uint32_t ir_computation_param_count(const IrComputation *c); /* parameters present */
IrInstr *ir_computation_param(const IrComputation *c, int64_t number); /* NULL if absent; O(1) */

/* A new instruction with copied operand array; name NULL until set; not yet in a computation. */
IrInstr *ir_instr_new(IrModule *m, IrOp op, const IrShape *shape, IrInstr *const *operands,
                      uint32_t n_operands);
/* Appends an attribute slot with `key` and returns it for the caller to fill (NULL on OOM). */
IrAttr *ir_instr_add_attr(IrModule *m, IrInstr *i, IrAttrKey key);
/* Makes room for `n` more attributes at once (exact size, no doubling); false on OOM. */
bool ir_instr_reserve_attrs(IrModule *m, IrInstr *i, uint32_t n);
const IrAttr *ir_instr_find_attr(const IrInstr *i, IrAttrKey key);
/* The IR_ATTR_OTHER attribute spelled `name` (kept verbatim: u.other.text), or NULL. */
const IrAttr *ir_instr_find_other(const IrInstr *i, const char *name);
IrAttr *ir_instr_find_attr_mut(IrInstr *i, IrAttrKey key);
void ir_instr_remove_attr(IrInstr *i, IrAttrKey key);
/* Moves attribute `a` of `i` in front of the first attribute before it for which
 * `prints_after` holds (keeping the others' order), so that it prints in XLA's order; returns
 * its new address. */
IrAttr *ir_instr_place_attr(IrInstr *i, IrAttr *a, bool (*prints_after)(const IrAttr *));
/* The attributes XLA prints after `sharding=` (HloInstruction's printing order, hlo-text.md):
 * frontend_attributes, metadata, backend_config, control-predecessors, and the unknown
 * statistics, result_accuracy and origin. */
bool ir_attr_prints_after_sharding(const IrAttr *a);
/* ir_instr_place_attr with that rule: the sharding attribute `a` moves where XLA prints it. */
IrAttr *ir_instr_place_sharding(IrInstr *i, IrAttr *a);
/* Shorthands over find_attr. */
const struct ShdSharding *ir_instr_sharding(const IrInstr *i); /* NULL when none */
const IrMetadata *ir_instr_metadata(const IrInstr *i);        /* NULL when none */
bool ir_instr_int_attr(const IrInstr *i, IrAttrKey key, int64_t *out);
/* INTS attribute as (n, values); n = 0 and values NULL when absent. */
uint32_t ir_instr_ints_attr(const IrInstr *i, IrAttrKey key, const int64_t **values);
IrComputation *ir_instr_called(const IrInstr *i, IrAttrKey key); /* COMP attribute or NULL */
/* Distinct instructions of i's computation that take i as an operand. Scans the computation:
 * for pattern checks that already matched everything else, not for every instruction. */
uint32_t ir_instr_user_count(const IrInstr *i);

/* ---- while-loop trip counts (loop.c) ---- */
typedef enum IrTripMethod {
    IR_TRIP_UNKNOWN,        /* not found: `reason` says why */
    IR_TRIP_BACKEND_CONFIG, /* backend_config={"known_trip_count":{"n":"N"}} (wins when present) */
    IR_TRIP_PATTERN,        /* the induction-variable pattern of XLA's while-loop analysis */
} IrTripMethod;
typedef struct IrTripCount {
    IrTripMethod method;
    int64_t count;           /* body executions per execution of the while; -1: unknown */
    int64_t induction_index; /* tuple element of the induction variable; -1: none found, or
                                the loop state is a scalar that is the variable itself */
    char reason[224];        /* unknown: why; else how, e.g. "i = 0; i < 8; i += 1 (tuple
                                element 0)" */
} IrTripCount;
/* The trip count of while `w` of module `m`, exactly (loop.c states the pattern). `m` is
 * searched for the call site when an initial value is a parameter of a called computation. */
void ir_while_trip_count(const IrModule *m, const IrInstr *w, IrTripCount *out);
const char *ir_trip_method_name(IrTripMethod m); /* "backend_config", "pattern", "unknown" */

/* ---- dead code (dce.c) ---- */
/* Removes the instructions nothing uses (not a root or parameter, no side effect; collectives
 * are removable, as in XLA's cleanup after partitioning), then the computations nothing calls.
 * Computations holding control-predecessors edges are left alone. Appends every removed
 * instruction to `removed` (IrInstr *; may be NULL) and returns how many there were; temporary
 * tables go to `scratch` and are released. The removed instructions stay valid in the arena. */
uint32_t ir_module_remove_dead(IrModule *m, SlArena *scratch, SlVec *removed);
/* Sends, receives, feeds, rng, async pairs and custom calls marked
 * custom_call_has_side_effect=true: what the cleanup never removes or merges (callees aside). */
bool ir_instr_has_side_effect(const IrInstr *i);

/* ---- before propagation (memory_placement.c) ---- */
/* XLA's ConvertMemoryPlacementToInternalAnnotations: every custom call
 * `annotate_device_placement` with `_xla_buffer_placement` pinned_host/unpinned_host, device,
 * pinned_device or device_sram (vmem) becomes MoveToHost, MoveToDevice, PinToDevice or
 * PinToDeviceSram, keeping only its operand and sharding. Returns how many were converted. */
uint32_t ir_convert_memory_placement(IrModule *m);

/* ---- the rest of the cleanup after partitioning (cleanup.c) ---- */
/* Both redirect uses (operands, roots) to the surviving instruction, visiting each computation
 * in order, and leave the replaced instructions unused for ir_module_remove_dead() to drop; both
 * skip computations holding control-predecessors edges and return how many instructions they
 * replaced. Temporary tables go to `scratch` and are released. */
typedef bool (*IrShardingEqual)(const struct ShdSharding *a, const struct ShdSharding *b);
/* XLA's TupleSimplifier: get-tuple-element(tuple(..., x, ...)) at x's index becomes x;
 * tuple(get-tuple-element(t, 0), ..., get-tuple-element(t, n-1)) of a t of the same shape
 * (layouts aside) becomes t. A replacement is skipped when both instructions carry shardings
 * that `sharding_equal` (NULL: pointer equality) finds different. */
uint32_t ir_module_simplify_tuples(IrModule *m, SlArena *scratch, IrShardingEqual sharding_equal);
/* XLA's HloCSE as its partitioner runs it (layout-insensitive): an instruction identical to an
 * earlier one of its computation (opcode, shape without layout, operands - either order for
 * add/multiply/maximum/minimum/and/or/xor -, literal, attributes other than sharding, metadata,
 * frontend attributes and origin; called computations by identity) is replaced by the earlier
 * one. Constants merge by value; iotas stay, but equal iotas count as the same operand (and
 * an instruction reading two equal iotas reads the first twice); parameters, other
 * operand-less instructions but partition-id/replica-id, side effects (also in callees) and
 * collectives with a channel id never merge. Hashes content, never addresses: the result is
 * deterministic. Sharding-sensitive as XLA's: `shardings` (by instruction id, `n_shardings`
 * entries, NULL entries or table: none) holds the sharding each instruction carries, and two
 * instructions that both carry one stay apart unless `sharding_equal` (NULL: pointer equality)
 * finds them equal. */
uint32_t ir_module_cse(IrModule *m, SlArena *scratch, const struct ShdSharding *const *shardings,
                       size_t n_shardings, IrShardingEqual sharding_equal);

/* ---- checking (check.c) ---- */
/* Structural checks and shape inference for the opcodes the partitioner handles (hlo-text.md
 * §12): every declared shape must equal the inferred one. Names the offending instruction and
 * its computation in `err`, located at the instruction's src_line/src_col in `path`. */
SlStatus ir_module_check(const IrModule *m, const char *path, SlError *err);
/* The same for a run on `num_partitions` devices (-n; 0: the header's): the collectives'
 * group sizes and device ids are checked with that count. */
SlStatus ir_module_check_for(const IrModule *m, const char *path, int64_t num_partitions,
                             SlError *err);

#endif
