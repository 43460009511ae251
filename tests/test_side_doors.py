"""The ten side doors of issue 36, tried as a learner who wants a better score would: through
the JSON API and the forms, anonymous and signed in, on SQLite and PostgreSQL.

Each test is one door, closed: it says what the learner does and what must happen instead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.clock import FixedClock
from app.db import session_scope
from app.questions.bank import load_bank
from app.quizzes.grading import correct_answer
from app.quizzes.models import QuizItem
from app.settings import Settings
from app.verify import queue, results
from app.verify.engine.result import RunResult
from app.verify.models import Run
from app.verify.worker import Worker
from tests.exercises.helpers import SLUG as EXERCISE
from tests.exercises.helpers import SOLUTION
from tests.factories import (
    EXERCISE_BANK,
    FIXTURE,
    T0,
    VARIANT_BANK,
    Account,
    answer,
    copy_bank,
    form_fields,
    htmx_headers,
    import_folder,
    login,
    parse,
    start_quiz,
)


def _drain(factory: sessionmaker[Session], settings: Settings) -> None:
    worker = Worker(factory, settings)
    while worker.run_once():
        pass


def _signed_in(new_client: Callable[..., TestClient], account: Account, **kw: Any) -> TestClient:
    browser = new_client(**kw)
    assert login(browser, account.username).status_code == 303
    return browser


def _class_with(instructor: TestClient, learner: TestClient, **assignment: Any) -> int:
    """A class with one assignment, and the learner a member of it; the class id."""
    from tests.classes.helpers import add_assignment, join, join_path, make_class

    class_id = make_class(instructor)
    r = add_assignment(instructor, class_id, due=T0 + timedelta(days=365 * 50), **assignment)
    assert r.status_code == 303, r.text
    assert join(learner, join_path(instructor, class_id)).status_code == 303
    return class_id


def _work(instructor: TestClient, class_id: int) -> dict[str, Any]:
    [member] = instructor.get(f"/api/v1/classes/{class_id}").json()["members"]
    return {"class_id": member["class_id"], **member["work"][0]}


# 1. Mock keys mid-interview ---------------------------------------------------------------


def test_a_live_mock_interviews_questions_give_no_key_anywhere_else(client: TestClient) -> None:
    from tests.classes.helpers import csrf_of

    started = client.post("/api/v1/mock-interviews", json={"minutes": 25})
    assert started.status_code == 201, started.text
    mock = started.json()
    plain = [i for i in mock["items"] if i["slug"] in FIXTURE]
    assert plain
    for item in plain:
        r = client.post(f"/api/v1/questions/{item['slug']}/attempts",
                        json={"answer": FIXTURE[item["slug"]]["right"], "variant": item["variant"]})
        assert r.status_code == 409, (item["slug"], r.status_code, r.text)
        assert "correct_answer" not in r.json() or r.json()["correct_answer"] is None
        # Nor through the question's page, which says where it is answered and has no form,
        # nor its form's route posted anyway.
        shown = parse(client.get(f"/questions/{item['slug']}"))
        assert shown.select_one("p.withheld") is not None
        assert shown.select_one("form.answer-form") is None
        page = client.post(f"/questions/{item['slug']}/answer",
                           data={"csrf_token": csrf_of(client), "variant": str(item["variant"]),
                                 "answer": FIXTURE[item["slug"]]["right"]})
        assert page.status_code == 409
        assert "Answer key" not in page.text
    # The interview itself still takes the answers, and scores them at the end.
    for item in plain:
        r = client.post(f"/api/v1/mock-interviews/{mock['id']}/answers",
                        json={"position": item["position"], "answer": FIXTURE[item["slug"]]["right"]})
        assert r.status_code == 201, r.text


def test_a_mock_interview_past_its_deadline_no_longer_holds_its_questions(
    client: TestClient, clock: FixedClock,
) -> None:
    # The rule's time is the app's clock, compared in the database with the deadline: a
    # minute before it the question is still held, a minute after it is answered anywhere.
    started = client.post("/api/v1/mock-interviews", json={"minutes": 25})
    assert started.status_code == 201, started.text
    item = next(i for i in started.json()["items"] if i["slug"] in FIXTURE)
    answer = {"answer": FIXTURE[item["slug"]]["right"], "variant": item["variant"]}
    clock.advance(timedelta(minutes=24))
    held = client.post(f"/api/v1/questions/{item['slug']}/attempts", json=answer)
    assert held.status_code == 409, held.text
    clock.advance(timedelta(minutes=2))
    free = client.post(f"/api/v1/questions/{item['slug']}/attempts", json=answer)
    assert free.status_code == 200, free.text
    assert free.json()["correct"] is True and free.json()["correct_answer"] is not None


# 2. Verify before answering ---------------------------------------------------------------


def test_no_measurement_reaches_a_learner_before_they_answered(
    client: TestClient, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    slug = "fixture-single"
    # Someone who answered runs it (predict, then run) and the run is done and cached.
    first = new_client()
    page = parse(first.get(f"/questions/{slug}"))
    action, hidden = form_fields(page, "form#answer-form")
    r = first.post(action, data={**hidden, "answer": "b", "knob.scale": "1", "then_run": "1"})
    assert r.status_code == 200
    _drain(session_factory, settings)
    with session_scope(session_factory) as s:
        [run_id] = s.scalars(select(Run.id))
    assert first.get(f"/api/v1/runs/{run_id}").json()["result"] is not None

    # An anonymous newcomer who has not answered gets no run and no measured value.
    r = client.post(f"/api/v1/questions/{slug}/verify", json={"params": {"scale": 1}})
    assert r.status_code == 409, r.text
    _, hidden = form_fields(parse(client.get(f"/questions/{slug}")), "form#answer-form")
    r = client.post(f"/questions/{slug}/verify",
                    data={"csrf_token": hidden["csrf_token"], "knob.scale": "1"},
                    follow_redirects=False)
    assert r.status_code == 409, r.text
    for path in (f"/runs/{run_id}", f"/api/v1/runs/{run_id}", f"/runs/{run_id}?slug={slug}"):
        assert client.get(path).status_code == 404, path
    # After answering, the same run is theirs to read.
    assert answer(client, slug, "a").status_code == 200  # type: ignore[attr-defined]
    assert client.get(f"/api/v1/runs/{run_id}").status_code == 200


# 3. Variants chosen by the learner --------------------------------------------------------


def test_an_answer_to_another_variant_than_the_drawn_one_is_409_naming_it(
    variant_client: TestClient,
) -> None:
    slug = "ring-send-volume"
    drawn = variant_client.get(f"/api/v1/questions/{slug}").json()["variant"]
    other = (drawn + 1) % 8
    r = variant_client.post(f"/api/v1/questions/{slug}/attempts",
                            json={"answer": "1", "variant": other})
    assert r.status_code == 409, r.text
    assert f"variant {drawn}" in r.json()["detail"]
    page = parse(variant_client.get(f"/questions/{slug}"))
    action, hidden = form_fields(page, "form.answer-form")
    r = variant_client.post(action, data={**hidden, "variant": str(other), "answer": "1"},
                            headers=htmx_headers(page))
    assert r.status_code == 409, r.text
    assert f"variant {drawn}" in r.text
    # The drawn one is answered as ever.
    ok = variant_client.post(f"/api/v1/questions/{slug}/attempts",
                             json={"answer": "1", "variant": drawn})
    assert ok.status_code == 200, ok.text


# 4. Case parts through a second slot ------------------------------------------------------


def test_a_case_part_answered_in_a_quiz_is_answered_on_the_questions_page_too(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    case = "zero3-memory-case"
    url = start_quiz(variant_client, topics="interview", count="2", types=["case"])
    page = parse(variant_client.get(url))
    with session_scope(session_factory) as s:
        variant = s.scalars(select(QuizItem.variant)).one()
    doc = next(q for q in load_bank(VARIANT_BANK).questions if q.slug == case).render(variant)
    action, hidden = form_fields(page, "form.answer-form")
    r = variant_client.post(action, data={**hidden, "part": "0", "answer": "c"},
                            headers=htmx_headers(page))
    assert r.status_code == 200 and "Stage 3 shards all three" in r.text
    # The question's own page carries on from part 2, and part 1 is not answered again.
    alone = parse(variant_client.get(f"/questions/{case}"))
    assert alone.select_one("form.answer-form input[name=part]")["value"] == "1"
    again = variant_client.post(f"/api/v1/questions/{case}/attempts",
                                json={"part": 0, "answer": str(correct_answer(doc.part(0))),
                                      "variant": variant})
    assert again.status_code == 409, again.text
    # And the other way: part 2 answered on its own page is answered in the quiz too.
    two = variant_client.post(f"/api/v1/questions/{case}/attempts",
                              json={"part": 1, "answer": correct_answer(doc.part(1)),
                                    "variant": variant})
    assert two.status_code == 200, two.text
    quiz = parse(variant_client.get(url))
    assert quiz.select_one("form.answer-form input[name=part]")["value"] == "2"


# 5. The reference solution as a class grade -----------------------------------------------


@pytest.fixture
def class_people(make_user: Callable[..., Account], new_client: Callable[..., TestClient],
                 ) -> tuple[TestClient, TestClient]:
    """(instructor, learner account) browsers, both signed in."""
    instructor = _signed_in(new_client, make_user("ida", "instructor"))
    learner = _signed_in(new_client, make_user("lena", "learner"))
    return instructor, learner


def test_a_viewed_solution_is_given_up_for_a_class_and_a_later_pass_is_not_done(
    client: TestClient, class_people: tuple[TestClient, TestClient],
    session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    import_folder(session_factory, EXERCISE_BANK)
    instructor, learner = class_people
    class_id = _class_with(instructor, learner, kind="exercises", exercises=[EXERCISE])
    for junk in ("x = 0", "x = 1", "x = 2"):
        r = learner.post(f"/api/v1/exercises/{EXERCISE}/run", json={"code": junk})
        assert r.status_code == 200, r.text
        _drain(session_factory, settings)
        assert learner.get(r.json()["url"]).json()["passed"] is False
    assert learner.get(f"/api/v1/exercises/{EXERCISE}/solution").status_code == 200
    r = learner.post(f"/api/v1/exercises/{EXERCISE}/run", json={"code": SOLUTION})
    _drain(session_factory, settings)
    assert learner.get(r.json()["url"]).json()["passed"] is True
    work = _work(instructor, class_id)
    assert work["status"] not in ("done", "late") and work["score"] == 0.0, work
    page = instructor.get(f"/classes/{class_id}").text
    assert "solution viewed" in page


# 6. Leave and re-join resets the grade ----------------------------------------------------


def test_leaving_and_joining_again_keeps_the_same_member_and_their_first_answers(
    client: TestClient, class_people: tuple[TestClient, TestClient],
) -> None:
    from tests.classes.helpers import join, join_path, post_form

    client.app.state.clock = FixedClock(T0 + timedelta(hours=1))  # type: ignore[attr-defined]
    instructor, learner = class_people
    class_id = _class_with(instructor, learner, questions=["fixture-single"])
    answer(learner, "fixture-single", FIXTURE["fixture-single"]["wrong"])
    before = _work(instructor, class_id)
    assert before["score"] == 0.0
    r = post_form(learner, f"/classes/{class_id}/me", "form.leave-form")
    assert r.status_code == 303
    assert instructor.get(f"/api/v1/classes/{class_id}").json()["members"] == []
    assert join(learner, join_path(instructor, class_id)).status_code == 303
    answer(learner, "fixture-single", FIXTURE["fixture-single"]["right"])
    after = _work(instructor, class_id)
    assert after["class_id"] == before["class_id"]
    assert after["score"] == 0.0, after


# 7. Talk-throughs in graded work ----------------------------------------------------------


def test_a_talk_through_answer_of_no_real_length_cannot_tick_the_rubric(
    variant_client: TestClient,
) -> None:
    url = "/api/v1/questions/step-time-doubled-talk/attempts"
    for empty in ("", "   ", "ok", "I would fix it."):
        r = variant_client.post(url, json={"answer": {"text": empty}})
        assert r.status_code == 422, (empty, r.text)
        assert "text" in r.text
    r = variant_client.post(url, json={"answer": {"ticked": [0, 1, 2, 3, 4, 5]}})
    assert r.status_code in (409, 422)
    # The form says the same.
    page = parse(variant_client.get("/questions/step-time-doubled-talk"))
    action, hidden = form_fields(page, "form.answer-form")
    r = variant_client.post(action, data={**hidden, "text": ""}, headers=htmx_headers(page))
    assert r.status_code == 422


# 8. Starving everyone's exercise runs -----------------------------------------------------


def test_a_third_address_behind_two_full_queues_is_next(
    client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    import_folder(session_factory, EXERCISE_BANK)
    backlogs: dict[str, list[int]] = {}
    for ip in ("127.0.0.2", "127.0.0.3"):
        for cookie in range(3):
            browser = TestClient(client.app, client=(ip, 40000 + cookie))
            for n in range(4):
                r = browser.post(f"/api/v1/exercises/{EXERCISE}/run",
                                 json={"code": f"import time\ntime.sleep(60)  # {n}"})
                assert r.status_code == 200, r.text
                backlogs.setdefault(ip, []).extend(r.json()["run_ids"])
    newcomer = TestClient(client.app, client=("127.0.0.4", 40000))
    r = newcomer.post(f"/api/v1/exercises/{EXERCISE}/run", json={"code": SOLUTION})
    assert r.status_code == 200, r.text
    [mine] = r.json()["run_ids"]

    def claim(worker: str) -> Any:
        with session_scope(session_factory) as s:
            run = queue.claim_run(db_session=s, worker_id=worker, lease_seconds=60)
            return None if run is None else (run.id, run.requested_ip)

    assert claim("w1")[1] == "127.0.0.2"
    assert claim("w2")[1] == "127.0.0.3"
    # The first address's run ends (it slept its 20 s out); the worker that ran it takes the
    # newcomer's next, not that address's second.
    with session_scope(session_factory) as s:
        running = s.scalar(select(Run).where(Run.lease_owner == "w1"))
        assert running is not None
        running.started_at = running.started_at - timedelta(seconds=20)
        s.flush()
        assert queue.complete_run(db_session=s, run_id=running.id, worker_id="w1", result=RunResult(
            outcome="timeout", diagnosis="slept", world_size=running.world_size,
            torch_version=running.torch_version, harness_version=running.harness_version))
    assert claim("w1") == (mine, "127.0.0.4")


# 9. Unlimited anonymous writes ------------------------------------------------------------


def test_anonymous_writes_are_bounded_per_identity_and_per_address(client: TestClient) -> None:
    from tests.classes.helpers import csrf_of

    token = csrf_of(client)
    refused = None
    for _ in range(200):
        r = client.post("/quizzes", data={"csrf_token": token, "topics": "basics", "count": "5"},
                        follow_redirects=False)
        if r.status_code == 429:
            refused = r
            break
        assert r.status_code == 303, r.text
    assert refused is not None and int(refused.headers["Retry-After"]) >= 1
    # A fresh cookie per request from one address is bounded too.
    refused = None
    for _ in range(400):
        client.cookies.clear()
        r = client.post("/api/v1/mock-interviews", json={"minutes": 10})
        if r.status_code == 429:
            refused = r
            break
        assert r.status_code == 201, r.text
    assert refused is not None and int(refused.headers["Retry-After"]) >= 1
    refused = None
    for _ in range(2000):
        client.cookies.clear()
        r = client.post("/api/v1/questions/fixture-single/attempts", json={"answer": "b"})
        if r.status_code == 429:
            refused = r
            break
        assert r.status_code == 200, r.text
    assert refused is not None and int(refused.headers["Retry-After"]) >= 1


# 10. Hidden check values ------------------------------------------------------------------


THREE_RANKS = """\
slug: door-three-ranks
topic: drills
title: Sum the ranks, on three too
tags: [all-reduce]
difficulty: 1
type: exercise
prompt: |
  `rank_total()` must return the sum of every rank's number, on every rank.
