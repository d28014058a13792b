#!/bin/sh
# dpc train --devices mpi under mpirun, judged against dpc train --devices cpu:NP in one process:
#   train_test.sh MPIEXEC DPC MODEL NP MODE
# data, accumulate, local_sgd, tail, and the model split over the ranks: model, pipeline (1F1B
# over NP stages), gpipe, hybrid (NP/2 replicas of 2 stages), model_tail (3 epochs of the small
# set, evaluated after each): 20 steps give per-step losses identical to --devices cpu:NP, two
# runs give identical losses, and the saved params equal those of --devices cpu:NP.
# MODE_hosts (data_hosts, ...): the same under --pretend-hosts 2, whose all-reduce sums within
# each pretended host first: losses within 1e-5 (relative) of cpu:NP's, identical run to run.
# hybrid_tail: hybrid on the 201 samples, whose last batch of 9 does not split over 2 replicas,
# is refused before the first step, naming the batch.
# resume: 10 steps with --checkpoint, then a resumed run to step 20, give the losses of 20 steps
# uninterrupted. reshard: a checkpoint of 2 ranks (4 when NP is 2) resumed on NP ranks gives
# the losses of --devices cpu:NP resumed from it. mismatch: ranks started with different
# options are refused before the first step, naming the rank. sigterm: SIGTERM to mpirun stops
# every rank at one step with a checkpoint, and resuming continues identically. kill: rank 1 killed with SIGKILL
# mid-run ends the run non-zero (mpirun ends the job itself and names the rank) and no rank is
# left running. kill_recovery: the same under mpirun --enable-recovery, which leaves the job to
# dpc: the others give up on rank 1 within --timeout (5 s) plus slack, naming it, its host and
# the step, and end the job (MPI_Abort). OpenMPI 4.1 then exits 0 all the same, so the message,
# the time and the processes are what is judged.
# MODE_x2 (data_x2, ...): NP ranks of 2 devices each (--devices mpi:cpu:2) against
# --devices cpu:2NP: the devices of a rank sum in memory first, so losses within 1e-5,
# identical run to run.
# MODE_async (data_async, resume_async, sigterm_async, kill_recovery_async, data_async_hosts,
# data_async_x2): the
# same with the asynchronous parameter server at staleness 0 (--sync async --staleness 0), its
# server on rank 0 and a worker on every device, against the same in one process: identical
# losses and params, with hosts and several devices a rank too (the server sums the workers'
# gradients in worker order wherever they ran). stale: staleness 2 across the ranks ends with
# every gradient applied at most 2 updates late, and a lower loss than it began with.
mpiexec=$1 dpc=$2 model=$3 np=$4 mode=$5
hosts= devs=mpi ref=$np tol= sync=
case $mode in *_hosts)
  mode=${mode%_hosts}
  hosts="--pretend-hosts 2" tol=1
  ;;
esac
case $mode in *_x2)
  mode=${mode%_x2}
  devs=mpi:cpu:2 ref=$((np * 2)) tol=1
  ;;
esac
case $mode in *_async)
  mode=${mode%_async}
  sync="--sync async --staleness 0" tol=
  ;;
esac
# Containers often forbid the cross-process memory attach OpenMPI's shared memory uses for
# large messages; copying through the shared segment works everywhere.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
fail() {
  echo "FAIL: $*"
  rm -rf "$work"
  exit 1
}
mpi() { # mpi NP ARGS...: dpc train under mpirun, output into $work/out
  n=$1
  shift
  # shellcheck disable=SC2086 # hosts is a list of options
  timeout 300 "$mpiexec" --allow-run-as-root --oversubscribe -np "$n" "$dpc" train "$model" \
    --devices "$devs" --threads 1 $hosts $sync "$@" </dev/null >"$work/out" 2>&1
}
losses() { # the per-step losses of a --log file, one a line (the parameter server's: an update)
  grep -E '"batch"|"staleness": \[' "$1" | sed -E 's/.*"loss": ([^,]*),.*/\1/'
}
same() { # same A B WHAT: the two logs' per-step losses are identical and there are some
  losses "$1" >"$work/a"
  losses "$2" >"$work/b"
  [ -s "$work/a" ] || fail "$3: no steps logged"
  cmp -s "$work/a" "$work/b" || {
    paste "$work/a" "$work/b" | head -25
    fail "$3: the losses differ"
  }
}

