#!/usr/bin/env python3
"""Checks how `ddp-run --np` supervises its job, with an `mpirun` of our own
first on PATH that misbehaves as a real one can (losing a rank's last
output while it tears a job down, not ending after a rank failed, leaving a
process behind, being the target of a signal). Each scenario prints one
line that says what happened; the launcher's output follows, indented.

  supervise.py DDP_RUN STEP.MLIR INPUT_DIR SCRATCH_DIR
"""

import os
import signal
import subprocess
import sys
import time

# The fake mpirun: the ranks of a real job on this machine inherit mpirun's
# environment, so the report directory is where they would write.
FAKE = r"""#!/bin/sh
dir="$DDPRT_HOST_ERROR_DIR"
[ -d "$dir" ] || { echo "fake mpirun: no report directory" >&2; exit 2; }
case "$FAKE_MODE" in
lost)    # A rank reported its error; mpirun lost the line and exits 1.
         echo "ddp-run: rank 1: error: the message mpirun lost" > "$dir/error.101"
         exit 1 ;;
said)    # The line came through and is in the report: said once.
         echo "ddp-run: rank 0: error: the message that came through" > "$dir/error.100"
         echo "ddp-run: rank 0: error: the message that came through" >&2
         echo "some other output"
         exit 1 ;;
success) # A report, but the job succeeded: nothing repeated.
         echo "ddp-run: rank 0: error: reported, then recovered" > "$dir/error.100"
         exit 0 ;;
stuck*)  # A rank failed (and, for stuck-ending, said it is ending the job),
         # and mpirun neither ends nor heeds SIGTERM; a process it started
         # (ignoring SIGTERM too) outlives it.
         trap '' TERM
         sleep 300 &
         echo $! > "$FAKE_SCRATCH/$FAKE_MODE.pid"
         echo "ddp-run: rank 1: error: a collective did not complete" > "$dir/error.101"
         [ "$FAKE_MODE" = stuck-ending ] && : > "$dir/ending.101"
         while :; do sleep 1; done ;;
signal)  # Waits; a SIGTERM passed on by the launcher ends it.
         trap 'echo "fake mpirun: got SIGTERM" > "$FAKE_SCRATCH/signal.out"; exit 143' TERM
         echo ready > "$FAKE_SCRATCH/ready"
         while :; do sleep 0.1; done ;;
esac
"""


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main():
    ddp_run, step, inputs, scratch = sys.argv[1:5]
    os.makedirs(scratch, exist_ok=True)
    bindir = os.path.join(scratch, "bin")
    os.makedirs(bindir, exist_ok=True)
    fake = os.path.join(bindir, "mpirun")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, 0o755)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"],
               FAKE_SCRATCH=scratch, TMPDIR=scratch)
    command = [ddp_run, "--np=2", "--timeout=1", step, "--steps=1",
               "--quiet"] + [f"--input={inputs}/in.r{{rank}}.s0.a{i}.npy"
                             for i in range(3)]

    def run(mode, merged=True):
        start = time.monotonic()
        job = subprocess.Popen(
            command, env=dict(env, FAKE_MODE=mode), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merged else subprocess.PIPE,
            text=True)
        return job, start

    def report(mode, job, start, output, errors=None):
        took = time.monotonic() - start
        # Coarse, for a loaded machine: "under 5 s" did not wait for a
        # deadline of the launcher (5 s after a rank ended the job; the
        # timeout, 1 s, + 10 s after an error: its message says which);
        # "under 30 s" waited for one and then stopped mpirun promptly.
        print("%s: exit %d after %s" % (
            mode, job.returncode, "under 5 s" if took < 5 else
            "under 30 s" if took < 30 else "%d s" % round(took)))
        for line in output.splitlines():
            print("  | " + line)
        for line in (errors or "").splitlines():
            print("  stderr | " + line)
        # The report directory is gone with the job.
        left = [n for n in os.listdir(scratch) if n.startswith("ddprt-job.")]
        if left:
            print("%s: report directory left behind: %s" % (mode, left))

    for mode in ("lost", "said", "success", "stuck", "stuck-ending"):
        job, start = run(mode)
        output, _ = job.communicate(timeout=60)
        report(mode, job, start, output)
    # stdout and stderr apart stay apart.
    job, start = run("said", merged=False)
    output, errors = job.communicate(timeout=60)
    report("said apart", job, start, output, errors)

    # What the stuck mpiruns started is gone.
    for mode in ("stuck", "stuck-ending"):
        with open(os.path.join(scratch, mode + ".pid")) as f:
            left = int(f.read())
        print("%s: the process it left behind is %s" %
              (mode, "still running" if alive(left) else "gone"))
        if alive(left):
            os.kill(left, signal.SIGKILL)

    # A SIGTERM sent to the launcher alone reaches mpirun.
    job, start = run("signal")
    ready = os.path.join(scratch, "ready")
    deadline = time.monotonic() + 30
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    output, _ = job.communicate(timeout=60)
    report("signal", job, start, output)
    path = os.path.join(scratch, "signal.out")
    print(open(path).read().strip() if os.path.exists(path) else
          "fake mpirun: no signal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
