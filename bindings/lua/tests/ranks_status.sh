#!/bin/sh
# ranks_status.sh — runs its arguments and prints "rank status N": mpirun reports one status for
# all ranks, the tests check every rank's own.
"$@"
echo "rank status $?"
