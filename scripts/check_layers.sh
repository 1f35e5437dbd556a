#!/usr/bin/env bash
# check_layers.sh — lib/'s files use only their own layer and the layers below it.
#
# Usage: scripts/check_layers.sh [LIB_DIR [DESIGN_MD [COMPILE_COMMANDS]]]
#        (defaults: lib, docs/design.md, none; CHECK_LAYERS_LIST=1 also prints every dependency)
#
# The layer of every lib/*.c and lib/*.h comes from the file-map table of docs/design.md (its
# rows, lowest layer first; the table is the one place that says which file is in which layer).
# A file depends on another when it includes it (#include "...") or refers to a function the
# other defines: an internal gc__* one or a public gc_* one (a call, or a macro that expands to
# one, counted where the macro is used). The check fails, naming the two files and the header or function, on
#   - a dependency of a file on a file of a higher layer;
#   - a cycle between files of different layers (each also shows as an upward dependency);
#   - a lib/ file without a row, or a row naming a file that is not there;
#   - given a build's compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS), a source of another
#     component whose include path holds a directory of private headers: lib/ itself (its
#     public include/ is fine) for any source outside lib/ but the white-box tests in tests/
#     (they test internal functions through gc_internal.h), bench/ itself for any source
#     outside bench/ (the NCCL loader, bench/nccl/, is a component of its own).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:-$root/lib}
design=${2:-$root/docs/design.md}
commands=${3:-}
exec env PYTHONPATH="$root/scripts" python3 - "$lib" "$design" "$commands" "$root" <<'PY'
import json, os, re, shlex, sys
from collections import defaultdict

from csource import strip

lib, design, commands, repo = sys.argv[1], sys.argv[2], sys.argv[3], os.path.realpath(sys.argv[4])
ident = re.compile(r'[A-Za-z_]\w*')
blank = re.compile(r'\s*')

def fail_setup(msg):
    print("check_layers: " + msg, file=sys.stderr)
    sys.exit(2)


def split_directives(code):
    """(code without preprocessor lines, {macro: body}) of stripped text."""
    lines, macros, body, cont = code.split('\n'), {}, [], None
    kept = []
    for line in lines:
        if cont is not None or line.lstrip().startswith('#'):
            text = line.rstrip()
            more = text.endswith('\\')
            if cont is None:
                m = re.match(r'\s*#\s*define\s+([A-Za-z_]\w*)(.*)', text.rstrip('\\'))
                cont = m.group(1) if m else ''
                body = [m.group(2)] if m else []
            else:
                body.append(text.rstrip('\\'))
            if not more:
                if cont:
                    macros[cont] = ' '.join(body)
                cont = None
            kept.append('')
        else:
            kept.append(line)
    return '\n'.join(kept), macros

def scan(code):
    """Functions defined at file level and the gc__ identifiers referred to, with their lines.
    A name followed by (...) at brace depth 0 is a definition when a { follows, else a
    declaration; neither is a reference."""
    defs, refs = {}, []
    depth, i, n = 0, 0, len(code)
    line = 1
    skip = set()
    while i < n:
        c = code[i]
        if c == '\n':
            line += 1
        elif c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
        elif c.isalpha() or c == '_':
            m = ident.match(code, i)
            name = m.group(0)
            prev = code[max(0, i - 8):i].split()
            after = code[blank.match(code, m.end()).end():m.end() + 200]
            if name.startswith('gc_') and not (prev and prev[-1] in ('struct', 'union', 'enum')):
                if depth == 0 and after.startswith('('):
                    # Find the closing parenthesis, then what follows it.
                    j, d = code.index('(', m.end()), 0
                    while j < n:
                        if code[j] == '(':
                            d += 1
                        elif code[j] == ')':
                            d -= 1
                            if d == 0:
                                break
                        j += 1
                    rest = code[blank.match(code, j + 1).end():j + 400]
                    rest = re.sub(r'^(__attribute__\s*\(\(.*?\)\)\s*)+', '', rest, flags=re.S)
                    if rest.startswith('{'):
                        defs[name] = line
                    elif not rest.startswith(';') and not rest.startswith(','):
                        refs.append((name, line))
                else:
                    refs.append((name, line))
            i = m.end()
            continue
        i += 1
    return defs, refs

# ---- the layer table ----------------------------------------------------------------------------
try:
    doc = open(design, encoding='utf-8').read()
