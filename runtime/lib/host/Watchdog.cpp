//===- Watchdog.cpp - a deadline for waits without a timeout --------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Job.h"
#include "WriteAll.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace stephost {

struct Watchdog::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::thread thread;
  bool armed = false, quit = false;
  std::chrono::steady_clock::time_point deadline;
  std::string message;

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!quit) {
      if (!armed) {
        changed.wait(lock);
        continue;
      }
      if (changed.wait_until(lock, deadline) == std::cv_status::timeout &&
          armed && std::chrono::steady_clock::now() >= deadline) {
        // The main thread is blocked (maybe inside MPI): write and leave
        // without running destructors or atexit handlers.
        reportError(message.data(), message.size());
        reportEnding();
        (void)writeAll(2, message.data(), message.size());
        reportError(message.data(), message.size());
        reportEnding();
        for (size_t done = 0; done < message.size();) {
          ssize_t wrote =
              ::write(2, message.data() + done, message.size() - done);
          if (wrote <= 0)
            break;
          done += size_t(wrote);
        }
        std::_Exit(1);
      }
    }
  }
};

Watchdog::Watchdog() : state(new State) {}

Watchdog::~Watchdog() {
  if (state->thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->quit = true;
    }
    state->changed.notify_all();
    state->thread.join();
  }
  delete state;
}

void Watchdog::arm(double seconds, std::string message) {
  // 0 waits forever, and so does a timeout too long for the clock (a
  // duration of 1e10 s in nanoseconds overflows).
  if (!(seconds > 0) || !(seconds < 1e9))
    return disarm();
  std::lock_guard<std::mutex> lock(state->mutex);
  if (!state->thread.joinable())
    state->thread = std::thread([s = state] { s->run(); });
  auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(seconds));
  // An earlier deadline still armed stays (finishing after a failed start
  // is bounded by the start's deadline, not a fresh one).
  if (state->armed && state->deadline <= deadline)
    return;
  state->armed = true;
  state->deadline = deadline;
  state->message = std::move(message);
  state->changed.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(state->mutex);
  state->armed = false;
  state->changed.notify_all();
}

} // namespace stephost
