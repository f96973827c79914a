/* test_prop_pipeline.c - what XLA's compile pipeline does around its sharding propagation and
 * shardlens reproduces before prop_run (src/propagate/prop_inline.c, prop_options_from_module):
 * calls inlined first (names kept for a callee called once, copies for one called twice, the
 * callee's root in the call's place, dead callees dropped), and the allow_* options taken from
 * the module header. Small modules written for these tests, exact shardings asserted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hlo/hlo.h"
#include "propagate/prop.h"

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

static void
parse(Fx *fx, const char *text)
{
    SlError err = {0};
    if (hlo_parse(&fx->arena, &fx->names, sl_str(text), "test.hlo", &fx->m, &err) != SL_OK)
        fail_msg("parse: %u:%u: %s", err.loc.line, err.loc.col, err.msg);
}

static void
propagate(Fx *fx, const PropOptions *o)
{
    SlError err = {0};
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

/* The module as text (what partition and propagate print). */
static const char *
text_of(Fx *fx)
{
    sl_buf_clear(&fx->buf);
    hlo_print_module(fx->m, &fx->buf);
    return fx->buf.data;
}

#define ASSERT_SH(fx, name, want) assert_string_equal(sharding_of((fx), (name)), (want))

static const char k_once[] =
    "HloModule m\n"
    "f {\n"
    "  a = f32[8,4] parameter(0)\n"
    "  b = f32[8,4] parameter(1)\n"
    "  s = f32[8,4] add(a, b)\n"
    "  ROOT n = f32[8,4] negate(s)\n"
    "}\n"
    "ENTRY e {\n"
    "  p0 = f32[8,4] parameter(0), sharding={devices=[4,1]<=[4]}\n"
    "  p1 = f32[8,4] parameter(1), sharding={replicated}\n"
    "  c = f32[8,4] call(p0, p1), to_apply=f\n"
    "  ROOT r = f32[8,4] exponential(c)\n"
    "}\n";

/* A callee called once: its instructions move into the caller with their names, parameters
 * become the call's operands, the call's user takes the callee's root, the callee is gone. */
static void
test_inline_once_keeps_names(void **state)
{
    Fx *fx = *state;
    parse(fx, k_once);
    assert_int_equal(prop_inline_calls(fx->m), 1);
    assert_int_equal(fx->m->n_comps, 1);
    assert_ptr_equal(fx->m->comps[0], fx->m->entry);
    IrComputation *e = fx->m->entry;
    assert_int_equal(e->n_instrs, 5); /* p0 p1 s n r */
    assert_string_equal(sl_sym_cstr(e->instrs[2]->name), "s");
    assert_string_equal(sl_sym_cstr(e->instrs[3]->name), "n");
    IrInstr *s = find(fx, "s"), *n = find(fx, "n"), *r = find(fx, "r");
    assert_ptr_equal(s->parent, e);
    assert_ptr_equal(s->operands[0], find(fx, "p0"));
    assert_ptr_equal(s->operands[1], find(fx, "p1"));
    assert_ptr_equal(r->operands[0], n);
    assert_null(find(fx, "c"));
    assert_null(strstr(text_of(fx), "call("));
}

/* After inlining, propagation goes straight through the former callee. */
static void
test_inline_then_propagate(void **state)
{
    Fx *fx = *state;
    parse(fx, k_once);
    prop_inline_calls(fx->m);
    PropOptions o;
    prop_options_init(&o);
    o.is_spmd = true;
    propagate(fx, &o);
    ASSERT_SH(fx, "s", "{devices=[4,1]<=[4]}");
    ASSERT_SH(fx, "n", "{devices=[4,1]<=[4]}");
    ASSERT_SH(fx, "r", "none"); /* the root: allow_spmd_sharding_propagation_to_output=false */
}

/* A callee called twice: each site gets its own copy with fresh names; nested calls are
 * inlined first; a call that is the root leaves the callee's root as the root. */
