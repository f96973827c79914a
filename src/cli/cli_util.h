/* cli_util.h - the command line's shared parts: the command table entry, option parsing,
 * generated help, loading an input module, and turning an SlError into a diagnostic and an
 * exit code. Owns: everything a command needs besides its own logic. Does not own: exit()
 * (main() returns the code a command gives back). Invariant: errors go to stderr, results to
 * stdout or to a file written atomically. */
#ifndef SHARDLENS_CLI_UTIL_H
#define SHARDLENS_CLI_UTIL_H

#include <stdio.h>

#include "base/base.h"
#include "ir/ir.h"

/* Exit codes of the CLI contract (design/product.md). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_CHECK_FAILED = 1, /* verify mismatch, diff over budget */
    CLI_EXIT_BAD_INPUT = 2,    /* bad usage or bad input */
    CLI_EXIT_UNSUPPORTED = 3,  /* a construct or command we do not handle (yet) */
};

typedef struct CliOpt {
    int id;                 /* the command's own option number */
    char short_name;        /* 0: none */
    const char *long_name;  /* without "--" */
    const char *value_name; /* NULL: a flag without a value */
    const char *help;       /* one line */
    bool repeatable;        /* may be given more than once (--set) */
} CliOpt;

struct CliArgs;
typedef struct CliCommand {
    const char *name;
    const char *usage;       /* the synopsis after "shardlens NAME " */
    const char *summary;     /* one line for the top-level help */
    const char *description; /* paragraphs for NAME --help; lines end with '\n' */
    const CliOpt *opts;
    uint32_t n_opts;
    uint32_t min_pos, max_pos;              /* positional argument counts */
    int (*run)(const struct CliArgs *args); /* returns the exit code */
    void (*help_extra)(FILE *out);          /* NULL or more help after the options */
} CliCommand;

typedef struct CliOptVal {
    const CliOpt *opt;
    const char *value; /* NULL for flags */
} CliOptVal;

typedef struct CliArgs {
    const CliCommand *cmd;
    const char **pos; /* n_pos positional arguments, in order */
    uint32_t n_pos;
    CliOptVal *opts; /* n_opts options, in command-line order */
    uint32_t n_opts;
} CliArgs;

typedef enum CliParse { CLI_PARSE_OK, CLI_PARSE_HELP, CLI_PARSE_ERROR } CliParse;

/* Parses argv (after the command name) against cmd's options: options and positionals in any
 * order, "--opt=value", "--opt value", "-o value", "-ovalue", "--" ends options and "-" is a
 * positional. Prints usage errors itself. Free `out` with cli_args_fini in every case. */
CliParse cli_args_parse(const CliCommand *cmd, int argc, char **argv, CliArgs *out);
void cli_args_fini(CliArgs *a);
const char *cli_args_value(const CliArgs *a, int id); /* last value given, NULL when absent */
bool cli_args_has(const CliArgs *a, int id);

void cli_print_command_help(const CliCommand *cmd, FILE *out);
/* "shardlens NAME: error: ...", then a hint to --help; returns CLI_EXIT_BAD_INPUT. */
int cli_usage_error(const CliCommand *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Parses a positive count for `opt`; prints a usage error and returns false when bad. */
bool cli_parse_count(const CliCommand *cmd, const char *opt, const char *text, int64_t *out);

/* One input module: its text (kept for diagnostics) and everything parsed from it. */
typedef struct CliInput {
    const char *path;    /* as given; "-" is stdin */
    const char *display; /* the name diagnostics use: path, or "<stdin>" */
    SlBuf text;
    SlArena arena; /* the parsed module; whole run */
    SlInterner names;
    IrModule *module;
} CliInput;

/* Reads and parses `path` into `in`; on failure `err` holds the diagnostic. Always pair with
 * cli_input_fini. */
SlStatus cli_input_load(CliInput *in, const char *path, SlError *err);
void cli_input_fini(CliInput *in);

int cli_exit_code(SlStatus st);
/* Prints `FILE:LINE:COL: error: MESSAGE`, then the source line and a caret when the location
 * is in `in` (may be NULL), and returns the exit code for err->status. */
int cli_report(const SlError *err, const CliInput *in);
/* Writes `text` to `path` atomically ("-" or NULL: stdout). */
int cli_write_output(const char *path, const SlBuf *text, const CliInput *in);

/* Checks every sharding in `m` against its instruction's shape and `n` devices (shd_check),
 * naming the instruction; locations are the instructions' positions in `path`. */
SlStatus cli_check_shardings(const IrModule *m, const char *path, int64_t n, SlError *err);

/* Commands (cmd_*.c). */
extern const CliCommand cmd_print;
extern const CliCommand cmd_check;
extern const CliCommand cmd_partition;
extern const CliCommand cmd_report;
extern const CliCommand cmd_viz;
extern const CliCommand cmd_explain;
extern const CliCommand cmd_diff;
extern const CliCommand cmd_verify;
extern const CliCommand cmd_analyze;

#endif
