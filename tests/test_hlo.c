/* test_hlo.c - the HLO lexer, parser and canonical printer (src/hlo): token tables, parse/print
 * tables (input -> canonical text), error rows (status and line:col), and the decoded IR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/base.h"
#include "hlo/hlo.h"
#include "hlo/hlo_int.h"
#include "ir/ir.h"

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

/* ---- lexer ---- */

static const struct {
    const char *text;
    const char *kinds; /* one letter per token: see kind_letter() */
} k_lex_cases[] = {
    {"%add.1 = f32[] add(x, y)", "N=I[]I(I,I)"},
    {"dimensions={0,2} /*index=5*/ a // rest\n b", "A{#,#}II"},
    {"-> <= ... ? : -12 'q' \"s\\\"t\"", ">L.?:#SS"},
    {"b01f_01io->b01f", "IB"},
    {"12ab", "B"},
    {"\"open", "B"},
    {"/* open", "B"},
    {"99999999999999999999", "B"},
    {"%", "B"},
    {"#", "B"},
};

static char
kind_letter(HloTokKind k)
{
    switch (k) {
    case HLO_TOK_EOF: return '$';
    case HLO_TOK_IDENT: return 'I';
    case HLO_TOK_NAME: return 'N';
    case HLO_TOK_ATTR: return 'A';
    case HLO_TOK_INT: return '#';
    case HLO_TOK_STRING: return 'S';
    case HLO_TOK_LBRACE: return '{';
    case HLO_TOK_RBRACE: return '}';
    case HLO_TOK_LPAREN: return '(';
    case HLO_TOK_RPAREN: return ')';
    case HLO_TOK_LSQUARE: return '[';
    case HLO_TOK_RSQUARE: return ']';
    case HLO_TOK_COMMA: return ',';
    case HLO_TOK_COLON: return ':';
    case HLO_TOK_EQUAL: return '=';
    case HLO_TOK_QUESTION: return '?';
    case HLO_TOK_ARROW: return '>';
    case HLO_TOK_LEQ: return 'L';
    case HLO_TOK_ELLIPSIS: return '.';
    case HLO_TOK_BAD: return 'B';
    }
    return '!';
}

static void
test_lexer_tokens(void **state)
{
    (void)state;
    for (size_t i = 0; i < SL_COUNTOF(k_lex_cases); i++) {
        HloLexer lx;
        HloTok t;
        char got[64];
        size_t n = 0;
        hlo_lex_init(&lx, sl_str(k_lex_cases[i].text), "t");
        do {
            hlo_lex_next(&lx, &t);
            if (t.kind != HLO_TOK_EOF)
                got[n++] = kind_letter(t.kind);
        } while (t.kind != HLO_TOK_EOF && t.kind != HLO_TOK_BAD && n + 1 < sizeof(got));
        got[n] = '\0';
        if (strcmp(got, k_lex_cases[i].kinds) != 0)
            fail_msg("lex case %zu '%s': got %s, want %s", i, k_lex_cases[i].text, got,
                     k_lex_cases[i].kinds);
    }
}

static void
test_lexer_positions(void **state)
{
    (void)state;
    HloLexer lx;
    HloTok t;
    hlo_lex_init(&lx, sl_str("a\n  /* x\n y */ %b=\n\tc"), "t");
    hlo_lex_next(&lx, &t);
    assert_int_equal(t.line, 1);
    assert_int_equal(t.col, 1);
    hlo_lex_next(&lx, &t);
    assert_int_equal(t.kind, HLO_TOK_NAME);
    assert_true(sl_str_eq_cstr(t.text, "b"));
    assert_int_equal(t.line, 3);
    assert_int_equal(t.col, 7);
    hlo_lex_next(&lx, &t);
    assert_int_equal(t.kind, HLO_TOK_EQUAL);
    hlo_lex_next(&lx, &t);
    assert_int_equal(t.line, 4);
    assert_int_equal(t.col, 2);
}

/* ---- parse then print ---- */

#define REDUCER                                                                                \
    "%add (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"                        \
    "  %y = f32[] parameter(1)\n  ROOT %s = f32[] add(%x, %y)\n}\n\n"

