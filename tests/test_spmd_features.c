/* test_spmd_features.c - partitioner features behind an operand form or an option: the
 * array-shaped scan (one output, no carries: checked, then run replicated) and the replicated
 * dynamic-slice of one row of a sharded operand by collective-broadcast (the
 * enable_dynamic_slice_collective_broadcast option). Each module is partitioned end to end;
 * asserts the shapes, collectives and replica groups, then runs both modules in the simulator
 * (sim_verify) and expects the same numbers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "hlo/hlo.h"
#include "sim/sim.h"
#include "spmd/spmd.h"
#include "trace/trace.h"

#include "spmd_fixture.h"

/* Runs the source and the partitioned module of `r` on n simulated devices (three seeded
 * input sets) and fails unless every output agrees. */
static void
want_same_numbers(const SpmdRun *r, int64_t n)
{
    SimVerifyOptions opt;
    SimVerifyReport rep;
    SlError err = {0};
    sim_verify_options_init(&opt);
    opt.trials = 3;
    if (sim_verify(r->src, r->dst, n, &opt, &rep, &err) != SL_OK)
        fail_msg("verify failed: %s", err.msg);
    if (!rep.ok)
        fail_msg("verify: %s\n%s", rep.detail, r->text.data);
    assert_int_equal(rep.trials_run, 3);
}

/* ---- scan with an array-shaped result -------------------------------------------------- */

#define CUMEXP_BODY(root_shape, root)                                                              \
    "cumexp {\n  v = f32[5] parameter(0)\n  e = f32[5] exponential(v)\n"                           \
    "  ROOT r = " root_shape " " root "\n}\n\n"

/* The checker reads the scan's result and the body root as "tuple elements or itself": one
 * output may be declared bare or as a 1-tuple, whichever form the body returns. */
static void
test_scan_array_result_check(void **state)
{
    (void)state;
    static const struct {
        const char *name, *text;
        SlStatus want;
        const char *msg;
    } k_cases[] = {
        {"bare_result_tuple_root",
         "HloModule m\n\n" CUMEXP_BODY("(f32[5])", "tuple(e)") "ENTRY e {\n"
         "  a = f32[9,5] parameter(0)\n"
         "  ROOT s = f32[9,5] scan(a), dimensions={0}, num_carries=0, to_apply=cumexp\n}\n",
         SL_OK, ""},
        {"tuple_result_bare_root",
         "HloModule m\n\n" CUMEXP_BODY("f32[5]", "copy(e)") "ENTRY e {\n"
         "  a = f32[9,5] parameter(0)\n"
         "  ROOT s = (f32[9,5]) scan(a), dimensions={0}, num_carries=0, to_apply=cumexp\n}\n",
         SL_OK, ""},
        {"bare_result_bare_root",
         "HloModule m\n\n" CUMEXP_BODY("f32[5]", "copy(e)") "ENTRY e {\n"
         "  a = f32[5,9] parameter(0)\n"
         "  ROOT s = f32[5,9] scan(a), dimensions={1}, num_carries=0, to_apply=cumexp\n}\n",
         SL_OK, ""},
        {"bare_result_wrong_length",
         "HloModule m\n\n" CUMEXP_BODY("(f32[5])", "tuple(e)") "ENTRY e {\n"
         "  a = f32[9,5] parameter(0)\n"
         "  ROOT s = f32[8,5] scan(a), dimensions={0}, num_carries=0, to_apply=cumexp\n}\n",
         SL_ERR_INVALID, "declared shape f32[8,5] but inferred f32[9,5]"},
        {"bare_result_two_values",
         "HloModule m\n\n" CUMEXP_BODY("(f32[5], f32[5])", "tuple(e, v)") "ENTRY e {\n"
         "  a = f32[9,5] parameter(0)\n"
         "  ROOT s = f32[9,5] scan(a), dimensions={0}, num_carries=0, to_apply=cumexp\n}\n",
         SL_ERR_INVALID, "inferred (f32[9,5], f32[9,5])"},
    };
    for (size_t i = 0; i < sizeof(k_cases) / sizeof(k_cases[0]); i++) {
        SlArena a;
        SlInterner names;
        IrModule *m = NULL;
        SlError err = {0};
        sl_arena_init(&a);
        sl_interner_init(&names, &a);
        SlStatus st = hlo_parse(&a, &names, sl_str(k_cases[i].text), "t.hlo", &m, &err);
        if (st == SL_OK)
            st = ir_module_check(m, "t.hlo", &err);
        if (st != k_cases[i].want || !strstr(err.msg, k_cases[i].msg))
            fail_msg("%s: got %s '%s'", k_cases[i].name, sl_status_name(st), err.msg);
        ir_module_fini(m);
        sl_interner_fini(&names);
        sl_arena_fini(&a);
    }
}

