#!/usr/bin/env python3
"""The recovery benchmark behind bench/run/run (see there for what it measures).

    recovery_bench.py ANXIN TRAIN_PY RUNS HANG_TIMEOUT HANG_WAIT

Every run must end with the job done (exit 0, every step up to the last, in
order after the resume) and, for anxin, one recovered incident of the
expected fault class; otherwise the benchmark stops with an error.

The first table is `anxin run` relaunching every rank (--no-in-process, the
recovery before in-process restart); the second compares, on a crash and on
an error line (a peer fault: the rank that printed it still runs), fault ->
next step for torchrun, that relaunch, in-process restart (anxin_sdk.run,
the default) and in-process restart with a warm spare (--warm-spares 1).
Each of those runs must journal the recovery path it is meant to take and
print, at every step, the loss an unfaulted run prints there.
"""
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ANXIN, TRAIN, RUNS, HANG_TIMEOUT, HANG_WAIT = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                               sys.argv[4], float(sys.argv[5]))
STEPS, CKPT_EVERY, FAULT_STEP = 16, 5, 8
DEVICE_FAULT_AT = 8.0  # seconds after the sim backend starts; the job runs by then
SCENARIO = ("name: bench\ndevices:\n  count: 2\n  model: Ascend910C\n  ports: 1\n"
            "  reset: {duration: 0s}\n")
STEP_RE = re.compile(r"\bstep (\d+) loss ")
T_RE = re.compile(r"t=([0-9.]+)")

FAULTS = {  # name: (job flags, fault class anxin must report)
    "crash": (["--crash-at", str(FAULT_STEP)], "process_exit"),
    "hang": (["--hang-at", str(FAULT_STEP)], "hang"),
    "error line": (["--hccl-error-at", str(FAULT_STEP)], "network"),
    "device fault": ([], "device_lost"),
}


