"""At a glance, in real Chromium at 1280 x 800 and 390 x 844, on the real bank with a learner
who has six weeks of practice and an interview date: the home page opens on today's work
with its Start button within two screens; the dashboard fits three screens at 1280 px; no
page is wider than the viewport; at phone width every control is at least 40 px; chart text
is 12 px or more; the keyboard answers a quiz (1-9, Enter, n, ?) and focus moves to the
feedback after Submit; the quiz end, Review, the topics page and the author's pages lead on.

Set DDPDRILL_SCREENSHOTS=<folder> to save each page (docs/screenshots/ holds the README's).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.accounts import service as accounts
from app.db import make_engine, make_sessionmaker, session_scope
from app.identity import LEARNER_COOKIE, signed_learner
from app.progress import service as progress
from app.questions.service import get_published, published_question
from app.quizzes import service as quizzes
from app.quizzes.grading import correct_answer
from app.reports import service as reports
from tests.browser.history import practise
from tests.browser.layout import (
    assert_no_overflow,
    assert_svg_text,
    assert_tap_targets,
    page_size,
    top_of,
)
from tests.browser.test_progress_browser import shot
from tests.factories import REAL_BANK
from tests.servers import PAGE_TIMEOUT_MS, serve, settings_for

pytestmark = pytest.mark.browser

PASSWORD = "a long enough password"
SCREENS = {1280: (1280, 800), 390: (390, 844)}
START = "button.primary, a.button.primary"


@pytest.fixture(scope="module")
def practised(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The real bank, a learner with six weeks of practice and an interview in three weeks,
    an open problem report, and an admin."""
    folder = tmp_path_factory.mktemp("glance")
    settings = settings_for(folder, REAL_BANK, workers=0)
    learner = str(uuid.uuid4())
    now = datetime.now(UTC)
    assert practise(settings, learner, now) > 100
    engine = make_engine(settings.resolved_database_url)
    with session_scope(make_sessionmaker(engine)) as s:
        accounts.create_user(db_session=s, username="alice", password=PASSWORD, role="admin")
        progress.set_goal(db_session=s, learner_id=learner, target=0.9, now=now,
                          interview_date=(now + timedelta(days=21)).date())
        answered = published_question(db_session=s, slug="averaged-gradient-two-ranks")
        assert answered is not None
        quizzes.answer_question(db_session=s, learner_id=learner, question=answered,
                                raw_answer=correct_answer(answered.doc), token=None, now=now)
        question = get_published(db_session=s, slug="averaged-gradient-two-ranks")
        assert question is not None
        reports.file_report(db_session=s, learner_id=learner, question=question, revision_id=None,
                            kind="unclear", comment="Which rank?", now=now, per_hour=100)
    engine.dispose()
    with serve(settings) as url:
        yield {"url": url, "cookie": signed_learner(settings.resolved_secret_key(), learner)}


def _page(browser: Any, practised: dict[str, Any], width: int, *, learner: bool = True) -> Any:
    w, h = SCREENS[width]
    context = browser.new_context(base_url=practised["url"], viewport={"width": w, "height": h})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    if learner:
        context.add_cookies([{"name": LEARNER_COOKIE, "value": practised["cookie"],
                              "url": practised["url"]}])
    return context.new_page()


def _fits(page: Any, width: int) -> None:
    page.wait_for_load_state("networkidle")
    assert_no_overflow(page)
    if width == 390:
        assert_tap_targets(page)
    if page.locator("svg text").count():
        assert_svg_text(page)


