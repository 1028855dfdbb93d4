#!/usr/bin/env python3
"""Looks for the PTX shape that ptxas of CUDA 13.0 (V13.0.88) miscompiles on sm_90/sm_90a.

ptxas fuses max(max(a, -b), c) (and min(min(..)), and max(max(a, b), -c)) into one three-input VIMNMX3 and
drops the negation: the PTX `neg.s32; max.s32; max.s32` of max(max(a, -b), c) and the PTX of max(max(a, b), c)
give the same instruction, bit for bit. It gave the staged CUDA descriptor kernel j_lo = +radius and all-zero
descriptors on the H200 (docs/performance/sift.md). This script compiles every CUDA file of a configured build
(compile_commands.json) to PTX for sm_90a and lists each integer negation that feeds a chain of two integer
max (or two min) in one function; no output and exit 0 when there is none.

Usage: python3 scripts/ptx-neg-minmax-check.py BUILD_DIR   (CUDA ON, nvcc on PATH; about a minute)
       python3 scripts/ptx-neg-minmax-check.py FILE.ptx ...  (PTX already made)
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

INSTR = re.compile(r'^\s*(neg|max|min)\.(s32|s64|u32|u64)\s+(%\w+),\s*([^;]+);')


def scan(path):
    """The suspect lines of one PTX file (registers are tracked by their last definition in text order)."""
    found, defs, func = [], {}, '?'
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        if '.entry' in line or '.func' in line:
            func, defs = line.split('(')[0].split()[-1], {}
        m = INSTR.match(line)
        if not m:
            continue
        op, dst, srcs = m.group(1), m.group(3), [s.strip() for s in m.group(4).split(',')]
        defs[dst] = (op, srcs)
        if op == 'neg':
            continue
        for s in srcs:
            d = defs.get(s)
            inner_has_neg = d and d[0] == op and any(defs.get(x, ('',))[0] == 'neg' for x in d[1])
            neg_beside_inner = d and d[0] == 'neg' and any(defs.get(x, ('',))[0] == op for x in srcs if x != s)
            if inner_has_neg or neg_beside_inner:
                found.append(f'{path}:{n}: {func}: {op}.{m.group(2)} chain with a negated operand')
    return found


def ptx_of_build(build_dir, out_dir):
    """Compiles each CUDA entry of build_dir/compile_commands.json to PTX for sm_90a; returns the PTX paths."""
    paths = []
    for e in json.load(open(os.path.join(build_dir, 'compile_commands.json'), encoding='utf-8')):
        if not e['file'].endswith('.cu'):
            continue
        args, keep, skip = shlex.split(e['command']), [], False
        for a in args:
            if skip:
                skip = False
            elif a in ('-c', '-o'):
                skip = a == '-o'
            elif not a.startswith('--generate-code') and not a.startswith('-arch'):
                keep.append(a)
        out = os.path.join(out_dir, os.path.basename(e['file']) + '.ptx')
        subprocess.run(keep + ['-arch=sm_90a', '-ptx', '-o', out], cwd=e['directory'], check=True)
        paths.append(out)
    return paths


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        files = ptx_of_build(argv[1], tmp) if os.path.isdir(argv[1]) else argv[1:]
        found = [f for p in files for f in scan(p)]
    for f in found:
        print(f)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
