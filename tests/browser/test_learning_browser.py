"""The learning loop in real Chromium, at desktop and phone width: sign up, answer with
confidence, move the server's clock a day, review the due card, report a problem, and see
the report in the author's inbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.accounts import service as accounts
from app.db import make_engine, make_sessionmaker, session_scope
from app.settings import Settings
from tests.factories import FIXTURE_BANK
from tests.servers import PAGE_TIMEOUT_MS, serve, settings_for

pytestmark = pytest.mark.browser

PASSWORD = "a long enough password"


@pytest.fixture
def learning_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A live server whose clock is moved by writing seconds into a file (its URL, the file)."""
    offset = tmp_path / "clock-offset"
    base = settings_for(tmp_path, FIXTURE_BANK, workers=0)
    settings = Settings(**{**base.model_dump(), "clock_offset_file": offset})
    engine = make_engine(settings.resolved_database_url)
    with session_scope(make_sessionmaker(engine)) as s:
        accounts.create_user(db_session=s, username="alice", password=PASSWORD, role="author")
    engine.dispose()
    with serve(settings) as url:
        yield url, offset


def _no_sideways_scroll(page: Any) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


@pytest.mark.parametrize("width", [1280, 390])
def test_sign_up_answer_with_confidence_review_a_day_later_and_report_a_problem(
    browser: Any, learning_server: tuple[str, Path], width: int,
) -> None:
    url, offset = learning_server
    context = browser.new_context(base_url=url, viewport={"width": width, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()

    # Sign up from the header (htmx replaces the header's links once the page has loaded).
    page.goto("/")
    page.locator("#me-nav a[href='/signup']").click()
    page.locator("#su-username").fill("lena")
    page.locator("#su-password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/account?welcome=1")
    assert "Welcome, lena" in page.locator("main").inner_text()
    _no_sideways_scroll(page)

    # Answer with confidence, choosing it with the keyboard: arrow keys move within the group.
    page.goto("/questions/fixture-single")
    page.locator("label.choice", has_text="The SENTINEL-RIGHT mean").click()
    page.locator("input[name=confidence][value=guessing]").focus()
    page.keyboard.press("ArrowRight")
    assert page.locator("input[name=confidence][value=unsure]").is_checked()
    _no_sideways_scroll(page)
    page.get_by_role("button", name="Submit answer").click()
    page.locator("#answer-area section.graded #verdict").wait_for()
    assert page.locator("#verdict").inner_text() == "Right"

    # Nothing is due yet.
    page.goto("/review")
    page.locator(".me-nav .review-link").wait_for()
    assert page.locator(".me-nav .due-count").count() == 0
    assert "Nothing is due" in page.locator("main").inner_text()

    # A day later the card is due: the header counts it and the Review page serves it.
    offset.write_text(str(24 * 3600))
    page.goto("/")
    badge = page.locator(".me-nav .due-count")
    badge.wait_for()
    assert badge.inner_text() == "1"
    page.locator(".me-nav .review-link").click()
    page.wait_for_url("**/review")
    assert page.locator(".review-status").inner_text() == "1 due for review"
    assert "SENTINEL" in page.locator("article.question").inner_text()
    _no_sideways_scroll(page)
    page.locator("label.choice", has_text="The SENTINEL-RIGHT mean").click()
    page.locator("label.confidence-option", has_text="sure").last.click()
    page.get_by_role("button", name="Submit answer").click()
    page.locator("#answer-area section.graded #verdict").wait_for()
    # The header's count follows the answer without a page load.
    page.locator(".me-nav .due-count").wait_for(state="detached")
    assert page.locator(".me-nav .review-link").count() == 1

    # Report a problem from the graded answer.
    page.locator("#report-problem summary").click()
    page.locator("label.report-kind", has_text="The wording is unclear").click()
    page.locator("#report-comment").fill("Which rank's mean is meant?")
    page.get_by_role("button", name="Send report").click()
    page.locator("#report-problem [role=status]").wait_for()
    page.goto("/")
    page.locator(".me-nav .review-link").wait_for()
    assert page.locator(".me-nav .due-count").count() == 0  # reviewed: nothing due now
    page.goto("/reports")
    assert "open" in page.locator(".my-reports").inner_text()

    # The author sees it in the inbox, grouped under the question.
    author = browser.new_context(base_url=url, viewport={"width": width, "height": 900})
    author.set_default_timeout(PAGE_TIMEOUT_MS)
    inbox = author.new_page()
    inbox.goto("/login?next=/author/reports")
    inbox.locator("#username").fill("alice")
    inbox.locator("#password").fill(PASSWORD)
    inbox.get_by_role("button", name="Sign in").click()
    inbox.wait_for_url("**/author/reports")
    group = inbox.locator("section.report-group")
    assert group.count() == 1
    assert "1 open" in group.locator(".report-count").inner_text()
    assert "Which rank's mean is meant?" in group.inner_text()
    _no_sideways_scroll(inbox)
    inbox.locator("section.report-group input[name=note]").fill("Reworded: rank 0.")
    inbox.get_by_role("button", name="Resolve").click()
    inbox.wait_for_url("**/author/reports?done=*")
    assert "No open reports" in inbox.locator("main").inner_text()
    assert "Resolved the report on" in inbox.locator(".handled-report").inner_text()
    page.goto("/reports")
    assert "resolved" in page.locator(".my-reports").inner_text()
    assert "Reworded: rank 0." in page.locator(".my-reports").inner_text()
    author.close()
    context.close()
