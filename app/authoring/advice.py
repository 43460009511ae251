"""The publish gate's key problems, said to an author in words, with the one-click fix where
there is one ("the key ticks C, but the run shows A is the averaged gradient: tick A").

`app.questions.binding.key_binding_problems` is the rule (the gate refuses while it finds any);
this module only words the same finding for a person, one item per choice or expectation,
and offers the change to the answer key that would satisfy it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from app.questions.binding import key_binding_problems, measured_key
from app.questions.schema import Expectation, QuestionDoc


@dataclass(frozen=True)
class Fix:
    """A change to the answer key: the choices to mark right, or the number to give."""

    label: str
    correct: tuple[str, ...] | None = None
    value: float | None = None


@dataclass
class Advice:
    text: str
    fix: Fix | None = None
    loc: tuple[str | int, ...] = field(default_factory=tuple)


def _name(i: int, e: Expectation) -> str:
    return f"“{e.label}” (expectation {i + 1})" if e.label else f"expectation {i + 1}"


def _cap(text: str) -> str:
    return text[0].upper() + text[1:] if text else text


def _keys(keys: list[str] | set[str] | tuple[str, ...]) -> str:
    """Choice keys as the page shows them (A, B and C)."""
    ordered = sorted(k.upper() for k in keys)
    return ordered[0] if len(ordered) == 1 else ", ".join(ordered[:-1]) + " and " + ordered[-1]


_EXPECT_INDEX = re.compile(r"expect\[(\d+)\]")


def _worded(message: str) -> str:
    """A rule's own message with its index style (expect[1]) in words (expectation 2)."""
    return _EXPECT_INDEX.sub(lambda m: f"expectation {int(m.group(1)) + 1}", message)


def key_advice(doc: QuestionDoc) -> list[Advice]:
    """Where the answer key and the expectations disagree, one item each, in words."""
    problems = key_binding_problems(doc)
    if not problems:
        return []
    if doc.variables or doc.verify is None:
        # Variant by variant, the rule's own messages already name the variant.
        return [Advice(_worded(str(p)), loc=p.loc) for p in problems]
    if doc.effective_format == "numeric":
        return _numeric_advice(doc)
    return _choice_advice(doc)


def _numeric_advice(doc: QuestionDoc) -> list[Advice]:
    assert doc.verify is not None and doc.answer is not None
    out: list[Advice] = []
    answers = [(i, e) for i, e in enumerate(doc.verify.expect) if e.is_answer]
    if not answers:
        out.append(Advice("No expectation measures the key: mark the one that measures the "
                          "answer with is_answer: true.", loc=("verify", "expect")))
    for i, e in answers:
        measured = measured_key(e)
        if measured is None:
            out.append(Advice(f"{_cap(_name(i, e))} is marked is_answer, but it does not "
                              "measure one number: use a value check of one number, a collectives "
                              "count or a bytes equals.", loc=("verify", "expect", i)))
        elif not doc.answer.accepts(measured):
            out.append(Advice(f"The key says {doc.answer.value:g}, but {_name(i, e)} measures "
                              f"{measured:g}: set the key to {measured:g}, or change the "
                              "expectation.",
                              Fix(f"Set the key to {measured:g}", value=measured), ("answer", "value")))
    for i, e in enumerate(doc.verify.expect):
        if e.supports or e.rules_out:
            out.append(Advice(f"{_cap(_name(i, e))} supports or rules out choices, but a "
                              "numeric question has none: remove its supports and rules_out.",
                              loc=("verify", "expect", i)))
    return out


