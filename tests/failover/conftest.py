"""The ``failover`` marker (tests/failover/)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "failover: runs a real Patroni + etcd cluster (tests/failover/ha.py); skipped when "
        "Patroni, etcd or PostgreSQL 15 is missing, unless CI=true (then it fails)",
    )
