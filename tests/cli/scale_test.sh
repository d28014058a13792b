#!/bin/sh
# dpc past 16 devices: plans for up to 256 (DPC_MAX_DEVICES) devices on any machine (devices
# share its cores), every device in the output; one more, or a pipeline wider than that, is an
# error that says the limit; dpc bench reports every device of a wide plan.
#   scale_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
# calibrations of this run's own, not the user's cache
DPC_CACHE_DIR=$work/cache
export DPC_CACHE_DIR

lines() { # lines FILE PATTERN COUNT DESCRIPTION: exactly COUNT lines match
  matched=$(grep -c -- "$2" "$1")
  if [ "$matched" -eq "$3" ]; then echo "ok   $4"; else
    echo "FAIL $4: $matched lines match '$2', expected $3"
    fails=$((fails + 1))
  fi
}

tb=$src/examples/transformer_block.graph
# model parallel: cpu:24 was a segmentation fault (the placement report held 16 devices)
for n in 24 64 256; do
  expect 0 "plan model parallel on cpu:$n" -- "$dpc" plan "$tb" --devices cpu:$n --strategy model --batch 128
  contains "$work/out" "model parallel on $n devices" "cpu:$n: model parallel on $n devices"
  lines "$work/out" "^cpu:[0-9]" $n "cpu:$n: a row for every device"
  contains "$work/out" "values flow one way between devices" "cpu:$n: the placement is acyclic"
done
expect 0 "plan data parallel on cpu:256" -- "$dpc" plan "$tb" --devices cpu:256 --batch 256
lines "$work/out" "^cpu:[0-9]" 256 "data parallel: a row for every device"
contains "$work/out" "^cpu:255 " "data parallel: cpu:255 is there"
expect 0 "plan hybrid on cpu:256" -- "$dpc" plan "$tb" --devices cpu:256 --strategy hybrid --mp 4 --batch 256
lines "$work/out" "^cpu:[0-9]" 256 "hybrid: a row for every device"
# pipelines: more than 64 stages was refused
expect 0 "plan 64 pipelines of 4 stages" -- "$dpc" plan "$tb" --strategy pipeline --stages 4 --dp 64 --batch 256
contains "$work/out" "pipeline on 256 devices" "4 x 64 stages: 256 devices"
expect 0 "plan a pipeline of 128 stages" -- "$dpc" plan "$tb" --strategy pipeline --stages 128 --batch 256
contains "$work/out" "pipeline: 128 stages" "128 stages planned"
# data parallel over micro-batches: each replica's logits are a concat of its 100 micro-batches
# (copying a node of over 64 inputs was refused)
expect 0 "plan 2 replicas of 100 micro-batches" -- "$dpc" plan "$src/examples/fashion_mlp.graph" --devices cpu:2 --accumulate 100 --batch 200
contains "$work/out" "data parallel on 2 devices" "100 micro-batches: planned"
# past the limit: an error that names it
expect 2 "cpu:257 is a usage error" -- "$dpc" plan "$tb" --devices cpu:257 --strategy model
contains "$work/err" "from 1 to 256" "cpu:257: the limit named"
expect 2 "257 stages is a usage error" -- "$dpc" plan "$tb" --strategy pipeline --stages 257
contains "$work/err" "2 to 256" "257 stages: the limit named"
expect 2 "128 stages x 4 pipelines is a usage error" -- "$dpc" plan "$tb" --strategy pipeline --stages 128 --dp 4
contains "$work/err" "at most 256 devices" "512 devices: the limit named"
expect 2 "train --mp 300 is a usage error" -- "$dpc" train "$tb" --devices cpu:4 --strategy hybrid --mp 300
contains "$work/err" "at most 256" "--mp 300: the limit named, not cut to 256"
# bench: every device's share and time (it kept 16, and wrote the 17th on past its array)
expect 0 "bench data parallel on cpu:24" -- "$dpc" bench "$src/examples/fashion_mlp.graph" --devices cpu:24 --batch 24 --steps 1 --warmup 1 --backend ref
contains "$work/out" "shares:  1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1 samples" "bench: 24 shares"
contains "$work/out" "cpu:23 [0-9.]* ms" "bench: cpu:23's time"

if [ "$fails" -ne 0 ]; then
  echo "$fails checks failed"
  exit 1
fi
echo "all checks passed"
