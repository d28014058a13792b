#!/bin/sh
# An application embedding the runtime: install dpc to a temporary prefix, build
# examples/embed against it twice (CMake's find_package and pkg-config), train a compiled
# artifact through libdpcrt and check what it learnt; the library must export only the dpc_
# API and never pull in LLVM.
#   embed_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -eu
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(ls "$prefix"/lib*/libdpcrt.so | head -1)
libdir=$(dirname "$lib")

# Exports: the functions of dpc.h and nothing else.
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^dpc_' || true)
[ -z "$others" ] || fail "libdpcrt exports more than dpc_*: $others"
nm -D --defined-only "$lib" | grep -q ' dpc_runner_run$' || fail "dpc_runner_run is not exported"
if ldd "$lib" | grep -qi llvm; then fail "libdpcrt links LLVM: $(ldd "$lib" | grep -i llvm)"; fi

"$prefix/bin/dpc" compile "$src/examples/fashion_mlp.graph" --train --batch 32 --total-steps 300 \
  -o "$work/mlp.dpx"

cmake -S "$src/examples/embed" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
PKG_CONFIG_PATH=$libdir/pkgconfig
export PKG_CONFIG_PATH
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/train_embed_pc" "$src/examples/embed/train_embed.c" \
  $(pkg-config --cflags --libs dpc) -Wl,-rpath,"$libdir"

for app in "$work/cmake/train_embed" "$work/train_embed_pc"; do
  if ldd "$app" | grep -qi llvm; then fail "$app links LLVM"; fi
  "$app" "$work/mlp.dpx" 300 >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; fail "$app failed"; }
  cat "$work/out.txt"
  awk '/^step 1:/ {first = $4} /^step 300:/ {last = $4} /^accuracy/ {acc = $2}
       END { if (first == "" || last == "" || acc == "") exit 1;
             if (last > first / 10) { print "loss fell too little: " first " -> " last; exit 1 }
             if (acc < 0.95) { print "accuracy " acc " < 0.95"; exit 1 } }' "$work/out.txt" ||
    fail "$app did not learn the task"
done

# The runner options: sizes checked, the evaluation plan, the step counter, the log callback.
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/api_opts" "$src/tests/embed/api_opts.c" \
  $(pkg-config --cflags --libs dpc) -lm -Wl,-rpath,"$libdir"
for devices in 1 2; do
  "$prefix/bin/dpc" compile "$src/examples/fashion_mlp.graph" --train --batch 32 --total-steps 300 \
    --devices cpu:$devices -o "$work/opts$devices.dpx" >/dev/null
  "$work/api_opts" "$work/opts$devices.dpx" >"$work/opts.txt" 2>&1 ||
    { cat "$work/opts.txt"; fail "api_opts on $devices devices"; }
  cat "$work/opts.txt"
done

# The run seed: dropout masks change with it and repeat with the same one.
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/api_seed" "$src/tests/embed/api_seed.c" \
  $(pkg-config --cflags --libs dpc) -Wl,-rpath,"$libdir"
"$prefix/bin/dpc" compile "$src/tests/embed/dropout.graph" -o "$work/dropout.dpx" >/dev/null
"$work/api_seed" "$work/dropout.dpx" >"$work/seed.txt" 2>&1 ||
  { cat "$work/seed.txt"; fail "api_seed"; }
cat "$work/seed.txt"

# Serving: inference on the caller's own buffers with no copy, the same outputs as `dpc run`,
# one model shared by two threads' runners, a cancel flag.
"$prefix/bin/dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 -o "$work/infer8.dpx" >/dev/null
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -pthread -o "$work/infer_embed_pc" "$src/examples/embed/infer_embed.c" \
  $(pkg-config --cflags --libs dpc) -Wl,-rpath,"$libdir"