/* Sharded on the scan dimension, but array-shaped: XLA's HandleScan leaves it to
 * DefaultAction, so the operand is all-gathered and the scan runs whole on every device. */
static void
test_scan_array_result_replicated(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
           "HloModule m, num_partitions=4\n\n" CUMEXP_BODY("(f32[5])", "tuple(e)")
           "ENTRY e {\n"
           "  a = f32[12,5] parameter(0), sharding={devices=[4,1]<=[4]}\n"
           "  ROOT s = f32[12,5] scan(a), dimensions={0}, num_carries=0, is_associative=false,"
           " to_apply=cumexp, sharding={devices=[4,1]<=[4]}\n}\n",
           4, 256);
    fx_want(&r, "f32[3,5] parameter(0)");
    fx_want(&r, "f32[12,5] all-gather(%a.1)");
    fx_want(&r, "replica_groups=[1,4]<=[4], dimensions={0}");
    fx_want(&r, "f32[12,5] scan(%all-gather), dimensions={0}, num_carries=0");
    fx_want(&r, "f32[3,5] dynamic-slice(%s.1,");
    assert_int_equal(fx_count(r.text.data, "all-gather("), 1);
    want_same_numbers(&r, 4);
    fx_done(&r);
}

/* ---- clean-up CSE keeps values of different shardings apart ---------------------------- */

/* Broadcasts of one scalar with the same local shape f32[8,4]: a and d (both [1,4]) merge, b
 * ([4,1]) and e (replicated) stay, as in XLA, whose CSE runs while each instruction still
 * carries its value's sharding. */
static void
test_cse_keeps_differently_sharded_values(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
           "HloModule m, num_partitions=4\n\nENTRY main {\n"
           "  c = f32[] parameter(0), sharding={replicated}\n"
           "  a = f32[8,16] broadcast(c), dimensions={}, sharding={devices=[1,4]<=[4]}\n"
           "  b = f32[32,4] broadcast(c), dimensions={}, sharding={devices=[4,1]<=[4]}\n"
           "  d = f32[8,16] broadcast(c), dimensions={}, sharding={devices=[1,4]<=[4]}\n"
           "  e = f32[8,4] broadcast(c), dimensions={}, sharding={replicated}\n"
           "  ROOT t = (f32[8,16], f32[32,4], f32[8,16], f32[8,4]) tuple(a, b, d, e),"
           " sharding={{devices=[1,4]<=[4]}, {devices=[4,1]<=[4]}, {devices=[1,4]<=[4]},"
           " {replicated}}\n}\n",
           4, 256);
    assert_int_equal(fx_count(r.text.data, " broadcast("), 3);
    fx_want(&r, "%a.1 = f32[8,4] broadcast(%c.1), dimensions={}");
    fx_want(&r, "%b.1 = f32[8,4] broadcast(%c.1), dimensions={}");
    fx_want(&r, "%e.1 = f32[8,4] broadcast(%c.1), dimensions={}");
    fx_want(&r, "tuple(%a.1, %b.1, %a.1, %e.1)");
    fx_done(&r);
}

/* A table lookup whose entries are all equal is still a lookup, as XLA's TableLookup (never
 * folded): a TopK split along its batch dim over 4 groups of one device reads the in-group id
 * (0 everywhere) from a u32[4] table to offset the indices. */
static void
test_table_lookup_of_equal_entries(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
           "HloModule m, num_partitions=4\n\nENTRY main {\n"
           "  p = f32[4,64] parameter(0), sharding={devices=[4,1]<=[4]}\n"
           "  k = (f32[4,2], s32[4,2]) custom-call(p), custom_call_target=\"TopK\","
           " sharding={{devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}}\n"
           "  v = f32[4,2] get-tuple-element(k), index=0, sharding={devices=[4,1]<=[4]}\n"
           "  i = s32[4,2] get-tuple-element(k), index=1, sharding={devices=[4,1]<=[4]}\n"
           "  ROOT t = (f32[4,2], s32[4,2]) tuple(v, i),"
           " sharding={{devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}}\n}\n",
           4, 256);
    fx_want(&r, "u32[4] constant({0, 0, 0, 0})");
    fx_want(&r, "u32[1] dynamic-slice(%constant.1, %partition-id), dynamic_slice_sizes={1}");
    fx_want(&r, "s32[] convert(%reshape)");
    assert_int_equal(fx_count(r.text.data, " dynamic-slice("), 1);
    assert_int_equal(fx_count(r.text.data, " reshape("), 1);
    assert_int_equal(fx_count(r.text.data, " constant("), 2);
    fx_want_none(&r, "u32[] constant(0)");
    fx_done(&r);
}

