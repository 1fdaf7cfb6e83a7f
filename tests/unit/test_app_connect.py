"""The Python App on a database it cannot open (issue 17): a duetime
:class:`~duetime.errors.ConnectError` with a one-line reason and no password — never a raw
``PoolTimeout`` after 30 s; errors that waiting cannot fix end at once, whatever
``startup_wait`` is. Guard timeouts make a hang fail; no durations are asserted."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from tests.conftest import pg_base_url, pg_unavailable_reason

from duetime import App, AsyncApp
from duetime._config import Settings
from duetime.errors import ConnectError, DuetimeError

GUARD = 30.0


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"postgresql://postgres:s3cret@127.0.0.1:{port}/postgres"


async def open_error(url: str, startup_wait: float = 0.0) -> ConnectError:
    app = AsyncApp(settings=Settings(database_url=url, startup_wait=startup_wait))
    with pytest.raises(ConnectError) as caught:
        await asyncio.wait_for(app.open(), GUARD)
    return caught.value


async def test_refused_port_is_a_connect_error_without_the_password() -> None:
    exc = await open_error(refused_url())
    assert isinstance(exc, DuetimeError)
    assert exc.retryable
    assert "refused" in str(exc)
    assert "s3cret" not in str(exc)
    assert "postgres:***@127.0.0.1" in str(exc)
    assert "\n" not in str(exc)


async def test_refused_port_is_retried_for_startup_wait_then_a_connect_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exc = await open_error(refused_url(), startup_wait=1.0)
    assert exc.retryable
    announced = [r.getMessage() for r in caplog.records if "retrying until" in r.getMessage()]
    assert announced
    assert "(attempt 1, retrying until" in announced[0]
    assert all("s3cret" not in line for line in announced)


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("user", "dbname", "needle"),
    [
        ("duetime_no_such_role", None, 'role "duetime_no_such_role" does not exist'),
        (None, "duetime_no_such_db", 'database "duetime_no_such_db" does not exist'),
    ],
)
async def test_unknown_role_or_database_ends_at_once(
    user: str | None, dbname: str | None, needle: str
) -> None:
    reason = pg_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    parts = urlsplit(pg_base_url())
    netloc = parts.netloc if user is None else f"{user}@{parts.netloc.rpartition('@')[2]}"
    path = parts.path if dbname is None else f"/{dbname}"
    url = urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))
    exc = await open_error(url, startup_wait=600.0)  # not waited for: waiting cannot fix it
    assert not exc.retryable
    assert needle in str(exc)


def test_sync_app_raises_the_connect_error(tmp_path: Path) -> None:
    app = App(settings=Settings(database_url=str(tmp_path)))  # a directory
    try:
        with pytest.raises(ConnectError, match="is a directory"):
            app.jobs.find()
    finally:
        app.close()


async def test_non_database_file_is_a_connect_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    exc = await open_error(str(path))
    assert not exc.retryable
    assert "not a SQLite database" in str(exc)
