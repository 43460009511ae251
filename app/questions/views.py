"""Learner pages: home, topics, and a question practised on its own."""

from __future__ import annotations

import secrets
import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from starlette.datastructures import FormData

from app.deps import CSRF, CommittingRoute, CurrentLearner, FormDep, SessionDep, is_htmx
from app.practice.grading import MULTI_RULE, InvalidAnswer, correct_answer, tolerance_text
from app.practice.service import AlreadyAnswered, answer_question
from app.questions import service
from app.questions.models import Question
from app.questions.schema import QuestionDoc
from app.templating import templates
from app.verify.service import latest_verdict

router = APIRouter(include_in_schema=False, route_class=CommittingRoute)

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


def graded_context(doc: QuestionDoc, answer: Any, score: float, correct: bool) -> dict[str, Any]:
    """The graded state: now the answer key and the explanation may be shown."""
    return {**question_context(doc), "graded": True, "answer": answer, "score": score,
            "correct": correct, "key": correct_answer(doc)}


def read_answer(form: FormData, fmt: str) -> tuple[Any, str | None]:
    """The submitted answer from a form: one key, a list of keys, or the typed number."""
    token = form.get("token")
    values = [v for v in form.getlist("answer") if isinstance(v, str)]
    if fmt == "multi":
        return values, token if isinstance(token, str) else None
    return (values[0] if values else ""), token if isinstance(token, str) else None


@router.get("/")
def home(request: Request, db_session: SessionDep) -> Response:
    summaries = service.topic_summaries(db_session=db_session)
    total = sum(s.count for s in summaries)
    return templates.TemplateResponse(
        request, "questions/home.html", {"summaries": summaries, "total": total}
    )


@router.get("/topics/{slug}")
def topic_page(request: Request, slug: str, db_session: SessionDep) -> Response:
    topic = service.get_topic(db_session=db_session, slug=slug)
    if topic is None:
        raise HTTPException(404, f"No topic called {slug!r}.")
    questions = service.list_published(db_session=db_session, topics=[slug])
    return templates.TemplateResponse(
        request, "questions/topic.html", {"topic": topic, "questions": questions}
    )


def _published_or_404(db_session: Any, slug: str) -> Question:
    question = service.get_published(db_session=db_session, slug=slug)
    if question is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    return question


@router.get("/questions/{slug}")
def question_page(request: Request, slug: str, db_session: SessionDep) -> Response:
    question = _published_or_404(db_session, slug)
    assert question.current_revision is not None
    doc = service.revision_doc(question.current_revision)
    ctx = {**question_context(doc), "question": question, "token": new_form_token(),
           "action": f"/questions/{slug}/answer", "revision_id": question.current_revision.id,
           "verdict": latest_verdict(db_session=db_session, revision_id=question.current_revision.id)}
    return templates.TemplateResponse(request, "questions/question.html", ctx)


@router.post("/questions/{slug}/answer")
def answer_page(
    request: Request, slug: str, db_session: SessionDep, learner_id: CurrentLearner, _: CSRF, form: FormDep
) -> Response:
    question = _published_or_404(db_session, slug)
    assert question.current_revision is not None
    doc = service.revision_doc(question.current_revision)
    raw, token = read_answer(form, doc.effective_format)
    base = {"question": question, "action": f"/questions/{slug}/answer"}
    try:
        _attempt, grade = answer_question(db_session=db_session, learner_id=learner_id,
                                         question=question, raw_answer=raw, token=token,
                                         time_taken_ms=time_taken_ms(token))
        ctx = {**base, **graded_context(doc, grade.answer, grade.score, grade.correct)}
        status = 200
    except AlreadyAnswered as exc:
        prior = exc.attempt
        ctx = {**base, **graded_context(doc, prior.answer, prior.score, prior.correct),
               "notice": "This answer was already submitted; the first submission counts."}
        status = 409
    except InvalidAnswer as exc:
        ctx = {**base, **question_context(doc), "error": str(exc), "token": token,
               "previous": raw}
        status = 422
    if is_htmx(request):
        # The graded fragment also swaps the Verify panel (out of band) into its answered form.
        ctx["oob_panel"] = True
        return templates.TemplateResponse(request, "questions/_answer_area.html", ctx,
                                          status_code=status)
    return templates.TemplateResponse(request, "questions/question.html", ctx, status_code=status)
