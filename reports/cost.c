/* cost.c - the cost model of one device group (product.md "Cost model", gspmd.md §H.2): ring
 * bytes per device and the time estimate. Owns: the formulas, and nothing else, so a change of
 * model is one file. Convention (nccl-tests): a link's speed is the bus bandwidth, so the time
 * of a collective is the bytes each device sends by the ring formula divided by that bandwidth,
 * plus a latency per algorithm step. */
#include <string.h>

#include "reports/report_int.h"

static const struct {
    const char *name;
    ReportKind kind;
} k_kinds[] = {
    {"all-gather",           RK_ALL_GATHER    },
    {"reduce-scatter",       RK_REDUCE_SCATTER},
    {"all-reduce",           RK_ALL_REDUCE    },
    {"all-to-all",           RK_ALL_TO_ALL    },
    {"collective-permute",   RK_PERMUTE       },
    {"collective-broadcast", RK_BROADCAST     },
};

ReportKind
report_kind_of(const char *kind)
{
    for (size_t k = 0; k < SL_COUNTOF(k_kinds); k++)
        if (kind && strcmp(kind, k_kinds[k].name) == 0)
            return k_kinds[k].kind;
    return RK_OTHER;
}

double
report_ring_bytes(ReportKind kind, int64_t g, double s)
{
    if (g < 2)
        return 0; /* a group of one moves nothing */
    double share = (double)(g - 1) * s / (double)g;
    switch (kind) {
    case RK_ALL_REDUCE: /* reduce-scatter then all-gather */
        return 2.0 * share;
    case RK_ALL_GATHER:     /* g-1 steps of one Out/g block */
    case RK_REDUCE_SCATTER: /* g-1 steps of one In/g block */
    case RK_ALL_TO_ALL:     /* keeps 1/g, exchanges the rest */
    case RK_BROADCAST:      /* pipelined ring from the root */
        return share;
    case RK_PERMUTE: /* costed per pair by the caller */
    case RK_OTHER:
        return 0;
    }
    return 0;
}

uint32_t
report_ring_steps(ReportKind kind, int64_t g)
{
    if (kind == RK_PERMUTE)
        return 1;
    if (g < 2 || kind == RK_OTHER)
        return 0;
    uint32_t s = g - 1 > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)(g - 1);
    return kind == RK_ALL_REDUCE ? 2 * s : s;
}

double
report_time_us(const ReportOptions *o, uint32_t steps, double bytes, bool crosses_nodes)
{
    double gbps = crosses_nodes ? o->inter_node_gbps : o->link_gbps;
    /* bytes * 8 bit / (gbps * 1e9 bit/s) in seconds, times 1e6 for microseconds */
    return o->latency_us * (double)steps + bytes * 8.0 / (gbps * 1e3);
}

bool
report_crosses_nodes(const ReportOptions *o, const int64_t *devices, uint32_t n)
{
    if (o->devices_per_node <= 0 || n < 2)
        return false;
    for (uint32_t k = 1; k < n; k++)
        if (devices[k] / o->devices_per_node != devices[0] / o->devices_per_node)
            return true;
    return false;
}
