"""Learners, quizzes and attempts (each attempt schedules its FSRS card, see review.py)."""

from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app import ratelimit, reveal
from app.accounts.service import ensure_learner
from app.db import utcnow
from app.errors import Conflict, InvalidInput, NotFound
from app.questions.models import Question, QuestionRevision, Topic
from app.questions.schema import QuestionDoc
from app.questions.service import (
    SAMPLE_SLUGS,
    PublishedQuestion,
    list_published,
    revision_doc,
    revision_variant,
)
from app.quizzes.grading import (
    TALK_TOO_SHORT,
    Grade,
    InvalidAnswer,
    grade,
    grade_part,
    normalise_answer,
    real_talk,
)
from app.quizzes.models import (
    CONFIDENCE_LEVELS,
    SLOT_STANDALONE,
    Attempt,
    PartialAnswer,
    Quiz,
    QuizItem,
)
from app.review import service as review

# A quiz longer than this is a mock interview, which has its own flow.
MAX_QUIZ_QUESTIONS = 30


class AlreadyAnswered(Conflict):
    """The quiz item (or this exact submission) was answered before; the first answer counts."""

    def __init__(self, attempt: Attempt) -> None:
        super().__init__("already answered")
        self.attempt = attempt


class NoQuestions(NotFound):
    """No published question matches the filters (of a quiz, or a mock interview)."""


class NoSuchVariant(InvalidInput):
    """A variant index the question does not have."""


class OutOfTurn(Conflict):
    """A step of a case or talk-through sent out of its order (part 2 before part 1, the
    rubric's ticks before the written answer), or for another variant than the one under way."""


# Variants ----------------------------------------------------------------------------------


def check_variant(doc: QuestionDoc, variant: int) -> int:
    """`variant` if the question (a template document) has it; NoSuchVariant (422) otherwise."""
    count = doc.variant_count
    if isinstance(variant, bool) or not isinstance(variant, int) or not 0 <= variant < count:
        raise NoSuchVariant(f"variant {variant!r} does not exist: this question has variant"
                            f"{' 0' if count == 1 else f's 0 to {count - 1}'}", loc=("variant",))
    return variant


def pick_variant(*, learner_id: str, question_id: int, count: int, answered: int,
                 last: int | None) -> int:
    """The variant a learner meets on their `answered`-th return to a question (pure).

    A hash of (learner, question, answers so far), so a reload shows the same numbers and
    two learners usually see different ones; after an answer the draw is among the other
    variants, so review (and practising again) never repeats the numbers just answered.
    """
    if count <= 1:
        return 0
    digest = hashlib.sha256(f"{learner_id}\0{question_id}\0{answered}".encode()).digest()
    h = int.from_bytes(digest[:8], "big")
    if last is None or not 0 <= last < count:
        return h % count
    others = [i for i in range(count) if i != last]
    return others[h % len(others)]


_LAST_VARIANT = (select(Attempt.variant)
                 .where(Attempt.learner_id == bindparam("learner_id"),
                        Attempt.question_id == bindparam("question_id"))
                 .order_by(Attempt.created_at.desc(), Attempt.id.desc()).limit(1))
_ANSWERS = (select(func.count()).select_from(Attempt)
            .where(Attempt.learner_id == bindparam("learner_id"),
                   Attempt.question_id == bindparam("question_id")))


def drawn_variant(*, db_session: Session, learner_id: str, question_id: int, count: int) -> int:
    """The variant this learner meets now outside a quiz (the question page, Review, the API).

    A case or talk-through under way keeps its variant; otherwise pick_variant over the
    learner's answers so far. No query for a question with one variant.
    """
    if count <= 1:
        return 0
    params = {"learner_id": learner_id, "question_id": question_id}
    under_way = partial_answer(db_session=db_session, learner_id=learner_id,
                               question_id=question_id)
    if under_way is not None and 0 <= under_way.variant < count:
        return under_way.variant
    conn = db_session.connection()
    last = conn.execute(_LAST_VARIANT, params).scalar()
    answered = int(conn.execute(_ANSWERS, params).scalar() or 0)
    return pick_variant(learner_id=learner_id, question_id=question_id, count=count,
                        answered=answered, last=last)


