/* test_spmd_dot.c - the dot engine and convolution (gspmd.md §E, §F.1): one hand-written
 * module per strategy, partitioned end to end; asserts the collectives (kind, replica groups,
 * pairs), the local shapes, and the decision events in a memory trace. */
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


static void
want_no_collective_but_all_reduce(const SpmdRun *r)
{
    if (strstr(r->text.data, "all-gather(") || strstr(r->text.data, "collective-permute(") ||
        strstr(r->text.data, "all-to-all("))
        fail_msg("unexpected collective in:\n%s", r->text.data);
}

/* [B,M,K] x [B,K,N] with B sharded: batch-parallel, no communication. */
static void
test_dot_batch_sharded(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  a = f32[4,8,16] parameter(0), sharding={devices=[4,1,1]<=[4]}\n"
        "  b = f32[4,16,8] parameter(1), sharding={devices=[4,1,1]<=[4]}\n"
        "  ROOT d = f32[4,8,8] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0},"
        " lhs_contracting_dims={2}, rhs_contracting_dims={1}, sharding={devices=[4,1,1]<=[4]}\n"
        "}\n",
        4, 256);
    fx_want_no_collectives(&r);
    fx_want(&r, "f32[1,8,8] dot(");
    fx_want_trace(&r, "dot batch_parallel");
    fx_done(&r);
}

/* K sharded on both operands, replicated output: one all-reduce over all four devices. */
static void
test_dot_contracting_sharded(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  a = f32[8,32] parameter(0), sharding={devices=[1,4]<=[4]}\n"
        "  b = f32[32,16] parameter(1), sharding={devices=[4,1]<=[4]}\n"
        "  ROOT d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={replicated}\n"
        "}\n",
        4, 256);
    assert_int_equal(fx_count(r.text.data, "all-reduce("), 1);
    fx_want(&r, "f32[8,16] dot(");
    fx_want(&r, "replica_groups=[1,4]<=[4]");
    fx_want(&r, "to_apply=%add");
    fx_want_trace(&r, "dot group_on_contracting");
    fx_done(&r);
}

/* K sharded 2 ways on a 2x2 mesh: the all-reduce groups pair devices along K only. */
static void
test_dot_contracting_groups(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  a = f32[8,32] parameter(0), sharding={devices=[2,2]<=[4]}\n"
        "  b = f32[32,16] parameter(1),"
        " sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}\n"
        "  ROOT d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
        "}\n",
        4, 256);
    assert_int_equal(fx_count(r.text.data, "all-reduce("), 1);
    fx_want(&r, "replica_groups={{0,1},{2,3}}");
    fx_want(&r, "f32[4,16] dot(");
    want_no_collective_but_all_reduce(&r);
    fx_done(&r);
}

/* M sharded on the lhs and the output, rhs replicated: collective-free. */
static void
test_dot_lhs_matches_output(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  a = f32[8,32] parameter(0), sharding={devices=[4,1]<=[4]}\n"
        "  b = f32[32,16] parameter(1), sharding={replicated}\n"
        "  ROOT d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={devices=[4,1]<=[4]}\n"
        "}\n",
        4, 256);
    fx_want_no_collectives(&r);
    fx_want(&r, "f32[2,16] dot(");
    fx_want_trace(&r, "dot lhs_matches_output_replicate_rhs");
    fx_done(&r);
}

/* rhs sharded on N, output on M like the lhs, threshold 0: all-gather windowed loop. */
static void
test_dot_windowed_all_gather(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  a = f32[8,32] parameter(0), sharding={devices=[4,1]<=[4]}\n"
        "  b = f32[32,16] parameter(1), sharding={devices=[1,4]<=[4]}\n"
        "  ROOT d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={devices=[4,1]<=[4]}\n"
        "}\n",
        4, 0);
    fx_want(&r, "while(");
    fx_want(&r, "windowed_dot_general_body_ag");
    fx_want(&r, "source_target_pairs={{0,3},{1,0},{2,1},{3,2}}");
    fx_want(&r, "f32[2,4] dot(");
    fx_want(&r, "dynamic-update-slice(");
    fx_want(&r, "(f32[2,32], f32[32,4], f32[2,16], f32[2,16], u32[])");
    fx_want(&r, "direction=LT");
    fx_want(&r, "u32[] constant(4)");
    assert_int_equal(r.trace.n_windowed_loops, 1);
    fx_want_trace(&r, "all-gather 4 512");
    fx_want_trace(&r, "dot windowed_all_gather");
    fx_done(&r);
}

/* K sharded, output sharded on M, threshold 0: reduce-scatter windowed loop with add. */
static void
test_dot_windowed_reduce_scatter(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  a = f32[8,32] parameter(0), sharding={devices=[1,4]<=[4]}\n"
        "  b = f32[32,16] parameter(1), sharding={devices=[4,1]<=[4]}\n"
        "  ROOT d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={devices=[4,1]<=[4]}\n"
        "}\n",
        4, 0);
    fx_want(&r, "windowed_dot_general_body_rs");
    fx_want(&r, "source_target_pairs={{0,3},{1,0},{2,1},{3,2}}");
    fx_want(&r, "f32[2,16] dot(");
    fx_want(&r, "f32[2,16] add(");
    fx_want_trace(&r, "reduce-scatter 4");
    fx_done(&r);
}

static void
want_count(const SpmdRun *r, const char *needle, size_t n)
{
    size_t got = fx_count(r->text.data, needle);
    if (got != n)
        fail_msg("want %zu \"%s\", got %zu in:\n%s", n, needle, got, r->text.data);
}

#define SET(...) (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)

/* [M,K] x [K,N]: lhs and output sharded on M, rhs on N (the rhs travels). */
static const char k_ag_module[] =
    "HloModule m, num_partitions=4\n"
    "ENTRY e {\n"
    "  a = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
    "  b = f32[6,16] parameter(1), sharding={devices=[1,4]<=[4]}\n"
    "  ROOT d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
    " sharding={devices=[4,1]<=[4]}\n"
    "}\n";

