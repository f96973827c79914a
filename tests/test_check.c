/* test_check.c - ir_module_check: one good and one bad module per opcode family (parsed from
 * text), and structural errors built with the ir_* constructors (which text cannot express). A
 * bad row names the offending instruction and a key part of the message; the error must be
 * located on that instruction's line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/base.h"
#include "hlo/hlo.h"
#include "ir/ir.h"

typedef struct Fixture {
    SlArena arena;
    SlInterner names;
} Fixture;

static int
fixture_setup(void **state)
{
    Fixture *fx = calloc(1, sizeof(*fx));
    if (!fx)
        return -1;
    sl_arena_init(&fx->arena);
    sl_interner_init(&fx->names, &fx->arena);
    *state = fx;
    return 0;
}

static int
fixture_teardown(void **state)
{
    Fixture *fx = *state;
    sl_interner_fini(&fx->names);
    sl_arena_fini(&fx->arena);
    free(fx);
    return 0;
}

/* ---- parsed modules ------------------------------------------------------------------------ */

#define HDR "HloModule m, num_partitions=4\n\n"
#define ADD_F32                                                                                    \
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
#define ADD_S32                                                                                    \
    "add_s32 {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n"                              \
    "  ROOT s = s32[] add(x, y)\n}\n\n"
#define ARGMAX                                                                                     \
    "argmax {\n  a = f32[] parameter(0)\n  i = s32[] parameter(1)\n  b = f32[] parameter(2)\n"     \
    "  j = s32[] parameter(3)\n  c = pred[] compare(a, b), direction=GE\n"                         \
    "  m = f32[] select(c, a, b)\n  k = s32[] select(c, i, j)\n  ROOT t = (f32[], s32[]) "         \
    "tuple(m, k)\n}\n\n"
#define LOOP                                                                                       \
    "cond {\n  p = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"      \
    "  n = s32[] constant(4)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n"               \
    "body {\n  p = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"      \
    "  v = f32[4] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"                      \
    "  i2 = s32[] add(i, one)\n  v2 = f32[4] add(v, v)\n"                                          \
    "  ROOT t = (s32[], f32[4]) tuple(i2, v2)\n}\n\n"
#define BRANCHES                                                                                   \
    "neg {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] negate(p)\n}\n\n"                         \
    "same {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] copy(p)\n}\n\n"
#define ENTRY(body) "ENTRY main {\n" body "}\n"
#define P(n, shape) "  p" #n " = " shape " parameter(" #n ")\n"

