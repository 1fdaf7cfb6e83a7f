"""The verdict, from the database alone: duetime's tables (jobs, runs, attempts, run_skips),
the effects the tasks wrote (``chaos_effects``), what the harness did (``chaos_events``: starts,
kills, crashes, PostgreSQL restarts, written after the chaos) and the leadership terms it saw
(``chaos_leader_terms``).

Each figure is an *invariant* (must hold, else the run fails), a *bound* (a time limit; a
violation not explained by a PostgreSQL restart or a simultaneous leader kill fails the run
when ``strict_timing``), or *info*.
"""

from __future__ import annotations

import signal
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from chaos.workload import WORKFLOW_END_STATES, WORKFLOW_ITEMS, WORKFLOW_MAPPED
from duetime.workflows.definition import STEP_KEY_PREFIX, WORKFLOW_TASK

INVARIANT, BOUND, INFO = "invariant", "bound", "info"

MAY_SKIP = ("cron_overlap_skip", "cron_misfire_skip")
"""Job kinds whose policies may skip an occurrence in this test: overlap ``skip`` on an
every-second job (a dead worker's run still ``running``), misfire ``skip`` with a 2 s grace.
The others allow overlap or have a single run, and keep the default 60 s misfire grace, far
longer than any outage here."""


@dataclass
class Figure:
    name: str
    value: str
    limit: str = ""
    kind: str = INFO
    ok: bool | None = None
    """None for info; False fails the run (invariants; bounds when strict)."""


@dataclass
class Timing:
    lease_ttl: float
    reaper_interval: float
    claim_poll: float
    leader_ttl: float
    slack: float = 1.0
    worker_concurrency: int = 20

    @property
    def worker_takeover_bound(self) -> float:
        """A dead worker's lease lapses within a lease TTL of its last heartbeat; the leader's
        reaper then takes the run back within a reaper interval; a worker claims it within a
        poll (sooner: the reaper NOTIFYs)."""
        return self.lease_ttl + self.reaper_interval + self.claim_poll

    @property
    def leader_takeover_bound(self) -> float:
        """The dead leader's row lapses within a TTL of its last renewal; the others try every
        TTL/3 (the renew interval)."""
        return self.leader_ttl + self.leader_ttl / 3


@dataclass
class Verdict:
    figures: list[Figure] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(f.ok is not False for f in self.figures)

    @property
    def failures(self) -> list[Figure]:
        return [f for f in self.figures if f.ok is False]

    def add(
        self,
        name: str,
        value: object,
        *,
        limit: str = "",
        kind: str = INFO,
        ok: bool | None = None,
    ) -> None:
        self.figures.append(Figure(name, str(value), limit, kind, ok))

    def must_be_zero(self, name: str, count: int) -> None:
        """An invariant: ``count`` (of what ``name`` says) must be 0, else the run fails."""
        self.add(name, count, limit="must be 0", kind=INVARIANT, ok=count == 0)

    def over_bound(self, name: str, counts: str, unexplained: int, *, strict: bool) -> None:
        """A bound's violations (``counts``, one of them ``unexplained``): with ``strict`` an
        unexplained one fails the run, else they are reported only."""
        self.add(
            name,
            counts,
            limit="unexplained must be 0" if strict else "",
            kind=BOUND,
            ok=unexplained == 0 if strict else None,
        )


def _pid(worker_id: str | None) -> int | None:
    """The pid in a worker or node id ``host:pid:hex``."""
    if not worker_id:
        return None
    parts = worker_id.rsplit(":", 2)
    try:
        return int(parts[-2])
    except (IndexError, ValueError):
        return None


def _fmt_s(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.2f} s"


def _rows(conn: psycopg.Connection[Any], query: str, **params: Any) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params)  # type: ignore[arg-type]
        return cur.fetchall()


def _one(conn: psycopg.Connection[Any], query: str, **params: Any) -> dict[str, Any]:
    rows = _rows(conn, query, **params)
    return rows[0] if rows else {}


# --- occurrences ---------------------------------------------------------------------------------

EXPECTED = """
WITH expected AS (
    SELECT c.job_id, c.kind, c.one_shot, g.t
    FROM chaos_jobs c
    CROSS JOIN LATERAL generate_series(
        c.first_fire,
        CASE WHEN c.one_shot THEN c.first_fire ELSE %(until)s::timestamptz END,
        make_interval(secs => c.period_s)) AS g(t)
    WHERE c.first_fire <= %(until)s
)
SELECT e.job_id, e.kind, e.one_shot, e.t,
       (SELECT count(*) FROM runs r
        WHERE r.job_id = e.job_id AND r.scheduled_for = e.t
          AND r.idempotency_key IS NULL) AS runs,
       EXISTS (SELECT 1 FROM run_skips s
               WHERE s.job_id = e.job_id AND e.t BETWEEN s.first_at AND s.last_at) AS skip_recorded
FROM expected e
"""


