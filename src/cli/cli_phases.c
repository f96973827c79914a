/* cli_phases.c - --time-phases: wall and CPU time, bytes and peak RSS of each step of a run
 * (cli_util.h). Owns: the clock reads for phase timings (cli_trace.c owns the trace's). Output
 * goes to stderr only, so timing a run never changes what it writes. */
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_util.h"

static const char *const k_phase_names[CLI_PHASE_COUNT] = {
    [CLI_PHASE_READ] = "read",           [CLI_PHASE_PARSE] = "parse", [CLI_PHASE_CHECK] = "check",
    [CLI_PHASE_PROPAGATE] = "propagate", [CLI_PHASE_PARTITION] = "partition", [CLI_PHASE_TRACE] = "trace", [CLI_PHASE_PRINT] = "print",
    [CLI_PHASE_WRITE] = "write",
};

static double
clock_s(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Resident memory now (Linux /proc); 0 when unknown. */
static long
rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? resident * (page / 1024) : 0;
}

/* The kernel's high-water mark, raised to what is resident now and to every peak reported
 * before: the mark is updated lazily (and counts pages statm may count differently), so on
 * its own it can lag behind the RSS read a moment later. A peak is never below an RSS. */
static long
peak_rss_kb(const CliPhases *p, long rss_now)
{
    struct rusage ru;
    long peak = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
    peak = peak > rss_now ? peak : rss_now;
    for (int k = 0; k < CLI_PHASE_COUNT; k++) {
        peak = p->peak_rss_kb[k] > peak ? p->peak_rss_kb[k] : peak;
        peak = p->rss_kb[k] > peak ? p->rss_kb[k] : peak;
    }
    return peak;
}

void
cli_phases_init(CliPhases *p)
{
    *p = (CliPhases){0};
    p->start_wall = p->since_wall = clock_s(CLOCK_MONOTONIC);
    p->start_cpu = p->since_cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

/* Charges the time since the last switch to the running phase and restarts the clock. */
static void
charge_top(CliPhases *p)
{
    double w = clock_s(CLOCK_MONOTONIC), c = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if (p->depth) {
        CliPhase top = p->stack[p->depth - 1];
        p->wall_s[top] += w - p->since_wall;
        p->cpu_s[top] += c - p->since_cpu;
    }
    p->since_wall = w;
    p->since_cpu = c;
}

void
cli_phase_begin(CliPhases *p, CliPhase ph)
{
    if (!p || SL_NEVER(p->depth == CLI_PHASE_MAX_NEST))
        return;
    charge_top(p);
    p->stack[p->depth++] = ph;
    p->ran[ph] = true;
}

void
cli_phase_end(CliPhases *p, CliPhase ph, uint64_t bytes)
{
    if (!p || SL_NEVER(p->depth == 0 || p->stack[p->depth - 1] != ph))
        return;
    charge_top(p);
    p->depth--;
    p->bytes[ph] += bytes;
    p->rss_kb[ph] = rss_kb();
    p->peak_rss_kb[ph] = peak_rss_kb(p, p->rss_kb[ph]);
}

void
cli_phases_print(const CliPhases *p, FILE *out)
{
    double wall = 0, cpu = 0;
    for (int k = 0; k < CLI_PHASE_COUNT; k++) {
        if (!p->ran[k])
            continue;
        fprintf(out, "time-phases: %-9s wall %8.4f s  cpu %8.4f s", k_phase_names[k], p->wall_s[k],
                p->cpu_s[k]);
        if (p->bytes[k]) {
            double mb = (double)p->bytes[k] / 1e6;
            fprintf(out, "  %9.2f MB", mb);
            if (p->cpu_s[k] >= 1e-3) /* below a millisecond the rate is noise */
                fprintf(out, "  %8.1f MB/s cpu", mb / p->cpu_s[k]);
        }
        fprintf(out, "  RSS %7.1f MB  peak %7.1f MB\n", (double)p->rss_kb[k] / 1024,
                (double)p->peak_rss_kb[k] / 1024);
    }
    wall = clock_s(CLOCK_MONOTONIC) - p->start_wall;
    cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - p->start_cpu;
    long rss = rss_kb();
    fprintf(out, "time-phases: %-9s wall %8.4f s  cpu %8.4f s  RSS %7.1f MB  peak %7.1f MB\n",
            "total", wall, cpu, (double)rss / 1024, (double)peak_rss_kb(p, rss) / 1024);
}
