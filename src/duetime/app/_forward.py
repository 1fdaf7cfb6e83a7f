"""How the front hall keeps its flat API without spelling each signature twice.

``schedule = forward("jobs", Jobs.schedule)`` in a class body makes ``app.schedule`` *be*
``app.jobs.schedule`` (the service's bound method: the same signature, docstring and type, and
no extra call). ``blocking`` makes a sync service's method from an async one: the same
parameters, returning the result instead of a coroutine. Type checkers see the exact
signatures through ``ParamSpec``; ``inspect.signature`` and ``help()`` see them at run time.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
S = TypeVar("S")


class Forward(Generic[P, R]):
    """A class attribute that reads as the method ``name`` of the instance's ``service``."""

    def __init__(self, service: str, method: Callable[..., Any], deprecated: str = "") -> None:
        self.service = service
        self.name: str = method.__name__
        self.deprecated = deprecated
        self.__doc__ = method.__doc__
        self.__wrapped__ = method

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = f"{owner.__name__}.{name}"

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Forward[P, R]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...
    def __get__(
        self, obj: object | None, owner: type | None = None
    ) -> Forward[P, R] | Callable[P, R]:
        if obj is None:
            return self
        if self.deprecated:
            warnings.warn(
                f"{self.attr} is deprecated: use {self.deprecated}",
                DeprecationWarning,
                stacklevel=2,
            )
        bound: Callable[P, R] = getattr(getattr(obj, self.service), self.name)
        return bound


def forward(service: str, method: Callable[Concatenate[Any, P], R]) -> Forward[P, R]:
    """``app.<attr>`` is ``app.<service>.<method>``, typed as ``method``."""
    return Forward(service, method)


def forward_blocking(
    service: str, method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]
) -> Forward[P, T]:
    """Like :func:`forward` on a sync facade whose ``service`` mirrors an async one with
    :class:`Blocking` methods: typed as ``method``, returning its coroutine's result."""
    return Forward(service, method)


def deprecated(
    service: str, method: Callable[Concatenate[Any, P], R], *, use: str
) -> Forward[P, R]:
    """:func:`forward` that warns (DeprecationWarning) on each use: ``use`` names the new way."""
    return Forward(service, method, deprecated=use)


def deprecated_blocking(
    service: str, method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]], *, use: str
) -> Forward[P, T]:
    """:func:`forward_blocking` that warns (DeprecationWarning) on each use."""
    return Forward(service, method, deprecated=use)


class Runner(Protocol):
    """Runs a coroutine to completion somewhere and returns its result (``App._call``)."""

    def __call__(self, make: Callable[[], Coroutine[Any, Any, T]], /) -> T: ...


class SyncService(Generic[S]):
    """The blocking mirror of an async service ``S``: each method runs the service's
    coroutine through ``run`` and returns its result."""

    def __init__(self, run: Runner, target: S) -> None:
        self._run = run
        self._target = target


class Blocking(Generic[P, T]):
    """A sync service's method made from an async service's ``method`` (same parameters)."""

    def __init__(self, method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]) -> None:
        self.name: str = method.__name__
        self.__doc__ = method.__doc__
        self.__wrapped__ = method

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Blocking[P, T]: ...
    @overload
    def __get__(self, obj: SyncService[Any], owner: type | None = None) -> Callable[P, T]: ...
    def __get__(
        self, obj: SyncService[Any] | None, owner: type | None = None
    ) -> Blocking[P, T] | Callable[P, T]:
        if obj is None:
            return self
        target: Callable[P, Coroutine[Any, Any, T]] = getattr(obj._target, self.name)
        run = obj._run

        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            return run(lambda: target(*args, **kwargs))

        functools.update_wrapper(call, target)  # its signature and docstring
        obj.__dict__[self.attr] = call  # made once per service object
        return call

    def __call__(self, obj: SyncService[Any], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Called from the class, as a plain function is: ``SyncRuns.find(service, …)``
        (``inspect`` does so for ``__call__``)."""
        return self.__get__(obj)(*args, **kwargs)


# Blocking's and Direct's __get__ overloads look alike on purpose: each descriptor needs its own
# typed overloads (one returns the coroutine's result, the other the method's own).
class Direct(Generic[P, R]):
    """A sync service's method that is the async service's own (a method that does no I/O)."""

    def __init__(self, method: Callable[Concatenate[Any, P], R]) -> None:
        self.name: str = method.__name__
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Direct[P, R]: ...
    @overload
    def __get__(self, obj: SyncService[Any], owner: type | None = None) -> Callable[P, R]: ...
    def __get__(
        self, obj: SyncService[Any] | None, owner: type | None = None
    ) -> Direct[P, R] | Callable[P, R]:
        if obj is None:
            return self
        bound: Callable[P, R] = getattr(obj._target, self.name)
        return bound
