"""POST /api/v1/questions/{slug}/verify and GET /api/v1/runs/{id}, with a real worker."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings
from app.verify.worker import Worker
from tests.factories import answered


def test_verify_queues_a_run_that_a_worker_completes(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    answered(client)
    r = client.post("/api/v1/questions/fixture-single/verify", json={"params": {}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "queued" and body["cached"] is False
    assert Worker(session_factory, settings).run_once()
    run = client.get(body["url"]).json()
    assert run["status"] == "done"
    assert run["params"] == {"scale": 1}
    values = [rank["values"]["g"] for rank in run["result"]["ranks"]]
    assert values == [1.5, 1.5]


def test_second_verify_of_the_same_knobs_is_cached(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    answered(client)
    first = client.post("/api/v1/questions/fixture-single/verify", json={"params": {"scale": 2}}).json()
    Worker(session_factory, settings).run_once()
    again = client.post("/api/v1/questions/fixture-single/verify", json={"params": {"scale": 2}}).json()
    assert again == {**first, "status": "done", "cached": True}
    result = client.get(first["url"]).json()["result"]
    assert [r["values"]["g"] for r in result["ranks"]] == [3.0, 3.0]


def test_disallowed_knob_value_is_422_naming_the_knob(client: TestClient) -> None:
    r = client.post("/api/v1/questions/fixture-single/verify", json={"params": {"scale": 3}})
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail[0]["loc"] == ["body", "params", "scale"]
    assert "not allowed" in detail[0]["msg"]


def test_unknown_knob_is_422_naming_it(client: TestClient) -> None:
    r = client.post("/api/v1/questions/fixture-single/verify", json={"params": {"code": "import os"}})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"][-1] == "code"


def test_true_is_not_accepted_for_an_integer_knob(client: TestClient) -> None:
    r = client.post("/api/v1/questions/fixture-single/verify", json={"params": {"scale": True}})
    assert r.status_code == 422


def test_question_without_snippet_cannot_be_verified(client: TestClient) -> None:
    assert client.post("/api/v1/questions/fixture-multi/verify", json={}).status_code == 404
    assert client.post("/api/v1/questions/no-such/verify", json={}).status_code == 404


def test_fresh_runs_are_rate_limited_but_cached_runs_are_free(
    settings: Settings, session_factory: sessionmaker[Session], loaded: None
) -> None:
    from app.main import create_app

    limited = settings.model_copy(update={"verify_rate_per_minute": 1})
    with TestClient(create_app(limited)) as c:
        answered(c)
        first = c.post("/api/v1/questions/fixture-single/verify", json={"params": {"scale": 1}})
        assert first.status_code == 200
        Worker(session_factory, settings).run_once()
        over = c.post("/api/v1/questions/fixture-single/verify", json={"params": {"scale": 2}})
        assert over.status_code == 429 and "Retry-After" in over.headers
        for _ in range(3):
            cached = c.post("/api/v1/questions/fixture-single/verify", json={"params": {"scale": 1}})
            assert cached.status_code == 200 and cached.json()["cached"] is True


def test_unknown_run_is_404_json(client: TestClient) -> None:
    r = client.get("/api/v1/runs/999999")
    assert r.status_code == 404 and "detail" in r.json()


def test_api_refuses_bodies_a_cross_site_form_could_send(client: TestClient) -> None:
    """The JSON API is exempt from CSRF tokens because it only takes application/json,
    which another site's page cannot send without a CORS preflight this app never grants."""
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        for path, body in (("/api/v1/questions/fixture-single/verify", '{"params": {}}'),
                           ("/api/v1/questions/fixture-single/attempts", '{"answer": "b"}')):
            r = client.post(path, content=body, headers={"Content-Type": content_type})
            assert r.status_code == 422, (content_type, path, r.status_code)
