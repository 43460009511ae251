"""Artifacts in real Chromium at 1280 x 800 and 390 x 844, on the real bank with a worker: each
kind's stored trace on its question's page before answering, and the same kind drawn from a fresh
gloo run in the Verify panel after it. The page never scrolls sideways; chart text stays legible.

Set DDPDRILL_SCREENSHOTS=<folder> to keep a picture of each page.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.browser.layout import MIN_SVG_TEXT_PX, SVG_TEXT_PX, page_size

pytestmark = pytest.mark.browser

RUN_TIMEOUT_MS = 90_000
SCREENS = {1280: (1280, 800), 390: (390, 844)}
# One question per kind, with a right answer to give before Verify.
QUESTIONS = {
    "profile": ("evidence-ddp-profile-overlap", "A gradient bucket's all-reduce starts"),
    "flight_recorder": ("evidence-flight-recorder-op-mismatch", "rank 1 issued a broadcast"),
    "memory": ("evidence-memory-saved-tensors", "18"),
}


@pytest.fixture(params=sorted(SCREENS), ids=lambda w: f"{w}px")
def page(request: pytest.FixtureRequest, browser: Any, verify_server: str) -> Any:
    width, height = SCREENS[request.param]
    context = browser.new_context(base_url=verify_server, viewport={"width": width, "height": height},
                                  is_mobile=width < 500, has_touch=width < 500)
    context.set_default_timeout(RUN_TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


def shot(page: Any, name: str, figure: Any = None) -> None:
    """The whole page, and the artifact's figure on its own (easier to read at phone width)."""
    folder = os.environ.get("DDPDRILL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
        if figure is not None:
            figure.screenshot(path=str(Path(folder) / f"{name}-figure.png"))


def _no_sideways_scroll(page: Any) -> None:
    size = page_size(page)
    assert size["width"] <= size["vw"], size


def _legible(page: Any, scope: str) -> None:
    texts = page.evaluate(SVG_TEXT_PX.replace("document.querySelectorAll('svg text')",
                                              f"document.querySelectorAll('{scope} svg text')"))
    assert texts, scope
    small = [(t, round(px, 1)) for t, px in texts if px < MIN_SVG_TEXT_PX - 0.05]
    assert small == []


@pytest.mark.parametrize("kind", sorted(QUESTIONS))
def test_each_artifact_kind_reads_on_its_question_and_in_a_fresh_verify_run(page: Any, kind: str) -> None:
    slug, answer = QUESTIONS[kind]
    width = page.viewport_size["width"]
    page.goto(f"/questions/{slug}")
    stored = page.locator(f"figure.artifact[data-kind={kind}]").first
    stored.wait_for()
    svg = stored.locator("svg")
    assert svg.first.is_visible()
    assert svg.locator("title").first.text_content() and svg.locator("desc").count() >= 1
    assert "measured" in stored.locator("figcaption .source").inner_text()
    stored.locator("details.table-fallback > summary").click()
    assert stored.locator("table tbody tr").count() >= 4
    _no_sideways_scroll(page)
    _legible(page, "figure.artifact")
    shot(page, f"artifact-{kind}-question-{width}", stored)

    if kind == "memory":
        page.locator("#answer-input").fill(answer)
        page.get_by_role("button", name="Submit answer").click()
    else:
        page.get_by_label(answer, exact=False).check()
        page.get_by_role("button", name="Submit answer").click()
    page.locator(".graded").wait_for()
    page.locator(".verify-button").click()
    run = page.locator(".run.done")
    run.wait_for()
    live = run.locator(f"section.artifacts figure.artifact[data-kind={kind}]").first
    live.wait_for()
    assert live.locator("svg").first.is_visible()
    assert "this run" in live.locator("figcaption .source").inner_text()
    checks = run.locator(".checks tbody tr")
    assert checks.count() >= 2
    assert all("✓" in m for m in run.locator(".checks tbody tr td.mark").all_inner_texts())
    _no_sideways_scroll(page)
    live.scroll_into_view_if_needed()
    shot(page, f"artifact-{kind}-verified-{width}", live)
