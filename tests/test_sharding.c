/* test_sharding.c - sharding text, iota arithmetic, tile queries and the §B algebra. Every
 * table row compares printed text, so expected values are exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sharding/shd.h"

static int
arena_setup(void **state)
{
    SlArena *arena = test_malloc(sizeof(*arena)); /* one per test, freed by the teardown */
    if (!arena)
        return -1;
    sl_arena_init(arena);
    *state = arena;
    return 0;
}

static int
arena_teardown(void **state)
{
    sl_arena_fini(*state);
    test_free(*state);
    return 0;
}

static const SlSrcLoc k_loc = {"test.hlo", 1, 1};

/* Parses `text` or fails the test. */
static const ShdSharding *
parse_ok(SlArena *a, const char *text)
{
    SlError err = {0};
    const ShdSharding *s = NULL;
    if (shd_parse(a, sl_str(text), k_loc, &s, &err) != SL_OK)
        fail_msg("parse '%s': %u:%u: %s", text, err.loc.line, err.loc.col, err.msg);
    return s;
}

/* Prints into a fresh buffer kept in `b` (callers own and fini it). */
static const char *
print_to(SlBuf *b, const ShdSharding *s)
{
    sl_buf_clear(b);
    if (!s)
        sl_buf_puts(b, "none");
    else
        shd_print(s, b);
    return b->data;
}

static void
assert_prints(const ShdSharding *s, const char *want, const char *ctx)
{
    SlBuf b;
    sl_buf_init(&b);
    const char *got = print_to(&b, s);
    if (strcmp(got, want) != 0) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s: got %s, want %s", ctx, got, want);
        sl_buf_fini(&b);
        fail_msg("%s", msg);
    }
    sl_buf_fini(&b);
}

/* ---- parse / print ---- */

