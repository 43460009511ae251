"""Screenshots of the learner's pages for the README (docs/screenshots/), on the real bank with
six weeks of generated practice and an interview date: the home page (today, and a newcomer's
with a real cached Verify run), the topics, a mock interview question and its report, the
dashboard and its readiness section, the Review page after an answer, and a quiz's end; at
1280 and 390 px. One in-process worker runs the newcomer's example for real (gloo).

Usage: .venv/bin/python scripts/learner_screenshots.py
"""
from __future__ import annotations

import random
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from playwright.sync_api import sync_playwright

from app.identity import LEARNER_COOKIE, signed_learner
from tests.browser.history import practise
from tests.factories import REAL_BANK
from tests.servers import serve, settings_for

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
HEIGHTS = {1280: 800, 390: 844}


def answer_at_random(page: Any, rng: random.Random) -> bool:
    """Fill the answer form at random (a case's current part, a talk-through's two steps);
    False when the page has no answer form to fill."""
    if page.locator("#talk-text").count():
        # A real answer: the rubric takes one of a dozen words or more.
        page.locator("#talk-text").fill("First protect the run and pin the last good image, then scope the "
                                        "slowdown rank by rank, then measure the exposed communication.")
    elif page.locator("input[name=ticked]").count():
        page.locator("input[name=ticked]").nth(0).check()
    elif page.locator("#answer-input").count():
        page.locator("#answer-input").fill(str(rng.choice([2, 4, 1.5, 3])))
    elif page.locator("input[name=answer]").count():
        choices = page.locator("input[name=answer]")
        choices.nth(rng.randrange(choices.count())).check()
    else:
        return False
    confidence = page.locator("input[name=confidence]")
    if confidence.count():
        confidence.nth(rng.randrange(confidence.count())).check()
    return True


def learner_pages(page: Any, suffix: str, now: datetime, rng: random.Random) -> None:
    page.goto("/")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(OUT / f"home{suffix}.png"), full_page=True)
    if not suffix:
        page.goto("/topics")
        page.screenshot(path=str(OUT / "topics.png"), full_page=False)
    page.goto("/mock")
    page.locator("form[action='/mock'] button[type=submit]").click()
    if not suffix:
        page.locator("article.question[data-slug]").wait_for()
        page.screenshot(path=str(OUT / "mock-question.png"), full_page=False)
    # Ten questions; a case takes a step per part and a talk-through two.
    for _k in range(80):
        if "/report" in page.url:
            break
        page.locator("article.question[data-slug]").wait_for()
        if not answer_at_random(page, rng):
            page.locator(".finish-form button").click()
            break
        page.locator("#answer-form button[type=submit]").click()
        page.wait_for_load_state()
    page.wait_for_url("**/report")
    page.screenshot(path=str(OUT / f"mock-report{suffix}.png"), full_page=True)
    page.goto("/dashboard")
    page.locator("#topic-table:not([hx-get]) table.plan").wait_for(state="attached")
    page.screenshot(path=str(OUT / f"dashboard{suffix}.png"), full_page=True)
    page.locator("section.readiness").screenshot(path=str(OUT / f"readiness{suffix}.png"))
    page.goto("/review")
    answer_at_random(page, rng)
    page.locator("#answer-form button[type=submit]").click()
    page.locator("section.graded").wait_for()
    page.wait_for_function("() => document.querySelector('#review-status')"
                           ".textContent.includes('comes back')")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(OUT / f"review{suffix}.png"), full_page=True)
    page.goto("/topics/uneven-inputs-join")
    page.locator("form[action='/quizzes'] button[type=submit]").first.click()
    # Ten questions; a case takes a step per part and a talk-through two.
    for _k in range(80):
        if "/summary" in page.url:
            break
        page.locator("#answer-form").wait_for()
        answer_at_random(page, rng)
        page.locator("#answer-form button[type=submit]").click()
        page.locator("section.graded a.button.primary").click()
        page.wait_for_load_state()
    page.screenshot(path=str(OUT / f"quiz-end{suffix}.png"), full_page=True)


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    settings = settings_for(tmp, REAL_BANK, workers=1)
    learner = str(uuid.uuid4())
    now = datetime.now(UTC)
    practise(settings, learner, now)
    rng = random.Random(3)
    with serve(settings) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        # A newcomer: what DDP Drill is, with a real run of the example question (cached once
        # someone has run it: here a visitor does, first).
        ctx = browser.new_context(base_url=url, viewport={"width": 1280, "height": 800})
        ctx.set_default_timeout(120_000)
        page = ctx.new_page()
        page.goto("/questions/averaged-gradient-two-ranks")
        page.get_by_label("model.weight.grad after backward()", exact=False).check()
        page.get_by_role("button", name="Run it").click()
        page.locator(".run.done").wait_for()
        ctx.close()
        for width in (1280, 390):
            ctx = browser.new_context(base_url=url, viewport={"width": width, "height": HEIGHTS[width]})
            page = ctx.new_page()
            page.goto("/")
            page.screenshot(path=str(OUT / f"home-newcomer{'' if width == 1280 else '-phone'}.png"),
                            full_page=True)
            ctx.close()
        for width, suffix in ((1280, ""), (390, "-phone")):
            ctx = browser.new_context(base_url=url, viewport={"width": width, "height": HEIGHTS[width]})
            ctx.set_default_timeout(30_000)
            ctx.add_cookies([{"name": LEARNER_COOKIE, "url": url,
                              "value": signed_learner(settings.resolved_secret_key(), learner)}])
            page = ctx.new_page()
            if not suffix:
                page.goto("/dashboard")
                page.locator("input[name=interview_date]").fill((now + timedelta(days=21)).date().isoformat())
                page.locator("form.goal-form button[type=submit]").click()
                page.wait_for_url("**/dashboard#readiness")
            learner_pages(page, suffix, now, rng)
            ctx.close()
        browser.close()
    print("ok")


if __name__ == "__main__":
    main()
