#!/usr/bin/env bash
# latency.sh — the MPI_Allreduce table on device buffers: staged through host memory without
# libgpucoll-mpi (what a program does on an MPI that is not CUDA-aware), device pointers under
# LD_PRELOAD of it, and device pointers without it when CUDA_AWARE_MPI=1 says the MPI takes them.
# usage: latency.sh BUILD_DIR [NP] [MAX_BYTES]
set -euo pipefail
build=$1 np=${2:-2} max=${3:-67108864}
bin=$build/bindings/mpi/tests/gcm_latency shim=$build/bindings/mpi/libgpucoll-mpi.so
run() { mpirun -np "$np" --oversubscribe "$@"; }
echo "== without libgpucoll-mpi, staged through host"; run "$bin" --staged "$max"
echo "== with libgpucoll-mpi (LD_PRELOAD), device pointers"; run -x LD_PRELOAD="$shim" "$bin" --direct "$max"
if [ "${CUDA_AWARE_MPI:-0}" = 1 ]; then
  echo "== without libgpucoll-mpi, device pointers (CUDA-aware MPI)"; run "$bin" --direct "$max"
fi
