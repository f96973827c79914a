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

#include "spmd_fixture.h"



/* Ragged non-contracting dim: local ragged-dot on the operands as they are, then one all-reduce
 * over the lhs contracting dim (pairs {0,2},{1,3},{4,6},{5,7}). */
static void
test_ragged_non_contracting(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
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
    fx_want(&r, "f32[8,32,32] parameter(0)");
    fx_want(&r, "f32[4,8,32,4] parameter(1)");
    fx_want(&r, "u32[8,4] parameter(2)");
    fx_want(&r, "f32[8,32,4] ragged-dot(%a.1, %b.1, %c.1)");
    assert_int_equal(fx_count(r.text.data, "all-reduce("), 1);
    fx_want(&r, "f32[8,32,4] all-reduce(");
    fx_want(&r, "replica_groups=[4,2]<=[2,2,2]T(0,2,1)"); /* {0,2},{1,3},{4,6},{5,7} */
    fx_want_none(&r, "all-gather(");
    fx_want_none(&r, "select(");
    fx_want_trace(&r, "ragged-dot local_ragged_dot");
    fx_done(&r);
}

/* Ragged contracting dim (unsharded): no communication, the group dim leads the output. */
static void
test_ragged_contracting(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
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
    fx_want(&r, "f32[8,17,64] parameter(0)");
    fx_want(&r, "f32[8,64,5] parameter(1)");
    fx_want(&r, "f32[4,8,17,5] ragged-dot(%a.1, %b.1, %c.1)");
    fx_want_no_collectives(&r);
    fx_want_trace(&r, "ragged-dot local_ragged_dot");
    fx_done(&r);
}

/* Ragged batch dim: a plain dot; the uneven contracting dim (63 over 2) is zero-masked on both
 * operands before it, then one all-reduce over pairs {0,1},{2,3},... */
static void
test_ragged_batch_padded(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
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
    fx_want(&r, "f32[8,16,32] select(");
    fx_want(&r, "f32[8,32,4] select(");
    fx_want(&r, "f32[8,16,4] dot(%select, %select.1), lhs_batch_dims={0}, rhs_batch_dims={0},"
             " lhs_contracting_dims={2}, rhs_contracting_dims={1}\n");
    fx_want_none(&r, "ragged-dot(");
    assert_int_equal(fx_count(r.text.data, "all-reduce("), 1);
    fx_want(&r, "f32[8,16,4] all-reduce(");
    fx_want(&r, "replica_groups=[8,2]<=[16]");
    fx_want_none(&r, "all-gather(");
    fx_want_trace(&r, "ragged-dot local_dot");
    fx_done(&r);
}

/* Ragged batch dim, even contracting dim: no masking. */
static void
test_ragged_batch_even(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
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
    fx_want(&r, "f32[8,16,4] dot(%a.1, %b.1)");
    fx_want_none(&r, "select(");
    assert_int_equal(fx_count(r.text.data, "all-reduce("), 1);
    fx_want(&r, "replica_groups=[8,2]<=[16]");
    fx_done(&r);
}

/* Operands that disagree with the ragged roles (batch sharded on the lhs only): replicate. */
static void
test_ragged_inconsistent_replicates(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
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
    fx_want(&r, "f32[4,8,6] ragged-dot(");
    fx_want(&r, "all-gather(");
    fx_want_trace(&r, "ragged-dot replicate");
    fx_done(&r);
}

static const char *const k_mx_sets[] = {"unroll_windowed_einsum=true",
                                        "partial_windowed_einsum=false"};

/* Block-scaled dot, batch-sharded lhs and rhs sharded on its free dim: the rhs and its scale
 * are both moved to batch sharding by an all-to-all; the local custom call has 4 operands. */
