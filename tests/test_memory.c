/* test_memory.c - the memory estimate (src/memory) on modules counted by hand here: a while
 * loop updating its state in place with dynamic-update-slice (with and without donation), a
 * tuple-heavy module of views, a root returning a value twice, a training step with donated
 * parameters, an async collective pair, a call, a conditional, the schedule's order, a value
 * that cannot be updated in place because it is read later, and a partitioned module whose
 * donated parameter and output differ in size. Each case gives the schedule's live bytes in
 * its comment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hlo/hlo.h"
#include "memory/memory.h"

typedef struct Want {
    int64_t parameter, output, alias, peak, peak_temp;
    const char *peak_instr;
    const char *top; /* "name:leaf:bytes:kind ..." of the peak's buffers, largest first */
} Want;

#define LOOP_COMPS                                                                                 \
    "cond {\n"                                                                                     \
    "  p = (s32[], f32[4,256]) parameter(0)\n"                                                     \
    "  i = s32[] get-tuple-element(p), index=0\n"                                                  \
    "  n = s32[] constant(4)\n"                                                                    \
    "  ROOT c = pred[] compare(i, n), direction=LT\n"                                              \
    "}\n\n"                                                                                        \
    "body {\n"                                                                                     \
    "  p = (s32[], f32[4,256]) parameter(0)\n"                                                     \
    "  i = s32[] get-tuple-element(p), index=0\n"                                                  \
    "  buf = f32[4,256] get-tuple-element(p), index=1\n"                                           \
    "  one = s32[] constant(1)\n"                                                                  \
    "  i1 = s32[] add(i, one)\n"                                                                   \
    "  z = s32[] constant(0)\n"                                                                    \
    "  v = f32[] convert(i)\n"                                                                     \
    "  row = f32[1,256] broadcast(v), dimensions={}\n"                                             \
    "  upd = f32[4,256] dynamic-update-slice(buf, row, i, z)\n"                                    \
    "  ROOT t = (s32[], f32[4,256]) tuple(i1, upd)\n"                                              \
    "}\n\n"
#define LOOP_ENTRY                                                                                 \
    "ENTRY main {\n"                                                                               \
    "  init = f32[4,256] parameter(0)\n"                                                           \
    "  z = s32[] constant(0)\n"                                                                    \
    "  s = (s32[], f32[4,256]) tuple(z, init)\n"                                                   \
    "  w = (s32[], f32[4,256]) while(s), condition=cond, body=body\n"                              \
    "  ROOT r = f32[4,256] get-tuple-element(w), index=1\n"                                        \
    "}\n"

