//===- OptionNames.cpp - pass options by PyTorch's names, typos explained -===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What PassWithOptionNames (Utils.h) and the registered pipelines share:
// an option list respelled from PyTorch's names to ours, and a bad name
// answered with the nearest valid one or the list of names.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;
using namespace mlir::ddp;

ArrayRef<OptionAlias> mlir::ddp::powerSGDOptionAliases() {
  static const OptionAlias aliases[] = {
      {"matrix-approximation-rank", "rank"},
      {"matrix-approximation-rank", "powersgd-rank"},
      {"rank", "powersgd-rank"},
      {"start-powersgd-iter", "start-iter"},
      {"use-error-feedback", "error-feedback"},
      {"random-seed", "seed"},
      {"batch-tensors-with-same-shape", "batch-same-shape"},
  };
  return aliases;
}

namespace {
/// One option of a textual option list: its name and, after it, `=value`
/// or nothing.
struct OptionText {
  StringRef key, rest;
};

/// Splits `text` into options the way MLIR's option parser reads it:
/// separated by spaces, a value's quotes ('...', "...") and braces ({...})
/// holding spaces.
SmallVector<OptionText> splitOptions(StringRef text) {
  SmallVector<OptionText> options;
  size_t i = 0, n = text.size();
  while (i < n) {
    while (i < n && text[i] == ' ')
      ++i;
    if (i >= n)
      break;
    size_t start = i;
    while (i < n && text[i] != ' ' && text[i] != '=')
      ++i;
    StringRef key = text.slice(start, i);
    size_t restStart = i;
    if (i < n && text[i] == '=') {
      ++i;
      int depth = 0;
      char quote = 0;
      for (; i < n; ++i) {
        char c = text[i];
        if (quote) {
          if (c == quote)
            quote = 0;
        } else if (c == '\'' || c == '"') {
          quote = c;
        } else if (c == '{') {
          ++depth;
        } else if (c == '}') {
          depth = std::max(depth - 1, 0);
        } else if (c == ' ' && depth == 0) {
          break;
        }
      }
    }
    options.push_back({key, text.slice(restStart, i)});
  }
  return options;
}
} // namespace

std::vector<std::string>
mlir::ddp::optionNamesBeside(const llvm::cl::Option &option, bool listsOnly) {
  std::vector<std::string> names;
  for (llvm::cl::SubCommand *sub : option.Subs)
    for (const auto &entry : sub->OptionsMap)
      if (!listsOnly ||
          entry.second->getNumOccurrencesFlag() == llvm::cl::ZeroOrMore ||
          entry.second->getNumOccurrencesFlag() == llvm::cl::OneOrMore)
        names.push_back(entry.first.str());
  llvm::sort(names);
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<std::string> mlir::ddp::printedOptionNames(StringRef printed) {
  size_t open = printed.find('{');
  if (open == StringRef::npos || !printed.ends_with("}"))
    return {};
  std::vector<std::string> names;
  for (const OptionText &option :
       splitOptions(printed.slice(open + 1, printed.size() - 1)))
    names.push_back(option.key.str());
  return names;
}

/// The nearest of `known` and the aliases (of options in `known`) to
/// `key`, if near enough to be a typo; else "".
static StringRef nearestOption(StringRef key, ArrayRef<std::string> known,
                               ArrayRef<OptionAlias> aliases) {
  StringRef nearest;
  unsigned best = ~0u;
  auto consider = [&](StringRef candidate) {
    unsigned distance = key.edit_distance(candidate);
    if (distance < best) {
      best = distance;
      nearest = candidate;
    }
  };
  for (const std::string &name : known)
    consider(name);
  for (const OptionAlias &alias : aliases)
    if (llvm::is_contained(known, alias.ours))
      consider(alias.pytorch);
  return best <= std::max<size_t>(2, key.size() / 3) ? nearest : StringRef();
}

std::string mlir::ddp::explainOptionError(StringRef owner, StringRef message,
                                          ArrayRef<std::string> known,
                                          ArrayRef<OptionAlias> aliases) {
  message = message.trim();
  message.consume_front("<Pass-Options-Parser>: ");
  // llvm::cl says what is wrong with a value itself, on stderr: which
  // option, and the value it could not take.
  if (message.empty())
    return (owner + ": an option's value is invalid (the line above says "
                    "which; --help lists the values each option takes)")
        .str();
  std::string text = (owner + ": " + message).str();
  size_t at = message.find("no such option ");
  if (at == StringRef::npos)
    return text;
  StringRef key =
      message.drop_front(at + strlen("no such option ")).take_until([](char c) {
        return c == ' ' || c == '\n';
      });
  text = (owner + ": no such option '" + key + "'").str();
  StringRef nearest = nearestOption(key, known, aliases);
  if (!nearest.empty())
    return text + "; did you mean '" + nearest.str() + "'?";
  text += "; the options are ";
  for (auto [i, name] : llvm::enumerate(known))
    text += (i ? ", " : "") + name;
  return text;
}

FailureOr<std::string> mlir::ddp::respellOptions(
    StringRef owner, StringRef text, ArrayRef<std::string> known,
    ArrayRef<std::string> lists, ArrayRef<OptionAlias> aliases,
    function_ref<LogicalResult(const Twine &)> errorHandler) {
  std::string out;
  llvm::StringMap<std::string> given; // our name -> as the user spelled it
  for (const OptionText &option : splitOptions(text)) {
    StringRef key = option.key;
    for (const OptionAlias &alias : aliases)
      if (key == alias.pytorch && llvm::is_contained(known, alias.ours)) {
        key = alias.ours;
        break;
      }
    // An option given twice is ambiguous, but for a list option under
    // one name (its values add up).
    auto [it, inserted] = given.try_emplace(key, option.key.str());
    if (!inserted &&
        (it->second != option.key || !llvm::is_contained(lists, key))) {
      (void)errorHandler(
          owner + ": option '" + key + "' is given twice" +
          (it->second == option.key
               ? std::string()
               : " (as '" + it->second + "' and '" + option.key.str() + "')"));
      return failure();
    }
    if (!out.empty())
      out += ' ';
    out += (key + option.rest).str();
  }
  return out;
}
