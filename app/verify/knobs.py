"""Knob values: the one codec for every way they travel, and the one rule that admits them.

A knob value is a bool, number, string or (nested) list — JSON. The learner's
Verify panel and the author's editor carry each value in a form field named
`knob.NAME` whose option values are `encode(value)`; the API takes JSON as is;
the CLI takes `name=value` with the value decoded like a form field. Whatever
the entry point, `resolve` matches the decoded value to one of the question's
allowed values, so a value either runs exactly as allowed or is refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from app.errors import InvalidInput
from app.questions.schema import KnobValue, VerifyBlock

FIELD_PREFIX = "knob."


class InvalidKnob(InvalidInput):
    """A requested knob value the question does not allow."""

    def __init__(self, knob: str, message: str) -> None:
        # A name can arrive from JSON with a lone surrogate, which no encoder accepts:
        # keep it printable so the error itself can be sent back.
        knob = knob.encode("utf-8", "backslashreplace").decode("utf-8")
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(f"{knob}: {message}", loc=("params", knob))
        self.knob = knob
        self.message = message


def encode(value: Any) -> str:
    """A knob value as a form field carries it: compact JSON, non-ASCII kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def decode(text: str) -> Any:
    """A form field or CLI value back to a value: JSON if it parses, else the plain string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def field_name(name: str) -> str:
    """The form field that carries knob `name`."""
    return FIELD_PREFIX + name


def from_form(block: VerifyBlock, form: Mapping[str, Any]) -> dict[str, Any]:
    """The knob values a form (or a query string) chose; fields left empty take defaults."""
    params: dict[str, Any] = {}
    for name in block.knobs:
        raw = form.get(field_name(name))
        if isinstance(raw, str) and raw != "":
            params[name] = decode(raw)
    return params


def from_pairs(pairs: Iterable[str]) -> dict[str, Any]:
    """`name=value` pairs from the command line, each value decoded like a form field."""
    params: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--param wants name=value, got {pair!r}")
        params[name] = decode(raw)
    return params


def _match(allowed: list[KnobValue], value: Any) -> KnobValue | None:
    exact = next((v for v in allowed if v == value and type(v) is type(value)), None)
    if exact is not None or isinstance(value, bool):
        return exact
    # JSON has one number type: accept 2.0 for an allowed 2, never True for 1.
    return next((v for v in allowed if not isinstance(v, bool) and v == value), None)


def resolve(block: VerifyBlock, raw: dict[str, Any] | None) -> tuple[int, dict[str, KnobValue]]:
    """(world size, params) for requested knob values; unknown or disallowed values raise InvalidKnob.

    A knob named `world_size` sets the number of ranks as well as appearing in params. A
    rendered variant's `params` (its variables) come first; knobs never share their names.
    """
    params: dict[str, KnobValue] = {**block.params, **block.defaults()}
    for name, value in dict(raw or {}).items():
        knob = block.knobs.get(name)
        if knob is None:
            allowed = ", ".join(block.knobs) or "none"
            raise InvalidKnob(name, f"not a knob of this question (knobs: {allowed})")
        match = _match(knob.values, value)
        if match is None:
            shown = ", ".join(encode(v) for v in knob.values)
            raise InvalidKnob(name, f"{encode(value)} is not allowed; choose one of {shown}")
        params[name] = match
    world_size = block.world_size
    if "world_size" in params:
        # The schema allows only whole numbers 1..MAX_WORLD_SIZE for this knob.
        chosen = params["world_size"]
        assert isinstance(chosen, int)
        world_size = chosen
    return world_size, params
