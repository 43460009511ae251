"""Who may do what: every /author and /admin route against every kind of visitor, and CSRF.

The routes are enumerated from the app, so a route added later is checked too.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.csrf import require_csrf
from app.db import session_scope, utcnow
from app.deps import require_admin, require_author
from app.questions import service as questions_service
from app.quizzes import service as practice_service
from app.reports import service as reports
from app.verify import service as verify_service
from app.verify.service import engine_versions
from tests.authoring.helpers import create_question, csrf_of
from tests.factories import Account, api_routes, login, parse

STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
# The JSON API's author-only routes (item statistics): the same matrix, answered in JSON.
AUTHOR_API = "/api/v1/stats"


def _calls(dependant: Any) -> set[Any]:
    out = set()
    for dep in dependant.dependencies:
        out.add(dep.call)
        out |= _calls(dep)
    return out


def _routes(app: Any, *prefixes: str) -> list[tuple[str, str, Any]]:
    found = []
    for route in api_routes(app):
        if route.path.startswith(prefixes):
            for method in sorted(route.methods - {"HEAD"}):
                found.append((method, route.path, route))
    return found


def test_every_state_changing_route_outside_the_api_checks_csrf(app_client: TestClient) -> None:
    checked, missing = [], []
    for route in api_routes(app_client.app):
        if not route.methods & STATE_CHANGING or route.path.startswith("/api/"):
            continue
        checked.append(route.path)
        if require_csrf not in _calls(route.dependant):
            missing.append(f"{'/'.join(sorted(route.methods))} {route.path}")
    assert missing == [], "these routes lack `_: CSRF`"
    assert {"/login", "/logout", "/author/questions", "/admin/users", "/admin/bank/upload"} <= set(checked)


def test_every_author_route_requires_an_author_and_every_admin_route_an_admin(
    app_client: TestClient,
) -> None:
    author_routes = _routes(app_client.app, "/author", AUTHOR_API)
    admin_routes = _routes(app_client.app, "/admin")
    assert len(author_routes) >= 17 and len(admin_routes) >= 7
    assert {"/author/stats", "/author/stats/{slug}", f"{AUTHOR_API}/items",
            f"{AUTHOR_API}/items/{{slug}}"} <= {p for _, p, _ in author_routes}
    for _, path, route in author_routes:
        assert require_author in _calls(route.dependant), path
    for _, path, route in admin_routes:
        assert require_admin in _calls(route.dependant), path


@pytest.fixture
def world(
    author_client: TestClient, author: Account, make_user: Callable[..., Account],
    session_factory: sessionmaker[Session], loaded: None,
) -> dict[str, Any]:
    """A question the author owns, a run, a spare account and a learner's problem report, to
    fill in path parameters."""
    assert create_question(author_client, "owned").status_code == 303
    spare = make_user("spare")
    torch_v, harness_v = engine_versions()
    with session_scope(session_factory) as s:
        run, _ = verify_service.request_run(db_session=s, req=verify_service.RunRequest(
            snippet_text="report('x', 1)", world_size=1, params={}, timeout_s=5,
            torch_version=torch_v, harness_version=harness_v))
        run_id = run.id
        # A learner's problem report, for the inbox's /author/reports/{report_id}.
        question = questions_service.get_published(db_session=s, slug="fixture-single")
        published = questions_service.published_question(db_session=s, slug="fixture-single")
        assert question is not None and published is not None
        learner = str(uuid.uuid4())
        practice_service.answer_question(db_session=s, learner_id=learner, question=published,
                                         raw_answer="a", token=None)
        report = reports.file_report(db_session=s, learner_id=learner, question=question,
                                     revision_id=None, kind="unclear", comment="", now=utcnow(),
                                     per_hour=10)
        report_id = report.id
    return {"slug": "owned", "run_id": run_id, "user_id": spare.id, "report_id": report_id}


def _request(client: TestClient, method: str, path: str, token: str | None, **kw: Any) -> Any:
    data = {"csrf_token": token} if token and method != "GET" else None
    return client.request(method, path, data=data, follow_redirects=False, **kw)


def test_the_access_matrix_over_every_author_and_admin_route(
    app_client: TestClient, new_client: Callable[..., TestClient], author_client: TestClient,
    admin_client: TestClient, world: dict[str, Any], make_user: Callable[..., Account],
) -> None:
    routes = _routes(app_client.app, "/author", "/admin", AUTHOR_API)
    assert ("GET", "/author/reports") in {(m, p) for m, p, _ in routes}
    assert ("GET", f"{AUTHOR_API}/items/{{slug}}") in {(m, p) for m, p, _ in routes}
    anonymous = new_client()
    learner = new_client()
    learner.get("/")  # a learner: has the anonymous learner cookie, and a valid CSRF token
    make_user("lena", "learner")
    account = new_client()
    assert login(account, "lena").status_code == 303
    make_user("ivy", "instructor")
    instructor = new_client()
    assert login(instructor, "ivy").status_code == 303
    tokens = {"learner": csrf_of(learner), "author": csrf_of(author_client),
              "admin": csrf_of(admin_client), "account": csrf_of(account),
              "instructor": csrf_of(instructor)}
    for method, template, _ in routes:
        path = template.format(**world)
        for who, client in (("anonymous", anonymous), ("learner", learner)):
            r = _request(client, method, path, tokens.get(who))
            if path.startswith("/api/"):
                # The API is not a browser: no redirect to the login page, a 401 in JSON.
                assert r.status_code == 401 and "detail" in r.json(), (who, method, path)
            elif method == "GET":
                assert r.status_code == 303, (who, method, path, r.status_code)
                assert r.headers["location"].startswith("/login?next="), (who, path)
            else:
                assert r.status_code in (401, 403), (who, method, path, r.status_code)
            if method == "GET":
                hx = client.get(path, headers={"HX-Request": "true"}, follow_redirects=False)
                assert hx.status_code == 401 and hx.headers["hx-redirect"].startswith("/login"), path
        # A signed-in learner account, or an instructor, is refused every author and admin
        # route outright.
        for who, signed_in in (("account", account), ("instructor", instructor)):
            r = _request(signed_in, method, path, tokens[who])
            assert r.status_code == 403, (who, method, path, r.status_code)
    # Signed in: an author is refused admin routes only; an admin nothing.
    for who, client in (("author", author_client), ("admin", admin_client)):
        for method, template, _ in routes:
            path = template.format(**world)
            r = _request(client, method, path, tokens[who])
            if who == "author" and template.startswith("/admin"):
                assert r.status_code == 403, (who, method, path, r.status_code)
            else:
                assert r.status_code not in (401, 403), (who, method, path, r.status_code, r.text[:300])
                assert r.status_code < 500, (who, method, path, r.status_code)


# What an author may do with a question that is not theirs: read it (the editor, in proposal
# mode, its history and its statistics) and propose an edit. Nothing else.
READ_ANY = {("GET", "/author/questions/{slug}"), ("GET", "/author/questions/{slug}/history"),
            ("GET", "/author/questions/{slug}/diff"), ("GET", "/author/stats/{slug}"),
            ("GET", f"{AUTHOR_API}/items/{{slug}}"), ("POST", "/author/questions/{slug}/propose")}


def test_an_author_cannot_change_another_authors_or_an_imported_question(
    app_client: TestClient, author_client: TestClient, admin_client: TestClient,
    new_client: Callable[..., TestClient], make_user: Callable[..., Account], client: TestClient,
    world: dict[str, Any],
) -> None:
    make_user("bob")
    bob = new_client()
    assert login(bob, "bob").status_code == 303
    token = csrf_of(bob)
    per_question = [(m, p) for m, p, _ in _routes(app_client.app, "/author", AUTHOR_API)
                    if "{slug}" in p]
    assert len(per_question) >= 12 and set(per_question) >= READ_ANY
    for slug in ("owned", "fixture-single"):  # alice's, and one from the bank import
        for method, template in per_question:
            path = template.format(**{**world, "slug": slug})
            r = _request(bob, method, path, token)
            if (method, template) in READ_ANY:
                assert r.status_code not in (401, 403) and r.status_code < 500, (method, path, r.status_code)
            else:
                assert r.status_code == 403, (method, path, r.status_code)
    # The bank question is the admin's to edit; its owner may edit their own; another author
    # opens it to propose an edit.
    assert admin_client.get("/author/questions/fixture-single").status_code == 200
    assert author_client.get("/author/questions/owned").status_code == 200
    page = parse(author_client.get("/author/questions/fixture-single"))
    assert page.select_one("form#editor")["action"] == "/author/questions/fixture-single/propose"


def test_a_form_post_without_the_token_is_refused(
    app_client: TestClient, admin_client: TestClient, world: dict[str, Any],
) -> None:
    token = csrf_of(admin_client)
    for method, template, _ in _routes(app_client.app, "/author", "/admin", "/login", "/logout"):
        if method not in STATE_CHANGING:
            continue
        path = template.format(**world)
        assert admin_client.post(path, data={"x": "1"}).status_code == 403, path
        assert admin_client.post(path, data={"csrf_token": "forged"}).status_code == 403, path
        # Another visitor's token does not work either.
    stranger = csrf_of(TestClient(app_client.app))
    assert stranger != token
    assert admin_client.post("/admin/users", data={"csrf_token": stranger, "username": "x1",
                                                   "password": "x" * 12}).status_code == 403
    # htmx sends the token as a header, from the page's hx-headers.
    page = parse(admin_client.get("/author"))
    assert token in page.body["hx-headers"]
    ok = admin_client.post("/author/preview/markdown", data={"prompt": "*hi*"},
                           headers={"X-CSRF-Token": token, "HX-Request": "true"})
    assert ok.status_code == 200 and "<em>hi</em>" in ok.text
