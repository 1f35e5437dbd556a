#!/usr/bin/env bash
# check_functions.sh — no function in lib/*.c is longer than 60 lines.
#
# Usage: scripts/check_functions.sh [FILE_OR_DIR ...]   (default: lib)
#
# A function's length is its body: the lines strictly between the line of its opening brace and
# the line of its closing one. Every function over the limit is listed (file:line, name, lines)
# and the check fails. Comments and string literals are blanked before braces are matched.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- "$root/lib"
exec env PYTHONPATH="$root/scripts" python3 - "$@" <<'PY'
import os, re, sys

from csource import strip_directives as strip

LIMIT = 60


def functions(code):
    """(name, first line, body lines) of every function defined at file level."""
    found, depth, i, n = [], 0, 0, len(code)
    while i < n:
        c = code[i]
        if c == '{' and depth == 0:
            head = code[:i].rstrip()
            head = re.sub(r'(__attribute__\s*\(\(.*?\)\)\s*)+$', '', head, flags=re.S).rstrip()
            name = None
            if head.endswith(')'):
                d, j = 0, len(head) - 1
                while j >= 0:
                    d += {')': 1, '(': -1}.get(head[j], 0)
                    if d == 0:
                        break
                    j -= 1
                m = re.search(r'([A-Za-z_]\w*)\s*$', head[:j])
                if m and m.group(1) not in ('if', 'for', 'while', 'switch', 'sizeof', 'return'):
                    name = m.group(1)
            d, j = 0, i
            while j < n:
                if code[j] == '{':
                    d += 1
                elif code[j] == '}':
                    d -= 1
                    if d == 0:
                        break
                j += 1
            if name:
                first, last = code.count('\n', 0, i) + 1, code.count('\n', 0, j) + 1
                found.append((name, first, max(0, last - first - 1)))
            i = j + 1
            continue
        i += 1
    return found

paths = []
for arg in sys.argv[1:]:
    if os.path.isdir(arg):
        paths += sorted(os.path.join(arg, f) for f in os.listdir(arg) if f.endswith('.c'))
    else:
        paths.append(arg)
long_ones, count = [], 0
for p in paths:
    try:
        text = open(p, encoding='utf-8', errors='replace').read()
    except OSError as e:
        print("check_functions: cannot read %s: %s" % (p, e), file=sys.stderr)
        sys.exit(2)
    for name, line, body in functions(strip(text)):
        count += 1
        if body > LIMIT:
            long_ones.append((p, line, name, body))
if long_ones:
    print("check_functions: %d function(s) longer than %d lines:" % (len(long_ones), LIMIT), file=sys.stderr)
    for p, line, name, body in long_ones:
        print("  %s:%d: %s has %d lines" % (os.path.relpath(p), line, name, body), file=sys.stderr)
    sys.exit(1)
print("check_functions: %d functions in %d files, none longer than %d lines" % (count, len(paths), LIMIT))
PY
