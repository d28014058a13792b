#!/bin/sh
# The command line says what it means: every mistake on it exits 2 with a message naming the
# option (never the model's line), nothing given is silently ignored, one name has one meaning,
# the default batch is one for all commands, and what a run keeps from its checkpoint is said.
#   flags_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
mlp="$src/examples/fashion_mlp.graph"
wide="$src/examples/wide_mlp.graph"

# npy FILE DESCR SHAPE BYTES: a version 1 .npy file; BYTES is printf's octal escapes of the data
npy() {
  header="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
  len=$((${#header} + 1))
  pad=$(((64 - (10 + len) % 64) % 64))
  len=$((len + pad))
  {
    printf '\223NUMPY\001\000'
    printf "\\$(printf %o $((len % 256)))\\$(printf %o $((len / 256)))"
    printf '%s%*s\n' "$header" "$pad" ""
    printf "$4"
  } >"$1"
}

# a model and data small enough to train in a moment on the reference kernels
cat >"$work/tiny.graph" <<'EOF'
model tiny
input x: f32[N, 2]
input y: i32[N]
param w: f32[2, 2] = zeros
logits = matmul(x, w)
loss = softmax_cross_entropy(logits, y)
output logits
minimize loss with sgd(lr=0.1)
EOF
one='\000\000\200\077'
zero='\000\000\000\000'
nan='\000\000\300\177'
npy "$work/x.npy" '<f4' '(4, 2)' "$one$zero$zero$one$one$one$zero$zero"
npy "$work/y.npy" '<i4' '(4,)' '\000\000\000\000\001\000\000\000\001\000\000\000\000\000\000\000'
npy "$work/xnan.npy" '<f4' '(4, 2)' "$one$zero$zero$one$nan$one$zero$zero"
tiny="$work/tiny.graph"
data="$work/x.npy,$work/y.npy"
fast="--backend ref --data $data --batch 2"

# -- exit 2 for every command-line mistake, naming the option --
expect 2 "--devices cpu:0" -- "$dpc" train "$mlp" --devices cpu:0 --steps 1
contains "$work/err" "^dpc train: --devices cpu:0: cpu:N takes a number of devices from 1" "cpu:0 says the range"
expect 2 "--devices cpu:1000" -- "$dpc" train "$mlp" --devices cpu:1000 --steps 1
contains "$work/err" "^dpc train: --devices cpu:1000: cpu:N takes a number of devices from 1" "cpu:1000 says the range"
expect 2 "--devices cuda:0" -- "$dpc" train "$mlp" --devices cuda:0 --steps 1
contains "$work/err" "^dpc train: --devices cuda:0: GPUs run the cuda backend's kernels: add --backend cuda" "cuda:0 says how a GPU runs a model"
expect 2 "--devices cpu,cuda:0 without --backend cuda" -- "$dpc" train "$mlp" --devices cpu,cuda:0 --strategy model --steps 1
contains "$work/err" "^dpc train: --devices cpu,cuda:0: GPUs run the cuda backend's kernels: add --backend cuda" "cpu,cuda:0 says how the split runs"
expect 1 "--devices cpu,cuda:0, data parallel" -- "$dpc" train "$mlp" --devices cpu,cuda:0 --backend cuda --steps 1
contains "$work/err" "^dpc train: error: cpu,cuda:0: the CPU beside GPUs trains the model split between them (the model or pipeline strategy)" "the CPU beside a GPU is not data parallel"
expect 1 "--devices cpu,cuda:0 (bench)" -- "$dpc" bench "$mlp" --devices cpu,cuda:0 --backend cuda --strategy model
contains "$work/err" "^dpc bench: error: cpu,cuda:0: the CPU beside GPUs runs in dpc train" "dpc bench says where the split runs"
expect 2 "--devices cuda:1 --backend cuda" -- "$dpc" train "$mlp" --devices cuda:1 --backend cuda --steps 1
contains "$work/err" "^dpc train: --devices cuda:1: GPUs are given in order from cuda:0" "cuda:1 alone says the order"
if [ -z "$DPC_CUDA_DRIVER" ] && ! ldconfig -p 2>/dev/null | grep -q libcuda.so.1; then
  expect 1 "--devices cuda:0 (plan, no GPU here)" -- "$dpc" plan "$mlp" --devices cuda:0
  contains "$work/err" "^dpc plan: error: --devices: cuda:0: not on this machine (.*--simulate-devices FILE" \
    "dpc plan of GPUs this machine lacks says to describe them"
fi
expect 2 "--devices gpu:0 (plan)" -- "$dpc" plan "$mlp" --devices gpu:0
contains "$work/err" "^dpc plan: --devices gpu:0: plans spread over CPU devices only" "gpu:0 says why not"
expect 2 "--devices cuda:0 (bench)" -- "$dpc" bench "$mlp" --devices cuda:0
expect 2 "--strategy bogus" -- "$dpc" train "$mlp" --strategy bogus --devices cpu:2 --steps 1
contains "$work/err" "^dpc train: --strategy is data, model, hybrid or pipeline, not 'bogus'" "--strategy bogus names the choices"
expect 2 "--lr 0" -- "$dpc" train "$mlp" --lr 0 --steps 5
contains "$work/err" "^dpc train: --lr expects a number above 0, got '0'" "--lr 0 is blamed, not the model's lr"
lacks "$work/err" "fashion_mlp.graph:" "--lr 0 does not point into the model"
expect 0 "--help says --lr is above 0" -- "$dpc" train --help
contains "$work/out" "learning rate, above 0" "train --help gives --lr's range"
expect 2 "--momentum 2" -- "$dpc" train "$mlp" --momentum 2 --steps 5
contains "$work/err" "^dpc train: --momentum expects a number in \[0, 1), got '2'" "--momentum 2 is blamed"
expect 2 "--optimizer bogus" -- "$dpc" train "$mlp" --optimizer bogus --steps 5
contains "$work/err" "^dpc train: --optimizer is sgd, adam or adamw, not 'bogus'" "--optimizer bogus is blamed"
expect 2 "--momentum with --optimizer adam" -- "$dpc" train "$mlp" --optimizer adam --momentum 0.5 --steps 5
contains "$work/err" "^dpc train: --momentum applies to sgd, not to --optimizer adam" "--momentum with adam is blamed"
expect 2 "--weight-decay -1" -- "$dpc" train "$mlp" --weight-decay -1 --steps 5
expect 2 "--lr-schedule bogus" -- "$dpc" train "$mlp" --lr-schedule bogus --steps 5
contains "$work/err" "^dpc train: --lr-schedule is constant, step, cosine or linear, not 'bogus'" "--lr-schedule bogus is blamed"
expect 2 "--schedule bogus" -- "$dpc" train "$mlp" --schedule bogus --steps 5
contains "$work/err" "^dpc train: --schedule bogus: neither a learning-rate schedule" "--schedule bogus is blamed"

# -- nothing silently ignored --
expect 2 "--strategy bogus on one device" -- "$dpc" train "$mlp" --strategy bogus --steps 1
expect 2 "--strategy model on one device" -- "$dpc" train "$mlp" --strategy model --steps 1
contains "$work/err" "^dpc train: --strategy model spreads the model over several devices" "one device cannot be model parallel"
expect 2 "--stages without --strategy pipeline" -- "$dpc" train "$mlp" --stages 2 --steps 1
contains "$work/err" "^dpc train: --stages goes with --strategy pipeline" "--stages alone says what it goes with"
expect 2 "--microbatches without --strategy pipeline" -- "$dpc" train "$mlp" --microbatches 2 --steps 1
expect 2 "--mp without --strategy hybrid" -- "$dpc" train "$mlp" --mp 2 --steps 1
contains "$work/err" "^dpc train: --mp goes with --strategy hybrid" "--mp alone says what it goes with"
expect 2 "--accumulate 128 with a batch of 64" -- "$dpc" train "$mlp" --accumulate 128 --steps 1
contains "$work/err" "^dpc train: --accumulate 128 does not divide the batch of 64 into equal micro-batches" "--accumulate too large is refused"
expect 2 "--accumulate 3 over two replicas of 32" -- "$dpc" train "$mlp" --devices cpu:2 --accumulate 3 --steps 1
contains "$work/err" "each replica's 32 samples of the batch" "the replica's share is named"
expect 2 "--batch 63 over two devices" -- "$dpc" train "$mlp" --devices cpu:2 --batch 63 --steps 1
contains "$work/err" "^dpc train: --batch 63 does not split evenly over 2 data-parallel replicas" "an uneven batch is refused"
expect 2 "--pipeline-schedule without a pipeline" -- "$dpc" train "$mlp" --pipeline-schedule gpipe --steps 1
expect 2 "--local-sgd on one device" -- "$dpc" train "$mlp" --local-sgd 2 --steps 1
expect 2 "plan --stages without a pipeline" -- "$dpc" plan "$mlp" --stages 2
expect 2 "plan --placement without --strategy model" -- "$dpc" plan "$mlp" --placement contiguous
expect 2 "compile --total-steps without --train" -- "$dpc" compile "$tiny" --total-steps 5 -o "$work/t.dpx"

# -- messages that name the right option --
expect 2 "train: --stages 3 on cpu:2" -- "$dpc" train "$mlp" --strategy pipeline --stages 3 --devices cpu:2 --steps 1
contains "$work/err" "^dpc train: --stages 3 does not divide the 2 devices of --devices cpu:2" "train names --stages"
expect 2 "plan: --stages 3 on cpu:2" -- "$dpc" plan "$mlp" --strategy pipeline --stages 3 --devices cpu:2
contains "$work/err" "^dpc plan: --stages 3 does not fit the 2 devices of --devices cpu:2" "plan names --stages, not --mp"
lacks "$work/err" "--mp" "plan does not blame --mp for --stages"
expect 2 "train: --microbatches 0" -- "$dpc" train "$mlp" --strategy pipeline --stages 2 --microbatches 0 --steps 1
contains "$work/err" "^dpc train: --microbatches expects a whole number >= 1, got '0'" "train blames --microbatches"
expect 2 "plan: --microbatches 0" -- "$dpc" plan "$mlp" --strategy pipeline --stages 2 --microbatches 0
contains "$work/err" "^dpc plan: --microbatches expects a number from 1 to 256, got '0'" "plan blames --microbatches"
cat >"$work/cosine.graph" <<'EOF'
model cosine
input x: f32[N, 2]
input y: i32[N]
param w: f32[2, 2] = zeros
loss = softmax_cross_entropy(matmul(x, w), y)
output loss
minimize loss with sgd(lr=0.1, schedule=cosine)
EOF
expect 2 "compile --train of a cosine schedule without --total-steps" -- "$dpc" compile "$work/cosine.graph" --train -o "$work/c.dpx"
contains "$work/err" "^dpc compile: --train: the model's cosine learning-rate schedule needs its length: give --total-steps N" "compile names --total-steps"
expect 1 "all-NaN input data" -- "$dpc" train "$tiny" --backend ref --data "$work/xnan.npy,$work/y.npy" --batch 4 --quiet
contains "$work/err" "the loss became NaN at step 1: the data is not finite: sample 2 of .*xnan.npy,.*y.npy holds NaN in input 'x'" "NaN data is named, with its sample and input"
lacks "$work/err" "learning rate" "NaN data is not blamed on the learning rate"

# -- one name, one meaning: --lr-schedule and --pipeline-schedule; --schedule still works --
expect 0 "--schedule cosine (old spelling) trains" -- "$dpc" train "$tiny" $fast --schedule cosine --quiet
contains "$work/err" "^dpc train: note: --schedule is deprecated; this is --lr-schedule cosine" "--schedule cosine maps to --lr-schedule with a note"
expect 0 "--lr-schedule cosine and --pipeline-schedule gpipe together" -- "$dpc" train "$tiny" $fast --lr-schedule cosine --strategy pipeline --stages 2 --microbatches 1 --pipeline-schedule gpipe --quiet
lacks "$work/err" "deprecated" "the new spellings give no note"
expect 0 "plan --schedule gpipe (old spelling)" -- "$dpc" plan "$wide" --strategy pipeline --stages 2 --schedule gpipe
contains "$work/err" "^dpc plan: note: --schedule is deprecated; this is --pipeline-schedule gpipe" "--schedule gpipe maps to --pipeline-schedule"
contains "$work/out" "GPipe" "the pipeline runs GPipe's order"
expect 2 "--schedule gpipe with --pipeline-schedule 1f1b" -- "$dpc" plan "$wide" --strategy pipeline --stages 2 --schedule gpipe --pipeline-schedule 1f1b

# -- one default batch: 64, shown in every --help --
for cmd in train plan bench; do
  expect 0 "dpc $cmd --help" -- "$dpc" $cmd --help
  contains "$work/out" "(default 64" "$cmd --help shows the default batch of 64"
done
expect 0 "compile --help" -- "$dpc" compile --help
contains "$work/out" "default 64 with --train" "compile --help shows its defaults"
expect 0 "plan at the default batch" -- "$dpc" plan "$mlp"
contains "$work/out" "training step, batch 64," "plan predicts train's batch"
expect 0 "compile --train at the default batch" -- "$dpc" compile "$tiny" --train -o "$work/tiny.dpx"
contains "$work/out" "batch 64, with training" "compile --train takes train's batch"

# -- refused inputs: an empty model, a folder without tests --
: >"$work/empty.graph"
expect 1 "an empty .graph" -- "$dpc" compile "$work/empty.graph" -o "$work/empty.dpx"
contains "$work/err" "empty.graph:1:1: error: no model here" "an empty model is refused"
if [ -e "$work/empty.dpx" ]; then echo "FAIL an empty model made an artifact"; fails=$((fails + 1)); else echo "ok   no artifact for an empty model"; fi
mkdir -p "$work/notests/sub"
expect 2 "onnx-test on a folder without tests" -- "$dpc" onnx-test "$work/notests"
contains "$work/err" "holds no ONNX test" "a folder without tests is an error"
lacks "$work/out" "0 passed, 0 failed" "no empty success is printed"
args=""
i=0
while [ $i -lt 80 ]; do
  args="$args $src/tests/onnx/torch/dynamic_batch"
  i=$((i + 1))
done
# shellcheck disable=SC2086
expect 0 "onnx-test with 80 directories" -- "$dpc" onnx-test --quiet --backend ref $args
contains "$work/out" "^80 passed, 0 failed" "every directory runs (no argument limit)"

# -- --quiet keeps the test accuracy; output paths are joined with one slash --
expect 0 "train --quiet" -- "$dpc" train "$tiny" $fast --test-data "$data" --quiet
contains "$work/out" "^trained .*: test accuracy [0-9.]*%" "--quiet keeps the test accuracy in the summary"
expect 0 "run --output-dir DIR/" -- "$dpc" run "$mlp" --input "x=$src/tests/cli/mlp/x.npy" --output-dir "$work/outs/"
contains "$work/out" "-> $work/outs/logits.npy" "the output path has one slash"
lacks "$work/out" "//" "no double slash"

# -- plan says when the step does not fit this machine's memory --
expect 0 "plan of a step bigger than the machine" -- "$dpc" plan "$wide" --batch 16000000
contains "$work/err" "^dpc plan: warning: cpu:0 is predicted to need [0-9.]* MB a step, more than the [0-9.]* MB of memory it has here" "plan warns, naming both sizes"
expect 0 "plan of a step that fits" -- "$dpc" plan "$wide" --batch 64
lacks "$work/err" "warning" "no warning when the step fits"

# -- resuming: a different --seed is refused, a changed length is said, a finished run too --
expect 0 "a run with a checkpoint" -- "$dpc" train "$tiny" $fast --epochs 1 --checkpoint "$work/ck.safetensors" --quiet
expect 1 "resume with another --seed" -- "$dpc" train "$tiny" $fast --epochs 2 --resume "$work/ck.safetensors" --seed 5 --quiet
contains "$work/err" "ck.safetensors was made with --seed 0, not 5" "another seed is refused, naming both"
expect 0 "resume with the same --seed" -- "$dpc" train "$tiny" $fast --epochs 1 --resume "$work/ck.safetensors" --seed 0 --quiet
contains "$work/err" "^dpc train: note: .*ck.safetensors is at step 2 (1 whole epoch done): nothing is left to train within --epochs 1" "a finished run says so"
expect 0 "resume with more --epochs" -- "$dpc" train "$tiny" $fast --epochs 3 --resume "$work/ck.safetensors" --quiet
contains "$work/err" "^dpc train: note: resuming .*ck.safetensors at step 2: training to step 6 (by --epochs 3), while the learning-rate schedule keeps the checkpoint's horizon of 2 steps" "a longer run says what happens"

if [ "$fails" -ne 0 ]; then
  echo "$fails checks failed"
  exit 1
fi
echo "all checks passed"