/* [M,K] x [K,N], K sharded on both, output sharded on M (the result travels). */
static const char k_rs_module[] =
    "HloModule m, num_partitions=4\n"
    "ENTRY e {\n"
    "  a = f32[8,32] parameter(0), sharding={devices=[1,4]<=[4]}\n"
    "  b = f32[32,16] parameter(1), sharding={devices=[4,1]<=[4]}\n"
    "  ROOT d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
    " sharding={devices=[4,1]<=[4]}\n"
    "}\n";

/* Bidirectional all-gather (E.12): the window gets a pair dim and a copy pre-shifted
 * clockwise; per trip two half-steps, each with one counter-clockwise and one clockwise
 * permute and one dot over both windows; n/4 = 1 trip (i < 2, i += 2). */
static void
test_dot_windowed_bidirectional_all_gather(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r, k_ag_module, 4, 0, SET("bidirectional_windowed_einsum=true"));
    fx_want(&r, "f32[6,1,4] reshape(");
    fx_want(&r, "(f32[2,6], f32[6,1,4], f32[2,16], f32[6,1,4], u32[])");
    fx_want(&r, "u32[] constant(2)");
    want_count(&r, "collective-permute(", 5); /* 1 before the loop, 4 per trip */
    want_count(&r, "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", 3);
    want_count(&r, "source_target_pairs={{0,3},{1,0},{2,1},{3,2}}", 2);
    want_count(&r, "f32[6,2,4] concatenate(", 2);
    want_count(&r, "f32[2,2,4] dot(", 2);
    want_count(&r, "f32[2,16] dynamic-update-slice(", 4);
    want_count(&r, "conditional(", 0);
    fx_want_trace(&r, "all-gather-bidirectional 1 384");
    fx_want_trace(&r, "dot windowed_all_gather");
    fx_done(&r);
}

/* Unrolled reduce-scatter: result and extra buffers move by -2 inside the loop (n/2 = 2
 * trips, i += 2); after the loop the result moves by +1 and the extra buffer is added. */
static void
test_dot_windowed_unrolled_reduce_scatter(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r, k_rs_module, 4, 0, SET("unroll_windowed_einsum=true"));
    fx_want(&r, "windowed_dot_general_body_rs");
    want_count(&r, "source_target_pairs={{0,2},{1,3},{2,0},{3,1}}", 2);
    want_count(&r, "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", 1);
    want_count(&r, "collective-permute(", 3);
    want_count(&r, "f32[2,16] dot(", 2);
    want_count(&r, "conditional(", 0);
    fx_want(&r, "u32[] constant(4)");
    fx_want(&r, "u32[] constant(2)");
    fx_want_trace(&r, "reduce-scatter-unrolled 2 256");
    fx_want_trace(&r, "dot windowed_reduce_scatter");
    fx_done(&r);
}

/* Bidirectional reduce-scatter: the result travels counter-clockwise, the extra buffer
 * clockwise; the sliced operand carries both slices on a pair dim (max of two padded
 * slices); after the loop the extra buffer moves by +1 and is added. */
static void
test_dot_windowed_bidirectional_reduce_scatter(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r, k_rs_module, 4, 0, SET("bidirectional_windowed_einsum=true"));
    want_count(&r, "collective-permute(", 5);
    want_count(&r, "source_target_pairs={{0,3},{1,0},{2,1},{3,2}}", 2);
    want_count(&r, "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", 3);
    want_count(&r, "f32[2,2,8] maximum(", 2);
    want_count(&r, "f32[2,2,16] dot(", 2);
    fx_want(&r, "f32[] constant(-inf)");
    fx_want(&r, "u32[] constant(3)"); /* ccw id = i + p + n/2 + 1 */
    fx_want_trace(&r, "reduce-scatter-bidirectional 1 512");
    fx_done(&r);
}

/* partial_windowed_einsum (E.5 #4): lhs [2,4,1] over 8 devices, the output leaves lhs dim 1
 * unsharded: a 4-step loop in two independent rings, data ids mod 8, offsets on dim 1 only. */
static void
test_dot_partial_windowed(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r,
             "HloModule m, num_partitions=8\n"
             "ENTRY e {\n"
             "  a = f32[8,16,12] parameter(0), sharding={devices=[2,4,1]<=[8]}\n"
             "  b = f32[12,8] parameter(1), sharding={devices=[1,4,2]<=[2,4]T(1,0)"
             " last_tile_dim_replicate}\n"
             "  ROOT d = f32[8,16,8] dot(a, b), lhs_contracting_dims={2},"
             " rhs_contracting_dims={0}, sharding={devices=[2,1,4]<=[8]}\n"
             "}\n",
             8, 0, SET("partial_windowed_einsum=true"));
    fx_want(&r, "source_target_pairs={{0,3},{1,0},{2,1},{3,2},{4,7},{5,4},{6,5},{7,6}}");
    fx_want(&r, "s32[8] constant({0, 4, 8, 12, 0, 4, 8, 12})");
    fx_want(&r, "u32[] constant(8)");
    fx_want(&r, "(f32[4,4,12], f32[12,2], f32[4,16,2], f32[4,16,2], u32[])");
    fx_want_trace(&r, "all-gather-partial 4");
    fx_want_trace(&r, "dot windowed_all_gather_partial");
    fx_done(&r);
}

/* Two dots share the lhs, which the first one's all-gather loop already windows: with
 * disable_ag_rewrite_for_multiple_consumers the second dot gathers it instead. */
static void
test_dot_disable_ag_rewrite(void **state)
{
    (void)state;
    static const char hlo[] =
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  a = f32[2,8,16] parameter(0), sharding={devices=[1,4,1]<=[4]}\n"
        "  b = f32[16,32] parameter(1), sharding={devices=[1,4]<=[4]}\n"
        "  c = f32[16,32] parameter(2), sharding={devices=[1,4]<=[4]}\n"
        "  d1 = f32[2,8,32] dot(a, b), lhs_contracting_dims={2}, rhs_contracting_dims={0},"
        " sharding={devices=[1,1,4]<=[4]}\n"
        "  d2 = f32[2,8,32] dot(a, c), lhs_contracting_dims={2}, rhs_contracting_dims={0},"
        " sharding={devices=[1,1,4]<=[4]}\n"
        "  ROOT s = f32[2,8,32] add(d1, d2), sharding={devices=[1,1,4]<=[4]}\n"
        "}\n";
    SpmdRun r;
    fx_run_with(&r, hlo, 4, 0,
             SET("disable_ag_rewrite_for_multiple_consumers=true",
                 "skip_checking_windowed_einsum_users=true"));
    want_count(&r, " while(", 1);
    want_count(&r, "all-gather(", 1);
    fx_want_trace(&r, "d2 dot no_windowed_einsum");
    fx_done(&r);
    fx_run_with(&r, hlo, 4, 0, SET("skip_checking_windowed_einsum_users=true"));
    want_count(&r, " while(", 2);
    fx_done(&r);
}

