#!/bin/sh
# Compiled artifacts (.dpx) that are damaged, and dpc compile's output when it fails or is
# stopped. An artifact cut short or with bytes flipped anywhere (header, plans, code, checksum)
# is refused with exit 1 and a message naming the file, never a crash; check/print/plan say
# what a .dpx is; a failed, stopped or killed compile leaves the old output byte-identical and
# (unless killed) no temporary files; a killed one's go at the next compile.
#   artifact_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"

same() { # same FILE1 FILE2 DESCRIPTION
  if cmp -s "$1" "$2"; then echo "ok   $3"; else
    echo "FAIL $3: $1 differs from $2"
    fails=$((fails + 1))
  fi
}
no_leftovers() { # no_leftovers DESCRIPTION: nothing but keep.dpx by that name in $work/out_dir
  left=$(ls "$work/out_dir" | grep -v '^keep\.dpx$')
  if [ -z "$left" ]; then echo "ok   $1"; else
    echo "FAIL $1: left behind: $left"
    fails=$((fails + 1))
  fi
}
size_of() { wc -c <"$1" | tr -d ' '; }
# Flip every bit of the byte at offset $2 of file $1.
flip() {
  b=$(od -An -tu1 -j"$2" -N1 "$1" | tr -d ' ')
  # shellcheck disable=SC2059
  printf "\\$(printf %03o $((b ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
# A damaged artifact: every command that takes one fails with exit 1, naming the file.
refused() { # refused FILE DESCRIPTION
  expect 1 "run: $2" -- "$dpc" run "$1" --input "x=$src/tests/cli/mlp/x.npy" --output-dir "$work/o"
  contains "$work/err" "$1" "run names the file: $2"
  expect 1 "train: $2" -- "$dpc" train "$1" --steps 1 --quiet
  contains "$work/err" "$1" "train names the file: $2"
  expect 1 "check: $2" -- "$dpc" check "$1"
  contains "$work/err" "$1" "check names the file: $2"
}

mlp=$src/examples/fashion_mlp.graph
expect 0 "compile fashion_mlp --train" -- "$dpc" compile "$mlp" --train --batch 8 --total-steps 7500 -o "$work/a.dpx"
expect 0 "check a whole artifact" -- "$dpc" check "$work/a.dpx"
contains "$work/out" "a.dpx: ok: compiled artifact for .*plans: infer train eval" "check says what it holds"
expect 0 "train the whole artifact" -- "$dpc" train "$work/a.dpx" --steps 2 --quiet

# print and plan take models; they say what a .dpx is, also when it is named otherwise
cp "$work/a.dpx" "$work/renamed.so"
for cmd in print plan; do
  for f in a.dpx renamed.so; do
    expect 1 "$cmd $f" -- "$dpc" $cmd "$work/$f"
    contains "$work/err" "$f is a compiled artifact" "$cmd $f says it is a compiled artifact"
    contains "$work/err" "dpc run, dpc train and dpc check take it" "$cmd $f says which commands take it"
  done
done
expect 0 "check an artifact named .so" -- "$dpc" check "$work/renamed.so"

size=$(size_of "$work/a.dpx")
# Where the plans are: the blob starts with DPCA; the code sits in .text.
blob=$(grep -abo DPCA "$work/a.dpx" | head -1 | cut -d: -f1)
text=$(LC_ALL=C readelf -SW "$work/a.dpx" | sed -n 's/.* \.text *PROGBITS *[0-9a-f]* \([0-9a-f]*\) .*/\1/p')
text=$(printf %d "0x$text")
echo "     $size bytes, plans at $blob, code at $text"

# cut short at 20 points, from the ELF header to the last byte of the checksum
i=0
for at in 3 64 1000 $((size / 8)) $((size / 4)) $((size / 3)) $((text + 100)) $((size / 2)) \
  $((blob + 10)) $((blob + 200)) $((blob + 2000)) $((size * 2 / 3)) $((size * 3 / 4)) \
  $((size * 7 / 8)) $((size - 4096)) $((size - 600)) $((size - 100)) $((size - 16)) \
  $((size - 8)) $((size - 1)); do
  i=$((i + 1))
  head -c "$at" "$work/a.dpx" >"$work/cut$i.dpx"
  refused "$work/cut$i.dpx" "cut at byte $at"
done
contains "$work/err" "does not end in dpc's checksum" "a cut artifact is said to be cut short"
contains "$work/err" "compile it again" "and how to get a whole one"

# one byte flipped at 20 offsets: ELF header, program headers, code, plans, symbols, checksum
i=0
for at in 0 4 18 40 70 $((text)) $((text + 257)) $((text + 4000)) $((blob)) $((blob + 5)) \
  $((blob + 40)) $((blob + 300)) $((blob + 3000)) $((size / 2 + 11)) $((size * 2 / 3)) \
  $((size - 3000)) $((size - 300)) $((size - 20)) $((size - 12)) $((size - 3)); do
  i=$((i + 1))
  cp "$work/a.dpx" "$work/flip$i.dpx"
  flip "$work/flip$i.dpx" "$at"
  refused "$work/flip$i.dpx" "byte $at flipped"
done
expect 1 "check flipped plans" -- "$dpc" check "$work/flip10.dpx"
contains "$work/err" "flip10.dpx is damaged" "a flipped byte is reported as damage"

# the damage first reported: cut at 65444, or eight 0xff bytes written there
if [ "$size" -gt 65460 ]; then
  head -c 65444 "$work/a.dpx" >"$work/half.dpx"
  expect 1 "train the half artifact" -- "$dpc" train "$work/half.dpx" --steps 5
  cp "$work/a.dpx" "$work/ff.dpx"
  printf '\377\377\377\377\377\377\377\377' | dd of="$work/ff.dpx" bs=1 seek=65444 conv=notrunc 2>/dev/null
  expect 1 "train with 0xff at 65444" -- "$dpc" train "$work/ff.dpx" --steps 5
  contains "$work/err" "ff.dpx is damaged" "the error names the damaged file"
fi

# ---- dpc compile writes beside its output and renames: the old file survives any failure ----
mkdir -p "$work/out_dir"
keep=$work/out_dir/keep.dpx
expect 0 "compile keep.dpx" -- "$dpc" compile "$mlp" --batch 4 -o "$keep"
cp "$keep" "$work/keep.orig"
no_leftovers "a compile leaves only its output"
# the system's linker, failing: ld removes the file it was told to write
printf '#!/bin/sh\nexec cc "$@" -ldpc_no_such_library\n' >"$work/badcc"
chmod +x "$work/badcc"
expect 1 "a failing link" -- env CC="$work/badcc" "$dpc" compile "$mlp" --batch 2 -o "$keep"
contains "$work/err" "linking '.*out_dir/keep.dpx' failed" "the link failure names the output"
same "$keep" "$work/keep.orig" "a failing link leaves keep.dpx byte-identical"
no_leftovers "a failing link leaves no temporaries"
expect 1 "a missing linker" -- env CC="$work/no-such-cc" "$dpc" compile "$mlp" --batch 2 -o "$keep"
same "$keep" "$work/keep.orig" "a missing linker leaves keep.dpx byte-identical"
no_leftovers "a missing linker leaves no temporaries"
expect 1 "an output folder that does not exist" -- "$dpc" compile "$mlp" -o "$work/nowhere/x.dpx"

# A linker that waits: a signal arrives while dpc compile is linking.
cat >"$work/slowcc" <<EOS
#!/bin/sh
echo \$\$ >"$work/linking"
exec sleep 60
EOS
chmod +x "$work/slowcc"
stop_while_linking() { # stop_while_linking SIGNAL STATUS
  rm -f "$work/linking"
  env --default-signal=INT CC="$work/slowcc" "$dpc" compile "$mlp" --batch 2 -o "$keep" \
    >"$work/out" 2>"$work/err" &
  pid=$!
  n=0
  while [ ! -s "$work/linking" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
  kill -"$1" "$pid"
  wait "$pid"
  got=$?
  linker=$(cat "$work/linking" 2>/dev/null)
  if [ "$got" -eq "$2" ]; then echo "ok   SIG$1 while linking: exit $got"; else
    echo "FAIL SIG$1 while linking: exit $got, expected $2"
    sed 's/^/    /' "$work/out" "$work/err" | head
    fails=$((fails + 1))
  fi
  same "$keep" "$work/keep.orig" "SIG$1 while linking leaves keep.dpx byte-identical"
}
stop_while_linking INT 130
contains "$work/err" "interrupted: '.*keep.dpx' was not written" "the interrupt is reported"
no_leftovers "SIGINT while linking leaves no temporaries"
if kill -0 "$linker" 2>/dev/null; then
  echo "FAIL the linker still runs after SIGINT"
  kill "$linker"
  fails=$((fails + 1))
else echo "ok   the linker was stopped too"; fi
stop_while_linking TERM 143
no_leftovers "SIGTERM while linking leaves no temporaries"
stop_while_linking KILL 137
kill "$linker" 2>/dev/null
expect 0 "the kept artifact still runs" -- "$dpc" check "$keep"
if ls "$work/out_dir" | grep -q "^keep\.dpx\.tmp\.$pid\.o$"; then
  echo "ok   SIGKILL leaves the object file"
else
  echo "FAIL SIGKILL was expected to leave keep.dpx.tmp.$pid.o"
  fails=$((fails + 1))
fi
expect 0 "compile again after SIGKILL" -- "$dpc" compile "$mlp" --batch 2 -o "$keep"
no_leftovers "the next compile removes what the killed one left"
expect 0 "the new artifact checks" -- "$dpc" check "$keep"

# GPU code (--backend cuda): a plain file of plans, CUBIN and PTX, checked like the host's
if "$dpc" version | grep -q "cuda codegen: built in"; then
  gpu="$work/gpu.dpx"
  expect 0 "compile for the GPU" -- "$dpc" compile "$mlp" --backend cuda --train --batch 8 --total-steps 100 -o "$gpu"
  contains "$work/out" "for CUDA sm_80,sm_90 (NVRTC CUBIN, PTX for other GPUs)" "compile names the GPU target"
  expect 0 "check the GPU artifact" -- "$dpc" check "$gpu"
  contains "$work/out" "compiled artifact for CUDA sm_80,sm_90.*plans: infer train eval" "check says it holds GPU code"
  cp "$gpu" "$work/gpu.bin"
  expect 0 "check a GPU artifact named .bin" -- "$dpc" check "$work/gpu.bin"
  expect 1 "run it where no CUDA driver is" -- env DPC_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$dpc" run "$gpu" --input "x=$src/tests/cli/mlp/x.npy" --output-dir "$work/o"
  contains "$work/err" "cuda:0: no CUDA driver found" "run says no CUDA driver was found"
  expect 1 "train it where no CUDA driver is" -- env DPC_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$dpc" train "$gpu" --steps 1 --quiet
  contains "$work/err" "no CUDA driver found" "train says no CUDA driver was found"
  gsize=$(size_of "$gpu")
  head -c $((gsize / 2)) "$gpu" >"$work/gpu_cut.dpx"
  expect 1 "check a GPU artifact cut short" -- "$dpc" check "$work/gpu_cut.dpx"
  contains "$work/err" "does not end in dpc's checksum" "a cut GPU artifact is said to be cut short"
  for at in 5 100 $((gsize / 3)) $((gsize - 40)); do
    cp "$gpu" "$work/gpu_flip.dpx"
    flip "$work/gpu_flip.dpx" "$at"
    expect 1 "check a GPU artifact with byte $at flipped" -- "$dpc" check "$work/gpu_flip.dpx"
    contains "$work/err" "gpu_flip.dpx is damaged" "byte $at flipped is reported as damage"
  done
  expect 2 "--cuda-arch without --backend cuda" -- "$dpc" compile "$mlp" --cuda-arch sm_90 -o "$work/x.dpx"
  expect 2 "GPU code for CPU devices" -- "$dpc" compile "$mlp" --backend cuda --devices cpu:2 --batch 8 -o "$work/x.dpx"
  contains "$work/err" "GPU code runs on GPUs: give them as cuda:0,cuda:1" "is refused, saying how to name GPUs"
  expect 2 "host code for GPUs" -- "$dpc" compile "$mlp" --devices cuda:0,cuda:1 --batch 8 -o "$work/x.dpx"
  contains "$work/err" "compile it with --backend cuda" "is refused, naming the backend"
  expect 0 "GPU code data parallel over two GPUs, none here" -- "$dpc" compile "$mlp" --backend cuda --devices cuda:0,cuda:1 --batch 8 -o "$work/gpu2.dpx"
  contains "$work/out" "data parallel over cuda:0,cuda:1" "compile says the GPUs it is for"
  # stopped while its kernels compile: the artifact it would replace stays as it was
  cp "$gpu" "$work/gpu_keep.dpx"
  "$dpc" compile "$src/examples/fashion_cnn.graph" --backend cuda --train --total-steps 10 --batch 8 \
    -o "$work/gpu_keep.dpx" >"$work/out" 2>"$work/err" &
  pid=$!
  sleep 1
  kill -TERM "$pid"
  wait "$pid"
  got=$?
  if [ "$got" -eq 143 ]; then echo "ok   SIGTERM stops a GPU compile (exit 143)"; else
    echo "FAIL SIGTERM during a GPU compile: exit $got, expected 143"
    fails=$((fails + 1))
  fi
  contains "$work/err" "interrupted: '$work/gpu_keep.dpx' was not written" "the stopped GPU compile says so"
  same "$work/gpu_keep.dpx" "$gpu" "the stopped GPU compile leaves the old artifact byte-identical"
  left=$(ls "$work" | grep '\.tmp\.' || true)
  if [ -z "$left" ]; then echo "ok   the GPU compiles leave no temporary files"; else
    echo "FAIL temporary files left: $left"
    fails=$((fails + 1))
  fi
else
  echo "skip GPU artifacts: this dpc has no CUDA code generation"
fi

if [ "$fails" -ne 0 ]; then
  echo "$fails checks failed"
  exit 1
fi
echo "all checks passed"
