"""Path, query and header parameters shared by several endpoints."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Path, Query

from duetime.api.schemas import NO_NUL, PRINTABLE

JobId = Annotated[
    str,
    Path(
        description="The job's id (a UUID). A malformed or unknown id — or another tenant's — "
        "is 404."
    ),
]
RunId = Annotated[
    str,
    Path(description="The run's id (a UUID). A malformed or unknown id is 404."),
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
