"""``settings.DUETIME``: duetime's settings for a Django project, read once per use.

Keys: ``DATABASE_URL`` (default: Django's ``DATABASE`` alias, when it is PostgreSQL, as a
URL — its ``OPTIONS["options"]``, a ``search_path`` say, kept), ``DATABASE`` (the alias,
default ``"default"``: the connection :func:`~duetime.contrib.django.trigger` writes on),
``SCHEMA`` (the schema of duetime's tables, default the connection's search path),
``TENANT`` (default ``"default"``), ``MIGRATE`` (migrate when the app opens, default False:
``manage.py duetime migrate``), and any setting of :class:`~duetime.Settings` by its
upper-case name (``"WORKER_CONCURRENCY": 20``) — the ``DUETIME_*`` variable of that name, which
the CLI commands read. ImproperlyConfigured names a key that is wrong."""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from duetime import Settings

OWN_KEYS = frozenset({"DATABASE_URL", "DATABASE", "SCHEMA", "TENANT", "MIGRATE"})
SETTING_KEYS = frozenset(f.name.upper() for f in dataclasses.fields(Settings))


def options() -> dict[str, Any]:
    value = getattr(django_settings, "DUETIME", {})
    if not isinstance(value, dict):
        raise ImproperlyConfigured("DUETIME must be a dict, e.g. {'WORKER_CONCURRENCY': 20}")
    unknown = sorted(set(value) - OWN_KEYS - SETTING_KEYS)
    if unknown:
        raise ImproperlyConfigured(f"DUETIME: unknown setting(s) {', '.join(unknown)}")
    return value


def database_alias() -> str:
    return str(options().get("DATABASE", "default"))


def tenant() -> str:
    return str(options().get("TENANT", "default"))


def migrate() -> bool:
    return bool(options().get("MIGRATE", False))


def database_url() -> str:
    """``DATABASE_URL``, else Django's PostgreSQL database as a URL; with ``SCHEMA`` as its
    search path."""
    opts = options()
    url = opts.get("DATABASE_URL") or _django_url(database_alias())
    schema = opts.get("SCHEMA")
    if schema:
        url += ("&" if "?" in url else "?") + urlencode({"options": f"-csearch_path={schema}"})
    return str(url)


def _django_url(alias: str) -> str:
    databases = getattr(django_settings, "DATABASES", {})
    if alias not in databases:
        raise ImproperlyConfigured(f"DUETIME['DATABASE']: no database {alias!r} in DATABASES")
    db = databases[alias]
    if not str(db.get("ENGINE", "")).endswith("postgresql"):
        raise ImproperlyConfigured(
            f"DUETIME: database {alias!r} is not PostgreSQL; set DUETIME['DATABASE_URL'] "
            "(a SQLite path or a postgresql:// URL)"
        )
    user = quote(str(db.get("USER") or ""), safe="")
    password = quote(str(db.get("PASSWORD") or ""), safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = db.get("HOST") or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    url = f"postgresql://{credentials}{host}{port}/{quote(str(db.get('NAME') or ''))}"
    extra = (db.get("OPTIONS") or {}).get("options")
    if extra and not options().get("SCHEMA"):
        url += "?" + urlencode({"options": extra})
    return url


def environment() -> dict[str, str]:
    """The ``DUETIME_*`` variables these settings are (what the CLI reads)."""
    env = {"DUETIME_DATABASE_URL": database_url()}
    for key, value in options().items():
        if key in SETTING_KEYS and key != "DATABASE_URL":
            env[f"DUETIME_{key}"] = str(value)
    return env


def app_settings() -> Settings:
    """:class:`~duetime.Settings` from ``DUETIME`` (over the process's ``DUETIME_*``)."""
    import os

    try:
        return Settings.from_env({**os.environ, **environment()})
    except ValueError as exc:
        raise ImproperlyConfigured(f"DUETIME: {exc}") from None
