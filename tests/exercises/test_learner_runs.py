"""A learner's own code: run against the checks through the page and the API, with real
workers on real gloo ranks; hidden checks only counted; capped, rate-limited, never shared
across learners, queued behind shared runs; a pass stored as an attempt with its code."""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.exercises.service import MAX_CODE_BYTES
from app.main import create_app
from app.quizzes.models import Attempt
from app.review.models import ReviewCard
from app.settings import Settings
from app.verify import queue, service
from app.verify.models import PRIORITY_PRIVATE, Run
from app.verify.worker import Worker
from tests.exercises.helpers import SLUG, SOLUTION, STARTER
from tests.factories import (
    EXERCISE_BANK,
    count,
    form_fields,
    import_folder,
    learner_id,
    make_request,
    parse,
    parse_fragment,
)

HX = {"HX-Request": "true"}
SECRET = "SECRET-HIDDEN-LABEL"


def _drain(factory: sessionmaker[Session], settings: Settings) -> None:
    worker = Worker(factory, settings)
    while worker.run_once():
        pass


def _form(client: TestClient) -> dict[str, str]:
    """The exercise form's fields as the browser would send them without JavaScript."""
    page = parse(client.get(f"/exercises/{SLUG}"))
    _, data = form_fields(page, "form.exercise-form")
    area = page.select_one("form.exercise-form textarea[name=code]")
    assert area is not None
    # HTML drops one newline right after <textarea>; the text is the starter as written.
    data["code"] = area.get_text()
    return data


def _run_api(client: TestClient, code: str) -> dict:
    r = client.post(f"/api/v1/exercises/{SLUG}/run", json={"code": code})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_passing_solution_shows_every_check_and_is_stored_as_an_attempt_with_its_code(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    started = _run_api(ex_client, SOLUTION)
    assert started["status"] == "pending" and len(started["run_ids"]) == 1
    _drain(session_factory, settings)
    body = ex_client.get(started["url"]).json()
    assert body["status"] == "done" and body["passed"] is True
    assert [c["passed"] for c in body["visible"]] == [True, True]
    assert (body["hidden_passed"], body["hidden_total"]) == (1, 1)
    with session_scope(session_factory) as s:
        (attempt,) = s.scalars(select(Attempt)).all()
        assert attempt.correct and attempt.score == 1.0
        assert attempt.answer == {"code": SOLUTION}
        assert attempt.learner_id == learner_id(ex_client, settings)
    # Showing the same result again does not store a second attempt.
    assert ex_client.get(started["url"]).json()["attempt_id"] == body["attempt_id"]
    assert count(session_factory, Attempt) == 1
    # The pass scheduled a review card, like any answer; reviewing it is solving it again.
    assert count(session_factory, ReviewCard) == 1
    # The answer API refuses an exercise even when its key replays the stored attempt's token.
    replay = ex_client.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "a"},
                            headers={"Idempotency-Key": f"exercise:{started['submission']}"})
    assert replay.status_code == 422
    assert ex_client.get("/review", follow_redirects=False).headers.get("location") in (
        None, f"/exercises/{SLUG}")


