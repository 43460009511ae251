"""The planner in real Chromium at desktop and phone width: a preset, a layout change and the
memory bar moving, an impossible layout's message beside its field, and "Measure it small"
showing the formulas' predictions against what real gloo ranks measured.

With DDPDRILL_SCREENSHOTS=<folder> the pages are saved there as PNGs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.layout import assert_no_overflow, assert_svg_text, assert_tap_targets
from tests.factories import REAL_BANK
from tests.servers import PAGE_TIMEOUT_MS, serve, settings_for

pytestmark = pytest.mark.browser

# A small run takes about a second on a quiet machine; the worker may start cold.
RUN_TIMEOUT_MS = 90_000


@pytest.fixture(scope="module")
def planner_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app with the topics whose questions the planner links, and one verify worker."""
    folder = tmp_path_factory.mktemp("planner")
    for topic in ("pipeline-parallelism", "checkpoint-goodput"):
        shutil.copytree(REAL_BANK / topic, folder / "bank" / topic)
    with serve(settings_for(folder, folder / "bank", workers=1)) as url:
        yield url


def shot(page: Any, name: str) -> None:
    folder = os.environ.get("DDPDRILL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def total(page: Any) -> float:
    return float(page.locator("svg#memory-bar").get_attribute("data-total"))


def segment_width(page: Any, key: str) -> float:
    return float(page.locator(f"svg#memory-bar rect.segment[data-key='{key}']").get_attribute("width"))


def set_field(page: Any, name: str, value: str) -> None:
    """Type a value as a learner does; htmx redraws after the pause (or on leaving the field)."""
    with page.expect_response(lambda r: "/plan?" in r.url and r.request.method == "GET"):
        page.locator(f"#{name}").fill(value)
        page.locator(f"#{name}").press("Tab")
    page.wait_for_function(f"() => document.querySelector('#{name}').value === '{value}'")


@pytest.mark.parametrize("width", [1280, 390])
def test_preset_then_layout_moves_the_bar_a_bad_layout_says_why_and_measure_it_small(
        browser: Any, planner_server: str, width: int) -> None:
    suffix = "" if width == 1280 else "-phone"
    context = browser.new_context(base_url=planner_server, viewport={"width": width, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    page.goto("/plan")
    assert page.locator("#fit-verdict").inner_text().startswith("Fits:")
    before_total, before_params = total(page), segment_width(page, "Parameters")
    shot(page, f"planner{suffix}")

    # The form and the bar: side by side on a desktop, one above the other on a phone.
    form_box = page.locator("#plan-form").bounding_box()
    bar_box = page.locator("svg#memory-bar").bounding_box()
    if width == 1280:
        assert bar_box["x"] >= form_box["x"] + form_box["width"]
    else:
        assert bar_box["y"] >= form_box["y"] + form_box["height"]
    assert_no_overflow(page)
    assert_svg_text(page)
    if width == 390:
        assert_tap_targets(page)

    # A preset: 405B fills the model's fields without a page load; its 126 layers do not
    # split over the 4 pipeline stages, and the message stands beside the field.
    page.evaluate("window.__same_page = true")
    with page.expect_response(lambda r: "/plan?" in r.url):
        page.locator("#model_preset").select_option("llama3-405b")
    page.locator("#err-layers").wait_for()
    assert page.locator("#params_b").input_value() == "405"
    assert "not divisible by layout.pp (4)" in page.locator("#err-layers").inner_text()
    assert page.locator("#layers").get_attribute("aria-invalid") == "true"
    assert page.locator("svg#memory-bar").count() == 0
    assert page.evaluate("window.__same_page === true")  # htmx redrew it: no page load
    shot(page, f"planner-invalid{suffix}")

    # The layout changed to fit the preset: 3 stages (126 = 3 × 42), then dp 512 / (8 · 3)
    # is no whole number, so dp is refused until the cluster has 576 GPUs.
    set_field(page, "pp", "3")
    assert "but cluster.gpus is 512" in page.locator("#err-dp").inner_text()
    set_field(page, "gpus", "384")
    page.locator("svg#memory-bar").wait_for()
    after_total, after_params = total(page), segment_width(page, "Parameters")
    assert after_total > before_total and after_params > before_params  # the bar moved
    assert page.locator("#fit-verdict").inner_text().startswith("Doesn't fit by")
    assert page.locator("#err-dp").count() == 0
    assert page.evaluate("window.__same_page === true")
    assert "gpus=384" in page.url  # the address keeps the layout
    page.locator("#why-memory summary").click()
    assert "4.050 × 10¹¹/(8·3)" in page.locator("#why-memory").inner_text()
    shot(page, f"planner-405b{suffix}")

    # Measure it small: the layout on four gloo ranks, prediction beside measurement.
    page.goto("/plan?model_preset=llama3-8b&gpu_preset=h100&gpus=16&dp=2&tp=8&pp=1&zero_stage=1"
              "&global_batch=64")
    page.locator("#measure-button").click()
    page.locator(".small-layout").wait_for()
    assert "dp 2 × tp 2 × pp 1" in page.locator(".small-layout").inner_text()
    table = page.locator("#measure-table")
    table.wait_for(timeout=RUN_TIMEOUT_MS)
    rows = {r.get_attribute("data-key"): r for r in table.locator("tbody tr").all()}
    assert set(rows) == {"param_bytes", "grad_bytes", "optimizer_bytes", "dp_bytes", "wire_bytes"}
    for key in ("param_bytes", "grad_bytes", "optimizer_bytes"):
        assert rows[key].locator(".badge").inner_text() == "agrees"
        assert rows[key].locator("td.predicted").inner_text().endswith(" B")
        assert rows[key].locator("td.measured").inner_text().endswith(" B")
    # ZeRO-1 on gloo: the reduce-scatter is an all-reduce, and the table says so.
    assert rows["dp_bytes"].locator(".badge").inner_text() == "differs"
    assert "gloo has no reduce-scatter" in rows["dp_bytes"].inner_text()
    assert_no_overflow(page)
    # The caption spans the table, stacked or not (a stacked table's caption once shrank to a
    # one-word column).
    caption, box = table.locator("caption").bounding_box(), table.bounding_box()
    assert caption is not None and box is not None and caption["width"] >= 0.9 * box["width"]
    page.locator("#result-measure").scroll_into_view_if_needed()
    shot(page, f"planner-measured{suffix}")
    context.close()
