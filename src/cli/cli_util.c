/* cli_util.c - option parsing, generated help, input loading and diagnostics for every
 * command. Owns: the CLI's only stderr formatting (`FILE:LINE:COL: error: ...` plus the source
 * line and a caret) and the status -> exit code mapping. Does not own: what a command does. */
#include "cli/cli_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/hlo.h"
#include "sharding/shd.h"

/* ---- option parsing -------------------------------------------------------------------- */

static const CliOpt k_help_opt = {-1, 'h', "help", NULL, "show this help and exit", false};
/* Every command takes it; main() prints the timings to stderr when the command is done. */
static const CliOpt k_time_opt = {
    -2, 0, "time-phases", NULL, "print the time of each phase (read, parse, ...) to stderr", false};

static const CliOpt *
find_long(const CliCommand *cmd, const char *name, size_t len)
{
    if (len == strlen(k_help_opt.long_name) && !strncmp(name, k_help_opt.long_name, len))
        return &k_help_opt;
    if (len == strlen(k_time_opt.long_name) && !strncmp(name, k_time_opt.long_name, len))
        return &k_time_opt;
    for (uint32_t i = 0; i < cmd->n_opts; i++) {
        const char *ln = cmd->opts[i].long_name;
        if (ln && strlen(ln) == len && !strncmp(ln, name, len))
            return &cmd->opts[i];
    }
    return NULL;
}

static const CliOpt *
find_short(const CliCommand *cmd, char c)
{
    if (c == k_help_opt.short_name)
        return &k_help_opt;
    for (uint32_t i = 0; i < cmd->n_opts; i++)
        if (cmd->opts[i].short_name && cmd->opts[i].short_name == c)
            return &cmd->opts[i];
    return NULL;
}

/* Records one option occurrence; `value` is NULL for flags. */
static CliParse
add_opt(const CliCommand *cmd, CliArgs *out, const CliOpt *o, const char *spelled,
        const char *value)
{
    if (o == &k_help_opt)
        return CLI_PARSE_HELP;
    if (o == &k_time_opt) {
        out->time_phases = true;
        return CLI_PARSE_OK;
    }
    if (!o->repeatable) {
        for (uint32_t i = 0; i < out->n_opts; i++) {
            if (out->opts[i].opt == o) {
                cli_usage_error(cmd, "option %s given more than once", spelled);
                return CLI_PARSE_ERROR;
            }
        }
    }
    out->opts[out->n_opts].opt = o;
    out->opts[out->n_opts].value = value;
    out->n_opts++;
    return CLI_PARSE_OK;
}

/* Handles argv[*i], an option; may consume the next word as its value. */
static CliParse
parse_option(const CliCommand *cmd, int argc, char **argv, int *i, CliArgs *out)
{
    const char *arg = argv[*i];
    const char *inline_value = NULL;
    const CliOpt *o;
    if (arg[1] == '-') {
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        o = find_long(cmd, name, len);
        inline_value = eq ? eq + 1 : NULL;
    } else {
        o = find_short(cmd, arg[1]);
        inline_value = arg[2] ? arg + 2 : NULL;
    }
    if (!o) {
        cli_usage_error(cmd, "unknown option '%s'", arg);
        return CLI_PARSE_ERROR;
    }
    if (!o->value_name) {
        if (inline_value) {
            cli_usage_error(cmd, "option '%s' takes no value", arg);
            return CLI_PARSE_ERROR;
        }
        return add_opt(cmd, out, o, arg, NULL);
    }
    if (!inline_value) {
        if (*i + 1 >= argc) {
            cli_usage_error(cmd, "option '%s' needs a value (%s)", arg, o->value_name);
            return CLI_PARSE_ERROR;
        }
        inline_value = argv[++*i];
    }
    return add_opt(cmd, out, o, arg, inline_value);
}