/* The users check: another user wants the rhs replicated, as the loop would gather it, so
 * the all-gather is shared and no loop is built unless the check is skipped. */
static void
test_dot_windowed_users_check(void **state)
{
    (void)state;
    static const char hlo[] =
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  a = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
        "  b = f32[6,16] parameter(1), sharding={devices=[1,4]<=[4]}\n"
        "  d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={devices=[4,1]<=[4]}\n"
        "  n = f32[6,16] negate(b), sharding={replicated}\n"
        "  ROOT t = (f32[8,16], f32[6,16]) tuple(d, n), sharding={{devices=[4,1]<=[4]},"
        " {replicated}}\n"
        "}\n";
    SpmdRun r;
    fx_run(&r, hlo, 4, 0);
    want_count(&r, " while(", 0);
    fx_done(&r);
    fx_run_with(&r, hlo, 4, 0, SET("skip_checking_windowed_einsum_users=true"));
    want_count(&r, " while(", 1);
    fx_done(&r);
}

/* total_bytes_windowed_einsum_threshold is in bytes and, when set (even to 0), replaces the
 * MiB threshold with |lhs| + |rhs| of the source dot (here 192 + 384 bytes). */
static void
test_dot_total_bytes_threshold(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r, k_ag_module, 4, 256, SET("total_bytes_windowed_einsum_threshold=576"));
    want_count(&r, " while(", 1);
    fx_done(&r);
    fx_run_with(&r, k_ag_module, 4, 0, SET("total_bytes_windowed_einsum_threshold=577"));
    want_count(&r, " while(", 0);
    fx_done(&r);
}

/* Contracting dims sharded in groups {0..3},{4..7} while the output's replication groups are
 * {0,1,4,5},{2,3,6,7}: the inner dot is sharded over the replication dim inside the
 * contracting groups, all-reduced, then moved to the output's devices by a permute. */
static void
test_dot_contracting_regroup_output(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=8\n"
        "ENTRY e {\n"
        "  a = f32[24,100] parameter(0), sharding={devices=[1,2,4]<=[8] last_tile_dim_replicate}\n"
        "  b = f32[32,100] parameter(1), sharding={devices=[1,2,4]<=[8] last_tile_dim_replicate}\n"
        "  ROOT d = f32[24,32] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1},"
        " sharding={devices=[1,2,4]<=[8] last_tile_dim_replicate}\n"
        "}\n",
        8, 256);
    fx_want(&r, "f32[24,16] dot(");
    fx_want(&r, "f32[24,16] all-reduce(");
    fx_want(&r, "f32[24,16] collective-permute(");
    fx_want_trace(&r, "dot group_on_contracting");
    fx_done(&r);
}

/* A convolution sharded on batch (input batch = lhs non-contracting role): no communication. */
static void
test_conv_batch(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=2\n"
        "ENTRY e {\n"
        "  a = f32[8,16,16,4] parameter(0), sharding={devices=[2,1,1,1]<=[2]}\n"
        "  b = f32[3,3,4,8] parameter(1), sharding={replicated}\n"
        "  ROOT c = f32[8,16,16,8] convolution(a, b), window={size=3x3 pad=1_1x1_1},"
        " dim_labels=b01f_01io->b01f, sharding={devices=[2,1,1,1]<=[2]}\n"
        "}\n",
        2, 256);
    fx_want_no_collectives(&r);
    fx_want(&r, "f32[4,16,16,8] convolution(");
    fx_want_trace(&r, "convolution lhs_matches_output_replicate_rhs");
    fx_done(&r);
}

/* Output tiled on a spatial dim (F.1 case 0 rule 3): one-element halos from each neighbour,
 * masked at the edges, rhs replicated, no all-reduce. */
static void
test_conv_spatial_halo(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=2\n"
        "ENTRY e {\n"
        "  a = f32[8,16,16,4] parameter(0), sharding={devices=[1,2,1,1]<=[2]}\n"
        "  b = f32[3,3,4,8] parameter(1), sharding={replicated}\n"
        "  ROOT c = f32[8,16,16,8] convolution(a, b), window={size=3x3 pad=1_1x1_1},"
        " dim_labels=b01f_01io->b01f, sharding={devices=[1,2,1,1]<=[2]}\n"
        "}\n",
        2, 256);
    fx_want(&r, "f32[8,1,16,4] collective-permute(%slice), channel_id=1, "
             "source_target_pairs={{0,1}}");
    fx_want(&r, "source_target_pairs={{1,0}}");
    fx_want(&r, "f32[8,10,16,4] concatenate(");
    fx_want(&r, "f32[8,8,16,8] convolution(%select, %b.1), window={size=3x3 pad=0_0x1_1}");
    assert_int_equal(fx_count(r.text.data, "collective-permute("), 2);
    assert_null(strstr(r.text.data, "all-reduce("));
    assert_null(strstr(r.text.data, "all-gather("));
    fx_want_trace(&r, "convolution conv_output_spatial_halo");
    fx_done(&r);
}

/* Both operands tiled on the spatial dim (F.1 case 0 rule 2, halo on the lhs): lhs halos of
 * one element each way, the local kernel slice as the window, and an all-reduce of the
 * partial full-size results over both devices. */
