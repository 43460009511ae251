"""Talk-throughs marked by the class's instructor, after PrairieLearn's manual grading: a queue
of the members' talk-through answers that count for the class's assignments, each marked with
the question's rubric (the moves the answer made) and a comment for the learner. The mark
replaces the learner's own ticks on the class page and in the CSV (app.classes.class_page), and
the learner reads it on their page of the class.

Which answers: for a quiz assignment, each member's counted first answer to its talk-throughs
(class_page.counted_attempts: since the assignment opened and they joined, not claimed at
sign-in, not in a mock interview still under way); for a mock interview assignment, the
talk-throughs of the interview started from it, once it is over. Every function that depends
on the time takes `now` from the one clock (app/clock.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app import reveal
from app.accounts.models import User
from app.accounts.service import audit
from app.classes import class_page
from app.classes.models import (
    KIND_MOCK,
    Assignment,
    AssignmentQuestion,
    AssignmentStart,
    ClassMember,
    Classroom,
    TalkMark,
)
from app.classes.service import ClassError
from app.mock.models import MockInterview
from app.questions.models import Question, QuestionRevision
from app.questions.schema import QuestionDoc
from app.questions.service import revision_variant
from app.quizzes.models import Attempt, QuizItem

# A comment is a few sentences of feedback, not an essay.
MAX_COMMENT = 2000


@dataclass
class TalkAnswer:
    """A member's talk-through answer the class counts, with the instructor's mark if any."""

    attempt: Attempt
    member: ClassMember
    username: str
    assignment: Assignment
    question: Question
    doc: QuestionDoc  # the variant answered, from the revision it was answered on
    mark: TalkMark | None = None

    @property
    def text(self) -> str:
        answer = self.attempt.answer if isinstance(self.attempt.answer, dict) else {}
        return str(answer.get("text", ""))

    @property
    def self_ticked(self) -> list[int]:
        answer = self.attempt.answer if isinstance(self.attempt.answer, dict) else {}
        return [t for t in answer.get("ticked", []) if isinstance(t, int)]

    @property
    def score(self) -> float:
        """What the class counts: the instructor's mark, else the learner's own."""
        return self.mark.score if self.mark is not None else self.attempt.score


def _talk_questions(db_session: Session, classroom: Classroom) -> list[int]:
    return list(db_session.scalars(
        select(Question.id).distinct()
        .join(AssignmentQuestion, AssignmentQuestion.question_id == Question.id)
        .join(Assignment, Assignment.id == AssignmentQuestion.assignment_id)
        .where(Assignment.class_id == classroom.id, Question.type == "talk")))


def _mock_talk(db_session: Session, classroom: Classroom,
               now: datetime) -> list[tuple[int, int, int, int]]:
    """(assignment, member, question, attempt) of the talk-throughs answered in mock
    interviews started from the class's mock assignments, once each is over."""
    m, s = ClassMember, AssignmentStart
    rows = db_session.execute(
        select(s.assignment_id, m.id, Attempt.question_id, Attempt.id)
        .select_from(s)
        .join(m, m.learner_id == s.learner_id)
        .join(Assignment, Assignment.id == s.assignment_id)
        .join(MockInterview, MockInterview.quiz_id == s.quiz_id)
        .join(QuizItem, QuizItem.quiz_id == s.quiz_id)
        .join(Attempt, Attempt.quiz_item_id == QuizItem.id)
        .join(Question, Question.id == Attempt.question_id)
        .where(m.class_id == classroom.id, m.left_at.is_(None),
               Assignment.class_id == classroom.id, Assignment.kind == KIND_MOCK,
               s.started_at >= m.joined_at, Question.type == "talk",
               or_(MockInterview.finished_at.is_not(None), MockInterview.deadline <= now)))
    return [(a, mid, q, t) for a, mid, q, t in rows]


def talk_answers(*, db_session: Session, classroom: Classroom, now: datetime,
                 member_id: int | None = None) -> list[TalkAnswer]:
    """The class's talk-through answers to mark (of one member, if given): those not marked
    yet first, then by assignment and question."""
    talk = _talk_questions(db_session, classroom)
    found = (class_page.counted_attempts(db_session=db_session, class_id=classroom.id, now=now,
                                         question_ids=talk) if talk else [])
    found += _mock_talk(db_session, classroom, now)
    if member_id is not None:
        found = [f for f in found if f[1] == member_id]
    if not found:
        return []
    attempts = {a.id: a for a in db_session.scalars(
        select(Attempt).where(Attempt.id.in_({f[3] for f in found})))}
    members = {mem.id: (mem, name) for mem, name in db_session.execute(
        select(ClassMember, User.username).join(User, User.id == ClassMember.user_id)
        .where(ClassMember.id.in_({f[1] for f in found})))}
    assignments = {a.id: a for a in db_session.scalars(
        select(Assignment).where(Assignment.id.in_({f[0] for f in found})))}
    questions = {q.id: q for q in db_session.scalars(
        select(Question).where(Question.id.in_({f[2] for f in found})))}
    revisions = {r.id: r for r in db_session.scalars(
        select(QuestionRevision).where(QuestionRevision.id.in_(
            {a.revision_id for a in attempts.values()})))}
    marks = {mk.attempt_id: mk for mk in db_session.scalars(
        select(TalkMark).where(TalkMark.class_id == classroom.id,
                               TalkMark.attempt_id.in_(attempts)))}
    out: dict[int, TalkAnswer] = {}
    for aid, mid, qid, tid in found:
        attempt = attempts[tid]
        if tid in out or not isinstance(attempt.answer, dict):
            continue
        member, name = members[mid]
        doc = revision_variant(revision=revisions[attempt.revision_id], variant=attempt.variant)
        out[tid] = TalkAnswer(attempt, member, name, assignments[aid], questions[qid], doc,
                              marks.get(tid))
    return sorted(out.values(), key=lambda t: (t.mark is not None, t.assignment.due_at,
                                               t.assignment.id, t.question.title.lower(),
                                               t.username.lower(), t.attempt.id))


