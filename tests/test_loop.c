/* test_loop.c - while-loop trip counts (src/ir/loop.c) on loop shapes written here: a JAX scan,
 * a fori_loop with its bound in the loop state, the induction variable away from index 0,
 * every compare direction, negative steps, operands in either order, converts, a loop in a
 * called computation, backend_config winning, and the loops no analysis can count (each with
 * the reason it gives). Nesting is the trace writer's (tests/test_trace.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hlo/hlo.h"

/* A loop over state (s32[] a, s32[] b, f32[8] x): the condition compares COND, the body sets
 * element 0 to UPD0 and element 1 to UPD1 (both given as HLO lines defining u0 / u1), the
 * entry starts it with (INIT0, INIT1). WHILE_ATTRS ends the while line. */
static const char k_fmt[] = "HloModule m\n\n"
                            "cond {\n"
                            "  p = (s32[], s32[], f32[8]) parameter(0)\n"
                            "  a = s32[] get-tuple-element(p), index=0\n"
                            "  b = s32[] get-tuple-element(p), index=1\n"
                            "%s"
                            "}\n\n"
                            "body {\n"
                            "  p = (s32[], s32[], f32[8]) parameter(0)\n"
                            "  a = s32[] get-tuple-element(p), index=0\n"
                            "  b = s32[] get-tuple-element(p), index=1\n"
                            "  x = f32[8] get-tuple-element(p), index=2\n"
                            "  y = f32[8] add(x, x)\n"
                            "%s"
                            "  ROOT t = (s32[], s32[], f32[8]) tuple(u0, u1, y)\n"
                            "}\n\n"
                            "ENTRY main {\n"
                            "  x = f32[8] parameter(0)\n"
                            "  q = s32[] parameter(1)\n"
                            "%s"
                            "  s = (s32[], s32[], f32[8]) tuple(i0, i1, x)\n"
                            "  ROOT w = (s32[], s32[], f32[8]) while(s), condition=cond, body=body%s\n"
                            "}\n";

typedef struct Case {
    const char *name, *cond, *body, *init, *attrs;
    int64_t want;          /* -1: unknown */
    IrTripMethod method;
    int64_t induction;     /* -1: none */
    const char *reason;    /* a substring of the reason */
} Case;

#define STEP1 "  one = s32[] constant(1)\n  u0 = s32[] add(a, one)\n  u1 = s32[] copy(b)\n"
#define I0(v, w) "  i0 = s32[] constant(" #v ")\n  i1 = s32[] constant(" #w ")\n"

