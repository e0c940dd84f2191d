#!/usr/bin/python3
"""Multi-node recovery benchmark (docs/recovery.md, "Many nodes"): N `anxin run`
processes on this machine, one gloo rank each, meeting in one etcd member on
loopback, the sample trainer crashing on the last node's rank at step 8. Side
by side, Debian's torchrun with its c10d rendezvous (`--rdzv-backend c10d`),
N agents, the same job and the same crash.

Figures per size, median of RUNS runs:
  anxin own     the fault (the t= the crashing rank printed) to the last node's
                relaunch started (stop, playbook, barrier, agreed checkpoint,
                launch): anxin's share, without the job's start-up
  crash->step   the fault to the moment every node printed a step again
for anxin relaunching every rank (--no-in-process), then crash->step for
anxin with in-process restart (the node whose rank crashed relaunches it,
the others rejoin in their processes) and with a warm spare per node
(--warm-spares 1: the spare takes the crashed rank's place).
Every run must exit 0 on every node, print every step to the end after
resuming, with the losses of the relaunch run at every step (the same
computation whatever the path), and (anxin) journal one recovered incident
of generation 1 on each node with the path it is meant to take; torchrun
must restart once.

  bench/run/cluster_bench.py ANXIN TRAIN_PY RUNS SIZE [SIZE...]
"""
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

STEPS, FAULT_STEP, CKPT_EVERY = 16, 8, 5
STEP_RE = re.compile(r"step (\d+) loss")
T_RE = re.compile(r"t=([0-9.]+)")
PY = "/usr/bin/python3"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


LIVE = []  # every child started, killed (with its group) when the benchmark ends


