"""Measure it small, on real gloo: the formulas' per-rank predictions against what the ranks
held and sent, each quantity within its stated tolerance, for five layouts; and the same run
through the verify queue, its cache and the page."""

from __future__ import annotations

import copy
import json

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.planner import small
from app.planner.schemas import PlanIn
from app.settings import Settings
from app.verify.engine import Engine, Limits
from app.verify.models import Run
from app.verify.worker import Worker
from tests.planner.test_api import EXAMPLE


def measure(engine: Engine, layout: small.SmallLayout) -> small.Comparison:
    result = engine.run(small.snippet_text(), world_size=layout.world_size, params=layout.params(),
                        limits=Limits(timeout_s=small.TIMEOUT_S))
    assert result.outcome == "ok", result.diagnosis
    comparison = small.compare(layout, result)
    assert comparison.ok, comparison.problem
    return comparison


STATE = ("param_bytes", "grad_bytes", "optimizer_bytes")


def assert_state_agrees(c: small.Comparison) -> None:
    """Model state: within ±2 % of the formula, and to the byte what the tiny model holds."""
    for key in STATE:
        row = c.row(key)
        assert row.agrees and row.explained, row
        assert abs(row.measured - row.predicted) <= small.STATE_TOLERANCE * row.predicted


def test_dp2_tp2_zero0_agrees_on_everything(engine: Engine) -> None:
    c = measure(engine, small.SmallLayout(dp=2, tp=2, pp=1, zero=0, m=2, v=1))
    assert_state_agrees(c)
    for key in ("dp_bytes", "wire_bytes"):
        row = c.row(key)
        assert row.agrees, row
        assert abs(row.measured - row.predicted) <= small.WIRE_TOLERANCE * row.predicted
    assert "bias b2" in c.row("param_bytes").why


def test_pp2_dp2_zero0_agrees_and_reads_the_bubble_from_the_lanes(engine: Engine) -> None:
    c = measure(engine, small.SmallLayout(dp=2, tp=1, pp=2, zero=0, m=4, v=1))
    assert_state_agrees(c)
    assert c.row("dp_bytes").agrees and c.row("wire_bytes").agrees
    bubble = c.row("bubble")
    assert bubble.predicted == pytest.approx(1 / 5)
    assert bubble.agrees and abs(bubble.measured - 0.2) <= small.BUBBLE_TOLERANCE
    assert c.row("in_flight").measured == 2 and c.row("in_flight").agrees
    assert c.timed_bubble is not None and 0 < c.timed_bubble < 1


def test_pp2_tp2_interleaved_shrinks_the_bubble_but_holds_more(engine: Engine) -> None:
    c = measure(engine, small.SmallLayout(dp=1, tp=2, pp=2, zero=0, m=4, v=2))
    assert_state_agrees(c)
    assert c.row("wire_bytes").agrees  # tensor-parallel all-reduces and 3× the pipeline's sends
    assert c.row("dp_bytes").measured == 0
    bubble = c.row("bubble")
    assert bubble.predicted == pytest.approx(1 / 9) and bubble.agrees
    held = c.row("in_flight")
    assert not held.agrees and held.measured == 2.5 and "interleaved" in held.why


def test_zero1_on_gloo_sends_one_and_a_half_times_the_formula_and_says_why(engine: Engine) -> None:
    c = measure(engine, small.SmallLayout(dp=2, tp=2, pp=1, zero=1, m=2, v=1))
    assert_state_agrees(c)
    row = c.row("dp_bytes")
    assert not row.agrees and row.explained
    assert row.measured / row.predicted == pytest.approx(1.5, rel=small.WIRE_TOLERANCE)
    assert "gloo has no reduce-scatter" in row.why
    assert abs(row.measured - row.expected_here) <= small.WIRE_TOLERANCE * row.expected_here


def test_zero3_is_fsdp2_padded_and_regathered_per_micro_batch(engine: Engine) -> None:
    layout = small.SmallLayout(dp=2, tp=2, pp=1, zero=3, m=2, v=1)
    c = measure(engine, layout)
    assert_state_agrees(c)
    assert "padding" in c.row("param_bytes").why
    row = c.row("dp_bytes")
    assert not row.agrees and row.explained
    assert "8 × all_gather_into_tensor" in row.why  # 2 micro-batches × 2 blocks × (forward, backward)
    assert abs(row.measured - row.expected_here) <= small.WIRE_TOLERANCE * row.expected_here


def test_shrink_keeps_the_kinds_of_parallelism_within_four_ranks() -> None:
    req = copy.deepcopy(EXAMPLE)
    req["cluster"]["gpus"] = 512
    req["layout"].update(dp=16, tp=8, pp=4, zero_stage=3, interleave=4, global_batch=512)
    layout = small.shrink(PlanIn.model_validate(req))
    assert (layout.dp, layout.tp, layout.pp, layout.zero, layout.v) == (2, 1, 2, 3, 2)
    assert layout.world_size <= small.MAX_RANKS
    assert any("drops tensor parallelism" in n for n in layout.notes)
    layout = small.shrink(PlanIn.model_validate(EXAMPLE))
    assert (layout.dp, layout.tp, layout.pp, layout.zero, layout.m) == (2, 2, 1, 1, 4)


def test_measure_it_small_through_the_queue_the_cache_and_the_page(
        app_client: TestClient, session_factory: sessionmaker[Session], settings: Settings) -> None:
    page = BeautifulSoup(app_client.get("/plan").text, "lxml")
    token = json.loads(page.body["hx-headers"])["X-CSRF-Token"]
    form = {i["name"]: i.get("value", "") for i in page.select("#plan-form input") if i.get("name")}
    form.update({s["name"]: s.select_one("option[selected]")["value"]
                 for s in page.select("#plan-form select")})
    form.update(dp="2", tp="2", pp="1", gpus="4", global_batch="8", zero_stage="0")
    headers = {"HX-Request": "true", "X-CSRF-Token": token}
    r = app_client.post("/plan/measure", data=form, headers=headers)
    assert r.status_code == 200, r.text
    first = BeautifulSoup(r.text, "lxml")
    assert "dp 2 × tp 2 × pp 1" in first.select_one(".small-layout").get_text()
    poll = first.select_one("#measure-run")["hx-get"]
    worker = Worker(session_factory, settings)
    assert worker.run_once()
    done = BeautifulSoup(app_client.get(poll, headers={"HX-Request": "true"}).text, "lxml")
    run = done.select_one("#measure-run")
    assert not run.has_attr("hx-get")  # finished: it stops polling
    rows = {tr["data-key"]: tr for tr in run.select("tr[data-key]")}
    assert set(rows) == {"param_bytes", "grad_bytes", "optimizer_bytes", "dp_bytes", "wire_bytes"}
    assert all("agrees" in tr["class"] for tr in rows.values())
    # The same layout again is the cached run: no new job.
    again = BeautifulSoup(app_client.post("/plan/measure", data=form, headers=headers).text, "lxml")
    assert again.select_one("#measure-run").get("hx-get") is None
    with session_factory() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 1
    # A run that is not the planner's is not the planner's to show.
    assert app_client.get("/plan/measure/999999").status_code == 404
    # A layout that does not divide is refused beside the button.
    bad = app_client.post("/plan/measure", data={**form, "dp": "3"}, headers=headers)
    assert bad.status_code == 422 and "Fix the layout first" in bad.text
