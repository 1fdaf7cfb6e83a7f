"""Calendars and backfill over HTTP (issue 24, items 1, 2 and the backfill cap of 6) against a
real server process, on both stores: calendars created, read, refused with the rule named and
kept while a job names them; a job's calendars shown; backfills idempotent, confirmed when
long, capped per tenant, their runs carrying their origin and their progress readable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.api.apikit import Keys, ServerProcess, ok, problem, unique

pytestmark = pytest.mark.slow


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def test_calendars_are_kept_and_named_by_jobs(server: ServerProcess, keys: Keys) -> None:
    name = unique("cal")
    with server.client(keys.acme_admin) as c:
        body = {"rules": [{"weekdays": ["SAT", "sun"]}, {"holidays": "gb"}], "description": "x"}
        stored = ok(c.put(f"/calendars/{name}", json=body))
        assert stored["rules"] == [{"weekdays": ["sat", "sun"]}, {"holidays": "GB"}]
        assert ok(c.get(f"/calendars/{name}"))["description"] == "x"
        assert name in [cal["name"] for cal in ok(c.get("/calendars"))]
        bad = {"rules": [{"date": "2026-12-25"}, {"from": "2026-12-02", "to": "2026-12-01"}]}
        problem(c.put(f"/calendars/{name}", json=bad), 422, "rules[1].to")
        problem(c.get(f"/calendars/{unique('nope')}"), 404)
        job = ok(
            c.post(
                "/jobs",
                json={
                    "name": unique(),
                    "task": "api.test",
                    "cron": "0 9 * * *",
                    "allow_unregistered": True,
                    "calendars": [name],
                    "calendar_shift": "next_business_day",
                },
            ),
            201,
        )
        assert (job["calendars"], job["calendar_shift"]) == ([name], "next_business_day")
        assert ok(c.get(f"/jobs/{job['id']}"))["calendars"] == [name]
        problem(c.delete(f"/calendars/{name}"), 409)
        unknown = {"name": unique(), "task": "api.test", "cron": "0 9 * * *"}
        unknown |= {"allow_unregistered": True, "calendars": ["missing-cal"]}
        assert "missing-cal" in problem(c.post("/jobs", json=unknown), 422, "calendars")["detail"]
        ok(c.patch(f"/jobs/{job['id']}", json={"calendars": [], "calendar_shift": None}))
        ok(c.delete(f"/calendars/{name}"), 204)
    with server.client(keys.acme_viewer) as c:
        problem(c.put(f"/calendars/{name}", json=body), 403)


def test_a_backfill_over_http(server: ServerProcess, keys: Keys) -> None:
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    since, until = now - timedelta(hours=10), now - timedelta(hours=1)
    with server.client(keys.acme_operator) as c:
        job = ok(
            c.post(
                "/jobs",
                json={
                    "name": unique("hourly"),
                    "task": unique("task"),
                    "cron": "0 * * * *",
                    "allow_unregistered": True,
                },
            ),
            201,
        )
        path = f"/jobs/{job['id']}/backfill"
        body = {"from": iso(since), "to": iso(until)}
        dry = ok(c.post(path, json=body | {"dry_run": True}))
        assert (dry["dry_run"], dry["created"], len(dry["runs"])) == (True, 10, 10)
        assert dry["from"].startswith(iso(since)[:19])
        done = ok(c.post(path, json=body))
        assert (done["created"], done["existing"]) == (10, 0)
        again = ok(c.post(path, json=body))
        assert (again["created"], again["existing"]) == (0, 10)
        runs = ok(c.get("/runs", params={"job_id": job["id"], "limit": 50}))["items"]
        assert len(runs) == 10
        assert {r["origin"] for r in runs} == {"backfill"}
        progress = ok(c.get(path))
        assert (progress["total"], progress["states"]) == (10, {"scheduled": 10})
        century = {"from": iso(now - timedelta(days=36525)), "to": iso(until)}
        assert "--yes" in problem(c.post(path, json=century), 422, "to")["detail"]
        problem(c.post(path, json={"from": iso(until), "to": iso(since)}), 422, "to")
        problem(c.post(path, json={"from": "2026-01-01T00:00:00", "to": iso(until)}), 422)
        problem(c.post(f"/jobs/{unique('nope')}/backfill", json=body), 404)


def test_the_tenant_cap_on_backfilled_runs(server: ServerProcess, keys: Keys) -> None:
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    with server.client(keys.globex_admin) as c:
        limits = ok(c.put("/tenants/globex/limits", json={"max_backfill_runs": 3}))
        assert limits["max_backfill_runs"] == 3
        try:
            job = ok(
                c.post(
                    "/jobs",
                    json={
                        "name": unique(),
                        "task": unique("task"),
                        "cron": "0 * * * *",
                        "allow_unregistered": True,
                    },
                ),
                201,
            )
            body = {"from": iso(now - timedelta(hours=5)), "to": iso(now - timedelta(hours=1))}
            capped = problem(
                c.post(f"/jobs/{job['id']}/backfill", json=body), 422, "max_backfill_runs"
            )
            assert "would create 5 runs" in capped["detail"]
            assert ok(c.get(f"/jobs/{job['id']}/backfill"))["total"] == 0
        finally:
            ok(c.put("/tenants/globex/limits", json={}))
