"""The bank file format: one YAML document per question (docs/question-format.md).

These models are the single definition of a valid question. The loader checks
files against them, the database stores their JSON form per revision, and the
exporter writes them back, so a round trip changes nothing.
"""

from __future__ import annotations

import itertools
import math
import re
import string
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)

# app.questions.variants (templates, Jinja2's sandbox) is imported inside the functions that
# handle a question with variables: Jinja2 loads then and only then, so workers and
# `bank verify` over plain questions start without it.
from app.questions.values import TEMPLATED_CHECK_FIELDS, describe_variant, same_value
from app.verify.engine.artifacts import RankArtifact
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

# A question has at most this many variants: each is audited, and a learner meets a few.
MAX_VARIANTS = 8
# The runs `bank verify` and the publish gate make for one question: its variants times
# its audited knob combinations.
MAX_AUDIT_RUNS = 32
# A case has this many parts; a talk-through's rubric this many moves.
MIN_CASE_PARTS, MAX_CASE_PARTS = 2, 6
MIN_RUBRIC, MAX_RUBRIC = 3, 10

QuestionType = Literal["single", "multi", "numeric", "trace", "exercise", "case", "talk"]
QUESTION_TYPES: tuple[str, ...] = get_args(QuestionType)
# What a quiz can hold today: an exercise is answered by running code on its own page,
# and cases and talk-throughs wait for pages of their own (app.quizzes.grading grades them).
QUIZ_TYPES: tuple[str, ...] = ("single", "multi", "numeric", "trace")
AnswerFormat = Literal["single", "multi", "numeric"]
# The interview rounds a topic belongs to, in the order the home page lists them, with the
# names a candidate knows them by.
TopicRound = Literal["ddp", "large-model", "incident", "design"]
ROUNDS: tuple[str, ...] = get_args(TopicRound)
ROUND_TITLES = {"ddp": "The DDP round", "large-model": "The large-model round",
                "incident": "The incident round", "design": "The design round"}
PartType = Literal["single", "multi", "numeric"]
# A knob value is JSON: a scalar, or a (nested) list such as per-rank batch sizes.
KnobValue = bool | int | float | str | list[Any]
# A value that is one "{{ expression }}", evaluated per variant (questions with variables).
TemplatedValue = Annotated[str, Field(pattern=r"^\s*\{\{[\s\S]*\}\}\s*$")]
# What an omitted `equals` of an is_answer value check stands for: the variant's formula value.
FROM_FORMULA = "(the formula's value)"
# Names of the question's variables while its document is validated, so that its verify
# block accepts `when` conditions on them (QuestionDoc._with_variables sets it).
_VARIABLE_NAMES: ContextVar[frozenset[str]] = ContextVar("variable_names", default=frozenset())


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
    # Questions with variables only: an expression that says, per variant, whether this
    # choice is right (rendering turns it into `correct`).
    correct_when: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_key_rule(self) -> Choice:
        if self.correct and self.correct_when is not None:
            raise FieldError("correct_when", "a choice has correct or correct_when, not both")
        return self


class NumericAnswer(Strict):
    """The key of a numeric question: a typed `value`, or (with variables) a `formula` that
    each variant's rendering evaluates into its `value`."""

    value: float | None = None
    formula: str | None = Field(default=None, min_length=1)
    unit: str = ""
    abs_tol: float = Field(default=0.0, ge=0)
    rel_tol: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _value_or_formula(self) -> NumericAnswer:
        if (self.value is None) == (self.formula is None):
            raise ValueError("a numeric answer needs exactly one of value (a number) or formula "
                             "(an expression, in a question with variables)")
        if self.value is not None and not math.isfinite(self.value):
            raise FieldError("value", "the key must be a finite number")
        return self

    def accepts(self, x: float) -> bool:
        """True when x lies within the absolute or relative tolerance of the value."""
        assert self.value is not None, "render the variant first: a formula has no value"
        diff = abs(x - self.value)
        return diff <= self.abs_tol or diff <= self.rel_tol * abs(self.value) or diff == 0


def tolerance_text(doc: QuestionDoc) -> str:
    """How close a numeric answer must be, in words."""
    ans = doc.answer
    if ans is None:
        return ""
    parts = []
    if ans.abs_tol:
        parts.append(f"±{ans.abs_tol:g}{(' ' + ans.unit) if ans.unit else ''}")
    if ans.rel_tol:
        parts.append(f"±{ans.rel_tol * 100:g}%")
    return " or ".join(parts) if parts else "exact"


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