def _occurrences(conn: psycopg.Connection[Any], until: datetime, v: Verdict) -> None:
    rows = _rows(conn, EXPECTED, until=until)
    cron = sum(1 for r in rows if not r["one_shot"])
    once = len(rows) - cron
    lost = [r for r in rows if r["runs"] == 0 and not r["skip_recorded"]]
    covered_by_skip = sum(1 for r in rows if r["runs"] == 0 and r["skip_recorded"])
    v.data["expected"] = len(rows)
    v.add(
        "occurrences expected",
        f"{len(rows)} ({cron} cron, {once} one-shot)",
        limit=f"cron: every second (workflow jobs: their period) up to {until:%H:%M:%S}",
    )
    v.add("occurrences with a recorded skip and no run", covered_by_skip)
    v.must_be_zero("lost occurrences (due, no run, no recorded skip)", len(lost))
    for r in lost[:10]:
        v.details.append(f"lost: job {r['job_id']} ({r['kind']}) at {r['t'].isoformat()}")


def _runs(conn: psycopg.Connection[Any], until: datetime, v: Verdict) -> None:
    states = {
        r["state"]: r["n"]
        for r in _rows(conn, "SELECT state, count(*) AS n FROM runs GROUP BY state ORDER BY state")
    }
    total = sum(states.values())
    v.data["runs_by_state"] = states
    v.add("runs", total)
    v.add("runs done (succeeded)", states.get("succeeded", 0))
    v.add("runs by state", ", ".join(f"{k} {n}" for k, n in sorted(states.items())) or "—")
    dups = _rows(
        conn,
        "SELECT job_id, scheduled_for, count(*) AS n FROM runs WHERE idempotency_key IS NULL "
        "GROUP BY job_id, scheduled_for HAVING count(*) > 1",
    )
    v.must_be_zero("duplicate runs per occurrence", len(dups))
    for r in dups[:10]:
        v.details.append(f"duplicate: job {r['job_id']} at {r['scheduled_for']}: {r['n']} runs")
    not_once = _rows(
        conn,
        """
        SELECT r.id, r.state,
               (SELECT count(*) FROM attempts a
                WHERE a.run_id = r.id AND a.outcome = 'succeeded') AS successes
        FROM runs r
        WHERE (r.state = 'succeeded') <> (
            (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND a.outcome = 'succeeded')
            = 1)
           OR (SELECT count(*) FROM attempts a
               WHERE a.run_id = r.id AND a.outcome = 'succeeded') > 1
        """,
    )
    v.must_be_zero(
        "runs not ending exactly once (succeeded ≠ one succeeded attempt)", len(not_once)
    )
    for r in not_once[:10]:
        v.details.append(f"run {r['id']}: state {r['state']}, {r['successes']} succeeded attempts")
    stuck = _rows(
        conn,
        "SELECT r.id, r.job_name, r.state, r.scheduled_for, r.attempt, r.lease_owner FROM runs r "
        "WHERE r.scheduled_for <= %(until)s AND r.state IN ('scheduled', 'running') "
        "ORDER BY r.scheduled_for",
        until=until,
    )
    v.must_be_zero("due runs unfinished after the drain", len(stuck))
    for r in stuck[:10]:
        v.details.append(
            f"unfinished: run {r['id']} of {r['job_name']} at {r['scheduled_for']:%H:%M:%S.%f}: "
            f"{r['state']}, attempt {r['attempt']}, lease {r['lease_owner']}"
        )
    unexplained_skips = _rows(
        conn, "SELECT id, job_name FROM runs WHERE state = 'skipped' AND reason IS NULL"
    )
    v.must_be_zero("skipped runs without a reason", len(unexplained_skips))
    unwarranted = _one(
        conn,
        """
        SELECT
          (SELECT count(*) FROM runs r JOIN chaos_jobs c ON c.job_id = r.job_id
           WHERE r.state = 'skipped' AND c.kind <> ALL(%(may_skip)s)) AS runs,
          (SELECT coalesce(sum(s.count), 0) FROM run_skips s
           JOIN chaos_jobs c ON c.job_id = s.job_id
           WHERE c.kind <> ALL(%(may_skip)s)) AS ranges
        """,
        may_skip=list(MAY_SKIP),
    )
    n = unwarranted["runs"] + unwarranted["ranges"]
    v.add(
        "skips of jobs whose policies allow none here",
        n,
        limit="must be 0 (overlap allow / one run; grace 60 s ≫ any outage)",
        kind=INVARIANT,
        ok=n == 0,
    )
    skip_reasons = _rows(
        conn,
        "SELECT reason, count(*) AS n FROM runs WHERE state = 'skipped' GROUP BY 1 ORDER BY 2 DESC",
    )
    v.add(
        "skipped runs (by reason)",
        ", ".join(f"{r['reason']} {r['n']}" for r in skip_reasons) or "0",
    )
    incomplete = _rows(
        conn,
        """
        SELECT j.id, j.name, j.status FROM jobs j JOIN chaos_jobs c ON c.job_id = j.id
        WHERE c.one_shot AND j.status <> 'completed'
          AND EXISTS (SELECT 1 FROM runs r WHERE r.job_id = j.id AND r.trigger = 'schedule'
                      AND r.state IN ('succeeded', 'dead'))
        """,
    )
    v.must_be_zero("one-shot jobs not completed after their run ended", len(incomplete))
    for r in incomplete[:5]:
        v.details.append(f"one-shot job {r['name']} is {r['status']} after its run ended")
    dead = _rows(
        conn,
        "SELECT coalesce(reason, '?') AS reason, count(*) AS n FROM runs WHERE state = 'dead' "
        "GROUP BY 1 ORDER BY 2 DESC",
    )
    v.add("dead runs (by reason)", ", ".join(f"{r['reason']} {r['n']}" for r in dead) or "0")


