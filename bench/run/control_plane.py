#!/usr/bin/env python3
"""Control-plane benchmark of multi-node `anxin run` (docs/recovery.md,
"Scale"): a real 3-member etcd cluster on loopback, then
  - separate `anxin run` processes (one per node, a light job of one rank
    that prints a step every 0.2 s) at each of PROCESS_SIZES nodes: etcd
    calls per node per second while the job runs, and, after node 0's rank
    is killed, the time until every node has started its relaunch;
  - N coordinators in one process (run_control_plane_bench, the same coord
    code) at each of SIZES nodes, watching (anxin) and, at PEER_SIZES,
    polling every 50 ms (the peer: how supervisors worked before);
and prints a table. Every run checks that all nodes relaunched into the same
generation; a run that did not is an error, not a figure.

  bench/run/control_plane.py BUILD_DIR [--sizes 8,128,512,1024]
      [--peer-sizes 8,128] [--process-sizes 8,32] [--idle 10] [--ttl 5,15]
      [--json FILE]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    def __init__(self, workdir, members=3):
        self.procs = []
        self.client = [free_port() for _ in range(members)]
        peer = [free_port() for _ in range(members)]
        cluster = ",".join(f"m{i}=http://127.0.0.1:{peer[i]}" for i in range(members))
        for i in range(members):
            url = f"http://127.0.0.1:{self.client[i]}"
            self.procs.append(subprocess.Popen(
                ["etcd", "--name", f"m{i}", "--data-dir", f"{workdir}/etcd-{i}",
                 "--listen-client-urls", url, "--advertise-client-urls", url,
                 "--listen-peer-urls", f"http://127.0.0.1:{peer[i]}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer[i]}",
                 "--initial-cluster", cluster, "--initial-cluster-state", "new",
                 "--log-level", "error", "--quota-backend-bytes", str(4 << 30)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                for p in self.client:
                    urllib.request.urlopen(f"http://127.0.0.1:{p}/health", timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        raise SystemExit("error: etcd did not start")

    def endpoints(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.client)

    def started(self):
        """gRPC calls started per method, summed over the members."""
        out = {}
        for p in self.client:
            text = urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=5).read().decode()
            for m in re.finditer(r'^grpc_server_started_total\{[^}]*grpc_method="(\w+)"[^}]*\} (\S+)$',
                                 text, re.M):
                out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
        return out

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


JOB = r"""
import os, sys, time
gen = os.environ.get("ANXIN_RUN_ATTEMPT", "-1")
print(f"start gen {gen}", flush=True)
s = 0
while True:
    time.sleep(0.2)
    s += 1
    print(f"step {s} gen {gen}", flush=True)