static const Case k_cases[] = {
    /* JAX scan: i = 0; i < 5; i += 1 with the bound a constant of the condition */
    {"scan", "  n = s32[] constant(5)\n  ROOT c = pred[] compare(a, n), direction=LT\n", STEP1,
     I0(0, 0), "", 5, IR_TRIP_PATTERN, 0, "i = 0; i < 5; i += 1 (tuple element 0)"},
    /* fori_loop: (i, upper, x) with cond i < upper, upper passed through */
    {"fori_loop", "  ROOT c = pred[] compare(a, b), direction=LT\n", STEP1, I0(2, 10), "", 8,
     IR_TRIP_PATTERN, 0, "i = 2; i < 10; i += 1"},
    /* the induction variable at element 1, LE, step 3: 1, 4, 7, 10 */
    {"index1_le", "  n = s32[] constant(10)\n  ROOT c = pred[] compare(b, n), direction=LE\n",
     "  three = s32[] constant(3)\n  u0 = s32[] copy(a)\n  u1 = s32[] add(three, b)\n", I0(0, 1),
     "", 4, IR_TRIP_PATTERN, 1, "i = 1; i <= 10; i += 3 (tuple element 1)"},
    /* GT with a negative step by subtract: 10, 8, 6, 4, 2 */
    {"gt_subtract", "  z = s32[] constant(0)\n  ROOT c = pred[] compare(a, z), direction=GT\n",
     "  two = s32[] constant(2)\n  u0 = s32[] subtract(a, two)\n  u1 = s32[] copy(b)\n",
     I0(10, 0), "", 5, IR_TRIP_PATTERN, 0, "i = 10; i > 0; i -= 2"},
    /* the bound on the left: 0 <= i is i >= 0; 9, 6, 3, 0 */
    {"ge_swapped", "  z = s32[] constant(0)\n  ROOT c = pred[] compare(z, a), direction=LE\n",
     "  m3 = s32[] constant(-3)\n  u0 = s32[] add(a, m3)\n  u1 = s32[] copy(b)\n", I0(9, 0), "",
     4, IR_TRIP_PATTERN, 0, "i = 9; i >= 0; i -= 3"},
    {"ne", "  n = s32[] constant(12)\n  ROOT c = pred[] compare(a, n), direction=NE\n",
     "  four = s32[] constant(4)\n  u0 = s32[] add(a, four)\n  u1 = s32[] copy(b)\n", I0(0, 0),
     "", 3, IR_TRIP_PATTERN, 0, "i != 12"},
    /* two additions per iteration: one step of 2 (0, 2, 4) */
    {"add_chain", "  n = s32[] constant(6)\n  ROOT c = pred[] compare(a, n), direction=LT\n",
     "  one = s32[] constant(1)\n  h = s32[] add(a, one)\n  u0 = s32[] add(h, one)\n"
     "  u1 = s32[] copy(b)\n",
     I0(0, 0), "", 3, IR_TRIP_PATTERN, 0, "i = 0; i < 6; i += 2"},
    /* the start computed from constants: 3 * 2 - 1 = 5; 5, 7, 9 */
    {"init_arithmetic", "  n = s32[] constant(10)\n  ROOT c = pred[] compare(a, n), direction=LT\n",
     "  two = s32[] constant(2)\n  u0 = s32[] add(a, two)\n  u1 = s32[] copy(b)\n",
     "  c3 = s32[] constant(3)\n  c2 = s32[] constant(2)\n  c1 = s32[] constant(1)\n"
     "  m = s32[] multiply(c3, c2)\n  i0 = s32[] subtract(m, c1)\n  i1 = s32[] constant(0)\n",
     "", 3, IR_TRIP_PATTERN, 0, "i = 5; i < 10; i += 2"},
    {"never_runs", "  n = s32[] constant(3)\n  ROOT c = pred[] compare(a, n), direction=LT\n",
     STEP1, I0(5, 0), "", 0, IR_TRIP_PATTERN, 0, "i = 5; i < 3"},
    /* the compare on widened values */
    {"convert", "  n = s64[] constant(6)\n  a64 = s64[] convert(a)\n"
                "  ROOT c = pred[] compare(a64, n), direction=LT\n",
     STEP1, I0(0, 0), "", 6, IR_TRIP_PATTERN, 0, "i < 6"},
    {"backend_config_wins",
     "  n = s32[] constant(5)\n  ROOT c = pred[] compare(a, n), direction=LT\n", STEP1, I0(0, 0),
     ", backend_config={\"known_trip_count\":{\"n\":\"7\"}}", 7, IR_TRIP_BACKEND_CONFIG, -1,
     "known_trip_count n=7"},
    /* what no analysis counts */
    {"bound_parameter", "  ROOT c = pred[] compare(a, b), direction=LT\n", STEP1,
     "  i0 = s32[] constant(0)\n  i1 = s32[] copy(q)\n", "", -1, IR_TRIP_UNKNOWN, 0,
     "the bound (tuple element 1) is a parameter: %q of main"},
    {"init_parameter", "  n = s32[] constant(5)\n  ROOT c = pred[] compare(a, n), direction=LT\n",
     STEP1, "  i0 = s32[] copy(q)\n  i1 = s32[] constant(0)\n", "", -1, IR_TRIP_UNKNOWN, 0,
     "initial value of the induction variable (tuple element 0) is a parameter: %q"},
    {"ne_never_equal", "  n = s32[] constant(7)\n  ROOT c = pred[] compare(a, n), direction=NE\n",
     "  two = s32[] constant(2)\n  u0 = s32[] add(a, two)\n  u1 = s32[] copy(b)\n", I0(0, 0), "",
     -1, IR_TRIP_UNKNOWN, 0, "never ends: i = 0; i != 7; i += 2"},
    {"wrong_way", "  n = s32[] constant(5)\n  ROOT c = pred[] compare(a, n), direction=LT\n",
     "  m1 = s32[] constant(-1)\n  u0 = s32[] add(a, m1)\n  u1 = s32[] copy(b)\n", I0(0, 0), "",
     -1, IR_TRIP_UNKNOWN, 0, "never ends"},
    {"overflow", "  n = s32[] constant(2147483647)\n  ROOT c = pred[] compare(a, n), direction=LT\n",
     "  two = s32[] constant(2)\n  u0 = s32[] add(a, two)\n  u1 = s32[] copy(b)\n", I0(0, 0), "",
     -1, IR_TRIP_UNKNOWN, 0, "induction variable (s32) would overflow"},
    {"data_update", "  n = s32[] constant(5)\n  ROOT c = pred[] compare(a, n), direction=LT\n",
     "  u0 = s32[] multiply(a, a)\n  u1 = s32[] copy(b)\n", I0(1, 0), "", -1, IR_TRIP_UNKNOWN, -1,
     "no induction variable: tuple element 0 is updated by multiply %u0"},
    {"not_compare", "  n = s32[] constant(5)\n  l = pred[] compare(a, n), direction=LT\n"
                    "  g = pred[] compare(b, n), direction=LT\n  ROOT c = pred[] and(l, g)\n",
     STEP1, I0(0, 0), "", -1, IR_TRIP_UNKNOWN, -1, "the condition's root is and %c"},
};

