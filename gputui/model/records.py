"""``@record``: gputui's frozen dataclass, its hash and repr not compiled for each class.

``@dataclass(frozen=True)`` compiles six methods for each class it makes, each with an ``exec``
of its own (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``,
``__delattr__``): on Python 3.11 and 3.12 that is most of the cost of importing a module of
records, and a one-shot imports about a hundred of them before it prints anything. A record is
that dataclass with two of those methods not compiled per class: each is a closure of code
written once here, over the class's own field getter or names (no ``exec``):

* ``__hash__`` hashes the ``hash`` fields (by default the ``compare`` ones) as a tuple (an
  ``operator.attrgetter`` made once per class), consistent with the equality;
* ``__repr__`` is ``Name(field=value, ...)`` over the ``repr`` fields, guarded against
  recursion like the generated one.

``__eq__`` stays the dataclass's compiled one: it is on the hot paths (every refresh compares
rows and readings), where the generated tuple comparison is about 1.6 times as fast as any
shared function's. ``__init__``, ``__setattr__`` and ``__delattr__`` (the frozenness) are the
dataclass's own too, as are :func:`dataclasses.fields`, :func:`dataclasses.replace`, pickling
and copying. A method the class body defines itself is kept. For type checkers a record is a
frozen dataclass (:pep:`681`); at run time ``__dataclass_params__`` says ``repr=False``, since
the dataclass machinery did not make that method.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

_T = TypeVar("_T")
_F = TypeVar("_F")

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
elif TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: object) -> Callable[[_F], _F]:
        """Python 3.10's stand-in: the marker is only ever read by type checkers."""
        return lambda function: function


def _key(names: tuple[str, ...]) -> Callable[[object], object]:
    # The class is the getter's last item: with it there is always a tuple (no field, or one
    # field, would otherwise be hashed bare), and equal instances are of one class already.
    return operator.attrgetter(*names, "__class__")


def _hash_method(key: Callable[[object], object]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


def _repr_method(names: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _unset_hash(self: Any) -> int:
    raise TypeError("record hash not set")  # replaced as soon as the class is made


def _make(cls: type[_T], slots: bool) -> type[_T]:
    body = dict(cls.__dict__)
    # A body that defines __eq__ alone has __hash__ set to None by Python; the dataclass adds
    # its hash then too, and only a __hash__ the body wrote itself is kept. The dataclass is
    # given a hash of the class's own, so that it compiles none.
    own_hash = body.get("__hash__") is not None
    if not own_hash:
        cls.__hash__ = _unset_hash  # type: ignore[method-assign]
    made: Any = dataclasses.dataclass(cls, frozen=True, repr=False, slots=slots)
    fields = dataclasses.fields(made)
    if not own_hash:
        hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        made.__hash__ = _hash_method(_key(hashed))
    if "__repr__" not in body:
        made.__repr__ = _repr_method(tuple(f.name for f in fields if f.repr))
    for name in ("__hash__", "__repr__"):
        method = made.__dict__.get(name)
        if method is not None and name not in body:
            method.__qualname__ = f"{made.__qualname__}.{name}"  # as tracebacks should name it
    made_class: type[_T] = made
    return made_class


@overload
def record(cls: type[_T], /) -> type[_T]: ...


@overload
def record(*, slots: bool = True) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[_T] | None = None, /, *, slots: bool = True) -> Any:
    """Make ``cls`` a frozen dataclass whose equality, hash and repr are the shared ones.

    ``@record`` is ``@dataclass(frozen=True, slots=True)``; ``@record(slots=False)`` is
    ``@dataclass(frozen=True)``.

    Args:
        cls: The class (``@record`` without parentheses).
        slots: Give the class ``__slots__`` (the default).

    Returns:
        The class, or a decorator that makes it.
    """
    if cls is None:
        return lambda inner: _make(inner, slots)
    return _make(cls, slots)
