"""Which IANA time-zone rules this process computes with: the ``tzdata`` package's, never the
host's (SPEC §5: every node computes the same local times, whatever its operating system
ships). Loading a zone reads one TZif file of the database once (``zones.load_zone`` caches it).

A :class:`TzDatabase` is a directory laid out like the ``tzdata`` package's ``zoneinfo``
folder — TZif files by zone name, and ``tzdata.zi`` whose first line names the release
(``# version 2026a``) — with its release. :func:`current` is the process's (by default the
package's); :func:`use` installs another one (tests, with zone rules of their own) and empties
the zone cache. The release is recorded with each zoned job's next instant, so a process
started with a newer one can recompute them (decision 0023).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from zoneinfo import ZoneInfo

__all__ = ["TzDatabase", "current", "newer", "on_change", "use"]

_NAME = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")
"""A zone name as a relative path of the database: no ``..``, no leading ``/``."""
_VERSION = re.compile(r"#\s*version\s+(\S+)")


@dataclass(frozen=True, slots=True)
class TzDatabase:
    """Zone rules: a ``zoneinfo``-like directory (``root``) and its release (``version``)."""

    version: str
    root: Traversable

    @classmethod
    def packaged(cls) -> TzDatabase:
        """The ``tzdata`` package's rules (a dependency of duetime)."""
        return cls.at(resources.files("tzdata").joinpath("zoneinfo"))

    @classmethod
    def from_directory(cls, path: str | Path) -> TzDatabase:
        """A tzdata-like directory of the file system (tests: zone rules of their own)."""
        return cls.at(Path(path))

    @classmethod
    def at(cls, root: Traversable) -> TzDatabase:
        """The rules under ``root``, their release from ``tzdata.zi``'s ``# version`` first
        line. ValueError if it has none."""
        header = root.joinpath("tzdata.zi")
        first = header.read_text(encoding="utf-8").split("\n", 1)[0] if header.is_file() else ""
        found = _VERSION.match(first)
        if found is None:
            raise ValueError(f"{root}: no tzdata.zi with a '# version' first line")
        return cls(found.group(1), root)

    def load(self, name: str) -> ZoneInfo | None:
        """The zone ``name`` (its key is ``name``), None if the database has no such zone."""
        if not _NAME.fullmatch(name):
            return None
        entry = self.root
        for part in name.split("/"):
            entry = entry.joinpath(part)
        if not entry.is_file():
            return None
        with entry.open("rb") as tzif:
            try:
                return ZoneInfo.from_file(tzif, key=name)
            except ValueError:  # not a TZif file (tzdata.zi, zone1970.tab, …)
                return None


_current: TzDatabase | None = None
_caches: list[Callable[[], None]] = []


def current() -> TzDatabase:
    """The rules this process computes with (the ``tzdata`` package's unless :func:`use`)."""
    global _current
    if _current is None:
        _current = TzDatabase.packaged()
    return _current


def on_change(clear: Callable[[], None]) -> None:
    """Call ``clear`` when :func:`use` installs other rules (a cache of zones or of what was
    computed with them registers its ``cache_clear``)."""
    _caches.append(clear)


def use(database: TzDatabase | None) -> None:
    """Compute with ``database`` from now on (None: the package's again); every cache
    registered with :func:`on_change` is emptied. For tests and tools: a process picks its
    rules once, at start."""
    global _current
    _current = database
    for clear in _caches:
        clear()


def newer(version: str, than: str | None) -> bool:
    """Is release ``version`` newer than ``than`` (None: unknown, so yes)? A release is a year
    and letters (``2025b`` < ``2026a``; ``2026z`` < ``2026za``)."""
    if than is None:
        return True
    return (version[:4], len(version), version) > (than[:4], len(than), than)