/* The table keeps its hand layout: clang-format 14 misaligns rows built from macros. */
/* clang-format off */
static const struct {
    const char *name, *text;
    SlStatus want;
    const char *bad_instr; /* offending instruction (bad rows) */
    const char *msg;       /* a key part of the message (bad rows) */
} k_cases[] = {
    /* elementwise */
    {"add_ok", HDR ENTRY(P(0, "f32[4,8]") P(1, "f32[4,8]") "  ROOT r = f32[4,8] add(p0, p1)\n"),
     SL_OK, NULL, NULL},
    {"add_bad", HDR ENTRY(P(0, "f32[4,8]") P(1, "f32[4,8]") "  ROOT r = f32[4,4] add(p0, p1)\n"),
     SL_ERR_INVALID, "r", "declared shape f32[4,4] but inferred f32[4,8]"},
    {"add_operands_differ",
     HDR ENTRY(P(0, "f32[4,8]") P(1, "f32[8,4]") "  ROOT r = f32[4,8] add(p0, p1)\n"),
     SL_ERR_INVALID, "r", "operand shapes f32[4,8] and f32[8,4] are not compatible"},
    {"compare_ok",
     HDR ENTRY(P(0, "f32[4]") P(1, "f32[4]") "  ROOT r = pred[4] compare(p0, p1), direction=LT\n"),
     SL_OK, NULL, NULL},
    {"compare_bad",
     HDR ENTRY(P(0, "f32[4]") P(1, "f32[4]") "  ROOT r = f32[4] compare(p0, p1), direction=LT\n"),
     SL_ERR_INVALID, "r", "declared shape f32[4] but inferred pred[4]"},
    {"convert_ok", HDR ENTRY(P(0, "f32[4]") "  ROOT r = bf16[4] convert(p0)\n"), SL_OK, NULL,
     NULL},
    {"convert_bad", HDR ENTRY(P(0, "f32[4]") "  ROOT r = bf16[5] convert(p0)\n"),
     SL_ERR_INVALID, "r", "declared shape bf16[5] but inferred bf16[4]"},
    /* copy takes a tuple too (XLA's propagation tests copy tuples, sorts and whiles) */
    {"copy_tuple_ok",
     HDR ENTRY(P(0, "f32[4]") P(1, "s32[2,3]") "  i = (s32[2,3], f32[4]) tuple(p1, p0)\n"
                   "  t = (f32[4], (s32[2,3], f32[4])) tuple(p0, i)\n"
                   "  ROOT r = (f32[4], (s32[2,3], f32[4])) copy(t)\n"),
     SL_OK, NULL, NULL},
    {"copy_tuple_bad",
     HDR ENTRY(P(0, "f32[4]") P(1, "s32[2,3]") "  t = (f32[4], s32[2,3]) tuple(p0, p1)\n"
                   "  ROOT r = (f32[4], s32[3,2]) copy(t)\n"),
     SL_ERR_INVALID, "r", "declared shape (f32[4], s32[3,2]) but inferred (f32[4], s32[2,3])"},
    /* call-start/call-done: XLA's async sugar for a call */
#define CALLEE "callee {\n  a = s32[8] parameter(0)\n  b = s32[8] parameter(1)\n" \
               "  ROOT t = (s32[8], s32[8]) tuple(a, b)\n}, execution_thread=\"t1\"\n\n"
    {"call_start_ok",
     HDR CALLEE ENTRY(P(0, "s32[8]") P(1, "s32[8]")
                   "  s = ((s32[8], s32[8]), (s32[8], s32[8]), u32[]) call-start(p0, p1), "
                   "async_execution_thread=\"t1\", to_apply=callee\n"
                   "  u = ((s32[8], s32[8]), (s32[8], s32[8]), u32[]) call-update(s)\n"
                   "  ROOT d = (s32[8], s32[8]) call-done(u)\n"),
     SL_OK, NULL, NULL},
    {"call_start_operands_bad",
     HDR CALLEE ENTRY(P(0, "s32[8]") P(1, "s32[8]")
                   "  s = ((s32[8]), (s32[8], s32[8]), u32[]) call-start(p0, p1), to_apply=callee\n"
                   "  ROOT d = (s32[8], s32[8]) call-done(s)\n"),
     SL_ERR_INVALID, "s", "element 0 of the declared shape is (s32[8]), the operands are (s32[8], s32[8])"},
    {"call_done_shape_bad",
     HDR CALLEE ENTRY(P(0, "s32[8]") P(1, "s32[8]")
                   "  s = ((s32[8], s32[8]), (s32[8], s32[8]), u32[]) call-start(p0, p1), to_apply=callee\n"
                   "  ROOT d = (s32[8], s32[4]) call-done(s)\n"),
     SL_ERR_INVALID, "d", "declared shape (s32[8], s32[4]) but inferred (s32[8], s32[8])"},
    {"call_done_of_tuple_bad",
     HDR ENTRY(P(0, "s32[8]") "  t = (s32[8]) tuple(p0)\n  ROOT d = s32[8] call-done(t)\n"),
     SL_ERR_INVALID, "d", "operand %t must be a call-start or call-update, not tuple"},
#undef CALLEE
    {"select_ok",
     HDR ENTRY(P(0, "pred[4]") P(1, "f32[4]") P(2, "f32[4]")
                   "  ROOT r = f32[4] select(p0, p1, p2)\n"),
     SL_OK, NULL, NULL},
    {"select_bad",
     HDR ENTRY(P(0, "pred[4]") P(1, "f32[4]") P(2, "f32[5]")
                   "  ROOT r = f32[4] select(p0, p1, p2)\n"),
     SL_ERR_INVALID, "r", "f32[4] and f32[5] are not compatible"},
    {"clamp_scalar_bounds_ok",
     HDR ENTRY(P(0, "f32[]") P(1, "f32[4,2]") P(2, "f32[]")
                   "  ROOT r = f32[4,2] clamp(p0, p1, p2)\n"),
     SL_OK, NULL, NULL},
    {"clamp_bad",
     HDR ENTRY(P(0, "f32[3]") P(1, "f32[4]") P(2, "f32[]") "  ROOT r = f32[4] clamp(p0, p1, p2)\n"),
     SL_ERR_INVALID, "r", "f32[3] and f32[4] are not compatible"},
    /* broadcast, reshape, transpose */
    {"broadcast_ok", HDR ENTRY(P(0, "f32[8]") "  ROOT r = f32[4,8] broadcast(p0), dimensions={1}\n"),
     SL_OK, NULL, NULL},
    {"broadcast_bad",
     HDR ENTRY(P(0, "f32[8]") "  ROOT r = f32[4,8] broadcast(p0), dimensions={0}\n"),
     SL_ERR_INVALID, "r", "declared shape f32[4,8] but inferred f32[8,8]"},
    {"reshape_ok", HDR ENTRY(P(0, "f32[4,8]") "  ROOT r = f32[2,16] reshape(p0)\n"), SL_OK, NULL,
     NULL},
    {"reshape_bad", HDR ENTRY(P(0, "f32[4,8]") "  ROOT r = f32[30] reshape(p0)\n"),
     SL_ERR_INVALID, "r", "f32[30] has 30 elements but operand f32[4,8] has 32"},
    {"transpose_ok",
     HDR ENTRY(P(0, "f32[2,4,8]") "  ROOT r = f32[8,2,4] transpose(p0), dimensions={2,0,1}\n"),
     SL_OK, NULL, NULL},
    {"transpose_bad",
     HDR ENTRY(P(0, "f32[2,4,8]") "  ROOT r = f32[2,4,8] transpose(p0), dimensions={2,0,1}\n"),
     SL_ERR_INVALID, "r", "declared shape f32[2,4,8] but inferred f32[8,2,4]"},
    /* slices and pads */
    {"slice_ok", HDR ENTRY(P(0, "f32[4,8]") "  ROOT r = f32[2,3] slice(p0), slice={[1:3], [2:8:2]}\n"),
     SL_OK, NULL, NULL},
    {"slice_bad",
     HDR ENTRY(P(0, "f32[4,8]") "  ROOT r = f32[2,4] slice(p0), slice={[1:3], [2:8:2]}\n"),
     SL_ERR_INVALID, "r", "declared shape f32[2,4] but inferred f32[2,3]"},
    {"dynamic_slice_ok",
     HDR ENTRY(P(0, "f32[4,8]") P(1, "s32[]") P(2, "s32[]")
                   "  ROOT r = f32[2,8] dynamic-slice(p0, p1, p2), dynamic_slice_sizes={2,8}\n"),
     SL_OK, NULL, NULL},
    {"dynamic_slice_bad",
     HDR ENTRY(P(0, "f32[4,8]") P(1, "s32[]") P(2, "s32[]")
                   "  ROOT r = f32[2,9] dynamic-slice(p0, p1, p2), dynamic_slice_sizes={2,9}\n"),
     SL_ERR_INVALID, "r", "slice size 9 does not fit dim 1 of size 8"},
    {"dus_ok",
     HDR ENTRY(P(0, "f32[4,8]") P(1, "f32[1,8]") P(2, "s32[]") P(3, "s32[]")
                   "  ROOT r = f32[4,8] dynamic-update-slice(p0, p1, p2, p3)\n"),
     SL_OK, NULL, NULL},
    {"dus_bad",
     HDR ENTRY(P(0, "f32[4,8]") P(1, "f32[5,8]") P(2, "s32[]") P(3, "s32[]")
                   "  ROOT r = f32[4,8] dynamic-update-slice(p0, p1, p2, p3)\n"),
     SL_ERR_INVALID, "r", "update dim 0 of size 5 exceeds operand size 4"},
    {"pad_negative_interior_ok",
     HDR ENTRY(P(0, "f32[4,3]") P(1, "f32[]")
                   "  ROOT r = f32[8,3] pad(p0, p1), padding=-1_2_1x0_0\n"),
     SL_OK, NULL, NULL},
    {"pad_bad",
     HDR ENTRY(P(0, "f32[4,3]") P(1, "f32[]")
                   "  ROOT r = f32[7,3] pad(p0, p1), padding=-1_2_1x0_0\n"),
     SL_ERR_INVALID, "r", "declared shape f32[7,3] but inferred f32[8,3]"},
    {"concatenate_ok",
     HDR ENTRY(P(0, "f32[2,3]") P(1, "f32[4,3]")
                   "  ROOT r = f32[6,3] concatenate(p0, p1), dimensions={0}\n"),
     SL_OK, NULL, NULL},
    {"concatenate_bad",
     HDR ENTRY(P(0, "f32[2,3]") P(1, "f32[4,3]")
                   "  ROOT r = f32[6,6] concatenate(p0, p1), dimensions={0}\n"),
     SL_ERR_INVALID, "r", "declared shape f32[6,6] but inferred f32[6,3]"},
    /* reductions */
    {"reduce_ok",
     HDR ADD_F32 ENTRY(P(0, "f32[4,8]") "  z = f32[] constant(0)\n"
                                        "  ROOT r = f32[4] reduce(p0, z), dimensions={1}, "
                                        "to_apply=add\n"),
     SL_OK, NULL, NULL},
    {"reduce_bad",
     HDR ADD_F32 ENTRY(P(0, "f32[4,8]") "  z = f32[] constant(0)\n"
                                        "  ROOT r = f32[8] reduce(p0, z), dimensions={1}, "
                                        "to_apply=add\n"),
     SL_ERR_INVALID, "r", "declared shape f32[8] but inferred f32[4]"},
    {"reduce_variadic_ok",
     HDR ARGMAX ENTRY(P(0, "f32[4,8]") P(1, "s32[4,8]") "  z = f32[] constant(0)\n"
                      "  k = s32[] constant(0)\n  ROOT r = (f32[4], s32[4]) reduce(p0, p1, z, k), "
                      "dimensions={1}, to_apply=argmax\n"),
     SL_OK, NULL, NULL},
    {"reduce_reducer_arity_bad",
     HDR ADD_F32 ENTRY(P(0, "f32[4,8]") P(1, "f32[4,8]") "  z = f32[] constant(0)\n"
                       "  ROOT r = (f32[4], f32[4]) reduce(p0, p1, z, z), dimensions={1}, "
                       "to_apply=add\n"),
     SL_ERR_INVALID, "r", "called computation %add takes 2 parameters, expected 4"},
    {"reduce_window_ok",
     HDR ADD_F32 ENTRY(P(0, "f32[4,8]") "  z = f32[] constant(0)\n"
                       "  ROOT r = f32[2,4] reduce-window(p0, z), window={size=2x2 stride=2x2}, "
                       "to_apply=add\n"),
     SL_OK, NULL, NULL},
    {"reduce_window_bad",
     HDR ADD_F32 ENTRY(P(0, "f32[4,8]") "  z = f32[] constant(0)\n"
                       "  ROOT r = f32[3,4] reduce-window(p0, z), window={size=2x2 stride=2x2}, "
                       "to_apply=add\n"),
     SL_ERR_INVALID, "r", "declared shape f32[3,4] but inferred f32[2,4]"},
    /* dot and convolution */
    {"dot_ok",
     HDR ENTRY(P(0, "f32[2,4,8]") P(1, "f32[2,8,16]")
                   "  ROOT r = f32[2,4,16] dot(p0, p1), lhs_batch_dims={0}, "
                   "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n"),
     SL_OK, NULL, NULL},
    {"dot_bad",
     HDR ENTRY(P(0, "f32[8,32]") P(1, "f32[32,16]")
                   "  ROOT r = f32[8,32] dot(p0, p1), lhs_contracting_dims={1}, "
                   "rhs_contracting_dims={0}\n"),
     SL_ERR_INVALID, "r", "declared shape f32[8,32] but inferred f32[8,16]"},
    {"dot_contracting_mismatch",
     HDR ENTRY(P(0, "f32[8,32]") P(1, "f32[16,16]")
                   "  ROOT r = f32[8,16] dot(p0, p1), lhs_contracting_dims={1}, "
                   "rhs_contracting_dims={0}\n"),
     SL_ERR_INVALID, "r", "contracting dim sizes differ"},
    {"convolution_ok",
     HDR ENTRY(P(0, "f32[1,8,8,3]") P(1, "f32[3,3,3,16]")
                   "  ROOT r = f32[1,8,8,16] convolution(p0, p1), "
                   "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"),
     SL_OK, NULL, NULL},
    {"convolution_grouped_strided_ok",
     HDR ENTRY(P(0, "f32[2,9,4]") P(1, "f32[3,2,8]")
                   "  ROOT r = f32[2,4,8] convolution(p0, p1), window={size=3 stride=2}, "
                   "dim_labels=b0f_0io->b0f, feature_group_count=2\n"),
     SL_OK, NULL, NULL},
    {"convolution_bad",
     HDR ENTRY(P(0, "f32[1,8,8,3]") P(1, "f32[3,3,3,16]")
                   "  ROOT r = f32[1,8,8,16] convolution(p0, p1), window={size=3x3}, "
                   "dim_labels=b01f_01io->b01f\n"),
     SL_ERR_INVALID, "r", "declared shape f32[1,8,8,16] but inferred f32[1,6,6,16]"},
    /* gather and scatter */
    {"gather_ok",
     HDR ENTRY(P(0, "f32[100,16]") P(1, "s32[5,1]")
                   "  ROOT r = f32[5,16] gather(p0, p1), offset_dims={1}, "
                   "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
                   "slice_sizes={1,16}\n"),
     SL_OK, NULL, NULL},
    {"gather_bad",
     HDR ENTRY(P(0, "f32[100,16]") P(1, "s32[5,1]")
                   "  ROOT r = f32[5,8] gather(p0, p1), offset_dims={1}, "
                   "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
                   "slice_sizes={1,16}\n"),
     SL_ERR_INVALID, "r", "declared shape f32[5,8] but inferred f32[5,16]"},
    {"scatter_ok",
     HDR ADD_F32 ENTRY(P(0, "f32[100,16]") P(1, "s32[5,1]") P(2, "f32[5,16]")
                       "  ROOT r = f32[100,16] scatter(p0, p1, p2), update_window_dims={1}, "
                       "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                       "index_vector_dim=1, to_apply=add\n"),
     SL_OK, NULL, NULL},
    {"scatter_bad",
     HDR ADD_F32 ENTRY(P(0, "f32[100,16]") P(1, "s32[5,1]") P(2, "f32[6,16]")
                       "  ROOT r = f32[100,16] scatter(p0, p1, p2), update_window_dims={1}, "
                       "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                       "index_vector_dim=1, to_apply=add\n"),
     SL_ERR_INVALID, "r", "updates dim 0 is 6 but the indices give 5"},
    /* iota, tuples */
    {"iota_ok", HDR ENTRY("  ROOT r = s32[4,8] iota(), iota_dimension=1\n"), SL_OK, NULL, NULL},
    {"iota_bad", HDR ENTRY("  ROOT r = s32[4,8] iota(), iota_dimension=2\n"), SL_ERR_INVALID, "r",
     "iota_dimension=2 out of range for rank 2"},
    {"tuple_gte_ok",
     HDR ENTRY(P(0, "f32[4]") P(1, "s32[]") "  t = (f32[4], s32[]) tuple(p0, p1)\n"
                                            "  ROOT r = s32[] get-tuple-element(t), index=1\n"),
     SL_OK, NULL, NULL},
    {"tuple_bad",
     HDR ENTRY(P(0, "f32[4]") P(1, "s32[]") "  ROOT r = (f32[4], f32[]) tuple(p0, p1)\n"),
     SL_ERR_INVALID, "r", "declared shape (f32[4], f32[]) but inferred (f32[4], s32[])"},
    {"gte_bad",
     HDR ENTRY(P(0, "f32[4]") P(1, "s32[]") "  t = (f32[4], s32[]) tuple(p0, p1)\n"
                                            "  ROOT r = s32[] get-tuple-element(t), index=2\n"),
     SL_ERR_INVALID, "r", "index=2 out of range for a tuple of 2 elements"},
    /* control flow */
    {"while_ok",
     HDR LOOP ENTRY(P(0, "f32[4]") "  z = s32[] constant(0)\n"
                    "  t = (s32[], f32[4]) tuple(z, p0)\n"
                    "  ROOT r = (s32[], f32[4]) while(t), condition=cond, body=body\n"),
     SL_OK, NULL, NULL},
    {"while_bad",
     HDR LOOP ENTRY(P(0, "f32[4]") "  z = s32[] constant(0)\n"
                    "  ROOT r = s32[] while(z), condition=cond, body=body\n"),
     SL_ERR_INVALID, "r", "parameter 0 of %cond has shape (s32[], f32[4]), expected s32[]"},
    {"conditional_ok",
     HDR BRANCHES ENTRY(P(0, "s32[]") P(1, "f32[4]")
                        "  ROOT r = f32[4] conditional(p0, p1, p1), "
                        "branch_computations={neg, same}\n"),
     SL_OK, NULL, NULL},
    {"conditional_bad",
     HDR BRANCHES ENTRY(P(0, "pred[]") P(1, "f32[4]") P(2, "f32[5]")
                        "  ROOT r = f32[4] conditional(p0, p1, p2), true_computation=neg, "
                        "false_computation=same\n"),
     SL_ERR_INVALID, "r", "parameter 0 of %same has shape f32[4], expected f32[5]"},
    {"call_ok", HDR BRANCHES ENTRY(P(0, "f32[4]") "  ROOT r = f32[4] call(p0), to_apply=neg\n"),
     SL_OK, NULL, NULL},
    {"call_bad",
     HDR BRANCHES ENTRY(P(0, "f32[4]") "  ROOT r = f32[4] call(p0, p0), to_apply=neg\n"),
     SL_ERR_INVALID, "r", "called computation %neg takes 1 parameters, expected 2"},
    /* collectives */
    {"all_reduce_ok",
     HDR ADD_F32 ENTRY(P(0, "f32[8]") "  ROOT r = f32[8] all-reduce(p0), channel_id=1, "
                       "replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add\n"),
     SL_OK, NULL, NULL},
    {"all_reduce_bad",
     HDR ADD_F32 ENTRY(P(0, "f32[8]") "  ROOT r = f32[2] all-reduce(p0), channel_id=1, "
                       "replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add\n"),
     SL_ERR_INVALID, "r", "declared shape f32[2] but inferred f32[8]"},
    {"all_gather_list_ok",
     HDR ENTRY(P(0, "f32[2,8]") "  ROOT r = f32[4,8] all-gather(p0), channel_id=1, "
               "replica_groups={{0,1},{2,3}}, dimensions={0}, use_global_device_ids=true\n"),
     SL_OK, NULL, NULL},
    {"all_gather_iota_ok",
     HDR ENTRY(P(0, "f32[2,8]") "  ROOT r = f32[2,16] all-gather(p0), channel_id=1, "
               "replica_groups=[2,2]<=[2,2]T(1,0), dimensions={1}, use_global_device_ids=true\n"),
     SL_OK, NULL, NULL},
    {"all_gather_empty_groups_ok",
     HDR ENTRY(P(0, "f32[2,8]") "  ROOT r = f32[8,8] all-gather(p0), channel_id=1, "
               "replica_groups={}, dimensions={0}, use_global_device_ids=true\n"),
     SL_OK, NULL, NULL},
    {"all_gather_bad",
     HDR ENTRY(P(0, "f32[2,8]") "  ROOT r = f32[8,8] all-gather(p0), channel_id=1, "
               "replica_groups=[2,2]<=[4], dimensions={0}, use_global_device_ids=true\n"),
     SL_ERR_INVALID, "r", "declared shape f32[8,8] but inferred f32[4,8]"},
    {"reduce_scatter_ok",
     HDR ADD_F32 ENTRY(P(0, "f32[8,4]") "  ROOT r = f32[2,4] reduce-scatter(p0), channel_id=1, "
                       "replica_groups=[1,4]<=[4], dimensions={0}, use_global_device_ids=true, "
                       "to_apply=add\n"),
     SL_OK, NULL, NULL},
    {"reduce_scatter_bad",
     HDR ADD_F32 ENTRY(P(0, "f32[6,4]") "  ROOT r = f32[2,4] reduce-scatter(p0), channel_id=1, "
                       "replica_groups=[1,4]<=[4], dimensions={0}, use_global_device_ids=true, "
                       "to_apply=add\n"),
     SL_ERR_INVALID, "r", "dim 0 of size 6 is not divisible by the group size 4"},
    {"all_to_all_ok",
     HDR ENTRY(P(0, "f32[8,4]") "  ROOT r = f32[8,4] all-to-all(p0), channel_id=1, "
               "replica_groups={{0,1,2,3}}, dimensions={0}\n"),
     SL_OK, NULL, NULL},
    {"all_to_all_bad",
     HDR ENTRY(P(0, "f32[8,4]") "  ROOT r = f32[2,4] all-to-all(p0), channel_id=1, "
               "replica_groups={{0,1,2,3}}, dimensions={0}\n"),
     SL_ERR_INVALID, "r", "declared shape f32[2,4] but inferred f32[8,4]"},
    {"collective_permute_ok",
     HDR ENTRY(P(0, "f32[8]") "  ROOT r = f32[8] collective-permute(p0), channel_id=1, "
               "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}\n"),
     SL_OK, NULL, NULL},
    {"collective_permute_bad",
     HDR ENTRY(P(0, "f32[8]") "  ROOT r = f32[4] collective-permute(p0), channel_id=1, "
               "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}\n"),
     SL_ERR_INVALID, "r", "declared shape f32[4] but inferred f32[8]"},
    /* structure */
    {"params_not_dense",
     HDR ENTRY("  p0 = f32[4] parameter(0)\n  p2 = f32[4] parameter(2)\n"
               "  ROOT r = f32[4] add(p0, p2)\n"),
     SL_ERR_INVALID, "p2", "parameter number 2 out of range: %main has 2 parameters"},
    {"layouts_ignored",
     HDR ENTRY("  p0 = f32[4,8]{0,1} parameter(0)\n"
               "  ROOT r = f32[8,4]{1,0} transpose(p0), dimensions={1,0}\n"),
     SL_OK, NULL, NULL},
    {"other_ops_accepted",
     HDR ENTRY(P(0, "f32[4]") "  ROOT r = f32[4] custom-call(p0), custom_call_target=\"Foo\"\n"),
     SL_OK, NULL, NULL},
    {"shard_barrier_without_operand",
     HDR ENTRY(P(0, "f32[4]") "  b = f32[4] custom-call(), custom_call_target=\"ShardBarrierTo\"\n"
               "  ROOT r = f32[4] add(p0, b)\n"),
     SL_ERR_INVALID, "b", "a shard barrier takes 1 operand, got 0"},
    {"shard_barrier_tuple_accepted",
     HDR ENTRY(P(0, "f32[4]") "  t = (f32[4]) tuple(p0)\n"
               "  ROOT b = (f32[4]) custom-call(t), custom_call_target=\"ShardBarrierFrom\"\n"),
     SL_OK, NULL, NULL},
    {"add_dependency_shape",
     HDR ENTRY(P(0, "f32[4]") "  a = token[] after-all()\n"
               "  ROOT d = f32[8] add-dependency(p0, a)\n"),
     SL_ERR_INVALID, "d", "declared shape f32[8] but inferred f32[4]"},
    {"scatter_dims_to_operand_dims_range",
     HDR "add (a: f32[], b: f32[]) -> f32[] {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
     "  ROOT s = f32[] add(a, b)\n}\n\n"
     ENTRY(P(0, "f32[8,4]") "  i = s32[2,1] parameter(1)\n  u = f32[2,4] parameter(2)\n"
           "  ROOT sc = f32[8,4] scatter(p0, i, u), to_apply=add, update_window_dims={1}, "
           "inserted_window_dims={0}, scatter_dims_to_operand_dims={-9223372036854775808}, "
           "index_vector_dim=1\n"),
     SL_ERR_INVALID, "sc", "scatter_dims_to_operand_dims entry -9223372036854775808 is out of "
     "range for rank 2"},
    /* found by the mutation run: pred indices reached verify as wrong gathered rows */
    {"gather_pred_indices",
     HDR ENTRY(P(0, "f32[8,4]") "  i = pred[3,1] parameter(1)\n"
               "  ROOT g = f32[3,4] gather(p0, i), offset_dims={1}, collapsed_slice_dims={0}, "
               "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}\n"),
     SL_ERR_INVALID, "g", "indices must be integers, got pred"},
    /* found by the mutation run: an s32[1,8,4] partition-id reached the partitioner */
    {"partition_id_shape",
     HDR ENTRY("  ROOT i = s32[1,8,4] partition-id()\n"),
     SL_ERR_INVALID, "i", "declared shape s32[1,8,4] but inferred u32[]"},
    {"replica_id_shape",
     HDR ENTRY("  ROOT i = u32[2] replica-id()\n"),
     SL_ERR_INVALID, "i", "declared shape u32[2] but inferred u32[]"},
    /* found by the verify fuzzer: the rhs gives 1024 columns, not 1026 */
    {"block_scaled_dot_shape",
     HDR ENTRY(P(0, "f8e4m3fn[128,512]") "  r = f8e4m3fn[1024,512] parameter(1)\n"
               "  ls = f8e8m0fnu[128,16] parameter(2)\n  rs = f8e8m0fnu[1024,16] parameter(3)\n"
               "  ROOT d = f32[128,1026] custom-call(p0, r, ls, rs), "
               "custom_call_target=\"__op$block_scaled_dot\"\n"),
     SL_ERR_INVALID, "d", "declared shape f32[128,1026] but inferred f32[128,1024]"},
    {"topk_accepted",
     HDR ENTRY(P(0, "bf16[64,256]") "  ROOT k = (bf16[64,40], s32[64,40]) custom-call(p0), "
               "custom_call_target=\"TopK\"\n"),
     SL_OK, NULL, NULL},
    {"topk_batch_mismatch",
     HDR ENTRY(P(0, "f32[8,64]") "  ROOT k = (f32[4,2], s32[4,2]) custom-call(p0), "
               "custom_call_target=\"TopK\"\n"),
     SL_ERR_INVALID, "k", "TopK of f32[8,64] must give (values, s32 indices) of the operand's "
     "leading dims and k <= its last dim, declared (f32[4,2], s32[4,2])"},
    {"topk_k_too_big",
     HDR ENTRY(P(0, "f32[8,4]") "  ROOT k = (f32[8,5], s32[8,5]) custom-call(p0), "
               "custom_call_target=\"TopK\"\n"),
     SL_ERR_INVALID, "k", "k <= its last dim, declared (f32[8,5], s32[8,5])"},
    {"topk_indices_type",
     HDR ENTRY(P(0, "f32[8,4]") "  ROOT k = (f32[8,2], f32[8,2]) custom-call(p0), "
               "custom_call_target=\"TopK\"\n"),
     SL_ERR_INVALID, "k", "declared (f32[8,2], f32[8,2])"},
    {"topk_rank_3",
     HDR ENTRY(P(0, "f32[2,8,4]") "  ROOT k = (f32[2,8,2], s32[2,8,2]) custom-call(p0), "
               "custom_call_target=\"TopK\"\n"),
     SL_ERR_INVALID, "k", "TopK takes an operand of rank 1 or 2, got f32[2,8,4]"},
};

/* clang-format on */

/* Line (1-based) of the instruction named `name` ("  name =" or "ROOT name =") in the entry. */
static uint32_t
line_of(const char *text, const char *name)
{
    const char *entry = strstr(text, "ENTRY");
    char pat[64];
    snprintf(pat, sizeof(pat), " %s = ", name);
    const char *hit = strstr(entry ? entry : text, pat);
    if (!hit)
        return 0;
    uint32_t line = 1;
    for (const char *p = text; p < hit; p++)
        line += *p == '\n';
    return line;
}

static void
test_check_cases(void **state)
{
    Fixture *fx = *state;
    int failures = 0;
    for (size_t i = 0; i < SL_COUNTOF(k_cases); i++) {
        SlError err = {0};
        IrModule *m = NULL;
        SlStatus st = hlo_parse(&fx->arena, &fx->names, sl_str(k_cases[i].text), "t.hlo", &m, &err);
        if (st) {
            print_error("%s: does not parse: %u:%u: %s\n", k_cases[i].name, err.loc.line,
                        err.loc.col, err.msg);
            failures++;
            continue;
        }
        st = ir_module_check(m, "t.hlo", &err);
        ir_module_fini(m);
        if (st != k_cases[i].want) {
            print_error("%s: got %s (%s), want %s\n", k_cases[i].name, sl_status_name(st), err.msg,
                        sl_status_name(k_cases[i].want));
            failures++;
            continue;
        }
        if (st == SL_OK)
            continue;
        char who[64];
        snprintf(who, sizeof(who), "instruction %%%s ", k_cases[i].bad_instr);
        uint32_t line = line_of(k_cases[i].text, k_cases[i].bad_instr);
        if (!strstr(err.msg, who) || !strstr(err.msg, "in computation %main") ||
            !strstr(err.msg, k_cases[i].msg) || err.loc.line != line || err.loc.col == 0 ||
            !err.loc.path || strcmp(err.loc.path, "t.hlo") != 0) {
            print_error("%s: at %u:%u (want line %u): %s\n", k_cases[i].name, err.loc.line,
                        err.loc.col, line, err.msg);
            failures++;
        }
    }
    if (failures)
        fail_msg("%d of %zu check cases failed", failures, SL_COUNTOF(k_cases));
}

/* ---- hostile input (issue 17): exact messages and locations ------------------------------ */

/* Every row is one class of input a later stage could not take: what `check` must say, as
 * "LINE:COL: message" (parse errors and check errors alike); want NULL: accepted. */
/* clang-format off */
static const struct {
    const char *name, *text, *want;
} k_hostile[] = {
    {"gather_no_index_vector_dim",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  t = f32[16,8] parameter(0)\n"
     "  i = s32[4,1] parameter(1)\n"
     "  ROOT g = f32[4,8] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
     "start_index_map={0}, slice_sizes={1,8}\n"
     "}\n",
     "6:3: instruction %g (gather) in computation %main: missing index_vector_dim="},
    {"full_to_shard_type",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p = f64[2,4] parameter(0)\n"
     "  ROOT s = f32[1,2] custom-call(p), custom_call_target=\"SPMDFullToShardShape\"\n"
     "}\n",
     "5:3: instruction %s (custom-call) in computation %main: declared shape f32[1,2] must have "
     "the type and rank of operand f64[2,4]"},
    {"sharding_call_shape",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p = f32[2,4] parameter(0)\n"
     "  ROOT s = f32[2,2] custom-call(p), custom_call_target=\"Sharding\"\n"
     "}\n",
     "5:3: instruction %s (custom-call) in computation %main: declared shape f32[2,2] but "
     "inferred f32[2,4]"},
    {"ragged_dot_batch_mismatch",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  a = f32[15,31,64] parameter(0)\n"
     "  b = f32[2,64,7] parameter(1)\n"
     "  c = u32[4] parameter(2)\n"
     "  ROOT d = f32[15,31,7] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={0}, "
     "lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={0}\n"
     "}\n",
     "7:3: instruction %d (ragged-dot) in computation %main: batch dim sizes differ: lhs dim 0 "
     "is 15, rhs dim 0 is 2"},
    {"ragged_dot_groups",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  a = f32[16,8] parameter(0)\n"
     "  b = f32[3,8,4] parameter(1)\n"
     "  c = s32[4] parameter(2)\n"
     "  ROOT d = f32[16,4] ragged-dot(a, b, c), lhs_contracting_dims={1}, "
     "rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}\n"
     "}\n",
     "7:3: instruction %d (ragged-dot) in computation %main: rhs group dim 0 is 3 but "
     "group_sizes has 4 groups"},
    {"ragged_dot_ok",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  a = f32[16,8] parameter(0)\n"
     "  b = f32[4,8,5] parameter(1)\n"
     "  c = s32[4] parameter(2)\n"
     "  d = f32[16,5] ragged-dot(a, b, c), lhs_contracting_dims={1}, "
     "rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}\n"
     "  e = f32[8,5] parameter(3)\n"
     "  ROOT f = f32[4,16,5] ragged-dot(a, e, c), lhs_contracting_dims={1}, "
     "rhs_contracting_dims={0}, lhs_ragged_dims={1}\n"
     "}\n",
     NULL},
    {"token_dims",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  ROOT p0 = token[3,3] parameter(0)\n"
     "}\n",
     "4:13: token has no dimensions: write token[]"},
    {"reverse_no_operand",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] reverse(), dimensions={0}\n"
     "}\n",
     "5:3: instruction %r (reverse) in computation %main: expects 1 operand, got 0"},
    {"bitcast_two",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] bitcast(p0, p0)\n"
     "}\n",
     "5:3: instruction %r (bitcast) in computation %main: expects 1 operand, got 2"},
    {"opt_barrier_none",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = () opt-barrier()\n"
     "}\n",
     "5:3: instruction %r (opt-barrier) in computation %main: expects 1 operand, got 0"},
    {"add_dependency_one",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] add-dependency(p0)\n"
     "}\n",
     "5:3: instruction %r (add-dependency) in computation %main: expects 2 operands, got 1"},
    {"select_and_scatter_two",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] select-and-scatter(p0, p0)\n"
     "}\n",
     "5:3: instruction %r (select-and-scatter) in computation %main: expects 3 operands, got 2"},
    {"triangular_solve_one",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4,4] parameter(0)\n"
     "  ROOT r = f32[4,4] triangular-solve(p0)\n"
     "}\n",
     "5:3: instruction %r (triangular-solve) in computation %main: expects 2 operands, got 1"},
    {"ragged_dot_two",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4,4] parameter(0)\n"
     "  ROOT r = f32[4,4] ragged-dot(p0, p0)\n"
     "}\n",
     "5:3: instruction %r (ragged-dot) in computation %main: expects 3 operands, got 2"},
    {"collective_broadcast_none",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] collective-broadcast()\n"
     "}\n",
     "5:3: instruction %r (collective-broadcast) in computation %main: expects at least 1 operand, got 0"},
    {"reverse_of_scalar_broadcast_shape",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  z = f32[] constant(0)\n"
     "  ROOT r = f32[8,32] reverse(z), dimensions={}\n"
     "}\n",
     "5:3: instruction %r (reverse) in computation %main: declared shape f32[8,32] but inferred f32[]"},
    {"reverse_dim_out_of_range",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p = f32[4,2] parameter(0)\n"
     "  ROOT r = f32[4,2] reverse(p), dimensions={2}\n"
     "}\n",
     "5:3: instruction %r (reverse) in computation %main: dimensions entry 2 is out of range for rank 2"},
    {"sort_shape",
     "HloModule m\n"
     "\n"
     "lt {\n"
     "  a = f32[] parameter(0)\n"
     "  b = f32[] parameter(1)\n"
     "  c = s32[] parameter(2)\n"
     "  d = s32[] parameter(3)\n"
     "  ROOT l = pred[] compare(a, b), direction=LT\n"
     "}\n"
     "\n"
     "ENTRY main {\n"
     "  p = f32[4,2] parameter(0)\n"
     "  i = s32[4,2] parameter(1)\n"
     "  ROOT r = (f32[4,2], s32[4]) sort(p, i), dimensions={0}, to_apply=lt\n"
     "}\n",
     "14:3: instruction %r (sort) in computation %main: declared shape (f32[4,2], s32[4]) but inferred (f32[4,2], s32[4,2])"},
    {"triangular_solve_shape",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  a = f32[4,4] parameter(0)\n"
     "  b = f32[4,3] parameter(1)\n"
     "  ROOT r = f32[4,4] triangular-solve(a, b), left_side=true, lower=true\n"
     "}\n",
     "6:3: instruction %r (triangular-solve) in computation %main: declared shape f32[4,4] but inferred f32[4,3]"},
    {"channel_id_int64_max",
     "HloModule m, num_partitions=2\n"
     "\n"
     "ENTRY main {\n"
     "  p = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] collective-permute(p), channel_id=9223372036854775807, "
     "source_target_pairs={{0,1},{1,0}}\n"
     "}\n",
     "5:3: instruction %r (collective-permute) in computation %main: channel_id=9223372036854775807 is out of range (0 to 2^62 - 1)"},
    {"collective_broadcast_shape",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[10,6] parameter(0)\n"
     "  z = f32[] constant(0)\n"
     "  ROOT r = f32[6] collective-broadcast(p0, z), replica_groups={{0,1}}\n"
     "}\n",
     "6:3: instruction %r (collective-broadcast) in computation %main: declared shape f32[6] but inferred (f32[10,6], f32[])"},
    {"constant_operand",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[] parameter(0)\n"
     "  ROOT r = f32[] constant(p0)\n"
     "}\n",
     "5:3: instruction %r (constant) in computation %main: the literal 'p0' is not a list of scalars"},
    {"reverse_no_dims",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] reverse(p0)\n"
     "}\n",
     "5:3: instruction %r (reverse) in computation %main: missing dimensions="},
    {"elems_overflow",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4294967296,4294967296] parameter(0)\n"
     "  ROOT r = f32[4294967296,4294967296] negate(p0)\n"
     "}\n",
     "4:3: instruction %p0 (parameter) in computation %main: shape f32[4294967296,4294967296] holds more than 2^63-1 elements or bytes"},
    {"bytes_overflow",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  ROOT p0 = f32[2305843009213693952] parameter(0)\n"
     "}\n",
     "4:3: instruction %p0 (parameter) in computation %main: shape f32[2305843009213693952] holds more than 2^63-1 elements or bytes"},
    {"tuple_overflow",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  ROOT p0 = (s8[4611686018427387904], s8[4611686018427387904]) parameter(0)\n"
     "}\n",
     "4:3: instruction %p0 (parameter) in computation %main: shape (s8[4611686018427387904], s8[4611686018427387904]) holds more than 2^63-1 elements or bytes"},
    {"literal_short",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  ROOT c = f32[3] constant({1, 2})\n"
     "}\n",
     "4:3: instruction %c (constant) in computation %main: the literal has 2 values, the shape 3 elements"},
    {"literal_long",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  ROOT c = f32[2,2] constant({{1, 2}, {3, 4}, {5, 6}})\n"
     "}\n",
     "4:3: instruction %c (constant) in computation %main: the literal has more than 4 values, the shape 4 elements"},
    {"literal_tuple",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  ROOT c = (f32[2], s32[]) constant(({1, 2}, 3, 4))\n"
     "}\n",
     "4:3: instruction %c (constant) in computation %main: the tuple literal has more than 2 elements"},
    {"literal_ok",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  c = (f32[2], pred[]) constant(({1.5, -inf}, true))\n"
     "  d = c64[2] constant({(1, 2), (3, 4)})\n"
     "  ROOT e = f32[100] constant({...})\n"
     "}\n",
     NULL},
    {"groups_dup",
     "HloModule m, num_partitions=4\n"
     "\n"
     "add {\n"
     "  x = f32[] parameter(0)\n"
     "  y = f32[] parameter(1)\n"
     "  ROOT s = f32[] add(x, y)\n"
     "}\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] all-reduce(p0), channel_id=1, replica_groups={{0,1},{1,2}}, use_global_device_ids=true, to_apply=add\n"
     "}\n",
     "11:3: instruction %r (all-reduce) in computation %main: replica_groups names device 1 twice"},
    {"groups_range",
     "HloModule m, num_partitions=4\n"
     "\n"
     "add {\n"
     "  x = f32[] parameter(0)\n"
     "  y = f32[] parameter(1)\n"
     "  ROOT s = f32[] add(x, y)\n"
     "}\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] all-reduce(p0), channel_id=1, replica_groups={{0,4}}, use_global_device_ids=true, to_apply=add\n"
     "}\n",
     "11:3: instruction %r (all-reduce) in computation %main: replica_groups names device 4, outside 0..3"},
    {"pairs_dup_target",
     "HloModule m, num_partitions=2\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] collective-permute(p0), channel_id=1, source_target_pairs={{0,0},{1,0}}\n"
     "}\n",
     "5:3: instruction %r (collective-permute) in computation %main: device 0 is a target twice in source_target_pairs"},
    {"header_zero",
     "HloModule m, num_partitions=0\n"
     "\n"
     "ENTRY main {\n"
     "  ROOT p0 = f32[4] parameter(0)\n"
     "}\n",
     "1:29: num_partitions=0 is not a device count in 1..65536"},
    {"header_huge",
     "HloModule m, replica_count=2, num_partitions=9223372036854775807\n"
     "\n"
     "ENTRY main {\n"
     "  ROOT p0 = f32[4] parameter(0)\n"
     "}\n",
     "1:46: num_partitions=9223372036854775807 is not a device count in 1..65536"},
    {"comment_open",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0) /* never\n"
     " closed\n"
     "}\n",
     "4:28: expected an instruction name, got unterminated /* comment '/*'"},
    {"sig_result",
     "HloModule m\n"
     "\n"
     "ENTRY main (a: f32[4]) -> f32[8] {\n"
     "  ROOT a = f32[4] parameter(0)\n"
     "}\n",
     "3:27: signature gives the result f32[8] but the body has f32[4]"},
    {"sig_count",
     "HloModule m\n"
     "\n"
     "ENTRY main (a: f32[4], b: f32[4]) -> f32[4] {\n"
     "  ROOT a = f32[4] parameter(0)\n"
     "}\n",
     "3:13: signature lists 2 parameters but %main has 1"},
    {"iota_groups",
     "HloModule m\n"
     "\n"
     "add {\n"
     "  x = f32[] parameter(0)\n"
     "  y = f32[] parameter(1)\n"
     "  ROOT s = f32[] add(x, y)\n"
     "}\n"
     "\n"
     "ENTRY main {\n"
     "  p0 = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] all-reduce(p0), replica_groups=[1,65537]<=[65537], to_apply=add\n"
     "}\n",
     "11:50: iota of 65537 ids is more than 65536 devices (the limit)"},
    {"param_number",
     "HloModule m\n"
     "\n"
     "ENTRY main {\n"
     "  ROOT p = f32[] parameter(1048576)\n"
     "}\n",
     "4:28: parameter number 1048576 is not below the limit of 1048576"},
};
/* clang-format on */

