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

# commands of the contract that later issues implement: exit 3 with a clear message
for cmd in "report t.db" "viz t.db" "explain t.db dot" "diff a.json b.json" "verify $SAMPLE" \
    "analyze $SAMPLE --out $TMP/d"; do
    name="pending_${cmd%% *}"
    # shellcheck disable=SC2086 # split the command words on purpose
    run "$name" 3 $cmd
    has "$name" "$TMP/$name.err" "is not yet available"
done

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
run partition_trace 3 partition "$SAMPLE" --trace "$TMP/t.db"
has partition_trace "$TMP/partition_trace.err" "--trace is not yet supported"
run partition_bad_input 2 partition "$TMP/shape.hlo" -n 4
has partition_bad_input "$TMP/partition_bad_input.err" "$TMP/shape.hlo:5:2: error:"

if [ "$failures" -ne 0 ]; then
    echo "$failures CLI check(s) failed" >&2
    exit 1
fi
echo "all CLI checks passed"