# --- effects -------------------------------------------------------------------------------------


def _effects(conn: psycopg.Connection[Any], caps: dict[str, bool], v: Verdict) -> None:
    if caps.get("exactly_once"):
        row = _one(
            conn,
            """
            SELECT
              (SELECT count(*) FROM chaos_effects WHERE mode = 'exactly_once') AS effects,
              (SELECT count(*) FROM (SELECT run_id FROM chaos_effects WHERE mode = 'exactly_once'
                                     GROUP BY run_id HAVING count(*) > 1) d) AS duplicated,
              (SELECT count(*) FROM runs r WHERE r.delivery = 'exactly_once'
                 AND r.state = 'succeeded') AS succeeded,
              (SELECT count(*) FROM runs r WHERE r.delivery = 'exactly_once'
                 AND r.state = 'succeeded' AND (
                   SELECT count(*) FROM attempts a
                   WHERE a.run_id = r.id AND a.started_at IS NOT NULL) > 1) AS reexecuted,
              (SELECT count(*) FROM runs r WHERE r.delivery = 'exactly_once'
                 AND r.state = 'succeeded' AND NOT EXISTS (
                   SELECT 1 FROM chaos_effects e
                   WHERE e.run_id = r.id AND e.mode = 'exactly_once')) AS missing,
              (SELECT count(*) FROM chaos_effects e WHERE e.mode = 'exactly_once'
                 AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = e.run_id
                                 AND r.state = 'succeeded')) AS orphaned
            """,
        )
        v.add(
            "exactly-once runs succeeded / effects / runs started more than once",
            f"{row['succeeded']} / {row['effects']} / {row['reexecuted']}",
        )
        v.must_be_zero("duplicate exactly-once effects", row["duplicated"])
        v.must_be_zero("exactly-once effects missing (run succeeded, no effect)", row["missing"])
        v.must_be_zero("exactly-once effects without a succeeded run", row["orphaned"])
    else:
        v.add("exactly-once jobs", "not run: duetime has no ctx.transaction yet")
    row = _one(
        conn,
        """
        SELECT
          (SELECT count(*) FROM runs r JOIN chaos_jobs c ON c.job_id = r.job_id
           WHERE c.kind LIKE '%%effect' AND r.state = 'succeeded') AS succeeded,
          (SELECT count(*) FROM runs r JOIN chaos_jobs c ON c.job_id = r.job_id
           WHERE c.kind LIKE '%%effect' AND r.state = 'succeeded' AND NOT EXISTS (
             SELECT 1 FROM chaos_effects e WHERE e.run_id = r.id
             AND e.mode = 'at_least_once')) AS missing,
          (SELECT coalesce(sum(n - 1), 0) FROM (
             SELECT count(*) AS n FROM chaos_effects WHERE mode = 'at_least_once'
             GROUP BY run_id) x) AS extra
        """,
    )
    v.add("at-least-once effect runs succeeded", row["succeeded"])
    v.must_be_zero("at-least-once effects missing (run succeeded, no effect)", row["missing"])
    v.add("at-least-once effects executed more than once (extra rows)", row["extra"])


def _long_runs(conn: psycopg.Connection[Any], caps: dict[str, bool], v: Verdict) -> None:
    row = _one(
        conn,
        """
        SELECT count(*) FILTER (WHERE r.state = 'succeeded') AS succeeded,
               count(*) AS total,
               count(*) FILTER (WHERE EXISTS (
                   SELECT 1 FROM chaos_effects e WHERE e.run_id = r.id
                   AND e.mode = 'long_start' AND e.info > 0)) AS resumed,
               count(*) FILTER (WHERE EXISTS (
                   SELECT 1 FROM chaos_effects e WHERE e.run_id = r.id
                   AND e.mode = 'long_start' AND e.attempt > 1)) AS restarted
        FROM runs r JOIN chaos_jobs c ON c.job_id = r.job_id WHERE c.kind = 'once_long'
        """,
    )
    text = f"{row['succeeded']} of {row['total']} succeeded; {row['restarted']} re-executed"
    if caps.get("checkpoints"):
        text += f", {row['resumed']} resumed from a checkpoint"
    else:
        text += " (no ctx.checkpoint in duetime yet: they start over)"
    v.add("long runs", text)


# --- workflows -----------------------------------------------------------------------------------

_FAILED_RUN = ("dead", "cancelled", "skipped")
"""A step run's end states that fail its step."""
_SATISFIES = {
    "on_success": ("succeeded",),
    "on_failure": _FAILED_RUN,
    "on_finished": ("succeeded", *_FAILED_RUN),
}
"""The parent run's end states that satisfy an edge of each condition."""


@dataclass(frozen=True)
class _StepDef:
    rule: str
    edges: tuple[tuple[str, str], ...]
    """(parent, condition); a mapped step's source is an ``on_success`` parent."""
    mapped: bool


