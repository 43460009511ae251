"""The class page's numbers: each member's work on each assignment and its status, mastery
per topic summed in SQL, who is behind, and the CSV of scores (docs/classes.md).

What counts as doing a quiz or exercise assignment: the member's first attempt at each of its
questions made since the assignment opened and since they joined, whatever page it was made
on (a quiz started from the assignment, the question's own page, a review). A mock interview
assignment is done by the mock started from it. Work after the due date counts and is late.

Every function that depends on the time takes `now` from the one clock (app/clock.py).
"""

from __future__ import annotations

import csv
import io
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fsrs import Rating
from sqlalchemy import (
    Float,
    and_,
    case,
    cast,
    func,
    literal,
    or_,
    select,
)
from sqlalchemy.orm import Session

from app import reveal
from app.accounts.models import User
from app.classes.assignments import class_assignments, topic_titles
from app.classes.models import (
    KIND_EXERCISES,
    KIND_MOCK,
    Assignment,
    AssignmentQuestion,
    AssignmentStart,
    ClassMember,
    Classroom,
    TalkMark,
)
from app.db import UTCDateTime
from app.exercises.models import ExerciseSubmission
from app.mock.models import MockInterview
from app.questions.models import STATUS_PUBLISHED, Question
from app.quizzes.models import Attempt, QuizItem
from app.review import service as review
from app.review.models import LearnerSchedule, ReviewCard

# Heatmap shades: a mastery gets one level (0..4) per bound it reaches: steps of 20 %.
MASTERY_LEVELS = (0.2, 0.4, 0.6, 0.8)
# The CSV's cells that a spreadsheet would run as a formula start with one of these.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

STATUS_NOT_OPEN = "not open"
STATUS_NOT_STARTED = "not started"
STATUS_IN_PROGRESS = "in progress"
STATUS_OVERDUE = "overdue"
STATUS_DONE = "done"
STATUS_LATE = "late"
# An exercises assignment whose solution the member saw before passing: given up.
STATUS_SOLUTION_VIEWED = "solution viewed"




@dataclass
class Work:
    """One member's work on one assignment."""

    required: int
    answered: int = 0
    points: float = 0.0  # the sum of the counted first attempts' scores
    done_at: datetime | None = None
    started: bool = False  # a mock started from the assignment

    @property
    def score(self) -> float:
        """The score as a fraction of the assignment (an unanswered question counts 0)."""
        return self.points / self.required if self.required else 0.0


def status(work: Work | None, assignment: Assignment, now: datetime) -> str:
    """done, late (done after the due date), in progress, overdue, not started or not open."""
    return _status(work, assignment.opens_at, assignment.due_at, now)


def _status(work: Work | None, opens_at: datetime, due_at: datetime, now: datetime) -> str:
    # status() on the assignment's dates as plain values: the class report asks it for
    # every member and assignment, and each attribute of a mapped object costs a lookup.
    if work is not None and work.done_at is not None:
        return STATUS_LATE if work.done_at > due_at else STATUS_DONE
    if now < opens_at and (work is None or not work.answered):
        return STATUS_NOT_OPEN
    if now > due_at:
        return STATUS_OVERDUE
    if work is not None and (work.answered or work.started):
        return STATUS_IN_PROGRESS
    return STATUS_NOT_STARTED


