#!/bin/sh
# The batcher of libdpcrt (tests/embed/api_batcher.c, built against the build tree's library and
# the public header only) on fashion_mlp compiled with plans for 8, 4, 2 and 1 rows:
#   tests/embed/batcher_test.sh SOURCE_DIR WORK_DIR DPC LIBDIR
set -eu
src=$1 work=$2 dpc=$3 lib=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
cc -std=c11 -Wall -Werror -pthread -g -o "$work/api_batcher" "$src/tests/embed/api_batcher.c" \
  -I"$src/include" -L"$lib" -ldpcrt -Wl,-rpath,"$lib"
"$dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 --batch-sizes 1,2,4 \
  -o "$work/mlp.dpx" >/dev/null
"$work/api_batcher" "$work/mlp.dpx" || fail "api_batcher"
