#!/bin/sh
# offline_install.sh PYTHON CMAKE BUILD_DIR WORK_DIR MPIEXEC SMOKE_PY — the offline install a user
# without an index runs, checked: stage the package from the build tree (component python), make
# sure it holds one copy of libgpucoll, pip install it into a new venv with --no-index
# --no-build-isolation, then run SMOKE_PY with the venv's python on 2 ranks. Exit 77: skipped.
set -eu
python=$1 cmake=$2 build=$3 work=$4 mpiexec=$5 smoke=$6
if ! "$python" -c "import venv, ensurepip" 2>/dev/null; then
  echo "skipped: $python has no venv/ensurepip (apt-get install python3-venv)"
  exit 77
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "skipped: $python has no pip (apt-get install python3-pip)"
  exit 77
fi
rm -rf "$work"
"$cmake" --install "$build" --component python --prefix "$work/stage" >/dev/null
libs=$(find "$work/stage/gpucoll" -name 'libgpucoll*' | wc -l)
links=$(find "$work/stage/gpucoll" -type l | wc -l)
if [ "$libs" -ne 1 ] || [ "$links" -ne 0 ]; then
  echo "the staged package holds $libs libgpucoll file(s) and $links link(s), not one file:" >&2
  ls -l "$work/stage/gpucoll" >&2
  exit 1
fi
# The system's numpy and setuptools stand in for an index.
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --no-index --no-build-isolation --no-cache-dir -q "$work/stage"
# Out of the build tree: the venv's copy must be the one imported.
cd "$work"
unset PYTHONPATH
"$mpiexec" -np 2 --oversubscribe "$work/venv/bin/python" "$smoke"
