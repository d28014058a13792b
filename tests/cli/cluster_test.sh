#!/bin/sh
# dpc plan --cluster FILE: the shipped cluster files plan; a wrong file is refused naming the key;
# the 8 x 8 GPU plans of wide_mlp and transformer_block keep every device within its memory; a
# small memory limit changes the choice or says nothing fits; and the composed plan (one replica
# planned, the all-reduce across replicas added) agrees with every replica planned and simulated.
# --devices mpi --hosts HxN plans for hosts like this machine. --devices cpu,cuda:0 with
# --simulate-devices puts the host's CPU beside the simulated GPUs: it takes what the GPU has no
# room for.
#   cluster_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
clusters="$src/examples/clusters"
mlp="$src/examples/wide_mlp.graph"
tb="$src/examples/transformer_block.graph"

# every device's memory within the limit printed beside it, and the summary line says so
within_limits() { # within_limits FILE WHAT
  if awk '$1 ~ /^host0\// { n++; if ($(NF - 1) + 0 > $NF + 0) bad = 1 }
          END { exit bad || !n }' "$1" && grep -q "^memory: at most .* within its" "$1"; then
    echo "ok   $2: every device within its memory"
  else
    echo "FAIL $2: a device over its memory, or no devices shown"
    sed 's/^/    /' "$1" | head -30
    fails=$((fails + 1))
  fi
}

for f in "$clusters"/*.json; do
  name=$(basename "$f" .json)
  expect 0 "$name: plan wide_mlp --strategy auto" -- "$dpc" plan "$mlp" --cluster "$f" --strategy auto
  contains "$work/out" "^strategy auto: " "$name: the choice is named"
  within_limits "$work/out" "$name"
done

for model in "$mlp" "$tb"; do
  m=$(basename "$model" .graph)
  expect 0 "$m on 8 x 8 GPUs: --strategy auto --explain" -- \
    "$dpc" plan "$model" --cluster "$clusters/h100-8x8-ib.json" --strategy auto --explain
  contains "$work/out" "^planned for 64 devices in " "$m on 8 x 8: planning time shown"
  contains "$work/out" "^1 .*the fastest predicted step" "$m on 8 x 8: rank 1 is the choice"
  within_limits "$work/out" "$m on 8 x 8"
  # each ranked row's memory (column 6) within the cluster's 80 GiB
  if awk '$1 ~ /^[0-9]+$/ { n++; if ($6 + 0 > 81920) bad = 1 } END { exit bad || n < 4 }' \
    "$work/out"; then echo "ok   $m on 8 x 8: the ranked strategies fit"; else
    echo "FAIL $m on 8 x 8: too few ranked strategies, or one over the memory"
    fails=$((fails + 1))
  fi
done

# a memory limit data parallelism does not fit: another strategy that fits, or nothing fits
expect 0 "wide_mlp on 8 x 8 in 50M a device" -- \
  "$dpc" plan "$mlp" --cluster "$clusters/h100-8x8-ib.json" --device-memory 50M --explain
contains "$work/out" "^-  *data  .*does not fit: a device needs" "50M: data parallel does not fit"
lacks "$work/out" "^strategy auto: data," "50M: the choice is not data parallel"
within_limits "$work/out" "50M"
expect 1 "wide_mlp on 8 x 8 in 1M a device" -- \
  "$dpc" plan "$mlp" --cluster "$clusters/h100-8x8-ib.json" --device-memory 1M
contains "$work/err" "no strategy fits" "1M: no strategy fits, said so"

# the composition checked: one replica and the all-reduce against every replica simulated
cat >"$work/eight.json" <<'JSON'
{"name": "eight", "hosts": 1, "devices_per_host": 8,
 "device": {"gflops": 1000, "mem_gbs": 200, "memory": "8G"},
 "links": {"within_host": {"gbs": 10, "latency_us": 20}}}
JSON
for model in "$mlp" "$tb"; do
  m=$(basename "$model" .graph)
  # 8, 4, 4 and 2 replicas: the two planned stand for 8 and 4 of them
  for s in data hybrid:mp=2 pipeline:stages=2,microbatches=4 hybrid:mp=4; do
    "$dpc" plan "$model" --cluster "$work/eight.json" --strategy $s --batch 512 >"$work/c.txt" 2>&1
    "$dpc" plan "$model" --cluster "$work/eight.json" --strategy $s --batch 512 --replicated \
      >"$work/r.txt" 2>&1
    a=$(sed -n 's/^predicted step \([0-9.]*\) ms.*/\1/p' "$work/c.txt")
    b=$(sed -n 's/^predicted step \([0-9.]*\) ms.*/\1/p' "$work/r.txt")
    ar=$(sed -n 's/.*+ all-reduce \([0-9.]*\) ms$/\1/p' "$work/c.txt")
    ma=$(sed -n 's/^memory: at most \([0-9.]*\) MiB.*/\1/p' "$work/c.txt")
    mb=$(sed -n 's/^memory: at most \([0-9.]*\) MiB.*/\1/p' "$work/r.txt")
    if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" -v ar="$ar" -v ma="$ma" -v mb="$mb" \
      'BEGIN { d = a - b; if (d < 0) d = -d; e = ma - mb; if (e < 0) e = -e
               exit !(ar > 0 && d <= 0.02 * b && e <= 0.1 * mb) }'; then
      echo "ok   $m $s on 8 devices: composed $a ms (all-reduce $ar), every replica $b ms; memory $ma / $mb MiB"
    else
      echo "FAIL $m $s on 8 devices: composed '$a' ms (all-reduce '$ar'), every replica '$b' ms; memory '$ma' / '$mb' MiB"
      sed 's/^/    /' "$work/c.txt" "$work/r.txt" | head -30
      fails=$((fails + 1))
    fi
  done
