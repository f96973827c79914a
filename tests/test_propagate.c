/* test_propagate.c - sharding propagation (src/propagate): per-op rules with exact sharding text,
 * partial-replication merging, the fixed point over forward and backward sweeps, the pass's
 * module edits (Sharding ops, shard barriers), metadata, and one origin chain hop by hop. The
 * modules are small ones written for these tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hlo/hlo.h"
#include "propagate/prop.h"
#include "spmd/spmd.h"
#include "trace_fixture.h"

typedef struct Fx {
    SlArena arena;
    SlInterner names;
    IrModule *m;
    PropResult r;
    SlBuf buf;
} Fx;

static int
fx_setup(void **state)
{
    Fx *fx = test_calloc(1, sizeof(*fx));
    if (!fx)
        return -1;
    sl_arena_init(&fx->arena);
    sl_interner_init(&fx->names, &fx->arena);
    sl_buf_init(&fx->buf);
    *state = fx;
    return 0;
}

static int
fx_teardown(void **state)
{
    Fx *fx = *state;
    if (fx->m)
        ir_module_fini(fx->m);
    sl_buf_fini(&fx->buf);
    sl_interner_fini(&fx->names);
    sl_arena_fini(&fx->arena);
    test_free(fx);
    return 0;
}

/* Parses `text` and runs the pass with `o` (NULL: is_spmd, everything else XLA's default). */
static void
run(Fx *fx, const char *text, const PropOptions *o)
{
    SlError err = {0};
    PropOptions def;
    if (!o) {
        prop_options_init(&def);
        def.is_spmd = true;
        o = &def;
    }
    if (hlo_parse(&fx->arena, &fx->names, sl_str(text), "test.hlo", &fx->m, &err) != SL_OK)
        fail_msg("parse: %u:%u: %s", err.loc.line, err.loc.col, err.msg);
    if (prop_run(fx->m, o, &fx->arena, &fx->r, &err) != SL_OK)
        fail_msg("propagate: %s", err.msg);
}

static IrInstr *
find(Fx *fx, const char *name)
{
    for (uint32_t c = 0; c < fx->m->n_comps; c++)
        for (uint32_t k = 0; k < fx->m->comps[c]->n_instrs; k++) {
            IrInstr *i = fx->m->comps[c]->instrs[k];
            if (!strcmp(sl_sym_cstr(i->name), name))
                return i;
        }
    return NULL;
}

static const char *
sharding_of(Fx *fx, const char *name)
{
    IrInstr *i = find(fx, name);
    if (!i)
        fail_msg("no instruction %s", name);
    sl_buf_clear(&fx->buf);
    const ShdSharding *s = ir_instr_sharding(i);
    if (!s)
        return "none";
    shd_print(s, &fx->buf);
    return fx->buf.data;
}

#define ASSERT_SH(fx, name, want) assert_string_equal(sharding_of((fx), (name)), (want))

/* ---- per-op rules ---- */

static void
test_elementwise_forward(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p0 = f32[8,4] parameter(0), sharding={devices=[2,2]0,1,2,3}\n"
        "  p1 = f32[8,4] parameter(1)\n"
        "  a = f32[8,4] add(p0, p1)\n"
        "  n = f32[8,4] negate(a)\n"
        "  ROOT r = f32[8,4] copy(n)\n"
        "}\n",
        NULL);
    ASSERT_SH(fx, "a", "{devices=[2,2]0,1,2,3}");
    ASSERT_SH(fx, "n", "{devices=[2,2]0,1,2,3}");
    /* The output and the unannotated parameter stay as they are (allow_* default false). */
    ASSERT_SH(fx, "r", "none");
    ASSERT_SH(fx, "p1", "none");
    assert_int_equal(fx->r.n_propagated, 2);
}

static void
test_backward_from_user(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p0 = f32[8,4] parameter(0)\n"
        "  n = f32[8,4] negate(p0)\n"
        "  c = f32[8,4] copy(n), sharding={devices=[4,1]0,1,2,3}\n"
        "  ROOT r = f32[8,4] abs(c)\n"
        "}\n",
        NULL);
    ASSERT_SH(fx, "n", "{devices=[4,1]0,1,2,3}");
    ASSERT_SH(fx, "p0", "none");
}