static const struct {
    const char *name, *text;
    Want want;
} k_cases[] = {
    /* body: upd takes buf's storage (the state's); live at `row`: i1 4 + z 4 + v 4 + row 1024
     * = 1036 (cond: n 4 + c 1 = 5). Entry: init is read-only (not donated), so the while
     * copies its state: at w, init 4096 + z 4 + state 4 + 4096 + body 1036 = 9236. */
    {"while_dus",
     "HloModule m\n\n" LOOP_COMPS LOOP_ENTRY,
     {4096, 4096, 0, 9236, 1044, "w", "init:0:4096:parameter w:1:4096:output w:0:1036:nested "
                                      "z:0:4:temp w:0:4:temp"}},
    /* donated: the while's state takes init's storage in place: at w, state 4096 + 4 + z 4 +
     * body 1036 = 5140 */
    {"while_dus_donated",
     "HloModule m, input_output_alias={ {}: (0, {}, may-alias) }\n\n" LOOP_COMPS LOOP_ENTRY,
     {4096, 4096, 4096, 5140, 1044, "w", "w:1:4096:output w:0:1036:nested z:0:4:temp "
                                         "w:0:4:temp"}},
    /* views only, until s and n: a 256 + b 128 + s 256 + n 128 = 768; the root returns a
     * too (passed through from a parameter that is not donated: XLA copies it, an output of
     * 256 more), and its tuple has a pointer table of 3 x 8 B: outputs 256 + 128 + 256 + 24 =
     * 664, and at r 768 + the copy 256 + the table 24 = 1048 */
    {"tuples",
     "HloModule m\n\n"
     "ENTRY main {\n"
     "  a = f32[64] parameter(0)\n"
     "  b = f32[32] parameter(1)\n"
     "  t = (f32[64], f32[32]) tuple(a, b)\n"
     "  t2 = ((f32[64], f32[32]), f32[64]) tuple(t, a)\n"
     "  g = (f32[64], f32[32]) get-tuple-element(t2), index=0\n"
     "  x = f32[64] get-tuple-element(g), index=0\n"
     "  y = f32[32] get-tuple-element(g), index=1\n"
     "  s = f32[64] add(x, x)\n"
     "  bc = f32[8,8] bitcast(s)\n"
     "  n = f32[32] negate(y)\n"
     "  ROOT r = (f32[8,8], f32[32], f32[64]) tuple(bc, n, x)\n"
     "}\n",
     {384, 664, 0, 1048, 0, "r", "a:0:256:parameter s:0:256:output b:0:128:parameter "
                                 "n:0:128:output"}},
    /* a root returning y twice and the parameter x: each leaf is an output buffer of its own
     * (XLA copies the second y and x at the root): outputs 3 x 256 + the table 24 = 792; at t,
     * x 256 + y 256 + the two copies 512 + 24 = 1048 */
    {"root_twice",
     "HloModule m\n\n"
     "ENTRY main {\n"
     "  x = f32[64] parameter(0)\n"
     "  y = f32[64] negate(x)\n"
     "  ROOT t = (f32[64], f32[64], f32[64]) tuple(y, y, x)\n"
     "}\n",
     {256, 792, 0, 1048, 0, "t", "x:0:256:parameter y:0:256:output"}},
    /* w and m donated (live until their last use), g not (live to the end): the elementwise
     * m2 = m + g writes into m's buffer (m dies there), w2 = w - m2 into w's: w + m + g 3072
     * throughout, + the root's pointer table 16 at r; outputs 2048 + 16 */
    {"donated_step",
     "HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }\n\n"
     "ENTRY main {\n"
     "  w = f32[256] parameter(0)\n"
     "  m = f32[256] parameter(1)\n"
     "  g = f32[256] parameter(2)\n"
     "  m2 = f32[256] add(m, g)\n"
     "  w2 = f32[256] subtract(w, m2)\n"
     "  ROOT r = (f32[256], f32[256]) tuple(w2, m2)\n"
     "}\n",
     {3072, 2064, 2048, 3088, 0, "r", "g:0:1024:parameter m2:0:1024:output "
                                      "w2:0:1024:output"}},
    /* a donated parameter updated in place while nothing reads it later: u takes x's
     * storage (x 4096 until d, then u); not when x is read after the update (u2 is a copy) */
    {"dus_in_place",
     "HloModule m, input_output_alias={ {0}: (0, {}, may-alias) }\n\n"
     "ENTRY main {\n"
     "  x = f32[1024] parameter(0)\n"
     "  r = f32[16] parameter(1)\n"
     "  i = s32[] parameter(2)\n"
     "  u = f32[1024] dynamic-update-slice(x, r, i)\n"
     "  u2 = f32[1024] dynamic-update-slice(u, r, i)\n"
     "  k = f32[1024] reverse(u), dimensions={0}\n"
     "  ROOT t = (f32[1024], f32[1024]) tuple(u2, k)\n"
     "}\n",
     /* at u2: r 64 + i 4 + u 4096 + u2 4096 = 8260; at k (a reverse: not elementwise, so not
      * in u's buffer though u dies there): + k 4096 = 12356; outputs u2 + k + the root's
      * pointer table 16 */
     {4164, 8208, 4096, 12356, 4096, "k", "u:0:4096:temp u2:0:4096:output k:0:4096:output "
                                          "r:0:64:parameter i:0:4:parameter"}},
    /* all-gather-start's (operand, result) pair: the operand slot is the operand's storage,
     * done is the result slot: x 1024 + start's result 4096 (+ y 4096 at y) */
    {"async_pair",
     "HloModule m\n\n"
     "ENTRY main {\n"
     "  x = f32[256] parameter(0)\n"
     "  s = (f32[256], f32[1024]) all-gather-start(x), dimensions={0}, replica_groups={}\n"
     "  d = f32[1024] all-gather-done(s)\n"
     "  ROOT y = f32[1024] reverse(d), dimensions={0}\n"
     "}\n",
     {1024, 4096, 0, 9216, 4096, "y", "s:1:4096:temp y:0:4096:output x:0:1024:parameter"}},
    /* a call: its callee's own peak (e 256, the root's f the caller's) at the call */
    {"call",
     "HloModule m\n\n"
     "f {\n"
     "  a = f32[64] parameter(0)\n"
     "  e = f32[64] exponential(a)\n"
     "  ROOT f = f32[64] add(e, a)\n"
     "}\n\n"
     "ENTRY main {\n"
     "  x = f32[64] parameter(0)\n"
     "  ROOT c = f32[64] call(x), to_apply=f\n"
     "}\n",
     {256, 256, 0, 768, 256, "c", "x:0:256:parameter c:0:256:output c:0:256:nested"}},
    /* a conditional: its larger branch's own peak (t's e 64; the root is the caller's) on top
     * of p 1 + x 64 + c 64 */
    {"conditional",
     "HloModule m\n\n"
     "t {\n  a = f32[16] parameter(0)\n  e = f32[16] exponential(a)\n"
     "  ROOT r = f32[16] add(e, a)\n}\n\n"
     "f {\n  a = f32[16] parameter(0)\n  ROOT r = f32[16] negate(a)\n}\n\n"
     "ENTRY main {\n"
     "  p = pred[] parameter(0)\n"
     "  x = f32[16] parameter(1)\n"
     "  ROOT c = f32[16] conditional(p, x, x), true_computation=t, false_computation=f\n"
     "}\n",
     {65, 64, 0, 193, 64, "c", "x:0:64:parameter c:0:64:output c:0:64:nested p:0:1:parameter"}},
    /* the schedule is the module's order (is_scheduled=true: its HloSchedule): slicing a before
     * computing b keeps one 1 KiB temporary live at a time, x + b + sa + sb = 2056 at sb... */
    {"scheduled_order",
     "HloModule m, is_scheduled=true\n\n"
     "ENTRY main {\n"
     "  x = f32[256] parameter(0)\n"
     "  a = f32[256] negate(x)\n"
     "  sa = f32[1] slice(a), slice={[0:1]}\n"
     "  b = f32[256] exponential(x)\n"
     "  sb = f32[1] slice(b), slice={[0:1]}\n"
     "  ROOT t = f32[1] add(sa, sb)\n"
     "}\n",
     {1024, 4, 0, 2056, 1032, "sb", "x:0:1024:parameter b:0:1024:temp sa:0:4:temp "
                                    "sb:0:4:temp"}},
    /* ... the same instructions with b before the slices: at sa, a (read there) and b are both
     * live: x + a + b + sa = 3076 */
    {"other_order",
     "HloModule m, is_scheduled=true\n\n"
     "ENTRY main {\n"
     "  x = f32[256] parameter(0)\n"
     "  a = f32[256] negate(x)\n"
     "  b = f32[256] exponential(x)\n"
     "  sa = f32[1] slice(a), slice={[0:1]}\n"
     "  sb = f32[1] slice(b), slice={[0:1]}\n"
     "  ROOT t = f32[1] add(sa, sb)\n"
     "}\n",
     {1024, 4, 0, 3076, 2052, "sa", "x:0:1024:parameter a:0:1024:temp b:0:1024:temp "
                                    "sa:0:4:temp"}},
    /* a fusion whose root is a dynamic-update-slice of its parameter 0 updates x (donated)
     * in place: x 4096 until f, then f; r 64 + i 4 throughout, so the peak (first reached at
     * the start, where every parameter is live) stays 4164 instead of 8260 with a copy */
    {"fusion_in_place",
     "HloModule m, input_output_alias={ {}: (0, {}, may-alias) }\n\n"
     "fused {\n  a = f32[1024] parameter(0)\n  u = f32[16] parameter(1)\n"
     "  j = s32[] parameter(2)\n  ROOT d = f32[1024] dynamic-update-slice(a, u, j)\n}\n\n"
     "ENTRY main {\n"
     "  x = f32[1024] parameter(0)\n"
     "  r = f32[16] parameter(1)\n"
     "  i = s32[] parameter(2)\n"
     "  ROOT f = f32[1024] fusion(x, r, i), kind=kLoop, calls=fused\n"
     "}\n",
     {4164, 4096, 4096, 4164, 0, "x", "x:0:4096:parameter r:0:64:parameter i:0:4:parameter"}},
    /* elementwise results in a dying operand's buffer of the same shape: the loop fusion f
     * (its parameter a reaches the root through multiply and add) takes e's, h = g + f takes
     * g's (its first candidate, which dies there); e and g (of x, a read-only parameter) and
     * c (a convert to another element type) get their own. x + e + g + c = 3584 at c, the
     * peak (f and h keep it there); at r, x + c + h + the table 16 = 2576 */
    {"elementwise_share",
     "HloModule m\n\n"
     "fused {\n  a = f32[256] parameter(0)\n  b = f32[256] parameter(1)\n"
     "  p = f32[256] multiply(a, a)\n  ROOT s = f32[256] add(p, b)\n}\n\n"
     "ENTRY main {\n"
     "  x = f32[256] parameter(0)\n"
     "  e = f32[256] exponential(x)\n"
     "  g = f32[256] negate(x)\n"
     "  c = bf16[256] convert(e)\n"
     "  f = f32[256] fusion(e, g), kind=kLoop, calls=fused\n"
     "  h = f32[256] add(g, f)\n"
     "  ROOT r = (bf16[256], f32[256]) tuple(c, h)\n"
     "}\n",
     {1024, 1552, 0, 3584, 2048, "c", "x:0:1024:parameter e:0:1024:temp g:0:1024:temp "
                                      "c:0:512:output"}},
    /* a loop-invariant weight (the body returns it unchanged) is read in place, not copied;
     * the body's elementwise i1 and h1 write into the state's i and h (each dies there), so
     * the body's peak is s 16; at l, w 1024 + h 16 + z 4 + state copies of z 4 and h 16 + 16 =
     * 1080 (2104 if w were copied) */
    {"while_invariant",
     "HloModule m\n\n"
     "cond {\n  p = (s32[], f32[256], f32[4]) parameter(0)\n"
     "  i = s32[] get-tuple-element(p), index=0\n  n = s32[] constant(3)\n"
     "  ROOT c = pred[] compare(i, n), direction=LT\n}\n\n"
     "body {\n  p = (s32[], f32[256], f32[4]) parameter(0)\n"
     "  i = s32[] get-tuple-element(p), index=0\n  w = f32[256] get-tuple-element(p), index=1\n"
     "  h = f32[4] get-tuple-element(p), index=2\n  one = s32[] constant(1)\n"
     "  i1 = s32[] add(i, one)\n  s = f32[4] slice(w), slice={[0:4]}\n"
     "  h1 = f32[4] add(h, s)\n  ROOT t = (s32[], f32[256], f32[4]) tuple(i1, w, h1)\n}\n\n"
     "ENTRY main {\n"
     "  w = f32[256] parameter(0)\n"
     "  h = f32[4] parameter(1)\n"
     "  z = s32[] constant(0)\n"
     "  s = (s32[], f32[256], f32[4]) tuple(z, w, h)\n"
     "  l = (s32[], f32[256], f32[4]) while(s), condition=cond, body=body\n"
     "  ROOT r = f32[4] get-tuple-element(l), index=2\n"
     "}\n",
     {1040, 16, 0, 1080, 24, "l", "w:0:1024:parameter h:0:16:parameter l:0:16:nested "
                                  "l:2:16:output z:0:4:temp l:0:4:temp"}},
};

