"""Secrets held by the server and signing-secret rotation (issue 19 item 6): a webhook header
``{"secret": NAME}`` resolved by the worker from its environment or secrets directory at send
time, never stored resolved, never returned by the API, redacted from the attempt's error; a
tenant's signing secret rotated with an overlap window during which both signatures are sent,
verified by a real local receiver with the documented ``verify``."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from duetime import AsyncApp, Retry, Settings, ValidationError
from duetime._types import RunState
from duetime.api import create_api
from duetime.targets.secrets import (
    REDACTED_SECRET,
    SecretMissing,
    redact,
    resolve_secrets,
)
from tests.targets.receiver import Receiver, Reply
from tests.targets.test_http_target import FAST, YEARLY, Harness, documented_verify

TOKEN = "s3cr3t-token-value-9f1c"


# --- the resolver --------------------------------------------------------------------------------


def test_references_resolve_from_the_environment_then_the_directory(tmp_path: Path) -> None:
    (tmp_path / "FROM_FILE").write_text("file-value\n")
    (tmp_path / "BOTH").write_text("file-loses")
    env = {"DUETIME_SECRET_FROM_ENV": "env-value", "DUETIME_SECRET_BOTH": "env-wins"}
    value = {
        "a": {"secret": "FROM_ENV"},
        "b": [{"secret": "FROM_FILE"}, "plain", {"secret": "BOTH"}],
        "c": {"secret": "x", "other": 1},  # not a reference: two keys
    }
    resolved = resolve_secrets(value, environ=env, directory=str(tmp_path))
    assert resolved.value == {
        "a": "env-value",
        "b": ["file-value", "plain", "env-wins"],
        "c": {"secret": "x", "other": 1},
    }
    assert value["a"] == {"secret": "FROM_ENV"}  # the input is not changed
    assert resolved.redact("got env-value and file-value") == (
        f"got {REDACTED_SECRET} and {REDACTED_SECRET}"
    )
    env_dir = {**env, "DUETIME_SECRETS_DIR": str(tmp_path)}
    assert resolve_secrets({"secret": "FROM_FILE"}, environ=env_dir).value == "file-value"


def test_a_missing_secret_names_itself_never_a_value(tmp_path: Path) -> None:
    with pytest.raises(SecretMissing, match="DUETIME_SECRET_NOPE") as caught:
        resolve_secrets({"h": {"secret": "NOPE"}}, environ={}, directory=str(tmp_path))
    assert "NOPE" in str(caught.value)


def test_redaction_hides_the_longest_secret_whole() -> None:
    assert redact("abc abcdef", ["abc", "abcdef", ""]) == f"{REDACTED_SECRET} {REDACTED_SECRET}"


# --- end to end: a worker sends the secret; the job and the API show the reference --------------


@pytest.fixture
def secret_env(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "FILE_TOKEN").write_text("from-a-mounted-file\n")
    os.environ["DUETIME_SECRET_CRM_TOKEN"] = TOKEN
    os.environ["DUETIME_SECRETS_DIR"] = str(tmp_path)
    try:
        yield tmp_path
    finally:
        del os.environ["DUETIME_SECRET_CRM_TOKEN"]
        del os.environ["DUETIME_SECRETS_DIR"]


@pytest.fixture
async def harness(store_url: str, receiver: Receiver, secret_env: Path) -> AsyncIterator[Harness]:
    settings = Settings(database_url=store_url, **FAST)  # type: ignore[arg-type]
    async with AsyncApp(settings=settings, migrate=True) as app:
        h = Harness(app, receiver)
        h.start_worker()
        try:
            yield h
        finally:
            await h.stop_workers()


async def test_a_secret_header_is_sent_resolved_but_stored_and_shown_as_a_reference(
    harness: Harness, receiver: Receiver
) -> None:
    url = receiver.plan("/crm", Reply(200))
    headers = {"Authorization": {"secret": "CRM_TOKEN"}, "X-File": {"secret": "FILE_TOKEN"}}
    run = await harness.fire("crm.sync", url, payload={"n": 1}, headers=headers)
    done = await harness.settled(run.id)
    assert done.state is RunState.SUCCEEDED
    [hit] = receiver.hits_of("/crm")
    assert hit.headers["Authorization"] == TOKEN
    assert hit.headers["X-File"] == "from-a-mounted-file"

    job = await harness.app.get("crm.sync")
    assert job.target is not None
    assert job.target["headers"] == headers
    assert done.target is not None
    assert done.target["headers"] == headers

    api = create_api(harness.app, auth_required=False)
    transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1/api/v1") as c:
        shown = (await c.get(f"/jobs/{job.id}")).json()
        assert shown["target"]["headers"] == headers  # the reference is no secret
        assert TOKEN not in (await c.get(f"/runs/{run.id}")).text
        assert TOKEN not in (await c.get("/jobs")).text
        # written back as read: the reference is kept
        patched = await c.patch(f"/jobs/{job.id}", json={"target": shown["target"]})
        assert patched.status_code == 200, patched.text
        assert patched.json()["target"]["headers"] == headers


async def test_a_secret_echoed_back_is_redacted_from_the_attempts_error(
    harness: Harness, receiver: Receiver
) -> None:
    url = receiver.plan("/echo", Reply(400, body=f"bad token {TOKEN} refused"))
    run = await harness.fire("crm.echo", url, headers={"Authorization": {"secret": "CRM_TOKEN"}})
    done = await harness.settled(run.id)
    assert done.state is RunState.DEAD
    [attempt] = await harness.app.attempts(run.id)
    assert attempt.error_message is not None
    assert f"bad token {REDACTED_SECRET} refused" in attempt.error_message
    assert TOKEN not in attempt.error_message
    assert TOKEN not in (attempt.traceback or "")


async def test_a_missing_secret_fails_the_attempt_naming_it(
    harness: Harness, receiver: Receiver
) -> None:
    url = receiver.plan("/none", Reply(200))
    run = await harness.fire(
        "crm.none",
        url,
        headers={"Authorization": {"secret": "NOT_SET"}},
        retry=Retry(max_attempts=1),
    )
    done = await harness.settled(run.id)
    assert done.state is RunState.DEAD
    [attempt] = await harness.app.attempts(run.id)
    assert "DUETIME_SECRET_NOT_SET" in (attempt.error_message or "")
    assert receiver.hits_of("/none") == []


async def test_a_malformed_reference_is_refused_at_registration(harness: Harness) -> None:
    with pytest.raises(ValidationError) as caught:
        await harness.app.schedule(
            "crm.bad",
            target={
                "type": "http",
                "url": "http://127.0.0.1/x",
                "headers": {"A": {"secret": "1x"}},
            },
            cron=YEARLY,
        )
    assert caught.value.field == "target.headers.A"


# --- rotation: both signatures during the overlap ------------------------------------------------


async def test_rotation_sends_both_signatures_until_the_window_ends(
    harness: Harness, receiver: Receiver
) -> None:
    app = harness.app
    verify = documented_verify()
    old = await app.webhook_secret()
    rotation = await app.rotate_webhook_secret(3600)
    assert rotation.secret != old
    assert await app.webhook_secret() == rotation.secret
    # the worker has sent nothing yet, so has no secret cached (it keeps one for 10 s)
    url = receiver.plan("/signed", Reply(200))
    await harness.job("rotated", url)
    runs = []
    for _ in range(2):
        runs.append(await app.trigger("rotated"))
    for run in runs:
        assert (await harness.settled(run.id)).state is RunState.SUCCEEDED
    for hit in receiver.hits_of("/signed"):
        signatures = hit.headers["Duetime-Signature"].split(",")
        assert len(signatures) == 2
        assert verify(old, hit.headers, hit.body)  # a receiver not yet switched
        assert verify(rotation.secret, hit.headers, hit.body)  # one switched
        assert verify([rotation.secret, old], hit.headers, hit.body)  # one accepting both
        assert not verify("another", hit.headers, hit.body)

    later = rotation.previous_until + timedelta(seconds=1)
    assert await app.store.tenant_signing_secrets("default", now=later) == [rotation.secret]
    during = rotation.previous_until - timedelta(seconds=1)
    assert await app.store.tenant_signing_secrets("default", now=during) == [
        rotation.secret,
        old,
    ]


async def test_rotation_over_the_api_and_its_bounds(harness: Harness) -> None:
    api = create_api(harness.app, auth_required=False)
    transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1/api/v1") as c:
        answer = await c.post(
            "/tenants/default/webhook-secret/rotate", json={"overlap_seconds": 600}
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["secret"] == await harness.app.webhook_secret()
        short = await c.post("/tenants/default/webhook-secret/rotate", json={"overlap_seconds": 1})
        assert short.status_code == 422
        assert "overlap_seconds" in json.dumps(short.json())
    with pytest.raises(ValidationError, match="overlap"):
        await harness.app.rotate_webhook_secret(5)


async def test_a_secret_with_a_line_break_is_refused_unsent(
    harness: Harness, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUETIME_SECRET_SPLIT", "abc\r\nX-Injected: 1")
    url = receiver.plan("/split", Reply(200))
    run = await harness.fire("crm.split", url, headers={"Authorization": {"secret": "SPLIT"}})
    done = await harness.settled(run.id)
    assert done.state is RunState.DEAD
    [attempt] = await harness.app.attempts(run.id)
    assert "line break" in (attempt.error_message or "")
    assert "X-Injected" not in (attempt.error_message or "")
    assert receiver.hits_of("/split") == []
