/* test_cleanup.c - tuple simplification and CSE (src/ir/cleanup.c), each followed by dead-code
 * removal as the partitioner runs them: a module is parsed, cleaned, printed, and its entry
 * compared line by line with the instructions that must remain. */
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
    IrModule *m;
    SlBuf text;
} Fixture;

static int
fixture_setup(void **state)
{
    Fixture *fx = calloc(1, sizeof(*fx));
    if (!fx)
        return -1;
    sl_arena_init(&fx->arena);
    sl_interner_init(&fx->names, &fx->arena);
    sl_buf_init(&fx->text);
    *state = fx;
    return 0;
}

static int
fixture_teardown(void **state)
{
    Fixture *fx = *state;
    ir_module_fini(fx->m);
    sl_buf_fini(&fx->text);
    sl_interner_fini(&fx->names);
    sl_arena_fini(&fx->arena);
    free(fx);
    return 0;
}

enum { TUPLES = 1, CSE = 2 };

static size_t
fx_count_text(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Parses `hlo`, runs the passes in `passes` (each followed by dead-code removal), checks that
 * `replaced` instructions were replaced in all, and prints the result into fx->text. */
static void
clean(Fixture *fx, const char *hlo, int passes, uint32_t replaced);

/* A sharding on both sides must agree (XLA's ReplaceInstruction preserving shardings): the
 * element whose get-tuple-element is sharded differently stays read through the tuple. */
static void
test_tuple_shardings(void **state)
{
    Fixture *fx = *state;
    SlError err = {0};
    assert_int_equal(
        hlo_parse(&fx->arena, &fx->names,
                  sl_str("HloModule t\nENTRY main {\n"
                         "  a = f32[4] parameter(0), sharding={devices=[2]<=[2]}\n"
                         "  b = f32[4] parameter(1), sharding={replicated}\n"
                         "  t = (f32[4], f32[4]) tuple(a, b)\n"
                         "  ga = f32[4] get-tuple-element(t), index=0, sharding={devices=[2]<=[2]}\n"
                         "  gb = f32[4] get-tuple-element(t), index=1, sharding={devices=[2]<=[2]}\n"
                         "  ROOT r = f32[4] add(ga, gb)\n}\n"),
                  "t.hlo", &fx->m, &err),
        SL_OK);
    assert_int_equal(ir_module_simplify_tuples(fx->m, &fx->arena, shd_equal), 1);
    (void)ir_module_remove_dead(fx->m, &fx->arena, NULL);
    hlo_print_module(fx->m, &fx->text);
    assert_non_null(strstr(fx->text.data, "ROOT %r = f32[4] add(%a, %gb)"));
    assert_non_null(strstr(fx->text.data, "%gb = f32[4] get-tuple-element(%t), index=1"));
}

/* CSE with carried shardings (XLA's sharding-sensitive Identical): here the table is the
 * parsed sharding= attributes by instruction id. Two broadcasts carrying different shardings
 * stay apart; one carrying an equal sharding (another object) merges; one carrying none merges
 * with the first. Without a table everything merges. */
static const char k_carried[] =
    "HloModule t\nENTRY main {\n  c = f32[] constant(0)\n"
    "  b1 = f32[8,4] broadcast(c), dimensions={}, sharding={devices=[1,4]<=[4]}\n"
    "  b2 = f32[8,4] broadcast(c), dimensions={}, sharding={devices=[4,1]<=[4]}\n"
    "  b3 = f32[8,4] broadcast(c), dimensions={}, sharding={devices=[1,4]<=[4]}\n"
    "  n1 = f32[2] broadcast(c), dimensions={}\n"
    "  n2 = f32[2] broadcast(c), dimensions={}, sharding={replicated}\n"
    "  ROOT t = (f32[8,4], f32[8,4], f32[8,4], f32[2], f32[2]) tuple(b1, b2, b3, n1, n2)\n}\n";

static uint32_t
cse_carried(Fixture *fx, bool with_table)
{
    SlError err = {0};
    ir_module_fini(fx->m);
    fx->m = NULL;
    assert_int_equal(hlo_parse(&fx->arena, &fx->names, sl_str(k_carried), "t.hlo", &fx->m, &err),
                     SL_OK);
    size_t n = fx->m->next_instr_id + 1;
    const ShdSharding **tbl = calloc(n, sizeof(*tbl));
    assert_non_null(tbl);
    for (uint32_t k = 0; k < fx->m->entry->n_instrs; k++) {
        const IrInstr *i = fx->m->entry->instrs[k];
        if (i->op == IR_OP_BROADCAST)
            tbl[i->id] = ir_instr_sharding(i);
    }
    uint32_t replaced = ir_module_cse(fx->m, &fx->arena, with_table ? tbl : NULL, n, shd_equal);
    free((void *)tbl);
    (void)ir_module_remove_dead(fx->m, &fx->arena, NULL);
    fx->text.len = 0;
    hlo_print_module(fx->m, &fx->text);
    return replaced;
}

static void
test_cse_carried_shardings(void **state)
{
    Fixture *fx = *state;
    assert_int_equal(cse_carried(fx, true), 2); /* b3 into b1, n2 into n1 */
    assert_int_equal(fx_count_text(fx->text.data, " broadcast("), 3);
    assert_non_null(strstr(fx->text.data, "tuple(%b1, %b2, %b1, %n1, %n1)"));
    assert_int_equal(cse_carried(fx, false), 3); /* b2 too */
    assert_int_equal(fx_count_text(fx->text.data, " broadcast("), 2);
    assert_non_null(strstr(fx->text.data, "tuple(%b1, %b1, %b1, %n1, %n1)"));
}

static void
clean(Fixture *fx, const char *hlo, int passes, uint32_t replaced)
{
    SlError err = {0};
    ir_module_fini(fx->m);
    fx->m = NULL;
    assert_int_equal(hlo_parse(&fx->arena, &fx->names, sl_str(hlo), "t.hlo", &fx->m, &err),
                     SL_OK);
    uint32_t n = 0;
    if (passes & TUPLES) {
        n += ir_module_simplify_tuples(fx->m, &fx->arena, NULL);
        (void)ir_module_remove_dead(fx->m, &fx->arena, NULL);
    }
    if (passes & CSE) {
        n += ir_module_cse(fx->m, &fx->arena, NULL, 0, NULL);
        (void)ir_module_remove_dead(fx->m, &fx->arena, NULL);
    }
    assert_int_equal(n, replaced);
    assert_int_equal(ir_module_check(fx->m, "t.hlo", &err), SL_OK);
    fx->text.len = 0;
    hlo_print_module(fx->m, &fx->text);
}

/* The printed entry computation must be exactly `want` (its instruction lines). */
static void
expect_entry(Fixture *fx, const char *want)
{
    const char *start = strstr(fx->text.data, "ENTRY");
    assert_non_null(start);
    start = strchr(start, '\n') + 1;
    const char *end = strstr(start, "\n}\n");
    assert_non_null(end);
    size_t len = (size_t)(end - start) + 1;
    if (len != strlen(want) || memcmp(start, want, len) != 0) {
        fprintf(stderr, "got:\n%.*s", (int)len, start); /* fail_msg truncates long text */
        fail_msg("entry differs; want:\n%s", want);
    }
}

/* get-tuple-element of a tuple is the tuple's operand; the chain through a nested tuple
 * collapses step by step; the tuples themselves go dead. */
static void
test_gte_of_tuple(void **state)
{
    Fixture *fx = *state;
    clean(fx,
          "HloModule t\nENTRY main {\n  a = f32[2] parameter(0)\n  b = s32[] parameter(1)\n"
          "  in = (s32[], f32[2]) tuple(b, a)\n  t = (f32[2], (s32[], f32[2])) tuple(a, in)\n"
          "  g0 = f32[2] get-tuple-element(t), index=0\n"
          "  g1 = (s32[], f32[2]) get-tuple-element(t), index=1\n"
          "  g10 = f32[2] get-tuple-element(g1), index=1\n"
          "  ROOT r = f32[2] add(g0, g10)\n}\n",
          TUPLES, 3);
    expect_entry(fx, "  %a = f32[2] parameter(0)\n  %b = s32[] parameter(1)\n"
                     "  ROOT %r = f32[2] add(%a, %a)\n");
}

/* tuple(gte(x,0), ..., gte(x,n-1)) is x, also as a root (which becomes the parameter). Not
 * replaced: elements out of order, a part of x only, elements of two different tuples. */
static void
test_whole_tuple(void **state)
{
    Fixture *fx = *state;
    clean(fx,
          "HloModule t\nENTRY main {\n  p = (f32[2], s32[]) parameter(0)\n"
          "  g0 = f32[2] get-tuple-element(p), index=0\n  g1 = s32[] get-tuple-element(p), index=1\n"
          "  ROOT same = (f32[2], s32[]) tuple(g0, g1)\n}\n",
          TUPLES, 1);
    expect_entry(fx, "  ROOT %p = (f32[2], s32[]) parameter(0)\n");
    clean(fx,
          "HloModule t\nENTRY main {\n  p = (f32[2], f32[2], s32[]) parameter(0)\n"
          "  q = (f32[2], f32[2]) parameter(1)\n"
          "  g0 = f32[2] get-tuple-element(p), index=0\n  g1 = f32[2] get-tuple-element(p), index=1\n"
          "  q1 = f32[2] get-tuple-element(q), index=1\n"
          "  swapped = (f32[2], f32[2]) tuple(g1, g0)\n  part = (f32[2], f32[2]) tuple(g0, g1)\n"
          "  mixed = (f32[2], f32[2]) tuple(g0, q1)\n"
          "  ROOT r = ((f32[2], f32[2]), (f32[2], f32[2]), (f32[2], f32[2])) "
          "tuple(swapped, part, mixed)\n}\n",
          TUPLES, 0);
    assert_non_null(strstr(fx->text.data, "%swapped = (f32[2], f32[2]) tuple(%g1, %g0)"));
    assert_non_null(strstr(fx->text.data, "%part = (f32[2], f32[2]) tuple(%g0, %g1)"));
    assert_non_null(strstr(fx->text.data, "%mixed = (f32[2], f32[2]) tuple(%g0, %q1)"));
}

/* Identical instructions merge into the first; add's operands in either order; constants by
 * value (layouts aside); converts of equal iotas are equal; the root's operands follow. */
static void
test_cse_merges(void **state)
{
    Fixture *fx = *state;
    clean(fx,
          "HloModule t\nENTRY main {\n  p = f32[4] parameter(0)\n  q = f32[4] parameter(1)\n"
          "  c1 = f32[] constant(2)\n  c2 = f32[] constant(2)\n"
          "  b1 = f32[4] broadcast(c1), dimensions={}\n"
          "  b2 = f32[4]{0} broadcast(c2), dimensions={}, metadata={op_name=\"x\"}\n"
          "  i1 = s32[4] iota(), iota_dimension=0\n  i2 = s32[4] iota(), iota_dimension=0\n"
          "  f1 = f32[4] convert(i1)\n  f2 = f32[4] convert(i2)\n"
          "  x = f32[4] add(p, b1)\n  y = f32[4] add(b2, p)\n"
          "  s = f32[4] multiply(x, f1)\n  t = f32[4] multiply(f2, y)\n"
          "  ROOT u = f32[4] add(t, s)\n}\n",
          CSE, 5); /* c2, b2, f2 (i2 goes with it), y, t */
    expect_entry(fx, "  %p = f32[4] parameter(0)\n  %q = f32[4] parameter(1)\n"
                     "  %c1 = f32[] constant(2)\n"
                     "  %b1 = f32[4] broadcast(%c1), dimensions={}\n"
                     "  %i1 = s32[4] iota(), iota_dimension=0\n"
                     "  %f1 = f32[4] convert(%i1)\n"
                     "  %x = f32[4] add(%p, %b1)\n"
                     "  %s = f32[4] multiply(%x, %f1)\n"
                     "  ROOT %u = f32[4] add(%s, %s)\n");
}

/* Equal iotas are not merged themselves (as in XLA): one read by two different users stays;
 * an instruction reading two equal iotas reads the first twice, and the second goes dead. */
static void
test_cse_iotas(void **state)
{
    Fixture *fx = *state;
    clean(fx,
          "HloModule t\nENTRY main {\n  i1 = s32[4] iota(), iota_dimension=0\n"
          "  i2 = s32[4]{0} iota(), iota_dimension=0\n  i3 = s32[4] iota(), iota_dimension=0\n"
          "  i4 = s32[4,2] iota(), iota_dimension=0\n  i5 = s32[4,2] iota(), iota_dimension=1\n"
          "  a = s32[4] add(i1, i2)\n  n = s32[4] negate(i3)\n"
          "  c = s32[4,2] subtract(i4, i5)\n"
          "  ROOT r = (s32[4], s32[4], s32[4,2]) tuple(a, n, c)\n}\n",
          CSE, 0);
    expect_entry(fx, "  %i1 = s32[4] iota(), iota_dimension=0\n"
                     "  %i3 = s32[4] iota(), iota_dimension=0\n"
                     "  %i4 = s32[4,2] iota(), iota_dimension=0\n"
                     "  %i5 = s32[4,2] iota(), iota_dimension=1\n"
                     "  %a = s32[4] add(%i1, %i1)\n  %n = s32[4] negate(%i3)\n"
                     "  %c = s32[4,2] subtract(%i4, %i5)\n"
                     "  ROOT %r = (s32[4], s32[4], s32[4,2]) tuple(%a, %n, %c)\n");
}

/* What never merges: different values, dtypes, attributes or operand order of a
 * non-commutative op; parameters; rng; a side-effecting custom call (a plain one merges);
 * collectives with channel ids (without one they merge); instructions of different
 * computations. Called computations compare by identity: a5 calls an equal copy of a3's
 * reducer and stays (XLA compares callees structurally; see the report in cleanup.c). */
static void
test_cse_keeps(void **state)
{
    Fixture *fx = *state;
    clean(fx,
          "HloModule t, num_partitions=2\n"
          "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
          "  k = f32[] constant(1)\n  ka = f32[] multiply(a, k)\n  ROOT s = f32[] add(ka, b)\n}\n"
          "sum2 {\n  a2 = f32[] parameter(0)\n  b2 = f32[] parameter(1)\n"
          "  k2 = f32[] constant(1)\n  ka2 = f32[] multiply(a2, k2)\n  ROOT s2 = f32[] add(ka2, b2)\n}\n"
          "ENTRY main {\n  p = f32[4] parameter(0)\n  p2 = f32[4] parameter(1)\n"
          "  c1 = f32[] constant(1)\n  c2 = f32[] constant(3)\n  c3 = s32[] constant(1)\n"
          "  d1 = f32[4] subtract(p, p2)\n  d2 = f32[4] subtract(p2, p)\n"
          "  r1 = f32[4] rng(c1, c2), distribution=rng_uniform\n"
          "  r2 = f32[4] rng(c1, c2), distribution=rng_uniform\n"
          "  e1 = f32[4] custom-call(p), custom_call_target=\"f\", custom_call_has_side_effect=true\n"
          "  e2 = f32[4] custom-call(p), custom_call_target=\"f\", custom_call_has_side_effect=true\n"
          "  n1 = f32[4] custom-call(p), custom_call_target=\"f\"\n"
          "  n2 = f32[4] custom-call(p), custom_call_target=\"f\"\n"
          "  a1 = f32[4] all-reduce(p), channel_id=1, replica_groups={{0,1}}, "
          "use_global_device_ids=true, to_apply=sum\n"
          "  a2 = f32[4] all-reduce(p), channel_id=2, replica_groups={{0,1}}, "
          "use_global_device_ids=true, to_apply=sum\n"
          "  a3 = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=sum\n"
          "  a4 = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=sum\n"
          "  a5 = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=sum2\n"
          "  ROOT r = (f32[], f32[], s32[], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], "
          "f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(c1, c2, c3, "
          "d1, d2, r1, r2, e1, e2, n1, n2, a1, a2, a3, a4, a5, p2)\n}\n",
          CSE, 2);
    /* n2 and a4 went; everything else stays, k and k2 in their own computations */
    assert_null(strstr(fx->text.data, "%n2 ="));
    assert_null(strstr(fx->text.data, "%a4 ="));
    assert_non_null(strstr(fx->text.data, "%k = f32[] constant(1)"));
    assert_non_null(strstr(fx->text.data, "%k2 = f32[] constant(1)"));
    assert_non_null(strstr(fx->text.data,
                           "tuple(%c1, %c2, %c3, %d1, %d2, /*index=5*/%r1, %r2, %e1, %e2, %n1, "
                           "/*index=10*/%n1, %a1, %a2, %a3, %a3, /*index=15*/%a5, %p2)"));
}

/* Broadcasts differing only in dimensions stay apart; a second pass finds nothing new. */
static void
test_cse_attributes(void **state)
{
    Fixture *fx = *state;
    static const char text[] =
        "HloModule t\nENTRY main {\n  p = f32[4] parameter(0)\n"
        "  b1 = f32[4,4] broadcast(p), dimensions={0}\n  b2 = f32[4,4] broadcast(p), dimensions={1}\n"
        "  b3 = f32[4,4] broadcast(p), dimensions={1}\n"
        "  ROOT r = (f32[4,4], f32[4,4], f32[4,4]) tuple(b1, b2, b3)\n}\n";
    clean(fx, text, CSE, 1);
    expect_entry(fx, "  %p = f32[4] parameter(0)\n"
                     "  %b1 = f32[4,4] broadcast(%p), dimensions={0}\n"
                     "  %b2 = f32[4,4] broadcast(%p), dimensions={1}\n"
                     "  ROOT %r = (f32[4,4], f32[4,4], f32[4,4]) tuple(%b1, %b2, %b2)\n");
    assert_int_equal(ir_module_cse(fx->m, &fx->arena, NULL, 0, NULL), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gte_of_tuple, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tuple_shardings, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_whole_tuple, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cse_merges, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cse_iotas, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cse_keeps, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cse_attributes, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cse_carried_shardings, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
