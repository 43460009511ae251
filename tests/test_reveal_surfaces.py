"""Door 1 of issue 36 on every surface: while a question is an item of a learner's live mock
interview, nothing of its key, explanation, grade or runs reaches them anywhere, not even for
the questions they answered before it began (app/reveal.py). Once the interview is over it all
comes back. Tried through the pages, the fragments and the JSON API, as the learner would,
on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.clock import FixedClock
from app.db import session_scope
from app.settings import Settings
from app.verify.models import Run
from app.verify.worker import Worker
from tests.factories import (
    FIXTURE,
    FIXTURE_BANK,
    T0,
    Account,
    form_fields,
    htmx_headers,
    import_folder,
    login,
    parse,
    shown_slug,
    start_quiz,
)

SLUG = "fixture-single"
EXPLAINED = "SENTINEL-EXPLANATION-SINGLE"


def _drain(factory: sessionmaker[Session], settings: Settings) -> None:
    worker = Worker(factory, settings)
    while worker.run_once():
        pass


def _quiz_position(client: TestClient, url: str, slug: str) -> str:
    """The URL of the quiz item that asks `slug` (the quiz's first URL given)."""
    base = url.rsplit("/", 1)[0]
    for pos in range(1, 10):
        if shown_slug(parse(client.get(f"{base}/{pos}"))) == slug:
            return f"{base}/{pos}"
    raise AssertionError(f"{slug} is not in the quiz")


def _answer_quiz(client: TestClient, url: str) -> None:
    """Answer every item of a quiz of the fixture bank right, through its forms (htmx)."""
    base = url.rsplit("/", 1)[0]
    for pos in range(1, 4):
        page = parse(client.get(f"{base}/{pos}"))
        slug = shown_slug(page)
        action, hidden = form_fields(page, "form.answer-form")
        r = client.post(action, data={**hidden, "answer": FIXTURE[slug]["right"]},
                        headers=htmx_headers(page))
        assert r.status_code == 200, r.text


def _shows_key(html: str) -> bool:
    return EXPLAINED in html


def test_a_live_mock_withholds_every_earlier_key_grade_and_run_of_its_questions_until_it_ends(
    variant_client: TestClient, new_client: Callable[..., TestClient],
    make_user: Callable[..., Account], session_factory: sessionmaker[Session],
    settings: Settings,
) -> None:
    from tests.classes.helpers import add_assignment, csrf_of, join, join_path, make_class

    client = variant_client
    clock: FixedClock = client.app.state.clock  # type: ignore[attr-defined]
    import_folder(session_factory, FIXTURE_BANK)
    make_user("lev", "learner")
    assert login(client, "lev").status_code == 303
    instructor = new_client()
    make_user("ida", "instructor")
    assert login(instructor, "ida").status_code == 303
    class_id = make_class(instructor)
    r = add_assignment(instructor, class_id, questions=["fixture-trace-join"],
                       due=T0 + timedelta(days=365))
    assert r.status_code == 303, r.text
    assert join(client, join_path(instructor, class_id)).status_code == 303

    # Before: a quiz of the basics answered right, the question predicted and run, a finished
    # mock interview (shared), an earlier answer replayable by its token.
    quiz = start_quiz(client, topics="basics", count="3")
    _answer_quiz(client, quiz)
    item = _quiz_position(client, quiz, SLUG)
    assert _shows_key(client.get(item).text)
    page = parse(client.get(f"/questions/{SLUG}"))
    action, hidden = form_fields(page, "form#answer-form")
    r = client.post(action, data={**hidden, "answer": "b", "knob.scale": "1", "then_run": "1"})
    assert r.status_code == 200 and _shows_key(r.text)
    replay = {**hidden, "answer": "b"}
    _drain(session_factory, settings)
    with session_scope(session_factory) as s:
        [run_id] = s.scalars(select(Run.id))
    api = client.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "b"},
                      headers={"Idempotency-Key": "k1"})
    assert api.status_code == 200 and api.json()["correct_answer"] == "b"
    first = client.post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    [asked] = [i for i in first["items"] if i["slug"] == SLUG]
    assert client.post(f"/api/v1/mock-interviews/{first['id']}/answers",
                       json={"position": asked["position"], "answer": "b"}).status_code == 201
    report = client.post(f"/api/v1/mock-interviews/{first['id']}/finish").json()
    [row] = [i for i in report["items"] if i["slug"] == SLUG]
    assert row["correct_answer"] == "b" and row["withheld"] is None
    page = parse(client.get(f"/mock/{first['id']}/report"))
    action, hidden = form_fields(page, "#share form")
    assert client.post(action, data=hidden).status_code == 200
    shared = parse(client.get(f"/mock/{first['id']}/report")).select_one("a.share-link")["href"]
    shared = "/" + str(shared).split("/", 3)[3]
    assert client.get(f"/runs/{run_id}").status_code == 200
    dash = client.get("/api/v1/dashboard").json()

    # A new mock interview begins: every question of the bank is one of its items.
    clock.advance(timedelta(minutes=30))
    live = client.post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    assert SLUG in {i["slug"] for i in live["items"]}
    # Its first answer to the class's question: no grade of it anywhere before the end.
    [trace] = [i for i in live["items"] if i["slug"] == "fixture-trace-join"]
    assert client.post(f"/api/v1/mock-interviews/{live['id']}/answers",
                       json={"position": trace["position"], "answer": "a"}).status_code == 201

    def withheld_everywhere() -> None:
        # The earlier quiz's page, its fragment-answer replay, its summary.
        page = client.get(item)
        assert page.status_code == 200 and not _shows_key(page.text)
        assert parse(page).select_one("p.withheld") is not None
        assert parse(page).select_one("form.answer-form") is None
        again = client.post(item + "/answer", data={"csrf_token": csrf_of(client), "answer": "b"},
                            headers={"HX-Request": "true"})
        assert again.status_code == 409 and not _shows_key(again.text), again.text
        summary = client.get(quiz.rsplit("/", 1)[0] + "/summary")
        assert "withheld" in summary.text and "score-percent" not in summary.text
        # The question's own page, its form replayed, the API replayed, Review's form.
        page = client.get(f"/questions/{SLUG}")
        assert not _shows_key(page.text) and "torchrun" not in page.text
        r = client.post(f"/questions/{SLUG}/answer", data=replay)
        assert r.status_code == 409 and not _shows_key(r.text)
        r = client.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "b"},
                        headers={"Idempotency-Key": "k1"})
        assert r.status_code == 409 and "correct_answer" not in r.json(), r.text
        r = client.post(f"/review/{SLUG}/answer", data=replay, headers={"HX-Request": "true"})
        assert r.status_code == 409 and not _shows_key(r.text)
        # The earlier mock's report (page and API), and its share link read by its owner.
        for path in (f"/mock/{first['id']}/report", shared):
            page = client.get(path)
            assert page.status_code == 200 and not _shows_key(page.text), path
            assert parse(page).select("table.mock-questions .badge.withheld"), path
            assert not parse(page).select("table.mock-questions .badge.right"), path
        [row] = [i for i in client.get(f"/api/v1/mock-interviews/{first['id']}/report")
                 .json()["items"] if i["slug"] == SLUG]
        assert row["correct_answer"] is None and row["explanation"] is None
        assert row["correct"] is None and row["withheld"]
        # Its runs, the comparison, the torchrun script, Verify.
        for path in (f"/runs/{run_id}", f"/api/v1/runs/{run_id}"):
            assert client.get(path).status_code == 404, path
        assert client.get(f"/questions/{SLUG}/torchrun.py").status_code == 409
        assert client.post(f"/api/v1/questions/{SLUG}/verify",
                           json={"params": {"scale": 1}}).status_code == 409
        # The dashboard counts no answer of the interview under way.
        assert client.get("/api/v1/dashboard").json()["weeks"] == dash["weeks"]
        # The account's answers, the data download.
        page = parse(client.get("/account"))
        cells = [tr.select("td") for tr in page.select("table.history tbody tr")]
        assert {c[1].get_text(strip=True) for c in cells if c[0].get_text(strip=True) == SLUG} \
            == {"withheld"}
        data = client.get("/account/export.json").json()
        mine = [a for a in data["attempts"] if a["question"] == SLUG]
        assert mine and all(a["answer"] is None and a["correct"] is None for a in mine)
        # The class: the interview's answer counts once it is over.
        [work] = client.get(f"/api/v1/classes/{class_id}/me").json()["work"]
        assert work["answered"] == 0 and work["score"] == 0.0

    withheld_everywhere()

    # Over (its deadline passed): every key, grade and run is back, and the answer counts.
    clock.advance(timedelta(minutes=26))
    assert _shows_key(client.get(item).text)
    assert client.get(f"/runs/{run_id}").status_code == 200
    assert client.get(f"/questions/{SLUG}/torchrun.py").status_code == 200
    [row] = [i for i in client.get(f"/api/v1/mock-interviews/{first['id']}/report")
             .json()["items"] if i["slug"] == SLUG]
    assert row["correct_answer"] == "b"
    assert parse(client.get(shared)).select("table.mock-questions .badge.right")
    [work] = client.get(f"/api/v1/classes/{class_id}/me").json()["work"]
    assert work["answered"] == 1 and work["score"] == 1.0
    assert client.get("/api/v1/dashboard").json()["weeks"] != dash["weeks"]


