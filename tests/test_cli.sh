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

# An attribute name XLA does not have is kept but warned about, once per name, with the nearest
# XLA attribute; the sample itself (only XLA's names) gets no warning.
[ ! -s "$TMP/check.err" ] || fail "check: warnings on the sample: $(cat "$TMP/check.err")"
sed -e 's/parameter(0), sharding=/parameter(0), shardIng=/' \
    -e 's/, metadata=/, metdata=/g' "$SAMPLE" >"$TMP/typo.hlo"
grep -q 'shardIng=' "$TMP/typo.hlo" || fail "typo.hlo: the sed did not apply"
run check_typo 0 check "$TMP/typo.hlo"
has check_typo "$TMP/check_typo.out" "8 instructions, 6 sharded, num_partitions=4"
has check_typo "$TMP/check_typo.err" "$TMP/typo.hlo:5:3: warning: instruction %Arg_0.1: 'shardIng=' is not an XLA attribute; shardlens keeps it but reads nothing from it (did you mean 'sharding='?)"
has check_typo "$TMP/check_typo.err" "'metdata=' is not an XLA attribute; shardlens keeps it but reads nothing from it (did you mean 'metadata='?) ["
[ "$(grep -c warning "$TMP/check_typo.err")" = 2 ] || fail "check_typo: want 2 warnings: $(cat "$TMP/check_typo.err")"

# ---- partition: output that shardlens re-reads; option errors ---------------------------------
run partition 0 partition "$SAMPLE" -o "$TMP/part.hlo"
if [ ! -s "$TMP/part.hlo" ] || [ -s "$TMP/partition.out" ]; then
    fail "partition -o: output misplaced"
fi
run partition_stdout 0 partition "$SAMPLE"
cmp -s "$TMP/part.hlo" "$TMP/partition_stdout.out" || fail "partition: -o and stdout differ"
run partition_recheck 0 check "$TMP/part.hlo"
has partition_recheck "$TMP/partition_recheck.out" "num_partitions=4"
# an unbounded dim ('?') has no size to split: exit 3, naming the instruction and its shape
printf 'HloModule m, num_partitions=2\n\nENTRY main {\n  p = f32[?,8] parameter(0), sharding={devices=[2,1]<=[2]}\n  ROOT n = f32[?,8] negate(p), sharding={devices=[2,1]<=[2]}\n}\n' >"$TMP/unbounded.hlo"
run check_unbounded 0 check "$TMP/unbounded.hlo"
run partition_unbounded 3 partition "$TMP/unbounded.hlo" -o "$TMP/unbounded_out.hlo"
has partition_unbounded "$TMP/partition_unbounded.err" "$TMP/unbounded.hlo:4:3: error: %p (parameter): shape f32[?,8] has an unbounded dimension ('?'): the partitioner takes static and bounded shapes only"
[ ! -e "$TMP/unbounded_out.hlo" ] || fail "partition: a refused module left an output file"
run partition_unknown_set 2 partition "$SAMPLE" --set no_such_option=1 -o "$TMP/p.hlo"
has partition_unknown_set "$TMP/partition_unknown_set.err" "no_such_option"
[ ! -e "$TMP/p.hlo" ] || fail "partition: a failed run left an output file"
printf 'HloModule m\n\nENTRY main {\n  p = f32[8] parameter(0), sharding={replicated}\n  ROOT n = f32[8] negate(p)\n}\n' >"$TMP/no_count.hlo"
run partition_no_count 2 partition "$TMP/no_count.hlo" # no sharding names a device
has partition_no_count "$TMP/partition_no_count.err" "no partition count: pass -n N or put num_partitions=N in the module header (no sharding names devices)"
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
    fail "partition --time-phases: want 7 lines (no trace or propagate phase here)"
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
has report "$TMP/report.out" "  bytes sent       3.00 KiB, summed over devices"
has report "$TMP/report.out" "  busiest device   0: 768 B sent, 768 B received"
has report "$TMP/report.out" "  all-reduce      1    3.00 KiB  30.1 us              0"
has report "$TMP/report.out" "  %dot.8  dot               1    3.00 KiB  jit(mlp)/jit(main)/dot_general"
has report "$TMP/report.out" "  %all-reduce  all-reduce  data,model     1x4  512 B      1            768 B    3.00 KiB     30.1 us  %dot.8 (dot)"
has report "$TMP/report.out" "  0-3           768 B           768 B            1"
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
# the alternatives, priced: maximum.7 f32[8,32] (1 KiB) and Arg_2.3 f32[32,16] (2 KiB) gathered
# over 4 devices send 3/4 of each, 2.25 KiB, where the chosen all-reduce sends 768 B
has explain "$TMP/explain.out" "  alternatives (bytes each device would send, ring model; the chosen strategy's collectives send 768 B):"
has explain "$TMP/explain.out" "    replicate: 2.25 KiB (all-gather of %maximum.7 over 4: 768 B; all-gather of %Arg_2.3 over 4: 1.50 KiB); lost: the last resort, taken only when no strategy applies, and making it apply sends 1.50 KiB more per device"
grep -q '^    group_on_contracting:' "$TMP/explain.out" && fail "explain: the chosen strategy is listed among its alternatives"
has explain "$TMP/explain.out" "    windowed_einsum: does not apply: it needs a ring-shaped sharding and an operand or output of at least 256 MiB (threshold_for_windowed_einsum_mib)"
run explain_percent 0 explain "$TMP/t.db" %dot.8
cmp -s "$TMP/explain.out" "$TMP/explain_percent.out" || fail "explain: %NAME and NAME differ"
run explain_unknown 2 explain "$TMP/t.db" no_such_instr
has explain_unknown "$TMP/explain_unknown.err" "no_such_instr"

# analyze: every file, deterministic, and diff of a one-sharding change fails the budget
run analyze 0 analyze "$SAMPLE" --out "$TMP/an"
for f in partitioned.hlo trace.db summary.json report.txt; do
    [ -s "$TMP/an/$f" ] || fail "analyze: no $f"
done
has analyze "$TMP/analyze.out" "1 collective, 3.00 KiB sent summed over devices, busiest device 0 (768 B sent, 768 B received), estimated 30.1 us"
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
has diff_grew "$TMP/diff_grew.out" "added    %dot.4 all-gather [jit(mlp)/jit(main)/dot_general]: 0 -> 1, 0 B -> 1.50 KiB  +1.50 KiB (new)"
has diff_grew "$TMP/diff_grew.out" "bytes sent, summed over devices  3.00 KiB -> 4.50 KiB  +1.50 KiB (+50.00%)"
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
has diff_broken "$TMP/diff_broken.err" "$TMP/broken.json: error: not a valid shardlens summary (schema/summary.schema.json): the document has no 'tool'"
printf '{"schema_version": 1,\n  "devices": [}\n' >"$TMP/notjson.json"
run diff_notjson 2 diff "$TMP/notjson.json" "$TMP/an/summary.json"
has diff_notjson "$TMP/diff_notjson.err" "$TMP/notjson.json:2:15: error: not valid JSON"

# ---- warnings, partition counts from shardings, MLIR input, help, --top, --time-phases ---------
# The sample's only unannotated instruction is a constant: replicated, each user slices its
# part locally, so nothing is propagated and nothing is warned about.
grep -q "propagated" "$TMP/analyze.err" && fail "analyze: the sample's constant alone triggered propagation"
grep -A1 '^warnings$' "$TMP/an/report.txt" | grep -qx '  (none)' ||
    fail "analyze: the sample's report has warnings"
