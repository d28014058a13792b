#!/bin/sh
# The module layering of docs/architecture.md, read from the sources like a lint: every
# `#include "X/..."` (or <X/...> naming one of dpc's folders) in a module's .c, .h and .def files
# names only a module that module may use, so the runtime never reaches into the compiler and
# the frontend sees nothing but the IR. LLVM's headers appear only under codegen/cpu/ and
# metis.h only in partitioner/metis.c; nothing in ir/ reads the environment.
#   layering_test.sh SOURCE_DIR
#
# There are no exceptions: the frontend's tensor type and codegen's kernel calling convention
# live in ir/ (ir/tensor.h, ir/native.h). The driver (driver/: load, plan, compile, train) may
# use every module below it but never the command line. The command line (tools/dpc) is a
# client of the public headers like any application: its files include tools/dpc/ headers,
# <dpc/...> and headers of the C library and POSIX, nothing else.
src=$1
fails=0
checked=0

# module: the modules its files may include from (besides itself and the public <dpc/...>)
may_use() {
  case $1 in
  include) echo "" ;;
  ir) echo "" ;;
  frontend) echo "ir" ;;
  passes) echo "ir" ;;
  partitioner) echo "ir passes" ;;
  codegen) echo "ir" ;;
  runtime) echo "ir" ;;
  driver) echo "ir frontend passes partitioner codegen runtime" ;;
  esac
}

# The folders of dpc a header path can start with; anything else (<stdio.h>, <llvm-c/...>) is a
# system or third-party header.
ours='include ir frontend passes partitioner codegen runtime driver tools tests bench examples'

is_ours() {
  for o in $ours; do [ "$1" = "$o" ] && return 0; done
  return 1
}

fail() {
  echo "FAIL $1"
  fails=$((fails + 1))
}

for mod in include ir frontend passes partitioner codegen runtime driver; do
  [ -d "$src/$mod" ] || { fail "$mod/: no such folder under $src"; continue; }
  ok="$mod $(may_use "$mod")"
  # FILE:LINE:TEXT for every include line of the module
  hits=$(cd "$src" && grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<][^">]+/' \
    --include='*.c' --include='*.h' --include='*.def' "$mod")
  [ -n "$hits" ] || continue
  while IFS= read -r hit; do
    file=${hit%%:*}
    header=$(printf '%s\n' "$hit" | sed -E 's/^[^:]*:[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]+)[">].*/\1/')
    top=${header%%/*}
    is_ours "$top" || continue
    checked=$((checked + 1))
    good=0
    for m in $ok; do [ "$top" = "$m" ] && good=1; done
    if [ $good -eq 0 ]; then
      uses=$(may_use "$mod")
      fail "$file includes $header: $mod/ may use ${uses:-no other module}${uses:+ only} (docs/architecture.md)"
    fi
  done <<EOF
$hits
EOF
done

# third-party headers that have one room each
third_party() { # third_party PATTERN ALLOWED_PREFIX WHAT
  found=$(cd "$src" && grep -rlE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($1)" \
    --include='*.c' --include='*.h' include ir frontend passes partitioner codegen runtime driver tools \
    tests bench examples 2>/dev/null)
  for f in $found; do
    case $f in
    $2) ;;
    *) fail "$f includes $3 headers: only $2 may" ;;
    esac
  done
}
third_party 'llvm-c/|llvm/' 'codegen/cpu/*' 'LLVM'
third_party 'metis\.h' 'partitioner/metis.c' 'METIS'
third_party 'microhttpd\.h' 'driver/api_serve.c' 'libmicrohttpd'

# ir/ takes everything as arguments: where files go (the cache folder: codegen/cache.c) is the
# policy of whoever calls it, so nothing under ir/ reads the environment.
env=$(cd "$src" && grep -rnE '\<(secure_)?getenv[[:space:]]*\(' --include='*.c' --include='*.h' ir)
if [ -n "$env" ]; then
  fail "ir/ reads the environment (settings come in as arguments):"
  printf '%s\n' "$env" | sed 's/^/    /'
fi

# tools/dpc: every include is its own header, a public <dpc/...> header, or the C library's.
libc='assert.h ctype.h errno.h fcntl.h float.h inttypes.h limits.h math.h signal.h stdarg.h
stdbool.h stddef.h stdint.h stdio.h stdlib.h string.h strings.h time.h unistd.h sys/stat.h
sys/types.h sys/time.h sys/wait.h sys/resource.h dirent.h'
tools_hits=$(cd "$src" && grep -rnE '^[[:space:]]*#[[:space:]]*include' --include='*.c' \
  --include='*.h' tools/dpc)
[ -n "$tools_hits" ] || fail "tools/dpc: no includes found"
while IFS= read -r hit; do
  [ -n "$hit" ] || continue
  file=${hit%%:*}
  header=$(printf '%s\n' "$hit" | sed -E 's/^[^:]*:[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]+)[">].*/\1/')
  checked=$((checked + 1))
  case $header in
  tools/dpc/*.h | dpc/*.h) continue ;;
  esac
  ok=0
  for h in $libc; do [ "$header" = "$h" ] && ok=1; done
  [ $ok -eq 1 ] || fail "$file includes $header: the command line uses only the public <dpc/...> headers and the C library"
done <<EOF
$tools_hits
EOF

# A scan that matched nothing would pass without checking anything.
if [ "$checked" -lt 100 ]; then
  fail "only $checked includes of dpc's folders found under $src: is it the source tree?"
fi
echo "$checked includes checked"
if [ "$fails" -ne 0 ]; then
  echo "$fails failed"
  exit 1
fi
echo "layering ok"