static void
test_mx_batch_and_non_contracting(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r,
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
    assert_int_equal(fx_count(r.text.data, "all-to-all("), 2);
    fx_want(&r, "f8e4m3fn[8,1,128,512] all-to-all(");
    fx_want(&r, "f8e8m0fnu[8,1,4,512] all-to-all(");
    fx_want(&r, "replica_groups=[1,8]<=[8], dimensions={0}");
    fx_want(&r, "f8e4m3fn[1,1024,512] reshape(");
    fx_want(&r, "f8e8m0fnu[1,32,512] reshape(");
    fx_want(&r, "f32[1,128,1024] custom-call(%lhs.1, %reshape.1, %ls.1, %reshape.3),"
             " custom_call_target=\"__op$block_scaled_dot\"");
    fx_want_none(&r, "all-gather(");
    fx_want_trace(&r, "block_scaled_dot batch_reshard_without_all_reduce");
    fx_done(&r);
}

/* Both operands (and scales) sharded on K, output on the lhs free dim: local custom call,
 * all-reduce over all 8, dynamic-slice of rows {0,16,...,112}. */
static void
test_mx_contracting_and_contracting(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r,
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
    fx_want(&r, "f32[128,1024] custom-call(%lhs.1, %rhs.1, %ls.1, %rs.1)");
    assert_int_equal(fx_count(r.text.data, "all-reduce("), 1);
    fx_want(&r, "f32[128,1024] all-reduce(");
    fx_want(&r, "replica_groups=[1,8]<=[8]");
    fx_want(&r, "constant({0, 16, 32, 48, 64, 80, 96, 112})");
    fx_want(&r, "f32[16,1024] dynamic-slice(%all-reduce");
    fx_want_none(&r, "all-gather(");
    fx_want_trace(&r, "block_scaled_dot group_on_contracting");
    fx_done(&r);
}

/* lhs sharded on K, rhs replicated, output replicated: the rhs and its scale are sliced to
 * match (no communication), one all-reduce. */
static void
test_mx_contracting_and_replicated(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r,
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
    fx_want(&r, "f8e4m3fn[128,64] dynamic-slice(%rhs.1");
    fx_want(&r, "f8e8m0fnu[128,2] dynamic-slice(%rs.1");
    fx_want(&r, "constant({0, 2, 4, 6, 8, 10, 12, 14})");
    fx_want(&r, "f32[1024,128] custom-call(%lhs.1, %dynamic-slice.1, %ls.1, %dynamic-slice.3)");
    assert_int_equal(fx_count(r.text.data, "all-reduce("), 1);
    fx_want(&r, "replica_groups=[1,8]<=[8]");
    fx_want_none(&r, "all-gather(");
    fx_want_trace(&r, "block_scaled_dot replicated_output_sharded_contracting");
    fx_done(&r);
}

/* Batch and free dims sharded on both sides with reversed device orders: the rhs and its scale
 * take the same permutes and gathers; the result is permuted back. */
static void
test_mx_batch_non_contracting_both(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r,
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
    assert_int_equal(fx_count(r.text.data, "collective-permute("), 3);
    fx_want(&r, "f8e4m3fn[2,64,512] collective-permute(%rhs.1)");
    fx_want(&r, "f8e8m0fnu[2,64,16] collective-permute(%rs.1)");
    fx_want(&r, "source_target_pairs={{0,7},{1,6},{2,5},{3,4},{4,3},{5,2},{6,1},{7,0}}");
    fx_want(&r, "replica_groups={{7,6},{5,4},{3,2},{1,0}}, dimensions={1}");
    fx_want(&r, "f32[2,512,128] custom-call(%lhs.1, %all-gather, %ls.1, %all-gather.1)");
    fx_want(&r, "ROOT %collective-permute.2 = f32[2,512,128] collective-permute(");
    fx_done(&r);
}

/* A rank-1 block-scaled dot is not a supported form: it runs replicated, with a decision. */
static void
test_mx_wrong_rank_replicates(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r,
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
    fx_want(&r, "f32[] custom-call(");
    fx_want_trace(&r, "block_scaled_dot replicate");
    fx_done(&r);
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
