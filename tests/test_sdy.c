/* test_sdy.c - the import of Shardy's round-trip attributes (src/hlo/sdy_*.c) through
 * hlo_parse: mesh + dimension shardings to tile assignments, replicated and unreduced axes,
 * sub-axes, device_ids, maximal meshes, per-value lists, FuncResultSharding on the entry root,
 * which shardings are kept, open dimensions, and errors with their line:col. Expected values
 * are worked out by hand from the conversion rule in sdy_convert.c's file comment. */
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
#include "sharding/shd.h"

typedef struct Fixture {
    SlArena arena;
    SlInterner names;
} Fixture;

static int
setup(void **state)
{
    Fixture *fx = test_malloc(sizeof(*fx));
    sl_arena_init(&fx->arena);
    sl_interner_init(&fx->names, &fx->arena);
    *state = fx;
    return 0;
}

static int
teardown(void **state)
{
    Fixture *fx = *state;
    sl_interner_fini(&fx->names);
    sl_arena_fini(&fx->arena);
    test_free(fx);
    return 0;
}

static IrModule *
parse_ok(Fixture *fx, const char *text)
{
    IrModule *m = NULL;
    SlError err = {0};
    if (hlo_parse(&fx->arena, &fx->names, sl_str(text), "t.hlo", &m, &err) != SL_OK)
        fail_msg("unexpected error %u:%u: %s\n%s", err.loc.line, err.loc.col, err.msg, text);
    return m;
}

static IrInstr *
find(const IrModule *m, const char *name)
{
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t k = 0; k < m->comps[c]->n_instrs; k++)
            if (!strcmp(sl_sym_cstr(m->comps[c]->instrs[k]->name), name))
                return m->comps[c]->instrs[k];
    return NULL;
}

/* The printed sharding of `name` ("" when it has none). */
static void
sharding_text(const IrModule *m, const char *name, SlBuf *out)
{
    IrInstr *i = find(m, name);
    assert_non_null(i);
    sl_buf_clear(out);
    if (ir_instr_sharding(i))
        shd_print(ir_instr_sharding(i), out);
}

#define MESH_2X4 "frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"data\"=2, \"model\"=4]>}}"

