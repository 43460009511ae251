"""The JSON API under /api/v1: list, get without the key, attempts, and its errors."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.models import Question
from app.quizzes.models import Attempt
from app.settings import Settings
from tests.factories import count, learner_id

API = "/api/v1/questions"


def _slugs(client: TestClient, **params: Any) -> list[str]:
    response = client.get(API, params=params)
    assert response.status_code == 200
    return sorted(q["slug"] for q in response.json())


def test_list_gives_every_published_question_with_its_page(client: TestClient) -> None:
    questions = client.get(API).json()
    assert len(questions) == 5
    single = next(q for q in questions if q["slug"] == "fixture-single")
    assert single == {"slug": "fixture-single", "topic": "basics", "title": "Fixture single choice",
                      "difficulty": 1, "type": "single", "tags": ["ddp"], "has_snippet": True,
                      "url": "/questions/fixture-single"}


FILTERS = [
    ({"topic": "traces"}, ["fixture-trace-buckets", "fixture-trace-join"]),
    ({"topic": ["basics", "traces"]}, ["fixture-multi", "fixture-numeric", "fixture-single",
                                       "fixture-trace-buckets", "fixture-trace-join"]),
    ({"tag": "join"}, ["fixture-multi", "fixture-trace-join"]),
    ({"difficulty": 3}, ["fixture-numeric", "fixture-trace-buckets"]),
    ({"topic": "basics", "difficulty": 3}, ["fixture-numeric"]),
    ({"topic": "basics", "tag": "buckets"}, []),
    ({"topic": "no-such-topic"}, []),
]


def test_list_filters_by_topic_tag_and_difficulty(client: TestClient) -> None:
    for params, slugs in FILTERS:
        assert _slugs(client, **params) == slugs, params


def test_list_rejects_a_difficulty_outside_1_to_3_with_json(client: TestClient) -> None:
    for difficulty in ("0", "4", "hard"):
        response = client.get(API, params={"difficulty": difficulty})
        assert response.status_code == 422, difficulty
        assert response.headers["content-type"] == "application/json"
        assert response.json()["detail"][0]["loc"] == ["query", "difficulty"]


def test_get_gives_choices_with_stable_keys(client: TestClient) -> None:
    data = client.get(f"{API}/fixture-multi").json()
    assert data["answer_format"] == "multi"
    assert data["revision"] == 1
    assert data["choices"] == [{"key": "a", "text": "SENTINEL-MULTI-RIGHT-1"},
                               {"key": "b", "text": "SENTINEL-MULTI-RIGHT-2"},
                               {"key": "c", "text": "SENTINEL-MULTI-WRONG-1"},
                               {"key": "d", "text": "SENTINEL-MULTI-WRONG-2"}]


def test_get_numeric_and_trace_questions(client: TestClient) -> None:
    numeric = client.get(f"{API}/fixture-numeric").json()
    assert (numeric["unit"], numeric["tolerance"], numeric["choices"]) == ("MB", "±5%", [])
    buckets = client.get(f"{API}/fixture-trace-buckets").json()
    assert buckets["answer_format"] == "numeric"
    assert buckets["trace"]["kind"] == "buckets"
    assert [b["name"] for b in buckets["trace"]["buckets"]] == ["A", "B"]
    join = client.get(f"{API}/fixture-trace-join").json()
    assert join["trace"]["columns"] == ["Rank 0", "Rank 1"]
    single = client.get(f"{API}/fixture-single").json()
    assert single["knobs"] == [{"name": "scale", "label": "Input scale", "values": [1, 2], "default": 1}]


# (question, answer, score, correct, the key the API gives back)
GRADED = [
    ("fixture-single", "b", 1.0, True, "b"),
    ("fixture-single", "c", 0.0, False, "b"),
    ("fixture-multi", ["a", "c"], 0.0, False, ["a", "b"]),
    ("fixture-multi", ["b"], 0.5, False, ["a", "b"]),
    ("fixture-multi", ["b", "a"], 1.0, True, ["a", "b"]),
    ("fixture-numeric", 1399, 1.0, True, 1400.0),
    ("fixture-numeric", "1,450", 1.0, True, 1400.0),
    ("fixture-numeric", 1000.5, 0.0, False, 1400.0),
    ("fixture-trace-join", "a", 1.0, True, "a"),
    ("fixture-trace-buckets", 4, 1.0, True, 4.0),
]


def test_attempts_are_graded_and_return_key_and_explanation(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    for slug, answer, score, correct, key in GRADED:
        case = (slug, answer)
        response = client.post(f"{API}/{slug}/attempts", json={"answer": answer, "time_taken_ms": 1234})
        assert response.status_code == 200, (case, response.text)
        data = response.json()
        assert (data["score"], data["correct"], data["correct_answer"]) == (score, correct, key), case
        assert data["explanation"].startswith("SENTINEL-EXPLANATION"), case
        assert data["first_submission"] is True
        with session_factory() as session:
            attempt = session.get(Attempt, data["attempt_id"])
            question = session.scalars(select(Question).where(Question.slug == slug)).one()
            assert attempt is not None
            assert (attempt.question_id, attempt.revision_id) == (question.id, question.current_revision_id)
            assert (attempt.score, attempt.time_taken_ms, attempt.quiz_item_id) == (score, 1234, None)
            assert attempt.learner_id == learner_id(client, settings)
    assert count(session_factory, Attempt) == len(GRADED)


INVALID = [
    ("fixture-single", {"answer": "z"}),
    ("fixture-single", {"answer": ["a", "b"]}),
    ("fixture-multi", {"answer": []}),
    ("fixture-multi", {"answer": ["a", "a"]}),
    ("fixture-numeric", {"answer": "lots"}),
    ("fixture-numeric", {"answer": ""}),
    ("fixture-numeric", {}),
    ("fixture-numeric", {"answer": {"value": 1}}),
    ("fixture-numeric", {"answer": True}),
    ("fixture-multi", {"answer": [True]}),
    ("fixture-numeric", {"answer": 1400, "time_taken_ms": -1}),
]


def test_an_invalid_attempt_is_422_json_and_stores_nothing(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    for slug, body in INVALID:
        response = client.post(f"{API}/{slug}/attempts", json=body)
        assert response.status_code == 422, (slug, body)
        assert response.headers["content-type"] == "application/json"
        assert response.json()["detail"]
    assert count(session_factory, Attempt) == 0


def test_a_replayed_idempotency_key_returns_the_first_result_with_409(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    headers = {"Idempotency-Key": "k-1"}
    first = client.post(f"{API}/fixture-single/attempts", json={"answer": "a"}, headers=headers)
    replay = client.post(f"{API}/fixture-single/attempts", json={"answer": "b"}, headers=headers)

    assert first.status_code == 200
    assert replay.status_code == 409
    assert replay.json()["attempt_id"] == first.json()["attempt_id"]
    assert (replay.json()["answer"], replay.json()["first_submission"]) == ("a", False)
    assert count(session_factory, Attempt) == 1
    # Without a key every call is its own attempt.
    client.post(f"{API}/fixture-single/attempts", json={"answer": "b"})
    assert count(session_factory, Attempt) == 2


def test_idempotency_keys_belong_to_one_learner_and_one_question(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    headers = {"Idempotency-Key": "1"}
    mine = client.post(f"{API}/fixture-single/attempts", json={"answer": "a"}, headers=headers)
    other_question = client.post(f"{API}/fixture-numeric/attempts", json={"answer": 1400}, headers=headers)
    stranger = TestClient(client.app)
    theirs = stranger.post(f"{API}/fixture-single/attempts", json={"answer": "b"}, headers=headers)

    assert (mine.status_code, other_question.status_code, theirs.status_code) == (200, 200, 200)
    assert other_question.json()["correct"] is True
    assert theirs.json()["answer"] == "b"
    assert count(session_factory, Attempt) == 3


def test_an_overlong_idempotency_key_is_422(client: TestClient) -> None:
    response = client.post(f"{API}/fixture-single/attempts", json={"answer": "a"},
                           headers={"Idempotency-Key": "x" * 65})
    assert response.status_code == 422


def test_unknown_things_under_the_api_are_json_404s(client: TestClient) -> None:
    for method, path in [("GET", f"{API}/nope"), ("POST", f"{API}/nope/attempts"),
                         ("GET", "/api/v1/nothing-here")]:
        response = client.request(method, path, json={"answer": "a"})
        assert response.status_code == 404, path
        assert response.headers["content-type"] == "application/json"
        assert "detail" in response.json()


def test_openapi_docs_describe_the_three_endpoints(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert {API, f"{API}/{{slug}}", f"{API}/{{slug}}/attempts"} <= set(paths)
