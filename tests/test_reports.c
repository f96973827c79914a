/* test_reports.c - reports/: hand-computed bytes for every collective kind (gspmd.md §H.3),
 * uneven groups, groups of one, permutes with partial pairs, sub-byte types, loops with known
 * and unknown trip counts, the time model, mesh axes, summary.json against its schema and byte
 * determinism, and diff's budget edge. Runs are made by partitioning small hand-written modules
 * (whose collectives the partitioner copies through) into a temporary trace database; the
 * figures are also checked against the database's own per-device view on every sample.
 * This test reads the schema with cJSON to validate summary.json; the library keeps cJSON
 * inside reports/. */
#include <cJSON.h>
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "reports/report.h"
#include "reports/report_int.h"
#include "trace_fixture.h"

/* ---- reports of recorded runs ---------------------------------------------------------- */

static const Report *
build(TraceFx *fx, const TraceRun *run, const ReportOptions *o)
{
    Report *r = NULL;
    SlError err = {0};
    ReportOptions dflt;
    report_options_init(&dflt);
    if (report_build(run, o ? o : &dflt, &fx->arena, &r, &err))
        fail_msg("report_build: %s", err.msg);
    return r;
}

static const ReportCollective *
coll(const Report *r, const char *name)
{
    for (uint32_t k = 0; k < r->n_collectives; k++)
        if (strcmp(r->collectives[k].name, name) == 0)
            return &r->collectives[k];
    fail_msg("no collective %s", name);
    return NULL;
}

static void
near(const char *what, double got, double want)
{
    if (fabs(got - want) > 1e-9 * (fabs(want) + 1))
        fail_msg("%s: got %.12g, want %.12g", what, got, want);
}

/* Every device's figures equal the trace database's device_traffic view. */
static void
check_against_view(const char *what, const TraceRun *run, const Report *r)
{
    for (uint32_t k = 0; k < run->n_devices; k++) {
        const TraceRunDevice *v = &run->devices[k];
        if (v->device < 0 || v->device >= r->n_devices)
            fail_msg("%s: view has device %lld", what, (long long)v->device);
        const ReportTraffic *t = &r->devices[v->device].t;
        /* the view keeps collectives of unknown trip count apart, as the report does */
        char label[160];
        snprintf(label, sizeof(label), "%s: device %lld send", what, (long long)v->device);
        near(label, t->send_bytes, v->send_bytes);
        snprintf(label, sizeof(label), "%s: device %lld recv", what, (long long)v->device);
        near(label, t->recv_bytes, v->recv_bytes);
        if (v->unknown_trip_collectives != t->unknown_trip_collectives)
            fail_msg("%s: device %lld: unknown-trip collectives %u vs %u", what,
                     (long long)v->device, t->unknown_trip_collectives,
                     v->unknown_trip_collectives);
    }
    for (uint32_t k = 0; k < run->n_collectives; k++) {
        char label[160];
        snprintf(label, sizeof(label), "%s: S of %s", what, r->collectives[k].name);
        near(label, r->collectives[k].bytes, run->collectives[k].bytes);
    }
}

/* ---- every kind, by hand (gspmd.md §H.3) ------------------------------------------------- */

static const char k_kinds[] =
    "HloModule kinds, num_partitions=4\n\n"
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT a = f32[] add(x, y)\n}\n\n"
    "ENTRY main {\n"
    "  p = f32[2,16] parameter(0), metadata={op_name=\"p\"}\n"
    "  ag = f32[8,16] all-gather(p), channel_id=1, replica_groups=[1,4]<=[4], dimensions={0}, "
    "use_global_device_ids=true, metadata={op_name=\"layer/gather\"}\n"
    "  ar = f32[8,16] all-reduce(ag), channel_id=2, replica_groups={{0,1},{2,3}}, "
    "use_global_device_ids=true, to_apply=add\n"
    "  rs = f32[2,16] reduce-scatter(ar), channel_id=3, replica_groups=[1,4]<=[4], "
    "use_global_device_ids=true, dimensions={0}, to_apply=add\n"
    "  r3 = f32[2,4,4] reshape(rs)\n"
    "  a2a = f32[2,4,4] all-to-all(r3), channel_id=4, replica_groups=[1,4]<=[4], dimensions={1}\n"
    "  r2 = f32[2,16] reshape(a2a)\n"
    "  cp = f32[2,16] collective-permute(r2), channel_id=5, "
    "source_target_pairs={{0,1},{1,2},{2,3}}\n"
    "  ROOT one = f32[2,16] all-reduce(cp), channel_id=6, replica_groups={{0},{1},{2},{3}}, "
    "use_global_device_ids=true, to_apply=add\n"
    "}\n";

static void
test_kinds_by_hand(void **state)
{
    TraceFx *fx = *state;
    const TraceRun *run = tfx_traced(fx, k_kinds, 4, NULL);
    const Report *r = build(fx, run, NULL);
    assert_int_equal(r->n_collectives, 6);
    assert_int_equal(r->n_devices, 4);
    static const struct {
        const char *name, *kind;
        double s, sum_send, max_send;
    } want[] = {
        {"ag.1",  "all-gather",         512, 4 * 384, 384}, /* Out 512, 3/4 of it */
        {"ar.1",  "all-reduce",         512, 4 * 512, 512}, /* g = 2: 2 * 1/2 * 512 */
        {"rs.1",  "reduce-scatter",     512, 4 * 384, 384}, /* In = 4 x 128 */
        {"a2a.1", "all-to-all",         128, 4 * 96,  96 },
        {"cp.1",  "collective-permute", 128, 3 * 128, 128}, /* 3 pairs */
        {"one.1", "all-reduce",         128, 0,       0  }, /* groups of one */
    };
    for (size_t k = 0; k < SL_COUNTOF(want); k++) {
        const ReportCollective *c = coll(r, want[k].name);
        assert_string_equal(c->kind, want[k].kind);
        near(want[k].name, c->bytes, want[k].s);
        near(want[k].name, c->send_bytes, want[k].sum_send);
        near(want[k].name, c->recv_bytes, want[k].sum_send);
        near(want[k].name, c->max_device_send_bytes, want[k].max_send);
        assert_int_equal(c->trip_count, 1);
    }
    /* device 0 receives nothing from the permute, device 3 sends nothing */
    static const double send[] = {1504, 1504, 1504, 1376}, recv[] = {1376, 1504, 1504, 1504};
    for (uint32_t d = 0; d < 4; d++) {
        near("send", r->devices[d].t.send_bytes, send[d]);
        near("recv", r->devices[d].t.recv_bytes, recv[d]);
        assert_int_equal(r->devices[d].t.collectives, 6);
    }
    near("total", r->total.send_bytes, 5888);
    assert_int_equal(r->bottleneck_device, 1); /* 1 and 2 tie: the lowest id */
    /* per kind, sorted by name; per source op and op_name */
    assert_int_equal(r->n_kinds, 5);
    assert_string_equal(r->kinds[0].key, "all-gather");
    assert_string_equal(r->kinds[1].key, "all-reduce");
    assert_int_equal(r->kinds[1].t.collectives, 2);
    near("all-reduce kind", r->kinds[1].t.send_bytes, 2048);
    assert_string_equal(r->sources[0].key, "ar");
    near("top source", r->sources[0].t.send_bytes, 2048);
    bool found = false;
    for (uint32_t k = 0; k < r->n_op_names; k++)
        if (strcmp(r->op_names[k].key, "layer/gather") == 0) {
            near("op_name", r->op_names[k].t.send_bytes, 1536);
            found = true;
        }
    assert_true(found);
    check_against_view("kinds", run, r);
}

