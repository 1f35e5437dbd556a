#!/usr/bin/env bash
# scripts/test.sh — the README's test command: installs what the build needs, builds everything
# (CUDA kernels included), and runs every test; the `gpu`-labelled ones only where a GPU is present.
# Then the tests that need no GPU once more, built with AddressSanitizer and UBSan
# (scripts/sanitize.sh, in the build folder's name + -sanitize; GC_SANITIZE_TESTS=0 leaves that out).
source "$(dirname "$0")/common.sh"
gc_install_deps
gc_find_cuda
gc_build
cd "$GC_BUILD_DIR"
skip=()
if ! gc_has_gpu; then
  echo "== no GPU here: running every test except those labelled gpu"
  skip=(-LE gpu)
elif ! "$(gc_build_python)" -c "import torch, cupy" 2>/dev/null; then
  echo "== torch and cupy are not importable: skipping the tests labelled torch (pip install torch cupy-cuda12x runs them)"
  skip=(-LE torch)
fi
ctest --output-on-failure --timeout 1500 "${skip[@]}"
if [ "${GC_SANITIZE_TESTS:-1}" != 0 ]; then
  echo "== the tests without a GPU again, under AddressSanitizer and UBSan"
  GC_NO_APT=1 GC_BUILD_DIR="$GC_BUILD_DIR-sanitize" bash "$GC_ROOT/scripts/sanitize.sh" -LE gpu
fi