/* ---- dynamic-slice by collective-broadcast --------------------------------------------- */

static const char *const k_ds_on[] = {"enable_dynamic_slice_collective_broadcast=true"};

/* Rows of t are spread over four devices in the order 2,0,3,1: the owner of row block k is
 * the first id of branch k's single replica group, the others follow in tile order. */
#define ROW_OF(tshard, index)                                                                      \
    "HloModule m, num_partitions=4\n\nENTRY e {\n"                                                 \
    "  t = f32[3,12,2] parameter(0), sharding=" tshard "\n"                                        \
    "  " index "\n  z = s32[] constant(0)\n"                                                       \
    "  ROOT r = f32[3,1,2] dynamic-slice(t, z, i, z), dynamic_slice_sizes={3,1,2},"               \
    " sharding={replicated}\n}\n"
#define BY_ROWS "{devices=[1,4,1]2,0,3,1}"
#define INDEX_PARAM "i = s32[] parameter(1), sharding={replicated}"

static void
test_ds_broadcast(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r, ROW_OF(BY_ROWS, INDEX_PARAM), 4, 256, k_ds_on, 1);
    fx_want(&r, "f32[3,3,2] parameter(0)");
    fx_want(&r, "s32[] clamp(%constant, %i.1, %constant.1)"); /* [0, 11] */
    fx_want(&r, "%constant.1 = s32[] constant(11)");
    fx_want(&r, "%constant.2 = s32[] constant(3)"); /* rows per block */
    fx_want(&r, "%divide = s32[] divide(%clamp, %constant.2)");
    fx_want(&r, "f32[3,1,2] dynamic-slice(%t.1, %constant, %subtract, %constant),"
                " dynamic_slice_sizes={3,1,2}");
    fx_want(&r, "ROOT %conditional = f32[3,1,2] conditional(%divide, %dynamic-slice,"
                " %dynamic-slice, %dynamic-slice, %dynamic-slice)");
    assert_int_equal(fx_count(r.text.data, "collective-broadcast("), 4);
    fx_want(&r, "collective-broadcast(%operand), channel_id=1, replica_groups={{2,0,3,1}}");
    fx_want(&r, "collective-broadcast(%operand.1), channel_id=2, replica_groups={{0,2,3,1}}");
    fx_want(&r, "collective-broadcast(%operand.2), channel_id=3, replica_groups={{3,2,0,1}}");
    fx_want(&r, "collective-broadcast(%operand.3), channel_id=4, replica_groups={{1,2,0,3}}");
    fx_want_none(&r, "all-gather(");
    fx_want_trace(&r, "dynamic-slice collective-broadcast");
    want_same_numbers(&r, 4);
    fx_done(&r);
}

/* Indices outside [0, 11] are clamped as dynamic-slice clamps them: the last and first row. */
static void
test_ds_broadcast_clamped(void **state)
{
    (void)state;
    static const char *const k_index[] = {"i = s32[] constant(17)", "i = s32[] constant(-4)",
                                          "i = s32[] constant(7)"};
    for (size_t k = 0; k < sizeof(k_index) / sizeof(k_index[0]); k++) {
        char text[1024];
        snprintf(text, sizeof(text), ROW_OF(BY_ROWS, "%s"), k_index[k]);
        SpmdRun r;
        fx_run_with(&r, text, 4, 256, k_ds_on, 1);
        assert_int_equal(fx_count(r.text.data, "collective-broadcast("), 4);
        want_same_numbers(&r, 4);
        fx_done(&r);
    }
}

/* Where the option does not apply, the dynamic-slice is partitioned as before (all-gather of
 * the operand, then a local dynamic-slice): option off, limit below the partition count,
 * replicated tiles, two sliced dims, a row count the devices do not divide. */