def test_a_shared_report_shows_its_reader_only_the_keys_they_may_see(
    client: TestClient, new_client: Callable[..., TestClient],
    make_user: Callable[..., Account],
) -> None:
    client.app.state.clock = FixedClock(T0)  # type: ignore[attr-defined]
    mock = client.post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    for i in mock["items"]:  # the question missed: its explanation is in the report
        which = "wrong" if i["slug"] == SLUG else "right"
        client.post(f"/api/v1/mock-interviews/{mock['id']}/answers",
                    json={"position": i["position"], "answer": FIXTURE[i["slug"]][which]})
    client.post(f"/api/v1/mock-interviews/{mock['id']}/finish")
    page = parse(client.get(f"/mock/{mock['id']}/report"))
    action, hidden = form_fields(page, "#share form")
    client.post(action, data=hidden)
    link = parse(client.get(f"/mock/{mock['id']}/report")).select_one("a.share-link")["href"]
    shared = "/" + str(link).split("/", 3)[3]
    # Its owner reads every key; a reader who never answered these questions reads none of
    # them (nor the owner's answers' grades), an author all.
    assert _shows_key(client.get(shared).text)
    stranger = new_client()
    page = parse(stranger.get(shared))
    assert not _shows_key(str(page)) and page.select("p.withheld")
    assert not page.select("table.mock-questions .badge.right")
    # Once the reader has answered the question themselves, its key is theirs.
    r = stranger.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "a"})
    assert r.status_code == 200
    assert _shows_key(stranger.get(shared).text)
    make_user("alice", "author")
    author = new_client()
    assert login(author, "alice").status_code == 303
    page = author.get(shared).text
    assert _shows_key(page) and "SENTINEL" in page


def test_a_finished_mocks_unanswered_questions_keep_their_keys(client: TestClient) -> None:
    """Starting an interview and finishing it at once is no way to read its keys."""
    client.app.state.clock = FixedClock(T0)  # type: ignore[attr-defined]
    mock = client.post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    report = client.post(f"/api/v1/mock-interviews/{mock['id']}/finish").json()
    assert report["items"] and all(i["correct_answer"] is None and i["explanation"] is None
                                   and i["withheld"] for i in report["items"])
    page = client.get(f"/mock/{mock['id']}/report")
    assert page.status_code == 200 and not _shows_key(page.text)
    assert "SENTINEL-RIGHT" not in parse(page).select_one("section[aria-labelledby=misses-h]").text
