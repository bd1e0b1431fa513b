"""Comparing a report with an older one: the keys the older one has, at every depth."""

from __future__ import annotations

from typing import Any


def as_old(doc: Any, old: Any) -> Any:
    """``doc`` cut to the keys ``old`` has, in every object at every depth.

    The contract grows by adding keys; a report written before a key existed must still come
    back equal on every key it holds. Lists are compared item by item (their lengths too).
    """
    if isinstance(doc, dict) and isinstance(old, dict):
        return {k: as_old(doc[k], v) if k in doc else _MISSING for k, v in old.items()}
    if isinstance(doc, list) and isinstance(old, list) and len(doc) == len(old):
        return [as_old(d, o) for d, o in zip(doc, old, strict=True)]
    return doc


#: What a key of the old report that the new one lacks reads as (never equal to a value).
_MISSING = object()