/* ---- uneven groups, devices outside every group, sub-byte types --------------------------- */

static const char k_uneven[] =
    "HloModule uneven, num_partitions=4\n\n"
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT a = f32[] add(x, y)\n}\n\n"
    "ENTRY main {\n"
    "  p = f32[8] parameter(0)\n"
    "  ROOT ar = f32[8] all-reduce(p), channel_id=1, replica_groups={{0,1,2},{3}}, "
    "use_global_device_ids=true, to_apply=add\n"
    "}\n";

static void
test_uneven_groups(void **state)
{
    TraceFx *fx = *state;
    const TraceRun *run = tfx_traced(fx, k_uneven, 4, NULL);
    const Report *r = build(fx, run, NULL);
    const ReportCollective *c = coll(r, "ar.1");
    double per = 2.0 * 2.0 / 3.0 * 32; /* g = 3, S = 32 B */
    for (uint32_t d = 0; d < 3; d++)
        near("in the group of three", r->devices[d].t.send_bytes, per);
    near("alone", r->devices[3].t.send_bytes, 0); /* its group is of one */
    near("sum", c->send_bytes, 3 * per);
    assert_int_equal(c->group_size, 3);
    assert_int_equal(c->n_groups, 2);
    assert_int_equal(c->steps, 4);
}

static const char k_partial_pairs[] =
    "HloModule pairs, num_partitions=4\n\n"
    "ENTRY main {\n"
    "  p = s4[3] parameter(0)\n"
    "  ag = s4[12] all-gather(p), channel_id=1, replica_groups=[1,4]<=[4], dimensions={0}, "
    "use_global_device_ids=true\n"
    "  ROOT cp = s4[12] collective-permute(ag), channel_id=2, source_target_pairs={{1,3},{2,2}}\n"
    "}\n";

static void
test_partial_pairs_and_packed_bytes(void **state)
{
    TraceFx *fx = *state;
    const TraceRun *run = tfx_traced(fx, k_partial_pairs, 4, NULL);
    const Report *r = build(fx, run, NULL);
    /* s4[12] is 6 bytes packed; the all-gather moves 3/4 of it from every device */
    near("ag S", coll(r, "ag.1")->bytes, 6);
    near("ag per device", coll(r, "ag.1")->max_device_send_bytes, 4.5);
    /* only 1 -> 3 moves: a pair from a device to itself moves nothing */
    static const double send[] = {4.5, 4.5 + 6, 4.5, 4.5}, recv[] = {4.5, 4.5, 4.5, 4.5 + 6};
    for (uint32_t d = 0; d < 4; d++) {
        near("send", r->devices[d].t.send_bytes, send[d]);
        near("recv", r->devices[d].t.recv_bytes, recv[d]);
    }
    near("cp sum", coll(r, "cp.1")->send_bytes, 6);
    check_against_view("pairs", run, r);
}

static void
test_shape_bytes(void **state)
{
    (void)state;
    static const struct {
        const char *shape;
        bool ok;
        double bytes;
    } cases[] = {
        {"f32[8,16]",               true,  512},
        {"s4[3]",                   true,  1.5},
        {"(f32[2], s4[3])",         true,  9.5},
        {"bf16[2,3]{1,0}",          true,  12 },
        {"pred[4]",                 true,  4  },
        {"f32[<=8]",                true,  32 },
        {"f32[]",                   true,  4  },
        {"(f32[2], (u2[4], s8[]))", true,  10 },
        {"f8e4m3fn[10]",            true,  10 },
        {"foo[2]",                  false, 0  },
        {"f32[2",                   false, 0  },
        {"f32[2] junk",             false, 0  },
    };
    for (size_t k = 0; k < SL_COUNTOF(cases); k++) {
        double b = -1;
        bool ok = report_shape_bytes(cases[k].shape, &b);
        if (ok != cases[k].ok || (ok && b != cases[k].bytes))
            fail_msg("%s: got %d %g", cases[k].shape, ok, b);
    }
}

/* ---- loops: known and unknown trip counts ---------------------------------------------------- */

/* The bound is tuple element 2, passed through from the entry's parameter: no analysis can
 * count it, so only backend_config does. */
static const char k_loop_fmt[] =
    "HloModule loop, num_partitions=2\n\n"
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT a = f32[] add(x, y)\n}\n\n"
    "cond {\n  p = (s32[], f32[8], s32[]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
    "  n = s32[] get-tuple-element(p), index=2\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n"
    "body {\n  p = (s32[], f32[8], s32[]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
    "  v = f32[8] get-tuple-element(p), index=1\n  n = s32[] get-tuple-element(p), index=2\n"
    "  one = s32[] constant(1)\n  i1 = s32[] add(i, one)\n"
    "  ar = f32[8] all-reduce(v), channel_id=1, replica_groups={{0,1}}, "
    "use_global_device_ids=true, to_apply=add\n"
    "  ROOT t = (s32[], f32[8], s32[]) tuple(i1, ar, n)\n}\n\n"
    "ENTRY main {\n  x = f32[8] parameter(0)\n  bound = s32[] parameter(1)\n  z = s32[] constant(0)\n"
    "  t = (s32[], f32[8], s32[]) tuple(z, x, bound)\n"
    "  w = (s32[], f32[8], s32[]) while(t), condition=cond, body=body%s\n"
    "  g = f32[8] get-tuple-element(w), index=1\n"
    "  ROOT out = f32[8] all-reduce(g), channel_id=2, replica_groups={{0,1}}, "
    "use_global_device_ids=true, to_apply=add\n"
    "}\n";

static const TraceRun *
traced_loop(TraceFx *fx, const char *backend_config)
{
    char hlo[2048];
    snprintf(hlo, sizeof(hlo), k_loop_fmt, backend_config);
    return tfx_traced(fx, hlo, 2, NULL);
}

static void
test_loop_known_trip_count(void **state)
{
    TraceFx *fx = *state;
    const TraceRun *run = traced_loop(fx, ", backend_config={\"known_trip_count\":{\"n\":\"5\"}}");
    const Report *r = build(fx, run, NULL);
    assert_int_equal(coll(r, "ar.1")->trip_count, 5);
    assert_int_equal(coll(r, "out.1")->trip_count, 1);
    /* 32 B per device per execution (2 * 1/2 * 32): 5 in the loop, 1 after it */
    near("device 0", r->devices[0].t.send_bytes, 6 * 32);
    near("total", r->total.send_bytes, 2 * 6 * 32);
    assert_int_equal(r->total.unknown_trip_collectives, 0);
    check_against_view("known trip", run, r);
}

static void
test_loop_unknown_trip_count(void **state)
{
    TraceFx *fx = *state;
    const TraceRun *run = traced_loop(fx, "");
    const Report *r = build(fx, run, NULL);
    assert_int_equal(coll(r, "ar.1")->trip_count, -1);
    /* never counted as once: only the collective after the loop is in the totals */
    near("device 0", r->devices[0].t.send_bytes, 32);
    near("device 0 unknown", r->devices[0].t.unknown_send_bytes, 32);
    assert_int_equal(r->devices[0].t.unknown_trip_collectives, 1);
    assert_int_equal(r->total.unknown_trip_collectives, 1);
    near("total", r->total.send_bytes, 64);
    near("total unknown", r->total.unknown_send_bytes, 64);
    SlBuf text;
    sl_buf_init(&text);
    report_print_text(r, &text);
    if (!strstr(text.data, "1 collective in loops with unknown trip counts: 64 B sent per "
                           "execution, not included above"))
        fail_msg("text does not state the unknown trip count:\n%s", text.data);
    if (!strstr(text.data, "unknown"))
        fail_msg("no unknown trip in the collectives table:\n%s", text.data);
    /* which loop and why: the bound comes from the entry's parameter */
    if (!strstr(text.data, "loops with unknown trip counts (1; ") ||
        !strstr(text.data, "\n  %w.1  %w                1                  64 B  the bound "
                           "(tuple element 2) is a parameter: %bound of main\n"))
        fail_msg("text does not name the unknown loop:\n%s", text.data);
    sl_buf_fini(&text);
    assert_int_equal(r->n_whiles, 1);
    assert_string_equal(r->whiles[0].method, "unknown");
    check_against_view("unknown trip", run, r);
}

