"""Checking a question's `expect` block against a measured run (pure functions).

Works on the typed run result (docs/run-result.md), which any stored run gives
back (verify.service.result_of), so a verdict can be recomputed from any run
without running it again.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Any

from app.questions.schema import Expectation, KnobValue, QuestionDoc
from app.verify.engine.result import RankResult, RunResult


@dataclass(frozen=True)
class CheckResult:
    label: str
    passed: bool
    expected: str
    measured: str
    # Per rank, for value checks: rank -> (measured, passed).
    per_rank: dict[int, tuple[Any, bool]] | None = None
    # Per rank, for `reference: true` checks: the reference solution's value.
    expected_per_rank: dict[int, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.per_rank is not None:
            data["per_rank"] = {str(k): {"measured": v[0], "passed": v[1]}
                                for k, v in self.per_rank.items()}
        if self.expected_per_rank is not None:
            data["expected_per_rank"] = {str(k): v for k, v in self.expected_per_rank.items()}
        else:
            data.pop("expected_per_rank")
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


def check(exp: Expectation, result: RunResult, reference: RunResult | None = None) -> CheckResult:
    """Evaluate one expectation against one result.

    `reference` is the exercise's reference solution's run of the same knob combination,
    for value checks with `reference: true`. An exercise run whose checks did not finish,
    or whose event channel was tampered with, fails every check (with the reason).
    """
    measured = _measure(exp, result, reference)
    if result.tampered:
        return dataclasses.replace(measured, passed=False,
                                   measured=f"the run was tampered with: {result.tampered}")
    if result.checks_finished is False:
        why = result.checks_problem or "the exercise's checks did not finish"
        return dataclasses.replace(measured, passed=False, measured=why)
    return measured


def _measure(exp: Expectation, result: RunResult, reference: RunResult | None) -> CheckResult:
    label = exp.label
    if exp.outcome is not None:
        measured = f"outcome {result.outcome}"
        if result.outcome != exp.outcome and result.diagnosis.strip():
            # Say why: "outcome error" alone leaves an author (or a CI log) guessing.
            measured += f": {_short(result.diagnosis.strip().splitlines()[0])}"
        return CheckResult(label, result.outcome == exp.outcome, f"outcome {exp.outcome}", measured)

    if exp.value is not None and exp.value.reference:
        return _against_reference(exp, result, reference)

    if exp.value is not None:
        v = exp.value
        targets = [r.rank for r in result.ranks] if v.rank == "all" else [v.rank]
        per_rank: dict[int, tuple[Any, bool]] = {}
        for idx in targets:
            rank = result.rank_or_none(idx)
            if rank is None or v.name not in rank.values:
                per_rank[idx] = ("(not reported)", False)
                continue
            measured = rank.values[v.name]
            per_rank[idx] = (measured, close(measured, v.equals, v.tol))
        passed = bool(per_rank) and all(ok for _, ok in per_rank.values())
        measured_text = "; ".join(f"rank {k}: {_short(m)}" for k, (m, _) in sorted(per_rank.items()))
        who = "every rank" if v.rank == "all" else f"rank {v.rank}"
        # A tolerance only means something for numbers.
        tol = f" (±{v.tol:g})" if _numeric(v.equals) else ""
        return CheckResult(label, passed, f"{v.name} = {_short(v.equals)} on {who}{tol}",
                           measured_text or "no ranks", per_rank)

    if exp.blocked is not None:
        b = exp.blocked
        blocked = rank.blocked_in if (rank := result.rank_or_none(b.rank)) else None
        got = f"rank {b.rank} blocked in {blocked.op}" if blocked else f"rank {b.rank} not blocked"
        return CheckResult(label, blocked is not None and blocked.op == b.op,
                           f"rank {b.rank} blocked in {b.op}", got)

    if exp.error is not None:
        e = exp.error
        ranks = [r for r in result.ranks if not isinstance(e.rank, int) or r.rank == e.rank]

        def matches(r: RankResult) -> bool:
            err = r.error
            if err is None:
                return False
            if e.type and err.type != e.type and not err.type.endswith("." + e.type):
                return False
            return not (e.message_contains and e.message_contains not in err.message)

        hits = [r for r in ranks if matches(r)]
        passed = bool(ranks) and (len(hits) == len(ranks) if e.rank == "all" else bool(hits))
        want = " ".join(x for x in [e.type or "an error", f"containing {e.message_contains!r}"
                                    if e.message_contains else ""] if x)
        who = {"any": "some rank", "all": "every rank"}.get(str(e.rank), f"rank {e.rank}")
        # The whole matched message, not a cut: the learner reads what was matched in it.
        got = "; ".join(f"rank {r.rank}: {r.error.type}: {r.error.message}"
                        for r in result.ranks if r.error) or "no rank raised"
        return CheckResult(label, passed, f"{who} raises {want}", got)

    if exp.bucket_count is not None:
        c = exp.bucket_count
        n = len(result.bucket_reductions(c.rank, c.iteration))
        where = f"rank {c.rank}" + (f", iteration {c.iteration}" if c.iteration is not None else "")
        return CheckResult(label, n == c.count, f"{_reductions(c.count)} on {where}", _reductions(n))

    if exp.bucket_overlap is not None:
        return _overlap(label, exp.bucket_overlap.rank, exp.bucket_overlap.iteration,
                        exp.bucket_overlap.buckets, result)

    assert exp.bucket_order is not None
    o = exp.bucket_order
    order = [b.index for b in result.bucket_reductions(o.rank, o.iteration)]
    return CheckResult(label, order == o.indices, f"bucket order {o.indices}", f"bucket order {order}")


def _against_reference(exp: Expectation, result: RunResult,
                       reference: RunResult | None) -> CheckResult:
    """A value check with `reference: true`: each rank's value against the reference's."""
    v = exp.value
    assert v is not None
    who = "every rank" if v.rank == "all" else f"rank {v.rank}"
    expected = f"{v.name} = the reference solution's value on {who} (±{v.tol:g})"
    if reference is None:
        return CheckResult(exp.label, False, expected,
                           "no run of the reference solution to compare with")
    targets = [r.rank for r in result.ranks] if v.rank == "all" else [v.rank]
    per_rank: dict[int, tuple[Any, bool]] = {}
    wanted: dict[int, Any] = {}
    for idx in targets:
        ref_rank = reference.rank_or_none(idx)
        if ref_rank is None or v.name not in ref_rank.values:
            # The reference itself did not report it: the gate shows the author this.
            per_rank[idx] = ("(the reference solution did not report it)", False)
            continue
        wanted[idx] = ref_rank.values[v.name]
        rank = result.rank_or_none(idx)
        if rank is None or v.name not in rank.values:
            per_rank[idx] = ("(not reported)", False)
            continue
        measured = rank.values[v.name]
        per_rank[idx] = (measured, close(measured, wanted[idx], v.tol))
    passed = bool(per_rank) and all(ok for _, ok in per_rank.values())
    measured_text = "; ".join(f"rank {k}: {_short(m)}" for k, (m, _) in sorted(per_rank.items()))
    values = list(wanted.values())
    if values and all(x == values[0] for x in values):
        # One value on every rank: say it, as an `equals` check would.
        tol = f" (±{v.tol:g})" if _numeric(values[0]) else ""
        expected = f"{v.name} = {_short(values[0])} (the reference solution's) on {who}{tol}"
    return CheckResult(exp.label, passed, expected, measured_text or "no ranks", per_rank,
                       expected_per_rank=wanted)


def _overlap(label: str, rank: int, iteration: int, buckets: list[int],
             result: RunResult) -> CheckResult:
    """Each named bucket started reducing before the iteration's last gradient was ready."""
    where = f"rank {rank}, iteration {iteration}"
    expected = (f"bucket{'s' if len(buckets) > 1 else ''} {', '.join(map(str, buckets))} start "
                f"reducing before backward compute ends ({where})")
    measured_rank = result.rank_or_none(rank)
    events = measured_rank.events if measured_rank is not None else []
    ready = [float(e.get("t_ms", 0.0)) for e in events
             if e.get("kind") == "grad_ready" and e.get("iteration") == iteration]
    starts = {b.index: b.reduce_start_ms for b in result.bucket_reductions(rank, iteration)}
    if not ready or any(i not in starts for i in buckets):
        return CheckResult(label, False, expected, "no bucket timeline for that iteration")
    compute_end = max(ready)
    measured = "; ".join(f"bucket {i} at {starts[i]:.2f} ms" for i in buckets)
    passed = all(starts[i] < compute_end for i in buckets)
    return CheckResult(label, passed, expected,
                       f"{measured}; the last gradient was ready at {compute_end:.2f} ms")