static void
test_transpose_reshape_reverse(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p0 = f32[8,4] parameter(0), sharding={devices=[4,1]0,1,2,3}\n"
        "  t = f32[4,8] transpose(p0), dimensions={1,0}\n"
        "  rs = f32[32] reshape(p0)\n"
        "  rv = f32[8,4] reverse(p0), dimensions={0}\n"
        "  ROOT r = (f32[4,8], f32[32], f32[8,4]) tuple(t, rs, rv)\n"
        "}\n",
        NULL);
    ASSERT_SH(fx, "t", "{devices=[1,4]0,1,2,3}");
    ASSERT_SH(fx, "rs", "{devices=[4]0,1,2,3}");
    ASSERT_SH(fx, "rv", "{devices=[4,1]3,2,1,0}");
}

static void
test_broadcast_backward_partial(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p0 = f32[4] parameter(0)\n"
        "  c = f32[4] copy(p0)\n"
        "  b = f32[8,4] broadcast(c), dimensions={1}\n"
        "  ROOT r = f32[8,4] copy(b), sharding={devices=[2,2]0,1,2,3}\n"
        "}\n",
        NULL);
    /* Broadcast goes backward from level 2 only; its new dim 0 becomes replication. */
    ASSERT_SH(fx, "b", "{devices=[2,2]0,1,2,3}");
    ASSERT_SH(fx, "c", "{devices=[2,2]0,2,1,3 last_tile_dim_replicate}");
}

static void
test_dot_and_reduce(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n"
        "add {\n"
        "  x = f32[] parameter(0)\n"
        "  y = f32[] parameter(1)\n"
        "  ROOT s = f32[] add(x, y)\n"
        "}\n"
        "ENTRY e {\n"
        "  l = f32[8,16] parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}\n"
        "  w = f32[16,4] parameter(1), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}\n"
        "  d = f32[8,4] dot(l, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  z = f32[] constant(0)\n"
        "  red = f32[8] reduce(d, z), dimensions={1}, to_apply=add\n"
        "  ROOT r = f32[8] copy(red)\n"
        "}\n",
        NULL);
    /* Each operand gives one output dim; at level 1 the two partial shardings merge. */
    ASSERT_SH(fx, "d", "{devices=[2,2]0,1,2,3}");
    /* Reducing the sharded dim 1 replicates it. */
    ASSERT_SH(fx, "red", "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}");
}

static void
test_merge_needs_spmd(void **state)
{
    Fx *fx = *state;
    static const char *const k_mod =
        "HloModule m\n"
        "ENTRY e {\n"
        "  a = f32[8,4] parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}\n"
        "  b = f32[8,4] parameter(1), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}\n"
        "  s = f32[8,4] add(a, b)\n"
        "  ROOT r = f32[8,4] copy(s)\n"
        "}\n";
    run(fx, k_mod, NULL);
    ASSERT_SH(fx, "s", "{devices=[2,2]0,1,2,3}");
    ir_module_fini(fx->m);
    fx->m = NULL;
    /* Without SPMD partial shardings never combine: the first operand's stays. */
    PropOptions o;
    prop_options_init(&o);
    run(fx, k_mod, &o);
    ASSERT_SH(fx, "s", "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
}

static void
test_fixed_point_needs_both_sweeps(void **state)
{
    Fx *fx = *state;
    /* x learns its sharding backward from y's annotated user; w (another user of x) can only
     * get it forward afterwards, in a later sweep. */
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p0 = f32[16] parameter(0)\n"
        "  w0 = f32[16] abs(p0)\n"
        "  x = f32[16] negate(p0)\n"
        "  w = f32[16] abs(x)\n"
        "  y = f32[16] exponential(x)\n"
        "  c = f32[16] copy(y), sharding={devices=[4]0,1,2,3}\n"
        "  ROOT r = (f32[16], f32[16], f32[16]) tuple(w0, w, c)\n"
        "}\n",
        NULL);
    ASSERT_SH(fx, "y", "{devices=[4]0,1,2,3}");
    ASSERT_SH(fx, "x", "{devices=[4]0,1,2,3}");
    ASSERT_SH(fx, "w", "{devices=[4]0,1,2,3}");
    ASSERT_SH(fx, "w0", "none");
    assert_true(fx->r.iterations >= 2);
    const PropOrigin *ow = fx->r.final_origin[find(fx, "w")->id];
    const PropOrigin *ox = fx->r.final_origin[find(fx, "x")->id];
    assert_non_null(ow);
    assert_non_null(ox);
    assert_int_equal(ox->dir, PROP_DIR_BACKWARD);
    assert_int_equal(ow->dir, PROP_DIR_FORWARD);
    assert_true(ow->seq > ox->seq);
}

