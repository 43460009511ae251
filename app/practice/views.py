"""Practice pages: a question on its own (answer it, see the key), quizzes (start, one
question at a time, the summary), the Review page (due FSRS cards one at a time), problem
reports (file one, "my reports"), and the authors' report inbox under /author/reports."""

from __future__ import annotations

import secrets
import time
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Depends, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from app.clock import Clock
from app.deps import (
    CSRF,
    AuthorUser,
    ClockDep,
    CommittingRoute,
    CurrentLearner,
    FormDep,
    OptionalUser,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    client_ip,
    is_htmx,
    notify_workers,
    require_author,
)
from app.errors import RateLimited
from app.practice import reports, review, service
from app.practice.grading import (
    MULTI_RULE,
    InvalidAnswer,
    correct_answer,
    parse_number,
    tolerance_text,
)
from app.practice.models import Quiz, QuizItem
from app.questions import service as questions_service
from app.questions.schema import QUESTION_TYPES, QuestionDoc
from app.questions.service import PublishedQuestion
from app.settings import Settings
from app.templating import templates
from app.verify import access, knobs
from app.verify.models import RUN_DONE
from app.verify.service import latest_verdict

router = APIRouter(include_in_schema=False, route_class=CommittingRoute)
inbox = APIRouter(prefix="/author/reports", include_in_schema=False,
                  dependencies=[Depends(require_author)], route_class=CommittingRoute)


# Sent with a graded htmx fragment: the header's due count (practice/_me_nav.html) reloads.
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


def read_answer(form: FormData, fmt: str) -> tuple[Any, str | None]:
    """The submitted answer from a form: one key, a list of keys, or the typed number."""
    token = form.get("token")
    values = [v for v in form.getlist("answer") if isinstance(v, str)]
    if fmt == "multi":
        return values, token if isinstance(token, str) else None
    return (values[0] if values else ""), token if isinstance(token, str) else None


def _published_or_404(db_session: Session, slug: str) -> PublishedQuestion:
    question = questions_service.published_question(db_session=db_session, slug=slug)
    if question is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    return question


def _topic_nav(db_session: Session, question: PublishedQuestion) -> dict[str, Any]:
    """The question's topic (for the back link) and the next question in it, if any."""
    sequence = questions_service.topic_sequence(db_session=db_session, topic=question.topic)
    in_topic = sequence.questions
    slugs = [q.slug for q in in_topic]
    position = slugs.index(question.slug) if question.slug in slugs else -1
    following = in_topic[position + 1] if 0 <= position < len(in_topic) - 1 else None
    return {"topic_title": sequence.title, "next_question": following,
            "topic_position": position + 1, "topic_count": len(in_topic)}


@router.get("/questions/{slug}")
def question_page(
    request: Request, slug: str, db_session: SessionDep, learner_id: CurrentLearner,
) -> Response:
    question = _published_or_404(db_session, slug)
    doc = question.doc
    if doc.is_exercise:
        # An exercise is answered by writing code, on its own page.
        return RedirectResponse(f"/exercises/{slug}", status_code=303)
    ctx = {**question_context(doc), **_topic_nav(db_session, question), "question": question,
           "token": new_form_token(),
           # Someone who has answered before has made their prediction: Verify is open.
           "answered_before": service.has_answered(db_session=db_session, learner_id=learner_id,
                                                   question_id=question.id),
           "action": f"/questions/{slug}/answer", "revision_id": question.revision_id,
           "report_action": f"/questions/{slug}/report",
           "verdict": latest_verdict(db_session=db_session, revision_id=question.revision_id)}
    return templates.TemplateResponse(request, "questions/question.html", ctx)