def talk_answer(*, db_session: Session, classroom: Classroom, attempt_id: int,
                now: datetime) -> TalkAnswer | None:
    """One of the class's talk-through answers to mark; None for any other attempt (another
    class's, a non-member's, one that does not count), as for no attempt at all."""
    return next((t for t in talk_answers(db_session=db_session, classroom=classroom, now=now)
                 if t.attempt.id == attempt_id), None)


def read_ticks(raw: list[Any], rubric_size: int) -> list[int]:
    """The rubric moves a grader ticked (form values), as sorted move numbers; ClassError
    (naming `ticked`) for anything else."""
    ticked = []
    for value in raw:
        text = str(value).strip()
        if not text.isdigit() or not 0 <= int(text) < rubric_size:
            raise ClassError(f"The rubric has moves 0 to {rubric_size - 1}; {value!r} is none of "
                             "them.", loc=("ticked",))
        ticked.append(int(text))
    if len(set(ticked)) != len(ticked):
        raise ClassError("A move was ticked twice.", loc=("ticked",))
    return sorted(ticked)


def mark(*, db_session: Session, classroom: Classroom, answer: TalkAnswer, grader: User,
         ticked: list[int], comment: str, now: datetime) -> TalkMark:
    """Mark (or mark again) an answer: the moves it made by the rubric and a comment for the
    learner; its score is the share of the rubric's moves ticked. Audited."""
    comment = comment.replace("\r\n", "\n").strip()
    if len(comment) > MAX_COMMENT:
        raise ClassError(f"A comment is at most {MAX_COMMENT} characters.", loc=("comment",))
    rubric = len(answer.doc.rubric)
    if not rubric or any(not 0 <= t < rubric for t in ticked) or len(set(ticked)) != len(ticked):
        raise ClassError(f"The rubric has moves 0 to {rubric - 1}.", loc=("ticked",))
    score = len(ticked) / rubric
    row = answer.mark or db_session.scalar(select(TalkMark).where(
        TalkMark.class_id == classroom.id, TalkMark.attempt_id == answer.attempt.id))
    if row is None:
        row = TalkMark(class_id=classroom.id, attempt_id=answer.attempt.id)
        db_session.add(row)
    row.grader_id, row.ticked, row.score, row.comment, row.marked_at = (
        grader.id, sorted(ticked), score, comment, now)
    db_session.flush()
    answer.mark = row
    audit(db_session=db_session, user=grader, action="class.talk_mark",
          target=f"class {classroom.id} attempt {answer.attempt.id}",
          detail={"ticked": sorted(ticked), "score": score,
                  "self_score": answer.attempt.score})
    return row


def next_unmarked(*, db_session: Session, classroom: Classroom, now: datetime,
                  after: int | None = None) -> TalkAnswer | None:
    """The next answer waiting for a mark (other than `after`), if any."""
    return next((t for t in talk_answers(db_session=db_session, classroom=classroom, now=now)
                 if t.mark is None and t.attempt.id != after), None)


def member_marks(*, db_session: Session, classroom: Classroom, member: ClassMember,
                 now: datetime) -> list[TalkAnswer]:
    """The member's marked answers, as they may read them: never the mark of a question of
    their live mock interview (the one rule, app/reveal.py)."""
    sight = reveal.sight(db_session=db_session, learner_id=member.learner_id, now=now)
    return [t for t in talk_answers(db_session=db_session, classroom=classroom, now=now,
                                    member_id=member.id)
            if t.mark is not None and not sight.withheld(t.question.id)]


def learner_marks(*, db_session: Session, learner_id: str,
                  withheld: set[int] | frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Every mark of this learner's answers, for their data download (none of a question in
    `withheld`: those of their live mock interview)."""
    rows = db_session.execute(
        select(TalkMark, Classroom.name, Question.slug)
        .join(Attempt, Attempt.id == TalkMark.attempt_id)
        .join(Classroom, Classroom.id == TalkMark.class_id)
        .join(Question, Question.id == Attempt.question_id)
        .where(Attempt.learner_id == learner_id, Question.id.not_in(withheld))
        .order_by(TalkMark.marked_at, TalkMark.id))
    return [{"class": name, "question": slug, "attempt_id": mk.attempt_id, "ticked": mk.ticked,
             "score": mk.score, "comment": mk.comment, "marked_at": mk.marked_at.isoformat()}
            for mk, name, slug in rows]