except OSError as e:
    fail_setup("cannot read %s: %s" % (design, e))
m = re.search(r'^### File map\n(?:[^|\n].*\n|\n)*((?:\|.*\n?)+)', doc, re.M)
if not m:
    fail_setup("%s has no '### File map' table" % design)
order, layer_of = [], {}
for row in m.group(1).split('\n'):
    cells = [c.strip() for c in row.strip().strip('|').split('|')]
    if len(cells) != 2 or cells[0] in ('layer', '') or set(cells[0]) <= set('-: '):
        continue
    name = cells[0]
    if name in order:
        fail_setup("layer %s has two rows in %s" % (name, design))
    order.append(name)
    for f in re.findall(r'`lib/([^`/]+)`', cells[1]):
        if f in layer_of:
            fail_setup("lib/%s is in two rows (%s, %s) of %s" % (f, layer_of[f], name, design))
        layer_of[f] = name
if not order:
    fail_setup("the file map of %s has no rows" % design)
rank = {name: k for k, name in enumerate(order)}

# ---- the files ----------------------------------------------------------------------------------
problems = []
files = sorted(f for f in os.listdir(lib) if f.endswith(('.c', '.h')))
for f in files:
    if f not in layer_of:
        problems.append("lib/%s has no layer: add it to the file map of %s" % (f, design))
for f in sorted(layer_of):
    if f not in files:
        problems.append("%s names lib/%s, which does not exist" % (design, f))

includes, defs, refs, macros = {}, {}, {}, {}
for f in files:
    raw = open(os.path.join(lib, f), encoding='utf-8', errors='replace').read()
    includes[f] = [(inc, k + 1) for k, l in enumerate(raw.split('\n'))
                   for inc in re.findall(r'^\s*#\s*include\s*"([^"]+)"', l) if inc in files]
    code, macros[f] = split_directives(strip(raw))
    defs[f], refs[f] = scan(code)
    # Macro uses: the gc__ functions a macro's body reaches (through other macros too).
    uses = [(mm.group(0), code.count('\n', 0, mm.start()) + 1) for mm in ident.finditer(code)]
    refs[f] += [(u, l) for u, l in uses if u.startswith('GC')]  # resolved below
    if f.endswith('.c'):  # a .c file's own macros count as its references
        refs[f] += [(t, 0) for body in macros[f].values() for t in ident.findall(body) if t.startswith('gc_')]

all_macros = {}
for f in files:
    if f.endswith('.h'):
        all_macros.update(macros[f])

def macro_funcs(name, seen):
    found = set()
    for tok in ident.findall(all_macros.get(name, '')):
        if tok.startswith('gc_'):
            found.add(tok)
        elif tok in all_macros and tok not in seen:
            found |= macro_funcs(tok, seen | {tok})
    return found

definer = defaultdict(list)
for f in files:
    for d in defs[f]:
        definer[d].append(f)

edges = defaultdict(list)  # (from, to) -> [why]
for f in files:
    for inc, line in includes[f]:
        edges[(f, inc)].append('#include "%s" (line %d)' % (inc, line))
    local = set(defs[f])
    for name, line in refs[f]:
        if name.startswith('gc_'):
            targets = [(name, name)]
        elif name in all_macros and name not in macros[f]:
            targets = [(fn, '%s through %s' % (fn, name)) for fn in sorted(macro_funcs(name, {name}))]
        else:
            continue
        for fn, why in targets:
            if fn in local or fn not in definer:
                continue
            for g in definer[fn]:
                if g != f:
                    edges[(f, g)].append('%s (line %d)' % (why, line))

def layer(f):
    return layer_of.get(f)

if os.environ.get('CHECK_LAYERS_LIST'):  # every dependency, for drawing the layers
    for (a, b), whys in sorted(edges.items()):
        names = sorted({w.split(' (line')[0] for w in whys})
        print('lib/%s (%s) -> lib/%s (%s): %s' % (a, layer(a), b, layer(b), ', '.join(names)))

for (a, b), whys in sorted(edges.items()):
    la, lb = layer(a), layer(b)
    if la is None or lb is None or rank[la] >= rank[lb]:
        continue
    seen, listed = set(), []
    for w in whys:
        key = w.split(' (line')[0]
        if key not in seen:
            seen.add(key)
            listed.append(w)
    problems.append("upward: lib/%s (%s) -> lib/%s (%s): %s" % (a, la, b, lb, '; '.join(listed[:4]) +
                    ('; ...' if len(listed) > 4 else '')))

