"""Report a problem: filed after answering against the revision answered, rate-limited,
audited, grouped in the authors' inbox, resolved or declined with a note the learner sees."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import AuditEntry
from app.clock import FixedClock
from app.questions.models import Question
from app.reports.models import ProblemReport
from app.settings import Settings
from tests.factories import (
    FIXTURE,
    answer,
    count,
    form_fields,
    htmx_headers,
    login,
    parse,
    parse_fragment,
    start_quiz,
    text,
)


def _report_via_form(client: TestClient, slug: str, kind: str, comment: str, *,
                     htmx: bool) -> Any:
    """Answer the question, then send the graded page's report form."""
    graded = parse(answer(client, slug, FIXTURE[slug]["right"]))
    action, hidden = form_fields(graded, "form.report-form")
    page = parse(client.get(f"/questions/{slug}"))
    return client.post(action, data={**hidden, "kind": kind, "comment": comment},
                       headers=htmx_headers(page) if htmx else {}, follow_redirects=False)


def test_the_graded_answer_offers_the_report_form_with_every_kind(
    client: TestClient, clock: FixedClock,
) -> None:
    unanswered = parse(client.get("/questions/fixture-single"))
    assert unanswered.select_one("form.report-form") is None
    graded = parse(answer(client, "fixture-single", FIXTURE["fixture-single"]["wrong"]))
    form = graded.select_one("#report-problem form.report-form")
    assert form is not None
    assert "Report a problem with this question" in text(graded.select_one("#report-problem summary"))
    kinds = [i["value"] for i in form.select("input[name=kind]")]
    assert kinds == ["wrong_key", "unclear", "verify", "other"]
    assert form.select_one("textarea[name=comment]") is not None


