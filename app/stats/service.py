"""Item statistics for authors: how each question revision (and variant) performs, from every
learner's FIRST attempt at the question, aggregated in SQL (docs/authoring.md, "Item statistics").

- attempts: learners whose first attempt at the question was at this revision (and variant);
- facility: the share of those first attempts that were right;
- discrimination: the point-biserial correlation between being right on this item and the
  learner's rest score, the share right of their other first attempts (learners with fewer
  than MIN_OTHER_ITEMS other first attempts have no rest score and are left out of it);
- the picks of every choice (single- and multi-choice questions), the median time taken, and
  right/wrong by the learner's confidence.

Why point-biserial and not upper-minus-lower 27%: learners here answer different subsets of
the bank, so there is no one test score to rank them by, and the upper-lower index throws
away the middle 46% of a few dozen learners; the correlation uses every learner with a rest
score, and it is a handful of sums per item, which one GROUP BY computes for the whole bank.
"""

from __future__ import annotations

import json
import math
import string
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Float, String, and_, case, cast, func, or_, select
from sqlalchemy.orm import Session

from app.questions.models import Question, QuestionRevision
from app.quizzes.models import CONFIDENCE_LEVELS, Attempt

# An item is judged (flagged) only from this many first attempts: below it one learner more
# or less swings facility by several points and discrimination by tenths.
MIN_ATTEMPTS = 30
# Discrimination below this is near zero (or negative): being right on the item says nothing
# about (or the opposite of) how the learner does elsewhere.
DISCRIMINATION_FLOOR = 0.10
# Facility above this: nearly everyone is right, so the item tells learners apart by nothing.
FACILITY_CEILING = 0.95
# A rest score from fewer other items is mostly noise.
MIN_OTHER_ITEMS = 3
# Question types whose answers are choice keys (a trace question answered by choice too).
CHOICE_TYPES = ("single", "multi", "trace")


FLAG_DISCRIMINATION = "discrimination"
FLAG_UNPICKED = "unpicked"
FLAG_EASY = "easy"
FLAG_TEXT = {
    FLAG_DISCRIMINATION: "near-zero or negative discrimination",
    FLAG_UNPICKED: "a distractor nobody picks",
    FLAG_EASY: "almost everyone is right",
}

# Columns of the bank page's table that it sorts by.
SORT_KEYS = ("question", "attempts", "facility", "discrimination", "median_ms", "flags")


@dataclass
class ChoiceStats:
    key: str
    text: str
    correct: bool | None  # None: right in some variants only (correct_when)
    picks: int
    share: float  # of the item's first attempts


@dataclass
class ItemStats:
    question_id: int
    slug: str
    title: str
    topic: str
    revision_id: int
    revision_number: int
    variant: int | None
    attempts: int
    right: int
    rest_learners: int  # learners with a rest score (discrimination uses these)
    discrimination: float | None
    median_ms: float | None
    confidence: dict[str, tuple[int, int]] = field(default_factory=dict)  # level -> (right, wrong)
    choices: list[ChoiceStats] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    @property
    def facility(self) -> float | None:
        return self.right / self.attempts if self.attempts else None

    @property
    def unpicked(self) -> list[str]:
        return [c.key for c in self.choices if c.correct is False and c.picks == 0]


