/* test_spmd_gather.c - the gather/scatter and windowed-op handlers (handle_gather_scatter.c,
 * handle_window.c) and dynamic-update-slice (handle_shape.c): hand-written HLO modules are
 * parsed, partitioned, and the output module is checked for the local shapes, the collectives
 * (kind, replica groups) and the decision events.
 * SHARDLENS_TEST_DUMP=1 prints every partitioned module and trace log. */
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
#include "spmd/spmd.h"
#include "trace/trace.h"

typedef struct Fixture {
    SlArena in, out;
    SlInterner names;
    TraceMemSink trace;
    SlBuf text; /* printed partitioned module */
    IrModule *module;
} Fixture;

static int
fixture_setup(void **state)
{
    Fixture *fx = calloc(1, sizeof(*fx));
    if (!fx)
        return -1;
    sl_arena_init(&fx->in);
    sl_arena_init(&fx->out);
    sl_interner_init(&fx->names, &fx->in);
    trace_mem_sink_init(&fx->trace);
    sl_buf_init(&fx->text);
    *state = fx;
    return 0;
}

static int
fixture_teardown(void **state)
{
    Fixture *fx = *state;
    if (fx->module)
        ir_module_fini(fx->module);
    sl_buf_fini(&fx->text);
    trace_mem_sink_fini(&fx->trace);
    sl_interner_fini(&fx->names);
    sl_arena_fini(&fx->out);
    sl_arena_fini(&fx->in);
    free(fx);
    return 0;
}

/* Parses and partitions `text` (option "KEY=VALUE" or NULL); the printed module goes to
 * fx->text. */
static void
partition(Fixture *fx, const char *text, const char *option)
{
    IrModule *in = NULL;
    SlError err = {0};
    if (hlo_parse(&fx->in, &fx->names, sl_str(text), "test.hlo", &in, &err) != SL_OK)
        fail_msg("parse: %s", err.msg);
    SpmdOptions o;
    spmd_options_init(&o);
    if (option && spmd_options_set(&o, sl_str(option), &err) != SL_OK)
        fail_msg("option: %s", err.msg);
    if (fx->module) { /* a test may partition twice */
        ir_module_fini(fx->module);
        fx->module = NULL;
    }
    if (spmd_partition(in, &o, &fx->trace.sink, &fx->out, &fx->module, &err) != SL_OK)
        fail_msg("partition: %s", err.msg);
    fx->text.len = 0;
    hlo_print_module(fx->module, &fx->text);
    sl_buf_putc(&fx->text, '\0');
    if (getenv("SHARDLENS_TEST_DUMP"))
        fprintf(stderr, "%s\n%.*s\n", fx->text.data, (int)fx->trace.log.len, fx->trace.log.data);
    ir_module_fini(in);
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
expect_text(Fixture *fx, const char *needle, size_t times)
{
    size_t got = count(fx->text.data, needle);
    if (got != times)
        fail_msg("expected %zu x \"%s\", got %zu in:\n%s", times, needle, got, fx->text.data);
}

static void
expect_decision(Fixture *fx, const char *needle)
{
    char *log = sl_arena_strndup(&fx->in, fx->trace.log.data, fx->trace.log.len);
    if (!log || !strstr(log, needle))
        fail_msg("no decision \"%s\" in trace:\n%s", needle, log ? log : "");
}

#define ADD_F32                                                                                    \
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"

/* Embedding lookup: table sharded on the vocabulary dim (trivially sliced), ids replicated. */
static void
test_gather_trivial_sliced(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "ENTRY e {\n"
              "  table = f32[32,8] parameter(0), sharding={devices=[4,1]<=[4]}\n"
              "  ids = s32[6,1] parameter(1), sharding={replicated}\n"
              "  ROOT g = f32[6,8] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0},"
              " start_index_map={0}, index_vector_dim=1, slice_sizes={1,8},"
              " sharding={replicated}\n"
              "}\n",
              NULL);
    expect_text(fx, "table.1 = f32[8,8] parameter(0)", 1);
    expect_text(fx, "= f32[6,8] gather(%table.1, %subtract)", 1);
    /* XLA's ClampGatherIndices: the bounds are constants of the indices' type */
    expect_text(fx, "%constant = s32[1] constant({31})", 1);
    expect_text(fx, "%broadcast = s32[6,1] broadcast(%constant), dimensions={1}", 1);
    expect_text(fx, "%broadcast.1 = s32[6,1] broadcast(%constant.1), dimensions={}", 1);
    expect_text(fx, "%clamp = s32[6,1] clamp(%broadcast.1, %ids.1, %broadcast)", 1);
    expect_text(fx, "%subtract = s32[6,1] subtract(%clamp, ", 1);
    expect_text(fx, " clamp(", 1);
    expect_text(fx, " subtract(", 1);
    expect_text(fx, "= pred[6] reduce(", 1);
    expect_text(fx, "= f32[6,8] select(", 1);
    expect_text(fx, "ROOT %all-reduce = f32[6,8] all-reduce(%select)", 1);
    expect_text(fx, "replica_groups=[1,4]<=[4]", 1);
    expect_text(fx, "all-gather(", 0);
    expect_decision(fx, "gather trivial-sliced-operand");
}

/* Operand sharded on a dim the slice spans whole: the output follows, no collectives. */
static void
test_gather_operand_passthrough(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=2\n\n"
              "ENTRY e {\n"
              "  input = f32[2,9] parameter(0), sharding={devices=[1,2]<=[2]}\n"
              "  indices = s32[3] parameter(1), sharding={replicated}\n"
              "  ROOT g = f32[3,9] gather(input, indices), offset_dims={1},"
              " collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1,"
              " slice_sizes={1,9}, sharding={devices=[1,2]<=[2]}\n"
              "}\n",
              NULL);
    expect_text(fx, "= f32[3,5] gather(%input.1, %indices.1)", 1);
    expect_text(fx, "input.1 = f32[2,5] parameter(0)", 1);
    expect_text(fx, "slice_sizes={1,5}", 1);
    expect_text(fx, "all-", 0);
    expect_text(fx, "collective-permute", 0);
    expect_decision(fx, "gather operand-passthrough");
}