static void
test_check_hostile(void **state)
{
    Fixture *fx = *state;
    int failures = 0;
    for (size_t i = 0; i < SL_COUNTOF(k_hostile); i++) {
        SlError err = {0};
        IrModule *m = NULL;
        SlStatus st = hlo_parse(&fx->arena, &fx->names, sl_str(k_hostile[i].text), "t.hlo", &m, &err);
        if (st == SL_OK) {
            st = ir_module_check(m, "t.hlo", &err);
            ir_module_fini(m);
        }
        char got[SL_ERROR_MSG_BYTES + 32] = "";
        if (st)
            snprintf(got, sizeof(got), "%u:%u: %s", err.loc.line, err.loc.col, err.msg);
        const char *want = k_hostile[i].want;
        bool ok = want ? st != SL_OK && (st == SL_ERR_PARSE || st == SL_ERR_INVALID) &&
                             strcmp(got, want) == 0 && err.loc.path &&
                             strcmp(err.loc.path, "t.hlo") == 0
                       : st == SL_OK;
        if (!ok) {
            print_error("%s: got '%s' (%s), want '%s'\n", k_hostile[i].name, got,
                        sl_status_name(st), want ? want : "ok");
            failures++;
        }
    }
    if (failures)
        fail_msg("%d of %zu hostile cases failed", failures, SL_COUNTOF(k_hostile));
}

