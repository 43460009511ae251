"""The Review page (due FSRS cards one at a time, answered like any question) and the header's
personal links with the due count."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import CSRF, ClockDep, CurrentLearner, FormDep, OptionalUser, SessionDep, is_htmx
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
    if not due:
        return templates.TemplateResponse(request, "review/review.html", {
            "due_count": 0, "now": now,
            "next_due": review.next_due(db_session=db_session, learner_id=learner_id, now=now)})
    question = due[0].question
    assert question.current_revision is not None
    if questions_service.revision_doc(question.current_revision).is_exercise:
        # Reviewing an exercise is solving it again; a new pass reschedules its card.
        return RedirectResponse(f"/exercises/{question.slug}", status_code=303)
    published = published_or_404(db_session, question.slug)
    # Another variant than the one last answered, when the question has more than one.
    variant = shown_variant(db_session, published, learner_id)
    ctx = {**standalone_context(db_session, published, learner_id, variant),
           "question": question, "token": new_form_token(),
           "due_count": count, "card": due[0].card,
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
    done = answer_standalone(db_session=db_session, question=question, learner_id=learner_id,
                             raw=raw, token=token, confidence=form.get("confidence"),
                             now=clock.now(), variant=variant, part=part)
    ctx = {"question": question, "action": f"/review/{slug}/answer",
           "revision_id": question.revision_id, "report_action": f"/questions/{slug}/report",
           **topic_nav(db_session, question), "next_url": "/review", "due_count": None,
           "answer_first": True, **done.ctx}
    if is_htmx(request):
        ctx["oob_panel"] = True
        return templates.TemplateResponse(request, "quizzes/_answer_area.html", ctx,
                                          status_code=done.status,
                                          headers=ANSWERED if done.status == 200 and done.graded
                                          else None)
    return templates.TemplateResponse(request, "review/review.html", ctx, status_code=done.status)


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
