/* test_spmd_handlers.c - per handler family: hand-written HLO in, exact output facts out
 * (local shapes, collectives, groups, dims). Also: spmd_emit strips the Shardy attribute and
 * names what it emits. */
#include <stdio.h>

#include "spmd_test_util.h"

#include "sharding/shd.h"

#define HDR(n) "HloModule t, num_partitions=" #n "\n\n"
#define SUM "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\n"

static const struct {
    const char *name, *hlo;
    int64_t n;
    const char *want;
    const char *absent; /* must not appear; NULL = no check */
} k_cases[] = {
    /* D.5 + C.12: slice at offset 1 of a [4]-sharded f32[16]: a one-element right halo */
    {"slice_halo",
     HDR(4) "ENTRY main {\n  p = f32[16] parameter(0), sharding={devices=[4]<=[4]}\n"
            "  ROOT s = f32[15] slice(p), slice={[1:16]}, sharding={devices=[4]<=[4]}\n}\n",
     4, "f32[3] slice(%p.1), slice={[1:4]}|f32[1] slice(%p.1), slice={[0:1]}|"
        "f32[1] collective-permute(%slice.1), channel_id=1, source_target_pairs={{1,0},{2,1},{3,2}}|"
        "%concatenate = f32[4] concatenate(%slice, %collective-permute), dimensions={0}|"
        "ROOT %copy = f32[4] copy(%concatenate)",
     " all-"},
    /* C.12 compact exchange: rows [3,6) of shard 1's window live on shard 0 */
    {"slice_compact_halo",
     HDR(2) "ENTRY main {\n  p = f32[100,2] parameter(0), sharding={devices=[2,1]<=[2]}\n"
            "  ROOT s = f32[6,2] slice(p), slice={[0:6], [0:2]}, sharding={devices=[2,1]<=[2]}\n}\n",
     2, "f32[3,2] slice(%p.1), slice={[3:6], [0:2]}|f32[3,2] collective-permute(%slice), "
        "channel_id=1, source_target_pairs={{0,1}}|f32[3,2] slice(%p.1), slice={[0:3], [0:2]}|"
        "f32[3,2] select(%broadcast.1, %collective-permute, %slice.1)|ROOT %copy = f32[3,2] copy(",
     " all-"},
    /* C.12 trimming: only original shard 4 holds [300:302]; shards 5-7 (right) and 2-3
     * (middle) drop out, the useful part is sliced first, two compact permutes deliver it */
    {"slice_trimmed_middle",
     HDR(8) "ENTRY main {\n  p = f32[512] parameter(0), sharding={devices=[8]<=[8]}\n"
            "  ROOT s = f32[2] slice(p), slice={[300:302]}, sharding={devices=[8]<=[8]}\n}\n",
     8, "f32[2] slice(%p.1), slice={[44:46]}|direction=LT|"
        "collective-permute(%slice.1), channel_id=1, source_target_pairs={{4,0}}|"
        "collective-permute(%slice.2), channel_id=2, source_target_pairs={{4,1}}|"
        "f32[1] select(%broadcast.1, %collective-permute.1, %collective-permute)|"
        "ROOT %copy = f32[1] copy(%select.1)",
     " all-"},
    /* C.12 right/middle trimming: [3:4] of a 4-way f32[4] comes from device 3 alone */
    {"slice_trimmed_right",
     HDR(4) "ENTRY main {\n  p = f32[4] parameter(0), sharding={devices=[4]<=[4]}\n"
            "  ROOT s = f32[1] slice(p), slice={[3:4]}, sharding={devices=[4]<=[4]}\n}\n",
     4, "f32[1] collective-permute(%p.1), channel_id=1, source_target_pairs={{3,0}}|"
        "ROOT %copy = f32[1] copy(%collective-permute)",
     " all-"},
    /* D.7 compact: pad 0_16 to twice the size over 16 shards; pieces chosen per ordinal,
     * then masked with the pad value */
    {"pad_double_compact",
     HDR(16) "ENTRY main {\n  p = f32[16] parameter(0), sharding={devices=[16]<=[16]}\n"
             "  v = f32[] constant(-1), sharding={replicated}\n"
             "  ROOT q = f32[32] pad(p, v), padding=0_16, sharding={devices=[16]<=[16]}\n}\n",
     16, "f32[1] collective-permute(%p.1), channel_id=1, source_target_pairs={{1,0},{2,1},{4,2},"
         "{6,3},{8,4},{10,5},{12,6},{14,7}}|f32[1] collective-permute(%p.1), channel_id=2, "
         "source_target_pairs={{3,1},{5,2},{7,3},{9,4},{11,5},{13,6},{15,7}}|"
         "f32[2] concatenate(%select, %select.1)|s32[16] constant({2, 2, 2, 2, 2, 2, 2, 2, 0, -2, "
         "-4, -6, -8, -10, -12, -14})|ROOT %select.2 = f32[2] select(%and, %concatenate, ",
     " all-"},
    /* D.3 recursion + halo merge: group on the kept dim 0, merge 7 -> 14 inside the groups
     * with a left halo from the neighbour (pairs stay inside each group) */
    {"reshape_grouped_merge_halo",
     HDR(4) "ENTRY main {\n  p = s32[4,2,3,7,10] parameter(0), "
            "sharding={devices=[2,1,1,2,1]<=[4]}\n  ROOT r = s32[4,3,2,1,14,5] reshape(p), "
            "sharding={devices=[2,1,1,1,2,1]<=[4]}\n}\n",
     4, "s32[2,3,2,1,8,5] reshape(%copy)|s32[2,3,2,1,1,5] slice(%reshape), "
        "slice={[0:2], [0:3], [0:2], [0:1], [7:8], [0:5]}|collective-permute(%slice), "
        "channel_id=1, source_target_pairs={{0,1},{2,3}}|"
        "ROOT %dynamic-slice.2 = s32[2,3,2,1,7,5] dynamic-slice(%concatenate,",
     " all-"},
    /* D.0 uneven infeed: one branch per shard shape (9 = 5 + 4), branch index = partition id,
     * the short shard padded to the shard shape f32[5,2] */
    {"infeed_uneven_conditional",
     HDR(2) "ENTRY main {\n  t = token[] after-all(), sharding={maximal device=0}\n"
            "  i = (f32[9,2], token[]) infeed(t), sharding={{devices=[2,1]<=[2]}, "
            "{maximal device=0}}\n  ROOT d = f32[9,2] get-tuple-element(i), index=0, "
            "sharding={devices=[2,1]<=[2]}\n}\n",
     2, "(f32[5,2], token[]) infeed(%infeed_token_param)|(f32[4,2], token[]) "
        "infeed(%infeed_token_param.1)|f32[5,2] pad(%get-tuple-element, %constant), "
        "padding=0_1x0_0|s32[] convert(%partition-id)|conditional(%convert, %t.1, %t.1), "
        "branch_computations={%infeed_branch_0, %infeed_branch_1}|"
        "ROOT %d.1 = f32[5,2] get-tuple-element(%conditional), index=0",
     " all-"},
    /* D.0 even infeed: the host delivers each device its own tile, so the infeed itself has
     * the shard shape f32[2,2,2,2] (layout kept); no full-shape infeed, no dynamic-slice */
    {"infeed_even_shard_shape",
     HDR(4) "ENTRY main {\n  t = token[] after-all(), sharding={maximal device=0}\n"
            "  i = (f32[4,4,2,2]{3,2,1,0}, token[]) infeed(t), "
            "sharding={{devices=[2,2,1,1]<=[4]}, {maximal device=0}}\n"
            "  ROOT d = f32[4,4,2,2]{3,2,1,0} get-tuple-element(i), index=0, "
            "sharding={devices=[2,2,1,1]<=[4]}\n}\n",
     4, "%i.1 = (f32[2,2,2,2]{3,2,1,0}, token[]) infeed(%t.1)|"
        "ROOT %d.1 = f32[2,2,2,2]{3,2,1,0} get-tuple-element(%i.1), index=0",
     "dynamic-slice"},
    /* ... per leaf: the tiled leaf is split 2x2, the replicated one keeps its full shape */
    {"infeed_even_tuple_leaves",
     HDR(4) "ENTRY main {\n  t = token[] after-all(), sharding={maximal device=0}\n"
            "  i = ((f32[8,6], s32[3]), token[]) infeed(t), "
            "sharding={{devices=[2,2]<=[4]}, {replicated}, {maximal device=0}}\n"
            "  ROOT d = (f32[8,6], s32[3]) get-tuple-element(i), index=0, "
            "sharding={{devices=[2,2]<=[4]}, {replicated}}\n}\n",
     4, "%i.1 = ((f32[4,3], s32[3]), token[]) infeed(%t.1)|"
        "ROOT %d.1 = (f32[4,3], s32[3]) get-tuple-element(%i.1), index=0",
     "dynamic-slice"},
    /* D.0 outfeed: an even split outfeeds the local shard (outfeed_shape rewritten with the
     * original layout); an uneven one branches per local shape and slices off the padding */
    {"outfeed_even_local",
     HDR(2) "ENTRY main {\n  t = token[] after-all()\n"
            "  p = f32[8,2] parameter(0), sharding={devices=[2,1]<=[2]}\n"
            "  ROOT o = token[] outfeed(p, t), outfeed_shape=f32[8,2]{0,1}, "
            "sharding={devices=[2,1]<=[2]}\n}\n",
     2, "ROOT %o.1 = token[] outfeed(%p.1, %t.1), outfeed_shape=f32[4,2]{0,1}", " all-"},
    {"outfeed_uneven_conditional",
     HDR(2) "ENTRY main {\n  t = token[] after-all()\n"
            "  p = f32[7] parameter(0), sharding={devices=[2]<=[2]}\n"
            "  ROOT o = token[] outfeed(p, t), outfeed_shape=f32[7]{0}, "
            "sharding={devices=[2]<=[2]}\n}\n",
     2, "outfeed_shape=f32[4]{0}|f32[3] slice(%get-tuple-element.2), slice={[0:3]}|"
        "outfeed_shape=f32[3]{0}|(f32[4], token[]) tuple(%p.1, %t.1)|"
        "ROOT %conditional = token[] conditional(%convert, %tuple, %tuple), "
        "branch_computations={%outfeed_branch_0, %outfeed_branch_1}",
     " all-"},
    /* D.19: the operand takes the reversed device order, a collective-permute */
    {"reverse_permute",
     HDR(4) "ENTRY main {\n  p = f32[16] parameter(0), sharding={devices=[4]<=[4]}\n"
            "  ROOT r = f32[16] reverse(p), dimensions={0}, sharding={devices=[4]<=[4]}\n}\n",
     4, "f32[4] collective-permute(%p.1), channel_id=1, "
        "source_target_pairs={{0,3},{1,2},{2,1},{3,0}}|ROOT %r.1 = f32[4] reverse(%collective-permute)",
     " all-"},
    /* D.7: pad 1_1 of an uneven f32[14]: a left halo, then masking with the pad value */
    {"pad_halo_masked",
     HDR(4) "ENTRY main {\n  p = f32[14] parameter(0), sharding={devices=[4]<=[4]}\n"
            "  z = f32[] constant(1), sharding={replicated}\n"
            "  ROOT q = f32[16] pad(p, z), padding=1_1, sharding={devices=[4]<=[4]}\n}\n",
     4, "f32[1] collective-permute(%slice), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3}}|"
        "f32[4] concatenate(%collective-permute, %slice.1)|direction=GE|s32[] constant(15)|"
        "ROOT %select = f32[4] select(%and, %concatenate, %broadcast.3)",
     " all-"},
    /* C.12 example: reduce-window size 3 pad 1_1 over f32[16] in 4 shards */
    {"reduce_window_halo",
     HDR(4) "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  ROOT m = f32[] maximum(a, b)\n}\n\n"
            "ENTRY main {\n  p = f32[16] parameter(0), sharding={devices=[4]<=[4]}\n"
            "  z = f32[] constant(0), sharding={replicated}\n"
            "  ROOT r = f32[16] reduce-window(p, z), window={size=3 pad=1_1}, to_apply=mx, "
            "sharding={devices=[4]<=[4]}\n}\n",
     4, "f32[1] slice(%p.1), slice={[3:4]}|collective-permute(%slice), channel_id=1, "
        "source_target_pairs={{0,1},{1,2},{2,3}}|collective-permute(%slice.1), channel_id=2, "
        "source_target_pairs={{1,0},{2,1},{3,2}}|f32[6] concatenate(%collective-permute, %p.1, "
        "%collective-permute.1)|f32[6] select(|ROOT %r.1 = f32[4] reduce-window(%select, %z.1), "
        "window={size=3}",
     " all-"},
    /* D.21 RotateRight by 2 of f32[12] in 4 shards: the last 2 of the left neighbour (ring),
     * then the own first element */
    {"rotate_right",
     HDR(4) "ENTRY main {\n  p = f32[12] parameter(0), sharding={devices=[4]<=[4]}\n"
            "  ROOT c = f32[12] custom-call(p), custom_call_target=\"_SPMDInternalOp_RotateRight\", "
            "backend_config=\"dimension=0,amount=2\", sharding={devices=[4]<=[4]}\n}\n",
     4, "f32[2] slice(%p.1), slice={[1:3]}|f32[2] collective-permute(%slice), channel_id=1, "
        "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}|f32[1] slice(%p.1), slice={[0:1]}|"
        "ROOT %concatenate = f32[3] concatenate(%collective-permute, %slice.1), dimensions={0}",
     " all-"},
    /* HandleConcatenate into a replicated result: both operands are gathered whole before
     * the concatenate. Running it in the operands' common [4] sharding concatenated local
     * shards and gathered the wrong order (found by the partition fuzzer). */
    {"concatenate_replicated_of_sharded",
     HDR(4) "ENTRY main {\n  a = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n"
            "  b = f32[4] parameter(1), sharding={devices=[4]<=[4]}\n"
            "  ROOT r = f32[12] concatenate(a, b), dimensions={0}, sharding={replicated}\n}\n",
     4, "%all-gather = f32[8] all-gather(%a.1), channel_id=1, replica_groups=[1,4]<=[4], "
        "dimensions={0}|%all-gather.1 = f32[4] all-gather(%b.1), channel_id=2, "
        "replica_groups=[1,4]<=[4], dimensions={0}|"
        "ROOT %r.1 = f32[12] concatenate(%all-gather, %all-gather.1), dimensions={0}",
     "f32[3] concatenate"},
    /* D.21 MultiSlice: a super shard with 2 elements from the left and 1 from the right
     * (no wrap-around), a per-shard dynamic-slice, then 4 local slices */
    {"multi_slice",
     HDR(2) "ENTRY main {\n  p = f64[1536] parameter(0), sharding={devices=[2]<=[2]}\n"
            "  ROOT c = (f64[1520], f64[1520], f64[1520], f64[1520]) custom-call(p), "
            "custom_call_target=\"_SPMDInternalOp_MultiSlice\", sharding={{devices=[2]<=[2]}, "
            "{devices=[2]<=[2]}, {devices=[2]<=[2]}, {devices=[2]<=[2]}}, backend_config=\"dimension=0,"
            "amount=3,start_indices=[6],limit_indices=[1526],strides=[1],bufferize=0\"\n}\n",
     2, "f64[1] collective-permute(%slice), channel_id=1, source_target_pairs={{1,0}}|"
        "f64[2] slice(%p.1), slice={[766:768]}|collective-permute(%slice.1), channel_id=2, "
        "source_target_pairs={{0,1}}|f64[771] concatenate(%collective-permute.1, %p.1, "
        "%collective-permute)|f64[763] dynamic-slice(%concatenate, %add)|"
        "f64[760] slice(%dynamic-slice.1), slice={[3:763]}|ROOT %tuple = (f64[760], f64[760], "
        "f64[760], f64[760]) tuple(",
     " all-"},
    /* D.21 MultiPad by 1 of an uneven f64[1519] in 2 shards: shard 0's left halo and shard
     * 1's tail become the pad value */
    {"multi_pad",
     HDR(2) "ENTRY main {\n  p = f64[1519,6] parameter(0), sharding={devices=[2,1]<=[2]}\n"
            "  v = f64[] constant(0), sharding={replicated}\n"
            "  ROOT c = (f64[1520,6], f64[1520,6]) custom-call(p, v), "
            "custom_call_target=\"_SPMDInternalOp_MultiPad\", sharding={{devices=[2,1]<=[2]}, "
            "{devices=[2,1]<=[2]}}, backend_config=\"dimension=0,amt=1,bufferize=0\"\n}\n",
     2, "f64[1,6] slice(%p.1), slice={[759:760], [0:6]}|collective-permute(%slice), channel_id=1, "
        "source_target_pairs={{0,1}}|f64[1,6] select(%compare.1, %broadcast, %collective-permute)|"
        "pred[760,6] compare(%iota, %broadcast.1), direction=LT|"
        "f64[761,6] concatenate(%select, %select.2)|f64[760,6] slice(%concatenate), "
        "slice={[1:761], [0:6]}",
     " all-"},
    /* D.13/D.21 TopK sharded on the sort dim: local TopK on f32[4,32], gather of the 2x5
     * candidates, one replicated values-only sort (indices unread), first 5 */
    {"topk_sort_dim_sharded",
     HDR(2) "cmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  ROOT c = pred[] compare(a, b), direction=GT\n}\n\n"
            "ENTRY main {\n  p = f32[4,64] parameter(0), sharding={devices=[1,2]<=[2]}\n"
            "  t = (f32[4,5], s32[4,5]) custom-call(p), custom_call_target=\"TopK\", "
            "called_computations={cmp}, sharding={{devices=[1,2]<=[2]}, {devices=[1,2]<=[2]}}\n"
            "  ROOT v = f32[4,5] get-tuple-element(t), index=0, sharding={replicated}\n}\n",
     2, "%t.1 = (f32[4,5], s32[4,5]) custom-call(%p.1), custom_call_target=\"TopK\"|"
        "f32[4,10] all-gather(%get-tuple-element), channel_id=1, replica_groups=[1,2]<=[2], "
        "dimensions={1}|f32[4,10] sort(%all-gather), dimensions={1}, is_stable=true, "
        "to_apply=%compare-value|f32[4,5] slice(%sort), slice={[0:4], [0:5]}",
     NULL},
    {"elementwise_local",
     HDR(4) "ENTRY main {\n  p = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}\n"
            "  q = f32[8,16] parameter(1), sharding={devices=[4,1]<=[4]}\n"
            "  ROOT a = f32[8,16] add(p, q), sharding={devices=[4,1]<=[4]}\n}\n",
     4, "ROOT %a.1 = f32[2,16] add(%p.1, %q.1)", " all-"},
    {"broadcast_no_collective",
     HDR(4) "ENTRY main {\n  p = f32[16] parameter(0), sharding={replicated}\n"
            "  ROOT b = f32[8,16] broadcast(p), dimensions={1}, sharding={devices=[4,1]<=[4]}\n}\n",
     4, "f32[2,16] broadcast(%p.1), dimensions={1}", " all-"},
    {"transpose",
     HDR(4) "ENTRY main {\n  p = f32[8,16] parameter(0), sharding={devices=[1,4]<=[4]}\n"
            "  ROOT t = f32[16,8] transpose(p), dimensions={1,0}, sharding={devices=[4,1]<=[4]}\n}\n",
     4, "f32[4,8] transpose(%p.1), dimensions={1,0}", " all-"},
    {"reshape_split",
     HDR(4) "ENTRY main {\n  p = f32[128] parameter(0), sharding={devices=[4]<=[4]}\n"
            "  ROOT r = f32[16,8] reshape(p), sharding={devices=[4,1]<=[4]}\n}\n",
     4, "f32[4,8] reshape(%p.1)", " all-"},
    {"reduce_all_reduce",
     HDR(4) SUM "ENTRY main {\n  p = f32[8,16] parameter(0), sharding={devices=[1,4]<=[4]}\n"
                "  z = f32[] constant(0), sharding={replicated}\n"
                "  ROOT r = f32[8] reduce(p, z), dimensions={1}, to_apply=sum, sharding={replicated}\n}\n",
     4, "f32[8] reduce(%p.1, %z.1), dimensions={1}|f32[8] all-reduce(%r.2), channel_id=1, "
        "replica_groups=[1,4]<=[4], use_global_device_ids=true, to_apply=%sum.1", NULL},
    /* D.10 + AllReduceAlongShardingDims (base partitioner): one all-reduce per sharded
     * reduced dim, the last dim first ({{0,1},{2,3}}), then dim 0 ({{0,2},{1,3}}) */
    {"reduce_all_reduce_per_dim",
     HDR(4) SUM "ENTRY main {\n  p = f32[8,16] parameter(0), sharding={devices=[2,2]<=[4]}\n"
                "  z = f32[] constant(0), sharding={replicated}\n"
                "  ROOT r = f32[] reduce(p, z), dimensions={0,1}, to_apply=sum, sharding={replicated}\n}\n",
     4, "f32[] all-reduce(%r.2), channel_id=1, replica_groups=[2,2]<=[4], use_global_device_ids=true|"
        "ROOT %all-reduce.1 = f32[] all-reduce(%all-reduce), channel_id=2, "
        "replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true", NULL},
    {"concat_moves_tiles",
     HDR(2) "ENTRY main {\n  p = f32[4,8] parameter(0), sharding={devices=[2,1]<=[2]}\n"
            "  q = f32[4,8] parameter(1), sharding={devices=[2,1]<=[2]}\n"
            "  ROOT c = f32[8,8] concatenate(p, q), dimensions={0}, sharding={devices=[2,1]<=[2]}\n}\n",
     2, " all-to-all(|f32[8,4] concatenate(", NULL},
    {"dynamic_slice_replicates_sliced_dim",
     HDR(2) "ENTRY main {\n  p = f32[8,16] parameter(0), sharding={devices=[2,1]<=[2]}\n"
            "  i = s32[] parameter(1), sharding={replicated}\n"
            "  ROOT d = f32[4,16] dynamic-slice(p, i, i), dynamic_slice_sizes={4,16}, "
            "sharding={devices=[2,1]<=[2]}\n}\n",
     2, "f32[8,16] all-gather(|f32[4,16] dynamic-slice(|f32[2,16] dynamic-slice(", NULL},
    {"iota_offset",
     HDR(4) "ENTRY main {\n  ROOT i = s32[8] iota(), iota_dimension=0, sharding={devices=[4]<=[4]}\n}\n",
     4, "s32[2] iota(), iota_dimension=0|s32[4] constant({0, 1, 2, 3})|s32[] constant(2)|"
        "s32[] multiply(%reshape, %constant.1)|s32[2] add(", "convert("},
    /* XLA's HandleIota: the ordinal along the iota dim (a table over the tile coordinates, the
     * other tiled dim ignored) times the local size, converted to the element type */
    {"iota_ordinal_times_size",
     HDR(4) "ENTRY main {\n  ROOT i = f32[8,64] iota(), iota_dimension=1, "
            "sharding={devices=[2,2]<=[4]}\n}\n",
     4, "f32[4,32] iota(), iota_dimension=1|s32[4] constant({0, 1, 0, 1})|s32[] constant(32)|"
        "s32[] multiply(%reshape, %constant.1)|f32[] convert(%multiply)|"
        "f32[4,32] broadcast(%convert), dimensions={}|ROOT %add = f32[4,32] add(%i.1, %broadcast)",
     "constant({0, 32"},
    /* a halo shift by exactly the shard size: XLA's creator returns the operand for a permute
     * in which every device sends to itself (its channel id 7 is still spent) */
    {"permute_identity_dropped",
     HDR(4) "ENTRY main {\n  p = f32[2,32] parameter(0), sharding={devices=[1,4]<=[4]}\n"
            "  z = f32[] constant(0)\n"
            "  pd = f32[2,36] pad(p, z), padding=0_0x2_2, sharding={devices=[1,4]<=[4]}\n"
            "  a = f32[2,32] slice(pd), slice={[0:2], [4:36]}, sharding={devices=[1,4]<=[4]}\n"
            "  b = f32[2,4] slice(pd), slice={[0:2], [0:4]}, sharding={devices=[1,4]<=[4]}\n"
            "  ROOT c = f32[2,36] concatenate(a, b), dimensions={1}, "
            "sharding={devices=[1,4]<=[4]}\n}\n",
     4, "ROOT %concatenate.2 = f32[2,9] concatenate(%slice.8, %collective-permute.6)|"
        "channel_id=8, source_target_pairs={{0,3},{1,0},{2,1},{3,2}}",
     "{{0,0},{1,1}"},
    /* a permute with no pairs is zeros (XLA's CreateZero): the pad's halo beyond the one
     * row of data is broadcast(0), not three empty collective-permutes */
    {"permute_empty_is_zero",
     HDR(2) "ENTRY main {\n  p = f32[2,6,4] parameter(0), sharding={devices=[1,2,1]<=[2]}\n"
            "  s = f32[2,1,4] slice(p), slice={[0:2], [5:6], [0:4]}, "
            "sharding={devices=[1,2,1]<=[2]}\n"
            "  z = f32[] constant(0)\n"
            "  ROOT pd = f32[2,10,4] pad(s, z), padding=0_0x0_9x0_0, "
            "sharding={devices=[1,2,1]<=[2]}\n}\n",
     2, "%broadcast.1 = f32[2,1,4] broadcast(%z.1), dimensions={}|"
        "f32[2,5,4] concatenate(%copy, %collective-permute.1, %broadcast.1, %broadcast.1, "
        "%broadcast.1), dimensions={1}|channel_id=2, source_target_pairs={{1,0}}",
     "source_target_pairs={}"},
    /* a slice that is each shard's own row, in the operand's sharding: resharded to the
     * slice's (replicated: masked dynamic-update-slice + all-reduce) inside the handler, so
     * no copy is made (upstream's HandleSliceHelper copies only a result that is still the
     * windowed input) */
    {"slice_resharded_before_copy",
     HDR(4) "ENTRY main {\n  p = f32[4,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
            "  ROOT s = f32[2,6] slice(p), slice={[0:2], [0:6]}, sharding={replicated}\n}\n",
     4, "%select = f32[1,6] select(%compare, %p.1, %broadcast.2)|"
        "f32[2,6] dynamic-update-slice(%broadcast.3, %select, %reshape.1, %constant.5)|"
        "ROOT %all-reduce = f32[2,6] all-reduce(%dynamic-update-slice), channel_id=1, "
        "replica_groups=[1,4]<=[4]",
     " copy("},
    {"full_to_shard",
     HDR(2) "ENTRY main {\n  p = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
            "  ROOT m = f32[4] custom-call(p), custom_call_target=\"SPMDFullToShardShape\", "
            "sharding={manual}\n}\n",
     2, "ROOT %copy = f32[4] copy(%p.1)", " all-"},
    {"while_body_partitioned",
     HDR(2) "cond {\n  c = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
            "  ROOT t = pred[] constant(true), sharding={replicated}\n}\n\n"
            "body {\n  b = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
            "  ROOT n = f32[8] negate(b), sharding={devices=[2]<=[2]}\n}\n\n"
            "ENTRY main {\n  p = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
            "  ROOT w = f32[8] while(p), condition=cond, body=body, sharding={devices=[2]<=[2]}\n}\n",
     2, "f32[4] negate(|f32[4] while(%p.1)", " all-"},
    /* scan sharded off its scan dim: shard-local, the body rebuilt for f32[2] slices (the
     * broadcast of a scalar follows its users' dims), no communication */
    {"scan_non_scan_dim_local",
     HDR(4) "body {\n  a = f32[8] parameter(0)\n  c = f32[8] parameter(1)\n"
            "  two = f32[] constant(2)\n  b = f32[8] broadcast(two), dimensions={}\n"
            "  m = f32[8] multiply(a, b)\n  s = f32[8] add(m, c)\n"
            "  ROOT t = (f32[8], f32[8]) tuple(s, s)\n}\n\n"
            "ENTRY main {\n  p = f32[8,10] parameter(0), sharding={devices=[4,1]<=[4]}\n"
            "  i = f32[8] parameter(1), sharding={devices=[4]<=[4]}\n"
            "  ROOT r = (f32[8,10], f32[8]) scan(p, i), dimensions={1}, num_carries=1, "
            "is_associative=true, to_apply=body, "
            "sharding={{devices=[4,1]<=[4]}, {devices=[4]<=[4]}}\n}\n",
     4, "%body.spmd (a.1: f32[2], c.1: f32[2]) -> (f32[2], f32[2])|"
        "%b.1 = f32[2] broadcast(%two.1), dimensions={}|%s.1 = f32[2] add(%m.1, %c.1)|"
        "ROOT %r.1 = (f32[2,10], f32[2]) scan(%p.1, %i.1), dimensions={1}, num_carries=1, "
        "is_associative=true, to_apply=%body.spmd",
     " all-"},
    /* sharded on the scan dim (not associative): the tiles move to dim 0 (all-to-all), the
     * scan runs over all 12 steps on f32[2] slices, the carry comes back by all-gather */
    {"scan_dim_tiles_moved",
     HDR(4) "body {\n  a = f32[8] parameter(0)\n  c = f32[8] parameter(1)\n"
            "  s = f32[8] add(a, c)\n  ROOT t = (f32[8], f32[8]) tuple(s, s)\n}\n\n"
            "ENTRY main {\n  p = f32[8,12] parameter(0), sharding={devices=[1,4]<=[4]}\n"
            "  i = f32[8] parameter(1), sharding={replicated}\n"
            "  ROOT r = (f32[8,12], f32[8]) scan(p, i), dimensions={1}, num_carries=1, "
            "to_apply=body, sharding={{devices=[1,4]<=[4]}, {replicated}}\n}\n",
     4, "f32[4,2,3] all-to-all(%reshape), channel_id=1, replica_groups=[1,4]<=[4], "
        "dimensions={0}|f32[2] dynamic-slice(%i.1, %reshape.2), dynamic_slice_sizes={2}|"
        "%r.1 = (f32[2,12], f32[2]) scan(%reshape.1, %dynamic-slice.1), dimensions={1}, "
        "num_carries=1, to_apply=%body.spmd|f32[8] all-gather(%get-tuple-element.1)",
     NULL},
    /* associative, sharded on the scan dim: parallel prefix. Shard totals (a scan of slices
     * 1..2 seeded with slice 0), one all-gather of the f32[8,1] totals, a scan of the four
     * totals from the init, then the local scan from the neighbour's prefix (the init on
     * shard 0); the final carry is the stack scan's */
    {"scan_parallel_prefix",
     HDR(4) "body {\n  a = f32[8] parameter(0)\n  c = f32[8] parameter(1)\n"
            "  m = f32[8] maximum(a, c)\n  ROOT t = (f32[8], f32[8]) tuple(m, m)\n}\n\n"
            "ENTRY main {\n  p = f32[8,12] parameter(0), sharding={devices=[1,4]<=[4]}\n"
            "  i = f32[8] parameter(1), sharding={replicated}\n"
            "  ROOT r = (f32[8,12], f32[8]) scan(p, i), dimensions={1}, num_carries=1, "
            "is_associative=true, to_apply=body, "
            "sharding={{devices=[1,4]<=[4]}, {replicated}}\n}\n",
     4, "%slice = f32[8,1] slice(%p.1), slice={[0:8], [0:1]}|"
        "%slice.1 = f32[8,2] slice(%p.1), slice={[0:8], [1:3]}|"
        "%r.1 = (f32[8,2], f32[8]) scan(%slice.1, %reshape)|"
        "%all-gather = f32[8,4] all-gather(%reshape.1), channel_id=1, replica_groups=[1,4]<=[4], "
        "dimensions={1}|%r.2 = (f32[8,4], f32[8]) scan(%all-gather, %i.1)|"
        "%maximum = s32[] maximum(%subtract, %constant.1)|"
        "f32[8,1] dynamic-slice(%get-tuple-element.1, %constant.1, %maximum)|"
        "%select = f32[8] select(%broadcast, %i.1, %reshape.3)|"
        "%r.3 = (f32[8,3], f32[8]) scan(%p.1, %select)|"
        "ROOT %tuple = (f32[8,3], f32[8]) tuple(%get-tuple-element.2, %get-tuple-element.3)",
     " all-reduce"},
    /* a body op the rebuild does not model (reverse): the scan runs replicated, on the
     * source body */
    {"scan_body_unmodeled_replicated",
     HDR(4) "body {\n  a = f32[8] parameter(0)\n  c = f32[8] parameter(1)\n"
            "  v = f32[8] reverse(a), dimensions={0}\n  s = f32[8] add(v, c)\n"
            "  ROOT t = (f32[8], f32[8]) tuple(s, s)\n}\n\n"
            "ENTRY main {\n  p = f32[8,10] parameter(0), sharding={devices=[4,1]<=[4]}\n"
            "  i = f32[8] parameter(1), sharding={devices=[4]<=[4]}\n"
            "  ROOT r = (f32[8,10], f32[8]) scan(p, i), dimensions={1}, num_carries=1, "
            "to_apply=body, sharding={{devices=[4,1]<=[4]}, {devices=[4]<=[4]}}\n}\n",
     4, "f32[8,10] all-gather(%p.1)|%r.1 = (f32[8,10], f32[8]) scan(%all-gather, "
        "%all-gather.1), dimensions={1}, num_carries=1, to_apply=%body.1",
     "body.spmd"},
};

