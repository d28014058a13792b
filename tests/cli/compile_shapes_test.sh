#!/bin/sh
# dpc compile's --devices (data parallel) and --batch-sizes (plans for partial batches): what
# they accept, what they refuse and how they say so. What the artifacts compute is checked
# through libdpcrt by tests/embed/embed_test.sh.
#   compile_shapes_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
g=$src/examples/fashion_mlp.graph


expect 0 "dpc compile --help" -- "$dpc" compile --help
contains "$work/out" "--devices" "the help lists --devices"
contains "$work/out" "--batch-sizes" "the help lists --batch-sizes"

expect 0 "two devices" -- "$dpc" compile "$g" --batch 8 --devices cpu:2 -o "$work/two.dpx"
contains "$work/out" "batch 8, data parallel over cpu:2" "the summary names the devices"
expect 2 "devices that do not divide the batch" -- \
  "$dpc" compile "$g" --batch 8 --devices cpu:3 -o "$work/three.dpx"
contains "$work/err" "--devices cpu:3 makes 3 devices, which do not divide --batch 8" \
  "the error says why"
[ ! -e "$work/three.dpx" ] && echo "ok   nothing written" ||
  { echo "FAIL an artifact was written"; fails=$((fails + 1)); }

expect 0 "smaller batches" -- "$dpc" compile "$g" --batch 8 --batch-sizes 1,4 -o "$work/b.dpx"
for bad in 0 8 9 1,x "" 4,; do
  expect 2 "--batch-sizes '$bad' is refused" -- \
    "$dpc" compile "$g" --batch 8 --batch-sizes "$bad" -o "$work/bad.dpx"
  contains "$work/err" "--batch-sizes expects a list of at most 12 sizes from 1 to below --batch 8" \
    "--batch-sizes '$bad': the error says what it takes"
done

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "compile shapes: ok"