/* ---- module edits ---- */

static void
test_sharding_op_becomes_copy(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p0 = f32[8] parameter(0)\n"
        "  a = f32[8] negate(p0)\n"
        "  s = f32[8] custom-call(a), custom_call_target=\"Sharding\", sharding={devices=[2]0,1}\n"
        "  ROOT r = f32[8] copy(s)\n"
        "}\n",
        NULL);
    assert_null(find(fx, "s"));
    IrInstr *r = find(fx, "r");
    assert_int_equal(r->operands[0]->op, IR_OP_COPY);
    assert_string_equal(sl_sym_cstr(r->operands[0]->name), "copy");
    ASSERT_SH(fx, "copy", "{devices=[2]0,1}");
    /* The annotation also goes to the unannotated operand. */
    ASSERT_SH(fx, "a", "{devices=[2]0,1}");
}

static void
test_shard_barrier_blocks_forward(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p0 = f32[8] parameter(0), sharding={devices=[2]0,1}\n"
        "  b = f32[8] custom-call(p0), custom_call_target=\"ShardBarrierFrom\", "
        "custom_call_has_side_effect=true\n"
        "  n = f32[8] negate(b)\n"
        "  ROOT r = f32[8] copy(n)\n"
        "}\n",
        NULL);
    assert_null(find(fx, "b"));
    ASSERT_SH(fx, "n", "none");
    assert_ptr_equal(find(fx, "n")->operands[0], find(fx, "p0"));
}

static void
test_metadata_assigned_and_carried(void **state)
{
    Fx *fx = *state;
    PropOptions o;
    prop_options_init(&o);
    o.is_spmd = true;
    o.propagate_metadata = true;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p0 = f32[8] parameter(0), sharding={devices=[2]0,1}, metadata={op_name=\"x\"}\n"
        "  n = f32[8] negate(p0), metadata={op_name=\"neg\"}\n"
        "  ROOT r = f32[8] copy(n)\n"
        "}\n",
        &o);
    ASSERT_SH(fx, "p0", "{devices=[2]0,1 metadata={op_name=\"x\"}}");
    ASSERT_SH(fx, "n", "{devices=[2]0,1 metadata={op_name=\"x\"}}");
}

static void
test_not_evenly_partitioned_output_replicated(void **state)
{
    Fx *fx = *state;
    PropOptions o;
    prop_options_init(&o);
    o.is_spmd = true;
    o.allow_output[0] = true;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p0 = f32[8] parameter(0), sharding={devices=[4]0,1,2,3}\n"
        "  ROOT s = f32[6] slice(p0), slice={[0:6]}\n"
        "}\n",
        &o);
    ASSERT_SH(fx, "s", "{replicated}");
}

static void
test_gather_index_passthrough(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  op = f32[10,9] parameter(0), sharding={replicated}\n"
        "  idx = s32[8,4] parameter(1), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}\n"
        "  g = f32[8,4,9] gather(op, idx), offset_dims={2}, collapsed_slice_dims={0}, "
        "start_index_map={0}, index_vector_dim=2, slice_sizes={1,9}\n"
        "  ROOT r = f32[8,4,9] copy(g)\n"
        "}\n",
        NULL);
    ASSERT_SH(fx, "g", "{devices=[2,1,1,2]0,1,2,3 last_tile_dim_replicate}");
}

static void
test_unspecified_dims_refined(void **state)
{
    Fx *fx = *state;
    /* The annotation fixes dim 0 only; dim 1 may take the operand's tiling at level >= 1. */
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  p = f32[8,4] parameter(0)\n"
        "  c = f32[8,4] copy(p), sharding={devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}\n"
        "  s = f32[8,4] custom-call(c), custom_call_target=\"Sharding\", "
        "backend_config=\"unspecified_dims=[1]\", "
        "sharding={devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}\n"
        "  n = f32[8,4] negate(s)\n"
        "  ROOT r = f32[8,4] copy(n)\n"
        "}\n",
        NULL);
    ASSERT_SH(fx, "n", "{devices=[2,2]0,2,1,3}");
    ASSERT_SH(fx, "c", "{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}");
}

