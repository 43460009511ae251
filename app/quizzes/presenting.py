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

from app import reveal
from app.errors import NotFound
from app.questions import service as questions_service
from app.questions.models import QuestionRevision
from app.questions.schema import QuestionDoc, tolerance_text
from app.questions.service import PublishedQuestion
from app.quizzes import service
from app.quizzes.grading import (
    MAX_TALK_BYTES,
    MULTI_RULE,
    InvalidAnswer,
    correct_answer,
    grade,
    parse_number,
)
from app.quizzes.models import Attempt

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


def question_context(doc: QuestionDoc, *, variant: int = 0, variant_count: int = 1) -> dict[str, Any]:
    """What every question template needs, without the answer key: the rendered variant
    (`doc`) and which one it is of how many."""
    return {"doc": doc, "fmt": doc.effective_format, "multi_rule": MULTI_RULE,
            "tolerance": tolerance_text(doc) if doc.effective_format == "numeric" else "",
            "variant": variant, "variant_count": variant_count,
            "max_talk_chars": MAX_TALK_BYTES}


@dataclass(frozen=True)
class PartView:
    """One answered part of a case, graded, as the page shows it."""

    index: int
    doc: QuestionDoc  # the part as a question of its type
    answer: Any
    score: float
    correct: bool
    key: Any
    # The earlier part whose choice picked this part's version (None: the part has one version).
    follows: int | None = None

    @property
    def fmt(self) -> str:
        return self.doc.effective_format

    @property
    def tolerance(self) -> str:
        return tolerance_text(self.doc) if self.fmt == "numeric" else ""


def part_views(doc: QuestionDoc, answers: list[Any]) -> list[PartView]:
    """The answered parts of a (rendered) case, each graded against its own key (a part that
    depends on an earlier choice: the version that choice picked)."""
    views = []
    for j, answer in enumerate(answers[: len(doc.parts)]):
        part = doc.part(j, answers[:j])
        g = grade(part, answer)
        views.append(PartView(j, part, g.answer, g.score, g.correct, correct_answer(part),
                              doc.parts[j].depends_on))
    return views


def step_context(doc: QuestionDoc, state: dict[str, Any] | None,
                 withheld: bool = False) -> dict[str, Any]:
    """A case or talk-through under way: the parts answered (graded) and the next part's
    form, or the written text and the rubric to tick. Nothing of a later part, nor the model
    answer before the text is written. `withheld` (the one rule, app/reveal.py): the parts
    answered without their grades and keys, and nothing to answer."""
    state = state or {}
    if withheld:
        return {"case_parts": part_views(doc, list(state.get("parts", []))) if doc.is_case else [],
                "case_total": len(doc.parts), "case_next": None, "withheld": reveal.WITHHELD}
    if doc.is_case:
        answers = list(state.get("parts", []))
        done = part_views(doc, answers)
        ctx: dict[str, Any] = {"case_parts": done, "case_total": len(doc.parts),
                               "case_next": len(done) if len(done) < len(doc.parts) else None}
        if ctx["case_next"] is not None:
            part = doc.part(ctx["case_next"], answers)
            ctx.update(part_doc=part, part_fmt=part.effective_format,
                       part_follows=doc.parts[ctx["case_next"]].depends_on,
                       part_tolerance=tolerance_text(part) if part.effective_format == "numeric" else "")
        return ctx
    if doc.is_talk:
        return {"talk_text": state.get("text")}
    return {}


def graded_context(
    doc: QuestionDoc, answer: Any, score: float, correct: bool, typed: Any = None,
) -> dict[str, Any]:
    """The graded state: now the answer key and the explanation may be shown.

    `typed` is the text the learner sent, when it was just sent: a number typed with a
    comma is graded as the page then says (1,75 -> 1.75)."""
    # The variant stays the caller's (the one answered): the Verify panel swapped in with the
    # verdict runs that variant, never variant 0 in its place.
    shown = {k: v for k, v in question_context(doc).items() if k not in ("variant", "variant_count")}
    ctx = {**shown, "graded": True, "answer": answer, "score": score,
           "correct": correct, "key": correct_answer(doc, answer), "reading": _reading(doc, typed)}
    if doc.is_case and isinstance(answer, dict):
        ctx["case_parts"] = part_views(doc, list(answer.get("parts", [])))
        ctx["case_total"] = len(doc.parts)
    if doc.is_talk and isinstance(answer, dict):
        ctx["talk_text"] = answer.get("text", "")
        ctx["ticked"] = list(answer.get("ticked", []))
    return ctx


