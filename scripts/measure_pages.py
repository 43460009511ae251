"""Measure the learner's and the author's pages in real Chromium at 1280 and 390 px: page
height, the first primary action's position, sideways overflow, tap targets under 40 px and
the smallest chart text. The same learner as scripts/learner_screenshots.py (the real bank,
six weeks of generated practice, an interview date), plus a mock interview, a Verify run
and its re-run with another knob (real gloo: one in-process worker), an exercise's starter,
and an author's list, editor and inbox.

Usage: .venv/bin/python scripts/measure_pages.py [--verbose] [--shots DIR]
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

from app.accounts import service as accounts
from app.db import make_engine, make_sessionmaker, session_scope
from app.identity import LEARNER_COOKIE, signed_learner
from tests.browser.history import practise
from tests.browser.layout import page_size, small_targets, svg_text_sizes, top_of
from tests.factories import REAL_BANK
from tests.servers import serve, settings_for

PASSWORD = "a long enough password"
# --shots DIR saves a full-page picture of every measured page there.
SHOTS = Path(sys.argv[sys.argv.index("--shots") + 1]) if "--shots" in sys.argv else None
WIDTHS = (1280, 390)
HEIGHTS = {1280: 800, 390: 844}


def setup(settings: Any, learner: str, now: datetime) -> None:
    """An admin to sign in as, and the learner's six weeks of practice."""
    engine = make_engine(settings.resolved_database_url)
    with session_scope(make_sessionmaker(engine)) as s:
        accounts.create_user(db_session=s, username="alice", password=PASSWORD, role="admin")
    engine.dispose()
    practise(settings, learner, now)


PRIMARY = "button.primary, a.button.primary"


def measure(page: Any, name: str, rows: list[list[Any]], action: str = PRIMARY) -> None:
    page.wait_for_load_state("networkidle")
    size = page_size(page)
    small = small_targets(page)
    svg = svg_text_sizes(page)
    first = top_of(page, action)
    heading = page.locator("main h1")
    if heading.count():
        name += f" ({heading.first.inner_text()[:24]})"
    rows.append([name, size["vw"], size["height"], f"{first:.0f}" if first is not None else "-",
                 size["width"], len(small), f"{min(px for _, px in svg):.1f}" if svg else "-"])
    if small and "--verbose" in sys.argv:
        print(name, size["vw"], small[:12])
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name.replace(' ', '-').replace('/', '')}-{size['vw']}.png"),
                        full_page=True)


def walk(page: Any, width: int, rows: list[list[Any]], now: datetime) -> None:
    page.goto("/")
    measure(page, "home", rows)
    page.goto("/dashboard")
    measure(page, "dashboard", rows)
    if width == 1280:
        page.locator("input[name=interview_date]").fill((now + timedelta(days=21)).date().isoformat())
        page.locator("form[action='/dashboard/goal'] button[type=submit]").click()
        page.wait_for_load_state("networkidle")
    page.goto("/dashboard")
    measure(page, "dashboard+date", rows)
    page.goto("/questions/uneven-trace-without-join")
    measure(page, "trace question", rows)
    page.goto("/review")
    measure(page, "review", rows)

    # A mock interview to its report, answering at random.
    rng = random.Random(width)
    page.goto("/mock")
    page.locator("form[action='/mock'] button[type=submit]").click()
    for _k in range(12):
        if "/report" in page.url:
            break
        page.locator("article.question").wait_for()
        if page.locator("#answer-input").count():
            page.locator("#answer-input").fill(str(rng.choice([2, 4, 1.5, 3])))
        elif page.locator("input[name=answer]").count():
            choices = page.locator("input[name=answer]")
            choices.nth(rng.randrange(choices.count())).check()
        else:
            # A format this walk does not answer: end the interview here.
            page.locator(".finish-form button").click()
            break
        conf = page.locator("input[name=confidence]")
        if conf.count():
            conf.nth(rng.randrange(conf.count())).check()
        page.locator("#answer-form button[type=submit]").click()
        page.wait_for_load_state()
    measure(page, "mock report", rows)

    # A quiz of three to its end.
    page.goto("/topics/uneven-inputs-join")
    page.locator("form[action='/quizzes'] button[type=submit]").first.click()
    for _k in range(12):
        if "/summary" in page.url:
            break
        page.locator("#answer-form").wait_for()
        if page.locator("#answer-input").count():
            page.locator("#answer-input").fill("3")
        else:
            page.locator("input[name=answer]").first.check()
        page.locator("#answer-form button[type=submit]").click()
        page.locator("section.graded").wait_for()
        page.locator("section.graded a.button.primary").click()
        page.wait_for_load_state()
    measure(page, "quiz end", rows)

    # Verify, then the same question with another world size: two runs compared.
    page.goto("/questions/ring-attention-kv-sends")
    page.locator("#answer-input").fill("3")
    page.locator(".verify-button").click()
    page.locator("#verify-result .run.done").wait_for(timeout=120_000)
    measure(page, "verify", rows)
    page.locator("select[name='knob.world_size']").select_option("2")
    page.locator(".verify-button").click()
    page.locator(".run-compare .run-now .run.done, .run-pair .run-col:nth-child(2) .run.done")\
        .wait_for(timeout=120_000)
    page.wait_for_timeout(300)
    measure(page, "verify compare", rows)

    page.goto("/exercises/reduce-vs-all-reduce")
    page.locator(".run-button").click()
    page.locator("#submission[data-status=done]").wait_for(timeout=120_000)
    measure(page, "exercise fails", rows)


def author_walk(page: Any, rows: list[list[Any]]) -> None:
    page.goto("/login?next=/author")
    page.locator("#username").fill("alice")
    page.locator("#password").fill(PASSWORD)
    page.locator("form button[type=submit]").click()
    page.wait_for_url("**/author")
    measure(page, "/author", rows)
    page.goto("/author/questions/averaged-gradient-two-ranks")
    measure(page, "editor (single)", rows)
    page.goto("/author/reports")
    measure(page, "inbox", rows)


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    settings = settings_for(tmp, REAL_BANK, workers=1)
    learner = str(uuid.uuid4())
    now = datetime.now(UTC)
    setup(settings, learner, now)
    rows: list[list[Any]] = []
    with serve(settings) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        for width in WIDTHS:
            ctx = browser.new_context(base_url=url, viewport={"width": width, "height": HEIGHTS[width]})
            ctx.set_default_timeout(60_000)
            ctx.add_cookies([{"name": LEARNER_COOKIE, "url": url,
                              "value": signed_learner(settings.resolved_secret_key(), learner)}])
            walk(ctx.new_page(), width, rows, now)
            ctx.close()
            actx = browser.new_context(base_url=url, viewport={"width": width, "height": HEIGHTS[width]})
            author_walk(actx.new_page(), rows)
            actx.close()
        browser.close()
    head = ["page", "viewport", "height", "first action y", "scrollWidth", "targets<40px", "min svg px"]
    print(" | ".join(head))
    for r in sorted(rows, key=lambda r: (r[0], -r[1])):
        print(" | ".join(str(c) for c in r))


if __name__ == "__main__":
    main()
