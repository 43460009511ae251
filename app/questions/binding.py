"""The answer key bound to the expectations: where they disagree, or a choice is left
unaccounted for.

Static, from the document alone. The loader reports these problems with their lines
(app.questions.bank), and the gate (app.verify.gate) refuses a revision while any remain;
with every expectation then passing on a real run, the key is what torch measured.
"""

from __future__ import annotations

from app.questions.schema import Expectation, FieldError, QuestionDoc, VerifyBlock
from app.questions.values import describe_variant, same_value


def _in_variant(exp: Expectation, verify: VerifyBlock) -> bool:
    """False when the check's `when` names a variable whose value this variant does not have."""
    return all(same_value(verify.params[k], v) for k, v in exp.when.items()
               if k in verify.params and k not in verify.knobs)


def measured_key(exp: Expectation) -> float | None:
    """The number an is_answer check says the key is: a value check's one number, a
    collectives check's count or a bytes check's equals (None for any other check)."""
    if exp.value is not None:
        equals = exp.value.equals
        return float(equals) if isinstance(equals, int | float) and not isinstance(equals, bool) else None
    if exp.collectives is not None and isinstance(exp.collectives.count, int):
        return float(exp.collectives.count)
    if exp.bytes is not None and isinstance(exp.bytes.equals, int | float):
        return float(exp.bytes.equals)
    return None


def key_binding_problems(doc: QuestionDoc) -> list[FieldError]:
    """Where the answer key and the expectations disagree, or a choice is left unaccounted for.

    Static: it reads the document only. With every expectation passing on a real run
    (the gate), an empty list means the key is what torch measured. A question with
    variables is checked variant by variant; each problem names the first variant it is in.
    """
    if doc.verify is None or doc.is_exercise:
        return []
    if doc.variables:
        seen: set[tuple[tuple[str | int, ...], str]] = set()
        found: list[FieldError] = []
        for i in range(doc.variant_count):
            for p in key_binding_problems(doc.render(i)):
                # The rendered key's value is the template's formula.
                loc = ("answer", "formula") if p.loc == ("answer", "value") else p.loc
                if (loc, str(p)) not in seen:
                    seen.add((loc, str(p)))
                    found.append(FieldError(loc, f"{describe_variant(i, doc.variant_params(i))}: {p}"))
        return found
    problems: list[FieldError] = []
    verify = doc.verify
    # In a variant, only the checks of that variant bind its key.
    expect = [(i, e) for i, e in enumerate(verify.expect) if _in_variant(e, verify)]
    if doc.effective_format == "numeric":
        assert doc.answer is not None and doc.answer.value is not None
        answers = [(i, e) for i, e in expect if e.is_answer]
        if not answers:
            problems.append(FieldError(("verify", "expect"),
                                       "a measured numeric question needs an expectation with "
                                       "is_answer: true (the key is the measured value)"))
        for i, e in answers:
            measured = measured_key(e)
            if measured is None:
                problems.append(FieldError(("verify", "expect", i, "is_answer"),
                                           f"expect[{i}] is_answer needs a value check of one number, "
                                           "a collectives check with count or a bytes check with equals"))
            elif not doc.answer.accepts(measured):
                problems.append(FieldError(
                    ("answer", "value"),
                    f"the key {doc.answer.value:g} disagrees with expect[{i}], which measures "
                    f"{measured:g}"))
        for i, e in expect:
            if e.supports or e.rules_out:
                problems.append(FieldError(("verify", "expect", i),
                                           f"expect[{i}]: a numeric question has no choices to support"))
        return problems
    keys = {c.key for c in doc.choices}
    correct = set(doc.correct_keys)
    supported: set[str] = set()
    ruled_out: set[str] = set()
    for i, e in expect:
        if e.is_answer:
            problems.append(FieldError(("verify", "expect", i, "is_answer"),
                                       f"expect[{i}]: is_answer is for numeric questions"))
        for field_name, named in (("supports", e.supports), ("rules_out", e.rules_out)):
            for key in named:
                if key not in keys:
                    problems.append(FieldError(("verify", "expect", i, field_name),
                                               f"expect[{i}].{field_name} names no choice {key!r}"))
        for key in e.supports:
            if key in keys and key not in correct:
                problems.append(FieldError(
                    ("verify", "expect", i, "supports"),
                    f"expect[{i}] ({e.label!r}) supports choice {key}, but the key marks it wrong"))
        for key in e.rules_out:
            if key in correct:
                problems.append(FieldError(
                    ("verify", "expect", i, "rules_out"),
                    f"expect[{i}] ({e.label!r}) rules out choice {key}, but the key marks it right"))
        supported.update(e.supports)
        ruled_out.update(e.rules_out)
    for key in doc.explained:
        if key not in keys:
            problems.append(FieldError(("explained", key), f"explained names no choice {key!r}"))
    for key in sorted(correct - supported - set(doc.explained)):
        problems.append(FieldError(
            "choices", f"choice {key} is marked right but no expectation supports it "
                       "(add it to an expectation's supports, or explain it under explained)"))
    for key in sorted(keys - correct - ruled_out - set(doc.explained)):
        problems.append(FieldError(
            "choices", f"choice {key} is marked wrong but no expectation rules it out "
                       "(add it to an expectation's rules_out, or explain it under explained)"))
    return problems