done

# wrong files, each refused naming the key
bad() { # bad DESCRIPTION TEXT EXPECTED
  printf '%s\n' "$2" >"$work/bad.json"
  expect 1 "$1" -- "$dpc" plan "$mlp" --cluster "$work/bad.json"
  contains "$work/err" "$3" "$1: the error names it"
}
dev='"device": {"gflops": 1000, "mem_gbs": 200, "memory": "8G"}'
link='"links": {"within_host": {"gbs": 10, "latency_us": 2}}'
bad "hosts missing" "{\"devices_per_host\": 2, $dev, $link}" "bad.json: 'hosts'"
bad "gflops a string" "{\"hosts\": 1, \"devices_per_host\": 2, \"device\": {\"gflops\": \"fast\", \"mem_gbs\": 200, \"memory\": \"8G\"}, $link}" "'device.gflops' must be a positive number"
bad "memory malformed" "{\"hosts\": 1, \"devices_per_host\": 2, \"device\": {\"gflops\": 1, \"mem_gbs\": 200, \"memory\": \"lots\"}, $link}" "'device.memory' must be a size"
bad "a misspelt key" "{\"hosts\": 1, \"devices_per_host\": 2, \"devcie\": {}, $dev, $link}" "unknown key 'devcie'"
bad "no between-hosts link" "{\"hosts\": 2, \"devices_per_host\": 2, $dev, $link}" "'links.between_hosts'"
bad "latency negative" "{\"hosts\": 1, \"devices_per_host\": 2, $dev, \"links\": {\"within_host\": {\"gbs\": 10, \"latency_us\": -1}}}" "'links.within_host.latency_us'"
bad "not JSON" "{hosts: 1" "bad.json:1: not a cluster file"
expect 1 "a missing file" -- "$dpc" plan "$mlp" --cluster "$work/none.json"
contains "$work/err" "none.json" "a missing file: named"

# flags that are this machine's, refused with --cluster
expect 2 "--devices with --cluster" -- "$dpc" plan "$mlp" --cluster "$clusters/h100-host.json" --devices cpu:2
contains "$work/err" "exclude each other" "--devices with --cluster: said why"
expect 2 "--replicated without --cluster" -- "$dpc" plan "$mlp" --replicated
expect 1 "a replica larger than a host" -- "$dpc" plan "$mlp" --cluster "$clusters/h100-8x8-ib.json" --strategy hybrid:mp=16
contains "$work/err" "does not fit in hosts of 8" "a replica larger than a host: said why"

# GPUs this machine does not have: --devices cuda:0,cuda:1 with a described device
expect 0 "cuda:0,cuda:1 simulated" -- "$dpc" plan "$mlp" --devices cuda:0,cuda:1 \
  --simulate-devices "$clusters/h100-host.json" --strategy data
contains "$work/out" "^planned for 2 devices in " "simulated GPUs: two planned"
contains "$work/out" "2 simulated H100 SXM" "simulated GPUs: the described device named"
contains "$work/out" "^host0/gpu:0 " "simulated GPUs: the replica's device shown"
expect 0 "cuda:0..3 simulated, auto" -- "$dpc" plan "$mlp" --devices cuda:0,cuda:1,cuda:2,cuda:3 \
  --simulate-devices "$clusters/h100-8x8-ib.json" --strategy auto
contains "$work/out" "^planned for 4 devices in " "simulated GPUs: four from a cluster's device"
expect 2 "a GPU named twice" -- "$dpc" plan "$mlp" --devices cuda:0,cuda:0 \
  --simulate-devices "$clusters/h100-host.json"
contains "$work/err" "distinct GPUs" "a GPU named twice: said why"
expect 2 "--simulate-devices without --devices" -- "$dpc" plan "$mlp" \
  --simulate-devices "$clusters/h100-host.json"
