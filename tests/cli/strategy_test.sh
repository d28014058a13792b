#!/bin/sh
# One strategy, parsed once: --strategy's text form ("pipeline:stages=2,microbatches=2") trains
# the same steps as the same settings given as flags; every command refuses what the strategy
# would ignore with the flag named; the library's words appear where the text is at fault; test
# hooks stay out of --help.
#   strategy_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
mlp="$src/examples/fashion_mlp.graph"

# same_losses A B DESCRIPTION: the step logs' losses, byte for byte
same_losses() {
  grep -o '"loss": [^,}]*' "$1" >"$work/a.loss"
  grep -o '"loss": [^,}]*' "$2" >"$work/b.loss"
  if [ -s "$work/a.loss" ] && cmp -s "$work/a.loss" "$work/b.loss"; then echo "ok   $3"; else
    echo "FAIL $3"
    paste "$work/a.loss" "$work/b.loss" | head -5 | sed 's/^/    /'
    fails=$((fails + 1))
  fi
}

fast="--steps 3 --backend ref --quiet"
# -- the text form and the flags: one parser, the same run --
expect 0 "a pipeline by flags" -- "$dpc" train "$mlp" $fast --strategy pipeline --stages 2 \
  --microbatches 2 --pipeline-schedule gpipe --log "$work/flags.jsonl"
expect 0 "the same pipeline by its text" -- "$dpc" train "$mlp" $fast \
  --strategy pipeline:stages=2,microbatches=2,schedule=gpipe --log "$work/text.jsonl"
same_losses "$work/flags.jsonl" "$work/text.jsonl" "the text form trains the flags' losses"
expect 0 "local SGD by its text" -- "$dpc" train "$mlp" $fast --devices cpu:2 \
  --strategy local_sgd:period=2 --log "$work/lsgd_text.jsonl"
expect 0 "local SGD by its flag" -- "$dpc" train "$mlp" $fast --devices cpu:2 --local-sgd 2 \
  --log "$work/lsgd_flag.jsonl"
same_losses "$work/lsgd_flag.jsonl" "$work/lsgd_text.jsonl" "local_sgd:period=2 is --local-sgd 2"

expect 0 "bench a pipeline by its text" -- "$dpc" bench "$mlp" --devices cpu:2 \
  --strategy pipeline:microbatches=2 --steps 1 --warmup 0 --backend ref
# the text naming its own stages, as dpc plan --strategy auto prints a pipeline
expect 0 "bench a pipeline whose text names its stages" -- "$dpc" bench "$mlp" --devices cpu:4 \
  --strategy pipeline:stages=2,dp=2,microbatches=2,schedule=1f1b --steps 1 --warmup 0 --backend ref
contains "$work/out" "samples/s" "bench times a pipeline of 2 stages on 4 devices"

# -- refused, the flag named --
expect 2 "train with a placement" -- "$dpc" train "$mlp" $fast --devices cpu:2 \
  --strategy model:placement=contiguous
contains "$work/err" "^dpc train: --strategy: dpc train places a model with METIS" \
  "train refuses a placement it would not use"
expect 2 "a setting twice" -- "$dpc" train "$mlp" $fast --strategy pipeline:stages=2 --stages 2
contains "$work/err" "^dpc train: --strategy: the strategy's stages is given twice" \
  "a setting given twice says which"
expect 2 "an unknown setting in the text" -- "$dpc" plan "$mlp" --strategy pipeline:depth=2
contains "$work/err" "^dpc plan: --strategy: the strategy has no setting 'depth'" \
  "the text's unknown key is named"
expect 2 "async model parallel" -- "$dpc" train "$mlp" $fast --devices cpu:2 --strategy model \
  --sync async
contains "$work/err" "^dpc train: --sync async trains data-parallel workers" \
  "asynchronous model parallel is a usage error naming --sync async"
expect 2 "local SGD of a pipeline" -- "$dpc" train "$mlp" $fast --strategy pipeline --stages 2 \
  --local-sgd 2
contains "$work/err" "^dpc train: --local-sgd averages data-parallel replicas: it takes --strategy data, not pipeline" \
  "local SGD of a pipeline names --local-sgd"
expect 2 "bench: hybrid without its width" -- "$dpc" bench "$mlp" --strategy hybrid --devices cpu:4
contains "$work/err" "^dpc bench: --strategy hybrid needs" "bench asks for a hybrid's devices per replica"
expect 2 "bench: asynchronous" -- "$dpc" bench "$mlp" --strategy async --devices cpu:4
contains "$work/err" "^dpc bench: --strategy is data, model, hybrid or pipeline, not 'async'" \
  "bench names the strategies it times"
expect 2 "plan: --accumulate with a pipeline" -- "$dpc" plan "$mlp" --strategy pipeline \
  --stages 2 --accumulate 2
contains "$work/err" "^dpc plan: --strategy pipeline splits a batch by --microbatches M" \
  "plan says a pipeline takes --microbatches"
expect 2 "plan: --dp 257" -- "$dpc" plan "$mlp" --strategy pipeline --stages 2 --dp 257
contains "$work/err" "^dpc plan: --dp expects a number from 1 to 256, got '257'" "plan names --dp"

# -- the library's messages describe values; only the command line names flags. The ones left
# name a command to run or the flags of a resumed run, and are listed here to stay few --
cd "$src" || exit 1
grep -n '"[^"]*--[a-z]' runtime/*.c runtime/*/*.c partitioner/*.c passes/*.c codegen/*/*.c \
  ir/*.c frontend/*.c driver/driver.c driver/train.c driver/train_async.c \
  driver/train_io.c driver/bench.c driver/calibrate.c driver/strategy.c 2>/dev/null |
  grep -v '^[^:]*:[0-9]*: *\(/\*\|\*\|//\)' |
  grep -v -e 'dpc compile --train' -e 'with --cpu for' -e '--epochs' -e '--steps' -e '--init to' \
    -e 'with --batch %llu' -e '--seed' -e '"--inference"' >"$work/flags_in_library"
cd - >/dev/null || exit 1
if [ -s "$work/flags_in_library" ]; then
  echo "FAIL library messages name flags:"
  sed 's/^/    /' "$work/flags_in_library"
  fails=$((fails + 1))
else echo "ok   library messages name no flags (beyond the listed few)"; fi

# -- test hooks are for tests --
expect 0 "train --help" -- "$dpc" train --help
lacks "$work/out" "test-slow-worker" "--help does not offer the test hook"

echo "$fails checks failed"
[ "$fails" -eq 0 ]
