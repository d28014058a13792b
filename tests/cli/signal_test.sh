#!/bin/sh
# dpc train stopped by a real Ctrl-C (SIGINT) or SIGTERM: the step under way finishes, a
# checkpoint is written (to --checkpoint, else beside --save), the run says where it stopped and
# prints the command that resumes it, and exits 130 / 143; that command, run as printed, continues
# with per-step losses bit-identical to an uninterrupted run (one device, data parallel, pipeline,
# asynchronous with staleness 0, local SGD). A second signal ends the run at once; a damaged
# checkpoint is refused by --resume, naming the tensor.
#   signal_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
model="$src/examples/fashion_mlp.graph"


# Wait (polling, up to 300 s: the machine may be loaded) until FILE has at least N lines
# matching TEXT, or process PID has ended. True when the lines are there.
wait_for() { # wait_for FILE TEXT N PID
  i=0
  while [ $i -lt 3000 ]; do
    n=$(grep -c -- "$2" "$1" 2>/dev/null)
    [ "${n:-0}" -ge "$3" ] && return 0
    kill -0 "$4" 2>/dev/null || return 1
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

# The step number and loss of each step line of a --log file.
losses() { sed -n 's/^{"step": \([0-9]*\), .*"loss": \([^,}]*\).*/\1 \2/p' "$1"; }

# interrupt NAME SIGNAL STATUS CHECKPOINT -- train options...: train with --log NAME.jsonl, send
# SIGNAL once 3 steps are logged, expect STATUS and a checkpoint at CHECKPOINT; run the printed
# resume command; compare every step's loss with an uninterrupted run of the same options.
interrupt() {
  name=$1 sig=$2 status=$3 ck=$4
  shift 5
  "$dpc" train "$model" --log "$work/$name.jsonl" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  if ! wait_for "$work/$name.jsonl" '"step"' 3 $pid; then
    echo "FAIL $name: the run logged no 3 steps (or took over 300 s)"
    fails=$((fails + 1))
    kill -KILL $pid 2>/dev/null
  fi
  kill -$sig $pid 2>/dev/null
  wait $pid
  got=$?
  if [ $got -ne $status ]; then
    echo "FAIL $name: SIG$sig: exit $got, expected $status"
    sed 's/^/    /' "$work/$name.out" "$work/$name.err" | tail -20
    fails=$((fails + 1))
    return
  fi
  echo "ok   $name: SIG$sig ends the run with $status"
  contains "$work/$name.err" "stopped by SIG$sig after step [0-9]* (epoch 1/1, batch [0-9]*/938)" \
    "$name: says where it stopped"
  contains "$work/$name.err" "checkpoint written to $ck; resume with:" "$name: says where the checkpoint is"
  stopped=$(sed -n 's/.*stopped by SIG[A-Z]* after step \([0-9]*\) .*/\1/p' "$work/$name.err")
  logged=$(losses "$work/$name.jsonl" | wc -l)
  if [ -f "$ck" ] && [ "${stopped:-0}" -ge 3 ] && [ "$logged" -eq "$stopped" ]; then
    echo "ok   $name: the checkpoint is there, after step $stopped, the last one logged"
  else
    echo "FAIL $name: checkpoint $ck, stopped after step '$stopped', $logged steps logged"
    fails=$((fails + 1))
  fi
  resume=$(sed -n 's/^  \(.* --resume .*\)$/\1/p' "$work/$name.err")
  case "$resume" in
  *"$model"*" --resume "*) echo "ok   $name: the resume command is the original one plus --resume" ;;
  *)
    echo "FAIL $name: resume command '$resume'"
    fails=$((fails + 1))
    ;;
  esac
  if (eval "$resume --quiet" >"$work/out" 2>"$work/err"); then echo "ok   $name: the printed command resumes"; else
    echo "FAIL $name: the printed command failed:"
    sed 's/^/    /' "$work/err" | head -10
    fails=$((fails + 1))
  fi
  expect 0 "$name: uninterrupted" -- "$dpc" train "$model" --log "$work/$name.ref.jsonl" --quiet "$@"
  losses "$work/$name.jsonl" >"$work/$name.got"
  losses "$work/$name.ref.jsonl" >"$work/$name.want"
  if [ -s "$work/$name.want" ] && cmp -s "$work/$name.got" "$work/$name.want"; then
    echo "ok   $name: stopped and resumed, the $(wc -l <"$work/$name.want") losses are bit-identical"
  else
    echo "FAIL $name: the losses of the stopped and resumed run differ from an uninterrupted run:"
    diff "$work/$name.got" "$work/$name.want" | head -6 | sed 's/^/    /'
    fails=$((fails + 1))
  fi
}

