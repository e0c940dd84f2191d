#!/usr/bin/env python3
"""Checks of deploy/ that promtool does not make.

  check_deploy.py --deploy DIR metrics     every metric the alert rules and the
                                           Grafana dashboard query is one the
                                           agent exports (deploy/metrics.txt)
  check_deploy.py --deploy DIR dashboard   the dashboard is valid JSON with the
                                           datasource/node/device variables, and
                                           every panel queries ${datasource}
  check_deploy.py --deploy DIR coverage    every alert rule has a severity, a
                                           summary/description naming the node,
                                           a runbook, and promtool tests that
                                           see it fire and see it stay quiet
  check_deploy.py --deploy DIR manifests   every YAML file under deploy/ parses;
                                           the DaemonSet and the systemd unit
                                           have what docs/alerts.md and
                                           docs/agent.md promise

Exit status 0 when everything holds, 1 with one `error: ...` line per problem,
2 for bad usage or an unreadable file.
"""

import argparse
import json
import os
import re
import sys

try:
    import yaml
except ImportError:  # pragma: no cover - depends on the machine
    print("error: python3 module yaml missing; run scripts/install-deps "
          "(Debian package python3-yaml)", file=sys.stderr)
    sys.exit(2)

# Series Prometheus writes itself; the rules and the dashboard may use them.
PROMETHEUS_SERIES = {
    "up", "ALERTS", "ALERTS_FOR_STATE", "scrape_duration_seconds",
    "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
}
# Words of PromQL that look like metric names but are not.
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset",
    "bool", "and", "or", "unless", "inf", "nan", "atan2",
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
AGENT_PORT = 9466


class UsageError(Exception):
    pass


def read_metric_list(path):
    names = set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line):
                raise UsageError(f"{path}:{n}: '{line}' is not a metric name")
            names.add(line)
    return names