static void
describe(const MemEstimate *e, SlBuf *out)
{
    for (uint32_t k = 0; k < e->n_top; k++)
        sl_buf_printf(out, "%s%s:%u:%lld:%s", k ? " " : "", sl_sym_cstr(e->top[k].instr->name),
                      e->top[k].leaf, (long long)e->top[k].bytes,
                      mem_buf_kind_name(e->top[k].kind));
}

static void
test_memory_cases(void **state)
{
    (void)state;
    for (size_t c = 0; c < SL_COUNTOF(k_cases); c++) {
        SlArena arena;
        SlInterner names;
        sl_arena_init(&arena);
        sl_interner_init(&names, &arena);
        IrModule *m = NULL;
        SlError err = {0};
        if (hlo_parse(&arena, &names, sl_str(k_cases[c].text), "t.hlo", &m, &err) != SL_OK)
            fail_msg("%s: %s (line %u)", k_cases[c].name, err.msg, err.loc.line);
        MemEstimate e;
        uint32_t ignored = 99;
        assert_int_equal(mem_estimate(m, &e, &ignored, &err), SL_OK);
        assert_int_equal(ignored, 0);
        SlBuf top;
        sl_buf_init(&top);
        describe(&e, &top);
        const Want *w = &k_cases[c].want;
        const char *peak = e.peak_instr ? sl_sym_cstr(e.peak_instr->name) : "-";
        if (e.parameter_bytes != w->parameter || e.output_bytes != w->output ||
            e.alias_bytes != w->alias || e.peak_bytes != w->peak ||
            e.peak_temp_bytes != w->peak_temp || strcmp(peak, w->peak_instr) ||
            strcmp(sl_buf_str(&top).ptr, w->top))
            fail_msg("%s: params %lld out %lld alias %lld peak %lld temp %lld at %s top '%s'",
                     k_cases[c].name, (long long)e.parameter_bytes, (long long)e.output_bytes,
                     (long long)e.alias_bytes, (long long)e.peak_bytes,
                     (long long)e.peak_temp_bytes, peak, sl_buf_str(&top).ptr);
        sl_buf_fini(&top);
        ir_module_fini(m);
        sl_interner_fini(&names);
        sl_arena_fini(&arena);
    }
}

