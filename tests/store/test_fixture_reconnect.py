"""The suite's own PostgreSQL fixtures survive the server dropping their connection (as a
restart in the middle of a run does): the next test gets a fresh, working connection instead
of a setup error."""

from __future__ import annotations

import psycopg
import pytest
from tests.conftest import SharedSchema, pg_base_url

pytestmark = pytest.mark.postgres


def test_shared_schema_connection_is_reopened_after_the_server_drops_it(
    pg_shared_schema: SharedSchema,
) -> None:
    before = pg_shared_schema.connection()
    pid = before.info.backend_pid
    with psycopg.connect(pg_base_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    after = pg_shared_schema.connection()

    assert after.info.backend_pid != pid
    assert after.execute("SELECT 1").fetchone() == (1,)
