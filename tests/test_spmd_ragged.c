/* test_spmd_ragged.c - ragged-dot (three modes) and the block-scaled dot custom call (gspmd.md
 * D.21, §E): one hand-written module per mode, partitioned end to end; asserts the collectives
 * (kind, replica groups), the local shapes, and the decision events in a memory trace. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "hlo/hlo.h"
#include "spmd/spmd.h"
#include "trace/trace.h"

typedef struct RgRun {
    SlArena in, out;
    SlInterner names;
    IrModule *src, *dst;
    SlBuf text;
    TraceMemSink trace;
    SlError err;
} RgRun;

/* Partitions `hlo` over n devices with the windowed threshold and extra KEY=VALUE options. */
static void
run_with(RgRun *r, const char *hlo, int64_t n, int64_t threshold_mib, const char *const *sets,
         size_t n_sets)
{
    memset(r, 0, sizeof(*r));
    sl_arena_init(&r->in);
    sl_arena_init(&r->out);
    sl_interner_init(&r->names, &r->in);
    sl_buf_init(&r->text);
    trace_mem_sink_init(&r->trace);
    SpmdOptions o;
    spmd_options_init(&o);
    o.num_partitions = n;
    o.threshold_for_windowed_einsum_mib = threshold_mib;
    for (size_t k = 0; k < n_sets; k++)
        if (spmd_options_set(&o, sl_str(sets[k]), &r->err) != SL_OK)
            fail_msg("bad option %s: %s", sets[k], r->err.msg);
    SlStatus st = hlo_parse(&r->in, &r->names, sl_str(hlo), "test.hlo", &r->src, &r->err);
    if (st == SL_OK)
        st = spmd_partition(r->src, &o, &r->trace.sink, &r->out, &r->dst, &r->err);
    if (st != SL_OK)
        fail_msg("partition failed: %s", r->err.msg);
    hlo_print_module(r->dst, &r->text);
    sl_buf_putc(&r->text, '\0');
    sl_buf_putc(&r->trace.log, '\0');
}

static void
run(RgRun *r, const char *hlo, int64_t n, int64_t threshold_mib)
{
    run_with(r, hlo, n, threshold_mib, NULL, 0);
}

static void
done(RgRun *r)
{
    ir_module_fini(r->dst);
    ir_module_fini(r->src);
    sl_buf_fini(&r->text);
    trace_mem_sink_fini(&r->trace);
    sl_interner_fini(&r->names);
    sl_arena_fini(&r->out);
    sl_arena_fini(&r->in);
}

static size_t
count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void
want(const RgRun *r, const char *fragment)
{
    if (!strstr(r->text.data, fragment))
        fail_msg("missing \"%s\" in:\n%s\ntrace:\n%s", fragment, r->text.data, r->trace.log.data);
}

static void
want_trace(const RgRun *r, const char *fragment)
{
    if (!strstr(r->trace.log.data, fragment))
        fail_msg("missing trace \"%s\" in:\n%s", fragment, r->trace.log.data);
}

static void
want_no_collectives(const RgRun *r)
{
    static const char *const k[] = {"all-reduce(", "all-gather(", "all-to-all(",
                                    "collective-permute("};
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
        if (strstr(r->text.data, k[i]))
            fail_msg("unexpected %s in:\n%s", k[i], r->text.data);
}

static void
want_none(const RgRun *r, const char *fragment)
{
    if (strstr(r->text.data, fragment))
        fail_msg("unexpected \"%s\" in:\n%s", fragment, r->text.data);
}

/* Ragged non-contracting dim: local ragged-dot on the operands as they are, then one all-reduce
 * over the lhs contracting dim (pairs {0,2},{1,3},{4,6},{5,7}). */
