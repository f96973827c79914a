/* memory_placement.c - the memory-placement rewrite XLA's GPU and TPU pipelines run before
 * SPMD partitioning (ConvertMemoryPlacementToInternalAnnotations): JAX's `device_put` to
 * another memory kind is a side-effecting custom call `annotate_device_placement` whose
 * frontend attribute `_xla_buffer_placement` names the memory; XLA turns it into the internal
 * annotation MoveToHost (pinned_host, unpinned_host), MoveToDevice (device), PinToDevice
 * (pinned_device) or PinToDeviceSram (device_sram, spelled vmem by older versions). Those are
 * pass-through ops for sharding propagation and the partitioner, so the value keeps its
 * sharding instead of being replicated at every offload point.
 *
 * Like XLA, the new call keeps only the operand and the sharding: no side effect, frontend
 * attributes or metadata. The instruction is rewritten in place (XLA adds a new one), so its
 * name stays and its users need no redirection; a call whose shape is not its operand's is
 * left alone (XLA would give the new call the operand's shape). */
#include "ir.h"

#include <string.h>

typedef struct Placement {
    const char *memory; /* _xla_buffer_placement value */
    const char *target; /* the internal annotation, quoted as attribute text is */
} Placement;

static const Placement kPlacements[] = {
    {"pinned_host", "\"MoveToHost\""},     {"unpinned_host", "\"MoveToHost\""},
    {"device", "\"MoveToDevice\""},        {"pinned_device", "\"PinToDevice\""},
    {"device_sram", "\"PinToDeviceSram\""}, {"vmem", "\"PinToDeviceSram\""},
};

static SlStr
unquote(SlStr s)
{
    if (s.len >= 2 && s.ptr[0] == '"' && s.ptr[s.len - 1] == '"') {
        s.ptr++;
        s.len -= 2;
    }
    return s;
}

/* The internal target for `i`, or NULL when `i` is not a placement XLA converts. */
static const char *
internal_target(const IrInstr *i)
{
    if (i->op != IR_OP_CUSTOM_CALL || i->n_operands != 1)
        return NULL;
    const IrAttr *t = ir_instr_find_attr(i, IR_ATTR_CUSTOM_CALL_TARGET);
    if (!t || !sl_str_eq_cstr(unquote(t->u.text), "annotate_device_placement"))
        return NULL;
    const IrAttr *fe = ir_instr_find_attr(i, IR_ATTR_FRONTEND_ATTRIBUTES);
    if (!fe)
        return NULL;
    for (uint32_t k = 0; k < fe->u.frontend.n; k++) {
        const IrFrontendAttr *f = &fe->u.frontend.v[k];
        if (strcmp(sl_sym_cstr(f->key), "_xla_buffer_placement") != 0)
            continue;
        SlStr v = unquote(f->value);
        for (size_t p = 0; p < SL_COUNTOF(kPlacements); p++)
            if (sl_str_eq_cstr(v, kPlacements[p].memory))
                return kPlacements[p].target;
        return NULL; /* another memory: XLA leaves the call as it is */
    }
    return NULL;
}

/* Keeps the target and the sharding; drops custom_call_has_side_effect, frontend attributes,
 * metadata and the rest, as XLA's freshly created call has none of them. */
static void
rewrite(IrInstr *i, const char *target)
{
    uint32_t w = 0;
    for (uint32_t k = 0; k < i->n_attrs; k++) {
        IrAttr a = i->attrs[k];
        if (a.key == IR_ATTR_CUSTOM_CALL_TARGET)
            a.u.text = sl_str(target);
        else if (a.key != IR_ATTR_SHARDING)
            continue;
        i->attrs[w++] = a;
    }
    i->n_attrs = (uint16_t)w;
}

uint32_t
ir_convert_memory_placement(IrModule *m)
{
    uint32_t n = 0;
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t k = 0; k < m->comps[c]->n_instrs; k++) {
            IrInstr *i = m->comps[c]->instrs[k];
            const char *target = internal_target(i);
            if (target && ir_shape_equal(&i->shape, &i->operands[0]->shape, false)) {
                rewrite(i, target);
                n++;
            }
        }
    return n;
}
