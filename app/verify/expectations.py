"""Checking a question's `expect` block against a measured run (pure functions).

Works on the typed run result (docs/run-result.md), which any stored run gives
back (app.verify.results.result_of), so a verdict can be recomputed from any run
without running it again.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from app.questions.schema import (
    ArtifactCheck,
    ArtifactTrace,
    BytesCheck,
    CollectivesCheck,
    Expectation,
    FilesCheck,
    KnobValue,
    MarksCheck,
    MemoryCheck,
    QuestionDoc,
    Trace,
)
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
        # Built by hand, not with dataclasses.asdict: that deep-copies every measured value,
        # and a bank's verdicts hold very many of them.
        data: dict[str, Any] = {"label": self.label, "passed": self.passed,
                                "expected": self.expected, "measured": self.measured,
                                "per_rank": None}
        if self.per_rank is not None:
            data["per_rank"] = {str(k): {"measured": v[0], "passed": v[1]}
                                for k, v in self.per_rank.items()}
        if self.expected_per_rank is not None:
            data["expected_per_rank"] = {str(k): v for k, v in self.expected_per_rank.items()}
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


def check(exp: Expectation, result: RunResult, trace: Trace | None = None) -> CheckResult:
    """Evaluate one expectation against one result.

    An exercise run carries the reference solution's values, bytes and memory marks, which
    its driver measured on the same data (`reference: true`, `at_most_reference`, `memory`);
    `trace` is the question's stored trace, which an `artifact` check compares with the
    run's. An exercise run whose checks did not finish, or whose learner process broke the
    protocol, fails every check (with the reason).
    """
    measured = _measure(exp, result, trace)
    if result.tampered:
        return dataclasses.replace(measured, passed=False,
                                   measured=f"the run ended on a broken message: {result.tampered}")
    if result.checks_finished is False:
        why = result.checks_problem or "the exercise's checks did not finish"
        return dataclasses.replace(measured, passed=False, measured=why)
    return measured


def _measure(exp: Expectation, result: RunResult, trace: Trace | None = None) -> CheckResult:
    label = exp.label
    if exp.artifact is not None:
        return _artifact(label, exp.artifact, result, trace)
    if exp.outcome is not None:
        measured = f"outcome {result.outcome}"
        if result.outcome != exp.outcome and result.diagnosis.strip():
            # Say why: "outcome error" alone leaves an author (or a CI log) guessing.
            measured += f": {_short(result.diagnosis.strip().splitlines()[0])}"
        return CheckResult(label, result.outcome == exp.outcome, f"outcome {exp.outcome}", measured)

    if exp.value is not None and exp.value.reference:
        return _against_reference(exp, result)

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

    if exp.collectives is not None:
        return _collectives(label, exp.collectives, result)

    if exp.bytes is not None:
        return _bytes(label, exp.bytes, result)

    if exp.memory is not None:
        return _memory(label, exp.memory, result)

    if exp.files is not None:
        return _files(label, exp.files, result)

    if exp.marks is not None:
        return _marks(label, exp.marks, result)

    assert exp.bucket_order is not None
    o = exp.bucket_order
    order = [b.index for b in result.bucket_reductions(o.rank, o.iteration)]
    return CheckResult(label, order == o.indices, f"bucket order {o.indices}", f"bucket order {order}")


def _artifact(label: str, a: ArtifactCheck, result: RunResult, trace: Trace | None) -> CheckResult:
    """The run's artifact `a.name` against the question's stored one, rank by rank, in what
    does not change from run to run (the artifacts' `signature`)."""
    stored = trace if isinstance(trace, ArtifactTrace) and trace.name == a.name else None
    targets = [r.rank for r in (stored.ranks if stored else [])] if a.rank == "all" else [a.rank]
    expected = f"the run's {a.name!r} matches the trace's on " + (
        "every rank it keeps" if a.rank == "all" else f"rank {a.rank}")
    if stored is None or not targets:
        return CheckResult(label, False, expected, "the question keeps no such trace")
    found = []
    passed = True
    for idx in targets:
        rank = result.rank_or_none(idx)
        kept = stored.of_rank(idx)
        made = rank.artifacts.get(a.name) if rank is not None else None
        if made is None or kept is None:
            found.append(f"rank {idx}: no artifact {a.name!r}")
            passed = False
        elif made.kind != kept.artifact.kind or made.signature() != kept.artifact.signature():
            where = _difference(made.signature(), kept.artifact.signature())
            found.append(f"rank {idx}: differs ({_short(where)})")
            passed = False
        else:
            found.append(f"rank {idx}: the same")
    return CheckResult(label, passed, expected, "; ".join(found))


def _difference(made: Any, kept: Any) -> str:
    """Where two signatures part: the first element that differs, as the run has it."""
    if isinstance(made, list) and isinstance(kept, list):
        for i, (m, k) in enumerate(zip(made, kept, strict=False)):
            if m != k:
                return f"[{i}] {_difference(m, k)}"
        return f"{len(made)} items, the trace {len(kept)}"
    return f"{made!r} where the trace has {kept!r}"


def _against_reference(exp: Expectation, result: RunResult) -> CheckResult:
    """A value check with `reference: true`: each rank's value against what the checks reported
    on the reference solution, run by the driver of the same rank on the same data."""
    v = exp.value
    assert v is not None
    ref_name = v.reference_name or v.name
    whose = "the reference solution's" if ref_name == v.name else f"the reference run's {ref_name}"
    who = "every rank" if v.rank == "all" else f"rank {v.rank}"
    expected = f"{v.name} = {whose} value on {who} (±{v.tol:g})"
    targets = [r.rank for r in result.ranks] if v.rank == "all" else [v.rank]
    per_rank: dict[int, tuple[Any, bool]] = {}
    wanted: dict[int, Any] = {}
    for idx in targets:
        rank = result.rank_or_none(idx)
        if rank is None:
            per_rank[idx] = ("(not in this run)", False)
            continue
        if ref_name not in rank.reference_values:
            # The reference itself did not report it: the gate shows the author this.
            per_rank[idx] = ("(the reference solution did not report it)", False)
            continue
        wanted[idx] = rank.reference_values[ref_name]
        if v.name not in rank.values:
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
        expected = f"{v.name} = {_short(values[0])} ({whose}) on {who}{tol}"
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


def _targets(rank: int | str, result: RunResult) -> list[int]:
    return [r.rank for r in result.ranks] if rank == "all" else [int(rank)]


def _who(rank: int | str) -> str:
    return "every rank" if rank == "all" else f"rank {rank}"


def _collectives(label: str, c: CollectivesCheck, result: RunResult) -> CheckResult:
    """How many times each target rank entered collective `op` (its collective_start events)."""
    bound, want = next((n, v) for n, v in (("count", c.count), ("at_least", c.at_least),
                                           ("at_most", c.at_most)) if v is not None)
    assert isinstance(want, int), "a templated bound is evaluated when the variant is rendered"
    per_rank: dict[int, tuple[Any, bool]] = {}
    for idx in _targets(c.rank, result):
        rank = result.rank_or_none(idx)
        if rank is None:
            per_rank[idx] = ("(not in this run)", False)
            continue
        n = sum(1 for e in rank.events if e.get("kind") == "collective_start" and e.get("op") == c.op
                and (c.iteration is None or e.get("iteration") == c.iteration)
                and (c.source == "any" or e.get("source") == c.source)
                and _peer_is(c.peer, e.get("peer"), idx, result.world_size))
        ok = n == want if bound == "count" else n >= want if bound == "at_least" else n <= want
        per_rank[idx] = (n, ok)
    how = {"count": "exactly", "at_least": "at least", "at_most": "at most"}[bound]
    where = _who(c.rank) + (f", iteration {c.iteration}" if c.iteration is not None else "")
    issued = {"snippet": " by the snippet", "torch": " by torch", "any": ""}[c.source]
    if c.peer is not None:
        issued += {"next": " toward the next rank", "previous": " with the previous rank",
                   "not_next": " toward a rank other than the next",
                   "not_previous": " with a rank other than the previous"}[c.peer]
    measured = "; ".join(f"rank {k}: {m}" for k, (m, _) in sorted(per_rank.items()))
    return CheckResult(label, bool(per_rank) and all(ok for _, ok in per_rank.values()),
                       f"{c.op} entered {how} {want} time{'' if want == 1 else 's'}{issued} on {where}",
                       measured or "no ranks", per_rank)


def _peer_is(want: str | None, peer: Any, rank: int, world_size: int) -> bool:
    """Whether a call's peer is what a collectives check's `peer` asks for (None: any)."""
    if want is None:
        return True
    neighbour = (rank + 1) % world_size if want in ("next", "not_next") else (rank - 1) % world_size
    return (peer == neighbour) == (want in ("next", "previous"))


def _bytes(label: str, b: BytesCheck, result: RunResult) -> CheckResult:
    """Each target rank's bytes_sent (or its ratio to rank R's) against equals, at_most or
    at_least, or against a multiple of the reference solution's bytes on the same rank."""
    if b.at_most_reference is not None:
        return _bytes_against_reference(label, b, b.at_most_reference, result)
    bound, want = next((n, v) for n, v in (("equals", b.equals), ("at_most", b.at_most),
                                           ("at_least", b.at_least)) if v is not None)
    assert isinstance(want, int | float), "a templated bound is evaluated when the variant is rendered"
    reference = result.rank_or_none(b.ratio_to.rank) if b.ratio_to is not None else None
    per_rank: dict[int, tuple[Any, bool]] = {}
    for idx in _targets(b.rank, result):
        rank = result.rank_or_none(idx)
        if rank is None:
            per_rank[idx] = ("(not in this run)", False)
            continue
        measured: float = rank.bytes_sent
        if b.ratio_to is not None:
            if reference is None or reference.bytes_sent <= 0:
                per_rank[idx] = (f"rank {b.ratio_to.rank} sent nothing to compare with", False)
                continue
            measured = rank.bytes_sent / reference.bytes_sent
        if bound == "equals":
            ok = math.isclose(measured, want, rel_tol=b.tol)
        else:
            ok = measured <= want if bound == "at_most" else measured >= want
        per_rank[idx] = (round(measured, 4) if b.ratio_to is not None else int(measured), ok)
    what = f"bytes sent ÷ rank {b.ratio_to.rank}'s" if b.ratio_to is not None else "bytes sent"
    how = {"equals": "=", "at_most": "≤", "at_least": "≥"}[bound]
    tol = f" (±{b.tol:.0%})" if bound == "equals" else ""
    shown = f"{want:g}" if b.ratio_to is not None else f"{want:,.0f}"
    measured_text = "; ".join(f"rank {k}: {_short(m)}" for k, (m, _) in sorted(per_rank.items()))
    return CheckResult(label, bool(per_rank) and all(ok for _, ok in per_rank.values()),
                       f"{what} {how} {shown}{tol} on {_who(b.rank)}", measured_text or "no ranks",
                       per_rank)


def _bytes_against_reference(label: str, b: BytesCheck, factor: float,
                             result: RunResult) -> CheckResult:
    per_rank: dict[int, tuple[Any, bool]] = {}
    wanted: dict[int, Any] = {}
    for idx in _targets(b.rank, result):
        rank = result.rank_or_none(idx)
        if rank is None or rank.reference_bytes_sent is None:
            per_rank[idx] = ("(no reference measurement in this run)", False)
            continue
        bound = int(factor * rank.reference_bytes_sent) + b.slack
        wanted[idx] = bound
        per_rank[idx] = (rank.bytes_sent, rank.bytes_sent <= bound)
    measured = "; ".join(f"rank {k}: {_short(m)}" for k, (m, _) in sorted(per_rank.items()))
    times = f"{factor:g} times " if factor != 1 else ""
    return CheckResult(label, bool(per_rank) and all(ok for _, ok in per_rank.values()),
                       f"bytes sent ≤ {times}the reference solution's on {_who(b.rank)}",
                       measured or "no ranks", per_rank, expected_per_rank=wanted)


def _memory(label: str, m: MemoryCheck, result: RunResult) -> CheckResult:
    """The learner process's memory at each of the checks' marks named `m.mark` (the largest),
    if the marks fell where the reference solution's did."""
    per_rank: dict[int, tuple[Any, bool]] = {}
    for idx in _targets(m.rank, result):
        rank = result.rank_or_none(idx)
        if rank is None:
            per_rank[idx] = ("(not in this run)", False)
            continue
        marks = [x for x in rank.memory_marks if x.name == m.mark]
        wanted = [x.ops for x in rank.reference_marks if x.name == m.mark]
        if not wanted:
            per_rank[idx] = ("(the reference solution made no such mark)", False)
        elif [x.ops for x in marks] != wanted:
            where = ", ".join(str(x.ops) for x in marks) or "none"
            per_rank[idx] = (f"marks after {where} collectives, not after "
                             f"{', '.join(map(str, wanted))} as the reference's", False)
        else:
            largest = max(x.bytes for x in marks)
            per_rank[idx] = (_mib(largest), largest <= m.at_most)
    measured = "; ".join(f"rank {k}: {_short(v)}" for k, (v, _) in sorted(per_rank.items()))
    return CheckResult(label, bool(per_rank) and all(ok for _, ok in per_rank.values()),
                       f"memory at '{m.mark}' ≤ {_mib(m.at_most)} above the start on {_who(m.rank)}",
                       measured or "no ranks", per_rank)


def _marks(label: str, m: MarksCheck, result: RunResult) -> CheckResult:
    """Each target rank's marks named `m.mark` came after as many collectives as the reference's."""
    per_rank: dict[int, tuple[Any, bool]] = {}
    for idx in _targets(m.rank, result):
        rank = result.rank_or_none(idx)
        if rank is None:
            per_rank[idx] = ("(not in this run)", False)
            continue
        got = [x.ops for x in rank.memory_marks if x.name == m.mark]
        wanted = [x.ops for x in rank.reference_marks if x.name == m.mark]
        shown = ", ".join(map(str, got)) or "none"
        per_rank[idx] = (f"after {shown} collectives", bool(wanted) and got == wanted)
    measured = "; ".join(f"rank {k}: {v}" for k, (v, _) in sorted(per_rank.items()))
    return CheckResult(label, bool(per_rank) and all(ok for _, ok in per_rank.values()),
                       f"the calls marked '{m.mark}' fall between the same collectives as the "
                       f"reference solution's on {_who(m.rank)}", measured or "no ranks", per_rank)


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def _files(label: str, f: FilesCheck, result: RunResult) -> CheckResult:
    per_rank: dict[int, tuple[Any, bool]] = {}
    for idx in _targets(f.rank, result):
        rank = result.rank_or_none(idx)
        n = rank.files_written if rank is not None else None
        per_rank[idx] = (n if n is not None else "(not counted)", n == f.count)
    measured = "; ".join(f"rank {k}: {v}" for k, (v, _) in sorted(per_rank.items()))
    return CheckResult(label, bool(per_rank) and all(ok for _, ok in per_rank.values()),
                       f"{f.count} file{'' if f.count == 1 else 's'} left in the shared folder by "
                       f"{_who(f.rank)}", measured or "no ranks", per_rank)


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
    world_size: int, trace: Trace | None = None,
) -> list[CheckResult]:
    """Every expectation that applies to this run's knobs, checked against its result (for an
    `artifact` check, against the question's stored trace)."""
    return [check(e, result, trace) for e in expectations if applies(e, params, world_size)]


def evaluate_each(
    expectations: list[Expectation], result: RunResult, params: dict[str, KnobValue],
    world_size: int, trace: Trace | None = None,
) -> list[tuple[Expectation, CheckResult]]:
    """Like evaluate, keeping each check beside the expectation it came from."""
    return [(e, check(e, result, trace=trace)) for e in expectations if applies(e, params, world_size)]


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
    checked = evaluate_each(doc.verify.expect, result, params, world_size, doc.trace)
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
