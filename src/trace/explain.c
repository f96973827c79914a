/* explain.c - "why was this instruction partitioned this way?" in plain words, from a loaded
 * run. Owns: the wording of `shardlens explain`. Does not own: byte figures, which come from
 * the schema's cost-model views through the reader. Invariant: output depends only on the run
 * (walks in recording order), so it is stable for golden tests; an instruction's rows are read
 * through the run's index (trace_run.h), so explaining every op of a run is linear. */
#include <math.h>
#include <string.h>

#include "trace/trace_run.h"

static void
put_bytes(SlBuf *b, double bytes)
{
    sl_buf_put_size(b, bytes);
}

static const char *
ring_formula(const char *kind)
{
    if (strcmp(kind, "all-reduce") == 0)
        return "2(g-1)/g x S";
    if (strcmp(kind, "collective-permute") == 0)
        return "S per source-target pair";
    return "(g-1)/g x S";
}

static const char *
instr_name(const TraceRun *run, uint32_t idx, const char *fallback)
{
    return idx < run->n_instrs ? run->instrs[idx].name : (fallback ? fallback : "?");
}

/* The rows of `rows` about instruction src: for (k = FIRST; k < END; k++) ... ROW(k). */
#define ROWS_BEGIN(rows, src) ((rows)->off[src])
#define ROWS_END(rows, src) ((rows)->off[(src) + 1])

static void
put_header(const TraceRun *run, const TraceRunInstr *i, SlBuf *out)
{
    sl_buf_printf(out, "%s = %s %s(", i->name, i->shape, i->opcode);
    for (uint32_t k = 0; k < i->n_operands; k++)
        sl_buf_printf(out, "%s%s", k ? ", " : "", instr_name(run, i->operands[k], NULL));
    sl_buf_printf(out, ")  in %s\n", i->computation);
    sl_buf_printf(out, "  sharding: %s\n", i->sharding ? i->sharding : "none");
    if (i->op_name || i->source_file) {
        sl_buf_printf(out, "  from: %s", i->op_name ? i->op_name : "");
        if (i->source_file)
            sl_buf_printf(out, "%s%s:%lld", i->op_name ? " at " : "", i->source_file,
                          (long long)i->source_line);
        sl_buf_putc(out, '\n');
    }
    for (uint32_t k = 0; k < i->n_operands; k++) {
        if (i->operands[k] >= run->n_instrs)
            continue;
        const TraceRunInstr *o = &run->instrs[i->operands[k]];
        sl_buf_printf(out, "  operand %u %s: %s, sharding %s\n", k, o->name, o->shape,
                      o->sharding ? o->sharding : "none");
    }
}

static bool
is_alt_key(const char *key)
{
    return strncmp(key, "alt.", 4) == 0;
}

/* The number `alt.NAME.FIELD` of decision `d`, or NULL. */
static const TraceRunNumber *
alt_number(const TraceRunDecision *d, const char *name, const char *field)
{
    size_t nl = strlen(name), fl = strlen(field);
    for (uint32_t k = 0; k < d->n_numbers; k++) {
        const char *key = d->numbers[k].key;
        if (is_alt_key(key) && strncmp(key + 4, name, nl) == 0 && key[4 + nl] == '.' &&
            strncmp(key + 5 + nl, field, fl) == 0 && key[5 + nl + fl] == '\0')
            return &d->numbers[k];
    }
    return NULL;
}

static double
number_or(const TraceRunDecision *d, const char *key, double dflt)
{
    for (uint32_t k = 0; k < d->n_numbers; k++)
        if (!d->numbers[k].str && strcmp(d->numbers[k].key, key) == 0)
            return d->numbers[k].num;
    return dflt;
}

static const char *
option_of(const TraceRun *run, const char *key)
{
    for (uint32_t k = 0; k < run->n_options; k++)
        if (strcmp(run->options[k].key, key) == 0)
            return run->options[k].value;
    return NULL;
}

/* What dot strategy `name` needs, in words, from the partition counts its decision records
 * (handle_dot.c's conditions); false for a name this version does not know. */
