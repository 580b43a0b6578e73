"""Checking JSON objects read from users' files against the frozen dataclasses they become: one
ValueError naming the field, its value and the type expected (a dataclass's own __post_init__ then
checks ranges). Unknown keys are left to the caller (newer writers may add fields)."""

from __future__ import annotations

import dataclasses
from typing import Any

_JSON_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "None": (type(None),),
               "list": (list,), "tuple": (list,), "dict": (dict,), "Any": (object,)}


def allowed_types(annotation: str) -> tuple[type, ...] | None:
    """The JSON value types an annotation admits ('float | None' -> int, float, NoneType); None: unchecked."""
    allowed: tuple[type, ...] = ()
    for part in annotation.split("|"):
        base = part.strip().split("[")[0]
        if base not in _JSON_TYPES:
            return None
        allowed += _JSON_TYPES[base]
    return allowed


def check_fields(cls: type, data: Any, where: str = "") -> dict[str, Any]:
    """`data` restricted to `cls`'s fields, after checking it is an object, required fields are there
    and every known field has a JSON type its annotation admits (bool is not a number)."""
    prefix = f"{where}: " if where else ""
    if not isinstance(data, dict):
        raise ValueError(f"{prefix}expected a JSON object, got {type(data).__name__}")
    known = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{prefix}field {f.name!r} is missing")
            continue
        value = data[f.name]
        allowed = allowed_types(str(f.type))
        if allowed is not None and ((isinstance(value, bool) and bool not in allowed) or not isinstance(value, allowed)):
            raise ValueError(f"{prefix}field {f.name!r}={value!r} has the wrong type: expected {f.type}")
        known[f.name] = value
    return known


def non_finite_path(value: Any, path: str = "") -> str | None:
    """Where the first inf/NaN float sits in a JSON-like value ('a.b.0 = inf'), or None."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return f"{path or 'top level'} = {value}"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = non_finite_path(item, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None