static void
test_trip_count_cases(void **state)
{
    (void)state;
    for (size_t k = 0; k < SL_COUNTOF(k_cases); k++) {
        const Case *c = &k_cases[k];
        char text[4096];
        snprintf(text, sizeof(text), k_fmt, c->cond, c->body, c->init, c->attrs);
        SlArena arena;
        SlInterner names;
        sl_arena_init(&arena);
        sl_interner_init(&names, &arena);
        IrModule *m = NULL;
        SlError err = {0};
        if (hlo_parse(&arena, &names, sl_str(text), "case.hlo", &m, &err) ||
            ir_module_check(m, "case.hlo", &err))
            fail_msg("%s: %s:%u:%u: %s", c->name, err.loc.path, err.loc.line, err.loc.col,
                     err.msg);
        IrTripCount tc;
        ir_while_trip_count(m, m->entry->root, &tc);
        if (tc.count != c->want || tc.method != c->method ||
            (c->induction >= 0 && tc.induction_index != c->induction) ||
            !strstr(tc.reason, c->reason))
            fail_msg("%s: count %lld (%s, induction %lld): \"%s\"; want %lld (%s): \"%s\"",
                     c->name, (long long)tc.count, ir_trip_method_name(tc.method),
                     (long long)tc.induction_index, tc.reason, (long long)c->want,
                     ir_trip_method_name(c->method), c->reason);
        ir_module_fini(m);
        sl_interner_fini(&names);
        sl_arena_fini(&arena);
    }
}

/* A loop in a computation the entry calls: the initial state comes through the call's
 * parameters, which resolve to the entry's constants. */