static void
test_handler_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < SL_COUNTOF(k_cases); i++) {
        PartRun r;
        SlStatus st = part_run(&r, k_cases[i].hlo, k_cases[i].n);
        if (st != SL_OK)
            fail_msg("%s: %s: %s", k_cases[i].name, sl_status_name(st), r.err.msg);
        expect_all(k_cases[i].name, r.text.data, k_cases[i].want);
        if (k_cases[i].absent && strstr(r.text.data, k_cases[i].absent))
            fail_msg("%s: unexpected \"%s\" in:\n%s", k_cases[i].name, k_cases[i].absent,
                     r.text.data);
        part_free(&r);
    }
}

/* spmd_emit removes xla.sdy.has_unreduced_axes and keeps the other frontend attributes. */
static void
test_emit_strips_unreduced_marker(void **state)
{
    (void)state;
    PartRun r;
    const char *hlo =
        HDR(2) "ENTRY main {\n  p = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
               "  ROOT n = f32[8] negate(p), sharding={devices=[2]<=[2]}, "
               "frontend_attributes={keep=\"1\",xla.sdy.has_unreduced_axes=\"true\"}\n}\n";
    assert_int_equal(part_run(&r, hlo, 2), SL_OK);
    assert_null(strstr(r.text.data, "has_unreduced_axes"));
    assert_non_null(strstr(r.text.data, "keep="));
    part_free(&r);
    const char *only =
        HDR(2) "ENTRY main {\n  p = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
               "  ROOT n = f32[8] negate(p), sharding={devices=[2]<=[2]}, "
               "frontend_attributes={xla.sdy.has_unreduced_axes=\"true\"}\n}\n";
    assert_int_equal(part_run(&r, only, 2), SL_OK);
    assert_null(strstr(r.text.data, "frontend_attributes"));
    part_free(&r);
}

