//===- MergeGPUModules.cpp - every outlined kernel in one GPU module ------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// gpu-kernel-outlining gives each kernel a module of its own, and
// gpu-module-to-binary compiles each module on its own: at thousands of
// kernels the NVPTX backend's set-up per module dominates the lowering.
// One linear pass: move the kernels, then retarget the launches.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPMERGEGPUMODULES
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// The kernel of a module that holds one kernel and nothing else, with no
/// attributes beyond its name (no target, no offloading handler yet).
gpu::GPUFuncOp onlyKernel(gpu::GPUModuleOp module) {
  if (module.getTargetsAttr() || module.getOffloadingHandlerAttr())
    return {};
  Block &body = module.getBodyRegion().front();
  if (!llvm::hasSingleElement(body.without_terminator()))
    return {};
  auto kernel = dyn_cast<gpu::GPUFuncOp>(&body.front());
  return kernel && kernel.isKernel() ? kernel : gpu::GPUFuncOp();
}

struct MergeGPUModules
    : public ddp::impl::DDPMergeGPUModulesBase<MergeGPUModules> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<gpu::GPUModuleOp, gpu::GPUFuncOp>> kernels;
    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>())
      if (gpu::GPUFuncOp kernel = onlyKernel(gpuModule))
        kernels.push_back({gpuModule, kernel});
    if (kernels.size() < 2)
      return;
    gpu::GPUModuleOp into = kernels.front().first;
    Block &target = into.getBodyRegion().front();
    // Old (module, kernel) -> the kernel's new reference.
    llvm::DenseMap<std::pair<StringAttr, StringAttr>, SymbolRefAttr> moved;
    for (auto [from, kernel] : llvm::drop_begin(kernels)) {
      StringAttr oldName = kernel.getNameAttr();
      // The module's name is unique among the module's symbols, and so
      // among the kernels.
      kernel.setName(from.getName());
      kernel->moveBefore(&target, target.end());
      moved[{from.getNameAttr(), oldName}] = SymbolRefAttr::get(
          into.getNameAttr(), {FlatSymbolRefAttr::get(kernel.getNameAttr())});
      from.erase();
      ++numMerged;
    }
    // The first module's kernel keeps its module and name.
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto it =
          moved.find({launch.getKernelModuleName(), launch.getKernelName()});
      if (it != moved.end())
        launch.setKernelAttr(it->second);
    });
  }
};

} // namespace
