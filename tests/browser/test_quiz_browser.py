"""A quiz taken in real Chromium: htmx swaps the graded fragment in without a page load."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import FIXTURE
from tests.servers import PAGE_TIMEOUT_MS

pytestmark = pytest.mark.browser

# What to do on each fixture question to answer it right, in the browser.
RIGHT_CHOICES = {"fixture-single": ["The SENTINEL-RIGHT mean"],
                 "fixture-multi": ["SENTINEL-MULTI-RIGHT-1", "SENTINEL-MULTI-RIGHT-2"],
                 "fixture-trace-join": ["Rank 0 hangs"]}
RIGHT_NUMBERS = {"fixture-numeric": "1400", "fixture-trace-buckets": "4"}


@pytest.fixture
def page(browser: Any, live_server: str) -> Any:
    context = browser.new_context(base_url=live_server)
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


def _slug(page: Any) -> str:
    href = page.locator("article.question p.hint a[href^='/questions/']").get_attribute("href")
    return str(href).removeprefix("/questions/")


def test_a_quiz_in_chromium_swaps_each_graded_answer_in_and_ends_in_the_summary(page: Any) -> None:
    page.goto("/topics")
    assert page.locator("ul.topic-picks li").count() == 2
    page.locator("form.quiz-form select[name=count]").select_option("5")
    page.get_by_role("button", name="Start a quiz").click()
    page.wait_for_url("**/quizzes/*/1")

    seen = []
    tried_empty = False
    for position in range(1, 6):
        assert page.locator(".quiz-progress").inner_text().startswith(f"Question {position} of 5")
        slug = _slug(page)
        seen.append(slug)
        url = page.url
        # A full page load would wipe this marker; an htmx swap keeps it.
        page.evaluate("window.__sameDocument = true")
        if slug in RIGHT_NUMBERS:
            page.locator("#answer-input").fill(RIGHT_NUMBERS[slug])
        else:
            if not tried_empty:
                # Nothing picked: the 422 fragment with its message swaps in too.
                tried_empty = True
                page.get_by_role("button", name="Submit answer").click()
                page.locator("#answer-area form.answer-form p.error").wait_for()
                assert page.evaluate("window.__sameDocument") is True
            for text in RIGHT_CHOICES[slug]:
                page.locator("label.choice", has_text=text).click()
        page.get_by_role("button", name="Submit answer").click()

        verdict = page.locator("#answer-area section.graded #verdict")
        verdict.wait_for()
        assert verdict.inner_text() == "Right"
        assert page.evaluate("window.__sameDocument") is True
        assert page.url == url
        assert page.locator("form.answer-form").count() == 0
        assert "SENTINEL-EXPLANATION" in page.locator("#answer-area .explanation").inner_text()
        page.locator("#answer-area a.button").click()

    page.wait_for_url("**/summary")
    assert tried_empty
    assert sorted(seen) == sorted(FIXTURE)
    assert page.locator(".score-line").inner_text().startswith("5 of 5 questions right · 100%")
    links = page.locator("ol.summary-questions a[href^='/questions/']")
    assert sorted(links.nth(i).get_attribute("href") for i in range(links.count())) == sorted(
        f"/questions/{s}" for s in FIXTURE)


def test_without_javascript_the_same_form_answers_by_a_full_page_round_trip(
    browser: Any, live_server: str
) -> None:
    context = browser.new_context(base_url=live_server, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto("/questions/fixture-multi")
        page.locator("label.choice", has_text="SENTINEL-MULTI-RIGHT-1").click()
        page.locator("label.choice", has_text="SENTINEL-MULTI-WRONG-1").click()
        with page.expect_navigation():
            page.get_by_role("button", name="Submit answer").click()
        assert page.locator("#verdict").inner_text() == "Not quite"
        assert "Your score: 0%" in page.locator("section.graded").inner_text()
    finally:
        context.close()
