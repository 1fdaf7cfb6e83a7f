"""The pytest plugin from a user's point of view: a test file of theirs, run by pytest (in a
subprocess, through ``pytester``), uses the ``duetime_*`` fixtures and passes — on a SQLite file
by default and on a PostgreSQL schema when given a URL (which is dropped afterwards)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

USER_APP = """
from duetime import Retry
from duetime.targets.python import TaskRegistry

registry = TaskRegistry()
charged = []

def charge(ctx, payload):
    charged.append((ctx.attempt, payload["order"]))
    if ctx.attempt == 1:
        raise RuntimeError("card network down")

registry.register("billing.charge", charge)
RETRY = Retry(max_attempts=3, backoff_base=30, backoff_factor=2, backoff_cap=300)
"""

USER_CONFTEST = """
import pytest
import myapp

@pytest.fixture
def duetime_registry():
    return myapp.registry
"""

USER_TESTS = """
from datetime import timedelta

import pytest

import myapp
from duetime import RunState
from duetime.testing import assert_scheduled, assert_triggered, drain, drain_sync, runs_of


@pytest.mark.asyncio
async def test_nightly_charge_retries(duetime_app, duetime_clock):
    start = duetime_clock.now()
    job = await duetime_app.schedule(
        "charge", task="billing.charge", cron="0 2 * * *", payload={"order": 7},
        retry=myapp.RETRY,
    )
    two = start.replace(hour=2, minute=0)
    two = two if two > start else two + timedelta(days=1)
    await assert_scheduled(duetime_app, job, at=two)
    duetime_clock.set(two)
    ran = await drain(duetime_app)
    assert [(r.state, r.attempt) for r in ran] == [(RunState.SCHEDULED, 1)]
    duetime_clock.advance(seconds=30)  # the first backoff's ceiling
    ran = await drain(duetime_app)
    assert [(r.state, r.attempt) for r in ran] == [(RunState.SUCCEEDED, 2)]
    await assert_triggered(duetime_app, job, count=1)
    assert myapp.charged == [(1, 7), (2, 7)]
    assert len(await runs_of(duetime_app, job)) == 1


def test_the_blocking_app(duetime_sync_app, duetime_clock):
    duetime_sync_app.schedule("now", task="duetime.noop", now=True)
    assert [r.state for r in drain_sync(duetime_sync_app)] == [RunState.SUCCEEDED]


def test_a_test_without_the_fixtures_is_left_alone():
    assert True
"""


PLUGINS = ["-p", "duetime.testing.plugin", "-p", "pytest_asyncio.plugin", "-p", "no:cacheprovider"]
"""The plugins of the user's run, named: whether pytest would find the entry point depends on
how this checkout is installed (a fresh ``pip install -e .`` or a build writes it), so the run
loads none by itself (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``) and the entry point is checked in
pyproject.toml instead."""


def user_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(myapp=USER_APP, conftest=USER_CONFTEST, test_billing=USER_TESTS)


def test_a_users_tests_pass_on_sqlite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_project(pytester, monkeypatch)
    result = pytester.runpytest_subprocess(*PLUGINS)
    result.assert_outcomes(passed=3)


@pytest.mark.postgres
def test_a_users_tests_pass_on_a_postgres_schema_dropped_afterwards(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, pg_database: str
) -> None:
    import psycopg

    def schemas() -> set[str]:
        with psycopg.connect(pg_database, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'duetime_test_%'"
            )
            return {r[0] for r in rows}

    before = schemas()
    user_project(pytester, monkeypatch)
    result = pytester.runpytest_subprocess(*PLUGINS, f"--duetime-database-url={pg_database}")
    result.assert_outcomes(passed=3)
    assert schemas() == before


def test_the_plugin_has_no_autouse_fixtures_and_documents_each_one() -> None:
    from duetime.testing import plugin

    fixtures = {
        name: getattr(plugin, name)
        for name in dir(plugin)
        if name.startswith("duetime_") and callable(getattr(plugin, name))
    }
    assert set(fixtures) == {
        "duetime_app",
        "duetime_clock",
        "duetime_database_url",
        "duetime_registry",
        "duetime_sync_app",
    }
    for name in fixtures:
        assert f"``{name}``" in (plugin.__doc__ or ""), name
    assert "autouse=True" not in Path(plugin.__file__).read_text(encoding="utf-8")


def test_the_entry_point_is_declared() -> None:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {"duetime": "duetime.testing.plugin"}


def test_loading_the_plugin_loads_none_of_the_helpers() -> None:
    """What pytest imports for the entry point: the plugin and its package, not the helpers
    (they load when a test asks for a fixture or imports them)."""
    code = (
        "import sys, duetime.testing.plugin; "
        "print(sorted(m for m in sys.modules if m.startswith('duetime.testing')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "['duetime.testing', 'duetime.testing.plugin']"