/* A collective's group size depends on the device count, which -n may give only after
 * parsing: ir_module_check_for checks with it (reduce-scatter over 4 replicas x 8 partitions
 * cannot split 8 rows). */
static void
test_check_for_device_count(void **state)
{
    Fixture *fx = *state;
    static const char text[] =
        "HloModule m\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
        "  ROOT s = f32[] add(x, y)\n}\n\nENTRY main {\n  p = f32[8,16] parameter(0)\n"
        "  ROOT rs = f32[2,16] reduce-scatter(p), channel_id=3, replica_groups=[1,4]<=[4], "
        "dimensions={0}, to_apply=add\n}\n";
    IrModule *m = NULL;
    SlError err = {0};
    assert_int_equal(hlo_parse(&fx->arena, &fx->names, sl_str(text), "t.hlo", &m, &err), SL_OK);
    assert_int_equal(ir_module_check(m, "t.hlo", &err), SL_OK);
    assert_int_equal(ir_module_check_for(m, "t.hlo", 1, &err), SL_OK);
    assert_int_equal(ir_module_check_for(m, "t.hlo", 8, &err), SL_ERR_INVALID);
    assert_int_equal(err.loc.line, 11);
    assert_int_equal(err.loc.col, 3);
    assert_string_equal(err.msg, "instruction %rs (reduce-scatter) in computation %main: dim 0 "
                                 "of size 8 is not divisible by the group size 32");
    ir_module_fini(m);
}