@pytest.mark.parametrize("width", [1280, 390])
def test_home_opens_on_today_with_one_start_button_within_two_screens(
    browser: Any, practised: dict[str, Any], width: int,
) -> None:
    page = _page(browser, practised, width)
    page.goto("/")
    today = page.locator("section.today")
    due = int(today.locator(".due-now").get_attribute("data-due-now"))
    assert due > 0
    start = today.locator(".start-today")
    assert start.inner_text() == f"Start: review {due} cards"
    assert (top_of(page, START) or 1e9) <= 2 * page.viewport_size["height"]
    assert "+" in today.locator(".plan-today").inner_text()  # the plan's reviews + new today
    assert today.locator(".streak").inner_text().isdigit()
    # The header counts what Today counts.
    page.locator("#me-nav .due-count").wait_for()
    assert page.locator("#me-nav .due-count").inner_text() == str(due)
    # Topics are not the first screen: the quiz builder is one click away.
    assert page.locator("input[name=topics]").count() == 0
    assert page.locator("a[href='/topics']").count() >= 1
    _fits(page, width)
    shot(page, f"home{'' if width == 1280 else '-phone'}")
    page.context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_a_newcomer_sees_what_it_is_and_starts_the_ddp_round(
    browser: Any, practised: dict[str, Any], width: int,
) -> None:
    page = _page(browser, practised, width, learner=False)
    page.goto("/")
    assert page.locator("section.today").count() == 0
    button = page.get_by_role("button", name="Start the DDP round")
    assert (top_of(page, "form.start-round button") or 1e9) <= 2 * page.viewport_size["height"]
    _fits(page, width)
    button.click()
    page.wait_for_url("**/quizzes/*/1")
    page.context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_dashboard_is_one_topic_table_and_fits_three_screens(
    browser: Any, practised: dict[str, Any], width: int,
) -> None:
    page = _page(browser, practised, width)
    page.goto("/dashboard")
    # The plan's column loads after the page and replaces the table.
    page.locator("#topic-table:not([hx-get]) td.forecast-planned").first.wait_for(state="attached")
    toggle = page.locator("button.columns-toggle")
    if toggle.count():
        # Where the table does not fit, the two forecast columns wait behind a button that
        # names them.
        assert toggle.inner_text().startswith("Show 2 more columns: On ")
        assert "With the plan" in toggle.inner_text()
        toggle.click()
    page.locator("td.forecast-planned").first.wait_for()
    table = page.locator("table.topics-progress")
    assert table.count() == 1
    heads = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    assert heads[0].startswith("Topic") and heads[1].startswith("Now") and heads[-1].startswith("Due")
    assert any(h.startswith("With the plan") for h in heads)
    # Each topic appears once on the page.
    slugs = [tr.get_attribute("data-topic") for tr in page.locator("[data-topic]").all()]
    assert len(slugs) == len(set(slugs))
    # The table's due column adds up to the count in the dashboard's line about today.
    due = int(page.locator("section.today-line .due-now").get_attribute("data-due-now"))
    cells = page.locator("table.topics-progress td.due").all()
    assert sum(int(td.get_attribute("data-value")) for td in cells) == due
    if width == 1280:
        height = page_size(page)["height"]
        assert height <= 3 * 800, f"the dashboard is {height} px tall"
    # Sorting by a column reorders the rows.
    page.locator("th[data-sort] button", has_text="Due").click()
    values = [int(td.get_attribute("data-value")) for td in page.locator("td.due").all()]
    assert values == sorted(values)
    _fits(page, width)
    shot(page, f"dashboard{'' if width == 1280 else '-phone'}")
    shot(page.locator("section.readiness"), f"readiness{'' if width == 1280 else '-phone'}")
    page.context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_topics_page_lists_each_topic_once_by_round(
    browser: Any, practised: dict[str, Any], width: int,
) -> None:
    page = _page(browser, practised, width)
    page.goto("/topics")
    rounds = page.locator("fieldset.round").all()
    assert [r.get_attribute("data-round") for r in rounds] == ["ddp", "large-model", "incident",
                                                               "design"]
    links = page.locator("ul.topic-picks a").all()
    hrefs = [a.get_attribute("href") for a in links]
    assert len(hrefs) == len(set(hrefs)) > 30
    assert (top_of(page, "form.quiz-form button.primary") or 1e9) <= page.viewport_size["height"] * 2
    _fits(page, width)
    page.context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_keyboard_answers_a_quiz_and_focus_follows_the_feedback(
    browser: Any, practised: dict[str, Any], width: int,
) -> None:
    page = _page(browser, practised, width)
    page.goto("/topics")
    for topic in ("ddp-contract", "gradient-averaging", "comm-hooks", "uneven-inputs-join"):
        page.locator(f"input[name=topics][value={topic}]").check()
    page.locator("input[name=types][value=single]").check()
    page.locator("select[name=count]").select_option("3")
    page.locator("form.quiz-form button.primary").click()
    page.wait_for_url("**/quizzes/*/1")
    total = int(page.locator(".quiz-progress span").first.inner_text().rsplit(" ", 1)[1])
    assert total == 3
    for position in range(1, total + 1):
        page.locator("#answer-form").wait_for()
        page.locator("body").focus()
        page.keyboard.press("2")
        assert page.locator("input[name=answer]").nth(1).is_checked()
        page.keyboard.press("Enter")
        page.locator("section.graded #verdict").wait_for()
        # After Submit, the keyboard starts from the feedback, not the top of the page.
        page.wait_for_function("() => document.activeElement && document.activeElement.id === 'verdict'")
        page.keyboard.press("n")
        page.wait_for_url(f"**/{position + 1 if position < total else 'summary'}")
    # The quiz end leads on: retry the misses, review, or keep the history.
    assert page.locator("a.review-due").count() == 1
    assert page.locator(".keep-history a[href='/signup']").count() == 1
    _fits(page, width)
    # "?" lists the shortcuts; Escape closes the list.
    page.locator("body").focus()
    page.keyboard.press("?")
    panel = page.locator("#shortcuts")
    assert panel.is_visible() and "Enter" in panel.inner_text() and "next question" in panel.inner_text()
    page.keyboard.press("Escape")
    assert not panel.is_visible()
    page.context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_review_says_when_the_card_comes_back(
    browser: Any, practised: dict[str, Any], width: int,
) -> None:
    page = _page(browser, practised, width)
    page.goto("/review")
    if page.locator("#answer-input").count():
        page.locator("#answer-input").fill("1")
    else:
        page.locator("input[name=answer]").first.check()
    _fits(page, width)
    page.locator("#answer-form button[type=submit]").click()
    page.locator("section.graded").wait_for()
    status = page.locator("#review-status")
    page.wait_for_function("() => document.querySelector('#review-status')"
                           ".textContent.includes('comes back')")
    assert "more due now" in status.inner_text() or "Nothing else" in status.inner_text()
    shot(page, f"review{'' if width == 1280 else '-phone'}")
    page.context.close()


