# Starting and stopping the servers the comparison scripts measure, sourced
# by scripts/redis-bench.sh, scripts/ycsb.sh and scripts/redis-clients.sh.
# Sets `server_pid`; `stop_server` ends it and waits.

server_pid=

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_server cleave|redis DIR PORT LOG [extra flags…]: cleave-server
# (appendfsync everysec unless the flags say otherwise) or redis-server
# with its AOF on and synced every second, as the issue compares them.
start_server() {
  local kind=$1 dir=$2 port=$3 log=$4
  shift 4
  mkdir -p "$dir"
  case $kind in
    cleave)
      target/release/cleave-server --dir "$dir" --port "$port" --appendfsync everysec "$@" > "$log" 2>&1 &
      ;;
    redis)
      redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
        --appendonly yes --appendfsync everysec --daemonize no "$@" > "$log" 2>&1 &
      ;;
    *) echo "unknown server $kind" >&2; return 1 ;;
  esac
  server_pid=$!
  for _ in $(seq 100); do
    redis-cli -p "$port" ping > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$log" >&2
  echo "$kind did not start on port $port" >&2
  return 1
}

# Peak resident memory of the running server, in KiB.
server_peak_kib() {
  awk '/^VmHWM/ {print $2}' "/proc/$server_pid/status"
}

stop_server() {
  local port=$1
  redis-cli -p "$port" shutdown > /dev/null 2>&1 || true
  wait "$server_pid" || true
  server_pid=
}

stop_server_on_exit() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  return 0
}
