#!/bin/sh
# The dpc command as a user meets it: every subcommand's --help, exit codes (0 ok, 1 bad input,
# 2 bad command line), what check/print/run print, `dpc run` on the MLP against NumPy, and
# compiled artifacts (dpc compile, then dpc run and dpc train on the .dpx).
#   cli_test.sh DPC NPYCMP SOURCE_DIR WORK_DIR
dpc=$1
npycmp=$2
src=$3
work=$4
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"


expect 2 "no arguments is a usage error" -- "$dpc"
expect 0 "dpc --help" -- "$dpc" --help
contains "$work/out" "Commands:" "dpc --help lists the commands"
expect 0 "dpc help run" -- "$dpc" help run
contains "$work/out" "Usage: dpc run" "dpc help run shows run's help"
for cmd in check print run ops version; do
  expect 0 "dpc $cmd --help" -- "$dpc" $cmd --help
  contains "$work/out" "Usage: dpc $cmd" "dpc $cmd --help shows usage"
done
expect 2 "unknown command" -- "$dpc" frobnicate
expect 2 "unknown option" -- "$dpc" check --bogus "$src/examples/fashion_mlp.graph"
expect 2 "check without a file" -- "$dpc" check
expect 0 "dpc version" -- "$dpc" version
contains "$work/out" "^dpc [0-9]" "version prints dpc and a number"
expect 0 "dpc ops" -- "$dpc" ops
contains "$work/out" "conv2d" "dpc ops lists conv2d"

for ex in fashion_mlp fashion_cnn inception_block transformer_block wide_mlp; do
  expect 0 "check $ex" -- "$dpc" check --verify-each "$src/examples/$ex.graph"
  contains "$work/out" ": ok: model $ex" "check $ex says ok"
  expect 0 "print $ex" -- "$dpc" print "$src/examples/$ex.graph" --output "$work/$ex.1.graph"
  expect 0 "print printed $ex" -- "$dpc" print "$work/$ex.1.graph" --output "$work/$ex.2.graph"
  if cmp -s "$work/$ex.1.graph" "$work/$ex.2.graph"; then echo "ok   $ex: print -> parse -> print is stable"; else
    echo "FAIL $ex: second print differs"
    diff "$work/$ex.1.graph" "$work/$ex.2.graph" | head
    fails=$((fails + 1))
  fi
  expect 0 "print --dot $ex" -- "$dpc" print --dot "$src/examples/$ex.graph" --output "$work/$ex.dot"
  if command -v dot >/dev/null; then
    expect 0 "dot -Tsvg accepts the $ex dump" -- dot -Tsvg "$work/$ex.dot" -o "$work/$ex.svg"
  fi
done

expect 1 "check a missing file" -- "$dpc" check "$work/nope.graph"
contains "$work/err" "cannot open" "a missing file is named"
expect 1 "unknown pass in --print-after" -- "$dpc" check --print-after=bogus "$src/examples/fashion_mlp.graph"
contains "$work/err" "passes: infer" "the known passes are listed"
expect 0 "--print-after=dce" -- "$dpc" print --print-after=dce "$src/examples/fashion_mlp.graph"
contains "$work/out" "after dce" "the dump is labelled with its pass"

# dpc run against NumPy (tests/cli/gen_mlp_case.py)
expect 0 "run fashion_mlp" -- "$dpc" run "$src/examples/fashion_mlp.graph" --input "x=$src/tests/cli/mlp/x.npy" --output-dir "$work/mlp"
contains "$work/out" "logits: f32\[8, 10\]" "run reports the output's type"
expect 0 "fashion_mlp logits match NumPy" -- "$npycmp" "$work/mlp/logits.npy" "$src/tests/cli/mlp/expect_logits.npy" 1e-5 1e-6
expect 1 "run without the input" -- "$dpc" run "$src/examples/fashion_mlp.graph"
contains "$work/err" "no data given for input 'x' (f32\[N, 784\])" "the missing input is named with its type"
expect 2 "run with a malformed --input" -- "$dpc" run "$src/examples/fashion_mlp.graph" --input x
expect 1 "run with an input of the wrong width" -- "$dpc" run "$src/examples/fashion_cnn.graph" --input "x=$src/tests/fuzz/corpus/npy/f32_2x3.npy"
contains "$work/err" "f32\[N, 784\]" "the shape error names both shapes"
expect 1 "run with a name the model lacks" -- "$dpc" run "$src/examples/fashion_mlp.graph" --input "q=$src/tests/cli/mlp/x.npy"
contains "$work/err" "no input named 'q'" "the unknown name is reported"

