"""A learner's records across every feature: claimed into an account at sign-up (or sign-in),
listed on the account page, downloaded, and deleted with the account.

It alone reads and writes every feature's learner-owned tables, so it sits above the
features, as app/models.py does; the learner identity itself is app.accounts'.

An account owns exactly one learner identity (Learner.user_id). Signing up claims the
browser's anonymous learner, so its attempts and cards become the account's; signing in
on another device uses the account's learner there and leaves that device's anonymous
history where it was (nothing is merged silently).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import CursorResult, delete, func, select, update
from sqlalchemy.orm import Session

from app import reveal
from app.accounts import service as accounts
from app.accounts.models import ROLE_LEARNER, AuditEntry, Learner, User
from app.classes import grading
from app.classes import service as classes
from app.db import utcnow
from app.exercises.models import ExerciseSubmission
from app.mock.models import MockInterview
from app.progress.models import LearnerGoal
from app.questions.models import Question
from app.quizzes.models import SLOT_STANDALONE, Attempt, PartialAnswer, Quiz, QuizItem
from app.ratelimit import RateHit
from app.reports.models import ProblemReport
from app.review.models import LearnerSchedule, ReviewCard, ReviewLog, ScheduleFit
from app.verify.models import Run


@dataclass
class History:
    attempts: list[tuple[Attempt, str]]
    attempt_count: int
    card_count: int
    # Questions of the learner's live mock interview: their answers' grades are withheld.
    withheld: set[int] = field(default_factory=set)


def history(*, db_session: Session, learner_id: str, now: datetime, limit: int = 20) -> History:
    """The learner's newest answers (with the question's slug) and how many answers and
    review cards they have; the grades of the questions of their live mock interview are
    withheld (the one rule, app/reveal.py)."""
    rows = db_session.execute(
        select(Attempt, Question.slug).join(Question, Question.id == Attempt.question_id)
        .where(Attempt.learner_id == learner_id)
        .order_by(Attempt.created_at.desc(), Attempt.id.desc()).limit(limit))
    attempts = [(a, slug) for a, slug in rows]
    total = int(db_session.scalar(select(func.count()).select_from(Attempt)
                                  .where(Attempt.learner_id == learner_id)) or 0)
    cards = int(db_session.scalar(select(func.count()).select_from(ReviewCard)
                                  .where(ReviewCard.learner_id == learner_id)) or 0)
    live = reveal.live_mock_items(db_session=db_session, learner_id=learner_id, now=now)
    return History(attempts, total, cards, set(live))


@dataclass
class SignUp:
    user: User
    learner_id: str
    claimed_attempts: int


def sign_up(*, db_session: Session, username: str, password: str, browser_learner_id: str,
            client_ip: str, per_hour: int) -> SignUp:
    """A new learner account, with the browser's anonymous history moved into it.

    Raises accounts.AccountError for a bad or taken name or a short password, and
    RateLimited past `per_hour` sign-ups from one address.
    """
    accounts.check_signup_rate(db_session=db_session, client_ip=client_ip, limit=per_hour)
    user = accounts.create_user(db_session=db_session, username=username, password=password,
                                role=ROLE_LEARNER, via="signup")
    learner_id = accounts.account_learner_id(db_session=db_session, user_id=user.id)
    claimed = move_history(db_session=db_session, from_id=browser_learner_id, into_id=learner_id)
    accounts.audit(db_session=db_session, user=user, action="learner.signup",
                   target=user.username, detail={"ip": client_ip, "claimed_attempts": claimed})
    return SignUp(user, learner_id, claimed)


def claim_on_sign_in(*, db_session: Session, user: User, browser_learner_id: str) -> int:
    """Move this browser's anonymous history into a learner account that just signed in;
    how many attempts moved."""
    into = accounts.account_learner_id(db_session=db_session, user_id=user.id)
    moved = move_history(db_session=db_session, from_id=browser_learner_id, into_id=into)
    if moved:
        accounts.audit(db_session=db_session, user=user, action="learner.claim",
                       target=user.username, detail={"claimed_attempts": moved})
    return moved


# Tables whose rows belong to one learner (learner_id), moved as they are.
_OWNED = (Attempt, Quiz, ProblemReport, MockInterview, ReviewLog, ExerciseSubmission)


def move_history(*, db_session: Session, from_id: str, into_id: str) -> int:
    """Give everything of anonymous learner `from_id` to `into_id` and empty `from_id`;
    how many attempts moved.

    An identity an account owns is never emptied this way (only anonymous ones are).
    Where both have a review card for one question, the card reviewed last is kept and the
    other's review log joins it, so the history behind the schedule survives.
    """
    source = db_session.get(Learner, from_id)
    if from_id == into_id or source is None or source.user_id is not None:
        return 0
    moved = int(db_session.scalar(select(func.count()).select_from(Attempt)
                                  .where(Attempt.learner_id == from_id)) or 0)
    theirs = {c.question_id: c for c in db_session.scalars(
        select(ReviewCard).where(ReviewCard.learner_id == into_id))}
    for card in db_session.scalars(select(ReviewCard).where(ReviewCard.learner_id == from_id)).all():
        kept = theirs.get(card.question_id)
        if kept is None:
            card.learner_id = into_id
            continue
        newer, older = (card, kept) if _reviewed_later(card, kept) else (kept, card)
        db_session.execute(update(ReviewLog).where(ReviewLog.card_id == older.id)
                           .values(card_id=newer.id))
        db_session.delete(older)
        db_session.flush()
        newer.learner_id = into_id
    # Answers given signed out are the account's history, never a class's work: marked claimed
    # (a class counts only what the account answered itself; app.classes.class_page).
    db_session.execute(update(Attempt).where(Attempt.learner_id == from_id)
                       .values(claimed_at=utcnow()))
    for model in _OWNED:
        db_session.execute(update(model).where(model.learner_id == from_id)
                           .values(learner_id=into_id))
    # A case or talk-through under way moves too, unless the account has one of the same
    # question under way already: that one, the account's own, is kept.
    busy = select(PartialAnswer.question_id).where(PartialAnswer.learner_id == into_id,
                                                   PartialAnswer.slot == SLOT_STANDALONE)
    db_session.execute(delete(PartialAnswer).where(PartialAnswer.learner_id == from_id,
                                                   PartialAnswer.slot == SLOT_STANDALONE,
                                                   PartialAnswer.question_id.in_(busy)))
    db_session.execute(update(PartialAnswer).where(PartialAnswer.learner_id == from_id)
                       .values(learner_id=into_id))
    if db_session.get(LearnerGoal, into_id) is None:
        db_session.execute(update(LearnerGoal).where(LearnerGoal.learner_id == from_id)
                           .values(learner_id=into_id))
    else:
        db_session.execute(delete(LearnerGoal).where(LearnerGoal.learner_id == from_id))
    # The account's own schedule wins; an anonymous one it did not have comes along. Fitted
    # weights stay with the log they were fitted to: the next weekly refit reads the merge.
    if db_session.get(LearnerSchedule, into_id) is None:
        db_session.execute(update(LearnerSchedule).where(LearnerSchedule.learner_id == from_id)
                           .values(learner_id=into_id))
    else:
        db_session.execute(delete(LearnerSchedule).where(LearnerSchedule.learner_id == from_id))
    db_session.execute(delete(ScheduleFit).where(ScheduleFit.learner_id == from_id))
    db_session.execute(update(Run).where(Run.requested_by == f"learner:{from_id}")
                       .values(requested_by=f"learner:{into_id}"))
    db_session.delete(source)
    db_session.flush()
    return moved


def _reviewed_later(a: ReviewCard, b: ReviewCard) -> bool:
    return (a.last_review or a.due) >= (b.last_review or b.due)


def _deleted(db_session: Session, stmt: Any) -> int:
    result: CursorResult[Any] = db_session.execute(stmt)  # type: ignore[assignment]
    return int(result.rowcount or 0)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _attempt_out(a: Attempt, slugs: dict[int, str], withheld: bool) -> dict[str, Any]:
    out = {"id": a.id, "question": slugs.get(a.question_id), "revision_id": a.revision_id,
           "variant": a.variant, "answer": a.answer, "score": a.score, "correct": a.correct,
           "confidence": a.confidence, "time_taken_ms": a.time_taken_ms,
           "quiz_item_id": a.quiz_item_id, "created_at": _iso(a.created_at)}
    if withheld:
        out.update(answer=None, score=None, correct=None, withheld=reveal.WITHHELD)
    return out


def export_data(*, db_session: Session, user: User, learner_id: str,
                now: datetime) -> dict[str, Any]:
    """Everything stored about the learner, as JSON-ready data (the "Download my data" file).
    While a mock interview is under way, the answers to its questions (and their grades) are
    withheld, marked so, until it is over (the one rule, app/reveal.py)."""
    live = reveal.live_mock_items(db_session=db_session, learner_id=learner_id, now=now)
    slugs = dict(db_session.execute(select(Question.id, Question.slug)).all())
    attempts = db_session.scalars(select(Attempt).where(Attempt.learner_id == learner_id)
                                  .order_by(Attempt.created_at, Attempt.id))
    cards = db_session.scalars(select(ReviewCard).where(ReviewCard.learner_id == learner_id)
                               .order_by(ReviewCard.id))
    logs = db_session.scalars(select(ReviewLog).where(ReviewLog.learner_id == learner_id)
                              .order_by(ReviewLog.reviewed_at, ReviewLog.id))
    reports = db_session.scalars(select(ProblemReport).where(ProblemReport.learner_id == learner_id)
                                 .order_by(ProblemReport.created_at, ProblemReport.id))
    quizzes = db_session.scalars(select(Quiz).where(Quiz.learner_id == learner_id)
                                 .order_by(Quiz.started_at))
    return {
        "format": "ddpdrill-learner-export/1",
        "account": {"username": user.username, "role": user.role,
                    "created_at": _iso(user.created_at)},
        "learner_id": learner_id,
        "attempts": [_attempt_out(a, slugs, a.question_id in live) for a in attempts],
        "review_cards": [{"id": c.id, "question": slugs.get(c.question_id), "due": _iso(c.due),
                          "reps": c.reps, "last_review": _iso(c.last_review), "fsrs": c.card}
                         for c in cards],
        "review_logs": [{"card_id": g.card_id, "attempt_id": g.attempt_id, "rating": g.rating,
                         "reviewed_at": _iso(g.reviewed_at), "fsrs": g.log} for g in logs],
        "problem_reports": [{"id": r.id, "question": slugs.get(r.question_id),
                             "revision_id": r.revision_id, "variant": r.variant, "kind": r.kind,
                             "comment": r.comment,
                             "status": r.status, "note": r.note, "created_at": _iso(r.created_at),
                             "handled_at": _iso(r.handled_at)} for r in reports],
        "mock_interviews": [{"id": m.quiz_id, "minutes": m.minutes,
                             "started_at": _iso(m.started_at), "deadline": _iso(m.deadline),
                             "finished_at": _iso(m.finished_at), "shared": m.share_token is not None}
                            for m in db_session.scalars(select(MockInterview).where(
                                MockInterview.learner_id == learner_id))],
        "schedule": next(({"desired_retention": sc.desired_retention, "parameters": sc.parameters,
                           "fitted_at": _iso(sc.fitted_at), "fitted_reviews": sc.fitted_reviews,
                           "fitted_loss": sc.fitted_loss, "default_loss": sc.default_loss,
                           "optimal_retention": sc.optimal_retention}
                          for sc in [db_session.get(LearnerSchedule, learner_id)] if sc), None),
        "schedule_fits": [{"reason": f.reason, "status": f.status, "outcome": f.outcome,
                           "reviews": f.reviews, "eligible": f.eligible, "seconds": f.seconds,
                           "requested_at": _iso(f.requested_at), "finished_at": _iso(f.finished_at),
                           "note": f.failure_reason}
                          for f in db_session.scalars(select(ScheduleFit).where(
                              ScheduleFit.learner_id == learner_id).order_by(ScheduleFit.requested_at,
                                                                             ScheduleFit.id))],
        "interview_goal": next(({"interview_date": g.interview_date.isoformat()
                                 if g.interview_date else None, "target": g.target}
                                for g in [db_session.get(LearnerGoal, learner_id)] if g), None),
        "exercise_submissions": [
            {"question": slugs.get(e.question_id), "passed": e.passed, "gave_up": e.gave_up,
             "created_at": _iso(e.created_at)}
            for e in db_session.scalars(select(ExerciseSubmission).where(
                ExerciseSubmission.learner_id == learner_id).order_by(ExerciseSubmission.id))],
        "quizzes": [{"id": q.id, "kind": q.kind, "topics": q.topics, "difficulty": q.difficulty,
                     "started_at": _iso(q.started_at), "finished_at": _iso(q.finished_at)}
                    for q in quizzes],
        "class_memberships": classes.export_memberships(db_session=db_session, user_id=user.id),
        # Instructors' marks of the learner's talk-through answers, with their comments.
        "talk_marks": grading.learner_marks(db_session=db_session, learner_id=learner_id,
                                            withheld=set(live)),
        # Cases and talk-throughs begun but not finished: the parts (or the text) so far.
        "answers_in_progress": [{"question": slugs.get(p.question_id), "revision_id": p.revision_id,
                                 "variant": p.variant, "quiz_item_id": p.quiz_item_id,
                                 "answer": None if p.question_id in live else p.state,
                                 "started_at": _iso(p.created_at)}
                                for p in db_session.scalars(select(PartialAnswer).where(
                                    PartialAnswer.learner_id == learner_id)
                                    .order_by(PartialAnswer.created_at, PartialAnswer.id))],
    }


def delete_account(*, db_session: Session, user: User) -> dict[str, int]:
    """Delete a learner account and everything of its learner: attempts, review cards and
    logs, their FSRS schedule and fits, problem reports, quizzes, class memberships, and its
    sessions (the user row goes, so every session cookie names nobody). Other learners' rows
    are untouched. Returns what was removed."""
    learner_ids = list(db_session.scalars(select(Learner.id).where(Learner.user_id == user.id)))
    counts = {"attempts": 0, "review_cards": 0, "review_logs": 0, "problem_reports": 0,
              "quizzes": 0, "mock_interviews": 0}
    # First: a membership refers to the learner row, and the class must stop showing it.
    counts["class_memberships"] = classes.forget_learner(db_session=db_session, user_id=user.id,
                                                         learner_ids=learner_ids)
    if learner_ids:
        mine = Learner.id.in_(learner_ids)
        quiz_ids = select(Quiz.id).where(Quiz.learner_id.in_(learner_ids))
        counts["review_logs"] = _deleted(
            db_session, delete(ReviewLog).where(ReviewLog.learner_id.in_(learner_ids)))
        counts["review_cards"] = _deleted(
            db_session, delete(ReviewCard).where(ReviewCard.learner_id.in_(learner_ids)))
        counts["problem_reports"] = _deleted(
            db_session, delete(ProblemReport).where(ProblemReport.learner_id.in_(learner_ids)))
        db_session.execute(delete(PartialAnswer).where(PartialAnswer.learner_id.in_(learner_ids)))
        counts["attempts"] = _deleted(
            db_session, delete(Attempt).where(Attempt.learner_id.in_(learner_ids)))
        counts["mock_interviews"] = _deleted(
            db_session, delete(MockInterview).where(MockInterview.learner_id.in_(learner_ids)))
        db_session.execute(delete(LearnerGoal).where(LearnerGoal.learner_id.in_(learner_ids)))
        db_session.execute(delete(ExerciseSubmission).where(
            ExerciseSubmission.learner_id.in_(learner_ids)))
        db_session.execute(delete(LearnerSchedule).where(LearnerSchedule.learner_id.in_(learner_ids)))
        db_session.execute(delete(ScheduleFit).where(ScheduleFit.learner_id.in_(learner_ids)))
        db_session.execute(delete(RateHit).where(RateHit.bucket == "fsrs-fit",
                                                 RateHit.key.in_(learner_ids)))
        db_session.execute(delete(QuizItem).where(QuizItem.quiz_id.in_(quiz_ids)))
        counts["quizzes"] = _deleted(
            db_session, delete(Quiz).where(Quiz.learner_id.in_(learner_ids)))
        # Verify runs are a shared cache: keep the run, forget who asked for it.
        db_session.execute(update(Run).where(Run.requested_by.in_(
            [f"learner:{lid}" for lid in learner_ids])).values(requested_by=None))
        db_session.execute(delete(Learner).where(mine))
    # The audit log keeps what happened, not who: the entries lose their link to the person.
    db_session.execute(update(AuditEntry).where(AuditEntry.user_id == user.id)
                       .values(user_id=None, actor="deleted-learner"))
    db_session.execute(update(AuditEntry).where(AuditEntry.actor == user.username)
                       .values(actor="deleted-learner"))
    failed = RateHit.key.startswith(f"{user.username.lower()}:", autoescape=True)
    db_session.execute(delete(RateHit).where(RateHit.bucket == "login", failed))
    db_session.execute(delete(User).where(User.id == user.id))
    db_session.expunge(user)
    accounts.audit(db_session=db_session, user=None, actor="deleted-learner",
                   action="learner.delete", detail=counts)
    return counts
