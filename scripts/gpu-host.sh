#!/usr/bin/env bash
# scripts/gpu-host.sh — builds gpucoll on a GPU host and runs the GPU suite and benchmarks in one go,
# each step bounded by `timeout` so one stuck step cannot eat the session; logs go to $LOGDIR.
# usage: scripts/gpu-host.sh [STEP...]   steps: build tests schedules tests2 suite4 suite2 tests8 p2p bench algos ll
#        blocks probe benchfull rmsnorm csan asan lua python (environment knobs: see each step; SUITE_TIMEOUT_MS bounds
#        every wait of suite4 and suite2, 30000 by default)
# On hosts without Lua/CUnit/SWIG, a bundle from ../shared/gpu-host/bundle.sh in .gpu-host is used.
set -u -o pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
[ -f .gpu-host/env.sh ] && source .gpu-host/env.sh
# The operator's NVLink multicast kill switches stay set for every program started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none PYTHONUNBUFFERED=1
build=${BUILD:-$repo/build-gpu}
logs=${LOGDIR:-${OUT:-/tmp}/logs}
mkdir -p "$logs"
py=${PYTHON:-$(command -v python3)}
mpirun="mpirun --bind-to none"

budget=${BUDGET:-570}   # seconds for the whole script: later steps shrink or are skipped
start=$(date +%s)
step() { # step NAME SECONDS CMD...: runs CMD with a time bound, keeps its log, prints the tail
  local name=$1 secs=$2
  shift 2
  local t0=$(date +%s) left=$(( budget - ($(date +%s) - start) - 20 ))
  [ "$secs" -gt "$left" ] && secs=$left
  if [ "$secs" -lt 15 ]; then echo "=== $name skipped: out of time"; return 0; fi
  echo "=== $name (limit ${secs}s): $*"
  timeout -k 10 "$secs" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "=== $name rc=$rc in $(( $(date +%s) - t0 ))s"
  grep -E "Run Summary|tests |asserts |failure|FAIL|passed|failed|Error|error:" "$logs/$name.log" | tail -12
  # a failed suite: its seed (GC_TEST_SEED reproduces the data) and where each failure is
  if grep -qE "[1-9][0-9]* failure\(s\)" "$logs/$name.log"; then
    grep -m1 -E "seed [0-9]+" "$logs/$name.log"
    grep -E "^\[rank [0-9]+\]|^ +[0-9]+\. .*:[0-9]+ +- " "$logs/$name.log" | head -24
  fi
  { echo "=== $name rc=$rc: $*"; tail -c 200000 "$logs/$name.log"; } >> "${OUT:-/tmp}/all.log"
  return 0
}

suites=()   # SUITES="a b": suite4, suite2, csan and asan run only these suites; TESTS="x;y z" only
for s in ${SUITES:-}; do suites+=(--suite "$s"); done   # the tests whose names contain x or "y z"
IFS=';' read -ra tests_sel <<< "${TESTS:-}"
for t in "${tests_sel[@]}"; do [ -n "$t" ] && suites+=(--test "$t"); done
# forced PREFIX NP COLL ALGO VARS BENCH_ARGS...: gpucoll-bench with one algorithm on NP GPUs, log
# and CSV named PREFIX_COLL_ALGO[_VARS]; VARS "A=1,B=2" set the environment (M=N: the bench's --max-blocks N;
# EAGER=1: --eager, plain buffers instead of gc_mem_alloc; G=0: stream launches, not graph replay).
forced() {
  local prefix=$1 np=$2 coll=$3 algo=$4 vars=$5
  shift 5
  local envs=() extra=() graph=1 v name
  for v in ${vars//,/ }; do
    case $v in M=*) extra+=(--max-blocks "${v#M=}") ;; EAGER=1) extra+=(--eager) ;; G=*) graph=${v#G=} ;; *) envs+=("$v") ;; esac
  done
  name=${prefix}_${coll}_${algo}${vars:+_$(echo "$vars" | tr ',=' '__')}
  step "$name" 60 env "${envs[@]}" $mpirun -np "$np" "$build/bench/gpucoll-bench" "$coll" --algo "$algo" "${extra[@]}" \
    -G "$graph" -d bfloat16 -c 1 "$@" --csv "$logs/$name.csv"
  grep -E "^ +[0-9]" "$logs/$name.log" | awk -v c="$name" '{printf "%-50s %11s %9s us %7s GB/s %s wrong\n", c, $1, $6, $8, $9}'
}

# The collectives suite on 4 GPUs with each broadcast-by-writes schedule, many pieces per block.
schedules() {
  for sched in ring owners; do
    step gpu_np4_bcast_$sched 120 env GC_TIMEOUT_MS=30000 GC_PUSH_SCHEDULE=$sched GC_PUSH_PIECE=4096 \
      $mpirun -np 4 "$build/tests/gc_tests" --gpu --suite collectives
  done
}

