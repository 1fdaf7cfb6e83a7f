"""A job's retry window and error classification (``RetryPolicy.within``, ``permanent_on``,
``retry_on``, ``permanent_on_status``, ``retry_on_status``): validation, the stored form, and
the verdict on one failure. Pure: no I/O, no imports of user code.

Which rule wins (docs/decisions/0017-retry-window-and-classification.md):

1. an HTTP failure's status listed in ``permanent_on_status`` or ``retry_on_status``;
2. else the most specific class of the exception's MRO that ``permanent_on`` or ``retry_on``
   names (a subclass listed in ``retry_on`` is retried though its base is in ``permanent_on``)
   or that duetime classifies itself: ``Permanent`` (an HTTP 3xx or 4xx other than 408/429
   is one), ``UsageError`` and ``ValidationError`` are permanent, its subclass
   ``UnknownTask`` is retried. duetime's classes sit at their own place in the MRO, so a base
   listed in ``retry_on`` (``Exception``) does not override them; naming them does;
3. else the failure is retried.

A name or status may not be in both lists of a pair.
"""

from __future__ import annotations

import builtins
import functools
import math
import re
import sys
import types
from dataclasses import replace
from typing import Any, cast

from duetime._types import RetryPolicy
from duetime.errors import Permanent, UnknownTask, UsageError, ValidationError

MAX_NAMES = 50
"""Most entries in one list."""
MAX_WINDOW = 366 * 86400.0
"""Longest retry window, in seconds."""
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_NAME_LISTS = ("permanent_on", "retry_on")
_STATUS_LISTS = ("permanent_on_status", "retry_on_status")