def _predicted_run(
    request: Request, background: BackgroundTasks, settings: Settings, db_session: Session,
    learner_id: str, doc: QuestionDoc, form: FormData,
) -> dict[str, Any]:
    """Run it after a prediction: the run's panel context, or the reason it could not start."""
    assert doc.verify is not None
    try:
        run, cached = access.start_run(
            db_session=db_session, slug=doc.slug, params=knobs.from_form(doc.verify, form),
            learner_id=learner_id, client_ip=client_ip(request),
            limit_per_minute=settings.verify_rate_per_minute)
    except (knobs.InvalidKnob, RateLimited) as exc:
        return {"run_error": str(exc)}
    if run.status != RUN_DONE:
        background.add_task(notify_workers, request)
    panel = access.run_panel(db_session=db_session, run=run, learner_id=learner_id,
                             slug=doc.slug, prev_id=None)
    return {"first_run": {**panel.context(), "cached": cached, "prev_id": None}}


@router.post("/questions/{slug}/answer")
def answer_page(
    request: Request, slug: str, form: FormDep, background: BackgroundTasks, db_session: SessionDep,
    settings: SettingsDep, learner_id: CurrentLearner, clock: ClockDep, _: CSRF,
) -> Response:
    return _answer_standalone(request, slug, form, db_session, learner_id, clock,
                              action=f"/questions/{slug}/answer", page="questions/question.html",
                              run_with=(background, settings))


def _answer_standalone(
    request: Request, slug: str, form: FormData, db_session: Session, learner_id: str,
    clock: Clock, *, action: str, page: str, extra: dict[str, Any] | None = None,
    run_with: tuple[BackgroundTasks, Settings] | None = None,
) -> Response:
    """Grade a standalone answer (the question page, or the Review page) and schedule its card."""
    question = _published_or_404(db_session, slug)
    doc = question.doc
    raw, token = read_answer(form, doc.effective_format)
    base = {"question": question, "action": action, "revision_id": question.revision_id,
            "report_action": f"/questions/{slug}/report", **_topic_nav(db_session, question),
            **(extra or {})}
    # "Run it" before answering (the question page only): the answer is the learner's
    # prediction, graded first, then the run starts.
    then_run = run_with is not None and (
        form.get("then_run") == "1" or request.query_params.get("then_run") == "1")
    try:
        _attempt, grade = service.answer_question(
            db_session=db_session, learner_id=learner_id, question=question, raw_answer=raw,
            token=token, time_taken_ms=time_taken_ms(token),
            confidence=service.clean_confidence(form.get("confidence")), now=clock.now())
        ctx = {**base, **graded_context(doc, grade.answer, grade.score, grade.correct, raw)}
        status = 200
    except service.AlreadyAnswered as exc:
        prior = exc.attempt
        ctx = {**base, **graded_context(doc, prior.answer, prior.score, prior.correct),
               "notice": "This answer was already submitted; the first submission counts."}
        status = 409
    except InvalidAnswer as exc:
        message = f"Predict first: {exc}." if then_run else str(exc)
        ctx = {**base, **question_context(doc), "error": message, "token": token,
               "previous": raw, "previous_confidence": form.get("confidence")}
        status = 422
    if then_run and run_with is not None and ctx.get("graded") and doc.verify is not None:
        ctx["predicted"] = True
        ctx.update(_predicted_run(request, *run_with, db_session, learner_id, doc, form))
    if is_htmx(request):
        # The graded fragment also swaps the Verify panel (out of band) into its answered form.
        ctx["oob_panel"] = True
        return templates.TemplateResponse(request, "questions/_answer_area.html", ctx,
                                          status_code=status, headers=ANSWERED if status == 200 else None)
    return templates.TemplateResponse(request, page, ctx, status_code=status)


# Quizzes ------------------------------------------------------------------------------

# The quiz form offers these lengths; anything in 1..MAX_QUIZ_QUESTIONS is accepted.
DEFAULT_QUIZ_LENGTH = 5


def _int_or_none(value: Any, name: str, lo: int, hi: int) -> int | None:
    if value in (None, "", "any"):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise HTTPException(422, f"{name} must be a whole number") from None
    if not lo <= n <= hi:
        raise HTTPException(422, f"{name} must be between {lo} and {hi}")
    return n


