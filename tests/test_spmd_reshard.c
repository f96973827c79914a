/* test_spmd_reshard.c - one row per reshard route (gspmd.md §C): exact local shapes,
 * collective kinds, replica groups, dimensions and channel ids in the printed output. */
#include <stdio.h>

#include "spmd_test_util.h"

#define MOD(n, shape, from, to)                                                                \
    "HloModule t, num_partitions=" #n "\n\nENTRY main {\n  p = " shape                          \
    " parameter(0), sharding=" from "\n  ROOT c = " shape " copy(p), sharding=" to "\n}\n"

/* select-and-scatter of f32 `shape` (source `src`) with window `win`, everything sharded `sh` */
#define SAS(n, shape, src, win, dir, sh)                                                       \
    "HloModule t, num_partitions=" #n "\n\nsel {\n  a = f32[] parameter(0)\n"                   \
    "  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=" dir "\n}\n\n"       \
    "sum {\n  c = f32[] parameter(0)\n  d = f32[] parameter(1)\n"                              \
    "  ROOT add = f32[] add(c, d)\n}\n\nENTRY main {\n  p = " shape " parameter(0), sharding=" sh \
    "\n  s = " src " parameter(1), sharding=" sh "\n  i = f32[] constant(0)\n  ROOT r = " shape  \
    " select-and-scatter(p, s, i), window={" win "}, select=sel, scatter=sum, sharding=" sh      \
    "\n}\n"