def attempt_doc(db_session: Session, attempt: Attempt) -> QuestionDoc:
    """The variant an attempt answered, from its own revision (whatever the question is now)."""
    revision = db_session.get(QuestionRevision, attempt.revision_id)
    assert revision is not None
    return questions_service.revision_variant(revision=revision, variant=attempt.variant)


def withheld_context(doc: QuestionDoc, *, variant: int, variant_count: int) -> dict[str, Any]:
    """A question of the learner's live mock interview, anywhere but in that interview: asked,
    never graded, keyed or explained, and not answered here (app/reveal.py)."""
    return {**question_context(doc, variant=variant, variant_count=variant_count),
            "withheld": reveal.WITHHELD}


def attempt_context(db_session: Session, attempt: Attempt, *, now: datetime,
                    variant_count: int = 1, sight: reveal.Sight | None = None) -> dict[str, Any]:
    """The graded state of a stored attempt, against the key of the variant it answered; while
    its question is in the learner's live mock interview, the question with the grade, key and
    explanation withheld (the one rule)."""
    doc = attempt_doc(db_session, attempt)
    sight = sight or reveal.sight(db_session=db_session, learner_id=attempt.learner_id, now=now)
    if sight.withheld(attempt.question_id):
        return withheld_context(doc, variant=attempt.variant, variant_count=variant_count)
    return {**graded_context(doc, attempt.answer, attempt.score, attempt.correct),
            "variant": attempt.variant, "variant_count": variant_count}


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


def _small_int(value: Any) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) < 6 else None


def read_variant(form: Any) -> int | None:
    """The variant a form says it shows (None when it says nothing readable)."""
    return _small_int(form.get("variant"))


def read_step(form: Any, doc: QuestionDoc) -> tuple[int | None, Any]:
    """(part, answer) of a case or talk-through form: a part's answer read as its type's, or
    {"text": ...} then {"ticked": [...]} for a talk-through."""
    if doc.is_case:
        part = _small_int(form.get("part"))
        fmt = doc.parts[part].part_type if part is not None and part < len(doc.parts) else "single"
        return part, read_answer(form, fmt)[0]
    if form.get("step") == "ticks":
        ticked = [_small_int(v) if _small_int(v) is not None else v
                  for v in form.getlist("ticked") if isinstance(v, str)]
        return None, {"ticked": ticked}
    text = form.get("text")
    return None, {"text": text.replace("\r\n", "\n") if isinstance(text, str) else ""}


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


def read_submission(form: Any, question: PublishedQuestion,
                    variant: int) -> tuple[int | None, Any, str | None]:
    """(part, answer, token) of an answer form for this variant of the question."""
    token = form.get("token")
    token = token if isinstance(token, str) else None
    doc = question.variant(variant if 0 <= variant < question.doc.variant_count else 0)
    if doc.is_case or doc.is_talk:
        part, raw = read_step(form, doc)
        return part, raw, token
    return None, read_answer(form, doc.effective_format)[0], token


def shown_variant(db_session: Session, question: PublishedQuestion, learner_id: str) -> int:
    """The variant a standalone page shows this learner now (a case under way keeps its own)."""
    return service.drawn_variant(db_session=db_session, learner_id=learner_id,
                                 question_id=question.id, count=question.doc.variant_count)


def standalone_context(db_session: Session, question: PublishedQuestion, learner_id: str,
                       variant: int, *, now: datetime) -> dict[str, Any]:
    """A standalone question page before answering: the variant, and for a case or talk-through
    the steps taken so far (on the revision and variant they were taken on). A question of the
    learner's live mock interview is answered there, not here: it shows that, and no grade."""
    count = question.doc.variant_count
    doc = question.variant(variant)
    ctx = question_context(doc, variant=variant, variant_count=count)
    withheld = reveal.in_live_mock(db_session=db_session, learner_id=learner_id,
                                   question_id=question.id, now=now) is not None
    if withheld:
        ctx["withheld"] = reveal.WITHHELD
    if doc.is_case or doc.is_talk:
        partial = service.partial_answer(db_session=db_session, learner_id=learner_id,
                                         question_id=question.id)
        if partial is not None:
            revision = db_session.get(QuestionRevision, partial.revision_id)
            assert revision is not None
            doc = questions_service.revision_variant(revision=revision, variant=partial.variant)
            ctx = question_context(doc, variant=partial.variant, variant_count=count)
        ctx.update(step_context(doc, partial.state if partial is not None else None, withheld))
    return ctx


