#!/usr/bin/env python3
"""check_deploy.py on deploy/ as shipped (passes) and on copies broken one
way at a time (each must fail with the matching error)."""

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DEPLOY = os.path.join(HERE, "..", "..", "deploy")
sys.path.insert(0, HERE)
import check_deploy  # noqa: E402


def run(deploy, check):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = check_deploy.main(["--deploy", deploy, check])
    return rc, err.getvalue()


class PromqlNames(unittest.TestCase):
    def test_names(self):
        names = check_deploy.promql_metric_names
        self.assertEqual(names('histogram_quantile(0.99, sum by (le, job) (rate('
                               'anxin_job_step_seconds_bucket{node=~"$node"}[$__rate_interval])))'),
                         {"anxin_job_step_seconds_bucket"})
        self.assertEqual(names('a{x="b"} * 8 < 10e9 or on(node) group_left(model) c offset 5m'),
                         {"a", "c"})
        self.assertEqual(names('count(up{job="anxin-agent"} == 0) or vector(0)'), {"up"})
        self.assertEqual(names('max without (state) (m) > bool 1 unless n'), {"m", "n"})

    def test_variable_queries(self):
        q = check_deploy.variable_query_exprs
        self.assertEqual(q('label_values(anxin_device_info{node=~"$node"}, device)'),
                         ['anxin_device_info{node=~"$node"}'])
        self.assertEqual(q({"query": "label_values(node)"}), [])
        self.assertEqual(q("query_result(topk(3, m))"), ["topk(3, m)"])


class Broken(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.deploy = os.path.join(self.tmp, "deploy")
        shutil.copytree(DEPLOY, self.deploy)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def path(self, *parts):
        return os.path.join(self.deploy, *parts)

    def edit(self, rel, old, new):
        p = self.path(*rel.split("/"))
        with open(p, encoding="utf-8") as f:
            text = f.read()
        self.assertIn(old, text, f"{rel} no longer holds {old!r}; update this test")
        with open(p, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, 1))

    def edit_dashboard(self, change):
        p = self.path("grafana", "anxin-dashboard.json")
        with open(p, encoding="utf-8") as f:
            d = json.load(f)
        change(d)
        with open(p, "w", encoding="utf-8") as f:
            json.dump(d, f)

    def assertFails(self, check, message, rc=1):
        got_rc, err = run(self.deploy, check)
        self.assertEqual(got_rc, rc, err)
        self.assertIn(message, err)

    def test_shipped_files_pass(self):
        for check in ("metrics", "dashboard", "coverage", "manifests"):
            rc, err = run(self.deploy, check)
            self.assertEqual(rc, 0, f"{check}: {err}")

    def test_rule_with_unexported_metric(self):
        self.edit("prometheus/rules/anxin.rules.yml", "expr: anxin_device_temperature_celsius >= 85",
                  "expr: anxin_device_temp_celsius >= 85")
        self.assertFails("metrics", "rule AnxinDeviceTemperatureHigh queries anxin_device_temp_celsius")

    def test_dashboard_with_unexported_metric(self):
        def change(d):
            d["panels"][1]["targets"][0]["expr"] = "sum(npu_chip_info_hbm_used_memory)"
        self.edit_dashboard(change)
        self.assertFails("metrics", "queries npu_chip_info_hbm_used_memory")

    def test_variable_with_unexported_metric(self):
        def change(d):
            d["templating"]["list"][1]["query"]["query"] = "label_values(DCGM_FI_DEV_GPU_TEMP, node)"
        self.edit_dashboard(change)
        self.assertFails("metrics", "variable node queries DCGM_FI_DEV_GPU_TEMP")

    def test_metric_list_is_the_reference(self):
        self.edit("metrics.txt", "anxin_device_memory_used_ratio\n", "")
        self.assertFails("metrics", "queries anxin_device_memory_used_ratio")

    def test_panel_with_fixed_datasource(self):
        def change(d):
            d["panels"][2]["datasource"] = {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}
        self.edit_dashboard(change)
        self.assertFails("dashboard", "not ${datasource}")

    def test_dashboard_without_device_variable(self):
        def change(d):
            d["templating"]["list"] = [v for v in d["templating"]["list"] if v["name"] != "device"]
        self.edit_dashboard(change)
        self.assertFails("dashboard", "no query variable 'device'")

    def test_dashboard_not_json(self):
        with open(self.path("grafana", "anxin-dashboard.json"), "a", encoding="utf-8") as f:
            f.write(",")
        self.assertFails("dashboard", "not valid JSON", rc=2)

    def test_rule_without_tests(self):
        self.edit("prometheus/rules/anxin.rules.yml", "  - name: anxin-host\n    rules:\n",
                  "  - name: anxin-host\n    rules:\n"
                  "      - alert: AnxinUntested\n        expr: anxin_device_throttled == 1\n"
                  "        labels: {severity: warning}\n        annotations:\n"
                  "          summary: '{{ $labels.node }}'\n          description: '{{ $labels.node }}'\n"
                  "          runbook: docs/alerts.md\n")
        self.assertFails("coverage", "alert AnxinUntested has no promtool test in which it fires")
        self.assertFails("coverage", "alert AnxinUntested has no promtool test in which it stays quiet")

    def test_summary_without_device(self):
        self.edit("prometheus/rules/anxin.rules.yml",
                  'summary: "{{ $labels.node }} NPU/GPU {{ $labels.device }} does not answer"',
                  'summary: "{{ $labels.node }}: a device does not answer"')
        self.assertFails("coverage", "alert AnxinDeviceLost: summary does not name the device")

    def test_daemonset_with_host_pid(self):
        self.edit("kubernetes/anxin-agent-daemonset.yaml", "hostPID: false", "hostPID: true")
        self.assertFails("manifests", "hostPID: false")

    def test_daemonset_with_writable_driver(self):
        self.edit("kubernetes/anxin-agent-daemonset.yaml",
                  "mountPath: /usr/local/Ascend/driver\n              readOnly: true",
                  "mountPath: /usr/local/Ascend/driver\n              readOnly: false")
        self.assertFails("manifests", "/usr/local/Ascend/driver is not mounted read-only")

    def test_daemonset_without_healthz(self):
        self.edit("kubernetes/anxin-agent-daemonset.yaml", "path: /healthz", "path: /metrics")
        self.assertFails("manifests", "liveness probe does not get /healthz")

    def test_broken_yaml(self):
        self.edit("prometheus/prometheus.yml", "scrape_configs:", "scrape_configs: [")
        self.assertFails("manifests", "prometheus.yml: not valid YAML")

    def test_unit_without_exec_start(self):
        self.edit("systemd/anxin-agent.service", "ExecStart=", "#ExecStart=")
        self.assertFails("manifests", "[Service] has no ExecStart")


if __name__ == "__main__":
    unittest.main()