static void
test_conv_halo_on_lhs(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=2\n"
        "ENTRY e {\n"
        "  lhs = f32[2,8,8,4] parameter(0), sharding={devices=[1,2,1,1]<=[2]}\n"
        "  rhs = f32[2,8,8,3] parameter(1), sharding={devices=[1,2,1,1]<=[2]}\n"
        "  ROOT conv = f32[3,3,4,3] convolution(lhs, rhs), window={size=8x8 pad=1_1x1_1},"
        " dim_labels=f01b_i01o->01bf, sharding={replicated}\n"
        "}\n",
        2, 256);
    fx_want(&r, "f32[2,1,8,4] collective-permute(%slice), channel_id=1, "
             "source_target_pairs={{0,1}}");
    fx_want(&r, "f32[2,1,8,4] collective-permute(%slice.1), channel_id=2, "
             "source_target_pairs={{1,0}}");
    fx_want(&r, "f32[2,6,8,4] concatenate(%collective-permute, %lhs.1, %collective-permute.1)");
    fx_want(&r, "f32[3,3,4,3] convolution(%concatenate, %rhs.1), window={size=4x8 pad=0_0x1_1}");
    fx_want(&r, "f32[3,3,4,3] all-reduce(%conv.1), channel_id=3, replica_groups=[1,2]<=[2]");
    assert_int_equal(fx_count(r.text.data, "collective-permute("), 2);
    assert_null(strstr(r.text.data, "all-gather("));
    fx_want_trace(&r, "convolution conv_halo_on_lhs");
    fx_done(&r);
}

/* Window reversal with an uneven, reverse-ordered kernel: the kernel's padding moves to the
 * left (one collective-permute from device 1 to 0), both operands are masked, and the
 * partial results are all-reduced. */
static void
test_conv_halo_window_reversal(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=2\n"
        "ENTRY e {\n"
        "  lhs = f32[5,4,3] parameter(0), sharding={devices=[2,1,1]<=[2]}\n"
        "  rhs = f32[5,4,6] parameter(1), sharding={devices=[2,1,1]1,0}\n"
        "  ROOT conv = f32[1,3,6] convolution(lhs, rhs), window={size=5 rhs_reversal=1},"
        " dim_labels=0fb_0io->0bf, sharding={replicated}\n"
        "}\n",
        2, 256);
    fx_want(&r, "f32[1,4,6] collective-permute(%slice), channel_id=1, "
             "source_target_pairs={{1,0}}");
    fx_want(&r, "f32[3,4,6] concatenate(%collective-permute, %slice.1), dimensions={0}");
    fx_want(&r, "f32[3,4,3] select(");
    fx_want(&r, "f32[3,4,6] select(");
    fx_want(&r, "f32[1,3,6] convolution(%select, %select.1), window={size=3 rhs_reversal=1}");
    fx_want(&r, "f32[1,3,6] all-reduce(%conv.1), channel_id=2, replica_groups={{0,1}}");
    assert_int_equal(fx_count(r.text.data, "collective-permute("), 1);
    fx_want_trace(&r, "convolution conv_halo_on_lhs");
    fx_done(&r);
}

/* Partially replicated operands tiled on the spatial dim: the partial results are summed
 * only over the devices holding different pieces ({0,2} and {1,3}), never twice. */
static void
test_conv_halo_partial_replication(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  lhs = f32[2,8,8,4] parameter(0),"
        " sharding={devices=[1,2,1,1,2]<=[4] last_tile_dim_replicate}\n"
        "  rhs = f32[2,8,8,3] parameter(1),"
        " sharding={devices=[1,2,1,1,2]<=[4] last_tile_dim_replicate}\n"
        "  ROOT conv = f32[3,3,4,3] convolution(lhs, rhs), window={size=8x8 pad=1_1x1_1},"
        " dim_labels=f01b_i01o->01bf, sharding={replicated}\n"
        "}\n",
        4, 256);
    fx_want(&r, "source_target_pairs={{0,2},{1,3}}");
    fx_want(&r, "source_target_pairs={{2,0},{3,1}}");
    fx_want(&r, "f32[3,3,4,3] all-reduce(%conv.1), channel_id=3, replica_groups=[2,2]<=[2,2]T(1,0)");
    fx_want_trace(&r, "convolution conv_halo_on_lhs");
    fx_done(&r);
}

/* Feature-grouped convolution, lhs groups 4-way (partially replicated), rhs 2-way: no
 * device grouping matches, so the conv is partitioned on the group dim as the lhs has it
 * (rhs aligned), then moved to the output's 2-way sharding (collective-permute +
 * all-gather). */
static void
test_conv_feature_group_partial(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=8\n"
        "ENTRY e {\n"
        "  lhs = f32[4,275,16] parameter(0),"
        " sharding={devices=[1,1,4,2]<=[8] last_tile_dim_replicate}\n"
        "  rhs = f32[1,275,16] parameter(1),"
        " sharding={devices=[1,1,2,4]<=[8] last_tile_dim_replicate}\n"
        "  ROOT c = f32[5,4,16] convolution(lhs, rhs), window={size=275 pad=2_2},"
        " dim_labels=b0f_i0o->0bf, feature_group_count=16,"
        " sharding={devices=[1,1,2,4]<=[2,4]T(1,0) last_tile_dim_replicate}\n"
        "}\n",
        8, 256);
    fx_want(&r, "f32[1,275,4] ");
    fx_want(&r, "f32[5,4,4] convolution(");
    fx_want(&r, "feature_group_count=4");
    fx_want(&r, "f32[5,4,4] collective-permute(%c.1)");
    fx_want(&r, "f32[5,4,8] all-gather(%collective-permute");
    fx_want_trace(&r, "convolution grouped_conv_on_group_dim");
    fx_done(&r);
}

/* conv_halo_exchange_always_on_lhs=false (F.1 case 0 rule 2, halo on the rhs): the kernel
 * gets (WC-1)*stride - pl = 1 element from the left neighbour and pl = 1 from the right, and
 * slides over the unchanged lhs shard with 2 low and 2 high padding; partials all-reduced. */
