"""Mock interview pages: start one, a question at a time against the server's deadline, the
report and its share link."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session

from app import reveal
from app.deps import (
    CSRF,
    ClockDep,
    CurrentLearner,
    FormDep,
    OptionalUser,
    SessionDep,
    WriteSessionDep,
    client_ip,
)
from app.errors import InvalidInput, NotFound
from app.mock import service as mock
from app.mock.models import MockInterview
from app.questions.models import QuestionRevision
from app.questions.service import revision_doc, revision_variant
from app.quizzes.grading import MULTI_RULE, InvalidAnswer
from app.quizzes.presenting import part_views, question_context, read_step, step_context
from app.quizzes.service import AlreadyAnswered, OutOfTurn, clean_confidence, partial_answer
from app.render.charts import Bar, bar_chart
from app.templating import templates
from app.verify.service import latest_verdict

router = APIRouter(include_in_schema=False)


def _mock_or_404(db_session: Session, mock_id: str, learner_id: str) -> MockInterview:
    m = mock.get_mock(db_session=db_session, mock_id=mock_id, learner_id=learner_id)
    if m is None:
        raise NotFound("No such mock interview.")
    return m


def _minutes(value: Any) -> int:
    try:
        n = int(value) if value not in (None, "") else mock.DEFAULT_MINUTES
    except (TypeError, ValueError):
        raise InvalidInput("The length must be a whole number of minutes.") from None
    if not mock.MIN_MINUTES <= n <= mock.MAX_MINUTES:
        raise InvalidInput(f"Pick between {mock.MIN_MINUTES} and {mock.MAX_MINUTES} minutes.")
    return n


@router.get("/mock")
def mock_start_page(request: Request, db_session: SessionDep, learner_id: CurrentLearner) -> Response:
    return templates.TemplateResponse(request, "mock/start.html", {
        "default": mock.DEFAULT_MINUTES, "lo": mock.MIN_MINUTES, "hi": mock.MAX_MINUTES,
        "count": mock.QUESTION_COUNT,
        "recent": mock.recent(db_session=db_session, learner_id=learner_id)})


@router.post("/mock")
def mock_start(request: Request, form: FormDep, db_session: SessionDep,
               learner_id: CurrentLearner, clock: ClockDep, _: CSRF) -> Response:
    try:
        m = mock.start(db_session=db_session, learner_id=learner_id,
                       minutes=_minutes(form.get("minutes")), now=clock.now(),
                       client_ip=client_ip(request))
    except mock.NoQuestions:
        raise InvalidInput("There are no published questions to ask yet.") from None
    return RedirectResponse(f"/mock/{m.quiz_id}", status_code=303)


def _question_ctx(db_session: Session, m: MockInterview, position: int | None,
                  now: Any) -> dict[str, Any] | None:
    items = mock.items(db_session=db_session, mock=m)
    done = mock.answered_item_ids(db_session=db_session, mock=m)
    item = next((i for i in items if i.id not in done), None) if position is None else \
        next((i for i in items if i.position == position), None)
    if item is None:
        return None
    revision = db_session.get(QuestionRevision, item.revision_id)
    assert revision is not None
    doc = revision_variant(revision=revision, variant=item.variant)
    ctx = question_context(doc, variant=item.variant,
                           variant_count=revision_doc(revision).variant_count)
    if doc.is_case or doc.is_talk:
        partial = partial_answer(db_session=db_session, learner_id=m.learner_id,
                                 question_id=item.question_id, variant=item.variant)
        ctx.update(step_context(doc, partial.state if partial is not None else None))
    return {**ctx, "mock": m, "item": item, "total": len(items), "answered": len(done),
            "action": f"/mock/{m.quiz_id}/{item.position}/answer", "plain_form": True,
            "seconds_left": max(0, int((m.deadline - now).total_seconds()))}


@router.get("/mock/{mock_id}")
def mock_question(request: Request, mock_id: str, db_session: WriteSessionDep,
                  learner_id: CurrentLearner, clock: ClockDep) -> Response:
    """The next unanswered question with the time left; after the deadline (or once every
    question is answered) the interview finishes and this sends the learner to the report."""
    m = _mock_or_404(db_session, mock_id, learner_id)
    now = clock.now()
    mock.finish_if_over(db_session=db_session, mock=m, now=now)
    ctx = None if m.finished_at else _question_ctx(db_session, m, None, now)
    if ctx is None:
        mock.finish(db_session=db_session, mock=m, now=now)
        return RedirectResponse(f"/mock/{m.quiz_id}/report", status_code=303)
    mock.show(item=ctx["item"], now=now)
    return templates.TemplateResponse(request, "mock/item.html", ctx)


@router.post("/mock/{mock_id}/{position}/answer")
def mock_answer(request: Request, mock_id: str, position: int, form: FormDep,
                db_session: SessionDep, learner_id: CurrentLearner, clock: ClockDep,
                _: CSRF) -> Response:
    """Store an answer without grading feedback; past the deadline it is refused (409) and
    the interview ends."""
    m = _mock_or_404(db_session, mock_id, learner_id)
    now = clock.now()
    ctx = _question_ctx(db_session, m, position, now)
    if ctx is None:
        raise NotFound(f"This interview has no question {position}.")
    doc = ctx["doc"]
    part: int | None = None
    raw: Any
    if doc.is_case or doc.is_talk:
        part, raw = read_step(form, doc)
    else:
        values = [v for v in form.getlist("answer") if isinstance(v, str)]
        raw = values if ctx["fmt"] == "multi" else (values[0] if values else "")
    try:
        if doc.is_case or doc.is_talk:
            # A step leads back to the same question (its next part, or its rubric) until
            # the last one, which leads on to the next question.
            mock.answer_step(db_session=db_session, mock=m, item=ctx["item"], part=part,
                             raw_answer=raw, confidence=clean_confidence(form.get("confidence")),
                             now=now, client_ip=client_ip(request))
        else:
            mock.answer(db_session=db_session, mock=m, item=ctx["item"], raw_answer=raw,
                        confidence=clean_confidence(form.get("confidence")), now=now,
                        client_ip=client_ip(request))
    except mock.TimeUp:
        mock.finish(db_session=db_session, mock=m, now=now)
        return templates.TemplateResponse(request, "mock/time_up.html", {"mock": m},
                                          status_code=409)
    except (AlreadyAnswered, OutOfTurn):
        pass  # the first answer counts; carry on where the interview stands
    except InvalidAnswer as exc:
        ctx.update(error=str(exc), previous=raw, previous_confidence=form.get("confidence"))
        return templates.TemplateResponse(request, "mock/item.html", ctx, status_code=422)
    return RedirectResponse(f"/mock/{m.quiz_id}", status_code=303)


@router.post("/mock/{mock_id}/finish")
def mock_finish(mock_id: str, db_session: SessionDep, learner_id: CurrentLearner,
                clock: ClockDep, _: CSRF) -> Response:
    m = _mock_or_404(db_session, mock_id, learner_id)
    mock.finish(db_session=db_session, mock=m, now=clock.now())
    return RedirectResponse(f"/mock/{m.quiz_id}/report", status_code=303)


def _report_ctx(db_session: Session, m: MockInterview, *, shared: bool,
                sight: reveal.Sight) -> dict[str, Any]:
    r = mock.report(db_session=db_session, mock=m, sight=sight)
    verdicts = {i.revision_id: latest_verdict(db_session=db_session, revision_id=i.revision_id)
                for i in r.misses if i.doc.verify}
    topic_chart = bar_chart([mock_bar(t) for t in r.per_topic], title="Score by topic",
                            desc="Fraction of each topic's questions answered right in this "
                                 "interview; the table below has the same numbers.",
                            svg_id="mock-topics")
    # A case's parts, each against its own key, for the misses that are cases.
    case_views = {i.position: part_views(i.doc, list(i.attempt.answer.get("parts", [])))
                  for i in r.misses if i.shown and i.doc.is_case and i.attempt is not None
                  and isinstance(i.attempt.answer, dict)}
    return {"r": r, "shared": shared, "verdicts": verdicts, "topic_chart": topic_chart,
            "multi_rule": MULTI_RULE, "case_views": case_views}


def mock_bar(t: mock.TopicResult) -> Bar:
    return Bar(t.title, t.score / t.asked if t.asked else 0.0)


@router.get("/mock/{mock_id}/report")
def mock_report(request: Request, mock_id: str, db_session: WriteSessionDep,
                learner_id: CurrentLearner, clock: ClockDep) -> Response:
    m = _mock_or_404(db_session, mock_id, learner_id)
    now = clock.now()
    mock.finish_if_over(db_session=db_session, mock=m, now=now)
    if m.finished_at is None:
        # No feedback before the end, like a real interview.
        return RedirectResponse(f"/mock/{m.quiz_id}", status_code=303)
    ctx = _report_ctx(db_session, m, shared=False,
                      sight=reveal.sight(db_session=db_session, learner_id=learner_id, now=now))
    # From the configured public address, never the request's Host header (a client's).
    ctx["share_url"] = (request.app.state.settings.base_url
                        + request.app.url_path_for("shared_mock_report", token=m.share_token)
                        if m.share_token else None)
    return templates.TemplateResponse(request, "mock/report.html", ctx)


@router.post("/mock/{mock_id}/share")
def mock_share(mock_id: str, form: FormDep, db_session: SessionDep, learner_id: CurrentLearner,
               clock: ClockDep, _: CSRF) -> Response:
    """Make (or with action=revoke, revoke) the report's share link."""
    m = _mock_or_404(db_session, mock_id, learner_id)
    mock.finish_if_over(db_session=db_session, mock=m, now=clock.now())
    if m.finished_at is None:
        raise HTTPException(409, "Finish the interview before sharing its report.")
    if form.get("action") == "revoke":
        mock.revoke_share(db_session=db_session, mock=m)
    else:
        mock.share(db_session=db_session, mock=m)
    return RedirectResponse(f"/mock/{m.quiz_id}/report#share", status_code=303)


@router.get("/shared/mock/{token}", name="shared_mock_report")
def shared_mock_report(request: Request, token: str, db_session: SessionDep,
                       learner_id: CurrentLearner, user: OptionalUser,
                       clock: ClockDep) -> Response:
    """A report seen through its live share link, read-only; a revoked link is a 404. Its
    reader sees keys and grades by the one rule, as their own: of the questions they answered
    themselves (authors and admins: all)."""
    m = mock.get_shared(db_session=db_session, token=token)
    if m is None or m.finished_at is None:
        raise NotFound("This link does not lead anywhere (it may have been revoked).")
    sight = reveal.sight(db_session=db_session, learner_id=learner_id, now=clock.now(),
                         is_staff=user is not None and user.is_staff)
    response = templates.TemplateResponse(request, "mock/report.html",
                                          _report_ctx(db_session, m, shared=True, sight=sight))
    # The token is the whole secret: keep the page out of shared caches. (Other sites never
    # see it in a Referer: the app's policy is same-origin.)
    response.headers["Cache-Control"] = "private, no-store"
    return response
