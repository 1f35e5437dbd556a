#!/usr/bin/env bash
# tests/check_readme.sh — keeps the README true to the tree, so that its commands and examples
# cannot drift:
#   - a code block after a line <!-- readme-file: PATH --> is byte for byte the file PATH (the
#     quick starts; CTest builds and runs those files);
#   - every command (lines of ```sh blocks, and inline `mpirun ...`, `bash ...`, `python3 ...`)
#     names files that exist, build outputs that a CMakeLists.txt makes, gpucoll-bench flags that
#     bench/gpucoll-bench.c takes, CMake options and GC_* variables that the sources define, and
#     gives mpirun --oversubscribe (a 2-core machine needs it for 2-4 ranks);
#   - every relative link and every GC_* name in the text exists;
#   - .ci/run runs scripts/test.sh, the README's test command.
# usage: tests/check_readme.sh [README]   (default: README.md; paths in it are relative to the
# repository root). Prints one line per problem and exits 1 when there is any, 0 when none.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readme=${1:-$root/README.md}
exec python3 - "$root" "$readme" <<'EOF'
import os, re, sys

root, readme = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()
lines = text.split("\n")
problems = []

def bad(lineno, what):
    problems.append("%s:%d: %s" % (readme, lineno, what))

def read(rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read()

cmakelists = ""
for d, _, files in os.walk(root):
    if "/build" in d[len(root):] or "/scratch" in d[len(root):] or "/.git" in d[len(root):]:
        continue
    if "CMakeLists.txt" in files:
        cmakelists += read(os.path.relpath(os.path.join(d, "CMakeLists.txt"), root))
sources = "".join(read(p) for p in ("lib/gc_internal.h", "lib/include/gpucoll.h", "lib/comm.c",
                                    "bench/nccl/nccl_loader.c", "scripts/common.sh", "scripts/test.sh",
                                    "scripts/run.sh", "scripts/sanitize.sh"))
bench = read("bench/gpucoll-bench.c")
bench_flags = set(re.findall(r'"\s+(-[A-Za-z])[, ]', bench)) | set(re.findall(r'(--[a-z][a-z-]+)', bench))

# Fenced blocks: (first line number, language, body lines)
blocks, i = [], 0
while i < len(lines):
    m = re.match(r"^```(\w*)\s*$", lines[i])
    if m:
        j = i + 1
        while j < len(lines) and lines[j] != "```":
            j += 1
        blocks.append((i + 1, m.group(1), lines[i + 1:j]))
        i = j
    i += 1

# 1. Blocks that must be files.
for n, line in enumerate(lines, 1):
    m = re.match(r"^<!-- readme-file: (\S+) -->$", line.strip())
    if not m:
        continue
    path = m.group(1)
    after = [b for b in blocks if b[0] > n]
    if not after:
        bad(n, "no code block after the readme-file mark for %s" % path)
        continue
    if not os.path.isfile(os.path.join(root, path)):
        bad(n, "%s does not exist" % path)
        continue
    body = "\n".join(after[0][2]) + "\n"
    if body != read(path):
        bad(after[0][0], "the block differs from %s (copy the file into the README)" % path)

# 2. Commands.
def check_command(n, cmd):
    words = cmd.split()
    if "mpirun" in words and "--oversubscribe" not in words:
        bad(n, "mpirun without --oversubscribe: %s" % cmd)
    for w in words:
        w = w.strip("'\"();&|")
        w = re.sub(r'^[A-Z_]+=', "", w)          # VAR=value prefixes
        if re.match(r"^(scripts|examples|tests|docs|bench|bindings|lib|cmake)/", w):
            if not os.path.exists(os.path.join(root, w)):
                bad(n, "%s does not exist" % w)
        elif re.match(r"^\.?/?build[\w.-]*/", w):
            name = os.path.basename(w)
            if not re.search(r"[\s(/]%s[\s)]" % re.escape(name), cmakelists):
                bad(n, "no CMakeLists.txt builds %s" % name)
    for v in re.findall(r"\b(GC_[A-Z0-9_]+)=", cmd):
        if v not in sources:
            bad(n, "%s is not a variable the scripts or the library read" % v)
    for o in re.findall(r"-D(GC_[A-Z0-9_]+)=", cmd):
        if o not in cmakelists:
            bad(n, "CMake option %s is not defined" % o)
    if "gpucoll-bench" in cmd:
        tail = cmd.split("gpucoll-bench", 1)[1].split()
        for w in tail:
            if re.match(r"^--?[A-Za-z][\w-]*$", w) and w not in bench_flags:
                bad(n, "gpucoll-bench takes no flag %s" % w)
    m = re.match(r"^bash (\S+)", cmd)
    if m and not os.path.isfile(os.path.join(root, m.group(1))):
        bad(n, "%s does not exist" % m.group(1))

for start, lang, body in blocks:
    if lang == "sh":
        for k, cmd in enumerate(body):
            for part in re.split(r"\s&&\s", cmd):
                check_command(start + k + 1, part.strip())
for n, line in enumerate(lines, 1):
    for span in re.findall(r"`((?:mpirun|bash|python3) [^`]+)`", line):
        check_command(n, span)

# 3. Links and GC_* names.
for n, line in enumerate(lines, 1):
    for target in re.findall(r"\]\(([^)#\s]+)\)", line):
        if not re.match(r"^[a-z]+://", target) and not os.path.exists(os.path.join(root, target)):
            bad(n, "link to %s, which does not exist" % target)
    for v in re.findall(r"\b(GC_[A-Z][A-Z0-9_]*[A-Z0-9])\b", line):
        if v not in sources and v not in cmakelists:
            bad(n, "%s is named but nothing defines it" % v)

# 4. The test command is what CI runs.
if "scripts/test.sh" not in read(".ci/run"):
    problems.append(".ci/run: does not run scripts/test.sh, the README's test command")

for p in problems:
    print(p)
if problems:
    print("check_readme: %d problem(s) in %s" % (len(problems), readme), file=sys.stderr)
    sys.exit(1)
print("check_readme: %s matches the tree" % readme)
EOF
