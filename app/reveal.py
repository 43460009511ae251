"""The one rule for when an answer key or a measurement may reach a learner, and what a learner
may answer where. Every page, fragment, API route, run page and export asks it here
(docs/architecture.md lists them; tests/test_reveal_matrix.py tries every one, as every role,
and fails when a route that can show a key, a run or a solution is not tried).

A key, an explanation, a grade or a measured value of a question reaches a learner only once
they have answered it (that variant; for a case, that part), and never while the question is an
item of their live mock interview (one not finished whose deadline has not passed): not on an
earlier quiz's page, an earlier mock's report, Review, the dashboard, the account page, the data
download or a class page. Authors and admins see everything. A question of a live mock is
answered only in that mock: anywhere else the answer is refused (InLiveMock, 409), so its grade
and key cannot come back early. And the variant is the server's: an answer to another variant
than the one drawn for the learner is refused (NotDrawn, 409, naming the drawn one).

It sits below the features (it reads their tables, never their services), so that every
feature's service can ask it. Time is the caller's `now`, from the app's one clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, and_, bindparam, exists, select, tuple_
from sqlalchemy.orm import Session

from app.errors import Conflict
from app.mock.models import MockInterview
from app.quizzes.models import Attempt, QuizItem

# What a page says where a key, an explanation or a grade is withheld by the live mock.
WITHHELD = ("This question is in your mock interview under way: its key, its explanation, your "
            "grade and its runs come back once the interview is over.")
# ... and where a learner has not answered the question (that variant) yet.
NOT_ANSWERED = "Not answered: its key and explanation show once you have answered it yourself."


class InLiveMock(Conflict):
    """The question is an item of the learner's mock interview under way: it is answered there,
    and nothing of its key comes back anywhere else until the interview is over."""

    def __init__(self, mock_id: str) -> None:
        super().__init__("This question is in your mock interview under way: answer it there. "
                         "Its key and runs come back once the interview is over.")
        self.mock_id = mock_id


class NotDrawn(Conflict):
    """An answer to another variant than the one the server drew for this learner."""

    def __init__(self, drawn: int, sent: int) -> None:
        super().__init__(f"This question is drawn for you as variant {drawn}, not {sent}: "
                         f"answer variant {drawn}.")
        self.drawn = drawn


def _live(now: datetime | BindParameter[datetime]) -> ColumnElement[bool]:
    return and_(MockInterview.finished_at.is_(None), MockInterview.deadline > now)


# Built once and run on the session's connection: every answer asks it.
_LIVE_MOCK_ITEMS = (select(QuizItem.question_id, MockInterview.quiz_id)
                    .join(MockInterview, MockInterview.quiz_id == QuizItem.quiz_id)
                    .where(MockInterview.learner_id == bindparam("learner_id"),
                           _live(bindparam("now"))))


def live_mock_items(*, db_session: Session, learner_id: str, now: datetime) -> dict[int, str]:
    """The questions of the learner's live mock interviews: question id -> mock (quiz) id."""
    rows = db_session.connection().execute(_LIVE_MOCK_ITEMS, {"learner_id": learner_id,
                                                              "now": now})
    return {question_id: mock_id for question_id, mock_id in rows}


def in_live_mock(*, db_session: Session, learner_id: str, question_id: int,
                 now: datetime) -> str | None:
    """The id of the learner's live mock interview that asks this question, if any."""
    return live_mock_items(db_session=db_session, learner_id=learner_id,
                           now=now).get(question_id)


def given_in_live_mock(quiz_item_id: Any, now: datetime) -> ColumnElement[bool]:
    """SQL: the attempt with this quiz item was given in a mock interview still under way. Its
    grade counts nowhere (a dashboard's numbers, a class's work) until the interview is over."""
    return exists(select(QuizItem.id)
                  .join(MockInterview, MockInterview.quiz_id == QuizItem.quiz_id)
                  .where(QuizItem.id == quiz_item_id, _live(now)))


@dataclass(frozen=True)
class Sight:
    """What of its questions' keys one visitor may see now: everything for an author or admin;
    for a learner, nothing of a question of their live mock interview."""

    learner_id: str
    staff: bool = False
    live: Mapping[int, str] = field(default_factory=dict)  # question id -> live mock id

    def withheld(self, question_id: int) -> bool:
        """True while this question's key, explanation and grades are kept from the visitor."""
        return not self.staff and question_id in self.live


def sight(*, db_session: Session, learner_id: str, now: datetime,
          is_staff: bool = False) -> Sight:
    """The visitor's sight now (one query; none for staff)."""
    if is_staff:
        return Sight(learner_id, staff=True)
    return Sight(learner_id, live=live_mock_items(db_session=db_session, learner_id=learner_id,
                                                  now=now))


def guard_answer(*, db_session: Session, learner_id: str, question_id: int, now: datetime,
                 quiz_id: str | None = None) -> None:
    """Refuse (InLiveMock) an answer given outside the live mock interview that asks this
    question (`quiz_id`: the quiz or mock the answer is given in, None for none)."""
    mock_id = in_live_mock(db_session=db_session, learner_id=learner_id,
                           question_id=question_id, now=now)
    if mock_id is not None and mock_id != quiz_id:
        raise InLiveMock(mock_id)


def guard_variant(*, drawn: int, sent: int) -> None:
    """Refuse (NotDrawn) an answer to another variant than the one drawn."""
    if sent != drawn:
        raise NotDrawn(drawn, sent)


def answered(*, db_session: Session, learner_id: str, question_id: int,
             variant: int | None = None) -> bool:
    """Whether the learner has answered the question (this variant, when given)."""
    stmt = select(Attempt.id).where(Attempt.learner_id == learner_id,
                                    Attempt.question_id == question_id)
    if variant is not None:
        stmt = stmt.where(Attempt.variant == variant)
    return db_session.scalar(stmt.limit(1)) is not None


def answered_variants(*, db_session: Session, learner_id: str,
                      pairs: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """Which of these (question id, variant) pairs the learner has answered (one query)."""
    wanted = set(pairs)
    if not wanted:
        return set()
    rows = db_session.execute(
        select(Attempt.question_id, Attempt.variant).distinct()
        .where(Attempt.learner_id == learner_id,
               tuple_(Attempt.question_id, Attempt.variant).in_(sorted(wanted))))
    return {(q, v) for q, v in rows}


def may_reveal(*, db_session: Session, learner_id: str, question_id: int, now: datetime,
               variant: int | None = None, is_staff: bool = False) -> bool:
    """Whether this question's key and measurements (of this variant, when given) may reach
    this visitor now: an author or admin always; a learner once they answered it, and never
    while it is an item of their live mock interview."""
    if is_staff:
        return True
    if in_live_mock(db_session=db_session, learner_id=learner_id, question_id=question_id,
                    now=now) is not None:
        return False
    return answered(db_session=db_session, learner_id=learner_id, question_id=question_id,
                    variant=variant)
