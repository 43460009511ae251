"""Mock interviews: a timed set of questions chosen to cover the topics, weighted toward the
learner's weakest, answered without feedback, ending in a report.

The deadline lives on the server (MockInterview.deadline): an answer that arrives after it
raises TimeUp and is not stored, so neither a page left open nor an edited form can buy time.
Cards are scheduled when the interview finishes, not as each answer arrives: a miss must
not show up in the header's due count (feedback) before the end.

Every function that depends on the time takes `now` from the one clock (app/clock.py).
"""

from __future__ import annotations

import random
import secrets
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, lazyload

from app import ratelimit, reveal
from app.accounts.service import ensure_learner
from app.errors import Conflict
from app.mock.models import MockInterview
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision, Topic
from app.questions.schema import QuestionDoc
from app.questions.service import SAMPLE_SLUGS, revision_variant
from app.quizzes.grading import Grade, InvalidAnswer, correct_answer, grade
from app.quizzes.models import Attempt, Quiz, QuizItem
from app.quizzes.service import (
    AlreadyAnswered,
    NoQuestions,
    Stepped,
    answer_item_step,
    clean_confidence,
    item_variant,
)
from app.review import service as review
from app.review.mastery import mastery_by_topic

# A real first-round technical screen is 20-45 minutes; shorter than 10 is not an interview.
DEFAULT_MINUTES = 25
MIN_MINUTES = 10
MAX_MINUTES = 45
# About ten questions fit 25 minutes at the bank's pace (2-3 minutes each).
QUESTION_COUNT = 10
# Every topic keeps this much weight, so a strong topic is still asked now and then.
BASE_WEIGHT = 0.15
KIND_MOCK = "mock"


class TimeUp(Conflict):
    """The interview's deadline has passed (or it was finished): the answer does not count."""


def _pick(pool: list[Question], weakness: dict[str, float], count: int,
          rng: random.Random) -> list[Question]:
    """Up to `count` questions: one trace-reading and one with a snippet ("predict, then run")
    first, then one per topic (weakest first), then more from topics drawn by weakness; within
    a topic the difficulty used least so far, so the set mixes easy and hard."""
    picked: list[Question] = []
    used_difficulty: dict[int, int] = defaultdict(int)
    by_topic: dict[str, list[Question]] = defaultdict(list)
    for q in pool:
        by_topic[q.topic].append(q)
    for qs in by_topic.values():
        rng.shuffle(qs)

    def take(q: Question) -> None:
        picked.append(q)
        used_difficulty[q.difficulty] += 1
        by_topic[q.topic].remove(q)

    def from_topic(topic: str, pred: Any = None) -> Question | None:
        options = [q for q in by_topic[topic] if pred is None or pred(q)]
        if not options:
            return None
        return min(options, key=lambda q: used_difficulty[q.difficulty])

    def weakest_with(pred: Any) -> None:
        for topic in sorted(by_topic, key=lambda t: -weakness.get(t, 1.0)):
            found = from_topic(topic, pred)
            if found is not None and len(picked) < count:
                take(found)
                return

    if not any(q.type == "trace" for q in picked):
        weakest_with(lambda q: q.type == "trace")
    if not any(q.has_snippet for q in picked):
        weakest_with(lambda q: q.has_snippet)
    for topic in sorted(by_topic, key=lambda t: -weakness.get(t, 1.0)):
        if len(picked) >= count:
            break
        if not any(q.topic == topic for q in picked):
            first = from_topic(topic)
            if first is not None:
                take(first)
    while len(picked) < count:
        topics = [t for t, qs in by_topic.items() if qs]
        if not topics:
            break
        topic = rng.choices(topics, weights=[BASE_WEIGHT + weakness.get(t, 1.0) for t in topics])[0]
        more = from_topic(topic)
        assert more is not None
        take(more)
    return picked


