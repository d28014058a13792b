#!/bin/sh
# Graphviz pictures a person can read: `dpc plan --dot` and `dpc print --dot` draw fusion groups
# and named values (not every scalar constant and unnamed temporary), one cluster per device
# holding that device's collectives, bytes on every edge between devices, and times only on
# nodes that cost something; --dot-full still draws every node of the step.
#   dot_test.sh DPC SOURCE_DIR WORK_DIR
dpc=$1
src=$2
work=$3
case $dpc in /*) ;; *) dpc=$PWD/$dpc ;; esac
fails=0
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/lib.sh"

check() { # check DESCRIPTION CONDITION (a test(1) expression)
  what=$1
  shift
  if [ "$@" ]; then echo "ok   $what"; else
    echo "FAIL $what: [ $* ] is false"
    fails=$((fails + 1))
  fi
}

# Facts about a dump, as "nodes clusters collectives outside cross unlabelled": the nodes drawn,
# the device clusters, the collective nodes, those of them outside every cluster, the edges
# between nodes of different clusters, and those of them without bytes in their label.
facts() {
  awk '
    /^[ \t]*subgraph cluster/ { cl = $2; clusters++; next }
    /^  }/ { cl = ""; next }
    /^[ \t]*[A-Za-z_][A-Za-z0-9_]* \[.*shape=/ {
      nodes++; where[$1] = cl
      if ($0 ~ /all_reduce|send|recv/) { colls++; if (cl == "") outside++ }
      next
    }
    /^[ \t]*[A-Za-z_][A-Za-z0-9_]* -> [A-Za-z_][A-Za-z0-9_]* / {
      if (where[$1] != where[$3]) {
        cross++
        if ($0 !~ /[0-9] (B|KiB|MiB|GiB)/) unlabelled++
      }
    }
    END { printf "%d %d %d %d %d %d\n", nodes, clusters, colls, outside, cross, unlabelled }' "$1"
}

# The default picture of a plan: small, named, every collective in its device's cluster.
readable() { # readable DOT DESCRIPTION MAX_NODES
  set -- "$1" "$2" "$3" $(facts "$1")
  echo "     $2: $4 nodes, $5 clusters, $6 collectives ($7 outside a cluster), $8 edges between devices ($9 without bytes)"
  check "$2: at most $3 nodes" "$4" -le "$3"
  check "$2: at least 10 nodes" "$4" -ge 10
  check "$2: one cluster per device" "$5" -ge 2
  check "$2: no collective outside a cluster" "$7" -eq 0
  check "$2: edges between devices" "$8" -ge 1
  check "$2: every edge between devices carries its bytes" "$9" -eq 0
  lacks "$1" '%[0-9]' "$2: no unnamed %N labels"
  lacks "$1" '0\.000 ms' "$2: no 0.000 ms times"
  contains "$1" '[0-9]\.[0-9][0-9][0-9] ms' "$2: nodes that cost something carry their time"
  if command -v dot >/dev/null; then
    expect 0 "$2: dot -Tsvg accepts it" -- dot -Tsvg "$1" -o "$1.svg"
    check "$2: Graphviz draws it without warnings" ! -s "$work/err"
  fi
}

mlp=$src/examples/fashion_mlp.graph
expect 0 "plan data parallel with --dot" -- "$dpc" plan "$mlp" --devices cpu:2 --dot "$work/dp.dot"
readable "$work/dp.dot" "data-parallel MLP on cpu:2" 60
# each device's all-reduce of the same bucket is drawn in its own cluster
set -- $(facts "$work/dp.dot")
check "data-parallel MLP: an all-reduce on each of the 2 devices" "$3" -ge 2
contains "$work/dp.dot" 'matmul + add + relu' "a layer's fused kernel is one node"

# METIS's placement follows this machine's calibration; a layer split is the same everywhere
expect 0 "plan model parallel with --dot" -- "$dpc" plan "$mlp" --devices cpu:2 --strategy model --placement contiguous --dot "$work/mp.dot"
readable "$work/mp.dot" "model-parallel MLP on cpu:2" 40

inc=$src/examples/inception_block.graph
expect 0 "plan the Inception block, model parallel on cpu:4" -- "$dpc" plan "$inc" --devices cpu:4 --strategy model --placement contiguous --dot "$work/inc.dot"
readable "$work/inc.dot" "model-parallel Inception block on cpu:4" 80

# --dot-full: the whole step graph, every node (the default picture is a summary of it)
expect 0 "plan --dot-full" -- "$dpc" plan "$mlp" --devices cpu:2 --dot "$work/dp-full.dot" --dot-full
set -- $(facts "$work/dp.dot")
small=$1
full=$(grep -c 'shape=' "$work/dp-full.dot")
echo "     the full data-parallel step: $full nodes against $small in the summary"
check "--dot-full draws the whole step (over 3x the summary's nodes)" "$full" -gt $((3 * small))
contains "$work/dp-full.dot" '%[0-9]' "--dot-full keeps the unnamed values"
expect 2 "--dot-full without --dot is a usage error" -- "$dpc" plan "$mlp" --dot-full
contains "$work/err" "dot-full" "the usage error names --dot-full"
expect 0 "dpc plan --help" -- "$dpc" plan --help
contains "$work/out" "dot-full" "dpc plan --help documents --dot-full"

# dpc print --dot: one node per statement, as the .graph text prints it
expect 0 "print --dot the Inception block" -- "$dpc" print --dot "$inc" --output "$work/print.dot"
lacks "$work/print.dot" '%[0-9]' "print --dot: no unnamed %N labels"
lacks "$work/print.dot" 'constant' "print --dot: no scalar constants"
contains "$work/print.dot" 'stem' "print --dot: the stem is drawn"
statements=$(grep -c '^[a-z0-9_.]* *= ' "$inc")
sources=$(grep -c '^\(input\|param\) ' "$inc")
drawn=$(grep -c 'shape=' "$work/print.dot")
echo "     print --dot: $drawn nodes for $statements statements and $sources inputs and params"
check "print --dot: no more nodes than statements, inputs and params" "$drawn" -le $((statements + sources))
expect 0 "print --dot-full" -- "$dpc" print --dot-full "$inc" --output "$work/print-full.dot"
full=$(grep -c 'shape=' "$work/print-full.dot")
check "print --dot-full draws every node ($full, the summary $drawn)" "$full" -gt "$drawn"
contains "$work/print-full.dot" '%[0-9]' "print --dot-full keeps the unnamed values"

# Scalars the model's own statements compute stay (only a pass's schedule arithmetic and scalar
# constants are left out); a model that places its statements gets a cluster per device.
cat >"$work/scalars.graph" <<'G'
model scalars
input  a: f32[]
input  x: f32[N, 4]
param  t: f32[] = zeros
b = a * 2 + t @ cpu:1
y = x * b @ cpu:0
output y
G
expect 0 "print --dot a model of scalars, placed" -- "$dpc" print --dot "$work/scalars.graph" --output "$work/scalars.dot"
contains "$work/scalars.dot" 'mul + add\\nb\\nf32\[\]' "print --dot: the statement b of scalars is drawn"
set -- $(facts "$work/scalars.dot")
check "print --dot: b's and y's devices are two clusters" "$2" -eq 2
contains "$work/scalars.dot" '^  [a-z0-9]* -> [a-z0-9]* \[label="4 B"' "print --dot: b's 4 bytes on the edge between devices"
lacks "$work/scalars.dot" 'constant' "print --dot: the scalar constant 2 is left out"

# The README's example of a picture with one cluster per device draws one.
line=$(grep 'one cluster per device' "$src/README.md" | head -1)
cmd=$(printf '%s\n' "$line" | sed -e 's/#.*//' -e "s|^dpc |\"\$dpc\" |" -e "s|examples/|$src/examples/|")
case $cmd in *"--dot "*) ;; *) echo "FAIL the README's picture command has no --dot: $line"; fails=$((fails + 1)) ;; esac
(cd "$work" && eval "$cmd") >"$work/readme.out" 2>&1
check "the README's picture command runs" "$?" -eq 0
out=$(printf '%s\n' "$cmd" | sed 's/.*--dot \([^ ]*\).*/\1/')
set -- $(facts "$work/$out")
check "the README's picture has one cluster per device (2 or more)" "${2:-0}" -ge 2

if [ "$fails" -ne 0 ]; then
  echo "$fails checks failed"
  exit 1
fi
echo "all checks passed"