/* One parameter %p of `shape` with `sdy` as its xla.sdy.sharding, under the header `meshes`. */
static const struct {
    const char *meshes, *shape, *sdy, *want;
} k_convert[] = {
    /* the dimension's axis first, the rest replicated */
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{\\\"data\\\"}, {}]>",
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
    /* model (minor in the mesh) shards: devices 0,4 / 1,5 / ... share a tile */
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{}, {\\\"model\\\"}]>",
     "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"},
    /* two axes on one dimension, written minor first */
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{\\\"model\\\", \\\"data\\\"}, {}]>",
     "{devices=[8,1]<=[2,4]T(1,0)}"},
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{\\\"data\\\"}, {\\\"model\\\"}]>",
     "{devices=[2,4]<=[8]}"},
    /* explicit replicated axes change nothing; priorities have no GSPMD form */
    {MESH_2X4, "f32[8,16]",
     "#sdy.sharding<@mesh, [{\\\"data\\\"}p0, {}p1], replicated={\\\"model\\\"}>",
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"},
    /* fully replicated, scalar */
    {MESH_2X4, "f32[]", "#sdy.sharding<@mesh, []>", "{replicated}"},
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{}, {}]>", "{replicated}"},
    /* unreduced axes: GSPMD's unreduced subgroup */
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{\\\"data\\\"}, {}], unreduced={\\\"model\\\"}>",
     "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"},
    /* sub-axes: x=8 split into (1)2,(2)4; the second shards dim 0, the first dim 1 */
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}}", "f32[8,16]",
     "#sdy.sharding<@mesh, [{\\\"x\\\":(2)4}, {\\\"x\\\":(1)2}]>", "{devices=[4,2]<=[2,4]T(1,0)}"},
    /* a middle sub-axis: x=8 into (1)2,(2)2,(4)2; (2)2 shards, (1)2 and (4)2 replicate:
     * tiles {0,1,4,5} and {2,3,6,7} */
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}}", "f32[8,16]",
     "#sdy.sharding<@mesh, [{\\\"x\\\":(2)2}, {}]>",
     "{devices=[2,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}"},
    /* device_ids: the ids are the mesh's array, row-major */
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"a\"=2, \"b\"=2], "
     "device_ids=[3,2,1,0]>}}",
     "f32[8,16]", "#sdy.sharding<@mesh, [{\\\"a\\\"}, {\\\"b\\\"}]>", "{devices=[2,2]3,2,1,0}"},
    /* b shards: its tiles are ids [3,1] and [2,0] (each replication group sorted) */
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"a\"=2, \"b\"=2], "
     "device_ids=[3,2,1,0]>}}",
     "f32[8,16]", "#sdy.sharding<@mesh, [{\\\"b\\\"}, {}]>",
     "{devices=[2,1,2]1,3,0,2 last_tile_dim_replicate}"},
    /* a maximal mesh, an empty mesh, an inline mesh, and the second of two meshes */
    {"frontend_attributes={xla.sdy.meshes={maximal_mesh_3 = #sdy.mesh<[], device_ids=[3]>}}",
     "f32[8]", "#sdy.sharding<@maximal_mesh_3, []>", "{maximal device=3}"},
    {"frontend_attributes={xla.sdy.meshes={empty_mesh = #sdy.mesh<[]>}}", "f32[8]",
     "#sdy.sharding<@empty_mesh, [{}]>", "{replicated}"},
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<mesh<[\\\"z\\\"=4]>, [{}, {\\\"z\\\"}]>",
     "{devices=[1,4]<=[4]}"},
    {"frontend_attributes={xla.sdy.meshes={a = #sdy.mesh<[\"x\"=2]>, b = #sdy.mesh<[\"y\"=4, "
     "\"x\"=2]>}}",
     "f32[8,16]", "#sdy.sharding<@b, [{\\\"x\\\"}, {}]>",
     "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}"},
    /* axes of size 1 (MaxText meshes have many) shard nothing */
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"a\"=1, \"b\"=4]>}}", "f32[8,16]",
     "#sdy.sharding<@mesh, [{\\\"a\\\", \\\"b\\\"}, {}]>", "{devices=[4,1]<=[4]}"},
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"a\"=1, \"b\"=4]>}}", "f32[8,16]",
     "#sdy.sharding<@mesh, [{\\\"a\\\"}, {}]>", "{replicated}"},
    /* a tuple value: one sharding per leaf */
    {MESH_2X4, "(f32[8], f32[4,4])",
     "#sdy.sharding_per_value<[<@mesh, [{\\\"data\\\"}]>, <@mesh, [{}, {\\\"model\\\"}]>]>",
     "{{devices=[2,4]<=[8] last_tile_dim_replicate}, {devices=[1,4,2]<=[2,4]T(1,0) "
     "last_tile_dim_replicate}}"},
};

static void
test_convert(void **state)
{
    Fixture *fx = *state;
    SlBuf text, got;
    sl_buf_init(&text);
    sl_buf_init(&got);
    for (size_t k = 0; k < SL_COUNTOF(k_convert); k++) {
        sl_buf_clear(&text);
        /* the GSPMD sharding written next to it is wrong on purpose: the sdy one wins */
        sl_buf_printf(&text,
                      "HloModule m, num_partitions=8, %s\n\nENTRY %%main {\n"
                      "  ROOT %%p = %s parameter(0), sharding={maximal device=1}, "
                      "frontend_attributes={xla.sdy.sharding=\"%s\"}\n}\n",
                      k_convert[k].meshes, k_convert[k].shape, k_convert[k].sdy);
        IrModule *m = parse_ok(fx, sl_buf_str(&text).ptr);
        sharding_text(m, "p", &got);
        if (strcmp(sl_buf_str(&got).ptr ? sl_buf_str(&got).ptr : "", k_convert[k].want))
            fail_msg("case %zu (%s): got %s, want %s", k, k_convert[k].sdy, sl_buf_str(&got).ptr,
                     k_convert[k].want);
        ir_module_fini(m);
    }
    sl_buf_fini(&text);
    sl_buf_fini(&got);
}

