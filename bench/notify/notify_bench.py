#!/usr/bin/python3
"""Load generator and checks for bench/notify/run.

  notify_bench.py anxin --anxin BUILD/anxin --alerts 20000 --per-request 1 [--strace]
      Starts `anxin notify` with its spool on disk and one webhook receiver
      that is down (so every accepted alert stays in the spool), posts
      Alertmanager version-4 payloads of unique alerts from --connections
      keep-alive connections, each request waiting for its answer, then stops
      notify and opens the spool with sqlite3: every alert answered 200 must
      be there, and nothing else. With --strace, notify runs under
      `strace -f -c` counting fsync and fdatasync calls. Prints one JSON line.

  notify_bench.py alertmanager --alerts 5000
      Starts Debian's prometheus-alertmanager with one group per alert and a
      webhook receiver that is a local sink in this process, posts the alerts
      to its API, and times how long until the sink got every one of them.
      Prints one JSON line.

Exit status 1 when any request failed or a count does not match.
"""
import argparse
import asyncio
import datetime
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port_file(path, proc, limit=30):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit("error: notify exited with %d before listening" % proc.returncode)
        try:
            with open(path) as f:
                text = f.read()
            if text.endswith("\n"):
                return int(text)
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise SystemExit("error: notify did not write %s within %d s" % (path, limit))


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def alert(i, status="firing", starts=None):
    node = "node-%03d" % (i // 8)
    return {
        "status": status,
        "labels": {"alertname": "AnxinDeviceTemperatureHigh", "node": node,
                   "device": str(i % 8), "severity": "warning", "bench": str(i)},
        "annotations": {"summary": "%s NPU/GPU %d at 88 C" % (node, i % 8),
                        "description": "at or above 85 C for 30 seconds"},
        "startsAt": rfc3339(starts or time.time()),
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph",
        "fingerprint": "b%015x" % i,
    }


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, close = 0, False
    for line in lines[1:]:
        k, _, v = line.partition(":")
        k = k.strip().lower()
        if k == "content-length":
            length = int(v)
        elif k == "connection" and v.strip().lower() == "close":
            close = True
    body = await reader.readexactly(length) if length else b""
    return status, body, close


async def post_all(port, path, bodies, connections):
    """Posts each (key, body) once, on `connections` keep-alive connections.
    Returns (accepted keys, failures: list of strings)."""
    queue = list(reversed(bodies))
    accepted, failures = [], []

    async def worker():
        reader = writer = None
        while queue:
            key, body = queue.pop()
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            req = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n" % (path, port, len(body))).encode() + body
            writer.write(req)
            try:
                status, resp, close = await read_response(reader)
            except (asyncio.IncompleteReadError, ConnectionError) as e:
                failures.append("%s: %s" % (key, e))
                writer.close()
                writer = None
                continue
            if status == 200:
                accepted.append(key)
            else:
                failures.append("%s: HTTP %d %s" % (key, status, resp[:200]))
            if close:
                writer.close()
                writer = None
        if writer is not None:
            writer.close()

    await asyncio.gather(*[worker() for _ in range(connections)])
    return accepted, failures


def cpu_seconds(pid):
    """User + system CPU time of a process and its threads."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def strace_counts(path):
    counts = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
            if m and m.group(2) != "total":
                counts[m.group(2)] = int(m.group(1))
    return counts


def bench_anxin(a):
    work = tempfile.mkdtemp(prefix="anxin-notify-bench-", dir=a.dir)
    try:
        spool = os.path.join(work, "spool")
        down = free_port()  # nobody listens: deliveries wait, the spool keeps everything
        config = os.path.join(work, "anxin.yaml")
        with open(config, "w") as f:
            f.write("notify:\n"
                    "  receivers:\n"
                    "    - {name: sink, type: webhook, url: 'http://127.0.0.1:%d/down'}\n"
                    "  default_receivers: [sink]\n"
                    "  backoff_initial: 1h\n"
                    "  backoff_max: 1h\n"
                    "  spool_max_bytes: 4GiB\n"
                    "  max_alerts: 1000\n" % down)
        port_file = os.path.join(work, "port")
        argv = [a.anxin, "--log-level", "warn", "--config", config, "notify", "--port", "0",
                "--port-file", port_file, "--spool", spool, "--threads", str(a.threads)]
        strace_out = os.path.join(work, "strace.txt")
        if a.strace:
            argv = ["strace", "-f", "--seccomp-bpf", "-c", "-o", strace_out,
                    "-e", "trace=fsync,fdatasync,sync_file_range,msync,sync,syncfs"] + argv
        log = open(os.path.join(work, "notify.log"), "w")
        # A sanitized build's leak check cannot run under ptrace; the bench
        # preset has no sanitizers, so this matters only for a test build.
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            port = wait_port_file(port_file, proc)
            n, k = a.alerts, a.per_request
            starts = time.time()
            bodies = []
            for first in range(0, n, k):
                alerts = [alert(i, starts=starts) for i in range(first, min(n, first + k))]
                payload = {"version": "4", "groupKey": "{}:{bench=\"%d\"}" % first,
                           "truncatedAlerts": 0, "status": "firing", "receiver": "anxin",
                           "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
                           "externalURL": "http://alertmanager:9093", "alerts": alerts}
                bodies.append((tuple(x["fingerprint"] for x in alerts),
                               json.dumps(payload).encode()))
            notify_pid = proc.pid
            if a.strace:
                with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
                    notify_pid = int(f.read().split()[0])
            cpu0, self0 = cpu_seconds(notify_pid), time.process_time()
            t0 = time.monotonic()
            accepted, failures = asyncio.run(post_all(port, "/webhook", bodies, a.connections))
            seconds = time.monotonic() - t0
            notify_cpu, load_cpu = cpu_seconds(notify_pid) - cpu0, time.process_time() - self0
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
                metrics = r.read().decode()
        finally:
            # SIGTERM to notify itself (under strace: strace's child), then wait.
            target = proc.pid
            if a.strace:
                try:
                    with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
                        target = int(f.read().split()[0])
                except (OSError, IndexError, ValueError):
                    pass
            os.kill(target, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
        if proc.returncode != 0:
            failures.append("notify exited with %d: %s" % (
                proc.returncode, open(os.path.join(work, "notify.log")).read()[-2000:]))
        metric = lambda name: float(re.search(r"^%s (\S+)$" % name, metrics, re.M).group(1))
        commits = metric("anxin_notify_spool_commits_total")
        dropped = metric("anxin_notify_spool_dropped_messages_total")
        # Every accepted alert is in the spool, and nothing that was not accepted.
        db = sqlite3.connect(os.path.join(spool, "spool.db"))
        in_spool = []
        for (body,) in db.execute("SELECT body FROM messages ORDER BY id"):
            in_spool.extend(x["fingerprint"] for x in json.loads(body)["alerts"])
        states = db.execute("SELECT count(*) FROM alert_state").fetchone()[0]
        db.close()
        acked = [fp for group in accepted for fp in group]
        if sorted(in_spool) != sorted(acked) or len(set(in_spool)) != len(in_spool):
            failures.append("spool holds %d alerts (%d distinct), %d were accepted" %
                            (len(in_spool), len(set(in_spool)), len(acked)))
        if states != len(acked):
            failures.append("spool has %d alert states for %d accepted alerts" % (states, len(acked)))
        if dropped:
            failures.append("the spool dropped %d messages" % dropped)
        out = {"side": "anxin notify", "alerts": n, "alerts_per_request": k,
               "connections": a.connections, "accepted": len(acked), "in_spool": len(in_spool),
               "failed_requests": len(failures), "seconds": round(seconds, 3),
               "alerts_per_s": round(len(acked) / seconds), "commits": int(commits),
               "alerts_per_commit": round(len(acked) / commits, 2) if commits else None,
               "notify_cpu_s": round(notify_cpu, 2), "loadgen_cpu_s": round(load_cpu, 2),
               "machine": "%d CPUs, load %.1f" % (os.cpu_count(), os.getloadavg()[0]),
               "strace": a.strace}
        if a.strace:
            counts = strace_counts(strace_out)
            syncs = sum(counts.values())
            out["sync_calls"] = counts
            out["fsyncs_per_alert"] = round(syncs / len(acked), 4) if acked else None
        print(json.dumps(out))
        for f in failures[:10]:
            print("  FAILED " + f, file=sys.stderr)
        return 1 if failures or len(acked) != n else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def alertmanager_run(a, work):
    received = {}
    done = asyncio.Event()
    posts = [0]

    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v)
                body = json.loads(await reader.readexactly(length))
                posts[0] += 1
                for x in body["alerts"]:
                    received[x["labels"]["bench"]] = time.monotonic()
                if len(received) >= a.alerts:
                    done.set()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    sink_port = server.sockets[0].getsockname()[1]
    am_port = free_port()
    config = os.path.join(work, "alertmanager.yml")
    with open(config, "w") as f:
        f.write("route:\n  receiver: sink\n  group_by: ['...']\n  group_wait: 0s\n"
                "  group_interval: 1m\n  repeat_interval: 1h\n"
                "receivers:\n  - name: sink\n    webhook_configs:\n"
                "      - url: http://127.0.0.1:%d/alerts\n        send_resolved: false\n"
                % sink_port)
    log = open(os.path.join(work, "alertmanager.log"), "w")
    proc = subprocess.Popen([a.alertmanager, "--config.file=" + config,
                             "--storage.path=" + os.path.join(work, "data"),
                             "--web.listen-address=127.0.0.1:%d" % am_port,
                             "--cluster.listen-address=", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    failures = []
    try:
        ready = False
        for _ in range(300):
            try:
                r, w = await asyncio.open_connection("127.0.0.1", am_port)
                w.write(b"GET /-/ready HTTP/1.1\r\nHost: x\r\n\r\n")
                status, _, _ = await read_response(r)
                w.close()
                if status == 200:
                    ready = True
                    break
            except (OSError, asyncio.IncompleteReadError):
                pass
            await asyncio.sleep(0.1)
        if not ready:
            raise SystemExit("error: alertmanager did not become ready")
        starts, ends = time.time(), time.time() + 3600
        bodies = []
        for first in range(0, a.alerts, a.batch):
            batch = []
            for i in range(first, min(a.alerts, first + a.batch)):
                x = alert(i, starts=starts)
                batch.append({"labels": x["labels"], "annotations": x["annotations"],
                              "startsAt": x["startsAt"], "endsAt": rfc3339(ends),
                              "generatorURL": x["generatorURL"]})
            bodies.append(((first,), json.dumps(batch).encode()))
        t0 = time.monotonic()
        accepted, failures = await post_all(am_port, "/api/v2/alerts", bodies, 4)
        posted = time.monotonic() - t0
        try:
            await asyncio.wait_for(done.wait(), a.timeout)
        except asyncio.TimeoutError:
            failures.append("the sink got %d of %d alerts within %d s" %
                            (len(received), a.alerts, a.timeout))
        last = max(received.values()) if received else t0
        seconds = last - t0
        out = {"side": "alertmanager webhook", "alerts": a.alerts, "alerts_per_notification": 1,
               "posted_in_s": round(posted, 3), "delivered": len(received),
               "webhook_posts": posts[0], "seconds": round(seconds, 3),
               "alerts_per_s": round(len(received) / seconds) if seconds > 0 else None,
               "failed_requests": len(failures)}
        print(json.dumps(out))
        for f in failures[:10]:
            print("  FAILED " + f, file=sys.stderr)
        return 1 if failures or len(received) != a.alerts else 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        server.close()


def bench_alertmanager(a):
    work = tempfile.mkdtemp(prefix="anxin-am-bench-", dir=a.dir)
    try:
        return asyncio.run(alertmanager_run(a, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="side", required=True)
    x = sub.add_parser("anxin")
    x.add_argument("--anxin", required=True)
    x.add_argument("--alerts", type=int, default=20000)
    x.add_argument("--per-request", type=int, default=1)
    x.add_argument("--connections", type=int, default=32)
    x.add_argument("--threads", type=int, default=16)
    x.add_argument("--strace", action="store_true")
    x.add_argument("--dir", default=os.environ.get("TMPDIR", "/var/tmp"))
    y = sub.add_parser("alertmanager")
    y.add_argument("--alertmanager", default="/usr/bin/prometheus-alertmanager")
    y.add_argument("--alerts", type=int, default=5000)
    y.add_argument("--batch", type=int, default=100)
    y.add_argument("--timeout", type=int, default=120)
    y.add_argument("--dir", default=os.environ.get("TMPDIR", "/var/tmp"))
    a = p.parse_args()
    return bench_anxin(a) if a.side == "anxin" else bench_alertmanager(a)


if __name__ == "__main__":
    sys.exit(main())