static const struct {
    const char *name, *text, *want; /* want NULL: prints back as `text` */
} k_print_cases[] = {
    {"replicated",      "{replicated}",                      NULL},
    /* a one-device mesh tiles nothing (fuzz: it printed as the unparsable {devices=[]<=[1]}) */
    {"v3_one_device",   "{mesh[\"x\"=1],}",                    "{replicated}"},
    {"v3_one_device_dim", "{mesh[\"x\"=1], [{\"x\"}]}",         "{replicated}"},
    {"manual",          "{manual}",                          NULL},
    {"unknown",         "{unknown}",                         NULL},
    {"unreduced",       "{unreduced}",                       NULL},
    {"maximal",         "{maximal device=3}",                NULL},
    {"shard_as",        "{unknown shard_as 1}",              NULL},
    {"shard_like",      "{replicated shard_like 2}",         NULL},
    {"explicit",        "{devices=[2,2]0,2,1,3}",            NULL},
    {"explicit_iotaish", "{devices=[4]0,1,2,3}",             NULL},
    {"iota",            "{devices=[2,2]<=[4]}",              NULL},
    {"iota_t",          "{devices=[2,2]<=[2,2]T(1,0)}",      NULL},
    {"iota_t3",         "{devices=[4,4,1]<=[4,2,2]T(1,0,2)}", NULL},
    {"canon_merge",     "{devices=[3,4,5]<=[3,4,5]T(1,2,0)}", "{devices=[3,4,5]<=[3,20]T(1,0)}"},
    {"canon_merge2",    "{devices=[12,5]<=[3,4,5]T(2,0,1)}", "{devices=[12,5]<=[12,5]T(1,0)}"},
    {"canon_identity",  "{devices=[60]<=[3,4,5]T(0,1,2)}",   "{devices=[60]<=[60]}"},
    {"canon_size1",     "{devices=[4,1]<=[1,2,2]T(0,2,1)}",  "{devices=[4,1]<=[2,2]T(1,0)}"},
    {"canon_rep",       "{devices=[2,2,2,2]<=[2,2,2,2]T(0,1,3,2) last_tile_dim_replicate}",
     "{devices=[2,2,2,2]<=[4,2,2]T(0,2,1) last_tile_dim_replicate}"},
    {"partial",         "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", NULL},
    {"partial_8",       "{devices=[2,8]<=[16] last_tile_dim_replicate}", NULL},
    {"subgroups",       "{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}", NULL},
    {"subgroup_manual", "{devices=[2,2]<=[4] last_tile_dims={manual}}", NULL},
    {"subgroup_unred",  "{devices=[2,2,2,2]<=[2,2,2,2]T(0,2,1,3) last_tile_dims={unreduced,replicated}}",
     "{devices=[2,2,2,2]<=[2,2,2,2]T(0,2,1,3) last_tile_dims={unreduced, replicated}}"},
    {"subgroup_order",  "{devices=[1,1,2,2]<=[4] last_tile_dims={replicated,manual}}",
     "{devices=[1,1,2,2]<=[2,2]T(1,0) last_tile_dims={manual, replicated}}"},
    {"subgroup_merge",  "{devices=[2,2,2]<=[8] last_tile_dims={replicated, replicated}}",
     "{devices=[2,4]<=[8] last_tile_dim_replicate}"},
    {"subgroup_drop1",  "{devices=[2,1,2]<=[4] last_tile_dims={manual, replicated}}",
     "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
    {"to_replicated",   "{devices=[1,1,4]<=[4] last_tile_dim_replicate}", "{replicated}"},
    {"to_manual",       "{devices=[1,4]<=[4] last_tile_dims={manual}}", "{manual}"},
    {"drop_rep1",       "{devices=[2,1,1]0,1 last_tile_dim_replicate}", "{devices=[2,1]0,1}"},
    {"sort_groups",     "{devices=[2,2]3,1,2,0 last_tile_dim_replicate}",
     "{devices=[2,2]1,3,0,2 last_tile_dim_replicate}"},
    {"tuple",           "{{replicated}, {devices=[2]0,1}}", NULL},
    {"tuple_compact",   "{{replicated},{devices=[2,1,2]<=[4] last_tile_dims={manual}}}",
     "{{replicated}, {devices=[2,1,2]<=[4] last_tile_dims={manual}}}"},
    {"tuple_index",     "{{replicated}, {replicated}, {replicated}, {replicated}, {manual}, "
                        "/*index=5*/{maximal device=0}, {replicated}}", NULL},
    {"tuple_empty",     "{}", NULL},
    {"metadata",        "{maximal device=0 metadata={op_type=\"_TPUReplicate\" op_name=\"cluster\"}}",
     NULL},
    {"metadata_brace",  "{devices=[2]0,1 shard_like 3 metadata={op_name=\"a}\"}}", NULL},
    {"metadata_list",   "{replicated metadata={{op_name=\"a\"}, {op_name=\"b\"}}}", NULL},
    {"spaces",          "{ devices=[2,2]<=[4]\n  last_tile_dim_replicate }",
     "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
    {"v3_basic",        "{mesh['x'=2,'y'=4], [{'x'}, {}]}",
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
    {"v3_replicated",   "{mesh['a'=2,'b'=4], [{'a'}], replicated={'b'}}",
     "{devices=[2,4]<=[8] last_tile_dim_replicate}"},
    {"v3_ids",          "{mesh['x'=2,'y'=2], device_ids=(0,2,1,3), [{'x'}]}",
     "{devices=[2,2]0,2,1,3 last_tile_dim_replicate}"},
    {"v3_ids_sorted",   "{mesh['x'=2,'y'=2], device_ids=(3,2,1,0), [{'x'}, {}], replicated={'y'}}",
     "{devices=[2,1,2]2,3,0,1 last_tile_dim_replicate}"},
    {"v3_ids_iota",     "{mesh['x'=2,'y'=2], device_ids=([2,2]T(1,0)), [{'x'}, {'y'}]}",
     "{devices=[2,2]<=[2,2]T(1,0)}"},
    {"v3_maximal",      "{maximal_mesh[device_id=5]}", "{maximal device=5}"},
    {"v3_empty",        "{mesh[], replicated}", "{replicated}"},
    {"v3_kw",           "{mesh['x'=2,'y'=2] replicated}", "{replicated}"},
    {"v3_scalar",       "{mesh['x'=2] []}", "{replicated}"},
    {"v3_two",          "{mesh['x'=2,'y'=2] [{'x'}, {'y'}]}", "{devices=[2,2]<=[4]}"},
    {"v3_swapped",      "{mesh['x'=2,'y'=2] [{'y'}, {'x'}]}", "{devices=[2,2]<=[2,2]T(1,0)}"},
    {"v3_two_axes",     "{mesh['x'=2,'y'=2,'z'=2] [{'x','z'},{'y'}]}",
     "{devices=[4,2]<=[2,2,2]T(0,2,1)}"},
    {"v3_subaxes",      "{mesh['x'=8] [{'x':(1)2}, {'x':(2)4}]}", "{devices=[2,4]<=[8]}"},
    {"v3_subaxes_swap", "{mesh['x'=4] [{'x':(2)2}, {'x':(1)2}]}", "{devices=[2,2]<=[2,2]T(1,0)}"},
    {"v3_subaxes_gap",  "{mesh['x'=8] [{'x':(1)2, 'x':(4)2}, {'x':(2)2}]}",
     "{devices=[4,2]<=[2,2,2]T(0,2,1)}"},
    {"v3_unreduced",    "{mesh['x'=2], [{}, {}], unreduced=max{'x'}}", "{unreduced}"},
    {"v3_open_unred",   "{mesh['x'=2,'y'=2] [{?},{'x'}], unreduced={'y'}}",
     "{devices=[1,2,2]<=[4] last_tile_dims={unreduced}}"},
    {"v3_tuple",        "{{mesh['x'=2] [], unreduced={'x'}}, {mesh['x'=2] [{'x'}]}}",
     "{{unreduced}, {devices=[2]<=[2]}}"},
};

static void
test_sharding_print_cases(void **state)
{
    SlArena *arena = *state;
    SlBuf b1, b2;
    sl_buf_init(&b1);
    sl_buf_init(&b2);
    for (size_t i = 0; i < SL_COUNTOF(k_print_cases); i++) {
        const char *want = k_print_cases[i].want ? k_print_cases[i].want : k_print_cases[i].text;
        const ShdSharding *s = parse_ok(arena, k_print_cases[i].text);
        assert_prints(s, want, k_print_cases[i].name);
        /* Round trip: reparsing the canonical text prints it unchanged. */
        const ShdSharding *again = parse_ok(arena, print_to(&b1, s));
        if (strcmp(print_to(&b2, again), b1.data) != 0)
            fail_msg("%s: round trip %s -> %s", k_print_cases[i].name, b1.data, b2.data);
        if (!shd_equal(s, again))
            fail_msg("%s: reparsed value differs", k_print_cases[i].name);
    }
    sl_buf_fini(&b1);
    sl_buf_fini(&b2);
}

static const struct {
    const char *name, *text;
    SlStatus want;
    uint32_t line, col;
} k_error_cases[] = {
    {"too_few_ids",   "{devices=[2,2]0,1}",                  SL_ERR_INVALID,     1, 18},
    {"unclosed",      "{devices=[2,1]0,1",                   SL_ERR_PARSE,       1, 18},
    {"iota_size",     "{devices=[2,2]<=[3]}",                SL_ERR_INVALID,     1, 17},
    {"perm_range",    "{devices=[2,2]<=[2,2]T(1,2)}",        SL_ERR_INVALID,     1, 23},
    {"perm_dup",      "{devices=[2,2]<=[2,2]T(0,0)}",        SL_ERR_INVALID,     1, 23},
    {"perm_missing",  "{devices=[2,2]<=[2,2]}",              SL_ERR_PARSE,       1, 22},
    {"both_ltd",      "{devices=[2,1,2]<=[4] last_tile_dim_replicate last_tile_dims={manual}}",
     SL_ERR_INVALID, 1, 47},
    {"kind_conflict", "{replicated devices=[2]0,1}",         SL_ERR_INVALID,     1, 27},
    {"maximal_no_id", "{maximal}",                           SL_ERR_INVALID,     1, 9},
    {"bogus_item",    "{bogus}",                             SL_ERR_PARSE,       1, 2},
    {"one_device",    "{devices=[1]0}",                      SL_ERR_INVALID,     1, 14},
    {"zero_dim",      "{devices=[0,2]<=[4]}",                SL_ERR_INVALID,     1, 10},
    {"newline",       "{devices=[2,2]\n  0,1}",              SL_ERR_INVALID,     2, 6},
    {"tuple_bad",     "{{replicated}, /*index=1*/ {bogus}}", SL_ERR_PARSE,       1, 29},
    {"trailing",      "{devices=[2]0,1} x",                  SL_ERR_PARSE,       1, 18},
    {"sub_maximal",   "{devices=[2,2]0,1,2,3 last_tile_dims={maximal}}", SL_ERR_UNSUPPORTED, 1, 39},
    {"too_many_subs", "{devices=[2]0,1 last_tile_dims={manual, replicated}}", SL_ERR_INVALID, 1, 17},
    {"not_brace",     "replicated",                          SL_ERR_PARSE,       1, 1},
    {"empty",         "",                                    SL_ERR_PARSE,       1, 1},
    {"v3_bad_axis",   "{mesh['x'=2], [{'y'}]}",              SL_ERR_INVALID,     1, 17},
    {"v3_bad_sub",    "{mesh['x'=4], [{'x':(1)3}]}",         SL_ERR_INVALID,     1, 24},
};

static void
test_sharding_parse_errors(void **state)
{
    SlArena *arena = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_error_cases); i++) {
        SlError err = {0};
        const ShdSharding *out = NULL;
        SlStatus st = shd_parse(arena, sl_str(k_error_cases[i].text), k_loc, &out, &err);
        if (st != k_error_cases[i].want || err.loc.line != k_error_cases[i].line ||
            err.loc.col != k_error_cases[i].col)
            fail_msg("%s: got %s at %u:%u (%s)", k_error_cases[i].name, sl_status_name(st),
                     err.loc.line, err.loc.col, err.msg);
        assert_null(out);
    }
}

static void
test_sharding_parse_loc_offset(void **state)
{
    SlArena *arena = *state;
    SlError err = {0};
    const ShdSharding *out = NULL;
    SlSrcLoc at = {"m.hlo", 7, 40};
    assert_int_equal(shd_parse(arena, sl_str("{devices=[2,2]0,1}"), at, &out, &err),
                     SL_ERR_INVALID);
    assert_int_equal(err.loc.line, 7);
    assert_int_equal(err.loc.col, 57);
    assert_string_equal(err.loc.path, "m.hlo");
    size_t used = 0;
    assert_int_equal(shd_parse_prefix(arena, sl_str("{replicated}, metadata={}"), at, &out,
                                      &used, &err),
                     SL_OK);
    assert_int_equal(used, 12);
}

/* ---- iota expansion ---- */

static const struct {
    const char *text;
    int64_t devices[16];
} k_iota_cases[] = {
    {"{devices=[2,2]<=[2,2]T(1,0)}", {0, 2, 1, 3}},
    {"{devices=[4,4,1]<=[4,2,2]T(1,0,2)}", {0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15}},
    {"{devices=[2,4]<=[2,4]T(1,0)}", {0, 4, 1, 5, 2, 6, 3, 7}},
    {"{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}", {0, 4, 1, 5, 2, 6, 3, 7}},
};

static void
test_sharding_iota_expand(void **state)
{
    SlArena *arena = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_iota_cases); i++) {
        const ShdSharding *s = parse_ok(arena, k_iota_cases[i].text);
        int64_t n = shd_device_count(s);
        for (int64_t d = 0; d < n; d++)
            if (s->devices[d] != k_iota_cases[i].devices[d])
                fail_msg("%s: device %lld is %lld", k_iota_cases[i].text, (long long)d,
                         (long long)s->devices[d]);
    }
}

static void
test_sharding_constructors(void **state)
{
    SlArena *a = *state;
    static const int64_t dims[] = {2, 2}, t10[] = {0, 2, 1, 3}, odd[] = {0, 3, 1, 2};
    static const int64_t dims3[] = {2, 3}, tr3[] = {0, 2, 4, 1, 3, 5};
    assert_prints(shd_tiled(a, dims, 2, t10, NULL, 0), "{devices=[2,2]<=[2,2]T(1,0)}", "t10");
    assert_prints(shd_tiled(a, dims, 2, odd, NULL, 0), "{devices=[2,2]0,3,1,2}", "odd");
    assert_prints(shd_tiled(a, dims3, 2, tr3, NULL, 0), "{devices=[2,3]<=[3,2]T(1,0)}", "tr3");
    assert_prints(shd_tiled_iota(a, dims, 2, NULL, 0), "{devices=[2,2]<=[4]}", "iota");
    ShdSubgroup rep = SHD_SUB_REPLICATED;
    assert_prints(shd_tiled_iota(a, dims, 2, &rep, 1),
                  "{devices=[2,2]<=[4] last_tile_dim_replicate}", "partial");
    assert_prints(shd_maximal(a, 2), "{maximal device=2}", "maximal");
    const ShdSharding *leaves[] = {shd_replicated(a), shd_manual(a)};
    assert_prints(shd_tuple(a, leaves, 2), "{{replicated}, {manual}}", "tuple");
}

