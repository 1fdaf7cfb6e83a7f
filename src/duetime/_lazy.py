"""Names a package imports on first use (a module ``__getattr__``, PEP 562): ``import duetime``
then costs only what its eager names need."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: a name of ``homes`` is imported from its module the
    first time it is read and kept in ``namespace`` (the package's globals), so later reads
    do not come back here; any other name is an AttributeError, as without it."""

    def read(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    return read
