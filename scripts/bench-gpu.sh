#!/usr/bin/env bash
# bench-gpu.sh — the benchmark matrix on a GPU host: every collective, gpucoll beside NCCL, bf16,
# 1 KB to 1 GB, CUDA-graph replay, on 2 and 4 GPUs (the commands in docs/performance.md); from 4
# GPUs also the mixed operations on TP 2 x DP N/2 beside the unfused NCCL pipeline; CSVs, logs and
# plots in results/bench/ (ignored by git).
#
# usage: scripts/bench-gpu.sh BUILD_DIR [RESULTS_DIR]
#   BUILD_DIR    the CMake build holding bench/gpucoll-bench
#   RESULTS_DIR  where the CSVs, logs, PNGs and COMMANDS.txt go (default: results/bench)
# Environment: MPIRUN (default mpirun), PYTHON (default python3), NPS (default "2 4"),
#              COLLS (default "allreduce reducescatter allgather broadcast"),
#              MIXED (default "allreduce_allgather reducescatter_allreduce"; "" for none), TREE (the commit
#              COMMANDS.txt names; default git's HEAD, stale where the tree was copied without .git).
# About 5 minutes on 4 x H200: gpucoll-bench shrinks the iterations above 256 MB by itself.
set -u -o pipefail

build=${1:?usage: scripts/bench-gpu.sh BUILD_DIR [RESULTS_DIR]}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
results=${2:-$repo/results/bench}
bench=$build/bench/gpucoll-bench
mpirun=${MPIRUN:-mpirun}
python=${PYTHON:-python3}
colls=${COLLS:-allreduce reducescatter allgather broadcast}
mixed=${MIXED-allreduce_allgather reducescatter_allreduce}

[ -x "$bench" ] || { echo "bench-gpu.sh: no $bench; build with -DGC_BUILD_BENCH=ON" >&2; exit 2; }
command -v nvidia-smi >/dev/null || { echo "bench-gpu.sh: nvidia-smi not found: not a GPU host?" >&2; exit 2; }
ngpu=$(nvidia-smi -L | grep -c '^GPU')
# "NVIDIA H200" -> h200: the tag in the file names.
tag=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' |
      sed -e 's/nvidia//' -e 's/[^a-z0-9]//g')
tag=${tag:-gpu}
mkdir -p "$results"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

commands=$results/COMMANDS.txt
{
  echo "# gpucoll-bench runs behind the CSVs and plots in this folder (scripts/bench-gpu.sh)"
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): $ngpu x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)," \
       "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)," \
       "commit ${TREE:-$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
} > "$commands"

failed=0
start_all=$(date +%s)
# One measured run: its command in COMMANDS.txt, its log, its CSV and plot. run NAME ARGS...
run() {
  local name=$1 t0 cmd; shift
  cmd=("$mpirun" "$@" --csv "$results/$name.csv")
  echo "${cmd[*]}" | sed "s|$build|\$BUILD|; s|$results|\$RESULTS|" >> "$commands"
  echo "== ${cmd[*]}"
  t0=$(date +%s)
  if "${cmd[@]}" 2>&1 | tee "$results/$name.txt"; then
    csvs+=("$results/$name.csv")
    "$python" "$repo/scripts/plot_bench.py" "$results/$name.csv" "$results/$name.png" || failed=1
  else
    echo "bench-gpu.sh: $name failed (log: $results/$name.txt)" >&2
    echo "# ^ FAILED, see $name.txt" >> "$commands"
    failed=1
  fi
  echo "#   took $(( $(date +%s) - t0 )) s" >> "$commands"
}
for np in ${NPS:-2 4}; do
  if [ "$np" -gt "$ngpu" ]; then
    echo "bench-gpu.sh: skipping $np ranks: only $ngpu GPUs" | tee -a "$commands"
    continue
  fi
  csvs=()
  # --bind-to none: the ranks' host-side checks of 1 GB outputs use OpenMP over the node's cores.
  for coll in $colls; do
    run "$coll-${tag}x$np" -np "$np" --bind-to none "$bench" "$coll" --vs nccl -G 1 -d bfloat16 \
      -b 1K -e 1G -f 4 -n 20 -w 5 -c 1 -a 3
  done
  # The mixed operations want both axes: TP 2 inside the node, DP over the rest of its GPUs.
  if [ "$np" -ge 4 ] && [ $(( np % 2 )) = 0 ]; then
    for coll in $mixed; do
      run "$coll-${tag}x$np" -np "$np" --bind-to none "$bench" "$coll" --local-tp 2 --local-dp $(( np / 2 )) \
        --vs nccl -G 1 -d bfloat16 -b 1K -e 1G -f 4 -n 20 -w 5 -c 1 -a 3
    done
  fi
  if [ ${#csvs[@]} -gt 1 ]; then
    "$python" "$repo/scripts/plot_bench.py" "${csvs[@]}" "$results/all-${tag}x$np.png" || failed=1
    echo "$python scripts/plot_bench.py <the CSVs above> \$RESULTS/all-${tag}x$np.png" >> "$commands"
  fi
done
echo "# plots: python3 scripts/plot_bench.py \$RESULTS/<name>.csv \$RESULTS/<name>.png" >> "$commands"
echo "# into docs/data (then perf_doc.py tables and figures): python3 scripts/perf_doc.py import \$RESULTS/<name>.csv" >> "$commands"
echo "# total $(( $(date +%s) - start_all )) s" >> "$commands"
echo "bench-gpu.sh: results in $results (total $(( $(date +%s) - start_all )) s)"
exit $failed