def run(argv, timeout, stop_after=None):
    """Runs argv in its own session; returns (exit code or None when stopped,
    [(arrival time, line)]). stop_after(lines) -> True stops it early."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         bufsize=1, start_new_session=True)
    lines = []

    def read():
        for line in p.stdout:
            lines.append((time.time(), line.rstrip("\n")))

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.time() + timeout
    stopped = False
    while p.poll() is None:
        if time.time() > deadline or (stop_after and stop_after(lines)):
            os.killpg(p.pid, signal.SIGKILL)
            stopped = True
            break
        time.sleep(0.05)
    p.wait()
    reader.join()
    if stopped and time.time() > deadline and not stop_after:
        sys.exit("error: %s ran past %d s" % (argv[0], timeout))
    return (None if stopped else p.returncode), lines


def steps_of(lines):
    return [(t, int(m.group(1))) for t, l in lines if (m := STEP_RE.search(l))]


def check_job(name, rc, lines, resumed_from):
    """The job ran every step: 1 .. fault step - 1, then resumed_from + 1 .. STEPS."""
    if rc != 0:
        sys.exit("error: %s exited %s:\n%s" % (name, rc, "\n".join(l for _, l in lines[-30:])))
    got = [s for _, s in steps_of(lines)]
    want = list(range(1, FAULT_STEP)) + list(range(resumed_from + 1, STEPS + 1))
    if got[:len(want)] != want and got != want:
        sys.exit("error: %s: steps %s, expected %s" % (name, got, want))


def injected_at(lines):
    for t, l in lines:
        if "(--crash-at)" in l or "(--hang-at)" in l or "(--hccl-error-at)" in l:
            return float(T_RE.search(l).group(1)), t
    return None, None


def parse_time(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def first_step_after(lines, t0):
    """When the relaunched job printed its first step: the first step line
    after t0 whose number goes back (a step from before the fault may still
    arrive after it)."""
    highest = 0
    for t, s in steps_of(lines):
        if t > t0 and s <= highest:
            return t
        highest = max(highest, s)
    return None


def anxin_once(kind, tmp):
    flags, want_class = FAULTS[kind]
    ckpt, state = os.path.join(tmp, "ckpt"), os.path.join(tmp, "state")
    scen = os.path.join(tmp, "scenario.yaml")
    steps = STEPS
    extra = []
    text = SCENARIO
    if kind == "device fault":
        text += "events:\n  - {at: %gs, device: 1, kind: device_lost}\n" % DEVICE_FAULT_AT
        steps = 250  # still running when the device goes
    with open(scen, "w") as f:
        f.write(text)
    argv = [ANXIN, "run", "--nproc-per-node", "2", "--state-dir", state, "--checkpoint-dir",
            ckpt, "--scenario", scen, "--stop-grace", "1s", "--hang-timeout", HANG_TIMEOUT,
            "--no-in-process", "--", sys.executable, "-u", TRAIN, "--ckpt-dir", ckpt, "--resume", "{checkpoint}",
            "--steps", str(steps), "--ckpt-every", str(CKPT_EVERY)] + flags + extra
    rc, lines = run(argv, 300)
    incidents = json.loads(subprocess.run([ANXIN, "incidents", "--state-dir", state, "--json"],
                                          check=True, capture_output=True, text=True).stdout)
    if len(incidents) != 1 or incidents[0]["outcome"] != "recovered" or \
            incidents[0]["fault"]["class"] != want_class:
        sys.exit("error: %s: expected one recovered %s incident, got %s" %
                 (kind, want_class, json.dumps(incidents)[:2000]))
    inc = incidents[0]
    seen = parse_time(inc["fault"]["time"])
    resumed = int(re.search(r"iter_(\d+)", inc["checkpoint"]).group(1)) if inc["checkpoint"] \
        else 0
    if kind == "device fault":
        got = [s for _, s in steps_of(lines)]
        if rc != 0 or got[-1] != steps:
            sys.exit("error: device fault run: exit %s, last step %s" % (rc, got[-1:]))
        detection = inc["detection_seconds"]
        fault_t = seen - detection
    else:
        check_job("anxin run (%s)" % kind, rc, lines, resumed)
        fault_t, _ = injected_at(lines)
        detection = seen - fault_t
    relaunch = [s for s in inc["steps"] if s["name"] == "relaunch"][0]
    own = parse_time(relaunch["end"]) - seen
    nxt = first_step_after(lines, fault_t)
    return detection, own, (nxt - fault_t) if nxt else None, inc["time_to_recovery_seconds"]


def torchrun_crash_once(tmp):
    ckpt = os.path.join(tmp, "ckpt")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
            "2", "--max_restarts", "3", "--redirects", "1", "--tee", "1", TRAIN, "--ckpt-dir",
            ckpt, "--resume", "auto", "--steps", str(STEPS), "--ckpt-every", str(CKPT_EVERY),
            "--crash-at", str(FAULT_STEP)]
    rc, lines = run(argv, 300)
    resumed = (FAULT_STEP - 1) // CKPT_EVERY * CKPT_EVERY
    check_job("torchrun (crash)", rc, lines, resumed)
    fault_t, _ = injected_at(lines)
    TORCHRUN_LOSSES.append([(int(m.group(1)), m.group(2)) for _, l in lines
                            if (m := TORCHRUN_LOSS_RE.search(l))])
    return first_step_after(lines, fault_t) - fault_t


def torchrun_hang(tmp):
    ckpt = os.path.join(tmp, "ckpt")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
            "2", "--max_restarts", "3", "--redirects", "1", "--tee", "1", TRAIN, "--ckpt-dir",
            ckpt, "--resume", "auto", "--steps", str(STEPS), "--ckpt-every", str(CKPT_EVERY),
            "--hang-at", str(FAULT_STEP)]

    def waited(lines):
        t, _ = injected_at(lines)
        return t is not None and time.time() - t >= HANG_WAIT

    rc, lines = run(argv, 120 + HANG_WAIT, stop_after=waited)
    t, _ = injected_at(lines)
    if t is None:
        sys.exit("error: torchrun (hang): the hang was never injected")
    after = [l for tt, l in lines if tt > t + 0.5]
    restarted = any("Restarting" in l or "restart" in l.lower() for l in after)
    # Steps before the hang may still be arriving; a step at or past it is progress.
    new_steps = [s for tt, s in steps_of(lines) if tt > t and s >= FAULT_STEP]
    return rc, restarted, new_steps


def median(xs):
    return statistics.median(xs)


LOSS_RE = re.compile(r"\[rank 0\] step (\d+) loss ([0-9.]+)")
TORCHRUN_LOSS_RE = re.compile(r"\[default0\]:step (\d+) loss ([0-9.]+)")
TORCHRUN_LOSSES = []  # [(step, loss)] of each torchrun crash run's rank 0


def losses_of(lines):
    out = []
    for _, l in lines:
        m = LOSS_RE.search(l)
        if m:
            out.append((int(m.group(1)), m.group(2)))
    return out


def check_losses(name, got, reference):
    """Every loss printed (before the fault, and again after the resume) is
    the unfaulted run's at that step."""
    if not got:
        sys.exit("error: %s: no loss printed" % name)
    for step, loss in got:
        if reference.get(step) != loss:
            sys.exit("error: %s: step %d loss %s, the unfaulted run's is %s" %
                     (name, step, loss, reference.get(step)))


