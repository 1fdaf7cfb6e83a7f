"""The Django example (examples/django_shop) on PostgreSQL, driven by its real ``manage.py``:
Django's and duetime's migrations, ``manage.py duetime …`` (the CLI with the project's
``DUETIME`` settings), an order and its run committed together on Django's own connection (or
neither, on a rollback), ``trigger_on_commit`` after a commit only, and
``manage.py duetime worker`` shipping the committed orders."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.waiting import eventually_sync

pytestmark = pytest.mark.postgres

PROJECT = Path(__file__).parents[2] / "examples" / "django_shop"


class Shop:
    """The example project on fresh schemas of the session database."""

    def __init__(self, database_url: str) -> None:
        suffix = uuid.uuid4().hex[:10]
        self.database_url = database_url
        self.shop_schema, self.duetime_schema = f"shop_{suffix}", f"duetime_{suffix}"
        self.env = {
            **os.environ,
            "SHOP_DATABASE_URL": database_url,
            "SHOP_SCHEMA": self.shop_schema,
            "SHOP_DUETIME_SCHEMA": self.duetime_schema,
            "DJANGO_SETTINGS_MODULE": "shop_site.settings",
            "PYTHONPATH": str(PROJECT),
        }
        for name in ("DUETIME_DATABASE_URL", "DUETIME_TEST_DATABASE_URL"):
            self.env.pop(name, None)

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=PROJECT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check:
            assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stderr}"
        return done

    def query(self, schema: str, query: str) -> list[Any]:
        with psycopg.connect(self.database_url) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            return conn.execute(query).fetchall()  # type: ignore[arg-type]

    def orders(self) -> list[tuple[str, bool]]:
        return [
            tuple(r)
            for r in self.query(
                self.shop_schema, "SELECT item, shipped FROM orders_order ORDER BY id"
            )
        ]

    def run_payloads(self) -> list[Any]:
        return [
            r[0]
            for r in self.query(self.duetime_schema, "SELECT payload FROM runs ORDER BY created_at")
        ]


@pytest.fixture
def shop(pg_database: str) -> Iterator[Shop]:
    made = Shop(pg_database)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        for schema in (made.shop_schema, made.duetime_schema):
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield made
    with psycopg.connect(pg_database, autocommit=True) as conn:
        for schema in (made.shop_schema, made.duetime_schema):
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_orders_and_their_runs_commit_together_and_the_worker_ships_them(
    shop: Shop, tmp_path: Path
) -> None:
    shop.manage("migrate", "--verbosity", "0")
    shop.manage("duetime", "migrate")
    shop.manage("declare_jobs")
    listed = shop.manage("duetime", "jobs", "list")
    assert "ship-order" in listed.stdout

    teapot = int(shop.manage("place_order", "teapot").stdout)
    shop.manage("place_order", "mug", "--rollback")
    vase = int(shop.manage("place_order", "vase", "--on-commit").stdout)
    shop.manage("place_order", "cup", "--on-commit", "--rollback")
    assert shop.orders() == [("teapot", False), ("vase", False)]
    assert shop.run_payloads() == [{"order": teapot}, {"order": vase}]
    # outside an atomic block there is no transaction to join: the run commits at once
    shop.manage(
        "shell",
        "-c",
        "import duetime.contrib.django as d; d.trigger('ship-order', payload={'order': 0})",
    )
    assert shop.run_payloads()[-1] == {"order": 0}

    log = tmp_path / "worker.log"
    with log.open("w") as sink:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "duetime", "worker"],
            cwd=PROJECT,
            env=shop.env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        eventually_sync(
            lambda: all(shipped for _, shipped in shop.orders()),
            what="manage.py duetime worker to ship both orders",
            details=log.read_text,
        )
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_a_cli_error_is_the_clis_exit_status_and_message(shop: Shop) -> None:
    done = shop.manage("duetime", "jobs", "show", "ship-order", check=False)  # not migrated
    assert (done.returncode, done.stderr) == (
        2,
        "error: database has no duetime schema: run `duetime migrate`\n",
    )
    shop.manage("duetime", "migrate")
    done = shop.manage("duetime", "jobs", "show", "no-such-job", check=False)
    assert done.returncode == 2
    assert "no-such-job" in done.stderr
    assert "Traceback" not in done.stderr


_CONF = """
import json, sys
import django
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

settings.configure(**json.loads(sys.argv[1]))
django.setup()
from duetime.contrib.django import conf

try:
    print(json.dumps({"env": conf.environment()}))
except ImproperlyConfigured as exc:
    print(json.dumps({"error": str(exc)}))
"""


def _conf(**django_settings: Any) -> dict[str, Any]:
    """What ``conf`` makes of ``django_settings`` (in a process of its own: Django's settings
    are once per process)."""
    done = subprocess.run(
        [sys.executable, "-c", _CONF, json.dumps(django_settings)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_settings_come_from_django_and_a_wrong_key_is_named() -> None:
    postgres = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "shop",
        "USER": "web",
        "PASSWORD": "p@ss/word",
        "HOST": "db.internal",
        "PORT": 5433,
        "OPTIONS": {"options": "-c search_path=shop"},
    }
    derived = _conf(DATABASES={"default": postgres}, DUETIME={"WORKER_CONCURRENCY": 7})
    assert derived == {
        "env": {
            "DUETIME_DATABASE_URL": "postgresql://web:p%40ss%2Fword@db.internal:5433/shop"
            "?options=-c+search_path%3Dshop",
            "DUETIME_WORKER_CONCURRENCY": "7",
        }
    }
    schema = _conf(DATABASES={"default": postgres}, DUETIME={"SCHEMA": "jobs"})
    assert schema["env"]["DUETIME_DATABASE_URL"].endswith("/shop?options=-csearch_path%3Djobs")
    assert _conf(DUETIME={"WORKERS": 3}) == {"error": "DUETIME: unknown setting(s) WORKERS"}
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}
    assert (
        "is not PostgreSQL; set DUETIME['DATABASE_URL']"
        in _conf(DATABASES={"default": sqlite})["error"]
    )
    given = _conf(DATABASES={"default": sqlite}, DUETIME={"DATABASE_URL": "duetime.db"})
    assert given == {"env": {"DUETIME_DATABASE_URL": "duetime.db"}}