static const struct {
    const char *name, *in, *out;
} k_print_cases[] = {
    {"current_dump",
     "HloModule m, num_partitions=4\n\nENTRY %main (p0: f32[8]) -> f32[8] {\n"
     "  %p0 = f32[8]{0} parameter(0)\n  ROOT %n = f32[8]{0} negate(%p0)\n}\n",
     "HloModule m, num_partitions=4\n\nENTRY %main (p0: f32[8]) -> f32[8] {\n"
     "  %p0 = f32[8]{0} parameter(0)\n  ROOT %n = f32[8]{0} negate(%p0)\n}\n\n"},
    {"short_style_operand_shapes_comments",
     "HloModule m\n// a comment\nENTRY main {\n  p0 = f32[8,32] parameter(0) // trailing\n"
     "  p1 = f32[32,16] parameter(1)\n  ROOT dot = f32[8,16] dot(f32[8,32] p0, /*index=1*/"
     "f32[32,16]{1,0} p1),\n    lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
     "HloModule m\n\nENTRY %main (p0: f32[8,32], p1: f32[32,16]) -> f32[8,16] {\n"
     "  %p0 = f32[8,32] parameter(0)\n  %p1 = f32[32,16] parameter(1)\n"
     "  ROOT %dot = f32[8,16] dot(%p0, %p1), lhs_contracting_dims={1}, "
     "rhs_contracting_dims={0}\n}\n\n"},
    {"header_over_lines_and_debug_blocks",
     "HloModule m,\n  is_scheduled=true,\n  entry_computation_layout={(f32[2]{0})->f32[2]{0}},"
     "\n  replica_count=2\nFileNames\n1 \"a.py\"\nFunctionNames\n1 \"f\"\nFileLocations\n"
     "1 {file_name_id=1 function_name_id=1 line=3}\nStackFrames\n1 {file_location_id=1}\n"
     "ENTRY e {\n  ROOT p = f32[2]{0} parameter(0)\n}\n",
     "HloModule m, is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, "
     "replica_count=2\n\nENTRY %e (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2]{0} "
     "parameter(0)\n}\n\n"},
    {"no_header_last_is_entry_params_sorted",
     "c {\n  b = s32[] parameter(1)\n  a = s32[] parameter(0)\n  add = s32[] add(a, b)\n}\n",
     "HloModule module\n\nENTRY %c (a: s32[], b: s32[]) -> s32[] {\n  %b = s32[] parameter(1)\n"
     "  %a = s32[] parameter(0)\n  ROOT %add = s32[] add(%a, %b)\n}\n\n"},
    {"forward_ref_thread_omitted_shapes",
     "HloModule m\nENTRY e {\n  a = f32[4]{0} parameter(0)\n  %b= f32[4]{0} parameter(1)\n"
     "  s = add(a, b)\n  c = compare(a, b), direction=LT\n  t = tuple(s, c)\n"
     "  g = get-tuple-element(t), index=1\n"
     "  z = f32[] constant(0)\n"
     "  ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=add\n}\n"
     "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n"
     "}, execution_thread=\"host\"\n",
     NULL},
    {"literals_verbatim",
     "HloModule m\nENTRY e {\n  a = s32[2,2]{1,0} constant({ { 1, 2 },\n { 3, 4 } })\n"
     "  b = f32[1000]{0} constant({...})\n  c = pred[] constant(true)\n"
     "  ROOT t = (s32[2,2]{1,0}, f32[1000]{0}, pred[]) tuple(a, b, c)\n}\n",
     "HloModule m\n\nENTRY %e () -> (s32[2,2], f32[1000], pred[]) {\n"
     "  %a = s32[2,2]{1,0} constant({ { 1, 2 },\n { 3, 4 } })\n"
     "  %b = f32[1000]{0} constant({...})\n  %c = pred[] constant(true)\n"
     "  ROOT %t = (s32[2,2]{1,0}, f32[1000]{0}, pred[]) tuple(%a, %b, %c)\n}\n\n"},
    {"typed_attribute_values",
     "HloModule m\n" REDUCER "ENTRY e {\n  p = f32[8,8]{1,0} parameter(0)\n  z = f32[] constant(0)\n"
     "  ar = f32[8,8]{1,0} all-reduce(p), channel_id=1, replica_groups={{0,1},{2,3}}, "
     "use_global_device_ids=true, to_apply=add\n"
     "  ag = f32[8,8]{1,0} all-gather(p), replica_groups=[2,2]<=[2,2]T(1,0), dimensions={0}\n"
     "  a2 = f32[8,8]{1,0} all-to-all(p), replica_groups=[1,4]<=[4]T(0), dimensions={1}\n"
     "  cp = f32[8,8]{1,0} collective-permute(p), source_target_pairs={{0,1},{1,0}}\n"
     "  sl = f32[4,3]{1,0} slice(p), slice={[0:4], [2:8:2]}\n"
     "  s1 = f32[4,8]{1,0} slice(p), slice={[0:4:1], [0:8:1]}\n"
     "  pd = f32[10,17]{1,0} pad(p, z), padding=0_2x1_0_1\n"
     "  p2 = f32[10,9]{1,0} pad(p, z), padding=0_2_0x-1_2\n"
     "  rw = f32[4,4]{1,0} reduce-window(p, z), window={size=2x2 stride=2x2 "
     "pad=0_0x0_0 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x0}, to_apply=add\n"
     "  cv = f32[8,8]{1,0} convolution(p, p), window={stride=1x1 size=3x3 pad=1_1x-1_1 "
     "rhs_reversal=0x1}, dim_labels=b0_oi->b0, feature_group_count=1\n"
     "  ROOT cc = f32[8,8]{1,0} custom-call(p), custom_call_target=\"foo\", "
     "backend_config={\"a\": [1, {\"b\": \"}\"}]}, frontend_attributes={k=\"v\",j={\"x\":1}}, "
     "metadata={op_type=\"dot\" op_name=\"jit(f)/dot\" source_file=\"a.py\" source_line=12}, "
     "control-predecessors={ar, ag}, api_version=API_VERSION_STATUS_RETURNING, "
     "output_to_operand_aliasing={{}: (0, {})}, called_computations={add}, some_flag=-1.5e3\n"
     "}\n",
     NULL},
};

static void
test_parse_print_cases(void **state)
{
    Fixture *fx = *state;
    for (size_t i = 0; i < SL_COUNTOF(k_print_cases); i++) {
        IrModule *m = parse_ok(fx, k_print_cases[i].in);
        SlBuf a, b;
        sl_buf_init(&a);
        sl_buf_init(&b);
        hlo_print_module(m, &a);
        if (k_print_cases[i].out && strcmp(a.data, k_print_cases[i].out) != 0)
            fail_msg("%s: printed\n%s\nwant\n%s", k_print_cases[i].name, a.data,
                     k_print_cases[i].out);
        /* The printed text is a fixed point. */
        IrModule *m2 = parse_ok(fx, a.data);
        hlo_print_module(m2, &b);
        if (strcmp(a.data, b.data) != 0)
            fail_msg("%s: not a fixed point:\n%s\n---\n%s", k_print_cases[i].name, a.data,
                     b.data);
        ir_module_fini(m);
        ir_module_fini(m2);
        sl_buf_fini(&a);
        sl_buf_fini(&b);
    }
}