case $mode in
data) extra="--steps 20" ;;
accumulate) extra="--steps 20 --accumulate 2" ;;
local_sgd) extra="--steps 20 --local-sgd 3" ;;
model) extra="--steps 20 --strategy model" ;;
pipeline) extra="--steps 20 --strategy pipeline --stages $np --microbatches 4" ;;
gpipe) extra="--steps 20 --strategy pipeline --stages $np --microbatches 4 --pipeline-schedule gpipe" ;;
hybrid) extra="--steps 20 --strategy hybrid --mp 2 --accumulate 2" ;;
# with 2 devices a rank: each rank's devices a pipeline, data parallel across the ranks
pipeline_dp) extra="--steps 20 --strategy pipeline --stages 2 --dp $np --microbatches 2" ;;
tail | model_tail | hybrid_tail)
  # 201 random samples: batches of 64, then 9, which runs on the first device alone
  python3 - "$work" <<'PY' || fail "could not write the data"
import random, struct, sys
def save(path, descr, shape, fmt, data):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(map(str, shape)) + ("," if len(shape) == 1 else ""))
    hdr += " " * (64 - (10 + len(hdr) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%d%s" % (len(data), fmt), *data))
random.seed(7)
n = 201
save(sys.argv[1] + "/x.npy", "<f4", (n, 28, 28), "f", [random.gauss(0, 1) for _ in range(n * 784)])
save(sys.argv[1] + "/y.npy", "<i4", (n,), "i", [random.randrange(10) for _ in range(n)])
PY
  extra="--epochs 3 --data $work/x.npy,$work/y.npy --test-data $work/x.npy,$work/y.npy"
  [ "$mode" = model_tail ] && extra="$extra --strategy model"
  if [ "$mode" = hybrid_tail ]; then
    # the last batch of 9 does not split over 2 replicas of 2 stages: refused before the first
    # step, not after an epoch
    mpi "$np" --strategy hybrid --mp 2 --data "$work/x.npy,$work/y.npy" --log "$work/h.jsonl"
    rc=$?
    cat "$work/out"
    [ $rc -ne 0 ] || fail "a last batch that does not split over the replicas was taken"
    grep -q "the last batch of each epoch has 9 of .* 201 samples, which do not split over the 2 replicas across ranks" "$work/out" ||
      fail "no message naming the last batch and the replicas"
    [ "$(losses "$work/h.jsonl" 2>/dev/null | wc -l)" -eq 0 ] || fail "steps ran before the refusal"
    rm -rf "$work"
    echo "ok: a last batch hybrid cannot split refused before the first step"
    exit 0
  fi
  ;;
resume | reshard)
  first=2 # reshard: from 2 ranks to NP, or from 4 to 2
  [ "$np" = 2 ] && first=4
  [ "$mode" = resume ] && first=$np
  mpi "$first" --steps 10 --checkpoint "$work/ck.safetensors" --log "$work/a.jsonl" || {
    cat "$work/out"
    fail "the first 10 steps on $first ranks failed"
  }
  mpi "$np" --steps 20 --resume "$work/ck.safetensors" --log "$work/b.jsonl" || {
    cat "$work/out"
    fail "resuming on $np ranks failed"
  }
  cat "$work/out"
  if [ "$mode" = resume ]; then
    mpi "$np" --steps 20 --log "$work/whole.jsonl" || fail "20 steps on $np ranks failed"
    cat "$work/a.jsonl" "$work/b.jsonl" >"$work/ab.jsonl"
    same "$work/whole.jsonl" "$work/ab.jsonl" "10 steps, then resumed to 20, on $np ranks"
  else
    # shellcheck disable=SC2086 # sync is a list of options
    "$dpc" train "$model" --devices "cpu:$np" $sync --steps 20 --resume "$work/ck.safetensors" \
      --log "$work/one.jsonl" >"$work/out" 2>&1 || fail "resuming on cpu:$np failed"
    same "$work/one.jsonl" "$work/b.jsonl" "a $first-rank checkpoint resumed on $np ranks"
  fi
  [ "$(losses "$work/b.jsonl" | wc -l)" -eq 10 ] || fail "the resumed run did not run 10 steps"
  rm -rf "$work"
  echo "ok: $mode on $np ranks: losses identical"
  exit 0
  ;;
mismatch)
  timeout 120 "$mpiexec" --allow-run-as-root --oversubscribe \
    -np 1 "$dpc" train "$model" --devices mpi --steps 3 --lr 0.05 : \
    -np 1 "$dpc" train "$model" --devices mpi --steps 3 --lr 0.1 </dev/null >"$work/out" 2>&1
  rc=$?
  cat "$work/out"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "mpirun exited $rc"
  grep -q "rank 1 planned a different step than rank 0" "$work/out" ||
    fail "no message naming the rank whose plan differs"
  rm -rf "$work"
  echo "ok: different options refused before the first step"
  exit 0
  ;;
