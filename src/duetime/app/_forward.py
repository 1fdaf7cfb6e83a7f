"""How the front hall keeps its flat API without spelling each signature twice.

``schedule = operation("jobs", Jobs.schedule)`` in a class body makes ``app.schedule`` *be*
``app.jobs.schedule`` (the service's bound method: the same signature, docstring and type, and
no extra call); on the sync :class:`~duetime.app.App` that is the sync service's mirror, so one
list of flat names (``app/_flat.py``) serves both fronts. ``Blocking`` makes a sync service's
method from an async one: the same parameters, returning the result instead of a coroutine.
Type checkers see the exact signatures through ``ParamSpec``; ``inspect.signature`` and
``help()`` see them at run time.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Coroutine
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    overload,
)

if TYPE_CHECKING:  # the two fronts, for Operation's typing only (they import this module)
    from duetime.app.async_app import AsyncApp
    from duetime.app.sync_app import App

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
S = TypeVar("S")


class _Forwarding:
    """What a flat name does at run time: read the method ``name`` of the instance's
    ``service`` (warning first when ``deprecated`` names the new way)."""

    def __init__(self, service: str, method: Callable[..., Any], deprecated: str = "") -> None:
        self.service = service
        self.name: str = method.__name__
        self.deprecated = deprecated
        self.__doc__ = method.__doc__
        self.__wrapped__ = method

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = name

    def _bound(self, obj: object) -> Any:
        if self.deprecated:
            warnings.warn(
                f"{type(obj).__name__}.{self.attr} is deprecated: use {self.deprecated}",
                DeprecationWarning,
                stacklevel=3,  # the caller of __get__
            )
        return getattr(getattr(obj, self.service), self.name)


class Forward(_Forwarding, Generic[P, R]):
    """A class attribute that reads as the method ``name`` of the instance's ``service``,
    typed as that method on any front."""

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Forward[P, R]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...
    def __get__(
        self, obj: object | None, owner: type | None = None
    ) -> Forward[P, R] | Callable[P, R]:
        if obj is None:
            return self
        bound: Callable[P, R] = self._bound(obj)
        return bound


class Operation(_Forwarding, Generic[P, T]):
    """A flat name both fronts share, made from an async service's method: on
    :class:`~duetime.app.AsyncApp` it is that method (returning its coroutine), on
    :class:`~duetime.app.App` the sync service's mirror of it (returning the result)."""

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Operation[P, T]: ...
    @overload
    def __get__(
        self, obj: AsyncApp, owner: type | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, obj: App, owner: type | None = None) -> Callable[P, T]: ...
    def __get__(
        self, obj: AsyncApp | App | None, owner: type | None = None
    ) -> Operation[P, T] | Callable[P, Coroutine[Any, Any, T]] | Callable[P, T]:
        if obj is None:
            return self
        bound: Callable[P, Any] = self._bound(obj)
        return bound


def forward(service: str, method: Callable[Concatenate[Any, P], R]) -> Forward[P, R]:
    """``app.<attr>`` is ``app.<service>.<method>``, typed as ``method`` (for a method that
    does no I/O, the same function on both fronts)."""
    return Forward(service, method)


def operation(
    service: str,
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]],
    *,
    deprecated: str = "",
) -> Operation[P, T]:
    """``app.<attr>`` is ``app.<service>.<method>`` on either front, typed as ``method`` on
    :class:`~duetime.app.AsyncApp` and returning its coroutine's result on
    :class:`~duetime.app.App`; ``deprecated`` (the new way) makes each use warn."""
    return Operation(service, method, deprecated)


def direct(method: Callable[Concatenate[Any, P], R]) -> Forward[P, R]:
    """A sync service's method that is the async service's own (a method that does no I/O):
    :func:`forward` to the service a :class:`SyncService` mirrors."""
    return Forward("_target", method)


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
