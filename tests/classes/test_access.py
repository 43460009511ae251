"""Who may do what in classes: every class route (pages and API) tried as every kind of visitor,
on a fresh world per route, and CSRF on every form. Like tests/authoring/test_access.py, the
routes are enumerated from the app, so a route added later is tried too.

The visitors: anonymous (no cookie yet), a learner (an anonymous learner cookie and a CSRF
token), the class's member (a learner account), an outsider (another learner account), the
instructor of another class, the class's instructor, an author and an admin.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.accounts import service as accounts
from app.accounts.service import account_learner_id
from app.classes import assignments, service
from app.csrf import require_csrf
from app.db import session_scope, utcnow
from app.deps import require_grader, require_instructor, require_learner_account
from app.questions import service as practice
from app.quizzes import service as quizzes
from tests.classes.helpers import csrf_of
from tests.factories import Account, api_routes, login, parse, text

STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
TALK = "step-time-doubled-talk"
TALK_TEXT = ("I would pin yesterday's image, scope the slowdown across nodes and ranks, then "
             "profile compute against communication on a slow rank and a healthy one.")
REFUSED = (401, 403)


def _calls(dependant: Any) -> set[Any]:
    out = set()
    for dep in dependant.dependencies:
        out.add(dep.call)
        out |= _calls(dep)
    return out


def _class_routes(app: Any) -> list[tuple[str, str, Any]]:
    found = []
    for route in api_routes(app):
        if route.path.startswith(("/classes", "/api/v1/classes")):
            for method in sorted(route.methods - {"HEAD"}):
                found.append((method, route.path, route))
    return found


def _kind(path: str, route: Any) -> str:
    """instructor (the class pages), grader (marking talk-throughs: the class's instructor or
    an admin), member (a member's own pages) or join (the join link)."""
    calls = _calls(route.dependant)
    if path.startswith("/classes/join/"):
        return "join"
    if require_instructor in calls:
        return "instructor"
    if require_grader in calls:
        return "grader"
    assert require_learner_account in calls, f"{path} checks neither instructor nor member"
    return "member"


@dataclass
class World:
    class_id: int
    assignment_id: int
    token: str
    attempt_id: int  # lena's talk-through answer, for the marking pages


def _world(session_factory: sessionmaker[Session], ida: Account, otto: Account,
           lena: Account) -> World:
    """Ida's class with an open quiz assignment and lena in it; otto's class beside it."""
    now = utcnow()
    with session_scope(session_factory) as s:
        teacher = accounts.get_user(db_session=s, user_id=ida.id)
        other = accounts.get_user(db_session=s, user_id=otto.id)
        member = accounts.get_user(db_session=s, user_id=lena.id)
        assert teacher and other and member
        mine = service.create_class(db_session=s, instructor=teacher, name="Ida's class")
        service.create_class(db_session=s, instructor=other, name="Otto's class")
        a = assignments.create_assignment(db_session=s, classroom=mine, spec=assignments.AssignmentSpec(
            kind="quiz", title="Basics", opens_at=now - timedelta(hours=1),
            due_at=now + timedelta(days=7), slugs=["fixture-single"]))
        assignments.create_assignment(db_session=s, classroom=mine, spec=assignments.AssignmentSpec(
            kind="quiz", title="Talk", opens_at=now - timedelta(hours=1),
            due_at=now + timedelta(days=7), slugs=[TALK]))
        learner = account_learner_id(db_session=s, user_id=member.id)
        service.join(db_session=s, classroom=mine, user=member, now=now, learner_id=learner)
        question = practice.published_question(db_session=s, slug=TALK)
        assert question is not None
        for step in ({"text": TALK_TEXT}, {"ticked": [0]}):
            done = quizzes.answer_step(db_session=s, learner_id=learner, question=question,
                                       variant=0, part=None, raw=step, token=None,
                                       now=now)
        assert mine.join_token is not None and done.attempt is not None
        return World(mine.id, a.id, mine.join_token, done.attempt.id)


@pytest.fixture
def visitors(client: TestClient, more_banks: None, new_client: Callable[..., TestClient],
             make_user: Callable[..., Account], author_client: TestClient,
             admin_client: TestClient) -> dict[str, Any]:
    accounts_made = {name: make_user(name, role) for name, role in
                     (("ida", "instructor"), ("otto", "instructor"), ("lena", "learner"),
                      ("olga", "learner"))}
    browsers: dict[str, TestClient] = {"anonymous": new_client(), "learner": new_client()}
    browsers["learner"].get("/")  # an anonymous learner: a cookie and a CSRF token
    for who, name in (("member", "lena"), ("outsider", "olga"), ("other instructor", "otto"),
                      ("instructor", "ida")):
        browsers[who] = new_client()
        assert login(browsers[who], name).status_code == 303
    browsers["author"], browsers["admin"] = author_client, admin_client
    tokens = {who: csrf_of(c) for who, c in browsers.items() if who != "anonymous"}
    return {"accounts": accounts_made, "browsers": browsers, "tokens": tokens}


def _expected(kind: str, method: str, path: str, who: str) -> str:
    """What each visitor gets: "login" (sent to sign in), "refused" (401/403), "missing" (404:
    not theirs to know of) or "ok" (2xx or 3xx)."""
    signed_out = who in ("anonymous", "learner")
    if kind == "join":
        if method == "GET":
            return "ok"
        if signed_out:
            return "refused"
        return "ok" if who in ("member", "outsider") else "refused"
    if signed_out:
        return "login" if method == "GET" and not path.startswith("/api/") else "refused"
    if kind == "grader":
        if who in ("instructor", "admin"):
            return "ok"
        return "missing" if who == "other instructor" else "refused"
    if kind == "instructor":
        if who == "instructor":
            return "ok"
        if who == "other instructor":
            return "missing" if "{class_id}" in path else "ok"
        return "refused"
    # A member's own pages.
    if who == "member":
        return "ok"
    return "missing" if who == "outsider" else "refused"


ORDER = ("anonymous", "learner", "author", "admin", "outsider", "other instructor", "member",
         "instructor")


# What a form sends besides its token, so that an allowed visitor's request succeeds.
FORMS: dict[str, dict[str, Any]] = {
    "/classes": {"name": "Another class"},
    "/classes/{class_id}/assignments": {
        "title": "Week 2", "kind": "quiz", "opens_at": "2026-03-02T09:00",
        "due_at": "2026-03-09T09:00", "questions": "fixture-single"},
    "/classes/{class_id}/grading/{attempt_id}": {"ticked": "0", "comment": "Scope it first."},
}


def _request(client: TestClient, method: str, path: str, token: str | None, template: str) -> Any:
    data = {"csrf_token": token, **FORMS.get(template, {})} if token and method != "GET" else None
    return client.request(method, path, data=data, follow_redirects=False)


def test_every_class_route_is_tried_as_every_visitor(
    app_client: TestClient, visitors: dict[str, Any], session_factory: sessionmaker[Session],
) -> None:
    routes = _class_routes(app_client.app)
    kinds = {(m, p): _kind(p, r) for m, p, r in routes}
    # The routes this test knows of are all there (a new one is tried by the loop below).
    assert {("GET", "/classes"), ("POST", "/classes"), ("GET", "/classes/{class_id}"),
            ("GET", "/classes/{class_id}/scores.csv"), ("POST", "/classes/join/{token}"),
            ("GET", "/classes/{class_id}/me"), ("GET", "/api/v1/classes/{class_id}"),
            ("POST", "/classes/{class_id}/me/leave")} <= set(kinds)
    assert len(routes) >= 18
    a = visitors["accounts"]
    browsers, tokens = visitors["browsers"], visitors["tokens"]
    tried = 0
    for method, template, _route in routes:
        # A world of its own per route: the allowed visitor may change it (leave, revoke...).
        w = _world(session_factory, a["ida"], a["otto"], a["lena"])
        path = template.format(class_id=w.class_id, assignment_id=w.assignment_id, token=w.token,
                               attempt_id=w.attempt_id)
        for who in ORDER:
            want = _expected(kinds[(method, template)], method, template, who)
            r = _request(browsers[who], method, path, tokens.get(who), template)
            where = (who, method, path, r.status_code, r.text[:200])
            if want == "login":
                assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), where
                hx = browsers[who].get(path, headers={"HX-Request": "true"}, follow_redirects=False)
                assert hx.status_code == 401 and hx.headers["hx-redirect"].startswith("/login"), where
            elif want == "refused":
                assert r.status_code in REFUSED, where
            elif want == "missing":
                assert r.status_code == 404, where
            else:
                assert 200 <= r.status_code < 400, where
            tried += 1
    assert tried == len(routes) * len(ORDER)


