"""Measure the pages of every kind of visitor in real Chromium at 1280×800 and 390×844: the
page's height, where its first action starts (and whether it is on the first screen), sideways
overflow, tap targets under 40 px, text under 12 px, tables that hide columns in a sideways
scroll without saying so, and the smallest chart text.

The visitors: a newcomer (the home page, the DDP round's first question, and that question
answered: is Verify on screen?); a learner with six weeks of practice and an interview date
(as in scripts/learner_screenshots.py: today, the dashboard, the schedule, a question, review,
a mock interview's report, a quiz's end, Verify and a re-run with another knob, the pipeline
question run, an exercise's editor and a failing run, a talk-through scored); a new author
(their inbox, every link in it); an admin (the question list, the editor, a history, the item
statistics); an instructor (a class of six with its heatmap, the assignment form). Real
gloo runs: one in-process worker.

Usage: .venv/bin/python scripts/measure_pages.py [--verbose] [--shots DIR]
"""
from __future__ import annotations

import random
import sys
import tempfile
import traceback
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from playwright.sync_api import sync_playwright
from sqlalchemy import select

from app.accounts import service as accounts
from app.db import make_engine, make_sessionmaker, session_scope
from app.identity import LEARNER_COOKIE, signed_learner
from tests.browser.history import practise
from tests.browser.layout import hidden_columns, page_size, small_targets, small_text, svg_text_sizes
from tests.factories import REAL_BANK
from tests.servers import serve, settings_for

PASSWORD = "a long enough password"
# --shots DIR saves a full-page picture of every measured page there.
SHOTS = Path(sys.argv[sys.argv.index("--shots") + 1]) if "--shots" in sys.argv else None
VERBOSE = "--verbose" in sys.argv
WIDTHS = (1280, 390)
HEIGHTS = {1280: 800, 390: 844}
# A real run of a question's snippet, the first one starting the warm rank pool.
RUN_MS = 120_000

PRIMARY = "button.primary, a.button.primary"
SUBMIT = "#answer-form button[type=submit]"
VERIFY = ".verify-button"
EDITOR = ".CodeMirror, #code"

ACTION_AT = """(sel) => { const el = Array.from(document.querySelectorAll(sel))
  .find(e => e.getClientRects().length); if (!el) return null;
  const r = el.getBoundingClientRect();
  return [r.top + window.scrollY, r.top >= 0 && r.bottom <= window.innerHeight]; }"""


def setup(settings: Any, learner: str, now: datetime) -> None:
    """An admin, a new author and an instructor with a class of six; the learner's six weeks
    of practice; the members' own (lighter) practice; a report on a bank question."""
    from app.accounts.models import ROLE_LEARNER
    from app.accounts.service import account_learner_id
    from app.classes import assignments
    from app.classes import service as classes
    from app.questions.models import Question
    from app.reports import service as reports

    practise(settings, learner, now)
    engine = make_engine(settings.resolved_database_url)
    members = []
    with session_scope(make_sessionmaker(engine)) as s:
        accounts.create_user(db_session=s, username="alice", password=PASSWORD, role="admin")
        accounts.create_user(db_session=s, username="ava", password=PASSWORD, role="author")
        ida = accounts.create_user(db_session=s, username="ida", password=PASSWORD, role="instructor")
        for k in range(6):
            user = accounts.create_user(db_session=s, username=f"member{k}", password=PASSWORD,
                                        role=ROLE_LEARNER)
            members.append((user.id, account_learner_id(db_session=s, user_id=user.id)))
        question = s.scalars(select(Question).where(Question.slug == "averaged-gradient-two-ranks")).one()
        from app.questions.service import published_question
        from app.quizzes import service as quizzes
        published = published_question(db_session=s, slug=question.slug)
        assert published is not None
        quizzes.answer_question(db_session=s, learner_id=learner, question=published, raw_answer="a",
                                variant=0, token=None, time_taken_ms=9000, confidence=None, now=now)
        reports.file_report(db_session=s, learner_id=learner, question=question, revision_id=None,
                            kind=next(iter(reports.REPORT_KINDS)), comment="The second choice reads oddly.",
                            now=now, per_hour=100)
    for k, (_user_id, member_learner) in enumerate(members):
        practise(settings, member_learner, now, share=0.15, seed=10 + k)
    with session_scope(make_sessionmaker(engine)) as s:
        from app.accounts.models import User
        ida = s.scalars(select(User).where(User.username == "ida")).one()
        room = classes.create_class(db_session=s, instructor=ida, name="Distributed training, spring")
        for user_id, member_learner in members:
            user = s.get(User, user_id)
            assert user is not None
            classes.join(db_session=s, classroom=room, user=user, learner_id=member_learner,
                         now=now - timedelta(days=20))
        for title, topics in (("DDP basics", ["gradient-averaging", "ddp-contract"]),
                              ("Buckets", ["buckets-overlap"]), ("Pipelines", ["pipeline-parallelism"])):
            assignments.create_assignment(db_session=s, classroom=room, spec=assignments.AssignmentSpec(
                kind="quiz", title=title, opens_at=now - timedelta(days=14), due_at=now - timedelta(days=2),
                topics=topics, count=5))
    engine.dispose()