static void
test_inline_twice_and_nested(void **state)
{
    Fx *fx = *state;
    parse(fx, "HloModule m\n"
              "g {\n"
              "  x = f32[4] parameter(0)\n"
              "  ROOT y = f32[4] negate(x)\n"
              "}\n"
              "f {\n"
              "  a = f32[4] parameter(0)\n"
              "  ROOT k = f32[4] call(a), to_apply=g\n"
              "}\n"
              "ENTRY e {\n"
              "  p = f32[4] parameter(0)\n"
              "  c1 = f32[4] call(p), to_apply=f\n"
              "  ROOT c2 = f32[4] call(c1), to_apply=f\n"
              "}\n");
    assert_int_equal(prop_inline_calls(fx->m), 3); /* k into f, then f at c1 and at c2 */
    assert_int_equal(fx->m->n_comps, 1);
    IrComputation *e = fx->m->entry;
    assert_int_equal(e->n_instrs, 3);
    IrInstr *first = e->instrs[1], *second = e->instrs[2];
    assert_int_equal(first->op, IR_OP_NEGATE);
    assert_int_equal(second->op, IR_OP_NEGATE);
    assert_ptr_equal(first->operands[0], e->instrs[0]);
    assert_ptr_equal(second->operands[0], first);
    assert_ptr_equal(e->root, second);
    assert_string_not_equal(sl_sym_cstr(first->name), sl_sym_cstr(second->name));
    assert_string_not_equal(sl_sym_cstr(first->name), "y");
}

/* A computation also used by a reduce stays; the call into it is inlined as a copy. */
static void
test_inline_keeps_other_uses(void **state)
{
    Fx *fx = *state;
    parse(fx, "HloModule m\n"
              "sum {\n"
              "  x = f32[] parameter(0)\n"
              "  y = f32[] parameter(1)\n"
              "  ROOT z = f32[] add(x, y)\n"
              "}\n"
              "ENTRY e {\n"
              "  p = f32[8] parameter(0)\n"
              "  q = f32[] parameter(1)\n"
              "  zero = f32[] constant(0)\n"
              "  red = f32[] reduce(p, zero), dimensions={0}, to_apply=sum\n"
              "  ROOT c = f32[] call(red, q), to_apply=sum\n"
              "}\n");
    assert_int_equal(prop_inline_calls(fx->m), 1);
    assert_int_equal(fx->m->n_comps, 2);
    IrComputation *e = fx->m->entry;
    assert_int_equal(e->root->op, IR_OP_ADD);
    assert_ptr_equal(e->root->operands[0], find(fx, "red"));
    assert_ptr_equal(e->root->operands[1], find(fx, "q"));
    assert_non_null(find(fx, "z")); /* the reduce's own computation is untouched */
}

static const char *
op_name_of(Fx *fx, const char *name)
{
    static char buf[256];
    const IrMetadata *md = ir_instr_metadata(find(fx, name));
    if (!md)
        return "(no metadata)";
    snprintf(buf, sizeof(buf), "%.*s", (int)md->op_name.len, md->op_name.ptr);
    return buf;
}

/* Inlined instructions get the call's op_name in front (XLA's CallInliner), also those of a
 * while body they call; a reduce's to_apply and the caller's own instructions keep theirs;
 * the printed metadata says the same, other fields kept. */
