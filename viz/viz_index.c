/* viz_index.c - what the diagrams need to know about one phase of a run beyond its arrays:
 * computations and which instructions call each (as recorded), users of every instruction, and
 * lookups from instructions to collectives, windowed loops and decisions; plus name
 * resolution and the focus neighbourhood. Owns: those inferences. Does not own: drawing.
 * Callers come from the trace's called_computation table (schema version 2), never from
 * shapes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viz/viz_int.h"

static const TraceRunInstr *
at(const VizIndex *x, uint32_t i)
{
    return &x->run->instrs[i];
}

/* Computations in recorded order (each one's instructions are contiguous). */
static bool
find_comps(VizIndex *x, SlArena *a)
{
    uint32_t n = x->hi - x->lo, n_comps = 0;
    x->comp_of = SL_NEW_ARRAY(a, uint32_t, n + 1);
    if (!x->comp_of)
        return false;
    for (uint32_t i = x->lo; i < x->hi; i++)
        if (i == x->lo || strcmp(at(x, i)->computation, at(x, i - 1)->computation) != 0)
            n_comps++;
    x->comps = SL_NEW_ARRAY(a, VizComp, n_comps + 1);
    if (!x->comps)
        return false;
    for (uint32_t i = x->lo; i < x->hi; i++) {
        if (i == x->lo || strcmp(at(x, i)->computation, at(x, i - 1)->computation) != 0) {
            VizComp *c = &x->comps[x->n_comps++];
            c->name = at(x, i)->computation;
            c->first = i;
            c->caller = VIZ_NONE;
        }
        x->comps[x->n_comps - 1].n++;
        x->comp_of[i - x->lo] = x->n_comps - 1;
    }
    if (x->n_comps)
        x->comps[x->n_comps - 1].is_entry = true;
    return true;
}

const char *
viz_role_word(const char *role)
{
    if (strncmp(role, "branch_", 7) == 0)
        return "branch";
    if (strcmp(role, "calls") == 0)
        return "call";
    return role;
}

static bool
is_reducer_role(const char *role)
{
    return !strcmp(role, "to_apply") || !strcmp(role, "select") || !strcmp(role, "scatter");
}

uint32_t
viz_comp_named(const VizIndex *x, const char *name)
{
    for (uint32_t c = 0; c < x->n_comps; c++)
        if (!strcmp(x->comps[c].name, name))
            return c;
    return VIZ_NONE;
}

/* Callers from the trace's called_computation rows. A computation with one call site is drawn
 * under its caller; one shared by several is drawn once, on its own, with an edge from each.
 * A scalar-only computation reached only through to_apply/select/scatter is a reducer and is
 * not drawn. */
static bool
find_callers(VizIndex *x)
{
    const TraceRun *run = x->run;
    bool *reducer_only = calloc((size_t)x->n_comps + 1, sizeof(bool));
    if (!reducer_only)
        return false;
    for (uint32_t c = 0; c < x->n_comps; c++)
        reducer_only[c] = true;
    for (uint32_t k = 0; k < run->n_calls; k++) {
        const TraceRunCall *call = &run->calls[k];
        if (call->instr < x->lo || call->instr >= x->hi)
            continue;
        uint32_t c = viz_comp_named(x, call->computation);
        if (c == VIZ_NONE || x->comps[c].is_entry)
            continue;
        VizComp *cp = &x->comps[c];
        if (cp->n_callers++ == 0) {
            cp->caller = call->instr;
            cp->role = viz_role_word(call->role);
        }
        reducer_only[c] = reducer_only[c] && is_reducer_role(call->role);
    }
    enum { MAX_REDUCER_INSTRS = 16 };
    for (uint32_t c = 0; c < x->n_comps; c++) {
        VizComp *cp = &x->comps[c];
        if (cp->n_callers > 1)
            cp->caller = VIZ_NONE; /* shared: no single place to nest it */
        if (cp->is_entry || !reducer_only[c] || cp->n > MAX_REDUCER_INSTRS)
            continue;
        bool scalar = true;
        for (uint32_t i = cp->first; i < cp->first + cp->n && scalar; i++) {
            const char *s = at(x, i)->shape;
            size_t len = strlen(s);
            scalar = s[0] != '(' && len >= 2 && strcmp(s + len - 2, "[]") == 0;
        }
        cp->is_reducer = scalar;
        if (scalar)
            cp->caller = VIZ_NONE;
    }
    free(reducer_only);
    return true;
}

const char *
viz_role_phrase(const char *role)
{
    return strcmp(role, "body") == 0        ? "body of"
           : strcmp(role, "condition") == 0 ? "condition of"
           : strcmp(role, "branch") == 0    ? "branch of"
                                            : "called by";
}