/* The middle sub-axis case, device by device. */
static void
test_sub_axis_devices(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(
        fx, "HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}}\n"
            "ENTRY %e {\n  ROOT %p = f32[8] parameter(0), frontend_attributes={"
            "xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"x\\\":(2)2}]>\"}\n}\n");
    const ShdSharding *s = ir_instr_sharding(find(m, "p"));
    assert_non_null(s);
    assert_int_equal(s->kind, SHD_TILED);
    assert_int_equal(s->n_tile_dims, 2);
    assert_int_equal(s->tile_dims[0], 2);
    assert_int_equal(s->tile_dims[1], 4);
    static const int64_t want[] = {0, 1, 4, 5, 2, 3, 6, 7};
    for (size_t k = 0; k < SL_COUNTOF(want); k++)
        assert_int_equal(s->devices[k], want[k]);
    ir_module_fini(m);
}

/* What XLA's import keeps: parameters and Sharding calls take sdy's sharding, other
 * `sharding=` go, FuncResultSharding calls leave and put their sharding on the root leaves,
 * and an open dimension of a Sharding call becomes an unspecified dim. */
static const char k_module[] =
    "HloModule m, num_partitions=8, " MESH_2X4 "\n\n"
    "ENTRY %main (p0: f32[8,16], p1: f32[8,16]) -> (f32[8,16], f32[8,16]) {\n"
    "  %p0 = f32[8,16] parameter(0), sharding={replicated}, frontend_attributes={"
    "xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"data\\\"}, {}]>\"}\n"
    "  %p1 = f32[8,16] parameter(1), sharding={devices=[1,8]<=[8]}\n"
    "  %a = f32[8,16] add(%p0, %p1), sharding={devices=[8,1]<=[8]}\n"
    "  %s = f32[8,16] custom-call(%a), custom_call_target=\"Sharding\", sharding={replicated}, "
    "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh, [{?}, "
    "{\\\"model\\\"}]>]>\"}\n"
    "  %e = f32[8,16] exponential(%s), frontend_attributes={xla.sdy.sharding="
    "\"#sdy.sharding_per_value<[<@mesh, [{\\\"model\\\"}, {}]>]>\"}\n"
    "  %r0 = f32[8,16] custom-call(%e), custom_call_target=\"xla.sdy.FuncResultSharding\", "
    "custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="
    "\"#sdy.sharding_per_value<[<@mesh, [{}, {\\\"data\\\"}]>]>\"}\n"
    "  %r1 = f32[8,16] custom-call(%p0), custom_call_target=\"xla.sdy.FuncResultSharding\", "
    "custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="
    "\"#sdy.sharding_per_value<[<@mesh, [{\\\"model\\\", \\\"data\\\"}, {}]>]>\"}\n"
    "  ROOT %t = (f32[8,16], f32[8,16]) tuple(%r0, %r1), sharding={{replicated}, {replicated}}\n"
    "}\n";

