#!/bin/sh
# dpc serve over HTTP under an open-loop load: each model compiled for serving (--batch 32
# --batch-sizes 1,2,4,8,16), then served in turn without batching (--max-batch 1), with each
# fixed delay of DELAYS, and with the auto delay (--latency-target-ms TARGET_MS); against each,
# bench_http_load offers RATES requests/s (light load to past saturation), SECONDS each. One
# results file per model, bench/results/DATE-serve-http-MODEL[-binary].txt, with a header of the commit,
# the time, the load average and every command as run; then the auto delay once more, through a
# step in load (--steps). Every server it starts is stopped, on any exit.
#   bench/serve_load.sh [BUILD]        (default: build)
# Environment: MODELS (fashion_mlp fashion_cnn), RATES (R1,R2,..; default per model), SECONDS (2),
# DELAYS (0 500 2000, in us), TARGET_MS (10), CONNECTIONS (64), INSTANCES (1), BINARY (1: tensors
# as raw bytes), STEPS (R1,R2,..; default the first rate, the second to last, the first; empty:
# none), OUT_DIR (bench/results).
set -u
build=${1:-build}
dpc=$build/tools/dpc/dpc
load=$build/bench/bench_http_load
models=${MODELS:-fashion_mlp fashion_cnn}
# (read from the environment: a shell such as bash keeps its own SECONDS, the time it has run)
seconds=$(printenv SECONDS)
seconds=${seconds:-2}
delays=${DELAYS:-0 500 2000}
target_ms=${TARGET_MS:-10}
connections=${CONNECTIONS:-64}
instances=${INSTANCES:-1}
out_dir=${OUT_DIR:-bench/results}
binary=""
[ "${BINARY:-0}" = 1 ] && binary=--binary
for f in "$dpc" "$load"; do
  if [ ! -x "$f" ]; then
    echo "serve_load.sh: $f is not built (cmake --build $build --target dpc bench_http_load)" >&2
    exit 1
  fi
done
work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill -KILL "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# serve_ready (the tests' helper): a server's $url once it answers
. "$(dirname "$0")/../tests/cli/lib.sh"

# start_server LOG OPTIONS...: dpc serve on a free port; sets $server and $url once ready
start_server() {
  log=$1
  shift
  "$dpc" serve "$@" --port 0 >"$log" 2>&1 &
  server=$!
  serve_ready "$log" 's/^dpc serve: serving .* on http:\/\/127\.0\.0\.1:\([0-9]*\)$/\1/p' "$server" &&
    return 0
  echo "serve_load.sh: dpc serve $* did not start:" >&2
  cat "$log" >&2
  return 1
}

# stop_server: SIGTERM (a drain), then SIGKILL after 30 s
stop_server() {
  kill -TERM "$server" 2>/dev/null
  i=0
  while kill -0 "$server" 2>/dev/null && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  kill -KILL "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  server=""
}

commit=$(git rev-parse --short HEAD 2>/dev/null)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | wc -l)
mkdir -p "$out_dir"
for model in $models; do
  case $model in
  fashion_mlp) rates=${RATES:-500,2000,4000,6000,9000} ;;
  fashion_cnn) rates=${RATES:-500,1000,2000,3000,5000} ;;
  *) rates=${RATES:-100,1000,5000} ;;
  esac
  steps=${STEPS-$(echo "$rates" | awk -F, 'NF > 2 { print $1 "," $(NF - 1) "," $1 }')}
  out=$out_dir/$(date -u +%F)-serve-http-$model${binary:+-binary}.txt
  artifact=$work/$model.dpx
  compile="$dpc compile examples/$model.graph --batch 32 --batch-sizes 1,2,4,8,16 -o $model.dpx"
  {
    echo "# dpc serve over HTTP, $model: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit$([ "$dirty" -gt 0 ] && echo " (with $dirty tracked files modified: other work in the tree)")"
    echo "# $(nproc) cores, load average at the start: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared: other builds and tests may run beside this, and bench_http_load itself shares the cores with the server)"
    echo "# open loop: Poisson arrivals at each offered rate, $seconds s per rate, latency from the scheduled send to the answer's end; one server per mode, rates in turn"
    echo "# run as: MODELS='$models' RATES=$rates SECONDS=$seconds DELAYS='$delays' TARGET_MS=$target_ms CONNECTIONS=$connections INSTANCES=$instances BINARY=${BINARY:-0} STEPS=$steps bench/serve_load.sh $build"
    echo "# $compile"
  } >"$out"
  if ! "$dpc" compile "examples/$model.graph" --batch 32 --batch-sizes 1,2,4,8,16 \
    -o "$artifact" >"$work/compile.log" 2>&1; then
    cat "$work/compile.log" >&2
    exit 1
  fi
  set -- "no batching|--max-batch 1"
  for d in $delays; do set -- "$@" "delay $d us|--batch-delay $d"; done
  set -- "$@" "auto|--batch-delay auto --latency-target-ms $target_ms"
  for mode in "$@"; do
    name=${mode%%|*}
    opts=${mode#*|}
    echo "serve_load.sh: $model, $name" >&2
    # shellcheck disable=SC2086 # opts is a list of options
    start_server "$work/serve.log" "$artifact" --instances "$instances" $opts || exit 1
    cmd="$load URL $model --rates $rates --seconds $seconds --connections $connections${binary:+ $binary}"
    {
      echo
      echo "## $name"
      echo "# dpc serve $model.dpx --port 0 --instances $instances $opts"
      echo "# $cmd    (URL: the server's, on a free port)"
      # shellcheck disable=SC2086 # binary is empty or one option
      "$load" "$url" "$model" --rates "$rates" --seconds "$seconds" --connections "$connections" \
        $binary 2>&1
      echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    } >>"$out"
    stop_server
  done
  # the auto delay through a step in load, on a fresh server: the first rate, the second to last,
  # the first again
  if [ -n "$steps" ]; then
    echo "serve_load.sh: $model, auto through the steps $steps" >&2
    opts="--batch-delay auto --latency-target-ms $target_ms"
    # shellcheck disable=SC2086 # opts is a list of options
    start_server "$work/serve.log" "$artifact" --instances "$instances" $opts || exit 1
    {
      echo
      echo "## auto, a step in load"
      echo "# dpc serve $model.dpx --port 0 --instances $instances $opts"
      echo "# $load URL $model --steps $steps --seconds $seconds --window-ms 500 --connections $connections${binary:+ $binary}"
      # shellcheck disable=SC2086 # binary is empty or one option
      "$load" "$url" "$model" --steps "$steps" --seconds "$seconds" --window-ms 500 \
        --connections "$connections" $binary 2>&1
      echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    } >>"$out"
    stop_server
  fi
  echo "serve_load.sh: $out" >&2
done
