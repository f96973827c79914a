/* hlo.h - HLO text in and out (hlo-text.md). Owns: the lexer, the parser and the canonical
 * printer. Does not own: the IR's construction rules (src/ir) or sharding text (src/sharding,
 * called for `sharding=` values). Invariant: print(parse(print(parse(x)))) == print(parse(x))
 * byte for byte. */
#ifndef SHARDLENS_HLO_H
#define SHARDLENS_HLO_H

#include "base/base.h"
#include "ir/ir.h"

/* Parses a whole module. `path` is used for error locations only. The module and everything it
 * points to live in `arena`; names are interned in `names`. On error `*out` is NULL and `err`
 * holds FILE:LINE:COL and a message. */
SlStatus hlo_parse(SlArena *arena, SlInterner *names, SlStr text, const char *path,
                   IrModule **out, SlError *err);
/* The same over a whole input file, giving the file's pages back as the parse moves past
 * them (a big module's text then never sits in memory whole next to its IR). */
SlStatus hlo_parse_file(SlArena *arena, SlInterner *names, SlFileText *src, const char *path,
                        IrModule **out, SlError *err);

/* Canonical text of a module / one instruction line (without indentation or newline). A
 * streaming `out` (SlBuf.spill set) is handed on in pieces while the module is printed. */
void hlo_print_module(const IrModule *m, SlBuf *out);
void hlo_print_instr(const IrInstr *i, SlBuf *out);
/* One attribute's value text as it appears after `key=`. */
void hlo_print_attr_value(const IrAttr *a, SlBuf *out);

/* Whether `name` is an instruction attribute of XLA's HLO text (decoded by shardlens, or one
 * it keeps verbatim). */
bool hlo_attr_is_xla(const char *name);
/* The attribute name nearest to `name` within one or two edits (case-insensitive), or NULL. */
const char *hlo_attr_nearest(const char *name);

#endif
