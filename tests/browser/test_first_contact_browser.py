"""First contact and the phone, in real Chromium at 1280×800 and 390×844, on the real bank with
real gloo runs:

- five newcomers in a row start the DDP round on a runnable question of difficulty 1 or 2, the
  question and its Submit on the first screen; after answering, Verify is in the viewport;
- no page of the walk scrolls sideways, and no table hides a column without saying so; text is
  12 px or more, and on a phone every control is 40 px or more;
- the exercise editor wraps its lines (none runs past its box), and on a phone starts within
  the first two screens;
- every forward and backward block of the pipeline question (pp-1f1b-order-trace) is drawn
  with its whole label inside it;
- every link in a new author's inbox opens.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from app.accounts import service as accounts
from app.db import make_engine, make_sessionmaker, session_scope
from app.questions.models import Question
from app.questions.service import published_question
from app.quizzes import service as quizzes
from app.reports import service as reports
from app.settings import Settings
from tests.browser.layout import (
    assert_columns_shown,
    assert_no_overflow,
    assert_tap_targets,
    assert_text_size,
    in_viewport,
)
from tests.browser.test_verify_browser import RUN_TIMEOUT_MS, shot
from tests.factories import REAL_BANK
from tests.servers import serve, settings_for

pytestmark = pytest.mark.browser

SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
PASSWORD = "a long enough password"
LEARNER = "first-contact-learner"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real bank with one worker, a new author ("ava"), and a learner's report on a bank
    question that ava did not write."""
    settings: Settings = settings_for(tmp_path_factory.mktemp("first-contact"), REAL_BANK, workers=1)
    engine = make_engine(settings.resolved_database_url)
    with session_scope(make_sessionmaker(engine)) as s:
        accounts.create_user(db_session=s, username="ava", password=PASSWORD, role="author")
        published = published_question(db_session=s, slug="averaged-gradient-two-ranks")
        assert published is not None
        now = datetime.now(UTC)
        quizzes.answer_question(db_session=s, learner_id=LEARNER, question=published, raw_answer="a",
                                variant=0, token=None, now=now)
        question = s.scalars(select(Question).where(Question.slug == "averaged-gradient-two-ranks")).one()
        reports.file_report(db_session=s, learner_id=LEARNER, question=question, revision_id=None,
                            kind=next(iter(reports.REPORT_KINDS)), comment="Choice b reads oddly.",
                            now=now, per_hour=100)
    engine.dispose()
    with serve(settings) as url:
        yield url


@pytest.fixture(params=list(SIZES), ids=list(SIZES))
def sized(request: pytest.FixtureRequest, browser: Any, server: str) -> Iterator[Any]:
    """A fresh visitor (no cookie yet) at one of the two sizes; more of them with .fresh()."""
    width, height = SIZES[request.param]
    made: list[Any] = []

    def fresh() -> Any:
        context = browser.new_context(base_url=server, viewport={"width": width, "height": height})
        context.set_default_timeout(RUN_TIMEOUT_MS)
        made.append(context)
        page = context.new_page()
        page.width_name = request.param
        return page
    page = fresh()
    page.fresh = fresh
    yield page
    for context in made:
        context.close()


def fits(page: Any) -> None:
    """The layout promises, on whatever the page shows now."""
    assert_no_overflow(page)
    assert_columns_shown(page)
    assert_text_size(page)
    if page.viewport_size["width"] <= 390:
        assert_tap_targets(page)


def test_five_newcomers_start_on_a_runnable_warm_up_and_see_verify_after_answering(sized: Any) -> None:
    for k in range(5):
        page = sized if k == 0 else sized.fresh()
        page.goto("/")
        page.get_by_role("button", name="Start the DDP round").click()
        page.locator("article.question #answer-form").wait_for()
        difficulty = page.locator(".q-head .badge[class*='d']").first.inner_text()
        assert difficulty.startswith(("difficulty 1", "difficulty 2")), difficulty
        # Runnable: the Verify panel is there, waiting for the answer.
        assert page.locator("#verify-panel .answer-first").count() == 1
        # The first screen shows the question and its Submit.
        assert in_viewport(page, "#q-title")
        assert in_viewport(page, "#answer-form button[type=submit]"), page.width_name
        fits(page)
        if page.locator("#answer-input").count():
            page.locator("#answer-input").fill("2")
        else:
            page.locator("#answer-form input[name=answer]").first.check()
        page.locator("#answer-form button[type=submit]").click()
        page.locator("section.graded #verdict").wait_for()
        page.wait_for_function("() => { const b = document.querySelector('.verify-button');"
                               " if (!b) return false; const r = b.getBoundingClientRect();"
                               " return r.top >= 0 && r.bottom <= window.innerHeight; }")
        assert in_viewport(page, "section.graded #verdict")
        fits(page)
        if k == 0:
            shot(page, f"newcomer-answered-{page.width_name}")
    # Verify runs from there, and its result comes into view.
    page.locator(".verify-button").click()
    page.locator("#verify-result .run.done").wait_for()
    page.wait_for_timeout(600)  # the smooth scroll
    assert in_viewport(page, "#verify-result .run.done .status")


