"""Shapes of the JSON API under /api/v1 for questions and attempts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.questions.schema import BucketTrace, KnobValue, QuestionDoc, RankEventsTrace, tolerance_text


class ChoiceOut(BaseModel):
    key: str
    text: str


class KnobOut(BaseModel):
    name: str
    label: str
    values: list[KnobValue]
    default: KnobValue


class ExerciseOut(BaseModel):
    """An exercise as the learner sees it: never its solution, harness or hidden checks."""

    starter: str
    hints: list[str]
    visible_checks: list[str]
    hidden_checks: int
    run_url: str


class QuestionSummaryOut(BaseModel):
    slug: str
    topic: str
    title: str
    difficulty: int
    type: str
    tags: list[str]
    has_snippet: bool
    url: str


class PartOut(BaseModel):
    """One part of a case as it is asked: no key, no explanation."""

    index: int = Field(description="0 for the first part; answer it with `part` set to this.")
    prompt: str
    answer_format: Literal["single", "multi", "numeric"]
    choices: list[ChoiceOut] = []
    unit: str | None = None
    tolerance: str | None = None


def part_out(doc: QuestionDoc, j: int, earlier: Sequence[Any] = ()) -> PartOut:
    """Part j of a rendered case as it is asked (after `earlier`, the answers to the parts
    before it, which pick the version of a part that depends on an earlier choice)."""
    part = doc.part(j, earlier)
    fmt = part.effective_format
    assert fmt in ("single", "multi", "numeric")
    numeric = fmt == "numeric"
    return PartOut(index=j, prompt=part.prompt, answer_format=fmt,
                   choices=[ChoiceOut(key=c.key, text=c.text) for c in part.choices],
                   unit=part.answer.unit if numeric and part.answer else None,
                   tolerance=tolerance_text(part) if numeric else None)


class AskedOut(BaseModel):
    """One variant of a question as a learner answers it: its own numbers, never its key.

    A case lists only the parts revealed so far (those answered, then the next); a
    talk-through's model answer and rubric come once its text is written.
    """

    variant: int = Field(0, description="Which variant this is (0 for a question without variables); "
                                        "send it back with the attempt.")
    variant_count: int = Field(1, description="How many variants the question has.")
    answer_format: Literal["single", "multi", "numeric", "exercise", "case", "talk"]
    prompt: str = Field(description="The variant's prompt (a case's scenario).")
    choices: list[ChoiceOut] = []
    unit: str | None = None
    tolerance: str | None = None
    trace: RankEventsTrace | BucketTrace | None = None
    part_count: int | None = Field(None, description="A case's number of parts.")
    parts: list[PartOut] = Field([], description="A case's parts revealed so far, in order.")
    next_part: int | None = Field(None, description="The part to answer next (a case).")
    written_text: str | None = Field(None, description="A talk-through's text, once written.")
    model_answer: str | None = Field(None, description="A talk-through's, once its text is written.")
    rubric: list[str] | None = Field(None, description="A talk-through's moves to tick, once "
                                                       "its text is written.")


def asked_fields(doc: QuestionDoc, *, variant: int, variant_count: int,
                 state: dict[str, Any] | None = None) -> dict[str, Any]:
    """AskedOut's fields for a rendered variant and the learner's steps so far (`state`)."""
    numeric = doc.effective_format == "numeric" and not (doc.is_case or doc.is_talk)
    fmt = ("exercise" if doc.is_exercise else "case" if doc.is_case else "talk" if doc.is_talk
           else doc.effective_format)
    out: dict[str, Any] = {
        "variant": variant, "variant_count": variant_count, "answer_format": fmt,
        "prompt": doc.prompt, "choices": [ChoiceOut(key=c.key, text=c.text) for c in doc.choices],
        "unit": doc.answer.unit if numeric and doc.answer else None,
        "tolerance": tolerance_text(doc) if numeric else None, "trace": doc.trace}
    state = state or {}
    if doc.is_case:
        given = list(state.get("parts", []))
        answered = len(given)
        following = answered if answered < len(doc.parts) else None
        shown = answered + (1 if following is not None else 0)
        out.update(part_count=len(doc.parts), next_part=following,
                   parts=[part_out(doc, j, given) for j in range(shown)])
    if doc.is_talk and "text" in state:
        out.update(written_text=state["text"], model_answer=doc.model_answer,
                   rubric=list(doc.rubric))
    return out


class QuestionOut(QuestionSummaryOut, AskedOut):
    """A question as a learner sees it before answering: no answer key, no explanation."""

    revision: int
    knobs: list[KnobOut] = []
    exercise: ExerciseOut | None = None


