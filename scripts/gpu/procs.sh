# procs.sh — sourced by the GPU scripts.
#   stop_pids PID...   SIGTERM to every PID, then waits up to 10 s for all of
#                      them to exit; prints the PIDs still alive after that
#                      (the caller SIGKILLs and logs them its own way)
stop_pids() {
  local p alive
  for p in "$@"; do kill "$p" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    [ -z "$alive" ] && return 0
    sleep 0.2
  done
  echo $alive
}
