#!/bin/sh
# preload.sh LIB COMMAND... — runs COMMAND with LIB appended to LD_PRELOAD, keeping what the rank's
# environment already preloads (the sanitizer runtimes come first in the sanitizer build).
lib=$1; shift
export LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$lib"
exec "$@"
