"""Helpers shared by the tests: the fixture bank's answers, HTML parsing, forms, row counts."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup
from httpx2 import Response
from itsdangerous import URLSafeSerializer
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts import service as accounts
from app.db import session_scope
from app.identity import LEARNER_COOKIE
from app.questions.bank import load_bank
from app.questions.service import ImportReport, import_bank
from app.settings import Settings

TESTS = Path(__file__).resolve().parent
FIXTURE_BANK = TESTS / "fixtures" / "bank"
BROKEN_BANKS = TESTS / "fixtures" / "broken"
REAL_BANK = TESTS.parent / "question_bank"

# The fixture bank's questions by slug: topic, a right answer and a wrong one, as a
# form would send them (a key, a list of keys, or the typed number).
FIXTURE = {
    "fixture-single": {"topic": "basics", "right": "b", "wrong": "a"},
    "fixture-multi": {"topic": "basics", "right": ["a", "b"], "wrong": ["c"]},
    "fixture-numeric": {"topic": "basics", "right": "1400", "wrong": "1000"},
    "fixture-trace-join": {"topic": "traces", "right": "a", "wrong": "b"},
    "fixture-trace-buckets": {"topic": "traces", "right": "4", "wrong": "11"},
}

# Every test account's password (the hasher is made cheap for tests: tests/conftest.py).
PASSWORD = "correct horse battery staple"


@dataclass(frozen=True)
class Account:
    id: int
    username: str
    role: str


def create_account(session_factory: sessionmaker[Session], username: str, role: str = "author",
                   password: str = PASSWORD) -> Account:
    """An account, committed: its id, name and role."""
    with session_scope(session_factory) as s:
        user = accounts.create_user(db_session=s, username=username, password=password, role=role)
        return Account(user.id, user.username, user.role)


def login(client: Any, username: str, password: str = PASSWORD) -> Any:
    """Sign in through the login form, like a browser."""
    return post_account_form(client, "/login", "form.login-form", username, password)


def sign_up(client: Any, username: str, password: str = PASSWORD) -> Any:
    """Create a learner account through the sign-up form, like a browser."""
    return post_account_form(client, "/signup", "form.signup-form", username, password)


# The learning loop's tests start their fixed clock here.
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

QUIZ_URL = re.compile(r"^/quizzes/(?P<id>[0-9a-f-]{36})/(?P<pos>\d+)$")


def parse(response: Response | str) -> BeautifulSoup:
    """The response's HTML as a tree."""
    text = response if isinstance(response, str) else response.text
    return BeautifulSoup(text, "lxml")


def text(element: Any) -> str:
    """An element's visible text with runs of whitespace made single spaces."""
    return " ".join(element.get_text(" ").split())


def parse_fragment(response: Response) -> BeautifulSoup:
    """An htmx fragment as a tree, without lxml adding the <html><body> it lacks."""
    return BeautifulSoup(response.text, "html.parser")


def form_fields(soup: BeautifulSoup, selector: str = "form") -> tuple[str, dict[str, str]]:
    """A form's action and its hidden fields (the CSRF and one-time tokens), as a browser sends them."""
    form = soup.select_one(selector)
    assert form is not None, f"no {selector} on the page"
    hidden = {i["name"]: i.get("value", "") for i in form.select("input[type=hidden]")}
    return str(form["action"]), hidden


def post_account_form(client: Any, page_path: str, form: str, username: str, password: str) -> Any:
    """Fill in the username and password of the page's account form and post it, like a
    browser (sign-in and sign-up)."""
    action, hidden = form_fields(parse(client.get(page_path)), form)
    return client.post(action, data={**hidden, "username": username, "password": password},
                       follow_redirects=False)


def htmx_headers(soup: BeautifulSoup) -> dict[str, str]:
    """The headers htmx adds to a request made from this page."""
    headers = {"HX-Request": "true"}
    body = soup.body
    if body is not None and body.get("hx-headers"):
        headers.update(json.loads(str(body["hx-headers"])))
    return headers


def submit_answer(client: Any, page_url: str, answer: Any, *, htmx: bool) -> Response:
    """Open a question page and submit its answer form, like a browser with or without JS."""
    page = parse(client.get(page_url))
    action, data = form_fields(page, "form.answer-form")
    payload: dict[str, Any] = {**data, "answer": answer}
    return client.post(action, data=payload, headers=htmx_headers(page) if htmx else {},
                       follow_redirects=False)


def start_quiz(client: Any, **choices: Any) -> str:
    """Submit the quiz builder's "Start a quiz" form (/topics); returns the first question's URL."""
    home = parse(client.get("/topics"))
    action, data = form_fields(home, "form.quiz-form")
    response = client.post(action, data={**data, **choices}, follow_redirects=False)
    assert response.status_code == 303, response.text
    location = response.headers["location"]
    assert QUIZ_URL.match(location), location
    return location


def shown_slug(soup: BeautifulSoup) -> str:
    """The slug of the question a quiz page shows (from its "practise alone" link)."""
    link = soup.select_one("article.question p.hint a[href^='/questions/']")
    assert link is not None
    return str(link["href"]).removeprefix("/questions/")


def learner_id(client: Any, settings: Settings) -> str:
    """The learner id in the client's signed cookie."""
    value = client.cookies.get(LEARNER_COOKIE)
    assert value, "no learner cookie yet"
    return str(URLSafeSerializer(settings.resolved_secret_key(), salt="learner").loads(value))


def count(session_factory: sessionmaker[Session], model: Any, *where: Any) -> int:
    """Rows of a model in the database, as committed."""
    with session_factory() as session:
        return session.scalar(select(func.count()).select_from(model).where(*where)) or 0


def copy_bank(dest: Path, source: Path = FIXTURE_BANK) -> Path:
    """A writable copy of a bank folder."""
    shutil.copytree(source, dest)
    return dest


def import_folder(session_factory: sessionmaker[Session], folder: Path) -> ImportReport:
    """Load and import a bank folder in one transaction."""
    bank = load_bank(folder)
    assert bank.ok, [str(e) for e in bank.errors]
    with session_factory.begin() as session:
        return import_bank(db_session=session, bank=bank)


def run_async(main: Any) -> Any:
    """asyncio.run(main()) on a thread of its own: a browser test earlier in the session may
    still hold a running loop (Playwright's sync API) in the main thread."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(main())).result()


def answer(client: Any, slug: str, value: object, confidence: str | None = None,
           url: str | None = None) -> object:
    """Open a question page (or the Review page) and submit its answer form with a confidence."""
    page = parse(client.get(url or f"/questions/{slug}"))
    action, hidden = form_fields(page, "form.answer-form")
    data: dict[str, object] = {**hidden, "answer": value}
    if confidence:
        data["confidence"] = confidence
    return client.post(action, data=data, follow_redirects=False)


def api_routes(app: Any) -> list[Any]:
    """Every endpoint route with its full path and effective dependencies.

    FastAPI 0.165 keeps included routers nested (app.routes holds _IncludedRouter
    objects); iter_route_contexts flattens them, prefixes and router dependencies
    included. Older versions flatten app.routes themselves.
    """
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - older FastAPI
        from fastapi.routing import APIRoute

        return [r for r in app.routes if isinstance(r, APIRoute)]
    return [c for c in iter_route_contexts(app.routes)
            if c.methods and getattr(c, "dependant", None) is not None]