# analyze: one line per kind of warning on stderr; unannotated ops, with --no-propagate
printf 'HloModule chain, num_partitions=4\n\nENTRY main {\n  x = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}\n  k = f32[] constant(2)\n  c = f32[8,16] convert(x), metadata={op_name="jit(f)/convert"}\n  m = f32[8,16] multiply(c, c)\n  ROOT n = f32[8,16] negate(m), sharding={devices=[4,1]<=[4]}\n}\n' >"$TMP/unann.hlo"
run analyze_warnings 0 analyze "$TMP/unann.hlo" --out "$TMP/an_noprop" --no-propagate
same analyze_warnings "$TMP/analyze_warnings.err" "analyze: warning: unannotated: 1, first %c (jit(f)/convert): 2 of 4 instructions carry no sharding and are partitioned as replicated, this one first"
has analyze_warnings "$TMP/an_noprop/report.txt" "    %c (jit(f)/convert): 2 of 4 instructions carry no sharding and are partitioned as replicated, this one first"
has analyze_warnings "$TMP/an_noprop/summary.json" '"message":	"2 of 4 instructions carry no sharding and are partitioned as replicated, this one first"'
# without --no-propagate the same module propagates (the count on stderr includes the constant)
run analyze_unann_prop 0 analyze "$TMP/unann.hlo" --out "$TMP/an_prop"
same analyze_unann_prop "$TMP/analyze_unann_prop.err" "shardlens analyze: 3 of 5 instructions had no sharding: propagated shardings to 2 of 5 instructions (XLA's sharding propagation; --no-propagate partitions them as replicated)"
# a module already partitioned: its collective is named, on stderr and in the report
printf 'HloModule done, num_partitions=2\n\nsum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT a = f32[] add(x, y)\n}\n\nENTRY e {\n  p = f32[4] parameter(0), sharding={replicated}\n  ROOT ar = f32[4] all-reduce(p), channel_id=1, replica_groups={{0,1}}, to_apply=sum, sharding={replicated}\n}\n' >"$TMP/done.hlo"
run analyze_partitioned 0 analyze "$TMP/done.hlo" --out "$TMP/done"
has analyze_partitioned "$TMP/analyze_partitioned.err" "analyze: warning: already-partitioned: 1, first %ar: all-reduce outside a manual region: the input looks already partitioned"
has analyze_partitioned "$TMP/done/report.txt" "  already-partitioned      1"
has analyze_partitioned "$TMP/done/summary.json" '"kind":	"already-partitioned"'

# the fallbacks, each in report.txt, summary.json and on stderr
printf 'HloModule fb, num_partitions=4\n\nENTRY main {\n  p = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}\n  c = f32[8,16] custom-call(p), custom_call_target="CustomSPMDPartitioning", sharding={devices=[4,1]<=[4]}\n  b = f32[8,16] bitcast(p), sharding={devices=[4,1]<=[4]}\n  r = f32[8,16] copy(p), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n  ROOT t = (f32[8,16], f32[8,16], f32[8,16]) tuple(c, b, r), sharding={{devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}, {devices=[1,2,2]<=[4] last_tile_dim_replicate}}\n}\n' >"$TMP/fallbacks.hlo"
run analyze_fallbacks 0 analyze "$TMP/fallbacks.hlo" --out "$TMP/fb"
for line in "custom-call-fallback: 1, first %c: custom-call \"CustomSPMDPartitioning\" has no partitioning rule here" \
    "no-handler: 1, first %b: no handler for bitcast: partitioned as replicated" \
    "full-remat: 1, first %r: involuntary full rematerialization: the value is replicated on every device, then sliced to its new sharding"; do
    has analyze_fallbacks "$TMP/analyze_fallbacks.err" "analyze: warning: $line"
done
has analyze_fallbacks "$TMP/fb/report.txt" "  custom-call-fallback      1"
has analyze_fallbacks "$TMP/fb/report.txt" "    %c: custom-call \"CustomSPMDPartitioning\" has no partitioning rule here: partitioned by fallback, its operands replicated (all-gathered) and the full call run on every device"
has analyze_fallbacks "$TMP/fb/report.txt" "    %b: no handler for bitcast: partitioned as replicated"
has analyze_fallbacks "$TMP/fb/report.txt" "    %r: involuntary full rematerialization: the value is replicated on every device, then sliced to its new sharding"
# the fallback's own traffic, apart in the totals: all-gather of f32[8,16] over 4 = 384 B on each
has analyze_fallbacks "$TMP/fb/report.txt" "  by fallback      1.50 KiB of it (1 collective) at 1 custom call partitioned by fallback"
has analyze_fallbacks "$TMP/fb/summary.json" '"fallback":	{
			"sources":	1,
			"collectives":	1,
			"send_bytes":	1536,'

# replica groups in XLA 0.10's mesh-axes form read as explicit groups: over the listed axes,
# one group per index of the others; device_ids reorders the devices; a sub-axis takes factors
cat >"$TMP/mesh_groups.hlo" <<'HLO'
HloModule m, num_partitions=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY e {
  p = f32[4] parameter(0)
  r1 = f32[4] all-reduce(p), channel_id=1, replica_groups=mesh['a'=2,'b'=4] {'a'}, use_global_device_ids=true, to_apply=add
  r2 = f32[4] all-reduce(p), channel_id=2, replica_groups=mesh['a'=4,'b'=1,'c'=2], device_ids=([2,4]T(1,0)) {'a'}, use_global_device_ids=true, to_apply=add
  r3 = f32[4] all-reduce(p), channel_id=3, replica_groups=mesh['x'=8] {'x':(2)2}, use_global_device_ids=true, to_apply=add
  ROOT t = (f32[4], f32[4], f32[4]) tuple(r1, r2, r3)
}
HLO
run mesh_groups 0 print "$TMP/mesh_groups.hlo"
has mesh_groups "$TMP/mesh_groups.out" "channel_id=1, replica_groups={{0,4},{1,5},{2,6},{3,7}},"
has mesh_groups "$TMP/mesh_groups.out" "channel_id=2, replica_groups={{0,1,2,3},{4,5,6,7}},"
has mesh_groups "$TMP/mesh_groups.out" "channel_id=3, replica_groups={{0,2},{1,3},{4,6},{5,7}},"
sed "s/{'a'}, use/{'q'}, use/" "$TMP/mesh_groups.hlo" >"$TMP/mesh_groups_bad.hlo"
run mesh_groups_bad 2 check "$TMP/mesh_groups_bad.hlo"
has mesh_groups_bad "$TMP/mesh_groups_bad.err" "mesh_groups_bad.hlo:11:78: error: axis 'q' is not in the mesh"