def _definition(document: dict[str, Any]) -> dict[str, _StepDef]:
    """A stored workflow document's steps (read here, not with duetime's parser: the check
    reads what the database holds)."""
    out = {}
    for step in document["steps"]:
        edges = [
            (a, "on_success") if isinstance(a, str) else (a["step"], a.get("on", "on_success"))
            for a in step.get("after", [])
        ]
        if step.get("map_over"):
            edges.insert(0, (step["map_over"], "on_success"))
        out[step["name"]] = _StepDef(step.get("rule", "all"), tuple(edges), "map_over" in step)
    return out


def _step_order(
    definition: dict[str, _StepDef],
    rows: dict[tuple[str, int], dict[str, Any]],
    start_finished: datetime | None,
) -> tuple[int, list[str]]:
    """How many (child run, parent run) pairs were compared, and each child run created before
    its parents allowed it: before a parent run it depends on had ended (each item's run for a
    mapped parent; the start run for a root step), or, under rule ``all``, after a parent
    outcome its edge does not accept."""
    checked, bad = 0, []
    for (step, index), child in rows.items():
        if child["found"] is None:
            continue
        spec = definition[step]
        created = child["created_at"]
        if not spec.edges:
            checked += 1
            if start_finished is None or start_finished > created:
                bad.append(f"{step}[{index}] created {created} before its start run ended")
            continue
        satisfied = 0
        for parent, condition in spec.edges:
            if definition[parent].mapped:
                runs = [r for (s, i), r in rows.items() if s == parent and i >= 0]
            else:
                runs = [rows[(parent, -1)]] if (parent, -1) in rows else []
            runs = [r for r in runs if r["found"] is not None]
            ended = [r for r in runs if r["finished_at"] is not None]
            checked += len(runs)
            early = [r for r in runs if r["finished_at"] is None or r["finished_at"] > created]
            refused = [r for r in ended if r["run_state"] not in _SATISFIES[condition]]
            if not early and not refused:
                satisfied += 1
            if spec.rule == "any":
                continue
            if early or not runs:
                bad.append(
                    f"{step}[{index}] created {created} before its parent {parent} ended "
                    f"({len(early)} of {len(runs)} parent run(s) unfinished then)"
                )
            elif spec.rule == "all" and refused:
                bad.append(
                    f"{step}[{index}] started though {parent} ended "
                    f"{refused[0]['run_state']} (edge {condition})"
                )
        if spec.rule == "any" and not satisfied:
            bad.append(f"{step}[{index}] created {created} before any parent allowed it")
    return checked, bad