/* The live-bytes profile: one point per position on a short schedule (scheduled_order's:
 * x; + a; + sa; a dies, + b; + sb; b dies, sa dies, + t in sa's buffer), and on a long one the
 * most of each bucket, the peak included. */
static void
test_memory_profile(void **state)
{
    (void)state;
    SlArena arena;
    SlInterner names;
    sl_arena_init(&arena);
    sl_interner_init(&names, &arena);
    IrModule *m = NULL;
    SlError err = {0};
    assert_int_equal(hlo_parse(&arena, &names, sl_str(k_cases[9].text), "t.hlo", &m, &err), SL_OK);
    assert_string_equal(k_cases[9].name, "scheduled_order");
    MemEstimate e;
    assert_int_equal(mem_estimate(m, &e, NULL, &err), SL_OK);
    static const int64_t want[] = {1024, 2048, 2052, 2052, 2056, 1032};
    assert_int_equal(e.n_profile, SL_COUNTOF(want));
    assert_int_equal(e.profile_step, 1);
    for (size_t k = 0; k < SL_COUNTOF(want); k++)
        assert_int_equal(e.profile[k], want[k]);
    ir_module_fini(m);

    /* a chain of 1199 scalar negates from v0, each read by the next only, so each writes into
     * its operand's buffer (v0, a parameter, is read-only: v0 + one value live, 8 B), then a 2
     * KiB broadcast at position 1200, the peak */
    SlBuf text;
    sl_buf_init(&text);
    sl_buf_puts(&text, "HloModule m\n\nENTRY main {\n  v0 = f32[] parameter(0)\n");
    for (int k = 1; k < 1200; k++)
        sl_buf_printf(&text, "  v%d = f32[] negate(v%d)\n", k, k - 1);
    sl_buf_puts(&text, "  ROOT big = f32[512] broadcast(v1199), dimensions={}\n}\n");
    m = NULL;
    assert_int_equal(hlo_parse(&arena, &names, sl_buf_str(&text), "t.hlo", &m, &err), SL_OK);
    assert_int_equal(mem_estimate(m, &e, NULL, &err), SL_OK);
    assert_int_equal(e.profile_step, 3); /* 1201 positions in 512 points: 3 each */
    assert_int_equal(e.n_profile, 401);
    assert_int_equal(e.peak_position, 1200);
    assert_int_equal(e.peak_bytes, 4 + 4 + 2048);
    assert_int_equal(e.profile[400], 4 + 4 + 2048);
    assert_int_equal(e.profile[1], 4 + 4); /* positions 3-5 */
    sl_buf_fini(&text);
    ir_module_fini(m);
    sl_interner_fini(&names);
    sl_arena_fini(&arena);
}