# memory placements (JAX device_put to host) become XLA's pass-through MoveToHost before
# propagation: the value keeps its sharding, nothing is gathered for it
printf 'HloModule dp\n\nENTRY main {\n  x = f32[16,8] parameter(0), sharding={devices=[4,1]<=[4]}\n  t = f32[16,8] tanh(x)\n  d = f32[16,8] custom-call(t), custom_call_target="annotate_device_placement", custom_call_has_side_effect=true, frontend_attributes={_xla_buffer_placement="pinned_host"}\n  e = f32[16,8] custom-call(d), custom_call_target="annotate_device_placement", custom_call_has_side_effect=true, frontend_attributes={_xla_buffer_placement="device"}\n  ROOT r = f32[16,8] negate(e), sharding={devices=[4,1]<=[4]}\n}\n' >"$TMP/placement.hlo"
run placement 0 partition "$TMP/placement.hlo" -n 4
has placement "$TMP/placement.out" '%d.1 = f32[4,8] custom-call(%t.1), custom_call_target="MoveToHost"'
has placement "$TMP/placement.out" '%e.1 = f32[4,8] custom-call(%d.1), custom_call_target="MoveToDevice"'
has placement "$TMP/placement.out" 'ROOT %r.1 = f32[4,8] negate(%e.1)'
if grep -q "all-gather" "$TMP/placement.out"; then fail "placement: an all-gather was emitted"; fi
for kind in custom-call-fallback no-handler full-remat; do
    has analyze_fallbacks "$TMP/fb/summary.json" "\"kind\":	\"$kind\""
done
has analyze_fallbacks "$TMP/fb/summary.json" '"message":	"no handler for bitcast: partitioned as replicated"'

# a donated parameter sharded unlike its output: after partitioning the pair's local buffers
# differ in size (XLA rejects it); the memory estimate ignores the pair and the trace says so
ALIAS_MSG='1 input_output_alias pair ignored after partitioning: the donated parameter and its output have local buffers of different sizes (sharded differently, which XLA rejects), or the pair cannot be read; the memory estimate counts it as neither donated nor aliased'
printf 'HloModule donate, input_output_alias={ {}: (0, {}, may-alias) }, num_partitions=2\n\nENTRY main {\n  p0 = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}\n  ROOT r = f32[8,4] add(p0, p0), sharding={replicated}\n}\n' >"$TMP/alias_bad.hlo"
printf 'HloModule donate, input_output_alias={ {}: (0, {}, may-alias) }, num_partitions=2\n\nENTRY main {\n  p0 = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}\n  ROOT r = f32[8,4] add(p0, p0), sharding={devices=[2,1]0,1}\n}\n' >"$TMP/alias_ok.hlo"
run alias_ignored 0 analyze "$TMP/alias_bad.hlo" --out "$TMP/alias_bad"
same alias_ignored "$TMP/alias_ignored.err" "analyze: warning: ignored-alias: 1, first (module): $ALIAS_MSG"
has alias_ignored "$TMP/alias_bad/report.txt" "  ignored-alias      1"
has alias_ignored "$TMP/alias_bad/report.txt" "    (module): $ALIAS_MSG"
has alias_ignored "$TMP/alias_bad/summary.json" '"kind":	"ignored-alias"'
run alias_ignored_diff 0 diff "$TMP/alias_bad/summary.json" "$TMP/alias_bad/summary.json"
run alias_ignored_trace 0 partition "$TMP/alias_bad.hlo" --trace "$TMP/alias_bad.db" -o "$TMP/alias_bad.out.hlo"
run alias_ignored_report 0 report "$TMP/alias_bad.db"
has alias_ignored_report "$TMP/alias_ignored_report.out" "    (module): $ALIAS_MSG"
# sharded alike, the pair is kept (donated and aliased): no warning
run alias_kept 0 analyze "$TMP/alias_ok.hlo" --out "$TMP/alias_ok"
[ -s "$TMP/alias_kept.err" ] && fail "alias_kept: warned: $(cat "$TMP/alias_kept.err")"
grep -A1 '^warnings$' "$TMP/alias_ok/report.txt" | grep -qx '  (none)' ||
    fail "alias_kept: the report has warnings"

# no num_partitions and no -n: the count all shardings agree on, said on stderr
sed 's/, num_partitions=4//' "$SAMPLE" >"$TMP/nonum.hlo"
run nonum 0 partition "$TMP/nonum.hlo" -o "$TMP/nonum.out.hlo"
has nonum "$TMP/nonum.err" "shardlens partition: $TMP/nonum.hlo: no num_partitions in the header and no -n: partitioning for 4 devices, the count all the shardings agree on"
run nonum_n 0 partition "$TMP/nonum.hlo" -n 4 -o "$TMP/nonum_n.out.hlo"
cmp -s "$TMP/nonum.out.hlo" "$TMP/nonum_n.out.hlo" || fail "nonum: differs from partition -n 4"
has nonum "$TMP/nonum.out.hlo" "num_partitions=4"
run nonum_verify 0 verify "$TMP/nonum.hlo"
has nonum_verify "$TMP/nonum_verify.out" "ok: 1 output agree on 4 devices"
run nonum_check 0 check "$TMP/nonum.hlo"
has nonum_check "$TMP/nonum_check.out" "num_partitions=4 (from shardings)"
printf 'HloModule m\n\nENTRY main {\n  p0 = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n  p1 = f32[8] parameter(1), sharding={devices=[2]<=[2]}\n  ROOT r = f32[8] add(p0, p1), sharding={devices=[4]<=[4]}\n}\n' >"$TMP/disagree.hlo"
for cmd in partition check verify; do
    run "disagree_$cmd" 2 "$cmd" "$TMP/disagree.hlo"
    same "disagree_$cmd" "$TMP/disagree_$cmd.err" "$TMP/disagree.hlo:5:3: error: no num_partitions and the shardings disagree on the device count: 4 (%p0 first), 2 (%p1 first); pass -n N
  p1 = f32[8] parameter(1), sharding={devices=[2]<=[2]}
  ^"
