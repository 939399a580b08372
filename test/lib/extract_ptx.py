#!/usr/bin/env python3
# Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes the PTX images a module lowered with ddp-lower-to-llvm{target=cuda}
embeds (constant globals that ddprt_launch_kernel is given) to DIR/kernel<N>.ptx,
and prints how many it wrote and the kernels ('.entry') they define. With
--ptxas, also assembles each for --arch (sm_90) and says how many ptxas
accepted; fails if it refused one (its message on stderr) or found none.

    extract_ptx.py lowered.mlir DIR [--ptxas PATH [--arch sm_90]]
"""
import subprocess
import os
import re
import sys

# llvm.mlir.global internal constant @name("...") : the string attribute's
# escapes are \\, \" and \XX (hex).
GLOBAL = re.compile(r'llvm\.mlir\.global [^@]*@[\w$.]+\("((?:[^"\\]|\\.)*)"\)')


def decode(text):
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == '\\':
            nxt = text[i + 1]
            if nxt in '\\"':
                out.append(ord(nxt))
                i += 2
                continue
            if nxt == 'n':
                out.append(10)
                i += 2
                continue
            if nxt == 't':
                out.append(9)
                i += 2
                continue
            out.append(int(text[i + 1:i + 3], 16))
            i += 3
            continue
        out += c.encode('utf-8')
        i += 1
    return bytes(out)


def main():
    args = sys.argv[1:]
    ptxas, arch = None, 'sm_90'
    if '--ptxas' in args:
        i = args.index('--ptxas')
        ptxas = args[i + 1]
        del args[i:i + 2]
    if '--arch' in args:
        i = args.index('--arch')
        arch = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit('usage: extract_ptx.py LOWERED.mlir DIR [--ptxas PATH [--arch sm_90]]')
    source, directory = args
    os.makedirs(directory, exist_ok=True)
    count = 0
    entries = []
    with open(source, encoding='utf-8') as f:
        for match in GLOBAL.finditer(f.read()):
            data = decode(match.group(1))
            if b'.target sm_' not in data or b'.entry' not in data:
                continue
            ptx = data.rstrip(b'\0')
            with open(os.path.join(directory, 'kernel%d.ptx' % count), 'wb') as out:
                out.write(ptx)
            entries += re.findall(rb'\.entry (\w+)', ptx)
            count += 1
    print('ptx images: %d' % count)
    print('kernels: %d' % len(entries))
    if not count:
        return 1
    if ptxas:
        accepted = 0
        for n in range(count):
            path = os.path.join(directory, 'kernel%d.ptx' % n)
            result = subprocess.run([ptxas, '-arch=' + arch, path, '-o', os.devnull],
                                    capture_output=True, text=True)
            if result.returncode == 0:
                accepted += 1
            else:
                sys.stderr.write('ptxas refused %s:\n%s' % (path, result.stderr))
        print('ptxas -arch=%s accepted: %d of %d' % (arch, accepted, count))
        return 0 if accepted == count else 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
