"""An author proposes an edit to a question that is not theirs (a bank question a learner
reported): a draft revision an admin finds in the inbox, reviews in the history and publishes
through the gate, on real gloo runs."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import AuditEntry
from app.db import session_scope, utcnow
from app.questions import service as questions_service
from app.questions.models import Question, QuestionRevision
from app.quizzes import service as practice_service
from app.reports import service as reports
from app.settings import Settings
from tests.authoring.helpers import editor_data, htmx
from tests.authoring.test_publish import _publish, _question, work
from tests.factories import parse, parse_fragment, text

SLUG = "fixture-single"


def _report_on_the_bank_question(session_factory: sessionmaker[Session]) -> None:
    with session_scope(session_factory) as s:
        question = questions_service.get_published(db_session=s, slug=SLUG)
        published = questions_service.published_question(db_session=s, slug=SLUG)
        assert question is not None and published is not None
        learner = str(uuid.uuid4())
        practice_service.answer_question(db_session=s, learner_id=learner, question=published,
                                         raw_answer="a", token=None)
        reports.file_report(db_session=s, learner_id=learner, question=question, revision_id=None,
                            kind="unclear", comment="What is SENTINEL?", now=utcnow(), per_hour=10)


def test_a_report_leads_an_author_to_propose_an_edit_that_an_admin_publishes_through_the_gate(
    client: TestClient, author_client: TestClient, admin_client: TestClient,
    session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    _report_on_the_bank_question(session_factory)
    inbox = parse(author_client.get("/author/reports"))
    links = {a["href"] for a in inbox.select("main a[href^='/']")}
    assert f"/author/questions/{SLUG}" in links
    for href in links:  # every link in a new author's inbox opens
        assert author_client.get(href).status_code == 200, href

    editor = parse(author_client.get(f"/author/questions/{SLUG}"))
    assert text(editor.select_one("h1")).startswith("Propose an edit to")
    assert editor.select_one("[hx-get$='/gate']") is None  # no publish gate for a proposer
    data = editor_data(editor, prompt="Which value does DDP leave in `.grad` after backward()?",
                       note="say when")
    r = author_client.post(f"/author/questions/{SLUG}/propose", data=data, headers=htmx(editor),
                           follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].endswith("?saved=proposed")
    q = _question(session_factory, SLUG)
    with session_factory() as s:
        draft = s.get(QuestionRevision, q.draft_revision_id)
        assert draft is not None and draft.source == "proposal"
        assert draft.note == "Proposed by alice: say when"
        assert s.scalar(select(AuditEntry.action).where(AuditEntry.action == "question.propose"))
    # Learners still see the published revision; the proposer cannot publish it.
    assert "after backward()" not in client.get(f"/questions/{SLUG}").text
    assert _publish(author_client, SLUG).status_code == 403
    # A second proposal waits for the first to be reviewed.
    again = parse(author_client.get(f"/author/questions/{SLUG}"))
    r = author_client.post(f"/author/questions/{SLUG}/propose", data=editor_data(again, note="x"),
                           headers=htmx(again), follow_redirects=False)
    assert r.status_code == 409 and "waiting to be published" in r.text

    # The admin finds it in the inbox, compares it in the history, and publishes it through
    # the gate: refused until the runs are measured, then live.
    admin_inbox = parse(admin_client.get("/author/reports"))
    proposal = admin_inbox.select_one("section.proposals li[data-question]")
    assert proposal is not None and proposal["data-question"] == SLUG
    history = parse(admin_client.get(f"/author/questions/{SLUG}/history"))
    assert "proposed" in text(history.select_one(f"tr[data-number='{draft.number}']"))
    assert _publish(admin_client, SLUG).status_code == 409
    gate = parse_fragment(admin_client.post(
        f"/author/questions/{SLUG}/verify",
        data={"csrf_token": parse(admin_client.get(f"/author/questions/{SLUG}"))
              .select_one("input[name=csrf_token]")["value"]}))
    assert gate.select_one("#gate") is not None
    work(session_factory, settings)
    assert _publish(admin_client, SLUG).status_code == 303
    with session_factory() as s:
        live = s.scalar(select(Question).where(Question.slug == SLUG))
        assert live is not None and live.current_revision_id == draft.id and live.draft_revision_id is None
    assert "after backward()" in client.get(f"/questions/{SLUG}").text
    assert parse(admin_client.get("/author/reports")).select_one("section.proposals") is None
