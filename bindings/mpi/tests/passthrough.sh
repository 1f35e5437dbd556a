#!/usr/bin/env bash
# passthrough.sh — runs the plain MPI program `calls` on host buffers without libgpucoll-mpi, under
# LD_PRELOAD of it, and linked against it; every rank's output must be identical in the three, and
# the library's log must show each intercepted call going to MPI for host buffers.
# Each rank's environment is set with env(1) under mpirun, not mpirun's -x: Open MPI refuses -x
# beside OMPI_MCA_mca_base_env_list, which the sanitizer build uses.
# usage: passthrough.sh MPIEXEC NP CALLS CALLS_LINKED SHIM_LIB WORKDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mpiexec=$1 np=$2 calls=$3 linked=$4 shim=$5 work=$6
rm -rf "$work" && mkdir -p "$work"/plain "$work"/preload "$work"/linked
run() { "$mpiexec" -np "$np" --oversubscribe "$@"; }
run "$calls" "$work"/plain
run env GC_MPI_SHIM_LOG=1 "$here"/preload.sh "$shim" "$calls" "$work"/preload 2> "$work"/preload.log
run env GC_MPI_SHIM_LOG=1 "$linked" "$work"/linked 2> "$work"/linked.log
diff -r "$work"/plain "$work"/preload
diff -r "$work"/plain "$work"/linked
for log in "$work"/preload.log "$work"/linked.log; do
  for call in MPI_Allreduce MPI_Reduce MPI_Reduce_scatter_block MPI_Reduce_scatter MPI_Allgather MPI_Bcast; do
    grep -q "$call count [0-9]* -> mpi (host buffers)" "$log" || { echo "no host route of $call in $log"; exit 1; }
  done
  grep -q "MPI_Allreduce count 1 -> mpi (op is not" "$log" || { echo "MPI_BAND not logged in $log"; exit 1; }
  grep -q "MPI_Reduce count 1 -> mpi (op is not" "$log" || { echo "MPI_BOR not logged in $log"; exit 1; }
  grep -q "MPI_Reduce_scatter count 7 -> mpi (receive counts differ" "$log" || { echo "unequal counts not logged"; exit 1; }
  if grep -q -- "-> gpucoll" "$log"; then echo "a host-buffer call went to gpucoll: $log"; exit 1; fi
done
echo "passthrough: $np ranks, outputs identical with and without libgpucoll-mpi"