def _ranked(class_id: int, member_id: int | None, now: datetime) -> Any:
    """Per (assignment, member, question) of the quiz and exercise assignments, the attempts
    that count, ranked by time (rn 1 is the counted first one), with the score the class gives
    each: the class instructor's mark of a talk-through where there is one, else its own."""
    a, m, aq, att = Assignment, ClassMember, AssignmentQuestion, Attempt
    where = [m.class_id == class_id, m.left_at.is_(None), a.kind != KIND_MOCK]
    if member_id is not None:
        where.append(m.id == member_id)
    # Every (member, assignment, question) with the moment its work starts to count, made
    # first (MATERIALIZED): then each is one lookup in the attempts' (learner, question, time,
    # variant, score) index, which holds all it reads of them. Left to itself, SQLite walked
    # every attempt of each learner once per assignment.
    pairs = (select(a.id.label("aid"), m.id.label("mid"), m.learner_id.label("lid"),
                    aq.question_id.label("qid"), aq.variant.label("variant"),
                    a.kind.label("kind"),
                    case((a.opens_at > m.joined_at, a.opens_at), else_=m.joined_at).label("since"))
             .select_from(m).join(a, a.class_id == m.class_id).join(aq, aq.assignment_id == a.id)
             .where(*where).cte("pairs").prefix_with("MATERIALIZED"))
    return (
        select(pairs.c.aid, pairs.c.mid, att.question_id.label("qid"),
               att.id.label("attempt_id"), _class_score(class_id, att).label("score"),
               att.created_at.label("at"),
               func.row_number().over(partition_by=(pairs.c.aid, pairs.c.mid, att.question_id),
                                      order_by=(att.created_at, att.id)).label("rn"))
        .select_from(pairs)
        # A question whose variant the instructor picked counts an answer to that variant.
        .join(att, and_(att.learner_id == pairs.c.lid, att.question_id == pairs.c.qid,
                        att.created_at >= pairs.c.since,
                        or_(pairs.c.variant.is_(None), att.variant == pairs.c.variant),
                        or_(att.quiz_item_id.is_(None),
                            ~reveal.given_in_live_mock(att.quiz_item_id, now)),
                        # Answered signed out and claimed at sign-in: history, not class work.
                        att.claimed_at.is_(None),
                        # An exercise counts what happened: its pass, unless the learner saw
                        # the solution first (gave up, or opened it after failed Runs).
                        or_(pairs.c.kind != KIND_EXERCISES,
                            and_(att.correct.is_(True), ~_solution_seen(
                                pairs.c.lid, pairs.c.qid, pairs.c.since, att.created_at)))))
        # Said again as a filter on the attempts: PostgreSQL otherwise takes the pairs for a
        # few rows and sorts all the attempts (30,000 in the benchmark) for a merge join;
        # told which questions can match, it looks each pair up in the attempts' index.
        .where(att.question_id.in_(select(aq.question_id).join(a, a.id == aq.assignment_id)
                                   .where(a.class_id == class_id, a.kind != KIND_MOCK)))
        ).subquery()


def _class_score(class_id: int, attempt: Any) -> Any:
    """SQL: the score this class gives an attempt: its instructor's mark, else the attempt's."""
    marked = (select(TalkMark.score).where(TalkMark.class_id == class_id,
                                           TalkMark.attempt_id == attempt.id)
              .scalar_subquery())
    return func.coalesce(marked, attempt.score)


def counted_attempts(*, db_session: Session, class_id: int, now: datetime,
                     question_ids: Any = None) -> list[tuple[int, int, int, int]]:
    """(assignment id, member id, question id, attempt id) of every counted first attempt of
    the class's current members at its quiz and exercise assignments' questions (of these
    question ids, if given): the answers the class page scores."""
    ranked = _ranked(class_id, None, now)
    stmt = select(ranked.c.aid, ranked.c.mid, ranked.c.qid, ranked.c.attempt_id).where(
        ranked.c.rn == 1)
    if question_ids is not None:
        stmt = stmt.where(ranked.c.qid.in_(question_ids))
    return [(a, m, q, t) for a, m, q, t in db_session.execute(stmt)]


def _question_work(db_session: Session, class_id: int, member_id: int | None,
                   now: datetime) -> dict[tuple[int, int], Work]:
    """Per (member, assignment) of the quiz and exercise assignments: how many questions have a
    counted first attempt, the points of the first `required` of them, and when the
    `required`-th came (done). One statement: the database ranks and sums. An answer given in a
    mock interview still under way counts once the interview is over (the one rule: its grade
    would otherwise reach the member, on their class page, before the end); a talk-through the
    instructor marked counts their mark."""
    a = Assignment
    ranked = _ranked(class_id, member_id, now)
    firsts = (select(ranked.c.aid, ranked.c.mid, ranked.c.score, ranked.c.at,
                     func.row_number().over(partition_by=(ranked.c.aid, ranked.c.mid),
                                            order_by=(ranked.c.at, ranked.c.qid)).label("k"))
              .where(ranked.c.rn == 1)).subquery()
    counted = firsts.c.k <= a.required
    rows = db_session.connection().execute(
        select(firsts.c.aid, firsts.c.mid, a.required, func.count(),
               func.sum(case((counted, firsts.c.score), else_=0.0)),
               func.max(case((firsts.c.k == a.required, firsts.c.at))))
        .join(a, a.id == firsts.c.aid)
        .group_by(firsts.c.aid, firsts.c.mid, a.required)).all()
    return {(mid, aid): Work(required, min(int(n), required), float(points or 0.0), done)
            for aid, mid, required, n, points, done in rows}


