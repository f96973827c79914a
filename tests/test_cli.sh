#!/usr/bin/env bash
# test_cli.sh - the command line contract (design/product.md) end to end: exit codes,
# `FILE:LINE:COL: error:` diagnostics with a caret, help for every command, canonical print of
# a sample, the check summary line, atomic output, and partition's option errors.
# usage: test_cli.sh SHARDLENS SOURCE_ROOT   (meson passes both; nothing depends on the cwd)
set -euo pipefail

BIN=$(realpath "$1") # meson passes it relative to the build dir
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$SRC" # sample paths below are relative, as a user types them

failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run NAME WANT_RC ARGS... : runs the binary, keeps stdout/stderr in $TMP/NAME.{out,err}
run() {
    local name=$1 want=$2
    shift 2
    local rc=0
    "$BIN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
    if [ "$rc" != "$want" ]; then
        fail "$name: exit $rc, want $want ($*)"
        sed 's/^/    /' "$TMP/$name.err" >&2
    fi
}

# same NAME FILE EXPECTED_TEXT : FILE must hold exactly EXPECTED_TEXT
same() {
    if ! diff -u <(printf '%s\n' "$3") "$2" >"$TMP/$1.diff"; then
        fail "$1: unexpected output"
        sed 's/^/    /' "$TMP/$1.diff" >&2
    fi
}

# has NAME FILE PATTERN : FILE must contain the fixed string PATTERN
has() {
    grep -qF -- "$3" "$2" || fail "$1: '$3' not in output: $(head -c 300 "$2")"
}

SAMPLE=samples/mlp_megatron.hlo

# ---- bad input: exit 2, FILE:LINE:COL: error: MESSAGE, the source line, a caret ----------
printf 'HloModule m\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n  ROOT r = f32[4] add(p0, p9)\n}\n' \
    >"$TMP/undefined.hlo"
run undefined 2 check "$TMP/undefined.hlo"
same undefined "$TMP/undefined.err" "$TMP/undefined.hlo:5:27: error: undefined operand 'p9'
  ROOT r = f32[4] add(p0, p9)
                          ^"

printf 'HloModule m\n\nENTRY main {\n\tp0 = f32[4] parameter(0)\n\tROOT r = f32[5] add(p0, p0)\n}\n' \
    >"$TMP/shape.hlo"
run shape 2 check "$TMP/shape.hlo"
same shape "$TMP/shape.err" "$TMP/shape.hlo:5:2: error: instruction %r (add) in computation %main: declared shape f32[5] but inferred f32[4]
	ROOT r = f32[5] add(p0, p0)
	^"

run missing_file 2 check "$TMP/no-such.hlo"
same missing_file "$TMP/missing_file.err" "$TMP/no-such.hlo: error: cannot open: No such file or directory"

# bad input through stdin is named <stdin>
run stdin_bad 2 check - <"$TMP/undefined.hlo"
has stdin_bad "$TMP/stdin_bad.err" "<stdin>:5:27: error: undefined operand 'p9'"

# ---- usage errors: exit 2 ---------------------------------------------------------------
run no_args 2
has no_args "$TMP/no_args.err" "usage: shardlens COMMAND"
run unknown_command 2 frobnicate
same unknown_command "$TMP/unknown_command.err" "shardlens: error: unknown command 'frobnicate'
Try 'shardlens --help'."
run unknown_option 2 print --frob "$SAMPLE"
same unknown_option "$TMP/unknown_option.err" "shardlens print: error: unknown option '--frob'
Try 'shardlens print --help'."
run unknown_top_option 2 --frob
run missing_positional 2 check
has missing_positional "$TMP/missing_positional.err" "missing argument"
run extra_positional 2 print "$SAMPLE" extra
has extra_positional "$TMP/extra_positional.err" "unexpected argument 'extra'"
run missing_value 2 print "$SAMPLE" -o
has missing_value "$TMP/missing_value.err" "option '-o' needs a value (OUT.hlo)"
run bad_count 2 check "$SAMPLE" -n 0
has bad_count "$TMP/bad_count.err" "--num-partitions expects a positive integer, got '0'"
# Device limit (README "Limits"), refused before anything is allocated, in every command.
for cmd in check partition verify; do
    run "n_limit_$cmd" 2 $cmd "$SAMPLE" -n 2147483648
    has "n_limit_$cmd" "$TMP/n_limit_$cmd.err" \
        "--num-partitions 2147483648 is more than 65536 devices (the limit)"
