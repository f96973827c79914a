/* sqlite_sink_module.c - the rows of a module: one instr row per instruction of each phase,
 * and the called_computation rows that link callers to callees.
 * Invariant: instr rows are inserted in the order assign_rows numbered them. */
#include <stdio.h>

#include "sharding/shd.h"
#include "trace/sqlite_sink_int.h"

static void
write_instr(Wr *w, int phase, const IrComputation *c, const IrInstr *i)
{
    sqlite3_stmt *st = wr_list_stmt(w, LIST_INSTR, i->n_operands, 0);
    if (!st)
        return;
    wr_bind_i64(w, st, 1, w->next_instr_row++); /* the row assign_rows gave it */
    wr_bind_i64(w, st, 2, w->run_id);
    wr_bind_text(w, st, 3, wr_phase_name(phase));
    wr_bind_i64(w, st, 4, i->id);
    wr_bind_text(w, st, 5, sl_sym_cstr(c->name));
    wr_bind_i64(w, st, 6, c->root ? c->root == i : i == c->instrs[c->n_instrs - 1]);
    wr_bind_text(w, st, 7, sl_sym_cstr(i->name));
    wr_bind_text(w, st, 8, ir_op_name(i->op));
    /* Shape and sharding share one buffer: "shape\0sharding". */
    sl_buf_clear(&w->text);
    ir_shape_print(&i->shape, false, &w->text);
    size_t shape_len = w->text.len;
    const ShdSharding *s = ir_instr_sharding(i);
    if (s) {
        sl_buf_putc(&w->text, '\0');
        shd_print(s, &w->text);
    }
    if (w->text.failed)
        w->oom = true;
    if (w->rc == SQLITE_OK && !w->oom)
        wr_bind_rc(w, sqlite3_bind_text(st, 9, w->text.data, (int)shape_len, SQLITE_STATIC),
                   "shape");
    if (s && w->rc == SQLITE_OK && !w->oom)
        wr_bind_rc(w,
                   sqlite3_bind_text(st, 10, w->text.data + shape_len + 1,
                                     (int)(w->text.len - shape_len - 1), SQLITE_STATIC),
                   "sharding");
    wr_bind_i64(w, st, 11, ir_shape_byte_size(&i->shape));
    const IrMetadata *md = ir_instr_metadata(i);
    if (md) {
        wr_bind_str_or_null(w, st, 12, md->op_name);
        wr_bind_str_or_null(w, st, 13, md->source_file);
        if (md->source_line > 0)
            wr_bind_i64(w, st, 14, md->source_line);
    }
    if (phase == AFTER)
        wr_bind_row(w, st, 15, wr_source_row(w, i));
    if (i->op == IR_OP_PARAMETER)
        wr_bind_i64(w, st, 16, i->parameter_number);
    for (uint32_t o = 0; o < i->n_operands; o++) { /* null for an operand outside the module */
        const IrInstr *op = i->operands[o];
        wr_bind_row(w, st, 17 + (int)o,
                    op && op->id < w->n_ids[phase] ? w->rows_by_id[phase][op->id] : 0);
    }
    (void)wr_insert_stmt(w, st, "inserting an instr row");
}

/* The called_computation role of the `k`th computation of attribute `key` ("branch_1"). */
static const char *
call_role(IrAttrKey key, uint32_t k, char *buf, size_t cap)
{
    if (key == IR_ATTR_TRUE_COMPUTATION)
        return "branch_0";
    if (key == IR_ATTR_FALSE_COMPUTATION)
        return "branch_1";
    if (key == IR_ATTR_BRANCH_COMPUTATIONS) {
        snprintf(buf, cap, "branch_%u", k);
        return buf;
    }
    if (key == IR_ATTR_CALLS || key == IR_ATTR_CALLED_COMPUTATIONS)
        return "calls";
    return ir_attr_name(key); /* body, condition, to_apply, select, scatter */
}

/* One called_computation row per (caller, callee) pair, in attribute print order. */
static void
write_calls(Wr *w, int phase, const IrInstr *i)
{
    sqlite3_stmt *st = wr_stmt(w, ST_CALL);
    uint32_t idx = 0;
    char buf[32];
    for (uint16_t a = 0; a < i->n_attrs && w->rc == SQLITE_OK; a++) {
        const IrAttr *at = &i->attrs[a];
        if (at->key >= IR_ATTR_OTHER)
            continue;
        IrAttrKind kind = ir_attr_kind(at->key);
        uint32_t n = kind == IR_AK_COMP ? 1 : kind == IR_AK_COMPS ? at->u.comps.n : 0;
        for (uint32_t k = 0; k < n && w->rc == SQLITE_OK; k++) {
            const IrComputation *callee = kind == IR_AK_COMP ? at->u.comp : at->u.comps.v[k];
            if (!callee)
                continue;
            wr_bind_i64(w, st, 1, w->run_id);
            wr_bind_i64(w, st, 2, w->rows_by_id[phase][i->id]);
            wr_bind_i64(w, st, 3, idx++);
            wr_bind_text(w, st, 4, call_role(at->key, k, buf, sizeof(buf)));
            wr_bind_text(w, st, 5, sl_sym_cstr(callee->name));
            (void)wr_insert(w, ST_CALL);
        }
    }
}

void
wr_write_module(Wr *w, int phase)
{
    const IrModule *m = w->mod[phase];
    if (w->oom)
        return;
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t k = 0; k < m->comps[c]->n_instrs && w->rc == SQLITE_OK && !w->oom; k++)
            write_instr(w, phase, m->comps[c], m->comps[c]->instrs[k]);

    for (uint32_t c = 0; c < m->n_comps; c++) {
        const IrComputation *comp = m->comps[c];
        for (uint32_t k = 0; k < comp->n_instrs && w->rc == SQLITE_OK; k++)
            if (comp->instrs[k]->id < w->n_ids[phase])
                write_calls(w, phase, comp->instrs[k]);
    }
}