static void
test_conv_halo_on_rhs(void **state)
{
    (void)state;
    static const char *const sets[] = {"conv_halo_exchange_always_on_lhs=false"};
    SpmdRun r;
    fx_run_with(&r,
             "HloModule m, num_partitions=2\n"
             "ENTRY e {\n"
             "  lhs = f32[2,8,8,4] parameter(0), sharding={devices=[1,2,1,1]<=[2]}\n"
             "  rhs = f32[2,8,8,3] parameter(1), sharding={devices=[1,2,1,1]<=[2]}\n"
             "  ROOT conv = f32[3,3,4,3] convolution(lhs, rhs), window={size=8x8 pad=1_1x1_1},"
             " dim_labels=f01b_i01o->01bf, sharding={replicated}\n"
             "}\n",
             2, 256, sets, 1);
    fx_want(&r, "f32[2,1,8,3] collective-permute(%slice), channel_id=1, "
             "source_target_pairs={{0,1}}");
    fx_want(&r, "f32[2,1,8,3] collective-permute(%slice.1), channel_id=2, "
             "source_target_pairs={{1,0}}");
    fx_want(&r, "f32[2,6,8,3] concatenate(%collective-permute, %rhs.1, %collective-permute.1)");
    fx_want(&r, "f32[3,3,4,3] convolution(%lhs.1, %concatenate), window={size=6x8 pad=2_2x1_1}");
    fx_want(&r, "f32[3,3,4,3] all-reduce(%conv.1), channel_id=3, replica_groups=[1,2]<=[2]");
    assert_int_equal(fx_count(r.text.data, "collective-permute("), 2);
    assert_null(strstr(r.text.data, "all-gather("));
    fx_want_trace(&r, "convolution conv_halo_on_rhs");
    fx_done(&r);
}

/* Window dilation on the rhs-halo path: halos ceil((i*(R*D - L) + (WC-1)*st - pl) / D) = 2, 1
 * on the left and ceil(((i+1)*(L - R*D) + pl) / D) = 1, 2 on the right; shard 0's window is
 * grown to 5 so it reaches tap 2, and the per-shard low padding 5 - i is applied by padding
 * the lhs by 5 and dynamic-slicing. */
static void
test_conv_halo_on_rhs_dilated(void **state)
{
    (void)state;
    static const char *const sets[] = {"conv_halo_exchange_always_on_lhs=false"};
    SpmdRun r;
    fx_run_with(&r,
             "HloModule m, num_partitions=2\n"
             "ENTRY e {\n"
             "  lhs = f32[2,9,8,4] parameter(0), sharding={devices=[1,2,1,1]<=[2]}\n"
             "  rhs = f32[2,4,8,3] parameter(1), sharding={devices=[1,2,1,1]<=[2]}\n"
             "  ROOT conv = f32[5,1,4,3] convolution(lhs, rhs), window={size=4x8 pad=1_1x0_0"
             " rhs_dilate=2x1}, dim_labels=f01b_i01o->01bf, sharding={replicated}\n"
             "}\n",
             2, 256, sets, 1);
    fx_want(&r, "f32[2,1,8,3] collective-permute(%slice), channel_id=1, "
             "source_target_pairs={{0,1}}");
    fx_want(&r, "f32[2,1,8,3] collective-permute(%slice.1), channel_id=2, "
             "source_target_pairs={{1,0}}");
    fx_want(&r, "f32[2,4,8,3] concatenate(%collective-permute, %rhs.1, %collective-permute.1)");
    fx_want(&r, "f32[2,15,8,4] pad(%select, %constant.2), padding=0_0x5_5x0_0x0_0");
    fx_want(&r, "f32[2,5,8,3] dynamic-slice(%pad.1, ");
    fx_want(&r, "f32[5,1,4,3] convolution(%dynamic-slice.2, %dynamic-slice.4), "
             "window={size=5x8 pad=0_3x0_0 rhs_dilate=2x1}");
    fx_want(&r, "f32[5,1,4,3] all-reduce(%conv.1), channel_id=3, replica_groups=[1,2]<=[2]");
    fx_want_trace(&r, "convolution conv_halo_on_rhs");
    fx_done(&r);
}

/* Both operands split 2 ways on different contracting dims (E.8 with equal contracting
 * counts): the smaller lhs is re-tiled to the rhs's per-dim counts (one all-to-all), then
 * one all-reduce of the partial products. */
static void
test_dot_contracting_retile(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=2\n"
        "ENTRY e {\n"
        "  lhs = f32[4,6] parameter(0), sharding={devices=[1,2]<=[2]}\n"
        "  rhs = f32[4,6,32] parameter(1), sharding={devices=[2,1,1]<=[2]}\n"
        "  ROOT d = f32[32] dot(lhs, rhs), lhs_contracting_dims={0,1},"
        " rhs_contracting_dims={0,1}, sharding={replicated}\n"
        "}\n",
        2, 256);
    fx_want(&r, "f32[2,2,3] all-to-all(%reshape), channel_id=1, replica_groups=[1,2]<=[2], "
             "dimensions={0}");
    fx_want(&r, "f32[32] dot(%reshape.1, %rhs.1), lhs_contracting_dims={0,1}");
    fx_want(&r, "f32[32] all-reduce(%d.1), channel_id=2, replica_groups=[1,2]<=[2]");
    assert_int_equal(fx_count(r.text.data, "all-to-all("), 1);
    assert_int_equal(fx_count(r.text.data, "all-reduce("), 1);
    fx_want_trace(&r, "dot group_on_contracting");
    fx_done(&r);
}

/* E.7 with the other operand grouped on the tile dims whose device groups coincide with the
 * output's (FindMatchingPartitionedDimsForGrouping: a data dim plus the replication dim): the
 * kernel is gathered on its output-feature dim only, then the contracting groups inside each
 * group give one all-reduce and a dynamic-slice. */
static void
test_conv_non_contracting_matching_dims(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=8\n"
        "ENTRY e {\n"
        "  lhs = f32[8,6,2,5] parameter(0), sharding={devices=[4,1,2,1]<=[8]}\n"
        "  rhs = f32[2,5,4,1] parameter(1), sharding={devices=[2,1,2,1,2]<=[4,2]T(1,0)"
        " last_tile_dim_replicate}\n"
        "  ROOT conv = f32[8,6,4,1] convolution(lhs, rhs), window={size=1x2},"
        " dim_labels=0b1f_1io0->0bf1, sharding={devices=[4,1,2,1]<=[8]}\n"
        "}\n",
        8, 256);
    fx_want(&r, "f32[1,5,4,1] all-gather(%rhs.1), channel_id=1, "
             "replica_groups=[4,2]<=[2,2,2]T(2,1,0), dimensions={2}");
    fx_want(&r, "f32[2,6,4,1] convolution(%lhs.1, %all-gather), window={size=1x1}");
    fx_want(&r, "f32[2,6,4,1] all-reduce(%conv.1), channel_id=2, "
             "replica_groups={{0,1},{2,3},{4,5},{6,7}}");
    fx_want(&r, "f32[2,6,2,1] dynamic-slice(%all-reduce, ");
    assert_int_equal(fx_count(r.text.data, "all-gather("), 1);
    fx_want_trace(&r, "convolution group_on_non_contracting");
    fx_want_trace(&r, "convolution group_on_contracting");
    fx_done(&r);
}