/* ---- the time model ---------------------------------------------------------------------- */

/* ---- rollups (rollup.c): per mesh axes, per op_name prefix, per loop, per computation ---- */

static const ReportRollup *
rollup(const ReportRollup *rows, uint32_t n, const char *key)
{
    for (uint32_t k = 0; k < n; k++)
        if (strcmp(rows[k].key, key) == 0)
            return &rows[k];
    fail_msg("no rollup row '%s'", key);
    return NULL;
}

static void
test_rollups(void **state)
{
    TraceFx *fx = *state;
    const TraceRun *run = tfx_traced(fx, k_kinds, 4, NULL);
    ReportOptions o;
    report_options_init(&o);
    o.mesh = "data=2,model=2";
    o.op_name_depth = 1;
    const Report *r = build(fx, run, &o);
    /* summed over devices: ag 4*384, rs 4*384, a2a 4*96, cp 3*128 span both axes; ar 4*256*2
     * spans model; one (groups of one) moves nothing */
    assert_int_equal(r->n_by_axes, 3);
    assert_string_equal(r->by_axes[0].key, "data,model");
    near("data,model", r->by_axes[0].t.send_bytes, 1536 + 1536 + 384 + 384);
    assert_int_equal(r->by_axes[0].t.collectives, 4);
    assert_string_equal(r->by_axes[1].key, "model");
    near("model", r->by_axes[1].t.send_bytes, 2048);
    assert_string_equal(r->by_axes[2].key, "none");
    near("none", r->by_axes[2].t.send_bytes, 0);
    /* crossing an axis, alone or with the other */
    assert_int_equal(r->n_by_crossed, 2);
    assert_string_equal(r->by_crossed[0].key, "model");
    near("crossing model", r->by_crossed[0].t.send_bytes, 3840 + 2048);
    near("crossing data", rollup(r->by_crossed, r->n_by_crossed, "data")->t.send_bytes, 3840);
    /* op_name prefixes of one component: only ag carries one ("layer/gather") */
    near("layer", rollup(r->by_prefix, r->n_by_prefix, "layer")->t.send_bytes, 1536);
    near("no op_name", rollup(r->by_prefix, r->n_by_prefix, "")->t.send_bytes, 4352);
    assert_int_equal(r->n_by_prefix, 2);
    assert_int_equal(r->n_by_loop, 0);

    /* a loop of 5: its all-reduce 2 devices * 32 B, five times; main's once */
    run = traced_loop(fx, ", backend_config={\"known_trip_count\":{\"n\":\"5\"}}");
    r = build(fx, run, NULL);
    assert_int_equal(r->n_by_axes, 0);
    assert_int_equal(r->n_by_prefix, 0);
    assert_int_equal(r->n_by_loop, 1);
    assert_string_equal(r->by_loop[0].info, "5");
    near("loop", r->by_loop[0].t.send_bytes, 5 * 64);
    assert_int_equal(r->n_by_computation, 2);
    near("body", r->by_computation[0].t.send_bytes, 5 * 64);
    assert_string_equal(r->by_computation[1].key, "main");
    near("main", r->by_computation[1].t.send_bytes, 64);
}

static void
test_time_model(void **state)
{
    TraceFx *fx = *state;
    const TraceRun *run = tfx_traced(fx, k_kinds, 4, NULL);
    const Report *r = build(fx, run, NULL); /* 100 Gbit/s, 5 us per step */
    /* all-gather g = 4: 3 steps, 384 B per device: 15 us + 384 * 8 / 1e5 us */
    near("ag", coll(r, "ag.1")->time_us, 15 + 0.03072);
    assert_int_equal(coll(r, "ag.1")->steps, 3);
    near("ar", coll(r, "ar.1")->time_us, 10 + 0.04096); /* 2(g-1) = 2 steps, 512 B */
    near("cp", coll(r, "cp.1")->time_us, 5 + 0.01024);  /* one step, 128 B */
    near("one", coll(r, "one.1")->time_us, 0);
    near("total", r->total.time_us, 15.03072 + 10.04096 + 15.03072 + 15.00768 + 5.01024);

    ReportOptions o;
    report_options_init(&o);
    o.link_gbps = 400;
    o.latency_us = 1;
    o.devices_per_node = 2;
    o.inter_node_gbps = 25;
    r = build(fx, run, &o);
    /* the 4-device groups span both nodes: 25 Gbit/s */
    near("ag two-level", coll(r, "ag.1")->time_us, 3 + 384 * 8 / 25e3);
    assert_true(coll(r, "ag.1")->crosses_nodes);
    /* {0,1} and {2,3} stay within a node: 400 Gbit/s */
    near("ar two-level", coll(r, "ar.1")->time_us, 2 + 512 * 8 / 400e3);
    assert_false(coll(r, "ar.1")->crosses_nodes);
    /* the pair 1 -> 2 crosses: the slowest pair sets the time */
    near("cp two-level", coll(r, "cp.1")->time_us, 1 + 128 * 8 / 25e3);
    assert_true(coll(r, "cp.1")->crosses_nodes);

    SlBuf text;
    sl_buf_init(&text);
    report_print_text(r, &text);
    if (!strstr(text.data, "nccl-tests bus bandwidth") || !strstr(text.data, "link 400 Gbit/s") ||
        !strstr(text.data, "2 devices per node, 25 Gbit/s between nodes"))
        fail_msg("the model is not stated:\n%s", text.data);
    sl_buf_fini(&text);
}

/* ---- mesh axes ----------------------------------------------------------------------------- */

static void
test_mesh_axes(void **state)
{
    TraceFx *fx = *state;
    const TraceRun *run = tfx_traced(fx, k_kinds, 4, NULL);
    ReportOptions o;
    report_options_init(&o);
    o.mesh = "data=2,model=2"; /* device d = (data d/2, model d%2) */
    const Report *r = build(fx, run, &o);
    assert_string_equal(coll(r, "ag.1")->axes, "data,model");
    assert_string_equal(coll(r, "ar.1")->axes, "model");      /* {0,1},{2,3} */
    assert_string_equal(coll(r, "cp.1")->axes, "data,model"); /* 1 -> 2 moves along both */
    assert_string_equal(coll(r, "one.1")->axes, "none");
    assert_int_equal(r->n_axes, 2);
    assert_string_equal(r->model.mesh, "data=2,model=2");

    o.mesh = "model=2,data=2"; /* the same groups now run along the first axis */
    r = build(fx, run, &o);
    assert_string_equal(coll(r, "ar.1")->axes, "data");

    o.mesh = "4"; /* one unnamed axis; {0,1} covers half of it */
    r = build(fx, run, &o);
    assert_string_equal(coll(r, "ar.1")->axes, "part of axis_0");
    assert_string_equal(coll(r, "ag.1")->axes, "axis_0");

    static const char *const bad[] = {"data=3,model=2", "data=2,", "data",
                                      "data=0,model=4", "a=2,a=2", "2x3"};
    for (size_t k = 0; k < SL_COUNTOF(bad); k++) {
        Report *x = NULL;
        SlError err = {0};
        o.mesh = bad[k];
        if (report_build(run, &o, &fx->arena, &x, &err) != SL_ERR_INVALID)
            fail_msg("mesh '%s' accepted", bad[k]);
        if (!strstr(err.msg, "--mesh"))
            fail_msg("mesh '%s': message does not name the option: %s", bad[k], err.msg);
    }
}