done
run disagree_given 2 partition "$TMP/disagree.hlo" -n 4 -o "$TMP/disagree.out" # -n decides
has disagree_given "$TMP/disagree_given.err" "sharding of %p1 in %main does not fit 4 partitions"
run disagree_analyze 2 analyze "$TMP/disagree.hlo" --out "$TMP/dis"
[ ! -e "$TMP/dis/summary.json" ] || fail "analyze: disagreeing shardings wrote a summary"
# One tile count, but a device id beyond it (XLA's tests write devices=[1,4]0,1,4,5 with no
# count): check takes it without a count; partitioning needs one (exit 3 without, 2 if it
# does not fit).
printf 'HloModule m\n\nENTRY main {\n  p0 = f32[8,4] parameter(0), sharding={devices=[1,4]0,1,4,5}\n  ROOT c = f32[8,4] copy(p0)\n}\n' >"$TMP/sparse_ids.hlo"
run sparse_ids_check 0 check "$TMP/sparse_ids.hlo"
same sparse_ids_check "$TMP/sparse_ids_check.out" "$TMP/sparse_ids.hlo: ok: 1 computations, 2 instructions, 1 sharded, num_partitions not determined (the shardings name devices beyond their tile count; pass -n N)"
run sparse_ids_partition 3 partition "$TMP/sparse_ids.hlo" -o "$TMP/sparse_ids.out"
has sparse_ids_partition "$TMP/sparse_ids_partition.err" "$TMP/sparse_ids.hlo:4:3: error: no num_partitions, and the shardings tile 4 devices but name device 5 (%p0): the device count is not determined; pass -n N"
[ ! -e "$TMP/sparse_ids.out" ] || fail "sparse_ids_partition: wrote an output"
run sparse_ids_n 2 partition "$TMP/sparse_ids.hlo" -n 6
has sparse_ids_n "$TMP/sparse_ids_n.err" "sharding of %p0 in %main does not fit 6 partitions: tile assignment has 4 devices, module has 6"
sed 's/0,1,4,5/0,1,5,5/' "$TMP/sparse_ids.hlo" >"$TMP/sparse_twice.hlo" # still checked for ids
run sparse_twice 2 check "$TMP/sparse_twice.hlo"
has sparse_twice "$TMP/sparse_twice.err" "sharding of %p0 in %main: device 5 appears twice"
# SPMDFullToShardShape whose result is not the operand's shard (here: an unsharded operand)
printf 'HloModule m, num_partitions=2\n\nENTRY e {\n  p = f32[2,4] parameter(0)\n  s = f32[1,4] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={manual}\n  ROOT x = f32[1,4] add(s, s), sharding={manual}\n}\n' >"$TMP/fts_shape.hlo"
run fts_shape 2 partition "$TMP/fts_shape.hlo" -o "$TMP/fts_shape.out"
has fts_shape "$TMP/fts_shape.err" "$TMP/fts_shape.hlo:5:3: error: %s (custom-call): the operand's local shape does not match the local manual output shape"
sed 's/f32\[1,4\]/f32[2,4]/g' "$TMP/fts_shape.hlo" >"$TMP/fts_ok.hlo" # the operand's own shape
run fts_ok 0 partition "$TMP/fts_ok.hlo" -o "$TMP/fts_ok.out"
has fts_ok "$TMP/fts_ok.out" "ROOT %x.1 = f32[2,4]"
# copy of a tuple (XLA's HandleCopy takes any shape): checked, partitioned leaf by leaf
printf 'HloModule m, num_partitions=2\n\nENTRY main {\n  p0 = f32[8] parameter(0), sharding={devices=[2]0,1}\n  p1 = s32[4] parameter(1), sharding={replicated}\n  t = (f32[8], s32[4]) tuple(p0, p1)\n  ROOT c = (f32[8], s32[4]) copy(t), sharding={{devices=[2]0,1}, {replicated}}\n}\n' >"$TMP/copy_tuple.hlo"
run copy_tuple_check 0 check "$TMP/copy_tuple.hlo"
run copy_tuple 0 partition "$TMP/copy_tuple.hlo" -o "$TMP/copy_tuple.out"
has copy_tuple "$TMP/copy_tuple.out" "ROOT %c.1 = (f32[4], s32[4]) copy("

# MLIR (StableHLO) input: named, with how to export HLO text
printf 'module @jit_f attributes {mhlo.num_partitions = 4 : i32} {\n  func.func public @main(%%arg0: tensor<8xf32>) -> tensor<8xf32> {\n    return %%arg0 : tensor<8xf32>\n  }\n}\n' >"$TMP/f.mlir"
for cmd in check partition analyze; do
    if [ "$cmd" = analyze ]; then run "mlir_$cmd" 2 "$cmd" "$TMP/f.mlir" --out "$TMP/mlir"; else run "mlir_$cmd" 2 "$cmd" "$TMP/f.mlir"; fi
    has "mlir_$cmd" "$TMP/mlir_$cmd.err" "$TMP/f.mlir:1:1: error: this is MLIR text (StableHLO or MHLO), not HLO text"
    has "mlir_$cmd" "$TMP/mlir_$cmd.err" 'jax.jit(f).lower(*args).as_text(dialect="hlo")'
    has "mlir_$cmd" "$TMP/mlir_$cmd.err" "compiler_ir('hlo')"
done
printf 'func.func @main(%%a: tensor<8xf32>) -> tensor<8xf32> {\n  return %%a : tensor<8xf32>\n}\n' >"$TMP/g.mlir"
run mlir_func 2 check "$TMP/g.mlir"
has mlir_func "$TMP/mlir_func.err" "error: this is MLIR text"
printf 'HloModule m\n\nmodule {\n  ROOT p = f32[8] parameter(0)\n}\n' >"$TMP/named_module.hlo"
run named_module 0 check "$TMP/named_module.hlo" # a computation may be called module

# usage lines list every option of the command
for cmd in analyze report partition; do
    usage=$(head -n 1 "$TMP/help_$cmd.out")
    for opt in $(grep -oE '^  (-[a-z], )?--[a-z-]+' "$TMP/help_$cmd.out" | grep -oE -- '--[a-z-]+'); do
        case $opt in --help | --time-phases) continue ;; esac
        case $usage in *"$opt"*) ;; *) fail "help_$cmd: usage line lacks $opt: $usage" ;; esac
    done
done
# partition --help lists only the --set options the partitioner reads
has help_partition "$TMP/help_partition.out" "  threshold_for_windowed_einsum_mib=256"
has help_partition "$TMP/help_partition.out" "  remove_dead_code=true"
for gone in speculative_windowed_einsum use_v3_sharding report_instruction_count allow_module_signature_change "num_partitions=" "# unused"; do
    grep -qF -- "$gone" <(sed -n '/partitioner options for --set/,$p' "$TMP/help_partition.out" | grep '^  ') &&
        fail "help_partition: lists $gone"
done
run set_unused_accepted 0 partition "$SAMPLE" --set speculative_windowed_einsum=true -o "$TMP/su.hlo"

# --top K: the K costliest collectives, the costliest first
run analyze_we 0 analyze samples/windowed_einsum.hlo --out "$TMP/we" --top 1
has analyze_we "$TMP/we/report.txt" "collectives (the 1 costliest of 2: bytes sent over the run)"
has analyze_we "$TMP/we/report.txt" "  %all-reduce  all-reduce  -        1x4  128 KiB      1          192 KiB     768 KiB     45.7 us  %dot.down (dot)"
has analyze_we "$TMP/we/report.txt" "  ... 1 more in summary.json (--top K shows K)"
run report_top 0 report "$TMP/we/trace.db"
has report_top "$TMP/report_top.out" "  %all-gather  all-gather  -        1x4  128 KiB      1         96.0 KiB     384 KiB     22.9 us  %dot.up (reshard)"
run report_top_bad 2 report "$TMP/we/trace.db" --top 0
has report_top_bad "$TMP/report_top_bad.err" "--top expects a positive integer, got '0'"

# --time-phases: a peak is never below the RSS beside it
run phases 0 partition "$SAMPLE" --time-phases -o "$TMP/ph.hlo"
awk '/^time-phases:/ { for (i = 1; i < NF; i++) { if ($i == "RSS") r = $(i + 1); if ($i == "peak") p = $(i + 1) }
     n++; if (p + 0 < r + 0) { print "peak " p " below RSS " r ": " $0; bad = 1 } }
     END { if (n < 3) { print "only " n " phase lines"; bad = 1 } exit bad }' "$TMP/phases.err" >"$TMP/phases.chk" ||
    fail "phases: $(cat "$TMP/phases.chk")"