static void
test_ragged_non_contracting(void **state)
{
    (void)state;
    RgRun r;
    run(&r,
        "HloModule m, num_partitions=8\n"
        "ENTRY e {\n"
        "  a = f32[16,32,64] parameter(0),"
        " sharding={devices=[2,1,2,2]<=[8] last_tile_dim_replicate}\n"
        "  b = f32[4,16,64,8] parameter(1), sharding={devices=[1,2,2,2]<=[8]}\n"
        "  c = u32[16,4] parameter(2), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
        "  ROOT d = f32[16,32,8] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={1},"
        " lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1},"
        " rhs_group_dims={0},"
        " sharding={devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}\n"
        "}\n",
        8, 256);
    want(&r, "f32[8,32,32] parameter(0)");
    want(&r, "f32[4,8,32,4] parameter(1)");
    want(&r, "u32[8,4] parameter(2)");
    want(&r, "f32[8,32,4] ragged-dot(%a.1, %b.1, %c.1)");
    assert_int_equal(count(r.text.data, "all-reduce("), 1);
    want(&r, "f32[8,32,4] all-reduce(");
    want(&r, "replica_groups=[4,2]<=[2,2,2]T(0,2,1)"); /* {0,2},{1,3},{4,6},{5,7} */
    want_none(&r, "all-gather(");
    want_none(&r, "select(");
    want_trace(&r, "ragged-dot local_ragged_dot");
    done(&r);
}

/* Ragged contracting dim (unsharded): no communication, the group dim leads the output. */
static void
test_ragged_contracting(void **state)
{
    (void)state;
    RgRun r;
    run(&r,
        "HloModule m, num_partitions=8\n"
        "ENTRY e {\n"
        "  a = f32[15,33,64] parameter(0),"
        " sharding={devices=[2,2,1,2]<=[8] last_tile_dim_replicate}\n"
        "  b = f32[15,64,9] parameter(1),"
        " sharding={devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}\n"
        "  c = u32[15,4] parameter(2), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
        "  ROOT d = f32[4,15,33,9] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={0},"
        " lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={2},"
        " sharding={devices=[1,2,2,2]<=[8]}\n"
        "}\n",
        8, 256);
    want(&r, "f32[8,17,64] parameter(0)");
    want(&r, "f32[8,64,5] parameter(1)");
    want(&r, "f32[4,8,17,5] ragged-dot(%a.1, %b.1, %c.1)");
    want_no_collectives(&r);
    want_trace(&r, "ragged-dot local_ragged_dot");
    done(&r);
}

/* Ragged batch dim: a plain dot; the uneven contracting dim (63 over 2) is zero-masked on both
 * operands before it, then one all-reduce over pairs {0,1},{2,3},... */
static void
test_ragged_batch_padded(void **state)
{
    (void)state;
    RgRun r;
    run(&r,
        "HloModule m, num_partitions=16\n"
        "ENTRY e {\n"
        "  a = f32[16,32,63] parameter(0),"
        " sharding={devices=[2,2,2,2]<=[2,2,2,2]T(0,1,3,2) last_tile_dim_replicate}\n"
        "  b = f32[16,63,8] parameter(1),"
        " sharding={devices=[2,2,2,2]<=[2,2,2,2]T(0,3,2,1) last_tile_dim_replicate}\n"
        "  c = u32[4] parameter(2), sharding={devices=[4,4]<=[16] last_tile_dim_replicate}\n"
        "  ROOT d = f32[16,32,8] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={0},"
        " lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={0},"
        " sharding={devices=[2,2,2,2]<=[16] last_tile_dim_replicate}\n"
        "}\n",
        16, 256);
    want(&r, "f32[8,16,32] select(");
    want(&r, "f32[8,32,4] select(");
    want(&r, "f32[8,16,4] dot(%select, %select.1), lhs_batch_dims={0}, rhs_batch_dims={0},"
             " lhs_contracting_dims={2}, rhs_contracting_dims={1}\n");
    want_none(&r, "ragged-dot(");
    assert_int_equal(count(r.text.data, "all-reduce("), 1);
    want(&r, "f32[8,16,4] all-reduce(");
    want(&r, "replica_groups=[8,2]<=[16]");
    want_none(&r, "all-gather(");
    want_trace(&r, "ragged-dot local_dot");
    done(&r);
}