/* ---- modules built in memory: what text cannot express ------------------------------------ */

static IrInstr *
add_instr(IrModule *m, IrComputation *c, const char *name, IrOp op, const IrShape *s, IrInstr **ops,
          uint32_t n)
{
    IrInstr *i = ir_instr_new(m, op, s, ops, n);
    assert_non_null(i);
    i->name = sl_intern_cstr(m->names, name);
    char last = name[strlen(name) - 1];
    if (op == IR_OP_PARAMETER && last >= '0' && last <= '9') /* numbered before it is added */
        i->parameter_number = last - '0';
    if (c)
        assert_int_equal(ir_computation_add_instr(c, m, i), SL_OK);
    return i;
}

/* A module "m" whose entry computation "main" is added and still empty. */
static IrModule *
new_module(Fixture *fx, IrComputation **entry)
{
    IrModule *m = ir_module_new(&fx->arena, &fx->names, sl_intern_cstr(&fx->names, "m"));
    IrComputation *c = ir_computation_new(m, sl_intern_cstr(&fx->names, "main"));
    assert_non_null(c);
    c->is_entry = true;
    assert_int_equal(ir_module_add_computation(m, c), SL_OK);
    *entry = c;
    return m;
}

/* ENTRY main { p0 = f32[8,32] parameter(0); p1 = f32[32,16] parameter(1); d = dot } with the
 * dot's declared shape `dot_dims`. */
