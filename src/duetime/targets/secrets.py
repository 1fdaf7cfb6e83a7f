"""Secrets held by the server: ``{"secret": "CRM_TOKEN"}`` in a target, resolved at send time.

A job's target stores and shows only the reference; the worker resolves it when it sends, from
its environment (``DUETIME_SECRET_CRM_TOKEN``) or else from a file in its secrets directory
(``DUETIME_SECRETS_DIR/CRM_TOKEN``, one trailing newline stripped: the shape of Kubernetes and
Docker secret mounts). The resolved value lives only in the worker's memory for the request:
never in the database, never in the API's answers, and :func:`redact` takes it out of every
message the worker writes about the attempt (the attempt's error and traceback, its logs).

:func:`resolve_secrets` walks any JSON value (a webhook's headers, a broker connection's
settings), so every target type uses the same references.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from duetime.errors import ValidationError

ENV_PREFIX = "DUETIME_SECRET_"
DIR_VARIABLE = "DUETIME_SECRETS_DIR"
REDACTED_SECRET = "<secret>"
"""What a resolved secret reads as in messages."""
MAX_SECRET = 8192
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")


class SecretMissing(Exception):
    """A referenced secret is in neither the environment nor the secrets directory (retried:
    the worker's deployment may yet provide it)."""


def is_secret_ref(value: object) -> bool:
    """Whether ``value`` is a reference ``{"secret": NAME}`` (whatever NAME holds)."""
    return isinstance(value, Mapping) and len(value) == 1 and "secret" in value


def validate_secret_ref(where: str, value: object) -> dict[str, str]:
    """The reference, checked: NAME is 1-100 letters, digits and ``_`` (not a digit first)."""
    name = value.get("secret") if isinstance(value, Mapping) else None
    if not is_secret_ref(value) or not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValidationError(
            where,
            'must be {"secret": NAME}, NAME 1-100 letters, digits or "_" (not a digit first): '
            f"the worker reads {ENV_PREFIX}NAME or {DIR_VARIABLE}/NAME",
        )
    return {"secret": name}


@dataclass(slots=True)
class Resolved:
    """A value with its references replaced, and the secret values used (to redact)."""

    value: Any
    secrets: list[str] = field(default_factory=list)

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)


def resolve_secrets(
    value: Any,
    *,
    environ: Mapping[str, str] | None = None,
    directory: str | None = None,
) -> Resolved:
    """``value`` (any JSON) with every ``{"secret": NAME}`` replaced by the secret's text.

    Looks up ``DUETIME_SECRET_<NAME>`` in ``environ`` (default ``os.environ``), then the file
    ``<directory>/<NAME>`` (default ``$DUETIME_SECRETS_DIR``). Raises SecretMissing naming
    the secret (never a value). Reads files each call: a rotated mount is seen at once."""
    env = os.environ if environ is None else environ
    folder = env.get(DIR_VARIABLE) if directory is None else directory
    used: list[str] = []

    def walk(node: Any) -> Any:
        if is_secret_ref(node):
            name = validate_secret_ref("secret", node)["secret"]
            secret = _lookup(name, env, folder)
            used.append(secret)
            return secret
        if isinstance(node, Mapping):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return Resolved(walk(value), used)


def _lookup(name: str, env: Mapping[str, str], folder: str | None) -> str:
    value = env.get(ENV_PREFIX + name)
    if value is not None:
        return value
    if folder:
        try:
            text = (Path(folder) / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SecretMissing(
                f"secret {name!r}: cannot read {DIR_VARIABLE}/{name}: {exc.strerror}"
            ) from None
        else:
            return text[:-1] if text.endswith("\n") else text
    raise SecretMissing(
        f"secret {name!r} is not set on this worker: set {ENV_PREFIX}{name}"
        + (f" or create {DIR_VARIABLE}/{name}" if folder else f" (or {DIR_VARIABLE})")
    )


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret value replaced by ``<secret>`` (longest
    first, so a secret containing another is hidden whole). Empty values are left alone."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED_SECRET)
    return text


def redact_exception(exc: BaseException, secrets: Iterable[str]) -> None:
    """Rewrite ``exc``'s string arguments and notes (what its message and traceback print)
    without the secret values, in place, along its chain."""
    values = [s for s in secrets if s]
    if not values:
        return
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(redact(a, values) if isinstance(a, str) else a for a in current.args)
        notes = getattr(current, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [redact(n, values) if isinstance(n, str) else n for n in notes]
        current = current.__cause__ or current.__context__


__all__ = [
    "DIR_VARIABLE",
    "ENV_PREFIX",
    "REDACTED_SECRET",
    "Resolved",
    "SecretMissing",
    "is_secret_ref",
    "redact",
    "redact_exception",
    "resolve_secrets",
    "validate_secret_ref",
]