static void
test_inline_prefixes_op_names(void **state)
{
    Fx *fx = *state;
    parse(fx, "HloModule m\n"
              "sum {\n"
              "  x = f32[] parameter(0)\n"
              "  y = f32[] parameter(1)\n"
              "  ROOT z = f32[] add(x, y), metadata={op_name=\"reduce_sum\"}\n"
              "}\n"
              "cond {\n"
              "  t = (s32[], f32[8]) parameter(0)\n"
              "  i = s32[] get-tuple-element(t), index=0\n"
              "  k = s32[] constant(4)\n"
              "  ROOT lt = pred[] compare(i, k), direction=LT, metadata={op_name=\"lt\"}\n"
              "}\n"
              "body {\n"
              "  t = (s32[], f32[8]) parameter(0)\n"
              "  i = s32[] get-tuple-element(t), index=0\n"
              "  v = f32[8] get-tuple-element(t), index=1\n"
              "  w = f32[8] negate(v), metadata={op_type=\"neg\" op_name=\"neg\" "
              "source_file=\"a.py\" source_line=7}\n"
              "  ROOT r = (s32[], f32[8]) tuple(i, w)\n"
              "}\n"
              "f {\n"
              "  a = f32[8] parameter(0)\n"
              "  zero = f32[] constant(0)\n"
              "  red = f32[] reduce(a, zero), dimensions={0}, to_apply=sum, "
              "metadata={op_name=\"reduce_sum\"}\n"
              "  c0 = s32[] constant(0)\n"
              "  t0 = (s32[], f32[8]) tuple(c0, a)\n"
              "  wh = (s32[], f32[8]) while(t0), condition=cond, body=body, "
              "metadata={op_name=\"while\"}\n"
              "  ROOT out = f32[8] get-tuple-element(wh), index=1\n"
              "}\n"
              "ENTRY e {\n"
              "  p = f32[8] parameter(0), metadata={op_name=\"p\"}\n"
              "  ROOT c = f32[8] call(p), to_apply=f, metadata={op_name=\"jit(g)/closed_call\"}\n"
              "}\n");
    assert_int_equal(prop_inline_calls(fx->m), 1);
    assert_string_equal(op_name_of(fx, "red"), "jit(g)/closed_call/reduce_sum");
    assert_string_equal(op_name_of(fx, "wh"), "jit(g)/closed_call/while");
    assert_string_equal(op_name_of(fx, "zero"), "jit(g)/closed_call"); /* had none */
    assert_string_equal(op_name_of(fx, "w"), "jit(g)/closed_call/neg");
    assert_string_equal(op_name_of(fx, "lt"), "jit(g)/closed_call/lt");
    assert_string_equal(op_name_of(fx, "z"), "reduce_sum"); /* embedded: left alone */
    assert_string_equal(op_name_of(fx, "p"), "p");
    const IrMetadata *md = ir_instr_metadata(find(fx, "w"));
    assert_int_equal(md->source_line, 7);
    assert_int_equal(md->source_file.len, 4);
    assert_memory_equal(md->source_file.ptr, "a.py", 4);
    assert_memory_equal(md->op_type.ptr, "neg", 3);
    const char *text = text_of(fx);
    assert_non_null(strstr(text, "metadata={op_type=\"neg\" op_name=\"jit(g)/closed_call/neg\" "
                                 "source_file=\"a.py\" source_line=7}"));
    assert_non_null(strstr(text, "metadata={op_name=\"jit(g)/closed_call\"}"));
}

/* A call without op_name changes no op_name; a Sharding call made a copy keeps its metadata. */
static void
test_inline_no_prefix_and_sharding_copy(void **state)
{
    Fx *fx = *state;
    parse(fx, "HloModule m\n"
              "f {\n"
              "  a = f32[8] parameter(0)\n"
              "  ROOT s = f32[8] custom-call(a), custom_call_target=\"Sharding\", "
              "sharding={devices=[2]<=[2]}, metadata={op_name=\"sharding_constraint\"}\n"
              "}\n"
              "ENTRY e {\n"
              "  p = f32[8] parameter(0)\n"
              "  ROOT c = f32[8] call(p), to_apply=f\n"
              "}\n");
    assert_int_equal(prop_inline_calls(fx->m), 1);
    assert_string_equal(op_name_of(fx, "s"), "sharding_constraint");
    PropOptions o;
    prop_options_init(&o);
    o.is_spmd = true;
    propagate(fx, &o);
    IrInstr *root = fx->m->entry->root;
    while (root->op != IR_OP_COPY && root->n_operands)
        root = root->operands[0];
    assert_int_equal(root->op, IR_OP_COPY);
    const IrMetadata *md = ir_instr_metadata(root);
    assert_non_null(md);
    assert_int_equal(md->op_name.len, strlen("sharding_constraint"));
    assert_memory_equal(md->op_name.ptr, "sharding_constraint", md->op_name.len);
}

/* After inlining, a module from Shardy's round-trip form reads tuple elements directly (as
 * XLA's spmd input after its StableHLO round trip); a plain module keeps the
 * get-tuple-element (as GSPMD's pipeline does). */
