#!/bin/sh
# The trainer's losses, step by step, pinned: every strategy the test suite trains runs 20 steps
# of examples/fashion_mlp.graph on the reference kernels and the sha256 of its log's loss column
# must be the one recorded here. The hashes were recorded at commit 40a90c2, before the trainer
# moved behind libdpc's public API (include/dpc/train.h), so they say the move changed no bit.
#   losses_test.sh DPC SOURCE_DIR WORK_DIR [--print]
# --print writes each run's hash instead of checking (to record them again after a deliberate
# change of the numbers; say why in the commit).
dpc=$1
src=$2
work=$3
mode=${4:-check}
rm -rf "$work" && mkdir -p "$work"
mlp="$src/examples/fashion_mlp.graph"
fails=0

# run NAME HASH FLAGS...: train, hash the loss column, compare
run() {
  name=$1 want=$2
  shift 2
  if ! "$dpc" train "$mlp" --steps 20 --backend "${LOSSES_BACKEND:-ref}" --quiet --log "$work/$name.jsonl" "$@" \
    >"$work/$name.out" 2>&1; then
    echo "FAIL $name: dpc train $*"
    sed 's/^/    /' "$work/$name.out"
    fails=$((fails + 1))
    return
  fi
  have=$(grep -o '"loss": [^,}]*' "$work/$name.jsonl" | sha256sum | cut -c1-64)
  n=$(grep -c '"loss"' "$work/$name.jsonl")
  if [ "$mode" = --print ]; then
    echo "$name $have"
  elif [ "$n" -ne 20 ]; then
    echo "FAIL $name: $n steps logged, not 20"
    fails=$((fails + 1))
  elif [ "$have" = "$want" ]; then
    echo "ok   $name"
  else
    echo "FAIL $name: losses changed (sha256 $have, recorded $want): dpc train $*"
    head -3 "$work/$name.jsonl" | sed 's/^/    /'
    fails=$((fails + 1))
  fi
}

run single 758d706ee77e9a901b6b976942e8bc0391999ac719ef3210d32a2819be6ebc74
run data 05aff92ad58041976e8f0f76c516a04f1a9ee62a41a103461c9314af1d188be5 --devices cpu:2
run model 758d706ee77e9a901b6b976942e8bc0391999ac719ef3210d32a2819be6ebc74 --devices cpu:2 --strategy model
run hybrid 05aff92ad58041976e8f0f76c516a04f1a9ee62a41a103461c9314af1d188be5 --devices cpu:4 --strategy hybrid --mp 2
run gpipe 287a35e039b83ac7cac469a2aa6ef7737dab2fc9b91850e1e3fe5ab3aae24ef9 --strategy pipeline --stages 2 --microbatches 2 --pipeline-schedule gpipe
run 1f1b 287a35e039b83ac7cac469a2aa6ef7737dab2fc9b91850e1e3fe5ab3aae24ef9 --strategy pipeline --stages 2 --microbatches 2 --pipeline-schedule 1f1b
run accumulate 287a35e039b83ac7cac469a2aa6ef7737dab2fc9b91850e1e3fe5ab3aae24ef9 --accumulate 2
run async0 17b4d7d73de3726dfe8c892df264a2fa67fe09b66d2bc7d8d8065c0d1503d9fc --devices cpu:2 --sync async --staleness 0
run local_sgd c5acb9bfa2ea1333216653d0d90ec0072e1c6850e79be84a872159a1f6e85a52 --devices cpu:2 --local-sgd 2
run text_pipeline 287a35e039b83ac7cac469a2aa6ef7737dab2fc9b91850e1e3fe5ab3aae24ef9 --strategy pipeline:stages=2,microbatches=2,schedule=gpipe
run text_local_sgd c5acb9bfa2ea1333216653d0d90ec0072e1c6850e79be84a872159a1f6e85a52 --devices cpu:2 --strategy local_sgd:period=2

[ "$mode" = --print ] && exit 0
echo "$fails checks failed"
[ "$fails" -eq 0 ]