/* Ragged batch dim, even contracting dim: no masking. */
static void
test_ragged_batch_even(void **state)
{
    (void)state;
    RgRun r;
    run(&r,
        "HloModule m, num_partitions=16\n"
        "ENTRY e {\n"
        "  a = f32[15,31,64] parameter(0),"
        " sharding={devices=[2,2,2,2]<=[2,2,2,2]T(0,1,3,2) last_tile_dim_replicate}\n"
        "  b = f32[15,64,7] parameter(1),"
        " sharding={devices=[2,2,2,2]<=[2,2,2,2]T(0,3,2,1) last_tile_dim_replicate}\n"
        "  c = u32[4] parameter(2), sharding={devices=[4,4]<=[16] last_tile_dim_replicate}\n"
        "  ROOT d = f32[15,31,7] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={0},"
        " lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={0},"
        " sharding={devices=[2,2,2,2]<=[16] last_tile_dim_replicate}\n"
        "}\n",
        16, 256);
    want(&r, "f32[8,16,4] dot(%a.1, %b.1)");
    want_none(&r, "select(");
    assert_int_equal(count(r.text.data, "all-reduce("), 1);
    want(&r, "replica_groups=[8,2]<=[16]");
    done(&r);
}

/* Operands that disagree with the ragged roles (batch sharded on the lhs only): replicate. */
static void
test_ragged_inconsistent_replicates(void **state)
{
    (void)state;
    RgRun r;
    run(&r,
        "HloModule m, num_partitions=2\n"
        "ENTRY e {\n"
        "  a = f32[4,8,16] parameter(0), sharding={devices=[2,1,1]<=[2]}\n"
        "  b = f32[3,4,16,6] parameter(1), sharding={replicated}\n"
        "  c = u32[4,3] parameter(2), sharding={replicated}\n"
        "  ROOT d = f32[4,8,6] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={1},"
        " lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1},"
        " rhs_group_dims={0}, sharding={devices=[2,1,1]<=[2]}\n"
        "}\n",
        2, 256);
    want(&r, "f32[4,8,6] ragged-dot(");
    want(&r, "all-gather(");
    want_trace(&r, "ragged-dot replicate");
    done(&r);
}

static const char *const k_mx_sets[] = {"unroll_windowed_einsum=true",
                                        "partial_windowed_einsum=false"};

/* Block-scaled dot, batch-sharded lhs and rhs sharded on its free dim: the rhs and its scale
 * are both moved to batch sharding by an all-to-all; the local custom call has 4 operands. */
static void
test_mx_batch_and_non_contracting(void **state)
{
    (void)state;
    RgRun r;
    run_with(&r,
             "HloModule m, num_partitions=8\n"
             "ENTRY e {\n"
             "  lhs = f8e4m3fn[8,128,512] parameter(0), sharding={devices=[8,1,1]<=[8]}\n"
             "  ls = f8e8m0fnu[8,128,16] parameter(1), sharding={devices=[8,1,1]<=[8]}\n"
             "  rhs = f8e4m3fn[8,1024,512] parameter(2), sharding={devices=[1,8,1]<=[8]}\n"
             "  rs = f8e8m0fnu[8,32,512] parameter(3), sharding={devices=[1,8,1]<=[8]}\n"
             "  ROOT d = f32[8,128,1024] custom-call(lhs, rhs, ls, rs),"
             " custom_call_target=\"__op$block_scaled_dot\", sharding={devices=[8,1,1]<=[8]}\n"
             "}\n",
             8, 256, k_mx_sets, SL_COUNTOF(k_mx_sets));
    assert_int_equal(count(r.text.data, "all-to-all("), 2);
    want(&r, "f8e4m3fn[8,1,128,512] all-to-all(");
    want(&r, "f8e8m0fnu[8,1,4,512] all-to-all(");
    want(&r, "replica_groups=[1,8]<=[8], dimensions={0}");
    want(&r, "f8e4m3fn[1,1024,512] reshape(");
    want(&r, "f8e8m0fnu[1,32,512] reshape(");
    want(&r, "f32[1,128,1024] custom-call(%lhs.1, %reshape.1, %ls.1, %reshape.3),"
             " custom_call_target=\"__op$block_scaled_dot\"");
    want_none(&r, "all-gather(");
    want_trace(&r, "block_scaled_dot batch_reshard_without_all_reduce");
    done(&r);
}