static void
test_module_rewrite(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(fx, k_module);
    SlBuf got;
    sl_buf_init(&got);
    sharding_text(m, "p0", &got);
    assert_string_equal(sl_buf_str(&got).ptr, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    /* the module is GSPMD's now: no mesh table, no consumed sdy attributes (read it back and
     * nothing changes) */
    assert_null(ir_module_find_header(m, "frontend_attributes"));
    assert_null(ir_instr_find_attr(find(m, "p0"), IR_ATTR_FRONTEND_ATTRIBUTES));
    sharding_text(m, "p1", &got); /* no sdy sharding: XLA's import drops it */
    assert_int_equal(got.len, 0);
    sharding_text(m, "a", &got);
    assert_int_equal(got.len, 0);
    sharding_text(m, "e", &got); /* sdy on an ordinary op: XLA ignores it */
    assert_int_equal(got.len, 0);
    sharding_text(m, "s", &got);
    assert_string_equal(sl_buf_str(&got).ptr,
                        "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
    const IrAttr *bc = ir_instr_find_attr(find(m, "s"), IR_ATTR_BACKEND_CONFIG);
    assert_non_null(bc);
    assert_int_equal(bc->u.text.len, strlen("\"unspecified_dims=[0]\""));
    assert_memory_equal(bc->u.text.ptr, "\"unspecified_dims=[0]\"", bc->u.text.len);
    /* the result shardings, leaf by leaf; the calls are gone and the tuple reads e and p0 */
    assert_null(find(m, "r0"));
    assert_null(find(m, "r1"));
    IrInstr *t = find(m, "t");
    assert_ptr_equal(m->entry->root, t);
    assert_ptr_equal(t->operands[0], find(m, "e"));
    assert_ptr_equal(t->operands[1], find(m, "p0"));
    sharding_text(m, "t", &got);
    assert_string_equal(sl_buf_str(&got).ptr,
                        "{{devices=[1,2,4]<=[8] last_tile_dim_replicate}, "
                        "{devices=[8,1]<=[2,4]T(1,0)}}");
    sl_buf_fini(&got);
    ir_module_fini(m);
}

/* JAX's single result: ROOT get-tuple-element(tuple(FuncResultSharding(x))). */
static void
test_single_result(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(
        fx, "HloModule m, " MESH_2X4 "\nENTRY %e {\n"
            "  %x = f32[8,16] parameter(0), frontend_attributes={xla.sdy.sharding="
            "\"#sdy.sharding<@mesh, [{}, {}]>\"}\n"
            "  %r = f32[8,16] custom-call(%x), custom_call_target=\"xla.sdy.FuncResultSharding\", "
            "custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="
            "\"#sdy.sharding_per_value<[<@mesh, [{\\\"data\\\", \\\"model\\\"}, {}]>]>\"}\n"
            "  %t = (f32[8,16]) tuple(%r)\n"
            "  ROOT %g = f32[8,16] get-tuple-element(%t), index=0, sharding={replicated}\n}\n");
    SlBuf got;
    sl_buf_init(&got);
    sharding_text(m, "g", &got);
    assert_string_equal(sl_buf_str(&got).ptr, "{devices=[8,1]<=[8]}");
    sharding_text(m, "x", &got);
    assert_string_equal(sl_buf_str(&got).ptr, "{replicated}");
    assert_ptr_equal(find(m, "t")->operands[0], find(m, "x"));
    sl_buf_fini(&got);
    ir_module_fini(m);
}

/* Without xla.sdy.meshes the module is GSPMD's: nothing changes. */
static void
test_plain_module_unchanged(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(fx, "HloModule m\nENTRY %e {\n  ROOT %p = f32[8] parameter(0), "
                               "sharding={devices=[2]<=[2]}, frontend_attributes={"
                               "xla.sdy.sharding=\"not even sdy\"}\n}\n");
    SlBuf got;
    sl_buf_init(&got);
    sharding_text(m, "p", &got);
    assert_string_equal(sl_buf_str(&got).ptr, "{devices=[2]<=[2]}");
    sl_buf_fini(&got);
    ir_module_fini(m);
}

/* The mesh table is a top-level entry of the header's frontend_attributes: the same text inside
 * another entry's value (or a string) is not one, and the module reads back as it was printed
 * (found by the hlo fuzzer: stripping a nested match left the header unreadable). */
static void
test_meshes_key_only_at_top_level(void **state)
{
    Fixture *fx = *state;
    static const char *const k_headers[] = {
        "frontend_attributes={a={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=2]>}}}",
        "frontend_attributes={a=\"xla.sdy.meshes={mesh = #sdy.mesh<[\\\"x\\\"=2]>}\"}",
        "frontend_attributes={ba.xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=2]>}}",
    };
    for (size_t k = 0; k < SL_COUNTOF(k_headers); k++) {
        SlBuf text, a, b;
        sl_buf_init(&text);
        sl_buf_init(&a);
        sl_buf_init(&b);
        sl_buf_printf(&text, "HloModule m, %s\n\nENTRY %%e {\n  ROOT %%p = f32[8] parameter(0), "
                      "sharding={devices=[2]<=[2]}\n}\n", k_headers[k]);
        IrModule *m = parse_ok(fx, text.data);
        sharding_text(m, "p", &a);
        assert_string_equal(a.data, "{devices=[2]<=[2]}"); /* not a Shardy module */
        sl_buf_clear(&a);
        hlo_print_module(m, &a);
        assert_non_null(strstr(a.data, k_headers[k]));
        IrModule *again = parse_ok(fx, a.data);
        hlo_print_module(again, &b);
        assert_string_equal(a.data, b.data);
        ir_module_fini(again);
        ir_module_fini(m);
        sl_buf_fini(&text);
        sl_buf_fini(&a);
        sl_buf_fini(&b);
    }
}

/* Errors: status, line and the column of the offending byte (found in the text itself). */
static const struct {
    const char *meshes, *shape, *sdy;
    SlStatus status;
    const char *at;      /* the text the column points at (first occurrence on its line) */
    uint32_t line;       /* 1: the header, 4: the parameter */
    const char *message; /* a part of the message */
} k_errors[] = {
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{\\\"dat\\\"}, {}]>", SL_ERR_INVALID,
     "\\\"dat", 4, "axis \"dat\" is not in the mesh"},
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@nomesh, [{}, {}]>", SL_ERR_INVALID, "@nomesh", 4,
     "not in the module's xla.sdy.meshes"},
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{}, {}]", SL_ERR_PARSE, "\"}", 4,
     "expected '>' closing the sharding"},
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{} {}]>", SL_ERR_PARSE, "{}]>", 4,
     "expected ',' or ']'"},
    {MESH_2X4, "f32[8,16]", "#sdy.shardin<@mesh, [{}, {}]>", SL_ERR_PARSE, "#sdy.shardin", 4,
     "expected '#sdy.sharding<'"},
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}}", "f32[8,16]",
     "#sdy.sharding<@mesh, [{\\\"x\\\":(1)4}, {\\\"x\\\":(2)2}]>", SL_ERR_INVALID, "\\\"x\\\":(2)2", 4,
     "used twice"},
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}}", "f32[8,16]",
     "#sdy.sharding<@mesh, [{\\\"x\\\":(2)3}, {}]>", SL_ERR_INVALID, "\\\"x\\\":(2)3", 4,
     "does not divide"},
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=y]>}}", "f32[8]",
     "#sdy.sharding<@mesh, [{}]>", SL_ERR_PARSE, "y]", 1, "expected a mesh axis size"},
    {"frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=4], device_ids=[0,1]>}}",
     "f32[8]", "#sdy.sharding<@mesh, [{}]>", SL_ERR_INVALID, "device_ids", 1,
     "one id per device"},
    /* the rank must be the value's: reported at the instruction */
    {MESH_2X4, "f32[8,16]", "#sdy.sharding<@mesh, [{}]>", SL_ERR_INVALID, "ROOT", 4,
     "1 dimension shardings but the value has rank 2"},
};