def unfaulted_losses():
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "ckpt")
        argv = [ANXIN, "run", "--nproc-per-node", "2", "--state-dir", os.path.join(tmp, "s"),
                "--checkpoint-dir", ckpt, "--", sys.executable, "-u", TRAIN, "--ckpt-dir", ckpt,
                "--resume", "{checkpoint}", "--steps", str(STEPS), "--ckpt-every",
                str(CKPT_EVERY)]
        rc, lines = run(argv, 300)
    got = dict(losses_of(lines))
    if rc != 0 or sorted(got) != list(range(1, STEPS + 1)):
        sys.exit("error: the unfaulted run: exit %s, steps %s" % (rc, sorted(got)))
    return got


# mode: (anxin run flags, the recovery path the journal must name per fault)
MODES = {
    "relaunch": (["--no-in-process"], {"crash": "relaunch", "error line": "relaunch"}),
    "in-process": ([], {"crash": "relaunch", "error line": "in-process"}),
    "warm spare": (["--warm-spares", "1"], {"crash": "spare", "error line": "in-process"}),
}


def path_once(mode, kind, tmp, reference):
    """fault -> next step of one anxin run in `mode`, its losses checked."""
    flags, paths = MODES[mode]
    job, want_class = FAULTS[kind]
    ckpt, state = os.path.join(tmp, "ckpt"), os.path.join(tmp, "state")
    scen = os.path.join(tmp, "scenario.yaml")
    with open(scen, "w") as f:
        f.write(SCENARIO)
    argv = [ANXIN, "run", "--nproc-per-node", "2", "--state-dir", state, "--checkpoint-dir",
            ckpt, "--scenario", scen, "--stop-grace", "1s"] + flags + [
            "--", sys.executable, "-u", TRAIN, "--ckpt-dir", ckpt, "--resume", "{checkpoint}",
            "--steps", str(STEPS), "--ckpt-every", str(CKPT_EVERY)] + job
    rc, lines = run(argv, 300)
    incidents = json.loads(subprocess.run([ANXIN, "incidents", "--state-dir", state, "--json"],
                                          check=True, capture_output=True, text=True).stdout)
    name = "anxin run %s (%s)" % (mode, kind)
    if len(incidents) != 1 or incidents[0]["outcome"] != "recovered" or \
            incidents[0]["fault"]["class"] != want_class or \
            incidents[0].get("recovery_path") != paths[kind]:
        sys.exit("error: %s: expected one %s incident recovered by %s, got %s" %
                 (name, want_class, paths[kind], json.dumps(incidents)[:2000]))
    resumed = int(re.search(r"iter_(\d+)", incidents[0]["checkpoint"]).group(1))
    check_job(name, rc, lines, resumed)
    check_losses(name, losses_of(lines), reference)
    fault_t, _ = injected_at(lines)
    return first_step_after(lines, fault_t) - fault_t