/* ---- predicates and queries ---- */

static void
test_sharding_predicates(void **state)
{
    SlArena *a = *state;
    const ShdSharding *p = parse_ok(a, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    const ShdSharding *m = parse_ok(a, "{devices=[2,1,2]<=[4] last_tile_dims={manual}}");
    const ShdSharding *t = parse_ok(a, "{{maximal device=1}, {maximal device=1}}");
    int64_t dev = -1, idx[2];
    assert_true(shd_is_tiled(p));
    assert_true(shd_has_partial_replication(p));
    assert_false(shd_is_manual_subgroup(p));
    assert_true(shd_is_manual_subgroup(m));
    assert_int_equal(shd_data_rank(p), 2);
    assert_int_equal(shd_num_tiles(p), 2);
    assert_int_equal(shd_replication_factor(p), 2);
    assert_int_equal(shd_device_count(p), 4);
    assert_int_equal(shd_dim_shards(p, 0), 2);
    assert_int_equal(shd_dim_shards(p, 2), 1);
    assert_true(shd_tile_index(p, 3, idx));
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 0);
    assert_false(shd_tile_index(p, 9, idx));
    assert_true(shd_unique_device(t, &dev));
    assert_int_equal(dev, 1);
    assert_true(shd_is_maximal(t));
    assert_true(shd_is_tile_maximal(parse_ok(a, "{replicated}")));
    assert_false(shd_is_tile_maximal(p));
    assert_true(shd_is_replicated(parse_ok(a, "{{replicated}, {replicated}}")));
    assert_false(shd_equal(p, m));
    assert_true(shd_equal(parse_ok(a, "{devices=[2,2]0,2,1,3}"),
                          parse_ok(a, "{devices=[2,2]<=[2,2]T(1,0)}")));
    assert_true(shd_leaf(t, 1) == t->leaves[1]);
    assert_true(shd_leaf(p, 5) == p);
}

/* A.5's uneven table: offsets and valid extents per tile index. */
static const struct {
    int64_t d, n;
    int64_t offsets[8], extents[8];
} k_uneven[] = {
    {10, 4, {0, 3, 6, 9}, {3, 3, 3, 1}},
    {5, 4, {0, 2, 4, 5}, {2, 2, 1, 0}},
    {7, 8, {0, 1, 2, 3, 4, 5, 6, 7}, {1, 1, 1, 1, 1, 1, 1, 0}},
    {39295, 2, {0, 19648}, {19648, 19647}},
};

static void
test_sharding_tile_offsets(void **state)
{
    SlArena *a = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_uneven); i++) {
        IrShape full = ir_shape_make(a, IR_DT_F32, &k_uneven[i].d, 1);
        /* Reverse device order so that device != tile index. */
        int64_t devs[8];
        for (int64_t k = 0; k < k_uneven[i].n; k++)
            devs[k] = k_uneven[i].n - 1 - k;
        const ShdSharding *s = shd_tiled(a, &k_uneven[i].n, 1, devs, NULL, 0);
        for (int64_t k = 0; k < k_uneven[i].n; k++) {
            int64_t dev = devs[k];
            assert_int_equal(shd_tile_offset(s, &full, 0, dev), k_uneven[i].offsets[k]);
            assert_int_equal(shd_tile_extent(s, &full, 0, dev), k_uneven[i].extents[k]);
        }
        IrShape local = shd_tile_shape(a, &full, s);
        assert_int_equal(local.dims[0], (k_uneven[i].d + k_uneven[i].n - 1) / k_uneven[i].n);
        assert_int_equal(shd_evenly_partitions(s, &full), k_uneven[i].d % k_uneven[i].n == 0);
    }
}

