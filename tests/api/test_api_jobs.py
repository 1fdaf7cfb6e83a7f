"""Jobs over HTTP against a real server process, on both stores: create, list, read, change,
delete, pause, resume, cancel, trigger (idempotent), and their errors."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tests.api.apikit import Keys, ServerProcess, ok, problem, unique

pytestmark = pytest.mark.slow


def new_job(client, name: str | None = None, **fields) -> dict:
    body = {
        "name": name or unique(),
        "task": "api.test",
        "cron": "0 3 * * *",
        "allow_unregistered": True,
        **fields,
    }
    return ok(client.post("/jobs", json=body), 201)


def test_create_returns_the_full_job(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        name = unique()
        job = new_job(
            c,
            name,
            tz="Europe/Paris",
            payload={"ledger": "eu"},
            retry={"max_attempts": 5, "backoff_base": 2},
            priority=7,
            jitter=2.5,
            timeout=30,
            misfire="skip",
            misfire_grace=10,
            overlap="allow",
            max_concurrency=3,
            queue="billing",
            tags=["nightly", "eu"],
            metadata={"owner": "ops"},
        )
    uuid.UUID(job["id"])
    assert job["name"] == name
    assert job["tenant"] == "acme"
    assert job["status"] == "active"
    assert job["schedule"] == {
        "kind": "cron",
        "cron": "0 3 * * *",
        "tz": "Europe/Paris",
        "at": None,
        "every_seconds": None,
        "every_calendar": None,
        "anchor": None,
    }
    next_fire = datetime.fromisoformat(job["next_fire_at"])
    assert next_fire.utcoffset() == timedelta(0)
    assert job["next_fire_at"].endswith("Z")
    assert job["retry"] == {
        "max_attempts": 5,
        "backoff_base": 2.0,
        "backoff_factor": 2.0,
        "backoff_cap": 600.0,
        "within": None,
        "permanent_on": [],
        "retry_on": [],
        "permanent_on_status": [],
        "retry_on_status": [],
    }
    assert (job["priority"], job["timeout"], job["misfire"], job["misfire_grace"]) == (
        7,
        30.0,
        "skip",
        10.0,
    )
    assert (job["overlap"], job["max_concurrency"], job["queue"]) == ("allow", 3, "billing")
    assert job["jitter"] == 2.5
    assert job["tags"] == ["nightly", "eu"]
    assert job["metadata"] == {"owner": "ops"}
    assert job["payload"] == {"ledger": "eu"}


def test_at_and_every_take_iso_8601(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        before = datetime.now(UTC)
        in3h = new_job(c, cron=None, at="PT3H")
        assert in3h["schedule"]["kind"] == "at"
        fires = datetime.fromisoformat(in3h["next_fire_at"])
        assert (
            timedelta(hours=3) - timedelta(seconds=5)
            < fires - before
            < timedelta(hours=3, seconds=30)
        )
        instant = new_job(c, cron=None, at="2031-12-01T10:00:00+01:00")
        assert instant["next_fire_at"] == "2031-12-01T09:00:00Z"
        iso_every = new_job(c, cron=None, every="PT15M")
        assert iso_every["schedule"]["every_seconds"] == 900.0
        seconds = new_job(c, cron=None, every=30)
        assert seconds["schedule"]["every_seconds"] == 30.0
        now = new_job(c, cron=None, now=True)
        assert now["schedule"]["kind"] == "now"


def test_create_with_a_taken_name_is_409(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = new_job(c)
        problem(
            c.post(
                "/jobs",
                json={"name": job["name"], "task": "x", "every": 5, "allow_unregistered": True},
            ),
            409,
        )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"cron": "0 3 * *"}, "cron", id="cron-of-four-fields"),
        pytest.param({}, "schedule", id="no-schedule"),
        pytest.param({"cron": "0 3 * * *", "every": 5}, "schedule", id="two-schedules"),
        pytest.param({"at": "tomorrow"}, "at", id="at-not-a-date"),
        pytest.param({"at": "2030-01-01T10:00:00"}, "at", id="at-without-a-zone"),
        pytest.param({"every": "PT"}, "every", id="every-empty-duration"),
        pytest.param({"every": 5, "tz": "Mars/Base"}, "tz", id="unknown-tz"),
        pytest.param({"every": 5, "priority": "high"}, "priority", id="priority-not-a-number"),
        pytest.param({"every": 5, "priority": 1001}, "priority", id="priority-too-high"),
        pytest.param({"every": 5, "priority": -1001}, "priority", id="priority-too-low"),
        pytest.param({"every": 5, "jitter": -1}, "jitter", id="jitter-negative"),
        pytest.param({"every": 5, "jitter": 3601}, "jitter", id="jitter-over-an-hour"),
        pytest.param(
            {"every": 5, "retry": {"max_attempts": 0}},
            "retry.max_attempts",
            id="retry-without-attempts",
        ),
        pytest.param({"every": 5, "colour": "red"}, "colour", id="unknown-field"),
        pytest.param({"every": 5, "misfire": "never"}, "misfire", id="unknown-misfire"),
        pytest.param({"name": "", "every": 5}, "name", id="empty-name"),
        pytest.param({"every": 5, "queue": "a\u0000b"}, "queue", id="queue-with-nul"),
        pytest.param({"every": 5, "payload": "x" * 70_000}, "payload", id="payload-too-big"),
    ],
)
def test_create_refuses_a_bad_field_naming_it(
    server: ServerProcess, keys: Keys, fields: dict, field: str
) -> None:
    base = {"name": unique(), "task": "api.test", "allow_unregistered": True}
    with server.client(keys.acme_operator) as c:
        problem(c.post("/jobs", json={**base, **fields}), 422, field)


def test_create_with_an_unregistered_task_is_422(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        unregistered = {"name": unique(), "task": "never.registered", "every": 5}
        problem(c.post("/jobs", json=unregistered), 422, "task")


def test_create_with_an_at_long_past_needs_allow_past(server: ServerProcess, keys: Keys) -> None:
    base = {"task": "api.test", "allow_unregistered": True, "at": "2020-01-01T00:00:00Z"}
    with server.client(keys.acme_operator) as c:
        problem(c.post("/jobs", json={"name": unique(), **base}), 422, "at")
        job = new_job(c, None, at=base["at"], cron=None, allow_past=True)
        assert job["next_fire_at"].startswith("2020-01-01T00:00:00")


def test_create_with_a_body_that_is_not_json_is_422(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        problem(
            c.post("/jobs", content=b"{not json", headers={"content-type": "application/json"}), 422
        )


def test_list_filters_and_pages(server: ServerProcess, keys: Keys) -> None:
    prefix = unique("list")
    with server.client(keys.acme_operator) as c:
        made = [new_job(c, f"{prefix}-{i}", tags=["even"] if i % 2 == 0 else []) for i in range(5)]
        ok(c.post(f"/jobs/{made[1]['id']}/pause"))
        page = ok(c.get("/jobs", params={"name_prefix": prefix}))
        assert [j["name"] for j in page["items"]] == [f"{prefix}-{i}" for i in range(5)]
        assert page["next_cursor"] is None
        names: list[str] = []
        cursor = None
        while True:
            params = {"name_prefix": prefix, "limit": 2, **({"cursor": cursor} if cursor else {})}
            page = ok(c.get("/jobs", params=params))
            names += [j["name"] for j in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert names == [f"{prefix}-{i}" for i in range(5)]
        tagged = ok(c.get("/jobs", params={"name_prefix": prefix, "tag": "even"}))
        assert [j["name"] for j in tagged["items"]] == [f"{prefix}-{i}" for i in (0, 2, 4)]
        paused = ok(c.get("/jobs", params={"name_prefix": prefix, "status": "paused"}))
        assert [j["name"] for j in paused["items"]] == [f"{prefix}-1"]
        problem(c.get("/jobs", params={"status": "sleeping"}), 422, "status")
        problem(c.get("/jobs", params={"limit": 0}), 422, "limit")
        problem(c.get("/jobs", params={"limit": 1001}), 422, "limit")


def test_get_patch_delete(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = new_job(c, payload={"v": 1})
        url = f"/jobs/{job['id']}"
        assert ok(c.get(url)) == job
        changed = ok(c.patch(url, json={"payload": {"v": 2}, "priority": 3}))
        assert changed["payload"] == {"v": 2}
        assert changed["priority"] == 3
        assert changed["next_fire_at"] == job["next_fire_at"]  # schedule untouched
        assert changed["schedule"] == job["schedule"]
        assert changed["id"] == job["id"]
        rescheduled = ok(c.patch(url, json={"cron": "30 4 * * *", "tz": "Asia/Tokyo"}))
        assert rescheduled["schedule"]["cron"] == "30 4 * * *"
        assert rescheduled["schedule"]["tz"] == "Asia/Tokyo"
        assert rescheduled["payload"] == {"v": 2}
        every = ok(c.patch(url, json={"every": 60}))
        assert every["schedule"]["kind"] == "every"
        assert every["schedule"]["cron"] is None
        retried = ok(c.patch(url, json={"retry": {"max_attempts": 9}}))
        assert retried["retry"]["max_attempts"] == 9
        assert retried["retry"]["backoff_base"] == job["retry"]["backoff_base"]
        problem(c.patch(url, json={"name": "renamed"}), 422, "name")
        problem(c.patch(url, json={"cron": "nonsense"}), 422, "cron")
        assert ok(c.get(url))["schedule"]["kind"] == "every"  # a refused change changed nothing
        assert c.delete(url).status_code == 204
        problem(c.get(url), 404)
        problem(c.delete(url), 404)


@pytest.mark.parametrize(
    "job_id",
    [
        pytest.param("not-a-uuid", id="not-a-uuid"),
        pytest.param(str(uuid.uuid4()), id="unknown-uuid"),
        pytest.param("1", id="number"),
        pytest.param("%00", id="nul"),
    ],
)
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        pytest.param("GET", "", None, id="get"),
        pytest.param("PATCH", "", {"priority": 1}, id="patch"),
        pytest.param("DELETE", "", None, id="delete"),
        pytest.param("POST", "/pause", None, id="pause"),
        pytest.param("POST", "/resume", None, id="resume"),
        pytest.param("POST", "/cancel", None, id="cancel"),
        pytest.param("POST", "/trigger", None, id="trigger"),
        pytest.param("GET", "/runs", None, id="runs"),
    ],
)
def test_unknown_or_malformed_job_ids_are_404(
    server: ServerProcess, keys: Keys, job_id: str, method: str, path: str, body: dict | None
) -> None:
    with server.client(keys.acme_operator) as c:
        problem(c.request(method, f"/jobs/{job_id}{path}", json=body), 404)


def test_pause_resume_cancel_and_illegal_moves(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = new_job(c)
        url = f"/jobs/{job['id']}"
        assert ok(c.post(f"{url}/pause"))["status"] == "paused"
        assert ok(c.post(f"{url}/pause"))["status"] == "paused"  # already paused: no change
        resumed = ok(c.post(f"{url}/resume"))
        assert resumed["status"] == "active"
        assert resumed["next_fire_at"]
        assert ok(c.post(f"{url}/cancel"))["status"] == "cancelled"
        problem(c.post(f"{url}/pause"), 409)
        problem(c.post(f"{url}/resume"), 409)
        problem(c.post(f"{url}/trigger"), 409)
        problem(c.patch(url, json={"status": "active"}), 422, "status")


def test_trigger_is_idempotent_per_key(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = new_job(c, payload={"from": "job"})
        url = f"/jobs/{job['id']}/trigger"
        key = {"Idempotency-Key": unique("key")}
        first = ok(c.post(url, headers=key, json={"payload": {"n": 1}}), 201)
        assert first["trigger"] == "manual"
        assert first["state"] == "scheduled"
        assert first["payload"] == {"n": 1}
        assert first["idempotency_key"] == key["Idempotency-Key"]
        again = ok(c.post(url, headers=key, json={"payload": {"n": 1}}), 200)
        assert again["id"] == first["id"]
        problem(c.post(url, headers=key, json={"payload": {"n": 2}}), 409)
        problem(c.post(url, headers=key), 409)
        plain = [ok(c.post(url), 201) for _ in range(2)]
        assert plain[0]["id"] != plain[1]["id"]
        assert plain[0]["payload"] == {"from": "job"}
        prioritised = ok(c.post(url, json={"priority": 9}), 201)
        assert prioritised["priority"] == 9
        problem(c.post(url, json={"priority": 5000}), 422, "priority")
        problem(c.post(url, headers={"Idempotency-Key": "x" * 201}), 422, "Idempotency-Key")
        problem(c.post(url, json={"payload": 1, "extra": True}), 422, "extra")
        ok(c.post(f"/jobs/{job['id']}/pause"))
        ok(c.post(url), 201)  # a paused job can still be triggered by hand
        runs = ok(c.get(f"/jobs/{job['id']}/runs"))
        assert len(runs["items"]) == 5
        assert {r["id"] for r in runs["items"]} >= {first["id"], prioritised["id"]}
        assert ok(c.get(f"/jobs/{job['id']}/runs", params={"state": "succeeded"}))["items"] == []
