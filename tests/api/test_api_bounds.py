"""A schedule's bounds over HTTP (issue 16, item 5) against a real server process, on both
stores: ``start_at``, ``end_at``, ``max_runs`` on create, read and PATCH (the runs left shown
and editable), the previews honouring them, and field errors as 422 naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.api.apikit import Keys, ServerProcess, ok, problem, unique

pytestmark = pytest.mark.slow

START = datetime.now(UTC).replace(microsecond=0) + timedelta(days=30)


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def bounded(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    body = {
        "name": unique("bounds"),
        "task": "api.test",
        "every": 3600,
        "allow_unregistered": True,
        **fields,
    }
    job: dict[str, Any] = ok(client.post("/jobs", json=body), 201)
    return job


def test_bounds_are_created_read_and_changed(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = bounded(c, start_at=iso(START), end_at=iso(START + timedelta(hours=5)), max_runs=10)
        assert job["start_at"].startswith(iso(START)[:19])
        assert job["end_at"].startswith(iso(START + timedelta(hours=5))[:19])
        assert (job["max_runs"], job["runs_created"], job["runs_left"]) == (10, 0, 10)
        assert job["next_fire_at"].startswith(iso(START)[:19])  # an every counts from start_at
        changed = ok(c.patch(f"/jobs/{job['id']}", json={"max_runs": 3}))
        assert (changed["max_runs"], changed["runs_left"]) == (3, 3)
        preview = ok(c.post("/schedules/preview", json={"job_id": job["id"], "count": 10}))
        assert [o["utc"][:19] for o in preview["items"]] == [
            iso(START + timedelta(hours=k))[:19] for k in range(3)
        ]
        cleared = ok(c.patch(f"/jobs/{job['id']}", json={"max_runs": None}))
        assert (cleared["max_runs"], cleared["runs_left"]) == (None, None)
        preview = ok(c.post("/schedules/preview", json={"job_id": job["id"], "count": 10}))
        assert len(preview["items"]) == 6  # start_at … end_at, both included
        schema = ok(c.get("/openapi.json"))
        fields = schema["components"]["schemas"]["JobCreate"]["properties"]
        assert {"start_at", "end_at", "max_runs"} <= set(fields)
        assert "runs_left" in schema["components"]["schemas"]["JobOut"]["properties"]


def test_a_job_past_its_end_is_completed(server: ServerProcess, keys: Keys) -> None:
    past = datetime.now(UTC) - timedelta(days=3)
    with server.client(keys.acme_operator) as c:
        job = bounded(c, start_at=iso(past), end_at=iso(past + timedelta(hours=1)))
        assert (job["status"], job["next_fire_at"]) == ("completed", None)
        extended = ok(
            c.patch(f"/jobs/{job['id']}", json={"end_at": iso(START + timedelta(days=1))})
        )
        assert extended["status"] == "active"


def test_a_start_removed_with_an_earlier_end_leaves_runs(server: ServerProcess, keys: Keys) -> None:
    """An every created with start_at counts from it; PATCH start_at null with an end before
    the old start: it counts from the change — active, not completed with no run."""
    with server.client(keys.acme_operator) as c:
        job = bounded(c, start_at=iso(START + timedelta(days=30)))
        end = START + timedelta(days=10)
        changed = ok(c.patch(f"/jobs/{job['id']}", json={"start_at": None, "end_at": iso(end)}))
        assert changed["status"] == "active"
        first = datetime.fromisoformat(changed["next_fire_at"])
        assert timedelta(0) < first - datetime.now(UTC) <= timedelta(hours=1)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"start_at": iso(START), "end_at": iso(START)}, "end_at"),
        ({"start_at": iso(START), "end_at": iso(START - timedelta(hours=1))}, "end_at"),
        ({"max_runs": 0}, "max_runs"),
        ({"max_runs": "3"}, "max_runs"),
        ({"start_at": "2030-01-01T00:00:00"}, "start_at"),  # no offset
        ({"end_at": "soon"}, "end_at"),
        ({"every": None, "cron": None, "at": iso(START), "max_runs": 2}, "max_runs"),
        ({"every": None, "cron": None, "at": iso(START), "start_at": iso(START)}, "start_at"),
    ],
)
def test_bad_bounds_are_422_naming_the_field(
    server: ServerProcess, keys: Keys, fields: dict[str, Any], field: str
) -> None:
    base = {"task": "api.test", "every": 3600, "allow_unregistered": True}
    body = {k: v for k, v in {**base, **fields}.items() if v is not None}
    with server.client(keys.acme_operator) as c:
        problem(c.post("/jobs", json={"name": unique("bad"), **body}), 422, field)
        job = bounded(c)
        if "at" not in fields:
            patch = {k: v for k, v in fields.items() if v is not None}
            problem(c.patch(f"/jobs/{job['id']}", json=patch), 422, field)
