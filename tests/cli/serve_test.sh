#!/bin/sh
# dpc serve: fashion_mlp compiled with --batch 8 --batch-sizes 1,2,4 served on a free port; every
# endpoint; a 1-row and a 3-row request answer what dpc run gives for the same data (within
# 1e-6); every error status with its message; the binary data extension; 100 threads x 5
# requests all answered right; 1000 idle connections and 50 slow-loris clients while requests are
# answered; the auto delay's metrics; two models from a folder; a model split over two devices
# under a memory limit answering the same; a full queue answers 503 with
# Retry-After; SIGTERM under load answers every accepted request and exits 0. Every wait has a
# timeout and every server is killed at the end.
#   serve_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
py=/usr/bin/python3
client="$(dirname "$0")/serve_client.py"
pids=""
cleanup() { for p in $pids; do kill -KILL "$p" 2>/dev/null; done; }
trap cleanup EXIT

if ! command -v curl >/dev/null || [ ! -x $py ]; then
  echo "FAIL curl and /usr/bin/python3 are needed (scripts/setup installs them)"
  exit 1
fi

expect 0 "compile fashion_mlp for serving" -- \
  "$dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 --batch-sizes 1,2,4 -o "$work/m.dpx"

# start NAME OPTIONS...: a server on a free port in the background; sets $pid and $url once
# /v2/health/ready answers (up to 30 s). It serves $serve_path (default m.dpx) and says it serves
# $serve_names (default fashion_mlp).
start() {
  name=$1
  shift
  "$dpc" serve "${serve_path:-$work/m.dpx}" --port 0 "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  pids="$pids $pid"
  started "$name: serving" "$work/$name.err" \
    "s/^dpc serve: serving ${serve_names:-fashion_mlp} on http:\/\/127\.0\.0\.1:\([0-9]*\)$/\1/p" $pid
}

# stop PID NAME: SIGTERM, then the exit status within 30 s (else killed)
stop() {
  kill -TERM "$1" 2>/dev/null
  exits_ok "$1" "$2: SIGTERM drains and exits 0" "$work/$2.err"
}

# http METHOD PATH STATUS TEXT DESCRIPTION [BODY]: the status and a line of the answer
http() {
  if [ -n "$6" ]; then
    code=$(curl -s --max-time 20 -o "$work/body" -w '%{http_code}' -X "$1" \
      -H 'Content-Type: application/json' --data-binary "$6" "$url$2")
  else
    code=$(curl -s --max-time 20 -o "$work/body" -w '%{http_code}' -X "$1" "$url$2")
  fi
  if [ "$code" = "$3" ] && grep -q -- "$4" "$work/body"; then echo "ok   $5"; else
    echo "FAIL $5: $1 $2 answered $code, expected $3 with '$4':"
    head -c 300 "$work/body" | sed 's/^/    /'
    echo
    fails=$((fails + 1))
  fi
}

# the reference: dpc run on the artifact's 8 rows; a request of the first k rows answers their
# first k rows (rows never mix in a batch)
$py "$client" npy "$work/x.npy" 8 7
expect 0 "dpc run on 8 rows" -- "$dpc" run "$work/m.dpx" --input "x=$work/x.npy" --output-dir "$work/ref"