# A warm-up (the first question of a newcomer's round) is one of these: answered with one
# click or a number, checked by Verify, and no harder than this.
WARM_UP_TYPES = ("single", "multi", "numeric", "trace")
WARM_UP_MAX_DIFFICULTY = 2
# It is drawn from this many of the shortest candidates, so that the question and its Submit
# fit one phone screen and two newcomers need not meet the same one.
WARM_UP_SHORTEST = 3


def _text_length(question: Question) -> float:
    """About how tall the question stands on a phone, in characters of prompt: a choice's text
    wraps in a narrower box than the prompt's, and each choice is a box of its own."""
    content = question.current_revision.content if question.current_revision is not None else {}
    choices = content.get("choices") or []
    return len(str(content.get("prompt", ""))) + sum(
        1.5 * len(str(c.get("text", ""))) + 60 for c in choices)


def warm_up(*, db_session: Session, learner_id: str, topics: list[str], groups: list[list[str]],
            pool: list[Question], rng: random.Random) -> Question | None:
    """The question a newcomer to these topics starts on: runnable (Verify runs its snippet),
    of difficulty 1 (else 2), among the shortest, from the round's core: the first of its
    `groups` of topics (in the bank's order) that has such a question. None for a learner who
    has answered any question of `topics` before, or when no question qualifies."""
    seen = db_session.scalar(
        select(Attempt.id).join(Question, Question.id == Attempt.question_id)
        .where(Attempt.learner_id == learner_id, Question.topic.in_(topics)).limit(1))
    if seen is not None:
        return None
    runnable = [q for q in pool if q.has_snippet and q.type in WARM_UP_TYPES
                and q.difficulty <= WARM_UP_MAX_DIFFICULTY]
    fits = next(([q for q in runnable if q.topic in group] for group in groups
                 if any(q.topic in group for q in runnable)), [])
    if not fits:
        return None
    easiest = min(q.difficulty for q in fits)
    shortest = sorted((q for q in fits if q.difficulty == easiest), key=_text_length)
    return rng.choice(shortest[:WARM_UP_SHORTEST])


def start_quiz(
    *,
    db_session: Session,
    learner_id: str,
    topics: list[str],
    difficulty: int | None,
    count: int,
    types: list[str] | None = None,
    rng: random.Random | None = None,
    only: set[int] | None = None,
    client_ip: str | None = None,
    groups: list[list[str]] | None = None,
) -> Quiz:
    """A new quiz of up to `count` random published questions (of these formats, if given;
    of these question ids, if `only`), pinned to their current revisions. From a request
    (`client_ip`) it counts against the learner's and the address's quizzes (RateLimited).
    With `groups` (a round's topics under their headings), a learner new to them starts on a
    warm-up."""
    ratelimit.spend(db_session=db_session, kind=ratelimit.QUIZZES, learner_id=learner_id,
                    client_ip=client_ip)
    ensure_learner(db_session=db_session, learner_id=learner_id)
    pool = list_published(db_session=db_session, topics=topics or None, difficulty=difficulty,
                          types=types or None)
    if only is not None:
        pool = [q for q in pool if q.id in only]
    # An exercise is answered by running code on its own page, not by a quiz's answer form;
    # the home page's sample question's run is public, so it is never graded work.
    pool = [q for q in pool if q.type != "exercise" and q.slug not in SAMPLE_SLUGS]
    if not pool:
        raise NoQuestions("No published question matches those topics, difficulty and formats.")
    rng = rng or random.Random()
    size = min(count, len(pool), MAX_QUIZ_QUESTIONS)
    first = (warm_up(db_session=db_session, learner_id=learner_id, topics=topics, groups=groups,
                     pool=pool, rng=rng) if groups else None)
    if first is None:
        picked = rng.sample(pool, size)
    else:
        picked = [first, *rng.sample([q for q in pool if q.id != first.id], size - 1)]
    quiz = Quiz(id=str(uuid.uuid4()), learner_id=learner_id, topics=topics, difficulty=difficulty)
    db_session.add(quiz)
    db_session.flush()
    for position, question in enumerate(picked, start=1):
        assert question.current_revision is not None
        db_session.add(QuizItem(quiz_id=quiz.id, position=position, question_id=question.id,
                                revision_id=question.current_revision.id,
                                variant=item_variant(db_session=db_session, learner_id=learner_id,
                                                     question_id=question.id,
                                                     revision=question.current_revision)))
    db_session.flush()
    return quiz


