//===- Supervise.cpp - run mpirun and supervise its job -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What torchrun's agent does for its workers, for a job under mpirun:
//
// - mpirun's stdout and stderr pass through this process unchanged, and the
//   error lines among them are remembered;
// - the ranks on this machine append each error they print to a file of
//   their own in a directory made for the job (Job.h: the error report).
//   mpirun tearing a job down (MPI_Abort, a rank exiting early) can lose
//   what a rank wrote last; an error in a report that did not come through
//   is written here after the job ends;
// - once a report exists (a rank failed), mpirun has the ranks' timeout
//   plus kLauncherGraceSeconds to end (the ranks may still agree on the
//   failure); once a rank said it is ending the job (an `ending.` marker:
//   MPI_Abort, a watchdog's exit), kLauncherEndingSeconds. Then it gets
//   SIGTERM, and SIGKILL a few seconds later. A signal asking this process
//   to stop is passed to mpirun, under the shorter rule;
// - this process is the child subreaper of the job's processes (Linux):
//   what mpirun leaves behind when it ends (a rank it could not end) is
//   then this process's child, and is ended.
//
//===----------------------------------------------------------------------===//

#include "Supervise.h"

#include "Format.h"
#include "Launch.h"
#include "WriteAll.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <unordered_set>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace stephost {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// mpirun's pid for the signal handler, the signal that asked this
/// process to stop (0: none), and one to pass on that came before mpirun's
/// pid was known.
volatile sig_atomic_t mpirunPid = 0;
volatile sig_atomic_t stopSignal = 0;
volatile sig_atomic_t unforwarded = 0;

void onStopSignal(int signal, siginfo_t *info, void *) {
  stopSignal = signal;
  // A signal from the terminal (Ctrl-C) reached mpirun too, which is in
  // this process's group; one sent to this process alone is passed on.
  if (info && info->si_code == SI_KERNEL)
    return;
  if (mpirunPid > 0)
    ::kill(pid_t(mpirunPid), signal);
  else
    unforwarded = signal;
}

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

/// A message of the launcher's own, to stderr.
void say(const std::string &message) {
  (void)writeAll(2, message.data(), message.size());
}

/// One of mpirun's output streams, passed through to `to`.
struct Stream {
  int from = -1, to = -1;
  /// False once `to` refused a write (a closed pipe): what comes is read
  /// and dropped, so that mpirun never blocks on a full pipe.
  bool writable = true;
  std::string partial;

  /// Reads what is there; false at the end of the stream.
  bool pump(std::unordered_set<std::string> &seen) {
    char buffer[65536];
    ssize_t got = ::read(from, buffer, sizeof buffer);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
      return true;
    if (got <= 0) {
      ::close(from);
      from = -1;
      return false;
    }
    if (writable)
      writable = writeAll(to, buffer, size_t(got));
    // The error lines seen, to tell which reported errors came through.
    for (ssize_t i = 0; i < got; ++i) {
      char c = buffer[i];
      if (c != '\n' && c != '\r') {
        if (partial.size() < 65536)
          partial += c;
        continue;
      }
      if (isErrorText(partial) && seen.size() < 100000)
        seen.insert(partial);
      partial.clear();
    }
    return true;
  }
};

/// The directory of the job's error reports: made private to this user
/// under $TMPDIR (or /tmp), removed with what is in it at the end.
class ReportDirectory {
public:
  ReportDirectory() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base && *base ? base : "/tmp") + "/ddprt-job.XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()))
      path = buffer.data();
  }
  ~ReportDirectory() {
    if (path.empty())
      return;
    for (const std::string &name : files())
      ::unlink((path + "/" + name).c_str());
    ::rmdir(path.c_str());
  }
  ReportDirectory(const ReportDirectory &) = delete;
  ReportDirectory &operator=(const ReportDirectory &) = delete;

  std::vector<std::string> files() const {
    std::vector<std::string> names;
    if (DIR *directory = path.empty() ? nullptr : ::opendir(path.c_str())) {
      while (dirent *entry = ::readdir(directory))
        if (entry->d_name[0] != '.')
          names.emplace_back(entry->d_name);
      ::closedir(directory);
    }
    return names;
  }

  /// The reports' lines, the oldest report first.
  std::vector<std::string> lines() const {
    std::vector<std::pair<double, std::string>> byTime;
    for (const std::string &name : files()) {
      if (name.rfind("error.", 0) != 0)
        continue;
      struct stat info {};
      std::string file = path + "/" + name;
      if (::lstat(file.c_str(), &info) == 0 && S_ISREG(info.st_mode))
        byTime.emplace_back(double(info.st_mtim.tv_sec) +
                                1e-9 * double(info.st_mtim.tv_nsec),
                            file);
    }
    std::sort(byTime.begin(), byTime.end());
    std::vector<std::string> out;
    for (const auto &[time, file] : byTime) {
      std::ifstream in(file);
      for (std::string line; std::getline(in, line) && out.size() < 1000;)
        if (!line.empty())
          out.push_back(line);
    }
    return out;
  }

  std::string path;
};

