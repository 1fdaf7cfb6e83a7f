"""The shipped Grafana dashboard and Prometheus rules parse and name only metrics duetime
exports."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from duetime._monitoring import ClusterStats, TenantCounts
from duetime.metrics import Metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAME = re.compile(r"\bduetime_[a-z_]+")


def exported() -> set[str]:
    registry = CollectorRegistry()
    m = Metrics(registry)
    now = datetime.now(UTC)
    m.cluster.stats = ClusterStats(now, [TenantCounts("t")], [], 0, 0, None, [], [], None)
    m.materialized("t", "k", now, now)
    m.started("t", "k", now, now)
    m.attempt_ended("t", "k", "failed", 0.1)
    m.run_ended("t", "k", "dead", "x")
    m.run_ended("t", "k", "succeeded")
    m.skipped("t", "k", "misfire_skip")
    m.partitions_held.labels("n").set(128)
    m.lease_renewal_gap.labels("leader").observe(1.0)
    return {s.name for family in registry.collect() for s in family.samples}


def test_grafana_dashboard_uses_exported_metrics() -> None:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    names = {n for e in exprs for n in NAME.findall(e)}
    assert names <= exported(), names - exported()


def test_prometheus_rules_use_exported_metrics() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus-alerts.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert all(r.get("alert") for g in rules["groups"] for r in g["rules"])
    names = {n for e in exprs for n in NAME.findall(e)}
    assert names <= exported(), names - exported()
