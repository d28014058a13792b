#!/bin/sh
# Test hooks stay off the public command line: `dpc train` does not know --test-slow-worker, and
# dpc-testing (the same command built with DPC_CLI_TESTING, never installed) runs it through
# include/dpc/testing.h, as docs/strategies.md's slow-worker benchmark does.
#   testing_hooks_test.sh DPC DPC_TESTING SOURCE_DIR WORK_DIR
dpc=$1
dpct=$2
src=$3
work=$4
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$src/tests/cli/lib.sh"
mlp="$src/examples/fashion_mlp.graph"

expect 2 "dpc train refuses the test hook" -- "$dpc" train "$mlp" --test-slow-worker 1 --steps 1
contains "$work/err" "unknown option '--test-slow-worker'" "the hook is an unknown option"
expect 0 "dpc-testing: a slow worker, staleness 4" -- "$dpct" train "$mlp" --devices cpu:2 \
  --sync async --staleness 4 --test-slow-worker 1 --steps 6 --backend ref --quiet \
  --log "$work/slow.jsonl"
n=$(grep -c '^{"step"' "$work/slow.jsonl")
if [ "$n" -eq 6 ]; then echo "ok   six updates logged"; else
  echo "FAIL $n updates logged, not 6"
  fails=$((fails + 1))
fi
expect 0 "dpc-testing train --help" -- "$dpct" train --help
lacks "$work/out" "test-slow-worker" "dpc-testing's --help does not offer the hook either"

echo "$fails checks failed"
[ "$fails" -eq 0 ]
