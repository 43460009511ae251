"""Who may run and read what: drafts stay with authors, pinned quizzes keep their revision,
and fresh runs are limited per learner and per client address."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app import ratelimit
from app.db import session_scope
from app.questions.bank import content_hash, doc_to_data
from app.questions.models import Question, QuestionRevision
from app.questions.schema import VerifyBlock
from app.questions.service import add_revision, revision_doc
from app.settings import Settings
from app.verify.models import Run
from tests.factories import answered, enqueue, form_fields, make_request, parse, start_quiz

HX = {"HX-Request": "true"}


def _question(s: Session, slug: str) -> Question:
    q = s.scalar(select(Question).where(Question.slug == slug))
    assert q is not None
    return q


def _draft_of_fixture_single(factory: sessionmaker[Session], marker: str) -> int:
    """A saved but unpublished edit of fixture-single (what the editor makes)."""
    with session_scope(factory) as s:
        q = _question(s, "fixture-single")
        assert q.current_revision is not None
        doc = revision_doc(q.current_revision).model_copy(
            update={"snippet_text": f"# {marker}\nreport('g', 0)\n"})
        draft = QuestionRevision(question_id=q.id, number=99, content=doc_to_data(doc),
                                 snippet_text=doc.snippet_text, content_hash=content_hash(doc),
                                 source="editor")
        s.add(draft)
        s.flush()
        q.draft_revision_id = draft.id
        return draft.id


def _verify_form(client: TestClient, **extra: str) -> dict[str, str]:
    # Before answering, the page offers "Run it" inside the answer form (predict, then run);
    # the verify endpoint itself takes the same CSRF token.
    _, data = form_fields(parse(client.get("/questions/fixture-single")), "form#answer-form")
    return {"csrf_token": data["csrf_token"], **extra}


def test_an_authors_draft_run_is_invisible_to_learners(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    run_id = enqueue(session_factory, make_request("# SECRET DRAFT\nreport('x', 1)"))
    assert client.get(f"/runs/{run_id}").status_code == 404
    assert client.get(f"/api/v1/runs/{run_id}").status_code == 404


def test_learners_cannot_run_a_draft_revision(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    draft = _draft_of_fixture_single(session_factory, "DRAFT-ONLY")
    r = client.post("/questions/fixture-single/verify", data=_verify_form(client, rev=str(draft)),
                    follow_redirects=False)
    assert r.status_code == 404
    with session_scope(session_factory) as s:
        assert s.scalar(select(Run).where(Run.question_revision_id == draft)) is None


def test_a_quiz_pinned_to_an_older_revision_verifies_that_revision(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    first = start_quiz(client, topics="basics", count="3")
    answered(client)
    with session_scope(session_factory) as s:
        q = _question(s, "fixture-single")
        pinned = q.current_revision_id
        assert q.current_revision is not None
        doc = revision_doc(q.current_revision)
        # A newer snippet too: a run of the same snippet would be the current revision's as
        # well (the cache hands it to anyone), so only a changed one keeps the old run private.
        add_revision(db_session=s, question=q, source="editor",
                     doc=doc.model_copy(update={"title": "A newer wording",
                                                "snippet_text": f"{doc.snippet_text}# reworded\n"}))
    r = client.post("/questions/fixture-single/verify",
                    data=_verify_form(client, rev=str(pinned)), headers=HX)
    assert r.status_code == 200, r.text
    run_id = parse(r).select_one(".run")["data-run-id"]
    with session_scope(session_factory) as s:
        run = s.get(Run, int(run_id))
        assert run is not None and run.question_revision_id == pinned
    # The learner whose quiz pins it may read the run; a stranger may not.
    assert client.get(f"/api/v1/runs/{run_id}").status_code == 200
    assert first.startswith("/quizzes/")
    stranger = TestClient(client.app)
    assert stranger.get(f"/api/v1/runs/{run_id}").status_code == 404


def test_dropping_the_cookie_does_not_escape_the_per_address_limit(
    settings: Settings, session_factory: sessionmaker[Session], loaded: None
) -> None:
    from app.main import create_app

    limited = settings.model_copy(update={"verify_rate_per_minute": 1})
    with session_scope(session_factory) as s:
        for _ in range(4):  # 4 = the per-address factor times the per-learner limit
            ratelimit.hit(db_session=s, bucket="verify-ip", key="testclient", limit=4, window_s=60,
                          message="")
    with TestClient(create_app(limited)) as c:
        answered(c)
        r = c.post("/api/v1/questions/fixture-single/verify", json={"params": {}})
        assert r.status_code == 429


def test_the_timeout_is_part_of_the_cache_key() -> None:
    a = make_request("report('x', 1)", timeout_s=1.0)
    b = make_request("report('x', 1)", timeout_s=10.0)
    assert a.key != b.key


def _block(**over: object) -> dict[str, object]:
    return {"snippet": "s.py", "knobs": {"k": {"values": [1, 2], "default": 1}},
            "expect": [{"label": "x", "when": {"k": 2}, "outcome": "ok"}], **over}


def test_an_expectation_that_no_audited_run_checks_is_refused() -> None:
    with pytest.raises(ValueError, match="applies to no audited knob combination"):
        VerifyBlock.model_validate(_block())
    assert VerifyBlock.model_validate(_block(audit="all"))
    assert VerifyBlock.model_validate(_block(audit=[{"k": 2}]))


def test_world_size_in_an_audit_needs_a_world_size_knob() -> None:
    with pytest.raises(ValueError, match="unknown knob 'world_size'"):
        VerifyBlock.model_validate(_block(audit=[{"world_size": 4}]))


def test_audit_all_runs_every_knob_combination() -> None:
    block = VerifyBlock.model_validate(_block(audit="all"))
    assert block.audit_combinations() == [{"k": 1}, {"k": 2}]
