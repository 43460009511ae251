"""POST /api/v1/plan keeps its contract: the fields, the units, the conventions (computed here
again, independently of app.planner.formulas), and a 422 that names the field."""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient

EXAMPLE: dict[str, Any] = {
    "model": {"params": 7.0e9, "layers": 32, "hidden": 4096, "heads": 32, "seq_len": 4096},
    "cluster": {"gpus": 64, "gpus_per_node": 8, "gpu_memory_gb": 80, "peak_tflops": 989,
                "mtbf_hours": 50000},
    "layout": {"dp": 8, "zero_stage": 1, "tp": 8, "pp": 1, "micro_batch": 1, "global_batch": 512,
               "sequence_parallel": True, "recompute": "selective", "interleave": 1},
    "training": {"tokens": 1.0e12, "mfu": 0.4, "checkpoint_seconds": 60},
}
KEYS = {
    "memory": {"params", "grads", "optimizer", "activations", "total", "fits"},
    "flops": {"per_step", "total"},
    "time": {"step_s", "train_days"},
    "pipeline": {"micro_batches", "bubble_fraction"},
    "comm": {"dp_bytes_per_step"},
    "checkpoint": {"interval_s"},
}


def by_hand(req: dict[str, Any]) -> dict[str, Any]:
    """The issue's conventions, written out again without the planner's functions."""
    m, c, lay, t = req["model"], req["cluster"], req["layout"], req["training"]
    P, dp, tp, pp, z = m["params"], lay["dp"], lay["tp"], lay["pp"], lay["zero_stage"]
    s, b, h, a = m["seq_len"], lay["micro_batch"], m["hidden"], m["heads"]
    shard = P / (tp * pp)
    params = 2 * shard / (dp if z == 3 else 1)
    grads = 2 * shard / (dp if z >= 2 else 1)
    optimizer = 12 * shard / (dp if z >= 1 else 1)
    sp, rc = lay["sequence_parallel"], lay["recompute"]
    if rc == "none":
        per_layer = (s * b * h * (34 + 5 * a * s / h) / tp if sp
                     else s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp)))
    elif rc == "selective":
        per_layer = s * b * h * 34 / tp if sp else s * b * h * (10 + 24 / tp)
    else:
        per_layer = 2 * s * b * h / tp if sp else 2 * s * b * h
    mb = lay["global_batch"] // (dp * b)
    in_flight = min(pp, mb) if pp > 1 else 1
    activations = per_layer * m["layers"] / pp * in_flight
    total = params + grads + optimizer + activations
    rate = c["gpus"] * c["peak_tflops"] * 1e12 * t["mfu"]
    per_step = 6 * P * lay["global_batch"] * s
    v = lay.get("interleave", 1)
    dp_bytes = (3 if z == 3 else 2) * (dp - 1) / dp * 2 * P / (tp * pp)
    return {
        "memory": {"params": params, "grads": grads, "optimizer": optimizer, "activations": activations,
                   "total": total, "fits": total <= c["gpu_memory_gb"] * 1e9},
        "flops": {"per_step": per_step, "total": 6 * P * t["tokens"]},
        "time": {"step_s": per_step / rate, "train_days": 6 * P * t["tokens"] / rate / 86400},
        "pipeline": {"micro_batches": mb, "bubble_fraction": (pp - 1) / (v * mb + pp - 1)},
        "comm": {"dp_bytes_per_step": dp_bytes},
        "checkpoint": {"interval_s": math.sqrt(2 * t["checkpoint_seconds"] * c["mtbf_hours"] * 3600
                                               / c["gpus"])},
    }