class ArtifactTrace(Strict):
    """Evidence a snippet produced with torch's own tools — a profiler trace, a flight-recorder
    dump, a memory account — kept per rank as the run result carries it (`artifact(name, ...)`
    in the snippet, `ranks[].artifacts[name]` in the result), and drawn by the same code."""

    kind: Literal["artifact"]
    caption: str = ""
    # The name the snippet gave it: Verify's run shows the artifact of this name.
    name: str = Field(min_length=1, max_length=200)
    ranks: list[RankArtifact] = Field(min_length=1, max_length=MAX_WORLD_SIZE)
    source: TraceSource = TraceSource()

    @model_validator(mode="after")
    def _one_kind(self) -> ArtifactTrace:
        kinds = {r.artifact.kind for r in self.ranks}
        if len(kinds) > 1:
            raise FieldError("ranks", f"every rank's artifact has one kind; got {', '.join(sorted(kinds))}")
        seen = [r.rank for r in self.ranks]
        if len(set(seen)) != len(seen):
            raise FieldError("ranks", "a rank appears twice")
        return self

    @property
    def artifact_kind(self) -> str:
        return self.ranks[0].artifact.kind

    def of_rank(self, rank: int) -> RankArtifact | None:
        return next((r for r in self.ranks if r.rank == rank), None)


Trace = Annotated[RankEventsTrace | BucketTrace | ArtifactTrace, Field(discriminator="kind")]


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
    # Omitted only with reference: true (exercises), or on an is_answer check of a question
    # with answer.formula, where it stands for the variant's formula value (QuestionDoc
    # checks who omits it).
    equals: Any = FROM_FORMULA
    reference: bool = False
    # With reference: true, compare with what the reference run reported under this other name
    # (DDP's gradients, say, computed beside the reference solution's own).
    reference_name: str | None = Field(default=None, min_length=1)
    tol: float = Field(default=1e-6, ge=0)

    @model_validator(mode="after")
    def _one_target(self) -> ValueCheck:
        if self.reference and "equals" in self.model_fields_set:
            raise FieldError("equals", "a value check has equals or reference: true, not both")
        if self.reference_name is not None and not self.reference:
            raise FieldError("reference_name", "reference_name goes with reference: true")
        return self


class CollectivesCheck(Strict):
    """How many times a rank entered one torch.distributed collective (collective_start events)."""

    rank: int | Literal["all"] = 0
    op: str = Field(min_length=1)
    count: Annotated[int, Field(ge=0)] | TemplatedValue | None = None
    at_least: Annotated[int, Field(ge=0)] | TemplatedValue | None = None
    at_most: Annotated[int, Field(ge=0)] | TemplatedValue | None = None
    iteration: int | None = None
    source: Literal["snippet", "torch", "any"] = "any"
    # Only the calls whose peer (a global rank) is, or is not, the rank's neighbour in a ring:
    # `next` is (rank + 1) mod N, `previous` (rank - 1) mod N.
    peer: Literal["next", "previous", "not_next", "not_previous"] | None = None

    @model_validator(mode="after")
    def _one_bound(self) -> CollectivesCheck:
        given = [n for n in ("count", "at_least", "at_most") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"a collectives check needs exactly one of count, at_least, at_most; "
                             f"got {given or 'none'}")
        return self


class RatioTo(Strict):
    rank: int = Field(ge=0)


class BytesCheck(Strict):
    """What a rank sent on gloo's sockets (bytes_sent), or its ratio to another rank's, or (an
    exercise) at most a multiple of what the reference solution sent on that rank."""

    rank: int | Literal["all"] = 0
    equals: float | TemplatedValue | None = None
    # Relative: bytes on the wire carry a few headers beyond the payload.
    tol: float = Field(default=0.05, ge=0)
    at_most: float | TemplatedValue | None = None
    at_least: float | TemplatedValue | None = None
    ratio_to: RatioTo | None = None
    # Exercises: at most this many times the reference solution's bytes on the same rank in
    # the same run (plus `slack` bytes: gloo's headers of a few more messages).
    at_most_reference: float | None = Field(default=None, gt=0)
    slack: int = Field(default=4096, ge=0)

    @model_validator(mode="after")
    def _one_bound(self) -> BytesCheck:
        given = [n for n in ("equals", "at_most", "at_least", "at_most_reference")
                 if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"a bytes check needs exactly one of equals, at_most, at_least, "
                             f"at_most_reference; got {given or 'none'}")
        if self.ratio_to is not None and self.equals is None:
            raise FieldError("ratio_to", "ratio_to compares with equals (and tol)")
        return self


class MemoryCheck(Strict):
    """Exercises: the learner process's memory at the checks program's marks (mark_memory),
    measured by the driver from outside, is at most `at_most` bytes above what it held before
    the learner's code ran. The marks must fall where the reference solution's fell (after as
    many collectives), or the check fails: a mark is only evidence at its place."""

    rank: int | Literal["all"] = "all"
    mark: str = Field(min_length=1)
    at_most: int = Field(gt=0)


class MarksCheck(Strict):
    """Exercises: the checks program's marks named `mark` (mark_memory) came, on each target
    rank, after exactly as many collectives as the reference solution's did: the learner's
    code called what the checks hand it between the same collectives (a pipeline stage that
    computes a micro-batch only after handing the previous one on)."""

    rank: int | Literal["all"] = "all"
    mark: str = Field(min_length=1)