static IrModule *
build_dot(Fixture *fx, const int64_t *dot_dims, bool set_root)
{
    IrComputation *c;
    IrModule *m = new_module(fx, &c);
    const int64_t a[] = {8, 32}, b[] = {32, 16};
    IrShape sa = ir_shape_make(&fx->arena, IR_DT_F32, a, 2);
    IrShape sb = ir_shape_make(&fx->arena, IR_DT_F32, b, 2);
    IrShape sd = ir_shape_make(&fx->arena, IR_DT_F32, dot_dims, 2);
    IrInstr *ops[2];
    ops[0] = add_instr(m, c, "p0", IR_OP_PARAMETER, &sa, NULL, 0);
    ops[1] = add_instr(m, c, "p1", IR_OP_PARAMETER, &sb, NULL, 0);
    IrInstr *d = add_instr(m, c, "d", IR_OP_DOT, &sd, ops, 2);
    static const int64_t one = 1, zero = 0;
    IrAttr *lc = ir_instr_add_attr(m, d, IR_ATTR_LHS_CONTRACTING_DIMS);
    IrAttr *rc = ir_instr_add_attr(m, d, IR_ATTR_RHS_CONTRACTING_DIMS);
    assert_non_null(lc);
    assert_non_null(rc);
    lc->u.ints.n = 1;
    lc->u.ints.v = (int64_t *)&one;
    rc->u.ints.n = 1;
    rc->u.ints.v = (int64_t *)&zero;
    if (set_root)
        c->root = d;
    return m;
}