if start main --batch-delay 2000 --instances 2 --max-body 200000; then
  m=/v2/models/fashion_mlp
  http GET /v2/health/live 200 '"live":true' "live"
  http GET /v2/health/ready 200 '"ready":true' "ready"
  http GET /v2 200 '"name":"dpc","version":"' "server metadata"
  http GET $m 200 '"inputs":\[{"name":"x","datatype":"FP32","shape":\[-1,784\]}\],"outputs":\[{"name":"logits","datatype":"FP32","shape":\[-1,10\]}\]' \
    "model metadata: inputs and outputs, -1 for the batch"
  http GET $m/ready 200 '"name":"fashion_mlp","ready":true' "model ready"
  $py "$client" same "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))

  x2='"datatype":"FP32","shape":[1,2]'
  http POST $m/infer 400 'empty body' "400: empty body" ""
  http POST $m/infer 400 'malformed JSON at line 1' "400: malformed JSON" '{"inputs": ['
  http POST $m/infer 400 'an array \\"inputs\\"' "400: no inputs" '{"outputs": []}'
  http POST $m/infer 400 "unknown input 'y': model 'fashion_mlp' takes 'x'" "400: wrong input name" \
    '{"inputs":[{"name":"y",'"$x2"',"data":[1,2]}]}'
  http POST $m/infer 400 "input 'x' has shape \[1,2\]: the model takes \[-1,784\]" "400: wrong shape" \
    '{"inputs":[{"name":"x",'"$x2"',"data":[1,2]}]}'
  http POST $m/infer 400 "input 'x' has 9 rows, more than the server's max batch of 8" \
    "400: more rows than the max batch" '{"inputs":[{"name":"x","datatype":"FP32","shape":[9,784],"data":[]}]}'
  http POST $m/infer 400 "input 'x' has datatype INT32: the model takes FP32" "400: wrong datatype" \
    '{"inputs":[{"name":"x","datatype":"INT32","shape":[1,784],"data":[]}]}'
  data=$($py -c 'print(",".join(["1"] * 783))')
  http POST $m/infer 400 "input 'x': data\[783\] is not a number" "400: non-numeric data" \
    '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,784],"data":['"$data"',"a"]}]}'
  http POST $m/infer 400 "input 'x' has 783 values in \\\\\"data\\\\\": its shape needs 784" \
    "400: too few values" '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,784],"data":['"$data"']}]}'
  http GET /v2/models/resnet 404 "unknown model 'resnet': this server serves 'fashion_mlp'" "404: unknown model"
  http POST /v2/models/resnet/infer 404 "unknown model 'resnet'" "404: unknown model's infer"
  http GET /v3/x 404 "no such path '/v3/x'" "404: unknown path"
  http GET $m/infer 405 "GET is not allowed on $m/infer: it takes POST" "405: GET on infer"
  http POST /v2/health/live 405 "POST is not allowed on /v2/health/live: it takes GET" "405: POST on live" '{}'
  $py "$client" big "$url" 300000 >"$work/big" 2>&1
  contains "$work/big" "^413 .*over the server's limit of 200000 bytes" "413: a body over --max-body"

  $py "$client" load "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  curl -s --max-time 10 "$url/metrics" >"$work/metrics"
  contains "$work/metrics" '^dpc_http_requests_total{code="200"} [1-9]' "metrics: requests by status"
  contains "$work/metrics" '^dpc_http_requests_total{code="400"} 9$' "metrics: the 400s counted"
  contains "$work/metrics" '^dpc_batches_total{model="fashion_mlp"} [1-9]' "metrics: batches"
  contains "$work/metrics" '^dpc_batch_rows_total{model="fashion_mlp"} [1-9]' "metrics: rows"
  contains "$work/metrics" '^dpc_batch_size_mean{model="fashion_mlp"} [0-9.]*$' "metrics: mean batch"
  contains "$work/metrics" '^dpc_queue_seconds_total{model="fashion_mlp"} [0-9.]*$' "metrics: queue time"
  contains "$work/metrics" '^dpc_compute_seconds_total{model="fashion_mlp"} [0-9.]*$' "metrics: compute time"
  # batching happened: fewer batches than the 502 requests answered
  batches=$(sed -n 's/^dpc_batches_total{model="fashion_mlp"} //p' "$work/metrics")
  if [ "${batches:-999}" -lt 502 ]; then echo "ok   $batches batches for 502 requests"; else
    echo "FAIL no batching: $batches batches for 502 requests"
    fails=$((fails + 1))
  fi
  $py "$client" binary "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  $py "$client" idle "$url" "$work/x.npy" "$work/ref/logits.npy" 1000 || fails=$((fails + 1))
  http GET /v2/health/ready 200 '"ready":true' "ready after the idle and slow clients left"
  stop $pid main
fi