/* ---- summary.json: schema, determinism, round trip ------------------------------------- */

static cJSON *
load_schema(void)
{
    const char *root = getenv("SHARDLENS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/schema/summary.schema.json", root ? root : ".");
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *s = cJSON_Parse(buf);
    if (!s)
        fail_msg("%s is not JSON", path);
    return s;
}

static bool
type_is(const cJSON *v, const char *type)
{
    if (!strcmp(type, "object"))
        return cJSON_IsObject(v);
    if (!strcmp(type, "array"))
        return cJSON_IsArray(v);
    if (!strcmp(type, "string"))
        return cJSON_IsString(v);
    if (!strcmp(type, "boolean"))
        return cJSON_IsBool(v);
    if (!strcmp(type, "null"))
        return cJSON_IsNull(v);
    if (!strcmp(type, "number"))
        return cJSON_IsNumber(v);
    if (!strcmp(type, "integer"))
        return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    return false;
}

/* A small JSON Schema subset: type (or a list of types), required, properties, items, allOf
 * with local $ref, const for numbers and strings. */
static void
validate(const cJSON *schema, const cJSON *defs, const cJSON *v, const char *where)
{
    const cJSON *ref = cJSON_GetObjectItem(schema, "$ref");
    if (cJSON_IsString(ref)) {
        const char *name = strrchr(ref->valuestring, '/') + 1;
        validate(cJSON_GetObjectItem(defs, name), defs, v, where);
    }
    const cJSON *all = cJSON_GetObjectItem(schema, "allOf"), *s;
    cJSON_ArrayForEach(s, all) validate(s, defs, v, where);
    const cJSON *type = cJSON_GetObjectItem(schema, "type");
    if (cJSON_IsString(type) && !type_is(v, type->valuestring))
        fail_msg("%s: not of type %s", where, type->valuestring);
    if (cJSON_IsArray(type)) {
        bool ok = false;
        cJSON_ArrayForEach(s, type) ok = ok || type_is(v, s->valuestring);
        if (!ok)
            fail_msg("%s: none of its allowed types", where);
    }
    const cJSON *c = cJSON_GetObjectItem(schema, "const");
    if (c && !cJSON_Compare(c, v, true))
        fail_msg("%s: not the constant the schema fixes", where);
    const cJSON *en = cJSON_GetObjectItem(schema, "enum");
    if (en) {
        bool found = false;
        cJSON_ArrayForEach(s, en) found = found || cJSON_Compare(s, v, true);
        if (!found)
            fail_msg("%s: not one of the values the schema lists", where);
    }
    const cJSON *req = cJSON_GetObjectItem(schema, "required");
    cJSON_ArrayForEach(s, req) if (!cJSON_GetObjectItem(v, s->valuestring))
        fail_msg("%s: required '%s' missing", where, s->valuestring);
    const cJSON *props = cJSON_GetObjectItem(schema, "properties");
    cJSON_ArrayForEach(s, props)
    {
        const cJSON *x = cJSON_GetObjectItem(v, s->string);
        char w[256];
        snprintf(w, sizeof(w), "%s.%s", where, s->string);
        if (x)
            validate(s, defs, x, w);
    }
    const cJSON *items = cJSON_GetObjectItem(schema, "items");
    if (items && cJSON_IsArray(v)) {
        int k = 0;
        cJSON_ArrayForEach(s, v)
        {
            char w[256];
            snprintf(w, sizeof(w), "%s[%d]", where, k++);
            validate(items, defs, s, w);
        }
    }
}

static char *
json_of(const Report *r)
{
    SlBuf b;
    SlError err = {0};
    sl_buf_init(&b);
    if (report_write_json(r, &b, &err))
        fail_msg("report_write_json: %s", err.msg);
    return b.data; /* the caller frees */
}