static void
test_sharding_tile_shape(void **state)
{
    SlArena *a = *state;
    static const int64_t d[] = {10, 16};
    IrShape full = ir_shape_make(a, IR_DT_F32, d, 2);
    IrShape l1 = shd_tile_shape(a, &full, parse_ok(a, "{devices=[4,1]<=[4]}"));
    IrShape l2 = shd_tile_shape(
        a, &full, parse_ok(a, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"));
    assert_int_equal(l1.dims[0], 3);
    assert_int_equal(l1.dims[1], 16);
    assert_int_equal(l2.dims[0], 5);
    assert_int_equal(l2.dims[1], 16);
    assert_false(shd_evenly_partitions(parse_ok(a, "{maximal device=0}"), &full));
    assert_true(shd_evenly_partitions(parse_ok(a, "{manual}"), &full));
}

static const struct {
    const char *name, *text;
    int64_t num_devices;
    SlStatus want;
} k_check_cases[] = {
    {"ok",        "{devices=[2,2]<=[4]}",   4, SL_OK},
    {"count",     "{devices=[2,2]<=[4]}",   8, SL_ERR_INVALID},
    {"dup",       "{devices=[2,2]0,1,1,3}", 4, SL_ERR_INVALID},
    {"range",     "{devices=[2,2]0,1,2,7}", 4, SL_ERR_INVALID},
    {"rank",      "{devices=[2,2,1]<=[4]}", 4, SL_ERR_INVALID},
    {"maximal",   "{maximal device=5}",     4, SL_ERR_INVALID},
    {"partial",   "{devices=[4,1,2]<=[8] last_tile_dim_replicate}", 8, SL_OK},
    {"replicated", "{replicated}",          4, SL_OK},
};

static void
test_sharding_check(void **state)
{
    SlArena *a = *state;
    static const int64_t d[] = {8, 6};
    IrShape shape = ir_shape_make(a, IR_DT_F32, d, 2);
    for (size_t i = 0; i < SL_COUNTOF(k_check_cases); i++) {
        SlError err = {0};
        SlStatus st = shd_check(parse_ok(a, k_check_cases[i].text), &shape,
                                k_check_cases[i].num_devices, k_loc, &err);
        if (st != k_check_cases[i].want)
            fail_msg("%s: got %s (%s)", k_check_cases[i].name, sl_status_name(st), err.msg);
    }
}

/* ---- hostile input (issue 17): limits, ids, written ranks; exact messages ---- */

/* num_devices 0: the text must not parse; else it parses and shd_check against f32[8,6] and
 * that many devices (-1: no count) gives `want` ("LINE:COL: message"). */
/* clang-format off */
static const struct {
    const char *text;
    int64_t num_devices;
    const char *want;
} k_hostile[] = {
    {"{devices=[65536,2]<=[131072]}", 0, "1:10: more than 65536 devices (the limit)"},
    {"{devices=[2]<=[-9223372036854775808]}", 0, "1:15: tile dims must be positive, got '['"},
    {"{devices=[2]0,9223372036854775808}", 0,
     "1:15: expected a device id or '<=', got '9223372036854775808'"},
    {"{devices=[2]0,1,2}", 0, "1:17: device count differs from the tile dims' product, got '2'"},
    {"{mesh[\"a\"=16384,\"b\"=16384], [{\"a\"}, {\"b\"}]}", 0,
     "1:6: more than 65536 devices (the limit)"},
    {"{mesh[\"a\"=65537], [{\"a\"}, {}]}", 0, "1:6: more than 65536 devices (the limit)"},
    {"{devices=[2,1]0,0}", 2, "1:1: device 0 appears twice"},
    /* an axis named again and again: refused before its size is multiplied (421^8 overflows
     * int64) or its pieces overrun the 64 a mesh can have */
    {"{mesh[\"a\"=421], [{\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\"}]}", 0,
     "1:52: cannot convert the named sharding, got '}'"},
    /* the 62nd dim: the named form keeps 3 of the 64 tile dims for its subgroups */
    {"{mesh[\"a\"=2], [{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
     "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
     "{},{},{},{},{},{},{},{}]}",
     0, "1:199: too many dimensions, got '{'"},
    {"{devices=[2,1]-1,0}", 2, "1:1: device -1 out of range"},
    {"{devices=[2,1]0,5}", 2, "1:1: device 5 out of range"},
    {"{mesh[\"a\"=2,\"b\"=2], device_ids=(0,0,1,2), [{\"a\"}, {\"b\"}]}", 4,
     "1:1: device 0 appears twice"},
    {"{maximal device=9223372036854775807}", 0,
     "1:17: device 9223372036854775807 is beyond the limit of 65536 devices"},
    {"{maximal device=65536}", 0, "1:17: device 65536 is beyond the limit of 65536 devices"},
    {"{maximal device=65535}", 4, "1:1: device 65535 out of range for 4 devices"},
    {"{devices=[2,1]0,2147483648}", 0, "1:17: device 2147483648 is beyond the limit of 65536 devices"},
    /* no device count (XLA's rules without one): ids only non-negative and used once */
    {"{devices=[2,1]0,5}", -1, NULL},
    {"{devices=[2,1]5,5}", -1, "1:1: device 5 appears twice"},
    {"{maximal device=70}", -1, NULL},
    /* all tiles in subgroups: normalized to {replicated}/{manual}, the written rank counts */
    {"{devices=[1,4]<=[4] last_tile_dim_replicate}", 4,
     "1:1: sharding has 1 tiled dims but the shape has rank 2"},
    {"{devices=[1,1,1,4]<=[4] last_tile_dims={manual}}", 4,
     "1:1: sharding has 3 tiled dims but the shape has rank 2"},
    {"{devices=[1,1,4]<=[4] last_tile_dim_replicate}", 4, NULL},
};
/* clang-format on */

/* A token takes any sharding, but not devices that do not exist or appear twice (found by the
 * partition fuzzer: an outfeed's {devices=[2]1,1} reached the partitioner). */
static void
test_sharding_token_devices(void **state)
{
    SlArena *a = *state;
    IrShape tok = ir_shape_make(a, IR_DT_TOKEN, NULL, 0);
    const struct {
        const char *text;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {"{{devices=[2]1,1}, {maximal device=0}}", "device 1 appears twice"},
        {"{maximal device=5}", "device 5 out of range for 2 devices"},
        {"{{devices=[2]0,1}, {maximal device=1}}", NULL},
        {"{devices=[4]<=[4]}", "tile assignment has 4 devices, module has 2"},
        {"{replicated}", NULL},
    };
    for (size_t i = 0; i < SL_COUNTOF(cases); i++) {
        const ShdSharding *s = NULL;
        SlError err = {0};
        assert_int_equal(shd_parse(a, sl_str(cases[i].text), k_loc, &s, &err), SL_OK);
        SlStatus st = shd_check(s, &tok, 2, k_loc, &err);
        if (!cases[i].want) {
            assert_int_equal(st, SL_OK);
            continue;
        }
        assert_int_equal(st, SL_ERR_INVALID);
        assert_string_equal(err.msg, cases[i].want);
    }
}

static void
test_sharding_hostile(void **state)
{
    SlArena *a = *state;
    static const int64_t d[] = {8, 6};
    IrShape shape = ir_shape_make(a, IR_DT_F32, d, 2);
    int failures = 0;
    for (size_t i = 0; i < SL_COUNTOF(k_hostile); i++) {
        SlError err = {0};
        const ShdSharding *s = NULL;
        SlStatus st = shd_parse(a, sl_str(k_hostile[i].text), k_loc, &s, &err);
        bool parsed = st == SL_OK;
        if (parsed)
            st = shd_check(s, &shape, k_hostile[i].num_devices, k_loc, &err);
        char got[SL_ERROR_MSG_BYTES + 32] = "";
        if (st)
            snprintf(got, sizeof(got), "%u:%u: %s", err.loc.line, err.loc.col, err.msg);
        const char *want = k_hostile[i].want;
        bool ok = want ? st != SL_OK && strcmp(got, want) == 0 &&
                             parsed == (k_hostile[i].num_devices != 0)
                       : st == SL_OK;
        if (!ok) {
            print_error("%s: got '%s', want '%s'\n", k_hostile[i].text, got, want ? want : "ok");
            failures++;
        }
    }
    if (failures)
        fail_msg("%d of %zu hostile sharding cases failed", failures, SL_COUNTOF(k_hostile));
}

/* ---- algebra (gspmd.md §B) ---- */

static IrShape
shape_of(SlArena *a, const int64_t *dims, uint32_t rank)
{
    return ir_shape_make(a, IR_DT_F32, dims, rank);
}

/* Replication groups are canonical at construction (XLA's PartialTile): the devices of each
 * group ascend, whatever the array's form, and an iota array is re-described after sorting.
 * The broadcast's sharding with its dim 2 replicated is then the operand's own sharding. */
static void
test_sharding_partial_groups_sorted(void **state)
{
    SlArena *a = *state;
    const ShdSharding *op = parse_ok(a, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    const ShdSharding *bc =
        parse_ok(a, "{devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}");
    assert_prints(bc, "{devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}",
                  "groups already ascending");
    static const int64_t d2[] = {2};
    const ShdSharding *pr = shd_remove_dims(a, shd_partially_replicate_dims(a, bc, d2, 1), d2, 1);
    assert_non_null(pr);
    assert_int_equal(pr->n_tile_dims, 3);
    static const int64_t want[] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_memory_equal(pr->devices, want, sizeof want);
    assert_true(shd_equal(pr, op));
    assert_prints(pr, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", "derived");
    /* an iota whose groups are {0,2,1,3},{4,6,5,7}: sorted, it is the plain iota */
    assert_prints(parse_ok(a, "{devices=[2,4]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}"),
                  "{devices=[2,4]<=[8] last_tile_dim_replicate}", "iota re-described");
    /* an explicit list stays explicit, each group sorted; the order of groups is kept */
    assert_prints(parse_ok(a, "{devices=[2,2]3,1,2,0 last_tile_dim_replicate}"),
                  "{devices=[2,2]1,3,0,2 last_tile_dim_replicate}", "explicit sorted");
    /* a replicated subgroup after a manual one: the replicated groups are sorted */
    assert_prints(parse_ok(a, "{devices=[2,2,2]0,1,3,2,4,5,7,6 last_tile_dims={manual, "
                              "replicated}}"),
                  "{devices=[2,2,2]0,1,2,3,4,5,6,7 last_tile_dims={manual, replicated}}",
                  "manual then replicated");
    /* no replicated subgroup: the device order is the tiling itself and is kept */
    assert_prints(parse_ok(a, "{devices=[2,2]3,1,2,0 last_tile_dims={manual}}"),
                  "{devices=[2,2]3,1,2,0 last_tile_dims={manual}}", "manual kept");
    assert_false(shd_equal(op, parse_ok(a, "{devices=[2,1,4]<=[4,2]T(1,0) "
                                           "last_tile_dim_replicate}")));
}

static void
test_sharding_partial_replication(void **state)
{
    SlArena *a = *state;
    const ShdSharding *s = parse_ok(a, "{devices=[2,4]<=[8]}");
    static const int64_t d0[] = {0}, d1[] = {1}, d01[] = {0, 1};
    assert_prints(shd_partially_replicate_dims(a, s, d1, 1),
                  "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", "pr dim 1");
    assert_prints(shd_partially_replicate_dims(a, s, d0, 1),
                  "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}", "pr dim 0");
    assert_prints(shd_partially_replicate_dims(a, s, d01, 2), "{replicated}", "pr all");
    assert_prints(shd_partially_replicate_all_except(a, s, d0, 1),
                  "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", "all except 0");
    assert_prints(shd_partially_replicate_dims(
                      a, parse_ok(a, "{devices=[2,2,2]<=[8] last_tile_dim_replicate}"), d0, 1),
                  "{devices=[1,2,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}", "pr partial");
    assert_prints(shd_partially_replicate_dims(
                      a, parse_ok(a, "{devices=[2,2,2]<=[8] last_tile_dims={manual}}"), d0, 1),
                  "{devices=[1,2,2,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}",
                  "pr manual subgroup");
    assert_prints(shd_partially_replicate_dims(a, parse_ok(a, "{devices=[2,2]0,1,2,3}"), d0, 1),
                  "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}", "pr explicit");
    assert_true(shd_partially_replicate_dims(a, shd_replicated(a), d0, 1)->kind ==
                SHD_REPLICATED);
}

/* PartiallyReplicateTiledShardingOnDims on partial and manual-subgroup inputs (B.2). */
static const struct {
    const char *name, *sharding;
    int64_t dims[2];
    uint32_t n;
    const char *want;
} k_partial_cases[] = {
    {"manual_and_rep", "{devices=[2,2,2,2]<=[16] last_tile_dims={manual, replicated}}", {0}, 1,
     "{devices=[1,2,2,4]<=[2,4,2]T(1,0,2) last_tile_dims={manual, replicated}}"},
    {"manual_all_data", "{devices=[2,1,2]<=[4] last_tile_dims={manual}}", {0}, 1,
     "{devices=[1,1,2,2]<=[2,2]T(1,0) last_tile_dims={manual, replicated}}"},
    {"partial_all_data", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", {0, 1}, 2,
     "{replicated}"},
    {"subgroup_dim_ignored", "{devices=[2,2,2]<=[8] last_tile_dim_replicate}", {2}, 1,
     "{devices=[2,2,2]<=[8] last_tile_dim_replicate}"},
    {"partial_explicit", "{devices=[2,2,2]0,1,4,5,2,3,6,7 last_tile_dim_replicate}", {1}, 1,
     "{devices=[2,1,4]0,1,4,5,2,3,6,7 last_tile_dim_replicate}"},
    {"unsharded_dim", "{devices=[2,1,2]<=[4] last_tile_dims={manual}}", {1}, 1,
     "{devices=[2,1,2]<=[4] last_tile_dims={manual}}"},
};

static void
test_sharding_partial_replication_cases(void **state)
{
    SlArena *a = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_partial_cases); i++)
        assert_prints(shd_partially_replicate_dims(a, parse_ok(a, k_partial_cases[i].sharding),
                                                   k_partial_cases[i].dims, k_partial_cases[i].n),
                      k_partial_cases[i].want, k_partial_cases[i].name);
}

static void
test_sharding_dims_and_transpose(void **state)
{
    SlArena *a = *state;
    static const int64_t d1[] = {1}, t10[] = {1, 0};
    static const int64_t collapse[] = {1, -1, 0}, bad_collapse[] = {-1, 0};
    assert_prints(shd_remove_dims(
                      a, parse_ok(a, "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"), d1, 1),
                  "{devices=[4,2]<=[8] last_tile_dim_replicate}", "remove");
    assert_null(shd_remove_dims(a, parse_ok(a, "{devices=[2,2]<=[4]}"), d1, 1));
    assert_prints(shd_insert_dims(a, parse_ok(a, "{devices=[4,2]<=[8] last_tile_dim_replicate}"),
                                  d1, 1),
                  "{devices=[4,1,2]<=[8] last_tile_dim_replicate}", "insert");
    assert_prints(shd_transpose(a, parse_ok(a, "{devices=[2,4]<=[8]}"), t10),
                  "{devices=[4,2]<=[2,4]T(1,0)}", "transpose");
    assert_prints(shd_transpose(a, parse_ok(a, "{devices=[2,2]0,1,2,3}"), t10),
                  "{devices=[2,2]0,2,1,3}", "transpose explicit");
    assert_prints(shd_transpose(
                      a, parse_ok(a, "{devices=[2,4,2]<=[16] last_tile_dim_replicate}"), t10),
                  "{devices=[4,2,2]<=[2,4,2]T(1,0,2) last_tile_dim_replicate}", "transpose partial");
    assert_prints(shd_transpose_collapsed(a, parse_ok(a, "{devices=[2,1,4]<=[8]}"), collapse, 3, 3),
                  "{devices=[4,2,1]<=[2,4]T(1,0)}", "collapsed");
    assert_null(shd_transpose_collapsed(a, parse_ok(a, "{devices=[2,2]<=[4]}"), bad_collapse, 2, 1));
}

static const struct {
    const char *name, *from_sharding;
    int64_t from[4], to[4];
    uint32_t from_rank, to_rank;
    const char *want; /* "none" for no result */
} k_reshape_cases[] = {
    {"merge",      "{devices=[4,1]<=[4]}", {16, 8}, {128}, 2, 1, "{devices=[4]<=[4]}"},
    {"split",      "{devices=[4]<=[4]}", {128}, {16, 8}, 1, 2, "{devices=[4,1]<=[4]}"},
    {"gcd",        "{devices=[6,1]<=[6]}", {6, 4}, {4, 6}, 2, 2,
     "{devices=[2,1,3]<=[6] last_tile_dim_replicate}"},
    {"same",       "{devices=[2,2]0,2,1,3}", {4, 6}, {4, 6}, 2, 2, "{devices=[2,2]0,2,1,3}"},
    {"add_one",    "{devices=[2,2]<=[4]}", {4, 6}, {4, 1, 6}, 2, 3, "{devices=[2,1,2]<=[4]}"},
    {"drop_one",   "{devices=[2,2,1]<=[4] last_tile_dim_replicate}", {4, 1}, {4}, 2, 1,
     "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
    {"sharded_1",  "{devices=[2,2]<=[4]}", {4, 1}, {4}, 2, 1,
     "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
    {"split_merge", "{devices=[4,1]<=[4]}", {1024, 256}, {128, 2048}, 2, 2, "{devices=[4,1]<=[4]}"},
    {"uneven",     "{devices=[4]<=[4]}", {14}, {2, 7}, 1, 2, "none"},
    {"partial",    "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", {8, 6}, {48}, 2, 1,
     "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
};

static void
test_sharding_reshape(void **state)
{
    SlArena *a = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_reshape_cases); i++) {
        IrShape from = shape_of(a, k_reshape_cases[i].from, k_reshape_cases[i].from_rank);
        IrShape to = shape_of(a, k_reshape_cases[i].to, k_reshape_cases[i].to_rank);
        const ShdSharding *s = parse_ok(a, k_reshape_cases[i].from_sharding);
        assert_prints(shd_reshape(a, &from, &to, s), k_reshape_cases[i].want,
                      k_reshape_cases[i].name);
    }
    static const int64_t f[] = {6, 4}, t[] = {4, 6}, u[] = {3, 4}, v[] = {12};
    IrShape from = shape_of(a, f, 2), to = shape_of(a, t, 2);
    assert_prints(shd_propagate_through_reshape(a, &from, &to, parse_ok(a, "{devices=[6,1]<=[6]}")),
                  "{devices=[2,1,3]<=[6] last_tile_dim_replicate}", "propagate");
    IrShape from2 = shape_of(a, u, 2), to2 = shape_of(a, v, 1);
    assert_prints(shd_propagate_through_reshape(a, &from2, &to2,
                                                parse_ok(a, "{devices=[1,4]<=[4]}")),
                  "{replicated}", "propagate none");
}

/* PropagateShardingThroughReshape: ranges of source dims reshaped one by one and merged. */
static const struct {
    const char *name, *from_sharding;
    int64_t from[4], to[4];
    uint32_t from_rank, to_rank;
    const char *want;
} k_propagate_cases[] = {
    {"whole",      "{devices=[4,1]<=[4]}", {16, 8}, {128}, 2, 1, "{devices=[4]<=[4]}"},
    {"gcd",        "{devices=[6,1]<=[6]}", {6, 4}, {4, 6}, 2, 2,
     "{devices=[2,1,3]<=[6] last_tile_dim_replicate}"},
    {"partial",    "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", {8, 6}, {48}, 2, 1,
     "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
    {"none",       "{devices=[1,4]<=[4]}", {3, 4}, {12}, 2, 1, "{replicated}"},
    /* Dim 0 is uneven, so only the range {1} reshapes; its shards go to target dim 2. */
    {"later_range", "{devices=[4,2]<=[8]}", {6, 8}, {3, 2, 8}, 2, 3,
     "{devices=[1,1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}"},
    /* Ranges {0} and {2} reshape separately (dim 1 is uneven); the merge keeps both. */
    {"merge_two",  "{devices=[2,4,2]<=[16]}", {4, 6, 8}, {4, 3, 2, 8}, 3, 4,
     "{devices=[2,1,1,2,4]<=[2,4,2]T(0,2,1) last_tile_dim_replicate}"},
    /* Same, partially replicated: no split of one side's replication matches the other's,
     * so the merge assigns devices group by group and the result is explicit (as XLA's V1). */
    {"merge_groups", "{devices=[2,4,2,2]<=[32] last_tile_dim_replicate}", {4, 6, 8}, {4, 3, 2, 8},
     3, 4,
     "{devices=[2,1,1,2,8]0,1,4,5,8,9,12,13,2,3,6,7,10,11,14,15,16,17,20,21,24,25,28,29,18,19,"
     "22,23,26,27,30,31 last_tile_dim_replicate}"},
    {"manual",     "{devices=[2,1,2]<=[4] last_tile_dims={manual}}", {8, 6}, {48}, 2, 1,
     "{devices=[2,2]<=[4] last_tile_dims={manual}}"},
    {"manual_rep", "{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}", {4, 6},
     {4, 3, 2}, 2, 3, "{devices=[2,1,1,2,2]<=[8] last_tile_dims={manual, replicated}}"},
    {"maximal",    "{maximal device=1}", {4, 6}, {24}, 2, 1, "{maximal device=1}"},
};

static void
test_sharding_propagate_reshape(void **state)
{
    SlArena *a = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_propagate_cases); i++) {
        IrShape from = shape_of(a, k_propagate_cases[i].from, k_propagate_cases[i].from_rank);
        IrShape to = shape_of(a, k_propagate_cases[i].to, k_propagate_cases[i].to_rank);
        const ShdSharding *s = parse_ok(a, k_propagate_cases[i].from_sharding);
        assert_prints(shd_propagate_through_reshape(a, &from, &to, s), k_propagate_cases[i].want,
                      k_propagate_cases[i].name);
    }
}

/* GetFirstTargetDimToMoveShardingTiles (B.7); the first rows are upstream's unit tests. */
static const struct {
    const char *sharding;
    int64_t shape[4];
    uint32_t rank, src;
    int64_t excluded[2];
    uint32_t n_excluded;
    int64_t want;
} k_move_target_cases[] = {
    {"{devices=[8,1,2,16]<=[256]}", {1, 8, 128, 128}, 4, 0, {0}, 0, -1}, /* D_src = 1 */
    {"{devices=[8,1,2,16]<=[256]}", {1, 8, 128, 128}, 4, 1, {0}, 0, -1}, /* unsharded */
    {"{devices=[8,1,2,16]<=[256]}", {1, 8, 128, 128}, 4, 2, {0}, 0, 1},
    {"{devices=[8,1,2,16]<=[256]}", {1, 8, 128, 128}, 4, 3, {0}, 0, 2},
    {"{devices=[2,2,4,16]<=[256]}", {4, 8, 128, 128}, 4, 0, {0}, 0, 1},
    {"{devices=[2,2,4,16]<=[256]}", {4, 8, 128, 128}, 4, 1, {0}, 0, 0},
    {"{devices=[2,2,4,16]<=[256]}", {4, 8, 128, 128}, 4, 2, {0}, 0, 1},
    {"{devices=[2,2,4,16]<=[256]}", {4, 8, 128, 128}, 4, 3, {0}, 0, 2},
    {"{devices=[1,2]<=[2]}",        {1, 128}, 2, 1, {0}, 0, -1},
    {"{devices=[2]<=[2]}",          {8}, 1, 0, {0}, 0, -1},                /* rank 1 */
    {"{devices=[2,2,4,16]<=[256]}", {4, 8, 128, 128}, 4, 2, {1}, 1, 3},    /* 1 excluded */
    {"{devices=[2,2,4,16]<=[256]}", {4, 8, 128, 128}, 4, 2, {1, 3}, 2, -1},
    {"{devices=[2,1,2]<=[4] last_tile_dim_replicate}", {4, 6}, 2, 0, {0}, 0, 1},
};

static void
test_sharding_move_target(void **state)
{
    SlArena *a = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_move_target_cases); i++) {
        IrShape shape = shape_of(a, k_move_target_cases[i].shape, k_move_target_cases[i].rank);
        int64_t got = shd_find_tile_move_target(
            &shape, parse_ok(a, k_move_target_cases[i].sharding), k_move_target_cases[i].src,
            k_move_target_cases[i].excluded, k_move_target_cases[i].n_excluded);
        if (got != k_move_target_cases[i].want)
            fail_msg("row %zu (%s, src %u): got %lld, want %lld", i,
                     k_move_target_cases[i].sharding, k_move_target_cases[i].src,
                     (long long)got, (long long)k_move_target_cases[i].want);
    }
}