def topic_weakness(*, db_session: Session, learner_id: str, now: datetime) -> dict[str, float]:
    """Per topic, 1 minus its mastery now (the dashboard's number: an unseen question counts
    0, so an untried topic is as weak as it gets)."""
    mastery = mastery_by_topic(db_session=db_session, learner_id=learner_id, now=now)
    return {t: 1.0 - m for t, m in mastery.items()}


def start(*, db_session: Session, learner_id: str, minutes: int, now: datetime,
          count: int = QUESTION_COUNT, rng: random.Random | None = None,
          client_ip: str | None = None) -> MockInterview:
    """A new mock interview of about `count` questions with a deadline `minutes` from `now`;
    from a request (`client_ip`) it counts against the learner's and the address's mock
    interviews (RateLimited)."""
    if not MIN_MINUTES <= minutes <= MAX_MINUTES:
        raise ValueError(f"minutes must be between {MIN_MINUTES} and {MAX_MINUTES}")
    ratelimit.spend(db_session=db_session, kind=ratelimit.MOCKS, learner_id=learner_id,
                    client_ip=client_ip)
    ensure_learner(db_session=db_session, learner_id=learner_id)
    # The pick needs each question's topic, type and difficulty, not its revision's content.
    pool = list(db_session.scalars(select(Question).options(lazyload(Question.current_revision))
                                   .where(Question.status == STATUS_PUBLISHED,
                                          Question.current_revision_id.is_not(None),
                                          # An exercise is answered by running code on its
                                          # own page, never in an interview's answer form.
                                          Question.type != "exercise",
                                          # The home page's sample run is public.
                                          Question.slug.not_in(SAMPLE_SLUGS))
                                   .order_by(Question.id)))
    if not pool:
        raise NoQuestions("There is no published question to ask yet.")
    weakness = topic_weakness(db_session=db_session, learner_id=learner_id, now=now)
    picked = _pick(pool, weakness, count, rng or random.Random())
    quiz = Quiz(id=str(uuid.uuid4()), learner_id=learner_id, kind=KIND_MOCK,
                topics=sorted({q.topic for q in picked}), difficulty=None, started_at=now)
    db_session.add(quiz)
    db_session.flush()
    revisions = {r.id: r for r in db_session.scalars(
        select(QuestionRevision).where(QuestionRevision.id.in_(
            [q.current_revision_id for q in picked])))}
    for position, q in enumerate(picked, start=1):
        assert q.current_revision_id is not None
        # The interview asks its own draw of each question's variants, pinned now.
        db_session.add(QuizItem(quiz_id=quiz.id, position=position, question_id=q.id,
                                revision_id=q.current_revision_id,
                                variant=item_variant(db_session=db_session, learner_id=learner_id,
                                                     question_id=q.id,
                                                     revision=revisions[q.current_revision_id])))
    mock = MockInterview(quiz_id=quiz.id, learner_id=learner_id, minutes=minutes, started_at=now,
                         deadline=now + timedelta(minutes=minutes))
    db_session.add(mock)
    db_session.flush()
    return mock


def get_mock(*, db_session: Session, mock_id: str, learner_id: str) -> MockInterview | None:
    """The learner's own mock interview; another learner's does not exist for them."""
    mock = db_session.get(MockInterview, mock_id)
    if mock is None or mock.learner_id != learner_id:
        return None
    return mock


def get_shared(*, db_session: Session, token: str) -> MockInterview | None:
    """The mock interview whose live share link carries `token`; a revoked one is None."""
    if not token or len(token) > 64:
        return None
    return db_session.scalar(select(MockInterview).where(MockInterview.share_token == token))


def share(*, db_session: Session, mock: MockInterview) -> str:
    """A new unguessable share token for the report (replacing any earlier link)."""
    mock.share_token = secrets.token_urlsafe(24)
    db_session.flush()
    return mock.share_token


def revoke_share(*, db_session: Session, mock: MockInterview) -> None:
    """Revoke the report's share link: the old URL becomes a 404."""
    mock.share_token = None
    db_session.flush()


