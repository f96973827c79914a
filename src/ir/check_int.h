/* check_int.h - shared inside src/ir only, by the shape checker's files: check.c (the module
 * walk, structure, constant literals, the errors and the dispatch to the rules below),
 * check_common.c (the helpers every rule uses: shape text, comparison and construction, operand
 * rules, called-computation rules, results), check_array.c (elementwise, data movement, iota,
 * the ops that keep an operand's shape, the partitioner's custom calls), check_reduce.c (reduce,
 * reduce-window, window arithmetic), check_index.c (the contraction and indexing family: dot,
 * convolution, gather, scatter), check_control.c (tuples, while, conditional, call, async call,
 * scan) and check_collective.c (collectives, and the device ids in attributes). Shared functions
 * are prefixed ck_ (the five trivial accessors are not); every check fails through ck_bad(),
 * which names the instruction, and allocates inferred shapes in the checker's scratch arena. */
#ifndef SHARDLENS_IR_CHECK_INT_H
#define SHARDLENS_IR_CHECK_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

/* An inferred dim that matches anything: it came from an unbounded ('?') operand dim. */
#define ANY_DIM (-1)
/* Room for ck_shape_text() in messages. */
#define SHAPE_TEXT_BYTES 160

typedef struct IrCheck {
    const IrModule *m;
    const char *path; /* for error locations; may be NULL */
    SlError *err;
    SlArena scratch;      /* inferred shapes; released by ir_module_check() */
    SlMap comp_pos;       /* computation -> 1 + index in m->comps */
    SlMap ids;            /* scratch: device ids seen in one attribute */
    int64_t num_partitions; /* the partition count to check with; 0: the header's */
    const IrInstr **seen; /* by id: the instruction once checked (operands must be seen first) */
    uint32_t n_seen;      /* m->next_instr_id entries */
} IrCheck;

/* ---- trivial accessors ---- */

static inline int64_t
dim(const IrShape *s, uint32_t i)
{
    if (s->dim_kinds && s->dim_kinds[i] == IR_DIM_UNBOUNDED)
        return ANY_DIM;
    return s->dims[i];
}

static inline bool
dim_eq(int64_t a, int64_t b)
{
    return a == ANY_DIM || b == ANY_DIM || a == b;
}

static inline const IrShape *
opnd(const IrInstr *in, uint32_t k)
{
    return &in->operands[k]->shape;
}

