/* main.c - the shardlens entry point: top-level options and dispatch over the command table.
 * Owns: the list of commands and the top-level help. Does not own: any command's behaviour
 * (cmd_*.c) or argument parsing (cli_util.c). Invariant: main() is the only place that ends the
 * process, by returning the command's exit code (after checking that standard output was
 * written). */
#include <stdio.h>
#include <string.h>

#include "cli/cli_util.h"

#ifndef SHARDLENS_VERSION
#define SHARDLENS_VERSION "unknown"
#endif

/* In the order help lists them. */
static const CliCommand *const k_commands[] = {
    &cmd_print,   &cmd_check, &cmd_partition, &cmd_report,  &cmd_viz,
    &cmd_explain, &cmd_diff,  &cmd_verify,    &cmd_analyze, &cmd_propagate, &cmd_html,
};

static void
print_top_help(FILE *out)
{
    fputs("usage: shardlens COMMAND [ARGS...]\n"
          "       shardlens COMMAND --help | shardlens --help | shardlens --version\n\n"
          "Reads XLA HLO modules annotated with shardings and partitions them the way XLA's\n"
          "GSPMD partitioner does, recording what it decides.\n\ncommands:\n",
          out);
    for (size_t i = 0; i < SL_COUNTOF(k_commands); i++) {
        const CliCommand *c = k_commands[i];
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    }
    fputs("\nOptions may come before or after the positional arguments; IN.hlo may be '-' for\n"
          "standard input.\n"
          "--time-phases (before or after the command) prints the wall and CPU time, bytes and\n"
          "memory of each phase (read, parse, check, partition, trace, print, write) to\n"
          "standard error.\n"
          "exit status: 0 success; 1 a check failed; 2 bad usage or bad input;\n"
          "             3 unsupported construct or command.\n",
          out);
}

static const CliCommand *
find_command(const char *name)
{
    for (size_t i = 0; i < SL_COUNTOF(k_commands); i++)
        if (strcmp(k_commands[i]->name, name) == 0)
            return k_commands[i];
    return NULL;
}

static int
run_command(const CliCommand *cmd, int argc, char **argv, bool time_phases)
{
    CliArgs args;
    CliParse r = cli_args_parse(cmd, argc, argv, &args);
    args.time_phases = args.time_phases || time_phases;
    int code = CLI_EXIT_BAD_INPUT;
    if (r == CLI_PARSE_HELP) {
        cli_print_command_help(cmd, stdout);
        code = cli_stdout_close(CLI_EXIT_OK);
    } else if (r == CLI_PARSE_OK) {
        CliPhases phases;
        if (args.time_phases) {
            cli_phases_init(&phases);
            args.phases = &phases;
        }
        code = cmd->run(&args);
        if (args.phases) {
            fflush(stdout); /* the timings come after the output when both go to a terminal */
            cli_phases_print(args.phases, stderr);
        }
    }
    cli_args_fini(&args);
    return code;
}

static int
dispatch(int argc, char **argv)
{
    if (argc < 2) {
        print_top_help(stderr);
        return CLI_EXIT_BAD_INPUT;
    }
    /* The one global option may also come before the command. */
    bool time_phases = !strcmp(argv[1], "--time-phases");
    if (time_phases) {
        argc--;
        argv++;
        if (argc < 2) {
            print_top_help(stderr);
            return CLI_EXIT_BAD_INPUT;
        }
    }
    const char *first = argv[1];
    if (!strcmp(first, "--help") || !strcmp(first, "-h")) {
        print_top_help(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(first, "--version")) {
        printf("shardlens %s\n", SHARDLENS_VERSION);
        return CLI_EXIT_OK;
    }
    if (!strcmp(first, "help")) {
        const CliCommand *c = argc > 2 ? find_command(argv[2]) : NULL;
        if (argc > 2 && !c) {
            fprintf(stderr, "shardlens: error: unknown command '%s'\n", argv[2]);
            return CLI_EXIT_BAD_INPUT;
        }
        if (c)
            cli_print_command_help(c, stdout);
        else
            print_top_help(stdout);
        return CLI_EXIT_OK;
    }
    const CliCommand *cmd = find_command(first);
    if (!cmd) {
        fprintf(stderr, "shardlens: error: unknown %s '%s'\nTry 'shardlens --help'.\n",
                first[0] == '-' ? "option" : "command", first);
        return CLI_EXIT_BAD_INPUT;
    }
    return run_command(cmd, argc - 2, argv + 2, time_phases);
}

int
main(int argc, char **argv)
{
    return cli_stdout_close(dispatch(argc, argv));
}