/// This process's living children (once mpirun ended: what the job left
/// behind, given to this process as its subreaper).
std::vector<pid_t> childrenOfThisProcess() {
  std::vector<pid_t> found;
  pid_t self = ::getpid();
  DIR *proc = ::opendir("/proc");
  if (!proc)
    return found;
  while (dirent *entry = ::readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(entry->d_name[0])))
      continue;
    std::ifstream stat(std::string("/proc/") + entry->d_name + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)),
                     std::istreambuf_iterator<char>());
    // pid (comm) state ppid ...: comm may hold spaces and parentheses.
    size_t close = text.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream fields(text.substr(close + 1));
    std::string state;
    long parent = 0;
    fields >> state >> parent;
    if (parent == self && state != "Z")
      found.push_back(pid_t(std::atol(entry->d_name)));
  }
  ::closedir(proc);
  return found;
}

void reapZombies() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

/// Ends what the job left behind on this machine: SIGTERM, then SIGKILL
/// what is still there a second later. Returns how many there were.
size_t endLeftovers() {
  reapZombies();
  std::vector<pid_t> left = childrenOfThisProcess();
  if (left.empty())
    return 0;
  for (pid_t pid : left) {
    ::kill(pid, SIGCONT); // a stopped process would not see SIGTERM
    ::kill(pid, SIGTERM);
  }
  Clock::time_point start = Clock::now();
  while (secondsSince(start) < 1.0 && !childrenOfThisProcess().empty()) {
    reapZombies();
    ::usleep(20000);
  }
  for (pid_t pid : childrenOfThisProcess())
    ::kill(pid, SIGKILL);
  start = Clock::now();
  while (secondsSince(start) < 5.0 && !childrenOfThisProcess().empty()) {
    reapZombies();
    ::usleep(20000);
  }
  reapZombies();
  return left.size();
}

} // namespace

