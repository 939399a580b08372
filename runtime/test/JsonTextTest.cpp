//===- JsonTextTest.cpp - The layout of the JSON files the hosts write ----===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// jsonText lays out what nlohmann-json writes: the text parses back to the
// same value (strings with quotes, backslashes and control characters,
// bytes that are not UTF-8, non-finite numbers), and its lines are the ones
// the summary, step.json and the calibrated profile are read by.
//
//===----------------------------------------------------------------------===//

#include "JsonText.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

using stephost::jsonText;
using stephost::OrderedJson;
using stephost::roundTo;
using stephost::significant;

namespace {

TEST(JsonTextTest, TopLevelMembersOnTheirOwnLinesInTheirOrder) {
  OrderedJson json;
  json["rank"] = 0;
  json["arguments"] = {"g0", "g1"};
  json["link"] = {{"gbps", 1.5}, {"latency_us", 20}};
  json["empty"] = OrderedJson::object();
  EXPECT_EQ(jsonText(json), "{\n"
                            "  \"rank\": 0,\n"
                            "  \"arguments\": [\"g0\", \"g1\"],\n"
                            "  \"link\": {\"gbps\": 1.5, \"latency_us\": 20},\n"
                            "  \"empty\": {}\n"
                            "}\n");
}

TEST(JsonTextTest, ObjectDepthAndArraysOfObjects) {
  OrderedJson json;
  json["kernels"] = OrderedJson::array();
  json["kernels"].push_back({{"name", "a"}, {"ms", 1}});
  json["kernels"].push_back({{"name", "b"}, {"ms", 2}});
  json["fit"] = {{"inner", {{"x", 1}}}};
  EXPECT_EQ(jsonText(json, /*objectDepth=*/2),
            "{\n"
            "  \"kernels\": [\n"
            "    {\"name\": \"a\", \"ms\": 1},\n"
            "    {\"name\": \"b\", \"ms\": 2}\n"
            "  ],\n"
            "  \"fit\": {\n"
            "    \"inner\": {\"x\": 1}\n"
            "  }\n"
            "}\n");
}

TEST(JsonTextTest, StringsAreEscapedAndParseBack) {
  OrderedJson json;
  json["verdict"] = "a \"quoted\" word, a back\\slash,\na tab\t and \x01";
  json["bytes"] = std::string("ok \xff\xfe end");
  std::string text = jsonText(json);
  OrderedJson back = OrderedJson::parse(text);
  EXPECT_EQ(back["verdict"], json["verdict"]);
  // Bytes that are not UTF-8 become U+FFFD instead of failing the file.
  EXPECT_EQ(back["bytes"], "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
  // Still one member per line: the newline inside the string is escaped.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
}

TEST(JsonTextTest, NonFiniteNumbersAreNull) {
  OrderedJson json;
  json["ms"] = std::numeric_limits<double>::quiet_NaN();
  json["ratio"] = roundTo(std::numeric_limits<double>::infinity(), 6);
  EXPECT_EQ(jsonText(json), "{\n  \"ms\": null,\n  \"ratio\": null\n}\n");
}

TEST(JsonTextTest, RoundingGivesShortNumbers) {
  OrderedJson json;
  json["a"] = roundTo(2.0, 6);
  json["b"] = roundTo(0.1234567, 3);
  json["c"] = significant(123456.789, 4);
  json["d"] = significant(1e-9 / 3, 3);
  EXPECT_EQ(jsonText(json), "{\n  \"a\": 2.0,\n  \"b\": 0.123,\n"
                            "  \"c\": 123500.0,\n  \"d\": 3.33e-10\n}\n");
}

} // namespace