static void
test_inline_forwards_tuples_for_shardy(void **state)
{
    Fx *fx = *state;
    const char *body = "f {\n"
                       "  a = f32[8] parameter(0)\n"
                       "  n = f32[8] negate(a)\n"
                       "  i = s32[8] parameter(1)\n"
                       "  ROOT t = (f32[8], s32[8]) tuple(n, i)\n"
                       "}\n"
                       "ENTRY e {\n"
                       "  p = f32[8] parameter(0)\n"
                       "  q = s32[8] parameter(1)\n"
                       "  c = (f32[8], s32[8]) call(p, q), to_apply=f\n"
                       "  g = s32[8] get-tuple-element(c), index=1\n"
                       "  ROOT u = s32[8] add(g, g)\n"
                       "}\n";
    char text[1024];
    snprintf(text, sizeof(text),
             "HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=2]>}}\n%s",
             body);
    parse(fx, text);
    assert_true(fx->m->sdy_round_trip);
    assert_int_equal(prop_inline_calls(fx->m), 1);
    IrInstr *u = find(fx, "u");
    assert_ptr_equal(u->operands[0], find(fx, "q"));
    assert_ptr_equal(u->operands[1], find(fx, "q"));
    ir_module_fini(fx->m);
    fx->m = NULL;
    snprintf(text, sizeof(text), "HloModule m\n%s", body);
    parse(fx, text);
    assert_false(fx->m->sdy_round_trip);
    assert_int_equal(prop_inline_calls(fx->m), 1);
    u = find(fx, "u");
    assert_int_equal(u->operands[0]->op, IR_OP_GET_TUPLE_ELEMENT);
    assert_int_equal(u->operands[0]->operands[0]->op, IR_OP_TUPLE);
}

/* Shardy's round trip: a loop-invariant while state element read in the loop whose value has
 * a sharding reaches the while through a copy with the value's metadata (the captured value's
 * open constraint); one that changes, one not read, one without sharding and a scalar do
 * not; a plain module gets no copy. */
#define FV_MODULE(HEADER, SX, SW, SU, SK)                                                  \
    HEADER "\n"                                                                            \
           "cond {\n"                                                                      \
           "  t = (s32[], f32[8], f32[8], f32[8], f32[8], s32[]) parameter(0)\n"           \
           "  i = s32[] get-tuple-element(t), index=0\n"                                   \
           "  k = s32[] get-tuple-element(t), index=5\n"                                   \
           "  ROOT lt = pred[] compare(i, k), direction=LT\n"                              \
           "}\n"                                                                           \
           "body {\n"                                                                      \
           "  t = (s32[], f32[8], f32[8], f32[8], f32[8], s32[]) parameter(0)\n"           \
           "  i = s32[] get-tuple-element(t), index=0\n"                                   \
           "  x = f32[8] get-tuple-element(t), index=1\n"                                  \
           "  w = f32[8] get-tuple-element(t), index=2\n"                                  \
           "  u = f32[8] get-tuple-element(t), index=3\n"                                  \
           "  v = f32[8] get-tuple-element(t), index=4\n"                                  \
           "  k = s32[] get-tuple-element(t), index=5\n"                                   \
           "  one = s32[] constant(1)\n"                                                   \
           "  i1 = s32[] add(i, one)\n"                                                    \
           "  xw = f32[8] multiply(x, w)\n"                                                \
           "  xv = f32[8] add(xw, v)\n"                                                    \
           "  ROOT r = (s32[], f32[8], f32[8], f32[8], f32[8], s32[]) tuple(i1, xv, w, u, v, " \
           "k)\n"                                                                          \
           "}\n"                                                                           \
           "ENTRY e {\n"                                                                   \
           "  c0 = s32[] constant(0)\n"                                                    \
           "  px = f32[8] parameter(0)" SX "\n"                                            \
           "  pw = f32[8] parameter(1)" SW ", metadata={op_name=\"w\"}\n"                  \
           "  pu = f32[8] parameter(2)" SU "\n"                                            \
           "  pv = f32[8] parameter(3)\n"                                                  \
           "  pk = s32[] parameter(4)" SK "\n"                                             \
           "  t0 = (s32[], f32[8], f32[8], f32[8], f32[8], s32[]) tuple(c0, px, pw, pu, pv, " \
           "pk)\n"                                                                         \
           "  wh = (s32[], f32[8], f32[8], f32[8], f32[8], s32[]) while(t0), condition=cond, " \
           "body=body\n"                                                                   \
           "  ROOT out = f32[8] get-tuple-element(wh), index=1\n"                          \
           "}\n"
#define FV_SH ", frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"x\\\"}]>\"}"
#define FV_SH0 ", frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, []>\"}"

