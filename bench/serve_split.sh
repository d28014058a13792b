#!/bin/sh
# A model split over devices, served over HTTP: wide_mlp (7.5 M params) compiled for one device
# and split over two (--devices cpu:2 --strategy model), each --batch 32 --batch-sizes 1,4,16,
# served four ways on this machine's cores: one device, one instance; one device, two instances
# (two copies of nothing: they share the params, but both run on all the cores); split over two
# devices in one process, one instance per device (turns: a pipeline of batches); and split over
# two MPI ranks (mpirun -np 2 dpc serve --devices mpi), one device a rank. bench_http_load offers
# RATES requests/s of one row as raw bytes (the binary extension) to each; after the rates, each
# process's peak resident memory (VmHWM) is read. One results file, with the commit, the time,
# the load and every command.
#   bench/serve_split.sh [BUILD]       (default: build)
# Environment: RATES (default 1000,2000,3000,4000,5000,6000,7000), SECONDS (3), MODEL (wide_mlp),
# OUT (bench/results/DATE-serve-split-http.txt).
set -u
build=${1:-build}
dpc=$build/tools/dpc/dpc
load=$build/bench/bench_http_load
model=${MODEL:-wide_mlp}
rates=${RATES:-1000,2000,3000,4000,5000,6000,7000}
seconds=$(printenv SECONDS)
seconds=${seconds:-3}
out=${OUT:-bench/results/$(date -u +%F)-serve-split-http.txt}
for f in "$dpc" "$load"; do
  [ -x "$f" ] || {
    echo "serve_split.sh: $f is not built" >&2
    exit 1
  }
done
command -v mpirun >/dev/null || {
  echo "serve_split.sh: mpirun is needed (scripts/setup installs OpenMPI)" >&2
  exit 1
}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
job=""
cleanup() {
  [ -n "$job" ] && pkill -KILL -P "$job" 2>/dev/null && kill -KILL "$job" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# serve_ready (the tests' helper): a server's $url once it answers
. "$(dirname "$0")/../tests/cli/lib.sh"

# serve LOG CMD...: the server in the background; sets $job and $url once it answers
serve() {
  log=$1
  shift
  "$@" --port 0 </dev/null >"$log" 2>&1 &
  job=$!
  serve_ready "$log" 's/^dpc serve: serving .* on http:\/\/127\.0\.0\.1:\([0-9]*\).*$/\1/p' "$job" &&
    return 0
  cat "$log" >&2
  return 1
}

# peak resident memory of the job's dpc processes (the job itself, or mpirun's children)
memory() {
  pids=$(pgrep -P "$job" -x dpc)
  [ -n "$pids" ] || pids=$job
  for p in $pids; do
    printf ' %s' "$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$p/status" | awk '{printf "%.1f MiB", $1 / 1024}')"
  done
}

stop() {
  for p in $(pgrep -P "$job" -x dpc) $job; do kill -TERM "$p" 2>/dev/null; done
  wait "$job" 2>/dev/null
  job=""
}

commit=$(git rev-parse --short HEAD 2>/dev/null)
one="$dpc compile examples/$model.graph --batch 32 --batch-sizes 1,4,16 -o $work/one.dpx"
split="$dpc compile examples/$model.graph --batch 32 --batch-sizes 1,4,16 --devices cpu:2 --strategy model -o $work/split.dpx"
$one >"$work/c1" 2>&1 && $split >"$work/c2" 2>&1 || {
  cat "$work/c1" "$work/c2" >&2
  exit 1
}
mkdir -p "$(dirname "$out")"
{
  echo "# $model served over HTTP, split over devices or not: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# $one"
  echo "# $split"
  grep "split over" "$work/c2" | sed 's/^/# /'
  echo "# each: $load URL $model --rates $rates --seconds $seconds --binary"
} >"$out"
for mode in "one device, 1 instance|$dpc serve $work/one.dpx --instances 1" \
  "one device, 2 instances|$dpc serve $work/one.dpx --instances 2" \
  "split over cpu:2 in one process, 2 instances (turns)|$dpc serve $work/split.dpx" \
  "split over 2 MPI ranks, 2 instances|mpirun --allow-run-as-root --oversubscribe -np 2 $dpc serve $work/split.dpx --devices mpi"; do
  name=${mode%%|*}
  cmd=${mode#*|}
  echo "serve_split.sh: $name" >&2
  # shellcheck disable=SC2086 # cmd is a command line
  serve "$work/serve.log" $cmd || exit 1
  {
    echo
    echo "## $name"
    echo "# $cmd --port 0"
    "$load" "$url" "$model" --rates "$rates" --seconds "$seconds" --binary 2>&1
    echo "# peak resident memory, each process:$(memory)"
  } >>"$out"
  stop
done
echo "serve_split.sh: wrote $out" >&2