def _author(browser: Any, practised: dict[str, Any], width: int) -> Any:
    page = _page(browser, practised, width, learner=False)
    page.goto("/login?next=/author")
    page.locator("#username").fill("alice")
    page.locator("#password").fill(PASSWORD)
    page.locator("form button[type=submit]").click()
    page.wait_for_url("**/author")
    return page


@pytest.mark.parametrize("width", [1280, 390])
def test_the_authors_pages_page_search_and_fit(
    browser: Any, practised: dict[str, Any], width: int,
) -> None:
    page = _author(browser, practised, width)
    rows = page.locator("tr[data-slug]")
    assert rows.count() == 50 and page.locator(".pager a[rel=next]").count() == 1
    _fits(page, width)
    page.locator("#f-q").fill("averaged-gradient-two")
    page.wait_for_function("() => document.querySelectorAll('tr[data-slug]').length < 10")
    assert "averaged-gradient-two-ranks" in page.locator("#question-rows").inner_text()
    page.goto("/author/questions/averaged-gradient-two-ranks")
    assert page.locator(".answer-choices").is_visible()
    assert not page.locator(".exercise-fields").is_visible()
    assert not page.locator(".answer-number").is_visible()
    # Switching the type shows that type's fields instead.
    page.locator("#f-type").select_option("exercise")
    assert page.locator(".exercise-fields").is_visible() and not page.locator(".answer-choices").is_visible()
    _fits(page, width)
    page.goto("/author/reports")
    assert "revision #1" in page.locator("li.report").first.inner_text()
    _fits(page, width)
    shot(page, f"report-inbox{'' if width == 1280 else '-phone'}")
    page.context.close()