/* Both operands (and scales) sharded on K, output on the lhs free dim: local custom call,
 * all-reduce over all 8, dynamic-slice of rows {0,16,...,112}. */
static void
test_mx_contracting_and_contracting(void **state)
{
    (void)state;
    RgRun r;
    run_with(&r,
             "HloModule m, num_partitions=8\n"
             "ENTRY e {\n"
             "  lhs = f8e4m3fn[128,512] parameter(0), sharding={devices=[1,8]<=[8]}\n"
             "  ls = f8e8m0fnu[128,16] parameter(1), sharding={devices=[1,8]<=[8]}\n"
             "  rhs = f8e4m3fn[1024,512] parameter(2), sharding={devices=[1,8]<=[8]}\n"
             "  rs = f8e8m0fnu[1024,16] parameter(3), sharding={devices=[1,8]<=[8]}\n"
             "  ROOT d = f32[128,1024] custom-call(lhs, rhs, ls, rs),"
             " custom_call_target=\"__op$block_scaled_dot\", sharding={devices=[8,1]<=[8]}\n"
             "}\n",
             8, 256, k_mx_sets, SL_COUNTOF(k_mx_sets));
    want(&r, "f32[128,1024] custom-call(%lhs.1, %rhs.1, %ls.1, %rs.1)");
    assert_int_equal(count(r.text.data, "all-reduce("), 1);
    want(&r, "f32[128,1024] all-reduce(");
    want(&r, "replica_groups=[1,8]<=[8]");
    want(&r, "constant({0, 16, 32, 48, 64, 80, 96, 112})");
    want(&r, "f32[16,1024] dynamic-slice(%all-reduce");
    want_none(&r, "all-gather(");
    want_trace(&r, "block_scaled_dot group_on_contracting");
    done(&r);
}

/* lhs sharded on K, rhs replicated, output replicated: the rhs and its scale are sliced to
 * match (no communication), one all-reduce. */
static void
test_mx_contracting_and_replicated(void **state)
{
    (void)state;
    RgRun r;
    run_with(&r,
             "HloModule m, num_partitions=8\n"
             "ENTRY e {\n"
             "  lhs = f8e4m3fn[1024,512] parameter(0), sharding={devices=[1,8]<=[8]}\n"
             "  ls = f8e8m0fnu[1024,16] parameter(1), sharding={devices=[1,8]<=[8]}\n"
             "  rhs = f8e4m3fn[128,512] parameter(2), sharding={replicated}\n"
             "  rs = f8e8m0fnu[128,16] parameter(3), sharding={replicated}\n"
             "  ROOT d = f32[1024,128] custom-call(lhs, rhs, ls, rs),"
             " custom_call_target=\"__op$block_scaled_dot\", sharding={replicated}\n"
             "}\n",
             8, 256, k_mx_sets, SL_COUNTOF(k_mx_sets));
    want(&r, "f8e4m3fn[128,64] dynamic-slice(%rhs.1");
    want(&r, "f8e8m0fnu[128,2] dynamic-slice(%rs.1");
    want(&r, "constant({0, 2, 4, 6, 8, 10, 12, 14})");
    want(&r, "f32[1024,128] custom-call(%lhs.1, %dynamic-slice.1, %ls.1, %dynamic-slice.3)");
    assert_int_equal(count(r.text.data, "all-reduce("), 1);
    want(&r, "replica_groups=[1,8]<=[8]");
    want_none(&r, "all-gather(");
    want_trace(&r, "block_scaled_dot replicated_output_sharded_contracting");
    done(&r);
}

