"""Structural deltas between two JSON records: what changed, by key and by identity.

A timeline record is about 26 KB on the demo but about 150 KB on a busy host (8 GPUs, 220
processes, 30 containers), far past zlib's 32 KB window, so a preset dictionary of the previous
record cannot name what did not change. A delta names only what did, at any size.

A delta is JSON, one *node* per changed value:

* a number, text, ``true`` or ``false``: the value is that;
* ``[v]``: the value is ``v`` (an object or a list written whole, or ``null``);
* ``{"d": {key: node, ...}, "x": [key, ...]}``: an object whose keys ``d`` changed (a key that
  is new is appended, in ``d``'s order) and whose keys ``x`` were removed (``x`` is left out
  when empty); a key not named is unchanged;
* ``{"p": [[skip, node], ...]}``: a list of the same length in which, after the previous
  changed item (or from the start), ``skip`` items are unchanged and the next one changed;
* ``{"l": [item, ...]}``: a list rebuilt item by item from the old one's items: ``k`` is the
  old item ``k`` places after the one used before (``0``: the next one; it may be negative),
  unchanged, ``[k, node]`` is it changed, ``[v]`` is a new item. Each old item is used at
  most once, so a delta cannot make a record larger than the old one and itself.

Positions are relative so that a list whose items all change, or that lost one item, writes
the same few bytes again and again (which zlib then stores as back-references).

The encoder matches a list's objects by their identity (:data:`IDENTITY_KEYS`: a process's
pid, a container's id, a GPU's uuid or index, found on the object or one object down, as the
recording codec nests them under ``info`` and ``sample``), so a process that exits or a list
sorted anew changes one item, not every item after it. Matching only decides the delta's size:
applying it gives back the new record exactly whichever old items were matched.

:func:`diff` and :func:`apply` work on what :func:`json.loads` returns (dicts with text keys,
lists, text, ints, floats, booleans, None): ``json.dumps`` of the applied delta is byte for
byte the new record's. Types count (``1``, ``1.0`` and ``true`` differ, and so do ``0.0`` and
``-0.0``), as they do in JSON text.
"""

from __future__ import annotations

import math
from typing import Any

#: Keys that name an object in a list, most specific first (looked for on the object, then on
#: the objects it holds).
IDENTITY_KEYS = ("uuid", "id", "pid", "index", "name")
#: The deepest a delta's nodes go; the encoder writes deeper changes as a whole value there.
MAX_DEPTH = 48

_MISSING = object()


class DeltaError(ValueError):
    """A delta that does not apply to the record it is given (damaged or hostile)."""


def diff(old: Any, new: Any) -> Any:
    """The delta that turns ``old`` into ``new`` (both parsed JSON).

    Returns:
        The delta's root node: ``{"d": {}}`` (an object) or ``{"p": []}`` (a list) when nothing
        changed.
    """
    node = _diff(old, new, 0)
    if node is not None:
        return node
    kind = type(new)
    return {"d": {}} if kind is dict else {"p": []} if kind is list else new


def apply(old: Any, delta: Any) -> Any:
    """``old`` with ``delta`` applied; ``old`` is left as it was (unchanged parts are shared).

    Raises:
        DeltaError: the delta is not one, is deeper than :data:`MAX_DEPTH`, or names what
            ``old`` does not hold.
    """
    return _apply(old, delta, 0)


def _same_scalar(a: Any, b: Any) -> bool:
    if type(a) is not type(b) or a != b:
        return False
    # 0.0 == -0.0, but JSON writes them apart.
    return type(a) is not float or math.copysign(1.0, a) == math.copysign(1.0, b)


def _whole(value: Any) -> Any:
    # null too is written [null]: a node of None means "unchanged" to _diff's callers.
    kind = type(value)
    return [value] if kind is dict or kind is list or value is None else value


def _diff(old: Any, new: Any, depth: int) -> Any:
    kind = type(new)
    if type(old) is not kind:
        return _whole(new)
    if kind is dict:
        if depth >= MAX_DEPTH:
            return None if _equal(old, new) else [new]
        return _diff_dict(old, new, depth)
    if kind is list:
        if depth >= MAX_DEPTH:
            return None if _equal(old, new) else [new]
        return _diff_list(old, new, depth)
    return None if _same_scalar(old, new) else _whole(new)


def _equal(a: Any, b: Any) -> bool:
    """Equal as JSON text is (types count), without a depth limit's recursion in a delta."""
    kind = type(a)
    if type(b) is not kind:
        return False
    if kind is dict:
        return list(a) == list(b) and all(_equal(v, b[k]) for k, v in a.items())
    if kind is list:
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return _same_scalar(a, b)