static void
test_sharding_reverse_move_split(void **state)
{
    SlArena *a = *state;
    static const int64_t d0[] = {0};
    assert_prints(shd_reverse(a, parse_ok(a, "{devices=[4]<=[4]}"), d0, 1), "{devices=[4]3,2,1,0}",
                  "reverse");
    assert_prints(shd_reverse(a, parse_ok(a, "{devices=[2,2]<=[4] last_tile_dim_replicate}"), d0,
                              1),
                  "{devices=[2,2]2,3,0,1 last_tile_dim_replicate}", "reverse partial");
    assert_prints(shd_move_and_merge_tiles(a, parse_ok(a, "{devices=[1,2,1,2]<=[4]}"), 1, 3),
                  "{devices=[1,1,1,4]<=[2,2]T(1,0)}", "move and merge");
    assert_prints(shd_move_and_merge_tiles(a, parse_ok(a, "{devices=[2,2]<=[4]}"), 1, 0),
                  "{devices=[4,1]<=[4]}", "move minor into major");
    const ShdSharding *sp = shd_split_dim(a, parse_ok(a, "{devices=[4,2]<=[8]}"), 0, 2);
    assert_prints(sp, "{devices=[2,2,2]<=[8]}", "split");
    assert_prints(shd_merge_dims(a, sp, 0), "{devices=[4,2]<=[8]}", "merge");
    assert_null(shd_split_dim(a, parse_ok(a, "{devices=[4,2]<=[8]}"), 0, 3));
}

