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

A slotted record's frozenness is not compiled per class either: ``__setattr__`` and
``__delattr__`` are closures over the class and its field names that refuse what the frozen
dataclass's refuse (any name on the record's own class: the standard library's slotted guard
raises ``TypeError`` there on Python 3.11, its ``super()`` naming the class as it was before the
slots), and its state methods are the standard library's for a frozen slotted class. Of the 88
records a TUI start makes, making them took 101 ms with the dataclass's guards and 68 ms
without, on the 2-core machine (median of 6, alternated). An unslotted record keeps the
dataclass's guards (its ``__init__`` is the dataclass's, which needs them), as does a record
extending a frozen dataclass (below).

``__eq__`` stays the dataclass's compiled one: it is on the hot paths (every refresh compares
rows and readings), where the generated tuple comparison is about 1.6 times as fast as any
shared function's. :func:`dataclasses.fields`, :func:`dataclasses.replace`, pickling and
copying are the dataclass's. A method the class body defines itself is kept; a body that
defines ``__setattr__`` or ``__delattr__`` is refused, as the frozen dataclass refuses it.

A slotted record's ``__init__`` is compiled here instead of by the dataclass (one ``exec``
either way), with the same parameters, defaults, factories and ``__post_init__`` call. The
dataclass's frozen ``__init__`` stores each field through ``object.__setattr__`` looked up
anew per field; this one calls each slot's own setter, bound once per class: 1.6 to 1.7
times as fast for a record of twelve to fifteen fields. Records are made by the thousand each
refresh on a busy host (a GPU process's sample, its ``/proc`` facts, the two joined, each
container's usage). Keyword-only fields and ``InitVar`` are not supported (no record uses
them): such a class is refused when it is made.

For type checkers a record is a frozen dataclass (:pep:`681`); at run time
``__dataclass_params__`` says ``repr=False`` (and, for a slotted record, ``init=False``), since
the dataclass machinery did not make those methods; it says ``frozen=True``, so a frozen
dataclass may extend a record. A record extending a frozen dataclass (a record too) keeps the
dataclass's guards: the dataclass refuses to extend a frozen class with one it is told is not.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
import sys
import types
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


def _slot_setter(cls: type, name: str) -> Callable[[object, object], None]:
    """The ``__set__`` of the slot that holds ``name`` on ``cls`` or a base."""
    for klass in cls.__mro__:
        slot = klass.__dict__.get(name)
        if isinstance(slot, types.MemberDescriptorType):
            setter: Callable[[object, object], None] = slot.__set__
            return setter
    raise TypeError(f"record {cls.__qualname__}: field {name!r} has no slot")


def _init_method(cls: type) -> Callable[..., None]:
    """The dataclass's ``__init__`` for ``cls``, storing through each field's slot setter."""
    fields = dataclasses.fields(cls)
    pseudo = set(cls.__dict__["__dataclass_fields__"]) - {f.name for f in fields}
    if pseudo or any(f.kw_only for f in fields):
        names = ", ".join(sorted(pseudo) or [f.name for f in fields if f.kw_only])
        raise TypeError(f"record {cls.__qualname__}: InitVar or keyword-only fields ({names})")
    bound: dict[str, object] = {"_HAS_DEFAULT_FACTORY": _HAS_DEFAULT_FACTORY}
    params, body = ["self"], []
    seen_default = False
    for f in fields:
        setter, default = f"_set_{f.name}", f"_dflt_{f.name}"
        bound[setter] = _slot_setter(cls, f.name)
        if f.default_factory is not dataclasses.MISSING:
            bound[default] = f.default_factory
            value = f"{default}()"
            if f.init:
                value = f"{default}() if {f.name} is _HAS_DEFAULT_FACTORY else {f.name}"
        elif f.init:
            value = f.name
        elif f.default is not dataclasses.MISSING:
            bound[default] = f.default
            value = default
        else:
            continue  # set by nobody, as the dataclass leaves it
        if f.init:
            if f.default is not dataclasses.MISSING:
                bound[default] = f.default
                params.append(f"{f.name}={default}")
                seen_default = True
            elif f.default_factory is not dataclasses.MISSING:
                params.append(f"{f.name}=_HAS_DEFAULT_FACTORY")
                seen_default = True
            elif seen_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
            else:
                params.append(f.name)
        body.append(f"  {setter}(self, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("  self.__post_init__()")
    # The bound names are the maker's parameters, so the method reads them as closure cells.
    source = (
        f"def _maker({', '.join(bound)}):\n"
        f" def __init__({', '.join(params)}):\n"
        + ("\n".join(body) or "  pass")
        + "\n return __init__\n"
    )
    namespace: dict[str, Any] = {}
    # The source holds field names only (identifiers the class statement made); values are
    # bound as the maker's arguments, never written into it.
    exec(source, {"__builtins__": {}}, namespace)
    method: Callable[..., None] = namespace["_maker"](**bound)
    method.__qualname__ = f"{cls.__qualname__}.__init__"
    method.__module__ = cls.__module__
    # As the dataclass annotates its own (inspect.signature, help() and IDEs show them).
    method.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
    return method


def _freeze(cls: Any, body: dict[str, Any], names: frozenset[str]) -> None:
    """Give a slotted record the frozen dataclass's guards, as closures over ``cls`` (no exec).

    They refuse what the generated ones refuse: any assignment or deletion on an instance of
    ``cls`` itself, and of a field on a subclass's. The state methods are the standard
    library's for a frozen slotted class (pickling and copying set the slots through
    ``object.__setattr__``, never through the guard).
    """
    for name in ("__setattr__", "__delattr__"):
        if name in body:  # as the frozen dataclass refuses it
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")

    def __setattr__(self: Any, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for method in (__setattr__, __delattr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        setattr(cls, method.__name__, method)
    if "__getstate__" not in body:
        cls.__getstate__ = _getstate
    if "__setstate__" not in body:
        cls.__setstate__ = _setstate


def _getstate(self: Any) -> list[object]:
    """The fields' values in order (a frozen slotted record's pickled state)."""
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[object]) -> None:
    """Set the fields from :func:`_getstate`'s list, past the frozen guard."""
    for f, value in zip(dataclasses.fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)


class _DefaultFactory:
    """The marker of a parameter left to its field's default factory."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_DEFAULT_FACTORY = _DefaultFactory()


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
    own_init = slots and "__init__" not in body
    # A slotted record's frozenness is its own (_freeze): the dataclass is told the class is
    # not frozen, so that it compiles neither of its guards. Not under a frozen dataclass base
    # (a record too), which the dataclass refuses to extend with a class it thinks is not.
    own_guard = slots and not any(
        params.frozen
        for base in cls.__mro__[1:]
        if (params := base.__dict__.get("__dataclass_params__")) is not None
    )
    made: Any = dataclasses.dataclass(
        cls, frozen=not own_guard, repr=False, slots=slots, init=not own_init
    )
    if own_init:
        made.__init__ = _init_method(made)
    fields = dataclasses.fields(made)
    if own_guard:
        _freeze(made, body, frozenset(f.name for f in fields))
        made.__dataclass_params__.frozen = True  # as it is: subclasses see a frozen base
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
