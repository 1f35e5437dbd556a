#!/bin/sh
# sweep_nccl_missing.sh MPIEXEC GPUCOLL_LUA SWEEP_LUA OUTDIR — the sweep asked for NCCL in every
# mode (nccl=1 R=all) where no NCCL can be loaded (GC_NCCL_LIBRARY=/nonexistent, set on each rank
# with env(1)): one line saying so, no NCCL row, gpucoll's and MPI's rows as usual, exit 0.
set -eu
mpiexec=$1 lua=$2 sweep=$3 out=$4
rm -rf "$out" "$out.log"
if ! "$mpiexec" -np 2 --oversubscribe env GC_NCCL_LIBRARY=/nonexistent "$lua" run "$sweep" \
    sizes=1K:4K out="$out" host=1 iters=2 warmup=1 nccl=1 R=all plot=0 >"$out.log" 2>&1; then
  cat "$out.log"
  echo "FAIL: the sweep exited non-zero"
  exit 1
fi
cat "$out.log"
fail() { echo "FAIL: $*"; exit 1; }
notes=$(grep -c 'NCCL not measured' "$out.log" || true)
[ "$notes" -eq 1 ] || fail "$notes lines say NCCL was not measured, want 1"
grep -q '^note: NCCL not measured: .*NCCL not found.*GC_NCCL_LIBRARY' "$out.log" ||
  fail "the note does not say that NCCL was not found"
if grep -q -i 'traceback\|MPI_ABORT' "$out.log"; then fail "a traceback or an abort"; fi
csv=$out/sweep.csv
[ -f "$csv" ] || fail "no $csv"
nccl_rows=$(awk -F, 'NR > 1 && $2 == "nccl"' "$csv" | wc -l)
gc_rows=$(awk -F, 'NR > 1 && $2 == "gpucoll"' "$csv" | wc -l)
mpi_rows=$(awk -F, 'NR > 1 && $2 == "mpi"' "$csv" | wc -l)
[ "$nccl_rows" -eq 0 ] || fail "$nccl_rows NCCL rows in $csv"
[ "$gc_rows" -gt 0 ] && [ "$mpi_rows" -gt 0 ] || fail "gpucoll rows $gc_rows, MPI rows $mpi_rows in $csv"
grep -q '"nccl":false' "$out/sweep.json" || fail "sweep.json does not say nccl false"
echo "PASS: NCCL missing: one note, 0 NCCL rows, $gc_rows gpucoll and $mpi_rows MPI rows"