def item_variant(*, db_session: Session, learner_id: str, question_id: int,
                 revision: QuestionRevision) -> int:
    """The variant a new quiz (or mock interview) item pins: drawn as outside a quiz."""
    return drawn_variant(db_session=db_session, learner_id=learner_id, question_id=question_id,
                         count=revision_doc(revision).variant_count)


def get_quiz(*, db_session: Session, quiz_id: str, learner_id: str) -> Quiz | None:
    """The learner's own quiz; another learner's quiz does not exist for them, and neither
    does a mock interview (its answers go through practice/mock.py, which holds the deadline)."""
    quiz = db_session.get(Quiz, quiz_id)
    if quiz is None or quiz.learner_id != learner_id or quiz.kind == "mock":
        return None
    return quiz


def quiz_items(*, db_session: Session, quiz: Quiz) -> list[QuizItem]:
    """The quiz's items in order."""
    return list(
        db_session.scalars(
            select(QuizItem).where(QuizItem.quiz_id == quiz.id).order_by(QuizItem.position)
        )
    )


@dataclass
class ItemView:
    item: QuizItem
    question: Question
    revision: QuestionRevision
    doc: QuestionDoc  # the variant the item pins, rendered
    attempt: Attempt | None
    # A case's parts or a talk-through's text so far, while it is under way.
    partial: PartialAnswer | None = None


def item_learner(db_session: Session, item: QuizItem) -> str:
    """Whose quiz the item is in."""
    learner = db_session.scalar(select(Quiz.learner_id).where(Quiz.id == item.quiz_id))
    assert learner is not None
    return learner


def item_view(*, db_session: Session, item: QuizItem) -> ItemView:
    """A quiz item with the revision and variant it is pinned to and its attempt, if any."""
    question = db_session.get(Question, item.question_id)
    revision = db_session.get(QuestionRevision, item.revision_id)
    assert question is not None and revision is not None
    attempt = db_session.scalar(select(Attempt).where(Attempt.quiz_item_id == item.id))
    doc = revision_variant(revision=revision, variant=item.variant)
    partial = None
    if attempt is None and (doc.is_case or doc.is_talk):
        partial = partial_answer(db_session=db_session, learner_id=item_learner(db_session, item),
                                 question_id=item.question_id, variant=item.variant)
    return ItemView(item, question, revision, doc, attempt, partial)


def mark_shown(*, item: QuizItem) -> None:
    """Start the item's clock the first time it is shown."""
    if item.shown_at is None:
        item.shown_at = utcnow()


def _elapsed_ms(since: datetime | None, now: datetime | None = None) -> int | None:
    if since is None:
        return None
    return max(0, int(((now or utcnow()) - since).total_seconds() * 1000))


def clean_confidence(value: object) -> str | None:
    """A confidence level, or None for anything else (the control is optional)."""
    return value if isinstance(value, str) and value in CONFIDENCE_LEVELS else None


# Every answer inserts one attempt: a prebuilt Core statement, like review.py's, since the
# ORM's flush of one new row costs several times the insert itself.
_INSERT_ATTEMPT = insert(Attempt).returning(Attempt.id)
_ATTEMPT_COLUMNS = tuple(c.key for c in Attempt.__table__.columns if c.key != "id")
# Columns with a default: left unset on the attempt they take it, as an ORM flush would
# (an explicit None in a Core insert would not).
_DEFAULTED = frozenset(c.key for c in Attempt.__table__.columns if c.default is not None)


def _store_attempt(db_session: Session, attempt: Attempt) -> None:
    """Insert the (transient) attempt and give it its id."""
    values = {key: value for key in _ATTEMPT_COLUMNS
              if (value := getattr(attempt, key)) is not None or key not in _DEFAULTED}
    attempt.id = db_session.connection().execute(_INSERT_ATTEMPT, values).scalar_one()