def items(*, db_session: Session, mock: MockInterview) -> list[QuizItem]:
    """The interview's questions in order."""
    return list(db_session.scalars(select(QuizItem).where(QuizItem.quiz_id == mock.quiz_id)
                                   .order_by(QuizItem.position)))


def is_over(mock: MockInterview, now: datetime) -> bool:
    """True once the interview is finished or its deadline has passed."""
    return mock.finished_at is not None or now >= mock.deadline


def answered_item_ids(*, db_session: Session, mock: MockInterview) -> set[int]:
    """Ids of the interview's items that have an answer."""
    return set(db_session.scalars(
        select(Attempt.quiz_item_id).join(QuizItem, QuizItem.id == Attempt.quiz_item_id)
        .where(QuizItem.quiz_id == mock.quiz_id)))


def show(*, item: QuizItem, now: datetime) -> None:
    """Start the question's clock the first time it is shown."""
    if item.shown_at is None:
        item.shown_at = now


def answer(*, db_session: Session, mock: MockInterview, item: QuizItem, raw_answer: Any,
           confidence: str | None, now: datetime,
           client_ip: str | None = None) -> tuple[Attempt, Grade]:
    """Grade and store the answer to one of the interview's questions, without scheduling a
    review yet. Raises TimeUp past the deadline (nothing is stored), AlreadyAnswered for a
    second answer, grading.InvalidAnswer for a malformed one."""
    if is_over(mock, now):
        raise TimeUp("The interview is over: this answer came after its deadline.")
    if item.quiz_id != mock.quiz_id:
        raise ValueError("item of another interview")
    ratelimit.spend(db_session=db_session, kind=ratelimit.ANSWERS, learner_id=mock.learner_id,
                    client_ip=client_ip)
    # No look for an earlier answer first: the unique quiz_item_id finds it (below), which
    # saves every answer a round trip to the database.
    revision = db_session.get(QuestionRevision, item.revision_id)
    assert revision is not None
    doc = revision_variant(revision=revision, variant=item.variant)
    if doc.is_case or doc.is_talk:
        raise InvalidAnswer("a case is answered part by part, a talk-through in two steps")
    result = grade(doc, raw_answer)
    shown = item.shown_at or now
    attempt = Attempt(learner_id=mock.learner_id, question_id=item.question_id,
                      revision_id=item.revision_id, variant=item.variant,
                      quiz_item_id=item.id, answer=result.answer,
                      score=result.score, correct=result.correct,
                      time_taken_ms=max(0, int((now - shown).total_seconds() * 1000)),
                      confidence=clean_confidence(confidence), created_at=now)
    try:
        with db_session.begin_nested():
            db_session.add(attempt)
            db_session.flush()
    except IntegrityError:
        winner = db_session.scalar(select(Attempt).where(Attempt.quiz_item_id == item.id))
        assert winner is not None
        raise AlreadyAnswered(winner) from None
    return attempt, result


def answer_step(*, db_session: Session, mock: MockInterview, item: QuizItem, part: int | None,
                raw_answer: Any, confidence: str | None, now: datetime,
                client_ip: str | None = None) -> Stepped:
    """One step of a case or talk-through in the interview (a part; the text, then the ticks),
    on the variant the item pins. The last step stores the item's one attempt; like every
    answer here it gets no review card until the interview finishes. Raises TimeUp past the
    deadline, AlreadyAnswered, quizzes.service.OutOfTurn or grading.InvalidAnswer."""
    if is_over(mock, now):
        raise TimeUp("The interview is over: this answer came after its deadline.")
    if item.quiz_id != mock.quiz_id:
        raise ValueError("item of another interview")
    shown = item.shown_at or now
    return answer_item_step(db_session=db_session, learner_id=mock.learner_id, item=item,
                            part=part, raw=raw_answer, confidence=clean_confidence(confidence),
                            now=now, schedule=False,
                            time_taken_ms=max(0, int((now - shown).total_seconds() * 1000)),
                            client_ip=client_ip)