# compiled artifacts: dpc compile, then dpc run and dpc train on the .dpx (no LLVM involved)
expect 0 "bench a training step" -- "$dpc" bench "$src/examples/fashion_mlp.graph" --batch 4 --steps 3 --warmup 1 --json
contains "$work/out" '"mode": "training", "batch": 4' "bench reports what it timed"
contains "$work/out" '"samples_per_s": [1-9]' "bench reports samples/s"
expect 0 "bench the forward pass on the reference kernels" -- "$dpc" bench "$src/examples/fashion_cnn.graph" --inference --batch 2 --steps 2 --backend ref
contains "$work/out" "samples/s" "bench prints samples/s"
expect 0 "bench with a profile" -- "$dpc" bench "$src/examples/fashion_mlp.graph" --batch 4 --steps 2 --warmup 1 --profile
contains "$work/out" "profile: [0-9]* kernels" "the profile counts the kernels"
contains "$work/out" "h1: matmul + add + relu" "the profile names a fused kernel by its group"
expect 0 "bench with every kernel to a file" -- "$dpc" bench "$src/examples/fashion_mlp.graph" --batch 4 \
  --steps 2 --warmup 1 --profile-out "$work/profile.tsv"
contains "$work/out" "profile: [0-9]* kernels" "--profile-out implies --profile"
contains "$work/profile.tsv" "^step	measured_ms	predicted_ms	value	type	ops$" "the profile file has its header"
contains "$work/profile.tsv" "^[0-9]*	[0-9.]*	[0-9.]*	h1	f32\[4, 512\]	matmul + add + relu$" \
  "the profile file names a kernel's value, type and ops"
kernels=$(sed -n 's/.*profile: \([0-9]*\) kernels.*/\1/p' "$work/out")
rows=$(($(wc -l < "$work/profile.tsv") - 1))
if [ -n "$kernels" ] && [ "$rows" -eq "$kernels" ]; then echo "ok   the profile file has a row per kernel ($rows)"; else
  echo "FAIL the profile file has $rows rows for $kernels kernels"
  fails=$((fails + 1))
fi
expect 1 "a profile file that cannot be written" -- "$dpc" bench "$src/examples/fashion_mlp.graph" \
  --steps 1 --profile-out "$work/no/such/dir/p.tsv"
contains "$work/err" "cannot write the profile to '.*no/such/dir/p.tsv'" "the refusal names the file"
# a pipeline's device 0 also sends, receives and waits: those are not kernels to describe
expect 0 "bench a pipeline with a profile" -- "$dpc" bench "$src/examples/fashion_mlp.graph" --devices cpu:2 \
  --strategy pipeline --accumulate 2 --batch 8 --steps 2 --warmup 1 --profile