# ---- propagation first: partition and analyze fill in missing shardings as XLA's pipeline does
printf 'HloModule chain, num_partitions=4\n\nENTRY main {\n  x = f32[8,16] parameter(0), sharding={devices=[4,1]<=[4]}\n  c = f32[8,16] convert(x)\n  m = f32[8,16] multiply(c, c)\n  ROOT n = f32[8,16] negate(m), sharding={devices=[4,1]<=[4]}\n}\n' >"$TMP/chain.hlo"
run prop_first 0 partition "$TMP/chain.hlo" --trace "$TMP/chain.db" -o "$TMP/chain.out.hlo"
run chain_timed 0 --time-phases partition "$TMP/chain.hlo" -o "$TMP/chain_timed.hlo"
has chain_timed "$TMP/chain_timed.err" "time-phases: propagate "
same prop_first "$TMP/prop_first.err" "shardlens partition: 2 of 4 instructions had no sharding: propagated shardings to 2 of 4 instructions (XLA's sharding propagation; --no-propagate partitions them as replicated)"
grep -qE 'all-gather|all-reduce|all-to-all|collective-permute' "$TMP/chain.out.hlo" &&
    fail "prop_first: the propagated chain needs no collective"
has prop_first "$TMP/chain.out.hlo" "%m.1 = f32[2,16] multiply(%c.1, %c.1)"
run prop_first_explain 0 explain "$TMP/chain.db" m
same prop_first_explain <(head -n 1 "$TMP/prop_first_explain.out") "origin: %m got {devices=[4,1]<=[4]} forward from %x (parameter 0, annotated) through %c at level 0 (rule elementwise)"
# viz --focus: the focused node carries its origin (label: short; tooltip: explain's chain)
run prop_focus 0 viz "$TMP/chain.db" --before "$TMP/chain_focus.dot" --focus m
has prop_focus "$TMP/chain_focus.dot" '"b2" [label="%m\nmultiply f32[8,16]\ndim0/4\norigin: forward from %x (parameter 0) via 1 op"'
has prop_focus "$TMP/chain_focus.dot" 'tooltip="origin: %m got {devices=[4,1]<=[4]} forward from %x (parameter 0, annotated) through %c at level 0 (rule elementwise)"'
[ "$(grep -c 'origin: ' "$TMP/chain_focus.dot")" = 1 ] || fail "prop_focus: origin on more than the focused node"
# --no-propagate: the unannotated ops are replicated, so the value is gathered whole
run prop_off 0 partition "$TMP/chain.hlo" --no-propagate -o "$TMP/chain.noprop.hlo"
has prop_off "$TMP/chain.noprop.hlo" "all-gather("
[ -s "$TMP/prop_off.err" ] && fail "prop_off: --no-propagate said something on stderr: $(cat "$TMP/prop_off.err")"
# the propagation options by XLA's names go through partition's --set; a bad value is an error
run prop_set 0 partition "$TMP/chain.hlo" --set allow_spmd_sharding_propagation_to_output=true -o "$TMP/chain.set.hlo"
run prop_set_bad 2 partition "$TMP/chain.hlo" --set is_spmd=maybe
has prop_set_bad "$TMP/prop_set_bad.err" "--set is_spmd=maybe: bad value 'maybe' for option is_spmd"

# ---- loops: trip counts in the reports and the gate (tests/data/moe_scan.hlo) ---------------------
MOE=tests/data/moe_scan.hlo
run moe_base 0 analyze "$MOE" --out "$TMP/moe0"
has moe_base "$TMP/moe_base.out" "0 collectives, 0 B sent"
# one sharding in the scan body: the sliced expert weight replicated, an all-gather per layer
sed 's/  wi_r = bf16\[8,2048,4096\] reshape(wi_l), sharding={devices=\[4,1,1\]0,1,2,3}/  wi_r = bf16[8,2048,4096] reshape(wi_l), sharding={replicated}/' "$MOE" >"$TMP/moe_edit.hlo"
cmp -s "$MOE" "$TMP/moe_edit.hlo" && fail "moe: the edit did not apply"
run moe_edit 0 analyze "$TMP/moe_edit.hlo" --out "$TMP/moe1"
has moe_edit "$TMP/moe1/summary.json" '"method":	"pattern"'
has moe_edit "$TMP/moe1/summary.json" '"reason":	"i = 0; i < 6; i += 1 (tuple element 0)"'
run moe_gate 1 diff "$TMP/moe0/summary.json" "$TMP/moe1/summary.json" --max-increase 5
# 128 MiB gathered over 4: 3/4 of it per device, 4 devices: 384 MiB per execution, 6 layers
has moe_gate "$TMP/moe_gate.out" "added    %wi_r all-gather: 0 -> 1, 0 B -> 2.25 GiB  +2.25 GiB (new); 384 MiB per execution x 6 trips"
has moe_gate "$TMP/moe_gate.out" "bytes sent OVER, busiest device OVER: FAIL"
run moe_gate_db 1 diff "$TMP/moe0/trace.db" "$TMP/moe1/trace.db" --max-increase 5
# --trip-count wins over the pattern; the trace and the reports say so
run moe_user 0 analyze "$TMP/moe_edit.hlo" --out "$TMP/moe2" --trip-count %w=10
has moe_user "$TMP/moe2/summary.json" '"method":	"user"'
has moe_user "$TMP/moe2/summary.json" '"reason":	"--trip-count w=10"'
has moe_user "$TMP/moe_user.out" "1 collective, 3.75 GiB sent"
run moe_user_part 0 partition "$TMP/moe_edit.hlo" --trip-count w=2 --trace "$TMP/moe_runs.db" -o "$TMP/moe_p.hlo"
run moe_user_part2 0 partition "$TMP/moe_edit.hlo" --trace "$TMP/moe_runs.db" -o "$TMP/moe_p.hlo"
# --old-run / --new-run: two runs of one trace (2 then 6 iterations): +200%
run moe_runs 1 diff "$TMP/moe_runs.db" "$TMP/moe_runs.db" --old-run 1 --new-run 2 --max-increase 5
has moe_runs "$TMP/moe_runs.out" "bytes sent, summed over devices  768 MiB -> 2.25 GiB  +1.50 GiB (+200.00%)"
run moe_runs_back 0 diff "$TMP/moe_runs.db" "$TMP/moe_runs.db" --old-run 2 --new-run 1 --max-increase 5
run moe_run_missing 2 diff "$TMP/moe_runs.db" "$TMP/moe_runs.db" --old-run 9
run moe_run_summary 2 diff "$TMP/moe0/summary.json" "$TMP/moe1/summary.json" --new-run 1
has moe_run_summary "$TMP/moe_run_summary.err" "--new-run: $TMP/moe1/summary.json is not a trace database"
run moe_run_bad 2 diff "$TMP/moe_runs.db" "$TMP/moe_runs.db" --old-run x
# different modules: a warning
run moe_other 1 diff "$TMP/an/summary.json" "$TMP/moe1/summary.json" --max-increase 5
has moe_other "$TMP/moe_other.err" "shardlens diff: warning: OLD and NEW are different modules: jit_mlp_megatron (input"
has moe_other "$TMP/moe_other.out" "warning: OLD and NEW are different modules"
# --trip-count names a while of the input, as NAME=N
run trip_unknown_name 2 partition "$MOE" --trip-count nope=3
has trip_unknown_name "$TMP/trip_unknown_name.err" "shardlens partition: error: --trip-count nope=3: no instruction %nope in the input"
run trip_not_while 2 analyze "$MOE" --out "$TMP/moe_x" --trip-count x=3
has trip_not_while "$TMP/trip_not_while.err" "--trip-count x=3: %x is a parameter, not a while"
[ -e "$TMP/moe_x" ] && fail "analyze --trip-count error: created the output directory"
run trip_bad_count 2 partition "$MOE" --trip-count w=-1
has trip_bad_count "$TMP/trip_bad_count.err" "--trip-count expects NAME=N with N >= 0, got 'w=-1'"
run trip_no_eq 2 partition "$MOE" --trip-count w
run trip_twice 2 partition "$MOE" --trip-count w=1 --trip-count %w=2
has trip_twice "$TMP/trip_twice.err" "--trip-count %w is given twice"
run trip_help 0 partition --help
has trip_help "$TMP/trip_help.out" "--trip-count NAME=N gives while instruction NAME of the input N iterations"
# a loop whose bound is a parameter: unknown, and report.txt says which and why
sed -e 's/  n = s32\[\] constant(6), sharding={replicated}/  n = s32[] get-tuple-element(p), index=4, sharding={replicated}/' \
    -e 's/(s32\[\], bf16\[8,256,2048\], bf16\[6,8,2048,4096\], bf16\[6,8,4096,2048\])/(s32[], bf16[8,256,2048], bf16[6,8,2048,4096], bf16[6,8,4096,2048], s32[])/g' \
    -e 's/{devices=\[1,4,1,1\]0,1,2,3}, {devices=\[1,4,1,1\]0,1,2,3}}/{devices=[1,4,1,1]0,1,2,3}, {devices=[1,4,1,1]0,1,2,3}, {replicated}}/g' \
    -e 's/tuple(i1, y, wi, wo)/tuple(i1, y, wi, wo, nb)/' \
    -e 's/  one = s32\[\] constant(1), sharding={replicated}/  one = s32[] constant(1), sharding={replicated}\n  nb = s32[] get-tuple-element(p), index=4, sharding={replicated}/' \
    -e 's/tuple(z, x, wi, wo)/tuple(z, x, wi, wo, layers)/' \
    -e '/^ENTRY/,/^}/ s/  z = s32\[\] constant(0), sharding={replicated}$/  z = s32[] constant(0), sharding={replicated}\n  layers = s32[] parameter(3), sharding={replicated}/' \
    "$TMP/moe_edit.hlo" >"$TMP/moe_param.hlo"
