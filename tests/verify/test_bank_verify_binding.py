"""`ddpdrill bank verify` holds the answer key to the expectations bound to it (the same gate as
Publish): change only the key, only an expectation, or both consistently, on real runs.

Files with such a disagreement are refused by the loader (`bank check`); these tests put the
changed revision in the database directly, as an editor save would, so the gate itself is
what must catch it."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.cli import app
from app.db import session_scope
from app.questions.models import Question
from app.questions.schema import Choice, QuestionDoc
from app.questions.service import add_revision, revision_doc
from tests.factories import FIXTURE_BANK
from tests.verify.test_bank_verify import load

SLUG = "fixture-single"


def _key_to_c(doc: QuestionDoc) -> QuestionDoc:
    return doc.model_copy(update={"choices": [
        c.model_copy(update={"correct": c.key == "c"}) for c in doc.choices]})


def _binding_to_c(doc: QuestionDoc) -> QuestionDoc:
    assert doc.verify is not None
    expect = [e.model_copy(update={"supports": ["c"], "rules_out": ["a", "b"]})
              if e.supports else e for e in doc.verify.expect]
    return doc.model_copy(update={"verify": doc.verify.model_copy(update={"expect": expect})})


def _texts_swapped(doc: QuestionDoc) -> QuestionDoc:
    """The mean moves from b to c (text and tick together)."""
    b, c = doc.choices[1], doc.choices[2]
    choices = [doc.choices[0], Choice.model_validate({"key": "b", "text": c.text}),
               Choice.model_validate({"key": "c", "text": b.text, "correct": True})]
    return doc.model_copy(update={"choices": choices})


def _audit(cli: CliRunner, factory: sessionmaker[Session], change) -> tuple[int, dict]:
    load(factory, FIXTURE_BANK)
    if change is not None:
        with session_scope(factory) as s:
            q = s.scalar(select(Question).where(Question.slug == SLUG))
            assert q is not None and q.current_revision is not None
            add_revision(db_session=s, question=q, source="editor",
                         doc=change(revision_doc(q.current_revision)))
    result = cli.invoke(app, ["bank", "verify", "--json", "--slug", SLUG])
    [audit] = json.loads(result.stdout)
    return result.exit_code, audit


def _failed_checks(audit: dict) -> list[str]:
    """What each failed check measured (with a failed run's diagnosis): the assertion message."""
    return [f"{combo['params']}: {check['label']}: {check['measured']}"
            for combo in audit["combos"] for check in combo["checks"] if not check["passed"]]


def test_the_bound_fixture_passes(cli_env: CliRunner, session_factory: sessionmaker[Session]) -> None:
    code, audit = _audit(cli_env, session_factory, None)
    assert code == 0 and audit["passed"] and audit["binding_problems"] == [], _failed_checks(audit)


@pytest.mark.parametrize(("change", "expected"), [
    (_key_to_c, ["expect[0] ('mean on every rank') supports choice b, but the key marks it wrong",
                 "expect[0] ('mean on every rank') rules out choice c, but the key marks it right"]),
    (_binding_to_c, ["expect[0] ('mean on every rank') supports choice c, but the key marks it wrong",
                     "expect[0] ('mean on every rank') rules out choice b, but the key marks it right"]),
], ids=["only-the-key", "only-an-expectation"])
def test_bank_verify_fails_when_key_and_binding_disagree(
    cli_env: CliRunner, session_factory: sessionmaker[Session], change, expected: list[str],
) -> None:
    code, audit = _audit(cli_env, session_factory, change)
    assert code == 1 and not audit["passed"]
    # The measurement itself still agrees: only the binding fails, and it says why.
    assert all(c["passed"] for c in audit["combos"])
    messages = [p["message"] for p in audit["binding_problems"]]
    assert set(expected) <= set(messages), messages
    table = cli_env.invoke(app, ["bank", "verify", "--slug", SLUG], env={"COLUMNS": "300"})
    assert table.exit_code == 1
    assert "key binding" in table.stdout and "but the key marks it" in table.stdout
    assert "0/1 questions agree with torch" in table.stdout


def test_bank_verify_passes_when_key_and_binding_change_together(
    cli_env: CliRunner, session_factory: sessionmaker[Session],
) -> None:
    code, audit = _audit(cli_env, session_factory, lambda d: _binding_to_c(_texts_swapped(d)))
    assert code == 0 and audit["passed"], (_failed_checks(audit), audit["binding_problems"])


def test_an_explained_choice_needs_no_measurement(
    cli_env: CliRunner, session_factory: sessionmaker[Session],
) -> None:
    def explain_c(doc: QuestionDoc) -> QuestionDoc:
        assert doc.verify is not None
        expect = [e.model_copy(update={"rules_out": ["a"]}) if e.rules_out else e
                  for e in doc.verify.expect]
        return doc.model_copy(update={
            "verify": doc.verify.model_copy(update={"expect": expect}),
            "explained": {"c": "no run can show what a local value would be"}})

    code, audit = _audit(cli_env, session_factory, explain_c)
    assert code == 0 and audit["passed"], (_failed_checks(audit), audit["binding_problems"])
