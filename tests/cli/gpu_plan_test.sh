#!/bin/sh
# dpc devices and dpc plan --devices cuda:0,cuda:1 on a machine with GPUs, over the stand-in
# driver, cuBLAS and NCCL (tests/cuda/): each GPU measured (name, memory, GEMM rate on cuBLAS,
# copy and peer-copy bandwidth) and the plan made from those figures; a GPU that is not there
# and a GPU without a GEMM rate refused, saying to describe the GPUs instead; dpc train
# --strategy auto over the GPUs choosing from the same figures.
#   gpu_plan_test.sh DPC SOURCE_DIR WORK_DIR FAKE_CUDA FAKE_CUBLAS FAKE_NCCL
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
export DPC_CUDA_DRIVER="$4" DPC_CUBLAS="$5" DPC_CUBLASLT="$5" DPC_NCCL="$6" DPC_FAKE_CUDA_GPUS=2
fm="$src/examples/fashion_mlp.graph"

expect 0 "dpc devices with two GPUs" -- "$dpc" devices
contains "$work/out" "^cuda: CUDA driver 13.0, 2 GPUs; matmuls on cuBLAS; bias and ReLU epilogues on cuBLASLt; all-reduces between GPUs over NCCL" \
  "devices: the driver, cuBLAS and NCCL found"
contains "$work/out" "^cuda:0: dpc test GPU 0, 16.0 GiB: GEMM [0-9]* GFLOP/s (f32 on cuBLAS, [0-9]* wide), copy [0-9]* GB/s$" \
  "devices: cuda:0 measured"
contains "$work/out" "^cuda:1: dpc test GPU 1, .*GB/s from cuda:0$" "devices: cuda:1 measured, with the copy from cuda:0"
expect 0 "dpc devices --no-calibrate" -- "$dpc" devices --no-calibrate
lacks "$work/out" "^cuda:0: " "devices --no-calibrate: the GPUs not measured"

expect 0 "plan over this machine's two GPUs" -- "$dpc" plan "$fm" --devices cuda:0,cuda:1 --explain
contains "$work/out" "^cuda:1: dpc test GPU 1, 16.0 GiB, measured: GEMM " "plan: each GPU measured"
contains "$work/out" "on 2 GPUs of this machine (cuda:\*), measured: 1 host x 2 gpu (dpc test GPU 0" \
  "plan: the measured GPUs named"
contains "$work/out" "^host0/gpu:0 " "plan: a GPU's row"
contains "$work/out" "^planned for 2 devices in " "plan: two devices"
expect 0 "plan over the CPU and this machine's GPU" -- "$dpc" plan "$fm" --devices cpu,cuda:0 \
  --strategy model+cpu
contains "$work/out" "^with the host's CPU: .*this machine's, measured" "plan with the CPU: the CPU measured too"
contains "$work/out" "^host0/cpu " "plan with the CPU: the CPU's row"
expect 1 "a GPU that is not there" -- "$dpc" plan "$fm" --devices cuda:0,cuda:2
contains "$work/err" "cuda:2: not on this machine (CUDA driver 13.0, 2 GPUs.*--simulate-devices FILE" \
  "a GPU that is not there: said why and what to do"
DPC_CUBLAS=off expect 1 "no cuBLAS to measure with" -- "$dpc" plan "$fm" --devices cuda:0
contains "$work/err" "cuda:0: its GEMM rate is not measured (.*cuBLAS is off.*--simulate-devices FILE" \
  "no cuBLAS: said why and what to do"

# dpc train --strategy auto over the GPUs: measured and chosen as dpc plan chooses; the run then
# stops at the first kernel, which the stand-in driver cannot load from a command (its kernels
# are registered by the test program: a driver call failing, exit 3), after the all-reduce path
# is said
expect 3 "train --strategy auto over two GPUs" -- "$dpc" train "$fm" --backend cuda \
  --devices cuda:0,cuda:1 --strategy auto --steps 1
contains "$work/err" "^dpc train: --strategy auto: .*, predicted .* ms a step on the measured GPUs" \
  "train auto over GPUs: the choice said"
contains "$work/err" "^dpc train: note: all-reduces over NCCL 2.28.9" "train over GPUs: NCCL said"

# the same beside the CPU: ranked with it as dpc plan --devices cpu,cuda:0 ranks; the run then
# trains the choice (exit 0 where it placed every kernel on the CPU, 3 at a first GPU kernel, as
# above)
"$dpc" train "$fm" --backend cuda --devices cpu,cuda:0 --strategy auto --steps 1 \
  >"$work/out" 2>"$work/err"
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]; then
  echo "ok   train --strategy auto beside the CPU ran its choice (exit $rc)"
else
  echo "FAIL train --strategy auto beside the CPU: exit $rc"; sed 's/^/    /' "$work/err"
  fails=$((fails + 1))
fi
contains "$work/err" "^dpc train: with the host's CPU: .*this machine's, measured" \
  "train auto beside the CPU: the CPU measured"
contains "$work/err" "^dpc train: --strategy auto: .*, predicted .* ms a step on the measured GPUs and this CPU" \
  "train auto beside the CPU: the choice said"

[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
