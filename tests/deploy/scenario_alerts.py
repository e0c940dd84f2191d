#!/usr/bin/python3
"""The shipped alert rules on the agent's own series: the `faults` scenario
(examples/scenarios/faults.yaml, one fault of each kind on 8 simulated NPUs)
is sampled by `anxin agent --once --at T` on its virtual clock every STEP
seconds, the expositions become the input series of a `promtool test rules`
file, and promtool evaluates deploy/prometheus/rules at every step.

The check: over the whole timeline, each alert fires for exactly the devices
the scenario breaks in that way, starting at the evaluation the scenario's
times and the rule's `for:` give, and no alert fires for any other device.
promtool is asked, at every step and for every alert, to expect nothing; the
alerts it reports instead are what fired. A second promtool run with those
alerts as the expectation must then pass, so the parsing of the first run's
report cannot invent or lose an alert.

Usage: scenario_alerts.py --anxin BIN --promtool BIN --rules DIR [--keep DIR]
Exit status 0 when every alert fired where expected and nowhere else.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

SCENARIO = "faults"
STEP = 5          # seconds between samples (and rule evaluations)
END = 175         # last sample; the longest `for:` of a device rule is 1m

# What faults.yaml breaks, alert by alert: the devices and the evaluation at
# which each starts firing (samples every 5 s; a `for:` counts from the first
# sample where the condition holds).
EXPECTED = {
    # NPU 0 ramps from 50 C to 96 C over 10-40 s: >= 85 C from the 35 s sample,
    # firing 30 s later. It holds >= 95 C only from 40 s to 60 s, shorter than
    # the critical rule's 30 s, so the critical alert stays pending.
    "AnxinDeviceTemperatureHigh": {"0": 65},
    "AnxinDeviceTemperatureCritical": {},
    # NPU 1 leaks 100 MiB/s from 5 s on top of 50 GiB: past 90% of 64 GiB at
    # the 85 s sample, firing a minute later. NPU 2 steps to 60 GiB at 30 s.
    "AnxinHbmUsageHigh": {"1": 145, "2": 90},
    # NPU 3 raises a critical error at 20 s. (NPU 6's error is minor; NPU 7,
    # lost, has no health series: AnxinDeviceLost covers it.)
    "AnxinDeviceUnhealthy": {"3": 20},
    # NPU 7 is lost at 70 s.
    "AnxinDeviceLost": {"7": 100},
    # NPU 4: port 0 down for 15 s (shorter than the rule's 30 s), port 1 down
    # from 50 s to 100 s.
    "AnxinLinkDown": {"4": 80},
    # NPU 3: two double-bit ECC errors at 20 s.
    "AnxinEccDoubleBitErrors": {"3": 20},
}

SERIES_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)$')


def expositions(anxin, times):
    """{series: {time: value}} from one `anxin agent --once --at T` per time."""
    series = collections.defaultdict(dict)
    for t in times:
        out = subprocess.run(
            [anxin, "agent", "--once", "--scenario", SCENARIO, "--at", f"{t}s", "--node", "n1",
             "--doctor-interval", "0"],
            capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            sys.exit(f"anxin agent --once --at {t}s exited {out.returncode}: {out.stderr}")
        for line in out.stdout.splitlines():
            if not line or line.startswith("#"):
                continue
            m = SERIES_RE.match(line)
            if not m:
                sys.exit(f"cannot read the exposition line {line!r}")
            series[(m.group(1) + (m.group(2) or ""))][t] = m.group(3)
    return series


def alert_names(rules_dir):
    names = []
    for f in sorted(os.listdir(rules_dir)):
        if f.endswith((".yml", ".yaml")):
            with open(os.path.join(rules_dir, f)) as fh:
                names += re.findall(r"^\s*- alert:\s*(\S+)", fh.read(), re.M)
    return names


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def write_test(path, rule_files, series, times, names, expected_at):
    """A promtool test file; expected_at(name, t) lists the label maps expected."""
    lines = ["rule_files:"] + [f"  - {f}" for f in rule_files]
    lines += [f"evaluation_interval: {STEP}s", "tests:", f"  - interval: {STEP}s",
              "    input_series:"]
    for name in sorted(series):
        values = " ".join(series[name].get(t, "_") for t in times)
        lines += [f"      - series: {quote(name)}", f"        values: {quote(values)}"]
    lines.append("    alert_rule_test:")
    for t in times:
        for n in names:
            lines += [f"      - eval_time: {t}s", f"        alertname: {n}"]
            alerts = expected_at(n, t)
            if not alerts:
                lines.append("        exp_alerts: []")
                continue
            lines.append("        exp_alerts:")
            for labels, annotations in alerts:
                lines.append("          - exp_labels:")
                for k, v in sorted(labels.items()):
                    lines.append(f"              {k}: {quote(v)}")
                if annotations:
                    lines.append("            exp_annotations:")
                    for k, v in sorted(annotations.items()):
                        lines.append(f"              {k}: {quote(v)}")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


LABELS_RE = re.compile(r'^\s*Labels:\{(.*)\},?\s*$')
ANNOTATIONS_RE = re.compile(r'^\s*Annotations:\{(.*)\},?\s*$')
PAIR_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def unescape(v):
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), v)


def fired(report):
    """{(alertname, time_seconds): [(labels, annotations)]} from promtool's failure report."""
    out = collections.defaultdict(list)
    current = None
    in_got = False
    for line in report.splitlines():
        m = re.search(r"alertname: (\w+), time: (\S+?),", line)
        if m:
            current = (m.group(1), duration_seconds(m.group(2)))
            in_got = False
            continue
        if current is None:
            continue
        if line.strip().startswith("got:"):
            in_got = True
        elif line.strip().startswith("exp:"):
            in_got = False
        if not in_got:
            continue
        lm = LABELS_RE.match(line)
        if lm:
            labels = {k: unescape(v) for k, v in PAIR_RE.findall(lm.group(1))}
            labels.pop("alertname", None)
            out[current].append((labels, {}))
            continue
        am = ANNOTATIONS_RE.match(line)
        if am and out[current]:
            out[current][-1] = (out[current][-1][0],
                                {k: unescape(v) for k, v in PAIR_RE.findall(am.group(1))})
    return out