sigterm)
  # SIGTERM to mpirun mid-run: every rank stops after the same step, rank 0 checkpoints, the
  # job ends without MPI_Abort and nothing is left; resuming to 10 steps past the stop gives
  # the losses of an uninterrupted run to that step
  # shellcheck disable=SC2086 # sync is a list of options
  setsid "$mpiexec" --allow-run-as-root --oversubscribe -np "$np" "$dpc" train "$model" \
    --devices mpi --threads 1 $sync --steps 100000 --checkpoint "$work/ck.safetensors" \
    --log "$work/a.jsonl" </dev/null >"$work/out" 2>&1 &
  mp=$!
  n=0
  while [ "$(losses "$work/a.jsonl" 2>/dev/null | wc -l)" -lt 20 ] && [ $n -lt 600 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  kill -TERM "$mp"
  n=0
  while kill -0 "$mp" 2>/dev/null && [ $n -lt 300 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  if kill -0 "$mp" 2>/dev/null; then
    kill -9 -- -"$mp" 2>/dev/null
    fail "mpirun still running 30 s after SIGTERM"
  fi
  wait "$mp"
  rc=$?
  cat "$work/out"
  [ $rc -ne 0 ] || fail "mpirun exited 0 after SIGTERM"
  grep -q "stopped by SIGTERM after step" "$work/out" || fail "no stop message"
  grep -q "MPI_ABORT" "$work/out" && fail "a rank aborted the job instead of stopping"
  [ -s "$work/ck.safetensors" ] || fail "no checkpoint written"
  left=$(pgrep -f "log $work/a.jsonl")
  [ -z "$left" ] || fail "processes left: $left"
  done_steps=$(losses "$work/a.jsonl" | wc -l)
  to=$((done_steps + 10))
  mpi "$np" --steps $to --resume "$work/ck.safetensors" --log "$work/b.jsonl" || {
    cat "$work/out"
    fail "resuming after SIGTERM failed"
  }
  mpi "$np" --steps $to --log "$work/whole.jsonl" || fail "$to steps uninterrupted failed"
  cat "$work/a.jsonl" "$work/b.jsonl" >"$work/ab.jsonl"
  same "$work/whole.jsonl" "$work/ab.jsonl" "stopped by SIGTERM at step $done_steps and resumed"
  rm -rf "$work"
  echo "ok: SIGTERM stopped $np ranks at step $done_steps with a checkpoint; resumed identically"
  exit 0
  ;;
kill | kill_recovery)
  batch=$((32 * np))
  recovery=
  [ "$mode" = kill ] || recovery=--enable-recovery
  # a run of its own session, so the test can end whatever is left of it
  # shellcheck disable=SC2086 # sync is a list of options
  setsid "$mpiexec" --allow-run-as-root --oversubscribe $recovery -np "$np" "$dpc" train "$model" \
    --devices mpi --threads 1 $sync --batch $batch --epochs 20 --timeout 5 --log "$work/k.jsonl" \
    </dev/null >"$work/out" 2>&1 &
  mp=$!
  n=0
  while [ "$(cat "$work/k.jsonl" 2>/dev/null | wc -l)" -lt 5 ] && [ $n -lt 600 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  victim=
  for p in $(pgrep -f "log $work/k.jsonl"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && victim=$p
  done
  [ -n "$victim" ] || {
    kill -9 -- -"$mp" 2>/dev/null
    fail "rank 1 never ran 5 steps"
  }
  kill -9 "$victim"
  t0=$(date +%s)
  # the run must end by itself within the timeout (5 s) and some slack
  n=0
  while kill -0 "$mp" 2>/dev/null && [ $n -lt 300 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  took=$(($(date +%s) - t0))
  if kill -0 "$mp" 2>/dev/null; then
    kill -9 -- -"$mp" 2>/dev/null
    fail "mpirun still running 30 s after rank 1 was killed"
  fi
  wait "$mp"
  rc=$?
  cat "$work/out"
  left=$(pgrep -f "log $work/k.jsonl")
  [ -z "$left" ] || {
    kill -9 $left 2>/dev/null
    fail "processes left: $left"
  }
  if [ -z "$recovery" ]; then
    [ $rc -ne 0 ] || fail "mpirun exited 0 although rank 1 was killed"
    grep -q "process rank 1 .* exited on signal 9" "$work/out" || fail "no message naming rank 1"
  else
    [ $took -le 15 ] || fail "the run took $took s to end, past the 5 s timeout and slack"
    # (the parameter server names the worker whose step it waited for, and its sub-batch)
    grep -Eq "error: (worker 1: )?step [0-9]+( \(sub-batch [0-9]+\))?: rank [0-9] \(cpu:[0-9] on [^)]*\) waited 5.0 s for rank 1 \(cpu:1 on [^)]*\).*stuck or gone" "$work/out" ||
      fail "no message naming rank 1, its host and the step"
  fi
  rm -rf "$work"
  echo "ok: rank 1 killed, the run ended in ${took} s with exit $rc, nothing left"
  exit 0
  ;;
stale)
  mpi "$np" --sync async --staleness 2 --steps 200 --log "$work/s.jsonl" || {
    cat "$work/out"
    fail "staleness 2 on $np ranks failed"
  }
  cat "$work/out"
  [ "$(losses "$work/s.jsonl" | wc -l)" -eq 200 ] || fail "not 200 updates logged"
  worst=$(grep -o '"staleness": [0-9]*' "$work/s.jsonl" | sed 's/.* //' | sort -n | tail -1)
  [ "$worst" -le 2 ] || fail "a gradient applied $worst updates late, past the bound of 2"
  losses "$work/s.jsonl" | awk 'NR <= 20 { a += $1 } NR > 180 { b += $1 } END {
    if (!(b < a)) { print "first 20: " a / 20 ", last 20: " b / 20; exit 1 } }' ||
    fail "the loss did not fall"
  rm -rf "$work"
  echo "ok: staleness 2 on $np ranks: 200 updates, at most $worst late, the loss falling"
  exit 0
  ;;
*) fail "unknown mode $mode" ;;
esac

# shellcheck disable=SC2086 # extra and sync are lists of options
"$dpc" train "$model" --devices "cpu:$ref" --threads 1 $extra $sync --log "$work/one.jsonl" \
  --save "$work/one.safetensors" >"$work/out" 2>&1 || {
  cat "$work/out"
  fail "dpc train --devices cpu:$ref failed"
}
for run in 1 2; do
  # shellcheck disable=SC2086
  mpi "$np" $extra --log "$work/mpi$run.jsonl" --save "$work/p$run.safetensors" \
    --trace "$work/trace$run.json" || {
    cat "$work/out"
    fail "mpirun -np $np (run $run) failed"
  }
done
cat "$work/out"
if [ -n "$hosts" ]; then
  grep -q "on 2 pretended hosts" "$work/out" || fail "no note of the pretended hosts"
fi
if [ -n "$tol" ]; then
  losses "$work/one.jsonl" >"$work/a"
  losses "$work/mpi1.jsonl" >"$work/b"
  [ -s "$work/a" ] && [ "$(wc -l <"$work/a")" -eq "$(wc -l <"$work/b")" ] || fail "steps differ"
  paste "$work/a" "$work/b" | awk '{ d = $1 - $2; if (d < 0) d = -d; r = $1 < 0 ? -$1 : $1;
    if (d > 1e-5 * r) { print "step " NR ": " $1 " against " $2; bad = 1 } } END { exit bad }' ||
    fail "$np ranks ($devs $hosts): losses beyond 1e-5 of cpu:$ref's"