static void
test_summary_json(void **state)
{
    TraceFx *fx = *state;
    ReportOptions o;
    report_options_init(&o);
    o.mesh = "data=2,model=2";
    const TraceRun *run = tfx_traced(fx, k_kinds, 4, NULL);
    char *a = json_of(build(fx, run, &o));
    /* the same module again, appended as a second run: the summary is the same bytes */
    const TraceRun *again = tfx_traced(fx, k_kinds, 4, NULL);
    assert_int_not_equal(run->id, again->id);
    char *b = json_of(build(fx, again, &o));
    assert_string_equal(a, b);

    cJSON *schema = load_schema();
    cJSON *doc = cJSON_Parse(a);
    assert_non_null(doc);
    validate(schema, cJSON_GetObjectItem(schema, "$defs"), doc, "summary");
    /* the fixed fields scripts rely on, and their values */
    const cJSON *devs = cJSON_GetObjectItem(doc, "devices");
    assert_int_equal(cJSON_GetArraySize(devs), 4);
    const cJSON *d3 = cJSON_GetArrayItem(devs, 3);
    assert_int_equal(cJSON_GetObjectItem(d3, "device")->valueint, 3);
    near("json send", cJSON_GetObjectItem(d3, "send_bytes")->valuedouble, 1376);
    near("json recv", cJSON_GetObjectItem(d3, "recv_bytes")->valuedouble, 1504);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "collectives"), 0);
    assert_string_equal(cJSON_GetObjectItem(c0, "name")->valuestring, "ag.1");
    assert_string_equal(cJSON_GetObjectItem(c0, "kind")->valuestring, "all-gather");
    assert_string_equal(cJSON_GetObjectItem(c0, "source")->valuestring, "ag");
    assert_int_equal(cJSON_GetObjectItem(c0, "trip_count")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(c0, "axes")->valuestring, "data,model");
    /* key order is fixed: schema_version first, then the header, devices before collectives */
    assert_true(strncmp(a, "{\n\t\"schema_version\":\t1,", 23) == 0);
    assert_true(strstr(a, "\"devices\":\t[") < strstr(a, "\"collectives\":\t["));
    cJSON_Delete(doc);

    /* an unknown trip count is null, never 1 */
    char *u = json_of(build(fx, traced_loop(fx, ""), NULL));
    doc = cJSON_Parse(u);
    validate(schema, cJSON_GetObjectItem(schema, "$defs"), doc, "unknown");
    c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "collectives"), 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(c0, "trip_count")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(c0, "send_bytes")));
    const cJSON *wl = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "while_loops"), 0);
    assert_string_equal(cJSON_GetObjectItem(wl, "loop")->valuestring, "w.1");
    assert_string_equal(cJSON_GetObjectItem(wl, "method")->valuestring, "unknown");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(wl, "trip_count")));
    assert_string_equal(cJSON_GetObjectItem(wl, "reason")->valuestring,
                        "the bound (tuple element 2) is a parameter: %bound of main");
    assert_int_equal(cJSON_GetObjectItem(wl, "collectives")->valueint, 1);
    cJSON_Delete(doc);
    cJSON_Delete(schema);

    /* read back: the figures diff needs survive */
    Report *back = NULL;
    SlError err = {0};
    assert_int_equal(report_parse_json(sl_str(a), "a.json", &fx->arena, &back, &err), SL_OK);
    assert_int_equal(back->n_devices, 4);
    assert_int_equal(back->n_collectives, 6);
    near("round trip", back->devices[1].t.send_bytes, 1504);
    assert_string_equal(back->collectives[4].kind, "collective-permute");
    near("round trip cp", back->collectives[4].send_bytes, 384);
    /* an integer field far outside int64 saturates (a cast would be undefined behaviour) */
    {
        const char *at = strstr(a, "\"channel_id\":");
        assert_non_null(at);
        const char *end = at + strlen("\"channel_id\":");
        while (*end == '\t' || *end == ' ' || (*end >= '0' && *end <= '9') || *end == '-')
            end++;
        SlBuf big;
        sl_buf_init(&big);
        sl_buf_printf(&big, "%.*s\"channel_id\":\t2.4e66%s", (int)(at - a), a, end);
        Report *huge = NULL;
        SlError herr = {0};
        assert_int_equal(report_parse_json(sl_str(big.data), "big.json", &fx->arena, &huge, &herr),
                         SL_OK);
        assert_true(huge->collectives[0].channel_id == INT64_MAX);
        sl_buf_fini(&big);
    }
    /* Schema-invalid summaries are refused, naming the place (diff's input check): each case
     * mutates the valid summary `a`. */
    static const struct {
        const char *path, *key; /* the object (NULL: the root) and its member to change */
        int kind;               /* 0: delete it, 1: make it a string */
        const char *msg;
    } broken[] = {
        {"devices",     "send_bytes", 0, "devices[0]: has no 'send_bytes'"},
        {"collectives", "trip_count", 1,
         "collectives[0].trip_count: must be integer or null, is string"},
        {NULL,          "tool",       0, "the document has no 'tool'"},
        {NULL,          "num_partitions", 1, "num_partitions: must be integer, is string"},
        {"totals",      "collectives", 1, "totals.collectives: must be integer, is string"},
    };
    for (size_t k = 0; k < SL_COUNTOF(broken); k++) {
        cJSON *doc2 = cJSON_Parse(a);
        cJSON *obj = doc2;
        if (broken[k].path) {
            obj = cJSON_GetObjectItem(doc2, broken[k].path);
            if (cJSON_IsArray(obj))
                obj = cJSON_GetArrayItem(obj, 0);
        }
        if (broken[k].kind == 0)
            cJSON_DeleteItemFromObject(obj, broken[k].key);
        else
            cJSON_ReplaceItemInObject(obj, broken[k].key, cJSON_CreateString("x"));
        char *t = cJSON_Print(doc2);
        Report *x = NULL;
        SlError e = {0};
        SlStatus st = report_parse_json(sl_str(t), "m.json", &fx->arena, &x, &e);
        if (st != SL_ERR_INVALID || !strstr(e.msg, broken[k].msg) ||
            !strstr(e.msg, "not a valid shardlens summary (schema/summary.schema.json): "))
            fail_msg("broken %zu: %s: %s", k, sl_status_name(st), e.msg);
        free(t);
        cJSON_Delete(doc2);
    }
    free(u);
    free(a);
    free(b);

    static const struct {
        const char *text;
        SlStatus want;
        const char *msg;
    } bad[] = {
        {"{",                                                        SL_ERR_PARSE,   "not valid JSON"          },
        {"{\"devices\":[]}",                                         SL_ERR_INVALID, "no 'schema_version'"     },
        {"{\"schema_version\":1,\"collectives\":[]}",                SL_ERR_INVALID, "the document has no 'tool'"},
        {"{\"schema_version\":9,\"devices\":[],\"collectives\":[]}", SL_ERR_INVALID, "newer"                   },
    };
    for (size_t k = 0; k < SL_COUNTOF(bad); k++) {
        Report *x = NULL;
        SlError e = {0};
        SlStatus st = report_parse_json(sl_str(bad[k].text), "b.json", &fx->arena, &x, &e);
        if (st != bad[k].want || !strstr(e.msg, bad[k].msg) || strcmp(e.loc.path, "b.json"))
            fail_msg("case %zu: %s: %s", k, sl_status_name(st), e.msg);
    }
}

/* ---- diff: the budget's edge ---------------------------------------------------------------- */

/* A report of one all-reduce from `source` moving `bytes` summed over two devices. */
static Report
one_collective(ReportCollective *c, ReportDevice *d, const char *source, double bytes)
{
    memset(c, 0, sizeof(*c));
    c->name = "all-reduce";
    c->kind = "all-reduce";
    c->source = source;
    c->op_name = "model/dense";
    c->trip_count = 1;
    c->send_bytes = c->recv_bytes = bytes;
    for (int k = 0; k < 2; k++) {
        memset(&d[k], 0, sizeof(d[k]));
        d[k].device = k;
        d[k].t.send_bytes = d[k].t.recv_bytes = bytes / 2;
    }
    Report r;
    memset(&r, 0, sizeof(r));
    r.module = "m";
    r.num_partitions = 2;
    r.collectives = c;
    r.n_collectives = 1;
    r.devices = d;
    r.n_devices = 2;
    return r;
}

static bool
diff_over(const Report *a, const Report *b, double pct, SlBuf *out)
{
    ReportDiffOptions o = {true, pct, "old.json", "new.json", false, 0};
    bool over = false;
    SlError err = {0};
    sl_buf_clear(out);
    if (report_diff(a, b, &o, false, out, &over, &err))
        fail_msg("report_diff: %s", err.msg);
    return over;
}

static void
test_diff_budget_edge(void **state)
{
    (void)state;
    ReportCollective c1, c2, c3;
    ReportDevice d1[2], d2[2], d3[2];
    Report old_r = one_collective(&c1, d1, "dot", 1000);
    Report new_r = one_collective(&c2, d2, "dot", 1100); /* +10% exactly */
    SlBuf out;
    sl_buf_init(&out);
    assert_false(diff_over(&old_r, &new_r, 10, &out)); /* at the edge: passes */
    if (!strstr(out.data, "budget --max-increase 10%: bytes sent ok, busiest device ok: pass"))
        fail_msg("%s", out.data);
    assert_true(diff_over(&old_r, &new_r, 9.99, &out)); /* just past it: fails */
    if (!strstr(out.data, "OVER") || !strstr(out.data, "FAIL"))
        fail_msg("%s", out.data);
    assert_false(diff_over(&new_r, &old_r, 0, &out)); /* shrinking never fails */
    assert_false(diff_over(&old_r, &old_r, 0, &out)); /* nor staying */
    if (!strstr(out.data, "no source op changed"))
        fail_msg("%s", out.data);

    /* a new collective from another source op: added, and growth from zero fails */
    Report zero = one_collective(&c3, d3, "dot", 0);
    zero.n_collectives = 0;
    assert_true(diff_over(&zero, &old_r, 1000, &out));
    if (!strstr(out.data,
                "added    %dot all-reduce [model/dense]: 0 -> 1, 0 B -> 1000 B  +1000 B (new)"))
        fail_msg("%s", out.data);

    /* JSON for bots */
    ReportDiffOptions o = {true, 5, "a", "b", false, 0};
    bool over = false;
    SlError err = {0};
    sl_buf_clear(&out);
    assert_int_equal(report_diff(&old_r, &new_r, &o, true, &out, &over, &err), SL_OK);
    assert_true(over);
    cJSON *doc = cJSON_Parse(out.data);
    assert_non_null(doc);
    const cJSON *budget = cJSON_GetObjectItem(doc, "budget");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(budget, "over_budget")));
    const cJSON *sent = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "totals"), "send_bytes");
    near("json change", cJSON_GetObjectItem(sent, "change_pct")->valuedouble, 10);
    const cJSON *src = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "sources"), 0);
    assert_string_equal(cJSON_GetObjectItem(src, "status")->valuestring, "changed");
    cJSON_Delete(doc);
    sl_buf_fini(&out);
}

