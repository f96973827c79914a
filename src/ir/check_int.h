/* check_int.h - shared inside src/ir only, by the shape checker's two files: check.c (module
 * structure, called computations, elementwise, data movement, reductions, control flow,
 * collectives, dispatch) and check_index.c (the contraction and indexing family: dot,
 * convolution, gather, scatter). Shared functions are prefixed ck_ (the four trivial accessors
 * are not); every check fails through ck_bad(), which names the instruction, and allocates
 * inferred shapes in the checker's scratch arena. */
#ifndef SHARDLENS_IR_CHECK_INT_H
#define SHARDLENS_IR_CHECK_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

/* An inferred dim that matches anything: it came from an unbounded ('?') operand dim. */
#define ANY_DIM (-1)

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

/* ---- errors (check.c) ---- */

/* Fails with "instruction %NAME (OPCODE) in computation %COMP: WHY". */
SlStatus ck_bad(IrCheck *ck, const IrInstr *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
SlStatus ck_nomem(IrCheck *ck, const IrInstr *in);
/* "operand shapes A and B are not compatible" for operands a and b. */
SlStatus ck_dims_mismatch(IrCheck *ck, const IrInstr *in, uint32_t a, uint32_t b);

/* ---- shapes (check.c) ---- */

bool ck_same_dims(const IrShape *a, const IrShape *b); /* dims only; element types ignored */
/* A fresh array shape of `rank` zeroed dims in scratch; false on allocation failure. */
bool ck_new_shape(IrCheck *ck, IrDtype t, uint32_t rank, IrShape *out);
bool ck_copy_shape(IrCheck *ck, const IrShape *src, IrShape *out);
/* Output size of one window dim over a base of size `base` (XLA's window arithmetic). */
int64_t ck_window_out(int64_t base, const IrWindowDim *w);

/* ---- operand and attribute rules (check.c) ---- */

/* Exactly `n` operands, each an array. */
SlStatus ck_need_arrays(IrCheck *ck, const IrInstr *in, uint32_t n);
/* At least one operand, and every operand an array. */
SlStatus ck_need_all_arrays(IrCheck *ck, const IrInstr *in);
/* A list attribute whose entries must be distinct dims of a rank-`rank` shape. */
SlStatus ck_need_dims(IrCheck *ck, const IrInstr *in, const char *what, const int64_t *v,
                      uint32_t n, uint32_t rank);
SlStatus ck_need_called(IrCheck *ck, const IrInstr *in, IrAttrKey key, IrComputation **out);
/* A reducer taking 2k scalars (accumulators then inputs, typed like `types`) and returning
 * k scalars (a tuple when k > 1). */
SlStatus ck_need_reducer(IrCheck *ck, const IrInstr *in, const IrComputation *c,
                         const IrDtype *types, uint32_t k);

/* ---- results (check.c) ---- */

/* Compares the declared result shape with the inferred one. */
SlStatus ck_expect(IrCheck *ck, const IrInstr *in, const IrShape *inferred);
/* The same for k result arrays: one array, or a tuple when k > 1. */
SlStatus ck_expect_k(IrCheck *ck, const IrInstr *in, const IrShape *leaves, uint32_t k);

/* ---- contraction and indexing (check_index.c) ---- */

SlStatus ck_check_dot(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_ragged_dot(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_convolution(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_gather(IrCheck *ck, const IrInstr *in);
SlStatus ck_check_scatter(IrCheck *ck, const IrInstr *in);

#endif