/* Indices sharded on their batch dims: the output follows them, no collectives. */
static void
test_gather_index_passthrough(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "ENTRY e {\n"
              "  input = f32[2,9,8] parameter(0), sharding={replicated}\n"
              "  indices = s32[4,2,4] parameter(1), sharding={devices=[2,1,2]<=[4]}\n"
              "  ROOT g = f32[8,4,4] gather(input, indices), offset_dims={0},"
              " collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1,"
              " slice_sizes={1,1,8}, sharding={devices=[1,2,2]<=[4]}\n"
              "}\n",
              NULL);
    expect_text(fx, "= f32[8,2,2] gather(%input.1, %indices.1)", 1);
    expect_text(fx, "input.1 = f32[2,9,8] parameter(0)", 1);
    expect_text(fx, "all-", 0);
    expect_decision(fx, "gather index-passthrough");
}

/* Index-parallel: the indices are an iota along the sharded dim, so operand and indices line
 * up; the indices are shifted by the operand offset and nothing is communicated. */
static void
test_gather_index_parallel(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "ENTRY e {\n"
              "  operand = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}\n"
              "  col = s32[8,1] parameter(1), sharding={devices=[4,1]<=[4]}\n"
              "  row = s32[8,1] iota(), iota_dimension=0, sharding={devices=[4,1]<=[4]}\n"
              "  idx = s32[8,2] concatenate(row, col), dimensions={1},"
              " sharding={devices=[4,1]<=[4]}\n"
              "  ROOT g = f32[8] gather(operand, idx), offset_dims={},"
              " collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1,"
              " slice_sizes={1,1}, sharding={devices=[4]<=[4]}\n"
              "}\n",
              NULL);
    expect_text(fx, "= f32[2] gather(%operand.1, %subtract)", 1);
    expect_text(fx, "= s32[2,2] subtract(%idx.1, ", 1);
    expect_text(fx, "operand.1 = f32[2,16] parameter(0)", 1);
    expect_text(fx, "all-", 0);
    expect_text(fx, "collective-permute", 0);
    expect_decision(fx, "gather index-parallel");
}

/* The iota reaches the gather through a predicated conditional's parameter (true_computation
 * takes operand 1): still index-parallel, the operand sliced by partition, one all-gather. */
static void
test_gather_index_parallel_through_conditional(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "branch {\n"
              "  p = (f32[4,8], s32[1,4]) parameter(0), sharding={{replicated}, {devices=[1,4]<=[4]}}\n"
              "  x = f32[4,8] get-tuple-element(p), index=0, sharding={replicated}\n"
              "  i = s32[1,4] get-tuple-element(p), index=1, sharding={devices=[1,4]<=[4]}\n"
              "  g = f32[4,8] gather(x, i), offset_dims={1}, collapsed_slice_dims={0},"
              " start_index_map={0}, index_vector_dim=0, slice_sizes={1,8}\n"
              "  ROOT c = f32[4,8] copy(g), sharding={replicated}\n"
              "}\n\n"
              "other {\n"
              "  q = (f32[4,8], s32[1,4]) parameter(0), sharding={{replicated}, {devices=[1,4]<=[4]}}\n"
              "  ROOT y = f32[4,8] get-tuple-element(q), index=0, sharding={replicated}\n"
              "}\n\n"
              "ENTRY e {\n"
              "  x = f32[4,8] parameter(0), sharding={replicated}\n"
              "  i = s32[1,4] iota(), iota_dimension=1, sharding={devices=[1,4]<=[4]}\n"
              "  t = (f32[4,8], s32[1,4]) tuple(x, i), sharding={{replicated}, {devices=[1,4]<=[4]}}\n"
              "  b = pred[] parameter(1), sharding={replicated}\n"
              "  ROOT r = f32[4,8] conditional(b, t, t), true_computation=branch,"
              " false_computation=other, sharding={replicated}\n"
              "}\n",
              NULL);
    expect_text(fx, "= f32[1,8] gather(%dynamic-slice", 1);
    expect_text(fx, "= f32[4,8] all-gather(", 1);
    expect_text(fx, "replica_groups=[1,4]<=[4], dimensions={0}", 1);
    expect_decision(fx, "gather index-parallel");
}

/* Index-parallel indices also sharded on index_vector_dim: that dim is replicated first, so the
 * offsets (one per start_index_map entry) are broadcast into the whole index vector. */
static void
test_gather_index_parallel_sharded_index_vector(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=8\n\n"
              "ENTRY e {\n"
              "  x = s32[8,4,2,3] parameter(0), sharding={devices=[8,1,1,1]<=[8]}\n"
              "  i0 = s32[1,4,8] iota(), iota_dimension=1\n"
              "  i1 = s32[1,4,8] iota(), iota_dimension=2\n"
              "  ids = s32[2,4,8] concatenate(i0, i1), dimensions={0}, sharding={devices=[2,4,1]<=[8]}\n"
              "  ROOT g = s32[4,8,2,2] gather(x, ids), offset_dims={2,3}, collapsed_slice_dims={0,1},"
              " start_index_map={1,0}, index_vector_dim=0, slice_sizes={0,1,2,2},"
              " sharding={replicated}\n"
              "}\n",
              NULL);
    expect_text(fx, "= s32[2,1,8] all-gather(", 1); /* the index vector made whole */
    expect_text(fx, "= s32[2,1,8] broadcast(%concatenate), dimensions={0}", 1);
    expect_text(fx, "= s32[2,1,8] subtract(", 1);
    expect_decision(fx, "gather index-parallel");
}

/* Replicated scatter indices cut unevenly like the updates (index passthrough): the padding
 * rows hold -1, which the scatter drops, so padded update rows never reach row 0. */
static void
test_scatter_indices_made_uneven_pad_minus_one(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "mx {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
              "  ROOT m = f32[] maximum(x, y)\n}\n\n"
              "ENTRY e {\n"
              "  t = f32[6,4] parameter(0), sharding={replicated}\n"
              "  ids = s32[6,1] parameter(1), sharding={replicated}\n"
              "  upd = f32[6,4] parameter(2), sharding={devices=[4,1]<=[4]}\n"
              "  ROOT s = f32[6,4] scatter(t, ids, upd), update_window_dims={1},"
              " inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,"
              " to_apply=mx, sharding={replicated}\n"
              "}\n",
              NULL);
    expect_text(fx, "%constant = s32[] constant(-1)", 1);
    expect_text(fx, "= s32[8,1] pad(%ids.1, %constant), padding=0_2x0_0", 1);
    expect_text(fx, "= f32[6,4] all-reduce(", 1);
    expect_decision(fx, "scatter index-passthrough");
}