/* An input_output_alias that names no parameter is ignored, and counted. */
static void
test_memory_bad_alias(void **state)
{
    (void)state;
    SlArena arena;
    SlInterner names;
    sl_arena_init(&arena);
    sl_interner_init(&names, &arena);
    IrModule *m = NULL;
    SlError err = {0};
    const char *text = "HloModule m, input_output_alias={ {}: (7, {}, may-alias) }\n\n"
                       "ENTRY main {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] negate(x)\n}\n";
    assert_int_equal(hlo_parse(&arena, &names, sl_str(text), "t.hlo", &m, &err), SL_OK);
    MemEstimate e;
    uint32_t ignored = 0;
    assert_int_equal(mem_estimate(m, &e, &ignored, &err), SL_OK);
    assert_int_equal(ignored, 1);
    assert_int_equal(e.alias_bytes, 0);
    assert_int_equal(e.peak_bytes, 32);
    ir_module_fini(m);
    sl_interner_fini(&names);
    sl_arena_fini(&arena);
}

/* A partitioned module whose donated parameter 0 is sharded (32 KiB per device) and its
 * output replicated (64 KiB): the pair cannot share storage (XLA rejects it), so only pair 1
 * aliases. Positions w, m, s, w2, m2, r: w (read-only) + m 65536 throughout until m's last use
 * at m2; + s 32768 at s; + w2 65536 at w2 (s read there): 163840, the peak; at m2 s is dead:
 * w + m + w2 + m2 = 163840; at r m is dead: w + w2 + m2 + the root's table 16 = 131088. */