/* Output names: every input name is taken (a clone of `add.7` continues after the highest
 * `add` suffix of the input), opcode-named instructions start at the bare opcode, and the
 * output module's own counters continue where the partitioner stopped. */
static void
test_emit_names(void **state)
{
    (void)state;
    PartRun r;
    const char *hlo =
        HDR(2) "ENTRY main {\n  p = f32[8] parameter(0), sharding={replicated}\n"
               "  add.7 = f32[8] add(p, p), sharding={devices=[2]<=[2]}\n"
               "  ROOT add = f32[8] add(add.7, add.7), sharding={devices=[2]<=[2]}\n}\n";
    assert_int_equal(part_run(&r, hlo, 2), SL_OK);
    expect_all("names", r.text.data,
               "%p.1 = f32[8] parameter(0)|%add.8 = f32[8] add(%p.1, %p.1)|"
               "%dynamic-slice = s32[1] dynamic-slice(|"
               "%dynamic-slice.1 = f32[4] dynamic-slice(%add.8, %reshape)|"
               "ROOT %add.9 = f32[4] add(%dynamic-slice.1, %dynamic-slice.1)");
    assert_null(strstr(r.text.data, "%add.7 ="));
    assert_null(strstr(r.text.data, "%add ="));
    assert_null(strstr(r.text.data, "%p ="));
    /* later names on the output module continue after the partitioner's */
    assert_string_equal(sl_sym_cstr(ir_module_unique_name(r.dst, sl_str("add"))), "add.10");
    assert_string_equal(sl_sym_cstr(ir_module_unique_name(r.dst, sl_str("dynamic-slice"))),
                        "dynamic-slice.2");
    assert_string_equal(sl_sym_cstr(ir_module_unique_name(r.dst, sl_str("p.5"))), "p.2");
    /* the counter API the partitioner syncs through: raises, never lowers */
    SlSym add = sl_intern(r.dst->names, sl_str("add"));
    assert_true(ir_module_set_name_counter(r.dst, add, 20));
    assert_string_equal(sl_sym_cstr(ir_module_unique_name(r.dst, sl_str("add"))), "add.20");
    assert_true(ir_module_set_name_counter(r.dst, add, 5));
    assert_string_equal(sl_sym_cstr(ir_module_unique_name(r.dst, sl_str("add.3"))), "add.21");
    part_free(&r);
}