def _choice_advice(doc: QuestionDoc) -> list[Advice]:
    assert doc.verify is not None
    keys = {c.key for c in doc.choices}
    correct = set(doc.correct_keys)
    explained = set(doc.explained)
    expect = list(enumerate(doc.verify.expect))
    supports: dict[str, list[str]] = {}
    rules_out: dict[str, list[str]] = {}
    out: list[Advice] = []
    for i, e in expect:
        for key in e.supports:
            supports.setdefault(key, []).append(_name(i, e))
        for key in e.rules_out:
            rules_out.setdefault(key, []).append(_name(i, e))
        if e.is_answer:
            out.append(Advice(f"{_cap(_name(i, e))} is marked is_answer, which is for "
                              "numeric questions: remove it.", loc=("verify", "expect", i)))
        for key in sorted((set(e.supports) | set(e.rules_out)) - keys):
            out.append(Advice(f"{_cap(_name(i, e))} names choice {key.upper()!r}, which the "
                              "question does not have.", loc=("verify", "expect", i)))
    for key in sorted(explained - keys):
        out.append(Advice(f"Choice {key.upper()!r} is explained, but the question has no such choice.",
                          loc=("explained", key)))
    measured_right = {k for k in supports if k in keys}
    measured_wrong = {k for k in rules_out if k in keys} - measured_right
    to_tick = measured_right - correct
    to_untick = (measured_wrong & correct) | ((correct - measured_right - explained)
                                              if doc.effective_format == "single" and to_tick else set())
    if to_tick or to_untick:
        new = tuple(sorted((correct - to_untick) | to_tick))
        fix: Fix | None
        if doc.effective_format == "single" and len(new) != 1:
            fix = None
        elif doc.effective_format == "single":
            # One choice is right: ticking it is the whole change.
            fix = Fix(f"Tick {_keys(new)}", correct=new)
        else:
            what = " and ".join(filter(None, [f"tick {_keys(to_tick)}" if to_tick else "",
                                              f"untick {_keys(to_untick)}" if to_untick else ""]))
            fix = Fix(_cap(what), correct=new)
        # What each expectation says about the choices to change, one clause per expectation.
        said: dict[str, list[str]] = {}
        for key in sorted(to_tick):
            for name in supports[key]:
                said.setdefault(name, []).append(f"supports {_keys([key])}")
        for key in sorted(to_untick & measured_wrong):
            for name in rules_out[key]:
                said.setdefault(name, []).append(f"rules out {_keys([key])}")
        shown = [f"{name} {' and '.join(parts)}" for name, parts in said.items()]
        ticks = f"the key ticks {_keys(correct)}" if correct else "the key ticks nothing"
        action = fix.label[0].lower() + fix.label[1:] if fix else "mark exactly one choice right"
        out.append(Advice(f"{_cap(ticks)}, but the run says otherwise: {'; '.join(shown)}. "
                          f"{_cap(action)}, or change the expectation.", fix, ("choices",)))
    handled = to_tick | to_untick
    for key in sorted(correct - measured_right - explained - handled):
        out.append(Advice(f"Choice {key.upper()} is marked right, but no expectation supports it: add it "
                          "to an expectation's supports, or explain it under “explained”.",
                          loc=("choices",)))
    for key in sorted(keys - correct - measured_wrong - explained - handled - measured_right):
        out.append(Advice(f"Choice {key.upper()} is marked wrong, but no expectation rules it out: add it "
                          "to an expectation's rules_out, or explain it under “explained”.",
                          loc=("choices",)))
    return out


def apply_fix(doc: QuestionDoc, fix: Fix) -> QuestionDoc:
    """The document with the fix's answer key (everything else as it was)."""
    data: dict[str, Any] = doc.model_dump(mode="json", exclude_defaults=True,
                                          exclude={"snippet_text"})
    if fix.correct is not None:
        for c, raw in zip(doc.choices, data.get("choices", []), strict=True):
            if c.key in fix.correct:
                raw["correct"] = True
            else:
                raw.pop("correct", None)
    if fix.value is not None:
        data.setdefault("answer", {})["value"] = fix.value
    return QuestionDoc.model_validate(data).model_copy(update={"snippet_text": doc.snippet_text})
