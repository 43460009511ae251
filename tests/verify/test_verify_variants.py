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
# The measured question's variants: (world size, MiB).
VARIANTS = [(2, 1), (2, 4), (4, 1), (4, 4)]


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

    # The learner's drawn variant: before they answer it, no run of it is theirs.
    v = variant_client.get(API).json()["variant"]
    world_size, mib = VARIANTS[v]
    key = 2 * (world_size - 1) / world_size * mib * 2**20
    refused = variant_client.post(f"{API}/verify", json={"variant": v})
    assert refused.status_code == 409, refused.text
    answered = variant_client.post(f"{API}/attempts", json={"variant": v, "answer": key})
    assert answered.json()["correct"] is True
    started = variant_client.post(f"{API}/verify", json={"variant": v})
    assert started.status_code == 200, started.text
    body = started.json()
    assert (body["cached"], body["variant"], body["status"]) == (True, v, RUN_DONE)
    run = variant_client.get(body["url"]).json()
    assert (run["world_size"], run["params"]) == (world_size, {"world_size": world_size, "mib": mib})
    bytes_sent = [r["bytes_sent"] for r in run["result"]["ranks"]]
    assert all(abs(b - key) / key < 0.05 for b in bytes_sent), bytes_sent

    page = parse(variant_client.get(f"/questions/{SLUG}"))
    # The page now shows other numbers, so its panel asks for a prediction again.
    assert page.select_one("#verify-h").get_text(strip=True) == "Predict, then run"
    action, hidden = form_fields(page, "form.answer-form")
    csrf = hidden["csrf_token"]
    # The answered variant's run opens with its checks; another variant's is refused (409).
    other = (v + 1) % 4
    for variant, revealed in ((v, True), (other, False)):
        fragment = variant_client.post(f"/questions/{SLUG}/verify",
                                       data={"csrf_token": csrf, "variant": str(variant)},
                                       headers=htmx_headers(page))
        if not revealed:
            assert fragment.status_code == 409, fragment.text
            continue
        assert fragment.status_code == 200, fragment.text
        result = parse_fragment(fragment)
        shown = result.select_one(".run")
        assert shown is not None and shown["data-status"] == "done"
        assert [r["class"] for r in result.select(".checks tbody tr")] == [["pass"]] * 4
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

    # The copied torchrun script reproduces the variant answered: its ranks, its values in
    # params. A variant not answered is a measurement not yet theirs (the one rule: 409).
    world_size, mib = VARIANTS[shown]
    script = variant_client.get(f"/questions/{SLUG}/torchrun.py", params={"variant": str(shown)})
    assert script.status_code == 200
    assert f"--nproc_per_node={world_size}" in script.text
    assert f"variant {shown + 1} (world_size={world_size}, mib={mib})" in script.text
    params = json.loads(re.search(r"params = json.loads\((.+)\)\n", script.text).group(1)
                        .strip("'\""))
    assert params == {"world_size": world_size, "mib": mib}
    for unanswered in set(range(4)) - {v, shown}:
        assert variant_client.get(f"/questions/{SLUG}/torchrun.py",
                                  params={"variant": str(unanswered)}).status_code == 409
    assert variant_client.get(f"/questions/{SLUG}/torchrun.py",
                              params={"variant": "9"}).status_code == 422
