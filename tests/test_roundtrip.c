/* test_roundtrip.c - parse/print/parse/print over every shared HLO module: the XLA conformance
 * cases (the "hlo" field of each line of conformance/xla-spmd-public.jsonl) and
 * real-hlo/<name>.hlo. The second print must equal the first byte for byte and the two parses must
 * give the same IR. The modules are read from SHARDLENS_SHARED_DIR at run time and never
 * copied into the repository. Bar: >= 99 % pass, and every failure is a reported error. */
#include <dirent.h>
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

typedef struct Tally {
    int total, passed;
} Tally;

/* ---- a minimal JSON string-field reader (only what this test needs) ---- */

static int
hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool
read_hex4(const char *p, const char *end, uint32_t *out)
{
    if (end - p < 4)
        return false;
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int d = hex_digit(p[k]);
        if (d < 0)
            return false;
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return true;
}

static void
put_utf8(SlBuf *out, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    sl_buf_append(out, b, n);
}

/* Decodes the JSON string starting at *pp (on the opening quote) into `out` (may be NULL to
 * skip). Leaves *pp after the closing quote. False on malformed input. */
static bool
json_string(const char **pp, const char *end, SlBuf *out)
{
    const char *p = *pp + 1;
    while (p < end && *p != '"') {
        char c = *p++;
        if (c != '\\') {
            if (out)
                sl_buf_putc(out, c);
            continue;
        }
        if (p >= end)
            return false;
        char e = *p++;
        uint32_t cp = 0;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (!read_hex4(p, end, &cp))
                return false;
            p += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                uint32_t lo;
                if (read_hex4(p + 2, end, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            break;
        default: return false;
        }
        if (out)
            put_utf8(out, cp);
    }
    if (p >= end)
        return false;
    *pp = p + 1;
    return true;
}

/* Finds the top-level string field `key` of the JSON object on one line and decodes it. */
static bool
json_field(const char *p, const char *end, const char *key, SlBuf *out)
{
    int depth = 0;
    size_t klen = strlen(key);
    while (p < end) {
        char c = *p;
        if (c == '{' || c == '[') {
            depth++;
            p++;
        } else if (c == '}' || c == ']') {
            depth--;
            p++;
        } else if (c == '"') {
            const char *s = p;
            if (!json_string(&p, end, NULL))
                return false;
            bool match = depth == 1 && (size_t)(p - s) == klen + 2 && !memcmp(s + 1, key, klen);
            const char *q = p;
            while (q < end && (*q == ' ' || *q == '\t'))
                q++;
            if (match && q < end && *q == ':') {
                q++;
                while (q < end && (*q == ' ' || *q == '\t'))
                    q++;
                return q < end && *q == '"' && json_string(&q, end, out);
            }
        } else {
            p++;
        }
    }
    return false;
}

/* ---- round trip ---- */

static bool
same_ir(const IrModule *a, const IrModule *b, char *why, size_t cap)
{
    if (a->n_comps != b->n_comps || a->n_header != b->n_header) {
        snprintf(why, cap, "computation or header count differs");
        return false;
    }
    for (uint32_t c = 0; c < a->n_comps; c++) {
        const IrComputation *ca = a->comps[c], *cb = b->comps[c];
        if (ca->n_instrs != cb->n_instrs || ca->is_entry != cb->is_entry ||
            ca->name != cb->name) {
            snprintf(why, cap, "computation %s differs", sl_sym_cstr(ca->name));
            return false;
        }
        for (uint32_t k = 0; k < ca->n_instrs; k++) {
            const IrInstr *x = ca->instrs[k], *y = cb->instrs[k];
            bool ok = x->name == y->name && x->op == y->op &&
                      ir_shape_equal(&x->shape, &y->shape, true) &&
                      x->n_operands == y->n_operands && x->n_attrs == y->n_attrs &&
                      (ca->root == x) == (cb->root == y) &&
                      x->parameter_number == y->parameter_number;
            for (uint32_t o = 0; ok && o < x->n_operands; o++)
                ok = x->operands[o]->name == y->operands[o]->name;
            for (uint32_t t = 0; ok && t < x->n_attrs; t++)
                ok = x->attrs[t].key == y->attrs[t].key &&
                     (x->attrs[t].key != IR_ATTR_OTHER ||
                      x->attrs[t].u.other.key == y->attrs[t].u.other.key);
            if (!ok) {
                snprintf(why, cap, "instruction %s differs", sl_sym_cstr(x->name));
                return false;
            }
        }
    }
    return true;
}

static void
first_diff(SlStr a, SlStr b, char *why, size_t cap)
{
    size_t n = a.len < b.len ? a.len : b.len, k = 0, line = 1;
    while (k < n && a.ptr[k] == b.ptr[k])
        line += a.ptr[k++] == '\n';
    snprintf(why, cap, "prints differ at line %zu byte %zu", line, k);
}

/* One module: 0 when it round-trips, else prints why. */
static void
roundtrip_one(const char *name, SlStr text, Tally *t)
{
    SlArena arena;
    SlInterner names;
    sl_arena_init(&arena);
    sl_interner_init(&names, &arena);
    SlBuf p1, p2;
    sl_buf_init(&p1);
    sl_buf_init(&p2);
    IrModule *m1 = NULL, *m2 = NULL;
    SlError err = {0};
    char why[SL_ERROR_MSG_BYTES + 64] = "";
    t->total++;
    if (hlo_parse(&arena, &names, text, name, &m1, &err) != SL_OK) {
        assert_true(err.msg[0] != '\0'); /* a failure must say why */
        snprintf(why, sizeof(why), "parse: %s:%u:%u: %s: %s", name, err.loc.line, err.loc.col,
                 sl_status_name(err.status), err.msg);
    } else {
        hlo_print_module(m1, &p1);
        if (hlo_parse(&arena, &names, sl_buf_str(&p1), "<printed>", &m2, &err) != SL_OK) {
            snprintf(why, sizeof(why), "reparse: %u:%u: %s", err.loc.line, err.loc.col, err.msg);
        } else {
            hlo_print_module(m2, &p2);
            if (!sl_str_eq(sl_buf_str(&p1), sl_buf_str(&p2)))
                first_diff(sl_buf_str(&p1), sl_buf_str(&p2), why, sizeof(why));
            else
                same_ir(m1, m2, why, sizeof(why));
        }
    }
    if (why[0])
        printf("FAIL %s: %s\n", name, why);
    else
        t->passed++;
    ir_module_fini(m1);
    ir_module_fini(m2);
    sl_buf_fini(&p1);
    sl_buf_fini(&p2);
    sl_interner_fini(&names);
    sl_arena_fini(&arena);
}

static const char *
shared_dir(void)
{
    const char *d = getenv("SHARDLENS_SHARED_DIR");
    if (!d || !*d) {
        fprintf(stderr, "\n*** SHARDLENS_SHARED_DIR is not set: SKIPPING the round-trip suite "
                        "over the shared HLO modules ***\n\n");
        return NULL;
    }
    return d;
}

static void
roundtrip_jsonl(const char *path, Tally *t)
{
    SlBuf file, hlo, id;
    SlError err = {0};
    sl_buf_init(&file);
    sl_buf_init(&hlo);
    sl_buf_init(&id);
    if (sl_file_read(path, &file, &err) != SL_OK)
        fail_msg("cannot read %s: %s", path, err.msg);
    const char *p = file.data, *end = file.data + file.len;
    int lineno = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        lineno++;
        if (eol > p) {
            sl_buf_clear(&hlo);
            sl_buf_clear(&id);
            if (!json_field(p, eol, "hlo", &hlo))
                fail_msg("%s:%d: no \"hlo\" string field", path, lineno);
            char name[300];
            if (json_field(p, eol, "id", &id))
                snprintf(name, sizeof(name), "jsonl:%d:%s", lineno, id.data);
            else
                snprintf(name, sizeof(name), "jsonl:%d", lineno);
            sl_buf_append(&hlo, "", 0);
            roundtrip_one(name, sl_buf_str(&hlo), t);
        }
        p = eol + 1;
    }
    sl_buf_fini(&file);
    sl_buf_fini(&hlo);
    sl_buf_fini(&id);
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
roundtrip_dir(const char *dir, Tally *t)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open directory %s", dir);
    char *names[512];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < SL_COUNTOF(names)) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".hlo") == 0)
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), cmp_str); /* readdir order is not stable */
    for (size_t k = 0; k < n; k++) {
        char path[4096];
        int len = snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
        if (len < 0 || (size_t)len >= sizeof(path))
            fail_msg("path too long: %s/%s", dir, names[k]);
        SlBuf file;
        SlError err = {0};
        sl_buf_init(&file);
        if (sl_file_read(path, &file, &err) != SL_OK)
            fail_msg("cannot read %s: %s", path, err.msg);
        roundtrip_one(path, sl_buf_str(&file), t);
        sl_buf_fini(&file);
        free(names[k]);
    }
}

