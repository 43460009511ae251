"""The answer key bound to the measurement: the Publish gate, the editor, and what a learner
sees after the key changes.

Each expectation names the choices its measurement supports or rules out; the gate
(app.verify.gate, shared with `bank verify`) refuses a revision whose key disagrees with
them, even when every measured check passes. Runs are real gloo runs in a real Worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.models import Question
from app.settings import Settings
from app.verify.models import Run
from tests.authoring.helpers import KNOBS, create_question, editor_data, htmx, save_editor
from tests.authoring.test_publish import _post, _publish, work
from tests.factories import form_fields, parse, parse_fragment, submit_answer, text

# Choice b ("The mean") is right: the measured 1.5 supports it and rules out a and c.
BOUND = ("- label: mean on every rank\n  when: {scale: 1}\n  value: {name: g, rank: all, equals: 1.5}\n"
         "  supports: [b]\n  rules_out: [a, c]\n"
         "- label: the run completes\n  outcome: ok\n")
# The same measurement, bound to c instead.
BOUND_TO_C = BOUND.replace("supports: [b]", "supports: [c]").replace("rules_out: [a, c]",
                                                                       "rules_out: [a, b]")


def _verify_and_gate(client: TestClient, slug: str, session_factory: sessionmaker[Session],
                     settings: Settings) -> Any:
    _post(client, f"/author/questions/{slug}/verify", f"/author/questions/{slug}")
    work(session_factory, settings)
    return parse_fragment(client.get(f"/author/questions/{slug}/gate"))


def _problems(fragment: Any) -> list[str]:
    return [text(li) for li in fragment.select(".binding-problems li")]


def _published_bound(client: TestClient, slug: str, session_factory: sessionmaker[Session],
                     settings: Settings) -> None:
    assert create_question(client, slug, expect=BOUND, knobs=KNOBS).status_code == 303
    gate = _verify_and_gate(client, slug, session_factory, settings)
    assert _problems(gate) == []
    assert _publish(client, slug).status_code == 303


def test_changing_only_the_key_closes_the_gate_with_the_reason(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    _published_bound(author_client, "bound", session_factory, settings)
    # Move the tick from b to c; the expectations still say the measurement supports b.
    assert save_editor(author_client, "bound", choice_correct="2").status_code == 303
    gate = _verify_and_gate(author_client, "bound", session_factory, settings)
    # Every measured check still passes ...
    assert [tr["data-state"] for tr in gate.select("tr[data-state]")] == ["passed"]
    # ... but the key disagrees with them: one item, in words, with the fix to click.
    assert _problems(gate) == [
        "The key ticks C, but the run says otherwise: “mean on every rank” (expectation 1) "
        "supports B and rules out C. Tick B, or change the expectation. Tick B"]
    assert "expect[" not in gate.get_text()
    assert text(gate.select_one("form.fix-key button")) == "Tick B"
    assert gate.select_one("form.publish-form button").has_attr("disabled")
    refused = _publish(author_client, "bound")
    assert refused.status_code == 409
    assert "the answer key and the expectations disagree" in refused.text
    with session_factory() as s:
        q = s.scalar(select(Question).where(Question.slug == "bound"))
        assert q is not None and q.draft_revision_id is not None  # still a draft


def test_changing_only_an_expectation_closes_the_gate(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    _published_bound(author_client, "bound", session_factory, settings)
    assert save_editor(author_client, "bound", expect=BOUND_TO_C).status_code == 303
    gate = _verify_and_gate(author_client, "bound", session_factory, settings)
    problems = _problems(gate)
    assert problems[0].startswith("The key ticks B, but the run says otherwise: “mean on every "
                                  "rank” (expectation 1) supports C and rules out B. Tick C"), problems
    assert _publish(author_client, "bound").status_code == 409


def test_changing_the_key_and_the_expectations_together_publishes(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    _published_bound(author_client, "bound", session_factory, settings)
    # The right text moves to c and the expectation follows it.
    saved = save_editor(author_client, "bound",
                        choice_text=["The sum", "The local value", "The mean", ""],
                        choice_correct="2", expect=BOUND_TO_C)
    assert saved.status_code == 303
    gate = _verify_and_gate(author_client, "bound", session_factory, settings)
    assert _problems(gate) == []
    assert _publish(author_client, "bound").status_code == 303


def test_the_editor_shows_binding_problems_after_save_and_in_the_preview(
    author_client: TestClient,
) -> None:
    assert create_question(author_client, "bound", expect=BOUND, knobs=KNOBS).status_code == 303
    editor = parse(author_client.get("/author/questions/bound"))
    assert editor.select(".binding-problems") == []
    assert save_editor(author_client, "bound", choice_correct="2").status_code == 303
    editor = parse(author_client.get("/author/questions/bound?saved=1"))
    # Said once, in the publish gate (loaded under the form), never twice on one page.
    assert editor.select(".binding-problems") == []
    gate = parse_fragment(author_client.get("/author/questions/bound/gate"))
    assert len(gate.select(".binding-problems li")) == 1

    # The learner preview of the unsaved form says the same.
    data = editor_data(editor, choice_correct="1")
    preview = author_client.post("/author/preview/question", data=data, headers=htmx(editor))
    assert preview.status_code == 200
    assert parse_fragment(preview).select(".binding-problems") == []
    data = editor_data(editor, choice_correct="0")
    preview = parse_fragment(author_client.post("/author/preview/question", data=data,
                                                headers=htmx(editor)))
    assert [text(li) for li in preview.select(".binding-problems li")] == [
        "The key ticks A, but the run says otherwise: “mean on every rank” (expectation 1) "
        "supports B and rules out A. Tick B, or change the expectation."]


def test_explained_choices_survive_the_editor_and_satisfy_the_gate(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    # c cannot be decided by this run: the question explains it instead.
    expect = BOUND.replace("rules_out: [a, c]", "rules_out: [a]")
    assert create_question(author_client, "explained", expect=expect, knobs=KNOBS,
                           explained="c: it depends on the input, which this run fixes\n"
                           ).status_code == 303
    editor = parse(author_client.get("/author/questions/explained"))
    assert "it depends on the input" in editor.select_one("textarea[name=explained]").get_text()
    gate = _verify_and_gate(author_client, "explained", session_factory, settings)
    assert _problems(gate) == []
    assert _publish(author_client, "explained").status_code == 303


def _learner_verify(learner: TestClient, slug: str, session_factory: sessionmaker[Session],
                    settings: Settings) -> Any:
    page = parse(learner.get(f"/questions/{slug}"))
    action, hidden = form_fields(page, "#verify-panel form")
    response = learner.post(action, data={**hidden, "knob.scale": "1"}, headers=htmx(page))
    assert response.status_code == 200, response.text
    run_id = parse_fragment(response).select_one("[data-run-id]")["data-run-id"]
    work(session_factory, settings)
    rev = hidden.get("rev", "")
    return parse_fragment(learner.get(f"/runs/{run_id}?slug={slug}&rev={rev}",
                                      headers={"HX-Request": "true"})), int(run_id)


def test_after_a_key_change_the_learner_sees_the_new_key_everywhere(
    author_client: TestClient, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    _published_bound(author_client, "bound", session_factory, settings)
    learner = new_client()
    assert submit_answer(learner, "/questions/bound", "b", htmx=False).status_code == 200
    panel, first_run = _learner_verify(learner, "bound", session_factory, settings)
    assert "Answer key: b" in text(panel.select_one(".answer-key"))
    assert {li["data-key"]: li["data-status"] for li in panel.select(".choice-evidence li")} == {
        "a": "ruled out", "b": "supported", "c": "ruled out"}

    # The author moves the right answer to c (with its text) and its binding with it.
    save_editor(author_client, "bound", choice_text=["The sum", "The local value", "The mean", ""],
                choice_correct="2", expect=BOUND_TO_C)
    _verify_and_gate(author_client, "bound", session_factory, settings)
    assert _publish(author_client, "bound").status_code == 303

    # The same snippet and knobs: the cache answers with the run made for revision 1 ...
    panel, run_id = _learner_verify(learner, "bound", session_factory, settings)
    assert run_id == first_run
    with session_factory() as s:
        assert s.scalar(select(Run.id).where(Run.id == run_id)) == first_run
    # ... shown with revision 2's key and expectations, re-checked without a new run.
    assert "Answer key: c The mean" in text(panel.select_one(".answer-key"))
    assert "revision #1" in text(panel.select_one(".recheck"))
    assert {li["data-key"]: li["data-status"] for li in panel.select(".choice-evidence li")} == {
        "a": "ruled out", "b": "ruled out", "c": "supported"}
    # The question page itself grades against the new key.
    learner2 = new_client()
    graded = parse(submit_answer(learner2, "/questions/bound", "c", htmx=False))
    assert graded.select_one("section.graded.right") is not None
    assert [li.select_one(".key").get_text() for li in graded.select("li.correct")] == ["c"]


def test_the_gates_one_click_fix_ticks_the_measured_choice_and_the_gate_opens(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    _published_bound(author_client, "bound", session_factory, settings)
    assert save_editor(author_client, "bound", choice_correct="2").status_code == 303
    gate = _verify_and_gate(author_client, "bound", session_factory, settings)
    action, hidden = form_fields(gate, "form.fix-key")
    fixed = author_client.post(action, data=hidden, follow_redirects=False)
    assert fixed.status_code == 303 and fixed.headers["location"].endswith("?saved=fixed")
    assert "Answer key fixed" in text(parse(author_client.get(fixed.headers["location"])))
    gate = _verify_and_gate(author_client, "bound", session_factory, settings)
    assert _problems(gate) == []
    assert not gate.select_one("form.publish-form button").has_attr("disabled")
    # The same button again (a stale page) changes nothing.
    again = author_client.post(action, data=hidden, follow_redirects=False)
    assert again.status_code == 409
