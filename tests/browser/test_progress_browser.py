"""Mock interview, dashboard and readiness forecast in real Chromium, at desktop and phone
width: take a short mock interview against the server's clock to its report, share and
revoke the report, then set an interview date and see the forecast and its plan.

With DDPDRILL_SCREENSHOTS=<folder> the pages are saved there as PNGs."""

from __future__ import annotations

import math
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.progress.service import interview_moment
from tests.browser.layout import assert_svg_text, assert_tap_targets
from tests.browser.test_learning_browser import (  # noqa: F401  (a fixture, used by name)
    _no_sideways_scroll,
    learning_server,
)
from tests.factories import FIXTURE
from tests.servers import PAGE_TIMEOUT_MS

pytestmark = pytest.mark.browser


def shot(page: Any, name: str) -> None:
    folder = os.environ.get("DDPDRILL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        # A page (whole, scrolled) or one element of it.
        full = {"full_page": True} if hasattr(page, "goto") else {}
        page.screenshot(path=str(Path(folder) / f"{name}.png"), **full)


def answer_shown(page: Any, which: str, confidence: str) -> None:
    """Answer the question on the page (right or wrong) with a confidence, and submit."""
    slug = page.locator("article.question[data-slug]").get_attribute("data-slug")
    value = FIXTURE[slug][which]
    if page.locator("#answer-input").count():
        page.locator("#answer-input").fill(str(value))
    else:
        for key in value if isinstance(value, list) else [value]:
            page.locator(f"input[name=answer][value='{key}']").check()
    page.locator(f"input[name=confidence][value={confidence}]").check()
    page.get_by_role("button", name="Submit answer").click()


@pytest.mark.parametrize("width", [1280, 390])
def test_a_short_mock_interview_to_its_report_then_the_dashboard_and_forecast(
    browser: Any, learning_server: tuple[str, Path], width: int,  # noqa: F811
) -> None:
    url, offset = learning_server
    suffix = "" if width == 1280 else "-phone"
    context = browser.new_context(base_url=url, viewport={"width": width, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()

    page.goto("/mock")
    page.locator("#minutes").select_option("10")
    page.get_by_role("button", name="Start a mock interview").click()
    page.locator("article.question[data-slug]").wait_for()
    # The countdown ticks in the page, starting from the server's 10 minutes.
    timer = page.locator(".countdown-value")
    assert re.fullmatch(r"(10:00|9:5\d)", timer.inner_text())
    page.wait_for_function(
        "() => document.querySelector('.countdown-value').textContent.startsWith('9:5')")
    _no_sideways_scroll(page)

    plan = [("right", "sure"), ("wrong", "sure"), ("wrong", "guessing"), ("right", "unsure")]
    for k, (which, confidence) in enumerate(plan, start=1):
        assert page.locator(".mock-progress").inner_text().startswith(f"Question {k} of 5")
        answer_shown(page, which, confidence)
        page.wait_for_url(re.compile(r"/mock/[0-9a-f-]+$"))
        # No feedback: the next question, never a verdict.
        assert page.locator("section.graded").count() == 0
    assert page.locator(".mock-progress").inner_text().startswith("Question 5 of 5")

    # The fifth answer leaves after the deadline: the server does not count it.
    offset.write_text(str(11 * 60))
    answer_shown(page, "right", "sure")
    assert "not counted" in page.locator("main").inner_text()
    page.get_by_role("link", name="See your report").click()
    page.wait_for_url("**/report")
    assert page.locator(".mock-score").inner_text().startswith("2 of ")
    assert page.locator(".sure-right").inner_text() == "50%"
    assert page.locator(".guessing-wrong").inner_text() == "100%"
    assert page.locator("article.miss").count() == 3  # two wrong, one not counted
    assert page.locator("#mock-topics > title").count() == 1
    # The calibration sentence is read from these answers: "sure" right half the time.
    assert page.locator(".calibration-verdict").get_attribute("data-kind") == "over"
    # Score, calibration and misses first; per-topic detail folded below.
    assert not page.locator("#mock-topics").is_visible()
    _no_sideways_scroll(page)
    if width == 390:
        assert_tap_targets(page)
    shot(page, f"mock-report{suffix}")
    # Printed, the report is just the report: no site header, buttons or share controls.
    page.emulate_media(media="print")
    for hidden in ("header.site", "section.share", "footer.site"):
        assert not page.locator(hidden).is_visible(), hidden
    assert page.locator("article.miss").first.is_visible()
    page.emulate_media(media="screen")

    # Share the report with someone else, then revoke the link.
    page.get_by_role("button", name="Make a share link").click()
    link = page.locator("a.share-link").get_attribute("href")
    other = browser.new_context(base_url=url, viewport={"width": width, "height": 900})
    reader = other.new_page()
    assert reader.goto(link).status == 200
    assert reader.locator(".mock-score").inner_text().startswith("2 of ")
    assert reader.locator("section.share").count() == 0
    page.get_by_role("button", name="Revoke the link").click()
    page.locator("button.make-share").wait_for()
    assert reader.goto(link).status == 404
    other.close()

    # The dashboard: set an interview date; the forecast shows and the plan loads after.
    page.goto("/dashboard")
    when = (datetime.now(UTC) + timedelta(seconds=11 * 60) + timedelta(days=10)).date()
    page.locator("input[name=interview_date]").fill(when.isoformat())
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/dashboard#readiness")
    assert page.locator("svg#rounds").count() == 1
    # One topic table; its plan column and the plan (folded) load after the page.
    page.locator("#topic-table:not([hx-get]) table.plan").wait_for(state="attached")
    assert page.locator("table.topics-progress tbody tr").count() == 2
    # One row a day from the server's now (moved 11 minutes on) to 09:00 UTC on the date.
    server_now = datetime.now(UTC) + timedelta(seconds=11 * 60)
    days = math.ceil((interview_moment(when) - server_now).total_seconds() / 86400)
    assert page.locator("#plan table.plan tbody tr").count() == days
    for chart in ("rounds", "accuracy", "heatmap"):
        svg = page.locator(f"svg#{chart}")
        assert svg.locator(":scope > title").count() == 1 and svg.locator(":scope > desc").count() == 1
        assert svg.bounding_box()["width"] <= width
    _no_sideways_scroll(page)
    shot(page, f"dashboard{suffix}")
    shot(page.locator("section.readiness"), f"readiness{suffix}")

    if width == 390:
        assert_tap_targets(page)
    assert_svg_text(page)
    # Start reviews the misses the interview just scheduled (due a minute after it ended).
    due = int(page.locator(".due-now").get_attribute("data-due-now"))
    assert due >= 1 and page.locator(".start-today").inner_text().startswith("Start: review")
    page.locator(".start-today").click()
    page.wait_for_url("**/review")
    assert page.locator(".review-status").inner_text() == f"{due} due for review"
    context.close()