static void
test_roundtrip_shared_modules(void **state)
{
    (void)state;
    const char *dir = shared_dir();
    if (!dir) {
        skip();
        return;
    }
    Tally t = {0, 0};
    char path[4096];
    snprintf(path, sizeof(path), "%s/conformance/xla-spmd-public.jsonl", dir);
    roundtrip_jsonl(path, &t);
    snprintf(path, sizeof(path), "%s/real-hlo", dir);
    roundtrip_dir(path, &t);
    printf("round trip: %d of %d modules byte-identical (%.1f%%)\n", t.passed, t.total,
           t.total ? 100.0 * t.passed / t.total : 0.0);
    assert_true(t.total > 0);
    if ((long)t.passed * 100 < (long)t.total * 99)
        fail_msg("round trip below 99%%: %d of %d", t.passed, t.total);
}

static void
test_json_field_reader(void **state)
{
    (void)state;
    const char *line = "{\"id\": \"a\\\"hlo\\\": x\", \"n\": [1, {\"hlo\": \"no\"}], "
                       "\"hlo\": \"A\\nB\\t\\u00e9\\\\\"}";
    SlBuf b;
    sl_buf_init(&b);
    assert_true(json_field(line, line + strlen(line), "hlo", &b));
    assert_string_equal(b.data, "A\nB\t\xc3\xa9\\");
    sl_buf_fini(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_field_reader),
        cmocka_unit_test(test_roundtrip_shared_modules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
