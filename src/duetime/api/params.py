"""Path, query and header parameters shared by several endpoints."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Header, Path, Query

from duetime.api.schemas import NO_NUL, PRINTABLE
from duetime.errors import NotFound
from duetime.registration import MAX_NAME

JobId = Annotated[
    str,
    Path(
        description="The job's id (a UUID) or its name (URL-encoded; a name with `/` only by "
        "id). A value that parses as a UUID is an id, anything else a name in the key's "
        "tenant. An unknown id or name — or another tenant's — is 404."
    ),
]
RunId = Annotated[
    str,
    Path(
        description="The run's full id (a UUID; prefixes are the CLI's). A malformed or "
        "unknown id is 404."
    ),
]
KeyId = Annotated[str, Path(description="The API key's id (a UUID).")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Items per page.")]
Cursor = Annotated[
    str | None,
    Query(
        max_length=400,
        pattern=NO_NUL,
        description="`next_cursor` of the previous page.",
    ),
]
JobFilter = Annotated[
    str | None,
    Query(max_length=100, description="Only runs of this job (its id)."),
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        pattern=PRINTABLE,
        description="The same key never makes a second run: a repeat answers 200 with the "
        "first run; the same key with a different body is 409.",
    ),
]


def job_key(value: str) -> uuid.UUID | str:
    """What a job path segment (:data:`JobId`) names: a value that parses as a UUID is the
    job's id, anything else its name in the caller's tenant (the app looks up either). Text
    that can be no name (blank, over 200 characters, control characters) is not found
    (NotFound, 404), like an unknown name."""
    try:
        return uuid.UUID(value)
    except ValueError:
        pass
    if not value.strip() or len(value) > MAX_NAME or not value.isprintable():
        raise NotFound(f"job {value[:80]!r} not found (not a job id or name)")
    return value
