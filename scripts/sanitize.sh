#!/usr/bin/env bash
# scripts/sanitize.sh — builds the host code with AddressSanitizer and UndefinedBehaviorSanitizer
# (-DGC_SANITIZE=address,undefined) into build-sanitize and runs every test this machine can run
# under them (without a GPU: all but those labelled gpu). It fails on a failing test, on any
# sanitizer error, and on any leak allocated by this project's code. Leaks inside Open MPI's own
# libraries and plugins are not ours and are only counted. Programs built without the sanitizer
# that load the library (python, tclsh, lua, go test binaries, the installed example; every test
# starts them under mpirun) get its runtime, the configured C compiler's libasan and libubsan,
# through LD_PRELOAD in the ranks' environment only (Open MPI's mca_base_env_list): preloaded into
# mpirun itself, ASan stops it on a use-after-free inside Open MPI's runtime.
# usage: scripts/sanitize.sh [CTEST_SELECTION...]   e.g. -L gpu -R '^gpu_np[12]$' on a GPU host
#        scripts/sanitize.sh --run COMMAND...         one command instead of ctest, in the build folder
GC_BUILD_DIR=${GC_BUILD_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build-sanitize}
source "$(dirname "$0")/common.sh"
gc_install_deps
gc_find_cuda
gc_build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGC_SANITIZE=address,undefined
cd "$GC_BUILD_DIR"

reports=$GC_BUILD_DIR/sanitizer-reports
rm -rf "$reports" && mkdir -p "$reports"
# protect_shadow_gap=0: the CUDA driver maps memory where ASan would otherwise reserve it.
# allocator_may_return_null=1: tests ask for impossible sizes and expect GC_ERR_OUT_OF_MEMORY.
# exitcode=0 with log_path: Open MPI's leaks would fail every MPI test; the reports are judged below.
export ASAN_OPTIONS=protect_shadow_gap=0:allocator_may_return_null=1:detect_leaks=1:exitcode=0:log_path=$reports/asan
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan
# What runs: --run's command, else ctest with the selection given, else every test this host can run.
run=(ctest --output-on-failure --timeout 1500)
if [ "${1:-}" = --run ]; then run=("${@:2}")
elif [ $# -gt 0 ]; then run+=("$@")
elif gc_has_gpu; then run+=(-LE torch)
else run+=(-LE gpu)
fi
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' CMakeCache.txt)
export OMPI_MCA_mca_base_env_list="LD_PRELOAD=$("$cc" -print-file-name=libasan.so):$("$cc" -print-file-name=libubsan.so)"
status=0
"${run[@]}" || status=1

# Errors: a report file naming an ASan error or a UBSan runtime error. Leaks: a "Direct/Indirect
# leak" paragraph is ours when its allocating frame, the first outside the sanitizer's allocator
# and the C library, names a file under this checkout with a line number (a leak inside MPI_Init
# has main among its callers, but Open MPI's frames first).
shopt -s nullglob
files=("$reports"/*)
errors=$(grep -lE "ERROR: AddressSanitizer|runtime error:" "${files[@]}" /dev/null | grep -v /dev/null || true)
ours=$(awk -v root="$GC_ROOT/" 'BEGIN { RS = "" }
  /^(Direct|Indirect) leak/ { n = split($0, l, "\n")
    for (i = 2; i <= n; i++) {
      if (l[i] !~ /^ *#[0-9]+ / || l[i] ~ /libsanitizer|\/libc\.so|libio\/|stdio-common\/|string\/|misc\//) continue
      if (index(l[i], root) && l[i] ~ /:[0-9]+/) { print FILENAME ": " l[1]; print l[i] }
      break } }' "${files[@]}" /dev/null)
leaks=$(cat "${files[@]}" /dev/null | grep -cE "^(Direct|Indirect) leak" || true)
echo "== sanitizer reports: ${#files[@]} files, $leaks leak blocks in all"
if [ -n "$errors" ]; then
  echo "== sanitizer errors in:"; echo "$errors"; sed -n '1,60p' $errors; status=1
fi
if [ -n "$ours" ]; then
  echo "== leaks allocated by this project's code:"; echo "$ours"; status=1
fi
[ $status -eq 0 ] && echo "== sanitizers: no errors, no leaks from this project's code"
exit $status