static bool
put_dot_needs(const TraceRun *run, const TraceRunDecision *d, const char *name, SlBuf *out)
{
    long long n = (long long)number_or(d, "partitions", 0);
    long long lnc = (long long)number_or(d, "lhs_non_contracting", 0);
    long long rnc = (long long)number_or(d, "rhs_non_contracting", 0);
    long long olnc = (long long)number_or(d, "out_lhs_non_contracting", 0);
    long long ornc = (long long)number_or(d, "out_rhs_non_contracting", 0);
    long long ob = (long long)number_or(d, "out_batch", 0);
    if (!strcmp(name, "conv_spatial"))
        sl_buf_puts(out, "a convolution case of its own");
    else if (!strcmp(name, "batch_parallel"))
        sl_buf_printf(out, "both operands split alike on batch dims only, over all %lld devices",
                      n);
    else if (!strcmp(name, "batch_reshard_without_all_reduce") || !strcmp(name, "batch_reshard"))
        sl_buf_printf(out,
                      "the output and an operand split alike on batch dims over all %lld devices "
                      "(here the output %lld way%s)%s",
                      n, ob, ob == 1 ? "" : "s",
                      strcmp(name, "batch_reshard") ? ", the other operand within a permute or "
                                                      "all-to-all"
                                                    : "");
    else if (!strcmp(name, "windowed_einsum")) {
        const char *t = option_of(run, "threshold_for_windowed_einsum_mib");
        sl_buf_puts(out, "a ring-shaped sharding and an operand or output of at least ");
        if (t) /* runs recorded without their options leave the number out */
            sl_buf_printf(out, "%s MiB (threshold_for_windowed_einsum_mib)", t);
        else
            sl_buf_puts(out, "threshold_for_windowed_einsum_mib");
    } else if (!strcmp(name, "lhs_matches_output_replicate_rhs") ||
               !strcmp(name, "rhs_matches_output_replicate_lhs")) {
        bool lhs = name[0] == 'l';
        sl_buf_printf(out,
                      "the %s split like the output on its free dims over all %lld devices (here "
                      "the %s %lld way%s, the output %lld)",
                      lhs ? "lhs" : "rhs", n, lhs ? "lhs" : "rhs", lhs ? lnc : rnc,
                      (lhs ? lnc : rnc) == 1 ? "" : "s", lhs ? olnc : ornc);
    } else if (!strcmp(name, "group_on_batch"))
        sl_buf_puts(out, "batch dims split on the operands and the output");
    else if (!strcmp(name, "group_on_non_contracting"))
        sl_buf_puts(out, "an operand split like the output on its free dims");
    else if (!strcmp(name, "group_on_contracting"))
        sl_buf_puts(out, "both operands split alike on contracting dims");
    else if (!strcmp(name, "remove_output_partial_replication"))
        sl_buf_puts(out, "a partially replicated output");
    else if (!strcmp(name, "output_batch_partitioned") ||
             !strcmp(name, "output_lhs_non_contracting_partitioned") ||
             !strcmp(name, "output_rhs_non_contracting_partitioned")) {
        bool batch = name[7] == 'b', lhs = name[7] == 'l';
        long long have = batch ? ob : lhs ? olnc : ornc;
        sl_buf_printf(out, "the output split on %s dims over all %lld devices (here %lld way%s)",
                      batch ? "batch" : lhs ? "lhs free" : "rhs free", n, have,
                      have == 1 ? "" : "s");
    } else if (!strcmp(name, "replicated_output_sharded_contracting"))
        sl_buf_puts(out, "a replicated output and a larger operand split on contracting dims");
    else if (!strcmp(name, "infer_operands_from_output"))
        sl_buf_puts(out, "no earlier strategy to apply");
    else
        return false;
    return true;
}

/* Each alternative with why it lost and, when resharding would make it apply, what that would
 * cost, against `chosen_bytes`, what the chosen strategy's collectives make the busiest device
 * send (trip counts applied). */