def finish(*, db_session: Session, mock: MockInterview, now: datetime) -> bool:
    """End the interview (at `now`, or at its deadline if that came first) and schedule every
    answered question's review card, so the misses join the review queue. Idempotent: returns
    False when the interview was already finished."""
    if mock.finished_at is not None:
        return False
    # fsrs insists on UTC; PostgreSQL hands times back in the session's zone.
    end = min(now, mock.deadline).astimezone(UTC)
    mock.finished_at = end
    quiz = db_session.get(Quiz, mock.quiz_id)
    assert quiz is not None
    quiz.finished_at = end
    attempts = db_session.scalars(
        select(Attempt).join(QuizItem, QuizItem.id == Attempt.quiz_item_id)
        .where(QuizItem.quiz_id == mock.quiz_id).order_by(QuizItem.position))
    for a in attempts:
        review.record_review(db_session=db_session, attempt=a, confidence=a.confidence, now=end)
    db_session.flush()
    return True


def finish_if_over(*, db_session: Session, mock: MockInterview, now: datetime) -> None:
    """Finish the interview if its deadline has passed (any visit after the deadline)."""
    if mock.finished_at is None and now >= mock.deadline:
        finish(db_session=db_session, mock=mock, now=now)


# The report --------------------------------------------------------------------------------


@dataclass
class ReportItem:
    position: int
    question: Question
    doc: QuestionDoc  # the variant asked, rendered
    revision_id: int
    attempt: Attempt | None
    key: Any
    variant: int = 0
    # By the one rule (app/reveal.py), for the visitor reading the report: whether the key,
    # the explanation and the answer's grade may be shown, and if not, why.
    shown: bool = True
    note: str | None = None

    @property
    def missed(self) -> bool:
        return self.attempt is None or not self.attempt.correct


@dataclass
class TopicResult:
    topic: str
    title: str
    asked: int = 0
    score: float = 0.0


@dataclass
class Calibration:
    """How well the learner's confidence matched their results."""

    counts: dict[str, int] = field(default_factory=dict)
    right: dict[str, int] = field(default_factory=dict)

    def rate(self, level: str) -> float | None:
        """Fraction right among answers marked `level`, None if there were none."""
        n = self.counts.get(level, 0)
        return self.right.get(level, 0) / n if n else None

    @property
    def sure_right(self) -> float | None:
        """How often "sure" was right."""
        return self.rate("sure")

    @property
    def guessing_wrong(self) -> float | None:
        """How often "guessing" was wrong."""
        r = self.rate("guessing")
        return None if r is None else 1.0 - r

    def verdict(self) -> tuple[str, str]:
        """(kind, sentence) read from these answers: "over" (sure but often wrong), "under"
        (unsure or guessing but mostly right), "good", or "unknown" (too few answers)."""
        sure_n, sure_ok = self.counts.get("sure", 0), self.right.get("sure", 0)
        doubt_n = self.counts.get("unsure", 0) + self.counts.get("guessing", 0)
        doubt_ok = self.right.get("unsure", 0) + self.right.get("guessing", 0)
        if sure_n + doubt_n < MIN_CALIBRATION_ANSWERS:
            return ("unknown", "Too few answers with a confidence to say how well it matched: "
                               "pick one next time (it also shapes when each question comes back).")
        sure = f'"sure" was right {sure_ok / sure_n:.0%} of the time ({sure_ok} of {sure_n})' \
            if sure_n else 'you never said "sure"'
        doubt = (f"when unsure or guessing you were right {doubt_ok / doubt_n:.0%} of the time "
                 f"({doubt_ok} of {doubt_n})") if doubt_n else "you never doubted an answer"
        if sure_n and sure_ok / sure_n < SURE_ENOUGH:
            return ("over", f"Overconfident: {sure}. Before saying sure in an interview, check "
                            "the answer against what a run would measure.")
        if doubt_n >= 2 and doubt_ok / doubt_n >= DOUBT_TOO_RIGHT:
            return ("under", f"Underconfident: {doubt}. You know more than you think: say so.")
        return ("good", f"Well calibrated: {sure}, and {doubt}.")