CliParse
cli_args_parse(const CliCommand *cmd, int argc, char **argv, CliArgs *out)
{
    memset(out, 0, sizeof(*out));
    out->cmd = cmd;
    size_t n = argc > 0 ? (size_t)argc : 1;
    out->pos = calloc(n, sizeof(*out->pos));
    out->opts = calloc(n, sizeof(*out->opts));
    if (!out->pos || !out->opts) {
        fprintf(stderr, "shardlens: error: out of memory\n");
        return CLI_PARSE_ERROR;
    }
    bool only_positionals = false;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!only_positionals && strcmp(arg, "--") == 0) {
            only_positionals = true;
        } else if (!only_positionals && arg[0] == '-' && arg[1] != '\0') {
            CliParse r = parse_option(cmd, argc, argv, &i, out);
            if (r != CLI_PARSE_OK)
                return r;
        } else {
            out->pos[out->n_pos++] = arg;
        }
    }
    if (out->n_pos < cmd->min_pos) {
        cli_usage_error(cmd, "missing argument (usage: shardlens %s %s)", cmd->name, cmd->usage);
        return CLI_PARSE_ERROR;
    }
    if (out->n_pos > cmd->max_pos) {
        cli_usage_error(cmd, "unexpected argument '%s'", out->pos[cmd->max_pos]);
        return CLI_PARSE_ERROR;
    }
    return CLI_PARSE_OK;
}

void
cli_args_fini(CliArgs *a)
{
    free(a->pos);
    free(a->opts);
    a->pos = NULL;
    a->opts = NULL;
    a->n_pos = a->n_opts = 0;
}

const char *
cli_args_value(const CliArgs *a, int id)
{
    const char *v = NULL;
    for (uint32_t i = 0; i < a->n_opts; i++)
        if (a->opts[i].opt->id == id)
            v = a->opts[i].value;
    return v;
}

bool
cli_args_has(const CliArgs *a, int id)
{
    for (uint32_t i = 0; i < a->n_opts; i++)
        if (a->opts[i].opt->id == id)
            return true;
    return false;
}

bool
cli_parse_count(const CliCommand *cmd, const char *opt, const char *text, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < 1) {
        cli_usage_error(cmd, "%s expects a positive integer, got '%s'", opt, text);
        return false;
    }
    *out = v;
    return true;
}

bool
cli_parse_devices(const CliCommand *cmd, const char *opt, const char *text, int64_t *out)
{
    if (!cli_parse_count(cmd, opt, text, out))
        return false;
    if (*out > IR_MAX_DEVICES) {
        cli_usage_error(cmd, "%s %s is more than %d devices (the limit)", opt, text,
                        IR_MAX_DEVICES);
        return false;
    }
    return true;
}

/* ---- help ---------------------------------------------------------------------------- */

static void
print_opt(const CliOpt *o, FILE *out)
{
    char left[64];
    int n = 0;
    if (o->short_name)
        n = snprintf(left, sizeof(left), "-%c, --%s", o->short_name, o->long_name);
    else
        n = snprintf(left, sizeof(left), "    --%s", o->long_name);
    if (o->value_name && n > 0 && (size_t)n < sizeof(left))
        snprintf(left + n, sizeof(left) - (size_t)n, " %s", o->value_name);
    fprintf(out, "  %-28s %s%s\n", left, o->help, o->repeatable ? " (repeatable)" : "");
}

void
cli_print_command_help(const CliCommand *cmd, FILE *out)
{
    fprintf(out, "usage: shardlens %s %s\n\n", cmd->name, cmd->usage);
    if (!cmd->run)
        fprintf(out, "(not yet available in this version: running it exits with status 3)\n\n");
    fputs(cmd->description, out);
    fputs("\noptions:\n", out);
    for (uint32_t i = 0; i < cmd->n_opts; i++)
        print_opt(&cmd->opts[i], out);
    print_opt(&k_time_opt, out);
    print_opt(&k_help_opt, out);
    if (cmd->help_extra)
        cmd->help_extra(out);
}

int
cli_usage_error(const CliCommand *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "shardlens %s: error: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'shardlens %s --help'.\n", cmd->name);
    return CLI_EXIT_BAD_INPUT;
}

/* ---- input ------------------------------------------------------------------------------ */

