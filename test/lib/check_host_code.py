#!/usr/bin/env python3
# Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Counts what the host code of a step lowered for a GPU still does itself.

    check_host_code.py DUMP

DUMP is the module right before convert-ddp-to-llvm
(ddp-opt --ddp-lower-to-llvm=target=cuda
 --mlir-print-ir-before=convert-ddp-to-llvm). For every function of the
module but the deallocation's helper it counts kernel launches, loops,
copies, and loads and stores of buffers that are not the deallocation's
bookkeeping (index and i1 elements), and prints

    launches: N
    host loops: N
    host copies: N
    host data stores: N
    host data loads: N   (scalars the host branches on or passes on)
"""
import re
import sys

BOOKKEEPING = re.compile(r':\s*memref<[^>]*x(index|i1)>|:\s*memref<(index|i1)>')


def main():
    text = open(sys.argv[1], encoding='utf-8').read()
    counts = {'launches': 0, 'host loops': 0, 'host copies': 0,
              'host data stores': 0, 'host data loads': 0}
    inside = False
    depth = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith('gpu.binary') or stripped.startswith('gpu.module'):
            continue
        if re.match(r'func\.func (private )?@', stripped):
            inside = '@dealloc_helper' not in stripped
            depth = 0
        if not inside:
            continue
        if 'gpu.launch_func' in stripped:
            counts['launches'] += 1
        elif re.search(r'\bscf\.(for|parallel|while)\b', stripped):
            counts['host loops'] += 1
        elif 'memref.copy' in stripped:
            counts['host copies'] += 1
        elif re.search(r'\bmemref\.store\b', stripped) and not BOOKKEEPING.search(stripped):
            counts['host data stores'] += 1
        elif re.search(r'\bmemref\.load\b', stripped) and not BOOKKEEPING.search(stripped):
            counts['host data loads'] += 1
    for key, value in counts.items():
        print('%s: %d' % (key, value))
    return 0


if __name__ == '__main__':
    sys.exit(main())