static void
put_alternatives(const TraceRun *run, const TraceRunDecision *d, double chosen_bytes,
                 SlBuf *out)
{
    sl_buf_puts(out, "  alternatives (bytes each device would send, ring model; the chosen "
                     "strategy's collectives send ");
    put_bytes(out, chosen_bytes);
    sl_buf_puts(out, "):\n");
    for (uint32_t k = 0; k < d->n_alternatives; k++) {
        const char *name = d->alternatives[k];
        const TraceRunNumber *b = alt_number(d, name, "bytes");
        const TraceRunNumber *plan = alt_number(d, name, "plan");
        bool last_resort = strcmp(name, "replicate") == 0;
        sl_buf_printf(out, "    %s: ", name);
        if (!b) {
            sl_buf_puts(out, "does not apply: it needs ");
            if (!put_dot_needs(run, d, name, out))
                sl_buf_puts(out, "what this version cannot name");
            sl_buf_putc(out, '\n');
            continue;
        }
        put_bytes(out, b->num);
        if (plan && plan->str)
            sl_buf_printf(out, " (%s)", plan->str);
        if (last_resort)
            sl_buf_puts(out, "; lost: the last resort, taken only when no strategy applies");
        else {
            sl_buf_puts(out, "; lost: it needs ");
            if (!put_dot_needs(run, d, name, out))
                sl_buf_puts(out, "what this version cannot name");
        }
        if (b->num > chosen_bytes) {
            sl_buf_puts(out, ", and making it apply sends ");
            put_bytes(out, b->num - chosen_bytes);
            sl_buf_puts(out, " more per device");
        } else {
            sl_buf_puts(out, " (it would send no more, but the dot handler takes the first "
                             "strategy that applies, in GSPMD's order)");
        }
        sl_buf_putc(out, '\n');
    }
}

/* A decision of the dot engine's strategy order: it records the partition counts. */
static bool
is_dot_strategy_decision(const TraceRunDecision *d)
{
    return (!strcmp(d->handler, "dot") || !strcmp(d->handler, "convolution")) &&
           number_or(d, "partitions", -1) >= 0 && number_or(d, "out_batch", -1) >= 0;
}

static void
put_decision(const TraceRun *run, const TraceRunDecision *d, double chosen_bytes, SlBuf *out)
{
    if (d->chain_length <= 1)
        sl_buf_puts(out, "Decision: ");
    else if (d->level == 1)
        sl_buf_printf(out, "Decision 1 of %u (top level): ", d->chain_length);
    else
        sl_buf_printf(out, "Decision %u of %u (inside decision %u): ", d->level, d->chain_length,
                      d->level - 1);
    sl_buf_printf(out, "the %s handler chose \"%s\".\n", d->handler, d->strategy);
    if (d->reason && *d->reason)
        sl_buf_printf(out, "  why: %s\n", d->reason);
    if (d->n_alternatives && is_dot_strategy_decision(d)) {
        put_alternatives(run, d, chosen_bytes, out);
    } else if (d->n_alternatives) {
        sl_buf_puts(out, "  also considered:");
        for (uint32_t k = 0; k < d->n_alternatives; k++)
            sl_buf_printf(out, "%s %s", k ? "," : "", d->alternatives[k]);
        sl_buf_putc(out, '\n');
    }
    for (uint32_t k = 0; k < d->n_numbers; k++) {
        const TraceRunNumber *n = &d->numbers[k];
        if (is_alt_key(n->key))
            continue;
        size_t kl = strlen(n->key);
        if (n->str)
            sl_buf_printf(out, "  compared %s = %s\n", n->key, n->str);
        else if (kl > 6 && strcmp(n->key + kl - 6, "_bytes") == 0 && n->num >= 0) {
            sl_buf_printf(out, "  compared %s = ", n->key);
            put_bytes(out, n->num);
            sl_buf_putc(out, '\n');
        }
        else if (n->num == floor(n->num) && fabs(n->num) < 9.0e15)
            sl_buf_printf(out, "  compared %s = %.0f\n", n->key, n->num);
        else
            sl_buf_printf(out, "  compared %s = %g\n", n->key, n->num);
    }
}