/* Scatter on a trivially sliced operand: indices shifted, local scatter, no all-reduce. */
static void
test_scatter_trivial_sliced(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n" ADD_F32 "ENTRY e {\n"
              "  table = f32[32,8] parameter(0), sharding={devices=[4,1]<=[4]}\n"
              "  ids = s32[6,1] parameter(1), sharding={replicated}\n"
              "  upd = f32[6,8] parameter(2), sharding={replicated}\n"
              "  ROOT s = f32[32,8] scatter(table, ids, upd), update_window_dims={1},"
              " inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,"
              " to_apply=add, sharding={devices=[4,1]<=[4]}\n"
              "}\n",
              NULL);
    expect_text(fx, "= f32[8,8] scatter(%table.1, %subtract, %upd.1)", 1);
    expect_text(fx, "= s32[6,1] subtract(%ids.1, ", 1);
    expect_text(fx, "all-reduce(", 0);
    expect_text(fx, "all-gather(", 0);
    expect_decision(fx, "scatter trivial-sliced-operand");
}

/* Scatter with updates/indices sharded on their batch dim: every group scatters its share into
 * the identity (except in-group id 0), then an all-reduce with the scatter's combiner. */
static void
test_scatter_index_passthrough(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n" ADD_F32 "ENTRY e {\n"
              "  table = f32[32,8] parameter(0), sharding={replicated}\n"
              "  ids = s32[8,1] parameter(1), sharding={devices=[4,1]<=[4]}\n"
              "  upd = f32[8,8] parameter(2), sharding={devices=[4,1]<=[4]}\n"
              "  ROOT s = f32[32,8] scatter(table, ids, upd), update_window_dims={1},"
              " inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,"
              " to_apply=add, sharding={replicated}\n"
              "}\n",
              NULL);
    expect_text(fx, "= f32[32,8] select(%broadcast, %broadcast.1, %table.1)", 1);
    expect_text(fx, "= f32[32,8] scatter(%select, %ids.1, %upd.1)", 1);
    expect_text(fx, "= f32[32,8] all-reduce(%s.2)", 1);
    expect_text(fx, "replica_groups=[1,4]<=[4]", 1);
    expect_text(fx, "to_apply=%add.1\n", 2);
    expect_decision(fx, "scatter index-passthrough");
}

/* Index passthrough with the index vector dim sharded too: the combining all-reduces run over
 * the devices that differ only on the index batch dims ({0,1,4,5} and {2,3,6,7}), so exactly
 * one device of each such group (in-group id 0: devices 0 and 2) keeps the operand. */
static void
test_scatter_index_passthrough_ivd_mask(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=8\n\n" ADD_F32 "ENTRY e {\n"
              "  x = f32[2,9,8] parameter(0), sharding={replicated}\n"
              "  ids = s32[4,2,4] parameter(1), sharding={devices=[2,2,2]<=[8]}\n"
              "  upd = f32[4,4,8] parameter(2),"
              " sharding={devices=[2,2,1,2]<=[8] last_tile_dim_replicate}\n"
              "  ROOT s = f32[2,9,8] scatter(x, ids, upd), update_window_dims={2},"
              " inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1},"
              " index_vector_dim=1, to_apply=add, sharding={replicated}\n"
              "}\n",
              NULL);
    expect_text(fx, "= u32[8] constant({0, 1, 0, 1, 2, 3, 2, 3})", 1);
    expect_text(fx, "= pred[] convert(%reshape)", 1);
    expect_text(fx, "= f32[2,9,8] select(%broadcast, %broadcast.1, %x.1)", 1);
    expect_text(fx, "= s32[2,2,2] all-gather(%ids.1)", 1);
    expect_text(fx, "replica_groups=[4,2]<=[8], use_global_device_ids=true, to_apply", 1);
    expect_text(fx, "replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true, to_apply", 1);
    expect_text(fx, "all-reduce(", 2);
}

/* Index passthrough merges the output sharding into the indices' (partially replicated)
 * sharding: the indices are dynamic-sliced to [2,2,2] locally, no collective at all. */
static void
test_gather_index_passthrough_merges_output(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\nENTRY e {\n"
              "  x = f32[2,9,8] parameter(0), sharding={replicated}\n"
              "  ids = s32[4,2,4] parameter(1),"
              " sharding={devices=[2,1,1,2]<=[4] last_tile_dim_replicate}\n"
              "  ROOT g = f32[8,4,4] gather(x, ids), offset_dims={0}, collapsed_slice_dims={0,1},"
              " start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1,8},"
              " sharding={devices=[1,2,2]<=[4]}\n"
              "}\n",
              NULL);
    expect_text(fx, "= s32[2,2,2] dynamic-slice(%ids.1,", 1);
    expect_text(fx, "= f32[8,2,2] gather(%x.1, %dynamic-slice", 1);
    expect_text(fx, "all-", 0);
    expect_text(fx, "collective-permute", 0);
    expect_decision(fx, "gather index-passthrough");
}

/* Index-parallel on both operand dims with the operand's passthrough dim kept: the operand
 * [2,2,2,1] is re-laid as [4,1,2,1] by one all-to-all over {0,2},{1,3},{4,6},{5,7}. */
static void
test_gather_index_parallel_keeps_passthrough(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=8\n\nENTRY e {\n"
              "  x = s32[8,4,2,2] parameter(0), sharding={devices=[2,2,2,1]<=[8]}\n"
              "  i1 = s32[1,8,4] iota(), iota_dimension=2,"
              " sharding={devices=[1,4,1,2]<=[8] last_tile_dim_replicate}\n"
              "  i2 = s32[1,8,4] iota(), iota_dimension=1,"
              " sharding={devices=[1,4,1,2]<=[8] last_tile_dim_replicate}\n"
              "  ids = s32[2,8,4] concatenate(i1, i2), dimensions={0},"
              " sharding={devices=[1,4,1,2]<=[8] last_tile_dim_replicate}\n"
              "  ROOT g = s32[8,4,2,2] gather(x, ids), offset_dims={2,3},"
              " collapsed_slice_dims={0,1}, start_index_map={1,0}, index_vector_dim=0,"
              " slice_sizes={1,1,2,2}, sharding={replicated}\n"
              "}\n",
              NULL);
    expect_text(fx, " all-to-all(", 1);
    expect_text(fx, "replica_groups=[4,2]<=[2,2,2]T(0,2,1), dimensions={1}", 1);
    expect_text(fx, "= s32[2,4,1,2] gather(", 1);
    expect_text(fx, "= s32[2,2,4] subtract(", 1);
    expect_text(fx, " all-gather(", 2);
    expect_text(fx, "all-reduce(", 0);
}