done
# Every command that reads HLO checks it after parsing: the operand table stops verify too.
printf 'HloModule m, num_partitions=2\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] reverse(), dimensions={0}\n}\n' \
    >"$TMP/reverse.hlo"
for cmd in check partition verify; do
    run "reverse_$cmd" 2 $cmd "$TMP/reverse.hlo"
    has "reverse_$cmd" "$TMP/reverse_$cmd.err" \
        "reverse.hlo:5:3: error: instruction %r (reverse) in computation %e: expects 1 operand, got 0"
done
run twice 2 print "$SAMPLE" -o "$TMP/a" -o "$TMP/b"
has twice "$TMP/twice.err" "option -o given more than once"

# ---- help and version: exit 0 --------------------------------------------------------------
run top_help 0 --help
has top_help "$TMP/top_help.out" "usage: shardlens COMMAND"
run top_help_short 0 -h
for cmd in print check partition report viz explain diff verify analyze; do
    run "help_$cmd" 0 "$cmd" --help
    has "help_$cmd" "$TMP/help_$cmd.out" "usage: shardlens $cmd "
    has "help_$cmd" "$TMP/help_$cmd.out" "-h, --help"
    has top_help "$TMP/top_help.out" "  $cmd "
    run "help_word_$cmd" 0 help "$cmd"
done
run version 0 --version
grep -qE '^shardlens [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/version.out" || fail "version: $(cat "$TMP/version.out")"


# ---- print: canonical text, idempotent, options anywhere, atomic output ------------------------
EXPECTED_PRINT='HloModule jit_mlp_megatron, entry_computation_layout={(f32[8,16]{1,0}, f32[16,32]{1,0}, f32[32,16]{1,0})->f32[8,16]{1,0}}, num_partitions=4

ENTRY %main.9 (Arg_0.1: f32[8,16], Arg_1.2: f32[16,32], Arg_2.3: f32[32,16]) -> f32[8,16] {
  %Arg_0.1 = f32[8,16]{1,0} parameter(0), sharding={replicated}, metadata={op_name="x"}
  %Arg_1.2 = f32[16,32]{1,0} parameter(1), sharding={devices=[1,4]<=[4]}, metadata={op_name="w1"}
  %Arg_2.3 = f32[32,16]{1,0} parameter(2), sharding={devices=[4,1]<=[4]}, metadata={op_name="w2"}
  %dot.4 = f32[8,32]{1,0} dot(%Arg_0.1, %Arg_1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[1,4]<=[4]}, metadata={op_type="dot_general" op_name="jit(mlp)/jit(main)/dot_general" source_file="/work/models/mlp.py" source_line=14}
  %constant.5 = f32[] constant(0)
  %broadcast.6 = f32[8,32]{1,0} broadcast(%constant.5), dimensions={}, sharding={devices=[1,4]<=[4]}, metadata={op_type="max" op_name="jit(mlp)/jit(main)/max" source_file="/work/models/mlp.py" source_line=15}
  %maximum.7 = f32[8,32]{1,0} maximum(%dot.4, %broadcast.6), sharding={devices=[1,4]<=[4]}, metadata={op_type="max" op_name="jit(mlp)/jit(main)/max" source_file="/work/models/mlp.py" source_line=15}
  ROOT %dot.8 = f32[8,16]{1,0} dot(%maximum.7, %Arg_2.3), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}, metadata={op_type="dot_general" op_name="jit(mlp)/jit(main)/dot_general" source_file="/work/models/mlp.py" source_line=16}
}
'
run print 0 print "$SAMPLE"
same print "$TMP/print.out" "$EXPECTED_PRINT"
run print_again 0 print - <"$TMP/print.out"
cmp -s "$TMP/print.out" "$TMP/print_again.out" || fail "print_again: print is not idempotent"
run print_o_first 0 print -o "$TMP/o1.hlo" "$SAMPLE"
run print_o_last 0 print "$SAMPLE" --output="$TMP/o2.hlo"
run print_o_glued 0 print "-o$TMP/o3.hlo" "$SAMPLE"
for f in o1 o2 o3; do
    cmp -s "$TMP/print.out" "$TMP/$f.hlo" || fail "print -o ($f): file differs from stdout"