SlStatus
cli_input_load_timed(CliInput *in, const char *path, CliPhases *phases, SlError *err)
{
    memset(in, 0, sizeof(*in));
    in->path = path;
    in->display = strcmp(path, "-") == 0 ? "<stdin>" : path;
    in->phases = phases;
    sl_arena_init(&in->arena);
    sl_interner_init(&in->names, &in->arena);
    cli_phase_begin(phases, CLI_PHASE_READ);
    SlStatus st = sl_file_text_load(&in->src, path, err);
    cli_phase_end(phases, CLI_PHASE_READ, in->src.text.len);
    if (st) {
        err->loc.path = in->display;
        return st;
    }
    cli_phase_begin(phases, CLI_PHASE_PARSE);
    st = hlo_parse_file(&in->arena, &in->names, &in->src, in->display, &in->module, err);
    /* The module holds copies of what it needs: the text's memory can go until a diagnostic
     * or the trace looks at it again. */
    sl_file_text_release(&in->src);
    cli_phase_end(phases, CLI_PHASE_PARSE, in->src.text.len);
    return st;
}

SlStatus
cli_input_load(CliInput *in, const char *path, SlError *err)
{
    return cli_input_load_timed(in, path, NULL, err);
}

/* One name XLA's HLO text does not have, where it was first seen and how often. */
typedef struct UnknownAttr {
    SlSym key;
    const IrInstr *first;
    uint32_t count;
} UnknownAttr;

/* Warns once per distinct attribute name that is not XLA's (a typo such as `shardIng=` would
 * otherwise leave its instruction unannotated without a word), at its first instruction. */
static void
warn_unknown_attrs(const CliInput *in)
{
    enum { MAX_NAMES = 8 }; /* distinct names warned about; the rest are counted */
    UnknownAttr seen[MAX_NAMES];
    uint32_t n_seen = 0, n_more = 0;
    const IrModule *m = in->module;
    for (uint32_t c = 0; c < m->n_comps; c++) {
        const IrComputation *comp = m->comps[c];
        for (uint32_t i = 0; i < comp->n_instrs; i++) {
            const IrInstr *ins = comp->instrs[i];
            for (uint16_t k = 0; k < ins->n_attrs; k++) {
                const IrAttr *a = &ins->attrs[k];
                if (a->key != IR_ATTR_OTHER || hlo_attr_is_xla(a->u.other.key->text))
                    continue;
                uint32_t j = 0;
                while (j < n_seen && seen[j].key != a->u.other.key)
                    j++;
                if (j < n_seen)
                    seen[j].count++;
                else if (n_seen < MAX_NAMES)
                    seen[n_seen++] = (UnknownAttr){a->u.other.key, ins, 1};
                else
                    n_more++;
            }
        }
    }
    for (uint32_t j = 0; j < n_seen; j++) {
        const IrInstr *ins = seen[j].first;
        const char *name = seen[j].key->text;
        const char *near = hlo_attr_nearest(name);
        fprintf(stderr, "%s:%u:%u: warning: instruction %%%s: '%s=' is not an XLA attribute; "
                "shardlens keeps it but reads nothing from it", in->display, ins->src_line,
                ins->src_col, ins->name->text, name);
        if (near)
            fprintf(stderr, " (did you mean '%s='?)", near);
        if (seen[j].count > 1)
            fprintf(stderr, " [%u instructions]", seen[j].count);
        fputc('\n', stderr);
    }
    if (n_more)
        fprintf(stderr, "%s: warning: %u more attributes of names XLA does not have\n",
                in->display, n_more);
}

SlStatus
cli_input_check(CliInput *in, SlError *err)
{
    cli_phase_begin(in->phases, CLI_PHASE_CHECK);
    SlStatus st = ir_module_check(in->module, in->display, err);
    cli_phase_end(in->phases, CLI_PHASE_CHECK, 0);
    if (st == SL_OK)
        warn_unknown_attrs(in);
    return st;
}

void
cli_input_fini(CliInput *in)
{
    if (in->module)
        ir_module_fini(in->module);
    in->module = NULL;
    sl_interner_fini(&in->names);
    sl_arena_fini(&in->arena);
    sl_file_text_fini(&in->src);
}

