"""The bank file format: one YAML document per question (docs/question-format.md).

These models are the single definition of a valid question. The loader checks
files against them, the database stores their JSON form per revision, and the
exporter writes them back, so a round trip changes nothing.
"""

from __future__ import annotations

import itertools
import re
import string
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.verify.engine.forbid import FORBIDDABLE

SLUG_RE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
# Knob names become snippet `params` keys and CLI `--param` names.
KNOB_NAME_RE = r"^[a-z_][a-z0-9_]*$"
MAX_WORLD_SIZE = 8
# Every combination of a question's knobs is audited when there are at most this many.
MAX_AUDIT_ALL_COMBINATIONS = 16
# An exercise's author writes at most this many hints.
MAX_HINTS = 3
# Known-wrong solutions each of the bank's exercises carries (tests/exercises checks it;
# the gate runs every one an exercise has).
MIN_WRONG_SOLUTIONS = 3
SNIPPET_FILE_RE = r"^[A-Za-z0-9_.-]+\.py$"

QuestionType = Literal["single", "multi", "numeric", "trace", "exercise"]
QUESTION_TYPES: tuple[str, ...] = get_args(QuestionType)
# What a quiz can hold: an exercise is answered by running code on its own page.
QUIZ_TYPES: tuple[str, ...] = tuple(t for t in QUESTION_TYPES if t != "exercise")
AnswerFormat = Literal["single", "multi", "numeric"]
# A knob value is JSON: a scalar, or a (nested) list such as per-rank batch sizes.
KnobValue = bool | int | float | str | list[Any]