def _insert_attempt(db_session: Session, attempt: Attempt) -> None:
    with db_session.begin_nested():
        _store_attempt(db_session, attempt)


def _insert_tokened(db_session: Session, attempt: Attempt) -> Attempt | None:
    """Insert an attempt that carries a replay token; if a concurrent request stored the
    same token first, that request's attempt (and this one is not stored)."""
    try:
        _insert_attempt(db_session, attempt)
    except IntegrityError:
        winner = db_session.scalar(select(Attempt).where(Attempt.token == attempt.token))
        if winner is None:
            raise
        return winner
    return None


def answer_item(
    *, db_session: Session, learner_id: str, item: QuizItem, raw_answer: Any,
    confidence: str | None = None, now: datetime | None = None, client_ip: str | None = None,
) -> tuple[Attempt, Grade]:
    """Grade and store the first answer to a quiz item and schedule its review card; a later
    answer raises AlreadyAnswered. `now` is the clock's time (app/clock.py)."""
    now = now or utcnow()
    ratelimit.spend(db_session=db_session, kind=ratelimit.ANSWERS, learner_id=learner_id,
                    client_ip=client_ip)
    # The rule first: an item answered before shows nothing of its grade while its question
    # is in the learner's live mock interview (not even as "already answered").
    reveal.guard_answer(db_session=db_session, learner_id=learner_id,
                        question_id=item.question_id, quiz_id=item.quiz_id, now=now)
    existing = db_session.scalar(select(Attempt).where(Attempt.quiz_item_id == item.id))
    if existing is not None:
        raise AlreadyAnswered(existing)
    revision = db_session.get(QuestionRevision, item.revision_id)
    assert revision is not None
    doc = revision_variant(revision=revision, variant=item.variant)
    if doc.is_case or doc.is_talk:
        raise InvalidAnswer(_IN_STEPS)
    result = grade(doc, raw_answer)
    attempt = Attempt(
        learner_id=learner_id, question_id=item.question_id, revision_id=item.revision_id,
        variant=item.variant,
        quiz_item_id=item.id, answer=result.answer, score=result.score, correct=result.correct,
        time_taken_ms=_elapsed_ms(item.shown_at), confidence=clean_confidence(confidence),
        created_at=now,
    )
    try:
        _insert_attempt(db_session, attempt)
    except IntegrityError:
        # A concurrent double submit won the race; its answer is the one that counts.
        winner = db_session.scalar(select(Attempt).where(Attempt.quiz_item_id == item.id))
        assert winner is not None
        raise AlreadyAnswered(winner) from None
    review.record_review(db_session=db_session, attempt=attempt, confidence=attempt.confidence,
                         now=now)
    return attempt, result


def replay_key(*, learner_id: str, question_id: int, token: str) -> str:
    """What an attempt stores for a form token or Idempotency-Key.

    Scoped to the learner and the question: an API client's key "1" must not
    collide with another learner's "1", nor return an attempt at another question.
    """
    return hashlib.sha256(f"{learner_id}\0{question_id}\0{token}".encode()).hexdigest()


_IN_STEPS = "a case is answered part by part, and a talk-through in two steps (text, then ticks)"


def _guard_drawn(db_session: Session, learner_id: str, question: PublishedQuestion,
                 variant: int) -> None:
    """A standalone answer (the question page, Review, the API) is refused for another variant
    than the one drawn. (Its callers have refused a question of a live mock interview first,
    before a replay could bring a grade back.)"""
    reveal.guard_variant(drawn=drawn_variant(db_session=db_session, learner_id=learner_id,
                                             question_id=question.id,
                                             count=question.doc.variant_count), sent=variant)