def _workflows(conn: psycopg.Connection[Any], until: datetime, v: Verdict) -> None:
    """Workflow instances from the database: every instance an occurrence of the window started
    has ended, and as designed; one run per (instance, step, map index), exactly one instance
    per succeeded start run, no step run created before its parents allowed it."""
    instances = _rows(
        conn,
        "SELECT i.id, i.workflow, i.version, i.state, i.reason, r.scheduled_for, "
        "r.finished_at AS start_finished FROM workflow_instances i "
        "LEFT JOIN runs r ON r.id = i.start_run_id ORDER BY i.created_at",
    )
    states = Counter(i["state"] for i in instances)
    due = [i for i in instances if i["scheduled_for"] is not None and i["scheduled_for"] <= until]
    v.data["workflow_instances"] = len(instances)
    v.add(
        "workflow instances (started in the window)",
        f"{len(instances)} ({len(due)}): "
        + (", ".join(f"{k} {n}" for k, n in sorted(states.items())) or "—"),
    )
    running = [i for i in due if i["state"] == "running"]
    v.must_be_zero("workflow instances of the window still running after the drain", len(running))
    unsuccessful = [i for i in instances if i["state"] in ("failed", "cancelled")]
    v.add(
        "workflow instances that ended other than succeeded",
        len(unsuccessful),
        limit="must be 0 (the doomed step's failure is handled)",
        kind=INVARIANT,
        ok=not unsuccessful,
    )
    for i in (running + unsuccessful)[:10]:
        v.details.append(f"workflow instance {i['id']}: {i['state']} ({i['reason']})")

    starts = _rows(
        conn,
        "SELECT r.id, r.state, (SELECT count(*) FROM workflow_instances i "
        "WHERE i.start_run_id = r.id) AS instances FROM runs r WHERE r.task = %(task)s",
        task=WORKFLOW_TASK,
    )
    wrong = [s for s in starts if s["instances"] != (1 if s["state"] == "succeeded" else 0)]
    succeeded = sum(1 for s in starts if s["state"] == "succeeded")
    v.add(
        "workflow start runs succeeded without exactly one instance (or others with one)",
        len(wrong),
        limit=f"must be 0 (of {len(starts)} start runs, {succeeded} succeeded)",
        kind=INVARIANT,
        ok=not wrong,
    )
    for s in wrong[:10]:
        v.details.append(f"start run {s['id']} ({s['state']}): {s['instances']} instances")

    steps = _rows(
        conn,
        "SELECT s.instance_id, s.step, s.map_index, s.state, s.run_id, r.id AS found, "
        "r.idempotency_key, r.state AS run_state, r.created_at, r.finished_at "
        "FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id",
    )
    keyed = _rows(
        conn,
        "SELECT r.id, r.job_id, r.idempotency_key FROM runs r "
        "WHERE r.idempotency_key LIKE %(prefix)s",
        prefix=STEP_KEY_PREFIX + "%",
    )
    by_instance: dict[Any, dict[tuple[str, int], dict[str, Any]]] = defaultdict(dict)
    for s in steps:
        by_instance[s["instance_id"]][(s["step"], s["map_index"])] = s
    step_runs = Counter(s["run_id"] for s in steps if s["run_id"] is not None)
    keys = Counter((r["job_id"], r["idempotency_key"]) for r in keyed)
    duplicate_keys = [k for k, n in keys.items() if n > 1]
    orphans = [r for r in keyed if r["id"] not in step_runs]
    shared = [r for r, n in step_runs.items() if n > 1]
    missing = [s for s in steps if s["run_id"] is not None and s["found"] is None]
    mislabelled = [
        s
        for s in steps
        if s["found"] is not None
        and s["idempotency_key"]
        != f"{STEP_KEY_PREFIX}{s['instance_id']}:{s['step']}:{s['map_index']}"
    ]
    n = len(duplicate_keys) + len(orphans) + len(shared) + len(missing) + len(mislabelled)
    v.add(
        "step runs not one per (instance, step, map index)",
        n,
        limit=(
            f"must be 0 (duplicate keys {len(duplicate_keys)}, runs of no step {len(orphans)}, "
            f"shared {len(shared)}, gone {len(missing)}, wrong key {len(mislabelled)})"
        ),
        kind=INVARIANT,
        ok=n == 0,
    )
    for r in orphans[:5]:
        v.details.append(f"step run {r['id']} ({r['idempotency_key']}) belongs to no step")

    ended = {i["id"] for i in instances if i["state"] != "running"}
    wrong_items, off_design = [], []
    for instance_id, rows in by_instance.items():
        mapped = rows.get((WORKFLOW_MAPPED, -1))
        items = sorted(i for s, i in rows if s == WORKFLOW_MAPPED and i >= 0)
        opened = mapped is not None and mapped["state"] != "pending"
        if opened and items != list(range(WORKFLOW_ITEMS)):
            wrong_items.append(f"instance {instance_id}: {len(items)} mapped items")
        if instance_id in ended:
            off_design += [
                f"instance {instance_id}: {s}[{i}] {r['state']}"
                for (s, i), r in rows.items()
                if r["state"] != WORKFLOW_END_STATES.get(s)
            ]
    v.must_be_zero(
        f"workflow instances whose mapped step has not exactly {WORKFLOW_ITEMS} items",
        len(wrong_items),
    )
    v.details.extend(wrong_items[:5])
    v.add(
        "steps of ended instances not in their designed end state",
        len(off_design),
        limit="must be 0 (" + ", ".join(f"{k} {s}" for k, s in WORKFLOW_END_STATES.items()) + ")",
        kind=INVARIANT,
        ok=not off_design,
    )
    v.details.extend(off_design[:10])

    effects = _one(
        conn,
        """
        SELECT
          (SELECT count(*) FROM workflow_steps s JOIN runs r ON r.id = s.run_id
           WHERE s.step = %(mapped)s AND s.map_index >= 0 AND r.state = 'succeeded') AS succeeded,
          (SELECT count(*) FROM workflow_steps s JOIN runs r ON r.id = s.run_id
           WHERE s.step = %(mapped)s AND s.map_index >= 0 AND r.state = 'succeeded'
             AND NOT EXISTS (SELECT 1 FROM chaos_effects e
                             WHERE e.run_id = r.id AND e.mode = 'wf_item')) AS missing,
          (SELECT count(*) FROM chaos_effects WHERE mode = 'wf_item') AS executions,
          (SELECT count(DISTINCT run_id) FROM chaos_effects WHERE mode = 'wf_item') AS runs
        """,
        mapped=WORKFLOW_MAPPED,
    )
    v.add(
        "workflow step runs / mapped item runs succeeded / item executions (re-executed)",
        f"{sum(step_runs.values())} / {effects['succeeded']} / {effects['executions']} "
        f"({effects['executions'] - effects['runs']})",
    )
    v.must_be_zero(
        "mapped item effects missing (item run succeeded, no effect)", effects["missing"]
    )

    documents = {
        (r["name"], r["version"]): _definition(r["definition"])
        for r in _rows(conn, "SELECT name, version, definition FROM workflows")
    }
    checked, early = 0, []
    for i in instances:
        definition = documents.get((i["workflow"], i["version"]))
        if definition is None:
            continue
        compared, bad = _step_order(definition, by_instance[i["id"]], i["start_finished"])
        checked += compared
        early += [f"instance {i['id']}: {b}" for b in bad]
    v.add(
        "step runs created before their parents allowed them",
        len(early),
        limit=f"must be 0 ({checked} child/parent run pairs compared)",
        kind=INVARIANT,
        ok=not early,
    )
    v.details.extend(early[:10])


# --- attempts: re-executions and takeovers ----------------------------------------------------


