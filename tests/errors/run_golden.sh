#!/bin/sh
# Golden test for one malformed model: `dpc check FILE` must exit with status 1 and the first
# line it prints must be FILE: followed by the text of the file's `# expect:` comment.
#   run_golden.sh DPC FILE
dpc=$1
file=$2
want=$(grep -a '^# expect: ' "$file" | head -n 1 | sed 's/^# expect: //')
if [ -z "$want" ]; then
  echo "FAIL: $file has no '# expect:' line"
  exit 1
fi
got=$("$dpc" check "$file" 2>&1 >/dev/null)
status=$?
first=$(printf '%s\n' "$got" | head -n 1)
if [ "$status" -ne 1 ]; then
  echo "FAIL: exit status $status, expected 1"
  printf '%s\n' "$got"
  exit 1
fi
if [ "$first" != "$file:$want" ]; then
  echo "FAIL: first line differs"
  echo "  expected: $file:$want"
  echo "  got:      $first"
  exit 1
fi
printf '%s\n' "$got"
echo "ok"