static const char k_called[] = "HloModule m\n\n"
                               "cond {\n  p = (s32[], f32[4]) parameter(0)\n"
                               "  i = s32[] get-tuple-element(p), index=0\n"
                               "  n = s32[] constant(24)\n"
                               "  ROOT c = pred[] compare(i, n), direction=LT\n}\n\n"
                               "body {\n  p = (s32[], f32[4]) parameter(0)\n"
                               "  i = s32[] get-tuple-element(p), index=0\n"
                               "  x = f32[4] get-tuple-element(p), index=1\n"
                               "  s = s32[] constant(4)\n  j = s32[] add(i, s)\n"
                               "  ROOT t = (s32[], f32[4]) tuple(j, x)\n}\n\n"
                               "f {\n  start = s32[] parameter(0)\n  v = f32[4] parameter(1)\n"
                               "  t = (s32[], f32[4]) tuple(start, v)\n"
                               "  w = (s32[], f32[4]) while(t), condition=cond, body=body\n"
                               "  ROOT r = f32[4] get-tuple-element(w), index=1\n}\n\n"
                               "ENTRY main {\n  x = f32[4] parameter(0)\n"
                               "  four = s32[] constant(4)\n"
                               "  ROOT c = f32[4] call(four, x), to_apply=f\n}\n";

/* A loop whose state is the counter itself (no tuple): XLA's analysis needs a tuple; here the
 * state is the induction variable. */
static const char k_scalar_state[] = "HloModule m\n\n"
                                     "cond {\n  i = s32[] parameter(0)\n  n = s32[] constant(7)\n"
                                     "  ROOT c = pred[] compare(i, n), direction=LT\n}\n\n"
                                     "body {\n  i = s32[] parameter(0)\n  one = s32[] constant(1)\n"
                                     "  ROOT j = s32[] add(i, one)\n}\n\n"
                                     "ENTRY main {\n  p = s32[] parameter(0)\n  z = s32[] constant(%s)\n"
                                     "  s = s32[] %s\n"
                                     "  ROOT w = s32[] while(s), condition=cond, body=body\n}\n";

static void
test_trip_count_scalar_state(void **state)
{
    (void)state;
    static const struct {
        const char *start, *state;
        int64_t want;
        const char *reason;
    } cases[] = {
        {"2", "copy(z)", 5, "i = 2; i < 7; i += 1 (the loop state)"},
        {"0", "copy(p)", -1, "the initial value of the induction variable (the loop state) is a "
                             "parameter: %p of main"},
    };
    for (size_t k = 0; k < SL_COUNTOF(cases); k++) {
        char text[1024];
        snprintf(text, sizeof(text), k_scalar_state, cases[k].start, cases[k].state);
        SlArena arena;
        SlInterner names;
        sl_arena_init(&arena);
        sl_interner_init(&names, &arena);
        IrModule *m = NULL;
        SlError err = {0};
        assert_int_equal(hlo_parse(&arena, &names, sl_str(text), "s.hlo", &m, &err), SL_OK);
        IrTripCount tc;
        ir_while_trip_count(m, m->entry->root, &tc);
        if (tc.count != cases[k].want || strcmp(tc.reason, cases[k].reason))
            fail_msg("case %zu: %lld \"%s\"", k, (long long)tc.count, tc.reason);
        ir_module_fini(m);
        sl_interner_fini(&names);
        sl_arena_fini(&arena);
    }
}

static void
test_trip_count_through_call(void **state)
{
    (void)state;
    SlArena arena;
    SlInterner names;
    sl_arena_init(&arena);
    sl_interner_init(&names, &arena);
    IrModule *m = NULL;
    SlError err = {0};
    assert_int_equal(hlo_parse(&arena, &names, sl_str(k_called), "c.hlo", &m, &err), SL_OK);
    const IrComputation *f = ir_module_find_computation(m, sl_intern_cstr(&names, "f"));
    assert_non_null(f);
    const IrInstr *w = f->instrs[3];
    assert_int_equal(w->op, IR_OP_WHILE);
    IrTripCount tc;
    ir_while_trip_count(m, w, &tc);
    /* 4, 8, 12, 16, 20 */
    assert_int_equal(tc.count, 5);
    assert_string_equal(tc.reason, "i = 4; i < 24; i += 4 (tuple element 0)");
    ir_module_fini(m);
    sl_interner_fini(&names);
    sl_arena_fini(&arena);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trip_count_cases),
        cmocka_unit_test(test_trip_count_through_call),
        cmocka_unit_test(test_trip_count_scalar_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
