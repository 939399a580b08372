//===- Launch.cpp - start a tool's ranks under mpirun ---------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Launch.h"

#include "Supervise.h"

#include <cerrno>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace stephost {

bool insideMpiJob() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
         std::getenv("PMIX_RANK");
}

namespace {
bool isNp(std::string_view arg) { return arg == "--np" || arg == "-np"; }
bool isNpValue(std::string_view arg) {
  return arg.substr(0, 5) == "--np=" || arg.substr(0, 4) == "-np=";
}
} // namespace

bool parseNp(int argc, char **argv, unsigned &ranks, std::string &error) {
  ranks = 0;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string value;
    if (isNpValue(arg))
      value = std::string(arg.substr(arg.find('=') + 1));
    else if (isNp(arg) && i + 1 < argc)
      value = argv[++i];
    else if (isNp(arg))
      value = "";
    else
      continue;
    char *end = nullptr;
    errno = 0;
    unsigned long n = std::strtoul(value.c_str(), &end, 10);
    if (value.empty() || value[0] == '-' || *end || errno || n < 1 ||
        n > 4096) {
      error = "--np: '" + value + "' is not a number of ranks (1 to 4096)";
      return false;
    }
    ranks = unsigned(n);
  }
  return true;
}

int launchUnderMpirun(const std::string &tool, int argc, char **argv,
                      unsigned ranks, double timeoutSeconds) {
  // This program, by its own path (argv[0] may be a bare name on PATH).
  std::vector<char> self(4096);
  ssize_t length = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  std::string program =
      length > 0 ? std::string(self.data(), size_t(length)) : argv[0];
  std::vector<std::string> args{"mpirun"};
  if (::geteuid() == 0)
    args.push_back("--allow-run-as-root");
  args.push_back("--oversubscribe");
  // OpenMPI binds each rank of a small job to one core: its compute
  // threads (--threads-per-rank: parallel loops, BLAS) and its
  // communication thread would all share that core. Unbound, they spread
  // over the node's cores (and the default thread count divides those
  // among the ranks).
  args.push_back("--bind-to");
  args.push_back("none");
  args.push_back("-np");
  args.push_back(std::to_string(ranks));
  args.push_back(program);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (isNpValue(arg))
      continue;
    if (isNp(arg)) {
      ++i;
      continue;
    }
    args.emplace_back(arg);
  }
  return superviseMpirun(tool, args, timeoutSeconds);
}

} // namespace stephost
