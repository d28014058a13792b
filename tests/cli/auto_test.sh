#!/bin/sh
# --strategy auto: dpc plan ranks the strategies the devices allow by predicted step, drops those
# over --device-memory, shows the winner's plan (the same plan --strategy WINNER makes), says why
# each other one lost, --measure chooses the fastest measured of the best three, and dpc train
# runs the choice.
#   auto_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
mlp="$src/examples/fashion_mlp.graph"
inc="$src/examples/inception_block.graph"

for model in "$mlp" "$inc"; do
  name=$(basename "$model" .graph)
  for devices in cpu:2 cpu:4; do
    expect 0 "$name on $devices: plan --strategy auto --explain" -- \
      "$dpc" plan "$model" --devices $devices --strategy auto --explain --json "$work/auto.json"
    cp "$work/out" "$work/$name-$devices.txt"
    contains "$work/out" "^strategy auto: " "$name on $devices: the choice is named"
    contains "$work/out" "^1 .*the fastest predicted step" "$name on $devices: rank 1 is the choice"
    # the ranked rows: step times never fall going down the table, and the choice is row 1 (a
    # strategy's text has commas: the choice runs up to ", predicted")
    chosen=$(sed -n 's/^strategy auto: \(.*\), predicted .*/\1/p' "$work/out")
    first=$(awk '$1 == "1" { print $2 }' "$work/out")
    if [ -n "$chosen" ] && [ "$chosen" = "$first" ] &&
      awk '$1 ~ /^[0-9]+$/ { if (seen && $3 + 0 < last) bad = 1; last = $3 + 0; seen = 1 }
           END { exit bad || !seen }' "$work/out"; then
      echo "ok   $name on $devices: ranked by predicted step, $chosen first"
    else
      echo "FAIL $name on $devices: the table is not ranked by step or the choice is not row 1"
      sed 's/^/    /' "$work/out" | head -20
      fails=$((fails + 1))
    fi
    rows=$(grep -c '^[0-9-] ' "$work/out")
    if [ "$rows" -ge 4 ]; then echo "ok   $name on $devices: $rows strategies tried"; else
      echo "FAIL $name on $devices: only $rows strategies tried"
      fails=$((fails + 1))
    fi
    # every loser says why, in numbers
    if awk '$1 ~ /^[0-9]+$/ && $1 != "1" && $0 !~ /[+][0-9]+% against/ { bad = 1 } END { exit bad }' \
      "$work/out"; then echo "ok   $name on $devices: every other one says how much slower"
    else
      echo "FAIL $name on $devices: a loser without its margin"
      fails=$((fails + 1))
    fi
    # the plan shown is the one the chosen strategy makes when named
    expect 0 "$name on $devices: plan --strategy $chosen" -- \
      "$dpc" plan "$model" --devices $devices --strategy "$chosen" --json "$work/named.json"
    a=$(grep -o '"predicted_step_ms": [0-9.]*' "$work/auto.json")
    b=$(grep -o '"predicted_step_ms": [0-9.]*' "$work/named.json")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "ok   $name on $devices: the plan shown is $chosen's ($a)"
    else
      echo "FAIL $name on $devices: auto's plan ($a) is not $chosen's ($b)"
      fails=$((fails + 1))
    fi
  done
done

# --measure: the three fastest predicted run, each measured beside its prediction, and the
# choice is the fastest measured (which may reverse the prediction: then it says so)
expect 0 "plan --strategy auto --measure" -- "$dpc" plan "$mlp" --devices cpu:2 --strategy auto \
  --measure --explain --batch 32
n=$(grep -c '^  measured .* ms a step, predicted ' "$work/out")
if [ "$n" -eq 3 ]; then echo "ok   --measure: 3 strategies measured"; else
  echo "FAIL --measure: $n strategies measured, expected 3"
  sed 's/^/    /' "$work/out" | head -12
  fails=$((fails + 1))
fi
# the chosen one is the fastest measured, and the first line names it
if awk '/^  measured .* ms a step/ { for (i = 1; i <= NF; i++) if ($i == "ms") { v = $(i - 1); break }
          if (min == "" || v + 0 < min + 0) { min = v; who = $2 } if ($0 ~ /<- chosen/) c = $2 }
        /^strategy auto: [^c]/ { named = $3; sub(/,$/, "", named) }
        END { exit !(who != "" && who == c && c == named) }' "$work/out"; then
  echo "ok   --measure: the fastest measured is chosen and named"
else
  echo "FAIL --measure: the choice is not the fastest measured"
  sed 's/^/    /' "$work/out" | head -12
  fails=$((fails + 1))
fi
if grep -q '<- chosen' "$work/out" && ! grep -q '^1 .*the fastest predicted step' "$work/out"; then
  contains "$work/out" "^strategy auto: chosen by measurement, against the prediction: " \
    "--measure: a reversed ranking is said"