@dataclass
class _Events:
    starts: dict[int, dict[str, Any]]
    ready: dict[int, datetime]
    kills: list[dict[str, Any]]
    crashes: list[dict[str, Any]]
    outages: list[tuple[datetime, datetime]]
    chaos: tuple[datetime, datetime] | None
    forced_stops: list[dict[str, Any]]
    stops: list[dict[str, Any]]

    def killed_at(self, pid: int | None) -> datetime | None:
        for k in self.kills:
            if k["pid"] == pid:
                return k["at"]  # type: ignore[no-any-return]
        return None

    def outage_near(self, start: datetime, end: datetime) -> bool:
        return any(a <= end and b >= start for a, b in self.outages)


def _events(conn: psycopg.Connection[Any]) -> _Events:
    rows = _rows(conn, "SELECT * FROM chaos_events ORDER BY at")
    chaos = next(((r["at"], r["until"]) for r in rows if r["kind"] == "chaos"), None)
    return _Events(
        starts={r["pid"]: r for r in rows if r["kind"] == "start"},
        ready={r["pid"]: r["at"] for r in rows if r["kind"] == "ready"},
        kills=[r for r in rows if r["kind"] == "kill"],
        crashes=[r for r in rows if r["kind"] == "crash"],
        outages=[(r["at"], r["until"]) for r in rows if r["kind"] == "pg_restart"],
        chaos=chaos,
        forced_stops=[r for r in rows if r["kind"] == "forced_stop"],
        stops=[r for r in rows if r["kind"] == "stop"],
    )


@dataclass
class _Leadership:
    """When some node could act as the leader: each term from its election until the next term
    or the kill of its holder, whichever comes first."""

    terms: list[dict[str, Any]]
    spans: list[tuple[datetime, datetime | None]]

    @classmethod
    def of(cls, terms: list[dict[str, Any]], ev: _Events) -> _Leadership:
        spans: list[tuple[datetime, datetime | None]] = []
        for i, t in enumerate(terms):
            ends = [terms[i + 1]["elected_at"]] if i + 1 < len(terms) else []
            killed = ev.killed_at(_pid(t["node_id"]))
            if killed is not None and killed >= t["elected_at"]:
                ends.append(killed)
            spans.append((t["elected_at"], min(ends) if ends else None))
        return cls(terms, spans)

    def available_from(self, at: datetime, hold: timedelta) -> datetime | None:
        """The first instant from ``at`` on when a leader was alive and stayed alive for
        ``hold`` (long enough for one reaper pass); None: never."""
        for begin, end in sorted(self.spans, key=lambda span: span[0]):
            t = max(at, begin)
            if end is None or t + hold <= end:
                return t
        return None


IN_FLIGHT = timedelta(seconds=2)
"""A statement a process had sent just before its SIGKILL may still commit after it."""


def _reexecution_cause(a: dict[str, Any], by_kill: bool, ev: _Events) -> str:
    """Why a started attempt was interrupted: its worker was killed; it was running when
    PostgreSQL went away and its lease lapsed during the outage (unavoidable with a lease
    shorter than the outage); it was claimed before an outage but *started after PostgreSQL was
    back*, on a lease that had lapsed meanwhile, and was taken over at once (avoidable: the
    start could renew or check the lease); or none of these."""
    if by_kill:
        return "kill"
    end = a["finished_at"] or a["started_at"]
    for down, up in ev.outages:
        if a["started_at"] < up and down < end:
            return "during_restart"
        if a["claimed_at"] < up <= a["started_at"]:
            return "started_after_restart"
    return "unexplained"


ATTEMPTS = """
SELECT a.run_id, a.token, a.number, a.worker_id, a.claimed_at, a.started_at, a.finished_at,
       a.outcome, r.scheduled_for, r.delivery, r.state AS run_state
FROM attempts a JOIN runs r ON r.id = a.run_id
UNION ALL
SELECT r.id, r.token, r.attempt, r.lease_owner, r.claimed_at, r.started_at, NULL, NULL,
       r.scheduled_for, r.delivery, r.state
FROM runs r
WHERE r.state = 'running'
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = r.id AND a.token = r.token)
"""


