/* test_spmd_reshard.c - one row per reshard route (gspmd.md §C): exact local shapes,
 * collective kinds, replica groups, dimensions and channel ids in the printed output. */
#include <stdio.h>

#include "spmd_test_util.h"

#define MOD(n, shape, from, to)                                                                \
    "HloModule t, num_partitions=" #n "\n\nENTRY main {\n  p = " shape                          \
    " parameter(0), sharding=" from "\n  ROOT c = " shape " copy(p), sharding=" to "\n}\n"

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
    {"partial_to_tiled",
     MOD(4, "f32[8,16]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{devices=[4,1]<=[4]}"),
     4, "f32[2,16] dynamic-slice(|s32[4] constant({0, 2, 0, 2})", " all-", 0},
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
     "s32[4] constant({0, 2, 0, 2})|f32[2,3] dynamic-slice(%dynamic-slice.4, %reshape, %constant)",
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
    /* C.8.3: partial [1,2,3] -> tiled [2,3]: all-to-all to [2,1,3] partial, then a free slice */
    {"partial_to_tiled_all_to_all",
     MOD(6, "f32[6,6]", "{devices=[1,2,3]<=[6] last_tile_dim_replicate}", "{devices=[2,3]<=[6]}"),
     6, "f32[2,3,3] all-to-all(%reshape), channel_id=1, replica_groups=[3,2]<=[2,3]T(1,0), "
     "dimensions={0}|f32[3,6] reshape(%transpose)|f32[3,2] dynamic-slice(%reshape.1,",
     " all-gather(", 0},
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshard_rows),
        cmocka_unit_test(test_reshard_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
