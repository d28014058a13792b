#!/bin/sh
# Data-parallel fashion_mlp training on 2 MPI ranks of one core each against --devices cpu:2 in
# one process: samples/s over the trained steps (the epoch line; start-up, compilation and
# data loading excluded), rounds interleaved so both see the same machine load.
#   bench/mpi_train.sh [DPC] [ROUNDS] [STEPS]
# BENCH_ARGS adds options to both runs: BENCH_ARGS="--sync async --staleness 0" measures the
# parameter server (its server on rank 0) the same way.
dpc=${1:-build/tools/dpc/dpc} rounds=${2:-3} steps=${3:-400} extra=${BENCH_ARGS:-}
model=examples/fashion_mlp.graph
# OpenMPI's defaults for shared memory (a single copy by cross-process memory attach where the
# kernel allows it); BENCH_NO_SINGLE_COPY=1 copies through the shared segment instead, as the
# tests do for containers that forbid the attach.
[ -n "$BENCH_NO_SINGLE_COPY" ] && export OMPI_MCA_btl_vader_single_copy_mechanism=none
rate() { sed -nE 's/^epoch .* ([0-9]+) samples\/s$/\1/p' | tail -1; }
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null)${extra:+, options: $extra}"
echo "round  cpu:2 (1 process)  mpi (2 ranks)   samples/s"
i=1
while [ $i -le "$rounds" ]; do
  # shellcheck disable=SC2086 # extra is a list of options
  one=$("$dpc" train $model --devices cpu:2 --steps "$steps" $extra 2>&1 | rate)
  # shellcheck disable=SC2086
  two=$(mpirun --allow-run-as-root --bind-to core -np 2 "$dpc" train $model --devices mpi \
    --threads 1 --steps "$steps" $extra </dev/null 2>&1 | rate)
  echo "$i      $one                $two"
  i=$((i + 1))
done