/* ---- errors ---- */

#define E1 "HloModule m\nENTRY e {\n"
static const struct {
    const char *name, *text;
    SlStatus want;
    uint32_t line, col;
} k_error_cases[] = {
    {"empty",              "",                                                   SL_ERR_PARSE,       1, 1 },
    {"no_computation",     "HloModule m, num_partitions=2\n",                    SL_ERR_PARSE,       2, 1 },
    {"unclosed_brace",     E1 "  ROOT p = f32[] parameter(0)\n",                 SL_ERR_PARSE,       4, 1 },
    {"unknown_opcode",     E1 "  ROOT p = f32[] frobnicate()\n}\n",              SL_ERR_PARSE,       3, 18},
    {"undefined_operand",  E1 "  a = f32[] parameter(0)\n  ROOT n = f32[] negate(b)\n}\n",
                                                                                 SL_ERR_INVALID,     4, 25},
    {"operand_defined_later", E1 "  ROOT n = f32[] negate(a)\n  a = f32[] parameter(0)\n}\n",
                                                                                 SL_ERR_INVALID,     3, 25},
    {"bad_shape_dims",     E1 "  ROOT p = f32[2,] parameter(0)\n}\n",             SL_ERR_PARSE,       3, 18},
    {"bad_dtype",          E1 "  ROOT p = f31[2] parameter(0)\n}\n",              SL_ERR_PARSE,       3, 12},
    {"missing_shape",      E1 "  ROOT p = parameter(0)\n}\n",                     SL_ERR_PARSE,       3, 12},
    {"unclosed_sharding",  E1 "  ROOT p = f32[2] parameter(0), sharding={devices=[2]0,1\n",
                                                                                 SL_ERR_PARSE,       3, 42},
    {"bad_sharding",       E1 "  ROOT p = f32[4] parameter(0), sharding={devices=[2,2]0,1}\n}\n",
                                                                                 SL_ERR_INVALID,     3, 0 },
    {"duplicate_name",     E1 "  a = f32[] parameter(0)\n  a = f32[] parameter(1)\n}\n",
                                                                                 SL_ERR_INVALID,     4, 3 },
    {"duplicate_comp",     "HloModule m\nc {\n ROOT a = f32[] parameter(0)\n}\nc {\n"
                           " ROOT a = f32[] parameter(0)\n}\n",                  SL_ERR_INVALID,     5, 1 },
    {"two_entries",        "HloModule m\nENTRY c {\n ROOT a = f32[] parameter(0)\n}\nENTRY d {\n"
                           " ROOT a = f32[] parameter(0)\n}\n",                  SL_ERR_INVALID,     5, 1 },
    {"two_roots",          E1 "  ROOT a = f32[] parameter(0)\n  ROOT b = f32[] negate(a)\n}\n",
                                                                                 SL_ERR_INVALID,     4, 3 },
    {"undefined_comp",     E1 "  ROOT a = f32[] parameter(0), to_apply=%nope\n}\n",
                                                                                 SL_ERR_INVALID,     3, 41},
    {"compact_gte",        E1 "  a = (f32[]) parameter(0)\n  ROOT b = f32[] negate(a#0)\n}\n",
                                                                                 SL_ERR_UNSUPPORTED, 4, 26},
    {"elided_operands",    E1 "  a = f32[] parameter(0)\n  ROOT t = (f32[]) tuple(a, ...(+3))\n}\n",
                                                                                 SL_ERR_PARSE,       4, 29},
    {"unterminated_string", E1 "  ROOT c = f32[] custom-call(), custom_call_target=\"x\n}\n",
                                                                                 SL_ERR_PARSE,       3, 52},
    {"bad_int_list",       E1 "  a = f32[2] parameter(0)\n  ROOT t = f32[2] transpose(a), dimensions={0 1}\n}\n",
                                                                                 SL_ERR_PARSE,       4, 47},
    {"bad_iota_perm",      E1 "  a = f32[4] parameter(0)\n  ROOT b = f32[4] all-reduce(a), replica_groups=[2,2]<=[2,2]T(0,0)\n}\n",
                                                                                 SL_ERR_INVALID,     4, 49},
    {"iota_size_mismatch", E1 "  a = f32[4] parameter(0)\n  ROOT b = f32[4] all-reduce(a), replica_groups=[2,2]<=[8]\n}\n",
                                                                                 SL_ERR_INVALID,     4, 49},
    {"bad_padding",        E1 "  a = f32[4] parameter(0)\n  ROOT b = f32[6] pad(a, a), padding=1x1\n}\n",
                                                                                 SL_ERR_PARSE,       4, 39},
    {"bad_window_rank",    E1 "  a = f32[4] parameter(0)\n  ROOT b = f32[4] reduce-window(a, a), window={size=2x2 stride=1}\n}\n",
                                                                                 SL_ERR_INVALID,     4, 57},
    {"zero_window_dilate", E1 "  a = f32[4] parameter(0)\n  ROOT b = f32[4] reduce-window(a, a), window={size=2 rhs_dilate=0}\n}\n",
                                                                                 SL_ERR_INVALID,     4, 55},
    {"zero_window_stride", E1 "  a = f32[4] parameter(0)\n  ROOT b = f32[4] reduce-window(a, a), window={stride=0 size=1}\n}\n",
                                                                                 SL_ERR_INVALID,     4, 48},
    {"duplicate_attr",     E1 "  ROOT a = f32[] parameter(0), metadata={}, metadata={}\n}\n",
                                                                                 SL_ERR_INVALID,     3, 45},
    {"mismatched_bracket", E1 "  ROOT a = f32[] parameter(0), backend_config={(]}\n}\n",
                                                                                 SL_ERR_PARSE,       3, 49},
    {"garbage_after_comp", E1 "  ROOT a = f32[] parameter(0)\n} junk\n",           SL_ERR_PARSE,       5, 1  },
    /* a braced or quoted header value ends at its closer (found by the hlo fuzzer) */
    {"header_text_after_brace", "HloModule m, frontend_attributes={a=\"1\"}es={b=\"2\"}\n"
                           "ENTRY e {\n  ROOT a = f32[] parameter(0)\n}\n",  SL_ERR_PARSE,       1, 41},
    {"header_text_after_quote", "HloModule m, x=\"q\"z\nENTRY e {\n  ROOT a = f32[] parameter(0)\n}\n",
                                                                                 SL_ERR_PARSE,       1, 19},
    /* the header's frontend_attributes: entries with string or braced values, each key once */
    {"header_frontend_unquoted", "HloModule m, frontend_attributes={k=v}\n"
                           "ENTRY e {\n  ROOT a = f32[] parameter(0)\n}\n",  SL_ERR_PARSE,       1, 37},
    {"header_frontend_dup_key", "HloModule m, frontend_attributes={k=\"1\", k=\"2\"}\n"
                           "ENTRY e {\n  ROOT a = f32[] parameter(0)\n}\n",  SL_ERR_INVALID,     1, 34},
    {"header_frontend_no_comma", "HloModule m, frontend_attributes={k=\"1\" j=\"2\"}\n"
                           "ENTRY e {\n  ROOT a = f32[] parameter(0)\n}\n",  SL_ERR_PARSE,       1, 41},
    /* what the fast paths (dims, metadata) hand back to the general ones */
    {"huge_dim",           E1 "  ROOT p = f32[12345678901234567890] parameter(0)\n}\n", SL_ERR_PARSE, 3, 16},
    {"negative_dim",       E1 "  ROOT p = f32[4,-2] parameter(0)\n}\n",           SL_ERR_PARSE,       3, 18},
    {"metadata_unbalanced", E1 "  ROOT a = f32[] parameter(0), metadata={op_name=\"x\" ]}\n}\n",
                                                                                 SL_ERR_PARSE,       3, 54},
    {"metadata_unclosed",  E1 "  ROOT a = f32[] parameter(0), metadata={op_name=\"x\"\n",
                                                                                 SL_ERR_PARSE,       3, 41},
};

