/* trace_null.c - the sink that records nothing (tracing off). */
#include "trace/trace.h"

static const TraceSinkOps k_null_ops = {0};
static TraceSink k_null_sink = {&k_null_ops, NULL}; /* never written: every op is NULL */

TraceSink *
trace_null_sink(void)
{
    return &k_null_sink;
}
