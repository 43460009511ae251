"""Edges an attacker pushes on: made-up methods and paths must not grow /metrics, which only
the operator's network may read; lone surrogates are a 422; a configured host list refuses
other Host headers (share links never use the Host header: tests/mock/test_mock.py)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.main import create_app
from app.migrate import upgrade
from app.settings import Settings

OPERATOR = ("127.0.0.1", 50000)


def _metrics(client: TestClient) -> str:
    r = client.get("/metrics")
    assert r.status_code == 200
    return r.text


def test_a_thousand_made_up_methods_and_paths_leave_metrics_the_same_size(
    tmp_path: Path,
) -> None:
    # Labels come from the request line, never the database: one SQLite file of its own is
    # enough (on the shared test databases this test would run twice for the same answer).
    url = f"sqlite:///{tmp_path / 'metrics.db'}"
    upgrade(url)
    settings = Settings(database_url=url, secret_key="metrics-test-secret-key-0123456789",
                        data_dir=tmp_path / "data", workers=0, load_bank_on_start=False)
    with TestClient(create_app(settings)) as app_client:
        _scrape_before_and_after(app_client)


def _scrape_before_and_after(app_client: TestClient) -> None:
    operator = TestClient(app_client.app, client=OPERATOR)
    _metrics(operator)  # the scrape's own series exists from here on
    for i in range(100):
        app_client.request(f"X{i}", f"/no-such-page-{i}")
    before = _metrics(operator)
    # A thousand is plenty: a label taken from the request line would add a series for each
    # (10,000 took 36-71 s of CI for the same answer).
    for i in range(100, 1_100):
        app_client.request(f"METHOD{i}", f"/made/up/{i}?q={i}")
    after = _metrics(operator)
    assert len(after.splitlines()) == len(before.splitlines())
    # Only counts grew (a few more digits), no series was added.
    assert len(after) < len(before) * 1.02
    assert 'method="other"' in after and "METHOD" not in after
    assert 'route="(unmatched)"' in after and "made/up" not in after


def test_metrics_are_for_the_operators_network(app_client: TestClient) -> None:
    assert app_client.get("/metrics").status_code == 403  # "testclient": no network address
    outsider = TestClient(app_client.app, client=("203.0.113.9", 40000))
    assert outsider.get("/metrics").status_code == 403
    assert TestClient(app_client.app, client=OPERATOR).get("/metrics").status_code == 200


def test_lone_surrogates_are_a_422_everywhere_json_carries_text(
    app_client: TestClient, loaded: None,
) -> None:
    for path, body in (
        ("/api/v1/exercises/fixture-exercise/run", '{"code": "\\ud800"}'),
        ("/api/v1/questions/fixture-single/attempts", '{"answer": "\\udfff"}'),
        ("/api/v1/questions/fixture-single/reports", '{"kind": "other", "comment": "x\\uD800y"}'),
    ):
        r = app_client.post(path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, (path, r.status_code, r.text)
        assert "Unicode" in r.json()["detail"]
    # A surrogate pair is valid text, and passes.
    r = app_client.post("/api/v1/questions/fixture-single/reports",
                        content='{"kind": "other", "comment": "\\ud83d\\ude00"}',
                        headers={"content-type": "application/json"})
    assert r.status_code != 422 or "Unicode" not in r.text


def test_a_configured_host_list_refuses_other_host_headers(settings: Settings) -> None:
    strict = settings.model_copy(update={"allowed_hosts": "drill.example.org, localhost"})
    app = create_app(strict)
    assert TestClient(app, base_url="http://drill.example.org").get("/healthz").status_code == 200
    assert TestClient(app, base_url="http://evil.example").get("/healthz").status_code == 400