static void
test_parse_errors(void **state)
{
    Fixture *fx = *state;
    int bad = 0;
    for (size_t i = 0; i < SL_COUNTOF(k_error_cases); i++) {
        IrModule *m = (IrModule *)1;
        SlError err = {0};
        SlStatus st =
            hlo_parse(&fx->arena, &fx->names, sl_str(k_error_cases[i].text), "e.hlo", &m, &err);
        bool col_ok = k_error_cases[i].col == 0 ? err.loc.col > 0 : err.loc.col == k_error_cases[i].col;
        if (st != k_error_cases[i].want || err.loc.line != k_error_cases[i].line || !col_ok ||
            m != NULL || err.msg[0] == '\0' || err.loc.path == NULL)
            print_error("%s: got %s at %u:%u (%s), want %s at %u:%u\n", k_error_cases[i].name,
                        sl_status_name(st), err.loc.line, err.loc.col, err.msg,
                        sl_status_name(k_error_cases[i].want), k_error_cases[i].line,
                        k_error_cases[i].col),
                bad++;
    }
    assert_int_equal(bad, 0);
}

static void
test_error_message_text(void **state)
{
    Fixture *fx = *state;
    IrModule *m = NULL;
    SlError err = {0};
    hlo_parse(&fx->arena, &fx->names, sl_str(E1 "  ROOT p = f32[2 parameter(0)\n}\n"), "x.hlo",
              &m, &err);
    assert_string_equal(err.loc.path, "x.hlo");
    assert_string_equal(err.msg, "expected ',' or ']' in shape, got 'parameter'");
}

/* Distinct sharding texts each materialize their device ids: one module's shardings may name
 * SHD_MAX_TOTAL_IDS ids in all (64 of 65,536 devices), and the 65th distinct one is refused
 * before it is expanded (3,000 of them took 92 s and 4.6 GB before the limit). Identical
 * texts are parsed once and cost nothing more. */
static void
test_sharding_id_budget(void **state)
{
    Fixture *fx = *state;
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_puts(&b, "HloModule m, num_partitions=65536\n\nENTRY e {\n");
    uint32_t n = 0;
    for (int i = 0; i <= 16 && n < 65; i++) /* tile dims [2^i, 2^j, 2^k] with i + j + k = 16 */
        for (int j = 0; i + j <= 16 && n < 65; j++, n++)
            sl_buf_printf(&b,
                          "  p%u = f32[8,8,8] parameter(%u), sharding={devices=[%d,%d,%d]<=[65536]}\n"
                          "  q%u = f32[8,8,8] parameter(%u), sharding={devices=[%d,%d,%d]<=[65536]}\n",
                          n, 2 * n, 1 << i, 1 << j, 1 << (16 - i - j), n, 2 * n + 1, 1 << i,
                          1 << j, 1 << (16 - i - j));
    sl_buf_puts(&b, "  ROOT r = f32[8,8,8] copy(p0)\n}\n");
    assert_false(b.failed);
    IrModule *m = NULL;
    SlError err = {0};
    SlStatus st = hlo_parse(&fx->arena, &fx->names, sl_buf_str(&b), "big.hlo", &m, &err);
    assert_int_equal(st, SL_ERR_INVALID);
    assert_null(m);
    assert_int_equal(err.loc.line, 3 + 2 * 64 + 1); /* p64, the 65th distinct text */
    assert_int_equal(err.loc.col, 54); /* the tile dims' "[" */
    assert_string_equal(err.msg, "the shardings name more than 4194304 device ids in all (the limit)");
    sl_buf_fini(&b);
}