@router.post("/quizzes")
def start_quiz(
    request: Request, form: FormDep, db_session: SessionDep, learner_id: CurrentLearner, _: CSRF
) -> Response:
    topics = [t for t in form.getlist("topics") if isinstance(t, str) and t]
    known = {s.topic.slug for s in questions_service.topic_summaries(db_session=db_session)}
    unknown = [t for t in topics if t not in known]
    if unknown:
        raise HTTPException(422, f"Unknown topic: {', '.join(unknown)}")
    difficulty = _int_or_none(form.get("difficulty"), "difficulty", 1, 3)
    count = _int_or_none(form.get("count"), "count", 1, service.MAX_QUIZ_QUESTIONS)
    types = [t for t in form.getlist("types") if isinstance(t, str) and t]
    if unknown_types := [t for t in types if t not in QUESTION_TYPES]:
        raise HTTPException(422, f"Unknown format: {', '.join(unknown_types)}")
    try:
        quiz = service.start_quiz(db_session=db_session, learner_id=learner_id, topics=topics,
                                  difficulty=difficulty, count=count or DEFAULT_QUIZ_LENGTH,
                                  types=types)
    except service.NoQuestions:
        # The home page again, with the learner's choices kept and the reason on the form.
        summaries = questions_service.topic_summaries(db_session=db_session)
        return templates.TemplateResponse(request, "questions/home.html", {
            "summaries": summaries, "groups": questions_service.topic_groups(summaries),
            "total": sum(s.count for s in summaries), "types": QUESTION_TYPES,
            "quiz_error": "No published question matches those topics, difficulty and formats; "
                          "tick more topics or formats, or pick another difficulty.",
            "picked": {"topics": topics, "difficulty": difficulty, "types": types,
                       "count": count or DEFAULT_QUIZ_LENGTH}}, status_code=422)
    return RedirectResponse(f"/quizzes/{quiz.id}/1", status_code=303)


def _quiz_or_404(db_session: Session, quiz_id: str, learner_id: str) -> Quiz:
    quiz = service.get_quiz(db_session=db_session, quiz_id=quiz_id, learner_id=learner_id)
    if quiz is None:
        raise HTTPException(404, "No such quiz.")
    return quiz


def _item_or_404(db_session: Session, quiz: Quiz, position: int) -> tuple[QuizItem, int]:
    items = service.quiz_items(db_session=db_session, quiz=quiz)
    if not 1 <= position <= len(items):
        raise HTTPException(404, f"This quiz has no question {position}.")
    return items[position - 1], len(items)


def _item_context(db_session: Session, quiz: Quiz, item: QuizItem, total: int) -> dict[str, Any]:
    view = service.item_view(db_session=db_session, item=item)
    base = {"quiz": quiz, "item": item, "total": total, "question": view.question,
            "action": f"/quizzes/{quiz.id}/{item.position}/answer",
            "next_url": (f"/quizzes/{quiz.id}/{item.position + 1}" if item.position < total
                         else f"/quizzes/{quiz.id}/summary"),
            # Verify runs (and a report names) the revision this quiz is pinned to.
            "revision_id": item.revision_id,
            # In a quiz the run comes after the answer: never run to peek.
            "answer_first": True,
            "report_action": f"/questions/{view.question.slug}/report",
            "verdict": latest_verdict(db_session=db_session, revision_id=item.revision_id)}
    if view.attempt is not None:
        a = view.attempt
        return {**base, **graded_context(view.doc, a.answer, a.score, a.correct)}
    return {**base, **question_context(view.doc)}


@router.get("/quizzes/{quiz_id}")
def quiz_resume(quiz_id: str, db_session: SessionDep, learner_id: CurrentLearner) -> Response:
    quiz = _quiz_or_404(db_session, quiz_id, learner_id)
    item = service.next_unanswered(db_session=db_session, quiz=quiz)
    target = f"/quizzes/{quiz.id}/{item.position}" if item else f"/quizzes/{quiz.id}/summary"
    return RedirectResponse(target, status_code=303)


