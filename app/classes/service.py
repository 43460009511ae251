"""Classes: an instructor's class and its join link, members joining and leaving, assignments,
what counts as doing one, the class page's numbers (completion, mastery, who is behind) and
its CSV of scores. docs/classes.md says what an instructor sees and why.

What counts as doing a quiz or exercise assignment: the member's first attempt at each of its
questions made since the assignment opened and since they joined, whatever page it was made
on (a quiz started from the assignment, the question's own page, a review). A mock interview
assignment is done by the mock started from it. Work after the due date counts and is late.

Every function that depends on the time takes `now` from the one clock (app/clock.py).
"""

from __future__ import annotations

import csv
import io
import random
import secrets
import uuid
from bisect import bisect_right
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fsrs import Rating
from sqlalchemy import (
    Float,
    and_,
    case,
    cast,
    delete,
    func,
    literal,
    or_,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.classes.models import (
    KIND_EXERCISES,
    KIND_MOCK,
    KIND_QUIZ,
    KINDS,
    Assignment,
    AssignmentQuestion,
    AssignmentStart,
    ClassMember,
    Classroom,
)
from app.db import READ_ONLY, UTCDateTime
from app.errors import Conflict, InvalidInput
from app.mock import service as mock
from app.mock.models import MockInterview
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision, Topic
from app.questions.schema import describe_variant
from app.questions.service import revision_doc, revision_variant
from app.quizzes.models import Attempt, Quiz, QuizItem
from app.quizzes.service import MAX_QUIZ_QUESTIONS, ensure_learner, item_variant
from app.review import service as review
from app.review.models import LearnerSchedule, ReviewCard

MAX_NAME = 120
# A class page lists every member and every assignment; past this it is a course platform.
MAX_ASSIGNMENTS = 100
# A topic quiz asks this many of its topics' questions unless the instructor says otherwise.
DEFAULT_QUIZ_LENGTH = 5
# A set of exercises longer than this is several assignments.
MAX_EXERCISES = 20
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


class ClassError(InvalidInput):
    """A class or assignment that cannot be made as asked (the message says which field)."""


# Classes and their join link ---------------------------------------------------------------


def _token() -> str:
    return secrets.token_urlsafe(24)


def create_class(*, db_session: Session, instructor: User, name: str) -> Classroom:
    """A new class of this instructor's, with a live join link."""
    name = " ".join(name.split())
    if not name:
        raise ClassError("Give the class a name.", loc=("name",))
    if len(name) > MAX_NAME:
        raise ClassError(f"A class name has at most {MAX_NAME} characters.", loc=("name",))
    classroom = Classroom(name=name, instructor_id=instructor.id, join_token=_token())
    db_session.add(classroom)
    db_session.flush()
    return classroom


def get_own_class(*, db_session: Session, class_id: int, instructor_id: int) -> Classroom | None:
    """The instructor's own class; another instructor's does not exist for them."""
    classroom = db_session.get(Classroom, class_id)
    if classroom is None or classroom.instructor_id != instructor_id:
        return None
    return classroom


@dataclass
class ClassRow:
    classroom: Classroom
    members: int
    assignments: int


def instructor_classes(*, db_session: Session, instructor_id: int) -> list[ClassRow]:
    """The instructor's classes, newest first, with their member and assignment counts."""
    members = (select(func.count()).select_from(ClassMember)
               .where(ClassMember.class_id == Classroom.id).scalar_subquery())
    assignments = (select(func.count()).select_from(Assignment)
                   .where(Assignment.class_id == Classroom.id).scalar_subquery())
    rows = db_session.execute(select(Classroom, members, assignments)
                              .where(Classroom.instructor_id == instructor_id)
                              .order_by(Classroom.created_at.desc(), Classroom.id.desc()))
    return [ClassRow(c, int(m), int(a)) for c, m, a in rows]


def new_join_link(*, db_session: Session, classroom: Classroom) -> str:
    """A new unguessable join token; the old link stops working."""
    classroom.join_token = _token()
    db_session.flush()
    return classroom.join_token


def revoke_join_link(*, db_session: Session, classroom: Classroom) -> None:
    """Close the class to newcomers: the join link becomes a 404 (members stay)."""
    classroom.join_token = None
    db_session.flush()


def class_by_token(*, db_session: Session, token: str) -> Classroom | None:
    """The class whose live join link carries `token`; a revoked or made-up one is None."""
    if not token or len(token) > 64:
        return None
    return db_session.scalar(select(Classroom).where(Classroom.join_token == token))


def instructor_name(*, db_session: Session, classroom: Classroom) -> str:
    """The username of the class's instructor."""
    return db_session.scalar(select(User.username).where(User.id == classroom.instructor_id)) or ""


# Members ----------------------------------------------------------------------------------


def get_class(*, db_session: Session, class_id: int) -> Classroom | None:
    """The class with this id (callers check who may see it)."""
    return db_session.get(Classroom, class_id)


def membership(*, db_session: Session, class_id: int, user_id: int) -> ClassMember | None:
    """The account's membership of the class, if it is a member."""
    return db_session.scalar(select(ClassMember).where(ClassMember.class_id == class_id,
                                                       ClassMember.user_id == user_id))


def _pseudonym(db_session: Session, class_id: int) -> str:
    taken = set(db_session.scalars(select(ClassMember.pseudonym)
                                   .where(ClassMember.class_id == class_id)))
    while True:
        # 40 random bits, so pseudonyms of one class collide rarely (and are retried).
        candidate = f"L-{secrets.token_hex(5).upper()}"
        if candidate not in taken:
            return candidate


def join(*, db_session: Session, classroom: Classroom, user: User, learner_id: str,
         now: datetime) -> ClassMember:
    """Make the learner account a member of the class (a member already stays as they are)."""
    existing = membership(db_session=db_session, class_id=classroom.id, user_id=user.id)
    if existing is not None:
        return existing
    ensure_learner(db_session=db_session, learner_id=learner_id)
    member = ClassMember(class_id=classroom.id, user_id=user.id, learner_id=learner_id,
                         pseudonym=_pseudonym(db_session, classroom.id), joined_at=now)
    try:
        # A double-clicked Join: the unique (class, account) keeps one membership.
        with db_session.begin_nested():
            db_session.add(member)
            db_session.flush()
    except IntegrityError:
        existing = membership(db_session=db_session, class_id=classroom.id, user_id=user.id)
        if existing is None:
            raise
        return existing
    return member


def leave(*, db_session: Session, member: ClassMember) -> None:
    """Take the member out of the class: the instructor sees nothing of them from now on, and
    a return through the join link starts afresh."""
    db_session.execute(delete(AssignmentStart).where(
        AssignmentStart.learner_id == member.learner_id,
        AssignmentStart.assignment_id.in_(select(Assignment.id)
                                          .where(Assignment.class_id == member.class_id))))
    db_session.delete(member)
    db_session.flush()


def get_member(*, db_session: Session, classroom: Classroom, member_id: int) -> ClassMember | None:
    """A member of this class by the membership's id."""
    member = db_session.get(ClassMember, member_id)
    return member if member is not None and member.class_id == classroom.id else None


@dataclass
class Membership:
    member: ClassMember
    classroom: Classroom
    instructor: str


def learner_classes(*, db_session: Session, user_id: int) -> list[Membership]:
    """The classes the account is a member of, with their instructors' usernames."""
    rows = db_session.execute(
        select(ClassMember, Classroom, User.username)
        .join(Classroom, Classroom.id == ClassMember.class_id)
        .join(User, User.id == Classroom.instructor_id)
        .where(ClassMember.user_id == user_id).order_by(ClassMember.joined_at, ClassMember.id))
    return [Membership(m, c, name) for m, c, name in rows]


# Assignments ------------------------------------------------------------------------------


@dataclass
class QuestionChoice:
    """A published question as the assignment form offers it."""

    id: int
    slug: str
    title: str
    topic: str
    type: str
    revision_id: int
    variants: list[str]  # each variant's name, "variant 2 (world_size=4)"; one for most


def question_choices(*, db_session: Session) -> list[QuestionChoice]:
    """Every published question, in topic order, with its variants named."""
    rows = db_session.execute(
        select(Question).join(Topic, Topic.slug == Question.topic)
        .where(Question.status == STATUS_PUBLISHED, Question.current_revision_id.is_not(None))
        .order_by(Topic.position, Question.topic, Question.difficulty, Question.slug)).unique()
    out = []
    for (q,) in rows:
        assert q.current_revision is not None
        doc = revision_doc(q.current_revision)
        names = ([describe_variant(i, doc.variant_params(i)) for i in range(doc.variant_count)]
                 if doc.variables else [])
        out.append(QuestionChoice(q.id, q.slug, q.title, q.topic, q.type,
                                  q.current_revision.id, names))
    return out


def topic_titles(*, db_session: Session) -> list[tuple[str, str]]:
    """(slug, title) of every topic with a published question, in the bank's order."""
    rows = db_session.execute(
        select(Topic.slug, Topic.title).where(Topic.slug.in_(
            select(Question.topic).where(Question.status == STATUS_PUBLISHED)))
        .order_by(Topic.position, Topic.title))
    return [(s, t) for s, t in rows]


@dataclass
class AssignmentSpec:
    """What the instructor asked for, as read from the form (checked by create_assignment)."""

    kind: str
    title: str
    opens_at: datetime
    due_at: datetime
    topics: list[str] = field(default_factory=list)
    count: int | None = None  # a topic quiz's length
    slugs: list[str] = field(default_factory=list)  # a fixed list (quiz or exercises)
    variants: dict[str, int] = field(default_factory=dict)  # slug -> the variant picked
    minutes: int | None = None  # a mock interview's length


def create_assignment(*, db_session: Session, classroom: Classroom,
                      spec: AssignmentSpec) -> Assignment:
    """A new assignment of the class; its questions are fixed now (a topic quiz's are the
    topics' published questions today). Raises ClassError naming the field at fault."""
    title = " ".join(spec.title.split())
    if spec.kind not in KINDS:
        raise ClassError(f"An assignment is one of: {', '.join(KINDS)}.", loc=("kind",))
    if not title or len(title) > MAX_NAME:
        raise ClassError(f"Give the assignment a title of at most {MAX_NAME} characters.",
                         loc=("title",))
    if spec.due_at <= spec.opens_at:
        raise ClassError("The due date must come after the opening.", loc=("due_at",))
    count = db_session.scalar(select(func.count()).select_from(Assignment)
                              .where(Assignment.class_id == classroom.id)) or 0
    if count >= MAX_ASSIGNMENTS:
        raise ClassError(f"A class has at most {MAX_ASSIGNMENTS} assignments.", loc=("kind",))
    picked: list[tuple[Question, int | None]] = []
    minutes = None
    topics: list[str] = []
    if spec.kind == KIND_MOCK:
        minutes = spec.minutes or mock.DEFAULT_MINUTES
        if not mock.MIN_MINUTES <= minutes <= mock.MAX_MINUTES:
            raise ClassError(f"A mock interview lasts {mock.MIN_MINUTES} to {mock.MAX_MINUTES} "
                             "minutes.", loc=("minutes",))
        required = 1
    elif spec.kind == KIND_QUIZ and spec.topics and not spec.slugs:
        topics = sorted(set(spec.topics))
        pool = _published(db_session, Question.topic.in_(topics), Question.type != "exercise")
        known = {q.topic for q in pool}
        if unknown := [t for t in topics if t not in known]:
            raise ClassError(f"No published question in: {', '.join(unknown)}.", loc=("topics",))
        asked = spec.count if spec.count is not None else DEFAULT_QUIZ_LENGTH
        if not 1 <= asked <= MAX_QUIZ_QUESTIONS:
            raise ClassError(f"A quiz has 1 to {MAX_QUIZ_QUESTIONS} questions.", loc=("count",))
        picked = [(q, None) for q in pool]
        required = min(asked, len(pool))
    else:
        picked = _fixed_list(db_session, spec)
        required = len(picked)
    assignment = Assignment(class_id=classroom.id, kind=spec.kind, title=title, topics=topics,
                            required=required, minutes=minutes, opens_at=spec.opens_at,
                            due_at=spec.due_at)
    db_session.add(assignment)
    db_session.flush()
    for position, (q, variant) in enumerate(picked, start=1):
        db_session.add(AssignmentQuestion(assignment_id=assignment.id, question_id=q.id,
                                          position=position, variant=variant))
    db_session.flush()
    return assignment


def _published(db_session: Session, *where: Any) -> list[Question]:
    return list(db_session.scalars(
        select(Question).join(Topic, Topic.slug == Question.topic)
        .where(Question.status == STATUS_PUBLISHED, Question.current_revision_id.is_not(None),
               *where)
        .order_by(Topic.position, Question.topic, Question.difficulty, Question.slug)).unique())


def _fixed_list(db_session: Session, spec: AssignmentSpec) -> list[tuple[Question, int | None]]:
    slugs = list(dict.fromkeys(spec.slugs))
    if not slugs:
        what = "exercises" if spec.kind == KIND_EXERCISES else "topics or questions"
        raise ClassError(f"Pick the {what} of the assignment.", loc=("questions",))
    limit = MAX_EXERCISES if spec.kind == KIND_EXERCISES else MAX_QUIZ_QUESTIONS
    if len(slugs) > limit:
        raise ClassError(f"Pick at most {limit}.", loc=("questions",))
    found = {q.slug: q for q in _published(db_session, Question.slug.in_(slugs))}
    if missing := [s for s in slugs if s not in found]:
        raise ClassError(f"Not a published question: {', '.join(missing)}.", loc=("questions",))
    out: list[tuple[Question, int | None]] = []
    for slug in slugs:
        q = found[slug]
        if (q.type == "exercise") != (spec.kind == KIND_EXERCISES):
            raise ClassError(f"{slug} is {'an exercise' if q.type == 'exercise' else 'not an exercise'}"
                             f"; a {spec.kind} assignment takes "
                             f"{'exercises' if spec.kind == KIND_EXERCISES else 'questions'}.",
                             loc=("questions",))
        variant = spec.variants.get(slug)
        if variant is not None:
            assert q.current_revision is not None
            n = revision_doc(q.current_revision).variant_count
            if not 0 <= variant < n:
                raise ClassError(f"{slug} has variants 0 to {n - 1}.", loc=(f"variant-{slug}",))
        out.append((q, variant))
    return out


def class_assignments(*, db_session: Session, class_id: int) -> list[Assignment]:
    """The class's assignments, by due date."""
    return list(db_session.scalars(select(Assignment).where(Assignment.class_id == class_id)
                                   .order_by(Assignment.due_at, Assignment.id)))


def get_assignment(*, db_session: Session, classroom: Classroom,
                   assignment_id: int) -> Assignment | None:
    """An assignment of this class."""
    a = db_session.get(Assignment, assignment_id)
    return a if a is not None and a.class_id == classroom.id else None


def delete_assignment(*, db_session: Session, assignment: Assignment) -> None:
    """Remove the assignment (the quizzes started from it stay the learners')."""
    db_session.delete(assignment)
    db_session.flush()


@dataclass
class AssignedQuestion:
    slug: str
    title: str
    topic: str
    type: str
    variant: int | None
    variant_name: str | None
    prompt: str  # the prompt as the picked variant reads (markdown)


def assignment_questions(*, db_session: Session, assignment: Assignment) -> list[AssignedQuestion]:
    """The assignment's questions in order; a picked variant is shown as it renders."""
    rows = db_session.execute(
        select(AssignmentQuestion, Question).join(Question, Question.id == AssignmentQuestion.question_id)
        .where(AssignmentQuestion.assignment_id == assignment.id)
        .order_by(AssignmentQuestion.position)).unique()
    out = []
    for aq, q in rows:
        name, prompt = None, ""
        revision = q.current_revision
        if revision is not None and aq.variant is not None:
            doc = revision_doc(revision)
            if doc.variables and aq.variant < doc.variant_count:
                prompt = revision_variant(revision=revision, variant=aq.variant).prompt
                name = describe_variant(aq.variant, doc.variant_params(aq.variant))
        out.append(AssignedQuestion(q.slug, q.title, q.topic, q.type, aq.variant, name, prompt))
    return out


# Doing an assignment ----------------------------------------------------------------------


def is_open(assignment: Assignment, now: datetime) -> bool:
    return now >= assignment.opens_at


def start(*, db_session: Session, assignment: Assignment, member: ClassMember, now: datetime,
          rng: random.Random | None = None) -> Quiz:
    """The quiz or mock interview of this assignment for the member: the one started before,
    else a new one (a quiz of its questions, a topic quiz drawing `required` of them)."""
    if assignment.kind == KIND_EXERCISES:
        raise ClassError("An exercise is done on its own page.")
    if not is_open(assignment, now):
        raise Conflict(f"This assignment opens on {assignment.opens_at:%Y-%m-%d %H:%M} UTC.")
    started = _started(db_session, assignment, member)
    if started is not None:
        return started
    try:
        # In a savepoint: a second press of Start that got here at the same moment loses
        # to the unique (assignment, learner) and takes the first one's quiz, leaving none.
        with db_session.begin_nested():
            if assignment.kind == KIND_MOCK:
                interview = mock.start(db_session=db_session, learner_id=member.learner_id,
                                       minutes=assignment.minutes or mock.DEFAULT_MINUTES, now=now,
                                       rng=rng)
                quiz = db_session.get(Quiz, interview.quiz_id)
                assert quiz is not None
            else:
                quiz = _quiz_of(db_session, assignment, member, now, rng or random.Random())
            db_session.add(AssignmentStart(assignment_id=assignment.id, learner_id=member.learner_id,
                                           quiz_id=quiz.id, started_at=now))
            db_session.flush()
    except IntegrityError:
        winner = _started(db_session, assignment, member)
        if winner is None:
            raise
        return winner
    return quiz


def _started(db_session: Session, assignment: Assignment, member: ClassMember) -> Quiz | None:
    return db_session.scalar(select(Quiz).join(AssignmentStart, AssignmentStart.quiz_id == Quiz.id)
                             .where(AssignmentStart.assignment_id == assignment.id,
                                    AssignmentStart.learner_id == member.learner_id))


def _quiz_of(db_session: Session, assignment: Assignment, member: ClassMember, now: datetime,
             rng: random.Random) -> Quiz:
    rows = list(db_session.execute(
        select(AssignmentQuestion.question_id, AssignmentQuestion.variant, QuestionRevision,
               Question.topic)
        .join(Question, Question.id == AssignmentQuestion.question_id)
        .join(QuestionRevision, QuestionRevision.id == Question.current_revision_id)
        .where(AssignmentQuestion.assignment_id == assignment.id,
               Question.status == STATUS_PUBLISHED)
        .order_by(AssignmentQuestion.position)))
    if not rows:
        raise Conflict("None of this assignment's questions is published any more.")
    if len(rows) > assignment.required:
        # A topic quiz: the questions not yet answered for it first, then any.
        answered = set(db_session.scalars(select(Attempt.question_id).where(
            Attempt.learner_id == member.learner_id, Attempt.created_at >= assignment.opens_at,
            Attempt.created_at >= member.joined_at)))
        fresh = [r for r in rows if r[0] not in answered]
        rest = [r for r in rows if r[0] in answered]
        rng.shuffle(fresh)
        rng.shuffle(rest)
        rows = (fresh + rest)[:assignment.required]
    quiz = Quiz(id=str(uuid.uuid4()), learner_id=member.learner_id,
                topics=sorted({r[3] for r in rows}), difficulty=None, started_at=now)
    db_session.add(quiz)
    db_session.flush()
    for position, (question_id, picked, revision, _topic) in enumerate(rows, start=1):
        # The instructor's variant if they picked one (and the question still has it), else
        # the learner's own draw, as any quiz pins it.
        variant = (picked if picked is not None and picked < revision_doc(revision).variant_count
                   else item_variant(db_session=db_session, learner_id=member.learner_id,
                                     question_id=question_id, revision=revision))
        db_session.add(QuizItem(quiz_id=quiz.id, position=position, question_id=question_id,
                                revision_id=revision.id, variant=variant))
    db_session.flush()
    return quiz


def started_quizzes(*, db_session: Session, learner_id: str,
                    assignment_ids: list[int]) -> dict[int, str]:
    """The quiz (or mock) the learner started from each of these assignments."""
    if not assignment_ids:
        return {}
    return dict(db_session.execute(
        select(AssignmentStart.assignment_id, AssignmentStart.quiz_id)
        .where(AssignmentStart.learner_id == learner_id,
               AssignmentStart.assignment_id.in_(assignment_ids))).all())


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


def _question_work(db_session: Session, class_id: int, member_id: int | None,
                   ) -> dict[tuple[int, int], Work]:
    """Per (member, assignment) of the quiz and exercise assignments: how many questions have a
    counted first attempt, the points of the first `required` of them, and when the
    `required`-th came (done). One statement: the database ranks and sums."""
    a, m, aq, att = Assignment, ClassMember, AssignmentQuestion, Attempt
    where = [m.class_id == class_id, a.kind != KIND_MOCK]
    if member_id is not None:
        where.append(m.id == member_id)
    # Every (member, assignment, question) with the moment its work starts to count, made
    # first (MATERIALIZED): then each is one lookup in the attempts' (learner, question, time,
    # variant, score) index, which holds all it reads of them. Left to itself, SQLite walked
    # every attempt of each learner once per assignment.
    pairs = (select(a.id.label("aid"), m.id.label("mid"), m.learner_id.label("lid"),
                    aq.question_id.label("qid"), aq.variant.label("variant"),
                    case((a.opens_at > m.joined_at, a.opens_at), else_=m.joined_at).label("since"))
             .select_from(m).join(a, a.class_id == m.class_id).join(aq, aq.assignment_id == a.id)
             .where(*where).cte("pairs").prefix_with("MATERIALIZED"))
    ranked = (
        select(pairs.c.aid, pairs.c.mid, att.question_id.label("qid"), att.score.label("score"),
               att.created_at.label("at"),
               func.row_number().over(partition_by=(pairs.c.aid, pairs.c.mid, att.question_id),
                                      order_by=(att.created_at, att.id)).label("rn"))
        .select_from(pairs)
        # A question whose variant the instructor picked counts an answer to that variant.
        .join(att, and_(att.learner_id == pairs.c.lid, att.question_id == pairs.c.qid,
                        att.created_at >= pairs.c.since,
                        or_(pairs.c.variant.is_(None), att.variant == pairs.c.variant)))
        # Said again as a filter on the attempts: PostgreSQL otherwise takes the pairs for a
        # few rows and sorts all the attempts (30,000 in the benchmark) for a merge join;
        # told which questions can match, it looks each pair up in the attempts' index.
        .where(att.question_id.in_(select(aq.question_id).join(a, a.id == aq.assignment_id)
                                   .where(a.class_id == class_id, a.kind != KIND_MOCK)))
        ).subquery()
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


def _mock_work(db_session: Session, class_id: int, member_id: int | None,
               now: datetime) -> dict[tuple[int, int], Work]:
    """Per (member, assignment) of the mock assignments: the mock started from it, done once
    it is over (finished, or its deadline passed), scored over its questions."""
    m, s = ClassMember, AssignmentStart
    where = [m.class_id == class_id]
    if member_id is not None:
        where.append(m.id == member_id)
    rows = db_session.connection().execute(
        select(s.assignment_id, m.id, MockInterview.finished_at, MockInterview.deadline,
               func.count(QuizItem.id), func.coalesce(func.sum(Attempt.score), 0.0),
               func.count(Attempt.id))
        .select_from(s)
        .join(m, m.learner_id == s.learner_id)
        .join(Assignment, and_(Assignment.id == s.assignment_id, Assignment.class_id == m.class_id))
        .join(MockInterview, MockInterview.quiz_id == s.quiz_id)
        .join(QuizItem, QuizItem.quiz_id == s.quiz_id)
        .outerjoin(Attempt, Attempt.quiz_item_id == QuizItem.id)
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
        # date_part, not extract: extract answers in numeric, whose arithmetic cost a third of
        # the sum over 20,000 cards.
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
    members = [ClassMember.class_id == class_id]
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
    # that an index holds a generated column, and took the other, parsing every card's JSON:
    # 50 ms for 20,000 cards instead of 28.)
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


def _mastery_apart(db_session: Session, class_id: int, now: datetime, member_id: int | None,
                   ) -> tuple[list[tuple[str, str]], dict[int, list[float]]]:
    """mastery_by_member in a session of its own, on the same database, that only reads (on
    SQLite it takes no write lock, whatever the request's session holds)."""
    bind = db_session.get_bind().execution_options(**{READ_ONLY: True})
    with Session(bind=bind) as own:
        return mastery_by_member(db_session=own, class_id=class_id, now=now, member_id=member_id)


def class_report(*, db_session: Session, classroom: Classroom, now: datetime,
                 member_id: int | None = None) -> ClassReport:
    """Everything the class page shows, for the class's current members (or one of them):
    each member's work on each assignment, completion per assignment, mastery per topic and
    who is behind. A handful of statements, whatever the class's size."""
    assignments = class_assignments(db_session=db_session, class_id=classroom.id)
    stmt = (select(ClassMember, User.username).join(User, User.id == ClassMember.user_id)
            .where(ClassMember.class_id == classroom.id))
    if member_id is not None:
        stmt = stmt.where(ClassMember.id == member_id)
    members = db_session.execute(stmt.order_by(func.lower(User.username))).all()
    # Mastery and the work are the report's two big reads and need nothing of each other, so
    # mastery runs on a second connection of its own in a pool thread meanwhile: the
    # database does the two at once (SQLite's C code lets go of the GIL while it steps, and
    # PostgreSQL runs them in two backends). Only committed rows are read, as a page does.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="class-mastery") as pool:
        mastery_read = pool.submit(_mastery_apart, db_session, classroom.id, now, member_id)
        work = _question_work(db_session, classroom.id, member_id)
        if any(a.kind == KIND_MOCK for a in assignments):
            work.update(_mock_work(db_session, classroom.id, member_id, now))
        topics, mastery = mastery_read.result()
    rows = [AssignmentRow(a) for a in assignments]
    by_member: dict[int, dict[int, Work]] = {}
    for (mid, aid), w in work.items():
        by_member.setdefault(mid, {})[aid] = w
    # Each member's status on each assignment, once (the page, the CSV and the API read them
    # from the row), counted per assignment; the assignments' attributes read once, not per
    # member.
    plan = [(a.id, a, a.opens_at, a.due_at) for a in assignments]
    counts = {aid: {STATUS_DONE: 0, STATUS_LATE: 0, STATUS_IN_PROGRESS: 0} for aid, *_ in plan}
    out = []
    for member, username in members:
        mine = by_member.get(member.id, {})
        row = MemberRow(member, username, mastery.get(member.id) or [0.0] * len(topics), mine)
        statuses = row.statuses
        for aid, a, opens_at, due_at in plan:
            st = statuses[aid] = _status(mine.get(aid), opens_at, due_at, now)
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


# Privacy ----------------------------------------------------------------------------------


def export_memberships(*, db_session: Session, user_id: int) -> list[dict[str, Any]]:
    """The account's class memberships, for its data download."""
    return [{"class": m.classroom.name, "instructor": m.instructor, "class_id": m.member.pseudonym,
             "joined_at": m.member.joined_at.isoformat()}
            for m in learner_classes(db_session=db_session, user_id=user_id)]


def forget_learner(*, db_session: Session, user_id: int, learner_ids: list[str]) -> int:
    """Take a deleted account out of every class; how many memberships it had."""
    if learner_ids:
        db_session.execute(delete(AssignmentStart).where(AssignmentStart.learner_id.in_(learner_ids)))
    gone = db_session.scalars(select(ClassMember.id).where(ClassMember.user_id == user_id)).all()
    db_session.execute(delete(ClassMember).where(ClassMember.user_id == user_id))
    return len(gone)

