"""What the shape of ``runs`` costs the hot path: the same claim → complete loop over variants
of the table, interleaved, on one server in one sitting.

    python -m bench.table_design --runs 50000 --rounds 3

Each round, for each variant in turn: a fresh database migrated to this release, the
variant's DDL applied, N due runs seeded (as bench.hotpath), ``ANALYZE`` and ``CHECKPOINT``;
then one process claims batches of ``--batch`` through the store and completes them (no
worker, no task). Reported per run, medians over the rounds with the spread: the statements'
time (execution + planning, pg_stat_statements), WAL bytes and buffer accesses, from the
first claim to the last completion. Needs a server that preloads pg_stat_statements (see
bench/README.md); exits non-zero with the reason otherwise. The variants:

- ``previous``: the indexes and page fill of the release before (migration 013 undone):
  separate job-history and occurrence indexes, a lease index, a B-tree on attempts' end,
  pages filled whole.
- ``previous-ff70``: ``previous`` with runs' pages filled to 70 % (the fill factor alone).
- ``release``: the tables as migrated.
- ``reordered``: ``release`` with the columns a claim, heartbeat or completion changes last
  in the row, so an update on the same page logs little more than them.

The runs are the realistic mix of bench.burndown (20 tenants × 5 queues × 3 priorities,
distinct instants), without idempotency keys, as scheduled runs are.
"""

from __future__ import annotations

import asyncio
import statistics

from bench._common import BackendMeter, BenchError, base_parser, exit_on_sigterm, guarded_main
from bench._common import report as print_report
from bench.burndown import Database, _seed
from bench.hotpath import _loop

PREVIOUS = [
    "ALTER TABLE runs RESET (fillfactor)",
    "DROP INDEX runs_job_occurrence",
    "CREATE UNIQUE INDEX runs_job_occurrence ON runs (job_id, scheduled_for) "
    "WHERE idempotency_key IS NULL",
    "CREATE INDEX runs_job_history ON runs (job_id, scheduled_for DESC)",
    "CREATE INDEX runs_leases ON runs (lease_expires_at) WHERE state = 'running'",
    "DROP INDEX attempts_finished",
    "DROP INDEX attempts_default_finished",
    "CREATE INDEX attempts_finished ON attempts (finished_at)",
]
"""Back from this release's ``runs`` and ``attempts`` indexes (migration 013) to the previous."""
HOT_COLUMNS = (
    "state", "available_at", "attempt", "token", "lease_owner", "lease_expires_at",
    "claimed_at", "started_at", "finished_at", "reason", "last_error_class",
    "last_error_message", "progress", "progress_message", "checkpoint", "cancel_requested",
)  # fmt: skip
"""The columns a claim, heartbeat or completion changes, last in the ``reordered`` variant."""
VARIANTS: dict[str, list[str]] = {
    "previous": PREVIOUS,
    "previous-ff70": [*PREVIOUS, "ALTER TABLE runs SET (fillfactor = 70)"],
    "release": [],
    "reordered": [],
}
FIGURES = ("µs", "wal", "buffers")


def one(variant: str, runs: int, batch: int) -> dict[str, float]:
    db = Database("postgres")
    try:
        template, _ = asyncio.run(_seed(db.url, "noop", mix="realistic"))
        db.query("DELETE FROM runs WHERE job_name = 'bench.trigger'")
        for ddl in VARIANTS[variant]:
            db.query(ddl)
        if variant == "reordered":
            _reorder(db)
        else:
            db.query("VACUUM FULL runs")  # a fillfactor holds for the pages written after it
        db.clone_runs(template, runs - 1, mix="realistic")
        # as scheduled runs are: no idempotency key, distinct instants per job
        db.query("UPDATE runs SET idempotency_key = NULL WHERE idempotency_key LIKE 'bench:%%'")
        db.query("VACUUM runs")
        db.query("ANALYZE")
        db.query("CHECKPOINT")
        meter = BackendMeter(db.url)
        if not meter.statements:
            raise BenchError("the server does not preload pg_stat_statements (bench/README.md)")
        try:
            meter.start()
            asyncio.run(_loop(db.url, batch))
            used = meter.stop()
        finally:
            meter.close()
        done = db.query("SELECT count(*) FROM runs WHERE state = 'succeeded'")[0][0]
        if done != runs:
            raise BenchError(f"{variant}: {done:,} of {runs:,} runs succeeded")
    finally:
        db.drop()
    return {
        "µs": used["statements_s"] / runs * 1e6,
        "wal": used["wal_bytes"] / runs,
        "buffers": used["buffers"] / runs,
    }


def _reorder(db: Database) -> None:
    """Rebuild ``runs`` with :data:`HOT_COLUMNS` last, keeping its constraints and indexes."""
    columns = db.query(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
        "pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a "
        "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "WHERE a.attrelid = 'runs'::regclass AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum"
    )
    ordered = [c for c in columns if c[0] not in HOT_COLUMNS] + sorted(
        (c for c in columns if c[0] in HOT_COLUMNS), key=lambda c: HOT_COLUMNS.index(c[0])
    )
    spec = ", ".join(
        f"{name} {kind}{' NOT NULL' if notnull else ''}{f' DEFAULT {default}' if default else ''}"
        for name, kind, notnull, default in ordered
    )
    constraints = db.query(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'runs'::regclass ORDER BY contype = 'p' DESC"
    )
    indexes = db.query(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'runs' AND indexname NOT IN "
        "(SELECT conname FROM pg_constraint WHERE conrelid = 'runs'::regclass)"
    )
    names = ", ".join(c[0] for c in ordered)
    db.query(f"CREATE TABLE runs_new ({spec}) WITH (fillfactor = 70)")
    db.query(f"INSERT INTO runs_new ({names}) SELECT {names} FROM runs")
    db.query("DROP TABLE runs")
    db.query("ALTER TABLE runs_new RENAME TO runs")
    for name, definition in constraints:
        db.query(f"ALTER TABLE runs ADD CONSTRAINT {name} {definition}")
    for (definition,) in indexes:
        db.query(definition)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    exit_on_sigterm()
    chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise BenchError(f"unknown variant(s) {unknown}; known: {sorted(VARIANTS)}")
    results: dict[str, list[dict[str, float]]] = {v: [] for v in chosen}
    for _ in range(args.rounds):
        for variant in chosen:
            results[variant].append(one(variant, args.runs, args.batch))
    lines = [
        f"N={args.runs:,} runs, batch {args.batch}, one process claiming and completing "
        f"through the store; per run, median of {args.rounds} (min–max):"
    ]
    for variant in chosen:
        cells = []
        for figure in FIGURES:
            values = [r[figure] for r in results[variant]]
            cells.append(
                f"{figure} {statistics.median(values):7.1f} ({min(values):.1f}–{max(values):.1f})"
            )
        lines.append(f"  {variant:<10} " + "   ".join(cells))
    print_report("runs table variants (claim → complete)", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
