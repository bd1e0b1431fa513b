"""``@record`` behaves as ``@dataclass(frozen=True)`` does, method by method.

Each record class here has a twin made by the standard library's frozen dataclass from the
same body; the two must agree on construction, equality, hashing, repr, frozenness, replace,
pickling and copying, so that no layer can tell a record from the dataclass it stands for.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from collections.abc import Callable
from dataclasses import FrozenInstanceError, field
from typing import Any

import pytest

from gputui.model.records import record


class _Point:
    x: int
    y: float = 0.0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False)
    secret: str = field(default="", repr=False)


def _twins(body: type, name: str, *, slots: bool = True) -> tuple[Any, Any]:
    """A record and a stdlib frozen dataclass made from copies of the same class body.

    Each is a global of this module under its own name (``<name>Record``, ``<name>Dataclass``),
    so that pickle finds it.
    """
    made = []
    decorators: tuple[tuple[str, Callable[[type], Any]], ...] = (
        ("Record", lambda c: record(c) if slots else record(slots=False)(c)),
        ("Dataclass", lambda c: dataclasses.dataclass(c, frozen=True, slots=slots)),
    )
    for kind, decorate in decorators:
        namespace = {k: v for k, v in vars(body).items() if k not in ("__dict__", "__weakref__")}
        namespace["__qualname__"] = name + kind
        cls = decorate(type(name + kind, body.__bases__, namespace))
        globals()[name + kind] = cls
        made.append(cls)
    return made[0], made[1]


def _shown(value: object) -> str:
    """A repr without its class name (the twins' names differ)."""
    return repr(value).split("(", 1)[1]


PointRecord, PointDataclass = _twins(_Point, "Point")
LoosePointRecord, LoosePointDataclass = _twins(_Point, "LoosePoint", slots=False)
PAIRS = [(PointRecord, PointDataclass), (LoosePointRecord, LoosePointDataclass)]


@pytest.mark.parametrize(("rec", "std"), PAIRS)
def test_repr_is_the_dataclass_s(rec: Any, std: Any) -> None:
    for args in [(1,), (2, 3.5, ("a", "b"), "n", "s"), (0, float("nan"))]:
        assert _shown(rec(*args)) == _shown(std(*args))
        assert repr(rec(*args)).startswith(rec.__qualname__ + "(")
    assert "secret" not in repr(rec(1, secret="hidden"))


@pytest.mark.parametrize(("rec", "std"), PAIRS)
def test_equality_and_hash_follow_the_compare_fields(rec: Any, std: Any) -> None:
    cases = [
        ((1,), (1,)),
        ((1, 2.0), (1, 2.0)),
        ((1,), (2,)),
        ((1, 0.0, (), "a"), (1, 0.0, (), "b")),  # note is compare=False: equal
        ((1, 0.0, ("x",)), (1, 0.0, ("y",))),
    ]
    for left, right in cases:
        assert (rec(*left) == rec(*right)) == (std(*left) == std(*right))
        assert (rec(*left) != rec(*right)) == (std(*left) != std(*right))
        if rec(*left) == rec(*right):
            assert hash(rec(*left)) == hash(rec(*right))
    nan = float("nan")
    # Like the tuple comparison the dataclass generates: the same NaN object is equal to
    # itself, two different NaNs are not.
    assert (rec(1, nan) == rec(1, nan)) == (std(1, nan) == std(1, nan)) is True
    assert (rec(1, float("nan")) == rec(1, float("nan"))) == (
        std(1, float("nan")) == std(1, float("nan"))
    )
    assert len({rec(1), rec(1), rec(2)}) == 2


def test_hash_and_repr_share_their_code_not_compiled_per_class() -> None:
    def code(cls: type, name: str) -> object:
        return inspect.unwrap(getattr(cls, name)).__code__  # repr: under its recursion guard

    for name in ("__hash__", "__repr__"):
        assert code(PointRecord, name) is code(LoosePointRecord, name)
        assert code(PointDataclass, name) is not code(LoosePointDataclass, name)
    assert PointRecord.__hash__.__qualname__ == "PointRecord.__hash__"


def test_instances_of_different_classes_are_never_equal() -> None:
    assert PointRecord(1) != LoosePointRecord(1)
    assert PointRecord(1).__eq__(PointDataclass(1)) is NotImplemented  # the dataclass's own
    assert PointRecord(1) != (1, 0.0, (), "")


@pytest.mark.parametrize(("rec", "std"), PAIRS)
def test_frozen_like_the_dataclass(rec: Any, std: Any) -> None:
    for cls in (rec, std):
        value = cls(1)
        with pytest.raises(FrozenInstanceError):
            value.x = 2
        with pytest.raises(FrozenInstanceError):
            del value.x
    # A name that is no field. The record refuses it as frozen. The standard library's slotted
    # twin raises TypeError on Python 3.11: its guard's super() names the class as it was before
    # the slots were added; its unslotted one refuses it as frozen too.
    with pytest.raises(FrozenInstanceError):
        rec(1).other = 1
    with pytest.raises(FrozenInstanceError):
        del rec(1).other
    with pytest.raises((FrozenInstanceError, TypeError)):
        std(1).other = 1
    assert hasattr(rec(1), "__dict__") == hasattr(std(1), "__dict__")


def test_a_slotted_record_s_guards_are_closures_not_compiled_per_class() -> None:
    # Each exec costs about a quarter of a millisecond; a TUI start makes about 90 records.
    @record
    class Other:
        y: str

    for name in ("__setattr__", "__delattr__"):
        assert PointRecord.__dict__[name].__code__ is Other.__dict__[name].__code__
        assert (
            PointDataclass.__dict__[name].__code__
            is not LoosePointDataclass.__dict__[name].__code__
        )
        assert PointRecord.__dict__[name].__qualname__ == f"PointRecord.{name}"
    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):

        @record
        class Guarded:
            x: int

            def __setattr__(self, name: str, value: object) -> None:
                object.__setattr__(self, name, value)