class Walk:
    """One visitor's pages at one width, measured into `rows`."""

    def __init__(self, page: Any, width: int, rows: list[list[Any]]) -> None:
        self.page, self.width, self.rows = page, width, rows

    def measure(self, name: str, action: str = PRIMARY) -> None:
        page = self.page
        page.wait_for_load_state("networkidle")
        size = page_size(page)
        at = page.evaluate(ACTION_AT, action)
        small = small_targets(page)
        text = small_text(page)
        hidden = hidden_columns(page)
        svg = svg_text_sizes(page)
        self.rows.append([name, size["vw"], size["height"], f"{at[0]:.0f}" if at else "-",
                          ("yes" if at[1] else "no") if at else "-", size["width"], len(small), len(text),
                          len(hidden), f"{min(px for _, px in svg):.1f}" if svg else "-"])
        if VERBOSE and (small or text or hidden):
            print(name, size["vw"], "targets:", small[:8], "text:", text[:6], "tables:", hidden[:4])
        if SHOTS is not None:
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"{name.replace(' ', '-').replace('/', '')}-{size['vw']}.png"),
                            full_page=True)

    def step(self, name: str, fn: Any) -> None:
        """Run one part of the walk; a part that breaks is reported, and the walk goes on."""
        try:
            fn()
        except Exception as exc:  # a measuring script reports and carries on
            self.rows.append([f"{name} FAILED: {type(exc).__name__}", self.width] + ["-"] * 8)
            if VERBOSE:
                traceback.print_exc()


def answer_any(page: Any, rng: random.Random) -> bool:
    """Fill the answer form: a number, a choice, a talk-through's text or ticks; False if none."""
    if page.locator("#talk-text").count():
        page.locator("#talk-text").fill("First protect the run and pin the last good image, then scope the "
                                        "slowdown rank by rank, then measure the exposed communication.")
    elif page.locator("input[name=ticked]").count():
        page.locator("input[name=ticked]").nth(0).check()
    elif page.locator("#answer-input").count():
        page.locator("#answer-input").fill(str(rng.choice([2, 4, 1.5, 3])))
    elif page.locator("#answer-form input[name=answer]").count():
        choices = page.locator("#answer-form input[name=answer]")
        choices.nth(rng.randrange(choices.count())).check()
    else:
        return False
    return True


def newcomer_walk(w: Walk) -> None:
    page, rng = w.page, random.Random(w.width)

    def home() -> None:
        page.goto("/")
        w.measure("newcomer home")

    def first_question() -> None:
        page.goto("/")
        page.get_by_role("button", name="Start the DDP round").click()
        page.locator("article.question").wait_for()
        w.measure("newcomer q1", SUBMIT)
        answer_any(page, rng)
        page.locator(SUBMIT).click()
        page.locator("section.graded").wait_for()
        page.wait_for_timeout(400)
        w.measure("newcomer q1 answered", VERIFY)
    w.step("newcomer home", home)
    w.step("newcomer q1", first_question)


