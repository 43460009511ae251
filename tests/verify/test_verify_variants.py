"""Verify after answering runs the learner's variant: its values in the snippet's params and its
world size as the ranks, on real gloo, found in the cache the import filled (real SQLite, and
PostgreSQL when configured)."""

from __future__ import annotations

import json
import re

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings
from app.verify.audit import queue_published
from app.verify.models import RUN_DONE, Run
from app.verify.worker import Worker
from tests.factories import count, form_fields, htmx_headers, parse, parse_fragment

SLUG = "allreduce-bytes-per-rank"
API = f"/api/v1/questions/{SLUG}"
# Variant 2 of the measured question: four ranks, a 1 MiB buffer.
VARIANT_2 = {"world_size": 4, "mib": 1}
PER_RANK_BYTES = 2 * 3 / 4 * 2**20


def test_verify_of_a_variant_runs_that_variants_params_from_the_cache_the_import_filled(
    variant_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    # What an import (or a publish) does in the background: every variant's audited runs.
    assert queue_published(session_factory) == 4
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    with session_factory() as s:
        runs = list(s.scalars(select(Run).order_by(Run.id)))
    assert [r.status for r in runs] == [RUN_DONE] * 4
    assert sorted((r.world_size, r.params["mib"]) for r in runs) == [(2, 1), (2, 4), (4, 1), (4, 4)]

    # Before answering variant 2, its run shows no key.
    started = variant_client.post(f"{API}/verify", json={"variant": 2})
    assert started.status_code == 200, started.text
    body = started.json()
    assert (body["cached"], body["variant"], body["status"]) == (True, 2, RUN_DONE)
    run = variant_client.get(body["url"]).json()
    assert (run["world_size"], run["params"]) == (4, VARIANT_2)
    bytes_sent = [r["bytes_sent"] for r in run["result"]["ranks"]]
    assert all(abs(b - PER_RANK_BYTES) / PER_RANK_BYTES < 0.05 for b in bytes_sent), bytes_sent

    # Answering variant 2 opens its checks; variant 3 stays closed (another prediction).
    answered = variant_client.post(f"{API}/attempts", json={"variant": 2, "answer": PER_RANK_BYTES})
    assert answered.json()["correct"] is True
    page = parse(variant_client.get(f"/questions/{SLUG}"))
    # The page now shows other numbers, so its panel asks for a prediction again.
    assert page.select_one("#verify-h").get_text(strip=True) == "Predict, then run"
    action, hidden = form_fields(page, "form.answer-form")
    csrf = hidden["csrf_token"]
    for variant, revealed in ((2, True), (3, False)):
        fragment = variant_client.post(f"/questions/{SLUG}/verify",
                                       data={"csrf_token": csrf, "variant": str(variant)},
                                       headers=htmx_headers(page))
        assert fragment.status_code == 200, fragment.text
        result = parse_fragment(fragment)
        shown = result.select_one(".run")
        assert shown is not None and shown["data-status"] == "done"
        checks = result.select(".checks tbody tr")
        if revealed:
            assert [r["class"] for r in checks] == [["pass"]] * 4
        else:
            assert checks == []
    # Answered on the page, the panel swapped in (out of band) runs the variant just answered.
    shown = int(page.select_one("form.answer-form input[name=variant]")["value"])
    world_size, mib = [(2, 1), (2, 4), (4, 1), (4, 4)][shown]
    key = 2 * (world_size - 1) / world_size * mib * 2**20
    graded = parse_fragment(variant_client.post(action, data={**hidden, "answer": f"{key:.0f}"},
                                                headers=htmx_headers(page)))
    panel = graded.select_one("#verify-panel[hx-swap-oob]")
    assert panel is not None and panel.select_one("#verify-h").get_text(strip=True) == (
        "Verify by running it")
    assert panel.select_one("input[name=variant]")["value"] == str(shown)
    assert panel.select_one(".torchrun-download")["href"].endswith(f"?variant={shown}")
    assert count(session_factory, Run) == 4  # every Verify was a cache hit

    # The copied torchrun script reproduces variant 2: four ranks, its values in params.
    script = variant_client.get(f"/questions/{SLUG}/torchrun.py", params={"variant": "2"})
    assert script.status_code == 200
    assert "--nproc_per_node=4" in script.text
    assert "variant 2 (world_size=4, mib=1)" in script.text
    params = json.loads(re.search(r"params = json.loads\((.+)\)\n", script.text).group(1)
                        .strip("'\""))
    assert params == VARIANT_2
    assert variant_client.get(f"/questions/{SLUG}/torchrun.py",
                              params={"variant": "9"}).status_code == 422
