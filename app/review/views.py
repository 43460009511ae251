"""The Review page (due FSRS cards one at a time, answered like any question) and the header's
personal links with the due count."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import (
    CSRF,
    ClockDep,
    CurrentLearner,
    FormDep,
    OptionalUser,
    SessionDep,
    client_ip,
    is_htmx,
)
from app.errors import InvalidInput
from app.questions import service as questions_service
from app.quizzes.presenting import (
    ANSWERED,
    answer_standalone,
    new_form_token,
    published_or_404,
    read_submission,
    read_variant,
    shown_variant,
    standalone_context,
    topic_nav,
)
from app.review import service as review
from app.templating import templates
from app.verify.service import latest_verdict

router = APIRouter(include_in_schema=False)


@router.get("/review")
def review_page(
    request: Request, db_session: SessionDep, learner_id: CurrentLearner, clock: ClockDep,
) -> Response:
    """The most overdue card, as a question with the usual answer and Verify panels."""
    now = clock.now()
    due = review.due_cards(db_session=db_session, learner_id=learner_id, now=now, limit=1)
    count = review.due_count(db_session=db_session, learner_id=learner_id, now=now)
    # The one line on which parameters schedule the learner (the full panel: /review/schedule).
    schedule = review.schedule_status(db_session=db_session, learner_id=learner_id, now=now,
                                      full=False)
    if not due:
        return templates.TemplateResponse(request, "review/review.html", {
            "due_count": 0, "now": now, "schedule": schedule,
            "next_due": review.next_due(db_session=db_session, learner_id=learner_id, now=now)})
    question = due[0].question
    assert question.current_revision is not None
    if questions_service.revision_doc(question.current_revision).is_exercise:
        # Reviewing an exercise is solving it again; a new pass reschedules its card.
        return RedirectResponse(f"/exercises/{question.slug}", status_code=303)
    published = published_or_404(db_session, question.slug)
    # Another variant than the one last answered, when the question has more than one.
    variant = shown_variant(db_session, published, learner_id)
    ctx = {**standalone_context(db_session, published, learner_id, variant, now=now),
           "question": question, "token": new_form_token(),
           "due_count": count, "card": due[0].card, "schedule": schedule,
           # Review is recall, like a quiz: the run comes after the answer.
           "answer_first": True,
           "action": f"/review/{question.slug}/answer", "revision_id": question.current_revision.id,
           "report_action": f"/questions/{question.slug}/report",
           "verdict": latest_verdict(db_session=db_session,
                                     revision_id=question.current_revision.id)}
    return templates.TemplateResponse(request, "review/review.html", ctx)


@router.post("/review/{slug}/answer")
def review_answer(
    request: Request, slug: str, form: FormDep, db_session: SessionDep, learner_id: CurrentLearner,
    clock: ClockDep, _: CSRF,
) -> Response:
    question = published_or_404(db_session, slug)
    variant = read_variant(form)
    if variant is None:
        variant = shown_variant(db_session, question, learner_id)
    part, raw, token = read_submission(form, question, variant)
    now = clock.now()
    done = answer_standalone(db_session=db_session, question=question, learner_id=learner_id,
                             raw=raw, token=token, confidence=form.get("confidence"),
                             now=now, variant=variant, part=part, client_ip=client_ip(request))
    ctx = {"question": question, "action": f"/review/{slug}/answer",
           "revision_id": question.revision_id, "report_action": f"/questions/{slug}/report",
           **topic_nav(db_session, question), "next_url": "/review", "due_count": None,
           "answer_first": True, **done.ctx,
           # When this card comes back, and what is left: the page never leaves it unsaid.
           "now": now,
           "comes_back": review.card_due(db_session=db_session, learner_id=learner_id,
                                         question_id=question.id),
           "still_due": review.due_count(db_session=db_session, learner_id=learner_id, now=now)}
    if is_htmx(request):
        ctx["oob_panel"] = True
        return templates.TemplateResponse(request, "review/_answered.html", ctx,
                                          status_code=done.status,
                                          headers=ANSWERED if done.status == 200 and done.graded
                                          else None)
    return templates.TemplateResponse(request, "review/review.html", ctx, status_code=done.status)


def _schedule_response(request: Request, db_session: SessionDep, learner_id: str, now: Any,
                       error: str | None = None, status: int = 200) -> Response:
    ctx = {"schedule": review.schedule_status(db_session=db_session, learner_id=learner_id,
                                              now=now),
           "error": error}
    name = "review/_schedule.html" if is_htmx(request) else "review/schedule.html"
    return templates.TemplateResponse(request, name, ctx, status_code=status)


@router.get("/review/schedule")
def schedule_page(request: Request, db_session: SessionDep, learner_id: CurrentLearner,
                  clock: ClockDep) -> Response:
    """Which FSRS parameters schedule the learner, their desired retention with what each
    retention costs over the next 30 days, and the button that fits their own parameters."""
    return _schedule_response(request, db_session, learner_id, clock.now())


@router.post("/review/schedule")
def schedule_retention(request: Request, form: FormDep, db_session: SessionDep,
                       learner_id: CurrentLearner, clock: ClockDep, _: CSRF) -> Response:
    raw = str(form.get("desired_retention") or "").strip().rstrip("%")
    try:
        value = float(raw.replace(",", "."))
        # A percentage typed as one (85) means 0.85.
        retention = value / 100 if value > 1 else value
        review.set_retention(db_session=db_session, learner_id=learner_id, retention=retention,
                             now=clock.now())
    except (ValueError, InvalidInput) as exc:
        message = str(exc) if isinstance(exc, InvalidInput) else f"{raw!r} is not a number."
        return _schedule_response(request, db_session, learner_id, clock.now(), message, 422)
    if not is_htmx(request):
        return RedirectResponse("/review/schedule", status_code=303)
    return _schedule_response(request, db_session, learner_id, clock.now())


@router.post("/review/schedule/fit")
def schedule_fit(request: Request, db_session: SessionDep, learner_id: CurrentLearner,
                 clock: ClockDep, _: CSRF) -> Response:
    """Queue a fit of the learner's own parameters (a worker runs it; the panel polls)."""
    try:
        review.request_fit(db_session=db_session, learner_id=learner_id, now=clock.now())
    except InvalidInput as exc:
        return _schedule_response(request, db_session, learner_id, clock.now(), str(exc), 422)
    if not is_htmx(request):
        return RedirectResponse("/review/schedule", status_code=303)
    return _schedule_response(request, db_session, learner_id, clock.now())


@router.get("/me/nav")
def me_nav(
    request: Request, db_session: SessionDep, learner_id: CurrentLearner, clock: ClockDep,
    user: OptionalUser,
) -> Response:
    """The header's personal links (Review with its due count; Account, Author or Sign in),
    loaded by htmx after the page so that no page pays for them up front."""
    count = review.due_count(db_session=db_session, learner_id=learner_id, now=clock.now())
    return templates.TemplateResponse(request, "review/_me_nav.html",
                                      {"due_count": count, "user": user})