def test_the_starter_fails_with_a_diagnosis_and_only_a_count_of_hidden_checks(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    data = _form(ex_client)
    assert data["code"] == STARTER
    r = ex_client.post(f"/exercises/{SLUG}/run", data=data, headers=HX)
    assert r.status_code == 200
    assert parse_fragment(r).select_one("#submission")["data-status"] == "pending"
    _drain(session_factory, settings)
    token = "-".join(str(i) for i in _run_ids(session_factory))
    frag = parse_fragment(ex_client.get(f"/exercises/{SLUG}/submissions/{token}", headers=HX))
    sub = frag.select_one("#submission")
    assert sub["data-passed"] == "false"
    rows = frag.select("tr[data-check='visible']")
    assert [row["data-passed"] for row in rows] == ["false", "true"]
    assert frag.select_one(".hidden-count").get_text(" ", strip=True) == "0 of 1 hidden checks pass."
    assert frag.select_one(".diagnosis") is not None  # the verify panel of the run
    assert SECRET not in str(frag)


def _run_ids(factory: sessionmaker[Session]) -> list[int]:
    with session_scope(factory) as s:
        return list(s.scalars(select(Run.id).where(Run.priority == PRIORITY_PRIVATE)
                              .order_by(Run.id)))


def test_hidden_checks_never_reach_the_page_or_the_api(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    started = _run_api(ex_client, STARTER)
    _drain(session_factory, settings)
    run_id = started["run_ids"][0]
    responses = [
        ex_client.get(f"/exercises/{SLUG}"),
        ex_client.get(f"/api/v1/questions/{SLUG}"),
        ex_client.get(started["url"]),
        ex_client.get(f"/exercises/{SLUG}/submissions/{started['submission']}"),
        ex_client.get(f"/exercises/{SLUG}/submissions/{started['submission']}", headers=HX),
        ex_client.get(f"/runs/{run_id}"),
        ex_client.get(f"/api/v1/runs/{run_id}"),
    ]
    for r in responses:
        assert r.status_code == 200, r.url
        assert SECRET not in r.text, r.url
        # Nor the reference solution, which is the hidden checks' answer.
        assert "dist.all_reduce(t)" not in r.text, r.url
    question = ex_client.get(f"/api/v1/questions/{SLUG}").json()
    assert question["answer_format"] == "exercise"
    assert question["exercise"]["starter"] == STARTER
    assert question["exercise"]["hidden_checks"] == 1
    assert len(question["exercise"]["visible_checks"]) == 2
    api = ex_client.get(started["url"]).json()
    assert [c["label"] for c in api["visible"]] == [
        "every rank gets the total of the ranks' numbers", "the total is a whole number"]
    assert set(api) >= {"hidden_total", "hidden_passed"}


def test_code_over_the_cap_is_refused_and_queues_nothing(
    ex_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    big = STARTER + "#" * (MAX_CODE_BYTES - len(STARTER.encode()) + 1)
    r = ex_client.post(f"/api/v1/exercises/{SLUG}/run", json={"code": big})
    assert r.status_code == 413
    data = _form(ex_client)
    r = ex_client.post(f"/exercises/{SLUG}/run", data={**data, "code": big}, headers=HX)
    assert r.status_code == 413 and "20 KB" in r.text
    assert count(session_factory, Run) == 0
    # Exactly at the cap is accepted.
    exact = STARTER + "#" * (MAX_CODE_BYTES - len(STARTER.encode()))
    assert ex_client.post(f"/api/v1/exercises/{SLUG}/run", json={"code": exact}).status_code == 200


def test_code_that_does_not_compile_is_422_with_its_line(
    ex_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    r = ex_client.post(f"/api/v1/exercises/{SLUG}/run", json={"code": "x = 1\ndef broken(:\n"})
    assert r.status_code == 422 and "line 2" in r.text
    assert count(session_factory, Run) == 0


@pytest.fixture
def limited(settings: Settings, session_factory: sessionmaker[Session]) -> Iterator[TestClient]:
    import_folder(session_factory, EXERCISE_BANK)
    with TestClient(create_app(settings.model_copy(update={"exercise_rate_per_minute": 2}))) as c:
        yield c


def test_learner_code_is_rate_limited_per_learner(
    limited: TestClient, session_factory: sessionmaker[Session]
) -> None:
    first = time.monotonic()
    for i in range(2):
        assert limited.post(f"/api/v1/exercises/{SLUG}/run",
                            json={"code": f"{SOLUTION}\n# try {i}\n"}).status_code == 200
    r = limited.post(f"/api/v1/exercises/{SLUG}/run", json={"code": f"{SOLUTION}\n# try 3\n"})
    # Retry-After: the seconds until the first run's hit leaves the minute's window, which
    # the two runs before took some of.
    assert r.status_code == 429
    assert 60 - math.ceil(time.monotonic() - first) <= int(r.headers["Retry-After"]) <= 60
    # The same code again is this learner's own cached run: free.
    again = limited.post(f"/api/v1/exercises/{SLUG}/run", json={"code": f"{SOLUTION}\n# try 0\n"})
    assert again.status_code == 200
    assert count(session_factory, Run) == 2


def test_learner_code_is_rate_limited_per_address(
    limited: TestClient, session_factory: sessionmaker[Session]
) -> None:
    # Four times the per-learner limit from one address, spread over learners without cookies.
    for i in range(8):
        limited.cookies.clear()
        r = limited.post(f"/api/v1/exercises/{SLUG}/run", json={"code": f"{STARTER}\n# {i}\n"})
        assert r.status_code == 200, (i, r.text)
    limited.cookies.clear()
    r = limited.post(f"/api/v1/exercises/{SLUG}/run", json={"code": f"{STARTER}\n# last\n"})
    assert r.status_code == 429


def test_the_same_code_from_two_learners_is_two_runs_never_one_cache_entry(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    first = _run_api(ex_client, SOLUTION)
    assert _run_api(ex_client, SOLUTION)["run_ids"] == first["run_ids"]  # the same learner
    with TestClient(create_app(settings)) as other:
        theirs = _run_api(other, SOLUTION)
        assert theirs["run_ids"] != first["run_ids"]
        # Nor may they read the first learner's submission or its runs.
        assert other.get(first["url"]).status_code == 404
        assert other.get(f"/api/v1/runs/{first['run_ids'][0]}").status_code == 404
        assert other.get(f"/runs/{first['run_ids'][0]}").status_code == 404
    with session_scope(session_factory) as s:
        keys = set(s.scalars(select(Run.cache_key)))
    assert len(keys) == 2


def test_learner_code_is_claimed_only_after_every_shared_run(
    ex_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    _run_api(ex_client, SOLUTION)  # queued first
    with session_scope(session_factory) as s:
        shared, _ = service.request_run(
            db_session=s, req=dataclasses.replace(make_request("report('x', 1)"),
                                                  requested_by="author:1"))
        shared_id = shared.id
    with session_scope(session_factory) as s:
        claimed = queue.claim_run(db_session=s, worker_id="w", lease_seconds=30)
        assert claimed is not None and claimed.id == shared_id
        second = queue.claim_run(db_session=s, worker_id="w", lease_seconds=30)
        assert second is not None and second.priority == PRIORITY_PRIVATE


def test_an_exercise_is_never_a_quiz_item_and_its_question_url_leads_to_its_page(
    ex_client: TestClient,
) -> None:
    r = ex_client.get(f"/questions/{SLUG}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/exercises/{SLUG}"
    assert ex_client.post(f"/api/v1/questions/{SLUG}/verify", json={}).status_code == 404
    r = ex_client.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "a"})
    assert r.status_code == 422, r.text


def test_exercise_runs_and_question_verify_runs_have_separate_budgets(
    settings: Settings, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    from tests.factories import FIXTURE_BANK

    # One bank with both (an import retires what its folder does not hold).
    both = tmp_path / "bank"
    shutil.copytree(FIXTURE_BANK, both)
    shutil.copytree(EXERCISE_BANK / "drills", both / "drills")
    import_folder(session_factory, both)
    tight = settings.model_copy(update={"exercise_rate_per_minute": 1, "verify_rate_per_minute": 1})
    with TestClient(create_app(tight)) as c:
        assert c.post(f"/api/v1/exercises/{SLUG}/run", json={"code": STARTER}).status_code == 200
        assert c.post(f"/api/v1/exercises/{SLUG}/run",
                      json={"code": STARTER + "\n#2\n"}).status_code == 429
        # The exercise run did not use up the learner's question Verify budget, nor the reverse.
        # Verify is the answered learner's (app/reveal.py).
        assert c.post("/api/v1/questions/fixture-single/attempts", json={"answer": "b"}).status_code == 200
        assert c.post("/api/v1/questions/fixture-single/verify", json={"params": {}}).status_code == 200
        assert c.post("/api/v1/questions/fixture-single/verify",
                      json={"params": {"scale": 2}}).status_code == 429


def test_a_topic_of_exercises_links_to_their_pages_and_offers_no_quiz(ex_client: TestClient) -> None:
    page = parse(ex_client.get("/topics/drills"))
    assert [a["href"] for a in page.select(".question-list a")] == [f"/exercises/{SLUG}"]
    assert page.select_one("form[action='/quizzes']") is None


def test_thirty_submissions_from_one_address_fill_only_its_share_of_the_queue(
    ex_client: TestClient, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session],
    settings: Settings,
) -> None:
    """The attacker's burst: 30 spinning submissions, each from a fresh cookie, one address.
    Past the address's share of the waiting queue they are refused (429 with Retry-After);
    another address still gets in, and its run is claimed before the burst's second."""
    spin = "while True:\n    pass\n"
    statuses = []
    for _ in range(30):
        browser = new_client()
        statuses.append(browser.post(f"/api/v1/exercises/{SLUG}/run", json={"code": spin}))
    accepted = [r for r in statuses if r.status_code == 200]
    refused = [r for r in statuses if r.status_code == 429]
    assert len(accepted) == settings.private_queue_per_address
    assert len(refused) == 30 - settings.private_queue_per_address
    assert refused[0].headers["retry-after"] and "from your network" in refused[0].json()["detail"]
    other = TestClient(ex_client.app, client=("10.9.9.9", 5000))
    mine = other.post(f"/api/v1/exercises/{SLUG}/run", json={"code": SOLUTION}).json()
    with session_scope(session_factory) as s:
        first = queue.claim_run(db_session=s, worker_id="w1", lease_seconds=60)
        second = queue.claim_run(db_session=s, worker_id="w2", lease_seconds=60)
        assert first is not None and second is not None
        assert second.id in mine["run_ids"]  # not the burst's second run


def test_addresses_of_one_ipv6_64_share_one_address_s_share(
    ex_client: TestClient, settings: Settings,
) -> None:
    """One host is given a /64: a burst from 30 of its addresses, each with a fresh cookie,
    is one address to every limit; an address of another /64 still gets in."""
    spin = "while True:\n    pass\n"
    codes = []
    for i in range(30):
        browser = TestClient(ex_client.app, client=(f"2001:db8:1:2::{i + 1:x}", 5000))
        codes.append(browser.post(f"/api/v1/exercises/{SLUG}/run", json={"code": spin}).status_code)
    assert codes.count(200) == settings.private_queue_per_address
    assert codes.count(429) == 30 - settings.private_queue_per_address
    other = TestClient(ex_client.app, client=("2001:db8:1:3::1", 5000))
    assert other.post(f"/api/v1/exercises/{SLUG}/run", json={"code": SOLUTION}).status_code == 200


def test_address_keys_count_an_ipv6_host_by_its_64() -> None:
    from app.deps import address_key

    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2::ffff") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") == "2001:db8:1:3::/64"
    assert address_key("::ffff:10.1.2.3") == "10.1.2.3" == address_key("10.1.2.3")
    assert address_key("testclient") == "testclient"


def test_a_learners_run_takes_at_most_the_learner_run_timeout(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    ex_client.app.state.settings = settings.model_copy(update={"learner_run_timeout_s": 4.0})
    (run_id,) = ex_client.post(f"/api/v1/exercises/{SLUG}/run",
                               json={"code": "while True:\n    pass\n"}).json()["run_ids"]
    with session_scope(session_factory) as s:
        run = s.get(Run, run_id)
        assert run is not None and run.timeout_s == 4.0  # the exercise allows 10


def _headline_of(client: TestClient, factory: sessionmaker[Session], settings: Settings,
                 code: str) -> Any:
    started = _run_api(client, code)
    _drain(factory, settings)
    frag = parse_fragment(client.get(f"/exercises/{SLUG}/submissions/{started['submission']}",
                                     headers=HX))
    return frag


def test_a_finished_run_leads_with_one_headline_in_the_learners_own_line_numbers(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    starter = _headline_of(ex_client, session_factory, settings, STARTER)
    assert starter.select_one(".result-headline").get_text(strip=True) == (
        "✗ 2 checks fail: 1 you can see below and 1 hidden.")
    raised = _headline_of(ex_client, session_factory, settings,
                          "def rank_total():\n    raise ValueError('not yet')\n")
    assert raised.select_one(".result-headline").get_text(strip=True) == (
        "✗ Your code raised ValueError on rank 0 at line 2 of your code.")
    # Hidden checks are not "0 of 1 passing" when nothing could be measured.
    assert "need a run that finishes" in raised.select_one(".hidden-count").get_text()
    # A line past the learner's two lines is the checks' (they call a function not written).
    missing = _headline_of(ex_client, session_factory, settings, "x = 1\ny = 2\n")
    head = missing.select_one(".result-headline").get_text(strip=True)
    assert head == "✗ Your code raised NameError on rank 0 in the exercise's checks, after your code."
    assert "Your code has 2 lines and ran to its end" in missing.select_one(".checks-lines").get_text()
    passed = _headline_of(ex_client, session_factory, settings, SOLUTION)
    assert passed.select_one(".result-headline").get_text(strip=True) == (
        "✓ Passed: every check passes, hidden ones too.")
    assert "All-reduce the number." in passed.select_one(".solved-next .explanation").get_text()


def test_a_hung_run_says_where_it_waited_and_never_counts_hidden_checks() -> None:
    from app.exercises.service import Submission
    from app.exercises.views import headline

    result = {"outcome": "timeout", "diagnosis": "rank 1 was blocked in all_reduce",
              "world_size": 2, "torch_version": "2.13", "harness_version": "8",
              "ranks": [{"rank": 0}, {"rank": 1, "blocked_in": {"op": "all_reduce",
                                                                 "since_ms": 5.0, "line": 3}}]}
    run = Run(status="done", result=result, params={}, world_size=2)
    sub = Submission(question=None, doc=None, runs=[run], code="a\nb\nc\nd\n",  # type: ignore[arg-type]
                     hidden_total=1, hidden_passed=0)
    h = headline(sub)
    assert (h.kind, h.text) == ("hung", "Your code hung: rank 1 was still waiting in all_reduce "
                                        "at line 3 of your code when the run was stopped.")
    sub.code = "a\n"
    assert "in the exercise's checks, after your code" in headline(sub).text


def test_a_solved_exercise_is_marked_and_reopens_on_the_passing_code(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    page = parse(ex_client.get(f"/exercises/{SLUG}"))
    assert page.select_one(".solved-mark") is None
    _headline_of(ex_client, session_factory, settings, SOLUTION)
    page = parse(ex_client.get(f"/exercises/{SLUG}"))
    assert "solved" in page.select_one(".solved-mark").get_text()
    assert page.select_one("textarea[name=code]").get_text() == SOLUTION
    # Reset without JavaScript gives the starter back.
    fresh = parse(ex_client.get(f"/exercises/{SLUG}?starter=1"))
    assert fresh.select_one("textarea[name=code]").get_text() == STARTER
