#!/bin/sh
# dpc serve --devices mpi under mpirun: fashion_mlp compiled split over NP devices (--batch 8
# --batch-sizes 1,2,4) served by NP ranks, rank 0 listening on a free port. A 1-row and a 3-row
# request answer what dpc run gives for the same rows (within 1e-6); 100 threads x 5 requests of
# 1 to 3 rows all right; the binary data extension; /metrics counts one instance per rank; SIGTERM
# to rank 0 under load answers every accepted request and every rank exits 0. Refused: more ranks
# than the artifact's devices (every rank exits non-zero, naming both counts), a folder, a
# --devices other than mpi. Every wait has a timeout and every job is killed at the end.
#   serve_test.sh MPIEXEC DPC SOURCE_DIR NP
mpiexec=$1 dpc=$2 src=$3 np=$4
fails=0
work=$(mktemp -d)
. "$src/tests/cli/lib.sh"
py=/usr/bin/python3
client="$src/tests/cli/serve_client.py"
# Containers often forbid the cross-process memory attach OpenMPI's shared memory uses for
# large messages; copying through the shared segment works everywhere.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
jobs=""
cleanup() {
  for j in $jobs; do
    pkill -KILL -P "$j" 2>/dev/null
    kill -KILL "$j" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

expect 0 "compile fashion_mlp split over $np devices" -- \
  "$dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 --batch-sizes 1,2,4 \
  --devices cpu:$np --strategy model -o "$work/m.dpx"
contains "$work/out" "split over cpu:$np" "the artifact is split over cpu:$np"
$py "$client" npy "$work/x.npy" 8 7
expect 0 "dpc run on 8 rows" -- "$dpc" run "$work/m.dpx" --input "x=$work/x.npy" --output-dir "$work/ref"

# start NAME NP ARTIFACT: the job in the background; sets $job, $url once rank 0 is ready (30 s)
start() {
  name=$1 n=$2 art=$3
  timeout 300 "$mpiexec" --allow-run-as-root --oversubscribe -np "$n" "$dpc" serve "$art" \
    --devices mpi --port 0 </dev/null >"$work/$name.out" 2>"$work/$name.err" &
  job=$!
  jobs="$jobs $job"
  started "$name: rank 0 of $n serving" "$work/$name.err" \
    "s/^dpc serve: serving fashion_mlp on http:\/\/127\.0\.0\.1:\([0-9]*\), split over $n ranks$/\1/p" $job
}

# rank0 JOB: the pid of the job's rank 0 (under timeout, mpirun: the descendant whose
# environment says so)
rank0() {
  for q in $(pgrep -P "$1") $(for c in $(pgrep -P "$1"); do pgrep -P "$c"; done); do
    tr '\0' '\n' <"/proc/$q/environ" 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=0$' && echo "$q"
  done
}

if start main $np "$work/m.dpx"; then
  $py "$client" same "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  $py "$client" load "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  $py "$client" binary "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  curl -s --max-time 10 "$url/metrics" >"$work/metrics"
  contains "$work/metrics" "^dpc_instances{model=\"fashion_mlp\"} $np$" \
    "one instance per rank by default ($np)"
  r0=$(rank0 $job)
  if [ -z "$r0" ]; then
    echo "FAIL rank 0's process not found"
    fails=$((fails + 1))
  else
    $py "$client" drain "$url" "$work/x.npy" "$work/ref/logits.npy" "$r0" || fails=$((fails + 1))
  fi
  exits_ok $job "SIGTERM to rank 0 drains it, and every rank exits 0" "$work/main.err"
  contains "$work/main.err" "SIGTERM: drained" "rank 0 says it drained"
fi

# more ranks than devices: every rank fails before serving, naming both counts
more=$((np + 1))
expect 1 "$more ranks for $np devices are refused" -- timeout 120 "$mpiexec" --allow-run-as-root \
  --oversubscribe -np $more "$dpc" serve "$work/m.dpx" --devices mpi --port 0
contains "$work/err" "split over $np devices, and $more processes take part" \
  "the refusal names the devices and the processes"
mkdir -p "$work/repo/mlp" && cp "$work/m.dpx" "$work/repo/mlp/"
expect 1 "a folder is refused with --devices mpi" -- timeout 120 "$mpiexec" --allow-run-as-root \
  --oversubscribe -np $np "$dpc" serve "$work/repo" --devices mpi --port 0
contains "$work/err" "serves one artifact compiled split over the ranks" "the folder refusal says why"
expect 2 "--devices cpu:2 is a usage error" -- "$dpc" serve "$work/m.dpx" --devices cpu:2
contains "$work/err" "takes mpi" "the usage error names mpi"

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
