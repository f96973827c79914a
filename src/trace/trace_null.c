/* trace_null.c - the sink that records nothing (tracing off), and the names of the warning
 * kinds every sink writes. */
#include "trace/trace.h"

static const TraceSinkOps k_null_ops = {0};

const char *
trace_warn_kind_name(TraceWarnKind kind)
{
    static const char *const names[] = {
        [TRACE_WARN_UNANNOTATED] = "unannotated",
        [TRACE_WARN_PARTITIONED] = "already-partitioned",
        [TRACE_WARN_CUSTOM_CALL] = "custom-call-fallback",
        [TRACE_WARN_FULL_REMAT] = "full-remat",
        [TRACE_WARN_NO_HANDLER] = "no-handler",
        [TRACE_WARN_OTHER] = "other",
        [TRACE_WARN_IGNORED_ALIAS] = "ignored-alias",
    };
    return (unsigned)kind < SL_COUNTOF(names) && names[kind] ? names[kind] : "other";
}
static TraceSink k_null_sink = {&k_null_ops, NULL}; /* never written: every op is NULL */

TraceSink *
trace_null_sink(void)
{
    return &k_null_sink;
}
