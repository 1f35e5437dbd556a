#!/usr/bin/env bash
# scripts/check_comments.sh — fails when the code or docs speak of anything but the project as it is
# now: citations of numbered runs or result folders, history ("used to", "no longer", "the old
# version"), the workflow around the project, and paths outside the repository.
# usage: scripts/check_comments.sh [PATH...]   (default: the project's own sources and docs)
# Prints FILE:LINE: TEXT for each hit and exits 1 when there is any, 0 when there is none.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
self="scripts/check_comments.sh"
patterns=(
  '\bruns?[ ][0-9]+'                       # a numbered run cited as the source of a figure
  '\brun-[0-9]+|\brun_[0-9]+'              # run folders and logs
  'bench/results|sweep-results/'           # per-run result folders
  '(^|[^/[:alnum:]_.-])(NOTES|DESIGN|PERFORMANCE|STYLE)\.md' # notes outside the tree (docs/design.md is in it)
  '\bused to (take|be|run|do|have|read|write|call|pass|fail|hang|crash)'
  '\bno longer\b|\bformerly\b|\bpreviously\b'
  '\bthe (first|old|earlier|previous) (version|code|kernel|design|path|build)'
  '\bsessions?\b'
  '\.\./shared|/work/|/tmp/bash_jobs'      # paths outside the repository
  "never run on this project's hosts"
  '\bran (up to |about )?[0-9]+(\.[0-9]+)?(%| ?x)\b'  # a measurement told as history
)
regex=$(IFS='|'; echo "${patterns[*]}")
if [ $# -eq 0 ]; then
  cd "$root"
  set -- lib kernels bindings bench docs scripts tests examples cmake CMakeLists.txt README.md pyproject.toml
fi
hits=$(grep -rnEIi --exclude-dir=build --exclude-dir=__pycache__ --exclude-dir=.gpu-host "$regex" "$@" 2>/dev/null \
       | grep -v "^\(\./\)\?$self:" )
if [ -n "$hits" ]; then
  printf '%s\n' "$hits"
  echo "check_comments: $(printf '%s\n' "$hits" | wc -l) line(s) cite runs, history, the workflow around the project or paths outside the repository" >&2
  exit 1
fi
echo "check_comments: clean"
