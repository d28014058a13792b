# Shared by the command-line test scripts (sourced after they set $work and fails=0): each check
# prints "ok   WHAT" or "FAIL WHAT" with what it saw, and counts failures in $fails.

expect() { # expect STATUS DESCRIPTION -- command...: the command's exit status; its output in
  # $work/out and $work/err
  want=$1
  what=$2
  shift 3
  "$@" >"$work/out" 2>"$work/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL $what: exit $got, expected $want"
    sed 's/^/    /' "$work/out" "$work/err" | head -20
    fails=$((fails + 1))
  else
    echo "ok   $what"
  fi
}
contains() { # contains FILE TEXT DESCRIPTION: a line of FILE matches TEXT (grep)
  if grep -q -- "$2" "$1"; then echo "ok   $3"; else
    echo "FAIL $3: '$2' not in output:"
    sed 's/^/    /' "$1" | head -20
    fails=$((fails + 1))
  fi
}
lacks() { # lacks FILE TEXT DESCRIPTION: no line of FILE matches TEXT
  if grep -q -- "$2" "$1"; then
    echo "FAIL $3: '$2' in output:"
    grep -- "$2" "$1" | sed 's/^/    /' | head -5
    fails=$((fails + 1))
  else
    echo "ok   $3"
  fi
}
serve_ready() { # serve_ready ERRFILE SED PID: once the server PID has printed its port (SED
  # extracts it from ERRFILE) and /v2/health/ready answers there, sets $url and returns 0; 1
  # when the server ends or 30 s pass first
  url=""
  i=0
  while [ $i -lt 300 ]; do
    port=$(sed -n "$2" "$1" 2>/dev/null)
    if [ -n "$port" ] && curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/v2/health/ready"; then
      url="http://127.0.0.1:$port"
      return 0
    fi
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}
started() { # started WHAT ERRFILE SED PID: serve_ready, saying so ("ok   WHAT on URL") or why not
  if serve_ready "$2" "$3" "$4"; then
    echo "ok   $1 on $url"
    return 0
  fi
  echo "FAIL $1: not ready within 30 s"
  sed 's/^/    /' "$2" | head -20
  fails=$((fails + 1))
  return 1
}
exits_ok() { # exits_ok PID WHAT ERRFILE: PID (a child) exits 0 within 30 s (else it is killed)
  i=0
  while kill -0 "$1" 2>/dev/null && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  kill -0 "$1" 2>/dev/null && kill -KILL "$1"
  wait "$1"
  got=$?
  if [ $got -eq 0 ]; then echo "ok   $2"; else
    echo "FAIL $2: exit $got"
    sed 's/^/    /' "$3" | tail -10
    fails=$((fails + 1))
  fi
}