/* Trivially sliced operand grouped on its replication, the indices borrowing shards of a data
 * dim for the partial grouping (GroupShardingOnReplicatedDim): the masked result all-reduces
 * over pairs only, the indices stay [2,4,2] locally. */
static void
test_gather_trivial_sliced_partial_grouping(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=8\n\n"
              "add {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n"
              "  ROOT s = s32[] add(x, y)\n}\n\nENTRY e {\n"
              "  x = s32[8,4,2,2] parameter(0),"
              " sharding={devices=[2,2,1,1,2]<=[8] last_tile_dim_replicate}\n"
              "  ids = s32[2,8,4] parameter(1),"
              " sharding={devices=[1,2,2,2]<=[8] last_tile_dim_replicate}\n"
              "  ROOT g = s32[8,4,2,2] gather(x, ids), offset_dims={2,3},"
              " collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=0,"
              " slice_sizes={1,1,2,2}, sharding={replicated}\n"
              "}\n",
              NULL);
    expect_text(fx, "= s32[4,2,2,2] all-reduce(%select)", 1);
    expect_text(fx, "replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true,"
                    " to_apply", 1);
    expect_text(fx, "all-reduce(", 1);
}

/* Unevenly sharded scatter indices (10 rows over 4 devices) are replicated and resharded with
 * -1 padding, so the padded rows are out of bounds and the scatter drops them. */
static void
test_scatter_uneven_indices_repad(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "mx {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
              "  ROOT s = f32[] maximum(x, y)\n}\n\nENTRY e {\n"
              "  t = f32[16,8] parameter(0), sharding={replicated}\n"
              "  ids = s32[10,1] parameter(1), sharding={devices=[4,1]<=[4]}\n"
              "  upd = f32[10,8] parameter(2), sharding={devices=[4,1]<=[4]}\n"
              "  ROOT s = f32[16,8] scatter(t, ids, upd), update_window_dims={1},"
              " inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,"
              " to_apply=mx, sharding={replicated}\n"
              "}\n",
              NULL);
    expect_text(fx, "= s32[12,1] all-gather(%ids.1)", 1);
    expect_text(fx, "= s32[] constant(-1)", 1);
    expect_text(fx, "= s32[12,1] pad(%slice, %constant), padding=0_2x0_0", 1);
    expect_text(fx, "= s32[3,1] dynamic-slice(%pad,", 1);
    expect_text(fx, "scatter(%select, %dynamic-slice.1, %upd.1)", 1);
}

/* The preferred-methods option puts a method first even when another would be cheaper. */
static void
test_gather_preferred_option(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "ENTRY e {\n"
              "  table = f32[32,8] parameter(0), sharding={devices=[4,1]<=[4]}\n"
              "  ids = s32[8,1] parameter(1), sharding={devices=[4,1]<=[4]}\n"
              "  ROOT g = f32[8,8] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0},"
              " start_index_map={0}, index_vector_dim=1, slice_sizes={1,8},"
              " sharding={devices=[4,1]<=[4]}\n"
              "}\n",
              "preferred_gather_partition_methods=kIndexPassthrough");
    expect_decision(fx, "gather index-passthrough");
    expect_text(fx, "= f32[2,8] gather(%all-gather, %ids.1)", 1);
    expect_text(fx, "all-gather = f32[32,8] all-gather(%table.1)", 1);
}

/* Reduce-window over a sharded windowed dim: halo collective-permutes, no all-reduce. */
static void
test_reduce_window_halo(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n" ADD_F32 "ENTRY e {\n"
              "  x = f32[16] parameter(0), sharding={devices=[4]<=[4]}\n"
              "  z = f32[] constant(0), sharding={replicated}\n"
              "  ROOT r = f32[16] reduce-window(x, z), window={size=3 pad=1_1}, to_apply=add,"
              " sharding={devices=[4]<=[4]}\n"
              "}\n",
              NULL);
    expect_text(fx, "all-reduce(", 0);
    expect_text(fx, "= f32[4] reduce-window(", 1);
    expect_text(fx, "collective-permute(", 2);
}

/* Reduce-window whose sharded dim has a trivial window: local, no communication. */
static void
test_reduce_window_local(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=2\n\n" ADD_F32 "ENTRY e {\n"
              "  x = f32[8,16] parameter(0), sharding={devices=[2,1]<=[2]}\n"
              "  z = f32[] constant(0), sharding={replicated}\n"
              "  ROOT r = f32[8,8] reduce-window(x, z), window={size=1x2 stride=1x2},"
              " to_apply=add, sharding={devices=[2,1]<=[2]}\n"
              "}\n",
              NULL);
    expect_text(fx, "= f32[4,8] reduce-window(%x.1, %z.1)", 1);
    expect_text(fx, "x.1 = f32[4,16] parameter(0)", 1);
    expect_text(fx, "all-", 0);
    expect_text(fx, "collective-permute", 0);
    expect_decision(fx, "reduce-window local-no-halo");
}

#define DUS_MODULE(start1)                                                                         \
    "HloModule m, num_partitions=2\n\n"                                                            \
    "ENTRY e {\n"                                                                                  \
    "  input = s32[128,64] parameter(0), sharding={devices=[1,2]<=[2]}\n"                         \
    "  update = s32[10,10] parameter(1), sharding={devices=[1,2]<=[2]}\n"                         \
    "  c59 = s32[] constant(59)\n"                                                                 \
    "  c = s32[] constant(" start1 ")\n"                                                           \
    "  ROOT dus = s32[128,64] dynamic-update-slice(input, update, c59, c),"                        \
    " sharding={devices=[1,2]<=[2]}\n"                                                             \
    "}\n"

/* DUS whose update box (cols 35..44) lies in partition 1's columns 32..63: the input stays
 * sharded, only the update is all-gathered along the slice dim; the local start is shifted by
 * the partition offset and a select keeps the input on the other partition. */
