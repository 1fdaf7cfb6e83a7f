"""Webhook credentials in job targets: hidden wherever a job is shown, kept on a write-back.

An HTTP target's ``headers`` usually carry a credential (``Authorization: Bearer …``). The
store keeps the real values (the worker sends them); everything that *shows* a job — the REST
API's job representations, the dashboard (which reads them), the CLI's output, ``--json``
included — replaces each value by :data:`REDACTED`, keeping the header names.

On a write (``app.schedule``, ``POST``/``PATCH /jobs``), a header value equal to
:data:`REDACTED` means "unchanged": the job's stored value for that header name (compared
without regard to case) is kept, so a client that reads a job and writes it back keeps the
real credential. With no stored value to keep (a new job or a new header) the marker is
refused: ``ValidationError("target.headers.<name>", …)``. To rotate a credential, write the
new value. The Python API's read methods (``app.get``, ``app.list``) are trusted in-process
code and return the stored values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from duetime.errors import ValidationError

REDACTED = "<redacted>"
"""What every header value of a job's target reads as outside the process; written back, it
keeps the stored value."""


def redact_target(target: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A copy of ``target`` whose header values are :data:`REDACTED` (names kept)."""
    if target is None:
        return None
    out = dict(target)
    headers = out.get("headers")
    if isinstance(headers, Mapping):  # a secret reference ({"secret": NAME}) is no secret
        out["headers"] = {k: v if _is_ref(v) else REDACTED for k, v in headers.items()}
    return out


def _is_ref(value: object) -> bool:
    """A reference to a secret the worker holds (``duetime.targets.secrets``)."""
    return isinstance(value, Mapping) and len(value) == 1 and isinstance(value.get("secret"), str)


def has_redacted(target: object) -> bool:
    """Whether ``target`` carries a header value equal to :data:`REDACTED`."""
    if not isinstance(target, Mapping):
        return False
    headers = target.get("headers")
    return isinstance(headers, Mapping) and any(v == REDACTED for v in headers.values())


def keep_redacted(target: Any, stored: Mapping[str, Any] | None) -> Any:
    """``target`` with each :data:`REDACTED` header value replaced by ``stored``'s value of
    that header (names compared without regard to case). A marker with no stored value is a
    ValidationError naming the header."""
    if not has_redacted(target):
        return target
    old = stored.get("headers") if isinstance(stored, Mapping) else None
    known = {str(k).lower(): v for k, v in old.items()} if isinstance(old, Mapping) else {}
    headers: dict[Any, Any] = {}
    for name, value in target["headers"].items():
        if value == REDACTED:
            kept = known.get(str(name).lower())
            if not (isinstance(kept, str) or _is_ref(kept)) or kept == REDACTED:
                raise ValidationError(
                    f"target.headers.{name}",
                    f"is the redaction marker {REDACTED!r}, which keeps the job's stored "
                    "value, but there is none for this header (a new job or a new header): "
                    "give the header's real value",
                )
            value = kept
        headers[name] = value
    return {**target, "headers": headers}


def refuse_redacted(target: object) -> None:
    """ValidationError naming the first header whose value is :data:`REDACTED` (a write with
    no stored value to keep)."""
    keep_redacted(target, None)


def redact_url(url: str) -> str:
    """A database URL without its password (``postgresql://user:***@host/db``), for messages."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL (a malformed one says nothing more)
        return url
    if password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
