#!/bin/sh
# run_from_prefix.sh PREFIX COMMAND... — runs COMMAND as a user of an installed gpucoll would:
# LD_LIBRARY_PATH unset, and only after checking that every installed program and the program
# run (when it is a file) find libgpucoll in PREFIX, not in the build tree.
prefix=$(cd "$1" && pwd) || exit 1
shift
unset LD_LIBRARY_PATH
status=0
for exe in "$prefix"/bin/* "$@"; do
  [ -f "$exe" ] && [ -x "$exe" ] || continue
  found=$(ldd "$exe" 2>/dev/null | awk '$1 ~ /^libgpucoll\.so/ { print $3 }')
  [ -n "$found" ] || continue
  case "$found" in
    "$prefix"/*) ;;
    *) echo "run_from_prefix: $exe finds libgpucoll at $found, outside $prefix" >&2; status=1 ;;
  esac
done
[ $status -eq 0 ] || exit $status
exec "$@"