def _keeps_order(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether applying gives ``new``'s key order: old keys in their order, new ones after."""
    last = -1
    added = False
    position = {k: i for i, k in enumerate(old)}
    for key in new:
        at = position.get(key)
        if at is None:
            added = True
        elif added or at < last:
            return False
        else:
            last = at
    return True


def _diff_dict(old: dict[str, Any], new: dict[str, Any], depth: int) -> Any:
    changed: dict[str, Any] = {}
    removed: list[str] = []
    if list(old) != list(new):
        if not _keeps_order(old, new):
            return [new]
        removed = [k for k in old if k not in new]
    deeper = depth + 1
    missing = _MISSING
    # The hot loop of the writer's delta (thousands of figures a snapshot): scalars are
    # compared here rather than through _diff.
    for key, value in new.items():
        before = old.get(key, missing)
        kind = type(value)
        if type(before) is not kind:
            changed[key] = _whole(value)
        elif kind is dict or kind is list:
            node = _diff(before, value, deeper)
            if node is not None:
                changed[key] = node
        elif before != value or (
            kind is float and value == 0.0 and not _same_scalar(before, value)
        ):
            changed[key] = value
    if not changed and not removed:
        return None
    out: dict[str, Any] = {"d": changed}
    if removed:
        out["x"] = removed
    return out


def _identity(item: Any) -> Any:
    if type(item) is not dict:
        return None
    for key in IDENTITY_KEYS:
        value = item.get(key)
        if type(value) in (str, int):
            return key, value
    for inner in item.values():
        if type(inner) is dict:
            for key in IDENTITY_KEYS:
                value = inner.get(key)
                if type(value) in (str, int):
                    return key, value
    return None


def _identities(items: list[Any]) -> list[Any] | None:
    ids = [_identity(item) for item in items]
    if None in ids or len(set(ids)) != len(ids):
        return None
    return ids


def _diff_list(old: list[Any], new: list[Any], depth: int) -> Any:
    new_ids = _identities(new) if new and type(new[0]) is dict else None
    old_ids = _identities(old) if new_ids is not None and old else None
    if new_ids is not None and old_ids is not None and new_ids != old_ids:
        where = {ident: j for j, ident in enumerate(old_ids)}
        items: list[Any] = []
        last = -1
        for ident, value in zip(new_ids, new, strict=True):
            j = where.get(ident)
            if j is None:
                items.append([value])
                continue
            node = _diff(old[j], value, depth + 1)
            items.append(j - last - 1 if node is None else [j - last - 1, node])
            last = j
        return {"l": items}
    if len(old) != len(new):
        return [new]
    changes = []
    last = -1
    for i, (before, after) in enumerate(zip(old, new, strict=True)):
        node = _diff(before, after, depth + 1)
        if node is not None:
            changes.append([i - last - 1, node])
            last = i
    return {"p": changes} if changes else None


def _index(last: int, step: Any, size: int) -> int:
    if type(step) is not int or not 0 <= last + 1 + step < size:
        raise DeltaError(f"delta names an item past a list of {size}"[:200])
    return last + 1 + step


def _apply(old: Any, node: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise DeltaError(f"delta deeper than {MAX_DEPTH}")
    kind = type(node)
    if kind is list:
        if len(node) != 1:
            raise DeltaError("a delta's value is a list of one")
        return node[0]
    if kind is not dict:
        return node
    if len(node) != (2 if "x" in node else 1):
        raise DeltaError("a delta's node is a value or one of d, p, l")
    if "d" in node:
        return _apply_dict(old, node["d"], node.get("x", []), depth)
    if "p" in node:
        return _apply_positions(old, node["p"], depth)
    if "l" in node:
        return _apply_items(old, node["l"], depth)
    raise DeltaError("a delta's node is a value or one of d, p, l")


def _apply_dict(old: Any, changed: Any, removed: Any, depth: int) -> dict[str, Any]:
    if type(old) is not dict or type(changed) is not dict or type(removed) is not list:
        raise DeltaError("delta changes keys of what is not an object")
    gone = set()
    for key in removed:
        if type(key) is not str or key not in old or key in changed:
            raise DeltaError(f"delta removes a key the object does not hold: {key!r}"[:200])
        gone.add(key)
    out: dict[str, Any] = {}
    for key, value in old.items():
        if key in gone:
            continue
        node = changed.get(key, _MISSING)  # a changed value may be null
        out[key] = value if node is _MISSING else _apply(value, node, depth + 1)
    for key, node in changed.items():
        if key not in old:
            if type(node) is dict:
                raise DeltaError(f"delta changes a key the object does not hold: {key!r}"[:200])
            out[key] = _apply(None, node, depth + 1)
    return out


def _apply_positions(old: Any, changes: Any, depth: int) -> list[Any]:
    if type(old) is not list or type(changes) is not list:
        raise DeltaError("delta changes items of what is not a list")
    out = list(old)
    last = -1
    for change in changes:
        if type(change) is not list or len(change) != 2:
            raise DeltaError("a list delta's change is [skip, node]")
        if type(change[0]) is int and change[0] < 0:
            raise DeltaError("a list delta's skip is negative")
        last = _index(last, change[0], len(old))
        out[last] = _apply(old[last], change[1], depth + 1)
    return out


def _apply_items(old: Any, items: Any, depth: int) -> list[Any]:
    if type(old) is not list or type(items) is not list:
        raise DeltaError("delta rebuilds what is not a list")
    used = bytearray(len(old))
    out = []
    last = -1
    for item in items:
        if type(item) is list and len(item) == 1:
            out.append(item[0])
            continue
        if type(item) is list and len(item) == 2:
            j = _index(last, item[0], len(old))
            value = _apply(old[j], item[1], depth + 1)
        else:
            j = _index(last, item, len(old))
            value = old[j]
        last = j
        if used[j]:
            # Each old item once: a delta of a few bytes cannot repeat a large one.
            raise DeltaError(f"a list delta uses item {j} twice")
        used[j] = 1
        out.append(value)
    return out