def _solution_seen(learner: Any, question: Any, since: Any, until: Any = None) -> Any:
    """Whether the learner saw an exercise's solution (gave up, or opened it) since `since`
    (and by `until`, if given)."""
    es = ExerciseSubmission
    where = [es.learner_id == learner, es.question_id == question, es.gave_up.is_(True),
             es.created_at >= since]
    if until is not None:
        where.append(es.created_at <= until)
    return select(es.id).where(*where).exists()


def _solutions_viewed(db_session: Session, class_id: int, member_id: int | None) -> set[tuple[int, int]]:
    """(member, exercises assignment) where the member saw a solution of one of its
    exercises since the assignment opened and they joined: "solution viewed" unless done."""
    a, m, aq = Assignment, ClassMember, AssignmentQuestion
    since = case((a.opens_at > m.joined_at, a.opens_at), else_=m.joined_at)
    stmt = (select(m.id, a.id).select_from(m).join(a, a.class_id == m.class_id)
            .join(aq, aq.assignment_id == a.id)
            .where(m.class_id == class_id, m.left_at.is_(None), a.kind == KIND_EXERCISES,
                   _solution_seen(m.learner_id, aq.question_id, since))
            .distinct())
    if member_id is not None:
        stmt = stmt.where(m.id == member_id)
    return {(mid, aid) for mid, aid in db_session.execute(stmt)}


def _mock_work(db_session: Session, class_id: int, member_id: int | None,
               now: datetime) -> dict[tuple[int, int], Work]:
    """Per (member, assignment) of the mock assignments: the mock started from it, done once
    it is over (finished, or its deadline passed), scored over its questions."""
    m, s = ClassMember, AssignmentStart
    where = [m.class_id == class_id, m.left_at.is_(None)]
    if member_id is not None:
        where.append(m.id == member_id)
    rows = db_session.connection().execute(
        select(s.assignment_id, m.id, MockInterview.finished_at, MockInterview.deadline,
               func.count(QuizItem.id),
               func.coalesce(func.sum(func.coalesce(TalkMark.score, Attempt.score)), 0.0),
               func.count(Attempt.id))
        .select_from(s)
        .join(m, m.learner_id == s.learner_id)
        .join(Assignment, and_(Assignment.id == s.assignment_id, Assignment.class_id == m.class_id))
        .join(MockInterview, MockInterview.quiz_id == s.quiz_id)
        .join(QuizItem, QuizItem.quiz_id == s.quiz_id)
        .outerjoin(Attempt, Attempt.quiz_item_id == QuizItem.id)
        # A talk-through the instructor marked counts their mark.
        .outerjoin(TalkMark, and_(TalkMark.attempt_id == Attempt.id,
                                  TalkMark.class_id == class_id))
        .where(*where, s.started_at >= m.joined_at)
        .group_by(s.assignment_id, m.id, MockInterview.finished_at, MockInterview.deadline))
    out = {}
    for aid, mid, finished, deadline, items, points, answered in rows:
        over = finished is not None or now >= deadline
        work = Work(required=1, answered=int(answered), started=True)
        if over:
            # Sat it: done when it ended, scored over its questions as its own report is.
            work.done_at = min(finished, deadline) if finished is not None else deadline
            work.answered = 1
            work.points = float(points) / items if items else 0.0
        out[(mid, aid)] = work
    return out


# Mastery ----------------------------------------------------------------------------------


def _elapsed_days(db_session: Session, now: datetime) -> Any:
    """Whole days from a card's last review to `now`, as FSRS counts them (timedelta.days)."""
    at = literal(now, UTCDateTime())
    if db_session.get_bind().dialect.name == "postgresql":
        # date_part, not extract: extract answers in numeric, whose arithmetic is slow over
        # a class's cards.
        return func.floor(func.date_part("epoch", at - ReviewCard.last_review) / 86400)
    return func.floor(func.julianday(at) - func.julianday(ReviewCard.last_review))


