# scripts/common.sh — sourced by the set-up scripts: installs the Debian packages listed in
# scripts/deps/*.txt, finds the CUDA toolkit, and configures and builds into $GC_BUILD_DIR.
set -euo pipefail
GC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GC_BUILD_DIR=${GC_BUILD_DIR:-$GC_ROOT/build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

gc_install_deps() {  # GC_NO_APT=1: install nothing (hosts without a package mirror)
  [ -n "${GC_NO_APT:-}" ] && return 0
  local pkgs missing=()
  pkgs=$(grep -hv '^\s*#' "$GC_ROOT"/scripts/deps/*.txt | awk 'NF' | sort -u)
  for p in $pkgs; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
  # With a GPU, the bench's tests measure NCCL beside gpucoll: libnccl2 (NVIDIA's CUDA repository).
  if gc_has_gpu && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then missing+=(libnccl2); fi
  if [ ${#missing[@]} -gt 0 ]; then
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "== installing: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

gc_find_cuda() {
  if ! command -v nvcc >/dev/null 2>&1; then
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break; done
  fi
  command -v nvcc >/dev/null 2>&1 || { echo "nvcc not found: install the CUDA toolkit first" >&2; exit 1; }
}

gc_has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }
gc_gpu_count() { if gc_has_gpu; then nvidia-smi -L | grep -c '^GPU'; else echo 0; fi; }

gc_build() {
  cmake -S "$GC_ROOT" -B "$GC_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${GC_CMAKE_ARGS:-} "$@"
  cmake --build "$GC_BUILD_DIR" -j "$(nproc)"
}

# The Python the build's SWIG module and its tests use: GC_SWIG_PYTHON, else FindPython3's choice,
# else python3 (not yet configured).
gc_build_python() {
  local py
  py=$(awk -F= '/^GC_SWIG_PYTHON:FILEPATH=./ { s = $2 } /^_Python3_EXECUTABLE:INTERNAL=./ { f = $2 }
                END { print s != "" ? s : f }' "$GC_BUILD_DIR/CMakeCache.txt" 2>/dev/null || true)
  echo "${py:-python3}"
}