@router.get("/quizzes/{quiz_id}/summary")
def quiz_summary(
    request: Request, quiz_id: str, db_session: WriteSessionDep, learner_id: CurrentLearner
) -> Response:
    quiz = _quiz_or_404(db_session, quiz_id, learner_id)
    summary = service.quiz_summary(db_session=db_session, quiz=quiz)
    return templates.TemplateResponse(request, "practice/summary.html", {"s": summary})


@router.get("/quizzes/{quiz_id}/{position}")
def quiz_item(
    request: Request, quiz_id: str, position: int, db_session: WriteSessionDep,
    learner_id: CurrentLearner,
) -> Response:
    quiz = _quiz_or_404(db_session, quiz_id, learner_id)
    item, total = _item_or_404(db_session, quiz, position)
    service.mark_shown(item=item)
    return templates.TemplateResponse(request, "practice/item.html",
                                      _item_context(db_session, quiz, item, total))


@router.post("/quizzes/{quiz_id}/{position}/answer")
def quiz_answer(
    request: Request, quiz_id: str, position: int, form: FormDep, db_session: SessionDep,
    learner_id: CurrentLearner, clock: ClockDep, _: CSRF,
) -> Response:
    quiz = _quiz_or_404(db_session, quiz_id, learner_id)
    item, total = _item_or_404(db_session, quiz, position)
    ctx = _item_context(db_session, quiz, item, total)
    raw, _token = read_answer(form, ctx["fmt"])
    status = 200
    try:
        _attempt, grade = service.answer_item(
            db_session=db_session, learner_id=learner_id, item=item, raw_answer=raw,
            confidence=service.clean_confidence(form.get("confidence")), now=clock.now())
        ctx.update(graded_context(ctx["doc"], grade.answer, grade.score, grade.correct, raw))
    except service.AlreadyAnswered as exc:
        a = exc.attempt
        ctx.update(graded_context(ctx["doc"], a.answer, a.score, a.correct))
        ctx["notice"] = "You already answered this question; the first answer counts."
        status = 409
    except InvalidAnswer as exc:
        ctx.update({"error": str(exc), "previous": raw})
        status = 422
    if is_htmx(request):
        # The graded fragment also swaps the Verify panel (out of band) into its answered form.
        ctx["oob_panel"] = True
        return templates.TemplateResponse(request, "questions/_answer_area.html", ctx,
                                          status_code=status, headers=ANSWERED if status == 200 else None)
    if status == 200:
        return RedirectResponse(f"/quizzes/{quiz.id}/{position}", status_code=303)
    return templates.TemplateResponse(request, "practice/item.html", ctx, status_code=status)


# Review (FSRS) ----------------------------------------------------------------------------


@router.get("/review")
def review_page(
    request: Request, db_session: SessionDep, learner_id: CurrentLearner, clock: ClockDep,
) -> Response:
    """The most overdue card, as a question with the usual answer and Verify panels."""
    now = clock.now()
    due = review.due_cards(db_session=db_session, learner_id=learner_id, now=now, limit=1)
    count = review.due_count(db_session=db_session, learner_id=learner_id, now=now)
    if not due:
        return templates.TemplateResponse(request, "practice/review.html", {
            "due_count": 0, "now": now,
            "next_due": review.next_due(db_session=db_session, learner_id=learner_id, now=now)})
    question = due[0].question
    assert question.current_revision is not None
    doc = questions_service.revision_doc(question.current_revision)
    if doc.is_exercise:
        # Reviewing an exercise is solving it again; a new pass reschedules its card.
        return RedirectResponse(f"/exercises/{question.slug}", status_code=303)
    ctx = {**question_context(doc), "question": question, "token": new_form_token(),
           "due_count": count, "card": due[0].card,
           # Review is recall, like a quiz: the run comes after the answer.
           "answer_first": True,
           "action": f"/review/{question.slug}/answer", "revision_id": question.current_revision.id,
           "report_action": f"/questions/{question.slug}/report",
           "verdict": latest_verdict(db_session=db_session,
                                     revision_id=question.current_revision.id)}
    return templates.TemplateResponse(request, "practice/review.html", ctx)


