//===- TestPasses.h - passes for lit tests only ------------------*- C++
//-*-===//

#ifndef DDP_TESTPASSES_H
#define DDP_TESTPASSES_H

namespace mlir::ddp::test {
/// test-ddp-buffer-aliasing (ddp-opt registers it; the plugin does not).
void registerTestPasses();
} // namespace mlir::ddp::test

#endif // DDP_TESTPASSES_H
