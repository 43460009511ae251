"""The publish gate on real gloo runs, drafts versus what learners see, Run now, expect this,
and the admin override for questions without a snippet.

Runs execute in a real Worker on the real engine, never inside a web request.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import AuditEntry
from app.questions.models import Question, QuestionRevision
from app.quizzes.models import Attempt
from app.settings import Settings
from app.verify.models import RUN_QUEUED, Run, Verdict
from app.verify.worker import Worker
from tests.authoring.helpers import EXPECT_FAIL, create_question, editor_data, htmx, question_fields
from tests.factories import answered, count, parse, parse_fragment, shown_slug, start_quiz, submit_answer


def work(session_factory: sessionmaker[Session], settings: Settings) -> int:
    """Execute every queued run with a real worker; returns how many ran."""
    worker = Worker(session_factory, settings)
    n = 0
    while worker.run_once():
        n += 1
    return n


def _question(session_factory: sessionmaker[Session], slug: str) -> Question:
    with session_factory() as s:
        q = s.scalar(select(Question).where(Question.slug == slug))
        assert q is not None
        s.expunge(q)
        return q


def _post(client: TestClient, path: str, page_path: str, **data: Any) -> Any:
    page = parse(client.get(page_path))
    return client.post(path, data=data, headers=htmx(page), follow_redirects=False)


def _publish(client: TestClient, slug: str) -> Any:
    """Press Publish in the gate panel (a plain form post)."""
    gate = parse_fragment(client.get(f"/author/questions/{slug}/gate"))
    form = gate.select_one("form.publish-form")
    token = form.select_one("input[name=csrf_token]")["value"] if form else _token(client)
    return client.post(f"/author/questions/{slug}/publish", data={"csrf_token": token},
                       follow_redirects=False)


def _token(client: TestClient) -> str:
    return str(parse(client.get("/author")).select_one("input[name=csrf_token]")["value"])


def test_publish_waits_for_passing_runs_then_shows_the_draft_to_learners(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    assert create_question(author_client, "gated").status_code == 303
    refused = _publish(author_client, "gated")
    assert refused.status_code == 409
    assert "not run on torch" in refused.text
    assert _question(session_factory, "gated").status == "draft"

    verify = _post(author_client, "/author/questions/gated/verify", "/author/questions/gated")
    assert verify.status_code == 200
    panel = parse_fragment(verify).select_one("#gate")
    assert panel["hx-trigger"] == "load delay:400ms"  # queued: the panel polls
    # Nothing ran inside the request.
    with session_factory() as s:
        assert [r.status for r in s.scalars(select(Run))] == [RUN_QUEUED]
    assert _publish(author_client, "gated").status_code == 409

    assert work(session_factory, settings) == 1
    panel = parse_fragment(author_client.get("/author/questions/gated/gate")).select_one("#gate")
    assert not panel.has_attr("hx-trigger")  # finished: polling stops
    assert [tr["data-state"] for tr in panel.select("tr[data-state]")] == ["passed"]
    assert not panel.select_one("form.publish-form button").has_attr("disabled")

    published = _publish(author_client, "gated")
    assert published.status_code == 303, published.text
    q = _question(session_factory, "gated")
    assert q.status == "published" and q.draft_revision_id is None
    with session_factory() as s:
        [verdict] = s.scalars(select(Verdict)).all()
        assert verdict.revision_id == q.current_revision_id and verdict.passed
    assert author_client.get("/questions/gated").status_code == 200
    assert count(session_factory, AuditEntry, AuditEntry.action == "question.publish") == 1
    # The list now shows it verified.
    page = parse(author_client.get("/author?verification=verified"))
    assert [tr["data-slug"] for tr in page.select("tr[data-slug]")] == ["gated"]


def test_publish_is_refused_while_an_expectation_fails(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    create_question(author_client, "wrong-key", expect=EXPECT_FAIL)
    _post(author_client, "/author/questions/wrong-key/verify", "/author/questions/wrong-key")
    work(session_factory, settings)
    panel = parse_fragment(author_client.get("/author/questions/wrong-key/gate"))
    assert [tr["data-state"] for tr in panel.select("tr[data-state]")] == ["failed"]
    assert "expected g = 99" in panel.get_text() and "1.5" in panel.get_text()
    assert panel.select_one("form.publish-form button").has_attr("disabled")
    refused = _publish(author_client, "wrong-key")
    assert refused.status_code == 409 and "fail their expectations" in refused.text
    assert _question(session_factory, "wrong-key").status == "draft"
    with session_factory() as s:
        [verdict] = s.scalars(select(Verdict)).all()
        assert not verdict.passed


def test_a_learner_mid_quiz_keeps_the_revision_they_started_with(
    client: TestClient, admin_client: TestClient, session_factory: sessionmaker[Session],
    settings: Settings,
) -> None:
    quiz = start_quiz(client, topics="basics", count="5")
    base = quiz.rsplit("/", 1)[0]
    position = next(p for p in range(1, 4)
                    if shown_slug(parse(client.get(f"{base}/{p}"))) == "fixture-single")
    item_url = f"{base}/{position}"
    assert "Fixture single choice" in client.get(item_url).text

    # An admin edits the imported question: a draft; learners see nothing new yet.
    page = parse(admin_client.get("/author/questions/fixture-single"))
    data = editor_data(page, title="Edited single choice", note="retitle")
    assert admin_client.post("/author/questions/fixture-single", data=data,
                             follow_redirects=False).status_code == 303
    assert "Edited single choice" not in client.get("/questions/fixture-single").text
    # Verify every audited combination (audit: all -> scale 1 and 2), then publish.
    _post(admin_client, "/author/questions/fixture-single/verify", "/author/questions/fixture-single")
    assert work(session_factory, settings) == 2
    assert _publish(admin_client, "fixture-single").status_code == 303
    assert "Edited single choice" in client.get("/questions/fixture-single").text

    # The quiz still shows, grades and records the revision it started with.
    shown = parse(client.get(item_url))
    assert shown.select_one("h1").get_text() == "Fixture single choice"
    assert submit_answer(client, item_url, "b", htmx=False).status_code in (200, 303)
    with session_factory() as s:
        attempt = s.scalar(select(Attempt))
        first = s.scalar(select(QuestionRevision).where(QuestionRevision.number == 1,
                                                        QuestionRevision.content["slug"].as_string()
                                                        == "fixture-single"))
        assert attempt is not None and first is not None
        assert attempt.revision_id == first.id and attempt.correct


def test_run_now_measures_the_unsaved_snippet_and_expect_this_adds_an_expectation(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    create_question(author_client, "measured")
    page = parse(author_client.get("/author/questions/measured"))
    assert page.select_one('select[name="knob.scale"]') is not None
    data = editor_data(page, **{"knob.scale": "2"})
    response = author_client.post("/author/run", data=data, headers=htmx(page))
    assert response.status_code == 200
    pending = parse_fragment(response).select_one(".author-run")
    assert pending["data-status"] == "queued" and pending["hx-trigger"] == "load delay:400ms"
    run_id = int(pending["data-run-id"])

    assert work(session_factory, settings) == 1
    done = author_client.get(f"/author/runs/{run_id}", params={"expect": data["expect"]})
    frag = parse_fragment(done)
    panel = frag.select_one(".author-run")
    assert panel["data-status"] == "done" and not panel.has_attr("hx-trigger")
    buttons = frag.select("button.expect-button")
    assert {(b["data-name"], b["data-rank"]) for b in buttons} == {("g", "0"), ("g", "1")}
    # The learners' result panel is reused, with the form's expectations checked.
    assert frag.select_one(".run.done") is not None
    assert "the run completes" in frag.select_one(".checks").get_text()

    added = author_client.post("/author/expect", headers=htmx(page), data={
        "run_id": str(run_id), "rank": "1", "name": "g", "expect": data["expect"],
        "audit": data["audit"], "knobs": data["knobs"]})
    field = parse_fragment(added)
    text = field.select_one("textarea#f-expect").get_text()
    assert "g on rank 1" in text and "equals: 3.0" in text and "scale: 2" in text
    # The run's knob values (scale=2) were not audited, so they are added to the audit
    # (out of band), or the publish gate would never check the new expectation.
    audit = field.select_one("#audit-field[hx-swap-oob] textarea#f-audit").get_text()
    assert yaml.safe_load(audit) == [{"scale": 1}, {"scale": 2}]
    # An unknown value is refused; the value always comes from the stored run.
    missing = author_client.post("/author/expect", headers=htmx(page), data={
        "run_id": str(run_id), "rank": "0", "name": "nope", "expect": data["expect"]})
    assert missing.status_code == 404

    saved = author_client.post("/author/questions/measured",
                               data={**data, "expect": text, "audit": audit}, follow_redirects=False)
    assert saved.status_code == 303
    with session_factory() as s:
        q = s.scalar(select(Question).where(Question.slug == "measured"))
        rev = s.get(QuestionRevision, q.draft_revision_id)
        assert {"label": "g on rank 1", "when": {"scale": 2},
                "value": {"name": "g", "rank": 1, "equals": 3.0}} in rev.content["verify"]["expect"]


def test_run_now_reports_form_errors_instead_of_running(
    author_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    page = parse(author_client.get("/author/questions/new"))
    response = author_client.post("/author/run", headers=htmx(page),
                                  data=question_fields("x", snippet="", title=""))
    assert response.status_code == 422
    assert count(session_factory, Run) == 0


@pytest.mark.parametrize("who", ["author", "admin"])
def test_a_question_without_a_snippet_needs_an_admin_override_with_a_reason(
    who: str, author_client: TestClient, admin_client: TestClient,
    session_factory: sessionmaker[Session],
) -> None:
    client = author_client if who == "author" else admin_client
    create_question(client, "no-snippet", snippet="")
    assert _question(session_factory, "no-snippet").has_snippet is False
    refused = _publish(client, "no-snippet")
    assert refused.status_code == 409 and "no snippet" in refused.text
    gate = parse_fragment(client.get("/author/questions/no-snippet/gate"))
    override = gate.select_one("form.override-form")
    if who == "author":
        assert override is None
        forced = client.post("/author/questions/no-snippet/publish", data={
            "csrf_token": _token(client), "override": "1", "reason": "trust me"})
        assert forced.status_code == 403
        assert _question(session_factory, "no-snippet").status == "draft"
        return
    token = override.select_one("input[name=csrf_token]")["value"]
    blank = client.post("/author/questions/no-snippet/publish",
                        data={"csrf_token": token, "override": "1", "reason": " "})
    assert blank.status_code == 409
    done = client.post("/author/questions/no-snippet/publish", follow_redirects=False, data={
        "csrf_token": token, "override": "1", "reason": "conceptual question, nothing to run"})
    assert done.status_code == 303
    q = _question(session_factory, "no-snippet")
    assert q.status == "published"
    with session_factory() as s:
        revs = list(s.scalars(select(QuestionRevision).where(QuestionRevision.question_id == q.id)
                              .order_by(QuestionRevision.number)))
        entry = s.scalar(select(AuditEntry).where(AuditEntry.action == "question.publish_override"))
    assert [r.number for r in revs] == [1, 2] and q.current_revision_id == revs[1].id
    assert revs[1].source == "override" and revs[1].content_hash == revs[0].content_hash
    assert "root" in revs[1].note and "conceptual question, nothing to run" in revs[1].note
    assert entry is not None and entry.actor == "root"
    assert entry.detail["reason"] == "conceptual question, nothing to run"


def test_workers_are_woken_only_once_the_queued_runs_are_committed(
    author_client: TestClient, session_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker woken while the request's transaction is still open looks, finds nothing
    and sleeps until its next poll (2 s): Run now and Verify all wake them after the commit."""
    import app.authoring.views as author_views

    visible: list[int] = []

    def notify(_request: Any) -> None:  # counts on another connection, as a worker would
        visible.append(count(session_factory, Run, Run.status == RUN_QUEUED))

    monkeypatch.setattr(author_views, "notify_workers", notify)
    create_question(author_client, "woken")
    page = parse(author_client.get("/author/questions/woken"))
    response = author_client.post("/author/run", data=editor_data(page, **{"knob.scale": "2"}),
                                  headers=htmx(page))
    assert response.status_code == 200
    assert visible == [1]

    response = author_client.post("/author/questions/woken/verify", data={"fresh": "1"},
                                  headers=htmx(page))
    assert response.status_code == 200
    assert len(visible) == 2 and visible[1] > 1


