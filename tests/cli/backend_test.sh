#!/bin/sh
# --backend as a user meets it: each name in the library's table of codegen backends works, the
# default is llvm, and an unknown name is a usage error that lists the names that exist.
#   backend_test.sh DPC NPYCMP SOURCE_DIR WORK_DIR
dpc=$1
npycmp=$2
src=$3
work=$4
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"


mlp=$src/examples/fashion_mlp.graph
bench="--inference --batch 2 --steps 2 --warmup 1 --json"
for cmd in run bench train; do
  expect 2 "$cmd --backend cuda9 is a usage error" -- "$dpc" $cmd "$mlp" --backend cuda9
  contains "$work/err" "no codegen backend is called 'cuda9' (known: ref, llvm, cuda)" \
    "$cmd names the unknown backend and lists the known ones"
done
expect 0 "bench --backend ref" -- "$dpc" bench "$mlp" $bench --backend ref
contains "$work/out" '"backend": "ref", "target": "reference kernels"' "ref compiles nothing"
contains "$work/out" '"kernels": 0,' "ref reports no kernels"
expect 0 "bench --backend llvm" -- "$dpc" bench "$mlp" $bench --backend llvm
contains "$work/out" '"backend": "llvm", "target": "x86' "llvm compiles for this CPU"
expect 0 "bench without --backend" -- "$dpc" bench "$mlp" $bench
contains "$work/out" '"backend": "llvm"' "llvm is the default"
for be in ref llvm; do
  expect 0 "run --backend $be" -- "$dpc" run "$mlp" --input "x=$src/tests/cli/mlp/x.npy" \
    --output-dir "$work/$be" --backend $be
  expect 0 "run --backend $be: the logits match NumPy" -- "$npycmp" "$work/$be/logits.npy" \
    "$src/tests/cli/mlp/expect_logits.npy" 1e-5 1e-6
done

# the cuda backend's own flags: refused with another backend, checked before any model work
for cmd in run bench train; do
  expect 2 "$cmd --precision tf32 without --backend cuda" -- "$dpc" $cmd "$mlp" --precision tf32
  contains "$work/err" "--precision: a precision other than fp32 applies to the cuda backend" \
    "$cmd says --precision is the cuda backend's"
  expect 2 "$cmd --cuda-arch without --backend cuda" -- "$dpc" $cmd "$mlp" --cuda-arch sm_90
  contains "$work/err" "--cuda-arch: a CUDA architecture list applies to the cuda backend" \
    "$cmd says --cuda-arch is the cuda backend's"
done
if "$dpc" version | grep -q 'NVRTC'; then
  expect 2 "--cuda-arch sm_7x" -- "$dpc" bench "$mlp" --backend cuda --cuda-arch sm_7x
  contains "$work/err" "--cuda-arch: CUDA architectures 'sm_7x': not a list of real ones" \
    "a malformed architecture list is named"
  expect 2 "--precision fp16" -- "$dpc" train "$mlp" --backend cuda --precision fp16
  contains "$work/err" "--precision: precision 'fp16': not one of fp32, tf32, bf16" \
    "an unknown precision lists the known ones"
fi
expect 0 "bench --precision fp32 with llvm (the default, so accepted)" -- "$dpc" bench "$mlp" \
  $bench --precision fp32

# --backend cuda where no GPU is found: each command says why before compiling a kernel for it
if "$dpc" devices | grep -q '^cuda: no CUDA driver found'; then
  for cmd in train bench; do
    expect 1 "$cmd --backend cuda without a GPU" -- "$dpc" $cmd "$mlp" --backend cuda --steps 1
    contains "$work/err" "cuda:0: no CUDA driver found" "$cmd --backend cuda names the missing driver"
    lacks "$work/err" "compiling kernels" "$cmd --backend cuda compiles nothing first"
  done
  expect 1 "run --backend cuda without a GPU" -- "$dpc" run "$mlp" --backend cuda \
    --input "x=$src/tests/cli/mlp/x.npy" --output-dir "$work/cuda"
  contains "$work/err" "cuda:0: no CUDA driver found" "run --backend cuda names the missing driver"
fi

[ "$fails" -eq 0 ] || {
  echo "$fails failed"
  exit 1
}
echo "all passed"