static void
test_ds_broadcast_not_applied(void **state)
{
    (void)state;
    static const char *const k_limit[] = {"enable_dynamic_slice_collective_broadcast=true",
                                          "max_dynamic_slice_collective_broadcast_partitions=2"};
    static const struct {
        const char *name, *text;
        const char *const *sets;
        size_t n_sets;
    } k_cases[] = {
        {"option_off", ROW_OF(BY_ROWS, INDEX_PARAM), NULL, 0},
        {"over_limit", ROW_OF(BY_ROWS, INDEX_PARAM), k_limit, 2},
        {"partially_replicated",
         ROW_OF("{devices=[1,2,1,2]<=[4] last_tile_dim_replicate}", INDEX_PARAM), k_ds_on, 1},
        {"two_dims_sharded", ROW_OF("{devices=[2,2,1]<=[4]}", INDEX_PARAM), k_ds_on, 1},
        {"two_sliced_dims",
         "HloModule m, num_partitions=4\n\nENTRY e {\n"
         "  t = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
         "  i = s32[] parameter(1), sharding={replicated}\n"
         "  ROOT r = f32[1,3] dynamic-slice(t, i, i), dynamic_slice_sizes={1,3},"
         " sharding={replicated}\n}\n",
         k_ds_on, 1},
        {"uneven_rows",
         "HloModule m, num_partitions=4\n\nENTRY e {\n"
         "  t = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
         "  i = s32[] parameter(1), sharding={replicated}\n  z = s32[] constant(0)\n"
         "  ROOT r = f32[1,6] dynamic-slice(t, i, z), dynamic_slice_sizes={1,6},"
         " sharding={replicated}\n}\n",
         k_ds_on, 1},
    };
    for (size_t k = 0; k < sizeof(k_cases) / sizeof(k_cases[0]); k++) {
        SpmdRun r;
        fx_run_with(&r, k_cases[k].text, 4, 256, k_cases[k].sets, k_cases[k].n_sets);
        if (fx_count(r.text.data, "collective-broadcast(") != 0 ||
            fx_count(r.text.data, "all-gather(") == 0)
            fail_msg("%s:\n%s", k_cases[k].name, r.text.data);
        want_same_numbers(&r, 4);
        fx_done(&r);
    }
}

/* Both options are real fields now: listed with their values, not as unused. */
static void
test_ds_broadcast_options(void **state)
{
    (void)state;
    SpmdOptions o;
    SlError err = {0};
    SlBuf b;
    spmd_options_init(&o);
    assert_false(o.enable_dynamic_slice_collective_broadcast);
    assert_int_equal(o.max_dynamic_slice_collective_broadcast_partitions, 32);
    assert_int_equal(spmd_options_set(&o, sl_str("max_dynamic_slice_collective_broadcast_"
                                                 "partitions=8"),
                                      &err),
                     SL_OK);
    assert_int_equal(spmd_options_set(&o, sl_str("enable_dynamic_slice_collective_broadcast=1"),
                                      &err),
                     SL_OK);
    assert_int_equal(spmd_options_set(&o, sl_str("enable_dynamic_slice_collective_broadcast=2"),
                                      &err),
                     SL_ERR_INVALID);
    sl_buf_init(&b);
    spmd_options_print(&o, &b);
    sl_buf_putc(&b, '\0');
    assert_non_null(strstr(b.data, "\nenable_dynamic_slice_collective_broadcast=true\n"));
    assert_non_null(strstr(b.data, "\nmax_dynamic_slice_collective_broadcast_partitions=8\n"));
    sl_buf_fini(&b);
}

/* ---- unreduced results keep their partial values -------------------------------------- */

/* A reduce over the sharded dim whose result is {unreduced}, then one with an unreduced
 * subgroup: each device keeps its partial sum (no all-reduce), and the simulator, summing the
 * partials over the unreduced devices, agrees with the original. */
static void
test_unreduced_reduce_keeps_partials(void **state)
{
    (void)state;
    static const struct {
        const char *name, *in_sharding, *out_sharding, *local;
    } k_cases[] = {
        {"all_unreduced", "{devices=[4,1]<=[4]}", "{unreduced}", "f32[6] reduce("},
        {"unreduced_subgroup", "{devices=[2,2]<=[4]}",
         "{devices=[2,2]<=[2,2]T(1,0) last_tile_dims={unreduced}}", "f32[3] reduce("},
    };
    for (size_t i = 0; i < sizeof(k_cases) / sizeof(k_cases[0]); i++) {
        char text[1024];
        snprintf(text, sizeof(text),
                 "HloModule m, num_partitions=4\n\n"
                 "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                 "  ROOT s = f32[] add(a, b)\n}\n\n"
                 "ENTRY e {\n  p = f32[8,6] parameter(0), sharding=%s\n"
                 "  z = f32[] constant(0)\n"
                 "  ROOT r = f32[6] reduce(p, z), dimensions={0}, to_apply=sum, sharding=%s\n}\n",
                 k_cases[i].in_sharding, k_cases[i].out_sharding);
        SpmdRun r;
        fx_run(&r, text, 4, 256);
        if (fx_count(r.text.data, "all-reduce(") != 0 || !strstr(r.text.data, k_cases[i].local))
            fail_msg("%s:\n%s", k_cases[i].name, r.text.data);
        want_same_numbers(&r, 4);
        fx_done(&r);
    }
}