expect 1 "a CPU file for GPUs" -- "$dpc" plan "$mlp" --devices cuda:0 \
  --simulate-devices "$clusters/epyc-2socket.json"
contains "$work/err" "describes a cpu" "a CPU file for GPUs: said why"

# the host's CPU beside simulated GPUs: --devices cpu,cuda:0,...
fm="$src/examples/fashion_mlp.graph"
expect 0 "cpu,cuda:0: the model fits the GPU" -- "$dpc" plan "$fm" --devices cpu,cuda:0 \
  --simulate-devices "$clusters/h100-host.json" --explain
contains "$work/out" "^with the host's CPU: .*this machine's, measured.*(assumed: PCIe 4.0 x16)" \
  "cpu,cuda:0: the CPU measured here, the link said to be assumed"
contains "$work/out" "^strategy auto: data," "cpu,cuda:0: all on the GPU when it fits"
contains "$work/out" "^[0-9] *model+cpu .*the CPU computes" "cpu,cuda:0: the mixed plans ranked"
lacks "$work/out" "^host0/cpu " "cpu,cuda:0: the CPU not in the plan chosen"
expect 0 "cpu,cuda:0: a GPU too small for the model" -- "$dpc" plan "$fm" --devices cpu,cuda:0 \
  --simulate-devices "$clusters/h100-host.json" --device-memory 8M --explain
contains "$work/out" "^strategy auto: model+cpu," "a GPU too small: the CPU takes the rest"
contains "$work/out" "^host0/cpu " "a GPU too small: the CPU's row"
contains "$work/out" "^host0/gpu:0 " "a GPU too small: the GPU's row"
contains "$work/out" "^planned for 2 devices in " "a GPU too small: the CPU counted"
within_limits "$work/out" "a GPU too small"
expect 0 "a described host, 2 GPUs" -- "$dpc" plan "$mlp" --devices cpu,cuda:0,cuda:1 \
  --simulate-devices "$clusters/h100-pcie-workstation.json" --strategy model+cpu
contains "$work/out" "Threadripper PRO 7995WX .*as described), 63 GB/s" "described host: its figures"
contains "$work/out" "^host0/gpu:1 " "described host: the second GPU's row"
contains "$work/out" "^the CPU receives .* over 63 GB/s" "described host: what crosses PCIe"
expect 1 "model+cpu without the CPU" -- "$dpc" plan "$mlp" --devices cuda:0,cuda:1 \
  --simulate-devices "$clusters/h100-host.json" --strategy model+cpu
contains "$work/err" "not given the CPU" "model+cpu without the CPU: said why"
sed 's/"gflops": 7700/"gflops": -5/' "$clusters/h100-pcie-workstation.json" >"$work/badhost.json"
expect 1 "a host of negative speed" -- "$dpc" plan "$fm" --devices cpu,cuda:0 \
  --simulate-devices "$work/badhost.json"
contains "$work/err" "'host.gflops' must be a positive number" "a host of negative speed: the key named"
expect 2 "the CPU alone" -- "$dpc" plan "$fm" --devices cpu --simulate-devices "$clusters/h100-host.json"
contains "$work/err" "name the GPUs too" "the CPU alone: said what to give"

# hosts like this machine, planned without mpirun: --devices mpi[:cpu:L] --hosts H[xN] [--link]
expect 0 "mpi:cpu:2 on 4x2 hosts" -- "$dpc" plan "$fm" --devices mpi:cpu:2 --hosts 4x2 --explain
contains "$work/out" "4 hosts of 2 devices like this machine's cpu:2, 1.25 GB/s and 50 us between (assumed: --link)" \
  "mpi hosts: the cluster named, the link said to be assumed"
contains "$work/out" "^planned for 8 devices in " "mpi hosts: 8 devices planned"
contains "$work/out" "^host3/cpu:1 \|^host0/cpu:0 " "mpi hosts: a replica's device shown"
expect 0 "mpi on 3 hosts, a fast link" -- "$dpc" plan "$fm" --devices mpi --hosts 3 \
  --link 12.5,2 --strategy data
contains "$work/out" "^planned for 3 devices in " "mpi hosts: one device a host by default"
contains "$work/out" "12.5 GB/s and 2 us between:" "mpi hosts: the link given"
expect 2 "--devices mpi without --hosts" -- "$dpc" plan "$fm" --devices mpi
contains "$work/err" "say how many with --hosts" "mpi without hosts: said what to give"
expect 2 "--hosts without mpi" -- "$dpc" plan "$fm" --devices cpu:2 --hosts 2
expect 2 "--hosts 4y2" -- "$dpc" plan "$fm" --devices mpi --hosts 4y2
expect 2 "--link 0,5" -- "$dpc" plan "$fm" --devices mpi --hosts 2 --link 0,5

[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
