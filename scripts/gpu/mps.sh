# mps.sh — sourced by the GPU scripts: a private CUDA MPS control daemon
# (docs/cuda.md, "MPS") that is always taken down, also when a client hangs.
#   mps_start   exports CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY and
#               starts nvidia-cuda-mps-control -d; status 0 when it runs
#   mps_stop    kills what still runs from .carry/cu (an MPS "quit" waits
#               for every client), asks the daemon to quit for at most 15 s,
#               then kills the MPS processes that are left
MPS_PIPE=${MPS_PIPE:-/tmp/zpp-mps}
mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE CUDA_MPS_LOG_DIRECTORY=$MPS_PIPE-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
}
mps_stop() {
  pkill -9 -f "$PWD/.carry/cu/bin/" 2>/dev/null
  sleep 1
  timeout 15 sh -c 'echo quit | nvidia-cuda-mps-control' 2>/dev/null ||
    echo "mps_stop: the MPS control daemon did not quit in 15 s: killed" >&2
  pkill -9 -f nvidia-cuda-mps 2>/dev/null
  sleep 1
}
