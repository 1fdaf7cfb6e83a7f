"""The one duration parser, shared by the CLI and the REST API.

Two spellings:

- ISO 8601 durations without years or months: ``PT3H``, ``P1DT2H30M``, ``P2W``, ``PT0.5S``
  (case-insensitive);
- short forms, only where the caller allows them (the CLI and ``duetime jobs import``; the REST
  API documents ISO 8601 only): ``90s``, ``15m``, ``1h30m``, ``2d``, ``1w``.

:func:`parse_duration` returns None for text that is neither, so each caller words its own
error (the CLI names the option, the API the field).
"""

from __future__ import annotations

import re
from datetime import timedelta

_NUMBER = r"\d+(?:\.\d+)?"
_ISO_DURATION = re.compile(
    rf"P(?:(?P<w>{_NUMBER})W)?(?:(?P<d>{_NUMBER})D)?"
    rf"(?:T(?:(?P<h>{_NUMBER})H)?(?:(?P<m>{_NUMBER})M)?(?:(?P<s>{_NUMBER})S)?)?",
    re.IGNORECASE,
)
_SHORT_DURATION = re.compile(rf"(?:{_NUMBER}[wdhms])+", re.IGNORECASE)
_SHORT_PART = re.compile(rf"({_NUMBER})([wdhms])", re.IGNORECASE)
MAX_SECONDS = 10 * 366 * 86400.0
"""Longest duration accepted anywhere (ten years): longer ones overflow date arithmetic."""
UNIT_SECONDS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
"""Seconds per unit letter (lower case), ISO 8601 and short forms alike."""


def iso_duration_seconds(text: str) -> float | None:
    """The seconds of an ISO 8601 duration such as ``PT3H``, ``P1DT2H30M`` or ``P2W``; None
    unless ``text`` is one with at least one component (``P`` and ``PT`` alone, and a dangling
    ``T``, are not). Unbounded: a caller with a limit checks it (may be ``inf``)."""
    text = text.strip()
    match = _ISO_DURATION.fullmatch(text)
    if match is None or not any(match.groupdict().values()) or text.upper().endswith("T"):
        return None
    return sum(float(v) * UNIT_SECONDS[k] for k, v in match.groupdict().items() if v)


def short_duration_seconds(text: str) -> float | None:
    """The seconds of a short duration such as ``90s``, ``1h30m``, ``2d`` or ``1w``; None
    unless ``text`` is one. Unbounded, like :func:`iso_duration_seconds`."""
    text = text.strip()
    if not _SHORT_DURATION.fullmatch(text):
        return None
    return sum(float(n) * UNIT_SECONDS[u.lower()] for n, u in _SHORT_PART.findall(text))


def parse_duration(text: str, *, short_forms: bool = True) -> timedelta | None:
    """An ISO 8601 duration, or (with ``short_forms``) a short one such as ``1h30m``; None if
    ``text`` is none of them, or longer than a ``timedelta`` holds."""
    seconds = iso_duration_seconds(text)
    if seconds is None and short_forms:
        seconds = short_duration_seconds(text)
    if seconds is None:
        return None
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        return None


_WORDS = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*", re.IGNORECASE)
WORD_UNITS = ("second", "minute", "hour", "day", "week", "month")
"""The units of an interval in words (``"90 seconds"``, ``"1 day"``, ``"2 months"``)."""


def interval_words(text: str) -> tuple[float, str] | None:
    """``"2 days"`` → ``(2.0, "day")``: a number (any sign, so a caller can word its own error
    for ``"-1 month"``) and one of :data:`WORD_UNITS` (singular or plural, any case); None
    unless ``text`` is exactly that."""
    match = _WORDS.fullmatch(text)
    if match is None or match.group(2).lower() not in WORD_UNITS:
        return None
    return float(match.group(1)), match.group(2).lower()


__all__ = [
    "UNIT_SECONDS",
    "WORD_UNITS",
    "interval_words",
    "iso_duration_seconds",
    "parse_duration",
    "short_duration_seconds",
]
