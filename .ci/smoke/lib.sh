# Shared by the smoke checks: processes started in sessions of their own (so
# each stops, children and all, by one process id), free loopback ports, and a
# clean-up that stops them and shows their logs when the check failed.
# The caller sets WORK (a scratch folder, removed at the end) and may define
# drop_resources to remove what else it created.

PIDS=()

step() { printf '\n--- %s: %s\n' "$SMOKE" "$*"; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start() {
  local name=$1; shift
  setsid bash -c "$*" >"$WORK/$name.log" 2>&1 &
  PIDS+=("$!")
  echo "started $name (pid $!): $*"
}

wait_for_http() {
  local url=$1 seconds=${2:-120}
  for _ in $(seq $((seconds * 2))); do
    curl -fsS -o /dev/null -H 'X-Forwarded-Proto: https' "$url" 2>/dev/null && return 0
    for pid in "${PIDS[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "process $pid ended before $url answered"; return 1; }
    done
    sleep 0.5
  done
  echo "nothing answered at $url within $seconds s"; return 1
}

no_errors_logged() {
  if grep -E "Traceback|ModuleNotFoundError" "$@"; then
    echo "a process logged an error (above)"; return 1
  fi
}

cleanup() {
  local status=$?
  step "clean-up"
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "$status" -ne 0 ]; then
    for log in "$WORK"/*.log; do
      [ -f "$log" ] && { echo "=== $(basename "$log") (last 60 lines)"; tail -n 60 "$log"; }
    done
  fi
  if declare -F drop_resources >/dev/null; then drop_resources || true; fi
  rm -rf "$WORK"
  echo "stopped ${#PIDS[@]} process groups; removed $WORK"
  [ "$status" -eq 0 ] && echo "$SMOKE smoke passed" || echo "$SMOKE smoke FAILED"
  exit "$status"
}
trap cleanup EXIT