static void
test_check_built_dot(void **state)
{
    Fixture *fx = *state;
    const int64_t good[] = {8, 16}, bad[] = {8, 32};
    SlError err = {0};
    IrModule *m = build_dot(fx, good, true);
    assert_int_equal(ir_module_check(m, "mem", &err), SL_OK);
    ir_module_fini(m);
    m = build_dot(fx, bad, true);
    assert_int_equal(ir_module_check(m, "mem", &err), SL_ERR_INVALID);
    assert_non_null(strstr(err.msg, "instruction %d (dot) in computation %main"));
    assert_non_null(strstr(err.msg, "declared shape f32[8,32] but inferred f32[8,16]"));
    assert_int_equal(err.loc.line, 0); /* built in memory: no position */
    ir_module_fini(m);
}

static void
test_check_no_root(void **state)
{
    Fixture *fx = *state;
    const int64_t good[] = {8, 16};
    SlError err = {0};
    IrModule *m = build_dot(fx, good, false);
    assert_int_equal(ir_module_check(m, "mem", &err), SL_ERR_INVALID);
    assert_string_equal(err.msg, "computation %main has no root instruction");
    ir_module_fini(m);
}

static void
test_check_operand_defined_later(void **state)
{
    Fixture *fx = *state;
    IrComputation *c;
    IrModule *m = new_module(fx, &c);
    const int64_t d4[] = {4};
    IrShape s = ir_shape_make(&fx->arena, IR_DT_F32, d4, 1);
    IrInstr *p = add_instr(m, NULL, "p", IR_OP_PARAMETER, &s, NULL, 0);
    IrInstr *neg = add_instr(m, c, "neg", IR_OP_NEGATE, &s, &p, 1);
    assert_int_equal(ir_computation_add_instr(c, m, p), SL_OK); /* listed after its user */
    c->root = neg;
    SlError err = {0};
    assert_int_equal(ir_module_check(m, "mem", &err), SL_ERR_INVALID);
    assert_non_null(strstr(err.msg, "operand 0 (%p) is not defined earlier in %main"));
    ir_module_fini(m);
}

