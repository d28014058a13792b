#!/bin/sh
# ONNX through the dpc command: an exported MLP trained to PyTorch's per-step losses (and saved
# under its initializer names), `dpc run --inputs/--outputs`, `dpc print` reading back, the
# dynamic batch, and every malformed model of tests/onnx/malformed refused with its message.
#   onnx_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
t="$src/tests/onnx"

ok() { echo "ok   $1"; }
bad() {
  echo "FAIL $1"
  fails=$((fails + 1))
}
run() { # run DESCRIPTION -- command...: must exit 0
  what=$1
  shift 2
  if "$@" >"$work/out" 2>"$work/err"; then ok "$what"; else
    bad "$what (exit $?)"
    sed 's/^/    /' "$work/out" "$work/err" | head -20
  fi
}

# -- training: same per-step losses as PyTorch from the same weights and data order (1e-5) --
# ... on each backend, and data parallel over two devices (the same global batches)
for backend in ref llvm dp2; do
  devices=cpu
  be=$backend
  [ "$backend" = dp2 ] && devices=cpu:2 && be=llvm
  run "train the exported MLP ($backend)" -- "$dpc" train "$t/mlp_train/model.onnx" \
    --loss softmax_cross_entropy --data "$t/mlp_train/x.npy,$t/mlp_train/y.npy" --batch 32 \
    --no-shuffle --steps 10 --optimizer sgd --lr 0.1 --momentum 0 --backend $be \
    --devices $devices --log "$work/log_$backend.jsonl" \
    --save "$work/trained_$backend.safetensors" --quiet
  sed -n 's/.*"step": *\([0-9]*\),.*"loss": *\([-0-9.e+]*\).*/\1 \2/p' "$work/log_$backend.jsonl" \
    >"$work/dpc_losses"
  if awk 'NR==FNR { want[NR] = $1; n = NR; next }
          { got[$1] = $2 }
          END { if (n != 10) exit 1
                for (i = 1; i <= n; i++) {
                  if (!(i in got)) exit 1
                  d = got[i] - want[i]; if (d < 0) d = -d
                  w = want[i] < 0 ? -want[i] : want[i]
                  if (d > 1e-5 * w) { printf "step %d: %s vs %s\n", i, got[i], want[i]; exit 1 } } }' \
    "$t/mlp_train/losses.txt" "$work/dpc_losses"; then
    ok "10 losses within 1e-5 of PyTorch's ($backend)"
  else
    bad "losses differ from PyTorch's ($backend)"
    paste "$t/mlp_train/losses.txt" "$work/dpc_losses" | sed 's/^/    /'
  fi
  if grep -q '"0.weight"' "$work/trained_$backend.safetensors" &&
    grep -q '"2.bias"' "$work/trained_$backend.safetensors"; then
    ok "--save keeps the ONNX initializer names ($backend)"
  else bad "--save lost the ONNX initializer names ($backend)"; fi
done

# -- run: the ONNX test layout in and out; what it writes reads back equal --
m="$t/torch/lenet"
run "dpc run --inputs/--outputs" -- "$dpc" run "$m/model.onnx" --inputs "$m/test_data_set_0" \
  --outputs "$work/lenet_out"
mkdir -p "$work/lenet_again/test_data_set_0"
cp "$m/model.onnx" "$work/lenet_again/"
cp "$m/test_data_set_0/input_0.pb" "$work/lenet_out/output_0.pb" "$work/lenet_again/test_data_set_0/"
run "output_0.pb from dpc run matches a second run exactly" -- "$dpc" onnx-test --fail-on-skip \
  --rtol 0 --atol 0 "$work/lenet_again"

# -- the dynamic batch: two data sets of different batch sizes through one import --
run "dynamic batch (3 and 7)" -- "$dpc" onnx-test --fail-on-skip --rtol 1e-3 --atol 1e-4 \
  "$t/torch/dynamic_batch"
run "hand-built models (Shape chains on a dynamic batch)" -- "$dpc" onnx-test --fail-on-skip \
  "$t/models"
run "dpc check on the dynamic-batch model" -- "$dpc" check "$t/torch/dynamic_batch/model.onnx"

# -- print: the imported graph as .graph text that parses back to the same text --
for name in transformer_layer lstm resnet_block dynamic_batch; do
  "$dpc" print "$t/torch/$name/model.onnx" >"$work/$name.graph" 2>"$work/err" &&
    "$dpc" print "$work/$name.graph" >"$work/$name.2.graph" 2>>"$work/err"
  if cmp -s "$work/$name.graph" "$work/$name.2.graph"; then ok "dpc print $name reads back"; else
    bad "dpc print $name does not read back"
    head -5 "$work/err" | sed 's/^/    /'
  fi
done

if "$dpc" print --brief "$t/torch/lenet/model.onnx" 2>"$work/err" | grep -q '2400 values>'; then
  ok "dpc print --brief cuts the weights short"
else bad "dpc print --brief"; fi

# -- malformed models: exit 1 with the expected message, never a crash --
for f in "$t"/malformed/*.onnx; do
  n=$(basename "$f" .onnx)
  "$dpc" check "$f" >"$work/out" 2>"$work/err"
  rc=$?
  if [ "$rc" -eq 1 ] && grep -qF -- "$(cat "$t/malformed/$n.expect")" "$work/err"; then
    ok "malformed $n: $(head -1 "$work/err" | cut -c1-110)"
  else
    bad "malformed $n: exit $rc"
    sed 's/^/    /' "$work/out" "$work/err" | head -5
  fi
done

run "dpc onnx-test --help" -- "$dpc" onnx-test --help
if [ $fails -ne 0 ]; then
  echo "$fails failed"
  exit 1
fi
echo "all passed"