/* ---- text for people: folded devices, ranked collectives, --top, exact bytes ------------- */

static void
test_text_ranked_and_folded(void **state)
{
    (void)state;
    /* devices 0-1 and 4-7 move the same bytes, 2-3 others */
    ReportDevice dev[8];
    memset(dev, 0, sizeof(dev));
    for (int k = 0; k < 8; k++) {
        dev[k].device = k;
        dev[k].t.send_bytes = dev[k].t.recv_bytes = (k == 2 || k == 3) ? 3 * 1024 : 1536;
        dev[k].t.collectives = 2;
    }
    ReportCollective c[3];
    memset(c, 0, sizeof(c));
    const char *names[] = {"small", "big-once", "looped"};
    const double per_exec[] = {512, 4096, 1024};
    const int64_t trips[] = {1, 1, 8}; /* looped: 8 KiB over the run, the costliest */
    for (int k = 0; k < 3; k++) {
        c[k].name = names[k];
        c[k].kind = "all-reduce";
        c[k].source = "dot";
        c[k].group_size = 8;
        c[k].n_groups = 1;
        c[k].bytes = per_exec[k];
        c[k].send_bytes = c[k].recv_bytes = per_exec[k];
        c[k].max_device_send_bytes = per_exec[k] / 8;
        c[k].trip_count = trips[k];
        c[k].max_trip_count = -1;
        c[k].time_us = 10;
    }
    Report r;
    memset(&r, 0, sizeof(r));
    report_options_init(&r.model);
    r.module = "m";
    r.num_partitions = 8;
    r.devices = dev;
    r.n_devices = 8;
    r.collectives = c;
    r.n_collectives = 3;
    r.bottleneck_device = 2;
    SlBuf text;
    sl_buf_init(&text);
    report_print_text(&r, &text);
    if (!strstr(text.data, "  devices  bytes sent  bytes received  collectives\n"
                           "  0-1,4-7    1.50 KiB        1.50 KiB            2\n"
                           "  2-3        3.00 KiB        3.00 KiB            2\n"))
        fail_msg("devices not folded:\n%s", strstr(text.data, "\nper device"));
    const char *looped = strstr(text.data, "  %looped "), *big = strstr(text.data, "  %big-once ");
    const char *small = strstr(text.data, "  %small ");
    if (!looped || !big || !small || !(looped < big && big < small))
        fail_msg("collectives not by cost over the run:\n%s", text.data);
    if (!strstr(looped, "8.00 KiB") || !strstr(looped, "80.0 us"))
        fail_msg("looped: no total over its 8 trips:\n%s", looped);
    r.model.top = 2;
    sl_buf_clear(&text);
    report_print_text(&r, &text);
    if (!strstr(text.data, "collectives (the 2 costliest of 3: bytes sent over the run)") ||
        strstr(text.data, "  %small ") ||
        !strstr(text.data, "  ... 1 more in summary.json (--top K shows K)"))
        fail_msg("--top 2 not applied:\n%s", text.data);
    sl_buf_fini(&text);

    /* exact bytes (diff, JSON-like text): integers whole, fractions to three places, and a
     * huge value that is not an integer never overruns the formatting buffer */
    SlBuf b;
    sl_buf_init(&b);
    report_put_bytes(&b, 1536);
    sl_buf_putc(&b, ' ');
    report_put_bytes(&b, 4.5);
    assert_string_equal(b.data, "1536 4.5");
    sl_buf_clear(&b);
    report_put_bytes(&b, -1e300);
    assert_true(b.len < 32);
    assert_true(strtod(b.data, NULL) == -1e300);
    sl_buf_fini(&b);
}

/* ---- warnings: every kind in report.txt and summary.json ----------------------------------- */

static const char k_warn_unannotated[] =
    "HloModule unann, num_partitions=4\n\n"
    "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT a = f32[] add(x, y)\n}\n\n"
    "ENTRY main {\n"
    "  p = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n"
    "  q = f32[8] parameter(1)\n"
    "  a = f32[8] add(p, q), metadata={op_name=\"jit(f)/add\"}\n"
    "  z = f32[] constant(0)\n"
    "  ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=sum\n"
    "}\n";

/* every instruction but the reducer's is sharded but one: counted, no how-to */
static const char k_warn_mostly_annotated[] =
    "HloModule most, num_partitions=4\n\n"
    "ENTRY main {\n"
    "  p = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n"
    "  q = f32[8] parameter(1), sharding={devices=[4]<=[4]}\n"
    "  a = f32[8] add(p, q), sharding={devices=[4]<=[4]}\n"
    "  ROOT n = f32[8] negate(a), metadata={op_name=\"jit(f)/neg\"}\n"
    "}\n";

/* collectives and partition-id outside manual regions, and a parameter whose shape is a
 * shard's; the all-reduce inside the manual region is no sign of anything */
static const char k_warn_partitioned[] =
    "HloModule part, num_partitions=4\n\n"
    "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT a = f32[] add(x, y)\n}\n\n"
    "ENTRY main {\n"
    "  p = f32[1,8] parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name=\"jit(f)/x\"}\n"
    "  m = f32[1,8] custom-call(p), custom_call_target=\"SPMDFullToShardShape\", "
    "sharding={manual}\n"
    "  arm = f32[1,8] all-reduce(m), channel_id=2, replica_groups=[1,4]<=[4], "
    "use_global_device_ids=true, to_apply=sum, sharding={manual}\n"
    "  ar = f32[1,8] all-reduce(p), channel_id=1, replica_groups=[1,4]<=[4], "
    "use_global_device_ids=true, to_apply=sum, sharding={replicated}, "
    "metadata={op_name=\"jit(f)/psum\"}\n"
    "  pid = u32[] partition-id(), sharding={replicated}\n"
    "  ROOT t = (f32[1,8], u32[], f32[1,8]) tuple(ar, pid, arm), "
    "sharding={{replicated}, {replicated}, {manual}}\n"
    "}\n";

/* a custom call without a rule on sharded data (and one on replicated data, which costs
 * nothing and is not warned about), and an opcode without a handler */
static const char k_warn_fallbacks[] =
    "HloModule cc, num_partitions=4\n\n"
    "ENTRY main {\n"
    "  p = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}\n"
    "  q = f32[8,16] parameter(1), sharding={replicated}\n"
    "  c = f32[8,16] custom-call(p), custom_call_target=\"CustomSPMDPartitioning\", "
    "sharding={devices=[4,1]<=[4]}, metadata={op_name=\"jit(f)/custom_partitioning\"}\n"
    "  d = f32[8,16] custom-call(q), custom_call_target=\"my_op\", sharding={replicated}\n"
    "  b = f32[8,16] bitcast(p), sharding={devices=[4,1]<=[4]}, "
    "metadata={op_name=\"jit(f)/bitcast\"}\n"
    "  ROOT t = (f32[8,16], f32[8,16], f32[8,16]) tuple(c, d, b), "
    "sharding={{devices=[4,1]<=[4]}, {replicated}, {devices=[4,1]<=[4]}}\n"
    "}\n";

/* rows split 4 ways to columns split 2 ways (replicated twice): no collective does it, so the
 * value is gathered whole first */
static const char k_warn_remat[] =
    "HloModule remat, num_partitions=4\n\n"
    "ENTRY main {\n"
    "  p = f32[8,12] parameter(0), sharding={devices=[4,1]<=[4]}\n"
    "  ROOT c = f32[8,12] copy(p), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}, "
    "metadata={op_name=\"jit(f)/copy\"}\n"
    "}\n";

