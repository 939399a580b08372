//===- Launch.cpp - start a tool's ranks under mpirun ---------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Launch.h"

#include "Supervise.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

namespace stephost {

bool insideMpiJob() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
         std::getenv("PMIX_RANK");
}

int launcherRank() {
  for (const char *variable : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char *value = std::getenv(variable))
      return std::atoi(value);
  return -1;
}

namespace {
/// Whether argv[i] is launcher option `name` ("np": --np, -np): as
/// `--name=value` (then `value` is set) or as `--name` followed by its
/// value (then `separate` is set).
bool isOption(std::string_view arg, std::string_view name, std::string &value,
              bool &separate) {
  for (std::string_view dashes : {"--", "-"}) {
    if (arg.substr(0, dashes.size()) != dashes)
      continue;
    std::string_view rest = arg.substr(dashes.size());
    if (rest == name) {
      separate = true;
      return true;
    }
    if (rest.substr(0, name.size()) == name && rest.size() > name.size() &&
        rest[name.size()] == '=') {
      value = std::string(rest.substr(name.size() + 1));
      separate = false;
      return true;
    }
  }
  return false;
}

constexpr std::string_view kLaunchOptions[] = {"np", "hostfile"};
} // namespace

bool parseLaunchOptions(int argc, char **argv, LaunchOptions &options,
                        std::string &error) {
  options.ranks = 0;
  options.hostfile.clear();
  bool hasHostfile = false;
  for (int i = 1; i < argc; ++i) {
    std::string value;
    bool separate = false;
    if (isOption(argv[i], "np", value, separate)) {
      if (separate)
        value = i + 1 < argc ? argv[++i] : "";
      char *end = nullptr;
      errno = 0;
      unsigned long n = std::strtoul(value.c_str(), &end, 10);
      if (value.empty() || value[0] == '-' || *end || errno || n < 1 ||
          n > 4096) {
        error = "--np: '" + value + "' is not a number of ranks (1 to 4096)";
        return false;
      }
      options.ranks = unsigned(n);
    } else if (isOption(argv[i], "hostfile", value, separate)) {
      if (separate)
        value = i + 1 < argc ? argv[++i] : "";
      options.hostfile = value;
      hasHostfile = true;
    }
  }
  if (!hasHostfile)
    return true;
  if (options.hostfile.empty()) {
    error = "--hostfile needs a file (mpirun's hostfile: one host per line, "
            "'HOST slots=N')";
    return false;
  }
  if (options.ranks == 0) {
    error = "--hostfile needs --np=N, the number of ranks over all its hosts";
    return false;
  }
  struct stat info {};
  if (::stat(options.hostfile.c_str(), &info) != 0 || S_ISDIR(info.st_mode) ||
      ::access(options.hostfile.c_str(), R_OK) != 0) {
    error =
        "--hostfile: cannot read '" + options.hostfile + "': " +
        (S_ISDIR(info.st_mode) ? "it is a directory" : std::strerror(errno));
    return false;
  }
  return true;
}

int launchUnderMpirun(const std::string &tool, int argc, char **argv,
                      const LaunchOptions &options) {
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
  if (!options.hostfile.empty()) {
    args.push_back("--hostfile");
    args.push_back(options.hostfile);
  }
  // The runtime's and NCCL's settings (DDPRT_SIMULATED_LINK,
  // NCCL_SOCKET_IFNAME, ...) reach the ranks on other hosts too: mpirun
  // passes on only what -x names.
  for (char **entry = environ; *entry; ++entry) {
    std::string_view variable = *entry;
    if ((variable.substr(0, 6) == "DDPRT_" ||
         variable.substr(0, 5) == "NCCL_") &&
        variable.find('=') != std::string_view::npos) {
      args.push_back("-x");
      args.emplace_back(variable.substr(0, variable.find('=')));
    }
  }
  args.push_back("-np");
  args.push_back(std::to_string(options.ranks));
  args.push_back(program);
  for (int i = 1; i < argc; ++i) {
    std::string value;
    bool separate = false, launcherOption = false;
    for (std::string_view name : kLaunchOptions)
      if (isOption(argv[i], name, value, separate)) {
        launcherOption = true;
        i += separate;
        break;
      }
    if (!launcherOption)
      args.emplace_back(argv[i]);
  }
  return superviseMpirun(tool, args, options.timeoutSeconds);
}

} // namespace stephost