static void
test_errors(void **state)
{
    Fixture *fx = *state;
    SlBuf text;
    sl_buf_init(&text);
    for (size_t k = 0; k < SL_COUNTOF(k_errors); k++) {
        sl_buf_clear(&text);
        sl_buf_printf(&text,
                      "HloModule m, %s\n\nENTRY %%main {\n"
                      "  ROOT %%p = %s parameter(0), frontend_attributes={xla.sdy.sharding="
                      "\"%s\"}\n}\n",
                      k_errors[k].meshes, k_errors[k].shape, k_errors[k].sdy);
        const char *t = sl_buf_str(&text).ptr;
        const char *line = t;
        for (uint32_t l = 1; l < k_errors[k].line; l++)
            line = strchr(line, '\n') + 1;
        const char *hit = strstr(line, k_errors[k].at);
        assert_non_null(hit);
        uint32_t want_col = (uint32_t)(hit - line) + 1;
        IrModule *m = NULL;
        SlError err = {0};
        SlStatus st = hlo_parse(&fx->arena, &fx->names, sl_str(t), "t.hlo", &m, &err);
        if (st != k_errors[k].status || err.loc.line != k_errors[k].line ||
            err.loc.col != want_col || !strstr(err.msg, k_errors[k].message))
            fail_msg("case %zu: got status %d at %u:%u \"%s\"; want %d at %u:%u \"%s\"", k, st,
                     err.loc.line, err.loc.col, err.msg, k_errors[k].status, k_errors[k].line,
                     want_col, k_errors[k].message);
        assert_null(m);
    }
    sl_buf_fini(&text);
}

