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
    question_context,
    read_answer,
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
    return templates.TemplateResponse(request, "review/review.html", ctx)


@router.post("/review/{slug}/answer")
def review_answer(
    request: Request, slug: str, form: FormDep, db_session: SessionDep, learner_id: CurrentLearner,
    clock: ClockDep, _: CSRF,
) -> Response:
    question = published_or_404(db_session, slug)
    raw, token = read_answer(form, question.doc.effective_format)
    now = clock.now()
    done = answer_standalone(db_session=db_session, question=question, learner_id=learner_id,
                             raw=raw, token=token, confidence=form.get("confidence"), now=now)
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
                                          headers=ANSWERED if done.status == 200 else None)
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