class FilesCheck(Strict):
    """Exercises with `shared_folder: true`: how many files a rank's learner process left in
    the folder the ranks share (counted by the driver, by owner)."""

    rank: int | Literal["all"] = "all"
    count: int = Field(ge=0)


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


class ArtifactCheck(Strict):
    """The run's artifact of this name is, on these ranks, the one the question's trace keeps:
    equal in everything that does not change from run to run (its `signature`: the order of a
    profile's spans on the main thread and its collectives, a dump's entries, a memory
    account's rows), so the trace a learner reads is what the snippet produces."""

    name: str = Field(min_length=1)
    rank: int | Literal["all"] = "all"
    matches_trace: Literal[True] = True


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
    collectives: CollectivesCheck | None = None
    bytes: BytesCheck | None = None
    artifact: ArtifactCheck | None = None
    memory: MemoryCheck | None = None
    marks: MarksCheck | None = None
    files: FilesCheck | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Expectation:
        names = ("value", "outcome", "blocked", "error", "bucket_count", "bucket_order",
                 "bucket_overlap", "collectives", "bytes", "artifact", "memory", "marks",
                 "files")
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
    # Params every run gets besides its knobs: a variant's variables, which rendering
    # writes here (authors write `variables`, QuestionDoc.render fills this).
    params: dict[str, KnobValue] = {}

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
        for name in self.params:
            if name in self.knobs:
                raise FieldError(("params", name), f"{name!r} is both a knob and a fixed param")
        assignments = self.audit if isinstance(self.audit, list) else []
        for i, combo in enumerate(assignments):
            self._check_assignment(combo, f"audit[{i}]", ("audit", i))
        # `when` may also name the question's variables (or, once rendered, its params):
        # those select variants, not knob combinations.
        fixed = set(self.params) | _VARIABLE_NAMES.get()
        for i, exp in enumerate(self.expect):
            knob_part = {k: v for k, v in exp.when.items() if k not in fixed or k in self.knobs}
            self._check_assignment(knob_part, f"expect[{i}].when", ("expect", i, "when"),
                                   unknown="knob or variable" if fixed else "knob")
        audited = self.audit_combinations()
        for i, exp in enumerate(self.expect):
            # A check no audited run applies to would never be verified, yet learners can
            # pick those knob values: the publish gate and `bank verify` must run it.
            if not any(all(combo.get(k) == v for k, v in exp.when.items() if k in self.knobs)
                       for combo in audited):
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
        self, combo: dict[str, KnobValue], where: str, loc: tuple[str | int, ...],
        unknown: str = "knob",
    ) -> None:
        for name, value in combo.items():
            # The number of ranks is varied through a knob named world_size, which learners
            # can also turn; it is not a free-standing setting of the audit.
            if name not in self.knobs:
                raise FieldError((*loc, name), f"{where}: unknown {unknown} {name!r}")
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


class RightSolution(Strict):
    """Another right solution, written differently from the reference (its state in a
    dataclass, another loop shape): the gate proves the checks accept it."""

    file: str = Field(pattern=SNIPPET_FILE_RE)
    why: str = Field(min_length=1)
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
    # Collectives the driver refuses to perform for the learner's process: the call raises
    # ForbiddenCollective where the learner's code made it.
    forbid: list[str] = []
    wrong: list[WrongSolution] = []
    right: list[RightSolution] = []
    # The ranks' learner processes share one folder (the checks get its path as
    # `shared_folder`); otherwise each has only its own.
    shared_folder: bool = False
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


class VariantsBlock(Strict):
    """Which combinations of the variables' values are the question's variants."""

    # An expression over the variables; true drops that combination.
    exclude: str | None = Field(default=None, min_length=1)
    # Exactly these combinations, in this order, instead of all of them.
    pick: list[dict[str, KnobValue]] | None = Field(default=None, min_length=1, max_length=MAX_VARIANTS)

    @model_validator(mode="after")
    def _one_way(self) -> VariantsBlock:
        if (self.exclude is None) == (self.pick is None):
            raise ValueError("variants has exactly one of exclude or pick")
        return self


class CaseBranch(Strict):
    """One version of a case part: a single, multi or numeric question under the scenario."""

    prompt: str = Field(min_length=1)
    type: PartType
    choices: list[Choice] = []
    answer: NumericAnswer | None = None
    explanation: str = Field(min_length=1)
    explained: dict[str, str] = {}