/* shard_map over all mesh axes: GSPMD's Sharding/SPMDFullToShardShape ... SPMDShardToFullShape
 * form around the call, the body manual. */
#define SHARD_MAP_MODULE(AXES)                                                                     \
    "HloModule m, " MESH_2X4 "\n\n"                                                             \
    "%xla.sdy.manual_computation_body.2 (x: f32[4,4]) -> f32[4,4] {\n"                          \
    "  %x = f32[4,4] parameter(0)\n"                                                            \
    "  ROOT %n = f32[4,4] negate(%x)\n}\n\n"                                                    \
    "ENTRY %main (a: f32[8,16]) -> f32[8,16] {\n"                                               \
    "  %a = f32[8,16] parameter(0)\n"                                                           \
    "  %g = f32[4,4] custom-call(%a), custom_call_target=\"xla.sdy.GlobalToLocalShape\", "      \
    "custom_call_has_side_effect=true, frontend_attributes={xla.sdy.in_shardings="              \
    "\"#sdy.sharding_per_value<[<@mesh, [{\\\"data\\\"}, {\\\"model\\\"}]>]>\","                \
    "xla.sdy.manual_axes=\"#sdy<manual_axes{" AXES "}>\"}\n"                                    \
    "  %c = f32[4,4] call(%g), to_apply=%xla.sdy.manual_computation_body.2\n"                   \
    "  ROOT %l = f32[8,16] custom-call(%c), custom_call_target=\"xla.sdy.LocalToGlobalShape\", " \
    "custom_call_has_side_effect=true, frontend_attributes={xla.sdy.manual_axes="               \
    "\"#sdy<manual_axes{" AXES "}>\",xla.sdy.out_shardings=\"#sdy.sharding_per_value<[<@mesh, " \
    "[{}, {\\\"model\\\"}]>]>\"}\n}\n"

/* The import runs inside the parser, before the checker: an instruction without the operands
 * its opcode needs (get-tuple-element() beside a shard_map) leaves the module unimported for
 * ir_module_check to reject, instead of being read by position (found by the mutation run). */
static void
test_bad_operand_count_left_to_check(void **state)
{
    Fixture *fx = *state;
    const char *text = SHARD_MAP_MODULE("\\\"data\\\", \\\"model\\\"");
    const char *at = strstr(text, "  ROOT %l");
    assert_non_null(at);
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_append(&b, text, (size_t)(at - text));
    sl_buf_puts(&b, "  %t = f32[4,4] get-tuple-element(), index=0\n");
    sl_buf_puts(&b, at);
    IrModule *m = parse_ok(fx, b.data);
    assert_non_null(find(m, "g")); /* not imported */
    SlError err = {0};
    assert_int_equal(ir_module_check(m, "t.hlo", &err), SL_ERR_INVALID);
    assert_non_null(strstr(err.msg, "instruction %t (get-tuple-element) in computation %main: "
                                    "expects 1 operand, got 0"));
    ir_module_fini(m);
    sl_buf_fini(&b);
}

