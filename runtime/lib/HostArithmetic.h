//===- HostArithmetic.h - element-wise arithmetic on host memory -*- C++
//-*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What the MPI collectives (Collectives.cpp: the ring's partial sums and its
// mean), the backends' shared code (Backend.cpp: inspecting a copy in host
// memory) and the CPU backend (cpu/) compute on host memory, in one place
// below all of them: none reaches into another.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOSTARITHMETIC_H
#define DDPRT_HOSTARITHMETIC_H

#include "ddprt/ddprt.h"

namespace ddprt {

/// buffer *= factor, rounded once in the element type.
void scaleHost(double factor, const ddprt_buffer &buffer);

/// buffer += addend (same dtype, same size), element-wise; f16/bf16 are
/// added in f32 and rounded once.
void accumulateHost(const ddprt_buffer &buffer, const void *addend);

/// Whether every element of `buffer` is finite and whether any is nonzero
/// (the CPU backend's inspect, and every backend's on a copy in host
/// memory).
void inspectHost(const ddprt_buffer &buffer, bool &allFinite, bool &anyNonzero);

/// Whether this x86-64 CPU has the F16C and AVX instructions (the fast
/// f32 <-> f16 conversions); false elsewhere.
bool hasF16C();

/// Whether this x86-64 CPU has AVX2 (the f32 -> bf16 conversion, 8 at a
/// time); false elsewhere.
bool hasAvx2();

} // namespace ddprt

#endif // DDPRT_HOSTARITHMETIC_H
