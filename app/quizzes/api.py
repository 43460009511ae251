"""The attempts API (/api/v1): grade an answer to one variant and schedule its review card; a
case is answered part by part and a talk-through in two steps, through the same endpoint."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response

from app.deps import (
    API_BUSY,
    API_ERROR,
    ClockDep,
    CurrentLearner,
    SessionDep,
    client_ip,
)
from app.questions.schema import QuestionDoc
from app.questions.schemas import part_out
from app.quizzes.grading import correct_answer, grade
from app.quizzes.presenting import attempt_doc, published_or_404
from app.quizzes.schemas import AttemptIn, AttemptOut, PartGradeOut
from app.quizzes.service import (
    AlreadyAnswered,
    Stepped,
    answer_question,
    answer_step,
    check_variant,
    drawn_variant,
)

router = APIRouter(prefix="/api/v1", tags=["attempts"], responses=API_BUSY)


def _part_grade(doc: QuestionDoc, j: int, answer: Any, earlier: list[Any]) -> PartGradeOut:
    part = doc.part(j, earlier)
    g = grade(part, answer)
    return PartGradeOut(part=j, score=g.score, correct=g.correct, answer=g.answer,
                        correct_answer=correct_answer(part), explanation=part.explanation)


def _graded_out(doc: QuestionDoc, *, attempt_id: int, variant: int, score: float, correct: bool,
                answer: Any, first: bool = True) -> AttemptOut:
    """A whole answer, graded: now the key, the explanation (and a case's parts, a talk-through's
    model answer and rubric) may be sent."""
    out = AttemptOut(attempt_id=attempt_id, variant=variant, score=score, correct=correct,
                     answer=answer, correct_answer=correct_answer(doc, answer),
                     explanation=doc.explanation, first_submission=first)
    if doc.is_case and isinstance(answer, dict):
        given = list(answer.get("parts", []))
        out.parts = [_part_grade(doc, j, a, given[:j]) for j, a in enumerate(given)]
    if doc.is_talk and isinstance(answer, dict):
        out.model_answer, out.rubric = doc.model_answer, list(doc.rubric)
        out.ticked = list(answer.get("ticked", []))
    return out


def _step_out(stepped: Stepped) -> AttemptOut:
    """A step that leaves the answer unfinished: the part just graded and the next one revealed,
    or (a talk-through's text in) the model answer and the rubric to tick."""
    doc = stepped.doc
    out = AttemptOut(attempt_id=None, variant=stepped.variant, complete=False, score=None,
                     correct=None, answer=None, correct_answer=None, explanation=None)
    if doc.is_case and stepped.part is not None and stepped.part_grade is not None:
        given = list(stepped.state.get("parts", []))
        out.part = _part_grade(doc, stepped.part, stepped.part_grade.answer, given[:stepped.part])
        following = stepped.part + 1
        if following < len(doc.parts):
            out.next_part = part_out(doc, following, given)
    if doc.is_talk:
        out.model_answer, out.rubric = doc.model_answer, list(doc.rubric)
    return out


@router.post("/questions/{slug}/attempts", response_model=AttemptOut,
             responses={404: {"description": "No such published question.", **API_ERROR},
                        409: {"model": AttemptOut, "description": "Answered before (the first "
                              "answer, with 409), or a step out of turn."},
                        422: {"description": "Not an answer to this question, or no such "
                                             "variant or part."}})
def post_attempt(
    slug: str, body: AttemptIn, request: Request, db_session: SessionDep, learner_id: CurrentLearner,
    clock: ClockDep, idempotency_key: Annotated[str | None, Header(max_length=64)] = None,
) -> AttemptOut | Response:
    """Grade an answer to one variant and schedule its review card. Replaying the same
    Idempotency-Key returns the first result with 409.

    A case: send each part in order (`part` 0, 1, ...); each reply grades that part and reveals
    the next; the last stores the attempt (the mean of the parts). A talk-through: send
    {"text": ...}, read the model answer and rubric in the reply, then send {"ticked": [...]}.
    """
    question = published_or_404(db_session, slug)
    variant = body.variant
    if variant is None:
        variant = drawn_variant(db_session=db_session, learner_id=learner_id,
                                question_id=question.id, count=question.doc.variant_count)
    doc = question.variant(check_variant(question.doc, variant))
    try:
        if doc.is_case or doc.is_talk:
            stepped = answer_step(db_session=db_session, learner_id=learner_id, question=question,
                                  variant=variant, part=body.part, raw=body.answer,
                                  token=idempotency_key, confidence=body.confidence,
                                  now=clock.now(), client_ip=client_ip(request))
            if stepped.attempt is None or stepped.grade is None:
                return _step_out(stepped)
            g = stepped.grade
            return _graded_out(stepped.doc, attempt_id=stepped.attempt.id, variant=variant,
                               score=g.score, correct=g.correct, answer=g.answer)
        attempt, g = answer_question(
            db_session=db_session, learner_id=learner_id, question=question,
            raw_answer=body.answer, token=idempotency_key, time_taken_ms=body.time_taken_ms,
            confidence=body.confidence, now=clock.now(), variant=variant,
            client_ip=client_ip(request))
    except AlreadyAnswered as exc:
        a = exc.attempt
        out = _graded_out(attempt_doc(db_session, a), attempt_id=a.id, variant=a.variant,
                          score=a.score, correct=a.correct, answer=a.answer, first=False)
        return JSONResponse(out.model_dump(), status_code=409)
    # Serialized here, in the view's thread: returned as a model, FastAPI would validate it
    # again in a pool thread of its own (one thread hand-off more per answer).
    out = _graded_out(doc, attempt_id=attempt.id, variant=variant, score=g.score,
                      correct=g.correct, answer=g.answer)
    return Response(out.model_dump_json(by_alias=True), media_type="application/json")
