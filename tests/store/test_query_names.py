"""Both dialects ship the same query names, file by file (store/sqlfile.py's promise), but for
the gaps listed here by name, each with its reason. A new query goes into both dialects, or
into this list with the reason it cannot."""

from __future__ import annotations

import re
from importlib import resources

from duetime.store.sqlfile import load_queries

ONLY_POSTGRES = {
    "runs_claim_fair_wide": "the fair claim that locks only what it picks: SQLite has no row "
    "locks, its one claim statement serves",
    "db_now": "SQLite's clock is the host's (_now reads it, no statement)",
    "notify_runs": "NOTIFY: SQLite has none; its _notify sets this process's event",
    "runs_cancels_notify": "NOTIFY of runs asked to stop: SQLite tells this process's "
    "CancelNews directly (store/cancel_news.py)",
    "overlap_keys_lock": "advisory locks per overlap key and tenant; SQLite's BEGIN IMMEDIATE "
    "already holds the whole database",
    "jobs_bulk_copy": "bulk COPY (docs/decisions/0007); SQLite uses one executemany of "
    "jobs_bulk_insert",
    "jobs_bulk_stage": "the COPY's transaction-local staging table (docs/decisions/0007)",
    "attempts_insert": "attempt rows from column arrays (unnest); SQLite records one row at a "
    "time (attempt_record), keeping a takeover's record replaceable",
    "run_trigger_by_id_audited": "the trigger with its audit record in one statement (a "
    "data-modifying CTE); SQLite inserts audit_insert in the same BEGIN IMMEDIATE",
    "run_trigger_by_name_audited": "as run_trigger_by_id_audited",
    "enlist_home": "transactional enqueue on a caller's connection is PostgreSQL's "
    "(docs/decisions/0024); SQLite's store refuses it",
    "enlist_enter": "as enlist_home: duetime's schema set in the caller's transaction",
    "enlist_leave": "as enlist_home: the caller's search path put back",
    "runs_complete_outbox": "the completion with its broker runs' messages in one statement "
    "(a data-modifying CTE: one round trip, docs/decisions/0040); SQLite inserts outbox_insert "
    "in the same BEGIN IMMEDIATE",
    "workflow_items_insert": "a mapped step's expansion from the source's list in one "
    "statement (docs/decisions/0034); SQLite inserts the items' runs and rows it built "
    "(runs_insert, workflow_steps_insert)",
}

ONLY_SQLITE = {
    "jobs_advance_plain": "the set path's jobs advanced in a second statement (SQLite has no "
    "data-modifying CTE: PostgreSQL's runs_materialize_plain does both in one)",
    "jobs_advance_plain_leased": "as jobs_advance_plain, for a node serving leased partitions",
    "attempt_record": "one attempt row (see attempts_insert)",
    "attempts_record": "a completion batch's attempts: PostgreSQL's runs_complete writes them "
    "in the same one statement (docs/decisions/0003)",
    "outbox_insert": "a completion's messages after runs_complete, in its BEGIN IMMEDIATE: "
    "PostgreSQL's runs_complete_outbox inserts them in the completion statement",
    "runs_insert_values": "the materializer's runs with their values bound as parameters: "
    "SQLite's json_extract per field cost 3.5 times as much (PostgreSQL's jsonb_to_recordset "
    "reads the JSON once)",
}


def _names_by_file(dialect: str) -> dict[str, str]:
    folder = resources.files(f"duetime.store.{dialect}").joinpath("queries")
    found: dict[str, str] = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            for name in re.findall(r"^--\s*name:\s*(\w+)", entry.read_text("utf-8"), re.M):
                found[name] = entry.name
    return found


def test_both_dialects_ship_the_same_query_names_but_the_listed_gaps() -> None:
    postgres, sqlite = set(load_queries("postgres")), set(load_queries("sqlite"))
    assert postgres - sqlite == set(ONLY_POSTGRES)
    assert sqlite - postgres == set(ONLY_SQLITE)


def test_a_shared_query_is_in_the_same_file_in_both_dialects() -> None:
    postgres, sqlite = _names_by_file("postgres"), _names_by_file("sqlite")
    moved = {n: (postgres[n], sqlite[n]) for n in postgres.keys() & sqlite.keys()}
    assert {n: files for n, files in moved.items() if files[0] != files[1]} == {}


def test_every_gap_has_a_reason() -> None:
    for name, reason in {**ONLY_POSTGRES, **ONLY_SQLITE}.items():
        assert len(reason) > 20, name