/* The shared name-split rule: base and numeric suffix, -1 when there is no ".digits" suffix
 * of at most 15 digits. */
static void
test_name_split(void **state)
{
    (void)state;
    static const struct {
        const char *name, *base;
        int64_t suffix;
    } k[] = {
        {"add.17",             "add",                17             },
        {"add",                "add",                -1             },
        {"a.b.3",              "a.b",                3              },
        {"v2",                 "v2",                 -1             },
        {"x.",                 "x.",                 -1             },
        {"7",                  "7",                  -1             },
        {"p.123456789012345",  "p",                  123456789012345},
        {"p.1234567890123456", "p.1234567890123456", -1             },
        {"dot.007",            "dot",                7              },
    };
    for (size_t i = 0; i < SL_COUNTOF(k); i++) {
        SlStr base;
        int64_t got = ir_name_split(sl_str(k[i].name), &base);
        if (got != k[i].suffix || !sl_str_eq_cstr(base, k[i].base))
            fail_msg("%s: got %lld, base \"%.*s\"", k[i].name, (long long)got, SL_STR_ARG(base));
    }
}

/* ---- original-value recovery table ---- */

/* The ids of an instruction's replica groups as "{a,b},{c,d}" (iota form expanded). */
static void
groups_text(const IrInstr *i, char *out, size_t cap)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_REPLICA_GROUPS);
    assert_non_null(a);
    const IrReplicaGroups *g = a->u.groups;
    int64_t ids[64];
    uint32_t n_groups = g->n_groups, size = 0;
    const int64_t *v = g->ids;
    if (g->is_iota) {
        assert_true(ir_iota_count(&g->iota) <= (int64_t)SL_COUNTOF(ids));
        ir_iota_expand(&g->iota, ids);
        n_groups = (uint32_t)g->iota.dims[0];
        size = (uint32_t)g->iota.dims[1];
        v = ids;
    }
    size_t w = 0;
    out[0] = '\0';
    for (uint32_t k = 0, at = 0; k < n_groups && w < cap; k++) {
        uint32_t gs = g->is_iota ? size : g->group_sizes[k];
        w += (size_t)snprintf(out + w, cap - w, "%s{", k ? "," : "");
        for (uint32_t j = 0; j < gs && w < cap; j++, at++)
            w += (size_t)snprintf(out + w, cap - w, "%s%lld", j ? "," : "", (long long)v[at]);
        if (w < cap)
            w += (size_t)snprintf(out + w, cap - w, "}");
    }
}