def promql_metric_names(expr):
    """The metric names a PromQL expression (or a Grafana query) selects."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r"\$\{[^}]*\}|\$\w+", "1", s)  # Grafana variables
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # ranges and subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", s):
        word, call = m.group(1), m.group(2)
        if call or word in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def variable_query_exprs(query):
    """The PromQL inside a Grafana Prometheus variable query."""
    if isinstance(query, dict):
        query = query.get("query", "")
    query = query.strip()
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\s*\)", query, re.S)
    if m:
        return [m.group(1)]
    if re.fullmatch(r"label_values\(\s*\w+\s*\)|label_names\(\)", query):
        return []
    m = re.fullmatch(r"query_result\((.*)\)", query, re.S)
    if m:
        return [m.group(1)]
    return [query] if query else []


def load_yaml(path, all_docs=False):
    with open(path, encoding="utf-8") as f:
        if all_docs:
            return list(yaml.safe_load_all(f))
        return yaml.safe_load(f)


def load_dashboard(path):
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise UsageError(f"{path}: not valid JSON: {e}")


def all_panels(dashboard):
    for panel in dashboard.get("panels", []):
        yield panel
        for inner in panel.get("panels", []):  # collapsed rows hold theirs
            yield inner


def rules_of(rules_doc):
    for group in (rules_doc or {}).get("groups", []):
        for rule in group.get("rules", []):
            yield group.get("name", "?"), rule


def check_metrics(rules_files, dashboard_path, known):
    errors = []
    allowed = known | PROMETHEUS_SERIES
    for path in rules_files:
        for _, rule in rules_of(load_yaml(path)):
            name = rule.get("alert") or rule.get("record")
            for metric in sorted(promql_metric_names(str(rule.get("expr", "")))):
                if metric not in allowed:
                    errors.append(f"{path}: rule {name} queries {metric}, which the agent "
                                  "does not export (deploy/metrics.txt)")
    dashboard = load_dashboard(dashboard_path)
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            for metric in sorted(promql_metric_names(target.get("expr", ""))):
                if metric not in allowed:
                    errors.append(f"{dashboard_path}: panel '{panel.get('title')}' queries "
                                  f"{metric}, which the agent does not export "
                                  "(deploy/metrics.txt)")
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        for expr in variable_query_exprs(var.get("query", "")):
            for metric in sorted(promql_metric_names(expr)):
                if metric not in allowed:
                    errors.append(f"{dashboard_path}: variable {var.get('name')} queries "
                                  f"{metric}, which the agent does not export "
                                  "(deploy/metrics.txt)")
    return errors


def check_dashboard(path):
    errors = []
    dashboard = load_dashboard(path)
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        errors.append(f"{path}: no variable 'datasource' of type datasource for prometheus")
    for name in ("node", "device"):
        var = variables.get(name)
        if not var or var.get("type") != "query":
            errors.append(f"{path}: no query variable '{name}'")
        elif var.get("datasource") != DATASOURCE:
            errors.append(f"{path}: variable '{name}' does not query ${{datasource}}")
    ids = set()
    panels = list(all_panels(dashboard))
    if not panels:
        errors.append(f"{path}: no panels")
    for panel in panels:
        title = panel.get("title", "?")
        if panel.get("id") in ids:
            errors.append(f"{path}: panel id {panel.get('id')} used twice")
        ids.add(panel.get("id"))
        if "gridPos" not in panel:
            errors.append(f"{path}: panel '{title}' has no gridPos")
        if panel.get("datasource") != DATASOURCE:
            errors.append(f"{path}: panel '{title}' has datasource "
                          f"{json.dumps(panel.get('datasource'))}, not ${{datasource}}")
        if panel.get("type") == "row":
            continue
        targets = panel.get("targets", [])
        if not targets:
            errors.append(f"{path}: panel '{title}' has no queries")
        for target in targets:
            if not target.get("expr"):
                errors.append(f"{path}: panel '{title}' has a query without expr")
            if "datasource" in target and target["datasource"] != DATASOURCE:
                errors.append(f"{path}: a query of panel '{title}' does not use ${{datasource}}")
    return errors


def check_coverage(rules_files, test_files):
    errors = []
    fired, quiet = set(), set()
    for path in test_files:
        doc = load_yaml(path) or {}
        for test in doc.get("tests", []):
            for case in test.get("alert_rule_test", []):
                (fired if case.get("exp_alerts") else quiet).add(case.get("alertname"))
    for path in rules_files:
        for group, rule in rules_of(load_yaml(path)):
            alert = rule.get("alert")
            if not alert:
                continue
            where = f"{path}: alert {alert}"
            labels = rule.get("labels") or {}
            notes = rule.get("annotations") or {}
            if labels.get("severity") not in ("warning", "critical"):
                errors.append(f"{where} has no severity label warning or critical")
            for key in ("summary", "description", "runbook"):
                if not notes.get(key):
                    errors.append(f"{where} has no {key} annotation")
            wants = ["node"] + (["device"] if group == "anxin-device" else [])
            for label in wants:
                for key in ("summary", "description"):
                    if f"$labels.{label}" not in str(notes.get(key, "")):
                        errors.append(f"{where}: {key} does not name the {label} "
                                      f"({{{{ $labels.{label} }}}})")
            if alert not in fired:
                errors.append(f"{where} has no promtool test in which it fires")
            if alert not in quiet:
                errors.append(f"{where} has no promtool test in which it stays quiet")
    return errors


def k8s_containers(doc):
    return doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])


def check_daemonset(path, docs):
    errors = []
    sets = [d for d in docs if isinstance(d, dict) and d.get("kind") == "DaemonSet"]
    if len(sets) != 1:
        return [f"{path}: expected one DaemonSet, found {len(sets)}"]
    ds = sets[0]
    pod = ds.get("spec", {}).get("template", {}).get("spec", {})
    if pod.get("hostPID") is not False:
        errors.append(f"{path}: the pod must say hostPID: false")
    containers = k8s_containers(ds)
    agent = next((c for c in containers if c.get("name") == "anxin-agent"), None)
    if agent is None:
        return errors + [f"{path}: no container named anxin-agent"]
    ports = [p.get("containerPort") for p in agent.get("ports", [])]
    if AGENT_PORT not in ports:
        errors.append(f"{path}: the agent container does not expose port {AGENT_PORT}")
    probe = agent.get("livenessProbe", {}).get("httpGet", {})
    if probe.get("path") != "/healthz":
        errors.append(f"{path}: the liveness probe does not get /healthz")
    volumes = {v.get("name"): v for v in pod.get("volumes", [])}
    mounts = {m.get("mountPath"): m for m in agent.get("volumeMounts", [])}
    driver = mounts.get("/usr/local/Ascend/driver")
    if not driver or driver.get("readOnly") is not True:
        errors.append(f"{path}: /usr/local/Ascend/driver is not mounted read-only")
    for mount in mounts.values():
        vol = volumes.get(mount.get("name"))
        if vol is None:
            errors.append(f"{path}: mount {mount.get('mountPath')} names no volume")
        elif "hostPath" in vol and mount.get("readOnly") is not True \
                and not vol["hostPath"].get("path", "").startswith(("/dev", "/run/anxin")):
            errors.append(f"{path}: host path {vol['hostPath'].get('path')} is mounted writable")
    annotations = ds.get("spec", {}).get("template", {}).get("metadata", {}).get("annotations", {})
    monitors = [d for d in docs if isinstance(d, dict) and d.get("kind") == "ServiceMonitor"]
    if annotations.get("prometheus.io/port") != str(AGENT_PORT) and not monitors:
        errors.append(f"{path}: neither prometheus.io annotations for port {AGENT_PORT} "
                      "nor a ServiceMonitor")
    return errors


def check_systemd(path):
    errors = []
    sections, current = {}, None
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            m = re.fullmatch(r"\[(\w+)\]", line)
            if m:
                current = sections.setdefault(m.group(1), {})
                continue
            m = re.fullmatch(r"([A-Za-z]+)=(.*)", line)
            if not m or current is None:
                errors.append(f"{path}:{n}: not a key=value line in a section: {line}")
                continue
            current.setdefault(m.group(1), []).append(m.group(2))
    service = sections.get("Service", {})
    for key in ("ExecStart", "User"):
        if key not in service:
            errors.append(f"{path}: [Service] has no {key}")
    if not any("agent" in v for v in service.get("ExecStart", [])):
        errors.append(f"{path}: ExecStart does not run `anxin agent`")
    if "WantedBy" not in sections.get("Install", {}):
        errors.append(f"{path}: [Install] has no WantedBy")
    return errors


def check_manifests(deploy):
    errors = []
    for root, _, files in os.walk(deploy):
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.endswith((".yml", ".yaml")):
                try:
                    docs = load_yaml(path, all_docs=True)
                except yaml.YAMLError as e:
                    errors.append(f"{path}: not valid YAML: {str(e).splitlines()[0]}")
                    continue
                if any(isinstance(d, dict) and d.get("kind") == "DaemonSet" for d in docs):
                    errors.extend(check_daemonset(path, docs))
            elif name.endswith(".service"):
                errors.extend(check_systemd(path))
    daemonset = os.path.join(deploy, "kubernetes", "anxin-agent-daemonset.yaml")
    unit = os.path.join(deploy, "systemd", "anxin-agent.service")
    for path in (daemonset, unit):
        if not os.path.exists(path):
            errors.append(f"{path}: missing")
    return errors


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deploy", required=True, help="the deploy/ directory")
    parser.add_argument("check", choices=["metrics", "dashboard", "coverage", "manifests"])
    args = parser.parse_args(argv)
    prom = os.path.join(args.deploy, "prometheus")
    rules_dir, tests_dir = os.path.join(prom, "rules"), os.path.join(prom, "tests")
    rules = sorted(os.path.join(rules_dir, f) for f in os.listdir(rules_dir) if f.endswith(".yml"))
    tests = sorted(os.path.join(tests_dir, f) for f in os.listdir(tests_dir) if f.endswith(".yml"))
    dashboard = os.path.join(args.deploy, "grafana", "anxin-dashboard.json")
    try:
        if args.check == "metrics":
            known = read_metric_list(os.path.join(args.deploy, "metrics.txt"))
            errors = check_metrics(rules, dashboard, known)
        elif args.check == "dashboard":
            errors = check_dashboard(dashboard)
        elif args.check == "coverage":
            errors = check_coverage(rules, tests)
        else:
            errors = check_manifests(args.deploy)
    except (OSError, UsageError, yaml.YAMLError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    if not errors:
        print(f"check_deploy {args.check}: ok")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