static const char k_howto[] =
    "partition the module XLA partitions instead, dumped by running with "
    "XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_pass_re=spmd-partitioning (take the file whose "
    "name ends in .before_spmd-partitioning.txt, the module before spmd-partitioning)";

typedef struct WantWarning {
    const char *kind, *instr, *op_name, *message;
} WantWarning;

/* The run of `hlo` warns exactly `want` (in order): the text report's warnings section counts
 * them by kind (`counts`, its exact lines) and names each, summary.json lists each with
 * kind, instr, op_name and message, and analyze's lines name the first of each kind. */
static void
check_warnings(TraceFx *fx, const char *hlo, const char *counts, const WantWarning *want,
               uint32_t n_want)
{
    const Report *r = build(fx, tfx_traced(fx, hlo, 4, NULL), NULL);
    assert_int_equal(r->n_warnings, n_want);
    SlBuf text, line;
    sl_buf_init(&text);
    sl_buf_init(&line);
    report_print_text(r, &text);
    char *sec = strstr(text.data, "\nwarnings\n");
    char *sec_end = sec ? strstr(sec + 1, "\n\n") : NULL;
    if (sec_end)
        sec_end[1] = '\0'; /* the section alone */
    if (!sec || !strstr(sec, counts))
        fail_msg("no warnings section with\n%s\nin:\n%s", counts, text.data);
    char *json = json_of(r);
    cJSON *doc = cJSON_Parse(json);
    cJSON *schema = load_schema();
    validate(schema, cJSON_GetObjectItem(schema, "$defs"), doc, "warnings");
    const cJSON *arr = cJSON_GetObjectItem(doc, "warnings");
    assert_int_equal(cJSON_GetArraySize(arr), n_want);
    for (uint32_t k = 0; k < n_want; k++) {
        sl_buf_clear(&line);
        sl_buf_printf(&line, "    %%%s%s%s%s: %s\n", want[k].instr, want[k].op_name ? " (" : "",
                      want[k].op_name ? want[k].op_name : "", want[k].op_name ? ")" : "",
                      want[k].message);
        if (!strstr(sec, line.data))
            fail_msg("warning %u not in the text:\n%s\nin:\n%s", k, line.data, sec);
        const cJSON *w = cJSON_GetArrayItem(arr, (int)k);
        assert_string_equal(cJSON_GetObjectItem(w, "kind")->valuestring, want[k].kind);
        assert_string_equal(cJSON_GetObjectItem(w, "instr")->valuestring, want[k].instr);
        const cJSON *op = cJSON_GetObjectItem(w, "op_name");
        if (want[k].op_name)
            assert_string_equal(op->valuestring, want[k].op_name);
        else
            assert_true(cJSON_IsNull(op));
        assert_string_equal(cJSON_GetObjectItem(w, "message")->valuestring, want[k].message);
    }
    sl_buf_clear(&line);
    report_print_warning_lines(r, &line);
    sl_buf_clear(&text);
    sl_buf_printf(&text, "warning: %s: ", want[0].kind);
    if (strncmp(line.data, text.data, text.len) != 0)
        fail_msg("the one-line summary does not start with '%s':\n%s", text.data, line.data);
    cJSON_Delete(schema);
    cJSON_Delete(doc);
    free(json);
    sl_buf_fini(&line);
    sl_buf_fini(&text);
}

static void
test_warning_unannotated(void **state)
{
    TraceFx *fx = *state;
    char msg[1024];
    /* the reducer's three instructions and the constant are not counted: 3 of the entry's
     * other 4 lack a sharding */
    snprintf(msg, sizeof(msg),
             "3 of 4 instructions carry no sharding and are partitioned as replicated, this one "
             "first; the module looks like it has not been through sharding propagation: %s",
             k_howto);
    WantWarning w[] = {{"unannotated", "q", NULL, msg}};
    check_warnings(fx, k_warn_unannotated, "  kind         count\n  unannotated      1\n", w, 1);
    WantWarning few[] = {{"unannotated", "n", "jit(f)/neg",
                          "1 of 4 instructions carry no sharding and are partitioned as "
                          "replicated, this one first"}};
    check_warnings(fx, k_warn_mostly_annotated, "  unannotated      1\n", few, 1);
}

static void
test_warning_already_partitioned(void **state)
{
    TraceFx *fx = *state;
    WantWarning w[] = {
        {"already-partitioned", "p", "jit(f)/x",
         "parameter dimension 0 has 1 element but its sharding splits it 4 ways: the shape "
         "looks already local (the input already partitioned); partition the module before "
         "spmd-partitioning"},
        {"already-partitioned", "ar", "jit(f)/psum",
         "all-reduce outside a manual region: the input looks already partitioned, and is "
         "partitioned a second time (partition the module before spmd-partitioning)"},
        {"already-partitioned", "pid", NULL,
         "partition-id outside a manual region: the input looks already partitioned, and is "
         "partitioned a second time (partition the module before spmd-partitioning)"},
    };
    check_warnings(fx, k_warn_partitioned, "  kind                 count\n"
                                           "  already-partitioned      3\n",
                   w, SL_COUNTOF(w));
}

static void
test_warning_fallbacks(void **state)
{
    TraceFx *fx = *state;
    WantWarning w[] = {
        {"custom-call-fallback", "c", "jit(f)/custom_partitioning",
         "custom-call \"CustomSPMDPartitioning\" has no partitioning rule here: partitioned by "
         "fallback, its operands replicated (all-gathered) and the full call run on every "
         "device"},
        {"no-handler", "b", "jit(f)/bitcast", "no handler for bitcast: partitioned as replicated"},
    };
    check_warnings(fx, k_warn_fallbacks,
                   "  kind                  count\n"
                   "  custom-call-fallback      1\n"
                   "  no-handler                1\n",
                   w, SL_COUNTOF(w));
}

static void
test_warning_full_remat(void **state)
{
    TraceFx *fx = *state;
    WantWarning w[] = {{"full-remat", "c", "jit(f)/copy",
                        "involuntary full rematerialization: the value is replicated on every "
                        "device, then sliced to its new sharding"}};
    check_warnings(fx, k_warn_remat, "  kind        count\n  full-remat      1\n", w, 1);
}

/* More than three of a kind: the text shows three and points at summary.json for the rest. */
static void
test_warning_first_few(void **state)
{
    TraceFx *fx = *state;
    SlBuf hlo;
    sl_buf_init(&hlo);
    sl_buf_puts(&hlo, "HloModule many, num_partitions=4\n\nENTRY main {\n"
                      "  p = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}\n");
    for (int k = 0; k < 5; k++)
        sl_buf_printf(&hlo, "  b%d = f32[8,16] bitcast(p), sharding={devices=[4,1]<=[4]}\n", k);
    sl_buf_puts(&hlo, "  ROOT t = (f32[8,16], f32[8,16], f32[8,16], f32[8,16], f32[8,16]) "
                      "tuple(b0, b1, b2, b3, b4), sharding={{devices=[4,1]<=[4]}, "
                      "{devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}, "
                      "{devices=[4,1]<=[4]}}\n}\n");
    const Report *r = build(fx, tfx_traced(fx, hlo.data, 4, NULL), NULL);
    SlBuf text;
    sl_buf_init(&text);
    report_print_text(r, &text);
    char *sec = strstr(text.data, "\nwarnings\n");
    assert_non_null(sec);
    char *sec_end = strstr(sec + 1, "\n\n");
    assert_non_null(sec_end);
    sec_end[1] = '\0'; /* the section alone */
    if (!strstr(sec, "  no-handler      5\n") ||
        !strstr(sec, "    %b2: no handler for bitcast: partitioned as replicated\n"
                     "    ... 2 more in summary.json\n") ||
        strstr(sec, "%b3"))
        fail_msg("%s", sec);
    sl_buf_clear(&text);
    report_print_warning_lines(r, &text);
    assert_string_equal(text.data, "warning: no-handler: 5, first %b0: no handler for bitcast: "
                                   "partitioned as replicated\n");
    sl_buf_fini(&text);
    sl_buf_fini(&hlo);
}

