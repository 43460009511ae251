"""A class's assignments: what the instructor may ask for, the questions fixed when it is
made, and starting one (the member's quiz or mock interview of it).

Every function that depends on the time takes `now` from the one clock (app/clock.py).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    func,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

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
from app.classes.service import MAX_NAME, ClassError
from app.errors import Conflict
from app.mock import service as mock
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision, Topic
from app.questions.service import SAMPLE_SLUGS, revision_doc, revision_variant
from app.questions.values import describe_variant
from app.quizzes.models import Attempt, Quiz, QuizItem
from app.quizzes.service import MAX_QUIZ_QUESTIONS, item_variant

# A class page lists every member and every assignment; past this it is a course platform.
MAX_ASSIGNMENTS = 100
# A topic quiz asks this many of its topics' questions unless the instructor says otherwise.
DEFAULT_QUIZ_LENGTH = 5
# A set of exercises longer than this is several assignments.
MAX_EXERCISES = 20


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
        .where(Question.status == STATUS_PUBLISHED, Question.current_revision_id.is_not(None),
               Question.slug.not_in(SAMPLE_SLUGS))
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


def topic_titles(*, db_session: Session, quizzable: bool = False) -> list[tuple[str, str]]:
    """(slug, title) of every topic with a published question (with `quizzable`, a question a
    quiz can ask: not an exercise), in the bank's order."""
    published = select(Question.topic).where(Question.status == STATUS_PUBLISHED)
    if quizzable:
        published = published.where(Question.type != "exercise")
    rows = db_session.execute(
        select(Topic.slug, Topic.title).where(Topic.slug.in_(published))
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
               # The home page's sample run is public: never graded work.
               Question.slug.not_in(SAMPLE_SLUGS), *where)
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
