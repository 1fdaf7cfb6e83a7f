"""A small Django shop on PostgreSQL (psycopg 3) with duetime. The database comes from
``SHOP_DATABASE_URL``; the shop's tables live in the schema ``SHOP_SCHEMA`` and duetime's in
``SHOP_DUETIME_SCHEMA`` of the same database (so an order and its run commit together)."""

import os
from urllib.parse import unquote, urlsplit

_url = urlsplit(os.environ["SHOP_DATABASE_URL"])

SECRET_KEY = "example-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
ROOT_URLCONF = "shop_site.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "duetime.contrib.django",
    "orders",
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": unquote(_url.username or ""),
        "PASSWORD": unquote(_url.password or ""),
        "HOST": _url.hostname or "localhost",
        "PORT": _url.port or 5432,
        "OPTIONS": {"options": f"-c search_path={os.environ.get('SHOP_SCHEMA', 'public')}"},
    }
}

DUETIME = {
    "SCHEMA": os.environ.get("SHOP_DUETIME_SCHEMA", "duetime"),
    "WORKER_CONCURRENCY": 4,
}
