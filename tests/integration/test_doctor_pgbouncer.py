"""``duetime doctor`` on PgBouncer (tests/pgbouncer_kit.py, transaction pooling): it tells a
direct URL from PgBouncer, warns when DUETIME_PGBOUNCER does not match what the URL does, and
checks the listen URL under transaction pooling."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from duetime.cli import cli
from duetime.store import probe_pooler
from tests.conftest import make_pg_schema, pgbouncer_alias
from tests.pgbouncer_kit import PgBouncer, pgbouncer_binary

pytestmark = [pytest.mark.postgres, pytest.mark.pgbouncer]


@pytest.fixture(scope="module")
def bouncer(pg_database: str) -> Iterator[PgBouncer]:
    if pgbouncer_binary() is None:
        from tests.conftest import _unavailable

        _unavailable("pgbouncer is not installed (apt-get install -y pgbouncer)")
    started = PgBouncer(pg_database, pool_size=2)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def urls(bouncer: PgBouncer, pg_database: str) -> tuple[str, str]:
    """(direct, through PgBouncer) URLs of one schema."""
    direct = make_pg_schema(pg_database)
    return direct, pgbouncer_alias(bouncer, direct)


def doctor(
    monkeypatch: pytest.MonkeyPatch, url: str, *, pgbouncer: str = "", listen: str = ""
) -> dict[str, dict[str, Any]]:
    monkeypatch.setenv("DUETIME_PGBOUNCER", pgbouncer)
    monkeypatch.setenv("DUETIME_LISTEN_URL", listen)
    result = CliRunner().invoke(cli, ["doctor", "--db", url, "--json"], catch_exceptions=False)
    assert "Traceback" not in result.output
    return {c["check"]: c for c in json.loads(result.stdout)["checks"]}


async def test_the_probe_tells_pgbouncer_from_postgresql(urls: tuple[str, str]) -> None:
    direct, through = urls
    seen = await probe_pooler(through)
    assert seen.shares_sessions
    assert (seen.console.value, seen.pool_mode) == ("open", "transaction")
    assert seen.transaction_pooling
    plain = await probe_pooler(direct)
    assert not plain.shares_sessions
    assert plain.console.value == "absent"
    assert not plain.pgbouncer


def test_transaction_pooling_without_the_setting_is_a_warning(
    urls: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    found = doctor(monkeypatch, urls[1])
    assert found["pgbouncer"]["status"] == "warn"
    assert "transaction pooling mode" in found["pgbouncer"]["detail"]
    assert "DUETIME_PGBOUNCER=transaction" in str(found["pgbouncer"]["fix"])
    assert found["listen"]["status"] == "warn"
    assert "DUETIME_LISTEN_URL" in str(found["listen"]["fix"])


def test_transaction_pooling_with_the_setting_and_a_direct_listen_url_is_ok(
    urls: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    direct, through = urls
    found = doctor(monkeypatch, through, pgbouncer="transaction", listen=direct)
    assert found["pgbouncer"]["status"] == "ok", found["pgbouncer"]
    assert found["listen"]["status"] == "ok", found["listen"]
    missing = doctor(monkeypatch, through, pgbouncer="transaction")
    assert missing["pgbouncer"]["status"] == "ok"
    assert missing["listen"]["status"] == "warn"
    assert "workers claim by polling" in missing["listen"]["detail"]


def test_a_listen_url_through_pgbouncer_is_a_warning(
    urls: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    through = urls[1]
    found = doctor(monkeypatch, through, pgbouncer="transaction", listen=through)
    assert found["listen"]["status"] == "warn"
    assert "goes through transaction pooling too" in found["listen"]["detail"]


def test_a_direct_url_is_no_pgbouncer(
    urls: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = urls[0]
    found = doctor(monkeypatch, direct)
    assert found["pgbouncer"]["status"] == "ok"
    assert "no PgBouncer detected" in found["pgbouncer"]["detail"]
    assert "listen" not in found
    needless = doctor(monkeypatch, direct, pgbouncer="transaction", listen=direct)
    assert needless["pgbouncer"]["status"] == "warn"
    assert "is PostgreSQL itself" in needless["pgbouncer"]["detail"]