static void
put_collective(const TraceRun *run, const TraceRunCollective *c, SlBuf *out)
{
    sl_buf_printf(out,
                  "  %s: %s of %s over %lld group%s of %lld; S = ", instr_name(run, c->instr, NULL),
                  c->kind, c->shape, (long long)c->n_groups, c->n_groups == 1 ? "" : "s",
                  (long long)c->group_size);
    put_bytes(out, c->bytes);
    sl_buf_puts(out, "\n    busiest device sends ");
    put_bytes(out, c->max_device_send_bytes);
    sl_buf_printf(out, " (ring %s", ring_formula(c->kind));
    if (c->trip_count < 0 && c->max_trip_count >= 0)
        sl_buf_printf(out, ", in a conditional branch: at most %lld executions, counted once)",
                      (long long)c->max_trip_count);
    else if (c->trip_count < 0)
        sl_buf_puts(out, ", trip count unknown: counted once)");
    else
        sl_buf_printf(out, ", x%lld executions)", (long long)c->trip_count);
    if (c->cause)
        sl_buf_printf(out, "; cause: %s", c->cause);
    if (c->reshard < run->n_reshards)
        sl_buf_printf(out, " #%u", run->reshards[c->reshard].seq);
    sl_buf_putc(out, '\n');
}

/* Counts and totals for the one-line summary. */
typedef struct Tally {
    uint32_t decisions, reshards, collectives, loops;
    double max_device_bytes, total_bytes;
    const TraceRunDecision *top; /* level 1 of the chain */
} Tally;

static Tally
tally(const TraceRun *run, const TraceRunIndex *x, uint32_t src)
{
    Tally t = {0};
    for (uint32_t k = ROWS_BEGIN(&x->decisions, src); k < ROWS_END(&x->decisions, src); k++) {
        const TraceRunDecision *d = &run->decisions[x->decisions.row[k]];
        t.decisions++;
        if (d->level == 1)
            t.top = d;
    }
    t.reshards = ROWS_END(&x->reshards, src) - ROWS_BEGIN(&x->reshards, src);
    for (uint32_t k = ROWS_BEGIN(&x->collectives, src); k < ROWS_END(&x->collectives, src); k++) {
        const TraceRunCollective *c = &run->collectives[x->collectives.row[k]];
        t.collectives++;
        t.max_device_bytes += c->max_device_send_bytes;
        t.total_bytes += c->send_bytes;
    }
    t.loops = ROWS_END(&x->loops, src) - ROWS_BEGIN(&x->loops, src);
    return t;
}

/* The instruction's decisions at `level`, in recording order (one per level in practice). */
static void
put_level(const TraceRun *run, const TraceRunIndex *x, uint32_t src, uint32_t level,
          double chosen_bytes, SlBuf *out, bool as_summary)
{
    for (uint32_t k = ROWS_BEGIN(&x->decisions, src); k < ROWS_END(&x->decisions, src); k++) {
        const TraceRunDecision *d = &run->decisions[x->decisions.row[k]];
        if (d->level != level)
            continue;
        if (as_summary)
            sl_buf_printf(out, "%s\"%s\"", level == 2 ? " (then " : ", then ", d->strategy);
        else
            put_decision(run, d, chosen_bytes, out);
    }
}

static void
put_summary(const TraceRun *run, const TraceRunIndex *x, uint32_t src, const Tally *t,
            SlBuf *out)
{
    const TraceRunInstr *i = &run->instrs[src];
    if (t->top) {
        sl_buf_printf(out, "%s was partitioned by the %s handler with strategy \"%s\"", i->name,
                      t->top->handler, t->top->strategy);
        for (uint32_t level = 2; level <= t->top->chain_length; level++)
            put_level(run, x, src, level, t->max_device_bytes, out, true);
        if (t->top->chain_length > 1)
            sl_buf_putc(out, ')');
    } else
        sl_buf_printf(out, "%s: no handler decision was recorded", i->name);
    sl_buf_printf(out, "; %u reshard%s, %u collective%s", t->reshards, t->reshards == 1 ? "" : "s",
                  t->collectives, t->collectives == 1 ? "" : "s");
    if (t->collectives) {
        sl_buf_puts(out, " (up to ");
        put_bytes(out, t->max_device_bytes);
        sl_buf_puts(out, " sent per device)");
    }
    if (t->loops)
        sl_buf_puts(out, ", in a windowed-einsum loop");
    sl_buf_puts(out, ".\n\n");
}