fi

# one device: nothing to choose
expect 0 "one device" -- "$dpc" plan "$mlp" --strategy auto
contains "$work/out" "^strategy auto: single," "one device: single"

# a memory limit: those over it are dropped (and say by how much), nothing fitting is an error
expect 0 "a limit some fit in" -- "$dpc" plan "$mlp" --devices cpu:4 --strategy auto --explain \
  --device-memory 12M
contains "$work/out" "^- .*does not fit: " "over the limit: unranked, saying what it needs"
contains "$work/out" "^1 " "under the limit: ranked"
expect 1 "a limit none fits in" -- "$dpc" plan "$mlp" --devices cpu:2 --strategy auto --explain \
  --device-memory 1M
contains "$work/err" "no strategy fits" "nothing fits: said so"
contains "$work/out" "does not fit: " "nothing fits: the table says what each needs"

# usage
expect 2 "--explain alone" -- "$dpc" plan "$mlp" --devices cpu:2 --explain
contains "$work/err" "give it too" "--explain needs --strategy auto"
expect 2 "auto with --mp" -- "$dpc" plan "$mlp" --devices cpu:4 --strategy auto --mp 2
contains "$work/err" "chooses it itself" "auto refuses the settings it chooses"
expect 2 "train auto with --sync async" -- "$dpc" train "$mlp" --devices cpu:2 --strategy auto \
  --sync async --steps 1
expect 1 "a model without a loss" -- "$dpc" plan "$src/tests/embed/dropout.graph" --devices cpu:2 \
  --strategy auto
contains "$work/err" "nothing to minimize" "no loss: said so"

# dpc train runs the choice: the same losses as naming it
expect 0 "train --strategy auto" -- "$dpc" train "$mlp" --devices cpu:2 --strategy auto --steps 4 \
  --backend ref --log "$work/auto.jsonl"
contains "$work/err" "^dpc train: --strategy auto: " "train says what it chose"
chosen=$(sed -n 's/^dpc train: --strategy auto: \(.*\), predicted .*/\1/p' "$work/err")
expect 0 "train --strategy $chosen" -- "$dpc" train "$mlp" --devices cpu:2 --strategy "$chosen" \
  --steps 4 --backend ref --log "$work/named.jsonl"
grep -o '"loss": [^,}]*' "$work/auto.jsonl" >"$work/a.loss"
grep -o '"loss": [^,}]*' "$work/named.jsonl" >"$work/b.loss"
if [ -s "$work/a.loss" ] && cmp -s "$work/a.loss" "$work/b.loss"; then
  echo "ok   train auto trains as --strategy $chosen"
else
  echo "FAIL train auto does not train as --strategy $chosen"
  fails=$((fails + 1))
fi

# --profile: the kernels timed first on one device's cores, at the whole batch and at the
# shares the candidates run (data parallel's half, a pipeline's batch in its micro-batches), then the same
# search and table over the corrected predictions
expect 0 "plan --strategy auto --profile" -- "$dpc" plan "$mlp" --devices cpu:2 --strategy auto \
  --profile --explain --batch 32
contains "$work/out" "^profile: [0-9]* kernels timed on 1 core (one device's) in [0-9.]* s, at batch 32, 16, 32 in 2, 32 in 4" \
  "--profile times the kernels at each candidate's batch, a pipeline's in its micro-batches"
contains "$work/out" "^1 .*the fastest predicted step" "--profile ranks the candidates"
rows=$(grep -c '^[0-9] ' "$work/out")
if [ "$rows" -ge 4 ]; then echo "ok   --profile: $rows strategies ranked"; else
  echo "FAIL --profile: only $rows strategies ranked"
  fails=$((fails + 1))
fi

# dpc bench times the choice, and refuses the settings the choice makes
expect 0 "bench --strategy auto" -- "$dpc" bench "$mlp" --devices cpu:2 --strategy auto --batch 32 \
  --steps 2 --warmup 0 --backend ref --json
contains "$work/err" "^dpc bench: --strategy auto: " "bench says what it chose"
contains "$work/out" '"median_ms": ' "bench times it"
expect 0 "bench a hybrid strategy" -- "$dpc" bench "$mlp" --devices cpu:4 --strategy hybrid:mp=2 \
  --batch 32 --steps 1 --warmup 0 --backend ref
contains "$work/out" "samples/s" "bench times a hybrid strategy"
expect 2 "bench auto with --accumulate" -- "$dpc" bench "$mlp" --devices cpu:2 --strategy auto \
  --accumulate 2
contains "$work/err" "chooses it itself" "bench auto refuses --accumulate"
expect 2 "bench auto for inference" -- "$dpc" bench "$mlp" --strategy auto --inference
contains "$work/err" "training strategy" "bench auto refuses --inference"

[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