/* ---- diagnostics ------------------------------------------------------------------------- */

int
cli_exit_code(SlStatus st)
{
    switch (st) {
    case SL_OK:
        return CLI_EXIT_OK;
    case SL_ERR_PARSE:
    case SL_ERR_INVALID:
    case SL_ERR_IO:
    case SL_ERR_NOMEM:
    case SL_ERR_DB:
        return CLI_EXIT_BAD_INPUT;
    case SL_ERR_UNSUPPORTED:
    case SL_ERR_INTERNAL:
        return CLI_EXIT_UNSUPPORTED;
    }
    return CLI_EXIT_BAD_INPUT;
}

/* Prints line `line` (1-based) of `text` and a caret under column `col`, keeping tabs so the
 * caret lines up. */
static void
print_caret(SlStr text, uint32_t line, uint32_t col)
{
    const char *p = text.ptr, *end = text.ptr + text.len;
    for (uint32_t l = 1; l < line && p < end; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    if (p >= end)
        return;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    size_t len = eol ? (size_t)(eol - p) : (size_t)(end - p);
    if (len && p[len - 1] == '\r')
        len--;
    fprintf(stderr, "%.*s\n", (int)len, p);
    for (uint32_t c = 1; c < col && c - 1 < len; c++)
        fputc(p[c - 1] == '\t' ? '\t' : ' ', stderr);
    fputs("^\n", stderr);
}

static bool g_stdout_reported; /* cli_report named SL_STDOUT_NAME (cli_stdout_close) */

int
cli_report(const SlError *err, const CliInput *in)
{
    const SlSrcLoc *l = &err->loc;
    if (l->path && strcmp(l->path, SL_STDOUT_NAME) == 0)
        g_stdout_reported = true;
    const char *what = err->status == SL_ERR_INTERNAL ? "internal error (a shardlens bug): " : "";
    if (l->path && l->line && l->col)
        fprintf(stderr, "%s:%u:%u: error: %s%s\n", l->path, l->line, l->col, what, err->msg);
    else if (l->path && l->line)
        fprintf(stderr, "%s:%u: error: %s%s\n", l->path, l->line, what, err->msg);
    else if (l->path)
        fprintf(stderr, "%s: error: %s%s\n", l->path, what, err->msg);
    else
        fprintf(stderr, "shardlens: error: %s%s\n", what, err->msg);
    if (in && l->path && l->line && l->col && strcmp(l->path, in->display) == 0)
        print_caret(in->src.text, l->line, l->col);
    return cli_exit_code(err->status == SL_OK ? SL_ERR_INTERNAL : err->status);
}

/* SlBuf.spill for CliOutput: opens the file at the first piece. A failure is kept in
 * o->file.err (sticky) and reported by cli_output_finish; later pieces are dropped. */
static void
output_spill(void *ctx, const char *p, size_t n)
{
    CliOutput *o = ctx;
    cli_phase_begin(o->phases, CLI_PHASE_WRITE);
    if (!o->is_open) {
        sl_out_open(&o->file, o->path);
        o->is_open = true;
    }
    sl_out_write(&o->file, p, n);
    cli_phase_end(o->phases, CLI_PHASE_WRITE, n);
}

void
cli_output_init(CliOutput *o, const char *path, CliPhases *phases)
{
    memset(o, 0, sizeof(*o));
    sl_buf_init(&o->text);
    o->text.spill = output_spill;
    o->text.spill_ctx = o;
    o->path = path ? path : "-";
    o->phases = phases;
}

int
cli_output_finish(CliOutput *o, const CliInput *in)
{
    SlError err = {0};
    if (o->text.failed) {
        SlSrcLoc nowhere = {o->path, 0, 0};
        sl_fail(&err, SL_ERR_NOMEM, nowhere, "out of memory printing the module");
        return cli_report(&err, in);
    }
    /* Also opens the file when the text was too short to spill before (or empty). */
    output_spill(o, o->text.data ? o->text.data : "", o->text.len);
    sl_buf_clear(&o->text);
    cli_phase_begin(o->phases, CLI_PHASE_WRITE);
    SlStatus st = o->file.err.status;
    if (st)
        sl_out_abort(&o->file);
    else
        st = sl_out_commit(&o->file);
    cli_phase_end(o->phases, CLI_PHASE_WRITE, 0);
    o->is_open = false;
    if (st)
        return cli_report(&o->file.err, in);
    return CLI_EXIT_OK;
}

void
cli_output_fini(CliOutput *o)
{
    if (o->is_open)
        sl_out_abort(&o->file);
    o->is_open = false;
    sl_buf_fini(&o->text);
}

/* The device counts shardings name: a tiled sharding covers all of them; a maximal one
 * names one device, so the count is at least one more than its id. */
enum { MAX_COUNTS = 4 };
typedef struct DevCounts {
    int64_t counts[MAX_COUNTS]; /* distinct tiled counts, in IR order */
    const IrInstr *first[MAX_COUNTS];
    uint32_t n_counts;
    bool more_counts;     /* more distinct counts than MAX_COUNTS */
    int64_t max_device;   /* largest maximal device id, -1: none */
    const IrInstr *max_at;
    int64_t max_tiled;    /* largest device id of a tile assignment, -1: none */
    const IrInstr *tiled_at;
    SlMap seen;           /* tiled shardings whose ids were looked at (shared texts: once) */
} DevCounts;

static void
add_counts(DevCounts *c, const ShdSharding *s, const IrInstr *at)
{
    if (s->kind == SHD_TUPLE) {
        for (uint32_t k = 0; k < s->n_leaves; k++)
            add_counts(c, s->leaves[k], at);
        return;
    }
    if (s->kind == SHD_MAXIMAL && s->device > c->max_device) {
        c->max_device = s->device;
        c->max_at = at;
    }
    if (s->kind != SHD_TILED)
        return;
    int64_t n = shd_device_count(s);
    uint64_t dummy;
    if (!sl_map_get(&c->seen, SL_MAP_KEY(s), &dummy)) {
        (void)sl_map_put(&c->seen, SL_MAP_KEY(s), 1); /* a failed put only looks again */
        for (int64_t i = 0; i < n; i++)
            if (s->devices[i] > c->max_tiled) {
                c->max_tiled = s->devices[i];
                c->tiled_at = at;
            }
    }
    for (uint32_t k = 0; k < c->n_counts; k++)
        if (c->counts[k] == n)
            return;
    if (c->n_counts == MAX_COUNTS) {
        c->more_counts = true;
        return;
    }
    c->counts[c->n_counts] = n;
    c->first[c->n_counts++] = at;
}

SlStatus
cli_devices_from_shardings(const IrModule *m, const char *path, int64_t *n, SlError *err)
{
    DevCounts c = {.max_device = -1, .max_tiled = -1};
    *n = 0;
    sl_map_init(&c.seen);
    for (uint32_t k = 0; k < m->n_comps; k++) {
        const IrComputation *comp = m->comps[k];
        for (uint32_t i = 0; i < comp->n_instrs; i++) {
            const ShdSharding *s = ir_instr_sharding(comp->instrs[i]);
            if (s)
                add_counts(&c, s, comp->instrs[i]);
        }
    }
    sl_map_fini(&c.seen);
    bool maximal_too_far = c.n_counts == 1 && c.max_device >= c.counts[0];
    if (c.n_counts > 1 || maximal_too_far) {
        const IrInstr *at = maximal_too_far ? c.max_at : c.first[1];
        SlBuf b;
        sl_buf_init(&b);
        for (uint32_t k = 0; k < c.n_counts; k++)
            sl_buf_printf(&b, "%s%lld (%%%s first)", k ? ", " : "", (long long)c.counts[k],
                          sl_sym_cstr(c.first[k]->name));
        if (c.more_counts)
            sl_buf_puts(&b, ", and more");
        if (maximal_too_far)
            sl_buf_printf(&b, "; %%%s is placed on device %lld", sl_sym_cstr(c.max_at->name),
                          (long long)c.max_device);
        SlSrcLoc loc = {path, at->src_line, at->src_col};
        SlStatus st = sl_fail(err, SL_ERR_INVALID, loc,
                              "no num_partitions and the shardings disagree on the device "
                              "count: %s; pass -n N",
                              b.data ? b.data : "");
        sl_buf_fini(&b);
        return st;
    }
    if (c.n_counts == 1 && c.max_tiled >= c.counts[0]) {
        /* XLA takes such tile assignments (e.g. devices 0,1,4,5) when no count is set; only
         * the count is unknown, and partitioning needs one. */
        SlSrcLoc loc = {path, c.tiled_at->src_line, c.tiled_at->src_col};
        return sl_fail(err, SL_ERR_UNSUPPORTED, loc,
                       "no num_partitions, and the shardings tile %lld devices but name device "
                       "%lld (%%%s): the device count is not determined; pass -n N",
                       (long long)c.counts[0], (long long)c.max_tiled,
                       sl_sym_cstr(c.tiled_at->name));
    }
    *n = c.n_counts ? c.counts[0] : c.max_device + 1;
    return SL_OK;
}

SlStatus
cli_check_shardings(const IrModule *m, const char *path, int64_t n, SlError *err)
{
    /* The parser shares one value among identical sharding texts, and shd_check's cost is in
     * the device ids: an array sharding already checked against an array of the same rank
     * is not checked again (20,000 parameters sharded over 65,536 devices: 19 s otherwise). */
    SlMap passed; /* sharding -> 1 + rank of the array it passed on */
    SlStatus st = ir_module_check_for(m, path, n, err); /* collectives, with N known now */
    if (st)
        return st;
    sl_map_init(&passed);
    for (uint32_t k = 0; k < m->n_comps && !st; k++) {
        const IrComputation *comp = m->comps[k];
        for (uint32_t i = 0; i < comp->n_instrs && !st; i++) {
            const IrInstr *in = comp->instrs[i];
            const ShdSharding *s = ir_instr_sharding(in);
            SlSrcLoc loc = {path, in->src_line, in->src_col};
            SlError inner = {0};
            uint64_t rank = 0;
            bool is_array = ir_shape_is_array(&in->shape) && s && s->kind != SHD_TUPLE;
            if (!s || (is_array && sl_map_get(&passed, SL_MAP_KEY(s), &rank) &&
                       rank == in->shape.rank + 1u))
                continue;
            if (!shd_check(s, &in->shape, n, loc, &inner)) {
                if (is_array) /* a failed put only costs a later re-check */
                    (void)sl_map_put(&passed, SL_MAP_KEY(s), in->shape.rank + 1u);
                continue;
            }
            if (n > 0)
                st = sl_fail(err, inner.status, inner.loc,
                             "sharding of %%%s in %%%s does not fit %lld partitions: %s",
                             sl_sym_cstr(in->name), sl_sym_cstr(comp->name), (long long)n,
                             inner.msg);
            else
                st = sl_fail(err, inner.status, inner.loc, "sharding of %%%s in %%%s: %s",
                             sl_sym_cstr(in->name), sl_sym_cstr(comp->name), inner.msg);
        }
    }
    sl_map_fini(&passed);
    return st;
}

int
cli_stdout_close(int code)
{
    errno = 0;
    bool failed = fflush(stdout) != 0;
    int e = errno;
    failed = ferror(stdout) || failed;
    if (!failed)
        return code;
    if (!g_stdout_reported)
        fprintf(stderr, "%s: error: cannot write%s%s\n", SL_STDOUT_NAME, e ? ": " : "",
                e ? strerror(e) : "");
    g_stdout_reported = true;
    return CLI_EXIT_BAD_INPUT;
}

void
cli_print_indented(FILE *out, SlStr lines)
{
    for (size_t i = 0; i < lines.len;) {
        size_t j = i;
        while (j < lines.len && lines.ptr[j] != '\n')
            j++;
        fprintf(out, "  %.*s\n", (int)(j - i), lines.ptr + i);
        i = j + 1;
    }
}
