//===- HostDevice.h - code for the host and CUDA devices --------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDPRT_HOSTDEVICE_H
#define DDPRT_HOSTDEVICE_H

/// Marks a function the CPU kernels and the CUDA kernels both call.
#if defined(__CUDACC__)
#define DDPRT_HOST_DEVICE __host__ __device__
#else
#define DDPRT_HOST_DEVICE
#endif

#endif // DDPRT_HOSTDEVICE_H