def test_a_class_page_names_no_learner_of_another_class(
    visitors: dict[str, Any], session_factory: sessionmaker[Session],
) -> None:
    a = visitors["accounts"]
    w = _world(session_factory, a["ida"], a["otto"], a["lena"])
    otto = visitors["browsers"]["other instructor"]
    mine = text(parse(otto.get("/classes")).select_one("main"))
    assert "Ida's class" not in mine and "Otto's class" in mine
    assert [c["name"] for c in otto.get("/api/v1/classes").json()] == ["Otto's class"]
    ida = visitors["browsers"]["instructor"]
    assert "lena" in ida.get(f"/classes/{w.class_id}").text
    for path in (f"/classes/{w.class_id}", f"/classes/{w.class_id}/scores.csv",
                 f"/api/v1/classes/{w.class_id}"):
        r = otto.get(path)
        assert r.status_code == 404 and "lena" not in r.text, path


def test_every_class_form_checks_csrf(app_client: TestClient, visitors: dict[str, Any],
                                      session_factory: sessionmaker[Session]) -> None:
    a = visitors["accounts"]
    w = _world(session_factory, a["ida"], a["otto"], a["lena"])
    posts = [(m, p, r) for m, p, r in _class_routes(app_client.app) if m in STATE_CHANGING]
    assert posts and all(not p.startswith("/api/") for _, p, _ in posts)
    for method, template, route in posts:
        assert require_csrf in _calls(route.dependant), template
        path = template.format(class_id=w.class_id, assignment_id=w.assignment_id, token=w.token,
                               attempt_id=w.attempt_id)
        who = "member" if "/me" in template or "/join/" in template else "instructor"
        browser = visitors["browsers"][who]
        assert browser.request(method, path, data={"x": "1"}).status_code == 403, path
        assert browser.request(method, path, data={"csrf_token": "forged"}).status_code == 403, path


def test_huge_ids_in_class_urls_are_4xx(visitors: dict[str, Any]) -> None:
    huge = "9" * 30
    for who, path in (("instructor", f"/classes/{huge}"), ("instructor", f"/api/v1/classes/{huge}"),
                      ("instructor", f"/classes/1/assignments/{huge}"), ("member", f"/classes/{huge}/me"),
                      ("instructor", "/classes/2147483648/scores.csv")):
        r = visitors["browsers"][who].get(path)
        assert 400 <= r.status_code < 500, (path, r.status_code)