static inline bool
contains(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

static inline bool
is_scalar(const IrShape *s)
{
    return ir_shape_is_array(s) && s->rank == 0;
}

/* ---- errors (check.c) ---- */

/* Fails with "instruction %NAME (OPCODE) in computation %COMP: WHY". */
SlStatus ck_bad(IrCheck *ck, const IrInstr *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
SlStatus ck_nomem(IrCheck *ck, const IrInstr *in);

/* ---- shape text in messages (check_common.c) ---- */

/* Shape text without layout, truncated to fit `out` (SHAPE_TEXT_BYTES is enough); returns `out`. */
const char *ck_shape_text(const IrShape *s, char *out, size_t n);
/* "operand shapes A and B are not compatible" for operands a and b. */
SlStatus ck_dims_mismatch(IrCheck *ck, const IrInstr *in, uint32_t a, uint32_t b);

/* ---- shapes (check_common.c) ---- */

bool ck_same_dims(const IrShape *a, const IrShape *b); /* dims only; element types ignored */
/* Shape equality ignoring layouts; ANY_DIM and unbounded dims match anything. */
bool ck_shape_match(const IrShape *a, const IrShape *b);
/* Saturating arithmetic: huge dims in bad input give a mismatch, never signed overflow. */
int64_t ck_sat_add(int64_t a, int64_t b);
int64_t ck_sat_mul(int64_t a, int64_t b);
int64_t ck_elem_count(const IrShape *s); /* of an array shape, saturating */
/* A fresh array shape of `rank` zeroed dims in scratch; false on allocation failure. */
bool ck_new_shape(IrCheck *ck, IrDtype t, uint32_t rank, IrShape *out);
bool ck_copy_shape(IrCheck *ck, const IrShape *src, IrShape *out);
/* A tuple shape over `n` element shapes (copied by value into scratch). */
bool ck_new_tuple(IrCheck *ck, const IrShape *elems, uint32_t n, IrShape *out);

/* ---- operand and attribute rules (check_common.c) ---- */

/* Exactly `n` operands; operand `k` an array. */
SlStatus ck_need_operands(IrCheck *ck, const IrInstr *in, uint32_t n);
SlStatus ck_need_array(IrCheck *ck, const IrInstr *in, uint32_t k);
/* Exactly `n` operands, each an array. */
SlStatus ck_need_arrays(IrCheck *ck, const IrInstr *in, uint32_t n);
/* At least one operand, and every operand an array. */
SlStatus ck_need_all_arrays(IrCheck *ck, const IrInstr *in);
/* A list attribute whose entries must be distinct dims of a rank-`rank` shape. */
SlStatus ck_need_dims(IrCheck *ck, const IrInstr *in, const char *what, const int64_t *v,
                      uint32_t n, uint32_t rank);

/* ---- called computations (check_common.c) ---- */

SlStatus ck_need_called(IrCheck *ck, const IrInstr *in, IrAttrKey key, IrComputation **out);
/* The parameter `k` of `c` must have shape `want`. */
SlStatus ck_need_param(IrCheck *ck, const IrInstr *in, const IrComputation *c, int64_t k,
                       const IrShape *want);
SlStatus ck_need_param_count(IrCheck *ck, const IrInstr *in, const IrComputation *c, uint32_t n);
/* The root of `c` must have shape `want` (a computation without a root passes). */
SlStatus ck_need_root(IrCheck *ck, const IrInstr *in, const IrComputation *c, const IrShape *want);
/* A reducer taking 2k scalars (accumulators then inputs, typed like `types`) and returning
 * k scalars (a tuple when k > 1). */
SlStatus ck_need_reducer(IrCheck *ck, const IrInstr *in, const IrComputation *c,
                         const IrDtype *types, uint32_t k);

/* ---- results (check_common.c) ---- */

/* Compares the declared result shape with the inferred one. */
SlStatus ck_expect(IrCheck *ck, const IrInstr *in, const IrShape *inferred);
/* The same for k result arrays: one array, or a tuple when k > 1. */
SlStatus ck_expect_k(IrCheck *ck, const IrInstr *in, const IrShape *leaves, uint32_t k);

/* ---- per-opcode rules: `in` against its operands and attributes ---- */
/* check.c dispatches `in` to one of these after its structural checks (operands defined,
 * ir_ops.def operand count and attributes, called computations in the module). */

/* elementwise, data movement, iota, shape-keeping ops, custom calls (check_array.c) */
SlStatus ck_check_elementwise(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_bitcast_convert(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_broadcast(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_reshape(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_transpose(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_slice(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_dynamic_slice(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_dynamic_update_slice(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_pad(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_concatenate(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_iota(IrCheck *ck, const IrInstr *in);
/* reverse, opt-barrier, sort, cholesky, triangular-solve, select-and-scatter */
SlStatus ck_check_keeps_shape(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_custom_call(IrCheck *ck, const IrInstr *in);

/* reductions and windows (check_reduce.c) */
SlStatus ck_check_reduce(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_reduce_window(IrCheck *ck, const IrInstr *in);
/* Output size of one window dim over a base of size `base` (XLA's window arithmetic). */
int64_t ck_window_out(int64_t base, const IrWindowDim *w);

/* contraction and indexing (check_index.c) */

SlStatus ck_check_dot(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_ragged_dot(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_convolution(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_gather(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_scatter(IrCheck *ck, const IrInstr *in);

/* tuples and control flow (check_control.c) */
SlStatus ck_check_tuple(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_gte(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_while(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_conditional(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_call(IrCheck *ck, const IrInstr *in);
/* call-start, call-update, call-done */
SlStatus ck_check_async_call(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_scan(IrCheck *ck, const IrInstr *in);

/* collectives (check_collective.c) */
SlStatus ck_check_collective(IrCheck *ck, const IrInstr *in);
/* Not a shape rule: one of check.c's structural checks, run on every instruction (the device
 * ids that replica_groups and source_target_pairs name). */
SlStatus ck_check_device_ids(IrCheck *ck, const IrInstr *in);

#endif
