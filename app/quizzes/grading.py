"""Grading: pure functions from a question document and an answer to a score."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from app.errors import InvalidInput
from app.questions.schema import QuestionDoc

MULTI_RULE = (
    "Partial credit: (right picks − wrong picks) ÷ number of right choices, never below 0."
)


# Digits grouped in threes by commas, optionally with a decimal point: 1,400 or 12,345.5.
_THOUSANDS = re.compile(r"[+-]?[1-9]\d{0,2}(,\d{3})+(\.\d*)?")


def parse_number(text: str) -> tuple[float, str | None]:
    """A typed number, accepting a decimal comma; and, when a comma was read, how.

    "1,75" is 1.75 (a decimal comma); "1,400" and "12,345.5" are read with thousands
    separators, as is any comma before a decimal point. The second value says which,
    so the learner sees what was graded. Raises ValueError for text that is no number.
    """
    text = text.strip().replace("_", "").replace(" ", "")
    if "," not in text:
        return float(text), None
    if _THOUSANDS.fullmatch(text):
        value = float(text.replace(",", ""))
        return value, f"“{text}” was read as {value:g} (commas as thousands separators)"
    if text.count(",") == 1 and "." not in text:
        value = float(text.replace(",", "."))
        return value, f"“{text}” was read as {value:g} (a decimal comma)"
    raise ValueError(text)


class InvalidAnswer(InvalidInput):
    """The answer is not a possible answer to this question (not a wrong one: an invalid one)."""


@dataclass(frozen=True)
class Grade:
    score: float
    correct: bool
    answer: Any  # the normalised answer that was graded


def normalise_answer(doc: QuestionDoc, raw: Any) -> Any:
    """The answer in canonical form: a key, a sorted list of keys, or a float."""
    if doc.is_exercise:
        raise InvalidAnswer("an exercise is answered by running your code on its page")
    fmt = doc.effective_format
    keys = [c.key for c in doc.choices]
    if fmt == "single":
        if isinstance(raw, list) and len(raw) == 1:
            raw = raw[0]
        if not isinstance(raw, str) or not raw:
            raise InvalidAnswer("pick one of the choices")
        if raw not in keys:
            raise InvalidAnswer(f"{raw!r} is not one of the choices ({', '.join(keys)})")
        return raw
    if fmt == "multi":
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list) or not raw:
            raise InvalidAnswer("pick at least one choice")
        if not all(isinstance(k, str) for k in raw):
            raise InvalidAnswer("choices are given by their keys")
        unknown = [k for k in raw if k not in keys]
        if unknown:
            raise InvalidAnswer(f"{', '.join(map(repr, unknown))} not among the choices")
        if len(set(raw)) != len(raw):
            raise InvalidAnswer("a choice was picked twice")
        return sorted(raw)
    # numeric
    if isinstance(raw, bool):
        raise InvalidAnswer("enter a number")
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise InvalidAnswer("enter a number")
        try:
            raw, _how = parse_number(text)
        except ValueError:
            raise InvalidAnswer(f"{text!r} is not a number (write 1.75 or 1,75)") from None
    if not isinstance(raw, int | float):
        raise InvalidAnswer("enter a number")
    try:
        value = float(raw)
    except OverflowError:  # an integer with hundreds of digits
        raise InvalidAnswer("that number is too large") from None
    if not math.isfinite(value):
        raise InvalidAnswer("enter a finite number")
    return value


def grade(doc: QuestionDoc, raw: Any) -> Grade:
    """Grade an answer; raises InvalidAnswer for one that is not a possible answer."""
    answer = normalise_answer(doc, raw)
    fmt = doc.effective_format
    if fmt == "single":
        ok = answer in doc.correct_keys
        return Grade(1.0 if ok else 0.0, ok, answer)
    if fmt == "multi":
        right = set(doc.correct_keys)
        picked = set(answer)
        score = max(0, len(picked & right) - len(picked - right)) / len(right)
        return Grade(score, score == 1.0, answer)
    assert doc.answer is not None
    ok = doc.answer.accepts(answer)
    return Grade(1.0 if ok else 0.0, ok, answer)


def correct_answer(doc: QuestionDoc) -> Any:
    """The answer key in the same shape answers take (None for an exercise: it has no key)."""
    if doc.is_exercise:
        return None
    fmt = doc.effective_format
    if fmt == "single":
        return doc.correct_keys[0]
    if fmt == "multi":
        return doc.correct_keys
    assert doc.answer is not None
    return doc.answer.value


def tolerance_text(doc: QuestionDoc) -> str:
    """How close a numeric answer must be, in words."""
    ans = doc.answer
    if ans is None:
        return ""
    parts = []
    if ans.abs_tol:
        parts.append(f"±{ans.abs_tol:g}{(' ' + ans.unit) if ans.unit else ''}")
    if ans.rel_tol:
        parts.append(f"±{ans.rel_tol * 100:g}%")
    return " or ".join(parts) if parts else "exact"