/* The parser must stop at `len` even when the buffer goes on, and treat NUL as a bad byte. */
static void
test_length_and_nul_bytes(void **state)
{
    Fixture *fx = *state;
    static const char full[] = "HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n";
    SlStr cut = {full, sizeof(full) - 4}; /* drops "}\n" and more */
    IrModule *m = NULL;
    SlError err = {0};
    assert_int_equal(hlo_parse(&fx->arena, &fx->names, cut, "c", &m, &err), SL_ERR_PARSE);
    assert_int_equal(err.loc.line, 3);

    static const char nul[] = "HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\0\n}\n";
    SlStr with_nul = {nul, sizeof(nul) - 1};
    SlError err2 = {0};
    assert_int_equal(hlo_parse(&fx->arena, &fx->names, with_nul, "n", &m, &err2), SL_ERR_PARSE);
    assert_int_equal(err2.loc.line, 3);
    assert_int_equal(err2.loc.col, 30);
    assert_non_null(strstr(err2.msg, "NUL"));
}

/* ---- decoded IR ---- */

static const IrInstr *
find_instr(const IrComputation *c, const char *name)
{
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (strcmp(sl_sym_cstr(c->instrs[k]->name), name) == 0)
            return c->instrs[k];
    fail_msg("no instruction %s", name);
    return NULL;
}

static void
test_decoded_ir(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(fx, k_print_cases[6].in); /* typed_attribute_values */
    assert_int_equal(m->n_comps, 2);
    IrComputation *add = m->comps[0], *e = m->comps[1];
    assert_ptr_equal(m->entry, e);
    assert_true(e->is_entry && !add->is_entry);
    assert_string_equal(sl_sym_cstr(e->root->name), "cc");

    const IrInstr *ar = find_instr(e, "ar");
    assert_ptr_equal(ir_instr_called(ar, IR_ATTR_TO_APPLY), add);
    int64_t ch;
    assert_true(ir_instr_int_attr(ar, IR_ATTR_CHANNEL_ID, &ch) && ch == 1);
    const IrAttr *g = ir_instr_find_attr(ar, IR_ATTR_REPLICA_GROUPS);
    assert_false(g->u.groups->is_iota);
    assert_int_equal(g->u.groups->n_groups, 2);
    assert_int_equal(g->u.groups->ids[2], 2);
    assert_true(ir_instr_find_attr(ar, IR_ATTR_USE_GLOBAL_DEVICE_IDS)->u.b);
    assert_int_equal(ar->src_line, 11);
    assert_int_equal(ar->src_col, 3);

    const IrAttr *ig = ir_instr_find_attr(find_instr(e, "ag"), IR_ATTR_REPLICA_GROUPS);
    assert_true(ig->u.groups->is_iota);
    int64_t ids[4];
    ir_iota_expand(&ig->u.groups->iota, ids);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 2);
    assert_int_equal(ids[2], 1);
    assert_int_equal(ids[3], 3);

    const IrAttr *sl = ir_instr_find_attr(find_instr(e, "sl"), IR_ATTR_SLICE);
    assert_int_equal(sl->u.slice.n, 2);
    assert_int_equal(sl->u.slice.v[1].start, 2);
    assert_int_equal(sl->u.slice.v[1].stride, 2);
    assert_int_equal(sl->u.slice.v[0].stride, 1);

    const IrAttr *pd = ir_instr_find_attr(find_instr(e, "pd"), IR_ATTR_PADDING);
    assert_int_equal(pd->u.pad.n, 2);
    assert_int_equal(pd->u.pad.v[1].interior, 1);
    const IrAttr *p2 = ir_instr_find_attr(find_instr(e, "p2"), IR_ATTR_PADDING);
    assert_int_equal(p2->u.pad.v[1].lo, -1);

    const IrAttr *w = ir_instr_find_attr(find_instr(e, "cv"), IR_ATTR_WINDOW);
    assert_int_equal(w->u.window.n, 2);
    assert_int_equal(w->u.window.v[0].size, 3);
    assert_int_equal(w->u.window.v[1].pad_lo, -1);
    assert_true(w->u.window.v[1].reversal);
    assert_int_equal(w->u.window.v[0].lhs_dilate, 1);

    const IrInstr *cc = find_instr(e, "cc");
    const IrMetadata *md = ir_instr_metadata(cc);
    assert_true(sl_str_eq_cstr(md->op_type, "dot"));
    assert_true(sl_str_eq_cstr(md->op_name, "jit(f)/dot"));
    assert_true(sl_str_eq_cstr(md->source_file, "a.py"));
    assert_int_equal(md->source_line, 12);
    const IrAttr *fe = ir_instr_find_attr(cc, IR_ATTR_FRONTEND_ATTRIBUTES);
    assert_int_equal(fe->u.frontend.n, 2);
    assert_true(sl_str_eq_cstr(fe->u.frontend.v[1].value, "{\"x\":1}"));
    const IrAttr *bc = ir_instr_find_attr(cc, IR_ATTR_BACKEND_CONFIG);
    assert_true(sl_str_eq_cstr(bc->u.text, "{\"a\": [1, {\"b\": \"}\"}]}"));
    assert_true(sl_str_eq_cstr(ir_instr_find_attr(cc, IR_ATTR_CUSTOM_CALL_TARGET)->u.text,
                               "\"foo\""));
    const IrAttr *other = &cc->attrs[cc->n_attrs - 1];
    assert_int_equal(other->key, IR_ATTR_OTHER);
    assert_string_equal(sl_sym_cstr(other->u.other.key), "some_flag");
    assert_true(sl_str_eq_cstr(other->u.text, "-1.5e3"));
    const IrAttr *comps = ir_instr_find_attr(cc, IR_ATTR_CALLED_COMPUTATIONS);
    assert_int_equal(comps->u.comps.n, 1);
    assert_ptr_equal(comps->u.comps.v[0], add);

    /* Names read are reserved: a fresh unique name avoids them. */
    SlSym fresh = ir_module_unique_name(m, sl_str("cc"));
    assert_string_equal(sl_sym_cstr(fresh), "cc.1");
    ir_module_fini(m);
}