/* ---- slice of a pad: one merged pad ------------------------------------------------------ */

/* slice(copy(pad(x))) shifting a sharded vector right by one is, as XLA's preprocessing merges
 * it, a single pad of x by (1, -1): one halo exchange (a collective-permute), no all-gather,
 * and the simulator agrees. With the pad used twice the merge does not apply. */
static void
test_pad_then_slice_merged(void **state)
{
    (void)state;
    static const char *const k_text[] = {
        "HloModule m, num_partitions=4\n\nENTRY e {\n"
        "  x = f32[16] parameter(0), sharding={devices=[4]<=[4]}\n"
        "  z = f32[] constant(0)\n"
        "  p = f32[18] pad(x, z), padding=1_1, sharding={devices=[4]<=[4]}\n"
        "  c = f32[18] copy(p), sharding={devices=[4]<=[4]}\n"
        "  ROOT s = f32[16] slice(c), slice={[0:16]}, sharding={devices=[4]<=[4]}\n}\n",
        "HloModule m, num_partitions=4\n\nENTRY e {\n"
        "  x = f32[16] parameter(0), sharding={devices=[4]<=[4]}\n"
        "  z = f32[] constant(0)\n"
        "  p = f32[18] pad(x, z), padding=1_1, sharding={devices=[4]<=[4]}\n"
        "  s = f32[16] slice(p), slice={[0:16]}, sharding={devices=[4]<=[4]}\n"
        "  t = f32[16] slice(p), slice={[2:18]}, sharding={devices=[4]<=[4]}\n"
        "  ROOT a = f32[16] add(s, t), sharding={devices=[4]<=[4]}\n}\n",
    };
    for (size_t i = 0; i < 2; i++) {
        SpmdRun r;
        fx_run(&r, k_text[i], 4, 256);
        bool merged = i == 0;
        if (merged && (fx_count(r.text.data, "collective-permute(") != 1 ||
                       fx_count(r.text.data, "all-gather(") != 0 ||
                       fx_count(r.text.data, "f32[4] pad(") + fx_count(r.text.data, "f32[5] pad(") +
                               fx_count(r.text.data, "f32[6] pad(") != 0))
            fail_msg("merged pad+slice:\n%s", r.text.data);
        if (!merged && fx_count(r.text.data, "collective-permute(") < 2)
            fail_msg("two slices of one pad:\n%s", r.text.data);
        want_same_numbers(&r, 4);
        fx_done(&r);
    }
}

/* ---- one computation, two call sites with different shardings ------------------------ */

/* %f is called with a row-sharded argument, a column-sharded one, and the column-sharded one
 * again for a row-sharded result: the first call keeps %f, each new (arguments, result) pair
 * gets a clone (XLA's partitioner clones per call-site sharding the same way), and each
 * parameter and root has its caller's local shape. */
static void
test_call_cloned_per_sharding(void **state)
{
    (void)state;
    static const char k_text[] =
        "HloModule m, num_partitions=2\n\n"
        "f {\n  x = f32[4,4] parameter(0)\n  ROOT n = f32[4,4] negate(x)\n}\n\n"
        "ENTRY e {\n"
        "  p = f32[4,4] parameter(0), sharding={devices=[2,1]0,1}\n"
        "  q = f32[4,4] parameter(1), sharding={devices=[1,2]0,1}\n"
        "  a = f32[4,4] call(p), to_apply=f, sharding={devices=[2,1]0,1}\n"
        "  b = f32[4,4] call(q), to_apply=f, sharding={devices=[1,2]0,1}\n"
        "  c = f32[4,4] call(q), to_apply=f, sharding={devices=[2,1]0,1}\n"
        "  ROOT t = (f32[4,4], f32[4,4], f32[4,4]) tuple(a, b, c), "
        "sharding={{devices=[2,1]0,1},{devices=[1,2]0,1},{devices=[2,1]0,1}}\n}\n";
    SpmdRun r;
    fx_run(&r, k_text, 2, 256);
    /* the parameters take the arguments' shardings (XLA's PreprocessCallSites): arguments
     * pass unchanged, the all-gathers happen inside; one clone per (arguments, result) */
    fx_want(&r, "%f (x.1: f32[2,4]) -> f32[2,4] {");
    fx_want(&r, "%f.1 (x.2: f32[4,2]) -> f32[4,2] {");
    fx_want(&r, "%f.2 (x.3: f32[4,2]) -> f32[2,4] {");
    fx_want(&r, "%a.1 = f32[2,4] call(%p.1), to_apply=%f\n");
    fx_want(&r, "%b.1 = f32[4,2] call(%q.1), to_apply=%f.1\n");
    fx_want(&r, "%c.1 = f32[2,4] call(%q.1), to_apply=%f.2\n");
    fx_want(&r, "all-gather(%x.1), channel_id=1, replica_groups={{0,1}}, dimensions={0}");
    fx_want(&r, "all-gather(%x.3), channel_id=3, replica_groups={{0,1}}, dimensions={1}");
    fx_want_none(&r, "%f.3");
    assert_int_equal(r.dst->n_comps, 4);
    want_same_numbers(&r, 2);
    fx_done(&r);
}