else
  same "$work/one.jsonl" "$work/mpi1.jsonl" "$np ranks against cpu:$ref in one process"
  cmp -s "$work/one.safetensors" "$work/p1.safetensors" ||
    fail "the params saved differ from cpu:$ref's"
fi
same "$work/mpi1.jsonl" "$work/mpi2.jsonl" "two runs of $np ranks"
# one trace from rank 0 with every rank's steps (a track per device, named by its rank; the
# parameter server's trace is its updates, on rank 0)
track="rank $((np - 1)): cpu:"
[ -n "$sync" ] && track="cpu:0"
grep -q "\"$track" "$work/trace1.json" || fail "the trace has no track '$track'"
# (a placement may leave a device without steps; data parallel steps on every one)
busy=$(grep -o '"ph": "X", "pid": [0-9]*' "$work/trace1.json" | sort -u | wc -l)
want=2
[ "$mode" = data ] && want=$ref
[ -n "$sync" ] && want=1
[ "$busy" -ge $want ] || fail "the trace has steps of $busy devices, fewer than $want"
cmp -s "$work/p1.safetensors" "$work/p2.safetensors" || fail "two runs saved different params"
if [ -z "$tol" ] && { [ "$mode" = tail ] || [ "$mode" = model_tail ]; }; then
  # the evaluations after each epoch (rank 0 alone evaluates, on every rank's params)
  grep '"epoch_end"' "$work/one.jsonl" | grep -o '"test_[a-z]*": [^,}]*' >"$work/a"
  grep '"epoch_end"' "$work/mpi1.jsonl" | grep -o '"test_[a-z]*": [^,}]*' >"$work/b"
  [ -s "$work/a" ] || fail "no evaluation logged"
  cmp -s "$work/a" "$work/b" || fail "the evaluations differ from cpu:$ref's"
fi
steps=$(losses "$work/mpi1.jsonl" | wc -l)
rm -rf "$work"
echo "ok: $np ranks ($devs $hosts $sync), $mode: $steps steps' losses against cpu:$ref's and run to run"
