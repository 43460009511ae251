"""Numbers too large for the database or for a float are a clear 4xx, never a 500."""

from __future__ import annotations

from fastapi.testclient import TestClient

HUGE = "9" * 30


def test_huge_ids_in_urls_are_4xx(client: TestClient) -> None:
    for path in (f"/runs/{HUGE}", f"/api/v1/runs/{HUGE}", f"/quizzes/x/{HUGE}", "/runs/2147483648"):
        r = client.get(path)
        assert 400 <= r.status_code < 500, (path, r.status_code)


def test_a_numeric_answer_with_hundreds_of_digits_is_422(client: TestClient) -> None:
    r = client.post("/api/v1/questions/fixture-numeric/attempts",
                    content='{"answer": ' + "9" * 400 + "}",
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "too large" in r.json()["detail"]


def test_time_taken_beyond_a_day_is_refused(client: TestClient) -> None:
    r = client.post("/api/v1/questions/fixture-numeric/attempts",
                    json={"answer": 1400, "time_taken_ms": 2**63})
    assert r.status_code == 422