def validated(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` with its window and classification checked and put in canonical form
    (a float window; names and statuses deduplicated and sorted; ``builtins.X`` as ``X``).
    Raises ValidationError naming the field (``retry.within``, ``retry.permanent_on`` …)."""
    within = _window(policy.within)
    permanent_on = _names("permanent_on", policy.permanent_on)
    retry_on = _names("retry_on", policy.retry_on)
    permanent_on_status = _statuses("permanent_on_status", policy.permanent_on_status)
    retry_on_status = _statuses("retry_on_status", policy.retry_on_status)
    _disjoint("retry_on", permanent_on, retry_on)
    _disjoint("retry_on_status", permanent_on_status, retry_on_status)
    return replace(
        policy,
        within=within,
        permanent_on=permanent_on,
        retry_on=retry_on,
        permanent_on_status=permanent_on_status,
        retry_on_status=retry_on_status,
    )


def _window(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(
            "retry.within", f"must be a duration in seconds (or a timedelta), got {value!r}"
        )
    seconds = float(value)
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_WINDOW:
        raise ValidationError(
            "retry.within",
            f"must be more than 0 and at most {MAX_WINDOW:g} seconds (366 days), got {value!r}",
        )
    return seconds


def _names(field: str, value: object) -> tuple[str, ...]:
    where = f"retry.{field}"
    if not isinstance(value, tuple):
        raise ValidationError(where, "must be a list of exception classes or their names")
    if len(value) > MAX_NAMES:
        raise ValidationError(where, f"at most {MAX_NAMES} names, got {len(value)}")
    return tuple(sorted({_name(where, item) for item in value}))


def _name(where: str, item: object) -> str:
    """One exception name, checked as far as this process can without importing anything."""
    if not isinstance(item, str) or len(item) > 200 or not _DOTTED.fullmatch(item):
        raise ValidationError(
            where, f"{item!r} is not an exception class name (ValueError, myapp.errors.Fatal)"
        )
    name = item.removeprefix("builtins.")
    if "." not in name:
        if not _is_exception(getattr(builtins, name, None)):
            raise ValidationError(
                where,
                f"{name!r} is not a built-in exception; name any other class with its module "
                "(myapp.errors.Fatal)",
            )
        return name
    loaded = _resolve(where, name)
    if loaded is None:
        return name
    if not isinstance(loaded, type) or not issubclass(loaded, BaseException):
        raise ValidationError(where, f"{name!r} is not an exception class")
    # an alias (duetime.UsageError) is kept as the class's own name, which the worker matches
    return _class_names(cast(type, loaded))[0]


def _resolve(where: str, name: str) -> object | None:
    """The object ``name`` (``module.Class``) names, if its module is already imported here;
    None when this process cannot tell (the worker may know a module it has not imported).
    Raises ValidationError when an imported module lacks the class."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        owner: object = sys.modules.get(module)
        if owner is None:
            continue
        for index, attr in enumerate(parts[cut:], start=cut):
            # the namespace itself: no module __getattr__ (a lazy import) runs for a request
            found = vars(owner).get(attr) if hasattr(owner, "__dict__") else None
            if found is None:
                if isinstance(owner, types.ModuleType) and index < len(parts) - 1:
                    return None  # perhaps a submodule not imported here
                raise ValidationError(where, f"{name!r}: {module!r} has no such class")
            owner = found
        return owner
    return None


def _is_exception(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


def _statuses(field: str, value: object) -> tuple[int, ...]:
    where = f"retry.{field}"
    if not isinstance(value, tuple):
        raise ValidationError(where, "must be a list of HTTP status codes")
    for code in value:
        if isinstance(code, bool) or not isinstance(code, int) or not 300 <= code <= 599:
            raise ValidationError(
                where,
                f"{code!r} is not a failing HTTP status: give codes from 300 to 599 "
                "(1xx and 2xx never fail a request)",
            )
    return tuple(sorted(set(value)))


def _disjoint(field: str, permanent: tuple[Any, ...], retry: tuple[Any, ...]) -> None:
    both = sorted(set(permanent) & set(retry), key=str)
    if both:
        other = field.replace("retry_on", "permanent_on")
        raise ValidationError(f"retry.{field}", f"{both[0]!r} is also in {other}")


# --- stored form ---------------------------------------------------------------------------


def rules_document(policy: RetryPolicy) -> dict[str, Any] | None:
    """The ``retry_rules`` column of a job or run: None when the policy has no window and no
    classification (the common case costs nothing)."""
    if not policy.has_rules:
        return None
    document: dict[str, Any] = {}
    if policy.within is not None:
        document["within"] = policy.within
    for field in (*_NAME_LISTS, *_STATUS_LISTS):
        if getattr(policy, field):
            document[field] = list(getattr(policy, field))
    return document


def with_rules(policy: RetryPolicy, document: Any) -> RetryPolicy:
    """``policy`` with the window and classification of a stored ``retry_rules`` document."""
    if not document:
        return policy
    return replace(
        policy,
        within=document.get("within"),
        permanent_on=tuple(document.get("permanent_on", ())),
        retry_on=tuple(document.get("retry_on", ())),
        permanent_on_status=tuple(document.get("permanent_on_status", ())),
        retry_on_status=tuple(document.get("retry_on_status", ())),
    )


# --- the verdict ---------------------------------------------------------------------------


_DEFAULTS: dict[type[BaseException], str | None] = {
    UnknownTask: None,  # a ValidationError that time may cure: the task's worker may yet start
    ValidationError: "permanent_error",
    UsageError: "usage_error",
    Permanent: "permanent_error",
}
"""duetime's own classification, each class deciding at its place in the raised exception's
MRO, as if listed: only naming the class itself (or a subclass) overrides it, never a base
such as ``Exception``."""


def dead_reason(exc: BaseException, policy: RetryPolicy) -> str | None:
    """Why ``exc`` ends its run at once (``permanent_error``, or ``usage_error`` for a misuse of
    duetime's API), or None when it may be retried: the job's statuses, then the most specific
    class of ``exc``'s MRO that the job's lists or duetime's defaults name."""
    if policy.permanent_on_status or policy.retry_on_status:
        status = getattr(exc, "http_status", None)
        if status in policy.permanent_on_status:
            return _permanent_reason(exc)
        if status in policy.retry_on_status:
            return None
    for cls in type(exc).__mro__:
        if policy.permanent_on or policy.retry_on:
            names = _class_names(cls)
            if any(name in policy.permanent_on for name in names):
                return _permanent_reason(exc)
            if any(name in policy.retry_on for name in names):
                return None
        if cls in _DEFAULTS:
            return _DEFAULTS[cls]
    return None


def dead_reason_by_name(error_class: str, exc: BaseException, policy: RetryPolicy) -> str | None:
    """:func:`dead_reason` for a failure known only by its class name (a remote worker's
    report; ``exc`` stands for it, a ``Permanent`` when the report said not retryable): the
    lists match the name exactly, with no MRO; an unlisted name keeps ``exc``'s default."""
    name = error_class.removeprefix("builtins.")
    if name in policy.permanent_on:
        return "usage_error" if name == _USAGE_ERROR else "permanent_error"
    if name in policy.retry_on:
        return None
    return next((_DEFAULTS[cls] for cls in type(exc).__mro__ if cls in _DEFAULTS), None)


def _permanent_reason(exc: BaseException) -> str:
    """The reason of a failure the job made permanent: a UsageError keeps its own."""
    return "usage_error" if isinstance(exc, UsageError) else "permanent_error"


@functools.lru_cache(maxsize=1024)
def _class_names(cls: type) -> tuple[str, ...]:
    """The names a list may give ``cls`` by: its dotted name, and its bare one for builtins."""
    if cls.__module__ == "builtins":
        return (cls.__qualname__,)
    return (f"{cls.__module__}.{cls.__qualname__}",)


_USAGE_ERROR = _class_names(UsageError)[0]