class Proc:
    """A child in its own session whose output lines are stamped on arrival."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, bufsize=1, start_new_session=True)
        LIVE.append(self.p)
        self.lines = []
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def wait(self, timeout):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            rc = None
        self.reader.join()
        return rc


def fault_time(procs):
    for p in procs:
        for _, l in p.lines:
            if "(--crash-at)" in l:
                return float(T_RE.search(l).group(1))
    return None


def first_step_after(lines, t0):
    """The relaunched job's first step line: after t0, with a step number that
    goes back (a step from before the fault may still arrive after it)."""
    highest = 0
    for t, l in lines:
        m = STEP_RE.search(l)
        if not m:
            continue
        s = int(m.group(1))
        if t > t0 and s <= highest:
            return t
        highest = max(highest, s)
    return None


def check_steps(name, lines, resumed):
    got = [int(m.group(1)) for _, l in lines if (m := STEP_RE.search(l))]
    want = list(range(1, FAULT_STEP)) + list(range(resumed + 1, STEPS + 1))
    # A step printed just before the crash reached this node may be there too.
    if [s for s in got if s < FAULT_STEP or s > resumed] != want and got != want:
        sys.exit("error: %s: steps %s, expected %s" % (name, got, want))


def job(ckpt, resume):
    return [PY, "-u", TRAIN, "--ckpt-dir", ckpt, "--resume", resume, "--steps", str(STEPS),
            "--ckpt-every", str(CKPT_EVERY), "--step-time", "0.05", "--crash-at", str(FAULT_STEP)]


def start_etcd(tmp):
    cport, pport = free_port(), free_port()
    c, p = "http://127.0.0.1:%d" % cport, "http://127.0.0.1:%d" % pport
    e = subprocess.Popen(["etcd", "--name", "b", "--data-dir", os.path.join(tmp, "etcd"),
                          "--listen-client-urls", c, "--advertise-client-urls", c,
                          "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                          "--initial-cluster", "b=" + p, "--log-level", "error"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", cport), 0.2).close()
            return e, "127.0.0.1:%d" % cport
        except OSError:
            time.sleep(0.1)
    sys.exit("error: etcd did not start")


LOSS_RE = re.compile(r"step (\d+) loss ([0-9.]+)")
MODES = {  # name: (flags, path of the crashed node, path of the others)
    "relaunch": (["--no-in-process"], "relaunch", "relaunch"),
    "in-process": ([], "relaunch", "in-process"),
    "warm spare": (["--warm-spares", "1"], "spare", "in-process"),
}


def losses(lines):
    """{step: loss} of node 0's rank, the last printed for each step; exits
    when a step printed twice (before the crash and after the resume) has
    two losses."""
    out = {}
    for _, l in lines:
        m = LOSS_RE.search(l)
        if m:
            step, loss = int(m.group(1)), m.group(2)
            if out.get(step, loss) != loss:
                sys.exit("error: step %d printed losses %s and %s" % (step, out[step], loss))
            out[step] = loss
    return out


def anxin_once(n, run_id, endpoint, tmp, mode="relaunch"):
    flags, crashed_path, other_path = MODES[mode]
    procs = []
    for r in range(n):
        ckpt = os.path.join(tmp, "ckpt-%d" % r)
        os.makedirs(ckpt, exist_ok=True)
        argv = [ANXIN, "run", "--nnodes", str(n), "--node-rank", str(r), "--rdzv-endpoint",
                endpoint, "--rdzv-id", run_id, "--master-addr", "127.0.0.1",
                "--nproc-per-node", "1", "--state-dir", os.path.join(tmp, "state-%d" % r),
                "--checkpoint-dir", ckpt, "--stop-grace", "1s", "--scenario", SCENARIO] + flags + [
                "--"]
        procs.append(Proc(argv + job(ckpt, "{checkpoint}") + ["--fault-rank", str(n - 1)]))
    rcs = [p.wait(300) for p in procs]
    for r, (rc, p) in enumerate(zip(rcs, procs)):
        if rc != 0:
            sys.exit("error: anxin node %d exited %s:\n%s" %
                     (r, rc, "\n".join(l for _, l in p.lines[-30:])))
        check_steps("anxin node %d" % r, p.lines, 5)
        incidents = os.listdir(os.path.join(tmp, "state-%d" % r, "incidents"))
        if len(incidents) != 1:
            sys.exit("error: anxin node %d journaled %d incidents" % (r, len(incidents)))
        with open(os.path.join(tmp, "state-%d" % r, "incidents", incidents[0])) as f:
            rec = json.load(f)
        want_path = crashed_path if r == n - 1 else other_path
        if rec["outcome"] != "recovered" or rec["cluster"]["generation"] != 1 or \
                rec["cluster"]["agreed_step"] != 5 or rec.get("recovery_path") != want_path:
            sys.exit("error: anxin %s node %d (expected path %s): %s" %
                     (mode, r, want_path, json.dumps(rec)[:600]))
    t0 = fault_time(procs)
    relaunched = [next(t for t, l in p.lines if "attempt 1: started" in l or "rejoin ok" in l)
                  for p in procs]
    stepped = [first_step_after(p.lines, t0) for p in procs]
    return max(relaunched) - t0, max(stepped) - t0, losses(procs[0].lines)


def torchrun_once(n, run_id, tmp):
    port = free_port()
    procs = []
    for r in range(n):
        ckpt = os.path.join(tmp, "tckpt-%d" % r)
        os.makedirs(ckpt, exist_ok=True)
        argv = [PY, "-m", "torch.distributed.run", "--nnodes", str(n), "--nproc_per_node", "1",
                "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % port, "--rdzv_id",
                run_id, "--max_restarts", "3",
                # Without them python3-torch 1.13's agent fails on its restart.
                "--redirects", "1", "--tee", "1"]
        procs.append(Proc(argv + job(ckpt, "auto")[2:] + ["--fault-rank", str(n - 1)]))
        if r == 0:
            time.sleep(0.5)  # the first agent hosts the c10d store on the endpoint's port
    rcs = [p.wait(300) for p in procs]
    for r, (rc, p) in enumerate(zip(rcs, procs)):
        if rc != 0:
            sys.exit("error: torchrun node %d exited %s:\n%s" %
                     (r, rc, "\n".join(l for _, l in p.lines[-30:])))
        check_steps("torchrun node %d" % r, p.lines, 5)
    t0 = fault_time(procs)
    return max(first_step_after(p.lines, t0) for p in procs) - t0, losses(procs[0].lines)


def main():
    global ANXIN, TRAIN, SCENARIO
    ANXIN, TRAIN, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sizes = [int(x) for x in sys.argv[4:]] or [2, 4, 8]
    SCENARIO = os.path.join(os.path.dirname(TRAIN), "..", "..", "tests", "fixtures", "run",
                            "fast-reset.yaml")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("error: stopped (SIGTERM)"))
    tmp_root = tempfile.mkdtemp(prefix="anxin-cluster-bench-")
    etcd, endpoint = start_etcd(tmp_root)
    try:
        print("== anxin run (etcd) vs torchrun (c10d): sample trainer, 1 gloo rank per node, "
              "%d steps, checkpoint every %d, crash at step %d on the last node, %d runs each "
              "(median)" % (STEPS, CKPT_EVERY, FAULT_STEP, runs))
        print("%5s %14s %18s %18s %8s %12s %12s" % (
            "nodes", "anxin own", "anxin crash->step", "torchrun crash->step", "ratio",
            "in-process", "warm spare"))
        for n in sizes:
            own, a_step, t_step, inproc, spare = [], [], [], [], []
            for i in range(runs):
                tmp = tempfile.mkdtemp(dir=tmp_root)
                o, s, ref = anxin_once(n, "bench-%d-%d" % (n, i), endpoint, tmp)
                own.append(o)
                a_step.append(s)
                t, got = torchrun_once(n, "bench-%d-%d" % (n, i), tmp)
                if got != ref:
                    sys.exit("error: torchrun: losses %s differ from anxin's %s" % (got, ref))
                t_step.append(t)
                for mode, into in (("in-process", inproc), ("warm spare", spare)):
                    sub = tempfile.mkdtemp(dir=tmp_root)
                    _, s2, got = anxin_once(n, "bench-%d-%d-%s" % (n, i, mode[:4]), endpoint,
                                            sub, mode)
                    if got != ref:
                        sys.exit("error: %s: losses %s differ from the relaunch's %s" %
                                 (mode, got, ref))
                    into.append(s2)
                    shutil.rmtree(sub, ignore_errors=True)
                shutil.rmtree(tmp, ignore_errors=True)
            ma, ms, mt, mi, mw = (statistics.median(x) for x in (own, a_step, t_step, inproc,
                                                                 spare))
            print("%5d %12.2f s %16.2f s %18.2f s %7.2fx %10.2f s %10.2f s   (own: %s; "
                  "in-process: %s; warm spare: %s)" %
                  (n, ma, ms, mt, mt / ms, mi, mw, " ".join("%.2f" % x for x in own),
                   " ".join("%.2f" % x for x in inproc), " ".join("%.2f" % x for x in spare)),
                  flush=True)
    finally:
        for p in LIVE:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        os.killpg(etcd.pid, signal.SIGKILL)
        etcd.wait()
        shutil.rmtree(tmp_root, ignore_errors=True)


if __name__ == "__main__":
    main()