contains "$work/out" "w1.grad.acc1: matmul + add" "the pipeline's profile names its gradient sums"
expect 0 "devices without calibration" -- "$dpc" devices --devices cpu:3 --no-calibrate
contains "$work/out" "^cpu:2 " "devices lists cpu:N's devices"
contains "$work/out" "machine: .* cores" "devices describes the machine"
expect 0 "devices, calibrated" -- "$dpc" devices --devices cpu:2 --json
contains "$work/out" '"gemm_gflops": [1-9]' "devices measures the GEMM"
contains "$work/out" '"copy_gbs": \[\(0\.0*[1-9]\|[1-9]\)' "devices measures copies (a positive rate: its size depends on the load)"
expect 2 "devices with a bad spec" -- "$dpc" devices --devices gpu:1
contains "$work/err" "cpu:N" "a bad device spec says what is accepted"
expect 0 "plan data parallel" -- "$dpc" plan "$src/examples/fashion_mlp.graph" --devices cpu:2 --batch 64 --dot "$work/plan.dot" --json "$work/plan.json"
contains "$work/out" "^cpu:1 " "plan shows each device"
contains "$work/out" "predicted step" "plan predicts the step"
contains "$work/plan.json" '"comm_bytes_per_step": [1-9]' "plan's JSON counts the bytes moved"
contains "$work/plan.dot" "cluster" "plan's dot has a cluster per device"
if command -v dot >/dev/null; then
  expect 0 "dot -Tsvg accepts the plan" -- dot -Tsvg "$work/plan.dot" -o "$work/plan.svg"
fi
expect 0 "plan corrected by a profile, then run and measured" -- "$dpc" plan "$src/examples/fashion_mlp.graph" --devices cpu:2 --strategy model --batch 64 --profile --measure
contains "$work/out" "^profile: [0-9]* kernels timed" "plan --profile reports the kernels it timed"
contains "$work/out" "^measured step" "plan --measure reports the measured step"
expect 0 "plan hybrid" -- "$dpc" plan "$src/examples/fashion_mlp.graph" --devices cpu:4 --strategy hybrid --mp 2 --batch 64
contains "$work/out" "^cpu:3 " "a hybrid plan has every device"
# a pipeline (and a hybrid) measured as dpc train runs it, beside its prediction
expect 0 "plan a pipeline, profiled and measured" -- "$dpc" plan "$src/examples/fashion_mlp.graph" \
  --devices cpu:2 --strategy pipeline:stages=2,microbatches=2 --batch 32 --profile --measure
contains "$work/out" "^measured step [0-9.]* ms (median of 30): the prediction is [-+][0-9]*% of it" \
  "plan --measure runs a pipeline"
expect 2 "plan hybrid without --mp" -- "$dpc" plan "$src/examples/fashion_mlp.graph" --devices cpu:4 --strategy hybrid
expect 0 "plan within a tight memory limit" -- "$dpc" plan "$src/examples/wide_mlp.graph" --devices cpu:2 --strategy model --batch 128 --device-memory 64M
expect 1 "plan with an impossible memory limit" -- "$dpc" plan "$src/examples/wide_mlp.graph" --devices cpu:2 --strategy model --batch 128 --device-memory 50M
# (what it needs follows METIS's cut, which the calibrated speeds of the moment choose between)
contains "$work/err" "needs 1[0-9][0-9]\.[0-9] MiB in all, but 2 devices of 50.0 MiB hold only 100.0 MiB" "an impossible limit says what is needed and available"
expect 1 "train with an impossible memory limit" -- "$dpc" train "$src/examples/wide_mlp.graph" --devices cpu:2 --strategy model --device-memory 50M --steps 1
contains "$work/err" "hold only 100.0 MiB" "train refuses a plan that does not fit"
expect 2 "plan with an unknown strategy" -- "$dpc" plan "$src/examples/fashion_mlp.graph" --strategy zigzag
expect 2 "plan a pipeline without --stages" -- "$dpc" plan "$src/examples/fashion_mlp.graph" --strategy pipeline
expect 0 "plan a pipeline" -- "$dpc" plan "$src/examples/wide_mlp.graph" --strategy pipeline --stages 2 --microbatches 4 --batch 64 --dot "$work/pipe.dot"
contains "$work/out" "^pipeline: 2 stages, 4 micro-batches, 1F1B; predicted bubble" "a pipeline plan predicts its bubble"
contains "$work/out" "stage 0, live activations at most .*: F0 F1 B0 F2 B1 F3 B2 B3" "stage 0 runs 1F1B's order"
if command -v dot >/dev/null; then
  expect 0 "dot -Tsvg accepts the pipeline plan" -- dot -Tsvg "$work/pipe.dot" -o "$work/pipe.svg"