static void
test_dus_single_partition(void **state)
{
    Fixture *fx = *state;
    partition(fx, DUS_MODULE("35"), NULL);
    expect_text(fx, "input.1 = s32[128,32] parameter(0)", 1);
    expect_text(fx, "= s32[10,10] all-gather(%update.1)", 1);
    expect_text(fx, "dimensions={1}", 1);
    expect_text(fx, "all-gather(", 1);
    expect_text(fx, "s32[128,64]", 0);
    expect_text(fx, "= s32[] constant(32)", 1);
    expect_text(fx, "direction=GE", 1);
    expect_text(fx, "direction=LT", 1);
    expect_text(fx, "= s32[128,32] dynamic-update-slice(%input.1, %all-gather, %c59.1, %select)",
                1);
    expect_text(fx, "= pred[128,32] broadcast(", 1);
    expect_text(fx, "= s32[128,32] select(%broadcast, %dynamic-update-slice, %input.1)", 1);
}

/* DUS whose update box (cols 27..36) straddles both partitions, constant starts. Under XLA's
 * enzyme option the constant-indices method builds a pred mask and the zero-padded update
 * shard-locally (pad, dynamic-slice by partition, pad) and selects: no collectives. Without it
 * the default method all-gathers input and update along the slice dim. */
static void
test_dus_constant_indices(void **state)
{
    Fixture *fx = *state;
    partition(fx, DUS_MODULE("27"), "enable_enzyme_opt=true");
    expect_text(fx, "update.1 = s32[10,5] parameter(1)", 1);
    expect_text(fx, "all-gather(", 0);
    expect_text(fx, "= pred[10,10] broadcast(", 1);
    expect_text(fx, "= pred[10,64] pad(%broadcast, %constant.1), padding=0_0x27_27", 1);
    expect_text(fx, "= pred[10,32] dynamic-slice(%pad,", 1);
    expect_text(fx, "= pred[128,32] pad(%dynamic-slice.1, %constant.1), padding=59_59x0_0", 1);
    expect_text(fx, "= s32[10,59] pad(%update.1, %constant.2), padding=0_0x27_27", 1);
    expect_text(fx, "= s32[] constant(27)", 1); /* the window step; the start's clone was dead */
    expect_text(fx, "= s32[10,32] dynamic-slice(%pad.2,", 1);
    expect_text(fx, "= s32[128,32] pad(%dynamic-slice.3, %constant.2), padding=59_59x0_0", 1);
    expect_text(fx, "ROOT %select = s32[128,32] select(%pad.1, %input.1, %pad.3)", 1);

    partition(fx, DUS_MODULE("27"), NULL);
    expect_text(fx, "= s32[128,64] all-gather(%input.1)", 1);
    expect_text(fx, "= s32[10,10] all-gather(%update.1)", 1);
    expect_text(fx, "= s32[128,64] dynamic-update-slice(%all-gather, %all-gather.1", 1);
    expect_text(fx, "ROOT %dynamic-slice.1 = s32[128,32] dynamic-slice(", 1);
}

/* Scatter in a while body whose indices concatenate a loop-carried element (element 1 of the
 * body parameter) with a local iota. `carried` names what the body root passes on at 1. */
#define SCATTER_IN_WHILE(carried)                                                                  \
    "HloModule m, num_partitions=4\n\n"                                                            \
    "add {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n  ROOT s = s32[] add(x, y)\n}\n\n" \
    "cond {\n"                                                                                     \
    "  p = (s32[4,4,2,2], s32[1,4,4], s32[4,4,2,2], s32[]) parameter(0)\n"                        \
    "  c = s32[] get-tuple-element(p), index=3\n"                                                  \
    "  n = s32[] constant(3)\n"                                                                    \
    "  ROOT lt = pred[] compare(c, n), direction=LT\n"                                             \
    "}\n\n"                                                                                        \
    "body {\n"                                                                                     \
    "  p = (s32[4,4,2,2], s32[1,4,4], s32[4,4,2,2], s32[]) parameter(0),"                         \
    " sharding={{replicated}, {devices=[1,4,1]<=[4]}, {replicated}, {replicated}}\n"              \
    "  op = s32[4,4,2,2] get-tuple-element(p), index=0, sharding={replicated}\n"                  \
    "  io = s32[1,4,4] get-tuple-element(p), index=1, sharding={devices=[1,4,1]<=[4]}\n"          \
    "  io2 = s32[1,4,4] iota(), iota_dimension=2, sharding={devices=[1,4,1]<=[4]}\n"              \
    "  idx = s32[2,4,4] concatenate(io, io2), dimensions={0}, sharding={devices=[1,4,1]<=[4]}\n"  \
    "  up = s32[4,4,2,2] get-tuple-element(p), index=2, sharding={replicated}\n"                  \
    "  c = s32[] get-tuple-element(p), index=3, sharding={replicated}\n"                          \
    "  one = s32[] constant(1), sharding={replicated}\n"                                          \
    "  c1 = s32[] add(c, one), sharding={replicated}\n"                                           \
    "  io3 = s32[1,4,4] add(io, io), sharding={devices=[1,4,1]<=[4]}\n"                           \
    "  sc = s32[4,4,2,2] scatter(op, idx, up), to_apply=add, update_window_dims={2,3},"            \
    " inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=0,"         \
    " sharding={replicated}\n"                                                                     \
    "  ROOT t = (s32[4,4,2,2], s32[1,4,4], s32[4,4,2,2], s32[]) tuple(sc, " carried ", up, c1),"   \
    " sharding={{replicated}, {devices=[1,4,1]<=[4]}, {replicated}, {replicated}}\n"              \
    "}\n\n"                                                                                        \
    "ENTRY e {\n"                                                                                  \
    "  a = s32[4,4,2,2] parameter(0), sharding={replicated}\n"                                    \
    "  io = s32[1,4,4] iota(), iota_dimension=1, sharding={devices=[1,4,1]<=[4]}\n"               \
    "  z = s32[] constant(0), sharding={replicated}\n"                                             \
    "  b = s32[4,4,2,2] parameter(1), sharding={replicated}\n"                                    \
    "  t = (s32[4,4,2,2], s32[1,4,4], s32[4,4,2,2], s32[]) tuple(a, io, b, z),"                    \
    " sharding={{replicated}, {devices=[1,4,1]<=[4]}, {replicated}, {replicated}}\n"              \
    "  ROOT w = (s32[4,4,2,2], s32[1,4,4], s32[4,4,2,2], s32[]) while(t), body=body,"            \
    " condition=cond,"                                                                             \
    " sharding={{replicated}, {devices=[1,4,1]<=[4]}, {replicated}, {replicated}}\n"              \
    "}\n"