static void
test_gather_parallel_from_iota_constant(void **state)
{
    Fx *fx = *state;
    /* Indices counting 0..3 along the operand's sharded (collapsed) dim make it parallel. */
    static const char *const k_mod =
        "HloModule m\n"
        "ENTRY e {\n"
        "  op = f32[4,9] parameter(0), sharding={devices=[4,1]0,1,2,3}\n"
        "  idx = s32[4,1] constant({ {0}, {1}, {%s}, {%s} })\n"
        "  g = f32[4,9] gather(op, idx), offset_dims={1}, collapsed_slice_dims={0}, "
        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,9}\n"
        "  ROOT r = f32[4,9] copy(g)\n"
        "}\n";
    char text[512];
    snprintf(text, sizeof(text), k_mod, "2", "3");
    run(fx, text, NULL);
    ASSERT_SH(fx, "g", "{devices=[4,1]0,1,2,3}");
    ir_module_fini(fx->m);
    fx->m = NULL;
    snprintf(text, sizeof(text), k_mod, "3", "2"); /* not an iota: nothing to pass on */
    run(fx, text, NULL);
    ASSERT_SH(fx, "g", "none");
}

static void
test_shared_body_flattened(void **state)
{
    Fx *fx = *state;
    /* Two calls of one body with different operand shardings: each gets its own copy. */
    run(fx,
        "HloModule m\n"
        "f {\n"
        "  fp = f32[8] parameter(0)\n"
        "  ROOT fn = f32[8] negate(fp)\n"
        "}\n"
        "ENTRY e {\n"
        "  a = f32[8] parameter(0), sharding={devices=[2]0,1}\n"
        "  b = f32[8] parameter(1), sharding={replicated}\n"
        "  ca = f32[8] call(a), to_apply=f\n"
        "  cb = f32[8] call(b), to_apply=f\n"
        "  ROOT r = (f32[8], f32[8]) tuple(ca, cb)\n"
        "}\n",
        NULL);
    IrInstr *ca = find(fx, "ca"), *cb = find(fx, "cb");
    IrComputation *fa = ir_instr_called(ca, IR_ATTR_TO_APPLY);
    IrComputation *fb = ir_instr_called(cb, IR_ATTR_TO_APPLY);
    assert_ptr_not_equal(fa, fb);
    assert_string_equal(sl_sym_cstr(fb->name), "f.clone");
    assert_non_null(find(fx, "fn.clone"));
    ASSERT_SH(fx, "fn", "{devices=[2]0,1}");
    ASSERT_SH(fx, "ca", "{devices=[2]0,1}");
    ASSERT_SH(fx, "fn.clone", "{replicated}");
    ASSERT_SH(fx, "cb", "{replicated}");
}

/* ---- origins ---- */

static void
test_origin_chain_hop_by_hop(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n"
        "ENTRY e {\n"
        "  x = f32[8] parameter(0), sharding={devices=[4]0,1,2,3}\n"
        "  cv = f16[8] convert(x)\n"
        "  mul = f16[8] multiply(cv, cv)\n"
        "  dot = f16[8] negate(mul)\n"
        "  ROOT r = f16[8] copy(dot)\n"
        "}\n",
        NULL);
    const PropOrigin *o = fx->r.final_origin[find(fx, "dot")->id];
    assert_non_null(o);
    assert_ptr_equal(o->instr, find(fx, "dot"));
    assert_ptr_equal(o->from, find(fx, "mul"));
    assert_int_equal(o->dir, PROP_DIR_FORWARD);
    assert_int_equal(o->level, 0);
    assert_string_equal(o->rule, "elementwise");
    const PropOrigin *o1 = o->prev;
    assert_non_null(o1);
    assert_ptr_equal(o1->instr, find(fx, "mul"));
    assert_ptr_equal(o1->from, find(fx, "cv"));
    const PropOrigin *o2 = o1->prev;
    assert_non_null(o2);
    assert_ptr_equal(o2->instr, find(fx, "cv"));
    assert_ptr_equal(o2->from, find(fx, "x"));
    assert_null(o2->prev); /* x's sharding is the input's own */
    assert_null(fx->r.final_origin[find(fx, "x")->id]);
    SlBuf b;
    sl_buf_init(&b);
    prop_origin_describe(o, &b);
    assert_string_equal(b.data, "%dot got {devices=[4]0,1,2,3} forward from %x (parameter 0, "
                                "annotated) through %cv and %mul at level 0 (rule elementwise)");
    sl_buf_fini(&b);
}

