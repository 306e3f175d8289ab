"""The monitoring that ships (deploy/monitoring/): the alert rules pass promtool's checks and
unit tests (each alert fires and clears), the PrometheusRule holds the same groups, every
expression of the rules and the dashboard names a metric /metrics exports, and every alert
links a section of docs/operations.md."""

import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from jlg_pipeline.adapters.metrics_snapshot import MetricsSnapshot
from jlg_pipeline.adapters.orchestrator_health import Instigator, OrchestratorSnapshot
from jlg_pipeline.adapters.service_view import Look
from jlg_pipeline.domain.service_view import Budget, ViewState
from tests.support import ROOT
from web.metrics import Metrics, Reading, database_figures, orchestrator_figures

MONITORING = ROOT / "deploy" / "monitoring"
NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
# PromQL words that look like metric names but are not.
PROMQL = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}


def _exported() -> set[str]:
    """Every series name /metrics can show, from the real collectors with one value each."""
    metrics = Metrics()
    metrics.requests.labels("/readyz", "GET", "200").inc()
    metrics.latency.labels("/readyz", "GET").observe(0.01)
    orchestrator = OrchestratorSnapshot(
        {"SENSOR": 1.0}, (Instigator("join_link_sqs_sensor", "sensor", 1.0, 0),), {}, 0.0
    )
    view = Look(
        ViewState(down_since=NOW, changed_at=NOW, paused_until=NOW, resumed_at=NOW),
        NOW,
        Budget(25.0, 25.0),
    )
    database = MetricsSnapshot(
        attempts={("sqs", "COMPLETED"): 1},
        open_attempts={"sqs": 1},
        set_aside={"watchdog": 1},
        service=view,
        service_backlog=3,
    )
    readings: list[Reading[Any]] = [
        Reading("database", lambda: database, database_figures),
        Reading("dagster", lambda: orchestrator, orchestrator_figures),
    ]
    collector = metrics.watch(readings, refresh_s=3600)
    try:
        return {s.name for family in metrics.registry.collect() for s in family.samples}
    finally:
        collector.stop()


def _metric_names(expr: str) -> set[str]:
    without_strings = re.sub(r'"[^"]*"', "", expr)
    without_labels = re.sub(r"\{[^}]*\}", "", without_strings)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\s*[\[{)\s]|$)", without_labels))
    return {w for w in words if w.startswith("jlg_")} | {
        w for w in words if "_" in w and w not in PROMQL and not w.startswith("jlg_")
    }


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((MONITORING / "rules.yaml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    config_map = yaml.safe_load((MONITORING / "grafana-dashboard.yaml").read_text())
    assert config_map["kind"] == "ConfigMap"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    [dashboard_json] = config_map["data"].values()
    dashboard = json.loads(dashboard_json)
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_every_expression_names_metrics_the_app_exports() -> None:
    exported = _exported()
    exprs = [rule["expr"] for rule in _rules()] + _dashboard_exprs()
    assert len(exprs) > 20
    for expr in exprs:
        names = _metric_names(expr)
        assert names, expr
        assert names <= exported, f"{expr}: {sorted(names - exported)} not on /metrics"


def test_the_names_check_catches_a_metric_nobody_exports() -> None:
    assert _metric_names('rate(jlg_nothing_total{status="5.."}[5m]) > 0') == {"jlg_nothing_total"}
    assert not _metric_names("jlg_nothing_total") <= _exported()


def test_every_alert_links_a_section_that_says_what_to_do() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", operations, re.MULTILINE)
    }
    rules = _rules()
    assert {rule["alert"] for rule in rules} >= {
        "JlgDagsterDaemonDown",
        "JlgSensorNotTicking",
        "JlgSensorFailing",
        "JlgSessionsOverdue",
        "JlgFailedSessionsGrowing",
        "JlgScheduleSyncBacklogOld",
        "JlgDatabaseReadingStale",
        "JlgAdminErrors",
    }
    for rule in rules:
        page, _, anchor = rule["annotations"]["runbook"].partition("#")
        assert page == "docs/operations.md"
        assert anchor in anchors, f"{rule['alert']}: no section #{anchor}"


def test_the_prometheus_rule_holds_the_same_groups() -> None:
    rule = yaml.safe_load((MONITORING / "prometheus-rule.yaml").read_text())
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    rules = yaml.safe_load((MONITORING / "rules.yaml").read_text())
    assert rule["spec"]["groups"] == rules["groups"]


def test_promtool_checks_the_rules_and_every_alert_fires_and_clears() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing: .ci/run installs Debian's prometheus package")
        pytest.skip("promtool not installed (Debian: apt-get install prometheus)")
    for argv in (["check", "rules", "rules.yaml"], ["test", "rules", "rules.test.yaml"]):
        done = subprocess.run(
            [promtool, *argv], cwd=MONITORING, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (MONITORING / "rules.test.yaml").read_text()))
    assert tested == {rule["alert"] for rule in _rules()}, "every alert has a unit test"