/* One computation as two branches whose operands are sharded differently: each branch gets
 * its own partitioned copy (the parameter takes the operand's sharding), and the conditional
 * names both. */
static void
test_branch_cloned_per_operand_sharding(void **state)
{
    (void)state;
    static const char k_text[] =
        "HloModule m, num_partitions=2\n\n"
        "g {\n  x = f32[4,4] parameter(0)\n  ROOT n = f32[4,4] negate(x)\n}\n\n"
        "ENTRY e {\n"
        "  p = f32[4,4] parameter(0), sharding={devices=[2,1]0,1}\n"
        "  q = f32[4,4] parameter(1), sharding={devices=[1,2]0,1}\n"
        "  i = s32[] parameter(2), sharding={replicated}\n"
        "  ROOT c = f32[4,4] conditional(i, p, q), branch_computations={g, g},"
        " sharding={devices=[2,1]0,1}\n}\n";
    SpmdRun r;
    fx_run(&r, k_text, 2, 256);
    fx_want(&r, "%g (x.1: f32[2,4]) -> f32[2,4] {");
    fx_want(&r, "%g.1 (x.2: f32[4,2]) -> f32[2,4] {");
    fx_want(&r, "= f32[2,4] conditional(%i.1, %p.1, %q.1), branch_computations={%g, %g.1}");
    want_same_numbers(&r, 2);
    fx_done(&r);
}

/* A Sharding custom call that reaches the partitioner (no propagation turned it into a copy)
 * is XLA's DefaultAction: the custom call runs on the replicated operand and is then cut to its
 * sharding; a replicated user finds that full value in the reshard cache, so the cut is dead
 * and no all-gather comes back (real-hlo xla_e2e_windowed_einsum_ag_rs_f8 against XLA). */
static void
test_sharding_custom_call_default_action(void **state)
{
    (void)state;
    static const char k_text[] =
        "HloModule m, num_partitions=4\n\n"
        "ENTRY e {\n"
        "  x = f32[8,8] parameter(0), sharding={replicated}\n"
        "  s = f32[8,8] custom-call(x), custom_call_target=\"Sharding\","
        " sharding={devices=[1,4]<=[4]}\n"
        "  ROOT n = f32[8,8] negate(s), sharding={replicated}\n}\n";
    SpmdRun r;
    fx_run(&r, k_text, 4, 256);
    fx_want(&r, "%s.1 = f32[8,8] custom-call(%x.1), custom_call_target=\"Sharding\"\n");
    fx_want(&r, "ROOT %n.1 = f32[8,8] negate(%s.1)\n");
    fx_want_none(&r, "all-gather");
    fx_want_none(&r, "dynamic-slice");
    want_same_numbers(&r, 4);
    fx_done(&r);
}

/* ---- constructs refused by name ---------------------------------------------------------- */

/* Partitions `hlo` expecting SL_ERR_UNSUPPORTED with `msg` in the message. */
static void
want_unsupported(const char *name, const char *hlo, int64_t n, const char *msg)
{
    SlArena in, out;
    SlInterner names;
    sl_arena_init(&in);
    sl_arena_init(&out);
    sl_interner_init(&names, &in);
    SpmdOptions o;
    spmd_options_init(&o);
    o.num_partitions = n;
    IrModule *src = NULL, *dst = NULL;
    SlError err = {0};
    SlStatus st = hlo_parse(&in, &names, sl_str(hlo), "test.hlo", &src, &err);
    if (st != SL_OK)
        fail_msg("%s: parse: %s", name, err.msg);
    TraceSink *sink = trace_null_sink();
    st = spmd_partition(src, &o, sink, &out, &dst, &err);
    if (st != SL_ERR_UNSUPPORTED || !strstr(err.msg, msg))
        fail_msg("%s: got %s: %s", name, sl_status_name(st), err.msg);
    assert_null(dst);
    ir_module_fini(src);
    sl_interner_fini(&names);
    sl_arena_fini(&out);
    sl_arena_fini(&in);
}

