#!/bin/sh
# go_consumer.sh GO PREFIX MODULE_DIR EXAMPLE_DIR WORK_DIR MPIEXEC — a Go program outside the
# repository's tree built against an installed gpucoll, offline: a new module in WORK_DIR that
# requires gpucoll.dev/gpucoll (replaced by MODULE_DIR, the bindings' module), cgo flags from the
# install's gpucoll.pc, then run on 2 ranks from the prefix.
set -eu
go=$1 prefix=$2 module=$3 example=$4 work=$5 mpiexec=$6
libdir=$(dirname "$(dirname "$(find "$prefix" -name gpucoll.pc -path '*pkgconfig*' | head -n 1)")")
rm -rf "$work"
mkdir -p "$work/app"
cp "$example"/*.go "$work/app/"
cat > "$work/app/go.mod" <<MOD
module example.com/gpucoll-consumer

go 1.19

require gpucoll.dev/gpucoll v0.1.0

replace gpucoll.dev/gpucoll => $module
MOD
export PKG_CONFIG_PATH="$libdir/pkgconfig" CGO_ENABLED=1 GOFLAGS=-mod=mod GOPROXY=off \
  GO111MODULE=on GOTOOLCHAIN=local GOCACHE="$work/cache" GOPATH="$work/path" \
  CGO_LDFLAGS="-Wl,-rpath,$libdir"
cd "$work/app"
"$go" build -o "$work/consumer" .
unset LD_LIBRARY_PATH
if ! ldd "$work/consumer" | grep -q "libgpucoll[^ ]* => $prefix/"; then
  echo "go_consumer: the program does not take libgpucoll from $prefix:" >&2
  ldd "$work/consumer" >&2
  exit 1
fi
"$mpiexec" -np 2 --oversubscribe "$work/consumer" -count 4096 -iters 2
