# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# -*- Python -*-
# lit configuration for ddp-opt's regression tests.

import os
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "DDP"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ddp_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs",
                   "ddp-capi-test.c", "ddp-capi-upstream-test.c"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%ddp_src_root", config.ddp_src_root))
python = config.python_executable or sys.executable
config.substitutions.append(("%python", python))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.ddp_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["ddp-opt", "ddp-capi-test", "ddp-capi-upstream-test", "ddp-import-onnx", "ddp-run",
     "ddprt-step-runner"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# ddp-import-onnx is built only where libonnx-dev is found.
if os.path.exists(os.path.join(config.ddp_tools_dir, "ddp-import-onnx")):
    config.available_features.add("ddp-import-onnx")
llvm_config.with_environment("PATH", config.ddp_tools_dir, append_path=True)

# The tests that compare with PyTorch (torch), check results with NumPy
# (numpy) or train the example (sklearn: scikit-learn's digits and
# matplotlib) run with Debian's /usr/bin/python3; CMake found which of those
# modules it imports (test/CMakeLists.txt).
for feature in config.ddp_test_python_features:
    config.available_features.add(feature)
config.substitutions.append(("%torch_python", config.ddp_test_python))
config.substitutions.append(("%numpy_python", config.ddp_test_python))

# CUDA's ptxas, which checks the PTX of steps lowered for a GPU
# (ddp-lower-to-llvm{target=cuda}); no GPU needed.
ptxas = None
for root in [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]:
    if root and os.access(os.path.join(root, "bin", "ptxas"), os.X_OK):
        ptxas = os.path.join(root, "bin", "ptxas")
        break
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
config.substitutions.append(("%extract_ptx", "%s %s" % (
    config.ddp_test_python, os.path.join(config.ddp_src_root, "test", "lib", "extract_ptx.py"))))
config.substitutions.append(("%check_host_code", "%s %s" % (
    config.ddp_test_python, os.path.join(config.ddp_src_root, "test", "lib", "check_host_code.py"))))

# The plugin that upstream mlir-opt loads, and that mlir-opt.
config.substitutions.append(
    ("%ddp_plugin", os.path.join(config.ddp_lib_dir, "DDPPlugin.so")))
config.substitutions.append(
    ("%mlir_opt", os.path.join(config.llvm_tools_dir, "mlir-opt")))
# Upstream's mlir-runner, its utility libraries, and the runtime with the
# support library that lets it run compiled steps.
llvm_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
config.substitutions.append(
    ("%mlir_runner", os.path.join(config.llvm_tools_dir, "mlir-runner")))
# The build tree, for commands the docs write with build/ in them.
config.substitutions.append(("%ddp_build_dir", os.path.dirname(config.ddp_lib_dir)))
config.substitutions.append(("%runner_libs", ",".join([
    os.path.join(llvm_lib_dir, "libmlir_runner_utils.so"),
    os.path.join(llvm_lib_dir, "libmlir_c_runner_utils.so"),
    os.path.join(config.ddp_lib_dir, "libddprt.so"),
    os.path.join(config.ddp_lib_dir, "libddprt-mlir-runner.so")])))

# Integration tests run compiled steps on several ranks with OpenMPI's
# mpirun (as root it needs --allow-run-as-root; 2-core machines need
# --oversubscribe for 4 ranks).
# scripts/sanitize.sh --all runs the suite with ASan+UBSan builds. Upstream
# mlir-opt is not instrumented: to load the instrumented plugin it needs the
# ASan runtime preloaded.
if os.environ.get("DDP_SANITIZED"):
    config.available_features.add("asan")
    import subprocess
    libasan = subprocess.run(["cc", "-print-file-name=libasan.so"],
                             capture_output=True, text=True).stdout.strip()
    config.substitutions.insert(0, ("%mlir_opt", "env LD_PRELOAD=%s %s" % (
        libasan, os.path.join(config.llvm_tools_dir, "mlir-opt"))))
    config.environment["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "")
    config.environment["UBSAN_OPTIONS"] = os.environ.get("UBSAN_OPTIONS", "")
    config.environment["LSAN_OPTIONS"] = os.environ.get("LSAN_OPTIONS", "")

# The tools' allocator (CMake DDP_ALLOCATOR) and the kernel's transparent
# huge pages (Tools/huge-pages.test).
if config.ddp_tcmalloc:
    config.available_features.add("tcmalloc")
try:
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as thp:
        thp_mode = thp.read().split("[")[1].split("]")[0]
except (OSError, IndexError):
    thp_mode = "never"
# Creating device nodes (mknod) needs root.
if hasattr(os, "geteuid") and os.geteuid() == 0:
    config.available_features.add("root")
# The kernel refuses a request larger than memory and swap (mode 0, its
# heuristic; mode 2 refuses more); mode 1 grants everything.
try:
    with open("/proc/sys/vm/overcommit_memory") as overcommit:
        if overcommit.read().strip() in ("0", "2"):
            config.available_features.add("overcommit-heuristic")
except OSError:
    pass
if thp_mode in ("always", "madvise"):
    config.available_features.add("thp")
config.substitutions.append(("%thp_mode", thp_mode))

import shutil
mpirun = shutil.which("mpirun")
if mpirun:
    config.available_features.add("mpi")
    flags = " --oversubscribe"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags = " --allow-run-as-root" + flags
    config.substitutions.append(("%mpirun", mpirun + flags))
config.substitutions.append(
    ("%ddp_run", os.path.join(config.ddp_tools_dir, "ddp-run")))
# The Python package as the build tree holds it (python/CMakeLists.txt).
config.substitutions.append(
    ("%ddp_pythonpath", os.path.join(config.ddp_obj_root, "python")))
# The runtime's calibration tool (a benchmark: built unless
# DDPRT_BUILD_BENCHMARKS=OFF).
calibrate = os.path.join(config.ddp_obj_root, "runtime", "ddprt-calibrate")
config.substitutions.append(("%ddprt_calibrate", calibrate))
if os.path.exists(calibrate):
    config.available_features.add("ddprt-calibrate")

# Several hosts on this machine (bench/net/hosts.sh: network namespaces on
# a bridge, each with its own link rate), for the tests of jobs across a
# real network (test/Integration/net). Where namespaces cannot be made
# (not root, a container without CAP_SYS_ADMIN), those tests are
# unsupported, and this says why.
hosts_script = os.path.join(config.ddp_src_root, "bench", "net", "hosts.sh")
config.substitutions.append(("%net_hosts", hosts_script))
if mpirun:
    import subprocess
    probe = subprocess.run(["bash", hosts_script, "check"],
                           capture_output=True, text=True)
    if probe.returncode == 0:
        config.available_features.add("netns")
    else:
        lit_config.note("the tests across hosts are unsupported: " +
                        (probe.stderr.strip() or "hosts.sh check failed"))