static void
want_shape(const IrInstr *i, IrOp op, const char *shape)
{
    SlBuf b;
    sl_buf_init(&b);
    ir_shape_print(&i->shape, false, &b);
    sl_buf_putc(&b, '\0');
    if (i->op != op || strcmp(b.data, shape))
        fail_msg("%%%s: %s %s, want %s %s", sl_sym_cstr(i->name), ir_op_name(i->op), b.data,
                 ir_op_name(op), shape);
    sl_buf_fini(&b);
}

static int64_t
ag_dim(const IrInstr *i)
{
    const int64_t *d = NULL;
    assert_int_equal(ir_instr_ints_attr(i, IR_ATTR_DIMENSIONS, &d), 1);
    return d[0];
}

/* XLA's OriginalValueWithTransposedShardingAnnotation: the sharded add's original value is
 * recovered by a module that gathers dim 1 then dim 0 of the transposed iota tiling and slices
 * the padding off dim 0 (5 over 8 shards); the printed table parses back to the same text. */
static void
test_origin_recovery_transposed(void **state)
{
    (void)state;
    PartRun r;
    const char *hlo =
        HDR(16) "ENTRY entry {\n"
                "  p1 = f32[5,1024,1024] parameter(0), sharding={devices=[8,2,1]<=[2,4,2]T(2,1,0)}\n"
                "  p2 = f32[5,1024,1024] parameter(1), sharding={replicated}\n"
                "  ROOT add = f32[5,1024,1024]{2,1,0} add(p1, p2), "
                "sharding={devices=[8,2,1]<=[2,4,2]T(2,1,0)}, origin={{\"broadcast.443\"}}\n}\n";
    assert_int_equal(part_run(&r, hlo, 16), SL_OK);
    assert_int_equal(r.dst->n_recovery, 1);
    const IrRecovery *e = &r.dst->recovery[0];
    assert_true(sl_str_eq_cstr(e->old.name, "broadcast.443") && e->old.n_index == 0);
    assert_true(sl_str_eq_cstr(e->now.name, "broadcast.443__ovp0"));
    assert_non_null(e->module);
    assert_ptr_equal(ir_module_find_recovery(r.dst, &e->old), e);
    const IrComputation *c = e->module->entry;
    assert_int_equal(c->n_instrs, 5);
    want_shape(c->instrs[0], IR_OP_PARAMETER, "f32[1,512,1024]");
    SlBuf b;
    sl_buf_init(&b);
    shd_print(ir_instr_sharding(c->instrs[0]), &b);
    sl_buf_putc(&b, '\0');
    assert_string_equal(b.data, "{devices=[8,2,1]<=[2,4,2]T(2,1,0)}");
    sl_buf_fini(&b);
    want_shape(c->instrs[1], IR_OP_PARTITION_ID, "u32[]");
    char g[256];
    want_shape(c->instrs[2], IR_OP_ALL_GATHER, "f32[1,1024,1024]");
    assert_int_equal(ag_dim(c->instrs[2]), 1);
    groups_text(c->instrs[2], g, sizeof(g));
    assert_string_equal(g, "{0,8},{2,10},{4,12},{6,14},{1,9},{3,11},{5,13},{7,15}");
    want_shape(c->instrs[3], IR_OP_ALL_GATHER, "f32[8,1024,1024]");
    assert_int_equal(ag_dim(c->instrs[3]), 0);
    assert_ptr_equal(c->instrs[3]->operands[0], c->instrs[2]);
    groups_text(c->instrs[3], g, sizeof(g));
    assert_string_equal(g, "{0,2,4,6,1,3,5,7},{8,10,12,14,9,11,13,15}");
    want_shape(c->instrs[4], IR_OP_SLICE, "f32[5,1024,1024]");
    assert_ptr_equal(c->root, c->instrs[4]);
    /* the shard carries the placeholder; the table is printed in the header */
    expect_all("transposed", r.text.data,
               "origin_recovery_table={\n  {\"broadcast.443\"} : {\"broadcast.443__ovp0\"},\n"
               "  \"\n    HloModule recovery_module, entry_computation_layout="
               "{(f32[1,512,1024]{2,1,0})->f32[5,1024,1024]{2,1,0}}\n|"
               "    ENTRY %recovery_computation (param: f32[1,512,1024]) -> f32[5,1024,1024] {\n"
               "      %param = f32[1,512,1024]{2,1,0} parameter(0), sharding=|"
               "      %partition-id = u32[] partition-id()\n|"
               "channel_id=1, replica_groups=|channel_id=2, replica_groups=|"
               "      ROOT %slice = f32[5,1024,1024] slice(%all-gather.1), "
               "slice={[0:5], [0:1024], [0:1024]}\n    }\n\n\n  \"\n}\n\n\nENTRY %entry|"
               "origin={{\"broadcast.443__ovp0\"}}");
    assert_int_equal(count_of(r.text.data, "origin={{\"broadcast.443\"}}"), 0);
    /* round trip: the table parses back, and prints the same */
    IrModule *back = NULL;
    SlError err = {0};
    assert_int_equal(hlo_parse(&r.out, &r.names, sl_buf_str(&r.text), "printed", &back, &err),
                     SL_OK);
    assert_int_equal(back->n_recovery, 1);
    assert_int_equal(back->recovery[0].module->entry->n_instrs, 5);
    SlBuf again;
    sl_buf_init(&again);
    hlo_print_module(back, &again);
    assert_true(sl_str_eq(sl_buf_str(&again), sl_buf_str(&r.text)));
    sl_buf_fini(&again);
    ir_module_fini(back);
    part_free(&r);
}