def answer_standalone(
    *, db_session: Session, question: PublishedQuestion, learner_id: str, raw: Any,
    token: str | None, confidence: Any, now: datetime, predicting: bool = False,
    variant: int = 0, part: int | None = None, client_ip: str | None = None,
) -> Answered:
    """Grade a standalone answer to one variant (the question page, or the Review page) and
    schedule its card; for a case or talk-through, take one step of it.

    A replayed submission shows the first one's grade (409); an answer that is no answer
    is shown again with the reason (422); a step out of turn shows where the answer stands
    (409). `predicting`: the learner pressed "Run it" before answering, so the answer is
    their prediction."""
    count = question.doc.variant_count
    try:
        variant = service.check_variant(question.doc, variant)
    except service.NoSuchVariant as exc:
        return Answered({**question_context(question.variant(0), variant_count=count),
                         "error": str(exc), "token": new_form_token()}, 422)
    doc = question.variant(variant)
    if doc.is_case or doc.is_talk:
        return _step_standalone(db_session, question, learner_id, raw, token, confidence, now,
                                variant, part, client_ip)
    try:
        _attempt, grade = service.answer_question(
            db_session=db_session, learner_id=learner_id, question=question, raw_answer=raw,
            token=token, time_taken_ms=time_taken_ms(token),
            confidence=service.clean_confidence(confidence), now=now, variant=variant,
            client_ip=client_ip)
        return Answered({**graded_context(doc, grade.answer, grade.score, grade.correct, raw),
                         "variant": variant, "variant_count": count}, 200)
    except service.AlreadyAnswered as exc:
        ctx = attempt_context(db_session, exc.attempt, now=now, variant_count=count)
        ctx["notice"] = "This answer was already submitted; the first submission counts."
        return Answered(ctx, 409)
    except (reveal.InLiveMock, reveal.NotDrawn) as exc:
        return _refused(db_session, question, learner_id, exc, confidence, now)
    except InvalidAnswer as exc:
        message = f"Predict first: {exc}." if predicting else str(exc)
        return Answered({**question_context(doc, variant=variant, variant_count=count),
                         "error": message, "token": token,
                         "previous": raw, "previous_confidence": confidence}, 422)


def _refused(db_session: Session, question: PublishedQuestion, learner_id: str,
             exc: reveal.InLiveMock | reveal.NotDrawn, confidence: Any, now: datetime) -> Answered:
    """An answer refused by the rule (a live mock's question, another variant than the drawn
    one): the question again as drawn for the learner, unanswered, with the reason (409)."""
    variant = shown_variant(db_session, question, learner_id)
    ctx = standalone_context(db_session, question, learner_id, variant, now=now)
    ctx.update(token=new_form_token(), notice=str(exc), previous_confidence=confidence)
    return Answered(ctx, 409)


def _step_standalone(
    db_session: Session, question: PublishedQuestion, learner_id: str, raw: Any,
    token: str | None, confidence: Any, now: datetime, variant: int, part: int | None,
    client_ip: str | None = None,
) -> Answered:
    count = question.doc.variant_count
    try:
        stepped = service.answer_step(
            db_session=db_session, learner_id=learner_id, question=question, variant=variant,
            part=part, raw=raw, token=token, confidence=service.clean_confidence(confidence),
            now=now, client_ip=client_ip)
    except service.AlreadyAnswered as exc:
        ctx = attempt_context(db_session, exc.attempt, now=now, variant_count=count)
        ctx["notice"] = "This answer was already submitted; the first submission counts."
        return Answered(ctx, 409)
    except (reveal.InLiveMock, reveal.NotDrawn) as exc:
        return _refused(db_session, question, learner_id, exc, confidence, now)
    except (service.OutOfTurn, InvalidAnswer) as exc:
        ctx = standalone_context(db_session, question, learner_id, variant, now=now)
        # A fresh token: the refused step stored nothing, and the next try is a new submission.
        ctx.update(token=new_form_token(), previous=raw if isinstance(exc, InvalidAnswer) else None,
                   previous_confidence=confidence)
        ctx["error" if isinstance(exc, InvalidAnswer) else "notice"] = str(exc)
        return Answered(ctx, 422 if isinstance(exc, InvalidAnswer) else 409)
    if stepped.complete:
        assert stepped.grade is not None
        g = stepped.grade
        return Answered({**graded_context(stepped.doc, g.answer, g.score, g.correct),
                         "variant": variant, "variant_count": count}, 200)
    ctx = {**question_context(stepped.doc, variant=variant, variant_count=count),
           **step_context(stepped.doc, stepped.state), "token": new_form_token(),
           "just_answered": stepped.part}
    return Answered(ctx, 200)