def test_a_copy_run_again_with_ignore_the_cache_leaves_learners_their_run(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
    new_client: Any,
) -> None:
    """A draft that copies a published question's snippet shares its cache key; Verify all
    with "ignore the cache" on the copy must not take the published question's run away
    from its learners (nor may a run that the copy asked for first be hidden from them)."""
    create_question(author_client, "original")
    _post(author_client, "/author/questions/original/verify", "/author/questions/original")
    work(session_factory, settings)
    assert _publish(author_client, "original").status_code == 303
    with session_factory() as s:
        (shown,) = s.scalars(select(Run.id).where(Run.live.is_(True))).all()

    create_question(author_client, "copycat")
    page = parse(author_client.get("/author/questions/copycat"))
    again = author_client.post("/author/questions/copycat/verify",
                               data={"fresh": "1", "csrf_token": editor_data(page)["csrf_token"]},
                               headers=htmx(page))
    assert again.status_code == 200
    with session_factory() as s:
        assert s.scalars(select(Run.id).where(Run.live.is_(True))).all() == [shown]
    assert count(session_factory, Run) == 1
    learner = new_client()
    answered(learner, "original", "a")  # a run is the answered learner's (app/reveal.py)
    assert learner.get(f"/api/v1/runs/{shown}").status_code == 200