def _items(question_id: int | None, question_ids: list[int] | None) -> Any:
    """The first attempts being judged, each with the learner's rest score (NULL when they have
    fewer than MIN_OTHER_ITEMS other first attempts).

    A learner's first attempt at a question is their lowest-id one: attempts are only ever
    inserted as they are answered (and a merged history keeps its ids), so it is the earliest,
    and MIN(id) per (learner, question) walks the (learner_id, question_id) index where a
    window function would sort every attempt (far slower on SQLite)."""
    first_ids = select(func.min(Attempt.id).label("id")).group_by(Attempt.learner_id,
                                                                  Attempt.question_id)
    judged = (Attempt.question_id == question_id if question_id is not None
              else Attempt.question_id.in_(question_ids) if question_ids is not None else None)
    if judged is not None:
        # Only the learners who answered these questions: their other first attempts make
        # their rest scores.
        first_ids = first_ids.where(Attempt.learner_id.in_(select(Attempt.learner_id).where(judged)))
    firsts_q = first_ids.subquery("first_ids")
    firsts = (select(Attempt.learner_id, Attempt.question_id, Attempt.revision_id,
                     case((Attempt.correct, 1), else_=0).label("x"), Attempt.time_taken_ms,
                     Attempt.confidence, cast(Attempt.answer, String).label("answer"),
                     Attempt.variant.label("variant"))
              .join(firsts_q, firsts_q.c.id == Attempt.id)
              # Read twice (the totals and the items): computed once.
              .cte("firsts").prefix_with("MATERIALIZED"))
    totals = (select(firsts.c.learner_id, func.count().label("n"), func.sum(firsts.c.x).label("k"))
              .group_by(firsts.c.learner_id).subquery("totals"))
    rest = case((totals.c.n - 1 >= MIN_OTHER_ITEMS,
                 cast(totals.c.k - firsts.c.x, Float) / (totals.c.n - 1)), else_=None)
    # The median time, without a statement of its own: each item's times are numbered (the
    # untimed last), and the middle one (or two) of them is kept as `mid`, to be summed and
    # counted by whichever group it falls in.
    item = (firsts.c.question_id, firsts.c.revision_id, firsts.c.variant)
    i = func.row_number().over(partition_by=item, order_by=firsts.c.time_taken_ms.asc().nulls_last())
    c = func.count(firsts.c.time_taken_ms).over(partition_by=item)
    stmt = (select(firsts, rest.label("rest"), i.label("i"), c.label("c"))
            .join(totals, totals.c.learner_id == firsts.c.learner_id))
    if question_id is not None:
        stmt = stmt.where(firsts.c.question_id == question_id)
    elif question_ids is not None:
        stmt = stmt.where(firsts.c.question_id.in_(question_ids))
    numbered = stmt.subquery("numbered")
    middle = and_(numbered.c.time_taken_ms.is_not(None),
                  or_(numbered.c.i == (numbered.c.c + 1) // 2, numbered.c.i == (numbered.c.c + 2) // 2))
    return select(numbered, case((middle, numbered.c.time_taken_ms), else_=None).label("mid")
                  ).subquery("items")


def _group(items: Any) -> list[Any]:
    return [items.c.question_id, items.c.revision_id, items.c.variant]


def _correlation(m: int, sx: float, sr: float, srr: float, sxr: float) -> float | None:
    """Pearson's r from sums (x is 0/1, so sum of x² is sum of x): the point-biserial."""
    if m < 2:
        return None
    var_x = m * sx - sx * sx
    var_r = m * srr - sr * sr
    if var_x <= 0 or var_r <= 1e-12:
        return None
    return (m * sxr - sx * sr) / math.sqrt(var_x * var_r)


def _choices(content: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    out = []
    for i, c in enumerate(content.get("choices") or []):
        key = c.get("key") or string.ascii_lowercase[i]
        correct = None if c.get("correct_when") is not None else bool(c.get("correct"))
        out.append((key, str(c.get("text", "")), correct))
    return out


def item_stats(*, db_session: Session, question_id: int | None = None,
               question_ids: list[int] | None = None) -> list[ItemStats]:
    """Statistics of every revision (and variant) with first attempts: of one question, of
    these questions, or (neither given) of the whole bank; flagged (see `flags_for`).

    One statement: a GROUP BY down to (item, confidence, right, answer), carrying the sums the
    correlation needs and the middle times, rolled up here over its rows (a few per item)."""
    items = _items(question_id, question_ids)
    g = _group(items)
    has_rest = items.c.rest.is_not(None)
    x_rest = case((has_rest, items.c.x), else_=None)
    # The answer only where it is a choice (a numeric question's answers are not grouped on).
    choice = (select(Question.id).where(Question.id == items.c.question_id,
                                        Question.type.in_(CHOICE_TYPES)).exists())
    answer = case((choice, items.c.answer), else_=None).label("answer")
    cells: Any = db_session.execute(
        select(*g, items.c.confidence, items.c.x, answer, func.count().label("n"),
               func.count(items.c.rest).label("m"), func.sum(x_rest).label("sx"),
               func.sum(items.c.rest).label("sr"), func.sum(items.c.rest * items.c.rest).label("srr"),
               func.sum(x_rest * items.c.rest).label("sxr"),
               func.sum(items.c.mid).label("mid_sum"), func.count(items.c.mid).label("mid_n"))
        .group_by(*g, items.c.confidence, items.c.x, answer)).all()
    if not cells:
        return []
    # Per item: first attempts, right, learners with a rest score, the correlation's sums, and
    # the middle time(s) with how many there are.
    sums: dict[tuple[int, int, int | None], list[float]] = defaultdict(lambda: [0.0] * 9)
    grid: dict[tuple[int, int, int | None], dict[str, tuple[int, int]]] = defaultdict(dict)
    picks: dict[tuple[int, int, int | None], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for c in cells:
        key = (c.question_id, c.revision_id, c.variant)
        acc = sums[key]
        for i, v in enumerate((c.n, c.n * c.x, c.m, c.sx, c.sr, c.srr, c.sxr, c.mid_sum, c.mid_n)):
            acc[i] += float(v or 0)
        level = c.confidence if c.confidence in CONFIDENCE_LEVELS else "none"
        right, wrong = grid[key].get(level, (0, 0))
        grid[key][level] = (right + c.n, wrong) if c.x else (right, wrong + c.n)
        for k in _picked(c.answer):
            picks[key][k] += int(c.n)

    questions = {q.id: q for q in db_session.execute(
        select(Question.id, Question.slug, Question.title, Question.topic, Question.type)
        .where(Question.id.in_({k[0] for k in sums})))}
    revisions = {r.id: r for r in db_session.execute(
        select(QuestionRevision.id, QuestionRevision.number, QuestionRevision.content)
        .where(QuestionRevision.id.in_({k[1] for k in sums})))}
    stats: dict[tuple[int, int, int | None], ItemStats] = {}
    for key, acc in sums.items():
        n, n_right, m, sx, sr, srr, sxr, mid_sum, mid_n = acc
        q, rev = questions[key[0]], revisions[key[1]]
        item = ItemStats(
            question_id=q.id, slug=q.slug, title=q.title, topic=q.topic, revision_id=rev.id,
            # A revision without variables has one form: no variant to name.
            revision_number=rev.number,
            variant=key[2] if (rev.content or {}).get("variables") else None,
            attempts=int(n), right=int(n_right),
            rest_learners=int(m), discrimination=_correlation(int(m), sx, sr, srr, sxr),
            median_ms=mid_sum / mid_n if mid_n else None, confidence=grid[key])
        if q.type in CHOICE_TYPES:
            item.choices = [ChoiceStats(k, t, ok, picks[key].get(k, 0),
                                        picks[key].get(k, 0) / item.attempts if item.attempts else 0.0)
                            for k, t, ok in _choices(rev.content)]
        item.flags = flags_for(item)
        stats[key] = item

    return sorted(stats.values(), key=lambda s: (s.slug, s.revision_number, s.variant or 0))


def _picked(answer: str | None) -> list[str]:
    """The choice keys in a stored answer (a key, or a list of keys; anything else: none)."""
    try:
        value = json.loads(answer) if answer is not None else None
    except ValueError:
        return []
    keys = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [k for k in keys if isinstance(k, str)]


def flags_for(item: ItemStats) -> list[str]:
    """Why an item needs an author's look: with at least MIN_ATTEMPTS first attempts, a
    discrimination below DISCRIMINATION_FLOOR, a distractor nobody picks, or a facility above
    FACILITY_CEILING."""
    if item.attempts < MIN_ATTEMPTS:
        return []
    flags = []
    if item.discrimination is not None and item.discrimination < DISCRIMINATION_FLOOR:
        flags.append(FLAG_DISCRIMINATION)
    if item.unpicked:
        flags.append(FLAG_UNPICKED)
    facility = item.facility
    if facility is not None and facility > FACILITY_CEILING:
        flags.append(FLAG_EASY)
    return flags


def flagged(*, db_session: Session, question_ids: list[int] | None = None) -> list[ItemStats]:
    """The items of the bank (or of these questions) that are flagged, most attempted first."""
    return sorted((s for s in item_stats(db_session=db_session, question_ids=question_ids)
                   if s.flags), key=lambda s: (-s.attempts, s.slug))


def sort_items(items: list[ItemStats], key: str, descending: bool) -> list[ItemStats]:
    """The bank table's order: by one of SORT_KEYS; an item without the value sorts last."""
    if key not in SORT_KEYS:
        key = "question"

    def value(s: ItemStats) -> Any:
        return {"question": (s.slug, s.revision_number, s.variant or 0), "attempts": s.attempts,
                "facility": s.facility, "discrimination": s.discrimination,
                "median_ms": s.median_ms, "flags": len(s.flags)}[key]

    present = [s for s in items if value(s) is not None]
    missing = [s for s in items if value(s) is None]
    return sorted(present, key=value, reverse=descending) + missing
