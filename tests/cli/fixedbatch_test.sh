#!/bin/sh
# Fixed-batch ONNX exports (torch.onnx.export without dynamic_axes, tests/onnx/fixed_batch):
# dpc train, plan, bench and compile make the inputs' leading dimension the batch, so the model
# trains at any --batch, data parallel, accumulated and pipelined, with the same losses as the
# same model exported with a dynamic batch; a Reshape that folds the batch away is refused
# naming the node; dpc run and onnx-test still take the model as exported.
#   fixedbatch_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
m="$src/tests/onnx/fixed_batch"

# train NAME MODEL FLAGS...: SGD at lr 0.3 over the data in file order; NAME.loss gets the
# loss of each step, one a line
train() {
  name=$1
  model=$2
  shift 2
  expect 0 "train $name" -- "$dpc" train "$model" --loss softmax_cross_entropy \
    --data "$m/x.npy,$m/y.npy" --no-shuffle --optimizer sgd --lr 0.3 --momentum 0 \
    --log "$work/$name.jsonl" --quiet "$@"
  sed -n 's/.*"step": *[0-9]*,.*"loss": *\([-0-9.e+]*\).*/\1/p' "$work/$name.jsonl" 2>/dev/null \
    >"$work/$name.loss"
}
# same_losses A B RTOL DESCRIPTION: A.loss and B.loss have as many steps (some) and agree
same_losses() {
  if awk -v tol="$3" 'NR == FNR { a[++n] = $1; next }
         { b[++k] = $1 }
         END { if (n == 0 || n != k) { printf "    %d vs %d steps\n", n, k; exit 1 }
               for (i = 1; i <= n; i++) {
                 d = a[i] - b[i]; if (d < 0) d = -d
                 w = b[i] < 0 ? -b[i] : b[i]
                 if (d > tol * w) { printf "    step %d: %s vs %s\n", i, a[i], b[i]; exit 1 } } }' \
    "$work/$1.loss" "$work/$2.loss"; then
    echo "ok   $4"
  else
    echo "FAIL $4"
    fails=$((fails + 1))
  fi
}

# -- the export as it is: its forward pass at its own batch against NumPy's --
expect 0 "onnx-test runs the fixed-batch export at its batch of 32" -- "$dpc" onnx-test \
  --fail-on-skip --rtol 1e-4 --atol 1e-5 "$m"
expect 0 "print keeps the export's fixed batch" -- "$dpc" print "$m/model.onnx" --brief
contains "$work/out" '^input `input`: f32\[32, 1, 8, 8\]$' "print shows input f32[32, 1, 8, 8]"

# -- training: the fixed export equals the dynamic one, step for step (4 epochs, 32 steps) --
train fixed "$m/model.onnx" --batch 32 --epochs 4 --backend ref
train dynamic "$m/dynamic.onnx" --batch 32 --epochs 4 --backend ref
same_losses fixed dynamic 1e-6 "fixed-batch export: 32 losses equal to the dynamic export's"
if awk 'NR == 1 { first = $1 } { last = $1; n++ }
        END { exit !(n == 32 && last < first - 0.3) }' "$work/fixed.loss"; then
  echo "ok   the loss falls ($(head -1 "$work/fixed.loss") to $(tail -1 "$work/fixed.loss"))"
else
  echo "FAIL the loss does not fall by 0.3 in 32 steps:" $(cat "$work/fixed.loss")
  fails=$((fails + 1))
fi
# ... exported from one sample (batch 1), the most common export
train batch1 "$m/batch1.onnx" --batch 32 --epochs 4 --backend ref
same_losses batch1 dynamic 1e-6 \
  "an export at batch 1 trained at --batch 32: the dynamic export's losses"
# ... at a batch other than the export's
train fixed64 "$m/model.onnx" --batch 64 --epochs 2 --backend ref
train dynamic64 "$m/dynamic.onnx" --batch 64 --epochs 2 --backend ref
same_losses fixed64 dynamic64 1e-6 "--batch 64 (the export's is 32): equal to the dynamic export's"
# ... data parallel, accumulated and pipelined: the same global batches, the same losses
train dp2 "$m/model.onnx" --batch 32 --epochs 4 --devices cpu:2
same_losses dp2 fixed 1e-5 "data parallel on cpu:2: the single device's losses"
train acc2 "$m/model.onnx" --batch 32 --epochs 4 --accumulate 2 --backend ref
same_losses acc2 fixed 1e-5 "--accumulate 2: the single device's losses"
train pipe "$m/model.onnx" --batch 32 --epochs 4 --strategy pipeline --stages 2 \
  --microbatches 2 --devices cpu:2 --backend ref
same_losses pipe fixed 1e-5 "a two-stage pipeline: the single device's losses"

