/* base_int.h - what the parts of src/base share and nobody else sees. */
#ifndef SHARDLENS_BASE_INT_H
#define SHARDLENS_BASE_INT_H

#include "base.h"

/* Memory for a big hash table (the interner's, a map's), zeroed: from 2 MiB up it is mapped
 * with transparent huge pages where the system offers them, since probes land anywhere and a
 * TLB miss per probe would cost as much as the probe. Free with the same size. */
void *sl_table_alloc(size_t bytes);
void sl_table_free(void *p, size_t bytes);

#endif