static void
test_shardy_while_free_var_copies(void **state)
{
    Fx *fx = *state;
    parse(fx, FV_MODULE("HloModule m, frontend_attributes={xla.sdy.meshes={mesh = "
                        "#sdy.mesh<[\"x\"=2]>}}",
                        FV_SH, FV_SH, FV_SH, FV_SH0));
    assert_true(fx->m->sdy_round_trip);
    prop_inline_calls(fx->m);
    IrInstr *t0 = find(fx, "t0");
    assert_ptr_equal(t0->operands[1], find(fx, "px")); /* changes in the loop */
    assert_int_equal(t0->operands[2]->op, IR_OP_COPY);  /* invariant, read, sharded */
    assert_ptr_equal(t0->operands[2]->operands[0], find(fx, "pw"));
    assert_string_equal(op_name_of(fx, sl_sym_cstr(t0->operands[2]->name)), "w");
    assert_null(ir_instr_sharding(t0->operands[2]));
    assert_ptr_equal(t0->operands[3], find(fx, "pu")); /* invariant, never read */
    assert_ptr_equal(t0->operands[4], find(fx, "pv")); /* read, no sharding */
    assert_ptr_equal(t0->operands[5], find(fx, "pk")); /* scalar */
    IrComputation *e = fx->m->entry;
    uint32_t at_copy = 0, at_t0 = 0;
    for (uint32_t k = 0; k < e->n_instrs; k++) {
        if (e->instrs[k] == t0->operands[2])
            at_copy = k + 1;
        if (e->instrs[k] == t0)
            at_t0 = k + 1;
    }
    assert_true(at_copy && at_copy < at_t0);
    ir_module_fini(fx->m);
    fx->m = NULL;
    parse(fx, FV_MODULE("HloModule m", "", ", sharding={devices=[2]<=[2]}", "", ""));
    prop_inline_calls(fx->m);
    assert_ptr_equal(find(fx, "t0")->operands[2], find(fx, "pw"));
}

/* The header's allow_* lists become the options, however long (XLA's module config). */
static void
test_options_from_header(void **state)
{
    Fx *fx = *state;
    char text[4096];
    char list[1024] = "";
    for (int k = 0; k < 100; k++)
        strcat(list, k == 99 ? "true" : "false,");
    snprintf(text, sizeof(text),
             "HloModule m, allow_spmd_sharding_propagation_to_output={true}, "
             "allow_spmd_sharding_propagation_to_parameters={%s}\n"
             "ENTRY e {\n"
             "  p0 = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}\n"
             "  ROOT n = f32[8,4] negate(p0)\n"
             "}\n",
             list);
    parse(fx, text);
    PropOptions o;
    prop_options_init(&o);
    o.is_spmd = true;
    SlError err = {0};
    assert_int_equal(prop_options_from_module(&o, fx->m, &err), SL_OK);
    assert_int_equal(o.n_allow_output, 1);
    assert_true(o.allow_output[0]);
    assert_int_equal(o.n_allow_params, 100);
    assert_false(o.allow_params[0]);
    assert_true(o.allow_params[99]);
    /* with the output allowed, the root takes the parameter's sharding */
    o.n_allow_params = 1;
    o.allow_params[0] = false;
    propagate(fx, &o);
    ASSERT_SH(fx, "n", "{devices=[2,1]<=[2]}");
}

static void
test_options_from_header_bad(void **state)
{
    Fx *fx = *state;
    parse(fx, "HloModule m, allow_spmd_sharding_propagation_to_output={yes}\n"
              "ENTRY e {\n"
              "  ROOT p0 = f32[8] parameter(0)\n"
              "}\n");
    PropOptions o;
    prop_options_init(&o);
    SlError err = {0};
    assert_int_equal(prop_options_from_module(&o, fx->m, &err), SL_ERR_INVALID);
    assert_non_null(strstr(err.msg, "allow_spmd_sharding_propagation_to_output"));
    /* no header: the options stay as they were */
    Fx *fx2 = fx;
    ir_module_fini(fx2->m);
    fx2->m = NULL;
    parse(fx, "HloModule m\nENTRY e {\n  ROOT p0 = f32[8] parameter(0)\n}\n");
    prop_options_init(&o);
    assert_int_equal(prop_options_from_module(&o, fx->m, &err), SL_OK);
    assert_int_equal(o.n_allow_output, 1);
    assert_false(o.allow_output[0]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_inline_once_keeps_names, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_inline_then_propagate, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_inline_twice_and_nested, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_inline_keeps_other_uses, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_inline_prefixes_op_names, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_inline_no_prefix_and_sharding_copy, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_inline_forwards_tuples_for_shardy, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_shardy_while_free_var_copies, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_options_from_header, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_options_from_header_bad, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