def assert_matches(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert {k: set(v) for k, v in got.items()} == KEYS
    for group, fields in want.items():
        for name, value in fields.items():
            if isinstance(value, bool):
                assert got[group][name] is value, (group, name)
            else:
                assert got[group][name] == pytest.approx(value, rel=1e-12, abs=1e-12), (group, name)


def test_the_contracts_example(app_client: TestClient) -> None:
    r = app_client.post("/api/v1/plan", json=EXAMPLE)
    assert r.status_code == 200, r.text
    body = r.json()
    assert_matches(body, by_hand(EXAMPLE))
    # The example by eye: 7B / 8 = 875M parameters per GPU; ZeRO-1 over 8.
    assert body["memory"]["params"] == 1.75e9
    assert body["memory"]["optimizer"] == 12 * 875e6 / 8
    assert body["pipeline"] == {"micro_batches": 64, "bubble_fraction": 0.0}
    assert body["memory"]["fits"] is True


def _random_layout(rng: random.Random) -> dict[str, Any]:
    tp, pp, dp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4, 8, 16]), rng.choice([1, 2, 8, 32, 64])
    heads = tp * rng.choice([4, 8, 16])
    layers = pp * rng.choice([2, 5, 8])
    mb = rng.choice([1, 2, 4])
    req = copy.deepcopy(EXAMPLE)
    req["model"].update(params=rng.choice([1.3e9, 7e9, 70.6e9, 405e9]), layers=layers,
                        hidden=heads * 128, heads=heads, seq_len=rng.choice([2048, 4096, 8192]))
    req["cluster"].update(gpus=dp * tp * pp, gpu_memory_gb=rng.choice([40, 80, 180]),
                          peak_tflops=rng.choice([312, 989, 2250]), mtbf_hours=rng.choice([1e4, 5e4]))
    req["layout"].update(dp=dp, tp=tp, pp=pp, zero_stage=rng.randrange(4), micro_batch=mb,
                         global_batch=dp * mb * rng.choice([1, 3, 16, 64]),
                         sequence_parallel=rng.random() < 0.5,
                         recompute=rng.choice(["none", "selective", "full"]),
                         interleave=rng.choice([1, 1, 2, 3]))
    req["training"].update(tokens=rng.choice([1e11, 2e12, 15e12]), mfu=rng.choice([0.3, 0.45, 0.55]),
                           checkpoint_seconds=rng.choice([10, 60, 300]))
    return req


def test_many_layouts_agree_with_the_conventions(app_client: TestClient) -> None:
    rng = random.Random(40)
    for _ in range(60):
        req = _random_layout(rng)
        r = app_client.post("/api/v1/plan", json=req)
        assert r.status_code == 200, (req, r.text)
        assert_matches(r.json(), by_hand(req))


def test_interleave_defaults_to_one(app_client: TestClient) -> None:
    req = copy.deepcopy(EXAMPLE)
    req["layout"].update(pp=2, dp=4)
    req["layout"].pop("interleave")
    r = app_client.post("/api/v1/plan", json=req)
    assert r.status_code == 200
    assert r.json()["pipeline"]["bubble_fraction"] == pytest.approx(1 / (128 + 1))


@pytest.mark.parametrize(("change", "loc", "says"), [
    ({"layout": {"dp": 4}}, ["body", "layout", "dp"], "gpus"),
    ({"model": {"heads": 30}}, ["body", "model", "heads"], "tp"),
    ({"layout": {"pp": 2, "dp": 4}, "model": {"layers": 33}}, ["body", "model", "layers"], "pp"),
    ({"layout": {"global_batch": 500}}, ["body", "layout", "global_batch"], "micro_batch"),
    ({"layout": {"zero_stage": 4}}, ["body", "layout", "zero_stage"], ""),
    ({"layout": {"recompute": "most"}}, ["body", "layout", "recompute"], ""),
    ({"training": {"mfu": 1.5}}, ["body", "training", "mfu"], ""),
    ({"model": {"params": -1}}, ["body", "model", "params"], ""),
    ({"layout": {"tp": 2.5}}, ["body", "layout", "tp"], ""),
])
def test_a_layout_that_does_not_divide_is_a_422_naming_the_field(
        app_client: TestClient, change: dict[str, dict[str, Any]], loc: list[str], says: str) -> None:
    req = copy.deepcopy(EXAMPLE)
    for group, fields in change.items():
        req[group].update(fields)
    r = app_client.post("/api/v1/plan", json=req)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert loc in [d["loc"] for d in detail], detail
    assert says in next(d["msg"] for d in detail if d["loc"] == loc)


def test_every_problem_is_listed(app_client: TestClient) -> None:
    req = copy.deepcopy(EXAMPLE)
    req["model"]["heads"] = 30
    req["layout"]["global_batch"] = 500
    r = app_client.post("/api/v1/plan", json=req)
    assert r.status_code == 422
    assert [d["loc"] for d in r.json()["detail"]] == [["body", "model", "heads"],
                                                      ["body", "layout", "global_batch"]]


def test_a_missing_field_and_a_non_number_are_422s(app_client: TestClient) -> None:
    req = copy.deepcopy(EXAMPLE)
    del req["cluster"]["mtbf_hours"]
    r = app_client.post("/api/v1/plan", json=req)
    assert r.status_code == 422
    assert ["body", "cluster", "mtbf_hours"] in [d["loc"] for d in r.json()["detail"]]
    r = app_client.post("/api/v1/plan", content=b'{"model": {"params": NaN}}',
                        headers={"content-type": "application/json"})
    assert r.status_code == 422


def test_the_contract_is_documented_at_docs(app_client: TestClient) -> None:
    spec = app_client.get("/api/v1/openapi.json").json()
    op = spec["paths"]["/api/v1/plan"]["post"]
    assert "stable contract" in op["description"].lower()
    assert set(spec["components"]["schemas"]["PlanOut"]["properties"]) == set(KEYS)
    assert "422" in op["responses"]