static void
test_forward_refs_and_inferred_shapes(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(fx, k_print_cases[4].in);
    IrComputation *e = m->comps[0], *add = m->comps[1];
    assert_ptr_equal(m->entry, e);
    assert_true(sl_str_eq_cstr(add->execution_thread, "\"host\""));
    assert_ptr_equal(ir_instr_called(e->root, IR_ATTR_TO_APPLY), add);
    const IrInstr *c = find_instr(e, "c"), *t = find_instr(e, "t"), *g = find_instr(e, "g");
    assert_int_equal(c->shape.dtype, IR_DT_PRED);
    assert_int_equal(c->shape.rank, 1);
    assert_int_equal(t->shape.n_elems, 2);
    assert_int_equal(g->shape.dtype, IR_DT_PRED);
    assert_int_equal(find_instr(e, "b")->parameter_number, 1);
    ir_module_fini(m);
}

/* XLA's parser infers the shape of a while (its operand's), a call (its callee's result) and
 * a copy of a tuple too; a call whose callee comes later still needs its shape. */
static void
test_inferred_control_flow_shapes(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(
        fx, "HloModule m\n\ncond {\n  p = (s32[], f32[4,2]) parameter(0)\n"
            "  ROOT c = pred[] constant(false)\n}\n\n"
            "body {\n  ROOT p = (s32[], f32[4,2]) parameter(0)\n}\n\n"
            "f {\n  x = f32[4,2] parameter(0)\n  ROOT y = s32[3] constant({1,2,3})\n}\n\n"
            "ENTRY e {\n  a = f32[4,2] parameter(0)\n  i = s32[] constant(0)\n"
            "  t = tuple(i, a)\n  w = while(t), condition=cond, body=body\n"
            "  k = copy(w)\n  ROOT r = call(a), to_apply=f\n}\n");
    const IrComputation *e = m->entry;
    const IrInstr *w = find_instr(e, "w"), *k = find_instr(e, "k"), *r = e->root;
    assert_int_equal(w->shape.dtype, IR_DT_TUPLE);
    assert_int_equal(w->shape.n_elems, 2);
    assert_int_equal(w->shape.elems[1].rank, 2);
    assert_int_equal(w->shape.elems[1].dims[0], 4);
    assert_int_equal(w->shape.elems[1].dims[1], 2);
    assert_int_equal(k->shape.n_elems, 2);
    assert_int_equal(k->shape.elems[0].dtype, IR_DT_S32);
    assert_int_equal(r->shape.dtype, IR_DT_S32);
    assert_int_equal(r->shape.rank, 1);
    assert_int_equal(r->shape.dims[0], 3);
    SlError err = {0};
    assert_int_equal(ir_module_check(m, "t.hlo", &err), SL_OK);
    ir_module_fini(m);
    m = NULL;
    SlStr text = sl_str("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n"
                        "  ROOT r = call(a), to_apply=later\n}\n"
                        "later {\n  ROOT x = f32[4] parameter(0)\n}\n");
    assert_int_equal(hlo_parse(&fx->arena, &fx->names, text, "t.hlo", &m, &err), SL_ERR_PARSE);
    assert_string_equal(err.msg, "expected a shape before opcode 'call'");
    assert_int_equal(err.loc.line, 4);
}

/* The fast paths (dims without spaces, one-line metadata without escapes, a repeated sharding
 * or layout) must read exactly what the general token and bracket scans read. */
