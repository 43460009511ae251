"""Helpers shared by the tests: the fixture bank's answers, HTML parsing, forms, row counts."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
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
from app.verify import service
from app.verify.engine import HARNESS_VERSION, torch_version
from app.verify.models import Run

TESTS = Path(__file__).resolve().parent
FIXTURE_BANK = TESTS / "fixtures" / "bank"
BROKEN_BANKS = TESTS / "fixtures" / "broken"
# Questions with variables (computed, measured), a case and a talk-through.
VARIANT_BANK = TESTS / "fixtures" / "variant_bank"
# One small exercise (tests/exercises/helpers.py names its slug and programs).
EXERCISE_BANK = TESTS / "fixtures" / "exercise_bank"
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


def answered(client: Any, slug: str = "fixture-single", value: object = "b") -> None:
    """Answer a question through the API, as a learner must before its runs are theirs to see
    (app/reveal.py)."""
    r = client.post(f"/api/v1/questions/{slug}/attempts", json={"answer": value})
    assert r.status_code == 200, r.text


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


def make_request(snippet: str, *, params: dict | None = None, world_size: int = 1,
                 timeout_s: float = 10.0, requested_by: str | None = None) -> service.RunRequest:
    return service.RunRequest(snippet_text=snippet, world_size=world_size, params=params or {},
                              timeout_s=timeout_s, torch_version=torch_version(),
                              harness_version=HARNESS_VERSION, requested_by=requested_by)


def enqueue(factory: sessionmaker[Session], req: service.RunRequest) -> int:
    with session_scope(factory) as s:
        run, _ = service.request_run(db_session=s, req=req)
        return run.id


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


def run_status(factory: sessionmaker[Session], run_id: int) -> str:
    with session_scope(factory) as s:
        run = s.get(Run, run_id)
        assert run is not None
        return run.status
# A learner made by a known FSRS model ------------------------------------------------------

# A learner who forgets much faster than FSRS's defaults expect (lower initial stabilities,
# a slower stability gain, a steeper forgetting curve): what a fit has to find.
FAST_FORGETTER = (0.08, 0.5, 1.0, 3.0, 6.4133, 0.8334, 3.0194, 0.001, 1.3, 0.1666, 0.796,
                  1.4835, 0.0614, 0.2629, 1.6483, 0.6014, 1.8729, 0.5425, 0.0912, 0.0658, 0.3)


def synthetic_reviews(parameters: Any, *, cards: int, reviews: int, seed: int,
                      start: datetime = datetime(2025, 1, 1, tzinfo=UTC)) -> list[Any]:
    """A review log (fsrs ReviewLogs, card ids 1..cards) of a learner whose memory follows FSRS
    with `parameters`: each card is reviewed when the model schedules it, often late, recalled
    with the model's predicted probability (Again when not, mostly Good when so)."""
    import random
    from datetime import timedelta

    from fsrs import Card, Rating, Scheduler

    model = Scheduler(parameters=parameters, enable_fuzzing=False)
    rng = random.Random(seed)
    pending = [(start + timedelta(hours=rng.uniform(0, 24 * 60)), cid, Card(card_id=cid))
               for cid in range(1, cards + 1)]
    logs = []
    while len(logs) < reviews:
        pending.sort(key=lambda p: (p[0], p[1]))
        at, cid, card = pending[0]
        if card.last_review is None:
            rating = rng.choice([Rating.Again, Rating.Hard, Rating.Good, Rating.Good, Rating.Easy])
        elif rng.random() < model.get_card_retrievability(card, at):
            rating = rng.choices([Rating.Hard, Rating.Good, Rating.Easy], [0.15, 0.7, 0.15])[0]
        else:
            rating = Rating.Again
        card, log = model.review_card(card, rating, review_datetime=at,
                                      review_duration=rng.randint(5_000, 60_000))
        logs.append(log)
        pending[0] = (at + (card.due - at) * rng.uniform(0.7, 3.0), cid, card)
    return logs


def interval_error(parameters: Any, logs: list[Any], truth: Any = FAST_FORGETTER) -> float:
    """Mean |log(interval / the model's interval)| after every review of held-out histories
    whose model interval (`truth`'s) is a day or more: how far these weights schedule from
    the learner's real memory."""
    import math

    from fsrs import Card, Scheduler

    mine = Scheduler(parameters=parameters, enable_fuzzing=False)
    model = Scheduler(parameters=truth, enable_fuzzing=False)
    by_card: dict[int, list[Any]] = {}
    for g in sorted(logs, key=lambda g: g.review_datetime):
        by_card.setdefault(g.card_id, []).append(g)
    total, n = 0.0, 0
    for cid, seq in by_card.items():
        a = b = Card(card_id=cid, due=seq[0].review_datetime)
        for g in seq:
            a, _ = mine.review_card(a, g.rating, review_datetime=g.review_datetime)
            b, _ = model.review_card(b, g.rating, review_datetime=g.review_datetime)
            true_s = (b.due - g.review_datetime).total_seconds()
            if true_s >= 86400:
                total += abs(math.log((a.due - g.review_datetime).total_seconds() / true_s))
                n += 1
    return total / n


def seed_review_log(session_factory: sessionmaker[Session], learner: str, logs: list[Any],
                    topic: str = "synthetic") -> dict[int, int]:
    """Store a synthetic log as a learner's: one question per card (in a topic of its own),
    each card scheduled as the app would have with the default weights. Returns the
    synthetic card id -> review card id."""
    from fsrs import Card

    from app.accounts.models import Learner
    from app.questions.models import STATUS_PUBLISHED, Question, Topic
    from app.review.models import ReviewCard, ReviewLog
    from app.review.service import SCHEDULER

    by_card: dict[int, list[Any]] = {}
    for log in sorted(logs, key=lambda g: g.review_datetime):
        by_card.setdefault(log.card_id, []).append(log)
    ids: dict[int, int] = {}
    with session_scope(session_factory) as s:
        if s.get(Learner, learner) is None:
            s.add(Learner(id=learner))
        if s.get(Topic, topic) is None:
            s.add(Topic(slug=topic, title=topic.title()))
        s.flush()
        for cid, seq in by_card.items():
            q = Question(slug=f"{topic}-{learner[:8]}-{cid}", status=STATUS_PUBLISHED, topic=topic,
                         title=f"Synthetic {cid}", difficulty=1, type="single")
            s.add(q)
            s.flush()
            row = ReviewCard(learner_id=learner, question_id=q.id, card={}, due=seq[0].review_datetime)
            s.add(row)
            s.flush()
            card = Card(card_id=row.id, due=seq[0].review_datetime)
            for log in seq:
                card, _ = SCHEDULER.review_card(card, log.rating, review_datetime=log.review_datetime)
                s.add(ReviewLog(card_id=row.id, learner_id=learner, rating=int(log.rating),
                                reviewed_at=log.review_datetime,
                                log={**log.to_dict(), "card_id": row.id}))
            row.card, row.due, row.reps = dict(card.to_dict()), card.due, len(seq)
            row.last_review, row.last_rating = card.last_review, int(seq[-1].rating)
            ids[cid] = row.id
    return ids