/* No collective emitted on behalf of source instruction `src` (trace "emit X <- src"). */
static void
expect_no_collective_from(Fixture *fx, const char *src)
{
    static const char *const k_colls[] = {"all-gather", "all-reduce", "all-to-all",
                                          "collective-permute", "reduce-scatter"};
    char *log = sl_arena_strndup(&fx->in, fx->trace.log.data, fx->trace.log.len);
    char tail[64];
    snprintf(tail, sizeof(tail), " <- %s\n", src);
    for (char *line = log; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
        for (size_t k = 0; k < SL_COUNTOF(k_colls); k++) {
            size_t n = strlen(k_colls[k]), t = strlen(tail);
            if (len > t && !strncmp(line, "emit ", 5) && !strncmp(line + 5, k_colls[k], n) &&
                !strncmp(line + len - t, tail, t))
                fail_msg("%s emitted a collective: %.*s", src, (int)len, line);
        }
        line = nl ? nl + 1 : NULL;
    }
}

#define DUS_OF_SLICE(shape, slice, start)                                                          \
    "HloModule t, num_partitions=4\n\nENTRY main {\n"                                              \
    "  input = s32[16] parameter(0), sharding={devices=[4]<=[4]}\n"                               \
    "  other = s32[16] parameter(1), sharding={devices=[4]<=[4]}\n"                               \
    "  s = s32[" shape "] slice(other), slice={[" slice "]}\n"                                    \
    "  c = s32[] constant(" start ")\n"                                                           \
    "  ROOT d = s32[16] dynamic-update-slice(input, s, c), sharding={devices=[4]<=[4]}\n}\n"

/* DUS whose update is a slice of a value sharded like it (enzyme option, constant starts):
 * rows 3..10 of `other` go to rows 3..10, so every shard's piece is its own shard of `other`;
 * on the unsharded dim, columns 1..4 land at 2..5: the local shard is cut to columns 0..4 and
 * padded by one on the left. The select reads that directly: the DUS moves no data. */
static void
test_dus_slice_update_aligned(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule t, num_partitions=4\n\nENTRY main {\n"
              "  input = s32[16,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
              "  other = s32[16,6] parameter(1), sharding={devices=[4,1]<=[4]}\n"
              "  s = s32[8,4] slice(other), slice={[3:11], [1:5]}\n"
              "  c3 = s32[] constant(3)\n  c2 = s32[] constant(2)\n"
              "  ROOT d = s32[16,6] dynamic-update-slice(input, s, c3, c2), "
              "sharding={devices=[4,1]<=[4]}\n}\n",
              "enable_enzyme_opt=true");
    expect_text(fx, "s32[4,5] slice(%other.1), slice={[0:4], [0:5]}", 1);
    expect_text(fx, "s32[4,6] pad(%slice.3, %constant.7), padding=0_0x1_0", 1);
    expect_text(fx, "ROOT %select = s32[4,6] select(%pad.1, %input.1, %pad.2)", 1);
    expect_decision(fx, "decision d dynamic-update-slice slice-update-local");
    expect_no_collective_from(fx, "d");
}

/* The slice [5:7] and the DUS range [4:6] both lie in shard 1: each shard slices [1:3] of its
 * own shard of `other` and pads it to [0:2] (XLA's DynamicUpdateSliceOfSliceUpdateSingleShard
 * Free); at start 6 the piece is padded to [2:4] instead. A slice across two shards ([3:5])
 * does not place locally: the update is padded as a whole (all-reduce), as before. */
static void
test_dus_slice_update_single_shard(void **state)
{
    Fixture *fx = *state;
    partition(fx, DUS_OF_SLICE("2", "5:7", "4"), "enable_enzyme_opt=true");
    expect_text(fx, "%slice.2 = s32[2] slice(%other.1), slice={[1:3]}", 1);
    expect_text(fx, "%pad.1 = s32[4] pad(%slice.2, %constant.13), padding=0_2", 1);
    expect_text(fx, "ROOT %select.1 = s32[4] select(%dynamic-slice.5, %input.1, %pad.1)", 1);
    expect_no_collective_from(fx, "d");
    partition(fx, DUS_OF_SLICE("2", "5:7", "6"), "enable_enzyme_opt=true");
    expect_text(fx, "%pad.1 = s32[4] pad(%slice.2, %constant.13), padding=2_0", 1);
    expect_no_collective_from(fx, "d");
    partition(fx, DUS_OF_SLICE("2", "3:5", "4"), "enable_enzyme_opt=true");
    expect_text(fx, "s32[16] pad(%all-reduce, %constant.7), padding=4_10", 1);
    expect_text(fx, "slice-update-local", 0);
}

/* The carried element is an iota along dim 1 outside the loop and the body passes it on
 * unchanged: both index rows are iotas (dims 1 and 2), so the scatter is index-parallel on
 * operand dims 0 and 1 of the indices' tiling, and the local result is all-gathered. */
static void
test_scatter_parallel_dim_from_outside_while(void **state)
{
    Fixture *fx = *state;
    partition(fx, SCATTER_IN_WHILE("io"), NULL);
    expect_text(fx, "= s32[2,1,4] subtract(%idx.1, %broadcast", 1);
    expect_text(fx, "= s32[1,4,2,2] dynamic-slice(", 2);
    expect_text(fx, "= s32[1,4,2,2] scatter(%dynamic-slice", 1);
    expect_text(fx, "= s32[4,4,2,2] all-gather(%sc.1)", 1);
    expect_text(fx, "replica_groups=[1,4]<=[4], dimensions={0}", 1);
    expect_text(fx, "all-reduce(", 0);
    expect_decision(fx, "scatter index-parallel");
}

/* The body replaces the carried element, so its value is not the outside iota on later
 * iterations: no index-parallel dims, the scatter runs on the full operand. */
static void
test_scatter_parallel_dim_while_not_invariant(void **state)
{
    Fixture *fx = *state;
    partition(fx, SCATTER_IN_WHILE("io3"), NULL);
    expect_text(fx, "= s32[4,4,2,2] scatter(", 1);
    expect_text(fx, "= s32[1,4,2,2] scatter(", 0);
    expect_text(fx, "all-gather(", 0);
}

