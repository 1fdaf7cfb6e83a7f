"""duetime needs PostgreSQL 15 (``UNIQUE NULLS NOT DISTINCT``, migration 013): an older server
is refused with a message that says so before any migration starts."""

from __future__ import annotations

import pytest

from duetime.store.postgres.store import MIN_SERVER_VERSION, server_version_problem


@pytest.mark.parametrize(
    ("version", "shown"), [(140011, "14.11"), (130000, "13.0"), (149999, "14.9999")]
)
def test_an_older_server_is_named_in_the_refusal(version: int, shown: str) -> None:
    assert server_version_problem(version) == (
        f"duetime needs PostgreSQL 15 or newer; this server is PostgreSQL {shown}"
    )


@pytest.mark.parametrize("version", [MIN_SERVER_VERSION, 150020, 170002])
def test_postgresql_15_and_newer_are_accepted(version: int) -> None:
    assert server_version_problem(version) is None
