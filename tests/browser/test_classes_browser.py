"""A class in real Chromium: the instructor makes a class and a quiz assignment already past its
due date, a learner follows the join link, signs up, reads what the instructor will see, joins
and does the quiz (late), and the instructor sees it marked late and downloads the CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.accounts import service as accounts
from app.db import make_engine, make_sessionmaker, session_scope
from tests.factories import FIXTURE_BANK
from tests.servers import PAGE_TIMEOUT_MS, serve, settings_for

pytestmark = pytest.mark.browser

PASSWORD = "a long enough password"
FORM_TIME = "%Y-%m-%dT%H:%M"


@pytest.fixture
def class_server(tmp_path: Path) -> Iterator[str]:
    """A live server on its own database, with an instructor account."""
    settings = settings_for(tmp_path, FIXTURE_BANK, workers=0)
    engine = make_engine(settings.resolved_database_url)
    with session_scope(make_sessionmaker(engine)) as s:
        accounts.create_user(db_session=s, username="ida", password=PASSWORD, role="instructor")
    engine.dispose()
    with serve(settings) as url:
        yield url


def _no_sideways_scroll(page: Any) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_a_class_from_the_join_link_to_a_late_quiz_in_the_csv(
    browser: Any, class_server: str, tmp_path: Path,
) -> None:
    teacher = browser.new_context(base_url=class_server, accept_downloads=True)
    teacher.set_default_timeout(PAGE_TIMEOUT_MS)
    ida = teacher.new_page()

    # The instructor signs in and lands on their classes.
    ida.goto("/login")
    ida.locator("input[name=username]").fill("ida")
    ida.locator("input[name=password]").fill(PASSWORD)
    ida.locator("form.login-form button[type=submit]").click()
    ida.wait_for_url("**/classes")
    # The header's personal links load after the page (htmx); wait for them.
    ida.locator("#me-nav.me-nav a[href='/classes']").wait_for()
    assert ida.locator("#me-nav a[href='/classes']").count() == 1
    ida.locator("#class-name").fill("Distributed training, spring")
    ida.get_by_role("button", name="Make the class").click()
    ida.wait_for_url("**/classes/*")
    join_url = ida.locator("#join-url").inner_text().strip()

    # A quiz assignment that opened two days ago and was due yesterday.
    ida.get_by_role("link", name="New assignment").first.click()
    ida.wait_for_url("**/assignments/new")
    now = datetime.now(UTC)
    ida.locator("#a-title").fill("Gradients by Monday")
    ida.locator("#a-opens").fill((now - timedelta(days=2)).strftime(FORM_TIME))
    ida.locator("#a-due").fill((now - timedelta(days=1)).strftime(FORM_TIME))
    ida.locator("details.exact-questions > summary").click()
    ida.locator(".question-picks summary", has_text="Basics").click()
    ida.locator("label", has_text="Fixture single choice").locator("input[type=checkbox]").check()
    ida.get_by_role("button", name="Set the assignment").click()
    ida.wait_for_url("**/classes/*")
    assert "Gradients by Monday" in ida.locator("table.assignments").inner_text()

    # The learner opens the link, sees what the instructor will see, signs up and joins.
    student = browser.new_context(base_url=class_server, viewport={"width": 390, "height": 860})
    student.set_default_timeout(PAGE_TIMEOUT_MS)
    lena = student.new_page()
    lena.goto(join_url)
    disclosure = lena.locator("ul.disclosure").inner_text()
    assert "mastery per topic" in disclosure and "score" in disclosure
    _no_sideways_scroll(lena)
    lena.get_by_role("link", name="Create one").click()
    lena.locator("#su-username").fill("lena")
    lena.locator("#su-password").fill(PASSWORD)
    lena.get_by_role("button", name="Create account").click()
    lena.wait_for_url(join_url)
    lena.get_by_role("button", name="Join the class as lena").click()
    lena.wait_for_url("**/me")
    class_id = lena.locator(".class-id").inner_text()
    assert class_id.startswith("L-")
    assert "overdue" in lena.locator("li[data-assignment] .st").inner_text()

    # The quiz, from the class page: one question, answered right (a day late).
    lena.get_by_role("button", name="Start the quiz").click()
    lena.wait_for_url("**/quizzes/*/1")
    lena.locator("label.choice", has_text="The SENTINEL-RIGHT mean").click()
    lena.get_by_role("button", name="Submit answer").click()
    lena.locator("#answer-area section.graded #verdict").wait_for()
    assert lena.locator("#verdict").inner_text() == "Right"
    lena.goto(lena.url.rsplit("/quizzes", 1)[0] + "/account")
    lena.locator("ul.my-classes a").click()
    assert "late" in lena.locator("li[data-assignment] .st").inner_text()

    # The instructor sees it done, marked late, and downloads the scores.
    ida.reload()
    cell = ida.locator(f"table.completion tr[data-member='{class_id}'] td[data-assignment]")
    assert cell.inner_text().split() == ["late", "100%"]
    assert ida.locator("table.round-heatmap tr[data-member]").count() == 1
    with ida.expect_download() as download:
        ida.get_by_role("link", name="Download scores (CSV)").click()
    saved = tmp_path / "scores.csv"
    download.value.save_as(saved)
    rows = list(csv.reader(io.StringIO(saved.read_text())))
    assert rows[1][:2] == [class_id, "lena"]
    assert rows[1][3:5] == ["100.0", "late"]
    teacher.close()
    student.close()