# the auto delay: answers stay right, and the metrics say what it chose and why
expect 2 "--latency-target-ms without --batch-delay auto is a usage error" -- \
  "$dpc" serve "$work/m.dpx" --latency-target-ms 5
contains "$work/err" "latency-target-ms goes with --batch-delay auto" "... saying so"
if start auto --batch-delay auto --latency-target-ms 20; then
  $py "$client" load "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  curl -s --max-time 10 "$url/metrics" >"$work/metrics"
  contains "$work/metrics" '^dpc_batch_delay_target_seconds{model="fashion_mlp"} 0.020000000$' \
    "auto: the target in the metrics"
  contains "$work/metrics" '^dpc_arrival_rate{model="fashion_mlp"} [0-9.]*$' "auto: the arrival rate measured"
  contains "$work/metrics" '^dpc_batch_delay_info{model="fashion_mlp",reason="[a-z].* requests/s' \
    "auto: the reason for the delay, in numbers"
  contains "$work/metrics" '^dpc_batch_delay_seconds{model="fashion_mlp"} [0-9.]*$' "auto: the delay now"
  contains "$work/metrics" '^dpc_instances{model="fashion_mlp"} 1$' "the instances in the metrics"
  contains "$work/metrics" '^dpc_instances_busy{model="fashion_mlp"} [01]$' "... and those busy"
  contains "$work/metrics" '^# TYPE dpc_queue_time_seconds histogram$' "queue time: a histogram"
  contains "$work/metrics" '^dpc_queue_time_seconds_bucket{model="fashion_mlp",le="+Inf"} 500$' \
    "... counting every request"
  contains "$work/metrics" '^dpc_compute_time_seconds_bucket{model="fashion_mlp",le="0.000064"} [0-9]' \
    "compute time: a histogram from 64 us"
  contains "$work/metrics" '^dpc_batch_size_bucket{model="fashion_mlp",le="7"} [0-9]' \
    "batch size: a histogram by powers of two"
  contains "$work/metrics" '^dpc_batch_size_bucket{model="fashion_mlp",le="+Inf"} [1-9]' "... of every batch"
  stop $pid auto
fi

# a folder of two models, each under its folder's name with its own settings
mkdir -p "$work/repo/mlp_a" "$work/repo/mlp_b" "$work/bad/x" "$work/bad2/y" "$work/bad3/z"
cp "$work/m.dpx" "$work/repo/mlp_a/"
cp "$work/m.dpx" "$work/repo/mlp_b/model.dpx"
echo '{"instances": 2, "batch_delay_us": "auto", "latency_target_ms": 30}' >"$work/repo/mlp_b/config.json"
if serve_path="$work/repo" serve_names="mlp_a, mlp_b" start repo; then
  MODEL=mlp_a $py "$client" same "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  MODEL=mlp_b $py "$client" same "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  http GET /v2/models/fashion_mlp 404 "unknown model 'fashion_mlp': this server serves 'mlp_a', 'mlp_b'" \
    "folder: 404 lists the models served"
  curl -s --max-time 10 "$url/metrics" >"$work/metrics"
  contains "$work/metrics" '^dpc_batches_total{model="mlp_a"} [1-9]' "folder: mlp_a's batches in the metrics"
  contains "$work/metrics" '^dpc_batch_delay_target_seconds{model="mlp_b"} 0.030000000$' \
    "folder: mlp_b's config (auto, 30 ms) applied"
  if grep -q 'dpc_batch_delay_target_seconds{model="mlp_a"}' "$work/metrics"; then
    echo "FAIL folder: mlp_a has no config, yet an auto target"
    fails=$((fails + 1))
  else echo "ok   folder: mlp_a keeps the server's fixed delay"; fi
  if [ "$(grep -c '^# TYPE dpc_batches_total ' "$work/metrics")" = 1 ]; then
    echo "ok   folder: one TYPE line per metric family"
  else
    echo "FAIL folder: TYPE lines repeated"
    fails=$((fails + 1))
  fi
  stop $pid repo