/* E.8 with the output sharded on a dim every contracting group agrees on: the inner creator
 * all-reduces and slices each local product (a reduce-scatter on the batch-sharded local
 * result), and only the sliced result is all-to-all'ed to the output sharding. */
static void
test_dot_contracting_sliced_output(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  lhs = f32[4,4,6] parameter(0), sharding={devices=[2,1,2]<=[4]}\n"
        "  rhs = f32[4,6,8] parameter(1), sharding={devices=[2,2,1]<=[4]}\n"
        "  ROOT d = f32[4,4,8] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
        " lhs_contracting_dims={2}, rhs_contracting_dims={1}, sharding={devices=[1,2,2]<=[4]}\n"
        "}\n",
        4, 256);
    fx_want(&r, "f32[2,4,8] dot(%lhs.1, %rhs.1)");
    fx_want(&r, "f32[2,4,8] all-reduce(%d.1), channel_id=1, replica_groups=[2,2]<=[4]");
    fx_want(&r, "u32[4] constant({0, 1, 0, 1})"); /* in-group slice: group id, then offset */
    fx_want(&r, "s32[2] constant({0, 4})");
    fx_want(&r, "f32[2,4,4] dynamic-slice(%all-reduce, %constant, %constant, %reshape.1)");
    fx_want(&r, "f32[2,2,2,4] all-to-all(%reshape.2), channel_id=2, replica_groups={{0,2},{1,3}}, "
             "dimensions={1}");
    assert_int_equal(fx_count(r.text.data, "all-reduce("), 1);
    fx_want_trace(&r, "dot group_on_contracting");
    fx_done(&r);
}

/* choose_faster_windowed_einsum_over_mem with both operands matching the output on free dims:
 * only matching the lhs gives the per-group problem a windowed loop (2 iterations; the rhs
 * side has none), so the lhs is matched, the rhs is gathered on its contracting dim where it
 * is (no collective-permute first), and the loop runs inside each group. */
static void
test_dot_non_contracting_match_by_iterations(void **state)
{
    (void)state;
    static const char *const sets[] = {"choose_faster_windowed_einsum_over_mem=true"};
    SpmdRun r;
    fx_run_with(&r,
             "HloModule m, num_partitions=8\n"
             "ENTRY e {\n"
             "  a = f32[8,4,16] parameter(0), sharding={devices=[4,1,2]<=[8]}\n"
             "  b = f32[16,32] parameter(1), sharding={devices=[2,2,2]<=[2,4]T(1,0)"
             " last_tile_dim_replicate}\n"
             "  ROOT d = f32[8,4,32] dot(a, b), lhs_contracting_dims={2},"
             " rhs_contracting_dims={0}, sharding={devices=[4,1,2]<=[8]}\n"
             "}\n",
             8, 0, sets, 1);
    fx_want(&r, "f32[16,16] all-gather(%b.1), channel_id=1, replica_groups=[4,2]<=[4,2]T(1,0), "
             "dimensions={0}");
    fx_want(&r, "(f32[2,4,8], f32[16,16], f32[2,4,16], f32[2,4,16], u32[]) while(%tuple), "
             "condition=%windowed_dot_general_cond_ag");
    fx_want(&r, "f32[2,4,8] collective-permute(%param.2), channel_id=2, "
             "source_target_pairs={{0,1},{1,0},{2,3},{3,2},{4,5},{5,4},{6,7},{7,6}}");
    assert_int_equal(fx_count(r.text.data, "all-gather("), 1);
    assert_int_equal(fx_count(r.text.data, "collective-permute("), 1);
    fx_want_trace(&r, "dot non_contracting_match_lhs");
    fx_want_trace(&r, "dot group_on_non_contracting");
    fx_done(&r);
}

/* A reduce (through a multiply by a broadcast) consuming a windowed all-gather loop's result
 * moves into the loop: the state's element 2 becomes (2, 0, f32[4,40] buffer), each of the two
 * unrolled steps reduces its own f32[4,3,20] window and writes f32[4,20] into the buffer; the
 * padded 39 -> 40 column is sliced off after the loop, before the one all-reduce. */
#define REDUCE_AFTER_LOOP(OUT, DIMS)                                                           \
    "HloModule m, num_partitions=2\n"                                                         \
    "sum {\n"                                                                                 \
    "  a = f32[] parameter(0)\n"                                                              \
    "  b = f32[] parameter(1)\n"                                                              \
    "  ROOT add = f32[] add(a, b)\n"                                                          \
    "}\n"                                                                                     \
    "ENTRY e {\n"                                                                             \
    "  lhs = f32[4,6,8,4] parameter(0), sharding={devices=[1,2,1,1]<=[2]}\n"                  \
    "  rhs = f32[4,39,8,4] parameter(1), sharding={devices=[1,2,1,1]<=[2]}\n"                 \
    "  dot = f32[4,6,39] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"               \
    " lhs_contracting_dims={2,3}, rhs_contracting_dims={2,3}, sharding={devices=[1,2,1]<=[2]}\n" \
    "  zero = f32[] constant(0)\n"                                                            \
    "  two = f32[] constant(2)\n"                                                             \
    "  bc = f32[4,6,39] broadcast(two), dimensions={}, sharding={devices=[1,2,1]<=[2]}\n"     \
    "  mul = f32[4,6,39] multiply(dot, bc), sharding={devices=[1,2,1]<=[2]}\n"                \
    "  ROOT r = " OUT " reduce(mul, zero), dimensions={" DIMS "}, to_apply=sum,"               \
    " sharding={replicated}\n"                                                                \
    "}\n"

