#!/bin/sh
# The application's own communicator (tests/mpi/test_mpi_comm.c): 4 ranks in two halves, each
# half training over its 2 ranks; each half's per-step losses equal --devices cpu:2's.
#   comm_test.sh MPIEXEC TEST_BINARY DPC MODEL
mpiexec=$1 bin=$2 dpc=$3 model=$4
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
fail() {
  echo "FAIL: $*"
  rm -rf "$work"
  exit 1
}
losses() { grep '"batch"' "$1" | sed -E 's/.*"loss": ([^,]*),.*/\1/'; }
timeout 300 "$mpiexec" --allow-run-as-root --oversubscribe -np 4 "$bin" "$model" 10 \
  "$work/a.jsonl" "$work/b.jsonl" </dev/null >"$work/out" 2>&1
rc=$?
cat "$work/out"
[ $rc -eq 0 ] && grep -q COMM-OK "$work/out" || fail "the two halves did not both train ($rc)"
"$dpc" train "$model" --devices cpu:2 --threads 1 --steps 10 --log "$work/one.jsonl" \
  >"$work/out" 2>&1 || fail "dpc train --devices cpu:2 failed"
losses "$work/one.jsonl" >"$work/l1"
[ "$(wc -l <"$work/l1")" -eq 10 ] || fail "cpu:2 did not log 10 steps"
for h in a b; do
  losses "$work/$h.jsonl" >"$work/l2"
  cmp -s "$work/l1" "$work/l2" || {
    paste "$work/l1" "$work/l2"
    fail "half $h: the losses differ from cpu:2's"
  }
done
rm -rf "$work"
echo "ok: two halves of 4 ranks trained on their own communicators, each as cpu:2"