static void
test_check_callee_after_caller(void **state)
{
    Fixture *fx = *state;
    IrComputation *main_c;
    IrModule *m = new_module(fx, &main_c);
    IrComputation *callee = ir_computation_new(m, sl_intern_cstr(&fx->names, "f"));
    assert_int_equal(ir_module_add_computation(m, callee), SL_OK);
    IrShape s = ir_shape_make(&fx->arena, IR_DT_F32, NULL, 0);
    IrInstr *fp = add_instr(m, callee, "x", IR_OP_PARAMETER, &s, NULL, 0);
    callee->root = fp;
    IrInstr *p = add_instr(m, main_c, "p", IR_OP_PARAMETER, &s, NULL, 0);
    IrInstr *call = add_instr(m, main_c, "c", IR_OP_CALL, &s, &p, 1);
    IrAttr *a = ir_instr_add_attr(m, call, IR_ATTR_TO_APPLY);
    assert_non_null(a);
    a->u.comp = callee;
    main_c->root = call;
    SlError err = {0};
    assert_int_equal(ir_module_check(m, "mem", &err), SL_ERR_INVALID);
    assert_non_null(strstr(err.msg, "called computation %f must be defined before %main"));
    ir_module_fini(m);
}

/* Dead code: chains of unused values go (a dead all-reduce, the reducer only it called, the
 * constant feeding a dead add); side effects, parameters and roots stay, and so does a dead
 * while whose body writes an outfeed. */
static void
test_remove_dead(void **state)
{
    Fixture *fx = *state;
    static const char text[] =
        "HloModule dce, num_partitions=2\n"
        "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
        "  ROOT s = f32[] add(a, b)\n}\n"
        "cond {\n  cp = (s32[], token[]) parameter(0)\n  ci = s32[] get-tuple-element(cp), index=0\n"
        "  k = s32[] constant(3)\n  ROOT lt = pred[] compare(ci, k), direction=LT\n}\n"
        "body {\n  bp = (s32[], token[]) parameter(0)\n  bi = s32[] get-tuple-element(bp), index=0\n"
        "  bt = token[] get-tuple-element(bp), index=1\n"
        "  of = token[] outfeed(bi, bt), outfeed_shape=s32[]\n"
        "  ROOT bn = (s32[], token[]) tuple(bi, of)\n}\n"
        "ENTRY main {\n  p = f32[4] parameter(0)\n  unused = f32[4] parameter(1)\n"
        "  c = f32[4] constant({1, 2, 3, 4})\n  dead_add = f32[4] add(p, c)\n"
        "  dead_ar = f32[4] all-reduce(dead_add), channel_id=1, replica_groups={{0,1}}, "
        "use_global_device_ids=true, to_apply=sum\n"
        "  r = f32[4] rng(p, p), distribution=rng_uniform\n"
        "  z = s32[] constant(0)\n  t = token[] after-all()\n"
        "  init = (s32[], token[]) tuple(z, t)\n"
        "  w = (s32[], token[]) while(init), condition=cond, body=body\n"
        "  ROOT out = f32[4] negate(p)\n}\n";
    IrModule *m = NULL;
    SlError err = {0};
    assert_int_equal(hlo_parse(&fx->arena, &fx->names, sl_str(text), "t.hlo", &m, &err), SL_OK);
    SlVec removed = {0};
    assert_int_equal(ir_module_remove_dead(m, &fx->arena, &removed), 3 + 3);
    assert_int_equal(removed.len, 6);
    char names[256] = "";
    for (size_t k = 0; k < removed.len; k++) {
        strcat(names, sl_sym_cstr(SL_VEC_AT(&removed, IrInstr *, k)->name));
        strcat(names, " ");
    }
    /* entry users before operands, then the uncalled reducer's instructions */
    assert_string_equal(names, "dead_ar dead_add c a b s ");
    sl_vec_fini(&removed);
    assert_null(ir_module_find_computation(m, sl_intern_cstr(&fx->names, "sum")));
    assert_int_equal(m->n_comps, 3);
    const IrComputation *e = m->entry;
    char kept[256] = "";
    for (uint32_t k = 0; k < e->n_instrs; k++) {
        strcat(kept, sl_sym_cstr(e->instrs[k]->name));
        strcat(kept, " ");
    }
    assert_string_equal(kept, "p unused r z t init w out ");
    /* what is left still checks, and a second pass finds nothing */
    assert_int_equal(ir_module_check(m, "t.hlo", &err), SL_OK);
    assert_int_equal(ir_module_remove_dead(m, &fx->arena, NULL), 0);
    ir_module_fini(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_check_cases, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_check_hostile, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_check_for_device_count, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_check_built_dot, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_check_no_root, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_check_operand_defined_later, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_check_callee_after_caller, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_remove_dead, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