# one device; no --checkpoint: the checkpoint goes beside --save, in a folder whose name the
# printed command must quote for sh
odd="$work/it's a run"
mkdir -p "$odd"
interrupt single INT 130 "$odd/mlp.ckpt.safetensors" -- --steps 200 --save "$odd/mlp.safetensors"
if [ -f "$odd/mlp.safetensors" ]; then echo "ok   single: the resumed run saved the params"; else
  echo "FAIL single: no params saved after the resume"
  fails=$((fails + 1))
fi
interrupt data TERM 143 "$work/dp.safetensors" -- --devices cpu:2 --steps 200 --checkpoint "$work/dp.safetensors"
interrupt pipeline INT 130 "$work/pp.safetensors" -- --strategy pipeline --stages 2 --microbatches 4 --steps 200 --checkpoint "$work/pp.safetensors"
# asynchronous: bit-identical only with staleness 0, where every update is synchronous
interrupt async TERM 143 "$work/as.safetensors" -- --devices cpu:2 --sync async --staleness 0 --steps 200 --checkpoint "$work/as.safetensors"
# local SGD: the replicas differ between averages (every 4 steps); the checkpoint keeps each one's
interrupt localsgd INT 130 "$work/ls.safetensors" -- --devices cpu:2 --local-sgd 4 --steps 200 --checkpoint "$work/ls.safetensors"

# Nowhere to keep the work: the run says so, and how to keep it next time.
"$dpc" train "$model" --steps 200 --log "$work/none.jsonl" >"$work/none.out" 2>"$work/none.err" &
pid=$!
wait_for "$work/none.jsonl" '"step"' 3 $pid
kill -INT $pid
wait $pid
got=$?
if [ $got -eq 130 ]; then echo "ok   no checkpoint path: SIGINT ends the run with 130"; else
  echo "FAIL no checkpoint path: exit $got"
  fails=$((fails + 1))
fi
contains "$work/none.err" "nothing was kept: with --checkpoint FILE.safetensors (or --save" "no checkpoint path: says nothing was kept and how to keep it"

# A second signal stops at once: a slow step (reference kernels, a big batch) is under way when
# it comes, and neither it nor a checkpoint is finished.
"$dpc" train "$model" --backend ref --batch 1024 --steps 30 --log "$work/twice.jsonl" \
  --checkpoint "$work/twice.safetensors" >"$work/twice.out" 2>"$work/twice.err" &
pid=$!
wait_for "$work/twice.jsonl" '"step"' 1 $pid
kill -INT $pid
wait_for "$work/twice.err" "stopping after the step under way" 1 $pid
kill -INT $pid
wait $pid
got=$?
if [ $got -eq 130 ] && [ ! -f "$work/twice.safetensors" ]; then echo "ok   a second SIGINT exits at once with 130, no checkpoint"; else
  echo "FAIL second SIGINT: exit $got, checkpoint $(ls "$work/twice.safetensors" 2>&1)"
  fails=$((fails + 1))
fi
lacks "$work/twice.err" "stopped by SIGINT" "a second SIGINT does not wait for the step"

# A checkpoint with one bit flipped in its last tensor's data: --resume names that tensor.
expect 0 "a checkpoint to damage" -- "$dpc" train "$model" --steps 2 --checkpoint "$work/ck.safetensors" --quiet
hl=$(od -An -t u8 -N 8 "$work/ck.safetensors" | tr -d ' ')
last=$(head -c $((8 + hl)) "$work/ck.safetensors" | tail -c "$hl" | grep -o '"[^"]*":{"dtype"' | tail -1 | cut -d'"' -f2)
size=$(wc -c <"$work/ck.safetensors")
byte=$(od -An -t u1 -j $((size - 1)) -N 1 "$work/ck.safetensors" | tr -d ' ')
printf "\\$(printf %o $((byte ^ 1)))" | dd of="$work/ck.safetensors" bs=1 seek=$((size - 1)) conv=notrunc 2>/dev/null
expect 1 "resume from a damaged checkpoint" -- "$dpc" train "$model" --steps 4 --resume "$work/ck.safetensors"
contains "$work/err" "tensor \"$last\" is damaged" "the error names the damaged tensor ($last)"
expect 1 "init from a damaged file" -- "$dpc" train "$model" --steps 4 --init "$work/ck.safetensors"
contains "$work/err" "tensor \"$last\" is damaged" "--init checks it too"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
