#!/bin/sh
# wheel_check.sh PYTHON CMAKE BUILD_DIR WORK_DIR VERSION MPIEXEC — the wheel built offline from this build
# tree, checked: stage the package (component python), `pip wheel --no-index --no-build-isolation
# --no-deps` it (setuptools only packs what the build made: nothing is compiled again), require a
# wheel tagged for this interpreter and platform holding exactly one copy of libgpucoll,
# `pip install --no-index --target` it into an empty directory, and import gpucoll from there with
# __version__ == VERSION. Exit 77 (skipped) only where PYTHON has no pip.
set -eu
python=$1 cmake=$2 build=$3 work=$4 version=$5 mpiexec=$6
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "skipped: $python has no pip (apt-get install python3-pip)"
  exit 77
fi
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/wheels" "$work/target"
"$cmake" --install "$build" --component python --prefix "$work/stage" >/dev/null
pipq() { "$python" -m pip --disable-pip-version-check --no-cache-dir "$@"; }
pipq wheel --no-index --no-build-isolation --no-deps -q -w "$work/wheels" "$work/stage" ||
  fail "pip wheel of the staged package failed (it needs setuptools>=61 and wheel installed for $python)"
set -- "$work"/wheels/gpucoll-"$version"-*.whl
[ $# -eq 1 ] && [ -f "$1" ] || fail "want one gpucoll-$version wheel in $work/wheels, found: $(ls "$work/wheels")"
wheel=$1
# The wheel's tag and members: this interpreter's and platform's; one libgpucoll file, the SWIG
# module, the package's two Python files.
"$python" - "$wheel" <<'PY' || exit 1
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
libs = [n for n in names if n.split("/")[-1].startswith("libgpucoll")]
mods = [n for n in names if n.startswith("gpucoll/_gpucoll_swig") and ".so" in n]
want = {"gpucoll/__init__.py", "gpucoll/gpucoll_swig.py"}
problems = []
# A compiled module: the wheel is for this interpreter and platform, not pure Python.
import sysconfig
tag = "cp%d%d" % sys.version_info[:2]
plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
base = sys.argv[1].split("/")[-1]
if not base.endswith("-%s-%s-%s.whl" % (tag, tag, plat)):
    problems.append("tagged %s, want %s-%s-%s" % (base, tag, tag, plat))
info = [n for n in names if n.endswith(".dist-info/WHEEL")]
meta = zipfile.ZipFile(sys.argv[1]).read(info[0]).decode() if info else ""
if "Root-Is-Purelib: false" not in meta:
    problems.append("WHEEL does not say Root-Is-Purelib: false")
if len(libs) != 1:
    problems.append("%d copies of libgpucoll (%s), want 1" % (len(libs), ", ".join(libs) or "none"))
if len(mods) != 1:
    problems.append("%d SWIG modules (%s), want 1" % (len(mods), ", ".join(mods) or "none"))
if not want <= set(names):
    problems.append("missing " + ", ".join(sorted(want - set(names))))
shared = [n for n in names if ".so" in n.split("/")[-1]]
if len(shared) != 2:
    problems.append("shared objects %s, want the module and libgpucoll only" % ", ".join(shared))
for p in problems:
    print("FAIL: wheel %s: %s" % (sys.argv[1], p), file=sys.stderr)
if problems:
    sys.exit(1)
print("wheel %s: %s, %s" % (sys.argv[1].split("/")[-1], libs[0], mods[0]))
PY
pipq install --no-index --no-deps -q --target "$work/target" "$wheel" || fail "pip install --target failed"
# From an empty directory, with nothing but the target on the path: that copy must be the one
# imported, and it must find its libgpucoll (RPATH $ORIGIN), not the build tree's.
# Under mpirun (one rank), as every Python test here: the ranks' environment is where the
# sanitizer build preloads its runtimes.
cd "$work"
"$mpiexec" -np 1 --oversubscribe env -u PYTHONPATH -u LD_LIBRARY_PATH PYTHONPATH="$work/target" PYTHONDONTWRITEBYTECODE=1 \
  "$python" -c '
import os, sys
import gpucoll
where = os.path.dirname(gpucoll.__file__)
assert os.path.realpath(where) == os.path.realpath(os.path.join(sys.argv[1], "gpucoll")), "imported from " + where
assert gpucoll.__version__ == sys.argv[2], "__version__ %r, want %r" % (gpucoll.__version__, sys.argv[2])
maps = open("/proc/self/maps").read()
libs = sorted({l.split()[-1] for l in maps.splitlines() if "libgpucoll" in l})
assert libs == [os.path.realpath(os.path.join(where, "libgpucoll.so." + sys.argv[2].split(".")[0]))], libs
print("wheel installed: gpucoll %s from %s, %s" % (gpucoll.__version__, where, libs[0]))
' "$work/target" "$version"