def learner_walk(w: Walk, now: datetime) -> None:
    page, rng = w.page, random.Random(w.width)

    def home() -> None:
        page.goto("/")
        w.measure("home")
        page.goto("/dashboard")
        w.measure("dashboard")
        if w.width == 1280:
            page.locator("input[name=interview_date]").fill((now + timedelta(days=21)).date().isoformat())
            page.locator("form[action='/dashboard/goal'] button[type=submit]").click()
            page.wait_for_load_state("networkidle")
        page.goto("/dashboard")
        w.measure("dashboard+date")
        page.goto("/review/schedule")
        w.measure("schedule")

    def question() -> None:
        page.goto("/questions/uneven-trace-without-join")
        w.measure("trace question", SUBMIT)
        page.goto("/review")
        w.measure("review", SUBMIT)

    def mock() -> None:
        page.goto("/mock")
        page.locator("form[action='/mock'] button[type=submit]").click()
        for _k in range(80):
            if "/report" in page.url:
                break
            page.locator("article.question").wait_for()
            if not answer_any(page, rng):
                page.locator(".finish-form button").click()
                break
            page.locator(SUBMIT).click()
            page.wait_for_load_state()
        page.wait_for_url("**/report")
        w.measure("mock report")

    def quiz() -> None:
        page.goto("/topics/uneven-inputs-join")
        page.locator("form[action='/quizzes'] button[type=submit]").first.click()
        for _k in range(80):
            if "/summary" in page.url:
                break
            page.locator("#answer-form").wait_for()
            answer_any(page, rng)
            page.locator(SUBMIT).click()
            # A case's part or a talk-through's first step swaps in the next form; the last
            # step the verdict, with the link on.
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(200)
            if page.locator("section.graded a.button.primary").count():
                page.locator("section.graded a.button.primary").click()
                page.wait_for_load_state()
        w.measure("quiz end")

    def verify() -> None:
        page.goto("/questions/ring-attention-kv-sends")
        page.locator("#answer-input").fill("3")
        page.locator(SUBMIT).click()
        page.locator("section.graded").wait_for()
        page.wait_for_timeout(400)
        w.measure("question answered", VERIFY)
        page.locator(VERIFY).first.click()
        page.locator("#verify-result .run.done").wait_for(timeout=RUN_MS)
        w.measure("verify", VERIFY)
        page.locator("select[name='knob.world_size']").select_option("2")
        page.locator(VERIFY).first.click()
        page.locator(".run-compare .run-now .run.done").wait_for(timeout=RUN_MS)
        page.wait_for_timeout(300)
        w.measure("verify compare", VERIFY)

    def pipeline() -> None:
        page.goto("/questions/pp-1f1b-order-trace")
        page.locator("#answer-form input[name=answer]").nth(2).check()
        page.locator(SUBMIT).click()
        page.locator("section.graded").wait_for()
        page.locator(VERIFY).first.click()
        page.locator("#verify-result .run.done").wait_for(timeout=RUN_MS)
        page.evaluate("document.querySelectorAll('#verify-result details.fold').forEach(d => d.open = true)")
        w.measure("pipeline run", VERIFY)

    def exercise() -> None:
        page.goto("/exercises/reduce-vs-all-reduce")
        page.locator(".CodeMirror").wait_for()
        w.measure("exercise", EDITOR)
        page.locator(".run-button").click()
        page.locator("#submission[data-status=done]").wait_for(timeout=RUN_MS)
        w.measure("exercise fails", EDITOR)

    def talk() -> None:
        page.goto("/questions/comm-talk-fsdp-slower-than-ddp")
        w.measure("talk-through", SUBMIT)
        answer_any(page, rng)
        page.locator(SUBMIT).click()
        page.locator("input[name=ticked]").first.wait_for()
        w.measure("talk-through rubric", SUBMIT)
    for name, fn in (("home", home), ("question", question), ("mock", mock), ("quiz", quiz),
                     ("verify", verify), ("pipeline", pipeline), ("exercise", exercise), ("talk", talk)):
        w.step(name, fn)


def sign_in(page: Any, username: str, target: str) -> None:
    page.goto(f"/login?next={target}")
    page.locator("#username").fill(username)
    page.locator("#password").fill(PASSWORD)
    page.locator("form button[type=submit]").click()
    page.wait_for_url(f"**{target}")


def author_walk(w: Walk) -> None:
    page = w.page

    def admin() -> None:
        sign_in(page, "alice", "/author")
        w.measure("/author")
        page.goto("/author/questions/averaged-gradient-two-ranks")
        w.measure("editor (single)")
        page.goto("/author/questions/averaged-gradient-two-ranks/history")
        w.measure("history")
        page.goto("/author/stats")
        w.measure("item statistics")
    w.step("admin", admin)


def new_author_walk(w: Walk, rows: list[list[Any]]) -> None:
    page = w.page

    def inbox() -> None:
        sign_in(page, "ava", "/author")
        page.goto("/author/reports")
        w.measure("inbox (new author)")
        hrefs = sorted({a.get_attribute("href") for a in page.locator("main a[href^='/']").all()})
        dead = []
        for href in hrefs:
            response = page.request.get(href)
            if response.status >= 400:
                dead.append(f"{href} {response.status}")
        rows.append([f"inbox links: {len(hrefs)} open, {len(dead)} dead {dead[:3]}", w.width] + ["-"] * 8)
    w.step("inbox", inbox)


def instructor_walk(w: Walk) -> None:
    page = w.page

    def classes() -> None:
        sign_in(page, "ida", "/classes")
        page.locator("table.class-list a, .class-list a").first.click()
        page.wait_for_url("**/classes/*")
        w.measure("class page")
        page.goto(page.url.rstrip("/") + "/assignments/new")
        w.measure("assignment form")
    w.step("classes", classes)


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
            def context(cookie: bool = False, width: int = width) -> Any:
                ctx = browser.new_context(base_url=url, viewport={"width": width, "height": HEIGHTS[width]})
                ctx.set_default_timeout(60_000)
                if cookie:
                    ctx.add_cookies([{"name": LEARNER_COOKIE, "url": url,
                                      "value": signed_learner(settings.resolved_secret_key(), learner)}])
                return ctx
            for walk, cookie in ((newcomer_walk, False), (lambda w: learner_walk(w, now), True),
                                 (author_walk, False), (lambda w: new_author_walk(w, rows), False),
                                 (instructor_walk, False)):
                ctx = context(cookie)
                walk(Walk(ctx.new_page(), width, rows))
                ctx.close()
        browser.close()
    head = ["page", "viewport", "height", "first action y", "on first screen", "scrollWidth",
            "targets<40px", "text<12px", "tables hiding columns", "min svg px"]
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for r in sorted(rows, key=lambda r: (r[0], -r[1])):
        print(" | ".join(str(c) for c in r))


if __name__ == "__main__":
    main()
