"""Verify in real Chromium against real gloo runs: answer then verify, knobs, and a hang.

Set DDPDRILL_SCREENSHOTS=<folder> to save a full-page picture of each flow
(docs/screenshots/ holds the ones in the README).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

# A fresh run on the real engine takes well under a second; a hang question waits for
# its own timeout (5 s) and the first run also starts the warm rank pool.
RUN_TIMEOUT_MS = 60_000


@pytest.fixture
def page(browser: Any, verify_server: str) -> Any:
    context = browser.new_context(base_url=verify_server, viewport={"width": 1100, "height": 900})
    context.set_default_timeout(RUN_TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


def shot(page: Any, name: str) -> None:
    folder = os.environ.get("DDPDRILL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def answer_with_keyboard(page: Any, choice_text: str) -> None:
    """Pick a choice and submit using only the keyboard."""
    page.get_by_label(choice_text, exact=False).focus()
    page.keyboard.press("Space")
    page.get_by_role("button", name="Submit answer").focus()
    page.keyboard.press("Enter")
    page.locator(".graded").wait_for()


def values(page: Any, run: Any, name: str) -> list[str]:
    return [td.inner_text() for td in run.locator(f"td.value[data-name={name}]").all()]


def test_answer_then_verify_shows_the_measured_average_on_both_ranks(page: Any) -> None:
    page.goto("/questions/averaged-gradient-two-ranks")
    assert page.locator("#verify-panel h2").inner_text() == "Predict, then run"
    answer_with_keyboard(page, "model.weight.grad after backward()")
    assert page.locator("#verify-panel h2").inner_text() == "Verify by running it"
    page.locator(".verify-button").focus()
    page.keyboard.press("Enter")
    run = page.locator(".run.done")
    run.wait_for()
    # Status changes are announced through the run's status line, not the whole panel.
    assert run.locator(".status").get_attribute("role") == "status"
    assert "finished" in run.locator(".status").inner_text()
    assert values(page, run, "weight_grad") == ["[[2.0,2.0]]", "[[2.0,2.0]]"]
    marks = run.locator(".checks tbody tr td.mark").all_inner_texts()
    assert marks and all("✓" in m for m in marks)
    # The verdict leads; the timeline and the buckets are each one click below it.
    verdict = run.locator(".run-verdict").bounding_box()
    assert verdict["y"] < run.locator("details.timeline-fold").bounding_box()["y"]
    svg = run.locator("svg.timeline")
    assert not svg.is_visible()
    run.locator("details.timeline-fold > summary").click()
    assert svg.is_visible()
    assert svg.locator("title").count() >= 1 and svg.locator("desc").count() == 1
    run.locator("details.buckets-section > summary").click()
    assert run.locator("svg.bucket-chart").first.is_visible()
    shot(page, "verify-average")


def predict_number(page: Any, value: str) -> None:
    """Type a prediction and press "Run it" before answering: graded, then run."""
    page.locator("#answer-input").fill(value)
    page.get_by_role("button", name="Run it").click()
    page.locator(".graded").wait_for()


def test_run_it_before_answering_grades_the_prediction_and_runs(page: Any) -> None:
    page.goto("/questions/ring-attention-kv-sends")
    # Without a prediction, Run it asks for one and runs nothing.
    page.get_by_role("button", name="Run it").click()
    page.locator("#answer-area .error", has_text="Predict first").wait_for()
    assert page.locator(".run").count() == 0
    page.locator("select[name='knob.world_size']").select_option("2")
    predict_number(page, "1,5")  # a decimal comma, read as 1.5
    run = page.locator("#verify-result .run.done")
    run.wait_for()
    assert values(page, run, "kv_sends") == ["1", "1"]
    assert "prediction" in page.locator(".prediction-note").inner_text()


def test_changing_a_knob_leads_with_the_second_result_and_what_changed(page: Any) -> None:
    page.goto("/questions/ring-attention-kv-sends")
    predict_number(page, "2.5")
    page.locator(".run.done").wait_for()
    page.locator("select[name='knob.world_size']").select_option("2")
    page.locator(".verify-button").click()
    second = page.locator(".run-compare .run-now .run.done")
    second.wait_for()
    first = page.locator(".run-compare .run-before .run.done")
    page.locator(".run-compare details.run-before").evaluate("d => d.open = true")  # folded
    assert values(page, first, "kv_sends") == ["3"] * 4
    assert values(page, second, "kv_sends") == ["1", "1"]
    changes = second.locator(".compare tbody tr").all_inner_texts()
    # The world size is this question's knob: named by its label, its values in words.
    assert any(row.startswith("ranks in the context-parallel ring (knob)") and "4" in row and "2" in row
               for row in changes)
    assert any(row.startswith("kv_sends on rank 0") and "3" in row and "1" in row for row in changes)
    shot(page, "verify-knobs")


def test_hang_question_highlights_the_blocked_rank_and_says_why(page: Any) -> None:
    page.goto("/questions/uneven-trace-without-join")
    answer_with_keyboard(page, "Rank 0 waits in the all-reduce")
    page.locator(".verify-button").click()
    run = page.locator(".run.done")
    run.wait_for()
    assert run.get_attribute("data-outcome") == "timeout"
    diagnosis = run.locator(".diagnosis").inner_text()
    assert "rank 0" in diagnosis.lower() and "all_reduce" in diagnosis
    blocked = run.locator("svg.timeline g.lane[data-lane='0'] g.span.blocked")
    assert blocked.count() == 1
    assert run.locator("svg.timeline g.lane[data-lane='1'] g.span.blocked").count() == 0
    assert "blocked" in blocked.locator("title").text_content()
    run.locator("details.timeline-fold > summary").click()
    assert blocked.is_visible()
    shot(page, "verify-hang")


def test_result_panel_fits_a_phone_screen(browser: Any, verify_server: str) -> None:
    context = browser.new_context(base_url=verify_server, viewport={"width": 390, "height": 844})
    context.set_default_timeout(RUN_TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto("/questions/averaged-gradient-two-ranks")
        page.get_by_label("model.weight.grad after backward()", exact=False).check()
        page.get_by_role("button", name="Run it").click()
        page.locator(".run.done").wait_for()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0
        shot(page, "verify-phone")
    finally:
        context.close()


def test_copy_as_torchrun_script_puts_the_wrapped_snippet_on_the_clipboard(
    browser: Any, verify_server: str
) -> None:
    context = browser.new_context(base_url=verify_server)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    try:
        page.goto("/questions/ring-attention-kv-sends")
        page.locator("#answer-input").fill("2.5")
        page.get_by_role("button", name="Submit answer").click()
        page.locator("#verify-panel form.knobs-form").wait_for()
        page.locator("select[name='knob.world_size']").select_option("2")
        page.get_by_role("button", name="Copy as a torchrun script").click()
        page.locator(".copy-status", has_text="Copied").wait_for()
        copied = page.evaluate("navigator.clipboard.readText()")
        assert "dist.init_process_group(\"gloo\", timeout=" in copied
        assert "_set_pg_timeout(timedelta(seconds=TIMEOUT_S))" in copied
        assert '{"world_size": 2}' in copied
        assert "knob.world_size=2" in page.locator(".torchrun-download").get_attribute("href")
    finally:
        context.close()


def test_a_newcomers_home_shows_what_a_real_cached_run_measured(
    browser: Any, verify_server: str,
) -> None:
    learner = browser.new_context(base_url=verify_server)
    learner.set_default_timeout(RUN_TIMEOUT_MS)
    page = learner.new_page()
    page.goto("/questions/averaged-gradient-two-ranks")
    page.get_by_label("model.weight.grad after backward()", exact=False).check()
    page.get_by_role("button", name="Run it").click()
    page.locator(".run.done").wait_for()
    learner.close()
    newcomer = browser.new_context(base_url=verify_server)
    page = newcomer.new_page()
    page.goto("/")
    example = page.locator("section.verify-example")
    rows = {r.locator("th").inner_text(): r.get_attribute("class")
            for r in example.locator("tbody tr").all()}
    assert rows["weight_grad"] == "same" and rows["loss"] == "differs"
    assert "DDP averages gradients" in example.inner_text()
    assert page.get_by_role("button", name="Start the DDP round").is_visible()
    shot(page, "home-newcomer")
    newcomer.close()
