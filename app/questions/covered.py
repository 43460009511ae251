"""Arithmetic the planner covers is called, not spelled out: a rule of `ddpdrill bank check`.

The planner's formulas (app.planner.formulas) are a template function each in a question's
expressions (`plan_bubble_fraction(pp=p, micro_batches=m)`, ...: app.questions.variants). A
computed question whose key is one of those quantities calls the function, so its key *is*
the planner's answer in every variant and cannot drift from it. This module finds the
questions that instead write the arithmetic out by hand, by the shape of their expressions
(docs/question-format.md, "The planner's functions"), and `bank check` fails on each, naming
the file, the expression and the function to call.

Shapes are matched on a canonical form of the expression: sums and products flattened, their
terms in any order, a division a product with the divisor inverted, constants kept as
written (so `6 * n * d` still shows its 6). Each shape is one the formulas own and that other
arithmetic does not take by accident:

| shape | e.g. | call |
|---|---|---|
| √(2 · x · y) | `sqrt(2 * ckpt_s * mtbf_s)` | plan_checkpoint_interval_seconds |
| c/τ beside τ/2 in one sum | `1 - c / tau - (tau / 2 + r) / m` | plan_checkpoint_overhead_fraction |
| 6 · x · y | `6 * params * tokens` | plan_training_flops, plan_step_seconds, ... |
| (p − 1) / (… + p − 1) | `(p - 1) / (v * m + p - 1)` | plan_bubble_fraction |
| (n − 1) / n | `2 * (n - 1) / n * size` | plan_ring_all_reduce_bytes, ... |
| 34, or 10 + 24/t | `sbh * (34 + 5 * a * s / h)` | plan_activation_bytes_per_layer |
| 12, 14 or 16 × `param…` | `16 * params_b / gpus` | plan_model_state_bytes, ... |

Pure: questions in, findings out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.questions.bank import BankError
from app.questions.schema import QuestionDoc
from app.questions.variants import Canon, arithmetic_forms

RULE = "covered-arithmetic"


@dataclass(frozen=True)
class Shape:
    what: str
    function: str


def _parts(c: Canon, kind: str) -> tuple[Canon, ...]:
    return c[1] if c[0] == kind else (c,)


def _named(c: Canon) -> bool:
    """A factor that is not a number: a name, a sum, a call (not its inverse)."""
    return c[0] not in ("c", "inv")


def _minus_one(c: Canon) -> str | None:
    """x when c is x − 1 (a sum of one name and −1)."""
    if c[0] != "sum" or len(c[1]) != 2:
        return None
    consts = [t for t in c[1] if t == ("c", -1)]
    names = [t for t in c[1] if t[0] == "n"]
    return names[0][1] if consts and names else None


def _young_daly(c: Canon) -> bool:
    if c[0] != "call" or c[1] != "sqrt" or len(c[2]) != 1:
        return False
    factors = _parts(c[2][0], "prod")
    return ("c", 2) in factors and sum(map(_named, factors)) >= 2


def _six_nd(c: Canon) -> bool:
    return c[0] == "prod" and ("c", 6) in c[1] and sum(map(_named, c[1])) >= 2


def _bubble(c: Canon) -> bool:
    if c[0] != "prod":
        return False
    for f in c[1]:
        p = _minus_one(f)
        if p is None:
            continue
        for g in c[1]:
            if g[0] == "inv" and g[1][0] == "sum" and len(g[1][1]) >= 3 and ("n", p) in g[1][1] \
                    and ("c", -1) in g[1][1]:
                return True
    return False


def _share_of_ranks(c: Canon) -> bool:
    if c[0] != "prod":
        return False
    return any((n := _minus_one(f)) is not None and ("inv", ("n", n)) in c[1] for f in c[1])


def _korthikanti(c: Canon) -> bool:
    if c[0] == "sum":
        if ("c", 34) in c[1] and len(c[1]) >= 2:
            return True
        return ("c", 10) in c[1] and any(t[0] == "prod" and ("c", 24) in t[1]
                                         and any(f[0] == "inv" for f in t[1]) for t in c[1])
    return c[0] == "prod" and ("c", 34) in c[1] and any(map(_named, c[1]))


def _model_state(c: Canon) -> bool:
    return c[0] == "prod" and any(("c", k) in c[1] for k in (12, 14, 16)) and any(
        f[0] == "n" and "param" in f[1] for f in c[1])


def _overhead(c: Canon) -> bool:
    """A sum with some c/τ in it and, somewhere inside, τ/2: the checkpoint loss."""
    if c[0] != "sum":
        return False
    halved = {f[1] for x in _walk(c) if x[0] == "prod" and ("inv", ("c", 2)) in x[1]
              for f in x[1] if f[0] == "n"}
    return any(x[0] == "prod" and ("inv", ("n", tau)) in x[1] for x in _walk(c) for tau in halved)


SHAPES: tuple[tuple[Shape, Any], ...] = (
    (Shape("Young/Daly's checkpoint interval √(2·C·MTBF)", "plan_checkpoint_interval_seconds"),
     _young_daly),
    (Shape("the time lost to checkpoints and failures, C/τ + (τ/2 + R)/MTBF",
           "plan_checkpoint_overhead_fraction"), _overhead),
    (Shape("6·N·D training FLOPs", "plan_training_flops (or plan_step_seconds, plan_train_days, "
           "plan_mfu)"), _six_nd),
    (Shape("the pipeline bubble (p − 1)/(v·m + p − 1)", "plan_bubble_fraction"), _bubble),
    (Shape("a collective's (n − 1)/n share", "plan_ring_all_reduce_bytes, plan_all_gather_bytes, "
           "plan_reduce_scatter_bytes, plan_all_to_all_bytes or plan_dp_bytes_per_step"),
     _share_of_ranks),
    (Shape("Korthikanti's activation bytes per layer (34, or 10 + 24/t, × s·b·h)",
           "plan_activation_bytes_per_layer"), _korthikanti),
    (Shape("mixed-precision Adam's 16 (or 12, 14) bytes per parameter",
           "plan_model_state_bytes (or plan_param_bytes, plan_grad_bytes, plan_optimizer_bytes)"),
     _model_state),
)


def _walk(c: Canon) -> Iterator[Canon]:
    yield c
    if c[0] in ("sum", "prod"):
        for x in c[1]:
            yield from _walk(x)
    elif c[0] == "inv":
        yield from _walk(c[1])
    elif c[0] == "call":
        for x in c[2]:
            yield from _walk(x)


def spelled_out(source: str) -> list[Shape]:
    """The planner's quantities an expression writes out by hand (none if it cannot parse:
    the loader reports that expression)."""
    found: list[Shape] = []
    for c in arithmetic_forms(source):
        for shape, test in SHAPES:
            if shape not in found and test(c):
                found.append(shape)
    return found


def expressions(doc: QuestionDoc) -> Iterator[tuple[str, str]]:
    """(field, source) of every expression that computes a key: `compute`, `answer.formula`
    and each case part's `answer.formula`."""
    for name, source in doc.compute.items():
        yield f"compute.{name}", source
    if doc.answer is not None and doc.answer.formula:
        yield "answer.formula", doc.answer.formula
    for j, part in enumerate(doc.parts):
        if part.answer is not None and part.answer.formula:
            yield f"parts[{j}].answer.formula", part.answer.formula


def check_covered(docs: list[QuestionDoc]) -> list[BankError]:
    """Every expression that writes out arithmetic the planner covers, as a bank error."""
    errors: list[BankError] = []
    for doc in docs:
        for field, source in expressions(doc):
            for shape in spelled_out(source):
                errors.append(BankError(
                    file=f"{doc.topic}/{doc.slug}.yaml", field=field,
                    message=(f"spells out {shape.what} in {source!r}: call {shape.function} "
                             f"instead, so the key is the planner's answer [{RULE}]")))
    return errors