fi
expect 0 "train a pipeline" -- "$dpc" train "$src/examples/fashion_mlp.graph" --strategy pipeline --stages 2 --microbatches 2 --pipeline-schedule gpipe --steps 3 --quiet
expect 0 "train asynchronously" -- "$dpc" train "$src/examples/fashion_mlp.graph" --devices cpu:2 --sync async --staleness 1 --steps 3 --log "$work/async.jsonl" --quiet
contains "$work/async.jsonl" '"staleness": \[{"worker": ' "the async step log records each gradient's staleness"
expect 2 "staleness without --sync async" -- "$dpc" train "$src/examples/fashion_mlp.graph" --staleness 2 --steps 1
expect 2 "async on one device" -- "$dpc" train "$src/examples/fashion_mlp.graph" --sync async --steps 1
contains "$work/err" "several devices" "async on one device says it needs several"
expect 2 "pretended hosts without mpi" -- "$dpc" train "$src/examples/fashion_mlp.graph" --pretend-hosts 2 --steps 1
contains "$work/err" "give --devices mpi" "pretended hosts without mpi: said what to give"
# (checked before MPI starts, so also where dpc has no MPI built in)
expect 2 "an MPI rank's devices mistyped" -- "$dpc" train "$src/examples/fashion_mlp.graph" --devices mpi:gpu --steps 1
contains "$work/err" "devices mpi:gpu: each rank's devices are 'cpu'" "mpi:gpu: names the spec and what it takes"
expect 0 "train with local SGD" -- "$dpc" train "$src/examples/fashion_mlp.graph" --devices cpu:2 --local-sgd 2 --steps 3 --quiet
expect 0 "train with accumulation" -- "$dpc" train "$src/examples/fashion_mlp.graph" --accumulate 2 --steps 3 --quiet
expect 2 "plan with a batch that does not split" -- "$dpc" plan "$src/examples/fashion_mlp.graph" --devices cpu:3 --batch 64
contains "$work/err" "does not split evenly" "plan says why the batch does not fit"
expect 0 "train data parallel with measured shares" -- "$dpc" train "$src/examples/fashion_mlp.graph" --devices cpu:2 --shares auto --steps 3
contains "$work/err" "data-parallel shares of a batch of 64: " "train says the shares it measured"
expect 1 "train with shares that miss the batch" -- "$dpc" train "$src/examples/fashion_mlp.graph" --devices cpu:2 --shares 40,20 --steps 1
contains "$work/err" "adds up to 60 samples, not the batch of 64" "shares that miss the batch say by how much"
expect 1 "train model parallel with shares" -- "$dpc" train "$src/examples/fashion_mlp.graph" --devices cpu:2 --strategy model --shares 40,24 --steps 1
contains "$work/err" "shares sizes synchronous data-parallel replicas" "shares are refused outside data parallel"
expect 0 "bench data parallel with given shares" -- "$dpc" bench "$src/examples/fashion_mlp.graph" --devices cpu:2 --batch 64 --shares 40,24 --steps 2 --warmup 1
contains "$work/out" "shares:  40,24 samples" "bench prints the shares it ran"
printf 'input x: f32[N, 4]\nparam w: f32[4, 2] = ones\ny = matmul(x, w)\noutput y\n' >"$work/noloss.graph"
expect 1 "bench a model with nothing to minimize" -- "$dpc" bench "$work/noloss.graph" --steps 1
contains "$work/err" "nothing to minimize: bench its forward pass with --inference" "bench says to use --inference"
expect 1 "bench with shares on one device" -- "$dpc" bench "$src/examples/fashion_mlp.graph" --batch 64 --shares 40,24 --steps 1
contains "$work/err" "shares sizes data-parallel replicas" "bench refuses shares without data parallel"
expect 0 "train data parallel with a trace" -- "$dpc" train "$src/examples/fashion_mlp.graph" --devices cpu:2 --steps 3 --trace "$work/trace.json" --quiet
contains "$work/trace.json" '"traceEvents"' "the trace is a Chrome trace"
contains "$work/trace.json" '"name": "cpu:1"' "the trace has a track per device"
contains "$work/trace.json" '"cat": "communication"' "the trace shows the all-reduce"
expect 2 "bench with a bad --batch" -- "$dpc" bench "$src/examples/fashion_mlp.graph" --batch 0
for cmd in compile train bench devices plan; do
  expect 0 "dpc $cmd --help" -- "$dpc" $cmd --help
  contains "$work/out" "Usage: dpc $cmd" "dpc $cmd --help shows usage"