run moe_param 0 analyze "$TMP/moe_param.hlo" --out "$TMP/moe3"
has moe_param "$TMP/moe3/report.txt" "loops with unknown trip counts (1; their collectives are counted apart"
has moe_param "$TMP/moe3/report.txt" "the bound (tuple element 4) is a parameter: %layers of main"
has moe_param "$TMP/moe3/summary.json" '"method":	"unknown"'
run moe_param_gate 1 diff "$TMP/moe0/summary.json" "$TMP/moe3/summary.json" --max-increase 1000
has moe_param_gate "$TMP/moe_param_gate.out" "unknown trip count: 0 B -> 384 MiB per execution (grew: counts against the budget)"
run moe_param_user 0 analyze "$TMP/moe_param.hlo" --out "$TMP/moe4" --trip-count w=6
# (memory, the last key, differs: moe_param has one parameter more)
cmp -s <(sed '/^\t"memory":/,$d' "$TMP/moe1/summary.json" | grep -v '"reason"\|"method"\|input_hash') <(sed '/^\t"memory":/,$d' "$TMP/moe4/summary.json" | grep -v '"reason"\|"method"\|input_hash') || fail "moe: --trip-count w=6 on the unknown loop differs from the counted one"

# a collective in a conditional's branch: unknown too (a branch runs at most as often as its
# conditional), and the report says where it is
printf 'HloModule cond_ar, num_partitions=2\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT a = f32[] add(x, y)\n}\n\nt_branch {\n  p = f32[8] parameter(0), sharding={replicated}\n  ROOT ar = f32[8] all-reduce(p), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add, sharding={replicated}\n}\n\nf_branch {\n  p = f32[8] parameter(0), sharding={replicated}\n  ROOT n = f32[8] negate(p), sharding={replicated}\n}\n\nENTRY main {\n  c = pred[] parameter(0), sharding={replicated}\n  x = f32[8] parameter(1), sharding={replicated}\n  ROOT r = f32[8] conditional(c, x, x), true_computation=t_branch, false_computation=f_branch, sharding={replicated}\n}\n' >"$TMP/cond.hlo"
run cond_branch 0 analyze "$TMP/cond.hlo" --out "$TMP/cond"
has cond_branch "$TMP/cond/report.txt" "1 collective of unknown trip count in conditional branches: a branch runs at most as often as its conditional"

# ---- memory estimate and traffic rollups (issue 19)
run mem_analyze 0 analyze "$SAMPLE" --out "$TMP/mem" --device-memory-gib 0.000002
has mem_analyze "$TMP/mem/report.txt" "peak 6.50 KiB (temporaries 2.00 KiB) at %broadcast.6 (jit(mlp)/jit(main)/max)"
has mem_analyze "$TMP/mem/report.txt" "after partitioning, devices 0-3:"
has mem_analyze "$TMP/mem/report.txt" "peak 2.50 KiB (temporaries 512 B) at %all-reduce"
has mem_analyze "$TMP/mem/report.txt" "partitioning changes the peak by -61.6%"
has mem_analyze "$TMP/mem/summary.json" '"peak_bytes":	6660,'
has mem_analyze "$TMP/mem/summary.json" '"devices":	[0, 1, 2, 3],'
has mem_analyze "$TMP/mem_analyze.err" "warning: device-memory: devices 0-3 peak at 2.50 KiB, over --device-memory-gib 2e-06, at %all-reduce"
run mem_report_ok 0 report "$TMP/mem/trace.db" --device-memory-gib 1
if grep -q "device-memory" "$TMP/mem_report_ok.out"; then fail "mem_report_ok: warned under the limit"; fi
run mem_bad_gib 2 report "$TMP/mem/trace.db" --device-memory-gib 0
run mem_bad_depth 2 report "$TMP/mem/trace.db" --by-op-name-depth 0
# a training step: w and m donated and updated, g read-only; 2 devices split w, m, g in halves
printf '%s\n' 'HloModule step, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }, num_partitions=2' '' \
    'ENTRY main {' \
    '  w = f32[512] parameter(0), sharding={devices=[2]0,1}' \
    '  m = f32[512] parameter(1), sharding={devices=[2]0,1}' \
    '  g = f32[512] parameter(2), sharding={devices=[2]0,1}' \
    '  m2 = f32[512] add(m, g), sharding={devices=[2]0,1}' \
    '  w2 = f32[512] subtract(w, m2), sharding={devices=[2]0,1}' \
    '  ROOT r = (f32[512], f32[512]) tuple(w2, m2), sharding={{devices=[2]0,1}, {devices=[2]0,1}}' \
    '}' >"$TMP/step.hlo"
run mem_step 0 analyze "$TMP/step.hlo" --out "$TMP/step"
python3 - "$TMP/step/summary.json" >"$TMP/mem_step.json" <<'PY' || fail "mem_step: summary.json memory unreadable"
import json, sys
m = json.load(open(sys.argv[1]))["memory"]
for g in [m["unpartitioned"]] + m["devices"]:
    print(g.get("devices"), g["parameter_bytes"], g["output_bytes"], g["alias_bytes"], g["peak_bytes"], g["peak_instr"])