/* The chain through the trace: propagation's origins recorded with a partitioner run, loaded
 * back (sharding_origin), and the first line of explain. */
static void
test_origin_chain_in_trace(void **state)
{
    TraceFx *fx = *state;
    IrModule *m = tfx_parse(fx, "HloModule m, num_partitions=4\n"
                                "ENTRY e {\n"
                                "  x = f32[8] parameter(0), sharding={devices=[4]0,1,2,3}\n"
                                "  cv = f16[8] convert(x)\n"
                                "  mul = f16[8] multiply(cv, cv)\n"
                                "  dot = f16[8] negate(mul)\n"
                                "  ROOT r = f16[8] copy(dot), sharding={devices=[4]0,1,2,3}\n"
                                "}\n");
    PropOptions po;
    prop_options_init(&po);
    po.is_spmd = true;
    PropResult r;
    SlError err = {0};
    assert_int_equal(prop_run(m, &po, &fx->arena, &r, &err), SL_OK);
    SpmdOptions so;
    spmd_options_init(&so);
    so.num_partitions = 4;
    TraceDb *db = NULL;
    TraceSink *sink = NULL;
    TraceRunInfo info = {"test", "2026-01-01T00:00:00Z", sl_str("x"), sl_str(""), 4, NULL, 0};
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    assert_int_equal(trace_db_begin_run(db, m, &info, &sink, &err), SL_OK);
    const IrInstr *path[16];
    for (uint32_t k = 0; k < m->entry->n_instrs; k++) {
        const IrInstr *i = m->entry->instrs[k];
        const PropOrigin *o = r.final_origin[i->id];
        if (!o)
            continue;
        TraceOrigin t = {i, o->sharding, prop_origin_source(o), path,
                         prop_origin_path(o, path, 16), prop_dir_name(o->dir), o->level, o->rule,
                         NULL, NULL};
        sink->ops->origin(sink, &t);
    }
    SlArena out_arena;
    sl_arena_init(&out_arena);
    IrModule *out = NULL;
    assert_int_equal(spmd_partition(m, &so, sink, &out_arena, &out, &err), SL_OK);
    assert_int_equal(trace_db_end_run(db, out, -1, NULL, &err), SL_OK);
    trace_db_close(db);
    ir_module_fini(out);
    sl_arena_fini(&out_arena);

    const TraceRun *run = tfx_load(fx, 0);
    assert_int_equal(run->n_origins, 3); /* cv, mul, dot */
    const TraceRunOrigin *od = NULL;
    for (uint32_t k = 0; k < run->n_origins; k++)
        if (!strcmp(run->instrs[run->origins[k].instr].name, "dot"))
            od = &run->origins[k];
    assert_non_null(od);
    assert_string_equal(od->sharding, "{devices=[4]0,1,2,3}");
    assert_string_equal(run->instrs[od->source].name, "x");
    assert_int_equal(od->n_path, 4);
    static const char *const k_hops[] = {"x", "cv", "mul", "dot"};
    for (uint32_t k = 0; k < 4; k++)
        assert_string_equal(run->instrs[od->path[k]].name, k_hops[k]);
    assert_string_equal(od->direction, "forward");
    assert_int_equal(od->level, 0);
    assert_string_equal(od->rule, "elementwise");
    SlBuf b;
    sl_buf_init(&b);
    assert_int_equal(trace_explain(run, "dot", &b, &err), SL_OK);
    const char *want = "origin: %dot got {devices=[4]0,1,2,3} forward from %x (parameter 0, "
                       "annotated) through %cv and %mul at level 0 (rule elementwise)\n";
    assert_true(b.len > strlen(want));
    assert_memory_equal(b.data, want, strlen(want));
    sl_buf_fini(&b);
}