def test_the_walk_never_scrolls_sideways_or_hides_a_column(sized: Any) -> None:
    page = sized
    page.goto("/")
    fits(page)
    for path in ("/topics", "/dashboard", "/review/schedule", "/mock", "/topics/gradient-averaging",
                 "/questions/uneven-trace-without-join", "/exercises/reduce-vs-all-reduce"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        fits(page)
    # A question answered and run, every fold open: the result's tables and pictures.
    page.goto("/questions/ring-attention-kv-sends")
    page.locator("#answer-input").fill("3")
    page.locator("#answer-form button[type=submit]").click()
    page.locator("section.graded").wait_for()
    page.locator(".verify-button").click()
    page.locator("#verify-result .run.done").wait_for()
    page.locator("select[name='knob.world_size']").select_option("2")
    page.locator(".verify-button").click()
    page.locator(".run-compare .run-now .run.done").wait_for()
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    page.wait_for_timeout(300)
    fits(page)
    compare = page.locator(".run-now .compare").inner_text()
    assert "The run before" in compare and "This run" in compare
    assert "ranks in the context-parallel ring" in compare  # the knob by its own label
    shot(page, f"verify-knobs-{page.width_name}")


def test_the_exercise_editor_wraps_its_lines(sized: Any) -> None:
    page = sized
    page.goto("/exercises/reduce-vs-all-reduce")
    editor = page.locator(".CodeMirror")
    editor.wait_for()
    assert "CodeMirror-wrap" in (editor.get_attribute("class") or "")
    # A long line wraps inside the box: nothing of the code runs past the editor's right edge.
    page.locator(".CodeMirror textarea").focus()
    page.keyboard.press("Control+End")
    page.keyboard.insert_text("\nreport('a_long_name_for_a_value', [rank, world_size, rank * world_size, "
                              "rank + world_size, 'and some more words to make it long'])")
    right = editor.bounding_box()
    widest = page.evaluate("""() => Math.max(...Array.from(document.querySelectorAll('.CodeMirror-line'))
      .map(l => l.getBoundingClientRect().right))""")
    assert widest <= right["x"] + right["width"] + 1
    height = page.viewport_size["height"]
    assert editor.bounding_box()["y"] + page.evaluate("window.scrollY") < 2 * height
    fits(page)


def test_every_block_of_the_pipeline_question_is_drawn_with_its_label(sized: Any) -> None:
    page = sized
    page.goto("/questions/pp-1f1b-order-trace")
    page.get_by_label("two warm-up forwards", exact=False).check()
    page.locator("#answer-form button[type=submit]").click()
    page.locator("section.graded").wait_for()
    page.locator(".verify-button").click()
    run = page.locator("#verify-result .run.done")
    run.wait_for()
    picture = run.locator("figure.pipeline-figure svg.pipeline")
    assert picture.is_visible()
    blocks = picture.locator("g.block")
    assert blocks.count() >= 16
    drawn = page.evaluate("""(svg) => Array.from(svg.querySelectorAll('g.block')).map(g => {
        const r = g.querySelector('rect').getBoundingClientRect(), t = g.querySelector('text');
        if (!t) return [null, false];
        const b = t.getBoundingClientRect();
        return [t.textContent, b.left >= r.left - 0.5 && b.right <= r.right + 0.5 && b.width > 0];
      })""", picture.element_handle())
    assert all(inside for _label, inside in drawn), drawn
    labels = [label for label, _inside in drawn]
    for rank in (0, 1):
        lane = picture.locator(f"g.lane[data-lane='{rank}'] g.block text")
        order = lane.all_text_contents()
        # In step order, left to right: stage 0 warms up with two forwards (1F1B).
        assert order[:8] == (["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"] if rank == 0
                             else ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"])
    assert all(label and label[0] in "FB" for label in labels)
    sizes = page.evaluate("(svg) => Array.from(svg.querySelectorAll('text'))"
                          ".map(t => parseFloat(getComputedStyle(t).fontSize) * svg.getScreenCTM().a)",
                          picture.element_handle())
    assert min(sizes) >= 12
    fits(page)
    shot(page, f"verify-pipeline-{page.width_name}")


def test_every_link_in_a_new_authors_inbox_opens(sized: Any) -> None:
    page = sized
    page.goto("/login?next=/author/reports")
    page.locator("#username").fill("ava")
    page.locator("#password").fill(PASSWORD)
    page.locator("form button[type=submit]").click()
    page.wait_for_url("**/author/reports")
    page.wait_for_load_state("networkidle")
    assert page.locator("section.report-group").count() >= 1
    hrefs = {a.get_attribute("href") for a in page.locator("main a[href^='/']").all()}
    assert hrefs
    for href in sorted(hrefs):
        response = page.request.get(href)
        assert response.status < 400, (href, response.status)
    fits(page)
