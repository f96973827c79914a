/* sim_int.h - shared inside src/sim only: the evaluation context, per-computation plans, and
 * the kernels of each opcode family (eval_*.c). Kernels take borrowed operands and return a
 * new reference in *out; they fail through sim_fail(), which names the instruction. */
#ifndef SHARDLENS_SIM_INT_H
#define SHARDLENS_SIM_INT_H

#include "sim/sim.h"

typedef struct SimCtx {
    const IrModule *m;
    int64_t n_devices; /* partitions simulated; partition-id ranges over 0..n_devices-1 */
    SlMap plans;       /* IrComputation* -> SimPlan* (heap) */
    SlVec plan_list;   /* SimPlan* in creation order, to free */
    SlMap consts;      /* IrInstr* (constant) -> SimValue* decoded once */
    SlVec const_list;  /* SimValue* references held by `consts` */
    const SimEnv *env;  /* infeed, outfeed, manual regions; NULL: none */
    SlError *err;
} SimCtx;

/* A computation prepared for evaluation: operand positions and last uses. */
typedef struct SimPlan {
    const IrComputation *comp;
    uint32_t n;          /* instructions */
    uint32_t root;       /* index of the root */
    uint32_t *op_start;  /* n + 1 offsets into op_idx */
    uint32_t *op_idx;    /* operand positions within the computation */
    uint32_t *last_use;  /* last instruction index using each value; UINT32_MAX for the root */
    uint32_t max_ops;    /* largest operand count */
    uint32_t n_params;
    uint32_t *param_pos; /* parameter number -> instruction index */
    int fast_op;         /* scalar binary body: its IrOp; -1 otherwise (see sim_fast_binop) */
    int scalar;          /* 1: only scalar elementwise ops (sim_call_scalars' fast path), 0 no,
                            -1 not yet decided */
    SimElem *regs;       /* scalar path: one element per instruction (constants filled once) */
    bool fast_swapped;   /* the body computes op(p1, p0) */
} SimPlan;