def answer_question(
    *,
    db_session: Session,
    learner_id: str,
    question: PublishedQuestion,
    raw_answer: Any,
    token: str | None,
    time_taken_ms: int | None = None,
    confidence: str | None = None,
    now: datetime | None = None,
    variant: int = 0,
    client_ip: str | None = None,
) -> tuple[Attempt, Grade]:
    """Grade and store a standalone attempt at one variant and schedule its review card;
    replaying the same token returns the first one. `now` is the clock's time (app/clock.py).
    A case or talk-through is answered in steps instead (answer_step)."""
    if question.doc.is_exercise:
        # Before any replay lookup: an exercise's attempts are stored by record_exercise_pass.
        raise InvalidAnswer("an exercise is answered by running your code on its page")
    ratelimit.spend(db_session=db_session, kind=ratelimit.ANSWERS, learner_id=learner_id,
                    client_ip=client_ip)
    doc = question.variant(check_variant(question.doc, variant))
    if doc.is_case or doc.is_talk:
        raise InvalidAnswer(_IN_STEPS)
    ensure_learner(db_session=db_session, learner_id=learner_id)
    now = now or utcnow()
    # The live mock first: a replayed submission must not bring its grade back either.
    reveal.guard_answer(db_session=db_session, learner_id=learner_id, question_id=question.id,
                        now=now)
    if token:
        token = replay_key(learner_id=learner_id, question_id=question.id, token=token)
        existing = db_session.scalar(select(Attempt).where(Attempt.token == token))
        if existing is not None:
            raise AlreadyAnswered(existing)
    _guard_drawn(db_session, learner_id, question, variant)
    result = grade(doc, raw_answer)
    attempt = Attempt(
        learner_id=learner_id, question_id=question.id, revision_id=question.revision_id,
        variant=variant,
        token=token, answer=result.answer, score=result.score, correct=result.correct,
        time_taken_ms=time_taken_ms, confidence=clean_confidence(confidence),
        created_at=now,
    )
    if token is None:
        # Nothing unique to collide with, so no savepoint (two statements fewer).
        _store_attempt(db_session, attempt)
    elif (winner := _insert_tokened(db_session, attempt)) is not None:
        raise AlreadyAnswered(winner)
    review.record_review(db_session=db_session, attempt=attempt, confidence=attempt.confidence,
                         now=now)
    return attempt, result


# Answers in steps: cases and talk-throughs -------------------------------------------------


def _slot(quiz_item_id: int | None) -> str:
    return SLOT_STANDALONE if quiz_item_id is None else f"item:{quiz_item_id}"


def partial_answer(*, db_session: Session, learner_id: str, question_id: int,
                   variant: int | None = None, for_update: bool = False) -> PartialAnswer | None:
    """The learner's unfinished case or talk-through of this question, wherever it was begun (a
    quiz, a mock interview, the question page): one record per learner, question and part, so a
    part answered anywhere is answered everywhere and is never answered afresh in another
    slot. With `variant`, only one of that variant."""
    stmt = (select(PartialAnswer).where(PartialAnswer.learner_id == learner_id,
                                        PartialAnswer.question_id == question_id)
            .order_by(PartialAnswer.updated_at.desc(), PartialAnswer.id.desc()).limit(1))
    if variant is not None:
        stmt = stmt.where(PartialAnswer.variant == variant)
    if for_update:
        # Two tabs sending the next part at once: the second waits, then sees it answered.
        stmt = stmt.with_for_update()
    return db_session.scalar(stmt)


@dataclass
class Stepped:
    """A case or talk-through after one step: where it stands, and once the last step came,
    the attempt it became."""

    revision_id: int
    variant: int
    doc: QuestionDoc  # the variant answered, rendered
    # {"parts": [...]} (a case's parts answered so far) or {"text": ...} (a talk-through's text)
    state: dict[str, Any]
    started_at: datetime
    part: int | None = None  # the part this step answered
    part_grade: Grade | None = None
    attempt: Attempt | None = None
    grade: Grade | None = None

    @property
    def complete(self) -> bool:
        return self.attempt is not None