done
expect 2 "compile without --output" -- "$dpc" compile "$src/examples/fashion_mlp.graph"
expect 0 "compile fashion_mlp" -- "$dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 -o "$work/mlp8.dpx"
expect 0 "run the artifact" -- "$dpc" run "$work/mlp8.dpx" --input "x=$src/tests/cli/mlp/x.npy" --output-dir "$work/mlpx"
expect 0 "the artifact's logits match NumPy" -- "$npycmp" "$work/mlpx/logits.npy" "$src/tests/cli/mlp/expect_logits.npy" 1e-5 1e-6
# data parallel over cpu:2: every replica's rows come back, the whole batch's logits
expect 0 "compile fashion_mlp over cpu:2" -- "$dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 --devices cpu:2 -o "$work/mlp8x2.dpx"
expect 0 "run the data-parallel artifact" -- "$dpc" run "$work/mlp8x2.dpx" --input "x=$src/tests/cli/mlp/x.npy" --output-dir "$work/mlpx2"
contains "$work/out" "logits: f32\[8, 10\]" "... all 8 rows out, not one replica's 4"
expect 0 "the data-parallel artifact's logits match NumPy" -- "$npycmp" "$work/mlpx2/logits.npy" "$src/tests/cli/mlp/expect_logits.npy" 1e-5 1e-6
expect 1 "train an inference-only artifact" -- "$dpc" train "$work/mlp8.dpx" --steps 1
contains "$work/err" "compile it with dpc compile --train" "the error says how to compile for training"
# 8 x 7500 = the 60000 training images: the same horizon as the graph trained with --batch 8
expect 0 "compile fashion_mlp --train" -- "$dpc" compile "$src/examples/fashion_mlp.graph" --train --batch 8 --total-steps 7500 -o "$work/mlp8t.dpx"
expect 0 "train the artifact" -- "$dpc" train "$work/mlp8t.dpx" --steps 6 --log "$work/dpx.jsonl" --quiet
expect 0 "train the graph alike" -- "$dpc" train "$src/examples/fashion_mlp.graph" --batch 8 --steps 6 --log "$work/graph.jsonl" --quiet
grep -o '"loss": [-0-9.e]*' "$work/dpx.jsonl" >"$work/dpx.loss"
grep -o '"loss": [-0-9.e]*' "$work/graph.jsonl" >"$work/graph.loss"
if [ "$(wc -l <"$work/dpx.loss")" -eq 6 ] && cmp -s "$work/dpx.loss" "$work/graph.loss"; then
  echo "ok   the artifact trains exactly as the graph does"
else
  echo "FAIL the artifact's losses differ from the graph's:"
  paste "$work/dpx.loss" "$work/graph.loss" | head
  fails=$((fails + 1))
fi
expect 1 "train an artifact with another batch" -- "$dpc" train "$work/mlp8t.dpx" --batch 16 --steps 1
contains "$work/err" "compiled for batches of 8, not 16" "the batch mismatch is explained"
expect 1 "train an artifact with another rate" -- "$dpc" train "$work/mlp8t.dpx" --lr 0.1 --steps 1
contains "$work/err" "optimizer compiled in" "the optimizer cannot change"
expect 2 "train an artifact on the reference backend" -- "$dpc" train "$work/mlp8t.dpx" --backend ref

if [ "$fails" -ne 0 ]; then
  echo "$fails checks failed"
  exit 1
fi
echo "all checks passed"
