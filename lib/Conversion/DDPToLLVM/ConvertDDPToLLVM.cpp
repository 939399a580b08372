//===- ConvertDDPToLLVM.cpp - the convert-ddp-to-llvm pass ----------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The pass around the runtime-call patterns of DDPToLLVM.cpp: alone, or
// (include-upstream, what ddp-lower-to-llvm runs) together with upstream's
// conversions of the rest of a step, function by function in parallel. The
// runtime's symbols are declared before any body is converted
// (DDPRuntimeDeclarations), so that the conversions of the bodies add
// nothing to the module but what upstream's memref patterns declare, which
// is declared first too.
//
//===----------------------------------------------------------------------===//

#include "ddp/Conversion/DDPToLLVM/DDPToLLVM.h"
#include "ddp/Conversion/Passes.h"
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/IR/GradientNames.h"
#include "ddp/Transforms/Passes.h"

#include "mlir/Analysis/DataLayoutAnalysis.h"
#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/Threading.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_CONVERTDDPTOLLVM
#include "ddp/Conversion/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

struct ConvertDDPToLLVM
    : public ddp::impl::ConvertDDPToLLVMBase<ConvertDDPToLLVM> {
  using Base::Base;

  void runOnOperation() override {
    // Hosts read the gradients' names before the lowering; the LLVM dialect
    // has no use for them.
    stripGradientNames(getOperation());
    if (includeUpstream)
      return runWithUpstream();
    MLIRContext *context = &getContext();
    LLVMTypeConverter converter(context);
    LLVMConversionTarget target(*context);
    target.addIllegalDialect<DDPDialect>();
    SymbolTableCollection symbolTables;
    FailureOr<DDPRuntimeDeclarations> declarations =
        DDPRuntimeDeclarations::declare(getOperation(), symbolTables);
    if (failed(declarations))
      return signalPassFailure();
    RewritePatternSet patterns(context);
    populateDDPToLLVMConversionPatterns(converter, patterns, &symbolTables);
    // A request may cross a call (split-functions cuts between a start
    // and its wait): signatures, calls and returns carry it as the pointer
    // it becomes; every other type stays for the conversions after this one.
    TypeConverter requests;
    requests.addConversion([](Type type) { return type; });
    requests.addConversion([](RequestType type) -> Type {
      return LLVM::LLVMPointerType::get(type.getContext());
    });
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                   requests);
    populateCallOpTypeConversionPattern(patterns, requests);
    populateReturnOpTypeConversionPattern(patterns, requests);
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
      return requests.isSignatureLegal(op.getFunctionType());
    });
    target.addDynamicallyLegalOp<func::CallOp, func::ReturnOp>(
        [&](Operation *op) { return requests.isLegal(op); });
    // Without rollback: the patterns share values within a function.
    ConversionConfig config;
    config.allowPatternRollback = false;
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns), config)))
      return signalPassFailure();
    declarations->eraseUnused();
  }

  /// ddp, cf, memref and func in one conversion, with the options
  /// finalize-memref-to-llvm{use-generic-functions} and convert-func-to-llvm
  /// would use, in three steps: the signatures, calls and returns, and
  /// everything outside the bodies of the module's functions (ddp.state,
  /// memref.global), in one conversion of the module that leaves the ops in
  /// those bodies as they are; then every body on its own, in parallel with
  /// the context's threads (each is one part of the step); then the
  /// unrealized casts left between them, per function again.
  void runWithUpstream() {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    const auto &layout = getAnalysis<DataLayoutAnalysis>();
    LowerToLLVMOptions options(context, layout.getAtOrAbove(module));
    options.useGenericFunctions = true;
    // Every buffer the module allocates has its allocated pointer equal to
    // its aligned one (one call, and what bare pointers need, below).
    options.allocLowering = LowerToLLVMOptions::AllocLowering::AlignedAlloc;
    LLVMTypeConverter converter(context, options, &layout);
    markBarePointerFunctions(module, converter);
    SymbolTableCollection symbolTables;
    // Without rollback: the patterns only build IR and replace the op they
    // match, and the conversion keeps less state per op.
    ConversionConfig config;
    config.allowPatternRollback = false;

    // Upstream's memref patterns look the allocation functions up in this
    // table (see step 2).
    SymbolTableCollection upstreamCollection;
    LockedSymbolTableCollection upstreamTables(upstreamCollection);

    // The runtime calls, cf (cf.assert reports through the runtime,
    // AssertLowering, not upstream's puts and abort) and memref.
    auto bodyPatterns = [&] {
      RewritePatternSet patterns(context);
      populateDDPToLLVMConversionPatterns(converter, patterns, &symbolTables);
      cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
      populateDDPAssertToLLVMConversionPatterns(converter, patterns,
                                                &symbolTables);
      populateDDPLaunchToLLVMConversionPatterns(converter, patterns,
                                                &symbolTables);
      populateFinalizeMemRefToLLVMConversionPatterns(converter, patterns,
                                                     &upstreamTables);
      // What lower-affine, convert-scf-to-cf and convert-{math,arith,ub}-
      // to-llvm would do, in the same walk: five passes fewer over the
      // step, each of which verified it again.
      populateAffineToStdConversionPatterns(patterns);
      populateSCFToControlFlowConversionPatterns(patterns);
      populateMathToLLVMConversionPatterns(converter, patterns);
      arith::populateArithToLLVMConversionPatterns(converter, patterns);
      ub::populateUBToLLVMConversionPatterns(converter, patterns);
      return patterns;
    };

    // The signatures of plain functions first, in linear time.
    for (auto function :
         llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      convertSignature(function, converter);

    // The runtime's declarations and constants, before any body is
    // converted: the runtime-call patterns then only look them up.
    FailureOr<DDPRuntimeDeclarations> declarations =
        DDPRuntimeDeclarations::declare(module, symbolTables);
    if (failed(declarations))
      return signalPassFailure();

    // 1. Signatures, calls, returns, and what is outside the bodies step 2
    // converts (module-level ddp.state and memref.global): the ops in those
    // bodies are legal here.
    {
      // (A body is a func.func's, or the llvm.func's it moved into.)
      auto inBody = [module](Operation *op) {
        auto function = op->getParentOfType<FunctionOpInterface>();
        return function && function->getParentOp() == module;
      };
      LLVMConversionTarget target(*context);
      target.addIllegalDialect<func::FuncDialect>();
      target.addDynamicallyLegalDialect<
          DDPDialect, cf::ControlFlowDialect, memref::MemRefDialect,
          affine::AffineDialect, scf::SCFDialect, math::MathDialect,
          arith::ArithDialect, ub::UBDialect>(inBody);
      // Launches (converted with the bodies, step 2), the kernels' images,
      // and kernels not compiled yet (their launches say so in step 2).
      target.addDynamicallyLegalDialect<gpu::GPUDialect>([&](Operation *op) {
        return inBody(op) || isa<gpu::BinaryOp, gpu::GPUModuleOp>(op) ||
               op->getParentOfType<gpu::GPUModuleOp>();
      });
      for (ConvertToLLVMPatternInterface *other : otherDialects())
        target.addLegalDialect(other->getDialect()->getNamespace());
      RewritePatternSet patterns = bodyPatterns();
      populateFuncToLLVMConversionPatterns(converter, patterns, &symbolTables);
      if (failed(applyPartialConversion(module, target, std::move(patterns),
                                        config)))
        return signalPassFailure();
    }

    // 2. The bodies. One converted in parallel must not declare the
    // allocation functions, so they are declared first (for the bodies that
    // allocate and free), and a body with a memref op that could declare
    // something else is converted alone, after the others.
    SmallVector<LLVM::LLVMFuncOp> parallelBodies, serialBodies;
    bool allocates = false, frees = false;
    for (auto function : module.getOps<LLVM::LLVMFuncOp>()) {
      if (function.isExternal())
        continue;
      bool alone = false;
      function.walk([&](Operation *nested) {
        if (isa<memref::AllocOp>(nested))
          allocates = true;
        else if (isa<memref::DeallocOp>(nested))
          frees = true;
        else if (isa_and_nonnull<memref::MemRefDialect>(nested->getDialect()) &&
                 !declaresNothing(nested))
          alone = true;
      });
      (alone ? serialBodies : parallelBodies).push_back(function);
    }
    OpBuilder builder(context);
    if (allocates &&
        failed(LLVM::lookupOrCreateGenericAlignedAllocFn(
            builder, module, converter.getIndexType(), &upstreamTables)))
      return signalPassFailure();
    if (frees && failed(LLVM::lookupOrCreateGenericFreeFn(builder, module,
                                                          &upstreamTables)))
      return signalPassFailure();
    {
      LLVMConversionTarget target(*context);
      target.addIllegalDialect<DDPDialect, cf::ControlFlowDialect,
                               memref::MemRefDialect, affine::AffineDialect,
                               scf::SCFDialect, math::MathDialect,
                               arith::ArithDialect, ub::UBDialect>();
      target.addIllegalOp<gpu::LaunchFuncOp>();
      RewritePatternSet patterns = bodyPatterns();
      // Any other dialect in the bodies (omp, from convert-scf-to-openmp)
      // converts as convert-to-llvm would convert it: through its
      // ConvertToLLVMPatternInterface, patterns and legality.
      for (ConvertToLLVMPatternInterface *other : otherDialects())
        other->populateConvertToLLVMConversionPatterns(target, converter,
                                                       patterns);
      FrozenRewritePatternSet frozen(std::move(patterns));
      auto convert = [&](LLVM::LLVMFuncOp function) {
        return applyPartialConversion(function, target, frozen, config);
      };
      if (failed(failableParallelForEach(context, parallelBodies, convert)))
        return signalPassFailure();
      for (LLVM::LLVMFuncOp function : serialBodies)
        if (failed(convert(function)))
          return signalPassFailure();
    }

    // 3. What reconcile-unrealized-casts does, here rather than as a pass
    // of its own: one walk and one verification of the lowered step fewer.
    // Casts that do not reconcile stay, as they would with the pass.
    SmallVector<LLVM::LLVMFuncOp> functions(module.getOps<LLVM::LLVMFuncOp>());
    parallelForEach(context, functions, [](LLVM::LLVMFuncOp function) {
      SmallVector<UnrealizedConversionCastOp> casts;
      function.walk(
          [&](UnrealizedConversionCastOp cast) { casts.push_back(cast); });
      reconcileUnrealizedCasts(casts);
    });
    declarations->eraseUnused();

    // The kernels' images are globals of the calls now: the binaries (and
    // what marked the module as holding GPU code) go, so that the module
    // translates without GPU offloading.
    for (auto binary :
         llvm::make_early_inc_range(module.getOps<gpu::BinaryOp>()))
      binary.erase();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }

  /// The dialects beyond those runWithUpstream lists whose ops may be in a
  /// step's bodies, with their ConvertToLLVMPatternInterface: omp (the
  /// parallel loops), if loaded. (Not every dialect with the interface:
  /// some declare functions as they convert, which the bodies converted in
  /// parallel must not.)
  SmallVector<ConvertToLLVMPatternInterface *> otherDialects() {
    SmallVector<ConvertToLLVMPatternInterface *> others;
    if (Dialect *omp = getContext().getLoadedDialect<omp::OpenMPDialect>())
      if (auto *iface =
              omp->getRegisteredInterface<ConvertToLLVMPatternInterface>())
        others.push_back(iface);
    return others;
  }

  /// Converts `function` into an llvm.func as convert-func-to-llvm would
  /// (the same signature: a memref argument becomes its descriptor's
  /// fields), unless it has something convert-func-to-llvm treats specially
  /// (argument or result attributes, C wrappers, varargs, linkage, readnone,
  /// the bare-pointer convention), which is left to it. Each argument is
  /// rebuilt at the top of the body (a descriptor packed from its fields)
  /// and cast back to its type for the ops still to convert. Upstream's
  /// signature conversion orders the entry block again for every argument
  /// it replaces: quadratic in a step's gradients (1.9 of the pass's 19 s
  /// at 40k). This is linear.
  static void convertSignature(func::FuncOp function,
                               const LLVMTypeConverter &converter) {
    if (function.isExternal() || function.getAllArgAttrs() ||
        function.getAllResultAttrs() || function->hasAttr("llvm.bareptr") ||
        function->hasAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName()) ||
        function->hasAttr("func.varargs") || function->hasAttr("llvm.linkage"))
      return;
    TypeConverter::SignatureConversion signature(function.getNumArguments());
    auto type = dyn_cast_or_null<LLVM::LLVMFunctionType>(
        converter.convertFunctionSignature(function.getFunctionType(),
                                           /*isVariadic=*/false,
                                           /*useBarePtrCallConv=*/false,
                                           signature));
    if (!type || function->hasAttr(LLVM::LLVMDialect::getReadnoneAttrName()) ||
        llvm::any_of(
            llvm::enumerate(function.getArgumentTypes()), [&](auto argument) {
              return signature.getInputMapping(argument.index())->size != 1 &&
                     !isa<MemRefType>(argument.value());
            }))
      return; // upstream converts it, or reports why not
    SmallVector<NamedAttribute> attributes(function->getDiscardableAttrs());
    OpBuilder builder(function);
    auto lowered = LLVM::LLVMFuncOp::create(
        builder, function.getLoc(), function.getName(), type,
        LLVM::Linkage::External, /*dsoLocal=*/false, LLVM::CConv::C,
        /*comdat=*/nullptr, attributes);
    cast<FunctionOpInterface>(lowered.getOperation())
        .setVisibility(function.getVisibility());
    lowered.getBody().takeBody(function.getBody());
    function.erase();

    Block &entry = lowered.getBody().front();
    unsigned numOriginal = entry.getNumArguments();
    builder.setInsertionPointToStart(&entry);
    for (unsigned i = 0; i < numOriginal; ++i) {
      BlockArgument original = entry.getArgument(i);
      auto mapping = signature.getInputMapping(i);
      Location loc = original.getLoc();
      SmallVector<Value> fields;
      for (Type fieldType :
           signature.getConvertedTypes().slice(mapping->inputNo, mapping->size))
        fields.push_back(entry.addArgument(fieldType, loc));
      auto memref = dyn_cast<MemRefType>(original.getType());
      Value converted = memref ? MemRefDescriptor::pack(builder, loc, converter,
                                                        memref, fields)
                               : fields.front();
      if (converted.getType() != original.getType())
        converted = UnrealizedConversionCastOp::create(
                        builder, loc, original.getType(), converted)
                        .getResult(0);
      original.replaceAllUsesWith(converted);
    }
    entry.eraseArguments(0, numOriginal);
  }

  /// Gives upstream's bare-pointer calling convention (`llvm.bareptr`: one
  /// pointer per memref instead of a descriptor of 3 + 2 * rank values) to
  /// the private functions it is safe for: split-functions' parts, whose
  /// boundaries otherwise carry thousands of descriptors that are built,
  /// passed and taken apart again. The callee rebuilds a descriptor with
  /// allocated = aligned = the pointer, and returns its results' allocated
  /// pointers; so a function qualifies if it is a part
  /// (`split_functions.part`: it
  /// frees only buffers it allocated, with allocated = aligned),
  /// every use of it is a func.call, its memrefs have static shapes and
  /// layouts, and every memref it returns is a buffer it allocated or a
  /// state buffer, not a view of an argument or a global.
  static void markBarePointerFunctions(ModuleOp module,
                                       const LLVMTypeConverter &converter) {
    // Functions referenced other than as a callee keep the descriptors.
    llvm::DenseSet<StringAttr> escaping;
    if (auto uses = SymbolTable::getSymbolUses(&module.getBodyRegion()))
      for (const SymbolTable::SymbolUse &use : *uses) {
        auto call = dyn_cast<func::CallOp>(use.getUser());
        if (!call || call.getCalleeAttr() != use.getSymbolRef())
          escaping.insert(use.getSymbolRef().getRootReference());
      }
    auto bareType = [&](Type type) {
      auto memref = dyn_cast<MemRefType>(type);
      if (!memref)
        return !isa<BaseMemRefType>(type);
      return memref.hasStaticShape() && converter.canConvertToBarePtr(memref);
    };
    for (auto function : module.getOps<func::FuncOp>()) {
      if (!isSplitPart(function) || !function.isPrivate() ||
          function.isExternal() ||
          escaping.contains(function.getSymNameAttr()) ||
          !llvm::all_of(function.getArgumentTypes(), bareType) ||
          !llvm::all_of(function.getResultTypes(), bareType))
        continue;
      bool owned = true;
      function.walk([&](func::ReturnOp ret) {
        for (Value result : ret.getOperands())
          if (isa<MemRefType>(result.getType()) && !isOwnBuffer(result))
            owned = false;
      });
      if (owned)
        function->setAttr("llvm.bareptr", UnitAttr::get(module.getContext()));
    }
  }

  /// Whether `value` is, through views, branches and scf.ifs, always a
  /// buffer that its function allocated or a runtime state buffer.
  static bool isOwnBuffer(Value value) {
    SmallVector<Value> worklist{value};
    llvm::DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value current = worklist.pop_back_val();
      if (!seen.insert(current).second)
        continue;
      if (auto argument = dyn_cast<BlockArgument>(current)) {
        Block *block = argument.getOwner();
        if (block->isEntryBlock())
          return false;
        for (auto it = block->pred_begin(); it != block->pred_end(); ++it) {
          auto branch = dyn_cast<BranchOpInterface>((*it)->getTerminator());
          if (!branch)
            return false;
          Value incoming = branch.getSuccessorOperands(
              it.getSuccessorIndex())[argument.getArgNumber()];
          if (!incoming)
            return false;
          worklist.push_back(incoming);
        }
        continue;
      }
      Operation *def = current.getDefiningOp();
      if (isa<memref::AllocOp, BufferStateOp>(def))
        continue;
      // What either branch yields (the scf is lowered in this pass).
      if (auto ifOp = dyn_cast<scf::IfOp>(def)) {
        unsigned index = cast<OpResult>(current).getResultNumber();
        worklist.push_back(ifOp.thenYield().getOperand(index));
        worklist.push_back(ifOp.elseYield().getOperand(index));
        continue;
      }
      if (auto view = dyn_cast<ViewLikeOpInterface>(def);
          view && view.getViewDest() == current &&
          !isa<memref::GetGlobalOp>(def)) {
        worklist.push_back(view.getViewSource());
        continue;
      }
      return false;
    }
    return true;
  }

  /// Whether upstream's lowering of memref op `op` adds nothing to the
  /// module but the allocation functions declared before the bodies are
  /// converted (a memref.copy between non-contiguous memrefs calls
  /// memrefCopy, which it declares).
  static bool declaresNothing(Operation *op) {
    if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      auto contiguous = [](Type type) {
        auto memref = dyn_cast<MemRefType>(type);
        return memref && memref.getLayout().isIdentity();
      };
      return contiguous(copy.getSource().getType()) &&
             contiguous(copy.getTarget().getType());
    }
    return isa<
        memref::AllocOp, memref::AllocaOp, memref::DeallocOp, memref::LoadOp,
        memref::StoreOp, memref::CastOp, memref::ReinterpretCastOp,
        memref::ExtractAlignedPointerAsIndexOp,
        memref::ExtractStridedMetadataOp, memref::GetGlobalOp, memref::DimOp,
        memref::AssumeAlignmentOp, memref::ViewOp, memref::CollapseShapeOp,
        memref::ExpandShapeOp, memref::AtomicRMWOp, memref::MemorySpaceCastOp,
        memref::AllocaScopeOp, memref::AllocaScopeReturnOp>(op);
  }
};

} // namespace
