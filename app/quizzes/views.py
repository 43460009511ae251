"""The question page (answer a question on its own, predict and run it) and quizzes (start
one, a question at a time, the summary)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from app import ratelimit, reveal
from app.deps import (
    CSRF,
    ClockDep,
    CurrentLearner,
    FormDep,
    OptionalUser,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    client_ip,
    is_htmx,
    notify_workers,
)
from app.errors import InvalidInput, NotFound, RateLimited
from app.questions import service as questions_service
from app.questions.schema import QUESTION_TYPES, QUIZ_TYPES, QuestionDoc
from app.quizzes import service
from app.quizzes.grading import InvalidAnswer
from app.quizzes.models import Quiz, QuizItem
from app.quizzes.presenting import (
    ANSWERED,
    answer_standalone,
    attempt_context,
    graded_context,
    new_form_token,
    published_or_404,
    question_context,
    read_answer,
    read_step,
    read_submission,
    read_variant,
    shown_variant,
    standalone_context,
    step_context,
    topic_nav,
)
from app.review import service as review
from app.settings import Settings
from app.templating import templates
from app.verify import access, knobs
from app.verify.models import RUN_DONE
from app.verify.service import latest_verdict

router = APIRouter(include_in_schema=False)


@router.get("/questions/{slug}")
def question_page(
    request: Request, slug: str, db_session: SessionDep, learner_id: CurrentLearner,
    clock: ClockDep, user: OptionalUser,
) -> Response:
    question = published_or_404(db_session, slug)
    if question.doc.is_exercise:
        # An exercise is answered by writing code, on its own page.
        return RedirectResponse(f"/exercises/{slug}", status_code=303)
    variant = shown_variant(db_session, question, learner_id)
    now = clock.now()
    ctx = {**standalone_context(db_session, question, learner_id, variant, now=now),
           **topic_nav(db_session, question), "question": question,
           "token": new_form_token(),
           # Someone who has answered this variant has made their prediction: Verify is open
           # (by the one rule: not while the question is in their live mock interview).
           # (Other numbers are a new prediction: running them first would give the answer.)
           "answered_before": reveal.may_reveal(db_session=db_session, learner_id=learner_id,
                                                question_id=question.id, variant=variant, now=now,
                                                is_staff=user is not None and user.is_staff),
           "action": f"/questions/{slug}/answer", "revision_id": question.revision_id,
           "report_action": f"/questions/{slug}/report",
           "verdict": latest_verdict(db_session=db_session, revision_id=question.revision_id)}
    return templates.TemplateResponse(request, "quizzes/question.html", ctx)


def _predicted_run(
    request: Request, background: BackgroundTasks, settings: Settings, db_session: Session,
    learner_id: str, doc: QuestionDoc, form: FormData, variant: int, now: datetime,
) -> dict[str, Any]:
    """Run it after a prediction: the run's panel context, or the reason it could not start."""
    assert doc.verify is not None
    try:
        target = access.runnable(db_session=db_session, slug=doc.slug, revision_id=None,
                                 learner_id=learner_id, variant=variant)
        run, cached = access.start_run(
            db_session=db_session, target=target, params=knobs.from_form(doc.verify, form),
            learner_id=learner_id, client_ip=client_ip(request),
            limit_per_minute=settings.verify_rate_per_minute, now=now)
    except (knobs.InvalidKnob, RateLimited) as exc:
        return {"run_error": str(exc)}
    if run.status != RUN_DONE:
        background.add_task(notify_workers, request)
    panel = access.run_panel(db_session=db_session, run=run, learner_id=learner_id,
                             slug=doc.slug, prev_id=None, variant=variant, now=now)
    return {"first_run": {**panel.context(), "cached": cached, "prev_id": None}}


@router.post("/questions/{slug}/answer")
def answer_page(
    request: Request, slug: str, form: FormDep, background: BackgroundTasks, db_session: SessionDep,
    settings: SettingsDep, learner_id: CurrentLearner, clock: ClockDep, _: CSRF,
) -> Response:
    question = published_or_404(db_session, slug)
    variant = read_variant(form)
    if variant is None:
        variant = shown_variant(db_session, question, learner_id)
    part, raw, token = read_submission(form, question, variant)
    # "Run it" before answering: the answer is the learner's prediction, graded first,
    # then the run starts.
    then_run = form.get("then_run") == "1" or request.query_params.get("then_run") == "1"
    now = clock.now()
    done = answer_standalone(db_session=db_session, question=question, learner_id=learner_id,
                             raw=raw, token=token, confidence=form.get("confidence"),
                             now=now, predicting=then_run, variant=variant, part=part,
                             client_ip=client_ip(request))
    ctx = {"question": question, "action": f"/questions/{slug}/answer",
           "revision_id": question.revision_id, "report_action": f"/questions/{slug}/report",
           **topic_nav(db_session, question), **done.ctx}
    doc = ctx["doc"]
    if then_run and done.graded and doc.verify is not None:
        ctx["predicted"] = True
        ctx.update(_predicted_run(request, background, settings, db_session, learner_id, doc, form,
                                  ctx["variant"], now))
    if is_htmx(request):
        # The graded fragment also swaps the Verify panel (out of band) into its answered form.
        ctx["oob_panel"] = True
        return templates.TemplateResponse(request, "quizzes/_answer_area.html", ctx,
                                          status_code=done.status,
                                          headers=ANSWERED if done.status == 200 and done.graded
                                          else None)
    return templates.TemplateResponse(request, "quizzes/question.html", ctx, status_code=done.status)