static void
test_fast_paths_match_general_ones(void **state)
{
    Fixture *fx = *state;
    IrModule *m = parse_ok(
        fx, "HloModule m\n\nENTRY e {\n"
            "  p = f32[4,8]{1,0} parameter(0), sharding={devices=[2,1]<=[2]}, metadata={op_type=\"add\" "
            "op_name=\"a/b\" source_file=\"f.py\" source_line=12}\n"
            "  q = f32[ 4 , 8 ]{1,0} add(p, p), sharding={devices=[2,1]<=[2]}, metadata={op_type=\"add\"\n"
            "    op_name=\"a/b\" source_file=\"f.py\" source_line=12}\n"
            "  r = f32[<=4,8]{1,0} add(p, p), sharding={replicated}, metadata={op_name=\"x\\\"y\" "
            "source_line=7}\n"
            "  s = f32[4,8]{1,0} add(p, p), sharding={devices=[2,1]<=[2]}, "
            "metadata={source_line=9,op_name=\"hidden\"}\n"
            "  ROOT t = f32[4,8]{1,0} add(p, p), sharding={devices=[2,1]<=[2]}, "
            "metadata={source_line=21, op_name=\"seen\"}\n"
            "}\n");
    const IrComputation *e = m->entry;
    const IrInstr *p = find_instr(e, "p"), *q = find_instr(e, "q"), *r = find_instr(e, "r");
    const IrInstr *s = find_instr(e, "s"), *t = find_instr(e, "t");
    /* metadata: one pass (p) and the general scan + decode (q: a line break) agree */
    const IrMetadata *mp = ir_instr_metadata(p), *mq = ir_instr_metadata(q);
    assert_true(sl_str_eq_cstr(mp->op_type, "add") && sl_str_eq_cstr(mq->op_type, "add"));
    assert_true(sl_str_eq_cstr(mp->op_name, "a/b") && sl_str_eq_cstr(mq->op_name, "a/b"));
    assert_true(sl_str_eq_cstr(mp->source_file, "f.py"));
    assert_true(sl_str_eq_cstr(mq->source_file, "f.py"));
    assert_int_equal(mp->source_line, 12);
    assert_int_equal(mq->source_line, 12);
    const char *raw_p = "{op_type=\"add\" op_name=\"a/b\" source_file=\"f.py\" source_line=12}";
    assert_int_equal(mp->raw.len, strlen(raw_p));
    assert_memory_equal(mp->raw.ptr, raw_p, strlen(raw_p));
    assert_non_null(memchr(mq->raw.ptr, '\n', mq->raw.len));
    /* an escape: the general path, the value kept as written */
    assert_true(sl_str_eq_cstr(ir_instr_metadata(r)->op_name, "x\\\"y"));
    assert_int_equal(ir_instr_metadata(r)->source_line, 7);
    /* an unquoted value runs on to whitespace, commas included (so op_name is not seen) */
    assert_int_equal(ir_instr_metadata(s)->source_line, 9);
    assert_int_equal(ir_instr_metadata(s)->op_name.len, 0);
    assert_int_equal(ir_instr_metadata(t)->source_line, 21);
    assert_true(sl_str_eq_cstr(ir_instr_metadata(t)->op_name, "seen"));
    /* dims: the direct scan (p), the token path (q: spaces; r: a bounded dim) */
    for (const IrInstr *const *i = (const IrInstr *const[]){p, q, r, s, t, NULL}; *i; i++) {
        assert_int_equal((*i)->shape.rank, 2);
        assert_int_equal((*i)->shape.dims[0], 4);
        assert_int_equal((*i)->shape.dims[1], 8);
        assert_true(sl_str_eq_cstr((*i)->shape.layout, "{1,0}"));
    }
    assert_null(p->shape.dim_kinds);
    assert_non_null(r->shape.dim_kinds);
    assert_int_equal(r->shape.dim_kinds[0], IR_DIM_BOUNDED);
    assert_int_equal(r->shape.dim_kinds[1], IR_DIM_STATIC);
    /* one value per distinct sharding text, whichever path found it */
    assert_ptr_equal(ir_instr_sharding(p), ir_instr_sharding(q));
    assert_ptr_equal(ir_instr_sharding(p), ir_instr_sharding(s));
    assert_ptr_equal(ir_instr_sharding(p), ir_instr_sharding(t));
    assert_ptr_not_equal(ir_instr_sharding(p), ir_instr_sharding(r));
    /* names are reserved only when a new one is asked for, then all at once: p.1 is free,
     * the computation's own name is taken */
    assert_true(m->names_pending);
    assert_string_equal(sl_sym_cstr(ir_module_unique_name(m, sl_str("p"))), "p.1");
    assert_false(m->names_pending);
    assert_string_equal(sl_sym_cstr(ir_module_unique_name(m, sl_str("p.7"))), "p.2");
    assert_string_equal(sl_sym_cstr(ir_module_unique_name(m, sl_str("e"))), "e.1");
    assert_string_equal(sl_sym_cstr(ir_module_unique_name(m, sl_str("u"))), "u");
    /* and the text prints back as read */
    SlBuf b;
    sl_buf_init(&b);
    hlo_print_instr(s, &b);
    assert_string_equal(b.data, "%s = f32[4,8]{1,0} add(%p, %p), sharding={devices=[2,1]<=[2]}, "
                                "metadata={source_line=9,op_name=\"hidden\"}");
    sl_buf_fini(&b);
    ir_module_fini(m);
}

/* hlo_parse_file gives the file's pages back behind the cursor; the module is the same. */
static void
test_parse_file_releases_pages(void **state)
{
    Fixture *fx = *state;
    char path[] = "/tmp/shardlens_test_parse_fileXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    enum { N = 40000 }; /* about 6 MB: past the first 4 MB release step */
    fprintf(f, "HloModule big\n\nENTRY e {\n  p = f32[4,8]{1,0} parameter(0)\n");
    for (int i = 1; i <= N; i++)
        fprintf(f, "  a.%d = f32[4,8]{1,0} add(p, p), sharding={replicated}, metadata={op_type=\"add\" "
                   "op_name=\"layer_%d/mlp/add\" source_file=\"/work/models/m.py\" source_line=%d}\n",
                i, i, i);
    fprintf(f, "  ROOT r = f32[4,8]{1,0} add(p, p)\n}\n");
    assert_int_equal(fclose(f), 0);
    SlFileText src;
    SlError err = {0};
    assert_int_equal(sl_file_text_load(&src, path, &err), SL_OK);
    assert_true(src.text.len > (size_t)5 << 20);
    IrModule *m = NULL;
    assert_int_equal(hlo_parse_file(&fx->arena, &fx->names, &src, path, &m, &err), SL_OK);
    if (src.map) /* mapped (a regular file): at least the first step went back */
        assert_true(src.released >= ((size_t)4 << 20) - 4096);
    assert_int_equal(m->entry->n_instrs, N + 2);
    const IrInstr *last = m->entry->instrs[N];
    assert_string_equal(sl_sym_cstr(last->name), "a.40000");
    const IrMetadata *md = ir_instr_metadata(last);
    assert_true(sl_str_eq_cstr(md->op_name, "layer_40000/mlp/add"));
    assert_int_equal(md->source_line, N);
    assert_int_equal(ir_instr_metadata(m->entry->instrs[1])->source_line, 1);
    /* the module's text lives in the arena, not in the file's pages */
    assert_true(md->raw.ptr < src.text.ptr || md->raw.ptr >= src.text.ptr + src.text.len);
    ir_module_fini(m);
    sl_file_text_fini(&src);
    unlink(path);
}

