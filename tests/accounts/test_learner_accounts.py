"""Learner accounts: signing up or in moves the anonymous history into the account and kills
the old cookie; data export, account deletion, and one learner never sees another's data."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import AuditEntry, Learner, User
from app.accounts.sessions import SESSION_COOKIE
from app.clock import FixedClock
from app.quizzes.models import Attempt, Quiz
from app.ratelimit import RateHit
from app.reports.models import ProblemReport
from app.review.models import ReviewCard, ReviewLog
from app.settings import Settings
from tests.factories import (
    FIXTURE,
    answer,
    count,
    form_fields,
    learner_id,
    login,
    parse,
    sign_up,
    start_quiz,
    text,
)


def _report(client: TestClient, slug: str, kind: str = "unclear", comment: str = "") -> Any:
    return client.post(f"/api/v1/questions/{slug}/reports", json={"kind": kind, "comment": comment})


def _rows(session_factory: sessionmaker[Session], learner: str) -> dict[str, int]:
    return {
        "attempts": count(session_factory, Attempt, Attempt.learner_id == learner),
        "cards": count(session_factory, ReviewCard, ReviewCard.learner_id == learner),
        "logs": count(session_factory, ReviewLog, ReviewLog.learner_id == learner),
        "reports": count(session_factory, ProblemReport, ProblemReport.learner_id == learner),
        "quizzes": count(session_factory, Quiz, Quiz.learner_id == learner),
        "learner": count(session_factory, Learner, Learner.id == learner),
    }


def _account_learner(session_factory: sessionmaker[Session], username: str) -> str:
    with session_factory() as s:
        user = s.scalar(select(User).where(User.username == username))
        assert user is not None
        owned = s.scalar(select(Learner.id).where(Learner.user_id == user.id))
        assert owned is not None
        return owned


def _sign_out(client: TestClient, page_url: str = "/account") -> None:
    action, hidden = form_fields(parse(client.get(page_url)), "form[action='/logout']")
    assert client.post(action, data=hidden, follow_redirects=False).status_code == 303


def test_signing_up_moves_the_browsers_anonymous_history_into_the_account(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    answer(client, "fixture-numeric", FIXTURE["fixture-numeric"]["wrong"])
    anonymous = learner_id(client, settings)
    r = sign_up(client, "lena")
    assert r.status_code == 303 and r.headers["location"] == "/account?welcome=1"
    with session_factory() as s:
        user = s.scalar(select(User).where(User.username == "lena"))
        assert user is not None and user.role == "learner"
        assert user.password_hash.startswith("$argon2")
    account = _account_learner(session_factory, "lena")
    assert account != anonymous
    # The browser's cookie names a new anonymous identity, and the old one names nothing.
    assert learner_id(client, settings) not in (anonymous, account)
    assert _rows(session_factory, anonymous) == dict.fromkeys(_rows(session_factory, anonymous), 0)
    assert _rows(session_factory, account)["attempts"] == 2
    page = parse(client.get(r.headers["location"]))
    rows = page.select("table.history tbody tr")
    assert {text(r.select_one("td")) for r in rows} == {"fixture-single", "fixture-numeric"}
    assert "Welcome, lena" in text(page.select_one("main"))
    # Answering now adds to the account.
    answer(client, "fixture-multi", FIXTURE["fixture-multi"]["right"])
    assert _rows(session_factory, account)["attempts"] == 3


def test_signing_in_on_a_second_device_moves_its_anonymous_answers_into_the_account(
    client: TestClient, clock: FixedClock, new_client: Callable[..., TestClient],
    settings: Settings, session_factory: sessionmaker[Session],
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"])
    sign_up(client, "lena")
    account = _account_learner(session_factory, "lena")
    phone = new_client()
    answer(phone, "fixture-numeric", FIXTURE["fixture-numeric"]["right"])  # anonymous, on the phone
    answer(phone, "fixture-single", FIXTURE["fixture-single"]["wrong"])   # a card the account has too
    phone_anonymous = learner_id(phone, settings)
    assert login(phone, "lena").status_code == 303
    assert learner_id(phone, settings) != phone_anonymous
    rows = parse(phone.get("/account")).select("table.history tbody tr")
    assert sorted(text(r.select_one("td")) for r in rows) == [
        "fixture-numeric", "fixture-single", "fixture-single"]
    assert _rows(session_factory, phone_anonymous)["attempts"] == 0
    # One card per question: the phone's later review of fixture-single won, with both logs.
    rows_now = _rows(session_factory, account)
    assert (rows_now["attempts"], rows_now["cards"], rows_now["logs"]) == (3, 2, 3)
    # Answering on the phone while signed in goes to the account.
    answer(phone, "fixture-multi", FIXTURE["fixture-multi"]["right"])
    assert _rows(session_factory, account)["attempts"] == 4
    # Signing out leaves the laptop with a fresh, empty anonymous identity.
    _sign_out(client)
    assert learner_id(client, settings) != account
    assert client.get("/api/v1/review/queue").json()["due_count"] == 0
    assert client.get("/account", follow_redirects=False).status_code == 303


def test_a_cookie_copied_before_sign_up_reads_and_writes_nothing_of_the_account(
    client: TestClient, clock: FixedClock, new_client: Callable[..., TestClient],
    settings: Settings, session_factory: sessionmaker[Session],
) -> None:
    """An attacker copies the anonymous cookie (a shared computer, a logged request); the
    victim then signs up. Before and after the victim signs out, the copy gets nothing."""
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"])
    assert _report(client, "fixture-single", "unclear", "my private note").status_code == 201
    attacker = new_client()
    for name, value in client.cookies.items():
        attacker.cookies.set(name, value)
    assert [r["comment"] for r in attacker.get("/api/v1/reports").json()] == ["my private note"]

    sign_up(client, "victim")
    account = _account_learner(session_factory, "victim")

    def attacker_sees_nothing() -> None:
        assert attacker.get("/api/v1/reports").json() == []
        assert attacker.get("/api/v1/review/queue").json()["due_count"] == 0
        assert attacker.get("/api/v1/dashboard").json()["days_practised"] == {}
        assert attacker.get("/account", follow_redirects=False).status_code == 303
        assert _report(attacker, "fixture-single", "other", "forged").status_code in (201, 422)
        mine = [r["comment"] for r in client.get("/api/v1/reports").json()]
        assert "forged" not in mine

    attacker_sees_nothing()
    assert [r["comment"] for r in client.get("/api/v1/reports").json()] == ["my private note"]
    _sign_out(client)
    attacker_sees_nothing()
    assert login(client, "victim").status_code == 303
    assert [r["comment"] for r in client.get("/api/v1/reports").json()] == ["my private note"]
    assert _rows(session_factory, account)["attempts"] == 1


def test_download_all_data_is_the_learners_json(
    client: TestClient, clock: FixedClock, new_client: Callable[..., TestClient],
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "unsure")
    assert _report(client, "fixture-single", "unclear", "which rank?").status_code == 201
    sign_up(client, "lena")
    other = new_client()
    answer(other, "fixture-numeric", FIXTURE["fixture-numeric"]["right"])
    r = client.get("/account/export.json")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert "attachment" in r.headers["content-disposition"]
    data = json.loads(r.text)
    assert data["account"]["username"] == "lena"
    assert [a["question"] for a in data["attempts"]] == ["fixture-single"]
    assert data["attempts"][0]["confidence"] == "unsure"
    assert [c["question"] for c in data["review_cards"]] == ["fixture-single"]
    assert data["review_cards"][0]["fsrs"]["stability"] > 0
    assert len(data["review_logs"]) == 1
    assert [(p["kind"], p["comment"], p["status"]) for p in data["problem_reports"]] == [
        ("unclear", "which rank?", "open")]
    assert "password" not in r.text and "argon2" not in r.text


def test_deleting_an_account_removes_everything_of_that_learner_and_nothing_else(
    client: TestClient, clock: FixedClock, new_client: Callable[..., TestClient],
    settings: Settings, session_factory: sessionmaker[Session],
) -> None:
    # Two learners with a bit of everything: answers, cards, logs, reports, a quiz.
    for c in (client, other := new_client()):
        answer(c, "fixture-single", FIXTURE["fixture-single"]["wrong"])
        assert _report(c, "fixture-single").status_code == 201
        start_quiz(c, count="2")
    sign_up(client, "lena")
    sign_up(other, "otto")
    mine, theirs = _account_learner(session_factory, "lena"), _account_learner(session_factory, "otto")
    laptop_two = new_client()
    assert login(laptop_two, "lena", "a wrong password").status_code == 401
    assert login(laptop_two, "lena").status_code == 303  # a second session of lena's
    before_theirs = _rows(session_factory, theirs)
    assert all(before_theirs.values()) and all(_rows(session_factory, mine).values())
    page = parse(client.get("/account"))
    action, hidden = form_fields(page, "form.delete-account")
    refused = client.post(action, data={**hidden, "confirm": "not-lena"})
    assert refused.status_code == 422 and _rows(session_factory, mine)["attempts"] == 1
    done = client.post(action, data={**hidden, "confirm": "lena"})
    assert done.status_code == 200
    said = text(parse(done).select_one("main"))
    assert "Your account is deleted" in said and "1 answers" in said and "1 problem reports" in said
    assert _rows(session_factory, mine) == dict.fromkeys(before_theirs, 0)
    assert _rows(session_factory, theirs) == before_theirs
    with session_factory() as s:
        assert s.scalar(select(User).where(User.username == "lena")) is None
        assert s.scalar(select(User).where(User.username == "otto")) is not None
        assert s.scalar(select(AuditEntry).where(AuditEntry.actor == "lena")) is None
        assert s.scalar(select(RateHit).where(RateHit.key.startswith("lena:"))) is None
        assert s.scalar(select(AuditEntry).where(AuditEntry.action == "learner.delete")) is not None
    # Every session ended: the other laptop's cookie names nobody now.
    assert laptop_two.cookies.get(SESSION_COOKIE)
    assert laptop_two.get("/account", follow_redirects=False).status_code == 303
    assert login(laptop_two, "lena").status_code == 401
    # This browser starts again, anonymous and empty.
    assert learner_id(client, settings) != mine
    assert client.get("/api/v1/reports").json() == []


def test_a_learner_cannot_read_another_learners_attempts_cards_or_reports(
    client: TestClient, clock: FixedClock, new_client: Callable[..., TestClient],
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["wrong"])
    report = _report(client, "fixture-single", "wrong_key", "secret words").json()
    quiz_url = start_quiz(client, count="1")
    sign_up(client, "lena")
    clock.advance(timedelta(days=1))
    assert [c["slug"] for c in client.get("/api/v1/review/queue").json()["cards"]] == ["fixture-single"]
    for stranger in (new_client(), new_client()):
        assert stranger.get("/api/v1/review/queue").json() == {"due_count": 0, "cards": [],
                                                               "next_due": None}
        assert stranger.get(f"/api/v1/reports/{report['id']}").status_code == 404
        assert stranger.get("/api/v1/reports").json() == []
        assert stranger.get(quiz_url).status_code == 404
        assert "secret words" not in stranger.get("/reports").text
        assert stranger.get("/account", follow_redirects=False).status_code == 303
    # Nor does another account.
    otto = new_client()
    sign_up(otto, "otto")
    assert otto.get(f"/api/v1/reports/{report['id']}").status_code == 404
    assert otto.get("/account/export.json").json()["attempts"] == []
    assert client.get(f"/api/v1/reports/{report['id']}").json()["comment"] == "secret words"


def test_sign_up_refuses_a_short_password_a_taken_name_and_a_signed_in_visitor(
    client: TestClient, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session],
) -> None:
    r = sign_up(client, "lena", "short")
    assert r.status_code == 422 and "at least 10" in text(parse(r).select_one(".error"))
    assert sign_up(client, "lena").status_code == 303
    assert sign_up(new_client(), "LENA").status_code == 422
    assert sign_up(client, "another").status_code == 409
    assert count(session_factory, User) == 1


def test_an_author_keeps_the_author_pages_and_a_learner_goes_to_the_account(
    client: TestClient, make_user: Callable[..., Any], new_client: Callable[..., TestClient],
) -> None:
    make_user("lena", "learner")
    make_user("alice", "author")
    learner, author = new_client(), new_client()
    assert login(learner, "lena").headers["location"] == "/account"
    assert login(author, "alice").headers["location"] == "/author"
    assert learner.get("/author", follow_redirects=False).status_code == 403
    assert author.get("/account", follow_redirects=False).status_code == 403
    nav = parse(learner.get("/me/nav"))
    assert nav.select_one("a[href='/account']") is not None
    assert nav.select_one("a[href='/author']") is None
    assert parse(author.get("/me/nav")).select_one("a[href='/author']") is not None


def test_sign_ups_from_one_address_are_limited(
    client: TestClient, settings: Settings, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session],
) -> None:
    for n in range(settings.signups_per_hour):
        assert sign_up(new_client(), f"learner{n}").status_code == 303
    r = sign_up(new_client(), "one-too-many")
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
    assert "Too many new accounts" in text(parse(r).select_one(".error"))
    assert count(session_factory, User) == settings.signups_per_hour


def test_an_account_made_by_an_admin_gets_its_own_identity_and_the_browsers_answers(
    client: TestClient, clock: FixedClock, make_user: Callable[..., Any],
    new_client: Callable[..., TestClient], settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    make_user("bob", "learner")
    browser = new_client()
    answer(browser, "fixture-single", FIXTURE["fixture-single"]["right"])  # anonymous
    anonymous = learner_id(browser, settings)
    assert login(browser, "bob").status_code == 303
    bob = _account_learner(session_factory, "bob")
    assert bob != anonymous and _rows(session_factory, anonymous)["attempts"] == 0
    answer(browser, "fixture-numeric", FIXTURE["fixture-numeric"]["right"])
    rows = parse(browser.get("/account")).select("table.history tbody tr")
    assert sorted(text(r.select_one("td")) for r in rows) == ["fixture-numeric", "fixture-single"]
    page = parse(browser.get("/account"))
    action, hidden = form_fields(page, "form.delete-account")
    assert browser.post(action, data={**hidden, "confirm": "bob"}).status_code == 200
    assert count(session_factory, Attempt) == 0