def _attempts(
    conn: psycopg.Connection[Any],
    ev: _Events,
    timing: Timing,
    leadership: _Leadership,
    v: Verdict,
    strict: bool,
) -> None:
    by_run: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in _rows(conn, ATTEMPTS):
        by_run[row["run_id"]].append(row)
    ttl = timedelta(seconds=timing.lease_ttl)
    slack = timedelta(seconds=timing.slack)
    reaper = timedelta(seconds=timing.reaper_interval)
    after_leader = reaper + timedelta(seconds=timing.claim_poll)
    bound = timing.worker_takeover_bound
    reexec = Counter[str]()
    per_kill = Counter[int | None]()
    stale_lag: list[float] = []
    overlap: list[str] = []
    takeovers: list[float] = []
    over = Counter[str]()
    late: list[str] = []
    ended_otherwise = 0
    unknown_workers = set()
    for run_id, attempts in by_run.items():
        attempts.sort(key=lambda a: a["token"])
        for i, a in enumerate(attempts):
            pid = _pid(a["worker_id"])
            if pid not in ev.starts:
                unknown_workers.add(a["worker_id"])
            later = [b for b in attempts[i + 1 :] if b["started_at"] is not None]
            killed = ev.killed_at(pid)
            # reaped after its worker died (a claim already sent when the kill came may land
            # a moment after it)
            by_kill = (
                killed is not None
                and a["outcome"] == "lost"
                and a["claimed_at"] <= killed + IN_FLIGHT
                and killed <= a["finished_at"]
            )
            if a["outcome"] == "stale" and i + 1 < len(attempts):
                stale_lag.append((a["finished_at"] - attempts[i + 1]["claimed_at"]).total_seconds())
            if a["outcome"] == "lost":
                nxt = attempts[i + 1] if i + 1 < len(attempts) else None
                if nxt is not None and nxt["claimed_at"] < a["finished_at"]:
                    overlap.append(f"run {run_id}: token {nxt['token']} claimed before reaping")
            if a["outcome"] in ("lost", "stale", "cancelled") and a["started_at"] and later:
                cause = _reexecution_cause(a, by_kill, ev)
                reexec[cause] += 1
                if by_kill:
                    per_kill[pid] += 1
                if cause in ("started_after_restart", "unexplained"):
                    v.details.append(
                        f"re-execution ({cause.replace('_', ' ')}): run {run_id} token "
                        f"{a['token']} ({a['outcome']}) by {a['worker_id']}: claimed "
                        f"{a['claimed_at']:%H:%M:%S.%f}, started {a['started_at']:%H:%M:%S.%f}"
                    )
            if a["outcome"] != "lost" or not by_kill:
                continue
            assert killed is not None
            if not later:
                ended_otherwise += a["run_state"] in ("skipped", "cancelled", "dead")
                continue
            # a claimed-ahead attempt could not have started before its instant anyway
            since = killed if a["started_at"] else max(killed, a["scheduled_for"])
            took = (later[0]["started_at"] - since).total_seconds()
            takeovers.append(took)
            if took <= bound + timing.slack:
                continue
            # the lease lapses by kill + TTL; the reaper needs a live leader
            leader = leadership.available_from(killed + ttl, reaper)
            deadline = None if leader is None else max(leader + after_leader, since)
            started = later[0]["started_at"]
            if ev.outage_near(killed, started):
                over["pg_restart"] += 1
            elif deadline is not None and started <= deadline + slack:
                over["no_leader"] += 1
            else:
                over["unexplained"] += 1
                late.append(f"run {run_id}: taken over {took:.2f} s after its worker was killed")
    total = sum(reexec.values())
    worker_kills = sum(1 for k in ev.kills if k["role"] == "worker")
    v.add(
        "re-executions (a started attempt interrupted, another started)",
        f"{total}: kill of its worker {reexec['kill']} (at most "
        f"{max(per_kill.values(), default=0)} from one kill), running through a PostgreSQL "
        f"restart {reexec['during_restart']}",
        limit=f"kills: {len(ev.kills)} ({worker_kills} of workers × "
        f"{timing.worker_concurrency} slots)",
    )
    avoidable = reexec["started_after_restart"]
    v.must_be_zero(
        "re-executions of runs started after PostgreSQL was back (lease lapsed meanwhile)",
        avoidable,
    )
    v.must_be_zero(
        "re-executions not explained by a kill or a PostgreSQL restart", reexec["unexplained"]
    )
    v.must_be_zero("attempts claimed before the previous lease was reaped", len(overlap))
    v.details.extend(overlap[:10])
    v.data["takeovers"] = takeovers
    median = statistics.median(takeovers) if takeovers else None
    v.add(
        "dead worker's run taken over (kill → next start): count / median / max",
        f"{len(takeovers)} / {_fmt_s(median)} / {_fmt_s(max(takeovers, default=None))}",
        limit=f"bound {bound:.1f} s = lease TTL + reaper + poll (+{timing.slack:g} s slack)",
        kind=BOUND,
    )
    v.over_bound(
        "  over the bound: no live leader to reap / PostgreSQL restart / unexplained",
        f"{over['no_leader']} / {over['pg_restart']} / {over['unexplained']}",
        len(late),
        strict=strict,
    )
    v.details.extend(late[:10])
    v.add(
        "stale attempts (a live worker lost its lease): count / longest lag of its report",
        f"{len(stale_lag)} / {_fmt_s(max(stale_lag, default=None))}",
        limit="lag: from the next attempt's claim to the stale outcome",
    )
    if ended_otherwise:
        v.add("runs of killed workers that ended skipped/cancelled/dead instead", ended_otherwise)
    if unknown_workers:
        v.add("attempts by workers the harness did not start", len(unknown_workers))


