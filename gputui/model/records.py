"""``@record``: gputui's frozen dataclass, with equality, hash and repr shared by every class.

``@dataclass(frozen=True)`` compiles six methods for each class it makes, each with an ``exec``
of its own (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``,
``__delattr__``): on Python 3.11 and 3.12 that is most of the cost of importing a module of
records, and a one-shot imports about a hundred of them before it prints anything. A record is
that dataclass with three of those methods not compiled per class but shared:

* ``__eq__`` compares two instances of the same class by their ``compare`` fields in order, as
  a tuple (an ``operator.attrgetter`` made once per class), exactly as the generated method
  does (a field holding the same object on both sides is equal, NaN included);
* ``__hash__`` hashes the ``hash`` fields (by default the ``compare`` ones) the same way;
* ``__repr__`` is ``Name(field=value, ...)`` over the ``repr`` fields, guarded against
  recursion like the generated one.

``__init__``, ``__setattr__`` and ``__delattr__`` (the frozenness) are the dataclass's own, as
are :func:`dataclasses.fields`, :func:`dataclasses.replace`, pickling and copying. A method the
class body defines itself is kept. For type checkers a record is a frozen dataclass
(:pep:`681`); at run time ``__dataclass_params__`` says ``eq=False, repr=False``, since the
dataclass machinery made neither method.
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


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        key = self._record_compare
        return key(self) == key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self._record_hash(self))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._record_repr)
    return f"{self.__class__.__qualname__}({shown})"


def _key(names: tuple[str, ...]) -> Callable[[object], object]:
    # The class is the getter's last item: with it there is always a tuple to compare (one
    # field would otherwise be compared bare, losing the tuple's identity-then-equality rule),
    # and the class of two compared instances is the same already.
    return operator.attrgetter(*names, "__class__")


def _make(cls: type[_T], slots: bool) -> type[_T]:
    body = cls.__dict__
    made: Any = dataclasses.dataclass(cls, frozen=True, eq=False, repr=False, slots=slots)
    fields = dataclasses.fields(made)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    made._record_compare = _key(compared)
    made._record_hash = _key(hashed)
    made._record_repr = tuple(f.name for f in fields if f.repr)
    if "__eq__" not in body:
        made.__eq__ = _eq
    # A body that defines __eq__ alone has __hash__ set to None by Python; the dataclass adds
    # its hash then too, and only a __hash__ the body wrote itself is kept.
    if body.get("__hash__") is None:
        made.__hash__ = _hash
    if "__repr__" not in body:
        made.__repr__ = _repr
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