# Quizzes ------------------------------------------------------------------------------

# The quiz form offers these lengths; anything in 1..MAX_QUIZ_QUESTIONS is accepted.
DEFAULT_QUIZ_LENGTH = 5


def _int_or_none(value: Any, name: str, lo: int, hi: int) -> int | None:
    if value in (None, "", "any"):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name} must be a whole number", loc=(name,)) from None
    if not lo <= n <= hi:
        raise InvalidInput(f"{name} must be between {lo} and {hi}", loc=(name,))
    return n


@router.post("/quizzes")
def start_quiz(
    request: Request, form: FormDep, db_session: SessionDep, learner_id: CurrentLearner, _: CSRF
) -> Response:
    # Counted first, before the topics are read: a flood past its limit costs one read.
    ratelimit.spend(db_session=db_session, kind=ratelimit.QUIZZES, learner_id=learner_id,
                    client_ip=client_ip(request))
    topics = [t for t in form.getlist("topics") if isinstance(t, str) and t]
    summaries = questions_service.topic_summaries(db_session=db_session)
    known = {s.topic.slug for s in summaries}
    groups = None
    # A round's own button (name="round") asks for every topic of that round; a newcomer to
    # the round starts on a warm-up from its core.
    if isinstance(chosen := form.get("round"), str) and chosen:
        rounds = {r.slug: r for r in questions_service.topic_rounds(summaries)}
        if chosen not in rounds:
            raise InvalidInput(f"Unknown round: {chosen}", loc=("round",))
        topics = [t.topic.slug for t in rounds[chosen].topics]
        groups = [[t.topic.slug for t in g.topics] for g in rounds[chosen].groups]
    unknown = [t for t in topics if t not in known]
    if unknown:
        raise InvalidInput(f"Unknown topic: {', '.join(unknown)}", loc=("topics",))
    difficulty = _int_or_none(form.get("difficulty"), "difficulty", 1, 3)
    count = _int_or_none(form.get("count"), "count", 1, service.MAX_QUIZ_QUESTIONS)
    types = [t for t in form.getlist("types") if isinstance(t, str) and t]
    if unknown_types := [t for t in types if t not in QUESTION_TYPES]:
        raise InvalidInput(f"Unknown format: {', '.join(unknown_types)}", loc=("types",))
    try:
        quiz = service.start_quiz(db_session=db_session, learner_id=learner_id, topics=topics,
                                  difficulty=difficulty, count=count or DEFAULT_QUIZ_LENGTH,
                                  types=types, groups=groups)
    except service.NoQuestions:
        # The quiz builder again, with the learner's choices kept and the reason on the form.
        return templates.TemplateResponse(request, "questions/topics.html", {
            "summaries": summaries, "rounds": questions_service.topic_rounds(summaries),
            "total": sum(s.count for s in summaries), "types": QUIZ_TYPES,
            "quiz_error": "No published question matches those topics, difficulty and formats; "
                          "tick more topics or formats, or pick another difficulty.",
            "picked": {"topics": topics, "difficulty": difficulty, "types": types,
                       "count": count or DEFAULT_QUIZ_LENGTH}}, status_code=422)
    return RedirectResponse(f"/quizzes/{quiz.id}/1", status_code=303)


def _quiz_or_404(db_session: Session, quiz_id: str, learner_id: str) -> Quiz:
    quiz = service.get_quiz(db_session=db_session, quiz_id=quiz_id, learner_id=learner_id)
    if quiz is None:
        raise NotFound("No such quiz.")
    return quiz


def _item_or_404(db_session: Session, quiz: Quiz, position: int) -> tuple[QuizItem, int]:
    items = service.quiz_items(db_session=db_session, quiz=quiz)
    if not 1 <= position <= len(items):
        raise NotFound(f"This quiz has no question {position}.")
    return items[position - 1], len(items)


def _item_context(db_session: Session, quiz: Quiz, item: QuizItem, total: int,
                  now: datetime) -> dict[str, Any]:
    view = service.item_view(db_session=db_session, item=item)
    count = questions_service.revision_doc(view.revision).variant_count
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
    sight = reveal.sight(db_session=db_session, learner_id=quiz.learner_id, now=now)
    if view.attempt is not None:
        return {**base, **attempt_context(db_session, view.attempt, now=now,
                                          variant_count=count, sight=sight)}
    return {**base, **question_context(view.doc, variant=item.variant, variant_count=count),
            **step_context(view.doc, view.partial.state if view.partial else None,
                           sight.withheld(item.question_id))}


