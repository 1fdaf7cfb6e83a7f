"""store/sqlfile.py: named queries and ``{{fragment}}`` includes, expanded at load time."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from duetime.store.sqlfile import load_queries, parse_queries

DIALECTS = ("postgres", "sqlite")
FAIR_CLAIMS = ("runs_claim_fair", "runs_claim_locked_candidates")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_shipped_queries_have_every_include_expanded(dialect: str) -> None:
    queries = load_queries(dialect)
    assert not [name for name, sql in queries.items() if "{{" in sql or "}}" in sql]
    assert not [name for name, sql in queries.items() if re.search(r"^--\s*fragment:", sql, re.M)]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_fair_groups_cte_is_written_once_and_expands_identically(dialect: str) -> None:
    queries = load_queries(dialect)
    groups = "groups AS (" if dialect == "postgres" else "grp(tenant, queue, priority) AS ("
    end = "FROM gf LEFT JOIN tenants tn ON tn.id = gf.tenant\n)"
    ctes = []
    for name in FAIR_CLAIMS:
        sql = queries[name]
        start = sql.index(groups)
        ctes.append(sql[start : sql.index(end, start) + len(end)])
        assert sql.count(groups) == 1
    assert ctes[0] == ctes[1]
    assert "g AS MATERIALIZED" in ctes[0]
    folder = resources.files(f"duetime.store.{dialect}").joinpath("queries")
    source = folder.joinpath("fairness.sql").read_text("utf-8")
    assert source.count(groups) == 1  # written once in the file
    assert source.count("{{fair_groups}}") >= 2


def test_a_fragment_used_by_two_queries_expands_identically() -> None:
    files = {
        "a.sql": "-- fragment: pick\nx AS (SELECT 1 AS v)\n\n-- name: one\n"
        "WITH {{pick}} SELECT v FROM x;\n",
        "b.sql": "-- name: two\nWITH {{ pick }}, y AS (SELECT 2) SELECT v FROM x, y;\n",
    }
    queries = parse_queries(files, "test")
    assert queries == {
        "one": "WITH x AS (SELECT 1 AS v) SELECT v FROM x",
        "two": "WITH x AS (SELECT 1 AS v), y AS (SELECT 2) SELECT v FROM x, y",
    }


@pytest.mark.parametrize(
    ("files", "words"),
    [
        pytest.param(
            {"a.sql": "-- fragment: pick\nx AS (SELECT 1)\n-- name: one\nWITH {{pikc}} SELECT 1"},
            ["test query 'one' (a.sql)", "unknown fragment 'pikc'", "known: pick"],
            id="unknown",
        ),
        pytest.param(
            {"a.sql": "-- name: one\nWITH {{pick}} SELECT 1"},
            ["unknown fragment 'pick'", "known: none"],
            id="no-fragments",
        ),
        pytest.param(
            {"a.sql": "-- fragment: pick\nx AS (SELECT 1)\n-- name: one\nSELECT 1"},
            ["fragment 'pick' is included by no query"],
            id="unused",
        ),
        pytest.param(
            {
                "a.sql": "-- fragment: pick\n{{other}}\n-- fragment: other\nx AS (SELECT 1)\n"
                "-- name: one\nWITH {{pick}} SELECT 1"
            },
            ["fragment 'pick' (a.sql)", "do not nest"],
            id="nested",
        ),
        pytest.param(
            {"a.sql": "-- fragment: one\nx\n-- name: one\nSELECT 1"},
            ["duplicate name 'one' in test a.sql"],
            id="duplicate",
        ),
    ],
)
def test_a_bad_include_fails_the_load_clearly(files: dict[str, str], words: list[str]) -> None:
    with pytest.raises(RuntimeError) as caught:
        parse_queries(files, "test")
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