static bool
find_users(VizIndex *x, SlArena *a)
{
    uint32_t n = x->hi - x->lo, total = 0;
    x->user_off = SL_NEW_ARRAY(a, uint32_t, n + 1);
    if (!x->user_off)
        return false;
    for (uint32_t i = x->lo; i < x->hi; i++) {
        const TraceRunInstr *in = at(x, i);
        for (uint32_t k = 0; k < in->n_operands; k++) {
            uint32_t o = in->operands[k];
            if (o >= x->lo && o < x->hi) {
                x->user_off[o - x->lo + 1]++;
                total++;
            }
        }
    }
    for (uint32_t i = 0; i < n; i++)
        x->user_off[i + 1] += x->user_off[i];
    x->users = SL_NEW_ARRAY(a, uint32_t, total + 1);
    uint32_t *fill = calloc(n + 1, sizeof(uint32_t));
    bool ok = x->users && fill;
    for (uint32_t i = x->lo; ok && i < x->hi; i++) {
        const TraceRunInstr *in = at(x, i);
        for (uint32_t k = 0; k < in->n_operands; k++) {
            uint32_t o = in->operands[k];
            if (o >= x->lo && o < x->hi)
                x->users[x->user_off[o - x->lo] + fill[o - x->lo]++] = i;
        }
    }
    free(fill);
    return ok;
}

static uint32_t *
none_array(SlArena *a, uint32_t n)
{
    uint32_t *p = SL_NEW_ARRAY(a, uint32_t, n + 1);
    if (p)
        memset(p, 0xff, (size_t)(n + 1) * sizeof(uint32_t));
    return p;
}

SlStatus
viz_index_build(VizIndex *x, const TraceRun *run, TracePhase phase, SlArena *a, SlError *err)
{
    memset(x, 0, sizeof(*x));
    x->run = run;
    x->phase = phase;
    x->lo = phase == TRACE_BEFORE ? 0 : run->n_before;
    x->hi = phase == TRACE_BEFORE ? run->n_before : run->n_instrs;
    x->collective = none_array(a, run->n_instrs);
    x->loop = none_array(a, run->n_instrs);
    x->decision = none_array(a, run->n_instrs);
    x->origin = none_array(a, run->n_instrs);
    if (!x->collective || !x->loop || !x->decision || !x->origin || !find_comps(x, a) || !find_users(x, a) ||
        !find_callers(x)) {
        SlSrcLoc nowhere = {0};
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory indexing the run");
    }
    for (uint32_t k = 0; k < run->n_collectives; k++)
        if (run->collectives[k].instr < run->n_instrs)
            x->collective[run->collectives[k].instr] = k;
    for (uint32_t k = 0; k < run->n_loops; k++)
        if (run->loops[k].loop < run->n_instrs)
            x->loop[run->loops[k].loop] = k;
    for (uint32_t k = 0; k < run->n_decisions; k++) /* the top of each chain */
        if (run->decisions[k].instr < run->n_instrs && run->decisions[k].level == 1)
            x->decision[run->decisions[k].instr] = k;
    for (uint32_t k = 0; k < run->n_origins; k++) /* the last one is the final sharding */
        if (run->origins[k].instr < run->n_instrs)
            x->origin[run->origins[k].instr] = k;
    return SL_OK;
}

/* ---- names ---------------------------------------------------------------------------------- */

static uint32_t
find_name(const TraceRun *run, uint32_t lo, uint32_t hi, const char *name)
{
    for (uint32_t i = lo; i < hi; i++)
        if (strcmp(run->instrs[i].name, name) == 0)
            return i;
    return VIZ_NONE;
}

/* Edit distance, capped: anything at or past `cap` is `cap`. */
static uint32_t
distance(const char *a, const char *b, uint32_t cap)
{
    enum { MAX_LEN = 63 };
    uint32_t row[MAX_LEN + 2];
    size_t la = strlen(a), lb = strlen(b);
    if (la > MAX_LEN || lb > MAX_LEN)
        return cap;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (uint32_t)j;
    for (size_t i = 1; i <= la; i++) {
        uint32_t diag = row[0], best = (uint32_t)i;
        row[0] = (uint32_t)i;
        for (size_t j = 1; j <= lb; j++) {
            uint32_t up = row[j];
            uint32_t v = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < v)
                v = up + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
            if (v < best)
                best = v;
        }
        if (best >= cap)
            return cap;
    }
    return row[lb] < cap ? row[lb] : cap;
}