class CasePart(Strict):
    """One part of a case: a question of its own (prompt, type, choices or answer,
    explanation), or, with `depends_on`, one version per choice of an earlier single-answer
    part, the learner's pick there deciding which version they are asked (`branches`)."""

    prompt: str | None = Field(default=None, min_length=1)
    type: PartType | None = None
    choices: list[Choice] = []
    answer: NumericAnswer | None = None
    explanation: str | None = Field(default=None, min_length=1)
    explained: dict[str, str] = {}
    # The index of the earlier part whose chosen key picks the version of this one.
    depends_on: int | None = Field(default=None, ge=0)
    branches: dict[str, CaseBranch] = {}

    @model_validator(mode="after")
    def _one_shape(self) -> CasePart:
        if self.depends_on is None and not self.branches:
            for name in ("prompt", "type", "explanation"):
                if getattr(self, name) is None:
                    raise FieldError(name, "Field required")
            return self
        if self.depends_on is None:
            raise FieldError("depends_on", "a part with branches says which earlier part's "
                                           "choice picks its version (depends_on)")
        if not self.branches:
            raise FieldError("branches", "a part with depends_on has one version per choice of "
                                         "that part (branches)")
        for name in ("prompt", "type", "answer", "explanation"):
            if getattr(self, name) is not None:
                raise FieldError(name, f"a part with branches has no {name} of its own: each "
                                       "branch carries it")
        for name in ("choices", "explained"):
            if getattr(self, name):
                raise FieldError(name, f"a part with branches has no {name} of its own: each "
                                       "branch carries them")
        return self

    def versions(self) -> list[tuple[str | None, CaseBranch]]:
        """(the earlier choice's key, the version) for each version; (None, itself) for a part
        without branches."""
        if not self.branches:
            assert self.prompt is not None and self.type is not None and self.explanation is not None
            return [(None, CaseBranch(prompt=self.prompt, type=self.type, choices=self.choices,
                                      answer=self.answer, explanation=self.explanation,
                                      explained=self.explained))]
        return list(self.branches.items())

    @property
    def part_type(self) -> PartType:
        """How the part is answered, the same in every version."""
        return self.versions()[0][1].type


def _keyed(choices: list[Choice]) -> list[Choice]:
    """Choices with their stable keys a, b, c... when the author wrote none."""
    if choices and not choices[0].key:
        return [c.model_copy(update={"key": string.ascii_lowercase[i]}) for i, c in enumerate(choices)]
    return choices


