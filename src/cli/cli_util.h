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

/* --time-phases: wall and CPU time of each step of a run, printed to stderr at the end.
 * Phases nest: a phase begun while another runs pauses it (writing the output while printing
 * it counts as write, not print), so the phases add up to the run. */
typedef enum CliPhase {
    CLI_PHASE_READ,      /* the input text into memory */
    CLI_PHASE_PARSE,     /* text to IR */
    CLI_PHASE_CHECK,     /* structure, shapes and shardings; the partitioned module's too */
    CLI_PHASE_PROPAGATE, /* prop_run: sharding propagation before partitioning */
    CLI_PHASE_PARTITION, /* spmd_partition */
    CLI_PHASE_TRACE,     /* opening the trace database and committing the run (--trace) */
    CLI_PHASE_PRINT,     /* IR to text */
    CLI_PHASE_WRITE,     /* text to the output file or stdout */
    CLI_PHASE_COUNT
} CliPhase;

#define CLI_PHASE_MAX_NEST 8
typedef struct CliPhases {
    double wall_s[CLI_PHASE_COUNT], cpu_s[CLI_PHASE_COUNT];
    uint64_t bytes[CLI_PHASE_COUNT];   /* text read, parsed, printed, written */
    long rss_kb[CLI_PHASE_COUNT];      /* resident memory when the phase last ended */
    long peak_rss_kb[CLI_PHASE_COUNT]; /* the process's peak by then */
    bool ran[CLI_PHASE_COUNT];
    CliPhase stack[CLI_PHASE_MAX_NEST]; /* running phase on top; paused ones below */
    uint32_t depth;
    double since_wall, since_cpu; /* when the top phase last (re)started */
    double start_wall, start_cpu; /* cli_phases_init */
} CliPhases;

void cli_phases_init(CliPhases *p);
/* Both accept NULL (timing off) and do nothing then. `bytes` adds to the phase's count. */
void cli_phase_begin(CliPhases *p, CliPhase ph);
void cli_phase_end(CliPhases *p, CliPhase ph, uint64_t bytes);
/* One line per phase that ran, then the total; parse and print also as MB per CPU second. */
void cli_phases_print(const CliPhases *p, FILE *out);

typedef struct CliArgs {
    const CliCommand *cmd;
    CliPhases *phases; /* --time-phases: non-NULL (set by main) when given */
    bool time_phases;  /* --time-phases was given */
    const char **pos;  /* n_pos positional arguments, in order */
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
/* The same for a device count (-n): also at most IR_MAX_DEVICES. */
bool cli_parse_devices(const CliCommand *cmd, const char *opt, const char *text, int64_t *out);

/* One input module: its text (kept for diagnostics and the trace's input hash; a mapped file's
 * pages are given back after parsing and read in again only when looked at) and everything
 * parsed from it. */
typedef struct CliInput {
    const char *path;    /* as given; "-" is stdin */
    const char *display; /* the name diagnostics use: path, or "<stdin>" */
    SlFileText src;
    SlArena arena; /* the parsed module; whole run */
    SlInterner names;
    IrModule *module;
    CliPhases *phases; /* NULL: not timed */
} CliInput;

/* Reads and parses `path` into `in`; on failure `err` holds the diagnostic. Always pair with
 * cli_input_fini. */
SlStatus cli_input_load(CliInput *in, const char *path, SlError *err);
/* The same, timing the read and parse phases (and later ones given `in`) into `phases`. */
SlStatus cli_input_load_timed(CliInput *in, const char *path, CliPhases *phases, SlError *err);
void cli_input_fini(CliInput *in);
/* ir_module_check on the loaded module, timed as the check phase; then, on success, a warning
 * on stderr for each attribute name XLA's HLO text does not have (a likely typo). */
SlStatus cli_input_check(CliInput *in, SlError *err);

int cli_exit_code(SlStatus st);
/* Flushes standard output at the end of a run: when anything written there was lost (a full
 * disk, a closed descriptor), says so once ("<stdout>: error: cannot write: ...", unless a
 * diagnostic already named it) and returns CLI_EXIT_BAD_INPUT; else returns `code`. */
int cli_stdout_close(int code);
/* Prints `FILE:LINE:COL: error: MESSAGE`, then the source line and a caret when the location
 * is in `in` (may be NULL), and returns the exit code for err->status. */
int cli_report(const SlError *err, const CliInput *in);
/* A command's text output, streamed: print into `text`, which hands full pieces to the file
 * (opened at the first piece, so a run that fails before printing opens nothing), then
 * cli_output_finish. A path is written atomically (temporary file + rename on finish); "-" or
 * NULL is stdout. Pair with cli_output_fini, which removes the temporary file of an unfinished
 * output. */
typedef struct CliOutput {
    SlBuf text;
    const char *path;
    SlOutFile file;
    bool is_open;
    CliPhases *phases; /* NULL: not timed */
} CliOutput;
void cli_output_init(CliOutput *o, const char *path, CliPhases *phases);
/* Writes the rest of the text and commits; prints the diagnostic and returns the exit code. */
int cli_output_finish(CliOutput *o, const CliInput *in);
void cli_output_fini(CliOutput *o);

/* The device count all shardings of `m` agree on, for a module without num_partitions: the
 * device count of every tiled sharding (maximal ones must name a device below it), else one
 * more than the largest maximal device, else 0 (no sharding names devices). Tiled shardings
 * of different counts are SL_ERR_INVALID naming the counts, located at the first instruction
 * that disagrees. Tiled shardings of one count that name a device id at or above it (XLA's
 * parser takes them when no count is set) are SL_ERR_UNSUPPORTED with *n = 0: the count is
 * not determined (cli_check_shardings with n = 0 still checks them). */
SlStatus cli_devices_from_shardings(const IrModule *m, const char *path, int64_t *n, SlError *err);
/* Checks the module again for `n` devices (ir_module_check_for: collectives' groups), then
 * every sharding in `m` against its instruction's shape and `n` devices (shd_check), naming
 * the instruction; locations are the instructions' positions in `path`. n = 0: the count is
 * unknown (shd_check's rules without one). */
SlStatus cli_check_shardings(const IrModule *m, const char *path, int64_t n, SlError *err);

/* Prints each line of `lines` indented by two spaces (option lists in help text). */
void cli_print_indented(FILE *out, SlStr lines);

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
extern const CliCommand cmd_html;
extern const CliCommand cmd_propagate;

#endif