def _numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, list) and bool(value) and all(_numeric(v) for v in value)


def _reductions(n: int) -> str:
    return f"{n} bucket reduction" + ("" if n == 1 else "s")


def evaluate(
    expectations: list[Expectation], result: RunResult, params: dict[str, KnobValue],
    world_size: int, reference: RunResult | None = None,
) -> list[CheckResult]:
    """Every expectation that applies to this run's knobs, checked against its result
    (and, for an exercise, its reference solution's run of the same combination)."""
    return [check(e, result, reference) for e in expectations if applies(e, params, world_size)]


def evaluate_each(
    expectations: list[Expectation], result: RunResult, params: dict[str, KnobValue],
    world_size: int,
) -> list[tuple[Expectation, CheckResult]]:
    """Like evaluate, keeping each check beside the expectation it came from."""
    return [(e, check(e, result)) for e in expectations if applies(e, params, world_size)]


@dataclass(frozen=True)
class ChoiceEvidence:
    """What one run says about one choice, through the expectations bound to it."""

    key: str
    text: str
    correct: bool
    supported_by: list[CheckResult]
    ruled_out_by: list[CheckResult]
    # Labels of bound expectations that apply only to other knob values.
    elsewhere: list[str]
    explained: str | None

    @property
    def status(self) -> str:
        if self.explained is not None:
            return "explained"
        checks = self.supported_by + self.ruled_out_by
        if any(not c.passed for c in checks):
            return "contradicted"
        if self.supported_by:
            return "supported"
        if self.ruled_out_by:
            return "ruled out"
        return "elsewhere" if self.elsewhere else "unbound"


def choice_evidence(
    doc: QuestionDoc, result: RunResult, params: dict[str, KnobValue], world_size: int,
) -> list[ChoiceEvidence]:
    """Per choice of a single or multi question: the checks of this run that support it or rule
    it out, or the reason it is explained rather than measured. Empty for numeric questions."""
    if doc.verify is None or not doc.choices:
        return []
    checked = evaluate_each(doc.verify.expect, result, params, world_size)
    out = []
    for c in doc.choices:
        elsewhere = [e.label for e in doc.verify.expect
                     if (c.key in e.supports or c.key in e.rules_out)
                     and not applies(e, params, world_size)]
        out.append(ChoiceEvidence(
            key=c.key, text=c.text, correct=c.correct,
            supported_by=[r for e, r in checked if c.key in e.supports],
            ruled_out_by=[r for e, r in checked if c.key in e.rules_out],
            elsewhere=elsewhere, explained=doc.explained.get(c.key)))
    return out