steps=("$@")
[ $# -eq 0 ] && steps=(build tests bench)
for s in "${steps[@]}"; do
  case $s in
    build)
      nvidia-smi -L; nvidia-smi topo -m | head -8
      step configure 120 cmake -S . -B "$build" -DGC_CUDA_ARCHITECTURES=90 -DGC_BUILD_SWIG=OFF
      tail -5 "$logs/configure.log"
      step make 300 cmake --build "$build" -j 32 ;;
    tests)  step gpu_np4 240 env GC_TIMEOUT_MS=30000 $mpirun -np 4 "$build/tests/gc_tests" --gpu --verbose
            schedules ;;
    schedules) schedules ;;
    tests2) step gpu_np2 200 env GC_TIMEOUT_MS=30000 $mpirun -np 2 "$build/tests/gc_tests" --gpu --verbose
            step gpu_np2_mpi_staged 150 env GC_ALGO=mpi GC_CUDA_AWARE=0 GC_MPI_CHUNK_BYTES=1048576 \
              $mpirun -np 2 "$build/tests/gc_tests" --gpu --suite allreduce --suite collectives ;;
    suite4) step gpu_np4 240 env GC_TIMEOUT_MS=${SUITE_TIMEOUT_MS:-30000} $mpirun -np 4 "$build/tests/gc_tests" --gpu --verbose "${suites[@]}" ;;
    suite2) step gpu_np2 200 env GC_TIMEOUT_MS=${SUITE_TIMEOUT_MS:-30000} $mpirun -np 2 "$build/tests/gc_tests" --gpu --verbose "${suites[@]}" ;;
    tests8) step gpu_np8_2per 240 $mpirun -np 8 "$build/tests/gc_tests" --gpu --suite allreduce --suite collectives --suite p2p ;;
    bench)
      for c in allreduce reducescatter allgather broadcast; do
        step bench4_$c 120 $mpirun -np 4 "$build/bench/gpucoll-bench" $c --vs nccl -G 1 -d bfloat16 -b 1K -e 1G -f 4 -n 20 -w 5 -c 1
        grep -vE "^#( |$)" "$logs/bench4_$c.log" | tail -14
      done ;;
    algos)  # collectives with an algorithm forced, 1 MB - 1 GB: the data behind the dispatch table.
      # Entries: "GPUS:COLLECTIVE:ALGORITHM[:VAR=VALUE,...]" (M=N is the bench's --max-blocks N, a grid cap);
      # ALGOS replaces the default list.
      default_algos="4:allreduce:twoshot 4:allreduce:copyengine 4:reducescatter:copyengine
        4:reducescatter:copyengine:GC_STAGING_BYTES=268435456 4:reducescatter:copyengine:GC_MAX_BLOCKS=16
        4:allgather:copyengine 4:broadcast:copyengine 2:allreduce:twoshot_push 2:allreduce:copyengine
        2:allgather:oneshot 2:allgather:copyengine 2:broadcast:oneshot 2:broadcast:copyengine"
      for entry in ${ALGOS:-$default_algos}; do
        IFS=: read -r np coll algo vars <<< "$entry"
        forced algo$np "$np" "$coll" "$algo" "$vars" -b 1M -e 1G -f 4 -n 20 -w 5
      done ;;
    ll)  # the forms that compete at small and middle sizes, each forced, on 4 and 2 GPUs (LLNP),
         # entries COLL:ALGO:LAST_SIZE[:VAR=VALUE,...] (LLRUNS replaces the list; sizes from LLB by
         # factors of LLF); then all-reduce auto beside NCCL (LLAUTO=0: not)
      for np in ${LLNP:-4 2}; do
        for entry in ${LLRUNS:-allreduce:oneshot_ll:2M allreduce:oneshot:16M allreduce:twoshot_push:64M
                      allreduce:twoshot:64M reducescatter:oneshot_ll:1M reducescatter:oneshot:1M
                      allgather:oneshot_ll:1M allgather:oneshot:1M broadcast:oneshot_ll:1M broadcast:oneshot:1M}; do
          IFS=: read -r coll algo e vars <<< "$entry"
          forced ll$np "$np" "$coll" "$algo" "$vars" -b "${LLB:-1K}" -e "$e" -f "${LLF:-4}" -n 50 -w 10
        done
        if [ "${LLAUTO:-1}" != 0 ]; then
          step ll${np}_auto 90 $mpirun -np $np "$build/bench/gpucoll-bench" allreduce --vs nccl -G 1 -d bfloat16 -b 1K -e 64M -f 4 -n 50 -w 10 -c 1 --csv "$logs/ll${np}_auto.csv"
          grep -vE "^#( |$)" "$logs/ll${np}_auto.log" | tail -12
        fi
      done ;;
    probe) step linkprobe 120 "$build/bench/gpucoll-linkprobe" 64 5
           cat "$logs/linkprobe.log" ;;
    blocks)  # grid caps for the large-size kernels: gpucoll alone, 16 MB - 1 GB
      for c in "allreduce --algo twoshot" "allreduce --algo twoshot_push" reducescatter allgather "broadcast --algo twoshot" "broadcast --algo oneshot"; do
        for m in ${BLOCKS:-32 64 132}; do
          name=blocks_$(echo "$c" | tr -d ' -')_$m
          step "$name" 60 $mpirun -np 4 "$build/bench/gpucoll-bench" $c --max-blocks $m -G 1 -d bfloat16 -b 16M -e 1G -f 8 -n 10 -w 3 -c 0
          grep -E "^ +[0-9]" "$logs/$name.log" | awk -v c="$c" -v m=$m '{printf "%-28s m=%-4s %11s %9s us %7s GB/s\n", c, m, $1, $6, $8}'
        done
      done ;;
    rmsnorm)  # the fused all-reduce + RMSNorm + FP8 beside the unfused baseline, bf16, 8192 cols, one
              # rank per GPU present (RMSNP overrides), without and with the residual
      np=${RMSNP:-$(nvidia-smi -L | grep -c '^GPU')}
      for r in "" --residual; do
        name=rms${np}${r#--}
        step "$name" 90 $mpirun -np "$np" "$build/bench/gpucoll-bench" rmsnorm --vs nccl -G 1 -d bfloat16 \
          --cols 8192 $r -b 16K -e 128M -f 8 -n 20 -w 5 -c 1 --csv "$logs/$name.csv"
        grep -vE "^#( |$)" "$logs/$name.log" | tail -8
      done ;;
    csan)  # the GPU suite under compute-sanitizer: each tool of CSTOOLS (memcheck racecheck synccheck
           # initcheck) with each rank count of CSNP (ranks share the GPUs present); SUITES picks suites,
           # CSOPTS adds options (e.g. "--leak-check full" for memcheck), CSLIMIT reports a rank prints
           # (40; 0: all); the summary counts each report's source lines, offsets dropped
      cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      for tool in ${CSTOOLS:-memcheck}; do
        for np in ${CSNP:-1}; do
          step cs_${tool}_np$np "${CSSECS:-240}" env GC_TIMEOUT_MS=120000 $mpirun -np "$np" "$cs" --tool "$tool" ${CSOPTS:-} \
            --error-exitcode 7 --report-api-errors no --print-limit "${CSLIMIT:-40}" "$build/tests/gc_tests" --gpu --verbose "${suites[@]}"
          grep -E "ERROR SUMMARY|SUMMARY:|^========= +([A-Z]|and )" "$logs/cs_${tool}_np$np.log" |
            sed -E 's/\+0x[0-9a-f]+//g; s/ \[[0-9]+ hazards\]//' | sort | uniq -c | sort -rn | head -16
        done
      done ;;
    asan)  # the host code under AddressSanitizer and UBSan (scripts/sanitize.sh): the GPU suite with
           # ASANNP ranks (2) on the GPUs present (SUITES picks suites)
      step asan 540 env GC_NO_APT=1 GC_BUILD_DIR="$repo/build-sanitize" \
        GC_CMAKE_ARGS="-DGC_CUDA_ARCHITECTURES=90 -DGC_BUILD_BENCH=OFF -DGC_BUILD_LUA=OFF -DGC_BUILD_SWIG=OFF" \
        bash scripts/sanitize.sh --run env GC_TIMEOUT_MS=${SUITE_TIMEOUT_MS:-30000} $mpirun -np "${ASANNP:-2}" \
        "$repo/build-sanitize/tests/gc_tests" --gpu --verbose "${suites[@]}"
      grep -E "Test:|^== " "$logs/asan.log" | tail -25 ;;
    p2p)   step p2p_np4 120 $mpirun -np 4 "$build/tests/gc_tests" --gpu --suite p2p ;;
    benchfull) step benchfull 560 bash scripts/bench-gpu.sh "$build" "$logs/results"
               tail -40 "$logs/benchfull.log" ;;
    lua) step lua_sweep 300 $mpirun -np 4 "$build/bindings/lua/gpucoll-lua" run examples/sweep.lua out="$logs/sweep"
         head -30 "$logs/lua_sweep.log"
         step lua_module_gpu 120 $mpirun -np 4 "$build/bindings/lua/gpucoll-lua" run bindings/lua/tests/test_module.lua gpu=1 ;;
    python)  # a separate build: the bindings need this host's Python headers, which may be missing
      step configure_swig 120 cmake -S . -B "$build-swig" -DGC_CUDA_ARCHITECTURES=90 -DGC_BUILD_LUA=OFF \
        -DGC_BUILD_BENCH=OFF -DGC_BUILD_TESTS=OFF -DGC_SWIG_GO=OFF -DGC_SWIG_TCL=OFF -DGC_SWIG_PYTHON="$py"
      step make_swig 200 cmake --build "$build-swig" -j 32
      step python_gpu 200 env -C "$build-swig/bindings/swig" ctest -L gpu --output-on-failure ;;
    *) echo "unknown step $s" ;;
  esac
done
cd "$logs/.." && tar czf "${OUT:-/tmp}/logs.tgz" "$(basename "$logs")" 2>/dev/null
echo "=== done"