# -- a real torch.onnx.export without dynamic_axes (export_torch.py: x.view(x.size(0), -1),
# reshape(x.shape[0], ...)) against the same module exported with a dynamic batch --
train tfixed "$m/torch_fixed.onnx" --batch 32 --epochs 2 --backend ref
train tdynamic "$m/torch_dynamic.onnx" --batch 32 --epochs 2 --backend ref
same_losses tfixed tdynamic 1e-6 "torch's fixed-batch export: its dynamic export's 16 losses"
train tfixed64 "$m/torch_fixed.onnx" --batch 64 --epochs 2 --backend ref
train tdynamic64 "$m/torch_dynamic.onnx" --batch 64 --epochs 2 --backend ref
same_losses tfixed64 tdynamic64 1e-6 "torch's fixed-batch export at --batch 64"
train tdp2 "$m/torch_fixed.onnx" --batch 32 --epochs 2 --devices cpu:2
same_losses tdp2 tdynamic 1e-5 "torch's fixed-batch export, data parallel on cpu:2"

# -- plan, bench and compile take --batch, not the export's batch --
for f in model dynamic; do
  expect 0 "plan the $f export at --batch 64" -- "$dpc" plan "$m/$f.onnx" \
    --loss softmax_cross_entropy --batch 64
  cp "$work/out" "$work/plan_$f"
done
if cmp -s "$work/plan_model" "$work/plan_dynamic"; then
  echo "ok   plan: the fixed export's plan at batch 64 is the dynamic export's"
else
  echo "FAIL plan: the fixed export's plan at batch 64 is not the dynamic export's"
  diff "$work/plan_model" "$work/plan_dynamic" | sed 's/^/    /'
  fails=$((fails + 1))
fi
for f in model dynamic; do
  expect 0 "bench the $f export at --batch 64" -- "$dpc" bench "$m/$f.onnx" \
    --loss softmax_cross_entropy --batch 64 --steps 2 --warmup 1 --backend ref --profile
  sed -n 's/.*the cost model predicts \([0-9.]*\) ms.*/\1/p' "$work/out" >"$work/bench_$f"
done
if [ -s "$work/bench_model" ] && cmp -s "$work/bench_model" "$work/bench_dynamic"; then
  echo "ok   bench: the fixed export's step at batch 64 is predicted as the dynamic one's" \
    "($(cat "$work/bench_model") ms)"
else
  echo "FAIL bench: predicted $(cat "$work/bench_model") ms, the dynamic export" \
    "$(cat "$work/bench_dynamic") ms"
  fails=$((fails + 1))
fi
expect 0 "compile the fixed export for --batch 64" -- "$dpc" compile "$m/model.onnx" \
  --loss softmax_cross_entropy --batch 64 --train --output "$work/fixed64.dpx"
# the artifact trains at the batch it was compiled for, with the optimizer compiled in (SGD's
# defaults), as the dynamic export does
expect 0 "train the compiled artifact" -- "$dpc" train "$work/fixed64.dpx" \
  --data "$m/x.npy,$m/y.npy" --no-shuffle --log "$work/artifact.jsonl" --quiet
sed -n 's/.*"step": *[0-9]*,.*"loss": *\([-0-9.e+]*\).*/\1/p' "$work/artifact.jsonl" \
  >"$work/artifact.loss"
expect 0 "train the dynamic export at SGD's defaults" -- "$dpc" train "$m/dynamic.onnx" \
  --loss softmax_cross_entropy --data "$m/x.npy,$m/y.npy" --no-shuffle --batch 64 \
  --log "$work/artifact_ref.jsonl" --quiet
sed -n 's/.*"step": *[0-9]*,.*"loss": *\([-0-9.e+]*\).*/\1/p' "$work/artifact_ref.jsonl" \
  >"$work/artifact_ref.loss"
same_losses artifact artifact_ref 1e-5 "the artifact compiled at --batch 64 trains as batch 64"

# -- what cannot be made symbolic: the node named, the way out said; the model still imports --
expect 1 "a Reshape folding the batch away is refused" -- "$dpc" train "$m/mixed_batch.onnx" \
  --loss softmax_cross_entropy --data "$m/x.npy,$m/y.npy"
contains "$work/err" "node 1 (Reshape '/Reshape')" "the message names the Reshape"
contains "$work/err" "fixed leading dimension 32" "the message says the export's batch"
contains "$work/err" "dynamic_axes" "the message says how to export it"
expect 0 "dpc check takes that model as exported" -- "$dpc" check "$m/mixed_batch.onnx"
# [32, 64] to [2, 32, 32]: a 32 away from the batch's place is not guessed to be the batch
expect 1 "a Reshape moving the batch is refused" -- "$dpc" train "$m/moved_batch.onnx" \
  --loss softmax_cross_entropy --data "$m/x.npy,$m/y.npy"
contains "$work/err" "node 1 (Reshape '/Reshape').*fixed leading dimension 32" \
  "the message names that Reshape"
# bench, plan and compile take it as exported too, saying why --batch does not apply
expect 0 "bench takes that model as exported" -- "$dpc" bench "$m/mixed_batch.onnx" \
  --inference --batch 32 --steps 1 --warmup 0 --backend ref
contains "$work/err" "note: .*node 1 (Reshape '/Reshape').*whatever --batch says" \
  "bench's note names the Reshape"

if [ $fails -ne 0 ]; then
  echo "$fails failed"
  exit 1
fi
echo "all passed"
