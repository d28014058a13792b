#!/bin/sh
# ThreadSanitizer over the embedding API: libdpcrt built alone with -fsanitize=thread (no LLVM in
# it), examples/embed/infer_embed.c built against it, run on a one-device, a two-device and a
# partial-batch artifact (two threads with their own runners on one loaded model in each), and
# the batcher's test (tests/embed/api_batcher.c: many threads' requests, a full queue, close in
# flight). Any report fails. It builds the runtime of its own (about 30 s on 2 cores); ctest runs it as embed.tsan:
#   tests/embed/tsan_embed.sh SOURCE_DIR WORK_DIR DPC   (DPC: a built dpc, for dpc compile)
set -eu
src=$1 work=$2 dpc=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$work"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
cmake --build "$work/build" --target dpcrt -j2 >/dev/null
lib=$work/build/runtime
cc -std=c11 -Wall -Werror -pthread -fsanitize=thread -g -o "$work/infer_embed" \
  "$src/examples/embed/infer_embed.c" -I"$src/include" -L"$lib" -ldpcrt -Wl,-rpath,"$lib"
g=$src/examples/fashion_mlp.graph
"$dpc" compile "$g" --batch 8 -o "$work/one.dpx" >/dev/null
"$dpc" compile "$g" --batch 8 --devices cpu:2 -o "$work/two.dpx" >/dev/null
"$dpc" compile "$g" --batch 8 --batch-sizes 4 -o "$work/rows.dpx" >/dev/null
for run in "one.dpx" "two.dpx --devices cpu:2" "rows.dpx --rows 3"; do
  set -- $run
  model=$1
  shift
  mkdir -p "$work/out"
  TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$work/infer_embed" "$work/$model" "$work/out" "$@" \
    >"$work/out.txt" 2>"$work/err.txt" || { cat "$work/out.txt" "$work/err.txt"; fail "$run"; }
  ! grep -q "ThreadSanitizer" "$work/err.txt" || { cat "$work/err.txt"; fail "$run: a report"; }
  grep -q '^two threads: the same outputs as one thread$' "$work/out.txt" || fail "$run: threads"
  echo "$run: two threads, ThreadSanitizer clean"
done

cc -std=c11 -Wall -Werror -pthread -fsanitize=thread -g -o "$work/api_batcher" \
  "$src/tests/embed/api_batcher.c" -I"$src/include" -L"$lib" -ldpcrt -Wl,-rpath,"$lib"
"$dpc" compile "$g" --batch 8 --batch-sizes 1,2,4 -o "$work/buckets.dpx" >/dev/null
TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$work/api_batcher" "$work/buckets.dpx" \
  >"$work/out.txt" 2>"$work/err.txt" || { cat "$work/out.txt" "$work/err.txt"; fail "the batcher"; }
! grep -q "ThreadSanitizer" "$work/err.txt" || { cat "$work/err.txt"; fail "the batcher: a report"; }
grep -q '^api_batcher: ok$' "$work/out.txt" || fail "the batcher's checks"
echo "the batcher: ThreadSanitizer clean"