static void
test_manual_computation(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(fx, SHARD_MAP_MODULE("\\\"data\\\", \\\"model\\\""));
    assert_null(find(m, "g"));
    assert_null(find(m, "l"));
    IrComputation *e = m->entry;
    /* a, copy, SPMDFullToShardShape, call, copy, SPMDShardToFullShape */
    assert_int_equal(e->n_instrs, 6);
    static const char *const k_want[] = {
        "parameter:", "copy:{devices=[2,4]<=[8]}", "SPMDFullToShardShape:{manual}",
        "call:{manual}", "copy:{manual}",
        "SPMDShardToFullShape:{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"};
    SlBuf got;
    sl_buf_init(&got);
    for (uint32_t k = 0; k < e->n_instrs; k++) {
        IrInstr *i = e->instrs[k];
        sl_buf_clear(&got);
        const IrAttr *t = ir_instr_find_attr(i, IR_ATTR_CUSTOM_CALL_TARGET);
        if (t)
            sl_buf_append(&got, t->u.text.ptr + 1, t->u.text.len - 2);
        else
            sl_buf_puts(&got, ir_op_name(i->op));
        sl_buf_putc(&got, ':');
        if (ir_instr_sharding(i))
            shd_print(ir_instr_sharding(i), &got);
        assert_string_equal(sl_buf_str(&got).ptr, k_want[k]);
        if (k > 0)
            assert_ptr_equal(i->operands[0], e->instrs[k - 1]);
    }
    assert_ptr_equal(e->root, e->instrs[5]);
    assert_int_equal(e->instrs[2]->shape.dims[0], 4);
    assert_int_equal(e->instrs[5]->shape.dims[1], 16);
    sharding_text(m, "n", &got); /* the body is manual */
    assert_string_equal(sl_buf_str(&got).ptr, "{manual}");
    sharding_text(m, "x", &got);
    assert_string_equal(sl_buf_str(&got).ptr, "{manual}");
    sl_buf_fini(&got);
    ir_module_fini(m);
}

/* A shard_map over some axes (axis_names=): the local values keep the free axes and get a
 * manual subgroup; the body's parameter and root take them. */
static void
test_partial_manual_computation(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(fx, SHARD_MAP_MODULE("\\\"data\\\""));
    IrComputation *e = m->entry;
    assert_int_equal(e->n_instrs, 6);
    static const char *const k_want[] = {
        "", "{devices=[2,4]<=[8]}", "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}",
        "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}",
        "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}",
        "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"};
    SlBuf got;
    sl_buf_init(&got);
    for (uint32_t k = 0; k < e->n_instrs; k++) {
        sl_buf_clear(&got);
        if (ir_instr_sharding(e->instrs[k]))
            shd_print(ir_instr_sharding(e->instrs[k]), &got);
        assert_string_equal(got.len ? sl_buf_str(&got).ptr : "", k_want[k]);
    }
    sharding_text(m, "x", &got);
    assert_string_equal(sl_buf_str(&got).ptr, "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}");
    sharding_text(m, "n", &got);
    assert_string_equal(sl_buf_str(&got).ptr, "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}");
    sl_buf_fini(&got);
    ir_module_fini(m);
}

/* Sharding groups: exit 3, named. */
static void
test_unsupported(void **state)
{
    Fixture *fx = *state;
    IrModule *m = NULL;
    SlError err = {0};
    memset(&err, 0, sizeof(err));
    const char *t = "HloModule m, " MESH_2X4 "\nENTRY %e {\n  %a = f32[8] parameter(0)\n"
                    "  ROOT %g = () custom-call(%a), custom_call_target=\"xla.sdy.ShardingGroup\", "
                    "custom_call_has_side_effect=true, frontend_attributes={"
                    "xla.sdy.sharding_group_id=\"0\"}\n}\n";
    assert_int_equal(hlo_parse(&fx->arena, &fx->names, sl_str(t), "t.hlo", &m, &err),
                     SL_ERR_UNSUPPORTED);
    assert_int_equal(err.loc.line, 4);
    assert_non_null(strstr(err.msg, "xla.sdy.ShardingGroup (a sharding group)"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_convert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_operand_count_left_to_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meshes_key_only_at_top_level, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sub_axis_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_module_rewrite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_result, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plain_module_unchanged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manual_computation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_manual_computation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsupported, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