/* A tuple: the sharded leaf (6 rows over 4, uneven) gets a recovery module and a placeholder,
 * the replicated scalar leaf keeps its array without an entry; a placeholder of a placeholder
 * counts up; manual values lose their origin; replicated ones keep it and record nothing. */
static void
test_origin_recovery_cases(void **state)
{
    (void)state;
    PartRun r;
    const char *tuple =
        HDR(4) "ENTRY main {\n  p = f32[6,4] parameter(0), sharding={devices=[4,1]<=[4]}\n"
               "  s = f32[] parameter(1), sharding={replicated}\n"
               "  ROOT t = (f32[6,4], f32[]) tuple(p, s), sharding={{devices=[4,1]<=[4]}, "
               "{replicated}}, origin={({\"t\" {0}}, {\"t\" {1}})}\n}\n";
    assert_int_equal(part_run(&r, tuple, 4), SL_OK);
    assert_int_equal(r.dst->n_recovery, 1);
    const IrRecovery *e = &r.dst->recovery[0];
    assert_true(sl_str_eq_cstr(e->old.name, "t") && e->old.n_index == 1 && e->old.index[0] == 0);
    assert_true(sl_str_eq_cstr(e->now.name, "t__ovp0") && e->now.n_index == 1 &&
                e->now.index[0] == 0);
    const IrComputation *c = e->module->entry;
    assert_int_equal(c->n_instrs, 4);
    want_shape(c->instrs[0], IR_OP_PARAMETER, "f32[2,4]");
    want_shape(c->instrs[2], IR_OP_ALL_GATHER, "f32[8,4]");
    assert_int_equal(ag_dim(c->instrs[2]), 0);
    char g[128];
    groups_text(c->instrs[2], g, sizeof(g));
    assert_string_equal(g, "{0,1,2,3}");
    want_shape(c->root, IR_OP_SLICE, "f32[6,4]");
    expect_all("tuple", r.text.data, "origin={({\"t__ovp0\" {0}}, {\"t\" {1}})}");
    part_free(&r);

    const char *again =
        HDR(2) "ENTRY main {\n  p = f32[8] parameter(0), sharding={devices=[2]<=[2]}, "
               "origin={{\"w__ovp3\"}}\n  ROOT n = f32[8] negate(p), sharding={replicated}\n}\n";
    assert_int_equal(part_run(&r, again, 2), SL_OK);
    assert_int_equal(r.dst->n_recovery, 1);
    assert_true(sl_str_eq_cstr(r.dst->recovery[0].now.name, "w__ovp4"));
    expect_all("again", r.text.data, "parameter(0), sharding={devices=[2]<=[2]}, "
                                     "origin={{\"w__ovp4\"}}");
    part_free(&r);

    const char *manual =
        HDR(2) "ENTRY main {\n  p = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
               "  ROOT m = f32[4] custom-call(p), custom_call_target=\"SPMDFullToShardShape\", "
               "sharding={manual}, origin={{\"m\"}}\n}\n";
    assert_int_equal(part_run(&r, manual, 2), SL_OK);
    assert_int_equal(r.dst->n_recovery, 0);
    assert_null(strstr(r.text.data, "origin="));
    part_free(&r);

    const char *repl =
        HDR(2) "ENTRY main {\n  p = f32[8] parameter(0), sharding={replicated}, "
               "origin={{\"q\"}}\n  ROOT n = f32[8] negate(p), sharding={replicated}\n}\n";
    assert_int_equal(part_run(&r, repl, 2), SL_OK);
    assert_int_equal(r.dst->n_recovery, 0);
    expect_all("replicated", r.text.data, "parameter(0), |origin={{\"q\"}}");
    assert_null(strstr(r.text.data, "origin_recovery_table"));
    part_free(&r);
}