def _take_step(
    db_session: Session, *, learner_id: str, question_id: int, revision_id: int, variant: int,
    quiz_item_id: int | None, part: int | None, raw: Any, now: datetime,
) -> tuple[Stepped, Any | None]:
    """Apply one step to the learner's partial answer; (where it stands, the whole answer when
    this step completed it). Raises OutOfTurn or InvalidAnswer, storing nothing."""
    row = partial_answer(db_session=db_session, learner_id=learner_id, question_id=question_id,
                         for_update=True)
    if row is not None:
        if row.variant != variant:
            raise OutOfTurn(f"this question is under way with variant {row.variant}"
                            f"{'' if row.slot == _slot(quiz_item_id) else ' elsewhere'}; answer "
                            "that one to the end first")
        # Pinned by the first step: a question edited meanwhile does not change under the learner.
        revision_id = row.revision_id
    revision = db_session.get(QuestionRevision, revision_id)
    assert revision is not None
    doc = revision_variant(revision=revision, variant=variant)
    state: dict[str, Any] = dict(row.state) if row is not None else {}
    stepped = Stepped(revision_id, variant, doc, state, row.created_at if row else now)
    whole: Any | None = None
    if doc.is_case:
        done = list(state.get("parts", []))
        if part is None:
            raise InvalidAnswer(f"say which part this answers (the next is part {len(done)})")
        if part < len(done):
            raise OutOfTurn(f"part {part + 1} is answered already; the first answer counts")
        if part > len(done) or part >= len(doc.parts):
            if part >= len(doc.parts):
                raise InvalidAnswer(f"this case has parts 0 to {len(doc.parts) - 1}")
            raise OutOfTurn(f"answer part {len(done) + 1} first: the parts come in order")
        stepped.part, stepped.part_grade = part, grade_part(doc, part, raw, done)
        done.append(stepped.part_grade.answer)
        stepped.state = {"parts": done}
        if len(done) == len(doc.parts):
            whole = {"parts": done}
    elif doc.is_talk:
        if part is not None:
            raise InvalidAnswer("a talk-through has no parts")
        if not isinstance(raw, dict):
            raise InvalidAnswer('a talk-through is answered with {"text": ...}, then {"ticked": [...]}')
        if "text" in state:
            if "text" in raw:
                raise OutOfTurn("your answer is written already; now tick the moves you made")
            whole = normalise_answer(doc, {"text": state["text"], "ticked": raw.get("ticked", [])})
        else:
            if "ticked" in raw:
                raise OutOfTurn("write your answer first: the model answer and its rubric come after")
            text = normalise_answer(doc, {"text": raw.get("text", "")})["text"]
            if not real_talk(text):
                raise InvalidAnswer(TALK_TOO_SHORT, loc=("answer", "text"))
            stepped.state = {"text": text}
    else:
        raise InvalidAnswer("only a case or a talk-through is answered in steps")
    if whole is not None:
        if row is not None:
            db_session.delete(row)
            db_session.flush()
        return stepped, whole
    if row is None:
        row = PartialAnswer(learner_id=learner_id, question_id=question_id, revision_id=revision_id,
                            variant=variant, slot=_slot(quiz_item_id), quiz_item_id=quiz_item_id,
                            state=stepped.state, created_at=now, updated_at=now)
        try:
            with db_session.begin_nested():
                db_session.add(row)
                db_session.flush()
        except IntegrityError:
            raise OutOfTurn("this step was just taken in another tab; reload to carry on") from None
    else:
        row.state, row.updated_at = stepped.state, now
        db_session.flush()
    return stepped, None


def answer_step(
    *, db_session: Session, learner_id: str, question: PublishedQuestion, variant: int,
    part: int | None, raw: Any, token: str | None, confidence: str | None = None,
    now: datetime | None = None, client_ip: str | None = None,
) -> Stepped:
    """One step of a standalone case (a part) or talk-through (the text, then the ticks); the
    last step stores the attempt and schedules its review card. Raises OutOfTurn (409),
    InvalidAnswer (422), NoSuchVariant (422) or, for a replayed last step, AlreadyAnswered."""
    now = now or utcnow()
    check_variant(question.doc, variant)
    ratelimit.spend(db_session=db_session, kind=ratelimit.ANSWERS, learner_id=learner_id,
                    client_ip=client_ip)
    ensure_learner(db_session=db_session, learner_id=learner_id)
    reveal.guard_answer(db_session=db_session, learner_id=learner_id, question_id=question.id,
                        now=now)
    if token:
        token = replay_key(learner_id=learner_id, question_id=question.id, token=token)
        existing = db_session.scalar(select(Attempt).where(Attempt.token == token))
        if existing is not None:
            raise AlreadyAnswered(existing)
    _guard_drawn(db_session, learner_id, question, variant)
    stepped, whole = _take_step(db_session, learner_id=learner_id, question_id=question.id,
                                revision_id=question.revision_id, variant=variant,
                                quiz_item_id=None, part=part, raw=raw, now=now)
    if whole is None:
        return stepped
    result = grade(stepped.doc, whole)
    attempt = Attempt(
        learner_id=learner_id, question_id=question.id, revision_id=stepped.revision_id,
        variant=variant, token=token, answer=result.answer, score=result.score,
        correct=result.correct, time_taken_ms=_elapsed_ms(stepped.started_at, now),
        confidence=clean_confidence(confidence), created_at=now)
    if token is None:
        _store_attempt(db_session, attempt)
    elif (winner := _insert_tokened(db_session, attempt)) is not None:
        raise AlreadyAnswered(winner)
    review.record_review(db_session=db_session, attempt=attempt, confidence=attempt.confidence,
                         now=now)
    stepped.attempt, stepped.grade = attempt, result
    return stepped