def _first_error(exc: ValidationError) -> tuple[tuple[str | int, ...], str]:
    """The first problem of a validation error: where (as the author wrote it) and what."""
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    if len(loc) > 1 and loc[0] == "trace" and loc[1] in ("rank_events", "buckets", "artifact"):
        loc = loc[:1] + loc[2:]  # pydantic's tag for the kind of trace, which authors never write
    cause = err.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        loc += cause.loc
    return loc, err["msg"].removeprefix("Value error, ")


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
    # The question's parameters and their allowed values; the texts are then templates.
    variables: dict[str, Annotated[list[KnobValue], Field(min_length=1)]] = {}
    variants: VariantsBlock | None = None
    # Values computed from the variables, in order (each may use the ones before it).
    compute: dict[str, Annotated[str, Field(min_length=1)]] = {}
    prompt: str = Field(min_length=1)
    choices: list[Choice] = []
    answer: NumericAnswer | None = None
    # A case's parts; a talk-through's model answer and rubric.
    parts: list[CasePart] = []
    model_answer: str | None = Field(default=None, min_length=1)
    rubric: list[Annotated[str, Field(min_length=1)]] = []
    # Required except for a talk-through, whose model answer and rubric explain it.
    explanation: str = ""
    trace: Trace | None = None
    verify: VerifyBlock | None = None
    exercise: ExerciseBlock | None = None
    # Choices no run can show right or wrong (reasoning, hardware), with the reason.
    explained: dict[str, str] = {}
    # The snippet's text; filled in by the loader from verify.snippet, never written in YAML.
    snippet_text: str | None = Field(default=None, exclude=True)

    @model_validator(mode="wrap")
    @classmethod
    def _with_variables(cls, data: Any, handler: ModelWrapValidatorHandler[QuestionDoc]) -> QuestionDoc:
        """Validate with the variables' names at hand, so `verify.expect[].when` may name them."""
        found = data.get("variables") if isinstance(data, dict) else None
        names = frozenset(n for n in found if isinstance(n, str)) if isinstance(found, dict) else frozenset()
        token = _VARIABLE_NAMES.set(names)
        try:
            return handler(data)
        finally:
            _VARIABLE_NAMES.reset(token)

    @model_validator(mode="after")
    def _consistent(self) -> QuestionDoc:
        if not self.explanation and self.type != "talk":
            raise FieldError("explanation", "Field required" if "explanation" not in self.model_fields_set
                             else "String should have at least 1 character")
        for name, kind in (("parts", "case"), ("model_answer", "talk"), ("rubric", "talk")):
            if getattr(self, name) and self.type != kind:
                raise FieldError(name, f"{name} is only for type: {kind}")
        if self.type == "exercise":
            return self._consistent_exercise()
        if self.exercise is not None:
            raise FieldError("exercise", "an exercise block is only for type: exercise")
        if self.type in ("case", "talk"):
            return self._consistent_case() if self.type == "case" else self._consistent_talk()
        if self.verify is not None:
            for i, e in enumerate(self.verify.expect):
                if e.hidden:
                    raise FieldError(("verify", "expect", i, "hidden"),
                                     "hidden checks are for exercises only")
                if e.value is not None and e.value.reference:
                    raise FieldError(("verify", "expect", i, "value", "reference"),
                                     "reference: true compares with an exercise's reference "
                                     "solution; a question has none")
        self._artifacts_bound()
        fmt = self.effective_format
        if self.type == "trace":
            if self.answer_format is None:
                raise FieldError("answer_format",
                                 "a trace question needs answer_format: single, multi or numeric")
            if self.trace is None:
                raise FieldError("trace", "a trace question needs a trace")
        elif self.answer_format is not None:
            raise FieldError("answer_format", "answer_format is only for type: trace")
        _check_answer(fmt, self.choices, self.answer)
        return self

    def _artifacts_bound(self) -> None:
        """An `artifact` check compares with the trace of its name; a measured artifact trace
        needs such a check, so `bank verify` proves the snippet still produces it."""
        trace = self.trace if isinstance(self.trace, ArtifactTrace) else None
        checks = [(i, e.artifact) for i, e in enumerate(self.verify.expect if self.verify else [])
                  if e.artifact is not None]
        for i, check in checks:
            if trace is None or trace.name != check.name:
                raise FieldError(("verify", "expect", i, "artifact", "name"),
                                 f"expect[{i}] compares artifact {check.name!r} with the trace, but the "
                                 "trace is not an artifact of that name")
            if isinstance(check.rank, int) and trace.of_rank(check.rank) is None:
                raise FieldError(("verify", "expect", i, "artifact", "rank"),
                                 f"the trace keeps no artifact of rank {check.rank}")
        if trace is not None and trace.source.kind == "measured" and not any(
                c.name == trace.name for _, c in checks):
            raise FieldError(("trace", "source", "kind"),
                             f"a measured artifact trace needs an expectation `artifact: {{name: "
                             f"{trace.name}}}` that compares it with the run (under verify.expect)")

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
        wrong = [w.file for w in self.exercise.wrong]
        for i, r in enumerate(self.exercise.right):
            if r.file in names or r.file in wrong or r.file in [x.file for x in self.exercise.right[:i]]:
                raise FieldError(("exercise", "right", i, "file"),
                                 f"right solution {r.file!r} is also the starter, the solution, "
                                 "the harness, a wrong solution or another right solution")
        for i, e in enumerate(self.verify.expect):
            if e.files is not None and not self.exercise.shared_folder:
                raise FieldError(("verify", "expect", i),
                                 f"expect[{i}]: a files check needs exercise.shared_folder: true")
        return self

    def _no_key_fields(self, what: str) -> None:
        for name in ("answer_format", "answer", "trace", "verify"):
            if getattr(self, name) is not None:
                raise FieldError(name, f"{what} has no {name}")
        if self.choices:
            raise FieldError("choices", f"{what} has no choices")
        if self.explained:
            raise FieldError("explained", f"{what} has no choices to explain")

    def _consistent_case(self) -> QuestionDoc:
        self._no_key_fields("a case (its parts carry the questions)")
        if not MIN_CASE_PARTS <= len(self.parts) <= MAX_CASE_PARTS:
            raise FieldError("parts", f"a case has {MIN_CASE_PARTS} to {MAX_CASE_PARTS} parts, "
                                      f"has {len(self.parts)}")
        for j, part in enumerate(self.parts):
            if part.branches:
                self._check_branching(j, part)
            for key, version in part.versions():
                loc: tuple[str | int, ...] = ("parts", j) if key is None else ("parts", j, "branches", key)
                try:
                    _check_answer(version.type, version.choices, version.answer)
                except FieldError as exc:
                    raise FieldError((*loc, *exc.loc), str(exc)) from None
                keys = {c.key for c in _keyed(version.choices)}
                for name in version.explained:
                    if name not in keys:
                        raise FieldError((*loc, "explained", name), f"explained names no choice {name!r}")
        return self

    def _check_branching(self, j: int, part: CasePart) -> None:
        """A part that depends on an earlier choice: one version per choice of an earlier
        single-answer part without branches of its own, all answered the same way."""
        assert part.depends_on is not None
        k = part.depends_on
        if k >= j:
            raise FieldError(("parts", j, "depends_on"), f"part {j} can depend only on an earlier "
                                                         f"part (0 to {j - 1}), not on part {k}")
        earlier = self.parts[k]
        if earlier.branches or earlier.type != "single":
            raise FieldError(("parts", j, "depends_on"), f"part {k} must be a single-answer part "
                                                         "without branches of its own")
        keys = [c.key for c in _keyed(earlier.choices)]
        if set(part.branches) != set(keys):
            raise FieldError(("parts", j, "branches"),
                             f"one branch per choice of part {k} ({', '.join(keys)}); has "
                             f"{', '.join(part.branches) or 'none'}")
        types = {b.type for b in part.branches.values()}
        if len(types) > 1:
            raise FieldError(("parts", j, "branches"), "every branch of a part is answered the same "
                                                       f"way (one type); found {', '.join(sorted(types))}")

    def _consistent_talk(self) -> QuestionDoc:
        self._no_key_fields("a talk-through")
        if self.model_answer is None:
            raise FieldError("model_answer", "a talk-through needs a model_answer")
        if not MIN_RUBRIC <= len(self.rubric) <= MAX_RUBRIC:
            raise FieldError("rubric", f"a talk-through's rubric lists {MIN_RUBRIC} to {MAX_RUBRIC} "
                                       f"moves, has {len(self.rubric)}")
        return self

    @model_validator(mode="after")
    def _assign_keys(self) -> QuestionDoc:
        if self.choices and not self.choices[0].key:
            object.__setattr__(self, "choices", _keyed(self.choices))
        if any(v.choices and not v.choices[0].key for p in self.parts for _, v in p.versions()):
            parts = [p.model_copy(update={
                "choices": _keyed(p.choices),
                "branches": {k: b.model_copy(update={"choices": _keyed(b.choices)})
                             for k, b in p.branches.items()}}) for p in self.parts]
            object.__setattr__(self, "parts", parts)
        return self

    @model_validator(mode="after")
    def _check_variables(self) -> QuestionDoc:
        if not self.variables:
            self._no_templates()
            return self
        from app.questions import variants

        if self.is_exercise:
            raise FieldError("variables", "an exercise has no variables (use knobs)")
        self._check_names()
        if self.verify is not None:
            if self.verify.params:
                raise FieldError(("verify", "params"), "params are written by rendering a variant; "
                                                       "declare variables instead")
            if "world_size" in self.variables and "world_size" in self.verify.model_fields_set:
                raise FieldError(("verify", "world_size"), "world_size is a variable: each variant "
                                                           "sets the number of ranks")
        for loc, answer in self._answers():
            if answer.value is not None:
                raise FieldError((*loc, "value"), "a question with variables computes its numeric key: "
                                                  "write answer.formula (an expression), not a value")
        for problem in variants.check_sources(self._data()):
            raise FieldError(problem.loc, str(problem))
        try:
            found = self._assignments()
        except variants.TemplateProblem as exc:
            raise FieldError(exc.loc or "variants", str(exc)) from None
        if not 1 <= len(found) <= MAX_VARIANTS:
            raise FieldError("variants" if self.variants else "variables",
                             f"{len(found)} variants; a question has 1 to {MAX_VARIANTS} "
                             "(list them under variants.pick)")
        if self.verify is not None:
            self._check_audit(found)
        for i, params in enumerate(found):
            try:
                rendered = self._render(params)
                _distinct_choices(rendered)
            except variants.TemplateProblem as exc:
                raise FieldError(exc.loc, f"{describe_variant(i, params)}: {exc}") from None
            except ValidationError as exc:
                loc, message = _first_error(exc)
                raise FieldError(loc, f"{describe_variant(i, params)}: {message}") from None
        return self

    def _no_templates(self) -> None:
        """Without variables nothing is a template: refuse what only a template could mean."""
        for name in ("variants", "compute"):
            if getattr(self, name):
                raise FieldError(name, f"{name} needs variables")
        for loc, answer in self._answers():
            if answer.formula is not None:
                raise FieldError((*loc, "formula"), "a formula needs variables; a question with fixed "
                                                    "inputs declares each as a variable of one value")
        for loc, choice in self._all_choices():
            if choice.correct_when is not None:
                raise FieldError((*loc, "correct_when"), "correct_when needs variables")
        for i, exp in enumerate(self.verify.expect if self.verify else []):
            if exp.value is not None and exp.value.equals == FROM_FORMULA and not exp.value.reference:
                raise FieldError(("verify", "expect", i, "value", "equals"),
                                 "a value check needs equals (or, in an exercise, reference: true)")
            for check, fields in TEMPLATED_CHECK_FIELDS.items():
                body = getattr(exp, check)
                for name in fields if check != "value" and body is not None else ():
                    if isinstance(getattr(body, name), str):
                        raise FieldError(("verify", "expect", i, check, name),
                                         "a templated value needs variables; write a number")

    def _check_names(self) -> None:
        from app.questions import variants

        taken: set[str] = set()
        for field_name, names in (("variables", list(self.variables)), ("compute", list(self.compute))):
            for name in names:
                if not re.match(KNOB_NAME_RE, name):
                    raise FieldError((field_name, name), f"name {name!r} must match {KNOB_NAME_RE}")
                if name in variants.RESERVED_NAMES or name in variants.FUNCTIONS:
                    raise FieldError((field_name, name), f"{name!r} is a reserved word or function name")
                if name in taken:
                    raise FieldError((field_name, name), f"{name!r} is already a variable")
                taken.add(name)
        for name, values in self.variables.items():
            for value in values:
                if isinstance(value, float) and not math.isfinite(value):
                    raise FieldError(("variables", name), "values must be finite numbers")
            if name == "world_size" and not all(
                    isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_WORLD_SIZE
                    for v in values):
                raise FieldError(("variables", name),
                                 f"world_size values must be whole numbers 1..{MAX_WORLD_SIZE}")
            if self.verify is not None and name in self.verify.knobs:
                raise FieldError(("variables", name), f"{name!r} is also a knob; a variable and a "
                                                      "knob need different names")
        picks = (self.variants.pick if self.variants else None) or []
        for i, pick in enumerate(picks):
            if set(pick) != set(self.variables):
                raise FieldError(("variants", "pick", i), "each pick assigns every variable, "
                                                          f"{', '.join(self.variables)}")
            for name, value in pick.items():
                if not any(same_value(value, v) for v in self.variables[name]):
                    raise FieldError(("variants", "pick", i, name),
                                     f"{value!r} is not an allowed value of variable {name!r}")
            if any(all(same_value(pick[n], other[n]) for n in pick) for other in picks[:i]):
                raise FieldError(("variants", "pick", i), "the same variant is picked twice")

    def _check_audit(self, found: list[dict[str, KnobValue]]) -> None:
        assert self.verify is not None
        runs = len(found) * len(self.verify.audit_combinations())
        if runs > MAX_AUDIT_RUNS:
            raise FieldError(("verify", "audit"),
                             f"the audit would make {runs} runs ({len(found)} variants × "
                             f"{len(self.verify.audit_combinations())} knob combinations); "
                             f"at most {MAX_AUDIT_RUNS} per question")
        for i, exp in enumerate(self.verify.expect):
            conditions = {k: v for k, v in exp.when.items() if k in self.variables}
            for name, value in conditions.items():
                if not any(same_value(value, v) for v in self.variables[name]):
                    raise FieldError(("verify", "expect", i, "when", name),
                                     f"expect[{i}].when: {value!r} is not an allowed value of "
                                     f"variable {name!r}")
            if not any(all(same_value(p[k], v) for k, v in conditions.items()) for p in found):
                raise FieldError(("verify", "expect", i, "when"), f"expect[{i}] applies to no variant")
            omitted = exp.value is not None and exp.value.equals == FROM_FORMULA and not exp.value.reference
            if omitted and not (
                    exp.is_answer and self.answer is not None and self.answer.formula is not None):
                raise FieldError(("verify", "expect", i, "value", "equals"),
                                 "equals may be left out only on an is_answer check of a question "
                                 "with answer.formula (it then means the formula's value)")

    def _answers(self) -> Iterator[tuple[tuple[str | int, ...], NumericAnswer]]:
        if self.answer is not None:
            yield ("answer",), self.answer
        for j, part in enumerate(self.parts):
            if part.answer is not None:
                yield ("parts", j, "answer"), part.answer
            for key, branch in part.branches.items():
                if branch.answer is not None:
                    yield ("parts", j, "branches", key, "answer"), branch.answer

    def _all_choices(self) -> Iterator[tuple[tuple[str | int, ...], Choice]]:
        for i, c in enumerate(self.choices):
            yield ("choices", i), c
        for j, part in enumerate(self.parts):
            for i, c in enumerate(part.choices):
                yield ("parts", j, "choices", i), c
            for key, branch in part.branches.items():
                for i, c in enumerate(branch.choices):
                    yield ("parts", j, "branches", key, "choices", i), c

    def _data(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True, exclude={"snippet_text"})

    def _assignments(self) -> list[dict[str, KnobValue]]:
        if not self.variables:
            return [{}]
        from app.questions import variants

        block = self.variants
        return variants.assignments(self.variables, block.exclude if block else None,
                                    block.pick if block else None)

    def _render(self, params: dict[str, KnobValue]) -> QuestionDoc:
        from app.questions import variants

        values = variants.values_of(params, self.compute)
        data = variants.render_data(self._data(), values)
        for name in ("variables", "variants", "compute"):
            data.pop(name, None)
        verify = data.get("verify")
        if isinstance(verify, dict):
            key = data.get("answer", {}).get("value")
            for exp in verify["expect"]:
                if exp.get("is_answer") and "value" in exp and "equals" not in exp["value"]:
                    exp["value"]["equals"] = key
            verify["params"] = dict(params)
            if "world_size" in params:
                verify["world_size"] = params["world_size"]
        doc = QuestionDoc.model_validate(data)
        return doc.model_copy(update={"snippet_text": self.snippet_text})

    @property
    def variant_count(self) -> int:
        """How many variants the question has (1 without variables)."""
        return len(self._assignments())

    def variant_params(self, i: int) -> dict[str, KnobValue]:
        """The variables' values of variant i ({} without variables); IndexError past the last."""
        found = self._assignments()
        if not 0 <= i < len(found):
            raise IndexError(f"variant {i} of a question with {len(found)} variant(s)")
        return found[i]

    def render(self, i: int) -> QuestionDoc:
        """Variant i as a plain document: every template rendered, `answer.value` filled from
        the formula, no variables left. Deterministic: a pure function of this document and i
        (services cache it per revision). A question without variables is its own variant 0."""
        params = self.variant_params(i)
        if not self.variables:
            return self
        return self._render(params)

    def part(self, j: int, earlier: Sequence[Any] = ()) -> QuestionDoc:
        """Part j of a case as a question of the part's type, graded as one (of a rendered case).

        `earlier` holds the answers given to parts 0 to j − 1 (normalised: a key for a
        single-answer part); a part that depends on an earlier choice is the version that
        choice picked. Raises ValueError when that answer is missing."""
        if self.type != "case":
            raise ValueError(f"a {self.type} question has no parts")
        if self.variables:
            raise ValueError("render the variant first: this case's parts are templates")
        p = self.parts[j]
        if p.branches:
            assert p.depends_on is not None
            picked = earlier[p.depends_on] if p.depends_on < len(earlier) else None
            if not isinstance(picked, str) or picked not in p.branches:
                raise ValueError(f"part {j} follows the choice made in part {p.depends_on}; "
                                 "answer that part first")
            return self._part_doc(p.branches[picked])
        return self._part_doc(p.versions()[0][1])

    def part_versions(self, j: int) -> list[tuple[str | None, QuestionDoc]]:
        """Every version of part j as a question: (the earlier choice that picks it, the part);
        one (None, part) for a part without branches."""
        return [(key, self._part_doc(version)) for key, version in self.parts[j].versions()]

    def _part_doc(self, p: CaseBranch) -> QuestionDoc:
        return QuestionDoc.model_validate({
            "slug": self.slug, "topic": self.topic, "title": self.title, "tags": self.tags,
            "difficulty": self.difficulty, "type": p.type, "prompt": p.prompt,
            "choices": [c.model_dump(exclude_defaults=True) for c in p.choices],
            "answer": p.answer.model_dump(exclude_defaults=True) if p.answer else None,
            "explanation": p.explanation, "explained": p.explained})

    @property
    def effective_format(self) -> AnswerFormat:
        """How the learner answers; an exercise is answered by running code, a case part by
        part and a talk-through by ticking a rubric, so callers that grade choices or numbers
        check `is_exercise`, `is_case` and `is_talk` first."""
        if self.type == "trace":
            return self.answer_format or "single"
        if self.type in ("single", "multi", "numeric"):
            return self.type
        return "single"

    @property
    def is_exercise(self) -> bool:
        return self.type == "exercise"

    @property
    def is_case(self) -> bool:
        return self.type == "case"

    @property
    def is_talk(self) -> bool:
        return self.type == "talk"

    @property
    def correct_keys(self) -> list[str]:
        return [c.key for c in self.choices if c.correct]


