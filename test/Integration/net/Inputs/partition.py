#!/usr/bin/env python3
"""A job across two hosts (network namespaces, bench/net/hosts.sh) whose
network fails under it, as a node's does on a cluster:

- a link taken down mid-run (on the launcher's host or the other one, at
  different moments): every rank and the launcher end with a timeout error
  within the timeout plus a few seconds, and nothing of the job is left in
  either host; the checkpoint the run started from is intact, and the run
  resumes from it once the link is back, bitwise as the run that never
  stopped;
- a slow link (10 Mb/s) under a timeout that fits it: no false failure.

  partition.py HOSTS_SH DDP_RUN DDP_OPT STEPS_PY SCRATCH

Prints one line per check, for FileCheck; exits 1 if any check failed.
"""

import hashlib
import json
import os
import subprocess
import sys
import time

TIMEOUT = 3
# The launcher's deadline after a rank ended the job (5 s), its SIGTERM to
# SIGKILL (3 s), and a loaded machine's share.
MARGIN = 12


def main():
    hosts_sh, ddp_run, ddp_opt, steps_py, scratch = sys.argv[1:6]
    os.makedirs(scratch, exist_ok=True)
    hosts = os.path.join(scratch, "hosts")
    data = os.path.join(scratch, "d")
    python = sys.executable
    subprocess.run([python, steps_py, "gen", data, "--ranks", "2", "--steps",
                    "6"], check=True)
    step = os.path.join(scratch, "ps.mlir")
    subprocess.run([ddp_opt, "--insert-powersgd=rank=2 start-iter=1",
                    os.path.join(data, "step.mlir"), "-o", step], check=True)
    subprocess.run(["bash", hosts_sh, "up", hosts, "2", "1gbit"], check=True)
    failures = 0

    def say(ok, text):
        nonlocal failures
        failures += not ok
        print(("ok " if ok else "FAIL ") + text)
        sys.stdout.flush()

    with open(os.path.join(hosts, "mpi.env")) as f:
        mpi_env = dict(line.strip().split("=", 1) for line in f if "=" in line)
    env = dict(os.environ, **mpi_env)

    def inputs(modulo):
        return [f"--input={data}/in.r{{rank}}.s{{step%{modulo}}}.a{i}.npy"
                for i in range(3)]

    def ddp(args, **kwargs):
        """ddp-run --np=2 across the hosts, launched in host 0."""
        command = ["bash", hosts_sh, "exec", hosts, "0", ddp_run, "--np=2",
                   "--hostfile=" + os.path.join(hosts, "hostfile"),
                   f"--timeout={TIMEOUT}", step, "--quiet"] + args
        return subprocess.Popen(command, env=env, cwd=scratch,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, **kwargs)

    def finish(job, what):
        output, _ = job.communicate(timeout=120)
        if job.returncode != 0:
            say(False, "%s: exit %d:\n%s" % (what, job.returncode, output))
        return output

    def digest(pattern):
        h = hashlib.sha256()
        for rank in range(2):
            with open(pattern.format(rank=rank), "rb") as f:
                h.update(f.read())
        return h.hexdigest()

    def leftovers():
        """The processes still in the hosts' namespaces."""
        found = []
        with open(os.path.join(hosts, "netns")) as f:
            for ns in f.read().split():
                pids = subprocess.run(["ip", "netns", "pids", ns],
                                      capture_output=True, text=True).stdout
                found += pids.split()
        return found

    try:
        # The run that never stops, and its first half with a checkpoint.
        finish(ddp(["--steps=6"] + inputs(6) + [
            "--output=full/r{rank}.s{step}.o{result}.npy"]), "the full run")
        finish(ddp(["--steps=3"] + inputs(6) + [
            "--output=split/r{rank}.s{step}.o{result}.npy",
            "--checkpoint-save=ckpt.r{rank}.bin"]), "the first half")
        checkpoint = os.path.join(scratch, "ckpt.r{rank}.bin")
        before = digest(checkpoint)
        say(True, "2 hosts at 1 Gb/s: the first half saved its checkpoint")

        # The link fails under a running job: which host, and when.
        for host, delay in ((1, 1.5), (0, 1.5), (1, 3.0)):
            job = ddp(["--steps=100000000", "--first-step=3",
                       "--checkpoint-load=ckpt.r{rank}.bin",
                       "--checkpoint-save=lost.r{rank}.bin"] + inputs(6))
            time.sleep(delay)
            running = job.poll() is None
            subprocess.run(["bash", hosts_sh, "link", hosts, str(host),
                            "down"], check=True)
            cut = time.monotonic()
            try:
                output, _ = job.communicate(timeout=TIMEOUT + 60)
                took = time.monotonic() - cut
            except subprocess.TimeoutExpired:
                job.kill()
                output, _ = job.communicate()
                took = None
            time.sleep(0.5)
            left = leftovers()
            subprocess.run(["bash", hosts_sh, "link", hosts, str(host), "up"],
                           check=True)
            what = "host %d's link down %.1f s in" % (host, delay)
            if not running:
                say(False, "%s: the job had ended before:\n%s" % (what, output))
                continue
            if took is None:
                say(False, "%s: the launcher hung:\n%s" % (what, output))
                continue
            # While MPI starts, in a collective, or in the ranks' agreement.
            timeouts = [l for l in output.splitlines()
                        if any(m in l for m in ("did not start within",
                                                "did not complete within",
                                                "did not answer within"))]
            ok = job.returncode != 0 and timeouts and took < TIMEOUT + MARGIN
            say(ok, "%s: ended with a timeout error %.1f s after the cut "
                "(the timeout + %d s at most)" % (what, took, MARGIN) if ok
                else "%s: exit %d after %.1f s:\n%s" % (
                    what, job.returncode, took, output))
            say(not left, "%s: nothing left in either host" % what
                if not left else "%s: processes left: %s" % (what, left))
            say(digest(checkpoint) == before and not any(
                os.path.exists(os.path.join(scratch, "lost.r%d.bin" % r))
                for r in range(2)),
                "%s: the checkpoint is intact, nothing half-written" % what)

        # Resumed once the link is back: bitwise the run that never stopped.
        finish(ddp(["--steps=3", "--first-step=3",
                    "--checkpoint-load=ckpt.r{rank}.bin"] + inputs(6) + [
                        "--output=split/r{rank}.s{step}.o{result}.npy"]),
               "the resumed run")
        same = subprocess.run(
            [python, steps_py, "same",
             os.path.join(scratch, "full/r{rank}.s{step}.o{result}.npy"),
             os.path.join(scratch, "split/r{rank}.s{step}.o{result}.npy"),
             "--ranks", "2", "--steps", "6", "--results", "3"],
            capture_output=True, text=True)
        say(same.returncode == 0,
            "resumed after the link came back: " +
            (same.stdout.strip() or same.stderr.strip()))

        # A slow link and a timeout that fits it: no false failure. A
        # gradient of 640 Ki floats (2.5 MiB) takes about 2 s per step at
        # 10 Mb/s.
        big = os.path.join(scratch, "big.mlir")
        with open(big, "w") as f:
            f.write('func.func @step(%g: tensor<655360xf32> loc("g")) -> '
                    'tensor<655360xf32> {\n'
                    '  %r = ddp.allreduce mean %g : tensor<655360xf32>\n'
                    '  return %r : tensor<655360xf32>\n}\n')
        subprocess.run([python, "-c",
                        "import numpy as np; np.save('%s/big.npy', "
                        "np.ones(655360, np.float32))" % scratch], check=True)
        for host in (0, 1):
            subprocess.run(["bash", hosts_sh, "rate", hosts, str(host),
                            "10mbit"], check=True)
        for trial in range(2):
            command = ["bash", hosts_sh, "exec", hosts, "0", ddp_run,
                       "--np=2", "--hostfile=" + os.path.join(hosts,
                                                             "hostfile"),
                       "--timeout=20", big, "--quiet", "--steps=3",
                       "--input=big.npy", "--summary-json=slow.json"]
            job = subprocess.Popen(command, env=env, cwd=scratch,
                                   stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
            output = finish(job, "10 Mb/s, trial %d" % trial)
            if job.returncode != 0:
                continue
            with open(os.path.join(scratch, "slow.json")) as f:
                ms = json.load(f)["ms_per_step"]
            # Each rank sends the whole gradient once per allreduce of two:
            # 2.5 MiB at 10 Mb/s is 2.1 s. Only a lower bound is checked (a
            # loaded machine is slower, never faster).
            say(ms > 1000, "10 Mb/s, trial %d: 3 steps, no false failure; "
                "%.0f ms per step: the link set the pace" % (trial, ms)
                if ms > 1000 else
                "10 Mb/s, trial %d: %.0f ms per step: the link was not "
                "limited" % (trial, ms))
    finally:
        subprocess.run(["bash", hosts_sh, "down", hosts])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