static void
test_manual_misuse_refused(void **state)
{
    (void)state;
    /* {manual} on a reduce (and on a negate) of a tiled operand: the shapes of the two sides
     * cannot agree without SPMDFullToShardShape. */
    want_unsupported("manual reduce",
                     "HloModule m, num_partitions=2\n\n"
                     "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                     "  ROOT s = f32[] add(a, b)\n}\n\n"
                     "ENTRY e {\n  p = f32[4,4] parameter(0), sharding={devices=[2,1]0,1}\n"
                     "  z = f32[] constant(0)\n"
                     "  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add, "
                     "sharding={manual}\n}\n",
                     2,
                     "%r (reduce): a sharded {devices=[2,1]0,1} value used as {manual}: a "
                     "sharded value enters or leaves manual code only through custom-call "
                     "SPMDFullToShardShape or SPMDShardToFullShape");
    want_unsupported("manual negate",
                     "HloModule m, num_partitions=2\n\n"
                     "ENTRY e {\n  p = f32[4,4] parameter(0), sharding={devices=[2,1]0,1}\n"
                     "  ROOT r = f32[4,4] negate(p), sharding={manual}\n}\n",
                     2, "%r (negate): a sharded {devices=[2,1]0,1} value used as {manual}");
    /* A parameter in manual subgroups {0,2},{1,3} used in subgroups {0,1},{2,3}: the data
     * would have to cross manual groups (it was silently permuted, and verify disagreed). */
    want_unsupported("manual subgroups differ",
                     "HloModule m, num_partitions=4\n\n"
                     "ENTRY e {\n  p = f32[8,6] parameter(0), sharding={devices=[1,2,2]<=[4] "
                     "last_tile_dims={manual}}\n"
                     "  ROOT n = f32[8,6] negate(p), sharding={devices=[2,1,2]<=[2,2]T(1,0) "
                     "last_tile_dims={manual}}\n}\n",
                     4,
                     "%n (negate): resharding {devices=[1,2,2]<=[4] last_tile_dims={manual}} to "
                     "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dims={manual}} would move data "
                     "between manual subgroups: their devices differ");
}

/* A manual-subgroup parameter used in the same subgroups is partitioned in place (no
 * collective across groups) and agrees with the original. */
static void
test_manual_subgroup_parameter(void **state)
{
    (void)state;
    static const char k_text[] =
        "HloModule m, num_partitions=4\n\n"
        "ENTRY e {\n  p = f32[8,6] parameter(0), sharding={devices=[2,1,2]<=[4] "
        "last_tile_dims={manual}}\n"
        "  ROOT n = f32[8,6] negate(p), sharding={devices=[2,1,2]<=[4] "
        "last_tile_dims={manual}}\n}\n";
    SpmdRun r;
    fx_run(&r, k_text, 4, 256);
    fx_want(&r, "%p.1 = f32[4,6] parameter(0)");
    fx_want(&r, "ROOT %n.1 = f32[4,6] negate(%p.1)");
    fx_want_no_collectives(&r);
    want_same_numbers(&r, 4);
    fx_done(&r);
}

/* ---- a maximal outfeed happens on its device only ----------------------------------------- */

static void
test_maximal_outfeed_on_its_device(void **state)
{
    (void)state;
    static const char k_text[] =
        "HloModule m, num_partitions=2\n\n"
        "ENTRY e {\n  p = f32[4,4] parameter(0), sharding={devices=[2,1]0,1}\n"
        "  tok = token[] after-all()\n"
        "  o = token[] outfeed(p, tok), outfeed_shape=f32[4,4], sharding={maximal device=1}\n"
        "  ROOT t = (f32[4,4], token[]) tuple(p, o), sharding={{devices=[2,1]0,1}, "
        "{maximal device=1}}\n}\n";
    SpmdRun r;
    fx_run(&r, k_text, 2, 256);
    /* one outfeed, inside the branch taken where partition-id == 1; the other returns a token */
    assert_int_equal(fx_count(r.text.data, " outfeed("), 1);
    fx_want(&r, "ROOT %o.1 = token[] outfeed(%get-tuple-element, %get-tuple-element.1), "
                "outfeed_shape=f32[4,4]\n}");
    fx_want(&r, "ROOT %after-all = token[] after-all()\n}");
    fx_want(&r, "%constant = u32[] constant(1)\n");
    fx_want(&r, "compare(%partition-id, %constant), direction=EQ");
    fx_want(&r, "token[] conditional(%compare, %tuple, %tuple), "
                "true_computation=%on_device_branch_0, false_computation=%off_device_branch_0");
    want_same_numbers(&r, 2);
    fx_done(&r);
}

/* An {unreduced} root with no reduction pending: XLA partitions it as replicated, so every
 * device computes the whole value (a negate of replicated data; a dot whose operands are
 * gathered because neither strategy on contracting dims applies), no all-reduce, and verify
 * reads the whole value (it used to sum the four copies: four times too large). */
