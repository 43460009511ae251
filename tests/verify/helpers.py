"""What the engine tests share: the type of the `run` fixture and a rank's events by kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.verify.engine import RunResult

Run = Callable[..., RunResult]


def events(result: RunResult, rank: int, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.ranks[rank].events if e["kind"] == kind]