"""

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+) .*attempt 1: started")


def log_time(text):
    import datetime
    for line in text.splitlines():
        m = STAMP.match(line)
        if m:
            return datetime.datetime.fromisoformat(m.group(1)).timestamp()
    return None


def processes(anxin, etcd, n, idle, workdir):
    job = f"proc-{os.getpid()}-{n}"
    script = os.path.join(workdir, "job.py")
    with open(script, "w") as f:
        f.write(JOB)
    nodes = []
    for i in range(n):
        log = open(os.path.join(workdir, f"{job}-{i}.log"), "w+")
        env = dict(os.environ, TZ="UTC")
        p = subprocess.Popen(
            [anxin, "run", "--nnodes", str(n), "--node-rank", str(i), "--rdzv-endpoint",
             etcd.endpoints(), "--rdzv-id", job, "--master-addr", "127.0.0.1",
             "--nproc-per-node", "1", "--state-dir", os.path.join(workdir, f"state-{job}-{i}"),
             "--stop-grace", "1s", "--rdzv-timeout", "60s", "--backend", "sim", "--no-prefix",
             "--log-dir", os.path.join(workdir, f"ranks-{job}-{i}"),
             "--", sys.executable, "-u", script],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        nodes.append((p, log))

    def rank_logs():
        out = []
        for i in range(n):
            try:
                with open(os.path.join(workdir, f"ranks-{job}-{i}", "rank-0.log")) as f:
                    out.append(f.read())
            except OSError:
                out.append("")
        return out

    try:
        deadline = time.time() + 300
        while not all("step 1 gen 0" in t for t in rank_logs()):
            if time.time() > deadline:
                raise SystemExit(f"error: {n} processes: not every node stepped in generation 0")
            time.sleep(0.5)
        time.sleep(2)
        c0 = etcd.started()
        t0 = time.time()
        time.sleep(idle)
        c1 = etcd.started()
        idle_s = time.time() - t0
        # The fault: node 0's rank is killed.
        out = subprocess.run(["pgrep", "-f", "-s", str(nodes[0][0].pid), "job.py"],
                             capture_output=True, text=True).stdout.split()
        ranks = [int(x) for x in out if int(x) != nodes[0][0].pid]
        if not ranks:
            raise SystemExit("error: node 0's rank not found")
        fault = time.time()
        for r in ranks:
            os.kill(r, signal.SIGKILL)
        deadline = time.time() + 120
        times = [None] * n
        while None in times:
            if time.time() > deadline:
                raise SystemExit(f"error: {n} processes: not every node relaunched")
            for i, (_, log) in enumerate(nodes):
                if times[i] is None:
                    log.flush()
                    with open(log.name) as f:
                        times[i] = log_time(f.read())
            time.sleep(0.2)
        c2 = etcd.started()
        renew = c1.get("LeaseKeepAlive", 0) - c0.get("LeaseKeepAlive", 0)
        total = sum(c1.values()) - sum(c0.values())
        gen_calls = sum(c2.values()) - sum(c1.values())
        rss = []
        for p, _ in nodes:
            with open(f"/proc/{p.pid}/status") as f:
                rss += [int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS:")]
        return {"nodes": n, "mode": "processes", "idle_s": idle_s,
                "idle": {"per_node_per_s": total / n / idle_s,
                         "other_per_node_per_s": (total - renew) / n / idle_s},
                "fault_to_all_relaunched_s": max(times) - fault,
                "generation": {"calls": gen_calls, "calls_per_node": gen_calls / n},
                "rss_mib_per_node": sum(rss) / len(rss)}
    finally:
        for p, log in nodes:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            log.close()


def in_process(binary, etcd, n, mode, idle, ttl):
    env = dict(os.environ, ANXIN_BENCH_CPU_PIDS=",".join(str(p.pid) for p in etcd.procs))
    r = subprocess.run([binary, etcd.endpoints(), str(n), mode, str(idle), str(ttl)], env=env,
                       capture_output=True, text=True, timeout=900)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"error: {n} nodes ({mode}) failed")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--sizes", default="8,128,512,1024")
    ap.add_argument("--peer-sizes", default="8,128")
    ap.add_argument("--process-sizes", default="8,32")
    ap.add_argument("--idle", type=float, default=10)
    ap.add_argument("--ttl", default="5",
                    help="the coordinators' lease TTLs in seconds, e.g. 5,15: each size "
                         "runs at each (anxin run's is 5 s)")
    ap.add_argument("--json", help="also write every row to this file")
    a = ap.parse_args()
    anxin = os.path.join(a.build, "anxin")
    binary = os.path.join(a.build, "bench", "run", "run_control_plane_bench")
    for f in (anxin, binary):
        if not os.access(f, os.X_OK):
            raise SystemExit(f"error: {f} not built")
    if shutil.which("etcd") is None:
        raise SystemExit("error: etcd is not installed (scripts/install-deps)")
    sizes = lambda s: [int(x) for x in s.split(",") if x]
    rows = []
    with tempfile.TemporaryDirectory(prefix="anxin-cp-") as work:
        etcd = Etcd(work)
        try:
            for n in sizes(a.process_sizes):
                rows.append(processes(anxin, etcd, n, a.idle, work))
                print(json.dumps(rows[-1]), file=sys.stderr)
            for n in sizes(a.sizes):
                for ttl in sizes(a.ttl):
                    rows.append(in_process(binary, etcd, n, "watch", a.idle, ttl))
                    print(json.dumps(rows[-1]), file=sys.stderr)
                if n in sizes(a.peer_sizes):
                    rows.append(in_process(binary, etcd, n, "poll", a.idle, sizes(a.ttl)[0]))
                    print(json.dumps(rows[-1]), file=sys.stderr)
        finally:
            etcd.stop()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("| nodes | how | etcd calls/s per node idle (besides renewals) | fault -> all relaunched "
          "| etcd calls per generation (per node) | RSS per node |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        how = {"processes": "anxin run processes", "watch": "coordinators in one process, watch",
               "poll": "coordinators in one process, 50 ms poll (peer)"}[r["mode"]]
        if r["mode"] != "processes" and r.get("lease_ttl_s", 5) != 5:
            how += f", lease TTL {r['lease_ttl_s']} s"
        print(f"| {r['nodes']} | {how} | {r['idle']['per_node_per_s']:.2f} "
              f"({r['idle']['other_per_node_per_s']:.2f}) | {r['fault_to_all_relaunched_s']:.2f} s "
              f"| {r['generation']['calls']:.0f} ({r['generation']['calls_per_node']:.1f}) "
              f"| {r['rss_mib_per_node']:.1f} MiB |")


if __name__ == "__main__":
    main()
