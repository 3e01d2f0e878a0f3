#!/usr/bin/env python3
"""The project files a source file enters: those it includes, and those they include, transitively.

Usage: python3 tools/files-entered.py [FILE] [REV]   (run from the repository root; FILE defaults
to src/cli/status.cpp, REV to the working tree; with REV, e.g. 0e8b200, the files as they were)
issue 49 asks that following cmd_status's flags enter at most about 15 files. This counts the
headers its file compiles against (a header names what a call reaches; each .cpp behind them is
not counted), so it is a lower bound of what a reader following a flag opens, and the one count
anyone can take again the same way: 34 at 0e8b200."""
import os, re, subprocess, sys

start = sys.argv[1] if len(sys.argv) > 1 else 'src/cli/status.cpp'
rev = sys.argv[2] if len(sys.argv) > 2 else None


def text_of(path):
    if rev is None:
        return open(path).read() if os.path.isfile(path) else None
    r = subprocess.run(['git', 'show', f'{rev}:{path}'], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


seen, todo = set(), [start]
while todo:
    f = todo.pop()
    if f in seen:
        continue
    t = text_of(f)
    if t is None:
        continue
    seen.add(f)
    for m in re.finditer(r'#include "([^"]+)"', t):
        for cand in ('include/' + m.group(1), os.path.normpath(os.path.join(os.path.dirname(f), m.group(1)))):
            if text_of(cand) is not None:
                todo.append(cand)
                break
print(f'{len(seen)} files entered from {start}' + (f' at {rev}' if rev else ''))
for f in sorted(seen):
    print('  ' + f)