class FieldError(ValueError):
    """A check on a whole model that blames one field, so the loader can name it and its line.

    pydantic reports a model validator's error at the model itself; the loader appends
    `loc` to that location (app.questions.bank._validation_errors).
    """

    def __init__(self, loc: str | tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc: tuple[str | int, ...] = (loc,) if isinstance(loc, str) else loc


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Choice(Strict):
    key: str = Field(default="", pattern=r"^[a-z]?$")
    text: str = Field(min_length=1)
    correct: bool = False


class NumericAnswer(Strict):
    value: float
    unit: str = ""
    abs_tol: float = Field(default=0.0, ge=0)
    rel_tol: float = Field(default=0.0, ge=0)

    def accepts(self, x: float) -> bool:
        """True when x lies within the absolute or relative tolerance of the value."""
        diff = abs(x - self.value)
        return diff <= self.abs_tol or diff <= self.rel_tol * abs(self.value) or diff == 0


class TraceStep(Strict):
    step: str
    cells: list[str]
    note: str = ""


class TraceBucket(Strict):
    name: str
    first_ready_ms: float
    last_ready_ms: float
    reduce_start_ms: float
    reduce_end_ms: float
    params: list[str] = []
    bytes: int | None = None

    @model_validator(mode="after")
    def _ordered(self) -> TraceBucket:
        if not (self.first_ready_ms <= self.last_ready_ms <= self.reduce_start_ms <= self.reduce_end_ms):
            raise ValueError(
                "bucket times must satisfy first_ready_ms <= last_ready_ms "
                "<= reduce_start_ms <= reduce_end_ms"
            )
        return self


class TraceSource(Strict):
    """Where a stored trace came from: illustrative, or measured by a real run."""

    kind: Literal["illustrative", "measured"] = "illustrative"
    torch_version: str | None = None
    note: str = ""


class RankEventsTrace(Strict):
    """Per-rank events by step, like a two-column Join trace."""

    kind: Literal["rank_events"]
    caption: str = ""
    columns: list[str] = Field(min_length=1)
    steps: list[TraceStep] = Field(min_length=1)
    note_heading: str = ""
    source: TraceSource = TraceSource()

    @model_validator(mode="after")
    def _widths(self) -> RankEventsTrace:
        for i, step in enumerate(self.steps):
            if len(step.cells) != len(self.columns):
                raise FieldError(
                    ("steps", i, "cells"),
                    f"steps[{i}] has {len(step.cells)} cells but there are "
                    f"{len(self.columns)} columns",
                )
        return self


class BucketTrace(Strict):
    """Per-bucket ready and reduction windows against the end of backward compute."""

    kind: Literal["buckets"]
    caption: str = ""
    unit: str = "ms"
    compute_end_ms: float
    buckets: list[TraceBucket] = Field(min_length=1)
    source: TraceSource = TraceSource()


Trace = Annotated[RankEventsTrace | BucketTrace, Field(discriminator="kind")]


class Knob(Strict):
    label: str = ""
    values: list[KnobValue] = Field(min_length=1)
    default: KnobValue

    @model_validator(mode="after")
    def _default_allowed(self) -> Knob:
        if self.default not in self.values:
            raise FieldError("default", f"default {self.default!r} is not one of values {self.values!r}")
        return self


class ValueCheck(Strict):
    """A reported value equals `equals`, or (exercises, `reference: true`) what the reference
    solution reported under the same name, on the same rank, in the same knob combination."""

    name: str
    rank: int | Literal["all"] = "all"
    equals: Any = None
    reference: bool = False
    tol: float = Field(default=1e-6, ge=0)

    @model_validator(mode="after")
    def _one_target(self) -> ValueCheck:
        if self.reference and "equals" in self.model_fields_set:
            raise FieldError("equals", "a value check has equals or reference: true, not both")
        if not self.reference and "equals" not in self.model_fields_set:
            raise FieldError("equals", "a value check needs equals (or, in an exercise, "
                                       "reference: true)")
        return self


class BlockedCheck(Strict):
    rank: int
    op: str


class ErrorCheck(Strict):
    rank: int | Literal["any", "all"] = "any"
    type: str | None = None
    message_contains: str | None = None


class BucketCountCheck(Strict):
    rank: int = 0
    iteration: int | None = None
    count: int = Field(ge=0)


class BucketOrderCheck(Strict):
    """Bucket reductions on a rank start in this index order (a measured property, not a time)."""

    rank: int = 0
    iteration: int | None = None
    indices: list[int]


class BucketOverlapCheck(Strict):
    """These buckets start reducing while backward is still computing gradients.

    Causal, not a timing race: DDP launches a bucket from the autograd thread as soon as
    its gradients are ready, before backward goes on to earlier layers. So a bucket
    holding any but the first layer starts before the iteration's last gradient.
    """

    rank: int = 0
    iteration: int
    buckets: list[int] = Field(min_length=1)


class Expectation(Strict):
    """One declarative check on a measured run; exactly one check field is set.

    `supports`, `rules_out` and `is_answer` bind the check to the answer key: a
    passing check shows the named choices right (or wrong), or, for a numeric
    question, measures the value the key must equal (key_binding_problems).
    """

    label: str = Field(min_length=1)
    # Only applies to runs whose params match every entry here.
    when: dict[str, KnobValue] = {}
    supports: list[str] = []
    rules_out: list[str] = []
    is_answer: bool = False
    # Exercises only: a hidden check is run and counted ("n of m hidden checks pass")
    # but its label and expectation never reach the learner.
    hidden: bool = False
    # Ids of the facts this check measures (docs/coverage.md is generated from them).
    facts: list[Annotated[str, Field(pattern=SLUG_RE)]] = []
    value: ValueCheck | None = None
    outcome: Literal["ok", "error", "timeout"] | None = None
    blocked: BlockedCheck | None = None
    error: ErrorCheck | None = None
    bucket_count: BucketCountCheck | None = None
    bucket_order: BucketOrderCheck | None = None
    bucket_overlap: BucketOverlapCheck | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Expectation:
        names = ("value", "outcome", "blocked", "error", "bucket_count", "bucket_order",
                 "bucket_overlap")
        set_ = [n for n in names if getattr(self, n) is not None]
        if len(set_) != 1:
            raise ValueError(f"an expectation needs exactly one of {', '.join(names)}; got {set_ or 'none'}")
        return self


class VerifyBlock(Strict):
    snippet: str = Field(pattern=SNIPPET_FILE_RE)
    world_size: int = Field(default=2, ge=1, le=MAX_WORLD_SIZE)
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    knobs: dict[str, Knob] = {}
    # "all", or a list of knob assignments to audit (missing knobs take defaults).
    audit: Literal["all", "default"] | list[dict[str, KnobValue]] = "default"
    expect: list[Expectation] = Field(min_length=1)

    @field_validator("knobs")
    @classmethod
    def _knob_names(cls, knobs: dict[str, Knob]) -> dict[str, Knob]:
        for name in knobs:
            if not re.match(KNOB_NAME_RE, name):
                raise ValueError(f"knob name {name!r} must match {KNOB_NAME_RE}")
        return knobs

    @model_validator(mode="after")
    def _audit_and_when(self) -> VerifyBlock:
        if self.audit == "all" and self.combination_count() > MAX_AUDIT_ALL_COMBINATIONS:
            raise FieldError(
                "audit",
                f"audit: all would run {self.combination_count()} combinations; "
                f"list at most {MAX_AUDIT_ALL_COMBINATIONS} explicitly"
            )
        assignments = self.audit if isinstance(self.audit, list) else []
        for i, combo in enumerate(assignments):
            self._check_assignment(combo, f"audit[{i}]", ("audit", i))
        for i, exp in enumerate(self.expect):
            self._check_assignment(exp.when, f"expect[{i}].when", ("expect", i, "when"))
        audited = self.audit_combinations()
        for i, exp in enumerate(self.expect):
            # A check no audited run applies to would never be verified, yet learners can
            # pick those knob values: the publish gate and `bank verify` must run it.
            if not any(all(combo.get(k) == v for k, v in exp.when.items()) for combo in audited):
                raise FieldError(
                    ("expect", i, "when"),
                    f"expect[{i}] applies to no audited knob combination; add one to audit "
                    "(or use audit: all)",
                )
        if "world_size" in self.knobs:
            for value in self.knobs["world_size"].values:
                if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_WORLD_SIZE:
                    raise FieldError(("knobs", "world_size", "values"),
                                     f"world_size values must be whole numbers 1..{MAX_WORLD_SIZE}")
        return self

    def audit_combinations(self) -> list[dict[str, KnobValue]]:
        """The knob assignments that `bank verify` and the publish gate run."""
        if self.audit == "default":
            return [self.defaults()]
        if self.audit == "all":
            names = list(self.knobs)
            combos = itertools.product(*(self.knobs[n].values for n in names))
            return [dict(zip(names, combo, strict=True)) for combo in combos]
        return [{**self.defaults(), **combo} for combo in self.audit]

    def _check_assignment(
        self, combo: dict[str, KnobValue], where: str, loc: tuple[str | int, ...]
    ) -> None:
        for name, value in combo.items():
            # The number of ranks is varied through a knob named world_size, which learners
            # can also turn; it is not a free-standing setting of the audit.
            if name not in self.knobs:
                raise FieldError((*loc, name), f"{where}: unknown knob {name!r}")
            if value not in self.knobs[name].values:
                raise FieldError(
                    (*loc, name), f"{where}: {value!r} is not an allowed value of knob {name!r}"
                )

    def combination_count(self) -> int:
        n = 1
        for knob in self.knobs.values():
            n *= len(knob.values)
        return n

    def defaults(self) -> dict[str, KnobValue]:
        return {name: knob.default for name, knob in self.knobs.items()}


class WrongSolution(Strict):
    """A plausible mistake a candidate makes: the gate proves the checks reject it."""

    file: str = Field(pattern=SNIPPET_FILE_RE)
    why: str = Field(min_length=1)
    # The file's text, filled in by the loader (like ExerciseBlock.solution_code).
    code: str | None = None


class ExerciseBlock(Strict):
    """What makes a question an exercise: the learner edits the starter (verify.snippet)
    until every check in verify.expect passes on every audited knob combination.

    `solution_code`, `harness_code` and each wrong solution's `code` are the files' texts,
    filled in by the loader and stored with the revision, but written back to YAML as the
    file names only.
    """

    solution: str = Field(pattern=SNIPPET_FILE_RE)
    # The checks program, run after the learner's (and the solution's) code in its own
    # namespace: it calls what the learner wrote and reports what the checks read.
    harness: str | None = Field(default=None, pattern=SNIPPET_FILE_RE)
    hints: list[Annotated[str, Field(min_length=1)]] = Field(default=[], max_length=MAX_HINTS)
    # Collectives that raise ForbiddenCollective while learner code runs.
    forbid: list[str] = []
    wrong: list[WrongSolution] = []
    solution_code: str | None = None
    harness_code: str | None = None

    @field_validator("forbid")
    @classmethod
    def _forbiddable(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in FORBIDDABLE:
                raise ValueError(f"{name!r} is not a torch.distributed collective an exercise can "
                                 f"forbid ({', '.join(sorted(FORBIDDABLE))})")
        return names


class QuestionDoc(Strict):
    """One question as written in question_bank/<topic>/<slug>.yaml."""

    slug: str = Field(pattern=SLUG_RE, max_length=80)
    topic: str = Field(pattern=SLUG_RE)
    title: str = Field(min_length=1, max_length=200)
    tags: list[Annotated[str, Field(pattern=SLUG_RE)]] = []
    difficulty: int = Field(ge=1, le=3)
    type: QuestionType
    # For trace questions: how the learner answers.
    answer_format: AnswerFormat | None = None
    prompt: str = Field(min_length=1)
    choices: list[Choice] = []
    answer: NumericAnswer | None = None
    explanation: str = Field(min_length=1)
    trace: Trace | None = None
    verify: VerifyBlock | None = None
    exercise: ExerciseBlock | None = None
    # Choices no run can show right or wrong (reasoning, hardware), with the reason.
    explained: dict[str, str] = {}
    # The snippet's text; filled in by the loader from verify.snippet, never written in YAML.
    snippet_text: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> QuestionDoc:
        if self.type == "exercise":
            return self._consistent_exercise()
        if self.exercise is not None:
            raise FieldError("exercise", "an exercise block is only for type: exercise")
        if self.verify is not None:
            for i, e in enumerate(self.verify.expect):
                if e.hidden:
                    raise FieldError(("verify", "expect", i, "hidden"),
                                     "hidden checks are for exercises only")
                if e.value is not None and e.value.reference:
                    raise FieldError(("verify", "expect", i, "value", "reference"),
                                     "reference: true compares with an exercise's reference "
                                     "solution; a question has none")
        fmt = self.effective_format
        if self.type == "trace":
            if self.answer_format is None:
                raise FieldError("answer_format",
                                 "a trace question needs answer_format: single, multi or numeric")
            if self.trace is None:
                raise FieldError("trace", "a trace question needs a trace")
        elif self.answer_format is not None:
            raise FieldError("answer_format", "answer_format is only for type: trace")
        if fmt == "numeric":
            if self.answer is None:
                raise FieldError("answer", "a numeric question needs answer: {value, abs_tol or rel_tol}")
            if self.choices:
                raise FieldError("choices", "a numeric question has no choices")
        else:
            if self.answer is not None:
                raise FieldError("answer", f"a {fmt} question has choices, not a numeric answer")
            if len(self.choices) < 2:
                raise FieldError("choices", "needs at least 2 choices")
            if len(self.choices) > 26:
                raise FieldError("choices", "at most 26 choices")
            right = sum(c.correct for c in self.choices)
            if fmt == "single" and right != 1:
                raise FieldError(
                    "choices", f"a single-choice question needs exactly 1 correct choice, has {right}"
                )
            if fmt == "multi" and right < 1:
                raise FieldError("choices", "a multi-select question needs at least 1 correct choice")
            keys = [c.key for c in self.choices]
            if any(keys) and (not all(keys) or len(set(keys)) != len(keys)):
                raise FieldError("choices", "choice keys must be all given and distinct, or all omitted")
        return self

    def _consistent_exercise(self) -> QuestionDoc:
        if self.exercise is None:
            raise FieldError("exercise", "an exercise needs an exercise block (solution, hints)")
        if self.verify is None:
            raise FieldError("verify", "an exercise needs a verify block: the starter as snippet, "
                                       "and the checks as expect")
        for name in ("answer_format", "answer", "trace"):
            if getattr(self, name) is not None:
                raise FieldError(name, f"an exercise has no {name}")
        if self.choices:
            raise FieldError("choices", "an exercise has no choices")
        if self.explained:
            raise FieldError("explained", "an exercise has no choices to explain")
        for i, e in enumerate(self.verify.expect):
            if e.supports or e.rules_out or e.is_answer:
                raise FieldError(("verify", "expect", i),
                                 f"expect[{i}]: an exercise's checks bind to no answer key "
                                 "(no supports, rules_out or is_answer)")
        names = [self.verify.snippet, self.exercise.solution, self.exercise.harness]
        if len({n for n in names if n}) != len([n for n in names if n]):
            raise FieldError("exercise", "the starter, the solution and the harness need "
                                         "three different files")
        for i, w in enumerate(self.exercise.wrong):
            if w.file in names or w.file in [x.file for x in self.exercise.wrong[:i]]:
                raise FieldError(("exercise", "wrong", i, "file"),
                                 f"wrong solution {w.file!r} is also the starter, the solution, "
                                 "the harness or another wrong solution")
        return self

    @model_validator(mode="after")
    def _assign_keys(self) -> QuestionDoc:
        if self.choices and not self.choices[0].key:
            keyed = [
                c.model_copy(update={"key": string.ascii_lowercase[i]})
                for i, c in enumerate(self.choices)
            ]
            object.__setattr__(self, "choices", keyed)
        return self

    @property
    def effective_format(self) -> AnswerFormat:
        """How the learner answers; an exercise is answered by running code, so callers
        that grade choices or numbers check `is_exercise` first."""
        if self.type == "trace":
            return self.answer_format or "single"
        if self.type == "exercise":
            return "single"
        return self.type

    @property
    def is_exercise(self) -> bool:
        return self.type == "exercise"

    @property
    def correct_keys(self) -> list[str]:
        return [c.key for c in self.choices if c.correct]


class TopicDoc(Strict):
    """question_bank/<topic>/_topic.yaml: how a topic is named and ordered."""

    title: str = Field(min_length=1)
    description: str = ""
    position: int = 100
    # The heading the home page lists the topic under; topics without one come last.
    group: str = Field(default="", max_length=80)


def key_binding_problems(doc: QuestionDoc) -> list[FieldError]:
    """Where the answer key and the expectations disagree, or a choice is left unaccounted for.

    Static: it reads the document only. With every expectation passing on a real run
    (the gate), an empty list means the key is what torch measured.
    """
    if doc.verify is None or doc.is_exercise:
        return []
    problems: list[FieldError] = []
    expect = doc.verify.expect
    if doc.effective_format == "numeric":
        assert doc.answer is not None
        answers = [(i, e) for i, e in enumerate(expect) if e.is_answer]
        if not answers:
            problems.append(FieldError(("verify", "expect"),
                                       "a measured numeric question needs an expectation with "
                                       "is_answer: true (the key is the measured value)"))
        for i, e in answers:
            if e.value is None or isinstance(e.value.equals, bool) or not isinstance(
                    e.value.equals, int | float):
                problems.append(FieldError(("verify", "expect", i, "is_answer"),
                                           f"expect[{i}] is_answer needs a value check of one number"))
            elif not doc.answer.accepts(float(e.value.equals)):
                problems.append(FieldError(
                    ("answer", "value"),
                    f"the key {doc.answer.value:g} disagrees with expect[{i}], which measures "
                    f"{e.value.equals:g}"))
        for i, e in enumerate(expect):
            if e.supports or e.rules_out:
                problems.append(FieldError(("verify", "expect", i),
                                           f"expect[{i}]: a numeric question has no choices to support"))
        return problems
    keys = {c.key for c in doc.choices}
    correct = set(doc.correct_keys)
    supported: set[str] = set()
    ruled_out: set[str] = set()
    for i, e in enumerate(expect):
        if e.is_answer:
            problems.append(FieldError(("verify", "expect", i, "is_answer"),
                                       f"expect[{i}]: is_answer is for numeric questions"))
        for field_name, named in (("supports", e.supports), ("rules_out", e.rules_out)):
            for key in named:
                if key not in keys:
                    problems.append(FieldError(("verify", "expect", i, field_name),
                                               f"expect[{i}].{field_name} names no choice {key!r}"))
        for key in e.supports:
            if key in keys and key not in correct:
                problems.append(FieldError(
                    ("verify", "expect", i, "supports"),
                    f"expect[{i}] ({e.label!r}) supports choice {key}, but the key marks it wrong"))
        for key in e.rules_out:
            if key in correct:
                problems.append(FieldError(
                    ("verify", "expect", i, "rules_out"),
                    f"expect[{i}] ({e.label!r}) rules out choice {key}, but the key marks it right"))
        supported.update(e.supports)
        ruled_out.update(e.rules_out)
    for key in doc.explained:
        if key not in keys:
            problems.append(FieldError(("explained", key), f"explained names no choice {key!r}"))
    for key in sorted(correct - supported - set(doc.explained)):
        problems.append(FieldError(
            "choices", f"choice {key} is marked right but no expectation supports it "
                       "(add it to an expectation's supports, or explain it under explained)"))
    for key in sorted(keys - correct - ruled_out - set(doc.explained)):
        problems.append(FieldError(
            "choices", f"choice {key} is marked wrong but no expectation rules it out "
                       "(add it to an expectation's rules_out, or explain it under explained)"))
    return problems