def answer_item_step(
    *, db_session: Session, learner_id: str, item: QuizItem, part: int | None, raw: Any,
    confidence: str | None = None, now: datetime | None = None, schedule: bool = True,
    time_taken_ms: int | None = None, client_ip: str | None = None,
) -> Stepped:
    """One step of a quiz item's case or talk-through, on the revision and variant the item
    pins; the last stores the item's attempt (and, unless `schedule` is False, as in a mock
    interview, its review card). Raises AlreadyAnswered once the item has its attempt."""
    now = now or utcnow()
    ratelimit.spend(db_session=db_session, kind=ratelimit.ANSWERS, learner_id=learner_id,
                    client_ip=client_ip)
    reveal.guard_answer(db_session=db_session, learner_id=learner_id,
                        question_id=item.question_id, quiz_id=item.quiz_id, now=now)
    existing = db_session.scalar(select(Attempt).where(Attempt.quiz_item_id == item.id))
    if existing is not None:
        raise AlreadyAnswered(existing)
    stepped, whole = _take_step(db_session, learner_id=learner_id, question_id=item.question_id,
                                revision_id=item.revision_id, variant=item.variant,
                                quiz_item_id=item.id, part=part, raw=raw, now=now)
    if whole is None:
        return stepped
    result = grade(stepped.doc, whole)
    attempt = Attempt(
        learner_id=learner_id, question_id=item.question_id, revision_id=item.revision_id,
        variant=item.variant, quiz_item_id=item.id, answer=result.answer, score=result.score,
        correct=result.correct,
        time_taken_ms=time_taken_ms if time_taken_ms is not None else _elapsed_ms(item.shown_at),
        confidence=clean_confidence(confidence), created_at=now)
    try:
        _insert_attempt(db_session, attempt)
    except IntegrityError:
        winner = db_session.scalar(select(Attempt).where(Attempt.quiz_item_id == item.id))
        assert winner is not None
        raise AlreadyAnswered(winner) from None
    if schedule:
        review.record_review(db_session=db_session, attempt=attempt,
                             confidence=attempt.confidence, now=now)
    stepped.attempt, stepped.grade = attempt, result
    return stepped


def record_exercise_pass(
    *, db_session: Session, learner_id: str, question_id: int, revision_id: int, code: str,
    token: str,
) -> Attempt:
    """Store a passing exercise submission as a correct attempt with its code.

    `token` names the submission (its runs), so showing the same passing result
    again finds the first attempt instead of storing a second.
    """
    ensure_learner(db_session=db_session, learner_id=learner_id)
    key = replay_key(learner_id=learner_id, question_id=question_id, token=token)
    existing = db_session.scalar(select(Attempt).where(Attempt.token == key))
    if existing is not None:
        return existing
    now = utcnow()
    # An exercise has no variables: its one variant is 0.
    attempt = Attempt(learner_id=learner_id, question_id=question_id, revision_id=revision_id,
                      variant=0, token=key, answer={"code": code}, score=1.0, correct=True,
                      time_taken_ms=None, created_at=now)
    if (winner := _insert_tokened(db_session, attempt)) is not None:
        return winner
    # Like any answer, a solved exercise schedules its review card.
    review.record_review(db_session=db_session, attempt=attempt, confidence=None, now=now)
    return attempt