/* origin_recovery_table text: entries parse into the module's table (a nested table inside a
 * recovery module's quoted text included), print sorted and back; malformed tables are errors
 * at the offending token. */
static void
test_origin_recovery_table_text(void **state)
{
    (void)state;
#define BODY "\n\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"
    static const struct {
        const char *name, *table;
        SlStatus want;
        uint32_t col; /* of the error on line 1 */
    } k[] = {
        {"sorted",      "{{\"b\"} : {\"b__ovp0\"} {\"a\" {1,0}} : {\"c\"}}", SL_OK,          0 },
        {"nested",      "{{\"a\"} : {\"b\"}, \"HloModule r, origin_recovery_table={{\\\"x\\\"}"
                        " : {\\\"y\\\"}}" BODY "\"}",                         SL_OK,          0 },
        {"no_colon",    "{{\"a\"} {\"b\"}}",                                  SL_ERR_PARSE,   43},
        {"twice",       "{{\"a\"} : {\"b\"} {\"a\"} : {\"c\"}}",              SL_ERR_INVALID, 51},
        {"bad_index",   "{{\"a\" {0,x}} : {\"b\"}}",                          SL_ERR_PARSE,   45},
        {"not_module",  "{{\"a\"} : {\"b\"}, 3}",                             SL_ERR_PARSE,   52},
        {"bad_module",  "{{\"a\"} : {\"b\"}, \"HloModule r\"}",               SL_ERR_PARSE,   52},
    };
    for (size_t i = 0; i < SL_COUNTOF(k); i++) {
        SlArena arena;
        SlInterner names;
        sl_arena_init(&arena);
        sl_interner_init(&names, &arena);
        char text[1024];
        snprintf(text, sizeof(text), "HloModule m, origin_recovery_table=%s" BODY, k[i].table);
        IrModule *m = NULL, *back = NULL;
        SlError err = {0};
        SlStatus st = hlo_parse(&arena, &names, sl_str(text), "t.hlo", &m, &err);
        if (st != k[i].want || (st != SL_OK && (err.loc.line != 1 || err.loc.col != k[i].col)))
            fail_msg("%s: got %s at %u:%u: %s", k[i].name, sl_status_name(st), err.loc.line,
                     err.loc.col, err.msg);
        if (st == SL_OK) {
            SlBuf p1, p2;
            sl_buf_init(&p1);
            sl_buf_init(&p2);
            hlo_print_module(m, &p1);
            sl_buf_putc(&p1, '\0');
            assert_int_equal(hlo_parse(&arena, &names, sl_str(p1.data), "p", &back, &err), SL_OK);
            hlo_print_module(back, &p2);
            sl_buf_putc(&p2, '\0');
            assert_string_equal(p1.data, p2.data);
            if (i == 0) {
                assert_int_equal(m->n_recovery, 2);
                assert_null(m->recovery[0].module);
                expect_all(k[i].name, p1.data,
                           "origin_recovery_table={\n  {\"a\" {1,0}} : {\"c\"}\n"
                           "  {\"b\"} : {\"b__ovp0\"}\n}\n\n\nENTRY %e");
            } else {
                const IrModule *r = m->recovery[0].module;
                assert_non_null(r);
                assert_int_equal(r->n_recovery, 1);
                assert_true(sl_str_eq_cstr(r->recovery[0].now.name, "y"));
                expect_all(k[i].name, p1.data,
                           "    HloModule r, origin_recovery_table={\n      {\\\"x\\\"} : "
                           "{\\\"y\\\"}\n}\n");
            }
            sl_buf_fini(&p1);
            sl_buf_fini(&p2);
        }
        ir_module_fini(m);
        ir_module_fini(back);
        sl_interner_fini(&names);
        sl_arena_fini(&arena);
    }
#undef BODY
}

static void
test_options(void **state)
{
    (void)state;
    SpmdOptions o;
    SlError err = {0};
    spmd_options_init(&o);
    assert_int_equal(spmd_options_set(&o, sl_str("threshold_for_windowed_einsum_mib=0"), &err),
                     SL_OK);
    assert_int_equal(o.threshold_for_windowed_einsum_mib, 0);
    assert_int_equal(spmd_options_set(&o, sl_str("enable_enzyme_opt=true"), &err), SL_OK);
    assert_int_equal(spmd_options_set(&o, sl_str("no_such_option=1"), &err), SL_ERR_INVALID);
}

/* ---- convolution halo strategies and variadic reduce (cv) ---- */