@router.get("/quizzes/{quiz_id}")
def quiz_resume(quiz_id: str, db_session: SessionDep, learner_id: CurrentLearner) -> Response:
    quiz = _quiz_or_404(db_session, quiz_id, learner_id)
    item = service.next_unanswered(db_session=db_session, quiz=quiz)
    target = f"/quizzes/{quiz.id}/{item.position}" if item else f"/quizzes/{quiz.id}/summary"
    return RedirectResponse(target, status_code=303)


@router.get("/quizzes/{quiz_id}/summary")
def quiz_summary(
    request: Request, quiz_id: str, db_session: WriteSessionDep, learner_id: CurrentLearner,
    user: OptionalUser, clock: ClockDep,
) -> Response:
    quiz = _quiz_or_404(db_session, quiz_id, learner_id)
    summary = service.quiz_summary(db_session=db_session, quiz=quiz)
    now = clock.now()
    # The way on from here: retry the misses, review what is due, keep the history.
    return templates.TemplateResponse(request, "quizzes/summary.html", {
        "s": summary, "signed_in": user is not None,
        # The one rule: no grade of a question of the learner's live mock interview.
        "withheld_ids": set(reveal.sight(db_session=db_session, learner_id=learner_id,
                                         now=now).live),
        "due_now": review.due_count(db_session=db_session, learner_id=learner_id, now=now)})


@router.post("/quizzes/{quiz_id}/retry")
def quiz_retry(request: Request, quiz_id: str, db_session: SessionDep,
               learner_id: CurrentLearner, _: CSRF) -> Response:
    """A new quiz of what this one missed."""
    quiz = _quiz_or_404(db_session, quiz_id, learner_id)
    try:
        retry = service.retry_misses(db_session=db_session, quiz=quiz,
                                     client_ip=client_ip(request))
    except service.NoQuestions:
        return RedirectResponse(f"/quizzes/{quiz.id}/summary", status_code=303)
    return RedirectResponse(f"/quizzes/{retry.id}/1", status_code=303)


@router.get("/quizzes/{quiz_id}/{position}")
def quiz_item(
    request: Request, quiz_id: str, position: int, db_session: WriteSessionDep,
    learner_id: CurrentLearner, clock: ClockDep,
) -> Response:
    quiz = _quiz_or_404(db_session, quiz_id, learner_id)
    item, total = _item_or_404(db_session, quiz, position)
    service.mark_shown(item=item)
    return templates.TemplateResponse(request, "quizzes/item.html",
                                      _item_context(db_session, quiz, item, total, clock.now()))


@router.post("/quizzes/{quiz_id}/{position}/answer")
def quiz_answer(
    request: Request, quiz_id: str, position: int, form: FormDep, db_session: SessionDep,
    learner_id: CurrentLearner, clock: ClockDep, _: CSRF,
) -> Response:
    quiz = _quiz_or_404(db_session, quiz_id, learner_id)
    item, total = _item_or_404(db_session, quiz, position)
    now = clock.now()
    ctx = _item_context(db_session, quiz, item, total, now)
    doc: QuestionDoc = ctx["doc"]
    stepwise = doc.is_case or doc.is_talk
    part, raw = read_step(form, doc) if stepwise else (None, read_answer(form, ctx["fmt"])[0])
    status = 200
    confidence = service.clean_confidence(form.get("confidence"))
    try:
        if stepwise:
            stepped = service.answer_item_step(db_session=db_session, learner_id=learner_id,
                                               item=item, part=part, raw=raw,
                                               confidence=confidence, now=now,
                                               client_ip=client_ip(request))
            if stepped.grade is not None:
                g = stepped.grade
                ctx.update(graded_context(stepped.doc, g.answer, g.score, g.correct))
            else:
                ctx.update(step_context(stepped.doc, stepped.state), just_answered=stepped.part)
        else:
            _attempt, grade = service.answer_item(
                db_session=db_session, learner_id=learner_id, item=item, raw_answer=raw,
                confidence=confidence, now=now, client_ip=client_ip(request))
            ctx.update(graded_context(doc, grade.answer, grade.score, grade.correct, raw))
    except service.AlreadyAnswered as exc:
        ctx.update(attempt_context(db_session, exc.attempt, now=now,
                                   variant_count=ctx["variant_count"]))
        ctx["notice"] = "You already answered this question; the first answer counts."
        status = 409
    except (service.OutOfTurn, reveal.InLiveMock) as exc:
        ctx["notice"] = str(exc)
        status = 409
    except InvalidAnswer as exc:
        ctx.update({"error": str(exc), "previous": raw})
        status = 422
    graded = bool(ctx.get("graded"))
    if is_htmx(request):
        # The graded fragment also swaps the Verify panel (out of band) into its answered form.
        ctx["oob_panel"] = True
        return templates.TemplateResponse(request, "quizzes/_answer_area.html", ctx,
                                          status_code=status,
                                          headers=ANSWERED if status == 200 and graded else None)
    if status == 200:
        return RedirectResponse(f"/quizzes/{quiz.id}/{position}", status_code=303)
    return templates.TemplateResponse(request, "quizzes/item.html", ctx, status_code=status)