/* Batch and free dims sharded on both sides with reversed device orders: the rhs and its scale
 * take the same permutes and gathers; the result is permuted back. */
static void
test_mx_batch_non_contracting_both(void **state)
{
    (void)state;
    RgRun r;
    run_with(&r,
             "HloModule m, num_partitions=8\n"
             "ENTRY e {\n"
             "  lhs = f8e4m3fn[8,1024,512] parameter(0),"
             " sharding={devices=[4,2,1]7,6,5,4,3,2,1,0}\n"
             "  ls = f8e8m0fnu[8,1024,16] parameter(1), sharding={devices=[4,2,1]7,6,5,4,3,2,1,0}\n"
             "  rhs = f8e4m3fn[8,128,512] parameter(2), sharding={devices=[4,2,1]<=[8]}\n"
             "  rs = f8e8m0fnu[8,128,16] parameter(3), sharding={devices=[4,2,1]<=[8]}\n"
             "  ROOT d = f32[8,1024,128] custom-call(lhs, rhs, ls, rs),"
             " custom_call_target=\"__op$block_scaled_dot\", sharding={devices=[4,2,1]<=[8]}\n"
             "}\n",
             8, 256, k_mx_sets, SL_COUNTOF(k_mx_sets));
    assert_int_equal(count(r.text.data, "collective-permute("), 3);
    want(&r, "f8e4m3fn[2,64,512] collective-permute(%rhs.1)");
    want(&r, "f8e8m0fnu[2,64,16] collective-permute(%rs.1)");
    want(&r, "source_target_pairs={{0,7},{1,6},{2,5},{3,4},{4,3},{5,2},{6,1},{7,0}}");
    want(&r, "replica_groups={{7,6},{5,4},{3,2},{1,0}}, dimensions={1}");
    want(&r, "f32[2,512,128] custom-call(%lhs.1, %all-gather, %ls.1, %all-gather.1)");
    want(&r, "ROOT %collective-permute.2 = f32[2,512,128] collective-permute(");
    done(&r);
}

/* A rank-1 block-scaled dot is not a supported form: it runs replicated, with a decision. */
static void
test_mx_wrong_rank_replicates(void **state)
{
    (void)state;
    RgRun r;
    run_with(&r,
             "HloModule m, num_partitions=2\n"
             "ENTRY e {\n"
             "  lhs = f8e4m3fn[512] parameter(0), sharding={devices=[2]<=[2]}\n"
             "  rhs = f8e4m3fn[512] parameter(1), sharding={devices=[2]<=[2]}\n"
             "  ls = f8e8m0fnu[16] parameter(2), sharding={devices=[2]<=[2]}\n"
             "  rs = f8e8m0fnu[16] parameter(3), sharding={devices=[2]<=[2]}\n"
             "  ROOT d = f32[] custom-call(lhs, rhs, ls, rs),"
             " custom_call_target=\"__op$block_scaled_dot\", sharding={replicated}\n"
             "}\n",
             2, 256, NULL, 0);
    want(&r, "f32[] custom-call(");
    want_trace(&r, "block_scaled_dot replicate");
    done(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ragged_non_contracting),
        cmocka_unit_test(test_ragged_contracting),
        cmocka_unit_test(test_ragged_batch_padded),
        cmocka_unit_test(test_ragged_batch_even),
        cmocka_unit_test(test_ragged_inconsistent_replicates),
        cmocka_unit_test(test_mx_batch_and_non_contracting),
        cmocka_unit_test(test_mx_contracting_and_contracting),
        cmocka_unit_test(test_mx_contracting_and_replicated),
        cmocka_unit_test(test_mx_batch_non_contracting_both),
        cmocka_unit_test(test_mx_wrong_rank_replicates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
