"""Property-based fuzzing of the REST API with schemathesis, from its own OpenAPI document,
against a real server on SQLite: once with auth disabled, once with an admin key. Every
response must be a non-5xx, documented status with a body matching its schema. The admin key
cannot revoke itself (the API refuses with 409), so it stays valid for the whole run: the last
test checks that.

Bounded: ``max_examples`` per operation is 20 under CI (``CI=true``), 40 otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from duetime.api import create_api
from duetime.app import AsyncApp
from tests.api.apikit import ServerProcess, make_keys, start
from tests.conftest import in_ci

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 20 if in_ci() else 40
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module", params=["open", "with-key"])
def fuzzed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    workdir: Path = tmp_path_factory.mktemp("fuzz")
    db = str(workdir / "fuzz.db")
    if request.param == "open":
        proc, headers = start(db, "--no-auth", cwd=workdir), {}
    else:
        key = make_keys(db).acme_admin
        proc, headers = start(db, cwd=workdir), {"Authorization": f"Bearer {key}"}
    yield proc, headers
    proc.stop()


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as shared:
        yield shared


def openapi_document() -> dict[str, Any]:
    """The document the server serves, built in-process (no store needed) so that pytest can
    make one test per operation at collection time; a test checks the server serves it."""
    return create_api(AsyncApp(":memory:"), auth_required=False).openapi()


schema = schemathesis.openapi.from_dict(
    openapi_document(),
    config=SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": False}}}),
)


def test_the_server_serves_the_fuzzed_document(
    fuzzed: tuple[ServerProcess, dict[str, str]],
) -> None:
    server, _ = fuzzed
    served = httpx.get(server.url + "/api/v1/openapi.json", timeout=10).json()
    assert served == openapi_document()


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_openapi_document(
    case: schemathesis.Case,
    fuzzed: tuple[ServerProcess, dict[str, str]],
    session: requests.Session,
) -> None:
    server, headers = fuzzed
    case.call_and_validate(base_url=server.url, session=session, headers=headers, checks=CHECKS)


def test_the_fuzzing_key_survived_the_run(fuzzed: tuple[ServerProcess, dict[str, str]]) -> None:
    server, headers = fuzzed
    response = httpx.get(server.url + "/api/v1/keys", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