def mastery_by_member(*, db_session: Session, class_id: int, now: datetime,
                      member_id: int | None = None) -> tuple[list[tuple[str, str]], dict[int, list[float]]]:
    """The topics (slug, title) and, per member, mastery of each topic at `now`: FSRS's
    predicted recall averaged over the topic's published questions, an unseen one and one
    whose last review was a miss counting 0 (review.CardState.mastery, which the dashboard
    draws).

    The recall is summed in SQL with FSRS-6's forgetting curve, each member's own (the decay
    of their fitted weights, review.scheduler_for), so a class of hundreds sends back one row
    per member and topic, not every card."""
    per_topic = dict(db_session.connection().execute(
        select(Question.topic, func.count()).where(Question.status == STATUS_PUBLISHED)
        .group_by(Question.topic)).all())
    topics = [(s, t) for s, t in topic_titles(db_session=db_session) if per_topic.get(s)]
    members = [ClassMember.class_id == class_id, ClassMember.left_at.is_(None)]
    if member_id is not None:
        members.append(ClassMember.id == member_id)
    # Each topic's place in the list and its count of questions; a member's list is made on
    # their first row, a topic without one stays 0.
    place = {slug: (i, per_topic[slug]) for i, (slug, _) in enumerate(topics)}
    out: dict[int, list[float]] = {}
    for mid, topic, total in _recall_sums(db_session, now, members):
        mine = out.get(mid)
        if mine is None:
            mine = out[mid] = [0.0] * len(topics)
        if (where := place.get(topic)) is not None:
            mine[where[0]] = float(total or 0.0) / where[1]
    return topics, out


def _recall_sums(db_session: Session, now: datetime, members: list[Any]) -> list[Any]:
    """(member id, topic, summed recall at `now`) over the cards of these members' published
    questions, each member's on their own forgetting curve."""
    # FSRS-6's curve is R = (1 + factor·t/S)^decay with decay the 21st weight negated and
    # factor = 0.9^(1/decay) - 1 (fsrs.Scheduler's _DECAY and _FACTOR); a member without
    # fitted weights has the defaults'. Worked out once per member, before the cards.
    own = -LearnerSchedule.parameters[20].as_float()
    weights = (select(ClassMember.id.label("mid"), ClassMember.learner_id.label("lid"),
                      func.coalesce(own, float(review.SCHEDULER._DECAY)).label("decay"))
               .select_from(ClassMember)
               .outerjoin(LearnerSchedule, LearnerSchedule.learner_id == ClassMember.learner_id)
               .where(*members)).subquery()
    curves = (select(weights.c.mid, weights.c.lid, weights.c.decay,
                     (func.power(0.9, 1.0 / weights.c.decay) - 1.0).label("factor"))
              .cte("curves").prefix_with("MATERIALIZED"))
    # Each card's stability and whole days since its review, once; then the curve, summed per
    # member and topic. (FSRS keeps stability above zero; a card without one sums as null, 0.)
    # The stability is the column generated from the card's JSON, and every column read here
    # is in the index ix_review_cards_learner_recall: no card's row is read, no JSON parsed.
    # (Its second column is last_review, so that `learner = ? AND last_review IS NOT NULL`
    # matches two of its columns and one of (learner, due)'s: SQLite's planner does not see
    # that an index holds a generated column, and took the other, parsing every card's JSON.)
    # A card counts only if its last review recalled it (review.CardState.mastery); one
    # never rated counts as recalled.
    cards = (select(curves.c.mid, curves.c.decay, curves.c.factor,
                    Question.topic.label("topic"), ReviewCard.stability.label("stability"),
                    _elapsed_days(db_session, now).label("days"))
             .select_from(curves)
             .join(ReviewCard, ReviewCard.learner_id == curves.c.lid)
             .join(Question, and_(Question.id == ReviewCard.question_id,
                                  Question.status == STATUS_PUBLISHED))
             .where(ReviewCard.last_review.is_not(None),
                    or_(ReviewCard.last_rating.is_(None),
                        ReviewCard.last_rating != int(Rating.Again)))).subquery()
    days = cast(case((cards.c.days < 0, 0.0), else_=cards.c.days), Float)
    recall = func.power(1.0 + cards.c.factor * days / cards.c.stability, cards.c.decay)
    return list(db_session.connection().execute(
        select(cards.c.mid, cards.c.topic, func.sum(recall))
        .group_by(cards.c.mid, cards.c.topic)).all())


def mastery_level(value: float) -> int:
    """The heatmap's shade of a mastery (0..4)."""
    return bisect_right(MASTERY_LEVELS, value)


# The class page ---------------------------------------------------------------------------


@dataclass
class MemberRow:
    member: ClassMember
    username: str
    mastery: list[float]  # per topic of ClassReport.topics
    work: dict[int, Work]  # by assignment id
    overdue: list[Assignment] = field(default_factory=list)
    statuses: dict[int, str] = field(default_factory=dict)  # by assignment id, at the report's now


@dataclass
class AssignmentRow:
    assignment: Assignment
    done: int = 0
    late: int = 0
    started: int = 0

    @property
    def completed(self) -> int:
        return self.done + self.late