# Cycles between layers: strongly connected components (Tarjan) holding more than one layer.
graph = defaultdict(set)
for a, b in edges:
    graph[a].add(b)
index, low, stack, on, comps = {}, {}, [], set(), []
def strong(v):
    work = [(v, iter(sorted(graph[v])))]
    index[v] = low[v] = len(index)
    stack.append(v); on.add(v)
    while work:
        node, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = len(index)
                stack.append(w); on.add(w)
                work.append((w, iter(sorted(graph[w]))))
                break
            if w in on:
                low[node] = min(low[node], index[w])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == node:
                        break
                comps.append(sorted(comp))
for f in files:
    if f not in index:
        strong(f)
def path_back(src, dst, members):
    """The shortest path of dependencies from src to dst inside members (breadth first)."""
    prev, todo = {src: None}, [src]
    while todo:
        nxt = []
        for v in todo:
            for w in sorted(graph[v]):
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        todo = nxt
    if dst not in prev:
        return None
    path = [dst]
    while path[-1] != src:
        path.append(prev[path[-1]])
    return path[::-1]

for comp in comps:
    members = set(comp)
    layers = sorted({layer(f) for f in comp if layer(f)}, key=rank.get)
    if len(comp) < 2 or len(layers) < 2:
        continue
    # One cycle for each upward dependency in the component: the edge, then the way back.
    for (a, b) in sorted(edges):
        if a in members and b in members and layer(a) and layer(b) and rank[layer(a)] < rank[layer(b)]:
            back = path_back(b, a, members) or [b, a]
            problems.append("cycle across layers: " + ' -> '.join(
                'lib/%s (%s)' % (f, layer(f)) for f in [a] + back))

# ---- other components' include paths ------------------------------------------------------------
def include_dirs(args, cwd):
    dirs, k = [], 0
    while k < len(args):
        a = args[k]
        rsp = args[k + 1] if a == '--options-file' and k + 1 < len(args) else a[1:] if a.startswith('@') else None
        if rsp:  # a response file (nvcc's --options-file, @file): its flags count as the command's
            try:
                dirs += include_dirs(shlex.split(open(os.path.join(cwd, rsp), encoding='utf-8').read()), cwd)
            except OSError as e:
                fail_setup("cannot read the response file %s: %s" % (rsp, e))
            k += 2 if a == '--options-file' else 1
            continue
        for flag in ('-I', '-isystem', '-iquote', '--include-path', '-idirafter'):
            if a == flag and k + 1 < len(args):
                dirs.append(args[k + 1]); k += 1
                break
            if a.startswith(flag) and len(a) > len(flag):
                dirs.append(a[len(flag):].lstrip('='))
                break
        k += 1
    return [os.path.realpath(os.path.join(cwd, d)) for d in dirs]

if commands:
    try:
        entries = json.load(open(commands, encoding='utf-8'))
    except (OSError, ValueError) as e:
        fail_setup("cannot read %s: %s (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)" % (commands, e))
    # (private directory, the directories whose sources may have it on their include path)
    private = [('lib', ('lib', 'tests')), ('bench', ('bench',))]
    seen = set()
    for e in entries:
        cwd = e.get('directory', '.')
        src = os.path.realpath(os.path.join(cwd, e.get('file', '')))
        dirs = include_dirs(e.get('arguments') or shlex.split(e.get('command', '')), cwd)
        for name, allowed in private:
            where = os.path.join(repo, name)
            if where not in dirs or any(src.startswith(os.path.join(repo, a) + os.sep) for a in allowed):
                continue
            if (src, name) not in seen:
                seen.add((src, name))
                problems.append("include path: %s is compiled with %s/ on its include path (%s/'s private "
                                "headers); link the component it needs instead" %
                                (os.path.relpath(src, repo), name, name))

if problems:
    print("check_layers: %d problem(s) in %s (layers %s, lowest first):" %
          (len(problems), lib, ' < '.join(order)), file=sys.stderr)
    for p in problems:
        print("  " + p, file=sys.stderr)
    sys.exit(1)
print("check_layers: %d files, %d dependencies between them, none upward, no cycle across layers (%s)%s" %
      (len(files), len(edges), ' < '.join(order), "; no component has another's private headers on its include path" if commands else ""))
PY
