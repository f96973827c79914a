/* trace_mem.c - the memory sink: counts events and logs one line per event (tests, debugging).
 * Owns: nothing beyond its counters and log buffer; copies what it keeps. */
#include "trace/trace.h"

static TraceMemSink *
mem_of(TraceSink *s)
{
    return s->self;
}

static const char *
name(const IrInstr *i)
{
    return i && i->name ? sl_sym_cstr(i->name) : "-";
}

static void
put_sharding(SlBuf *b, const ShdSharding *s)
{
    if (s)
        shd_print(s, b);
    else
        sl_buf_putc(b, '-');
}

static void
on_emit(TraceSink *s, const IrInstr *out, const IrInstr *source)
{
    TraceMemSink *m = mem_of(s);
    m->n_emits++;
    sl_buf_printf(&m->log, "emit %s <- %s\n", name(out), name(source));
}

static void
on_decision(TraceSink *s, const TraceDecision *d)
{
    TraceMemSink *m = mem_of(s);
    m->n_decisions++;
    sl_buf_printf(&m->log, "decision %s %s %s", name(d->instr), d->handler ? d->handler : "-",
                  d->strategy ? d->strategy : "-");
    for (uint32_t k = 0; k < d->n_alternatives; k++)
        sl_buf_printf(&m->log, "%s%s", k ? "," : " alts=", d->alternatives[k]);
    sl_buf_putc(&m->log, '\n');
}

static void
on_reshard(TraceSink *s, const TraceReshard *r)
{
    TraceMemSink *m = mem_of(s);
    m->n_reshards++;
    sl_buf_printf(&m->log, "reshard #%u %s %s ", r->seq, name(r->requester), name(r->value));
    put_sharding(&m->log, r->from);
    sl_buf_puts(&m->log, " -> ");
    put_sharding(&m->log, r->to);
    sl_buf_printf(&m->log, " %s %s\n", r->method ? r->method : "-", name(r->result));
}

static void
on_collective(TraceSink *s, const TraceCollective *c)
{
    TraceMemSink *m = mem_of(s);
    m->n_collectives++;
    sl_buf_printf(&m->log, "collective %s %s cause=%s reshard=%u\n", name(c->instr),
                  name(c->source), c->cause ? c->cause : "-", c->reshard_seq);
}

static void
on_windowed_loop(TraceSink *s, const TraceWindowedLoop *w)
{
    TraceMemSink *m = mem_of(s);
    m->n_windowed_loops++;
    sl_buf_printf(&m->log, "windowed-loop %s %s %s %lld %lld", name(w->dot), name(w->loop),
                  w->variant ? w->variant : "-", (long long)w->iterations,
                  (long long)w->bytes_per_iteration);
    if (w->true_branch_runs)
        sl_buf_printf(&m->log, " true-branch=%lld", (long long)w->true_branch_runs);
    sl_buf_putc(&m->log, '\n');
}

static void
on_warning(TraceSink *s, const IrInstr *source, TraceWarnKind kind, const char *message)
{
    TraceMemSink *m = mem_of(s);
    m->n_warnings++;
    sl_buf_printf(&m->log, "warning %s %s %s\n", name(source), trace_warn_kind_name(kind),
                  message ? message : "");
}

static void
on_origin(TraceSink *s, const TraceOrigin *o)
{
    TraceMemSink *m = mem_of(s);
    m->n_origins++;
    sl_buf_printf(&m->log, "origin %s <- %s %s level=%d path=%u\n", name(o->instr),
                  name(o->source), o->direction ? o->direction : "-", o->level, o->n_path);
}

static const TraceSinkOps k_mem_ops = {on_emit,       on_decision,      on_reshard,
                                       on_collective, on_windowed_loop, on_warning,
                                       on_origin};

void
trace_mem_sink_init(TraceMemSink *m)
{
    *m = (TraceMemSink){
        .sink = {&k_mem_ops, m}
    };
    sl_buf_init(&m->log);
}

void
trace_mem_sink_fini(TraceMemSink *m)
{
    sl_buf_fini(&m->log);
}