static void
explain_source(const TraceRun *run, const TraceRunIndex *x, uint32_t src, SlBuf *out)
{
    const TraceRunInstr *i = &run->instrs[src];
    Tally t = tally(run, x, src);
    put_summary(run, x, src, &t, out);
    put_header(run, i, out);
    for (uint32_t level = 1; t.top && level <= t.top->chain_length; level++)
        put_level(run, x, src, level, t.max_device_bytes, out, false);
    if (!t.decisions)
        sl_buf_puts(out, "Decision: none recorded (the partitioner kept its sharding as is).\n");
    sl_buf_printf(out, "Reshards requested: %u\n", t.reshards);
    for (uint32_t k = ROWS_BEGIN(&x->reshards, src); k < ROWS_END(&x->reshards, src); k++) {
        const TraceRunReshard *r = &run->reshards[x->reshards.row[k]];
        sl_buf_printf(out, "  #%u %s: %s -> %s by %s", r->seq, r->value_name, r->from, r->to,
                      r->method);
        if (r->result_name)
            sl_buf_printf(out, " (result %s)", r->result_name);
        sl_buf_putc(out, '\n');
    }
    sl_buf_printf(out, "Collectives caused: %u", t.collectives);
    if (t.collectives) {
        sl_buf_puts(out, ", all devices together send ");
        put_bytes(out, t.total_bytes);
    }
    sl_buf_putc(out, '\n');
    for (uint32_t k = ROWS_BEGIN(&x->collectives, src); k < ROWS_END(&x->collectives, src); k++)
        put_collective(run, &run->collectives[x->collectives.row[k]], out);
    for (uint32_t k = ROWS_BEGIN(&x->loops, src); k < ROWS_END(&x->loops, src); k++) {
        const TraceRunLoop *l = &run->loops[x->loops.row[k]];
        sl_buf_printf(out, "Windowed loop: %s (%s), %lld iterations, each device permutes ",
                      l->loop_name, l->variant, (long long)l->iterations);
        put_bytes(out, (double)l->bytes_per_iteration);
        sl_buf_puts(out, " per iteration\n");
    }
    if (!t.loops)
        sl_buf_puts(out, "Windowed loop: none\n");
    for (uint32_t k = ROWS_BEGIN(&x->warnings, src); k < ROWS_END(&x->warnings, src); k++)
        sl_buf_printf(out, "Warning: %s\n", run->warnings[x->warnings.row[k]].message);
}

/* Edit distance of two names, capped: names are compared on their first 127 characters. */
static uint32_t
distance(const char *a, const char *b)
{
    enum { CAP = 128 };
    uint16_t prev[CAP], cur[CAP];
    size_t la = strlen(a), lb = strlen(b);
    la = la < CAP - 1 ? la : CAP - 1;
    lb = lb < CAP - 1 ? lb : CAP - 1;
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (uint16_t)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (uint16_t)i;
        for (size_t j = 1; j <= lb; j++) {
            uint16_t sub = (uint16_t)(prev[j - 1] + (a[i - 1] != b[j - 1]));
            uint16_t del = (uint16_t)(prev[j] + 1), ins = (uint16_t)(cur[j - 1] + 1);
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof(prev[0]));
    }
    return prev[lb];
}