def _distinct_choices(doc: QuestionDoc) -> None:
    """Refuse two choices that render to the same text: a distractor that coincides with the
    key (or another distractor) for some parameters is wrong for that variant."""
    from app.questions import variants

    groups: list[tuple[tuple[str | int, ...], list[Choice]]] = [(("choices",), doc.choices)]
    groups += [(("parts", j, "choices"), p.choices) for j, p in enumerate(doc.parts)]
    groups += [(("parts", j, "branches", k, "choices"), b.choices)
               for j, p in enumerate(doc.parts) for k, b in p.branches.items()]
    for loc, choices in groups:
        seen: dict[str, str] = {}
        for c in choices:
            text = " ".join(c.text.split())
            if text in seen:
                raise variants.TemplateProblem(f"choices {seen[text]} and {c.key} render the same "
                                               f"text ({text[:60]!r})", loc)
            seen[text] = c.key


def _check_answer(fmt: str, choices: list[Choice], answer: NumericAnswer | None) -> None:
    """The key's shape for a question (or case part) answered this way."""
    if fmt == "numeric":
        if answer is None:
            raise FieldError("answer", "a numeric question needs answer: {value, abs_tol or rel_tol}")
        if choices:
            raise FieldError("choices", "a numeric question has no choices")
        return
    if answer is not None:
        raise FieldError("answer", f"a {fmt} question has choices, not a numeric answer")
    if len(choices) < 2:
        raise FieldError("choices", "needs at least 2 choices")
    if len(choices) > 26:
        raise FieldError("choices", "at most 26 choices")
    keys = [c.key for c in choices]
    if any(keys) and (not all(keys) or len(set(keys)) != len(keys)):
        raise FieldError("choices", "choice keys must be all given and distinct, or all omitted")
    # A choice right only for some variants is counted per variant, once rendered.
    if any(c.correct_when is not None for c in choices):
        return
    right = sum(c.correct for c in choices)
    if fmt == "single" and right != 1:
        raise FieldError("choices", f"a single-choice question needs exactly 1 correct choice, has {right}")
    if fmt == "multi" and right < 1:
        raise FieldError("choices", "a multi-select question needs at least 1 correct choice")


class TopicDoc(Strict):
    """question_bank/<topic>/_topic.yaml: how a topic is named and ordered."""

    title: str = Field(min_length=1)
    description: str = ""
    position: int = 100
    # The heading the home page lists the topic under; topics without one come last.
    group: str = Field(default="", max_length=80)
    # The interview round a candidate would meet the topic in: the home page and the quiz
    # builder list topics by round first, then by group.
    round: TopicRound = "ddp"