@dataclass
class ClassReport:
    classroom: Classroom
    now: datetime
    assignments: list[AssignmentRow]
    members: list[MemberRow]
    topics: list[tuple[str, str]]

    @property
    def behind(self) -> list[MemberRow]:
        """Members with an assignment past its due date not done, most overdue first."""
        return sorted((r for r in self.members if r.overdue),
                      key=lambda r: (-len(r.overdue), r.username.lower()))

    def status(self, row: MemberRow, assignment: Assignment) -> str:
        known = row.statuses.get(assignment.id)
        return known if known is not None else status(row.work.get(assignment.id), assignment,
                                                      self.now)


def class_report(*, db_session: Session, classroom: Classroom, now: datetime,
                 member_id: int | None = None) -> ClassReport:
    """Everything the class page shows, for the class's current members (or one of them):
    each member's work on each assignment, completion per assignment, mastery per topic and
    who is behind. A handful of statements, whatever the class's size."""
    assignments = class_assignments(db_session=db_session, class_id=classroom.id)
    stmt = (select(ClassMember, User.username).join(User, User.id == ClassMember.user_id)
            .where(ClassMember.class_id == classroom.id, ClassMember.left_at.is_(None)))
    if member_id is not None:
        stmt = stmt.where(ClassMember.id == member_id)
    members = db_session.execute(stmt.order_by(func.lower(User.username))).all()
    work = _question_work(db_session, classroom.id, member_id, now)
    if any(a.kind == KIND_MOCK for a in assignments):
        work.update(_mock_work(db_session, classroom.id, member_id, now))
    topics, mastery = mastery_by_member(db_session=db_session, class_id=classroom.id, now=now,
                                        member_id=member_id)
    rows = [AssignmentRow(a) for a in assignments]
    by_member: dict[int, dict[int, Work]] = {}
    for (mid, aid), w in work.items():
        by_member.setdefault(mid, {})[aid] = w
    # Each member's status on each assignment, once (the page, the CSV and the API read them
    # from the row), counted per assignment; the assignments' attributes read once, not per
    # member.
    viewed = (_solutions_viewed(db_session, classroom.id, member_id)
              if any(a.kind == KIND_EXERCISES for a in assignments) else set())
    plan = [(a.id, a, a.opens_at, a.due_at) for a in assignments]
    counts = {aid: {STATUS_DONE: 0, STATUS_LATE: 0, STATUS_IN_PROGRESS: 0} for aid, *_ in plan}
    out = []
    for member, username in members:
        mine = by_member.get(member.id, {})
        row = MemberRow(member, username, mastery.get(member.id) or [0.0] * len(topics), mine)
        statuses = row.statuses
        for aid, a, opens_at, due_at in plan:
            st = _status(mine.get(aid), opens_at, due_at, now)
            if (member.id, aid) in viewed and st not in (STATUS_DONE, STATUS_LATE):
                st = STATUS_SOLUTION_VIEWED
            statuses[aid] = st
            if st == STATUS_OVERDUE:
                row.overdue.append(a)
            elif st in counts[aid]:
                counts[aid][st] += 1
        out.append(row)
    for ar in rows:
        n = counts[ar.assignment.id]
        ar.done, ar.late, ar.started = n[STATUS_DONE], n[STATUS_LATE], n[STATUS_IN_PROGRESS]
    return ClassReport(classroom, now, rows, out, topics)


def _cell(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_START) else value


def scores_csv(report: ClassReport) -> str:
    """The class's scores as CSV: a row per member (their class pseudonym and username), three
    columns per assignment (score in percent, status, when it was done, UTC)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    header = ["class_id", "username", "joined_at"]
    for ar in report.assignments:
        title = _cell(ar.assignment.title)
        header += [f"{title} [{ar.assignment.id}] score %", f"{title} [{ar.assignment.id}] status",
                   f"{title} [{ar.assignment.id}] done_at"]
    writer.writerow(header)
    for row in report.members:
        line = [row.member.pseudonym, _cell(row.username),
                row.member.joined_at.strftime("%Y-%m-%dT%H:%M:%SZ")]
        for ar in report.assignments:
            w = row.work.get(ar.assignment.id)
            st = report.status(row, ar.assignment)
            done = w.done_at.strftime("%Y-%m-%dT%H:%M:%SZ") if w and w.done_at else ""
            line += [f"{w.score * 100:.1f}" if w else "0.0", st, done]
        writer.writerow(line)
    return buf.getvalue()