explanation: |
  All-reduce the number.
verify:
  snippet: starter.py
  timeout_s: 10
  knobs:
    world_size: {values: [2, 3], default: 2}
  audit: all
  expect:
    - label: every rank gets the total on two ranks
      when: {world_size: 2}
      value: {name: total, equals: 3}
    - label: SECRET-HIDDEN-LABEL three ranks agree too
      when: {world_size: 3}
      value: {name: total, equals: 6}
      hidden: true
exercise:
  solution: solution.py
  harness: checks.py
"""


def test_a_learner_sees_only_what_that_runs_visible_checks_read(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
    tmp_path: Path,
) -> None:
    bank = copy_bank(tmp_path / "bank", EXERCISE_BANK)
    (bank / "drills" / "door-three-ranks.yaml").write_text(THREE_RANKS)
    import_folder(session_factory, bank)
    r = client.post("/api/v1/exercises/door-three-ranks/run", json={"code": SOLUTION})
    assert r.status_code == 200, r.text
    _drain(session_factory, settings)
    with session_scope(session_factory) as s:
        three = s.scalar(select(Run.id).where(Run.id.in_(r.json()["run_ids"]), Run.world_size == 3))
        stored = results.result_of(s.get(Run, three))
    assert stored is not None and stored.ranks[2].values["total"] == 6
    result = client.get(f"/api/v1/runs/{three}").json()["result"]
    for rank in result["ranks"]:
        assert "total" not in rank["values"], rank["values"]
        assert not [e for e in rank["events"] if e.get("name") == "total"]
    page = parse(client.get(f"/runs/{three}"))
    assert page.select("td.value[data-name=total]") == []
    values = page.select_one("table.values")
    assert values is None or "total" not in values.get_text()