def compare_paths(torchrun_crash):
    reference = unfaulted_losses()
    for got in TORCHRUN_LOSSES:  # the peer computed the same
        check_losses("torchrun (crash)", got, reference)
    print()
    print("== fault -> next step by recovery path (%d runs each, median; every loss equal to an "
          "unfaulted run's)" % RUNS)
    print("%-11s %12s %12s %12s %12s" % ("fault", "torchrun", "relaunch", "in-process",
                                          "warm spare"))
    result = {}
    for kind in ("crash", "error line"):
        row = {}
        for mode in MODES:
            got = []
            for i in range(RUNS):
                with tempfile.TemporaryDirectory() as tmp:
                    got.append(path_once(mode, kind, tmp, reference))
            row[mode] = got
        result[kind] = row
        tr = "%10.3f s" % median(torchrun_crash) if kind == "crash" else "%12s" % "not seen"
        print("%-11s %s %10.3f s %10.3f s %10.3f s   (runs: %s)" % (
            kind, tr, median(row["relaunch"]), median(row["in-process"]),
            median(row["warm spare"]),
            "; ".join("%s %s" % (m, " ".join("%.2f" % x for x in row[m])) for m in MODES)))
    crash, peer = result["crash"], result["error line"]
    print("warm spare, crash:        %.3f s, %.1fx faster than torchrun" % (
        median(crash["warm spare"]), median(torchrun_crash) / median(crash["warm spare"])))
    print("in-process, peer fault:   %.3f s, %.1fx faster than torchrun's crash recovery" % (
        median(peer["in-process"]), median(torchrun_crash) / median(peer["in-process"])))


def main():
    print("== anxin run (relaunching every rank) vs torchrun: sample trainer, 2 gloo ranks, %d "
          "steps, checkpoint every %d, fault at step %d, %d runs each (median)" %
          (STEPS, CKPT_EVERY, FAULT_STEP, RUNS), flush=True)
    rows = []
    for kind in FAULTS:
        got = []
        for i in range(RUNS):
            with tempfile.TemporaryDirectory() as tmp:
                got.append(anxin_once(kind, tmp))
        det = median([g[0] for g in got])
        own = median([g[1] for g in got])
        nxt = [g[2] for g in got if g[2] is not None]
        ttr = median([g[3] for g in got])
        rows.append((kind, det, own, median(nxt) if nxt else None, ttr, got))
    print("%-13s %12s %14s %16s %18s" % ("fault", "detected in", "anxin's own", "fault->next step",
                                           "fault->progress"))
    for kind, det, own, nxt, ttr, got in rows:
        print("%-13s %10.3f s %12.3f s %14s %16.3f s   (own: %s)" % (
            kind, det, own, "%.3f s" % nxt if nxt is not None else "-", ttr,
            " ".join("%.2f" % g[1] for g in got)))
    tr = []
    for i in range(RUNS):
        with tempfile.TemporaryDirectory() as tmp:
            tr.append(torchrun_crash_once(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        rc, restarted, new_steps = torchrun_hang(tmp)
    crash_anxin = rows[0][3]
    print("torchrun      crash -> next step %.3f s (runs: %s)" % (
        median(tr), " ".join("%.2f" % x for x in tr)))
    print("anxin run     crash -> next step %.3f s: %.2fx torchrun's time" % (
        crash_anxin, crash_anxin / median(tr)))
    if rc is None and not restarted and not new_steps:
        print("torchrun      hang: not detected within %g s (no restart, no step; stopped by "
              "the benchmark)" % HANG_WAIT)
    else:
        print("torchrun      hang: exit %s, restart seen %s, steps after it %s" % (
            rc, restarted, new_steps[:5]), flush=True)
    compare_paths(tr)


if __name__ == "__main__":
    main()