static SlStatus
unknown_name(const TraceRun *run, const char *name, SlError *err)
{
    enum { N_CLOSEST = 3, CAP = 8 };
    uint32_t best[N_CLOSEST], dist[N_CLOSEST];
    for (uint32_t k = 0; k < N_CLOSEST; k++) {
        best[k] = VIZ_NONE;
        dist[k] = CAP;
    }
    for (uint32_t i = 0; i < run->n_instrs; i++) {
        uint32_t d = distance(name, run->instrs[i].name, dist[N_CLOSEST - 1]);
        if (d >= dist[N_CLOSEST - 1])
            continue;
        bool dup = false;
        for (uint32_t k = 0; k < N_CLOSEST; k++)
            dup = dup ||
                  (best[k] != VIZ_NONE && !strcmp(run->instrs[best[k]].name, run->instrs[i].name));
        if (dup)
            continue;
        uint32_t k = N_CLOSEST - 1;
        for (; k > 0 && dist[k - 1] > d; k--) {
            best[k] = best[k - 1];
            dist[k] = dist[k - 1];
        }
        best[k] = i;
        dist[k] = d;
    }
    char hint[256] = "";
    size_t used = 0;
    for (uint32_t k = 0; k < N_CLOSEST && best[k] != VIZ_NONE && used < sizeof(hint); k++) {
        int n = snprintf(hint + used, sizeof(hint) - used, "%s%%%s", k ? ", " : "; did you mean ",
                         run->instrs[best[k]].name);
        used += n > 0 ? (size_t)n : 0;
    }
    SlSrcLoc nowhere = {0};
    return sl_fail(err, SL_ERR_INVALID, nowhere, "no instruction named %%%s in the run%s", name,
                   hint);
}

SlStatus
viz_resolve(const VizIndex *x, const char *name, SlVec *out, SlError *err)
{
    const TraceRun *run = x->run;
    if (name[0] == '%')
        name++;
    uint32_t before = find_name(run, 0, run->n_before, name);
    if (x->phase == TRACE_BEFORE) {
        if (before == VIZ_NONE) {
            uint32_t after = find_name(run, run->n_before, run->n_instrs, name);
            before = after == VIZ_NONE ? VIZ_NONE : run->instrs[after].derived_from;
        }
        if (before != VIZ_NONE && !SL_VEC_PUSH(out, uint32_t, before))
            before = VIZ_NONE;
        return out->len ? SL_OK : unknown_name(run, name, err);
    }
    for (uint32_t i = x->lo; before != VIZ_NONE && i < x->hi; i++)
        if (run->instrs[i].derived_from == before && !SL_VEC_PUSH(out, uint32_t, i))
            break;
    if (!out->len) {
        uint32_t after = find_name(run, x->lo, x->hi, name);
        if (after != VIZ_NONE)
            (void)SL_VEC_PUSH(out, uint32_t, after);
    }
    return out->len ? SL_OK : unknown_name(run, name, err);
}

/* ---- selections --------------------------------------------------------------------------------
 */

void
viz_select_all(const VizIndex *x, VizSel *s)
{
    s->count = 0;
    s->is_partial = false;
    for (uint32_t i = x->lo; i < x->hi; i++) {
        bool drawn = !x->comps[viz_comp_of(x, i)].is_reducer;
        s->sel[i - x->lo] = drawn ? VIZ_SEL_IN : VIZ_SEL_OUT;
        s->count += drawn;
    }
}

void
viz_select_focus(const VizIndex *x, const uint32_t *seeds, uint32_t n_seeds, int depth,
                 uint32_t max_nodes, VizSel *s, bool *truncated)
{
    uint32_t n = x->hi - x->lo;
    uint32_t *queue = malloc((size_t)(n + 1) * sizeof(uint32_t));
    uint32_t *dist = malloc((size_t)(n + 1) * sizeof(uint32_t));
    *truncated = false;
    s->count = 0;
    s->is_partial = true;
    memset(s->sel, 0, n);
    if (!queue || !dist) {
        free(queue);
        free(dist);
        *truncated = true;
        return;
    }
    uint32_t head = 0, tail = 0;
    for (uint32_t k = 0; k < n_seeds; k++) {
        uint32_t i = seeds[k] - x->lo;
        if (s->sel[i])
            continue;
        s->sel[i] = VIZ_SEL_FOCUS;
        dist[i] = 0;
        queue[tail++] = i;
        s->count++;
    }
    while (head < tail) {
        uint32_t i = queue[head++];
        if ((int)dist[i] >= depth)
            continue;
        const TraceRunInstr *in = at(x, i + x->lo);
        uint32_t n_ops = in->n_operands, n_users = x->user_off[i + 1] - x->user_off[i];
        for (uint32_t k = 0; k < n_ops + n_users; k++) {
            uint32_t j = k < n_ops ? in->operands[k] : x->users[x->user_off[i] + k - n_ops];
            if (j < x->lo || j >= x->hi || s->sel[j - x->lo])
                continue;
            if (s->count >= max_nodes) {
                *truncated = true;
                continue;
            }
            j -= x->lo;
            s->sel[j] = VIZ_SEL_IN;
            dist[j] = dist[i] + 1;
            queue[tail++] = j;
            s->count++;
        }
    }
    free(queue);
    free(dist);
}