static void
test_memory_alias_size_mismatch(void **state)
{
    (void)state;
    SlArena arena;
    SlInterner names;
    sl_arena_init(&arena);
    sl_interner_init(&names, &arena);
    IrModule *m = NULL;
    SlError err = {0};
    const char *text =
        "HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }\n\n"
        "ENTRY main {\n"
        "  w = f32[128,64] parameter(0)\n"
        "  m = f32[128,64] parameter(1)\n"
        "  s = f32[128,64] add(w, m)\n"
        "  w2 = f32[256,64] all-gather(s), dimensions={0}, replica_groups={{0,1}}\n"
        "  m2 = f32[128,64] multiply(w, m)\n"
        "  ROOT r = (f32[256,64], f32[128,64]) tuple(w2, m2)\n"
        "}\n";
    assert_int_equal(hlo_parse(&arena, &names, sl_str(text), "t.hlo", &m, &err), SL_OK);
    MemEstimate e;
    uint32_t ignored = 0;
    assert_int_equal(mem_estimate(m, &e, &ignored, &err), SL_OK);
    assert_int_equal(ignored, 1);
    assert_int_equal(e.parameter_bytes, 65536);
    assert_int_equal(e.output_bytes, 65536 + 32768 + 16);
    assert_int_equal(e.alias_bytes, 32768);
    assert_int_equal(e.peak_bytes, 163840);
    assert_int_equal(e.peak_temp_bytes, 32768);
    assert_string_equal(sl_sym_cstr(e.peak_instr->name), "w2");
    SlBuf top;
    sl_buf_init(&top);
    describe(&e, &top);
    assert_string_equal(sl_buf_str(&top).ptr, "w2:0:65536:output w:0:32768:parameter "
                                              "m:0:32768:parameter s:0:32768:temp");
    assert_int_equal(e.profile[5], 131088);
    sl_buf_fini(&top);
    ir_module_fini(m);
    sl_interner_fini(&names);
    sl_arena_fini(&arena);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_cases),
        cmocka_unit_test(test_memory_bad_alias),
        cmocka_unit_test(test_memory_alias_size_mismatch),
        cmocka_unit_test(test_memory_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
