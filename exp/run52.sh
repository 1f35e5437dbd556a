#!/usr/bin/env bash
# run 52: tree fb9c1cc: build; the GPU suite on 3 ranks (GPUs 0-2) and 1 rank; every collective's matrix on 3 GPUs.
set -u -o pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
LOGDIR=$OUT/logs BUDGET=120 bash scripts/gpu-host.sh build > $OUT/build.txt 2>&1; tail -3 $OUT/build.txt
source .gpu-host/env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in 3 1; do
  timeout 200 env GC_TIMEOUT_MS=15000 mpirun --bind-to none -np $np build-gpu/tests/gc_tests --gpu > $OUT/logs/gpu_np$np.log 2>&1
  echo "== gpu_np$np rc=$? at $(( $(date +%s) - t0 ))s"
  grep -E "Run Summary|tests |asserts |failure|FAIL" $OUT/logs/gpu_np$np.log | tail -8
done
TREE=fb9c1cc NPS=3 timeout 200 bash scripts/bench-gpu.sh build-gpu $OUT/logs/results3 > $OUT/logs/bench3.log 2>&1
echo "== matrices rc=$? at $(( $(date +%s) - t0 ))s"
for c in allreduce reducescatter allgather broadcast; do
  echo "## $c"; grep -E "^ +[0-9]" $OUT/logs/results3/$c-h200x3.txt | awk '{printf "%s:%s/%s/%s/%s/%s ", $1, $6, $10, $14, $17, $9}'; echo
done
tar czf $OUT/r52.tgz -C $OUT logs && rm -rf $OUT/logs $OUT/all.log
