#!/usr/bin/env python3
"""Stops one rank of a running ddp-run job (SIGSTOP: it stays alive but
answers nothing) and checks that every other rank ends with a timeout error
within the timeout plus a margin, in repeated trials that stop the rank at
different moments (while MPI starts, while the step is compiled, between and
inside steps, in the host's per-step agreement). If mpirun itself is still
taking the stopped rank down then, a note says so with every process's
state; a rank other than the stopped one still running is a hang.

  stall.py DDP_RUN STEP.MLIR INPUT_DIR SCRATCH_DIR --timeout 2 --delays 0.3 1 2.5 ...

Prints one line per trial and exits 1 if any trial hung, exited 0, or gave
no timeout message. What is still running after timeout + margin is killed
(SIGCONT to the stopped rank, then SIGKILL to all).
"""

import argparse
import os
import signal
import subprocess
import sys
import time

TIMEOUT_MESSAGES = ("did not complete within", "did not answer within",
                    "did not start within")


def children(pid):
    """The pids whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(item.split(b"=", 1)[1])
    except OSError:
        pass
    return None


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def describe(pid, victim):
    """pid, command, state, kernel wait channel and rank of a process."""
    def read(name):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                return f.read()
        except OSError:
            return ""
    stat = read("stat")
    state = stat.rsplit(")", 1)[1].split()[0] if ")" in stat else "?"
    comm = read("comm").strip()
    rank = rank_of(pid)
    return "%d %s state %s wchan %s%s%s" % (
        pid, comm, state, read("wchan").strip() or "-",
        "" if rank is None else " rank %d" % rank,
        " (the stopped one)" if pid == victim else "")


def find_rank(job, rank, deadline):
    root = job.pid
    while time.monotonic() < deadline and job.poll() is None:
        for pid in descendants(root):
            if rank_of(pid) == rank:
                return pid
        time.sleep(0.02)
    return None


def trial(args, delay):
    d = args.inputs
    command = [args.ddp_run, f"--np={args.np}", f"--timeout={args.timeout}",
               args.step, f"--steps={10**8}", "--quiet"]
    # Reading the inputs every step makes the host's own work (and its
    # per-step agreement) a larger part of each step, where the stop then
    # lands. (Results are not written: every step's would need a file of
    # its own, and a stall trial runs thousands of steps.)
    command += [f"--input={d}/in.r{{rank}}.s0.a{i}.npy" for i in range(3)]
    job = subprocess.Popen(command, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    launched = time.monotonic()
    victim = find_rank(job, args.victim, launched + 30)
    if victim is None:
        job.kill()
        output, _ = job.communicate()
        return False, "rank %d never appeared (exit %s):\n%s" % (
            args.victim, job.returncode, output)
    time.sleep(max(0.0, launched + delay - time.monotonic()))
    # A job that already ended (a timeout of its own on a loaded machine)
    # was not stopped by us: it says nothing about the stop.
    alive = job.poll() is None
    try:
        os.kill(victim, signal.SIGSTOP)
    except ProcessLookupError:
        alive = False
    stopped = time.monotonic()
    limit = args.timeout + args.margin
    cleanup = False
    try:
        output, _ = job.communicate(timeout=limit)
        hung = False
    except subprocess.TimeoutExpired:
        # What every process of the job was doing, for the report.
        states = [describe(pid, victim) for pid in descendants(job.pid)]
        # The requirement is on the ranks: every one but the stopped rank
        # has ended. mpirun may still be taking down the stopped rank (Open
        # MPI's own cleanup of a process stopped inside MPI's start-up).
        others = [pid for pid in descendants(job.pid)
                  if pid != victim and rank_of(pid) is not None]
        hung = bool(others)
        cleanup = not hung
        for pid in [victim] + descendants(job.pid):
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        job.kill()
        output, _ = job.communicate()
    took = time.monotonic() - stopped
    if cleanup:
        print("note: every other rank ended, but mpirun was still running "
              "%.1f s after the stop; its processes then:\n  %s" % (
                  took, "\n  ".join(states)))
    if hung:
        return False, ("hung: still running %.1f s after the stop; the job's "
                       "processes then:\n  %s\nits output:\n%s" % (
                           took, "\n  ".join(states), output))
    if job.returncode == 0:
        return False, "exit status 0 after %.1f s" % took
    lines = [l for l in output.splitlines()
             if any(m in l for m in TIMEOUT_MESSAGES)]
    if not lines:
        return False, "no timeout message (exit %d):\n%s" % (job.returncode,
                                                              output)
    if not alive:
        return True, "not exercised (the job ended before the stop): %s" % lines[0]
    return True, "ended after %.1f s: %s" % (took, lines[0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ddp_run")
    parser.add_argument("step")
    parser.add_argument("inputs")
    parser.add_argument("--np", type=int, default=3)
    parser.add_argument("--victim", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--margin", type=float, default=8.0)
    parser.add_argument("--delays", type=float, nargs="+", required=True)
    args = parser.parse_args()
    failed = exercised = 0
    for delay in args.delays:
        ok, what = trial(args, delay)
        failed += not ok
        exercised += ok and not what.startswith("not exercised")
        print("%s stop at %.2f s: %s" % ("ok" if ok else "FAIL", delay, what))
        sys.stdout.flush()
    print("%d of %d trials ended within the timeout" %
          (len(args.delays) - failed, len(args.delays)))
    # At least half must have stopped a running job, or the test tested
    # nothing (raise --timeout on a slower machine).
    if 2 * exercised < len(args.delays):
        print("FAIL: only %d trials stopped a running job" % exercised)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
