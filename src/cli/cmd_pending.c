/* cmd_pending.c - the commands of the CLI contract (design/product.md) that later issues
 * implement: listed in help with their synopsis, and exiting with status 3 when called.
 * Owns: their synopses until each gets its own cmd_<name>.c. */
#include "cli/cli_util.h"

enum {
    OPT_BEFORE,
    OPT_AFTER,
    OPT_FOCUS,
    OPT_DEPTH,
};
