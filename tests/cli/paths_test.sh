#!/bin/sh
# Output paths are checked before the work starts: every option that names a file or folder dpc
# writes (train --save --checkpoint --log --trace, compile -o/--output, print --output, plan --dot
# --json, run --output-dir --outputs) is refused at once, exit 1, with a message naming the option
# and the path, when its folder is missing, is not a folder, or takes no new file (/proc), or when
# the path is a folder; writable paths still work and the check leaves nothing behind.
#   paths_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
model="$src/examples/fashion_mlp.graph"


: >"$work/plain" # a file, used where a folder should be
# refused COMMAND OPTION PATH REASON -- arguments...: exit 1 naming --OPTION and PATH, for REASON
refused() {
  cmd=$1 opt=$2 path=$3 why=$4
  shift 5
  expect 1 "$cmd --$opt $path is refused" -- "$dpc" "$cmd" "$@"
  contains "$work/err" "dpc $cmd: cannot write --$opt '$path': $why" "$cmd --$opt: the message names the path and why"
}

# dpc train, before it opens the data: one epoch would otherwise be trained first
for opt in save checkpoint log trace; do
  refused train $opt /proc/x.out "cannot create a file in the folder '/proc'" -- "$model" --epochs 1 --$opt /proc/x.out
  lacks "$work/err" "opening the data" "train --$opt: refused before any work"
done
refused train save "$work/none/m.safetensors" "the folder '$work/none' does not exist" -- "$model" --epochs 1 --save "$work/none/m.safetensors"
refused train checkpoint "$work/plain/c.safetensors" "'$work/plain' is not a folder" -- "$model" --epochs 1 --checkpoint "$work/plain/c.safetensors"
refused train log "$work" "that is a folder, not a file" -- "$model" --epochs 1 --log "$work"
refused train save "$work/" "that names a folder, not a file" -- "$model" --epochs 1 --save="$work/"

refused compile output /proc/m.dpx "cannot create a file in the folder '/proc'" -- "$model" -o /proc/m.dpx
lacks "$work/err" "compiling" "compile -o: refused before any work"
refused compile output "$work/none/m.dpx" "the folder '$work/none' does not exist" -- "$model" --output "$work/none/m.dpx"
refused print output /proc/m.graph "cannot create a file in the folder '/proc'" -- "$model" --output /proc/m.graph
refused print output "$work/plain/m.graph" "'$work/plain' is not a folder" -- "$model" -o "$work/plain/m.graph"
refused plan dot /proc/p.dot "cannot create a file in the folder '/proc'" -- "$model" --devices cpu:2 --dot /proc/p.dot
refused plan json "$work/none/p.json" "the folder '$work/none' does not exist" -- "$model" --devices cpu:2 --json "$work/none/p.json"
refused run output-dir /proc/out "cannot create a file in the folder '/proc'" -- "$model" --output-dir /proc/out
refused run output-dir "$work/plain" "'$work/plain' is not a folder" -- "$model" --output-dir "$work/plain"
refused run outputs "$work/none/deeper" "the folder '$work/none' does not exist" -- "$model" --outputs "$work/none/deeper"

# writable paths: the work is done and the probe leaves no file behind
expect 0 "print --output to a writable path" -- "$dpc" print "$model" --output "$work/ok.graph"
contains "$work/ok.graph" "model fashion_mlp" "print wrote the model"
expect 0 "train with every output writable" -- "$dpc" train "$model" --steps 2 --quiet --save "$work/m.safetensors" --checkpoint "$work/c.safetensors" --log "$work/l.jsonl" --trace "$work/t.json"
for f in m.safetensors c.safetensors l.jsonl t.json; do
  if [ -s "$work/$f" ]; then echo "ok   train wrote $f"; else
    echo "FAIL train did not write $f"
    fails=$((fails + 1))
  fi
done
if ls -a "$work" | grep -q dpc-write-check; then
  echo "FAIL the write check left a file behind"
  fails=$((fails + 1))
else echo "ok   the write check leaves nothing behind"; fi

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