def fmt(firing):
    if not firing:
        return "no device"
    return ", ".join(f"device {d} from {t} s" for d, t in sorted(firing.items()))


def duration_seconds(text):
    total = 0.0
    for number, unit in re.findall(r"([0-9.]+)(ms|h|m|s)", text):
        total += float(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return int(round(total))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anxin", required=True)
    ap.add_argument("--promtool", required=True)
    ap.add_argument("--rules", required=True, help="deploy/prometheus/rules")
    ap.add_argument("--keep", help="write the generated test files here")
    args = ap.parse_args()
    times = list(range(0, END + 1, STEP))
    series = expositions(args.anxin, times)
    names = alert_names(args.rules)
    if not names:
        sys.exit(f"no alert rules under {args.rules}")
    rule_files = [os.path.abspath(os.path.join(args.rules, f)) for f in sorted(os.listdir(args.rules))
                  if f.endswith((".yml", ".yaml"))]
    scratch = None if args.keep else tempfile.TemporaryDirectory(prefix="anxin-scenario-alerts-")
    work = args.keep or scratch.name
    os.makedirs(work, exist_ok=True)

    probe = os.path.join(work, "probe.test.yml")
    write_test(probe, rule_files, series, times, names, lambda n, t: [])
    run = subprocess.run([args.promtool, "test", "rules", probe], capture_output=True, text=True,
                         timeout=300)
    report = run.stdout + run.stderr
    if run.returncode == 0:
        sys.exit("promtool says no alert fired at all on the faults scenario")
    got = fired(report)
    if not got:
        sys.exit("promtool failed without reporting alerts:\n" + report[-4000:])

    # The same alerts as the expectation must pass: nothing was misread.
    confirm = os.path.join(work, "confirm.test.yml")
    write_test(confirm, rule_files, series, times, names, lambda n, t: got.get((n, t), []))
    check = subprocess.run([args.promtool, "test", "rules", confirm], capture_output=True,
                           text=True, timeout=300)
    if check.returncode != 0:
        sys.exit("the alerts read from promtool's report do not pass as expectations:\n" +
                 (check.stdout + check.stderr)[-4000:])

    first = {}
    for (name, t), alerts in got.items():
        for labels, _ in alerts:
            key = (name, labels.get("device", "(no device)"))
            first[key] = min(first.get(key, t), t)
    problems = []
    for name in names:
        want = EXPECTED.get(name, {})
        have = {device: t for (n, device), t in first.items() if n == name}
        if want != have:
            problems.append(f"{name}: fired for {fmt(have)}, expected {fmt(want)}")
    for (name, device), t in sorted(first.items()):
        print(f"{name:34} device {device}: firing from {t} s")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"ok: {len(names)} rules over {len(times)} evaluations of {SCENARIO}; each alert fired "
          "for exactly the devices the scenario breaks, from the expected evaluation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