/* ---- gs: passthrough merge, constant iotas, dry-run costs, bitcast-convert, rotate ---- */

/* Strategies of gather `g` in decision order (post-order: the innermost level first). */
static void
expect_gather_levels(Fixture *fx, const char *const *strategies, size_t n)
{
    char *log = sl_arena_strndup(&fx->in, fx->trace.log.data, fx->trace.log.len);
    const char *at = log;
    for (size_t k = 0; at && k < n; k++) {
        char needle[96];
        snprintf(needle, sizeof(needle), "decision g gather %s alts=", strategies[k]);
        const char *hit = strstr(at, needle);
        if (!hit)
            fail_msg("level %zu: no \"%s\" after the previous level in:\n%s", k, needle, log);
        at = hit + strlen(needle);
    }
}

/* One "replica_groups=" with the groups in iota form `iota` or listed as `list` (the printer
 * may choose either for the same groups). */
static void
expect_groups(Fixture *fx, const char *iota, const char *list)
{
    char a[256], b[256];
    snprintf(a, sizeof(a), "replica_groups=%s", iota);
    snprintf(b, sizeof(b), "replica_groups=%s", list);
    if (count(fx->text.data, a) + count(fx->text.data, b) != 1)
        fail_msg("expected one \"%s\" or \"%s\" in:\n%s", a, b, fx->text.data);
}

/* Operand sharded on the passthrough dim, indices on their batch dim, the output on both:
 * the output sharding refines the passthrough one, so the recursion partitions the indices'
 * dim too and the local gather is already in the output sharding (no all-gather back). */
static void
test_gather_operand_passthrough_refined_by_output(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "ENTRY e {\n"
              "  table = f32[5,8] parameter(0),"
              " sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n"
              "  ids = s32[12,2] parameter(1),"
              " sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}\n"
              "  ROOT g = f32[12,1,8] gather(table, ids), offset_dims={1,2},"
              " collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1,"
              " slice_sizes={1,8}, sharding={devices=[2,1,2]<=[2,2]T(1,0)}\n"
              "}\n",
              NULL);
    expect_text(fx, "ROOT %g.1 = f32[6,1,4] gather(%table.1, %ids.1)", 1);
    expect_text(fx, "slice_sizes={1,4}", 1);
    expect_text(fx, "all-", 0);
    expect_text(fx, "collective-permute", 0);
    expect_text(fx, "dynamic-slice", 0);
    static const char *const levels[] = {"index-passthrough", "operand-passthrough"};
    expect_gather_levels(fx, levels, SL_COUNTOF(levels));
}

/* A rank-2 constant counting along dim 0 ({{0},{1},...}) is an iota: the gather is
 * index-parallel on operand dim 0, then trivially sliced on dim 1 (all-reduce over it only). */
static void
test_gather_constant_iota_index_parallel(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=8\n\n"
              "ENTRY e {\n"
              "  table = s32[6,16] parameter(0),"
              " sharding={devices=[2,2,2]<=[8] last_tile_dim_replicate}\n"
              "  rows = s32[6,1] constant({ {0}, {1}, {2}, {3}, {4}, {5} }),"
              " sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
              "  cols = s32[6] parameter(1),"
              " sharding={devices=[2,4]<=[8] last_tile_dim_replicate}\n"
              "  c2 = s32[6,1] reshape(cols),"
              " sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
              "  idx = s32[6,2] concatenate(rows, c2), dimensions={1},"
              " sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
              "  ROOT g = s32[6] gather(table, idx), offset_dims={}, collapsed_slice_dims={0,1},"
              " start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1},"
              " sharding={devices=[2,4]<=[8] last_tile_dim_replicate}\n"
              "}\n",
              NULL);
    expect_text(fx, "%g.1 = s32[3] gather(%table.1, %subtract.1)", 1);
    expect_text(fx, "%clamp = s32[3,2] clamp(%broadcast.2, %subtract, %broadcast.1)", 1);
    expect_text(fx, "%subtract = s32[3,2] subtract(%idx.1, %broadcast)", 1);
    expect_text(fx, "= s32[3] select(%broadcast.5, %broadcast.6, %g.1)", 1);
    expect_text(fx, "%constant.5 = s32[2] constant({2, 15})", 1);
    /* the replicated constant sliced to its partial sharding by group (XLA's
     * PerGroupSliceFromReplicated): group id, then the offset of the group's tile */
    expect_text(fx, "%constant = u32[8] constant({0, 0, 0, 0, 1, 1, 1, 1})", 1);
    expect_text(fx, "%constant.1 = s32[2] constant({0, 3})", 1);
    expect_text(fx, "ROOT %all-reduce = s32[3] all-reduce(%select), channel_id=1,", 1);
    expect_groups(fx, "[4,2]<=[2,2,2]T(0,2,1)", "{{0,2},{1,3},{4,6},{5,7}}");
    expect_text(fx, "collective-permute", 0);
    expect_text(fx, "all-gather", 0);
    static const char *const levels[] = {"trivial-sliced-operand", "index-parallel"};
    expect_gather_levels(fx, levels, SL_COUNTOF(levels));
}

/* Costs as upstream's dry run measures them: operand passthrough would reshard its
 * f32[4,12,6] result to the output with an all-to-all (both buffers live), which outweighs
 * index passthrough's full operand; inside, operand passthrough (an all-gather of the result
 * within the group) beats the trivially sliced gather with its full output. The indices are
 * clamped where they are (no collective-permute) and the result is all-gathered at the end. */