SlStatus sim_fail(SimCtx *cx, const IrInstr *ins, SlStatus st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
SlStatus sim_plan_get(SimCtx *cx, const IrComputation *c, SimPlan **out);
void sim_ctx_init(SimCtx *cx, const IrModule *m, int64_t n_devices, SlError *err);
void sim_ctx_fini(SimCtx *cx);

/* Evaluates `c` on n_lanes devices `devs`; args[lane * n_params + p] borrowed; out[lane] new. */
SlStatus sim_eval_comp(SimCtx *cx, const IrComputation *c, const int64_t *devs,
                       uint32_t n_lanes, SimValue *const *args, SimValue **out);
/* One device, one call of `c` (reduction bodies, comparators); out is a new reference. */
SlStatus sim_call(SimCtx *cx, const IrComputation *c, int64_t dev, SimValue *const *args,
                  uint32_t n_args, SimValue **out);
/* Calls `c` on scalars and reads n_out scalar results (a tuple root gives one per element);
 * computations made only of scalar elementwise ops run without allocating. */
SlStatus sim_call_scalars(SimCtx *cx, const IrInstr *ins, const IrComputation *c, int64_t dev,
                          const SimElem *args, const IrDtype *types, uint32_t n_args,
                          SimElem *outs, uint32_t n_out);
/* Decides once whether `p` runs on registers (p->scalar 1; its constants are then in p->regs). */
SlStatus sim_plan_scalar(SimCtx *cx, SimPlan *p);
/* One elementwise instruction on scalars of the given operand types; false if unsupported. */
bool sim_elem_apply(const IrInstr *ins, const IrDtype *in_types, const SimElem *x, SimElem *out);
/* The IrOp of a body `ROOT op(p0, p1)` over scalars, or -1; *swapped when op(p1, p0). */
int sim_fast_binop(SimCtx *cx, const IrComputation *c, bool *swapped);
/* Applies a scalar reduction body to (a, b): the fast path when recognised, else a call. */
SlStatus sim_apply2(SimCtx *cx, const IrInstr *ins, const IrComputation *c, IrDtype t,
                    SimElem a, SimElem b, SimElem *out);

/* ---- elements (value.c, eval_elem.c) ---- */
SimElem sim_fix(IrDtype t, SimElem x);          /* normalise to t: round or wrap */
SimElem sim_binop(IrOp op, IrDtype t, SimElem a, SimElem b); /* not normalised */
SimElem sim_convert(IrDtype from, IrDtype to, SimElem x);
/* `cmp` is a compare instruction: its direction and type applied to (a, b) of dtype t; *ok
 * false for an unknown direction. */
bool sim_compare(const IrInstr *cmp, IrDtype t, SimElem a, SimElem b, bool *ok);
/* The same split in two for hot loops: a code for the instruction's direction and type (-1
 * for an unknown direction), then the comparison by code. */
#define SIM_CMP_TOTAL 8
int sim_compare_code(const IrInstr *cmp);
bool sim_compare_coded(int code, IrDtype t, SimElem a, SimElem b);
bool sim_is_float(IrDtype t);
bool sim_is_f8(IrDtype t); /* f8e5m2, f8e4m3, f8e4m3fn, f8e8m0fnu: stored as rounded doubles */
bool sim_is_array_dtype(IrDtype t); /* types the evaluator stores */
SimValue *sim_value_like(const SimValue *v);   /* same dtype and dims, zeroed */
SimValue *sim_value_copy(const SimValue *v);   /* deep copy of an array */
void sim_strides(const int64_t *dims, uint32_t rank, int64_t *strides);
static inline void
sim_idx_next(int64_t *idx, const int64_t *dims, uint32_t rank)
{
    for (uint32_t d = rank; d-- > 0;) {
        if (++idx[d] < dims[d])
            return;
        idx[d] = 0;
    }
}
int64_t sim_scalar_i64(const SimValue *v); /* element 0 as an integer (floats truncated) */

/* ---- kernels by family; `ops` borrowed, *out new ---- */
SlStatus sim_eval_elementwise(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                              SimValue **out);
SlStatus sim_eval_shape(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out);
SlStatus sim_eval_reduce(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                         SimValue **out);
SlStatus sim_eval_dot(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out);
/* Dot dimension numbers (batch and contracting dims of each side). */
typedef struct SimDotNums {
    const int64_t *lb, *lc, *rb, *rc;
    uint32_t nlb, nlc, nrb, nrc;
} SimDotNums;
/* dot(a, b) by `dn` into a new array of `shape` (batch, lhs free, rhs free order). */
SlStatus sim_dot(SimCtx *cx, const IrInstr *ins, const SimValue *a, const SimValue *b,
                 const SimDotNums *dn, const IrShape *shape, SimValue **out);
/* ragged-dot in its three modes (eval_dot.c). */
SlStatus sim_eval_ragged_dot(SimCtx *cx, const IrInstr *ins, SimValue *const *ops,
                             SimValue **out);
/* Custom calls and scan (eval_custom.c). */
SlStatus sim_eval_custom_call(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                              SimValue **out);
SlStatus sim_eval_scan(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                       SimValue **out);
SlStatus sim_eval_triangular_solve(SimCtx *cx, const IrInstr *ins, SimValue *const *ops,
                                   SimValue **out);
SlStatus sim_eval_conv(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out);
SlStatus sim_eval_gather(SimCtx *cx, const IrInstr *ins, SimValue *const *ops, SimValue **out);
SlStatus sim_eval_scatter(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                          SimValue **out);
SlStatus sim_eval_sort(SimCtx *cx, const IrInstr *ins, int64_t dev, SimValue *const *ops,
                       SimValue **out);
/* Collectives see every lane: ops[lane * n_operands + k]; out[lane]. */
SlStatus sim_eval_collective(SimCtx *cx, const IrInstr *ins, const int64_t *devs,
                             uint32_t n_lanes, SimValue *const *ops, SimValue **out);
bool sim_is_collective(IrOp op);

/* Manual regions (manual.c). The manual group of `dev` under leaf sharding `s`: the device
 * itself for {manual}, its coordinate in the manual subgroup dim for last_tile_dims={manual},
 * else 0 (all devices alike); -1 when `s` does not list the device. */
struct ShdSharding;
int64_t sim_manual_group(const struct ShdSharding *s, int64_t dev);
/* An SPMDFullToShardShape / SPMDShardToFullShape that an env with `manual` gives meaning to. */
bool sim_is_manual_cut(const SimCtx *cx, const IrInstr *ins);
SlStatus sim_eval_manual_cut(SimCtx *cx, const IrInstr *ins, const int64_t *devs, uint32_t n,
                             SimValue *const *ops, SimValue **out);

/* Integer attribute stored as IR_ATTR_OTHER (e.g. exponent_bits); false when absent. */
bool sim_other_int_attr(const IrInstr *ins, const char *key, int64_t *out);

#endif
