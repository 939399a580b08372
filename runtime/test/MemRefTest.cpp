//===- MemRefTest.cpp - the memref descriptor words of MemRef.h -----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The words the host passes to compiled code and reads back: a row-major
// buffer's descriptor, and a view of one with an offset (a result that is a
// subview of its allocation).
//
//===----------------------------------------------------------------------===//

#include "ddprt-host/MemRef.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

TEST(MemRef, RowMajorDescriptor) {
  float buffer[6];
  std::vector<int64_t> words;
  stephost::appendDescriptor(words, buffer, buffer + 1, {2, 3});
  ASSERT_EQ(words.size(), stephost::descriptorWordCount(2));
  stephost::StridedMemRefView view{words.data(), 2};
  EXPECT_EQ(view.allocated(), buffer);
  EXPECT_EQ(view.aligned(), buffer + 1);
  EXPECT_EQ(view.offset(), 0);
  EXPECT_EQ(std::vector<int64_t>(view.sizes(), view.sizes() + 2),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::vector<int64_t>(view.strides(), view.strides() + 2),
            (std::vector<int64_t>{3, 1}));
}

TEST(MemRef, ScalarThenVectorDescriptors) {
  float scalar, vector[4];
  std::vector<int64_t> words;
  stephost::appendDescriptor(words, &scalar, &scalar, {});
  stephost::appendDescriptor(words, vector, vector, {4});
  ASSERT_EQ(words.size(), stephost::descriptorWordCount(0) +
                              stephost::descriptorWordCount(1));
  stephost::StridedMemRefView second{
      words.data() + stephost::descriptorWordCount(0), 1};
  EXPECT_EQ(second.aligned(), vector);
  EXPECT_EQ(second.sizes()[0], 4);
  EXPECT_EQ(second.strides()[0], 1);
}

TEST(MemRef, OffsetMovesTheData) {
  double buffer[8];
  std::vector<int64_t> words;
  stephost::appendDescriptor(words, buffer, buffer, {4});
  words[2] = 3; // the offset word
  stephost::UnrankedMemRef unranked{1, words.data()};
  stephost::StridedMemRefView view = unranked.ranked();
  EXPECT_EQ(view.data(sizeof(double)), reinterpret_cast<char *>(buffer + 3));
}

} // namespace