done
[ ! -s "$TMP/print_o_first.out" ] || fail "print -o: wrote to stdout as well"
run print_unparsable 2 print "$TMP/undefined.hlo" -o "$TMP/never.hlo"
[ ! -e "$TMP/never.hlo" ] || fail "print: a failed run left an output file"
for f in "$TMP"/*.tmp.*; do
    [ ! -e "$f" ] || fail "print: temporary file $f was left behind"
done

# ---- check: the summary line ---------------------------------------------------------------
run check 0 check "$SAMPLE"
same check "$TMP/check.out" "samples/mlp_megatron.hlo: ok: 1 computations, 8 instructions, 7 sharded, num_partitions=4"
run check_stdin 0 check - <"$SAMPLE"
same check_stdin "$TMP/check_stdin.out" "<stdin>: ok: 1 computations, 8 instructions, 7 sharded, num_partitions=4"
run check_n_after 0 check "$SAMPLE" --num-partitions 4
same check_n_after "$TMP/check_n_after.out" "samples/mlp_megatron.hlo: ok: 1 computations, 8 instructions, 7 sharded, num_partitions=4"
run check_too_few_devices 2 check -n 2 "$SAMPLE"
has check_too_few_devices "$TMP/check_too_few_devices.err" "samples/mlp_megatron.hlo:6:3: error: sharding of %Arg_1.2 in %main.9 does not fit 2 partitions"
sed '/num_partitions=4/s/, num_partitions=4//' "$SAMPLE" >"$TMP/no_header_n.hlo"
run check_devices_from_shardings 0 check "$TMP/no_header_n.hlo"
has check_devices_from_shardings "$TMP/check_devices_from_shardings.out" "7 sharded, num_partitions=4 (from shardings)"

# ---- partition: output that shardlens re-reads; option errors ---------------------------------
run partition 0 partition "$SAMPLE" -o "$TMP/part.hlo"
if [ ! -s "$TMP/part.hlo" ] || [ -s "$TMP/partition.out" ]; then
    fail "partition -o: output misplaced"
fi
run partition_stdout 0 partition "$SAMPLE"
cmp -s "$TMP/part.hlo" "$TMP/partition_stdout.out" || fail "partition: -o and stdout differ"
run partition_recheck 0 check "$TMP/part.hlo"
has partition_recheck "$TMP/partition_recheck.out" "num_partitions=4"
run partition_unknown_set 2 partition "$SAMPLE" --set no_such_option=1 -o "$TMP/p.hlo"
has partition_unknown_set "$TMP/partition_unknown_set.err" "no_such_option"
[ ! -e "$TMP/p.hlo" ] || fail "partition: a failed run left an output file"
run partition_no_count 2 partition "$TMP/no_header_n.hlo"
has partition_no_count "$TMP/partition_no_count.err" "no partition count"
run partition_device_out_of_range 2 partition -n 2 "$SAMPLE"
has partition_device_out_of_range "$TMP/partition_device_out_of_range.err" "does not fit 2 partitions"
run partition_trace 0 partition "$SAMPLE" --trace "$TMP/t.db" -o "$TMP/traced.hlo"
cmp -s "$TMP/part.hlo" "$TMP/traced.hlo" || fail "partition --trace: output differs from untraced"
[ -s "$TMP/t.db" ] || fail "partition --trace: no trace database"
run partition_bad_input 2 partition "$TMP/shape.hlo" -n 4
has partition_bad_input "$TMP/partition_bad_input.err" "$TMP/shape.hlo:5:2: error:"

# ---- --time-phases: per-phase timings on stderr, output unchanged; streamed -o stays atomic -----
run print_timed 0 print "$SAMPLE" --time-phases
cmp -s "$TMP/print.out" "$TMP/print_timed.out" || fail "print --time-phases: stdout changed"
for ph in read parse print write total; do
    grep -qE "^time-phases: $ph +wall +[0-9]+\.[0-9]{4} s +cpu +[0-9]+\.[0-9]{4} s" \
        "$TMP/print_timed.err" || fail "print --time-phases: no '$ph' line: $(cat "$TMP/print_timed.err")"
done
# read and parse count the input's bytes (MB with two decimals), print and write the output's
in_mb=$(wc -c <"$SAMPLE" | awk '{printf "%.2f MB", $1 / 1e6}')
out_mb=$(wc -c <"$TMP/print.out" | awk '{printf "%.2f MB", $1 / 1e6}')
grep -E "^time-phases: parse " "$TMP/print_timed.err" | grep -qF "$in_mb" ||
    fail "print --time-phases: parse line does not say $in_mb"
grep -E "^time-phases: write " "$TMP/print_timed.err" | grep -qF "$out_mb" ||
    fail "print --time-phases: write line does not say $out_mb"
grep -qE "^time-phases: (check|partition) " "$TMP/print_timed.err" &&
    fail "print --time-phases: a phase print does not run was listed"
run partition_timed_first 0 --time-phases partition "$SAMPLE" -o "$TMP/part_timed1.hlo"
cmp -s "$TMP/part.hlo" "$TMP/part_timed1.hlo" || fail "--time-phases partition: output changed"
has partition_timed_first "$TMP/partition_timed_first.err" "time-phases: partition "
run partition_timed 0 partition --time-phases "$SAMPLE" -o "$TMP/part_timed.hlo"
cmp -s "$TMP/part.hlo" "$TMP/part_timed.hlo" || fail "partition --time-phases: output changed"
for ph in read parse check partition print write total; do
    grep -qE "^time-phases: $ph " "$TMP/partition_timed.err" ||
        fail "partition --time-phases: no '$ph' line"
done
[ "$(grep -c '^time-phases: ' "$TMP/partition_timed.err")" = 7 ] ||
    fail "partition --time-phases: want 7 lines (no trace phase without --trace)"
run check_timed 0 check "$SAMPLE" --time-phases
same check_timed "$TMP/check_timed.out" "samples/mlp_megatron.hlo: ok: 1 computations, 8 instructions, 7 sharded, num_partitions=4"
has check_timed "$TMP/check_timed.err" "time-phases: check "
run help_time 0 partition --help
has help_time "$TMP/help_time.out" "--time-phases"
# a module bigger than one streamed piece (64 KiB) through -o and stdout: same bytes, no temp
{
    printf 'HloModule big\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n'
    for i in $(seq 1 3000); do
        printf '  a.%d = f32[4]{0} add(p, p), metadata={op_name="layer/%d/add"}\n' "$i" "$i"
    done
    printf '  ROOT r = f32[4]{0} add(p, p)\n}\n'
} >"$TMP/big.hlo"
run big_stdout 0 print "$TMP/big.hlo"
run big_o 0 print "$TMP/big.hlo" -o "$TMP/big_o.hlo"
[ "$(wc -c <"$TMP/big_stdout.out")" -gt 131072 ] || fail "big: module smaller than two pieces"
cmp -s "$TMP/big_stdout.out" "$TMP/big_o.hlo" || fail "big: -o and stdout differ"
[ "$(grep -c ' add(' "$TMP/big_o.hlo")" = 3001 ] || fail "big: want 3001 adds in the output"
run big_o_devnull 0 print "$TMP/big.hlo" -o /dev/null
[ -c /dev/null ] || fail "print -o /dev/null replaced the device"
run big_o_nodir 2 print "$TMP/big.hlo" -o "$TMP/no-such-dir/out.hlo"
has big_o_nodir "$TMP/big_o_nodir.err" "$TMP/no-such-dir/out.hlo: error: cannot create"
for f in "$TMP"/*.tmp.*; do
    [ ! -e "$f" ] || fail "streamed output: temporary file $f was left behind"
done

# ---- the trace commands: partition --trace, report, explain, diff, analyze ----------------------
# a second run appended to the same trace; a failed run adds nothing
run partition_trace_again 0 partition "$SAMPLE" --trace "$TMP/t.db" -o "$TMP/traced2.hlo"
run partition_trace_fail 2 partition "$TMP/shape.hlo" -n 4 --trace "$TMP/t.db"
run report_run2 0 report "$TMP/t.db" --run 2
run report_run3 2 report "$TMP/t.db" --run 3
run report_notadb 2 report "$SAMPLE"
has report_notadb "$TMP/report_notadb.err" "samples/mlp_megatron.hlo: error:"
run report_missing 2 report "$TMP/no-such.db"
has report_missing "$TMP/report_missing.err" "$TMP/no-such.db: error: no such trace database"

run report 0 report "$TMP/t.db" --mesh data=2,model=2
has report "$TMP/report.out" "shardlens report: module jit_mlp_megatron, 4 devices"
has report "$TMP/report.out" "nccl-tests bus bandwidth"
has report "$TMP/report.out" "link 100 Gbit/s (default; --link-gbps), latency 5 us per step (default; --latency-us)"
has report "$TMP/report.out" "  bytes sent       3072 B (3.0 KiB), summed over devices"
has report "$TMP/report.out" "  busiest device   0: 768 B sent, 768 B received"
has report "$TMP/report.out" "  all-reduce      1        3072      30.06              0"
has report "$TMP/report.out" "  %dot.8  dot               1        3072  jit(mlp)/jit(main)/dot_general"
has report "$TMP/report.out" "  %all-reduce  all-reduce  data,model     1x4    512      1              768      30.06  %dot.8 (dot)"
run report_run1 0 report "$TMP/t.db" --run 1
cmp -s "$TMP/report_run1.out" "$TMP/report_run2.out" || fail "report: runs 1 and 2 of one module differ"
run report_model 0 report "$TMP/t.db" --link-gbps 800 --latency-us 0 --devices-per-node 2 \
    --inter-node-gbps 50
has report_model "$TMP/report_model.out" "link 800 Gbit/s (--link-gbps), latency 0 us per step (--latency-us)"
has report_model "$TMP/report_model.out" "2 devices per node, 50 Gbit/s between nodes (--inter-node-gbps)"
has report_model "$TMP/report_model.out" "  estimated time   0.12 us" # 768 B at 50 Gbit/s
run report_bad_gbps 2 report "$TMP/t.db" --link-gbps 0
has report_bad_gbps "$TMP/report_bad_gbps.err" "--link-gbps expects a positive number, got '0'"
run report_bad_mesh 2 report "$TMP/t.db" --mesh data=3,model=2
has report_bad_mesh "$TMP/report_bad_mesh.err" "the axes hold 6 devices but the run has 4"
run report_inter_alone 2 report "$TMP/t.db" --inter-node-gbps 10
run report_json 0 report "$TMP/t.db" --json "$TMP/s.json"
has report_json "$TMP/report_json.out" "per collective kind"
has report_json "$TMP/s.json" '"schema_version":	1,'
run report_json_stdout 0 report "$TMP/t.db" --json -
cmp -s "$TMP/s.json" "$TMP/report_json_stdout.out" || fail "report --json -: differs from the file"

run explain 0 explain "$TMP/t.db" dot.8
has explain "$TMP/explain.out" "group_on_contracting"
has explain "$TMP/explain.out" "all-reduce"
has explain "$TMP/explain.out" "768 B"
run explain_percent 0 explain "$TMP/t.db" %dot.8
cmp -s "$TMP/explain.out" "$TMP/explain_percent.out" || fail "explain: %NAME and NAME differ"
run explain_unknown 2 explain "$TMP/t.db" no_such_instr
has explain_unknown "$TMP/explain_unknown.err" "no_such_instr"

# analyze: every file, deterministic, and diff of a one-sharding change fails the budget
run analyze 0 analyze "$SAMPLE" --out "$TMP/an"
for f in partitioned.hlo trace.db summary.json report.txt; do
    [ -s "$TMP/an/$f" ] || fail "analyze: no $f"
done
has analyze "$TMP/analyze.out" "1 collective, 3072 B sent summed over devices, busiest device 0 (768 B sent, 768 B received)"
cmp -s "$TMP/part.hlo" "$TMP/an/partitioned.hlo" || fail "analyze: partitioned.hlo differs from partition's"
run analyze_again 0 analyze "$SAMPLE" --out "$TMP/an2/nested/"
cmp -s "$TMP/an/summary.json" "$TMP/an2/nested/summary.json" || fail "analyze: summary.json is not deterministic"
cmp -s "$TMP/an/report.txt" "$TMP/an2/nested/report.txt" || fail "analyze: report.txt is not deterministic"
run analyze_report 0 report "$TMP/an/trace.db"
cmp -s "$TMP/an/report.txt" "$TMP/analyze_report.out" || fail "analyze: report.txt differs from report"
run analyze_no_out 2 analyze "$SAMPLE"
has analyze_no_out "$TMP/analyze_no_out.err" "--out DIR is required"
run analyze_bad 2 analyze "$TMP/shape.hlo" -n 4 --out "$TMP/bad"
[ ! -e "$TMP/bad/summary.json" ] || fail "analyze: a failed run wrote a summary"
ls "$TMP"/an/.trace.db.tmp.* >/dev/null 2>&1 && fail "analyze: temporary trace left behind"

sed 's/parameter(0), sharding={replicated}/parameter(0), sharding={devices=[1,4]<=[4]}/' "$SAMPLE" \
    >"$TMP/changed.hlo"
run analyze_changed 0 analyze "$TMP/changed.hlo" --out "$TMP/ch"
run diff_same 0 diff "$TMP/an/summary.json" "$TMP/an/trace.db" --max-increase 0
has diff_same "$TMP/diff_same.out" "no source op changed"
has diff_same "$TMP/diff_same.out" "bytes sent ok, busiest device ok: pass"
run diff_grew 1 diff "$TMP/an/summary.json" "$TMP/ch/summary.json" --max-increase 10
has diff_grew "$TMP/diff_grew.out" "added    %dot.4 all-gather [jit(mlp)/jit(main)/dot_general]: 0 -> 1, 0 -> 1536 B  +1536 (new)"
has diff_grew "$TMP/diff_grew.out" "bytes sent, summed over devices  3072 -> 4608 B  +1536 (+50.00%)"
has diff_grew "$TMP/diff_grew.out" "FAIL"
run diff_edge 0 diff "$TMP/an/trace.db" "$TMP/ch/trace.db" --max-increase 50 # exactly +50%
run diff_past_edge 1 diff "$TMP/an/trace.db" "$TMP/ch/trace.db" --max-increase 49.99
run diff_shrank 0 diff "$TMP/ch/summary.json" "$TMP/an/summary.json" --max-increase 0
run diff_no_budget 0 diff "$TMP/an/summary.json" "$TMP/ch/summary.json"
run diff_json 1 diff "$TMP/an/summary.json" "$TMP/ch/summary.json" --max-increase 10 --json
has diff_json "$TMP/diff_json.out" '"over_budget":	true'
has diff_json "$TMP/diff_json.out" '"status":	"added"'
run diff_bad_pct 2 diff "$TMP/an/summary.json" "$TMP/ch/summary.json" --max-increase -1
printf '{"schema_version": 1, "devices": [\n  {"device": 0}\n]}\n' >"$TMP/broken.json"
run diff_broken 2 diff "$TMP/broken.json" "$TMP/an/summary.json"
has diff_broken "$TMP/diff_broken.err" "$TMP/broken.json: error: not a shardlens summary: devices[0] has no valid 'send_bytes'"
printf '{"schema_version": 1,\n  "devices": [}\n' >"$TMP/notjson.json"
run diff_notjson 2 diff "$TMP/notjson.json" "$TMP/an/summary.json"
has diff_notjson "$TMP/diff_notjson.err" "$TMP/notjson.json:2:15: error: not valid JSON"

# ---- verify: simulate the partitioned module on N devices (exit 0 agree, 1 mismatch, 3 unsupported)
run verify 0 verify "$SAMPLE" --seed 7 --trials 2
has verify "$TMP/verify.out" "samples/mlp_megatron.hlo: ok: 1 output agree on 4 devices (2 trials, seed 7"
run partition_for_verify 0 partition "$SAMPLE" -o "$TMP/vp.hlo"
run verify_given 0 verify "$SAMPLE" --partitioned "$TMP/vp.hlo"
sed 's/replica_groups=\[1,4\]<=\[4\]/replica_groups={{0,1},{2,3}}/' "$TMP/vp.hlo" >"$TMP/vbad.hlo"
run verify_wrong_group 1 verify "$SAMPLE" --partitioned "$TMP/vbad.hlo"
has verify_wrong_group "$TMP/verify_wrong_group.err" "error: verify failed: output 0 differs at element"
run verify_bad_seed 2 verify "$SAMPLE" --seed x
run verify_bad_input 2 verify "$TMP/shape.hlo" -n 4
printf 'HloModule m, num_partitions=2\n\nENTRY e {\n  p = f32[4] parameter(0), sharding={replicated}\n  ROOT c = f32[4] cholesky(p), sharding={replicated}\n}\n' >"$TMP/vchol.hlo"
run verify_unsupported 3 verify "$TMP/vchol.hlo" --partitioned "$TMP/vchol.hlo"
has verify_unsupported "$TMP/verify_unsupported.err" "cholesky"

if [ "$failures" -ne 0 ]; then
    echo "$failures CLI check(s) failed" >&2
    exit 1
fi
echo "all CLI checks passed"
