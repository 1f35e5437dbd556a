#!/usr/bin/env bash
# scripts/test.sh — the README's test command: installs what the build needs, builds everything
# (CUDA kernels included), and runs every test; the `gpu`-labelled ones only where a GPU is present.
source "$(dirname "$0")/common.sh"
gc_install_deps
gc_find_cuda
gc_build
cd "$GC_BUILD_DIR"
if gc_has_gpu; then
  ctest --output-on-failure --timeout 1500
else
  echo "== no GPU here: running every test except those labelled gpu"
  ctest --output-on-failure --timeout 1500 -LE gpu
fi