/* The gate on loops: bytes are per execution times the trip count; a collective of unknown trip
 * count fails any budget when it is new or moves more per execution. */
static void
test_diff_trip_counts(void **state)
{
    (void)state;
    ReportCollective c1, c2, c3, c4;
    ReportDevice d1[2], d2[2], d3[2], d4[2];
    SlBuf out;
    sl_buf_init(&out);
    /* in a loop of 8: 100 B per execution is 800 B; 110 B is +10% of it */
    Report old_r = one_collective(&c1, d1, "dot", 100);
    Report new_r = one_collective(&c2, d2, "dot", 110);
    c1.trip_count = c2.trip_count = 8;
    d2[0].t.send_bytes = d2[0].t.recv_bytes = d2[1].t.send_bytes = d2[1].t.recv_bytes = 440;
    d1[0].t.send_bytes = d1[0].t.recv_bytes = d1[1].t.send_bytes = d1[1].t.recv_bytes = 400;
    assert_true(diff_over(&old_r, &new_r, 9, &out));
    if (!strstr(out.data, "bytes sent, summed over devices  800 B -> 880 B  +80 B (+10.00%)") ||
        !strstr(out.data, "changed  %dot all-reduce [model/dense]: 1 -> 1, 800 B -> 880 B  +80 B "
                          "(+10.00%); 110 B per execution x 8 trips"))
        fail_msg("%s", out.data);

    /* unknown trip count: the same per-execution bytes pass, more fail, new fails */
    Report u_old = one_collective(&c3, d3, "dot", 100), u_new = one_collective(&c4, d4, "dot", 100);
    c3.trip_count = c4.trip_count = -1;
    for (int k = 0; k < 2; k++)
        d3[k].t.send_bytes = d3[k].t.recv_bytes = d4[k].t.send_bytes = d4[k].t.recv_bytes = 0;
    assert_false(diff_over(&u_old, &u_new, 0, &out));
    c4.send_bytes = 101;
    assert_true(diff_over(&u_old, &u_new, 1000, &out));
    if (!strstr(out.data, "unknown trip count: 100 B -> 101 B per execution (grew: counts against "
                          "the budget)") ||
        !strstr(out.data, "bytes sent ok, busiest device ok, unknown-trip traffic grew (1 source "
                          "op): FAIL"))
        fail_msg("%s", out.data);
    Report none = u_old;
    none.n_collectives = 0;
    assert_true(diff_over(&none, &u_old, 1000, &out));
    assert_false(diff_over(&u_old, &none, 0, &out)); /* removing it is no growth */

    /* different modules: a warning naming both */
    u_new.module = "other";
    u_new.input_hash = "0123456789abcdef";
    c4.send_bytes = 100;
    assert_false(diff_over(&u_old, &u_new, 0, &out));
    if (!strstr(out.data, "warning: OLD and NEW are different modules: m (input ?) and other "
                          "(input 0123456789abcdef)"))
        fail_msg("%s", out.data);
    assert_false(report_same_module(&u_old, &u_new));
    sl_buf_fini(&out);
}

/* Linear time: two reports of 24k collectives from 24k distinct source ops (issue 17 saw 22 s
 * with a quadratic join) compare in well under a second. */
static void
test_diff_many_collectives(void **state)
{
    TraceFx *fx = *state;
    enum { N = 24000 };
    ReportCollective *a = SL_NEW_ARRAY(&fx->arena, ReportCollective, N);
    ReportCollective *b = SL_NEW_ARRAY(&fx->arena, ReportCollective, N);
    ReportDevice d[2];
    assert_non_null(a);
    assert_non_null(b);
    ReportCollective one;
    Report ra = one_collective(&one, d, "x", 10), rb = ra;
    for (uint32_t k = 0; k < N; k++) {
        char *name = sl_arena_strndup(&fx->arena, "source.00000", 12);
        snprintf(name + 7, 6, "%05u", k);
        a[k] = one;
        a[k].source = name;
        b[k] = a[k];
        b[k].send_bytes = k == N - 1 ? 20 : 10; /* one changed */
    }
    ra.collectives = a;
    rb.collectives = b;
    ra.n_collectives = rb.n_collectives = N;
    SlBuf out;
    sl_buf_init(&out);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    (void)diff_over(&ra, &rb, 100, &out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (!strstr(out.data, "changed  %source.23999 all-reduce [model/dense]: 1 -> 1, 10 B -> 20 B") ||
        !strstr(out.data, "(23999 unchanged)"))
        fail_msg("%.300s", out.data);
    if (s > 1.0)
        fail_msg("diff of %d collectives took %.2f s", N, s);
    sl_buf_fini(&out);
}

/* ---- every sample: the report agrees with the database's own view ------------------------ */

static void
test_samples_against_view(void **state)
{
    TraceFx *fx = *state;
    const char *root = getenv("SHARDLENS_SOURCE_DIR");
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/samples", root ? root : ".");
    DIR *d = opendir(dir);
    if (!d)
        skip();
    struct dirent *e;
    uint32_t checked = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".hlo") != 0)
            continue;
        char path[1400];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        SlBuf text;
        SlError err = {0};
        sl_buf_init(&text);
        if (sl_file_read(path, &text, &err))
            fail_msg("%s: %s", path, err.msg);
        /* the sample's own device count, from its header */
        const char *np = strstr(text.data, "num_partitions=");
        int64_t n = np ? strtoll(np + strlen("num_partitions="), NULL, 10) : 0;
        int64_t run_id = 0;
        if (n > 0 && tfx_record(fx, text.data, n, NULL, &run_id, &err) == SL_OK) {
            const TraceRun *run = tfx_load(fx, run_id);
            check_against_view(e->d_name, run, build(fx, run, NULL));
            checked++;
        } else {
            print_message("  (skipped %s: %s)\n", e->d_name, n > 0 ? err.msg : "no header");
        }
        sl_buf_fini(&text);
    }
    closedir(d);
    assert_true(checked > 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kinds_by_hand, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_uneven_groups, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_partial_pairs_and_packed_bytes, tfx_setup,
                                        tfx_teardown),
        cmocka_unit_test(test_shape_bytes),
        cmocka_unit_test_setup_teardown(test_loop_known_trip_count, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_loop_unknown_trip_count, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_time_model, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_rollups, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_mesh_axes, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_summary_json, tfx_setup, tfx_teardown),
        cmocka_unit_test(test_diff_budget_edge),
        cmocka_unit_test(test_diff_trip_counts),
        cmocka_unit_test_setup_teardown(test_diff_many_collectives, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_samples_against_view, tfx_setup, tfx_teardown),
        cmocka_unit_test(test_text_ranked_and_folded),
        cmocka_unit_test_setup_teardown(test_warning_unannotated, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_warning_already_partitioned, tfx_setup,
                                        tfx_teardown),
        cmocka_unit_test_setup_teardown(test_warning_fallbacks, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_warning_full_remat, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_warning_first_few, tfx_setup, tfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