@pytest.mark.parametrize(("rec", "std"), PAIRS)
def test_fields_replace_pickle_and_copy(rec: Any, std: Any) -> None:
    assert [f.name for f in dataclasses.fields(rec)] == [f.name for f in dataclasses.fields(std)]
    assert rec.__match_args__ == std.__match_args__
    value = rec(1, 2.0, ("t",), "n", "s")
    changed = dataclasses.replace(value, x=5)
    assert changed == rec(5, 2.0, ("t",), "n", "s") and changed.note == "n"
    for twin in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
        assert twin == value and repr(twin) == repr(value) and twin.note == "n"


def test_methods_the_body_defines_are_kept() -> None:
    @record
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    assert repr(Own(1)) == "own" and Own(1) == Own(2) and hash(Own(3)) == 7

    @record
    class OwnEq:
        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnEq)

    # Python sets __hash__ to None for a body with __eq__ alone; like the dataclass, the
    # record hashes its fields then.
    assert hash(OwnEq(1)) == hash(OwnEq(1)) and OwnEq(1) == OwnEq(2)


def test_a_subclass_sets_and_compares_its_own_fields_and_its_base_s() -> None:
    @record
    class Base:
        a: int

    @record
    class Child(Base):
        b: int = 0

    assert Child(1, 2) == Child(1, 2) and Child(1, 2) != Child(1, 3)
    child = Child(1, b=2)  # its __init__ sets the base's slot too
    assert (child.a, child.b) == (1, 2) and dataclasses.replace(child, a=5).a == 5
    assert Base(1) != Child(1)
    assert repr(Child(1, 2)).endswith("Child(a=1, b=2)")
    for name in ("a", "b"):  # its own field and its base's
        with pytest.raises(FrozenInstanceError):
            setattr(child, name, 9)
        with pytest.raises(FrozenInstanceError):
            delattr(child, name)
    # A record under a frozen base keeps the dataclass's own guard (see the module): any other
    # name is refused as the standard library's slotted class refuses it.
    with pytest.raises((FrozenInstanceError, TypeError)):
        child.other = 9  # type: ignore[attr-defined]
    assert copy.deepcopy(child) == child and copy.copy(child).b == 2
    assert all(vars(c)["__dataclass_params__"].frozen for c in (Base, Child))

    # A frozen dataclass may extend a record: the record says it is frozen.
    @dataclasses.dataclass(frozen=True, slots=True)
    class Extended(Base):
        c: int = 0

    extended = Extended(1, 2)
    assert (extended.a, extended.c) == (1, 2)
    with pytest.raises(FrozenInstanceError):
        extended.a = 3  # type: ignore[misc]


def test_repr_of_a_record_that_contains_itself_does_not_recurse() -> None:
    @record
    class Box:
        items: list[object]

    box = Box([])
    box.items.append(box)
    assert repr(box).endswith("Box(items=[...])")


class _Built:
    a: int
    b: str = "b"
    items: list[int] = field(default_factory=list)
    made: int = field(default=7, init=False)
    hidden: tuple[int, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError("a must not be negative")


BuiltRecord, BuiltDataclass = _twins(_Built, "Built")


def test_init_takes_the_dataclass_s_parameters_and_sets_the_same_fields() -> None:
    assert str(inspect.signature(BuiltRecord)) == str(inspect.signature(BuiltDataclass))
    for args, kwargs in [((1,), {}), ((2, "x", [3]), {}), ((3,), {"hidden": (1,), "b": "k"})]:
        rec, std = BuiltRecord(*args, **kwargs), BuiltDataclass(*args, **kwargs)
        assert _shown(rec) == _shown(std)
        assert (rec.made, rec.hidden) == (std.made, std.hidden) == (7, kwargs.get("hidden", ()))
    # Each instance gets its own list from the factory, as the dataclass's do.
    first, second = BuiltRecord(1), BuiltRecord(1)
    assert first.items == [] and first.items is not second.items
    for cls in (BuiltRecord, BuiltDataclass):
        with pytest.raises(ValueError, match="negative"):
            cls(-1)  # __post_init__ runs
        with pytest.raises(TypeError):
            cls()  # a required field
        with pytest.raises(TypeError):
            cls(1, made=3)  # init=False: no parameter
    assert BuiltRecord.__init__.__qualname__ == "BuiltRecord.__init__"


def test_init_stores_through_the_slots_not_object_setattr() -> None:
    names = BuiltRecord.__init__.__code__.co_freevars
    assert "_set_a" in names and "_set_made" in names
    assert "__dataclass_builtins_object__" not in BuiltRecord.__init__.__code__.co_names
    # The frozen class still refuses assignment after construction.
    with pytest.raises(FrozenInstanceError):
        BuiltRecord(1).a = 2


def test_keyword_only_and_initvar_fields_are_refused() -> None:
    with pytest.raises(TypeError, match="keyword-only"):

        @record
        class KwOnly:
            a: int = field(default=0, kw_only=True)

    with pytest.raises(TypeError, match="InitVar"):

        @record
        class WithInitVar:
            a: int
            seed: dataclasses.InitVar[int] = 0
