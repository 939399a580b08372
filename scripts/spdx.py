#!/usr/bin/env python3
"""Checks (or, with --fix, adds) the license line of every source file.

Every C, C++, CUDA, TableGen, Python, shell and CMake file of the project
carries `SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception` (LICENSE)
near its top. test/Tools/license.test runs the check.

    scripts/spdx.py [--fix] [--exclude=PREFIX]... [ROOT]
"""

import os
import sys

SPDX = "SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception"
SLASH = (".cpp", ".h", ".c", ".cu", ".cuh", ".td")
HASH = (".py", ".sh", ".cmake", ".in", "CMakeLists.txt")
# What is not ours or not source: build trees, vendored copies, test inputs.
SKIP_DIRS = {".git", "build", ".gtest", ".gpu-step", "__pycache__", "Inputs",
             "images"}
# Files a document quotes whole, which readers copy into their own projects
# (examples/*/test.sh compare the user guide's CMake blocks with them).
QUOTED = {os.path.join("examples", "embed", "CMakeLists.txt"),
          os.path.join("examples", "compression-plugin", "CMakeLists.txt")}
TOP = ("include", "lib", "runtime", "tools", "test", "scripts", "bench",
       "examples", "cmake", ".ci")


def sources(root):
    for top in TOP + ("CMakeLists.txt",):
        path = os.path.join(root, top)
        if os.path.isfile(path):
            yield path
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = [d for d in dirnames
                           if d not in SKIP_DIRS and not d.startswith("build")]
            for name in sorted(filenames):
                if name.endswith(SLASH) or name.endswith(HASH) or name == "run":
                    yield os.path.join(dirpath, name)


NOTICE = ["Part of ddp-opt, under the Apache License v2.0 with LLVM "
          "Exceptions.", "See LICENSE for license information.", SPDX]


def kind(path):
    name = path[:-3] if path.endswith(".in") else path
    if name.endswith(SLASH):
        return "slash"
    return "hash"


def add_line(text, path):
    lines = text.split("\n")
    if kind(path) == "slash":
        if lines[0].startswith("/*"):
            # A C banner (/*===- ... -===*\): lines inside the comment.
            return "\n".join([lines[0], " *"] + [" * " + n for n in NOTICE] +
                             lines[1:])
        # After the //===- banner, as upstream MLIR files have it.
        return "\n".join([lines[0], "//"] + ["// " + n for n in NOTICE] +
                         lines[1:])
    # '#' comments: after a shebang, else first.
    at = 1 if lines[0].startswith("#!") else 0
    return "\n".join(lines[:at] + ["# " + SPDX] + lines[at:])


def skipped(path, root, excludes):
    rel = os.path.relpath(path, root)
    return rel in QUOTED or any(rel.startswith(e) for e in excludes)


def main(argv):
    fix = "--fix" in argv
    excludes = [a[len("--exclude="):] for a in argv if a.startswith("--exclude=")]
    args = [a for a in argv if not a.startswith("--")]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    missing = []
    for path in sources(root):
        if skipped(path, root, excludes):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if SPDX in "\n".join(text.split("\n")[:12]):
            continue
        if fix:
            with open(path, "w", encoding="utf-8") as f:
                f.write(add_line(text, path))
        else:
            missing.append(os.path.relpath(path, root))
    for path in missing:
        print("%s: no '%s' in its first lines" % (path, SPDX))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