def test_a_report_is_stored_against_the_revision_answered_and_audited(
    client: TestClient, clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    r = _report_via_form(client, "fixture-single", "wrong_key", "b looks wrong to me", htmx=True)
    assert r.status_code == 200
    fragment = parse_fragment(r)
    assert "report #" in text(fragment.select_one("#report-problem [role=status]"))
    with session_factory() as s:
        report = s.scalar(select(ProblemReport))
        question = s.scalar(select(Question).where(Question.slug == "fixture-single"))
        assert report is not None and question is not None
        assert (report.kind, report.comment, report.status) == ("wrong_key", "b looks wrong to me", "open")
        assert report.revision_id == question.current_revision_id
        entry = s.scalar(select(AuditEntry).where(AuditEntry.action == "report.create"))
        assert entry is not None and entry.target == "fixture-single"
        assert entry.detail["report"] == report.id
    # Without JavaScript the same form gives a page.
    page = _report_via_form(client, "fixture-numeric", "other", "", htmx=False)
    assert page.status_code == 200 and "report #" in text(parse(page).select_one("main"))


def test_a_quiz_report_names_the_pinned_revision(
    client: TestClient, clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    url = start_quiz(client, count="1")
    page = parse(client.get(url))
    slug = str(page.select_one("article.question p.hint a")["href"]).removeprefix("/questions/")
    action, hidden = form_fields(page, "form.answer-form")
    graded = parse(client.post(action, data={**hidden, "answer": FIXTURE[slug]["right"]}))
    form_action, form_hidden = form_fields(graded, "form.report-form")
    assert form_action == f"/questions/{slug}/report"
    pinned = int(form_hidden["revision_id"])
    r = client.post(form_action, data={**form_hidden, "kind": "unclear"})
    assert r.status_code == 200
    with session_factory() as s:
        report = s.scalar(select(ProblemReport))
        assert report is not None and report.revision_id == pinned


def test_reports_need_an_answer_first_a_known_kind_and_are_rate_limited(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    r = client.post("/api/v1/questions/fixture-single/reports", json={"kind": "other"})
    assert r.status_code == 422 and "Answer the question first" in r.json()["detail"]
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"])
    assert client.post("/api/v1/questions/fixture-single/reports",
                       json={"kind": "bogus"}).status_code == 422
    assert client.post("/api/v1/questions/fixture-single/reports",
                       json={"kind": "other", "comment": "x" * 2001}).status_code == 422
    assert client.post("/api/v1/questions/no-such/reports",
                       json={"kind": "other"}).status_code == 404
    for _ in range(settings.reports_per_hour):
        assert client.post("/api/v1/questions/fixture-single/reports",
                           json={"kind": "other"}).status_code == 201
    limited = client.post("/api/v1/questions/fixture-single/reports", json={"kind": "other"})
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) > 0
    assert count(session_factory, ProblemReport) == settings.reports_per_hour
    # A bad form never costs a 500.
    page = parse(client.get("/questions/fixture-single"))
    token = form_fields(page, "form.answer-form")[1]["csrf_token"]
    bad = client.post("/questions/fixture-single/report",
                      data={"csrf_token": token, "kind": "nope", "revision_id": "abc"})
    assert bad.status_code == 422


def test_the_inbox_groups_open_reports_and_the_learner_sees_the_outcome(
    client: TestClient, clock: FixedClock, new_client: Callable[..., TestClient],
    make_user: Callable[..., Any], session_factory: sessionmaker[Session],
) -> None:
    other = new_client()
    for c in (client, other):
        answer(c, "fixture-single", FIXTURE["fixture-single"]["right"])
        assert c.post("/api/v1/questions/fixture-single/reports",
                      json={"kind": "unclear", "comment": "which rank?"}).status_code == 201
    answer(client, "fixture-numeric", FIXTURE["fixture-numeric"]["right"])
    mine = client.post("/api/v1/questions/fixture-numeric/reports",
                       json={"kind": "wrong_key"}).json()
    make_user("alice", "author")
    author = new_client()
    assert login(author, "alice").status_code == 303
    inbox = parse(author.get("/author/reports"))
    groups = inbox.select("section.report-group")
    assert [(text(g.select_one("h2 a")), text(g.select_one(".report-count"))) for g in groups] == [
        ("Fixture single choice", "2 open"), ("Fixture numeric", "1 open")]
    assert [text(q) for q in groups[0].select("blockquote")] == ["which rank?", "which rank?"]
    form = inbox.select_one(f"#report-{mine['id']} form.handle-report")
    assert form is not None
    action, hidden = form_fields(inbox, f"#report-{mine['id']} form.handle-report")
    r = author.post(action, data={**hidden, "status": "resolved", "note": "Fixed the key."},
                    follow_redirects=False)
    assert r.status_code == 303
    bogus = author.post(action, data={**hidden, "status": "deleted"})
    assert bogus.status_code == 422
    inbox = parse(author.get("/author/reports"))
    assert [text(g.select_one(".report-count")) for g in inbox.select("section.report-group")] == ["2 open"]
    # The learner sees the outcome on "My reports" and through the API.
    mine_page = parse(client.get("/reports"))
    statuses = [text(s) for s in mine_page.select(".my-reports .report-status")]
    assert sorted(statuses) == ["open", "resolved"]
    assert "Fixed the key." in text(mine_page.select_one(".my-reports"))
    got = client.get(f"/api/v1/reports/{mine['id']}").json()
    assert (got["status"], got["note"]) == ("resolved", "Fixed the key.")
    assert other.get(f"/api/v1/reports/{mine['id']}").status_code == 404
    with session_factory() as s:
        entry = s.scalar(select(AuditEntry).where(AuditEntry.action == "report.resolved"))
        assert entry is not None and entry.actor == "alice"


def test_the_api_is_in_the_openapi_schema(client: TestClient) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert {"/api/v1/review/queue", "/api/v1/reports", "/api/v1/reports/{report_id}",
            "/api/v1/questions/{slug}/reports"} <= set(paths)
    attempt = client.get("/api/v1/openapi.json").json()["components"]["schemas"]["AttemptIn"]
    assert "confidence" in attempt["properties"]


def test_the_inbox_names_revisions_as_history_does_and_a_resolve_can_be_undone(
    client: TestClient, clock: FixedClock, new_client: Callable[..., TestClient],
    make_user: Callable[..., Any], session_factory: sessionmaker[Session],
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"])
    report = client.post("/api/v1/questions/fixture-single/reports",
                         json={"kind": "unclear", "comment": "which rank?"}).json()
    make_user("alice", "admin")
    author = new_client()
    assert login(author, "alice").status_code == 303
    inbox = parse(author.get("/author/reports"))
    item = inbox.select_one(f"#report-{report['id']}")
    # History numbers the imported revision #1; the inbox says the same, not a database id.
    history = parse(author.get("/author/questions/fixture-single/history"))
    assert [tr["data-number"] for tr in history.select("tr[data-number]")] == ["1"]
    assert "revision #1" in text(item)
    action, hidden = form_fields(inbox, f"#report-{report['id']} form.handle-report")
    r = author.post(action, data={**hidden, "status": "resolved", "note": "Reworded."},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/author/reports?done={report['id']}"
    done = parse(author.get(r.headers["location"]))
    confirm = done.select_one(".handled-report")
    assert "Resolved the report on Fixture single choice" in text(confirm)
    assert "Reworded." in text(confirm)
    assert done.select("section.report-group") == []
    action, hidden = form_fields(done, "form.undo-report")
    assert author.post(action, data=hidden, follow_redirects=False).status_code == 303
    back = parse(author.get("/author/reports"))
    assert back.select_one(f"#report-{report['id']}") is not None
    assert back.select_one(".handled-report") is None
    assert client.get(f"/api/v1/reports/{report['id']}").json()["status"] == "open"
    with session_factory() as s:
        assert s.scalar(select(AuditEntry).where(AuditEntry.action == "report.reopen")) is not None