@router.post("/review/{slug}/answer")
def review_answer(
    request: Request, slug: str, form: FormDep, db_session: SessionDep, learner_id: CurrentLearner,
    clock: ClockDep, _: CSRF,
) -> Response:
    return _answer_standalone(request, slug, form, db_session, learner_id, clock,
                              action=f"/review/{slug}/answer", page="practice/review.html",
                              extra={"next_url": "/review", "due_count": None,
                                     "answer_first": True})


@router.get("/me/nav")
def me_nav(
    request: Request, db_session: SessionDep, learner_id: CurrentLearner, clock: ClockDep,
    user: OptionalUser,
) -> Response:
    """The header's personal links (Review with its due count; Account, Author or Sign in),
    loaded by htmx after the page so that no page pays for them up front."""
    count = review.due_count(db_session=db_session, learner_id=learner_id, now=clock.now())
    return templates.TemplateResponse(request, "practice/_me_nav.html",
                                      {"due_count": count, "user": user})


# Problem reports --------------------------------------------------------------------------


def _int_field(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


@router.post("/questions/{slug}/report")
def report_problem(
    request: Request, slug: str, form: FormDep, db_session: SessionDep,
    learner_id: CurrentLearner, clock: ClockDep, settings: SettingsDep, _: CSRF,
) -> Response:
    question = questions_service.get_published(db_session=db_session, slug=slug)
    if question is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    ctx: dict[str, Any] = {"report_action": f"/questions/{slug}/report", "question": question,
                           "revision_id": _int_field(form.get("revision_id")),
                           "report_open": True}
    status = 200
    try:
        row = reports.file_report(
            db_session=db_session, learner_id=learner_id, question=question,
            revision_id=ctx["revision_id"], kind=str(form.get("kind") or ""),
            comment=str(form.get("comment") or ""), now=clock.now(),
            per_hour=settings.reports_per_hour)
        ctx["filed"] = row
    except reports.ReportError as exc:
        ctx.update(error=str(exc), kind=form.get("kind"), comment=form.get("comment"))
        status = 422
    if is_htmx(request):
        return templates.TemplateResponse(request, "practice/_report_form.html", ctx,
                                          status_code=status)
    return templates.TemplateResponse(request, "practice/report_filed.html", ctx,
                                      status_code=status)


@router.get("/reports")
def my_reports_page(request: Request, db_session: SessionDep,
                    learner_id: CurrentLearner) -> Response:
    """The learner's own problem reports and what the authors did with them."""
    return templates.TemplateResponse(request, "practice/my_reports.html", {
        "reports": reports.my_reports(db_session=db_session, learner_id=learner_id)})


# The authors' inbox (every route needs an author: the router says so) ---------------------


@inbox.get("")
def inbox_page(request: Request, db_session: SessionDep, user: AuthorUser) -> Response:
    return templates.TemplateResponse(request, "practice/inbox.html", {
        "user": user, "groups": reports.inbox(db_session=db_session)})


@inbox.post("/{report_id}")
def handle_report(
    request: Request, report_id: int, form: FormDep, db_session: SessionDep, user: AuthorUser,
    clock: ClockDep, _: CSRF,
) -> Response:
    try:
        reports.handle_report(db_session=db_session, report_id=report_id, user=user,
                              status=str(form.get("status") or ""),
                              note=str(form.get("note") or ""), now=clock.now())
    except reports.ReportError as exc:
        return templates.TemplateResponse(request, "practice/inbox.html", {
            "user": user, "groups": reports.inbox(db_session=db_session), "error": str(exc)},
            status_code=422)
    return RedirectResponse("/author/reports", status_code=303)


router.include_router(inbox)
