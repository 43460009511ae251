"""What the question templates show, built from a document, a grade and the database: shared by
every page that asks a question (the question page, quizzes, Review, mock interviews).

No HTTP here: the views read the request and render; this decides what the page says,
so two features' views can share it without importing each other.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.errors import NotFound
from app.questions import service as questions_service
from app.questions.schema import QuestionDoc
from app.questions.service import PublishedQuestion
from app.quizzes import service
from app.quizzes.grading import MULTI_RULE, InvalidAnswer, correct_answer, parse_number, tolerance_text

# Sent with a graded htmx fragment: the header's due count (review/_me_nav.html) reloads.
ANSWERED = {"HX-Trigger": "answered"}

# A time taken longer than this is a tab left open, not time spent on the question.
MAX_TIME_TAKEN_MS = 24 * 3600 * 1000


def new_form_token() -> str:
    """A one-time token for a standalone answer form: the render time, then randomness.

    The time lets a standalone attempt store its time taken, as a quiz item does; like
    the API's time_taken_ms it is the learner's own claim, so it is only sanity-checked.
    """
    return f"{int(time.time() * 1000)}.{secrets.token_urlsafe(16)}"


def time_taken_ms(token: str | None) -> int | None:
    """Milliseconds since the form with this token was rendered, if plausible."""
    try:
        shown = int((token or "").split(".", 1)[0])
    except ValueError:
        return None
    elapsed = int(time.time() * 1000) - shown
    return elapsed if 0 <= elapsed <= MAX_TIME_TAKEN_MS else None


def question_context(doc: QuestionDoc) -> dict[str, Any]:
    """What every question template needs, without the answer key."""
    return {"doc": doc, "fmt": doc.effective_format, "multi_rule": MULTI_RULE,
            "tolerance": tolerance_text(doc) if doc.effective_format == "numeric" else ""}


def graded_context(
    doc: QuestionDoc, answer: Any, score: float, correct: bool, typed: Any = None,
) -> dict[str, Any]:
    """The graded state: now the answer key and the explanation may be shown.

    `typed` is the text the learner sent, when it was just sent: a number typed with a
    comma is graded as the page then says (1,75 -> 1.75)."""
    return {**question_context(doc), "graded": True, "answer": answer, "score": score,
            "correct": correct, "key": correct_answer(doc), "reading": _reading(doc, typed)}


def _reading(doc: QuestionDoc, typed: Any) -> str | None:
    if doc.effective_format != "numeric" or not isinstance(typed, str):
        return None
    try:
        return parse_number(typed)[1]
    except ValueError:
        return None


def read_answer(form: Any, fmt: str) -> tuple[Any, str | None]:
    """The submitted answer from a form: one key, a list of keys, or the typed number."""
    token = form.get("token")
    values = [v for v in form.getlist("answer") if isinstance(v, str)]
    if fmt == "multi":
        return values, token if isinstance(token, str) else None
    return (values[0] if values else ""), token if isinstance(token, str) else None


def published_or_404(db_session: Session, slug: str) -> PublishedQuestion:
    """The published question with this slug; NotFound otherwise."""
    question = questions_service.published_question(db_session=db_session, slug=slug)
    if question is None:
        raise NotFound(f"No question called {slug!r}.")
    return question


def topic_nav(db_session: Session, question: PublishedQuestion) -> dict[str, Any]:
    """The question's topic (for the back link) and the next question in it, if any."""
    sequence = questions_service.topic_sequence(db_session=db_session, topic=question.topic)
    in_topic = sequence.questions
    slugs = [q.slug for q in in_topic]
    position = slugs.index(question.slug) if question.slug in slugs else -1
    following = in_topic[position + 1] if 0 <= position < len(in_topic) - 1 else None
    return {"topic_title": sequence.title, "next_question": following,
            "topic_position": position + 1, "topic_count": len(in_topic)}


@dataclass
class Answered:
    """A standalone answer, graded (or refused), as its page shows it."""

    ctx: dict[str, Any]
    status: int

    @property
    def graded(self) -> bool:
        return bool(self.ctx.get("graded"))


def answer_standalone(
    *, db_session: Session, question: PublishedQuestion, learner_id: str, raw: Any,
    token: str | None, confidence: Any, now: datetime, predicting: bool = False,
) -> Answered:
    """Grade a standalone answer (the question page, or the Review page) and schedule its card.

    A replayed submission shows the first one's grade (409); an answer that is no answer
    is shown again with the reason (422). `predicting`: the learner pressed "Run it"
    before answering, so the answer is their prediction."""
    doc = question.doc
    try:
        _attempt, grade = service.answer_question(
            db_session=db_session, learner_id=learner_id, question=question, raw_answer=raw,
            token=token, time_taken_ms=time_taken_ms(token),
            confidence=service.clean_confidence(confidence), now=now)
        return Answered(graded_context(doc, grade.answer, grade.score, grade.correct, raw), 200)
    except service.AlreadyAnswered as exc:
        prior = exc.attempt
        ctx = graded_context(doc, prior.answer, prior.score, prior.correct)
        ctx["notice"] = "This answer was already submitted; the first submission counts."
        return Answered(ctx, 409)
    except InvalidAnswer as exc:
        message = f"Predict first: {exc}." if predicting else str(exc)
        return Answered({**question_context(doc), "error": message, "token": token,
                         "previous": raw, "previous_confidence": confidence}, 422)
