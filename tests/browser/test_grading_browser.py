"""Marking talk-throughs in real Chromium, at 1280 and 390 px: the instructor opens the class's
queue, reads a member's answer beside the rubric, ticks the moves it made, comments and saves
to the next; the member reads the mark, move by move, on their page of the class. No page
scrolls sideways, text stays >= 12 px and taps >= 40 px.

Set DDPDRILL_SCREENSHOTS=<folder> to keep a picture of each page."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.accounts import service as accounts
from app.accounts.service import account_learner_id
from app.classes import assignments, service
from app.db import make_engine, make_sessionmaker, session_scope
from app.questions.service import published_question
from app.quizzes import service as quizzes
from tests.browser.layout import (
    assert_columns_shown,
    assert_no_overflow,
    assert_tap_targets,
    assert_text_size,
)
from tests.factories import FIXTURE_BANK, VARIANT_BANK
from tests.servers import PAGE_TIMEOUT_MS, serve, settings_for

pytestmark = pytest.mark.browser

PASSWORD = "a long enough password"
TALK = "step-time-doubled-talk"
ANSWERS = {
    "lena": ("I would first pin the job to yesterday's container image so the reservation "
             "keeps doing useful work, then compare per-rank step times across every node to "
             "see whether one straggler holds the others at each all-reduce.", [0, 1, 2, 3, 4]),
    "omar": ("Restart the job and see whether it is still slow; if so, open a ticket with "
             "the cluster team and wait for them to look at the network switches.", [0, 1]),
}
SIZES = {"wide": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.fixture
def grading_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A live server with ida's class: a quiz assignment of a talk-through, and lena and omar
    in the class, each with an answer to it. (url, class id)"""
    bank = tmp_path / "bank"
    shutil.copytree(FIXTURE_BANK, bank)
    shutil.copytree(VARIANT_BANK, bank, dirs_exist_ok=True)
    settings = settings_for(tmp_path, bank, workers=0)
    engine = make_engine(settings.resolved_database_url)
    now = datetime.now(UTC)
    with session_scope(make_sessionmaker(engine)) as s:
        ida = accounts.create_user(db_session=s, username="ida", password=PASSWORD,
                                   role="instructor")
        classroom = service.create_class(db_session=s, instructor=ida, name="Incidents, spring")
        assignments.create_assignment(db_session=s, classroom=classroom, spec=assignments.AssignmentSpec(
            kind="quiz", title="Talk it through", opens_at=now - timedelta(hours=1),
            due_at=now + timedelta(days=7), slugs=[TALK]))
        question = published_question(db_session=s, slug=TALK)
        assert question is not None
        for name, (text, ticked) in ANSWERS.items():
            user = accounts.create_user(db_session=s, username=name, password=PASSWORD,
                                        role="learner")
            learner = account_learner_id(db_session=s, user_id=user.id)
            service.join(db_session=s, classroom=classroom, user=user, now=now,
                         learner_id=learner)
            for step in ({"text": text}, {"ticked": ticked}):
                quizzes.answer_step(db_session=s, learner_id=learner, question=question,
                                    variant=0, part=None, raw=step, token=None, now=now)
        class_id = classroom.id
    engine.dispose()
    with serve(settings) as url:
        yield url, class_id


def _shot(page: Any, name: str) -> None:
    folder = os.environ.get("DDPDRILL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def _fits(page: Any) -> None:
    """The layout promises (as tests/browser/test_first_contact_browser.py keeps them)."""
    assert_no_overflow(page)
    assert_columns_shown(page)
    assert_text_size(page)
    if page.viewport_size["width"] <= 390:
        assert_tap_targets(page)


def _sign_in(browser: Any, url: str, name: str, size: str) -> tuple[Any, Any]:
    context = browser.new_context(base_url=url, viewport=SIZES[size])
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    page.goto("/login")
    page.locator("input[name=username]").fill(name)
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("form.login-form button[type=submit]").click()
    page.wait_for_load_state()
    return context, page


@pytest.mark.parametrize("size", ["wide", "phone"])
def test_the_instructor_marks_talk_throughs_and_the_member_reads_the_mark(
    browser: Any, grading_server: tuple[str, int], size: str,
) -> None:
    url, class_id = grading_server
    teacher, ida = _sign_in(browser, url, "ida", size)
    ida.goto(f"/classes/{class_id}")
    ida.get_by_role("link", name="Mark talk-throughs").click()
    ida.wait_for_url("**/grading")
    assert ida.locator(".grading-count strong").inner_text() == "2"
    assert ida.locator("table.talk-answers tbody tr.waiting").count() == 2
    _fits(ida)
    _shot(ida, f"grading-queue-{size}")

    # The first answer waiting: lena's, beside the rubric, her own ticks named.
    ida.get_by_role("link", name="Mark the next one").click()
    ida.wait_for_url("**/grading/*")
    assert "lena" in ida.locator(".grade-meta").inner_text()
    assert "straggler" in ida.locator(".talk-text").inner_text()
    assert ida.locator(".rubric-move .self-tick").count() == 5
    if size == "phone":
        # The answer directly above the rubric, both within reach.
        answer_box = ida.locator(".talk-written").bounding_box()
        rubric_box = ida.locator("fieldset.rubric").bounding_box()
        assert answer_box["y"] + answer_box["height"] <= rubric_box["y"] + 1
    else:
        # Side by side: the answer and the rubric start at the same height.
        assert abs(ida.locator(".talk-written").bounding_box()["y"]
                   - ida.locator(".grade-form").bounding_box()["y"]) < 40
    _fits(ida)
    _shot(ida, f"grading-answer-{size}")
    for move in (0, 2, 4):
        ida.locator(f"fieldset.rubric input[value='{move}']").check()
    ida.locator("#grade-comment").fill("Good scoping. Say how you would measure the straggler.")
    ida.get_by_role("button", name="Save and mark the next").click()
    # On to omar's, then back to the queue once he is marked too.
    # (A locator, not wait_for_function: the page's CSP forbids the eval its polling uses.)
    ida.locator(".grade-meta", has_text="omar").wait_for()
    ida.locator("fieldset.rubric input[value='0']").check()
    ida.get_by_role("button", name="Save and mark the next").click()
    ida.wait_for_url("**/grading")
    assert ida.locator(".grading-count strong").inner_text() == "0"
    assert [t.strip() for t in ida.locator("table.talk-answers tbody td.num:nth-child(5)")
            .all_inner_texts()] in (["3/6", "1/6"], ["1/6", "3/6"])
    _shot(ida, f"grading-done-{size}")
    # The class page counts the marks: lena 3 of 6, not her own 5.
    ida.goto(f"/classes/{class_id}")
    scores = ida.locator("table.completion td[data-assignment]").all_inner_texts()
    assert sorted(" ".join(t.split()) for t in scores) == ["done 17%", "done 50%"]
    teacher.close()

    student, lena = _sign_in(browser, url, "lena", size)
    lena.goto(f"/classes/{class_id}/me")
    card = lena.locator("ul.talk-marks li.card")
    assert card.locator(".talk-mark").inner_text() == "3 of 6"
    assert card.locator(".mark-comment").inner_text().startswith("Good scoping.")
    assert card.locator(".rubric-graded li.made").count() == 3
    _fits(lena)
    _shot(lena, f"grading-member-{size}")
    student.close()