static SlStatus
unknown_name(const TraceRun *run, const char *name, SlError *err)
{
    enum { MAX_SUGGESTIONS = 5 };
    uint32_t best[MAX_SUGGESTIONS], dist[MAX_SUGGESTIONS], n = 0;
    uint32_t limit = (uint32_t)strlen(name) / 3 + 1;
    for (uint32_t k = 0; k < run->n_instrs; k++) {
        uint32_t d = distance(name, run->instrs[k].name);
        if (d > limit || (n == MAX_SUGGESTIONS && d >= dist[n - 1]))
            continue;
        uint32_t at = n < MAX_SUGGESTIONS ? n++ : n - 1; /* insertion sort, stable */
        while (at > 0 && dist[at - 1] > d) {
            best[at] = best[at - 1];
            dist[at] = dist[at - 1];
            at--;
        }
        best[at] = k;
        dist[at] = d;
    }
    SlBuf b;
    sl_buf_init(&b);
    for (uint32_t k = 0; k < n; k++)
        sl_buf_printf(&b, "%s%s", k ? ", " : "", run->instrs[best[k]].name);
    SlStatus st =
        sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "no instruction named '%s' in run %lld%s%s",
                name, (long long)run->id, n ? "; did you mean: " : "", n ? b.data : "");
    sl_buf_fini(&b);
    return st;
}

/* "%dot.7 got {devices=[4,1]<=[4]} forward from %x (parameter 0, annotated) through %convert.3
 * and %multiply.5 at level 0 (rule elementwise)": propagation's account, before the
 * partitioner's. Nothing when propagation did not set this instruction's sharding. */
static void
put_origin(const TraceRun *run, const TraceRunIndex *x, uint32_t idx, SlBuf *out)
{
    if (ROWS_END(&x->origins, idx) == ROWS_BEGIN(&x->origins, idx))
        return;
    /* the last one is the final sharding */
    const TraceRunOrigin *o = &run->origins[x->origins.row[ROWS_END(&x->origins, idx) - 1]];
    sl_buf_printf(out, "origin: %%%s got %s %s", instr_name(run, idx, NULL), o->sharding,
                  o->direction);
    if (o->source < run->n_instrs) {
        const TraceRunInstr *src = &run->instrs[o->source];
        sl_buf_printf(out, " from %%%s", src->name);
        if (!strcmp(src->opcode, "parameter"))
            sl_buf_printf(out, " (parameter %lld, annotated)", (long long)src->param_number);
        else
            sl_buf_puts(out, " (annotated)");
    }
    /* path: source first, the instruction last; the hops between are what it went through */
    if (o->n_path > 2) {
        sl_buf_puts(out, " through");
        for (uint32_t k = 1; k + 1 < o->n_path; k++)
            sl_buf_printf(out, "%s%%%s", k == 1 ? " " : k + 2 == o->n_path ? " and " : ", ",
                          instr_name(run, o->path[k], "?"));
    }
    if (o->level >= 0)
        sl_buf_printf(out, " at level %d", o->level);
    if (o->rule)
        sl_buf_printf(out, " (rule %s)", o->rule);
    if (o->candidate && o->replaced)
        sl_buf_printf(out, "; merged %s with %s", o->candidate, o->replaced);
    sl_buf_putc(out, '\n');
}

SlStatus
trace_explain(const TraceRun *run, const char *name, SlBuf *out, SlError *err)
{
    const TraceRunInstr *i = trace_run_find_instr(run, TRACE_BEFORE, name);
    if (!i) {
        const TraceRunInstr *after = trace_run_find_instr(run, TRACE_AFTER, name);
        if (!after)
            return unknown_name(run, name, err);
        if (after->derived_from >= run->n_instrs) {
            sl_buf_printf(out, "%s is an output instruction (%s %s) with no recorded source.\n",
                          after->name, after->opcode, after->shape);
            return SL_OK;
        }
        i = &run->instrs[after->derived_from];
        sl_buf_printf(out, "%s is an output instruction derived from %s.\n", after->name, i->name);
    }
    return trace_explain_instr(run, (uint32_t)(i - run->instrs), out, err);
}

SlStatus
trace_explain_instr(const TraceRun *run, uint32_t idx, SlBuf *out, SlError *err)
{
    SlArena a; /* a run made by hand has no index: one for this call */
    sl_arena_init(&a);
    const TraceRunIndex *x = run->index ? run->index : trace_run_index_build(run, &a);
    if (x && idx < run->n_before) {
        put_origin(run, x, idx, out);
        explain_source(run, x, idx, out);
    }
    sl_arena_fini(&a);
    if (!x || out->failed)
        return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    if (idx >= run->n_before)
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "instruction %u is not an input one",
                       idx);
    return SL_OK;
}