fi
echo '{"instances": 2, "delay": 5}' >"$work/bad/x/config.json"
cp "$work/m.dpx" "$work/bad/x/"
expect 1 "folder: a config with an unknown key is refused" -- "$dpc" serve "$work/bad" --port 0
contains "$work/err" 'bad/x/config.json: unknown key "delay"' "... naming the file and the key"
expect 1 "folder: a model folder without an artifact is refused" -- "$dpc" serve "$work/bad2" --port 0
contains "$work/err" "bad2/y: no compiled artifact (.dpx) in the model's folder" "... naming the folder"
cp "$work/m.dpx" "$work/bad3/z/"
echo '{"batch_delay_us": 100, "latency_target_ms": 5}' >"$work/bad3/z/config.json"
expect 1 "folder: a fixed delay with a latency target is refused" -- "$dpc" serve "$work/bad3" --port 0
contains "$work/err" "latency_target_ms goes with" "... saying why"

# a model that does not fit one device's memory: split over cpu:2 (each device a part of the
# model, the batch as micro-batches passed from one to the next), served by two instances; the
# same answers as the one-device artifact, under load too
expect 1 "a 2 MiB device memory does not hold fashion_mlp on one device" -- \
  "$dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 --device-memory 2M -o "$work/no.dpx"
contains "$work/err" "more memory" "... saying so"
expect 0 "compile fashion_mlp over cpu:2 with 2 MiB a device" -- \
  "$dpc" compile "$src/examples/fashion_mlp.graph" --batch 8 --batch-sizes 1,2,4 --devices cpu:2 \
  --device-memory 2M -o "$work/split.dpx"
contains "$work/out" "split over cpu:2 (model parallel): at most 1\.[0-9] MiB on one device" \
  "... split over the two devices, each under its 2 MiB"
expect 2 "--strategy model with --train is a usage error" -- \
  "$dpc" compile "$src/examples/fashion_mlp.graph" --devices cpu:2 --strategy model --train -o "$work/t.dpx"
contains "$work/err" "inference plans only" "... saying why"
if serve_path="$work/split.dpx" start split --batch-delay 1000; then
  $py "$client" same "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  $py "$client" load "$url" "$work/x.npy" "$work/ref/logits.npy" || fails=$((fails + 1))
  curl -s --max-time 10 "$url/metrics" >"$work/metrics"
  contains "$work/metrics" '^dpc_instances{model="fashion_mlp"} 2$' \
    "split: an instance per device by default (they take turns on the devices)"
  stop $pid split
fi

# a full queue: one worker, requests held 3 s for more rows, one may wait; the next is refused
if start busy --max-queue 1 --batch-delay 3000000; then
  one='{"inputs":[{"name":"x","datatype":"FP32","shape":[1,784],"data":['"$data"',1]}]}'
  curl -s --max-time 20 -o "$work/first" -d "$one" "$url/v2/models/fashion_mlp/infer" &
  first=$!
  sleep 0.5
  curl -s --max-time 20 -D "$work/busy.h" -o "$work/busy.b" -d "$one" "$url/v2/models/fashion_mlp/infer"
  contains "$work/busy.h" "^HTTP/1.1 503" "503 when the queue is full"
  contains "$work/busy.h" "^Retry-After: 1" "503 says Retry-After"
  contains "$work/busy.b" '"error":"the queue is full' "503 says why"
  stop $pid busy # the drain answers the held request at once
  wait $first
  contains "$work/first" '"outputs":\[{"name":"logits"' "the queued request answered by the drain"
fi

# SIGTERM while 20 clients send: every answer right, those under way at the signal answered
if start drain --batch-delay 20000; then
  timeout 60 $py "$client" drain "$url" "$work/x.npy" "$work/ref/logits.npy" $pid || fails=$((fails + 1))
  exits_ok $pid "drain: exit 0 after SIGTERM under load" "$work/drain.err"
  contains "$work/drain.err" "SIGTERM: drained" "drain: says it drained"
fi

if [ $fails -ne 0 ]; then
  echo "$fails failed"
  exit 1
fi
echo "all passed"