/* A propagated sharding prints where XLA prints it: after the op's own attributes, before
 * metadata, backend_config and the unknown `statistics` (ir_instr_place_sharding, the rule the
 * partitioner's output uses too). */
static void
test_sharding_attribute_placement(void **state)
{
    Fx *fx = *state;
    run(fx,
        "HloModule m\n\nENTRY %e {\n"
        "  %x = f32[8,4] parameter(0), sharding={devices=[4,1]0,1,2,3}\n"
        "  %t = f32[8,4] transpose(%x), dimensions={0,1}, metadata={op_name=\"t\"}, "
        "backend_config=\"cfg\", statistics={visualizing_index=1}\n"
        "  ROOT %c = f32[8,4] copy(%t), metadata={op_name=\"c\"}\n}\n",
        NULL);
    IrInstr *t = find(fx, "t");
    assert_non_null(t);
    sl_buf_clear(&fx->buf);
    hlo_print_instr(t, &fx->buf);
    assert_string_equal(fx->buf.data,
                        "%t = f32[8,4] transpose(%x), dimensions={0,1}, "
                        "sharding={devices=[4,1]0,1,2,3}, metadata={op_name=\"t\"}, "
                        "backend_config=\"cfg\", statistics={visualizing_index=1}");
    /* The rule by itself: the attributes at and after metadata print after sharding. */
    assert_int_equal(t->n_attrs, 5);
    assert_int_equal(t->attrs[1].key, IR_ATTR_SHARDING);
    assert_false(ir_attr_prints_after_sharding(&t->attrs[0]));
    assert_true(ir_attr_prints_after_sharding(&t->attrs[2]));
    assert_true(ir_attr_prints_after_sharding(&t->attrs[3]));
    assert_true(ir_attr_prints_after_sharding(&t->attrs[4]));
    /* Moving a sharding appended last puts it back in front of metadata. */
    IrAttr *a = ir_instr_add_attr(fx->m, find(fx, "x"), IR_ATTR_METADATA);
    assert_non_null(a);
    IrInstr *x = find(fx, "x");
    a->u = x->attrs[0].u; /* any value: only the order is checked */
    a->key = IR_ATTR_SHARDING;
    x->attrs[0].key = IR_ATTR_METADATA;
    IrAttr *placed = ir_instr_place_sharding(x, &x->attrs[x->n_attrs - 1]);
    assert_ptr_equal(placed, &x->attrs[0]);
    assert_int_equal(x->attrs[0].key, IR_ATTR_SHARDING);
    assert_int_equal(x->attrs[1].key, IR_ATTR_METADATA);
}

/* execution_threads: as in XLA, only the computations of the listed threads are processed; the
 * others keep their shardings exactly (here: none, and the Sharding op stays a custom call). */
static const char threads_module[] =
    "HloModule m\n\n"
    "%side (a: f32[8]) -> f32[8] {\n"
    "  %a = f32[8] parameter(0), sharding={devices=[2]0,1}\n"
    "  %n = f32[8] negate(%a)\n"
    "  ROOT %s = f32[8] custom-call(%n), custom_call_target=\"Sharding\", "
    "sharding={devices=[2]0,1}\n"
    "}, execution_thread=\"side\"\n\n"
    "ENTRY %e {\n"
    "  %x = f32[8] parameter(0), sharding={devices=[2]0,1}\n"
    "  %y = f32[8] negate(%x)\n"
    "  ROOT %z = f32[8] copy(%y)\n}\n";

static void
test_execution_threads(void **state)
{
    Fx *fx = *state;
    PropOptions o;
    SlError err = {0};
    prop_options_init(&o);
    o.is_spmd = true;
    assert_int_equal(prop_options_set(&o, "execution_threads", "main", &err), SL_OK);
    run(fx, threads_module, &o);
    ASSERT_SH(fx, "y", "{devices=[2]0,1}");
    ASSERT_SH(fx, "n", "none");
    assert_int_equal(find(fx, "s")->op, IR_OP_CUSTOM_CALL);
    assert_true(prop_options_thread(&o, fx->m->entry));
    ir_module_fini(fx->m);
    fx->m = NULL;
    /* Both threads: the side computation propagates too, and its Sharding op becomes a copy. */
    assert_int_equal(prop_options_set(&o, "execution_threads", "side,main", &err), SL_OK);
    run(fx, threads_module, &o);
    ASSERT_SH(fx, "n", "{devices=[2]0,1}");
    assert_null(find(fx, "s"));
    ir_module_fini(fx->m);
    fx->m = NULL;
    /* Only the side thread: the entry is left alone. */
    assert_int_equal(prop_options_set(&o, "execution_threads", "side", &err), SL_OK);
    run(fx, threads_module, &o);
    ASSERT_SH(fx, "y", "none");
    ASSERT_SH(fx, "n", "{devices=[2]0,1}");
    SlError err2 = {0};
    assert_int_equal(prop_options_set(&o, "execution_threads", "a,", &err2), SL_ERR_INVALID);
}

