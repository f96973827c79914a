/* sqlite_sink_rows.c - the rows of the partitioner's events: decisions, reshards, warnings and
 * the origins of propagated shardings.
 * Does not own: windowed loops and collectives (sqlite_sink_collectives.c). */
#include "trace/sqlite_sink_int.h"

void
wr_write_decisions(Wr *w)
{
    const EvDecision *ev = w->db->decisions.data;
    for (size_t k = 0; k < w->db->decisions.len && w->rc == SQLITE_OK; k++) {
        const EvDecision *d = &ev[k];
        sqlite3_stmt *st = wr_list_stmt(w, LIST_DECISION, d->n_alts, d->n_numbers);
        if (!st)
            return;
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_i64(w, st, 2, d->seq);
        wr_bind_row(w, st, 3, wr_row_of(w, BEFORE, d->instr));
        wr_bind_text(w, st, 4, d->handler ? d->handler : "");
        wr_bind_text(w, st, 5, d->strategy ? d->strategy : "");
        wr_bind_text(w, st, 6, d->reason);
        int p = 7;
        for (uint32_t a = 0; a < d->n_alts; a++)
            wr_bind_text(w, st, p++, d->alts[a] ? d->alts[a] : "");
        for (uint32_t n = 0; n < d->n_numbers; n++, p += 2) {
            const TraceKV *kv = &d->numbers[n];
            wr_bind_text(w, st, p, kv->key ? kv->key : "");
            if (kv->str)
                wr_bind_text(w, st, p + 1, kv->str);
            else
                wr_bind_number(w, st, p + 1, kv->num);
        }
        int64_t row = wr_insert_stmt(w, st, "inserting a decision row");
        wr_put(w, &w->decision_row, d->seq, (uint64_t)row);
    }
}

void
wr_write_reshards(Wr *w)
{
    const EvReshard *ev = w->db->reshards.data;
    sqlite3_stmt *st = wr_stmt(w, ST_RESHARD);
    for (size_t k = 0; k < w->db->reshards.len && w->rc == SQLITE_OK; k++) {
        const EvReshard *r = &ev[k];
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_i64(w, st, 2, r->seq);
        wr_bind_row(w, st, 3, wr_row_of(w, BEFORE, r->requester));
        wr_bind_row(w, st, 4, wr_row_of(w, AFTER, r->value));
        wr_bind_text(w, st, 5, sl_sym_cstr(r->value.name));
        wr_bind_text(w, st, 6, r->from);
        wr_bind_text(w, st, 7, r->to);
        wr_bind_text(w, st, 8, r->method);
        wr_bind_row(w, st, 9, wr_row_of(w, AFTER, r->result));
        wr_bind_text(w, st, 10, r->result.name ? sl_sym_cstr(r->result.name) : NULL);
        int64_t row = wr_insert(w, ST_RESHARD);
        wr_put(w, &w->reshard_row, r->seq, (uint64_t)row);
    }
}

void
wr_write_warnings(Wr *w)
{
    const EvWarning *ev = w->db->warnings.data;
    sqlite3_stmt *st = wr_stmt(w, ST_WARNING);
    for (size_t k = 0; k < w->db->warnings.len && w->rc == SQLITE_OK; k++) {
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_row(w, st, 2, wr_row_of(w, BEFORE, ev[k].source));
        wr_bind_text(w, st, 3, trace_warn_kind_name(ev[k].kind));
        wr_bind_text(w, st, 4, ev[k].message);
        (void)wr_insert(w, ST_WARNING);
    }
}

/* One row per propagated sharding; the path as a JSON array of 'before' instr ids. */
void
wr_write_origins(Wr *w)
{
    const EvOrigin *ev = w->db->origins.data;
    sqlite3_stmt *st = wr_stmt(w, ST_ORIGIN);
    SlBuf path;
    sl_buf_init(&path);
    for (size_t k = 0; k < w->db->origins.len && w->rc == SQLITE_OK; k++) {
        int64_t row = wr_row_of(w, BEFORE, ev[k].instr);
        if (!row)
            continue; /* not an instruction of the partitioner's input */
        sl_buf_clear(&path);
        sl_buf_putc(&path, '[');
        for (uint32_t p = 0; p < ev[k].n_path; p++) {
            int64_t r = wr_row_of(w, BEFORE, ev[k].path[p]);
            if (p)
                sl_buf_putc(&path, ',');
            if (r)
                sl_buf_put_i64(&path, r);
            else
                sl_buf_puts(&path, "null");
        }
        sl_buf_putc(&path, ']');
        if (path.failed) {
            w->oom = true;
            break;
        }
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_row(w, st, 2, row);
        wr_bind_text(w, st, 3, ev[k].sharding);
        wr_bind_row(w, st, 4, wr_row_of(w, BEFORE, ev[k].source));
        wr_bind_text(w, st, 5, path.data);
        wr_bind_text(w, st, 6, ev[k].direction);
        if (ev[k].level >= 0)
            wr_bind_i64(w, st, 7, ev[k].level);
        else
            wr_bind_null(w, st, 7);
        wr_bind_text(w, st, 8, ev[k].rule);
        wr_bind_text(w, st, 9, ev[k].candidate);
        wr_bind_text(w, st, 10, ev[k].replaced);
        (void)wr_insert(w, ST_ORIGIN);
    }
    sl_buf_fini(&path);
}
