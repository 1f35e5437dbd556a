#!/usr/bin/env bash
# scripts/run.sh — the README's main job: builds gpucoll and runs the sweep (examples/sweep.lua)
# over every collective, size and algorithm on all local GPUs, or on host buffers with 4 MPI ranks
# where there is no GPU; writes the table, a CSV and plots under results/.
source "$(dirname "$0")/common.sh"
gc_install_deps
gc_find_cuda
gc_build
gpus=$(gc_gpu_count)
n=$gpus
[ "$gpus" -ge 1 ] || n=4
out=${GC_RESULTS_DIR:-$GC_ROOT/results}
mkdir -p "$out"
echo "== sweep on $n ranks ($( [ "$gpus" -ge 1 ] && echo GPUs || echo host buffers)), results in $out"
mpirun -np "$n" --oversubscribe "$GC_BUILD_DIR/bindings/lua/gpucoll-lua" run "$GC_ROOT/examples/sweep.lua" out="$out" "$@"