static void
test_gather_dry_run_cost_order(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=32\n\n"
              "ENTRY e {\n"
              "  table = f32[8,24] parameter(0), sharding={devices=[8,4]<=[4,8]T(1,0)}\n"
              "  ids = s32[4,12,1] parameter(1),"
              " sharding={devices=[4,1,1,8]<=[32] last_tile_dim_replicate}\n"
              "  ROOT g = f32[4,12,24] gather(table, ids), offset_dims={2},"
              " collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2,"
              " slice_sizes={1,24}, sharding={devices=[4,1,1,8]<=[32] last_tile_dim_replicate}\n"
              "}\n",
              "preferred_gather_partition_methods=kIndexParallel");
    expect_text(fx, "%constant = s32[1] constant({7})", 1);
    expect_text(fx, "%clamp = s32[1,12,1] clamp(%broadcast.1, %ids.1, %broadcast)", 1);
    expect_text(fx, "%subtract = s32[1,12,1] subtract(%clamp, %broadcast.2)", 1);
    expect_text(fx, "= f32[1,12,6] gather(%all-gather, %subtract)", 1);
    expect_text(fx, "= f32[4,6] all-gather(%collective-permute)", 1);
    expect_text(fx, "collective-permute(%table.1)", 1);
    expect_text(fx, "collective-permute(%ids.1)", 0);
    expect_text(fx, "= f32[1,12,6] all-reduce(%select), channel_id=3,", 1);
    expect_groups(fx, "[16,2]<=[4,2,4]T(0,2,1), use_global_device_ids=true, to_apply",
                  "{{0,4},{1,5},{2,6},{3,7},{8,12},{9,13},{10,14},{11,15},{16,20},{17,21},"
                  "{18,22},{19,23},{24,28},{25,29},{26,30},{27,31}}, use_global_device_ids=true,"
                  " to_apply");
    expect_text(fx, "ROOT %all-gather.1 = f32[1,12,24] all-gather(%all-reduce), channel_id=4,", 1);
    expect_groups(fx, "[8,4]<=[32], dimensions={2}",
                  "{{0,1,2,3},{4,5,6,7},{8,9,10,11},{12,13,14,15},{16,17,18,19},{20,21,22,23},"
                  "{24,25,26,27},{28,29,30,31}}, dimensions={2}");
    expect_text(fx, "all-to-all", 0);
    static const char *const levels[] = {"replicate", "trivial-sliced-operand",
                                         "operand-passthrough", "index-passthrough"};
    expect_gather_levels(fx, levels, SL_COUNTOF(levels));
}

/* bitcast-convert dropping the input's trailing dim: that dim is replicated on the operand's
 * own sharding (an all-gather of it), and the result moves to the output sharding after. */
static void
test_bitcast_convert_narrowing_keeps_operand_sharding(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "ENTRY e {\n"
              "  p = s32[8,2] parameter(0), sharding={devices=[2,2]<=[4]}\n"
              "  ROOT b = f64[8] bitcast-convert(p),"
              " sharding={devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}\n"
              "}\n",
              NULL);
    expect_text(fx, "%all-gather = s32[4,2] all-gather(%p.1), channel_id=1,", 1);
    expect_groups(fx, "[2,2]<=[4], dimensions={1}", "{{0,1},{2,3}}, dimensions={1}");
    expect_text(fx, "%b.1 = f64[4] bitcast-convert(%all-gather)", 1);
    expect_text(fx, "ROOT %collective-permute = f64[4] collective-permute(%b.1), channel_id=2,"
                    " source_target_pairs={{0,0},{1,2},{2,1},{3,3}}", 1);
}

/* concat(slice [12:16], slice [0:12]) of a value sharded like the result is a rotation by one
 * whole shard: a single collective-permute of the operand. With 14 rows (shards of 4, two
 * padding rows) the rotation by 5 takes the rows that wrap around from a second rotation
 * that skips the padding, chosen by an iota compare; a copy between slice and concat is
 * looked through. */
static void
test_concat_of_slices_is_rotate_right(void **state)
{
    Fixture *fx = *state;
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "ENTRY e {\n"
              "  x = f32[16,3] parameter(0), sharding={devices=[4,1]<=[4]}\n"
              "  hi = f32[4,3] slice(x), slice={[12:16], [0:3]}, sharding={devices=[4,1]<=[4]}\n"
              "  lo = f32[12,3] slice(x), slice={[0:12], [0:3]}, sharding={devices=[4,1]<=[4]}\n"
              "  ROOT r = f32[16,3] concatenate(hi, lo), dimensions={0},"
              " sharding={devices=[4,1]<=[4]}\n"
              "}\n",
              NULL);
    expect_text(fx, "ROOT %collective-permute.4 = f32[4,3] collective-permute(%x.1), channel_id=5,"
                    " source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", 1);
    expect_text(fx, "concatenate", 0);
    expect_text(fx, "dynamic-slice", 0);
    partition(fx,
              "HloModule m, num_partitions=4\n\n"
              "ENTRY e {\n"
              "  x = f32[14] parameter(0), sharding={devices=[4]<=[4]}\n"
              "  hi = f32[5] slice(x), slice={[9:14]}, sharding={devices=[4]<=[4]}\n"
              "  c = f32[5] copy(hi), sharding={devices=[4]<=[4]}\n"
              "  lo = f32[9] slice(x), slice={[0:9]}, sharding={devices=[4]<=[4]}\n"
              "  ROOT r = f32[14] concatenate(c, lo), dimensions={0}, sharding={devices=[4]<=[4]}\n"
              "}\n",
              NULL);
    expect_text(fx, "= f32[1] collective-permute(%slice.5), channel_id=5,"
                    " source_target_pairs={{0,2},{1,3},{2,0},{3,1}}", 1);
    expect_text(fx, "= f32[3] collective-permute(%slice.6), channel_id=6,"
                    " source_target_pairs={{0,1},{1,2},{2,3},{3,0}}", 1);
    expect_text(fx, "%constant.14 = s32[] constant(5)", 1);
    expect_text(fx, "ROOT %select.1 = f32[4] select(%compare.1, %concatenate.3, %concatenate.2)",
                1);
    expect_text(fx, "all-gather", 0);
}

/* ---- end gs ---- */

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gather_trivial_sliced, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_operand_passthrough, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_index_passthrough, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_index_parallel, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scatter_trivial_sliced, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scatter_index_passthrough, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scatter_index_passthrough_ivd_mask, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_index_passthrough_merges_output,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_index_parallel_keeps_passthrough,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_trivial_sliced_partial_grouping,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scatter_uneven_indices_repad, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_preferred_option, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reduce_window_halo, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reduce_window_local, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dus_single_partition, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scatter_parallel_dim_from_outside_while,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scatter_parallel_dim_while_not_invariant,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dus_constant_indices, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dus_slice_update_aligned, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dus_slice_update_single_shard, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_operand_passthrough_refined_by_output,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_constant_iota_index_parallel, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_dry_run_cost_order, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_bitcast_convert_narrowing_keeps_operand_sharding,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scatter_indices_made_uneven_pad_minus_one,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_index_parallel_through_conditional,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_index_parallel_sharded_index_vector,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_concat_of_slices_is_rotate_right, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