int superviseMpirun(const std::string &tool,
                    const std::vector<std::string> &command,
                    double timeoutSeconds) {
  ReportDirectory reports;
  std::vector<std::string> environment;
  std::string variable = std::string(kErrorReportVariable) + "=";
  for (char **entry = environ; *entry; ++entry)
    if (std::strncmp(*entry, variable.data(), variable.size()) != 0)
      environment.emplace_back(*entry);
  if (!reports.path.empty())
    environment.push_back(variable + reports.path);

  // Where stdout and stderr are one file (a terminal, `2>&1`), mpirun
  // writes both to one pipe, and their lines keep the order it gave them.
  struct stat out {
  }, err{};
  bool oneFile = ::fstat(1, &out) == 0 && ::fstat(2, &err) == 0 &&
                 out.st_dev == err.st_dev && out.st_ino == err.st_ino;
  int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1};
  if (::pipe2(outPipe, O_CLOEXEC) != 0 ||
      (!oneFile && ::pipe2(errPipe, O_CLOEXEC) != 0)) {
    std::fprintf(stderr, "%s: error: cannot make pipes for mpirun: %s\n",
                 tool.c_str(), std::strerror(errno));
    return 1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, oneFile ? outPipe[1] : errPipe[1],
                                   2);
  // mpirun starts with the default handling of SIGPIPE, which this process
  // ignores.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);

  std::vector<char *> argv, envp;
  for (const std::string &arg : command)
    argv.push_back(const_cast<char *>(arg.c_str()));
  argv.push_back(nullptr);
  for (std::string &entry : environment)
    envp.push_back(entry.data());
  envp.push_back(nullptr);

  // Processes the job orphans become this process's children.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction action {};
  action.sa_sigaction = onStopSignal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int signal : kStopSignals)
    ::sigaction(signal, &action, nullptr);

  pid_t pid = 0;
  int spawned = ::posix_spawnp(&pid, command[0].c_str(), &actions, &attributes,
                               argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  for (int fd : {outPipe[1], errPipe[1]})
    if (fd >= 0)
      ::close(fd);
  if (spawned != 0) {
    for (int fd : {outPipe[0], errPipe[0]})
      if (fd >= 0)
        ::close(fd);
    std::fprintf(stderr, "%s: error: --np needs mpirun on PATH (OpenMPI): %s\n",
                 tool.c_str(), std::strerror(spawned));
    return 1;
  }
  mpirunPid = pid;
  // A signal between the spawn and the line above (mpirun may already be
  // running, and its caller waiting for it to end) is passed on now.
  if (int signal = unforwarded) {
    unforwarded = 0;
    ::kill(pid, signal);
  }

  std::unordered_set<std::string> seen;
  Stream streams[2];
  streams[0].from = outPipe[0];
  streams[0].to = 1;
  streams[1].from = errPipe[0]; // -1 where there is one pipe
  streams[1].to = 2;
  int status = 0;
  bool ended = false, stoppedByUs = false, killed = false;
  std::optional<Clock::time_point> endedAt, failedAt, endingAt, signalledAt,
      termAt;
  while (true) {
    pollfd fds[2];
    nfds_t count = 0;
    Stream *polled[2];
    for (Stream &stream : streams)
      if (stream.from >= 0) {
        fds[count] = {stream.from, POLLIN, 0};
        polled[count++] = &stream;
      }
    if (count > 0 && ::poll(fds, count, 100) > 0) {
      for (nfds_t i = 0; i < count; ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
          polled[i]->pump(seen);
    } else if (count == 0) {
      ::usleep(100000);
    }
    if (!ended && ::waitpid(pid, &status, WNOHANG) == pid) {
      ended = true;
      endedAt = Clock::now();
      mpirunPid = 0;
    }
    // What mpirun wrote before it ended (something it left behind may
    // hold the pipes open: it is ended first).
    if (ended && ((streams[0].from < 0 && streams[1].from < 0) ||
                  secondsSince(*endedAt) > 0.5))
      break;
    if (ended)
      continue;
    if (stopSignal && !signalledAt)
      signalledAt = Clock::now();
    if (!failedAt || !endingAt) {
      for (const std::string &name : reports.files()) {
        if (!failedAt && name.rfind("error.", 0) == 0)
          failedAt = Clock::now();
        if (!endingAt && name.rfind("ending.", 0) == 0)
          endingAt = Clock::now();
      }
    }
    // Whichever deadline comes first: after a rank's error the ranks may
    // still agree on it (within the timeout); after a rank ended the job,
    // or a signal, nothing is left to wait for.
    std::string overdue;
    if (endingAt && secondsSince(*endingAt) > kLauncherEndingSeconds)
      overdue =
          secondsText(kLauncherEndingSeconds) + " s of a rank ending the job";
    else if (signalledAt && secondsSince(*signalledAt) > kLauncherEndingSeconds)
      overdue =
          secondsText(kLauncherEndingSeconds) + " s of being asked to stop";
    else if (failedAt && timeoutSeconds > 0 &&
             secondsSince(*failedAt) > timeoutSeconds + kLauncherGraceSeconds)
      overdue = secondsText(timeoutSeconds + kLauncherGraceSeconds) +
                " s of a rank's error (--timeout + " +
                secondsText(kLauncherGraceSeconds) + " s)";
    if (!overdue.empty() && !termAt) {
      say(tool + ": error: mpirun did not end within " + overdue +
          "; stopping it and what the job started on this machine\n");
      ::kill(pid, SIGTERM);
      termAt = Clock::now();
      stoppedByUs = true;
    }
    if (termAt && !killed && secondsSince(*termAt) > 3.0) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
  }
  size_t leftovers = endLeftovers();
  // The rest of the output, now that nothing holds the pipes (at most a
  // second: a process that escaped this machine's process tree may).
  Clock::time_point draining = Clock::now();
  for (Stream &stream : streams)
    while (stream.from >= 0 && secondsSince(draining) < 1.0) {
      pollfd fd{stream.from, POLLIN, 0};
      if (::poll(&fd, 1, 50) > 0)
        stream.pump(seen);
    }
  for (Stream &stream : streams)
    if (stream.from >= 0)
      ::close(stream.from);
  if (leftovers > 0)
    say(tool + ": ended " + std::to_string(leftovers) + " process" +
        (leftovers == 1 ? "" : "es") +
        " the job left behind on this machine\n");

  int result = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (stoppedByUs)
    result = 1;
  // The errors the ranks reported that did not come through.
  if (result != 0) {
    std::unordered_set<std::string> said;
    for (const std::string &line : reports.lines())
      if (!seen.count(line) && said.insert(line).second)
        say(line + "\n");
  }
  for (int signal : kStopSignals)
    std::signal(signal, SIG_DFL);
  return result;
}

} // namespace stephost
