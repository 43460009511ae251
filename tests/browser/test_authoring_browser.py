"""Authoring in real Chromium: sign in, write a question with a live markdown preview, save it,
find it in the list."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.accounts import service
from app.db import make_engine, make_sessionmaker, session_scope
from app.settings import Settings
from tests.factories import FIXTURE_BANK
from tests.servers import PAGE_TIMEOUT_MS, database_with, serve

pytestmark = pytest.mark.browser

PASSWORD = "a browser's password"


@pytest.fixture(scope="module")
def authoring_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Like conftest's live_server, on a database that also holds an author account."""
    folder = tmp_path_factory.mktemp("authoring-live")
    url = database_with(folder, FIXTURE_BANK)
    engine = make_engine(url)
    with session_scope(make_sessionmaker(engine)) as s:
        service.create_user(db_session=s, username="writer", password=PASSWORD, role="author")
    engine.dispose()
    settings = Settings(database_url=url, secret_key="browser-" + uuid.uuid4().hex,
                        data_dir=folder / "data", bank_dir=FIXTURE_BANK, workers=0)
    with serve(settings) as base_url:
        yield base_url


@pytest.fixture
def page(browser: Any, authoring_server: str) -> Iterator[Any]:
    context = browser.new_context(base_url=authoring_server)
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


def test_an_author_signs_in_writes_a_question_with_a_preview_and_finds_it_listed(
    page: Any, tmp_path: Path
) -> None:
    page.goto("/author")
    page.wait_for_url("**/login?next=%2Fauthor")
    page.fill("#username", "writer")
    page.fill("#password", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/author")
    assert page.locator("nav.author-nav .who").inner_text().startswith("Signed in as writer")

    page.get_by_role("link", name="New question").click()
    page.wait_for_url("**/author/questions/new")
    page.fill("#f-slug", "browser-made")
    page.fill("#f-topic", "basics")
    page.fill("#f-title", "Written in Chromium")
    # The markdown preview is rendered by the server as you type (htmx), sanitised.
    page.fill("#f-prompt", "Which is **bold**? <script>window.pwned = 1</script>")
    page.locator("#prompt-preview strong").wait_for()
    assert page.locator("#prompt-preview strong").inner_text() == "bold"
    assert page.locator("#prompt-preview script").count() == 0
    assert page.evaluate("window.pwned") is None
    choices = page.locator("input[name=choice_text]")
    choices.nth(0).fill("This one")
    choices.nth(1).fill("That one")
    page.locator("input[name=choice_correct][value='0']").check()
    page.fill("#f-explanation", "Because *this* one is bold.")
    page.locator("#explanation-preview em").wait_for()
    page.fill("#f-note", "made in a browser")
    page.get_by_role("button", name="Create draft").click()

    page.wait_for_url("**/author/questions/browser-made?saved=1")
    assert "Saved as revision 1" in page.locator("p.message").inner_text()
    # The gate panel loads itself: no snippet, so an author cannot publish.
    page.locator("#gate").wait_for()
    assert "no snippet" in page.locator("#gate").inner_text()

    page.get_by_role("link", name="Questions", exact=True).click()
    page.wait_for_url("**/author")
    row = page.locator("tr[data-slug='browser-made']")
    assert "Written in Chromium" in row.inner_text() and "draft" in row.inner_text()
    # Filtering by status swaps the rows in place.
    page.locator("select[name=status]").select_option("published")
    page.wait_for_url("**/author?*status=published*")
    assert page.locator("tr[data-slug='browser-made']").count() == 0