# check_serve APP MODEL.dpx DIR REF.dpx [APP OPTIONS]: every check of infer_embed holds, and its
# output for the first batch is what dpc run REF.dpx gives for the same input, byte for byte
check_serve() {
  app=$1 model=$2 dir=$3 ref=$4
  shift 4
  mkdir -p "$dir"
  "$app" "$model" "$dir" "$@" >"$dir/out.txt" 2>"$dir/err.txt" ||
    { cat "$dir/out.txt" "$dir/err.txt"; fail "$app $model failed"; }
  cat "$dir/out.txt"
  grep -q '^two threads: the same outputs as one thread$' "$dir/out.txt" || fail "threads differ"
  grep -q '^copied buffers: the same outputs$' "$dir/out.txt" || fail "copies differ"
  grep -q '^cancel: refused (cancelled' "$dir/out.txt" || fail "a cancelled runner ran"
  grep -q "cancelled: cancelled" "$dir/err.txt" || fail "the log callback missed the cancel"
  "$prefix/bin/dpc" run "$ref" --input x="$dir/x.npy" --output-dir "$dir/run" >/dev/null
  n=$(wc -c <"$dir/run/logits.npy") h=$(head -c 10 "$dir/run/logits.npy" | od -An -tu2 -j8 | tr -d ' ')
  n=$((n - 10 - h))
  [ "$n" -gt 0 ] || fail "no output"
  tail -c "$n" "$dir/run/logits.npy" | cmp -s -n "$n" - "$dir/out.raw" ||
    fail "$model: the runner's output differs from dpc run's"
}
for app in "$work/cmake/infer_embed" "$work/infer_embed_pc"; do
  if ldd "$app" | grep -qi llvm; then fail "$app links LLVM"; fi
  check_serve "$app" "$work/infer8.dpx" "$work/serve1" "$work/infer8.dpx"
  grep -q '^in place: x yes, logits yes$' "$work/serve1/out.txt" || fail "aligned buffers were copied"
  grep -q "^no copy: the runner's output is the caller's buffer$" "$work/serve1/out.txt" ||
    fail "the in-place output is a copy"
  grep -q "'x' is copied at every run: the buffer for 'x' is not 64-byte aligned" \
    "$work/serve1/err.txt" || fail "the log callback did not say why a buffer is copied"
done

# Two devices: an artifact compiled data parallel over cpu:2 runs through the same API; the
# caller sees the whole batch (each replica's rows in order). Replica 0's rows are dpc run's
# bits; the whole is the one-device output to float rounding (each replica multiplies 4 rows).
"$prefix/bin/dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 --devices cpu:2 \
  -o "$work/infer8x2.dpx" | grep -q "data parallel over cpu:2" || fail "no two-device artifact"
check_serve "$work/cmake/infer_embed" "$work/infer8x2.dpx" "$work/serve2" "$work/infer8x2.dpx" \
  --devices cpu:2
grep -q '^model fashion_mlp: x\[8, 784\] -> logits\[8, 10\]' "$work/serve2/out.txt" ||
  fail "two devices: the runner does not show the whole batch"
cmp -s "$work/serve1/x.npy" "$work/serve2/x.npy" || fail "the two runs had different inputs"
od -An -v -tf4 -w4 "$work/serve1/out.raw" >"$work/one.txt"
od -An -v -tf4 -w4 "$work/serve2/out.raw" >"$work/two.txt"
[ "$(wc -l <"$work/one.txt")" -eq 80 ] || fail "expected 8 x 10 outputs"
paste "$work/one.txt" "$work/two.txt" | awk '{ d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1;
  if (d > 1e-5 * (m + 1)) { print "row " int((NR - 1) / 10) ": " $1 " vs " $2; bad = 1 } }
  END { exit bad }' || fail "two devices: outputs differ from one device's"

# Partial batches without recompiling: one artifact with plans for 8, 4 and 1 rows runs 4 rows
# on its 4-row plan (in place) and 3 rows on it padded, each the bits of an artifact compiled
# for exactly that batch.
"$prefix/bin/dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 --batch-sizes 1,4 \
  -o "$work/buckets.dpx" >/dev/null
for rows in 4 3; do
  "$prefix/bin/dpc" compile "$src/examples/fashion_mlp.graph" --batch $rows \
    -o "$work/exact$rows.dpx" >/dev/null
  check_serve "$work/cmake/infer_embed" "$work/buckets.dpx" "$work/rows$rows" \
    "$work/exact$rows.dpx" --rows $rows
  grep -q "^model fashion_mlp: x\[$rows, 784\] -> logits\[$rows, 10\]" "$work/rows$rows/out.txt" ||
    fail "a partial batch of $rows rows does not show $rows rows"
  [ "$(wc -c <"$work/rows$rows/out.raw")" -eq $((rows * 40)) ] || fail "$rows rows: wrong output size"
done
grep -q '^in place: x yes, logits yes$' "$work/rows4/out.txt" || fail "4 rows on the 4-row plan were copied"
grep -q "a partial batch of 3 rows runs on the plan for 4" "$work/rows3/err.txt" ||
  fail "3 rows did not run padded on the 4-row plan"

# Errors come back as messages, not crashes.
if "$work/cmake/train_embed" "$work/missing.dpx" 2>"$work/err.txt"; then fail "a missing file loaded"; fi
grep -q "missing.dpx" "$work/err.txt" || fail "the error does not name the file: $(cat "$work/err.txt")"
"$prefix/bin/dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 -o "$work/infer.dpx" >/dev/null
if "$work/cmake/train_embed" "$work/infer.dpx" 2>"$work/err.txt"; then fail "trained without a train plan"; fi
grep -q "compile it with dpc compile --train" "$work/err.txt" || fail "unhelpful error: $(cat "$work/err.txt")"
echo "embed: ok"
