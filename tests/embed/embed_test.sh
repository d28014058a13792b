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

# Errors come back as messages, not crashes.
if "$work/cmake/train_embed" "$work/missing.dpx" 2>"$work/err.txt"; then fail "a missing file loaded"; fi
grep -q "missing.dpx" "$work/err.txt" || fail "the error does not name the file: $(cat "$work/err.txt")"
"$prefix/bin/dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 -o "$work/infer.dpx" >/dev/null
if "$work/cmake/train_embed" "$work/infer.dpx" 2>"$work/err.txt"; then fail "trained without a train plan"; fi
grep -q "compile it with dpc compile --train" "$work/err.txt" || fail "unhelpful error: $(cat "$work/err.txt")"
echo "embed: ok"
