#!/usr/bin/env python3
"""The agent's page in a real headless Chromium, driven over chromedriver's
WebDriver HTTP API.

Starts `anxin agent` on a sim scenario (by default one whose faults come in
the first seconds) with two ranks of a training job reporting through
libanxin_sdk.so, loads the page, and checks that it loaded, that every chart
drew sim and job data (window.anxinPage counts the points, and the canvases
have ink on them), that the device table shows the links, that the timeline
shows the scenario's events, and that the browser logged no error (and that
the browser log really reaches this test: a console.error of its own does).

    page_browser_test.py --anxin build/test/src/anxin/cli/anxin \
        --sdk build/test/src/anxin/sdk/libanxin_sdk.so
    # the README's screenshot: the faults scenario 80 s in, with a job running
    page_browser_test.py --anxin ... --sdk ... --scenario faults --settle 80 \
        --screenshot docs/images/dashboard.png

Exit status 0 when every check passed, 1 otherwise. Everything listens on
127.0.0.1 on ports picked at run time, and everything it starts is stopped
at the end, also on failure.
"""
import argparse
import base64
import ctypes
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
JOB = "llm-pretrain"

# Two NPUs; in the first seconds NPU 0 heats past 85 C, NPU 1 raises an error
# code and loses a link.
QUICK_SCENARIO = """\
name: page-browser-test
description: two NPUs whose faults come in the first seconds
seed: 11
devices:
  count: 2
  model: Ascend910C
  ports: 2
  baseline:
    temperature: 55
    power: 320
    utilisation: 85
    hbm_used: 48GiB
  noise:
    temperature: 1
    power: 8
    utilisation: 3
    hbm_used: 64MiB
events:
  - {at: 1s, device: 0, kind: temperature_ramp, to: 92, over: 3s}
  - {at: 2s, device: 1, kind: error_raise, code: 80CB8009, severity: minor, text: page test}
  - {at: 3s, device: 1, kind: link_down, port: 1}
"""


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def http_json(method, url, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        raise AssertionError(f"{method} {url}: HTTP {e.code}: {text[:500]}") from None


class WebDriver:
    """The few WebDriver commands this test needs, over chromedriver's HTTP API."""

    def __init__(self, port, profile):
        self.base = f"http://127.0.0.1:{port}"
        self.session = None
        self.profile = profile

    def ready(self):
        try:
            return http_json("GET", self.base + "/status", timeout=2)["value"]["ready"]
        except (OSError, AssertionError):
            return False

    def start(self, width, height):
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         "--disable-background-networking", "--disable-extensions",
                         f"--window-size={width},{height}",
                         f"--user-data-dir={self.profile}"],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}}
        self.session = http_json("POST", self.base + "/session", caps, timeout=90)["value"]["sessionId"]

    def cmd(self, method, path, body=None):
        return http_json(method, f"{self.base}/session/{self.session}{path}", body)["value"]

    def navigate(self, url):
        self.cmd("POST", "/url", {"url": url})

    def execute(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def browser_log(self):
        """Entries logged since the last call: [{level, message, source, timestamp}]."""
        return self.cmd("POST", "/se/log", {"type": "browser"})

    def screenshot(self):
        return base64.b64decode(self.cmd("GET", "/screenshot"))

    def quit(self):
        if self.session:
            try:
                http_json("DELETE", f"{self.base}/session/{self.session}", timeout=20)
            except (OSError, AssertionError):
                pass
            self.session = None


def feed(args):
    """One rank of a training job reporting through libanxin_sdk.so: steps of
    150-300 ms, a gemm kernel with an occasional slow run, and three
    collectives whose bandwidth drifts. Runs until --seconds pass or SIGTERM."""
    sdk = ctypes.CDLL(args.sdk)
    sdk.anxin_step_begin.argtypes = [ctypes.c_uint64]
    sdk.anxin_step_end.argtypes = [ctypes.c_uint64]
    sdk.anxin_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
    sdk.anxin_collective.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                                     ctypes.c_char_p, ctypes.c_int]
    sdk.anxin_sdk_flush.argtypes = [ctypes.c_int]
    rank = int(os.environ.get("RANK", "0"))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    end = time.monotonic() + args.seconds
    step = 0
    while not stop and time.monotonic() < end:
        phase = step / 25.0
        sdk.anxin_step_begin(step)
        compute = 0.2 + 0.05 * math.sin(phase) + 0.02 * rank
        time.sleep(compute)
        for k in range(4):
            slow = 3.5 if (step % 17 == 5 and k == 0) else 1.0
            sdk.anxin_kernel(b"gemm_bf16", int(2e6 * slow * (1 + 0.05 * math.sin(step + k))))
        sdk.anxin_kernel(b"flash_attn_fwd", int(1.2e6 * (1 + 0.1 * math.cos(phase * 3))))
        grad = 1 << 30
        sdk.anxin_collective(1, grad, int(grad / (160e9 + 20e9 * math.sin(phase)) * 1e9), b"ring", 0)
        sdk.anxin_collective(2, grad // 4, int(grad / 4 / (110e9 + 15e9 * math.cos(phase)) * 1e9), b"ring", 0)
        sdk.anxin_collective(3, grad // 4, int(grad / 4 / (95e9 + 10e9 * math.sin(phase * 2)) * 1e9), b"ring", 0)
        sdk.anxin_step_end(step)
        step += 1
    sdk.anxin_sdk_flush(2000)
    return 0


# What the page has drawn: its status object, the table, the timeline, and
# the ink on each chart's canvas.
PAGE_STATE = """
const p = window.anxinPage || null;
const ink = {};
for (const c of document.querySelectorAll('.chart')) {
  const canvas = c.querySelector('canvas');
  const id = c.id || ('job-' + c.dataset.kind);
  if (!canvas || !canvas.width) { ink[id] = 0; continue; }
  const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
  ink[id] = n;
}
return {
  title: document.title,
  page: p,
  ink: ink,
  rows: document.querySelectorAll('#device-table tbody tr').length,
  linksDown: Array.from(document.querySelectorAll('#device-table .link.down')).map(
      (e) => e.closest('tr').dataset.device + ':' + e.dataset.port),
  timeline: Array.from(document.querySelectorAll('#timeline li')).map((li) => li.textContent),
  kinds: Array.from(document.querySelectorAll('#timeline li')).map((li) => li.dataset.kind),
  jobCards: Array.from(document.querySelectorAll('#jobs .job')).map((e) => e.dataset.job),
};
"""


class Failures:
    def __init__(self):
        self.items = []

    def check(self, ok, what):
        print(("ok     " if ok else "FAILED ") + what, flush=True)
        if not ok:
            self.items.append(what)


def run(args):
    for tool, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(tool, os.X_OK):
            print(f"error: {tool} is missing: install Debian's {pkg} (scripts/install-deps)",
                  file=sys.stderr)
            return 1
    for path in (args.anxin, args.sdk):
        if not os.path.exists(path):
            print(f"error: {path} does not exist: build the anxin and anxin_sdk targets",
                  file=sys.stderr)
            return 1
    tmp = tempfile.mkdtemp(prefix="anxin-page-")
    procs = []
    driver = None
    failures = Failures()
    try:
        if args.scenario:
            scenario = args.scenario
        else:
            scenario = os.path.join(tmp, "scenario.yaml")
            with open(scenario, "w") as f:
                f.write(QUICK_SCENARIO)
        sock = os.path.join(tmp, "agent.sock")
        port_file = os.path.join(tmp, "port")
        agent_log = open(os.path.join(tmp, "agent.log"), "w")
        agent = subprocess.Popen(
            [args.anxin, "agent", "--scenario", scenario, "--port", "0", "--port-file", port_file,
             "--socket", sock, "--node", "gpu-node-17", "--interval", args.interval,
             "--duration", "600s"],
            stdout=agent_log, stderr=subprocess.STDOUT)
        procs.append(agent)

        def agent_port():
            if agent.poll() is not None:
                raise AssertionError("anxin agent exited: " + open(agent_log.name).read())
            try:
                text = open(port_file).read()
            except OSError:
                return None
            return int(text) if text.endswith("\n") else None
        port = wait_for(agent_port, 60, "the agent's port file")
        url = f"http://127.0.0.1:{port}/"

        feeders = []
        for rank in (0, 1):
            env = dict(os.environ, ANXIN_AGENT_SOCKET=sock, ANXIN_JOB_ID=JOB, RANK=str(rank),
                       WORLD_SIZE="16", ANXIN_SDK_RETRY_MS="100")
            if args.preload:
                # A sanitized libanxin_sdk.so needs its runtime loaded first;
                # Python's own allocations are not this test's leaks.
                env["LD_PRELOAD"] = args.preload
                env["ASAN_OPTIONS"] = "detect_leaks=0"
            log = open(os.path.join(tmp, f"rank{rank}.log"), "w")
            feeders.append((subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--feed", "--sdk", args.sdk,
                 "--seconds", "600"], env=env, stdout=log, stderr=subprocess.STDOUT), log.name))
            procs.append(feeders[-1][0])

        driver_port = free_port()
        procs.append(subprocess.Popen(
            [CHROMEDRIVER, f"--port={driver_port}", "--allowed-ips=127.0.0.1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        driver = WebDriver(driver_port, os.path.join(tmp, "profile"))
        wait_for(driver.ready, 30, "chromedriver")
        driver.start(args.width, args.height)
        driver.navigate(url)

        devices = len(http_json("GET", url + "api/v1/devices")["devices"])

        def drawn():
            for proc, log in feeders:
                if proc.poll() is not None:
                    raise AssertionError(f"the job's rank exited ({proc.returncode}): " +
                                         open(log).read()[-2000:])
            s = driver.execute(PAGE_STATE)
            p = s["page"]
            if not p or not p["ready"]:
                return None
            charts = p["charts"]
            need = ["device:" + m for m in ("hbm", "temperature", "power", "utilisation")]
            need += [f"job:{JOB}:" + k for k in ("step", "busbw", "jitter")]
            if any(charts.get(c, 0) < 3 * (devices if c.startswith("device:") else 1) for c in need):
                return None
            if "error_raised" not in s["kinds"]:
                return None
            # The quick scenario's link and temperature come a second later.
            if not args.scenario and ("temperature_high" not in s["kinds"] or
                                      "1:1" not in s["linksDown"]):
                return None
            return s
        state = wait_for(drawn, args.timeout, "the page to draw devices, the job and the events")
        if args.settle:
            time.sleep(args.settle)  # let a long scenario unfold for the screenshot
            state = driver.execute(PAGE_STATE)
        print(json.dumps({"charts": state["page"]["charts"], "events": state["page"]["events"],
                          "jobs": state["jobCards"]}, sort_keys=True), flush=True)

        p = state["page"]
        failures.check(state["title"] == "anxin agent", f"title is 'anxin agent' ({state['title']!r})")
        failures.check(p["errors"] == [], f"no script errors on the page ({p['errors']})")
        failures.check(p["failures"] == 0, f"every poll succeeded ({p['failures']} failed: {p['lastError']})")
        failures.check(p["devices"] == devices and state["rows"] == devices,
                       f"{devices} devices in the charts and the table ({p['devices']}, {state['rows']})")
        for chart, ink in sorted(state["ink"].items()):
            failures.check(ink > 2000, f"chart {chart} has ink on its canvas ({ink} pixels)")
        failures.check(len(state["ink"]) == 7, f"4 device charts and 3 job charts ({len(state['ink'])})")
        failures.check(state["jobCards"] == [JOB], f"one job card, {JOB} ({state['jobCards']})")
        if args.scenario:
            failures.check("error_raised" in state["kinds"], "the timeline shows an error_raised")
        else:
            failures.check(any("NPU 1" in t and "error_raised" in t for t in state["timeline"]),
                           "the timeline shows NPU 1's error_raised")
            failures.check("1:1" in state["linksDown"],
                           f"NPU 1's port 1 shows down ({state['linksDown']})")
            failures.check("temperature_high" in state["kinds"],
                           f"the timeline shows NPU 0 past 85 C ({state['kinds']})")

        log = driver.browser_log()
        errors = [e for e in log if e.get("level") == "SEVERE"]
        failures.check(errors == [], f"no console errors ({errors})")
        # The log channel works: an error the test logs itself comes back.
        driver.execute("console.error('anxin-page-test-probe');")
        probe = wait_for(lambda: [e for e in driver.browser_log()
                                  if "anxin-page-test-probe" in e.get("message", "")],
                         10, "the probe in the browser log")
        failures.check(probe[0]["level"] == "SEVERE", "a console.error reaches the test as SEVERE")

        png = driver.screenshot()
        failures.check(png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20000,
                       f"a PNG screenshot ({len(png)} bytes)")
        if args.screenshot:
            with open(args.screenshot, "wb") as f:
                f.write(png)
            print(f"wrote {args.screenshot}", flush=True)
    except AssertionError as e:
        failures.check(False, str(e))
    finally:
        if driver:
            driver.quit()
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if failures.items:
            print("--- agent log ---\n" + open(os.path.join(tmp, "agent.log")).read()[-4000:],
                  file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures.items)} failed" if failures.items else "page_browser_test: all checks passed")
    return 1 if failures.items else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--anxin", help="the anxin binary")
    ap.add_argument("--sdk", required=True, help="libanxin_sdk.so")
    ap.add_argument("--preload", help="LD_PRELOAD for the job's ranks (the ASan runtime when "
                    "libanxin_sdk.so is sanitized)")
    ap.add_argument("--scenario", help="a sim scenario (default: a quick one of its own)")
    ap.add_argument("--interval", default="500ms", help="the agent's sample interval")
    ap.add_argument("--timeout", type=float, default=90, help="seconds to wait for the page")
    ap.add_argument("--settle", type=float, default=0, help="seconds to wait before the screenshot")
    ap.add_argument("--screenshot", help="write the screenshot here")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=2000)
    ap.add_argument("--feed", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=600, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.feed:
        return feed(args)
    if not args.anxin:
        ap.error("--anxin is required")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
