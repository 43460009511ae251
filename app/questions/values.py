"""A question variable's values: how every message names a variant, when two values are the
same, and which fields of a check may be a "{{ expression }}". The format (schema.py) and
the templates (variants.py) both read them."""

from __future__ import annotations

import json
from typing import Any

# Fields of the checks that may hold a "{{ expression }}" in a question with variables.
TEMPLATED_CHECK_FIELDS = {"value": ("equals",), "collectives": ("count", "at_least", "at_most"),
                          "bytes": ("equals", "at_most", "at_least")}

def show_value(value: Any) -> str:
    """A variable's value as a variant's name shows it: strings bare, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def describe_variant(index: int, params: dict[str, Any]) -> str:
    """`variant 3 (world_size=4, tensor_mb=800)`: how every message and page names a variant,
    counted from 1 as people count (the stored index is one less)."""
    inner = ", ".join(f"{k}={show_value(v)}" for k, v in params.items())
    return f"variant {index + 1} ({inner})" if inner else f"variant {index + 1}"


def same_value(a: Any, b: Any) -> bool:
    """Equal as allowed values are: True is not 1, 2.0 is 2."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)
