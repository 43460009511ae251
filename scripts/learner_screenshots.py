"""Screenshots of the mock report, the dashboard and the readiness forecast (docs/screenshots/),
on the real bank with six weeks of generated practice.

Usage: .venv/bin/python scripts/learner_screenshots.py
"""
import random
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from playwright.sync_api import sync_playwright
from sqlalchemy import select

from app.db import make_engine, make_sessionmaker, session_scope
from app.identity import LEARNER_COOKIE, signed_learner
from app.questions.models import Question
from app.questions.service import published_question
from app.quizzes import service
from app.quizzes.grading import correct_answer
from tests.browser.conftest import REAL_BANK, serve, settings_for

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
tmp = Path(tempfile.mkdtemp())
settings = settings_for(tmp, REAL_BANK, workers=0)
learner = str(uuid.uuid4())
rng = random.Random(3)
now = datetime.now(UTC)
engine = make_engine(settings.resolved_database_url)
with session_scope(make_sessionmaker(engine)) as s:
    qs = list(s.scalars(select(Question).where(Question.status == "published")))
    rng.shuffle(qs)
    # Six weeks of practice: about 60% of the bank seen, some topics better than others.
    for q in qs[: int(len(qs) * 0.6)]:
        published = published_question(db_session=s, slug=q.slug)
        assert published is not None
        doc = published.variant(0)
        if doc.is_exercise or doc.is_case or doc.is_talk:
            continue  # answered in steps (or by code), not with one key
        key = correct_answer(doc)
        for _ in range(rng.randint(1, 3)):
            at = now - timedelta(days=rng.uniform(0, 42))
            right = rng.random() < (0.85 if q.topic < "j" else 0.5)
            if right:
                raw = key
            elif doc.effective_format == "numeric":
                raw = str(float(key) + 7)
            elif doc.effective_format == "multi":
                raw = [c.key for c in doc.choices if not c.correct][:1]
            else:
                raw = next(c.key for c in doc.choices if not c.correct)
            service.answer_question(db_session=s, learner_id=learner, question=published,
                                    raw_answer=raw, variant=0,
                                    token=None, time_taken_ms=rng.randint(8000, 90000),
                                    confidence=rng.choice(["sure", "unsure", "guessing", None]), now=at)
engine.dispose()

with serve(settings) as url, sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium")
    for width, suffix in ((1280, ""), (390, "-phone")):
        ctx = browser.new_context(base_url=url, viewport={"width": width, "height": 900})
        cookie = signed_learner(settings.resolved_secret_key(), learner)
        ctx.add_cookies([{"name": LEARNER_COOKIE, "value": cookie, "url": url}])
        page = ctx.new_page()
        page.goto("/mock")
        page.get_by_role("button", name="Start a mock interview").click()
        if suffix == "":
            page.locator("article.question[data-slug]").wait_for()
            page.screenshot(path=str(OUT / "mock-question.png"), full_page=False)
        # Ten questions; a case takes a step per part and a talk-through two.
        for _k in range(80):
            if "/report" in page.url:
                break
            page.locator("article.question[data-slug]").wait_for()
            choices = page.locator("input[name=answer]")
            if page.locator("#talk-text").count():
                page.locator("#talk-text").fill("Protect the run, scope it, then measure.")
            elif page.locator("input[name=ticked]").count():
                page.locator("input[name=ticked]").nth(0).check()
            elif page.locator("#answer-input").count():
                page.locator("#answer-input").fill(str(rng.choice([2, 4, 1.5, 3])))
            else:
                choices.nth(rng.randrange(choices.count())).check()
            if page.locator("input[name=confidence]").count():
                page.locator("input[name=confidence]").nth(rng.randrange(3)).check()
            page.locator("#answer-form button[type=submit]").click()
            page.wait_for_load_state()
        page.wait_for_url("**/report")
        page.screenshot(path=str(OUT / f"mock-report{suffix}.png"), full_page=True)
        page.goto("/dashboard")
        page.locator("input[name=interview_date]").fill((now + timedelta(days=21)).date().isoformat())
        page.get_by_role("button", name="Save").click()
        page.wait_for_url("**/dashboard#readiness")
        page.locator("#plan table.plan").wait_for()
        page.screenshot(path=str(OUT / f"dashboard{suffix}.png"), full_page=True)
        page.locator("section.readiness").screenshot(path=str(OUT / f"readiness{suffix}.png"))
        ctx.close()
    browser.close()
print("ok")