def _leader(
    conn: psycopg.Connection[Any], ev: _Events, timing: Timing, v: Verdict, strict: bool
) -> _Leadership:
    terms = _rows(conn, "SELECT * FROM chaos_leader_terms ORDER BY term")
    leadership = _Leadership.of(terms, ev)
    bound = timing.leader_takeover_bound
    times: list[float] = []
    late: list[str] = []
    late_explained = 0
    for kill in ev.kills:
        if kill["role"] != "scheduler":
            continue
        held = [
            t for t in terms if t["elected_at"] <= kill["at"] and _pid(t["node_id"]) == kill["pid"]
        ]
        if not held:
            continue
        term = held[-1]
        nxt = next((t for t in terms if t["term"] > term["term"]), None)
        if nxt is not None and nxt["elected_at"] < kill["at"]:
            continue  # it had already lost the leadership before the kill
        if nxt is None:
            late.append(f"leader pid {kill['pid']} killed at {kill['at']}: no new term seen")
            continue
        took = (nxt["elected_at"] - kill["at"]).total_seconds()
        times.append(took)
        if took > bound + timing.slack:
            if ev.outage_near(kill["at"], nxt["elected_at"]):
                late_explained += 1
            else:
                late.append(f"leader pid {kill['pid']}: new term {took:.2f} s after the kill")
    v.add("leadership terms seen", len(terms))
    v.add(
        "dead leader replaced (kill → new term): count / max",
        f"{len(times)} / {_fmt_s(max(times, default=None))}",
        limit=f"bound {bound:.1f} s = leader TTL + renew interval (+{timing.slack:g} s slack)",
        kind=BOUND,
    )
    v.over_bound(
        "  over the bound: PostgreSQL restart / unexplained",
        f"{late_explained} / {len(late)}",
        len(late),
        strict=strict,
    )
    v.details.extend(late)
    return leadership


def _processes(ev: _Events, v: Verdict) -> None:
    roles = Counter(k["role"] for k in ev.kills)
    v.add(
        "SIGKILLs",
        f"{len(ev.kills)} ({roles['scheduler']} schedulers, {roles['worker']} workers)",
    )
    startups = [
        (ev.ready[pid] - start["at"]).total_seconds()
        for pid, start in ev.starts.items()
        if pid in ev.ready
    ]
    never = sum(1 for pid in ev.starts if pid not in ev.ready and ev.killed_at(pid) is not None)
    v.add(
        "process start → registered: median / max (killed before registering)",
        f"{_fmt_s(statistics.median(startups) if startups else None)} / "
        f"{_fmt_s(max(startups, default=None))} ({never})",
    )
    v.add(
        "PostgreSQL restarts (down → accepting)",
        ", ".join(f"{(b - a).total_seconds():.1f} s" for a, b in ev.outages) or "0",
    )
    v.must_be_zero("processes that exited on their own (crashes)", len(ev.crashes))
    for c in ev.crashes[:10]:
        v.details.append(f"crash: {c['role']} pid {c['pid']} at {c['at']}: {c['detail']}")
    # a process still starting (not yet registered, no signal handler yet) dies of the SIGTERM
    # itself: nothing of its own to hand back, so that is a clean stop too
    bad_exit = [
        s
        for s in ev.stops
        if s["detail"] not in ("0", None)
        and not (s["detail"] == str(-signal.SIGTERM) and s["pid"] not in ev.ready)
    ]
    v.add(
        "processes not stopping cleanly on SIGTERM (killed / non-zero exit)",
        f"{len(ev.forced_stops)} / {len(bad_exit)}",
        limit="must be 0",
        kind=INVARIANT,
        ok=not ev.forced_stops and not bad_exit,
    )


def check(
    conn: psycopg.Connection[Any],
    *,
    until: datetime,
    timing: Timing,
    caps: dict[str, bool],
    strict_timing: bool = False,
) -> Verdict:
    """Every figure, from the database behind ``conn``; occurrences up to ``until`` count."""
    v = Verdict()
    ev = _events(conn)
    _occurrences(conn, until, v)
    _runs(conn, until, v)
    _effects(conn, caps, v)
    _long_runs(conn, caps, v)
    _workflows(conn, until, v)
    leadership = _leader(conn, ev, timing, v, strict_timing)
    _attempts(conn, ev, timing, leadership, v, strict_timing)
    _processes(ev, v)
    return v


def pending(conn: psycopg.Connection[Any], until: datetime) -> int:
    """What the drain waits for: occurrences up to ``until`` with neither a finished run nor a
    recorded skip (a run not yet materialized, or one still scheduled or running), and the
    workflow instances such an occurrence started that are still running."""
    row = _one(
        conn,
        """
        WITH expected AS (
            SELECT c.job_id, g.t
            FROM chaos_jobs c
            CROSS JOIN LATERAL generate_series(
                c.first_fire,
                CASE WHEN c.one_shot THEN c.first_fire ELSE %(until)s::timestamptz END,
                make_interval(secs => c.period_s)) AS g(t)
            WHERE c.first_fire <= %(until)s
        )
        SELECT
          (SELECT count(*) FROM expected e
           WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.job_id = e.job_id
                             AND r.scheduled_for = e.t AND r.idempotency_key IS NULL)
             AND NOT EXISTS (SELECT 1 FROM run_skips s WHERE s.job_id = e.job_id
                             AND e.t BETWEEN s.first_at AND s.last_at))
          + (SELECT count(*) FROM runs WHERE scheduled_for <= %(until)s
             AND state IN ('scheduled', 'running'))
          + (SELECT count(*) FROM workflow_instances i JOIN runs r ON r.id = i.start_run_id
             WHERE r.scheduled_for <= %(until)s AND i.state = 'running') AS pending
        """,
        until=until,
    )
    return int(row.get("pending", 0))
