/* sdy.h - Shardy's round-trip form read into the module's GSPMD shardings (README "Shardy").
 * Owns: the `xla.sdy.*` frontend attributes JAX (Shardy on) writes into HLO text - the mesh
 * table in the header, `xla.sdy.sharding` on parameters, `Sharding` custom calls and the
 * `xla.sdy.FuncResultSharding` custom calls that carry the entry's result shardings - and their
 * conversion to ShdSharding exactly as XLA's Shardy export builds tile assignments. Does not own:
 * sharding values (src/sharding) or propagation (src/propagate).
 * Invariant: a module without `xla.sdy.meshes` and without `xla.sdy.sharding` comes back
 * unchanged; importing an imported module changes nothing more. */
#ifndef SHARDLENS_SDY_H
#define SHARDLENS_SDY_H

#include "base/base.h"
#include "ir/ir.h"

/* Where the parser read an `xla.sdy.*` value (the value's first byte, quote included). */
typedef struct SdyValueLoc {
    const char *value; /* the attribute value's text as stored in the module */
    uint32_t line, col;
} SdyValueLoc;

/* requires: `m` parsed and its computation references resolved; `locs` (n_locs entries, may be
 *           0) locate values for errors.
 * produces: in a module whose header has `xla.sdy.meshes`, what XLA's Shardy import keeps:
 *           parameters, `Sharding`, python-callback custom calls, send/recv/after-all take the
 *           converted `xla.sdy.sharding` (it wins over `sharding=`); every other `sharding=` is
 *           dropped (XLA drops them too); FuncResultSharding calls are removed, their operand
 *           forwarded, and their sharding put on the entry root leaf they feed; open dimensions
 *           of a `Sharding` call become `unspecified_dims` in its backend_config; a shard_map
 *           (GlobalToLocalShape, call of the body, LocalToGlobalShape) becomes GSPMD's copy +
 *           SPMDFullToShardShape, manual body, copy + SPMDShardToFullShape (over some axes:
 *           manual subgroups, open dims as Sharding calls with unspecified_dims). Then the
 *           header's xla.sdy.meshes and the consumed attributes are removed (as XLA does), so
 *           the printed module reads back unchanged.
 * errors:   malformed sdy text SL_ERR_PARSE and inconsistent shardings SL_ERR_INVALID at
 *           FILE:LINE:COL of the offending byte; nested shard_maps and sharding groups
 *           SL_ERR_UNSUPPORTED naming the construct. */
SlStatus sdy_import(IrModule *m, const SdyValueLoc *locs, uint32_t n_locs, const char *path,
                    SlError *err);

#endif