def record_exercise_give_up(
    *, db_session: Session, learner_id: str, question_id: int, revision_id: int, code: str,
    token: str,
) -> Attempt:
    """Store "I give up" on an exercise as a failed attempt (its card comes back soon)."""
    ensure_learner(db_session=db_session, learner_id=learner_id)
    now = utcnow()
    attempt = Attempt(learner_id=learner_id, question_id=question_id, revision_id=revision_id,
                      token=replay_key(learner_id=learner_id, question_id=question_id, token=token),
                      answer={"code": code, "gave_up": True}, score=0.0, correct=False,
                      time_taken_ms=None, created_at=now)
    if (winner := _insert_tokened(db_session, attempt)) is not None:
        return winner
    review.record_review(db_session=db_session, attempt=attempt, confidence=None, now=now)
    return attempt


def next_unanswered(*, db_session: Session, quiz: Quiz) -> QuizItem | None:
    """The first item of the quiz without an attempt."""
    answered = select(Attempt.quiz_item_id).where(Attempt.quiz_item_id.is_not(None))
    return db_session.scalar(
        select(QuizItem)
        .where(QuizItem.quiz_id == quiz.id, QuizItem.id.not_in(answered))
        .order_by(QuizItem.position)
    )


@dataclass
class TopicScore:
    topic: str
    answered: int
    total: int
    score: float
    title: str = ""


@dataclass
class QuizSummary:
    quiz: Quiz
    items: list[ItemView]
    score: float
    total: int
    per_topic: list[TopicScore]
    elapsed_ms: int


def quiz_summary(*, db_session: Session, quiz: Quiz) -> QuizSummary:
    """Score, per-topic breakdown and time taken; finishing the quiz if every item is answered."""
    views = [item_view(db_session=db_session, item=i) for i in quiz_items(db_session=db_session, quiz=quiz)]
    per: dict[str, TopicScore] = {}
    for v in views:
        ts = per.setdefault(v.doc.topic, TopicScore(v.doc.topic, 0, 0, 0.0))
        ts.total += 1
        if v.attempt is not None:
            ts.answered += 1
            ts.score += v.attempt.score
    if quiz.finished_at is None and views and all(v.attempt for v in views):
        quiz.finished_at = max(v.attempt.created_at for v in views if v.attempt)
    titles = {slug: title for slug, title in
              db_session.execute(select(Topic.slug, Topic.title).where(Topic.slug.in_(per)))}
    for ts in per.values():
        ts.title = titles.get(ts.topic, ts.topic)
    end = quiz.finished_at or utcnow()
    return QuizSummary(
        quiz=quiz, items=views, score=sum(t.score for t in per.values()), total=len(views),
        per_topic=sorted(per.values(), key=lambda t: t.topic),
        elapsed_ms=int((end - quiz.started_at).total_seconds() * 1000),
    )


def retry_misses(*, db_session: Session, quiz: Quiz, client_ip: str | None = None) -> Quiz:
    """A new quiz of the questions this quiz's learner missed in it (wrong, partly right or
    unanswered) that are still published; NoQuestions if there are none."""
    views = [item_view(db_session=db_session, item=i) for i in quiz_items(db_session=db_session, quiz=quiz)]
    missed = {v.question.id for v in views if v.attempt is None or not v.attempt.correct}
    if not missed:
        raise NoQuestions("Nothing was missed in this quiz.")
    return start_quiz(db_session=db_session, learner_id=quiz.learner_id, topics=[],
                      difficulty=None, count=len(missed), only=missed, client_ip=client_ip)


def is_pinned(*, db_session: Session, learner_id: str, revision_id: int) -> bool:
    """True when one of this learner's quizzes is pinned to the revision."""
    return db_session.scalar(
        select(QuizItem.id).join(Quiz, Quiz.id == QuizItem.quiz_id)
        .where(Quiz.learner_id == learner_id, QuizItem.revision_id == revision_id).limit(1)
    ) is not None