static void
test_dot_windowed_reduce_moved_into_loop(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run_with(&r, REDUCE_AFTER_LOOP("f32[4,39]", "1"), 2, 0, SET("unroll_windowed_einsum=true"));
    fx_want(&r, "(f32[4,3,8,4], f32[4,20,8,4], (f32[], f32[], f32[4,40]), f32[4,3,40], u32[]) "
                "while(");
    fx_want(&r, "(f32[], f32[], f32[4,40]) tuple(");
    want_count(&r, "f32[4,40] broadcast(", 1);   /* the zero buffer, before the loop */
    want_count(&r, "f32[4,3,40] broadcast(", 2); /* the loop buffer, the 2.0 inside */
    want_count(&r, "f32[4,3,20] dynamic-slice(", 2);
    want_count(&r, "f32[4,3,20] multiply(", 2);
    want_count(&r, "f32[4,20] reduce(", 2);
    want_count(&r, "f32[4,40] dynamic-update-slice(", 2);
    want_count(&r, "f32[4,3,40] dynamic-update-slice(", 0); /* the result chain is gone */
    want_count(&r, "] reduce(", 2);                         /* none left outside the loop */
    fx_want(&r, "f32[4,39] slice(");
    want_count(&r, "all-reduce(", 1);
    fx_want(&r, "ROOT %all-reduce = f32[4,39] all-reduce(");
    fx_want(&r, "replica_groups=[1,2]<=[2]");
    want_count(&r, "collective-permute(", 2);
    want_count(&r, "source_target_pairs={{0,1},{1,0}}", 2);
    assert_int_equal(r.trace.n_windowed_loops, 1);
    fx_done(&r);
}

/* Reducing the windowed (padded) dim: each window's columns past 39 are masked with the init
 * value (iota + offset < 39) and every trip adds its f32[4,3] partial to the buffer. */
static void
test_dot_windowed_reduce_moved_accumulates(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r, REDUCE_AFTER_LOOP("f32[4,6]", "2"), 2, 0);
    fx_want(&r, "(f32[4,3,8,4], f32[4,20,8,4], (f32[], f32[], f32[4,3]), f32[4,3,40], u32[]) "
                "while(");
    fx_want(&r, "s32[4,3,20] iota(), iota_dimension=2");
    fx_want(&r, "s32[] constant(39)");
    fx_want(&r, "pred[4,3,20] compare(");
    fx_want(&r, "f32[4,3,20] select(");
    want_count(&r, "f32[4,3] reduce(", 1);
    want_count(&r, "f32[4,3] add(", 1);
    want_count(&r, "dynamic-update-slice(", 0);
    want_count(&r, "all-gather(", 1);
    fx_want(&r, "ROOT %all-gather = f32[4,6] all-gather(");
    fx_done(&r);
}

/* ---- unreduced outputs and whole-role non-contracting grouping ---- */

#define UNREDUCED_DOT(OUT_SHARDING)                                                            \
    "HloModule m, num_partitions=4\n"                                                          \
    "ENTRY e {\n"                                                                              \
    "  x = f32[6,64] parameter(0), sharding={devices=[1,4]<=[4]}\n"                            \
    "  y = f32[64,10] parameter(1), sharding={devices=[4,1]<=[4]}\n"                           \
    "  d = f32[6,10] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0},"           \
    " sharding=" OUT_SHARDING "\n"                                                             \
    "  ROOT n = f32[6,10] negate(d), sharding=" OUT_SHARDING "\n"                              \
    "}\n"

/* K sharded four ways: a replicated output sums the partial products, an unreduced one keeps
 * them (the local dot is tagged and its all-reduce skipped). */
static void
test_dot_unreduced_output_keeps_partial_sums(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r, UNREDUCED_DOT("{replicated}"), 4, 256);
    want_count(&r, "all-reduce(", 1);
    fx_want(&r, "replica_groups=[1,4]<=[4]");
    fx_done(&r);

    fx_run(&r, UNREDUCED_DOT("{unreduced}"), 4, 256);
    fx_want_no_collectives(&r);
    want_count(&r, "all-reduce(", 0);
    fx_want(&r, "%d.1 = f32[6,10] dot(%x.1, %y.1)");
    fx_want(&r, "ROOT %n.1 = f32[6,10] negate(%d.1)");
    fx_want_trace(&r, "dot group_on_contracting");
    fx_done(&r);
}

/* An unreduced subgroup over the devices that split K: it becomes part of the replication
 * subgroup, the local dot is the result and nothing is resharded or reduced. */
static void
test_dot_unreduced_subgroup_output(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=8\n"
        "ENTRY e {\n"
        "  x = f32[8,40] parameter(0),"
        " sharding={devices=[2,2,2]<=[2,2,2]T(2,0,1) last_tile_dim_replicate}\n"
        "  y = f32[40,12] parameter(1), sharding={devices=[2,2,2]<=[8] last_tile_dim_replicate}\n"
        "  ROOT d = f32[8,12] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dims={unreduced}}\n"
        "}\n",
        8, 256);
    fx_want_no_collectives(&r);
    want_count(&r, "all-reduce(", 0);
    want_count(&r, "dynamic-slice(", 0);
    fx_want(&r, "ROOT %d.1 = f32[4,6] dot(%x.1, %y.1)");
    fx_done(&r);
}

#define UNREDUCED_AND_REPLICATED_DOT(OUT_SHARDING)                                             \
    "HloModule m, num_partitions=16\n"                                                         \
    "ENTRY e {\n"                                                                              \
    "  x = f32[12,48] parameter(0), sharding={devices=[2,2,4]<=[16] last_tile_dim_replicate}\n" \
    "  y = f32[20,48] parameter(1),"                                                           \
    " sharding={devices=[2,2,4]<=[2,2,2,2]T(2,1,3,0) last_tile_dim_replicate}\n"               \
    "  ROOT d = f32[12,20] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={1},"     \
    " sharding=" OUT_SHARDING "\n"                                                             \
    "}\n"

/* Both operands replicate over devices that the output groups split across: each group of
 * the nested non-contracting groupings takes its share of the replicas where they are (no
 * gather), and only the K split is left; summed over it for a partially replicated output,
 * kept for an unreduced subgroup next to the replicated one. */
