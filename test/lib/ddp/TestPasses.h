//===- TestPasses.h - passes for lit tests only ------------------*- C++
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//-*-===//

#ifndef DDP_TESTPASSES_H
#define DDP_TESTPASSES_H

namespace mlir::ddp::test {
/// test-ddp-buffer-aliasing (ddp-opt registers it; the plugin does not).
void registerTestPasses();
} // namespace mlir::ddp::test

#endif // DDP_TESTPASSES_H