/* ---- printing values built in memory ---- */

static void
test_print_attr_values(void **state)
{
    (void)state;
    SlBuf b;
    sl_buf_init(&b);

    IrWindowDim wd[2] = {{3, 1, 0, 0, 1, 1, false}, {1, 2, 0, 1, 1, 2, false}};
    IrAttr w = {.key = IR_ATTR_WINDOW};
    w.u.window.n = 2;
    w.u.window.v = wd;
    hlo_print_attr_value(&w, &b);
    assert_string_equal(b.data, "{size=3x1 stride=1x2 pad=0_0x0_1 rhs_dilate=1x2}");

    sl_buf_clear(&b);
    IrPadDim pads[2] = {{0, 2, 0}, {1, 1, 0}};
    IrAttr p = {.key = IR_ATTR_PADDING};
    p.u.pad.n = 2;
    p.u.pad.v = pads;
    hlo_print_attr_value(&p, &b);
    assert_string_equal(b.data, "0_2x1_1");

    sl_buf_clear(&b);
    int64_t dims[2] = {2, 4}, reshape[2] = {4, 2}, perm[2] = {0, 1};
    IrReplicaGroups rg = {.is_iota = true,
                          .iota = {.n_dims = 2, .dims = dims, .n_reshape = 2, .reshape = reshape,
                                   .perm = perm}};
    IrAttr g = {.key = IR_ATTR_REPLICA_GROUPS};
    g.u.groups = &rg;
    hlo_print_attr_value(&g, &b);
    assert_string_equal(b.data, "[2,4]<=[4,2]"); /* identity transpose is not printed */

    sl_buf_clear(&b);
    IrAttr e = {.key = IR_ATTR_REPLICA_GROUPS}; /* no groups: all devices */
    hlo_print_attr_value(&e, &b);
    assert_string_equal(b.data, "{}");
    sl_buf_fini(&b);
}

/* Parses `text` and prints it into *printed; asserts the print reads back and prints the same.
 * Returns the module read back (the caller releases it and *printed). */
static IrModule *
print_stably(Fixture *fx, const char *text, SlBuf *printed)
{
    IrModule *m = parse_ok(fx, text);
    SlBuf again_text;
    sl_buf_init(printed);
    sl_buf_init(&again_text);
    hlo_print_module(m, printed);
    IrModule *again = parse_ok(fx, printed->data);
    hlo_print_module(again, &again_text);
    assert_string_equal(printed->data, again_text.data);
    ir_module_fini(m);
    sl_buf_fini(&again_text);
    return again;
}

/* A parameter whose name is not an identifier ("%0") is printed as %0 in the signature, so the
 * text parses back (found by the hlo fuzzer: "(0: f32[8])" did not). */
static void
test_signature_names_round_trip(void **state)
{
    SlBuf a;
    IrModule *again = print_stably(
        *state, "HloModule m\n\nENTRY %e {\n  ROOT %0 = f32[8] parameter(0)\n}\n", &a);
    assert_non_null(strstr(a.data, "ENTRY %e (%0: f32[8]) -> f32[8] {"));
    ir_module_fini(again);
    sl_buf_fini(&a);
}

/* A module name that is no bare identifier keeps its '%' when printed (found by the hlo
 * fuzzer: `HloModule 1m` read back as a malformed number). */
static void
test_module_name_round_trip(void **state)
{
    SlBuf a;
    IrModule *again = print_stably(
        *state, "HloModule %1m\n\nENTRY %e {\n  ROOT %p = f32[8] parameter(0)\n}\n", &a);
    assert_memory_equal(a.data, "HloModule %1m\n", 14);
    assert_string_equal(sl_sym_cstr(again->name), "1m");
    ir_module_fini(again);
    sl_buf_fini(&a);
}

/* XLA's attribute names, decoded or kept verbatim, are known; a typo is not, and gets the
 * nearest name within one edit (short names) or two (longer ones). */
static void
test_attr_vocabulary(void **state)
{
    (void)state;
    const char *xla[] = {"sharding", "metadata", "custom_call_has_side_effect", "algorithm",
                         "statistics", "operand_precision", "control-predecessors"};
    for (size_t k = 0; k < SL_COUNTOF(xla); k++)
        assert_true(hlo_attr_is_xla(xla[k]));
    assert_false(hlo_attr_is_xla("shardIng"));
    assert_false(hlo_attr_is_xla("zzz"));
    assert_string_equal(hlo_attr_nearest("shardIng"), "sharding");
    assert_string_equal(hlo_attr_nearest("shardng"), "sharding");
    assert_string_equal(hlo_attr_nearest("metdata"), "metadata");
    assert_string_equal(hlo_attr_nearest("lhs_contracting_dim"), "lhs_contracting_dims");
    assert_string_equal(hlo_attr_nearest("knd"), "kind");
    assert_null(hlo_attr_nearest("kindest")); /* three edits from "kind" */
    assert_null(hlo_attr_nearest("zzz"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lexer_tokens),
        cmocka_unit_test(test_lexer_positions),
        cmocka_unit_test_setup_teardown(test_parse_print_cases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_message_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sharding_id_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_length_and_nul_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decoded_ir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inferred_control_flow_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forward_refs_and_inferred_shapes, setup,
                                        teardown),
        cmocka_unit_test(test_print_attr_values),
        cmocka_unit_test(test_attr_vocabulary),
        cmocka_unit_test_setup_teardown(test_signature_names_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_module_name_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fast_paths_match_general_ones, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_file_releases_pages, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
