"""Checking a question's `expect` block against a measured run (pure functions).

Works on the run result's JSON form (docs/run-result.md), the same data the
database stores and the API returns, so a verdict can be recomputed from any
stored run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from app.questions.schema import Expectation, KnobValue


@dataclass(frozen=True)
class CheckResult:
    label: str
    passed: bool
    expected: str
    measured: str
    # Per rank, for value checks: rank -> (measured, passed).
    per_rank: dict[int, tuple[Any, bool]] | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.per_rank is not None:
            data["per_rank"] = {str(k): {"measured": v[0], "passed": v[1]}
                                for k, v in self.per_rank.items()}
        return data


def applies(exp: Expectation, params: dict[str, Any], world_size: int) -> bool:
    """True when every `when` condition matches this run's knob values."""
    for name, want in exp.when.items():
        have = world_size if name == "world_size" else params.get(name)
        if have != want:
            return False
    return True


def close(measured: Any, expected: Any, tol: float) -> bool:
    """Numbers, and nested lists of them, equal within an absolute-or-relative tolerance."""
    if isinstance(expected, bool) or isinstance(measured, bool):
        return type(measured) is type(expected) and measured == expected
    if isinstance(expected, int | float) and isinstance(measured, int | float):
        if math.isnan(expected) or math.isnan(measured):
            return math.isnan(expected) and math.isnan(measured)
        return math.isclose(measured, expected, abs_tol=tol, rel_tol=tol)
    if isinstance(expected, list) and isinstance(measured, list):
        return len(expected) == len(measured) and all(
            close(m, e, tol) for m, e in zip(measured, expected, strict=True)
        )
    return bool(measured == expected)


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ranks(result: dict[str, Any]) -> list[dict[str, Any]]:
    return list(result.get("ranks") or [])


def _rank(result: dict[str, Any], index: int) -> dict[str, Any] | None:
    return next((r for r in _ranks(result) if r.get("rank") == index), None)


def _buckets(result: dict[str, Any], rank: int, iteration: int | None) -> list[dict[str, Any]]:
    rows = [b for b in result.get("buckets") or [] if b.get("rank") == rank]
    if iteration is not None:
        rows = [b for b in rows if b.get("iteration") == iteration]
    return sorted(rows, key=lambda b: (b.get("reduce_start_ms") or 0.0, b.get("index", 0)))


def check(exp: Expectation, result: dict[str, Any]) -> CheckResult:
    """Evaluate one expectation against one result."""
    label = exp.label
    if exp.outcome is not None:
        got = result.get("outcome")
        return CheckResult(label, got == exp.outcome, f"outcome {exp.outcome}", f"outcome {got}")

    if exp.value is not None:
        v = exp.value
        targets = [r.get("rank") for r in _ranks(result)] if v.rank == "all" else [v.rank]
        per_rank: dict[int, tuple[Any, bool]] = {}
        for idx in targets:
            rank = _rank(result, int(idx)) if idx is not None else None
            values = (rank or {}).get("values") or {}
            if v.name not in values:
                per_rank[int(idx or 0)] = ("(not reported)", False)
                continue
            measured = values[v.name]
            per_rank[int(idx or 0)] = (measured, close(measured, v.equals, v.tol))
        passed = bool(per_rank) and all(ok for _, ok in per_rank.values())
        measured_text = "; ".join(f"rank {k}: {_short(m)}" for k, (m, _) in sorted(per_rank.items()))
        who = "every rank" if v.rank == "all" else f"rank {v.rank}"
        return CheckResult(label, passed, f"{v.name} = {_short(v.equals)} on {who} (±{v.tol:g})",
                           measured_text or "no ranks", per_rank)

    if exp.blocked is not None:
        b = exp.blocked
        rank = _rank(result, b.rank)
        blocked = (rank or {}).get("blocked_in")
        got = f"rank {b.rank} blocked in {blocked['op']}" if blocked else f"rank {b.rank} not blocked"
        passed = bool(blocked) and (blocked or {}).get("op") == b.op
        return CheckResult(label, passed, f"rank {b.rank} blocked in {b.op}", got)

    if exp.error is not None:
        e = exp.error
        ranks = _ranks(result)
        if isinstance(e.rank, int):
            ranks = [r for r in ranks if r.get("rank") == e.rank]

        def matches(r: dict[str, Any]) -> bool:
            err = r.get("error")
            if not err:
                return False
            if e.type and err.get("type") != e.type and not str(err.get("type", "")).endswith(
                "." + e.type
            ):
                return False
            return not (e.message_contains and e.message_contains not in (err.get("message") or ""))

        hits = [r for r in ranks if matches(r)]
        passed = bool(ranks) and (len(hits) == len(ranks) if e.rank == "all" else bool(hits))
        want = " ".join(x for x in [e.type or "an error", f"containing {e.message_contains!r}"
                                    if e.message_contains else ""] if x)
        who = {"any": "some rank", "all": "every rank"}.get(str(e.rank), f"rank {e.rank}")
        got = "; ".join(
            f"rank {r.get('rank')}: {r['error']['type']}: {_short(r['error'].get('message', ''), 80)}"
            for r in _ranks(result) if r.get("error")
        ) or "no rank raised"
        return CheckResult(label, passed, f"{who} raises {want}", got)

    if exp.bucket_count is not None:
        c = exp.bucket_count
        n = len(_buckets(result, c.rank, c.iteration))
        where = f"rank {c.rank}" + (f", iteration {c.iteration}" if c.iteration is not None else "")
        return CheckResult(label, n == c.count, f"{c.count} bucket reductions on {where}",
                           f"{n} bucket reductions")

    assert exp.bucket_order is not None
    o = exp.bucket_order
    order = [b.get("index") for b in _buckets(result, o.rank, o.iteration)]
    return CheckResult(label, order == o.indices, f"bucket order {o.indices}", f"bucket order {order}")


def evaluate(
    expectations: list[Expectation], result: dict[str, Any], params: dict[str, KnobValue],
    world_size: int,
) -> list[CheckResult]:
    """Every expectation that applies to this run's knobs, checked against its result."""
    return [check(e, result) for e in expectations if applies(e, params, world_size)]