PY
same mem_step "$TMP/mem_step.json" "None 6144 4112 4096 6160 r
[0, 1] 3072 2064 2048 3088 r.1"
# diff: peak memory compared and gated
run mem_diff_ok 0 diff "$TMP/mem/summary.json" "$TMP/mem/summary.json" --max-memory-increase 0
has mem_diff_ok "$TMP/mem_diff_ok.out" "budget --max-memory-increase 0%: peak memory ok: pass"
run mem_diff_over 1 diff "$TMP/mem/summary.json" "$TMP/step/summary.json" --max-memory-increase 10
has mem_diff_over "$TMP/mem_diff_over.out" "peak bytes                       2.50 KiB -> 3.02 KiB  +20.6%"
has mem_diff_over "$TMP/mem_diff_over.out" "budget --max-memory-increase 10%: peak memory OVER: FAIL"
run mem_diff_bad 2 diff "$TMP/mem/summary.json" "$TMP/step/summary.json" --max-memory-increase x
# rollups: bytes over each mesh axis, per layer, per loop
python3 "$SRC/bench/gen_transformer.py" --layers 2 --data 2 --model 4 -o "$TMP/t2.hlo"
run roll_part 0 partition "$TMP/t2.hlo" --trace "$TMP/t2.db"
run roll_axes 0 report "$TMP/t2.db" --mesh data=2,model=4 --json "$TMP/t2.json"
has roll_axes "$TMP/roll_axes.out" "traffic crossing each mesh axis, alone or with others"
has roll_axes "$TMP/roll_axes.out" "  data   1            32 B         10.0 us"
run roll_layers 0 report "$TMP/t2.db" --by-op-name-depth 2
has roll_layers "$TMP/roll_layers.out" "  jit(train_step)/layer_0  2            12.0 MiB     186 us"
has roll_axes "$TMP/t2.json" '"axis":	"data",'
sqlite3 "$TMP/t2.db" "SELECT computation, collectives FROM computation_traffic" >"$TMP/roll_sql.out" 2>&1 || true
if command -v sqlite3 >/dev/null; then same roll_sql "$TMP/roll_sql.out" "main|9"; fi

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
printf 'HloModule m, num_partitions=2\n\nENTRY e {\n  p = f32[4,4] parameter(0), sharding={replicated}\n  ROOT c = f32[4,4] cholesky(p), sharding={replicated}\n}\n' >"$TMP/vchol.hlo"
run verify_unsupported 3 verify "$TMP/vchol.hlo" --partitioned "$TMP/vchol.hlo"
has verify_unsupported "$TMP/verify_unsupported.err" "cholesky"

# ---- propagate: XLA's sharding propagation (exit 0; bad --set 2); --trace records origins
sed -E '/dot.4 |broadcast.6|maximum.7/ s/, sharding=\{devices=\[1,4\]<=\[4\]\}//' "$SAMPLE" >"$TMP/bare.hlo"
run propagate 0 propagate "$TMP/bare.hlo" --set is_spmd=true --trace "$TMP/prop.db"
has propagate "$TMP/propagate.out" '%maximum.7 = f32[8,32]{1,0} maximum(%dot.4, %broadcast.6), sharding={devices=[1,4]<=[4]}'
has propagate "$TMP/propagate.err" 'propagated shardings to 4 of 8 instructions'
run propagate_explain 0 explain "$TMP/prop.db" maximum.7
has propagate_explain "$TMP/propagate_explain.out" 'origin: %maximum.7 got {devices=[1,4]<=[4]} forward from %Arg_1.2 (parameter 1, annotated) through %dot.4 at level 1 (rule elementwise)'
run propagate_bad_set 2 propagate "$TMP/bare.hlo" --set is_spmd=perhaps
has propagate_bad_set "$TMP/propagate_bad_set.err" "bad value 'perhaps' for option is_spmd"
run propagate_unknown_set 2 propagate "$TMP/bare.hlo" --set no_such=true
# propagate checks its input like every command: a reverse without an operand is bad input
printf 'HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0), sharding={devices=[2]0,1}\n  n = f32[4] negate(p)\n  ROOT r = f32[4] reverse(), dimensions={0}\n}\n' >"$TMP/bad_reverse.hlo"
run propagate_bad_input 2 propagate "$TMP/bad_reverse.hlo" -o "$TMP/bad_reverse.out"
has propagate_bad_input "$TMP/propagate_bad_input.err" "$TMP/bad_reverse.hlo:6:3: error: instruction %r (reverse) in computation %e: expects 1 operand, got 0"
[ ! -e "$TMP/bad_reverse.out" ] || fail "propagate_bad_input: wrote an output"
# ---- output and trace I/O failures: named, exit 2, nothing new left behind ------------------
# A full standard output is an error with its reason, for every command that prints.
i=0
for cmd in "check $SAMPLE" "print $SAMPLE" "report $TMP/t.db" "--help" "check --help" "--version"; do
    rc=0
    i=$((i + 1))
    # shellcheck disable=SC2086 # word splitting wanted
    "$BIN" $cmd >/dev/full 2>"$TMP/full.err" || rc=$?
    [ "$rc" = 2 ] || fail "stdout full ($cmd): exit $rc, want 2"
    same "stdout_full_$i" "$TMP/full.err" "<stdout>: error: cannot write: No space left on device"
done
# A trace that cannot be written (a file size limit; SIGXFSZ ignored so the write fails):
# the reason, exit 2, and no new file or journal.
for limit in 1 40; do
    rc=0
    (trap '' XFSZ; ulimit -f "$limit"; exec "$BIN" partition "$SAMPLE" --no-propagate --trace "$TMP/full.db" \
        -o "$TMP/full.hlo") 2>"$TMP/fsize.err" || rc=$?
    [ "$rc" = 2 ] || fail "trace over ulimit -f $limit: exit $rc, want 2"
    same "trace_fsize_$limit" "$TMP/fsize.err" "$TMP/full.db: error: creating the trace schema: File too large"
    ls "$TMP"/full.db* "$TMP"/full.hlo* >/dev/null 2>&1 && fail "trace over ulimit -f $limit: files left: $(ls "$TMP"/full.*)"
done
# A first run into a new trace that fails while partitioning (after the trace was created)
# leaves no file either.
printf 'HloModule m, num_partitions=2\n\nENTRY e {\n  p = f32[4,4] parameter(0), sharding={devices=[2,1]0,1}\n  ROOT r = f32[4,4] negate(p), sharding={manual}\n}\n' >"$TMP/manual.hlo"
run trace_new_fail 3 partition "$TMP/manual.hlo" --trace "$TMP/new.db"
has trace_new_fail "$TMP/trace_new_fail.err" "$TMP/manual.hlo:5:3: error: %r (negate): a sharded {devices=[2,1]0,1} value used as {manual}"
ls "$TMP"/new.db* >/dev/null 2>&1 && fail "trace_new_fail: $(ls "$TMP"/new.db*) left behind"
# A directory, a dropped table: named, never SQL.
run trace_dir 2 report "$TMP"
same trace_dir "$TMP/trace_dir.err" "$TMP: error: is a directory, not a trace database"
run trace_dir_append 2 partition "$SAMPLE" --no-propagate --trace "$TMP" -o "$TMP/dir.hlo"
same trace_dir_append "$TMP/trace_dir_append.err" "$TMP: error: is a directory, not a trace database"
cp "$TMP/t.db" "$TMP/dropped.db"
python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("DROP TABLE run_option"); c.commit()' "$TMP/dropped.db"
run trace_dropped 2 report "$TMP/dropped.db"
same trace_dropped "$TMP/trace_dropped.err" "$TMP/dropped.db: error: table run_option is missing: not a shardlens trace, or from an older version"
# Temporaries that a killed run left beside an output are swept when it is written again;
# a live process's and names we do not make stay.
sh -c 'exit 0' & dead=$!; wait "$dead" || true
for f in "out.hlo.tmp.$dead" "out.hlo.tmp.$$" "out.hlo.tmp.$dead.keep"; do
    echo old >"$TMP/$f"
    touch -d '2 hours ago' "$TMP/$f"