/* part_run with one option set ("key=value"; NULL: defaults). */
static SlStatus
part_run_opt(PartRun *r, const char *hlo, int64_t n, const char *set)
{
    memset(r, 0, sizeof(*r));
    sl_arena_init(&r->in);
    sl_arena_init(&r->out);
    sl_interner_init(&r->names, &r->in);
    sl_buf_init(&r->text);
    SpmdOptions o;
    spmd_options_init(&o);
    o.num_partitions = n;
    SlStatus st = set ? spmd_options_set(&o, sl_str(set), &r->err) : SL_OK;
    if (st == SL_OK)
        st = hlo_parse(&r->in, &r->names, sl_str(hlo), "test.hlo", &r->src, &r->err);
    if (st == SL_OK)
        st = spmd_partition(r->src, &o, trace_null_sink(), &r->out, &r->dst, &r->err);
    if (st == SL_OK)
        hlo_print_module(r->dst, &r->text);
    return st;
}

#define PICK                                                                                   \
    "pick {\n  v0 = f32[] parameter(0)\n  i0 = s32[] parameter(1)\n  v1 = f32[] parameter(2)\n" \
    "  i1 = s32[] parameter(3)\n  ge = pred[] compare(v0, v1), direction=GE\n"                 \
    "  v = f32[] select(ge, v0, v1)\n  i = s32[] select(ge, i0, i1)\n"                         \
    "  ROOT t = (f32[], s32[]) tuple(v, i)\n}\n\n"

static const struct {
    const char *name, *hlo, *set;
    int64_t n;
    const char *want;
    const char *absent; /* must not appear; NULL = no check */
} k_cv_cases[] = {
    /* D.10 variadic reduce over a dim split 4 ways (18 = 4 x 5, uneven: padded with the
     * inits): local reduce, each result reshaped to [3,1], all-gathered to [3,4] among the
     * devices that share the kept dim, reduced again; the inputs are never gathered */
    {"variadic_reduce_gathers_partials",
     HDR(8) PICK "ENTRY main {\n  x = f32[6,18] parameter(0), sharding={devices=[2,4]<=[8]}\n"
                 "  k = s32[6,18] parameter(1), sharding={devices=[2,4]<=[8]}\n"
                 "  lo = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
                 "  ROOT r = (f32[6], s32[6]) reduce(x, k, lo, z), dimensions={1}, "
                 "to_apply=pick, sharding={{devices=[2,4]<=[8] last_tile_dim_replicate}, "
                 "{devices=[2,4]<=[8] last_tile_dim_replicate}}\n}\n",
     NULL, 8,
     "f32[3,5] select(%compare, %x.1, %broadcast.2)|"
     "%r.1 = (f32[3], s32[3]) reduce(%select, %select.1, %lo.1, %z.1), dimensions={1}|"
     "f32[3,1] reshape(%get-tuple-element)|s32[3,1] reshape(%get-tuple-element.1)|"
     "f32[3,4] all-gather(%reshape.2), channel_id=1, replica_groups=[2,4]<=[8], dimensions={1}|"
     "s32[3,4] all-gather(%reshape.3), channel_id=2, replica_groups=[2,4]<=[8], dimensions={1}|"
     "ROOT %r.2 = (f32[3], s32[3]) reduce(%all-gather, %all-gather.1, %lo.1, %z.1)",
     "f32[3,18]"},
    /* F.1 rhs halos with window dilation D = 2 (L = 10, R = 5, WC = 4, pl = 1): left halo
     * ceil(((WC-1) - pl) / D) = 1 and right halo ceil(pl / D) = 1 on every shard, the lhs shard
     * unchanged with the constant low padding 1 * D + pl = 3; partial sums all-reduced */
    {"conv_rhs_halo_window_dilated",
     HDR(2) "ENTRY main {\n  a = f32[3,20,6,2] parameter(0), sharding={devices=[1,2,1,1]<=[2]}\n"
            "  b = f32[3,10,6,5] parameter(1), sharding={devices=[1,2,1,1]<=[2]}\n"
            "  ROOT c = f32[4,1,2,5] convolution(a, b), window={size=10x6 pad=1_1x0_0 "
            "rhs_dilate=2x1}, dim_labels=f01b_i01o->01bf, sharding={replicated}\n}\n",
     "conv_halo_exchange_always_on_lhs=false", 2,
     "f32[3,1,6,5] collective-permute(%slice), channel_id=1, source_target_pairs={{0,1}}|"
     "f32[3,1,6,5] collective-permute(%slice.1), channel_id=2, source_target_pairs={{1,0}}|"
     "f32[3,7,6,5] concatenate(%collective-permute, %b.1, %collective-permute.1)|"
     "f32[4,1,2,5] convolution(%a.1, %concatenate), window={size=7x6 pad=3_3x0_0 "
     "rhs_dilate=2x1}|f32[4,1,2,5] all-reduce(%c.1), channel_id=3, replica_groups=[1,2]<=[2]",
     "all-gather"},
    /* F.1 after grouping on the dot-batch-like spatial dim 0 (base-dilated): no operand halo
     * plan exists for base dilation, so the tiled output is built from lhs halos (1 left, 2
     * right, masked past 10) and the kernel gathered inside each group */
    {"conv_parallel_dim_tiled_output",
     HDR(4) "ENTRY main {\n  a = f32[8,10,5,6,4] parameter(0), "
            "sharding={devices=[2,2,1,1,1]<=[4]}\n"
            "  b = f32[8,4,5,3,4] parameter(1), sharding={devices=[2,2,1,1,1]<=[4]}\n"
            "  ROOT c = f32[8,7,1,6,3] convolution(a, b), window={size=8x4x5 stride=7x1x1 "
            "lhs_dilate=8x1x1}, dim_labels=012bf_012oi->012bf, "
            "sharding={devices=[2,2,1,1,1]<=[4]}\n}\n",
     NULL, 4,
     "f32[4,1,5,6,4] collective-permute(%slice), channel_id=1, source_target_pairs={{0,1},{2,3}}|"
     "f32[4,2,5,6,4] collective-permute(%slice.1), channel_id=2, "
     "source_target_pairs={{1,0},{3,2}}|f32[4,7,5,6,4] dynamic-slice(%concatenate, |"
     "f32[4,4,5,3,4] all-gather(%b.1), channel_id=3, replica_groups={{0,1},{2,3}}, "
     "dimensions={1}|ROOT %c.1 = f32[4,4,1,6,3] convolution(%select, %all-gather), "
     "window={size=4x4x5 stride=3x1x1 lhs_dilate=4x1x1}",
     "all-reduce"},
};

static void
test_cv_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < SL_COUNTOF(k_cv_cases); i++) {
        PartRun r;
        SlStatus st = part_run_opt(&r, k_cv_cases[i].hlo, k_cv_cases[i].n, k_cv_cases[i].set);
        if (st != SL_OK)
            fail_msg("%s: %s: %s", k_cv_cases[i].name, sl_status_name(st), r.err.msg);
        expect_all(k_cv_cases[i].name, r.text.data, k_cv_cases[i].want);
        if (k_cv_cases[i].absent && strstr(r.text.data, k_cv_cases[i].absent))
            fail_msg("%s: unexpected \"%s\" in:\n%s", k_cv_cases[i].name, k_cv_cases[i].absent,
                     r.text.data);
        part_free(&r);
    }
}
#undef PICK

/* ---- end cv ---- */

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handler_cases),
        cmocka_unit_test(test_emit_strips_unreduced_marker),
        cmocka_unit_test(test_emit_names),
        cmocka_unit_test(test_name_split),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_origin_recovery_transposed),
        cmocka_unit_test(test_origin_recovery_cases),
        cmocka_unit_test(test_origin_recovery_table_text),
        cmocka_unit_test(test_cv_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
