#!/usr/bin/env bash
# scripts/ab-gpu.sh — an A/B comparison on one GPU host in one go: gpucoll-bench built from this
# tree (A) and from a copy of it with the files under OVERLAY_DIR laid over it (B: paths as in the
# repository, e.g. another kernels/ll.cu), the same benchmarks run with both, alternating, so the
# spread between hosts and runs does not enter the comparison.
#
# usage: scripts/ab-gpu.sh OVERLAY_DIR NP "COLL ARGS" ["COLL ARGS" ...]
#   e.g. scripts/ab-gpu.sh ab 4 "reducescatter -b 1K -e 1M -f 4" "allreduce --algo oneshot_ll -b 1K -e 1M -f 4"
# Every run adds -G 1 -d bfloat16 -c 1 -n 50 -w 10. Environment: BUILD (this tree's build dir,
# default build-gpu; configured and built when it has no gpucoll-bench), REPS (rounds, default 2),
# LOGDIR (default /tmp/ab-logs). Prints "size A-time B-time B/A" per size and round.
set -u -o pipefail
overlay=${1:?usage: scripts/ab-gpu.sh OVERLAY_DIR NP "COLL ARGS"...}
np=${2:?usage: scripts/ab-gpu.sh OVERLAY_DIR NP "COLL ARGS"...}
shift 2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -f "$repo/.gpu-host/env.sh" ] && source "$repo/.gpu-host/env.sh"  # hosts without CUnit/Lua/SWIG
overlay=$(cd "$overlay" && pwd) || exit 2
build=${BUILD:-$repo/build-gpu}
logs=${LOGDIR:-/tmp/ab-logs}
copy=$(mktemp -d /tmp/gpucoll-b.XXXXXX)
mkdir -p "$logs"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

configure_and_build() { # SRC DIR
  cmake -S "$1" -B "$2" -DGC_CUDA_ARCHITECTURES=90 -DGC_BUILD_SWIG=OFF -DGC_BUILD_LUA=OFF > "$logs/cmake-$(basename "$2").log" 2>&1 &&
    cmake --build "$2" -j "$(nproc)" --target gpucoll-bench >> "$logs/cmake-$(basename "$2").log" 2>&1 ||
    { echo "ab-gpu.sh: build in $2 failed; see $logs" >&2; exit 1; }
}
[ -x "$build/bench/gpucoll-bench" ] || configure_and_build "$repo" "$build"
(cd "$repo" && tar cf - --exclude='./build*' --exclude=./.git --exclude=./.gpu-host .) | tar xf - -C "$copy"
cp -r "$overlay"/. "$copy"/
echo "B = this tree with: $(cd "$overlay" && find . -type f | sed 's|^\./||' | tr '\n' ' ')"
configure_and_build "$copy" "$copy/b"

times() { grep -E "^ +[0-9]" "$1" | awk '{print $1, $6}'; }
for ((rep = 1; rep <= ${REPS:-2}; rep++)); do
  for args in "$@"; do
    name=$(echo "$args" | sed -e 's/[^A-Za-z0-9]\+/_/g')_r$rep
    for side in A B; do
      bin=$build/bench/gpucoll-bench
      [ $side = B ] && bin=$copy/b/bench/gpucoll-bench
      timeout 120 mpirun --bind-to none -np "$np" "$bin" $args -G 1 -d bfloat16 -c 1 -n 50 -w 10 > "$logs/${name}_$side.log" 2>&1 ||
        echo "ab-gpu.sh: $side $args failed (see $logs/${name}_$side.log)"
    done
    echo "## $args, round $rep: size A B B/A"
    paste <(times "$logs/${name}_A.log") <(times "$logs/${name}_B.log") |
      awk '{printf "%11s %9s %9s %6.3f\n", $1, $2, $4, $4 / $2}'
  done
done
rm -rf "$copy"