static void
test_unreduced_root_whole_value(void **state)
{
    (void)state;
    static const struct {
        const char *name, *body, *local;
    } k_cases[] = {
        {"negate", "  p = f32[8,6] parameter(0), sharding={replicated}\n"
                   "  ROOT n = f32[8,6] negate(p), sharding={unreduced}\n",
         "ROOT %n.1 = f32[8,6] negate(%p.1)"},
        {"dot", "  p = f32[8,8] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                "  q = f32[8,4] parameter(1), sharding={devices=[4,1]<=[4]}\n"
                "  ROOT d = f32[8,4] dot(p, q), lhs_contracting_dims={1}, "
                "rhs_contracting_dims={0}, sharding={unreduced}\n",
         "ROOT %d.1 = f32[8,4] dot(%all-gather, %all-gather.1)"},
    };
    for (size_t i = 0; i < sizeof(k_cases) / sizeof(k_cases[0]); i++) {
        char text[1024];
        snprintf(text, sizeof(text), "HloModule m, num_partitions=4\n\nENTRY e {\n%s}\n",
                 k_cases[i].body);
        SpmdRun r;
        fx_run(&r, text, 4, 256);
        if (fx_count(r.text.data, "all-reduce(") != 0 || !strstr(r.text.data, k_cases[i].local))
            fail_msg("%s:\n%s", k_cases[i].name, r.text.data);
        want_same_numbers(&r, 4);
        fx_done(&r);
    }
}

/* An uneven infeed and an outfeed used as values: the infeed's data feeds the outfeed and the
 * root, its tuple is returned whole, the outfeed's token joins an after-all. Each device
 * receives and sends its own rows (3 and 2 of 5), and the values agree. */
static void
test_feeds_used_as_values(void **state)
{
    (void)state;
    static const char k_text[] =
        "HloModule m, num_partitions=2\n\n"
        "ENTRY e {\n  tok = token[] after-all()\n"
        "  in = (f32[5,4], token[]) infeed(tok), sharding={{devices=[2,1]0,1}, {maximal device=0}}\n"
        "  x = f32[5,4] get-tuple-element(in), index=0, sharding={devices=[2,1]0,1}\n"
        "  t2 = token[] get-tuple-element(in), index=1, sharding={maximal device=0}\n"
        "  o = token[] outfeed(x, t2), outfeed_shape=f32[5,4], sharding={{devices=[2,1]0,1}, "
        "{maximal device=0}}\n"
        "  a = token[] after-all(o, tok)\n"
        "  ROOT r = (f32[5,4], token[], (f32[5,4], token[])) tuple(x, a, in), "
        "sharding={{devices=[2,1]0,1}, {maximal device=0}, {devices=[2,1]0,1}, {maximal device=0}}\n}\n";
    SpmdRun r;
    fx_run(&r, k_text, 2, 256);
    fx_want(&r, "= (f32[3,4], token[]) infeed(");
    fx_want(&r, "= (f32[2,4], token[]) infeed(");
    fx_want(&r, "outfeed_shape=f32[3,4]");
    fx_want(&r, "outfeed_shape=f32[2,4]");
    fx_want(&r, "ROOT %r.1 = (f32[3,4], token[], (f32[3,4], token[])) tuple(%x.1, %a.1, %conditional)");
    fx_want_no_collectives(&r);
    want_same_numbers(&r, 2);
    fx_done(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_array_result_check),
        cmocka_unit_test(test_scan_array_result_replicated),
        cmocka_unit_test(test_ds_broadcast),
        cmocka_unit_test(test_ds_broadcast_clamped),
        cmocka_unit_test(test_ds_broadcast_not_applied),
        cmocka_unit_test(test_ds_broadcast_options),
        cmocka_unit_test(test_unreduced_reduce_keeps_partials),
        cmocka_unit_test(test_pad_then_slice_merged),
        cmocka_unit_test(test_unreduced_root_whole_value),
        cmocka_unit_test(test_call_cloned_per_sharding),
        cmocka_unit_test(test_branch_cloned_per_operand_sharding),
        cmocka_unit_test(test_sharding_custom_call_default_action),
        cmocka_unit_test(test_manual_misuse_refused),
        cmocka_unit_test(test_manual_subgroup_parameter),
        cmocka_unit_test(test_maximal_outfeed_on_its_device),
        cmocka_unit_test(test_feeds_used_as_values),
        cmocka_unit_test(test_cse_keeps_differently_sharded_values),
        cmocka_unit_test(test_table_lookup_of_equal_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
