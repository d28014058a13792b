#!/bin/sh
# An application on libdpc's trainer: install dpc to a temporary prefix, build
# examples/train_app against it twice (CMake's find_package(dpc) with dpc::dpc, and pkg-config
# dpc-compiler), train examples/fashion_mlp.graph data parallel on cpu:2 with a checkpoint, resume
# from it, and check every step's loss against `dpc train` with the same settings, bit for bit.
#   train_app_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -eu
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
steps=4 more=3

cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(ls "$prefix"/lib*/libdpc.so | head -1)
libdir=$(dirname "$lib")
[ -f "$prefix/include/dpc/train.h" ] || fail "dpc/train.h is not installed"
[ ! -e "$prefix/include/dpc/testing.h" ] || fail "the tests-only dpc/testing.h is installed"
nm -D --defined-only "$lib" | grep -q ' dpc_trainer_run$' || fail "dpc_trainer_run is not exported"

mlp=$src/examples/fashion_mlp.graph
dpc=$prefix/bin/dpc
# what dpc train does: the first run with a checkpoint, the second resuming it
"$dpc" train "$mlp" --devices cpu:2 --steps $steps --checkpoint "$work/dpc.safetensors" \
  --log "$work/first.jsonl" --quiet >/dev/null
"$dpc" train "$mlp" --devices cpu:2 --steps $((steps + more)) --resume "$work/dpc.safetensors" \
  --log "$work/second.jsonl" --quiet >/dev/null
cat "$work/first.jsonl" "$work/second.jsonl" | grep '^{"step"' |
  sed 's/^{"step": \([0-9]*\),.*"loss": \([^,}]*\).*/step \1: loss \2/' >"$work/expected.txt"
[ "$(wc -l <"$work/expected.txt")" -eq $((steps + more)) ] ||
  fail "dpc train logged $(wc -l <"$work/expected.txt") steps, not $((steps + more))"

cmake -S "$src/examples/train_app" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
PKG_CONFIG_PATH=$libdir/pkgconfig
export PKG_CONFIG_PATH
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$work/train_app_pc" "$src/examples/train_app/main.c" \
  $(pkg-config --cflags --libs dpc-compiler) -Wl,-rpath,"$libdir"

for app in "$work/cmake/train_app" "$work/train_app_pc"; do
  rm -f "$work/app.safetensors"
  "$app" "$mlp" $steps $more "$work/app.safetensors" >"$work/out.txt" 2>"$work/err.txt" ||
    { cat "$work/out.txt" "$work/err.txt"; fail "$app failed"; }
  [ -f "$work/app.safetensors" ] || fail "$app wrote no checkpoint"
  grep -q "resumed run: resuming" "$work/err.txt" || fail "$app: the resumed run said nothing"
  if ! cmp -s "$work/expected.txt" "$work/out.txt"; then
    echo "dpc train | $app:"
    paste "$work/expected.txt" "$work/out.txt"
    fail "$app: its losses are not dpc train's"
  fi
  echo "ok   $app: $((steps + more)) steps, the losses of dpc train"
done

# errors come back as messages
if "$work/cmake/train_app" "$work/missing.graph" 1 1 "$work/x.safetensors" 2>"$work/err.txt"; then
  fail "a missing model trained"
fi
grep -q "missing.graph" "$work/err.txt" || fail "the error does not name the file: $(cat "$work/err.txt")"
echo "train_app: ok"