static void
test_dot_replicas_assigned_to_groups(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
           UNREDUCED_AND_REPLICATED_DOT(
               "{devices=[2,2,4]<=[2,2,2,2]T(0,2,1,3) last_tile_dim_replicate}"),
           16, 256);
    want_count(&r, "all-gather(", 0);
    want_count(&r, "collective-permute(", 0);
    fx_want(&r, "%d.1 = f32[6,10] dot(%x.1, %y.1)");
    want_count(&r, "all-reduce(", 1);
    fx_want(&r, "ROOT %all-reduce = f32[6,10] all-reduce(%d.1)");
    fx_want(&r, "replica_groups={{0,4},{1,5},{8,12},{9,13},{2,6},{3,7},{10,14},{11,15}}");
    fx_done(&r);

    fx_run(&r,
           UNREDUCED_AND_REPLICATED_DOT(
               "{devices=[2,2,2,2]<=[2,2,2,2]T(0,2,1,3) last_tile_dims={unreduced, replicated}}"),
           16, 256);
    fx_want_no_collectives(&r);
    want_count(&r, "all-reduce(", 0);
    fx_want(&r, "ROOT %d.1 = f32[6,10] dot(%x.1, %y.1)");
    fx_done(&r);
}

/* Grouping on M (the lhs matches the output), the rhs replicas cannot be shared out among the
 * M groups as they lie (each group holds one N half twice), but can once its N split and its
 * replication swap device axes: the rhs moves there by one collective-permute instead of being
 * gathered and sliced. */
static void
test_dot_other_operand_swapped_into_groups(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=4\n"
        "ENTRY e {\n"
        "  x = f32[8,64] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
        "  y = f32[64,4] parameter(1), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n"
        "  ROOT d = f32[8,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={devices=[2,2]<=[4]}\n"
        "}\n",
        4, 256);
    want_count(&r, "collective-permute(", 1);
    fx_want(&r, "f32[64,2] collective-permute(%y.1)");
    fx_want(&r, "source_target_pairs={{0,0},{1,2},{2,1},{3,3}}");
    want_count(&r, "all-gather(", 0);
    want_count(&r, "dynamic-slice(", 0);
    want_count(&r, "all-reduce(", 0);
    fx_want(&r, "ROOT %d.1 = f32[4,2] dot(%x.1, %collective-permute)");
    fx_want_trace(&r, "dot group_on_non_contracting");
    fx_done(&r);
}

/* The rhs's free dims are split 2 ways in total like the output's, but on N2 where the output
 * splits N1: grouping on all of them re-tiles the rhs (an all-to-all moves the split to N1);
 * inside the groups the rhs is resharded to what the lhs implies for it (K 2 ways instead of
 * 4: an all-gather), and the contraction stays partitioned (one all-reduce over K). */
static void
test_dot_non_contracting_whole_role_regroup(void **state)
{
    (void)state;
    SpmdRun r;
    fx_run(&r,
        "HloModule m, num_partitions=8\n"
        "ENTRY e {\n"
        "  x = f32[16,32] parameter(0), sharding={devices=[2,2,2]<=[8] last_tile_dim_replicate}\n"
        "  y = f32[32,8,24] parameter(1), sharding={devices=[4,1,2]<=[2,2,2]T(1,0,2)}\n"
        "  ROOT d = f32[16,8,24] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={devices=[2,2,1,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}\n"
        "}\n",
        8, 256);
    want_count(&r, "all-to-all(", 1);
    fx_want(&r, "f32[8,2,4,12] all-to-all(");
    fx_want(&r, "replica_groups=[4,2]<=[2,2,2]T(1,0,2), dimensions={1}");
    fx_want(&r, "f32[8,4,24] reshape(");
    want_count(&r, "all-gather(", 1);
    fx_want(&r, "f32[16,4,24] all-gather(");
    fx_want(&r, "replica_groups={{0,4},{2,6},{1,5},{3,7}}, dimensions={0}");
    fx_want(&r, "f32[8,4,24] dot(%x.1, %all-gather)");
    want_count(&r, "all-reduce(", 1);
    fx_want(&r, "ROOT %all-reduce = f32[8,4,24] all-reduce(");
    fx_want(&r, "replica_groups={{0,2},{4,6},{1,3},{5,7}}");
    want_count(&r, "collective-permute(", 0);
    fx_want_trace(&r, "dot group_on_non_contracting");
    fx_done(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_batch_sharded),
        cmocka_unit_test(test_dot_contracting_sharded),
        cmocka_unit_test(test_dot_contracting_groups),
        cmocka_unit_test(test_dot_lhs_matches_output),
        cmocka_unit_test(test_dot_windowed_all_gather),
        cmocka_unit_test(test_dot_windowed_reduce_scatter),
        cmocka_unit_test(test_dot_windowed_bidirectional_all_gather),
        cmocka_unit_test(test_dot_windowed_unrolled_reduce_scatter),
        cmocka_unit_test(test_dot_windowed_bidirectional_reduce_scatter),
        cmocka_unit_test(test_dot_partial_windowed),
        cmocka_unit_test(test_dot_disable_ag_rewrite),
        cmocka_unit_test(test_dot_windowed_users_check),
        cmocka_unit_test(test_dot_total_bytes_threshold),
        cmocka_unit_test(test_dot_contracting_regroup_output),
        cmocka_unit_test(test_conv_batch),
        cmocka_unit_test(test_conv_spatial_halo),
        cmocka_unit_test(test_conv_halo_on_lhs),
        cmocka_unit_test(test_conv_halo_window_reversal),
        cmocka_unit_test(test_conv_halo_partial_replication),
        cmocka_unit_test(test_conv_feature_group_partial),
        cmocka_unit_test(test_conv_halo_on_rhs),
        cmocka_unit_test(test_conv_halo_on_rhs_dilated),
        cmocka_unit_test(test_dot_contracting_retile),
        cmocka_unit_test(test_conv_non_contracting_matching_dims),
        cmocka_unit_test(test_dot_contracting_sliced_output),
        cmocka_unit_test(test_dot_non_contracting_match_by_iterations),
        cmocka_unit_test(test_dot_windowed_reduce_moved_into_loop),
        cmocka_unit_test(test_dot_windowed_reduce_moved_accumulates),
        cmocka_unit_test(test_dot_unreduced_output_keeps_partial_sums),
        cmocka_unit_test(test_dot_unreduced_subgroup_output),
        cmocka_unit_test(test_dot_replicas_assigned_to_groups),
        cmocka_unit_test(test_dot_other_operand_swapped_into_groups),
        cmocka_unit_test(test_dot_non_contracting_whole_role_regroup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