done
run sweep 0 partition "$SAMPLE" -o "$TMP/out.hlo"
[ -e "$TMP/out.hlo.tmp.$dead" ] && fail "sweep: stale out.hlo.tmp.$dead left"
[ -e "$TMP/out.hlo.tmp.$$" ] || fail "sweep: a live process's temporary was removed"
[ -e "$TMP/out.hlo.tmp.$dead.keep" ] || fail "sweep: a file we do not name was removed"

# The partition pipeline before propagation, as XLA's: the header's allow_* options (a bad
# list is bad input) and call inlining (propagate --inline-calls; plain propagate keeps calls).
printf 'HloModule m, allow_spmd_sharding_propagation_to_output={yes}\nENTRY e {\n  p = f32[8] parameter(0), sharding={devices=[2]0,1}\n  ROOT n = f32[8] negate(p)\n}\n' >"$TMP/badallow.hlo"
run bad_allow 2 partition "$TMP/badallow.hlo" -n 2 -o "$TMP/badallow.out"
has bad_allow "$TMP/bad_allow.err" "$TMP/badallow.hlo:1:1: error: module header: allow_spmd_sharding_propagation_to_output needs at most 4096 values true or false"
[ -e "$TMP/badallow.out" ] && fail "bad_allow: output written"
printf 'HloModule m, allow_spmd_sharding_propagation_to_output={true}\nf {\n  a = f32[8] parameter(0)\n  ROOT x = f32[8] exponential(a)\n}\nENTRY e {\n  p = f32[8] parameter(0), sharding={devices=[2]0,1}\n  ROOT c = f32[8] call(p), to_apply=f\n}\n' >"$TMP/call.hlo"
run inline_calls 0 propagate "$TMP/call.hlo" --inline-calls --set is_spmd=true --set allow_spmd_sharding_propagation_to_output=true
has inline_calls "$TMP/inline_calls.out" "ROOT %x = f32[8] exponential(%p), sharding={devices=[2]0,1}"
grep -q "call(" "$TMP/inline_calls.out" && fail "inline_calls: a call is left"
run keep_calls 0 propagate "$TMP/call.hlo"
has keep_calls "$TMP/keep_calls.out" "call(%p)"
run partition_inlines 0 partition "$TMP/call.hlo" -n 2
has partition_inlines "$TMP/partition_inlines.out" "exponential("
grep -q "call(" "$TMP/partition_inlines.out" && fail "partition_inlines: a call is left"

# ---- explain through the run's index: the text of every source of a run with several ---------
# (tests/golden/explain_multi.txt was written by the explain that scanned the whole run)
run explain_multi_trace 0 partition tests/data/explain_multi.hlo --trace "$TMP/multi.db" -o "$TMP/multi.hlo"
for n in d t s x w b %all-reduce all-gather s.1; do
    echo "== $n"
    rc=0
    "$BIN" explain "$TMP/multi.db" "$n" 2>&1 || rc=$?
    echo "rc $rc"
done >"$TMP/explain_multi.txt"
cmp -s "$TMP/explain_multi.txt" tests/golden/explain_multi.txt ||
    fail "explain_multi: output differs from tests/golden/explain_multi.txt: $(diff tests/golden/explain_multi.txt "$TMP/explain_multi.txt" | head -20)"

# ---- viz: a whole graph past --max-nodes is the group tree's first view ----------------------
{
    printf 'HloModule viz_wide, num_partitions=2\nENTRY %%main (x: f32[8]) -> f32[8] {\n'
    printf '  %%x = f32[8]{0} parameter(0), sharding={devices=[2]0,1}\n'
    prev=x
    for k in $(seq 0 29); do
        root=""
        [ "$k" = 29 ] && root="ROOT "
        printf '  %%n%s = f32[8]{0} negate(%%%s), sharding={devices=[2]0,1}, metadata={op_name="jit(f)/layer_%s/n"}\n' "$k" "$prev" "$k"
        printf '  %%a%s = f32[8]{0} abs(%%%s), sharding={devices=[2]0,1}, metadata={op_name="jit(f)/layer_%s/a"}\n' "$k" "$prev" "$k"
        printf '  %s%%s%s = f32[8]{0} add(%%n%s, %%a%s), sharding={devices=[2]0,1}, metadata={op_name="jit(f)/layer_%s/s"}\n' "$root" "$k" "$k" "$k" "$k"
        prev=s$k
    done
    printf '}\n'
} >"$TMP/wide.hlo"
run viz_wide_trace 0 partition "$TMP/wide.hlo" --trace "$TMP/wide.db" -o "$TMP/wide.out.hlo"
run viz_wide 0 viz "$TMP/wide.db" --after "$TMP/wide.dot" --max-nodes 50
has viz_wide "$TMP/viz_wide.err" "shardlens viz: note: after: 91 instructions exceed --max-nodes 50: drew one box per group of op_name prefixes (30 boxes and 1 op, the first view of the HTML page); use --focus NAME to see instructions"
[ "$(grep -c '^  "h[0-9]*" \[label="jit(f)/layer_[0-9]*\\n3 instructions, 3 boxes inside"' "$TMP/wide.dot")" = 30 ] ||
    fail "viz_wide: want 30 layer boxes: $(grep -c '"h' "$TMP/wide.dot")"
has viz_wide "$TMP/wide.dot" '[label="jit(f)/layer_17\n3 instructions, 3 boxes inside"'
[ "$(grep -c -- '-> "h[0-9]*" \[label="2 edges, 32 B"\]' "$TMP/wide.dot")" = 30 ] ||
    fail "viz_wide: want 30 merged edges of 2 x 16 B: $(grep -- '->' "$TMP/wide.dot" | head -3)"
run viz_wide_svg 0 viz "$TMP/wide.db" --before "$TMP/wide.svg" --max-nodes 50
has viz_wide_svg "$TMP/wide.svg" "jit(f)/layer_29"
run viz_wide_whole 0 viz "$TMP/wide.db" --before "$TMP/wide_whole.dot"
[ -s "$TMP/viz_wide_whole.err" ] && fail "viz_wide_whole: a note for a graph within the limits: $(cat "$TMP/viz_wide_whole.err")"
[ "$(grep -c '^  "b[0-9]*" \[' "$TMP/wide_whole.dot")" = 91 ] || fail "viz_wide_whole: want 91 instruction nodes"

if [ "$failures" -ne 0 ]; then
    echo "$failures CLI check(s) failed" >&2
    exit 1
fi
echo "all CLI checks passed"