# Fewer answers with a confidence than this say nothing about calibration.
MIN_CALIBRATION_ANSWERS = 3
# "Sure" should be right at least this often; less is overconfidence.
SURE_ENOUGH = 0.8
# Doubtful answers right at least this often are underconfidence.
DOUBT_TOO_RIGHT = 0.75


def calibration(attempts: list[Attempt]) -> Calibration:
    """Per confidence level: answers given and answers right (answers with no level are left out)."""
    cal = Calibration()
    for a in attempts:
        if a.confidence is None:
            continue
        cal.counts[a.confidence] = cal.counts.get(a.confidence, 0) + 1
        cal.right[a.confidence] = cal.right.get(a.confidence, 0) + (1 if a.correct else 0)
    return cal


@dataclass
class MockReport:
    mock: MockInterview
    items: list[ReportItem]
    score: float
    total: int
    answered: int
    per_topic: list[TopicResult]
    calibration: Calibration
    elapsed_ms: int

    @property
    def misses(self) -> list[ReportItem]:
        return [i for i in self.items if i.missed]


def report(*, db_session: Session, mock: MockInterview, sight: reveal.Sight) -> MockReport:
    """The finished interview's report: score, per topic, time per question, calibration and
    each miss with its explanation (the caller checks the interview is finished), as the visitor
    whose `sight` it is may read it (the one rule, app/reveal.py): a key, an explanation or a
    grade only of a question they answered (that variant), never of one of their live mock
    interview. Its owner answered what they answered in it; a reader of a shared report, what
    they answered themselves."""
    rows = items(db_session=db_session, mock=mock)
    attempts = {a.quiz_item_id: a for a in db_session.scalars(
        select(Attempt).where(Attempt.quiz_item_id.in_([i.id for i in rows])))}
    questions = {q.id: q for q in db_session.scalars(
        select(Question).where(Question.id.in_([i.question_id for i in rows])))}
    revisions = {r.id: r for r in db_session.scalars(
        select(QuestionRevision).where(QuestionRevision.id.in_([i.revision_id for i in rows])))}
    theirs = (set() if sight.staff else reveal.answered_variants(
        db_session=db_session, learner_id=sight.learner_id,
        pairs=[(i.question_id, i.variant) for i in rows]))
    out: list[ReportItem] = []
    per: dict[str, TopicResult] = {}
    for i in rows:
        doc = revision_variant(revision=revisions[i.revision_id], variant=i.variant)
        a = attempts.get(i.id)
        note = None
        if sight.withheld(i.question_id):
            note = reveal.WITHHELD
        elif not sight.staff and (i.question_id, i.variant) not in theirs:
            note = reveal.NOT_ANSWERED
        shown = note is None
        out.append(ReportItem(i.position, questions[i.question_id], doc, i.revision_id, a,
                              correct_answer(doc, a.answer if a else None) if shown else None,
                              i.variant, shown, note))
        t = per.setdefault(doc.topic, TopicResult(doc.topic, doc.topic))
        t.asked += 1
        t.score += a.score if a else 0.0
    titles = dict(db_session.execute(select(Topic.slug, Topic.title).where(Topic.slug.in_(per))).all())
    for t in per.values():
        t.title = titles.get(t.topic, t.topic)
    given = [a for a in attempts.values()]
    end = mock.finished_at or mock.deadline
    return MockReport(mock=mock, items=out, score=sum(t.score for t in per.values()),
                      total=len(out), answered=len(given),
                      per_topic=sorted(per.values(), key=lambda t: t.title),
                      calibration=calibration(given),
                      elapsed_ms=int((end - mock.started_at).total_seconds() * 1000))


def recent(*, db_session: Session, learner_id: str, limit: int = 5) -> list[MockInterview]:
    """The learner's latest mock interviews, newest first."""
    return list(db_session.scalars(select(MockInterview).where(MockInterview.learner_id == learner_id)
                                   .order_by(MockInterview.started_at.desc()).limit(limit)))