/* An async call whose computation runs on a thread the pass does not visit: a manual operand
 * makes the start and the done manual as a whole (every leaf, the context too); with that
 * thread visited, nothing is forced onto them. */
static const char async_module[] =
    "HloModule m\n\n"
    "%callee (p: s32[8], q: s32[8]) -> (s32[8], s32[8]) {\n"
    "  %p = s32[8] parameter(0)\n  %q = s32[8] parameter(1)\n"
    "  %a = s32[8] add(%p, %q)\n  %b = s32[8] multiply(%p, %q)\n"
    "  ROOT %t = (s32[8], s32[8]) tuple(%a, %b)\n"
    "}, execution_thread=\"side\"\n\n"
    "ENTRY %e {\n"
    "  %x = s32[8] parameter(0), sharding={manual}\n"
    "  %y = s32[8] parameter(1), sharding={manual}\n"
    "  %s = ((s32[8], s32[8]), (s32[8], s32[8]), u32[]) call-start(%x, %y), "
    "async_execution_thread=\"side\", to_apply=%callee\n"
    "  ROOT %d = (s32[8], s32[8]) call-done(%s)\n}\n";

static void
test_async_foreign_thread_manual(void **state)
{
    Fx *fx = *state;
    PropOptions o;
    SlError err = {0};
    prop_options_init(&o);
    o.is_spmd = true;
    assert_int_equal(prop_options_set(&o, "execution_threads", "main", &err), SL_OK);
    assert_int_equal(
        prop_options_set(&o, "allow_spmd_sharding_propagation_to_output", "true", &err), SL_OK);
    run(fx, async_module, &o);
    ASSERT_SH(fx, "s", "{{manual}, {manual}, {manual}, {manual}, {manual}}");
    ASSERT_SH(fx, "d", "{{manual}, {manual}}");
    ir_module_fini(fx->m);
    fx->m = NULL;
    assert_int_equal(prop_options_set(&o, "execution_threads", "main,side", &err), SL_OK);
    run(fx, async_module, &o);
    ASSERT_SH(fx, "s", "none");
}

static void
test_options_text(void **state)
{
    (void)state;
    PropOptions o;
    SlError err = {0};
    prop_options_init(&o);
    assert_int_equal(prop_options_set(&o, "allow_spmd_sharding_propagation_to_parameters",
                                      "false,true", &err),
                     SL_OK);
    assert_int_equal(o.n_allow_params, 2);
    assert_false(o.allow_params[0]);
    assert_true(o.allow_params[1]);
    assert_int_equal(prop_options_set(&o, "is_spmd", "maybe", &err), SL_ERR_INVALID);
    assert_string_equal(err.msg, "bad value 'maybe' for option is_spmd");
    SlError err2 = {0};
    assert_int_equal(prop_options_set(&o, "no_such", "true", &err2), SL_ERR_INVALID);
    assert_string_equal(err2.msg, "unknown propagation option 'no_such'");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_elementwise_forward, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_backward_from_user, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_transpose_reshape_reverse, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_backward_partial, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_dot_and_reduce, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_merge_needs_spmd, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fixed_point_needs_both_sweeps, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_op_becomes_copy, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_shard_barrier_blocks_forward, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_metadata_assigned_and_carried, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_not_evenly_partitioned_output_replicated, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_gather_index_passthrough, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_unspecified_dims_refined, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_shared_body_flattened, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_gather_parallel_from_iota_constant, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_origin_chain_hop_by_hop, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_origin_chain_in_trace, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_sharding_attribute_placement, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_async_foreign_thread_manual, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_execution_threads, fx_setup, fx_teardown),
        cmocka_unit_test(test_options_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
