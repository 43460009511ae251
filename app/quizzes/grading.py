"""Grading: pure functions from a question document and an answer to a score."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.errors import InvalidInput
from app.questions.schema import QuestionDoc

MULTI_RULE = (
    "Partial credit: (right picks − wrong picks) ÷ number of right choices, never below 0."
)
# A talk-through's written answer is kept for the learner to reread, not graded: this much
# covers a five-minute spoken answer.
MAX_TALK_BYTES = 8 * 1024
# Ticking a talk-through's rubric takes a written answer of real length: at least this many
# words and this many letters and digits (an empty or one-line answer could tick every move).
MIN_TALK_WORDS = 12
MIN_TALK_CHARS = 60
# A talk-through counts as answered well when the learner made this share of the moves.
TALK_CORRECT_SHARE = 0.8


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


def _concrete(doc: QuestionDoc) -> None:
    if doc.variables:
        # A programming error, not the learner's: grade the variant the learner was shown.
        raise ValueError("grade a rendered variant (QuestionDoc.render), not the template")


def normalise_answer(doc: QuestionDoc, raw: Any) -> Any:
    """The answer in canonical form: a key, a sorted list of keys, a float, for a case
    `{"parts": [answer, ...]}`, for a talk-through `{"text": ..., "ticked": [...]}`."""
    _concrete(doc)
    if doc.is_exercise:
        raise InvalidAnswer("an exercise is answered by running your code on its page")
    if doc.is_case:
        done: list[Any] = []
        for j, a in enumerate(_case_parts(doc, raw)):
            done.append(normalise_answer(doc.part(j, done), a))
        return {"parts": done}
    if doc.is_talk:
        return _normalise_talk(doc, raw)
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


def _case_parts(doc: QuestionDoc, raw: Any) -> list[Any]:
    parts = raw.get("parts") if isinstance(raw, dict) else None
    if not isinstance(parts, list):
        raise InvalidAnswer('a case is answered part by part: {"parts": [answer, ...]}')
    if len(parts) != len(doc.parts):
        raise InvalidAnswer(f"this case has {len(doc.parts)} parts; {len(parts)} answers were given")
    return parts


def _normalise_talk(doc: QuestionDoc, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or set(raw) - {"text", "ticked"}:
        raise InvalidAnswer('a talk-through is answered as {"text": ..., "ticked": [rubric numbers]}')
    text = raw.get("text", "")
    if not isinstance(text, str):
        raise InvalidAnswer("the written answer must be text")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TALK_BYTES:
        raise InvalidAnswer(f"the written answer is longer than {MAX_TALK_BYTES // 1024} KB")
    ticked = raw.get("ticked", [])
    if not isinstance(ticked, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                               for t in ticked):
        raise InvalidAnswer("ticked lists the rubric's moves by number")
    if any(not 0 <= t < len(doc.rubric) for t in ticked):
        raise InvalidAnswer(f"the rubric has moves 0 to {len(doc.rubric) - 1}")
    if len(set(ticked)) != len(ticked):
        raise InvalidAnswer("a move was ticked twice")
    if ticked and not real_talk(text):
        raise InvalidAnswer(TALK_TOO_SHORT, loc=("answer", "text"))
    return {"text": text, "ticked": sorted(ticked)}


TALK_TOO_SHORT = (f"the written answer (text) needs at least {MIN_TALK_WORDS} words and "
                  f"{MIN_TALK_CHARS} letters: say what you would do, then tick the moves you made")


def real_talk(text: str) -> bool:
    """Whether a talk-through's written answer is long enough to tick its rubric against."""
    return (len(text.split()) >= MIN_TALK_WORDS
            and sum(c.isalnum() for c in text) >= MIN_TALK_CHARS)


def grade_part(doc: QuestionDoc, j: int, raw: Any, earlier: Sequence[Any] = ()) -> Grade:
    """Grade one part of a case (of a rendered variant), as a question of the part's type;
    `earlier` are the answers to the parts before it, which pick the version of a part that
    depends on an earlier choice."""
    _concrete(doc)
    if not doc.is_case or not 0 <= j < len(doc.parts):
        raise InvalidAnswer(f"no part {j} to answer")
    return grade(doc.part(j, earlier), raw)


def grade_parts(doc: QuestionDoc, raw: Any) -> list[Grade]:
    """Every part of a case graded, in order: what the case's score is the mean of."""
    _concrete(doc)
    grades: list[Grade] = []
    for j, a in enumerate(_case_parts(doc, raw)):
        grades.append(grade(doc.part(j, [g.answer for g in grades]), a))
    return grades


def grade(doc: QuestionDoc, raw: Any) -> Grade:
    """Grade an answer; raises InvalidAnswer for one that is not a possible answer.

    A case scores the mean of its parts and is correct when every part is; a talk-through
    scores the share of rubric moves ticked and is correct from TALK_CORRECT_SHARE.
    """
    answer = normalise_answer(doc, raw)
    if doc.is_case:
        parts = grade_parts(doc, answer)
        score = sum(g.score for g in parts) / len(parts)
        return Grade(score, all(g.correct for g in parts), answer)
    if doc.is_talk:
        score = len(answer["ticked"]) / len(doc.rubric)
        return Grade(score, score >= TALK_CORRECT_SHARE, answer)
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


def correct_answer(doc: QuestionDoc, given: Any = None) -> Any:
    """The answer key in the same shape answers take (None for an exercise or a talk-through:
    they have no key; a case's is `{"parts": [key, ...]}`). A part that depends on an earlier
    choice gives the key of the version the learner's answer (`given`, `{"parts": [...]}`)
    picked, or without one the version the key itself picks."""
    _concrete(doc)
    if doc.is_exercise or doc.is_talk:
        return None
    if doc.is_case:
        picked = given.get("parts") if isinstance(given, dict) else None
        keys: list[Any] = []
        for j in range(len(doc.parts)):
            path = picked[:j] if isinstance(picked, list) and len(picked) >= j else keys
            keys.append(correct_answer(doc.part(j, path)))
        return {"parts": keys}
    fmt = doc.effective_format
    if fmt == "single":
        return doc.correct_keys[0]
    if fmt == "multi":
        return doc.correct_keys
    assert doc.answer is not None
    return doc.answer.value
