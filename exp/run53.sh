#!/usr/bin/env bash
# run 53: tree of the commit named in TREE: build; GPU suite on 3, 4, 2 ranks; RS/AG matrices on 3 and 4 GPUs.
set -u -o pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
LOGDIR=$OUT/logs BUDGET=120 bash scripts/gpu-host.sh build > $OUT/build.txt 2>&1; tail -2 $OUT/build.txt
source .gpu-host/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in 3 4 2; do
  timeout 200 env GC_TIMEOUT_MS=15000 mpirun --bind-to none -np $np build-gpu/tests/gc_tests --gpu > $OUT/logs/gpu_np$np.log 2>&1
  echo "== gpu_np$np rc=$? at $(( $(date +%s) - t0 ))s"
  grep -E "tests |asserts |failure|FAIL" $OUT/logs/gpu_np$np.log | tail -6
done
for np in 3 4; do
  TREE=$TREE NPS=$np COLLS="reducescatter allgather" timeout 150 bash scripts/bench-gpu.sh build-gpu $OUT/logs/results$np > $OUT/logs/bench$np.log 2>&1
  echo "== matrices $np rc=$? at $(( $(date +%s) - t0 ))s"
  for c in reducescatter allgather; do
    echo "## $c $np"; grep -E "^ +[0-9]" $OUT/logs/results$np/$c-h200x$np.txt | awk '{printf "%s:%s/%s/%s/%s/%s ", $1, $6, $10, $14, $17, $9}'; echo
  done
done
tar czf $OUT/r53.tgz -C $OUT logs && rm -rf $OUT/logs $OUT/all.log