static void
test_sharding_reshard_checks(void **state)
{
    SlArena *a = *state;
    const ShdSharding *p = parse_ok(a, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    const ShdSharding *p2 = parse_ok(a, "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
    const ShdSharding *t = parse_ok(a, "{devices=[4,1]<=[4]}");
    assert_prints(shd_partial_replicate_reshard_compatible(a, p, t), "{devices=[4,1]<=[4]}",
                  "compatible");
    assert_prints(shd_partial_replicate_reshard_compatible(a, p2, t),
                  "{devices=[4,1]<=[2,2]T(1,0)}", "compatible permuted");
    assert_null(shd_partial_replicate_reshard_compatible(a, t, p));
    const ShdSharding *p8 = parse_ok(a, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    assert_prints(shd_partial_replicate_reshard_compatible(
                      a, p8, parse_ok(a, "{devices=[2,2,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}")),
                  "{devices=[2,2,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}",
                  "compatible to partial: the target itself, inside the partial tiles");
    const ShdSharding *t8 = parse_ok(a, "{devices=[2,2,2]<=[2,2,2]T(0,2,1) "
                                        "last_tile_dim_replicate}");
    assert_ptr_equal(shd_partial_replicate_reshard_compatible(a, p8, t8), t8);
    /* tiles outside the partial ones: the partial's devices, re-viewed */
    assert_prints(shd_partial_replicate_reshard_compatible(
                      a, p8, parse_ok(a, "{devices=[2,2,2]4,5,6,7,0,1,2,3 "
                                         "last_tile_dim_replicate}")),
                  "{devices=[2,2,2]<=[8] last_tile_dim_replicate}", "compatible re-viewed");
    assert_prints(shd_partial_replicate_reshard_compatible(a, p8, parse_ok(a, "{devices=[2,4]<=[8]}")),
                  "{devices=[2,4]<=[8]}", "compatible all of the group");
    assert_prints(shd_partial_replicate_reshard_compatible(a, p8, parse_ok(a, "{devices=[4,2]<=[8]}")),
                  "{devices=[4,2]<=[8]}", "compatible two dims");
    assert_null(shd_partial_replicate_reshard_compatible(a, p8, parse_ok(a, "{devices=[1,8]<=[8]}")));

    assert_true(shd_can_reshard_with_collective_permute(parse_ok(a, "{devices=[4]0,1,2,3}"),
                                                        parse_ok(a, "{devices=[4]1,0,3,2}")));
    assert_false(shd_can_reshard_with_collective_permute(t, t));
    assert_false(shd_can_reshard_with_collective_permute(t, parse_ok(a, "{devices=[1,4]<=[4]}")));

    int64_t src[4], tgt[4];
    const ShdSharding *col = parse_ok(a, "{devices=[1,4]<=[4]}");
    assert_int_equal(shd_all_to_all_dims(t, col, src, tgt, 4), 1);
    assert_int_equal(src[0], 0);
    assert_int_equal(tgt[0], 1);
    assert_int_equal(shd_all_to_all_dims(t, p, src, tgt, 4), 0);
    assert_prints(shd_all_to_all_sharding(a, t, 0, 1), "{devices=[1,4]<=[4]}", "a2a sharding");
    /* [2,4,1] -> [2,1,4]: swap dims 1 and 2. */
    const ShdSharding *x = parse_ok(a, "{devices=[2,4,1]<=[8]}");
    assert_int_equal(shd_all_to_all_dims(x, parse_ok(a, "{devices=[2,1,4]<=[8]}"), src, tgt, 4), 1);
    assert_int_equal(src[0], 1);
    assert_int_equal(tgt[0], 2);
    assert_prints(shd_all_to_all_sharding(a, parse_ok(a, "{devices=[4,2]<=[8]}"), 0, 1),
                  "{devices=[2,4]<=[2,2,2]T(0,2,1)}", "a2a uneven counts");
}

/* Prints "[G,M]<=[..]T(..)" or "{{..},..}" for checking replica groups. */
static void
print_groups(const IrReplicaGroups *g, bool iota, SlBuf *b)
{
    sl_buf_clear(b);
    if (iota) {
        sl_buf_printf(b, "[%lld,%lld]<=[", (long long)g->iota.dims[0], (long long)g->iota.dims[1]);
        for (uint32_t i = 0; i < g->iota.n_reshape; i++)
            sl_buf_printf(b, "%s%lld", i ? "," : "", (long long)g->iota.reshape[i]);
        sl_buf_putc(b, ']');
        if (g->iota.perm && g->iota.n_reshape > 1) {
            sl_buf_puts(b, "T(");
            for (uint32_t i = 0; i < g->iota.n_reshape; i++)
                sl_buf_printf(b, "%s%lld", i ? "," : "", (long long)g->iota.perm[i]);
            sl_buf_putc(b, ')');
        }
        return;
    }
    sl_buf_putc(b, '{');
    for (uint32_t k = 0, at = 0; k < g->n_groups; at += g->group_sizes[k++]) {
        sl_buf_puts(b, k ? ",{" : "{");
        for (uint32_t m = 0; m < g->group_sizes[k]; m++)
            sl_buf_printf(b, "%s%lld", m ? "," : "", (long long)g->ids[at + m]);
        sl_buf_putc(b, '}');
    }
    sl_buf_putc(b, '}');
}

static const struct {
    const char *sharding;
    int64_t dims[2];
    uint32_t n;
    const char *list, *iota; /* iota NULL: not expressible */
} k_group_cases[] = {
    {"{devices=[2,2]<=[4]}", {1}, 1, "{{0,1},{2,3}}", "[2,2]<=[4]"},
    {"{devices=[2,2]<=[4]}", {0}, 1, "{{0,2},{1,3}}", "[2,2]<=[2,2]T(1,0)"},
    {"{devices=[2,2]<=[4]}", {0, 1}, 2, "{{0,1,2,3}}", "[1,4]<=[4]"},
    {"{devices=[2,2]0,2,1,3}", {1}, 1, "{{0,2},{1,3}}", NULL},
    {"{devices=[4,1]<=[4]}", {0}, 1, "{{0,1,2,3}}", "[1,4]<=[4]"},
    {"{devices=[2,1,2]<=[4] last_tile_dim_replicate}", {2}, 1, "{{0,1},{2,3}}", "[2,2]<=[4]"},
};

static void
test_sharding_replica_groups(void **state)
{
    SlArena *a = *state;
    SlBuf b;
    sl_buf_init(&b);
    for (size_t i = 0; i < SL_COUNTOF(k_group_cases); i++) {
        IrReplicaGroups g;
        assert_int_equal(shd_replica_groups_for_dims(a, parse_ok(a, k_group_cases[i].sharding),
                                                     k_group_cases[i].dims, k_group_cases[i].n,
                                                     &g),
                         SL_OK);
        print_groups(&g, false, &b);
        if (strcmp(b.data, k_group_cases[i].list))
            fail_msg("%s: groups %s", k_group_cases[i].sharding, b.data);
        assert_int_equal(g.is_iota, k_group_cases[i].iota != NULL);
        if (g.is_iota) {
            print_groups(&g, true, &b);
            if (strcmp(b.data, k_group_cases[i].iota))
                fail_msg("%s: iota %s", k_group_cases[i].sharding, b.data);
        }
    }
    sl_buf_fini(&b);
}

static void
assert_groups(const ShdGrouped *g, const int64_t *want, const char *inner, const char *ctx)
{
    for (int64_t i = 0; i < g->n_groups * g->group_size; i++)
        if (g->device_groups[i] != want[i])
            fail_msg("%s: device_groups[%lld] = %lld", ctx, (long long)i,
                     (long long)g->device_groups[i]);
    assert_prints(g->inner, inner, ctx);
}

static void
test_sharding_grouping(void **state)
{
    SlArena *a = *state;
    const ShdSharding *s = parse_ok(a, "{devices=[2,2]<=[4]}");
    static const int64_t d0[] = {0}, d1[] = {1}, d2[] = {2}, two[] = {2};
    static const int64_t g0[] = {0, 1, 2, 3}, g1[] = {0, 2, 1, 3}, g4[] = {0, 1, 2, 3, 4, 5, 6, 7};
    ShdGrouped on0 = shd_group_on_dims(a, s, d0, 1, NULL);
    ShdGrouped on1 = shd_group_on_dims(a, s, d1, 1, NULL);
    assert_int_equal(on0.n_groups, 2);
    assert_int_equal(on0.group_size, 2);
    assert_groups(&on0, g0, "{devices=[1,2]<=[2]}", "group dim 0");
    assert_groups(&on1, g1, "{devices=[2,1]<=[2]}", "group dim 1");
    assert_prints(shd_ungroup(a, &on0), "{devices=[2,2]<=[4]}", "ungroup 0");
    assert_prints(shd_ungroup(a, &on1), "{devices=[2,2]<=[4]}", "ungroup 1");

    ShdGrouped sh = shd_group_on_dims(a, parse_ok(a, "{devices=[4,2]<=[8]}"), d0, 1, two);
    assert_int_equal(sh.n_groups, 2);
    assert_int_equal(sh.group_dim_sizes[0], 2);
    assert_groups(&sh, g4, "{devices=[2,2]<=[4]}", "group with shards");
    assert_prints(shd_ungroup(a, &sh), "{devices=[4,2]<=[8]}", "ungroup shards");

    const ShdSharding *p = parse_ok(a, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    ShdGrouped rep = shd_group_on_dims(a, p, d2, 1, NULL);
    assert_groups(&rep, g1, "{devices=[2,1]<=[2]}", "group on replication dim");
    assert_prints(shd_ungroup(a, &rep), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                  "ungroup replication dim");
    ShdGrouped all = shd_group_on_dims(a, p, d0, 1, NULL);
    assert_prints(all.inner, "{replicated}", "inner replicated");
    assert_prints(shd_ungroup(a, &all), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                  "ungroup replicated inner");

    /* Same sets in a different in-group order: x's inner ids are permuted. */
    ShdGrouped ref = shd_group_on_dims(a, parse_ok(a, "{devices=[2,2]2,3,0,1}"), d1, 1, NULL);
    ShdGrouped al = shd_align_groups_with(a, &on1, &ref);
    assert_prints(al.inner, "{devices=[2,1]1,0}", "aligned inner");
    assert_prints(shd_ungroup(a, &al), "{devices=[2,2]<=[4]}", "aligned ungroup");
    /* Different sets: ref's groups are adopted, inner unchanged. */
    ShdGrouped al2 = shd_align_groups_with(a, &on1, &on0);
    assert_prints(al2.inner, "{devices=[2,1]<=[2]}", "adopted inner");
    assert_true(al2.device_groups == on0.device_groups);
    /* Same sets in order, but the in-group orders disagree ({2,0} reversed, {1,3} not): the
     * first group's permutation is applied to the inner ids (XLA's AlignGroupsWith), so the
     * second group's devices swap tiles. */
    ShdGrouped mixed = shd_group_on_dims(a, parse_ok(a, "{devices=[2,2]2,1,0,3}"), d1, 1, NULL);
    ShdGrouped al3 = shd_align_groups_with(a, &on1, &mixed);
    assert_prints(al3.inner, "{devices=[2,1]1,0}", "first group's permutation");
    assert_true(al3.device_groups == mixed.device_groups);
    assert_prints(shd_ungroup(a, &al3), "{devices=[2,2]0,3,2,1}", "mixed ungroup");
}

/* "{{0,1},{2,3}}" for a grouping's device_groups. */
static const char *
groups_text(const ShdGrouped *g, SlBuf *b)
{
    sl_buf_clear(b);
    sl_buf_putc(b, '{');
    for (int64_t k = 0; k < g->n_groups; k++) {
        sl_buf_puts(b, k ? ",{" : "{");
        for (int64_t m = 0; m < g->group_size; m++)
            sl_buf_printf(b, "%s%lld", m ? "," : "",
                          (long long)g->device_groups[k * g->group_size + m]);
        sl_buf_putc(b, '}');
    }
    sl_buf_putc(b, '}');
    return b->data;
}

static void
assert_grouped(SlArena *a, const ShdGrouped *g, const char *groups, const char *inner, const char *ungrouped,
               const char *ctx)
{
    SlBuf b;
    sl_buf_init(&b);
    if (!g->device_groups || strcmp(groups_text(g, &b), groups) != 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s: groups %s, want %s", ctx,
                 g->device_groups ? b.data : "none", groups);
        sl_buf_fini(&b);
        fail_msg("%s", msg);
    }
    sl_buf_fini(&b);
    assert_prints(g->inner, inner, ctx);
    assert_prints(shd_ungroup(a, g), ungrouped, ctx);
}

/* GroupShardingOnReplicatedDim: (1) the replication dim's major part, (2) shards borrowed from
 * the replicable dims in order, laid over iota as upstream does, (3) replicated iota groups. */
static const struct {
    const char *name, *sharding;
    int64_t n_groups, num_tiles;
    int64_t replicable[2];
    uint32_t n_replicable;
    const char *groups, *inner, *ungrouped;
} k_replicated_group_cases[] = {
    {"replication_dim", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 2, 8, {0}, 0,
     "{{0,1,4,5},{2,3,6,7}}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
    {"borrow", "{devices=[4,2]<=[8]}", 2, 8, {0}, 1, "{{0,2,4,6},{1,3,5,7}}",
     "{devices=[2,2]<=[4]}", "{devices=[2,2,2]<=[8] last_tile_dim_replicate}"},
    {"borrow_partial", "{devices=[2,2,2]<=[8] last_tile_dim_replicate}", 4, 8, {1}, 1,
     "{{0,4},{1,5},{2,6},{3,7}}", "{devices=[2,1]<=[2]}",
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
    {"borrow_order_10", "{devices=[2,4]<=[8]}", 2, 8, {1, 0}, 2, "{{0,2,4,6},{1,3,5,7}}",
     "{devices=[2,2]<=[4]}", "{devices=[2,2,2]<=[8] last_tile_dim_replicate}"},
    {"borrow_order_01", "{devices=[2,4]<=[8]}", 2, 8, {0, 1}, 2, "{{0,2,4,6},{1,3,5,7}}",
     "{devices=[1,4]<=[4]}", "{devices=[1,4,2]<=[8] last_tile_dim_replicate}"},
    /* Upstream's factorization of 6 yields only {2}, so 3 cannot be borrowed. */
    {"prime_quirk", "{devices=[6,1]<=[6]}", 3, 6, {0}, 1, "{{0,1},{2,3},{4,5}}", "{replicated}",
     "{replicated}"},
    {"replicated", "{devices=[2,2]<=[4]}", 4, 4, {0}, 0, "{{0},{1},{2},{3}}", "{replicated}",
     "{replicated}"},
    {"not_tiled", "{replicated}", 2, 8, {0}, 0, "{{0,1,2,3},{4,5,6,7}}", "{replicated}",
     "{replicated}"},
};

static void
test_sharding_group_replicated(void **state)
{
    SlArena *a = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_replicated_group_cases); i++) {
        ShdGrouped g = shd_group_on_replicated_dim(
            a, parse_ok(a, k_replicated_group_cases[i].sharding),
            k_replicated_group_cases[i].n_groups, k_replicated_group_cases[i].num_tiles, 2,
            k_replicated_group_cases[i].replicable, k_replicated_group_cases[i].n_replicable);
        assert_grouped(a, &g, k_replicated_group_cases[i].groups, k_replicated_group_cases[i].inner,
                       k_replicated_group_cases[i].ungrouped, k_replicated_group_cases[i].name);
    }
    ShdGrouped bad = shd_group_on_replicated_dim(a, shd_replicated(a), 3, 8, 2, NULL, 0);
    assert_null(bad.inner);
}

/* Grouping on the manual subgroup dim (C.11); ungrouping must give the input back. */
static const struct {
    const char *sharding, *groups, *inner;
} k_manual_group_cases[] = {
    {"{devices=[2,1,2]<=[4] last_tile_dims={manual}}", "{{0,2},{1,3}}", "{devices=[2,1]<=[2]}"},
    {"{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}", "{{0,1,4,5},{2,3,6,7}}",
     "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
    {"{devices=[1,2,2]<=[4] last_tile_dims={manual, replicated}}", "{{0,1},{2,3}}",
     "{replicated}"},
    {"{devices=[2,2]3,1,0,2 last_tile_dims={manual}}", "{{3,0},{1,2}}", "{devices=[2]<=[2]}"},
    {"{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dims={manual, replicated}}",
     "{{0,4,1,5},{2,6,3,7}}", "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
    {"{devices=[2,2,2,2]<=[16] last_tile_dims={manual, unreduced}}",
     "{{0,1,4,5,8,9,12,13},{2,3,6,7,10,11,14,15}}",
     "{devices=[2,2,2]<=[8] last_tile_dims={unreduced}}"},
};

static void
test_sharding_group_manual(void **state)
{
    SlArena *a = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_manual_group_cases); i++) {
        ShdGrouped g = shd_group_on_manual(a, parse_ok(a, k_manual_group_cases[i].sharding));
        assert_true(g.subgroup_manual);
        assert_grouped(a, &g, k_manual_group_cases[i].groups, k_manual_group_cases[i].inner,
                       k_manual_group_cases[i].sharding, k_manual_group_cases[i].sharding);
    }
    assert_null(shd_group_on_manual(a, parse_ok(a, "{devices=[2,2]<=[4]}")).inner);
    /* Grouping on every dim leaves nothing tiled inside: replicated, as upstream. */
    static const int64_t both[] = {0, 1};
    ShdGrouped all = shd_group_on_dims(a, parse_ok(a, "{devices=[2,2]<=[4]}"), both, 2, NULL);
    assert_grouped(a, &all, "{{0},{1},{2},{3}}", "{replicated}", "{devices=[2,2]<=[4]}", "all dims");
}

/* ---- unreduced shardings as the partitioner sees them ---- */

static const struct {
    const char *in, *want;
} k_unreduced[] = {
    {"{unreduced}", "{replicated}"},
    {"{devices=[4,2]<=[2,4]T(1,0) last_tile_dims={unreduced}}",
     "{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"},
    /* unreduced-major merge with the replicated subgroup: devices 0..3 share tile 0 */
    {"{devices=[2,1,2,2]<=[8] last_tile_dims={unreduced, replicated}}",
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
    /* the same merged groups as sets: tile 0 is held by devices 0, 1, 4 and 8 */
    {"{devices=[1,3,2,2]<=[3,4]T(1,0) last_tile_dims={replicated, unreduced}}",
     "{devices=[1,3,4]0,1,4,8,2,5,6,9,3,7,10,11 last_tile_dim_replicate}"},
    {"{devices=[2,2,2]<=[8] last_tile_dims={manual, unreduced}}",
     "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}"},
    {"{{devices=[2,2]<=[4] last_tile_dims={unreduced}}, {replicated}}",
     "{{devices=[2,2]<=[4] last_tile_dim_replicate}, {replicated}}"},
};

static void
test_sharding_unreduced_as_replicated(void **state)
{
    SlArena *a = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_unreduced); i++)
        assert_prints(shd_unreduced_as_replicated(a, parse_ok(a, k_unreduced[i].in)),
                      k_unreduced[i].want, k_unreduced[i].in);
    const ShdSharding *plain = parse_ok(a, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    assert_ptr_equal(shd_unreduced_as_replicated(a, plain), plain);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sharding_print_cases, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_parse_errors, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_parse_loc_offset, arena_setup,
                                        arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_iota_expand, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_constructors, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_predicates, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_tile_offsets, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_tile_shape, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_check, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_hostile, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_partial_replication, arena_setup,
                                        arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_dims_and_transpose, arena_setup,
                                        arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_reshape, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_reverse_move_split, arena_setup,
                                        arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_reshard_checks, arena_setup,
                                        arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_replica_groups, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_grouping, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_partial_replication_cases, arena_setup,
                                        arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_propagate_reshape, arena_setup,
                                        arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_move_target, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_group_replicated, arena_setup,
                                        arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_group_manual, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_partial_groups_sorted, arena_setup,
                                        arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_token_devices, arena_setup, arena_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_unreduced_as_replicated, arena_setup,
                                        arena_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