static const struct {
    const char *name, *hlo;
    int64_t n;
    const char *want;    /* '|'-separated fragments that must all appear */
    const char *collective; /* opcode whose count is checked */
    size_t count;
} k_rows[] = {
    {"all_to_all", MOD(4, "f32[8,16]", "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}"), 4,
     "f32[2,4,4] reshape(|all-to-all(%reshape), channel_id=1, replica_groups=[1,4]<=[4], "
     "dimensions={1}|f32[4,2,4] transpose(|ROOT %c.1 = f32[8,4] copy(",
     " all-to-all(", 1},
    {"replicate_2d", MOD(4, "f32[10,16]", "{devices=[2,2]<=[4]}", "{replicated}"), 4,
     "f32[5,16] all-gather(%p.1), channel_id=1, replica_groups=[2,2]<=[4], dimensions={1}, "
     "use_global_device_ids=true|f32[10,16] all-gather(%all-gather), channel_id=2, "
     "replica_groups=[2,2]<=[2,2]T(1,0), dimensions={0}",
     " all-gather(", 2},
    {"replicate_uneven", MOD(4, "f32[10,16]", "{devices=[4,1]<=[4]}", "{replicated}"), 4,
     "f32[12,16] all-gather(|f32[10,16] slice(", " all-gather(", 1},
    {"replicated_to_tiled_uneven", MOD(4, "f32[10,16]", "{replicated}", "{devices=[4,1]<=[4]}"),
     4, "f32[12,16] pad(|padding=0_2x0_0|s32[4] constant({0, 3, 6, 9})|u32[] partition-id()|"
     "f32[3,16] dynamic-slice(",
     " all-", 0},
    {"permute", MOD(4, "f32[8,16]", "{devices=[4,1]0,1,2,3}", "{devices=[4,1]1,0,3,2}"), 4,
     "f32[2,16] collective-permute(%p.1), channel_id=1, "
     "source_target_pairs={{0,1},{1,0},{2,3},{3,2}}",
     " collective-permute(", 1},
    {"tiled_to_partial",
     MOD(4, "f32[8,16]", "{devices=[4,1]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
     4, "f32[4,16] all-gather(%p.1), channel_id=1, replica_groups=[2,2]<=[4], dimensions={0}",
     " all-gather(", 1},
    /* replicated to partially replicated (XLA's PerGroupSliceFromReplicated): the group of
     * the device (its replication group {0,2} or {1,3}, in tile order) from a u32 table, then
     * the group's row offset from a table over the 2 tiles */
    {"replicated_to_partial_by_group",
     MOD(4, "f32[8,16]", "{replicated}",
         "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
     4, "%constant = u32[4] constant({0, 1, 0, 1})|"
        "%dynamic-slice = u32[1] dynamic-slice(%constant, %partition-id)|"
        "%constant.1 = s32[2] constant({0, 4})|"
        "%dynamic-slice.1 = s32[1] dynamic-slice(%constant.1, %reshape)|"
        "f32[4,16] dynamic-slice(%p.1, %reshape.1, %constant.2), dynamic_slice_sizes={4,16}",
     " all-", 0},
    {"partial_to_tiled",
     MOD(4, "f32[8,16]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{devices=[4,1]<=[4]}"),
     /* XLA's form: target offsets minus source offsets on every dim (0 - 0 where neither
      * side is sharded) */
     4, "s32[4] constant({0, 2, 4, 6})|s32[4] constant({0, 0, 4, 4})|"
        "%subtract = s32[] subtract(%reshape, %reshape.1)|"
        "%subtract.1 = s32[] subtract(%constant.2, %constant.2)|"
        "f32[2,16] dynamic-slice(%p.1, %subtract, %subtract.1), dynamic_slice_sizes={2,16}",
     " all-", 0},
    /* C.8.2 uneven: 6 rows from 4 tiles into 2 tiles; shards 2 and 3 first take one row from
     * their left (compact halo exchange), so gathering pairs and dropping the tail is exact */
    {"tiled_to_partial_halo",
     MOD(8, "f32[6,3]", "{devices=[4,1,2]<=[8] last_tile_dim_replicate}",
         "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
     8, "f32[1,3] slice(%p.1), slice={[1:2], [0:3]}|f32[1,3] collective-permute(%slice), "
     "channel_id=1, source_target_pairs={{2,4},{4,6},{3,5},{5,7}}|f32[3,3] concatenate(|"
     "f32[4,3] all-gather(%dynamic-slice.4), channel_id=2, replica_groups=[4,2]<=[2,2,2]T(0,2,1), "
     "dimensions={0}|f32[3,3] slice(%all-gather), slice={[0:3], [0:3]}",
     " collective-permute(", 1},
    /* C.8.1 uneven: 6 rows in 2 tiles to 4 tiles of 2 (padded to 8): the second half first
     * takes row 3 from the first half, then a dynamic-slice at the offset difference */
    {"partial_to_tiled_halo",
     MOD(4, "f32[6,3]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{devices=[4,1]<=[4]}"),
     4, "f32[1,3] slice(%p.1), slice={[0:1], [0:3]}|collective-permute(%slice), channel_id=1, "
     "source_target_pairs={{2,0},{3,1}}|f32[5,3] concatenate(%p.1, %pad)|f32[4,3] dynamic-slice(|"
     "s32[4] constant({0, 2, 4, 6})|s32[4] constant({0, 0, 4, 4})|"
     "f32[2,3] dynamic-slice(%dynamic-slice.5, %subtract, %subtract.1)",
     " all-", 0},
    {"maximal_to_replicated", MOD(4, "f32[8]", "{maximal device=1}", "{replicated}"), 4,
     "compare(%partition-id, %constant), direction=EQ|select(|f32[8] all-reduce(%select), "
     "channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=",
     " all-reduce(", 1},
    {"dus_all_reduce", MOD(16, "f32[3,2]", "{devices=[8,2]<=[16]}", "{replicated}"), 16,
     "f32[1,2] all-gather(|f32[3,2] dynamic-update-slice(|f32[3,2] all-reduce(",
     " all-reduce(", 1},
    /* C.9.1: [1,2,8] -> [4,2,2] by splitting dim 0, one all-to-all and a device reorder */
    {"split_merge", MOD(16, "f32[8,8,8]", "{devices=[1,2,8]<=[16]}", "{devices=[4,2,2]<=[16]}"),
     16, "f32[8,4,1,1] reshape(%p.1)|f32[4,2,4,1,1] all-to-all(%reshape.1), channel_id=1, "
     "replica_groups=[4,4]<=[16], dimensions={0}|f32[2,4,1,4] collective-permute(%reshape.2), "
     "channel_id=2|f32[2,4,4] reshape(%collective-permute)",
     " all-gather(", 0},
    /* C.7 last paragraph: two swaps with distinct dims in one all-to-all on a merged dim 0 */
    {"single_all_to_all",
     MOD(8, "f32[32,32,32,32]", "{devices=[1,4,2,1]<=[8]}", "{devices=[2,1,1,4]<=[8]}"), 8,
     "f32[2,16,8,16,4,8] reshape(%p.1)|f32[2,4,16,8,16,8] transpose(%reshape), "
     "dimensions={0,4,1,2,3,5}|f32[8,16,8,16,8] all-to-all(%reshape.1), channel_id=1, "
     "replica_groups={{0,2,4,6,1,3,5,7}}, dimensions={0}|f32[16,4,8,2,16,8] transpose(|"
     "f32[16,32,32,8] reshape(%transpose.1)",
     " all-to-all(", 1},
    /* C.7 uneven target dim: [4,2,1] -> [2,4,1] on f32[4,6,8] (reached from a partial
     * sharding by a free dynamic-slice). Dim 1 is held as 2 shards of 3; the all-to-all needs
     * the padded base layout of [*,4,*] (2 shards of 4: rows 0-3 and 4-5 + padding), so shard
     * 1 first sends row 3 to shard 0, then each shard splits its 4 rows into 2 pieces of 2 */
    {"all_to_all_uneven_target",
     MOD(8, "f32[4,6,8]", "{devices=[4,1,1,2]5,1,7,6,0,3,4,2 last_tile_dim_replicate}",
         "{devices=[2,4,1]<=[8]}"),
     8, "f32[1,3,8] dynamic-slice(%p.1, %subtract, %subtract.1, %subtract.2)|"
     "f32[1,1,8] slice(%dynamic-slice.3), "
     "slice={[0:1], [0:1], [0:8]}|f32[1,1,8] collective-permute(%slice), channel_id=1, "
     "source_target_pairs={{5,1},{7,6},{3,0},{4,2}}|f32[1,5,8] concatenate(%dynamic-slice.3, "
     "%pad)|f32[1,4,8] dynamic-slice(%concatenate,|f32[1,2,2,8] reshape(%dynamic-slice.7)|"
     "f32[1,2,2,8] all-to-all(%reshape.6), channel_id=2, "
     "replica_groups={{1,6},{5,7},{0,2},{3,4}}, dimensions={1}|f32[2,2,8] reshape(%transpose)|"
     "ROOT %c.1 = f32[2,2,8] copy(%collective-permute.1)",
     " collective-permute(", 2},
    /* C.7 uneven source dim: [4,2] -> [2,4] on f32[10,8]: after the all-to-all shard j of dim
     * 0 holds rows [6j, 6j + 6) but must hold [5j, 5j + 5): shard 1 takes row 5 from shard 0
     * instead of slicing the padding off */
    {"all_to_all_uneven_source",
     MOD(8, "f32[10,8]", "{devices=[4,2]<=[8]}", "{devices=[2,4]<=[8]}"), 8,
     "f32[3,2,2] all-to-all(%reshape), channel_id=1, replica_groups=[4,2]<=[2,2,2]T(0,2,1), "
     "dimensions={1}|f32[6,2] reshape(%transpose)|f32[1,2] slice(%reshape.1), "
     "slice={[5:6], [0:2]}|f32[1,2] collective-permute(%slice), channel_id=2, "
     "source_target_pairs={{0,4},{2,6},{1,5},{3,7}}|f32[9,2] concatenate(|"
     "f32[5,2] dynamic-slice(%concatenate,|ROOT %c.1 = f32[5,2] copy(",
     " all-to-all(", 1},
    /* C.9.1 twice ([8,4] -> [2,16] on the mesh 2x4x4): dim 0 shrinks, so it splits at its
     * target count ([2,4,4] -> [2,1,16]); there the 4 moves into dim 2 (product kept), which
     * splits at 4; one all-to-all of the 4-factor on the refined shape, merges back; no gather */
    {"split_merge_nested",
     MOD(32, "f32[8,32]", "{devices=[8,4]<=[2,4,4]T(0,2,1)}", "{devices=[2,16]<=[32]}"), 32,
     "f32[1,1,8] reshape(%p.1)|f32[1,1,1,8] reshape(%reshape)|f32[1,1,1,4,2] "
     "reshape(%reshape.1)|f32[1,1,1,4,2] all-to-all(%reshape.2), channel_id=1, "
     "replica_groups=[8,4]<=[32], dimensions={3}|f32[1,4,1,1,2] transpose(%all-to-all), "
     "dimensions={0,3,1,2,4}|f32[1,4,2] reshape(%reshape.3)|f32[4,2] reshape(%reshape.4)|"
     "ROOT %c.1 = f32[4,2] copy(",
     " all-gather(", 0},
    /* select-and-scatter with overlapping windows (size 3, stride 2, pad 1_1) on 11 rows in 4
     * shards: the source takes its left neighbour's 2 rows (padded to 5 with the scatter's
     * identity 0, sliced to the 3 windows, masked), the operand 2 rows from each neighbour
     * (padded with -inf to 8, sliced to 7, masked), the local op runs without padding and the
     * own 3 rows are cut out */
    {"select_and_scatter_overlap",
     SAS(4, "f32[11,4]", "f32[6,2]", "size=3x2 stride=2x2 pad=1_1x0_0", "GE",
         "{devices=[4,1]<=[4]}"),
     4, "f32[2,2] collective-permute(%s.1), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3}}|"
     "f32[4,2] concatenate(%collective-permute, %s.1)|f32[] constant(-inf)|"
     "f32[5,2] pad(%concatenate, %i.1), padding=0_1x0_0|" /* CSE: the pad value is i's 0 */
     "f32[3,2] dynamic-slice(%pad,|"
     "f32[2,4] collective-permute(%slice), channel_id=2, source_target_pairs={{0,1},{1,2},{2,3}}|"
     "f32[2,4] collective-permute(%slice.1), channel_id=3, "
     "source_target_pairs={{1,0},{2,1},{3,2}}|f32[7,4] concatenate(%collective-permute.1, %p.1, "
     "%collective-permute.2)|f32[8,4] pad(%concatenate.1, %constant), padding=0_1x0_0|"
     "f32[7,4] select-and-scatter(%select.1, %select, %i.1), window={size=3x2 stride=2x2}|"
     "ROOT %dynamic-slice.3 = f32[3,4] dynamic-slice(%r.1, %subtract, %constant.2)",
     " collective-permute(", 3},
    /* windows wider than the shard start before the first on shard 0 (first window -2, size 4,
     * stride 1, pad 1_1, LE: pad +inf): both sides are padded left so that every shard's
     * windows start in place, garbage windows are masked (source >= 0 and operand >= 1), and
     * the own part starts after the 3-element left halo on every shard */
    {"select_and_scatter_windows_before_first",
     SAS(2, "f32[7]", "f32[6]", "size=4 stride=1 pad=1_1", "LE", "{devices=[2]<=[2]}"), 2,
     "f32[] constant(inf)|f32[6] concatenate(%collective-permute, %s.1, %collective-permute.1)|"
     "f32[8] pad(%concatenate, %i.1), padding=1_1|f32[7] dynamic-slice(%pad, %reshape)|"
     "pred[7] compare(%add.2, %broadcast.1), direction=GE|f32[10] concatenate(|"
     "pred[10] compare(%add.4, %broadcast.5), direction=GE|f32[10] select-and-scatter(|"
     "s32[] constant(3)|ROOT %dynamic-slice.2 = f32[4] dynamic-slice(%r.1, %constant.13)",
     " collective-permute(", 4},
    /* C.8.3: partial [1,2,3] -> tiled [2,3]: all-to-all to [2,1,3] partial, then a free slice */
    {"partial_to_tiled_all_to_all",
     MOD(6, "f32[6,6]", "{devices=[1,2,3]<=[6] last_tile_dim_replicate}", "{devices=[2,3]<=[6]}"),
     6, "f32[2,3,3] all-to-all(%reshape), channel_id=1, replica_groups=[3,2]<=[2,3]T(1,0), "
     "dimensions={0}|f32[3,6] reshape(%transpose)|f32[3,2] dynamic-slice(%reshape.1,",
     " all-gather(", 0},
    /* unreduced targets reshard as their replicated form (XLA converts them before
     * partitioning): same tiles, so nothing moves (this used to recurse without end) */
    {"partial_to_unreduced_subgroup",
     MOD(4, "f32[6,12]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
         "{devices=[2,1,2]<=[4] last_tile_dims={unreduced}}"),
     4, "ROOT %c.1 = f32[3,12] copy(%p.1)", " all-", 0},
    {"unreduced_merges_into_replication",
     MOD(8, "f32[6,12]", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}",
         "{devices=[2,1,2,2]<=[8] last_tile_dims={unreduced, replicated}}"),
     8, "ROOT %c.1 = f32[3,12] copy(%p.1)", " all-", 0},
    /* C.8.2 where the target tile fits one source shard: 2 rows in 4 shards of 1 to 2 tiles;
     * row 1 moves from device 1 to device 2 (halo), then within {0,1} and {2,3} the first
     * device's row is broadcast by select + all-reduce instead of gathered */
    /* ReplicatePartial: the dim held whole by one shard (dim 0, 1 row) is broadcast first,
     * within {0,2} and {1,3}, on the f32[1,1] shard; then dim 1 is all-gathered */
    {"replicate_broadcast_dim_first",
     MOD(4, "f32[1,2]", "{devices=[2,2]<=[4]}", "{replicated}"),
     4, "%constant = u32[4] constant({0, 0, 1, 1})|%constant.1 = u32[] constant(0)|"
        "%compare = pred[] compare(%reshape, %constant.1), direction=EQ|"
        "%select = f32[1,1] select(%broadcast, %p.1, %broadcast.1)|"
        "%all-reduce = f32[1,1] all-reduce(%select), channel_id=1, "
        "replica_groups=[2,2]<=[2,2]T(1,0)|"
        "%all-gather = f32[1,2] all-gather(%all-reduce), channel_id=2, replica_groups=[2,2]<=[4], "
        "dimensions={1}",
     " all-gather(", 1},
    {"tiled_to_partial_broadcast",
     MOD(4, "f32[2,10]", "{devices=[4,1]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
     4, "f32[1,10] collective-permute(%p.1), channel_id=1, source_target_pairs={{1,2}}|"
     "f32[1,10] select(%broadcast.1, %collective-permute, %p.1)|"
     /* XLA's Broadcast() in the per-group state: in-group id (u32) == the group's device 0 */
     "%constant.5 = u32[2] constant({0, 1})|"
     "%dynamic-slice.3 = u32[1] dynamic-slice(%constant.5, %reshape.2)|"
     "%compare.1 = pred[] compare(%reshape.3, %constant.6), direction=EQ|"
     "f32[1,10] select(%broadcast.2, %select, %broadcast.3)|f32[1,10] all-reduce(%select.1), "
     "channel_id=2, replica_groups={{0,1},{2,3}}|ROOT %c.1 = f32[1,10] copy(%all-reduce)",
     " all-gather(", 0},
    /* C.9.1 then C.9.4: [8,1,1] -> [2,2,2] splits dim 0 at 2 ([2,4,1,1] -> [2,1,2,2]); dim 0
     * is then equal on both sides, so a copy is grouped on it and each group of 4 gathers the
     * split dim and slices its [2,2] tile, instead of replicating everything */
    {"split_then_group",
     MOD(8, "f32[16,8,4]", "{devices=[8,1,1]<=[8]}", "{devices=[2,2,2]<=[8]}"), 8,
     "f32[1,2,8,4] reshape(%p.1)|f32[1,2,8,4] copy(%reshape)|f32[1,8,8,4] all-gather(%copy), "
     "channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={1}|"
     "s32[4] constant({0, 0, 4, 4})|s32[4] constant({0, 2, 0, 2})|"
     "f32[1,8,4,2] dynamic-slice(%all-gather,|f32[8,4,2] reshape(%dynamic-slice.3)",
     " all-gather(", 1},
};

static void
test_reshard_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < SL_COUNTOF(k_rows); i++) {
        PartRun r;
        SlStatus st = part_run(&r, k_rows[i].hlo, k_rows[i].n);
        if (st != SL_OK)
            fail_msg("%s: %s: %s", k_rows[i].name, sl_status_name(st), r.err.msg);
        expect_all(k_rows[i].name, r.text.data, k_rows[i].want);
        size_t c = count_of(r.text.data, k_rows[i].collective);
        if (c != k_rows[i].count)
            fail_msg("%s: %zu x '%s', want %zu:\n%s", k_rows[i].name, c, k_rows[i].collective,
                     k_rows[i].count, r.text.data);
        part_free(&r);
    }
}

/* A second request for the same target reuses the first result (one all-gather). */
static void
test_reshard_cache(void **state)
{
    (void)state;
    PartRun r;
    const char *hlo = "HloModule t, num_partitions=4\n\nENTRY main {\n"
                      "  p = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n"
                      "  a = f32[8] negate(p), sharding={replicated}\n"
                      "  b = f32[8] abs(p), sharding={replicated}\n"
                      "  ROOT t = (f32[8], f32[8]) tuple(a, b), sharding={{replicated},{replicated}}\n}\n";
    assert_int_equal(part_run(&r, hlo, 4), SL_OK);
    assert_int_equal(count_of(r.text.data, " all-gather("), 1);
    part_free(&r);
}

/* HandleConstant: an evenly tiled constant of one repeated value becomes a constant of the
 * shard shape, so the way back to replicated is an all-gather; another constant is sliced
 * from the full one, whose reshard-cache entry leads straight back to it. */
static void
test_reshard_constants(void **state)
{
    (void)state;
    PartRun r;
    const char *hlo =
        "HloModule t, num_partitions=4\n\nENTRY main {\n"
        "  k = f32[4,6] constant({{2,2,2,2,2,2},{2,2,2,2,2,2},{2,2,2,2,2,2},{2,2,2,2,2,2}}), "
        "sharding={devices=[2,2]<=[4]}\n"
        "  j = f32[4,2] constant({{1,2},{3,4},{5,6},{7,8}}), sharding={devices=[4,1]<=[4]}\n"
        "  a = f32[4,6] copy(k), sharding={replicated}\n"
        "  b = f32[4,2] copy(j), sharding={replicated}\n"
        "  ROOT t = (f32[4,6], f32[4,2]) tuple(a, b), sharding={{replicated},{replicated}}\n}\n";
    assert_int_equal(part_run(&r, hlo, 4), SL_OK);
    expect_all("constants", r.text.data,
               "%k.1 = f32[2,3] constant({{2, 2, 2}, {2, 2, 2}})|"
               "f32[2,6] all-gather(%k.1), channel_id=1, replica_groups=[2,2]<=[4], "
               "dimensions={1}|f32[4,6] all-gather(%all-gather), channel_id=2|"
               "%b.1 = f32[4,2] copy(%j.1)");
    assert_int_equal(count_of(r.text.data, " all-gather("), 2);
    part_free(&r);
}

/* A broadcast whose operand, with the broadcast dimension removed, has the same replication
 * groups as sets ({0,2,1,3},{4,6,5,7} vs {0,1,2,3},{4,5,6,7}): every device already holds its
 * rows, so XLA (whose PartialTile sorts the groups) moves nothing; the shardings print as
 * written. */
static void
test_reshard_same_groups_as_sets(void **state)
{
    (void)state;
    PartRun r;
    const char *hlo =
        "HloModule t, num_partitions=8\n\nENTRY main {\n"
        "  p = f32[32,256] parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
        "  ROOT b = f32[32,256,64] broadcast(p), dimensions={0,1}, "
        "sharding={devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}\n}\n";
    assert_int_equal(part_run(&r, hlo, 8), SL_OK);
    expect_all("same groups", r.text.data,
               "%p.1 = f32[16,256] parameter(0), sharding={devices=[2,1,4]<=[8] "
               "last_tile_dim_replicate}|"
               "ROOT %b.1 = f32[16,256,32] broadcast(%p.1), dimensions={0,1}");
    assert_int_equal(count_of(r.text.data, "collective-permute("), 0);
    assert_int_equal(count_of(r.text.data, "all-to-all("), 0);
    assert_int_equal(count_of(r.text.data, "all-gather("), 0);
    part_free(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshard_rows),
        cmocka_unit_test(test_reshard_cache),
        cmocka_unit_test(test_reshard_constants),
        cmocka_unit_test(test_reshard_same_groups_as_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
