"""The /plan page as a browser meets it: presets, the result and its working, the message
beside a wrong field, the htmx fragment, Practise this (a real quiz) and the navigation link.
HTML is checked by parsing it."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlencode

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.planner import forms, presets
from tests.factories import REAL_BANK, import_folder

HTMX = {"HX-Request": "true"}


def soup(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "lxml")


def submitted(**changes: str) -> str:
    """The form of the default page, submitted with some fields changed."""
    state = forms.read({})
    values = {"model_preset": state.model_preset, "gpu_preset": state.gpu_preset,
              "applied_model": state.model_preset, "applied_gpu": state.gpu_preset,
              **{k: v for k, v in state.values.items() if v}}
    values.update(changes)
    return "/plan?" + urlencode({k: v for k, v in values.items() if v != ""})


@pytest.fixture
def planner_client(app_client: TestClient, session_factory: sessionmaker[Session],
                   tmp_path: Path) -> TestClient:
    """The app with two topics of the real bank whose questions the planner links."""
    for topic in ("checkpoint-goodput", "pipeline-parallelism"):
        shutil.copytree(REAL_BANK / topic, tmp_path / "bank" / topic)
    import_folder(session_factory, tmp_path / "bank")
    return app_client


def test_the_default_page_plans_70b_on_512_h100s(app_client: TestClient) -> None:
    r = app_client.get("/plan")
    assert r.status_code == 200
    page = soup(r.text)
    assert page.select_one("header nav a[href='/plan']") is not None
    assert page.select_one("#model_preset option[selected]")["value"] == forms.DEFAULT_MODEL
    assert page.select_one("#gpu_preset option[selected]")["value"] == "h100"
    assert page.select_one("#params_b")["value"] == "70.6"
    verdict = page.select_one("#fit-verdict").get_text(" ", strip=True)
    assert verdict.startswith("Fits:")
    bar = page.select_one("svg#memory-bar")
    assert [s["data-key"] for s in bar.select("rect.segment")] == [
        "Parameters", "Gradients", "Optimizer state", "Activations"]
    assert bar.select_one("line.capacity") is not None
    # Every number has its working, with the learner's numbers in it.
    whys = {d["id"]: d for d in page.select("details.why")}
    assert set(whys) >= {"why-total", "why-memory", "why-activations", "why-time", "why-pipeline",
                         "why-comm", "why-checkpoint"}
    memory = whys["why-memory"].get_text()
    assert "7.060 × 10¹⁰/(8·4) = 2.206 × 10⁹ parameters per GPU" in memory
    assert "(4 − 1) / (1 · 32 + 4 − 1)" in whys["why-pipeline"].get_text()
    assert page.select_one("#micro-batches").get_text(strip=True) == "32"
    # The presets cite their sources.
    sources = page.select_one("details.sources").get_text(" ", strip=True)
    assert "Llama 3 Herd" in sources and "H100" in sources


def test_a_preset_fills_its_fields_and_the_bar_moves(app_client: TestClient) -> None:
    before = soup(app_client.get(submitted()).text)
    r = app_client.get(submitted(model_preset="llama3-405b", tp="8", pp="16", dp="4", layers="126"),
                       headers=HTMX)
    # 405B's 126 layers: pp 16 does not divide them. The preset filled the model's fields.
    page = soup(r.text)
    assert r.status_code == 422
    assert page.select_one("#params_b")["value"] == "405"
    assert page.select_one("#layers")["value"] == "126"
    error = page.select_one("#err-layers")
    assert error is not None and "not divisible by layout.pp (16)" in error.get_text()
    assert page.select_one("#layers")["aria-invalid"] == "true"
    r = app_client.get(submitted(model_preset="llama3-405b", applied_model="llama3-405b",
                                 params_b="405", layers="126", hidden="16384", heads="128", pp="2",
                                 dp="32", tp="8"), headers=HTMX)
    assert r.status_code == 200
    after = soup(r.text)
    # The fragment is the form and the result, not a page.
    assert after.select_one("html body header") is None and after.select_one("section#planner")
    total = lambda p: float(p.select_one("svg#memory-bar")["data-total"])  # noqa: E731
    assert total(after) > total(before)
    assert after.select_one("#fit-verdict").get_text(strip=True).startswith("Doesn't fit by")


def test_a_wrong_field_gets_its_message_beside_it(app_client: TestClient) -> None:
    r = app_client.get(submitted(dp="15"))
    assert r.status_code == 422
    page = soup(r.text)
    field = page.select_one("#field-dp")
    assert "invalid" in field["class"]
    assert "but cluster.gpus is 512" in field.select_one(".field-error").get_text()
    assert "dp would be 16" in field.select_one(".field-error").get_text()
    assert page.select_one("#result-invalid") is not None
    assert page.select_one("svg#memory-bar") is None
    r = app_client.get(submitted(mfu_pct="abc", tp="3"))
    page = soup(r.text)
    assert page.select_one("#err-mfu_pct").get_text() == "Enter a number."
    r = app_client.get(submitted(heads="60"))
    assert "not divisible by layout.tp (8)" in soup(r.text).select_one("#err-heads").get_text()


def test_every_preset_plans(app_client: TestClient) -> None:
    for model in presets.MODELS:
        for gpu in presets.GPUS:
            r = app_client.get(submitted(model_preset=model.key, gpu_preset=gpu.key, tp="8",
                                         pp="1", dp="64", global_batch="512"))
            assert r.status_code in (200, 422), r.text
            assert soup(r.text).select_one("#params_b")["value"] == forms.model_values(model.key)["params_b"]


def test_why_links_the_questions_that_teach_it_and_practise_starts_their_quiz(
        planner_client: TestClient) -> None:
    page = soup(planner_client.get("/plan").text)
    links = [a["href"] for a in page.select("#why-pipeline .teach-list a")]
    assert "/questions/pp-bubble-fraction" in links and "/questions/pp-interleaved-bubble" in links
    # Topics not imported are not linked.
    assert not page.select("#why-memory .teach-list a")
    assert page.select_one("#why-memory form") is None
    form = page.select_one("#why-pipeline form")
    data = {i["name"]: i["value"] for i in form.select("input")}
    r = planner_client.post("/plan/practise", data=data, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].endswith("/1")
    quiz = soup(planner_client.get(r.headers["location"]).text)
    titles = {a.get_text(strip=True) for a in page.select("#why-pipeline .teach-list a")}
    assert quiz.select_one("#q-title").get_text(strip=True) in titles
    # A quiz of exactly the pipeline's linked questions.
    assert quiz.select_one("title").get_text().startswith(f"Question 1 of {len(titles)} ")
    # Whole layout: every linked question; an unknown key is a 422.
    data["key"] = "nothing"
    assert planner_client.post("/plan/practise", data=data).status_code == 422


def test_the_page_states_its_conventions(app_client: TestClient) -> None:
    text = soup(app_client.get("/plan").text).select_one("#conventions").get_text(" ", strip=True)
    for phrase in ("16 bytes per parameter", "embedding", "Korthikanti", "6 · N", "Young/Daly"):
        assert phrase in text
